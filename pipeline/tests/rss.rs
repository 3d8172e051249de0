//! Toeplitz RSS against the published Microsoft verification vectors, the table version
//! against the bit-by-bit definition, frame and metadata hashing against each other, and the
//! redirection table.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use pipeline::internal::port::gen::{build_frame, FrameSpec, PROTO_ICMP, PROTO_TCP, PROTO_UDP};
use pipeline::internal::port::pcap::CaptureReader;
use pipeline::internal::rss::{toeplitz_reference, Reta, Rss, Toeplitz, RSS_KEY_MS};
use pipeline::internal::stage::parse::parse_frame;
use pipeline::meta::{mf, PacketMeta};
use proptest::prelude::*;

/// Microsoft "Verifying the RSS Hash Calculation", IPv4: (destination, destination port,
/// source, source port, hash without ports, hash with ports (TCP)).
const V4: [(&str, u16, &str, u16, u32, u32); 5] = [
    (
        "161.142.100.80",
        1766,
        "66.9.149.187",
        2794,
        0x323e8fc2,
        0x51ccc178,
    ),
    (
        "65.69.140.83",
        4739,
        "199.92.111.2",
        14230,
        0xd718262a,
        0xc626b0ea,
    ),
    (
        "12.22.207.184",
        38024,
        "24.19.198.95",
        12898,
        0xd2d0a5de,
        0x5c2b394a,
    ),
    (
        "209.142.163.6",
        2217,
        "38.27.205.30",
        48228,
        0x82989176,
        0xafc7327f,
    ),
    (
        "202.188.127.2",
        1303,
        "153.39.163.191",
        44251,
        0x5d1809c5,
        0x10e828a2,
    ),
];

/// The same page, IPv6.
const V6: [(&str, u16, &str, u16, u32, u32); 3] = [
    (
        "3ffe:2501:200:3::1",
        1766,
        "3ffe:2501:200:1fff::7",
        2794,
        0x2cc18cd5,
        0x40207d3d,
    ),
    (
        "ff02::1",
        4739,
        "3ffe:501:8::260:97ff:fe40:efab",
        14230,
        0x0f0c461c,
        0xdde51bbf,
    ),
    (
        "fe80::200:f8ff:fe21:67cf",
        38024,
        "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
        44251,
        0x4b61e985,
        0x02d1feef,
    ),
];

#[test]
fn microsoft_ipv4_vectors() {
    let t = Toeplitz::new(&RSS_KEY_MS);
    for (dst, dport, src, sport, h2, h4) in V4 {
        let (s, d): (Ipv4Addr, Ipv4Addr) = (src.parse().unwrap(), dst.parse().unwrap());
        assert_eq!(t.hash_ipv4(s, d, None), h2, "{src} -> {dst}");
        assert_eq!(
            t.hash_ipv4(s, d, Some((sport, dport))),
            h4,
            "{src} -> {dst}"
        );
        let mut input = s.octets().to_vec();
        input.extend_from_slice(&d.octets());
        assert_eq!(toeplitz_reference(&RSS_KEY_MS, &input), h2);
    }
}

#[test]
fn microsoft_ipv6_vectors() {
    let t = Toeplitz::default();
    for (dst, dport, src, sport, h2, h4) in V6 {
        let (s, d): (Ipv6Addr, Ipv6Addr) = (src.parse().unwrap(), dst.parse().unwrap());
        assert_eq!(t.hash_ipv6(s, d, None), h2, "{src} -> {dst}");
        assert_eq!(
            t.hash_ipv6(s, d, Some((sport, dport))),
            h4,
            "{src} -> {dst}"
        );
    }
}

