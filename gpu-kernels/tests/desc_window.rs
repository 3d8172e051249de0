//! The window pw_run_tx_chunked (cuda/kernels_tx_ring.cu) stages a chunk of descriptors from,
//! `pw_desc_window_of` (cuda/desc_window.cuh) compiled for the host: a chunk of 8-byte
//! descriptors may start at an odd frame, 8 bytes into a 16-byte granule, where a 16-byte load
//! would be misaligned; the window always starts on a granule, holds every descriptor of the
//! chunk, and fits the staged area (PW_CHUNK_FRAMES descriptors and one granule more).

#![cfg(feature = "host")]

use pktwarp_kernels::host::ffi::pw_host_desc_window;

/// sizeof(pw_slot_hdr): the descriptor array starts there.
const SLOT_HDR: u32 = 48;
/// PW_CHUNK_FRAMES.
const CHUNK: u32 = 256;

fn window(at: u32, c0: u32, k: u32, dsz: u32) -> (u32, u32, u32) {
    let mut out = [0u32; 3];
    // SAFETY: `out` has the three words the function writes.
    unsafe { pw_host_desc_window(at, c0, k, dsz, out.as_mut_ptr()) };
    (out[0], out[1], out[2])
}

#[test]
fn a_chunk_at_an_odd_frame_is_staged_from_an_aligned_granule() {
    // The chunk starts pw_run_tx_chunked takes when it halves a chunk (a stage that reads whole
    // frames, frames too large for the stage): 0, then 1 (one frame alone), then odd starts.
    let odd_start = SLOT_HDR + 8;
    assert_eq!(odd_start % 16, 8, "the start a 16-byte load used to take");
    for dsz in [8u32, 32] {
        for c0 in 0..600u32 {
            for k in [1u32, 2, 3, 7, 128, 255, 256] {
                let (first, granules, skew) = window(SLOT_HDR, c0, k, dsz);
                let start = SLOT_HDR + c0 * dsz;
                assert_eq!(first % 16, 0, "dsz {dsz} c0 {c0}: aligned");
                assert_eq!(
                    first + skew,
                    start,
                    "dsz {dsz} c0 {c0}: descriptor c0 at skew"
                );
                assert!(skew < 16);
                assert!(
                    granules * 16 >= skew + k * dsz,
                    "dsz {dsz} c0 {c0} k {k}: all held"
                );
                assert!(
                    granules * 16 <= CHUNK * dsz + 16,
                    "dsz {dsz} c0 {c0} k {k}: fits the staged window"
                );
                if dsz == 8 && c0 % 2 == 1 {
                    assert_eq!(skew, 8, "c0 {c0}: an odd start lies 8 bytes in");
                }
                if dsz == 32 {
                    assert_eq!(skew, 0, "full descriptors always start on a granule");
                }
            }
        }
    }
}
