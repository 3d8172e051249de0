//! Differential test of the small-burst kernel's parse fast path (gpu-kernels/parse.cuh
//! `pw_parse_fast_key`, compiled for the host by build.rs): whenever it takes a frame, the Rust
//! parser must find that frame intact (status 0) and the ACL key words must be exactly those of
//! the metadata it produces (acl.cuh `pw_acl_key_from_meta`). Frames it leaves go to the full
//! parser, so declining is always allowed; the corpus check also requires that it takes the
//! plain IPv4 frames it was written for.

mod parse_common;

use parse_common::{corpus_frames, hex};
use pipeline::internal::stage::parse::{cuda_host, parse_frame};
use proptest::prelude::*;

/// Checks `frame` on two ports; true when the fast path took it.
fn check(name: &str, frame: &[u8]) -> bool {
    let mut took = false;
    for port in [0u16, 0x0102] {
        let Some(kw) = cuda_host::parse_fast_key(frame, port) else {
            continue;
        };
        took = true;
        let m = parse_frame(frame);
        assert_eq!(
            m.status,
            0,
            "{name}: fast path took a frame the parser rejects ({m:?}): {}",
            hex(frame)
        );
        let want = cuda_host::acl_key_words(&m, port);
        assert_eq!(
            kw,
            want,
            "{name}: fast key differs on port {port}: {}",
            hex(frame)
        );
    }
    took
}

#[test]
fn corpus_frames_and_truncations() {
    let Some(frames) = corpus_frames() else {
        return;
    };
    let (mut took, mut plain) = (0usize, 0usize);
    for (name, f) in &frames {
        if check(name, f) {
            took += 1;
        }
        // A frame the fast path is meant for: untagged IPv4, IHL 5, not a fragment, TCP or UDP
        // off the tunnel ports, no shorter than 52 bytes, its packet within the frame.
        let m = parse_frame(f);
        let tunnel = m.tunnel_type != 0;
        if f.len() >= 52
            && m.status == 0
            && m.vlan_count == 0
            && m.ether_type == 0x0800
            && f[14] == 0x45
            && m.flags & pipeline::meta::mf::FRAGMENT == 0
            && (m.ip_proto == 6 || m.ip_proto == 17)
            && !tunnel
        {
            plain += 1;
            assert!(
                cuda_host::parse_fast_key(f, 0).is_some(),
                "{name}: the fast path declines a plain IPv4 frame: {}",
                hex(f)
            );
        }
        for cut in 0..f.len().min(80) {
            check(name, &f[..cut]);
        }
    }
    assert!(plain > 1000, "only {plain} plain IPv4 frames in the corpus");
    eprintln!(
        "{} corpus frames, {took} taken by the fast path ({plain} plain IPv4 TCP/UDP)",
        frames.len()
    );
}