#[test]
fn frames_and_metadata_hash_like_the_vectors() {
    let rss = Rss::new(4).unwrap();
    for (dst, dport, src, sport, h2, h4) in V4 {
        let (s, d): (IpAddr, IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
        for (proto, vlan, want) in [
            (PROTO_TCP, None, h4),
            (PROTO_UDP, Some(5), h4),
            (PROTO_ICMP, None, h2),
        ] {
            let mut spec = FrameSpec::tcp(s, d, sport, dport, 128);
            spec.proto = proto;
            spec.vlan = vlan;
            let f = build_frame(&spec);
            assert_eq!(rss.toeplitz.hash_frame(&f), want);
            let m = parse_frame(&f);
            assert_eq!(rss.toeplitz.hash_meta(&m), want);
            assert_eq!(rss.steer_meta(&m), (want, (want % 4) as u16));
        }
    }
    for (dst, dport, src, sport, _, h4) in V6 {
        let spec = FrameSpec::tcp(
            src.parse().unwrap(),
            dst.parse().unwrap(),
            sport,
            dport,
            128,
        );
        let f = build_frame(&spec);
        assert_eq!(rss.toeplitz.hash_frame(&f), h4);
        assert_eq!(rss.toeplitz.hash_meta(&parse_frame(&f)), h4);
    }
    // Not IP: hash 0, queue 0.
    assert_eq!(rss.steer_meta(&PacketMeta::default()), (0, 0));
    assert_eq!(rss.steer_frame(&[0u8; 60]), (0, 0));
}

/// On real captures, hashing the raw frame and hashing its parsed metadata agree wherever
/// the frame parses cleanly without MPLS or more than two VLAN tags (which the raw walk does
/// not follow).
#[test]
fn frame_hash_agrees_with_meta_hash_on_captures() {
    let t = Toeplitz::default();
    let Some(dir) = flow_rules::input::require_corpus("pcaps") else {
        return;
    };
    let index = std::fs::read_to_string(dir.join("INDEX.tsv")).unwrap();
    let (mut compared, mut four_tuple) = (0, 0);
    for line in index.lines().filter(|l| l.contains("\tether ")) {
        let file = line.split('\t').next().unwrap();
        let Ok(mut r) = CaptureReader::open(dir.join(file)) else {
            continue;
        };
        while let Ok(Some(f)) = r.next_frame() {
            let from_frame = t.hash_frame(f.data);
            let m = parse_frame(f.data);
            if m.status != 0 || m.flags & (mf::MPLS | mf::VLAN_EXTRA) != 0 {
                continue;
            }
            assert_eq!(from_frame, t.hash_meta(&m), "{file} frame at {}", f.offset);
            compared += 1;
            four_tuple += usize::from(m.flags & mf::L4 != 0 && matches!(m.ip_proto, 6 | 17));
        }
    }
    assert!(
        compared > 5000 && four_tuple > 2000,
        "{compared} {four_tuple}"
    );
}

proptest! {
    #[test]
    fn table_matches_reference(key in any::<[u8; 40]>(), input in proptest::collection::vec(any::<u8>(), 0..40)) {
        let t = Toeplitz::new(&key);
        prop_assert_eq!(t.hash(&input), toeplitz_reference(&key, &input));
    }

    #[test]
    fn hash_frame_never_panics(f in proptest::collection::vec(any::<u8>(), 0..128), et in prop_oneof![Just(0x0800u16), Just(0x86DD), Just(0x8100)]) {
        let mut f = f;
        if f.len() >= 14 {
            f[12..14].copy_from_slice(&et.to_be_bytes());
        }
        let _ = Toeplitz::default().hash_frame(&f);
    }
}

#[test]
fn reta_spreads_round_robin() {
    let reta = Reta::new(3).unwrap();
    assert_eq!(reta.entries().len(), 128);
    assert_eq!(reta.queues(), 3);
    assert_eq!(
        (reta.queue(0), reta.queue(1), reta.queue(2), reta.queue(3)),
        (0, 1, 2, 0)
    );
    // Only the low 7 bits index the table.
    assert_eq!(reta.queue(0xFFFF_FF80), reta.queue(0));
    assert_eq!(reta.queue(127), (127 % 3) as u16);
    assert!(Reta::new(0).is_err());
    assert!(Reta::from_entries(vec![0; 100]).is_err());
    let custom = Reta::from_entries(vec![1, 1, 0, 2]).unwrap();
    assert_eq!((custom.queue(6), custom.queue(7)), (0, 2));
}

#[test]
fn many_flows_spread_evenly() {
    let rss = Rss::new(4).unwrap();
    let mut per_queue = [0u32; 4];
    for i in 0..20_000u32 {
        let s = Ipv4Addr::from(0x0A00_0000 + i);
        let h = rss.toeplitz.hash_ipv4(
            s,
            Ipv4Addr::new(192, 168, 1, 1),
            Some((1024 + (i % 5000) as u16, 80)),
        );
        per_queue[rss.reta.queue(h) as usize] += 1;
    }
    for q in per_queue {
        assert!((4500..=5500).contains(&q), "{per_queue:?}");
    }
}
