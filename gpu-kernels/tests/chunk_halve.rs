//! How pw_run_tx_chunked (cuda/kernels_tx_ring.cu) shrinks a chunk of frames that does not fit
//! the stage, `pw_chunk_halved` (cuda/chunk_halve.cuh) compiled for the host, run through the
//! kernel's chunk loop (replayed here): every chunk starts at an even frame, so the 16-byte
//! loads that stage a chunk of 8-byte descriptors start on a 16-byte granule; the chunks cover
//! the part's frames once, in order. Halving to an odd count, as before, did not.

#![cfg(feature = "host")]

use pktwarp_kernels::host::ffi::{pw_host_chunk_halved, pw_host_chunk_least};

/// sizeof(pw_slot_hdr): the descriptor array starts there; sizeof(pw_desc8).
const SLOT_HDR: u32 = 48;
const DESC8: u32 = 8;
/// PW_CHUNK_FRAMES.
const CHUNK: u32 = 256;

/// The chunk starts of frames [plo, phi) with frame `i` taking `size(i)` bytes of a stage of
/// `cap` bytes, the loop of pw_run_tx_chunked with `halve` and `least`.
fn chunk_starts(
    plo: u32,
    phi: u32,
    cap: u64,
    size: &dyn Fn(u32) -> u64,
    halve: &dyn Fn(u32) -> u32,
    least: u32,
) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut c0 = plo;
    while c0 < phi {
        let mut k = (phi - c0).min(CHUNK);
        loop {
            let span: u64 = (c0..c0 + k).map(size).sum();
            if span <= cap || k <= least {
                break;
            }
            k = halve(k);
        }
        out.push((c0, k));
        c0 += k;
    }
    out
}

#[test]
fn every_chunk_starts_on_a_granule() {
    // SAFETY: plain functions of integers.
    let least = unsafe { pw_host_chunk_least() };
    let halved = |k: u32| unsafe { pw_host_chunk_halved(k) };
    assert_eq!(least, 2);
    for k in 3..=CHUNK {
        let h = halved(k);
        assert!(h % 2 == 0 && h >= least && h < k, "{k} -> {h}");
    }
    // Large frames (a few KB, as fronthaul U-plane frames) of varying size, a 22 KB stage.
    let cap = 22 * 1024;
    let sizes: [&dyn Fn(u32) -> u64; 3] = [
        &|i| 3000 + u64::from(i % 7) * 900,
        &|i| if i % 5 == 0 { 15_000 } else { 1500 },
        &|i| 9000 + u64::from(i % 3) * 4000,
    ];
    let mut old_odd = 0;
    for size in sizes {
        for (plo, phi) in [(0u32, 300u32), (2, 257), (0, 7), (4, 5), (6, 511)] {
            let chunks = chunk_starts(plo, phi, cap, size, &halved, least);
            let mut next = plo;
            for &(c0, k) in &chunks {
                assert_eq!(c0, next, "chunks in order, none skipped");
                assert_eq!(c0 % 2, 0, "chunk at frame {c0} of [{plo}, {phi})");
                assert_eq!((SLOT_HDR + c0 * DESC8) % 16, 0, "descriptor load at {c0}");
                next = c0 + k;
            }
            assert_eq!(next, phi, "every frame once");
            // The old rule (half, rounded up, down to one frame) on the same frames.
            let old = chunk_starts(plo, phi, cap, size, &|k| k.div_ceil(2), 1);
            old_odd += old.iter().filter(|(c0, _)| c0 % 2 == 1).count();
        }
    }
    assert!(old_odd > 0, "the old rule started chunks at odd frames");
}