/// Ethernet, 0-2 VLAN tags, an IPv4 header and 20 L4 bytes whose fields sit on and around
/// every boundary the fast path checks (IHL, total length, fragment bits, protocol, TCP data
/// offset, UDP length, tunnel ports), then 0-40 more bytes, cut anywhere from 40 bytes on.
fn ipv4_frame() -> impl Strategy<Value = Vec<u8>> {
    let tags = prop::sample::select(vec![0usize, 0, 0, 1, 1, 2]);
    let tpid = prop::sample::select(vec![0x8100u16, 0x88a8, 0x9100]);
    let et = prop::sample::select(vec![0x0800u16, 0x0800, 0x0800, 0x86dd, 0x0806]);
    let vihl = prop::sample::select(vec![0x45u8, 0x45, 0x45, 0x46, 0x44, 0x55, 0x4f]);
    let proto = prop::sample::select(vec![6u8, 17, 1, 58, 132, 47, 0]);
    let ff = prop::sample::select(vec![0u16, 0x4000, 0x2000, 0x0001, 0x8000, 0x6000, 0x1fff]);
    let dport = prop::sample::select(vec![80u16, 4789, 2152, 53, 0]);
    let tail = prop::collection::vec(any::<u8>(), 0..40);
    (
        (tags, tpid, any::<u16>(), et, vihl, any::<u8>()),
        (proto, ff, -3i32..4, any::<[u8; 20]>(), dport),
        (any::<u8>(), -3i32..4, tail, any::<prop::sample::Index>()),
    )
        .prop_map(
            |(
                (tags, tpid, tci, et, vihl, tos),
                (proto, ff, dlen, mut l4, dport),
                (doff, dulen, tail, cut),
            )| {
                let mut f = vec![2u8; 12];
                for _ in 0..tags {
                    f.extend_from_slice(&tpid.to_be_bytes());
                    f.extend_from_slice(&tci.to_be_bytes());
                }
                f.extend_from_slice(&et.to_be_bytes());
                let l3 = f.len();
                let l4_len = 20 + tail.len();
                let total = (20 + l4_len) as i32 + dlen;
                let mut ip = [0u8; 20];
                ip[0] = vihl;
                ip[1] = tos;
                ip[2..4].copy_from_slice(&(total.max(0) as u16).to_be_bytes());
                ip[6..8].copy_from_slice(&ff.to_be_bytes());
                ip[8] = 64;
                ip[9] = proto;
                ip[12..20].copy_from_slice(&[10, 1, 2, 3, 192, 168, 7, 9]);
                f.extend_from_slice(&ip);
                l4[2..4].copy_from_slice(&dport.to_be_bytes());
                if proto == 17 {
                    let ulen = (l4_len as i32 + dulen).max(0) as u16;
                    l4[4..6].copy_from_slice(&ulen.to_be_bytes());
                }
                if proto == 6 {
                    // Data offset 0-15 words, mostly 5.
                    l4[12] = if doff < 128 { 0x50 | (doff & 1) } else { doff };
                }
                f.extend_from_slice(&l4);
                f.extend(tail);
                let keep = 40 + cut.index(f.len() - 40 + 1);
                f.truncate(keep.max(l3));
                f
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20000, ..ProptestConfig::default() })]

    #[test]
    fn ipv4_frames_near_every_boundary(f in ipv4_frame()) {
        check("generated", &f);
    }

    #[test]
    fn random_bytes_after_an_ipv4_ethertype(body in prop::collection::vec(any::<u8>(), 0..120)) {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00, 0x45]);
        f.extend(body);
        check("random", &f);
    }
}

#[test]
fn the_fast_path_takes_tagged_and_untagged_plain_frames() {
    // 60-byte TCP SYN, untagged and with one 802.1Q tag (VID 0x123, PCP 5).
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = [
        0x45, 0x10, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]
    .to_vec();
    let tcp = [
        0x30, 0x39, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x51, 0x02, 0x20, 0, 0, 0, 0, 0,
    ];
    ip.extend_from_slice(&tcp);
    f.extend_from_slice(&ip);
    f.resize(60, 0);
    let kw = cuda_host::parse_fast_key(&f, 7).expect("untagged TCP taken");
    assert_eq!(kw[0], 0x0a00_0001);
    assert_eq!(kw[4], 0x0a00_0002);
    assert_eq!(kw[8], 12345 | (80 << 16));
    // proto 6, version 4, DSCP 0x10 >> 2, flags: the low 8 bits (SYN; NS is bit 8, dropped).
    assert_eq!(kw[9], 6 | (4 << 8) | (4 << 16) | (0x02 << 24));
    assert_eq!(kw[10], 0xFFFF | (7 << 16));
    assert!(check("untagged", &f));
    let mut t = f[..12].to_vec();
    t.extend_from_slice(&[0x81, 0x00, 0xa1, 0x23]);
    t.extend_from_slice(&f[12..]);
    let kw = cuda_host::parse_fast_key(&t, 7).expect("tagged TCP taken");
    assert_eq!(kw[10], 0x123 | (7 << 16));
    assert!(check("tagged", &t));
    // Two tags, IHL 6, a fragment, the VXLAN port, 51 bytes: left to pw_parse.
    let mut qinq = t[..16].to_vec();
    qinq.extend_from_slice(&t[12..]);
    assert!(cuda_host::parse_fast_key(&qinq, 7).is_none());
    let mut opt = f.clone();
    opt[14] = 0x46;
    assert!(cuda_host::parse_fast_key(&opt, 7).is_none());
    let mut frag = f.clone();
    frag[20] = 0x20;
    assert!(cuda_host::parse_fast_key(&frag, 7).is_none());
    let mut vx = f.clone();
    vx[23] = 17;
    vx[36..38].copy_from_slice(&4789u16.to_be_bytes());
    vx[38..40].copy_from_slice(&20u16.to_be_bytes());
    assert!(cuda_host::parse_fast_key(&vx, 7).is_none());
    assert!(cuda_host::parse_fast_key(&f[..51], 7).is_none());
}
