//! Differential test: the CUDA parser (gpu-kernels/parse.cuh, compiled for the host by build.rs)
//! equals the Rust parser byte for byte on the whole capture corpus (every frame and its
//! truncations) and on random frames.

mod parse_common;

use parse_common::{corpus_frames, hex};
use pipeline::internal::stage::parse::{cuda_host, parse};
use pipeline::meta::{PacketMeta, META_SIZE};
use proptest::prelude::*;

fn both(frame: &[u8]) -> (PacketMeta, PacketMeta) {
    let mut r = PacketMeta::default();
    // Start the CUDA side from garbage: pw_parse must write every byte.
    let mut c = PacketMeta {
        frame_len: 0xdead_beef,
        status: 0xffff,
        steer_mark: 0x5555_5555,
        ..PacketMeta::default()
    };
    c.src_ip = [u32::MAX; 4];
    parse(frame, &mut r);
    cuda_host::parse(frame, &mut c);
    (r, c)
}

fn check(name: &str, frame: &[u8]) {
    let (r, c) = both(frame);
    assert!(
        r.as_bytes() == c.as_bytes(),
        "{name}: Rust and CUDA parsers differ on {}\nrust: {r:?}\ncuda: {c:?}",
        hex(frame)
    );
}

#[test]
fn host_compiled_meta_has_the_abi_size() {
    assert_eq!(cuda_host::meta_size(), META_SIZE);
}

#[test]
fn corpus_frames_and_truncations_are_byte_identical() {
    let Some(frames) = corpus_frames() else {
        return;
    };
    assert!(frames.len() > 5000, "only {} corpus frames", frames.len());
    let mut checked = 0usize;
    for (name, f) in &frames {
        check(name, f);
        // Every cut inside the headers, where the parser's decisions are.
        for cut in 0..f.len().min(160) {
            check(name, &f[..cut]);
        }
        checked += 1;
    }
    eprintln!("{checked} corpus frames (and their truncations) identical");
}

/// Frames that start like something we parse, then random bytes.
fn frame_strategy() -> impl Strategy<Value = Vec<u8>> {
    let ether_types = prop::sample::select(vec![
        0x0800u16, 0x86dd, 0x8100, 0x88a8, 0x9100, 0x0806, 0x8847, 0xaefe, 0x0042, 0x1234,
    ]);
    (
        ether_types,
        prop::collection::vec(any::<u8>(), 0..200),
        any::<u8>(),
    )
        .prop_map(|(et, body, nib)| {
            let mut f = vec![0u8; 12];
            f.extend_from_slice(&et.to_be_bytes());
            let mut body = body;
            if let Some(b) = body.first_mut() {
                // Bias the version nibble towards IPv4/IPv6 so the IP paths are exercised.
                *b = match nib % 3 {
                    0 => 0x40 | (*b & 0x0f),
                    1 => 0x60 | (*b & 0x0f),
                    _ => *b,
                };
            }
            f.extend(body);
            f
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn random_frames_are_byte_identical(f in frame_strategy()) {
        let (r, c) = both(&f);
        prop_assert!(r.as_bytes() == c.as_bytes(), "differ on {}\nrust: {:?}\ncuda: {:?}", hex(&f), r, c);
    }

    #[test]
    fn mutated_corpus_like_frames_are_byte_identical(
        seed in prop::sample::select(seed_frames()),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut f = seed;
        for (at, v) in flips {
            let i = at.index(f.len());
            f[i] = v;
        }
        let n = cut.index(f.len() + 1);
        f.truncate(n.max(f.len() * 3 / 4));
        let (r, c) = both(&f);
        prop_assert!(r.as_bytes() == c.as_bytes(), "differ on {}\nrust: {:?}\ncuda: {:?}", hex(&f), r, c);
    }
}

/// A few deep frames (tunnels, extension headers, MPLS, QinQ) from multi_proto.pcap to mutate.
fn seed_frames() -> Vec<Vec<u8>> {
    let p = pipeline::internal::testdata::multi_proto_pcap();
    let mut out = Vec::new();
    parse_common::for_each_frame(&p, |f| out.push(f.to_vec()));
    assert_eq!(out.len(), 23);
    out
}
