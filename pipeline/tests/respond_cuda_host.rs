//! The CUDA responder (gpu-kernels/cuda/respond.cuh, compiled for the host through
//! host/respond_host.cpp by pktwarp-kernels' `host` feature) equals the Rust reference
//! (pipeline::rewrite::respond) byte for byte: the output frame, the outcome, the reply's
//! counter and the metadata after it, on property-generated ARP and ICMP / ICMPv6 echo frames
//! (ours or not, requests or not, VLAN tags, random byte damage, cuts) and on every frame of the
//! Ethernet corpus captures; and on hostile requests (bad checksums, group or unspecified
//! sources, IPv6 routed on, Ethernet padding, lengths past the frame), where a request is
//! answered exactly when it is a valid one for us and every reply is well formed.

use std::net::IpAddr;

use pipeline::internal::port::gen::{build_frame, FrameSpec};
use pipeline::internal::rewrite::config::Mac;
use pipeline::internal::rewrite::respond::{RespondParams, COUNTER_NAMES};
use pipeline::internal::rewrite::{Outcome, Respond, RespondConfig};
use pipeline::internal::stage::parse::parse_frame;
use pipeline::internal::testdata::respond::{Arp, Echo};
use pipeline::meta::PacketMeta;
use pipeline::verdict::Verdict;
use pipeline::wire::{arp, checksum, icmp};
use proptest::prelude::*;

// Keeps the kernels crate (and its host static library) linked into this test.
use pktwarp_kernels as _;

extern "C" {
    fn pw_host_respond(
        f: *mut u8,
        len: *mut u32,
        m: *mut PacketMeta,
        p: *const RespondParams,
        ctr: *mut u32,
    ) -> u32;
}

const PW_RW_SKIPPED: u32 = 1;
const PW_RW_REPLY: u32 = 6;

fn responder() -> Respond {
    Respond::new(&RespondConfig {
        mac: Mac([2, 0, 0, 0, 0, 0x99]),
        ipv4: vec!["192.0.2.1".parse().unwrap(), "10.0.0.1".parse().unwrap()],
        ipv6: vec!["2001:db8::1".parse().unwrap()],
    })
    .unwrap()
}

/// Rust and host CUDA on one frame: same bytes, outcome, counter and meta. Returns the outcome
/// and the frame after it.
fn check(r: &Respond, f: &[u8]) -> (Outcome, Vec<u8>) {
    let mut rust = f.to_vec();
    let mut rm = parse_frame(f);
    let mut cm = rm;
    let before = r.counters();
    let out = r.apply(&mut rust, &mut rm, &Verdict::PASS);
    assert_eq!(
        rm,
        parse_frame(&rust),
        "meta after = a fresh parse, frame {f:02x?}"
    );
    let after = r.counters();
    let rust_ctr = (0..3)
        .find(|&k| after[k] != before[k])
        .map_or(0, |k| k as u32 + 1);
    let mut cuda = f.to_vec();
    let p = r.params();
    let mut ctr = 0u32;
    let mut len = cuda.len() as u32;
    // SAFETY: `cuda` holds `len` bytes; meta, params, len and ctr are live and of the C layouts
    // (PacketMeta / RespondParams layouts are pinned by their tests).
    let code = unsafe { pw_host_respond(cuda.as_mut_ptr(), &mut len, &mut cm, &p, &mut ctr) };
    assert!(len as usize <= cuda.len(), "a reply never grows");
    cuda.truncate(len as usize);
    let want = match out {
        Outcome::Reply => PW_RW_REPLY,
        Outcome::Skipped => PW_RW_SKIPPED,
        o => panic!("respond returned {o:?}"),
    };
    assert_eq!(code, want, "outcome, frame {f:02x?}");
    assert_eq!(cuda, rust, "bytes, frame {f:02x?}");
    assert_eq!(cm, rm, "meta, frame {f:02x?}");
    assert_eq!(ctr, rust_ctr, "counter ({COUNTER_NAMES:?})");
    (out, rust)
}

fn arp_frame(target: [u8; 4], oper: u16, vlan: Option<u16>) -> Vec<u8> {
    let mut f = vec![0xffu8; 6];
    f.extend([2, 0, 0, 0, 0, 7]);
    if let Some(t) = vlan {
        f.extend([0x81, 0]);
        f.extend(t.to_be_bytes());
    }
    f.extend([8, 6]);
    let mut a = [0u8; 28];
    arp::Repr {
        oper,
        sender_hw: [2, 0, 0, 0, 0, 7],
        sender_ip: [192, 0, 2, 50],
        target_hw: [0; 6],
        target_ip: target,
    }
    .emit(&mut a)
    .unwrap();
    f.extend(a);
    f.resize(f.len().max(60), 0);
    f
}

fn echo_frame(dst: &str, ty: u8, vlan: Option<u16>, size: u16) -> Vec<u8> {
    let d: IpAddr = dst.parse().unwrap();
    let s = if d.is_ipv4() {
        "192.0.2.50"
    } else {
        "2001:db8::50"
    };
    let mut spec = FrameSpec::tcp(s.parse().unwrap(), d, 7, 9, size);
    spec.proto = if d.is_ipv4() { 1 } else { 58 };
    spec.vlan = vlan;
    let mut f = build_frame(&spec);
    let m = parse_frame(&f);
    if m.l4_offset > 0 && usize::from(m.l4_offset) + 8 <= f.len() {
        let l4 = usize::from(m.l4_offset);
        icmp::Header::new_checked(&mut f[l4..])
            .unwrap()
            .set_type_update_checksum(ty);
    }
    f
}

#[test]
fn replies_are_made_and_equal() {
    let r = responder();
    let frames = [
        arp_frame([192, 0, 2, 1], 1, None),
        arp_frame([10, 0, 0, 1], 1, Some(5)),
        echo_frame("192.0.2.1", 8, None, 98),
        echo_frame("10.0.0.1", 8, Some(9), 200),
        echo_frame("2001:db8::1", 128, None, 120),
        echo_frame("2001:db8::1", 128, Some(3), 90),
    ];
    for f in &frames {
        check(&r, f);
    }
    // Every one was a reply (the comparison above covered replies, not only skips).
    assert_eq!(r.counters(), [2, 2, 2]);
}

/// Every frame of the corpus's Ethernet captures; None (the test does not run) without the
/// corpus outside CI (`require_corpus`).
fn corpus_frames() -> Option<Vec<Vec<u8>>> {
    pipeline::internal::testdata::corpus_ethernet_frames()
}

#[test]
fn corpus_rust_equals_host_cuda() {
    // The corpus's own addresses answered too: every ARP target and ICMP destination seen.
    let Some(frames) = corpus_frames() else {
        return;
    };
    assert!(frames.len() > 5000, "{} frames", frames.len());
    let r = responder();
    for f in &frames {
        check(&r, f);
    }
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for f in &frames {
        let m = parse_frame(f);
        let a = m.dst_ip;
        if m.flags & pipeline::meta::mf::ARP != 0 || (m.ip_version == 4 && m.ip_proto == 1) {
            if v4.len() < 8 && !v4.contains(&a[0]) {
                v4.push(a[0]);
            }
        } else if m.ip_version == 6 && m.ip_proto == 58 && v6.len() < 8 && !v6.contains(&a) {
            v6.push(a);
        }
    }
    let ours = Respond::new(&RespondConfig {
        mac: Mac([2, 0, 0, 0, 0, 0x98]),
        ipv4: v4.iter().map(|a| (*a).into()).collect(),
        ipv6: v6
            .iter()
            .map(|w| {
                let mut b = [0u8; 16];
                for (i, x) in w.iter().enumerate() {
                    b[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
                }
                b.into()
            })
            .collect(),
    })
    .unwrap();
    for f in &frames {
        check(&ours, f);
    }
    let c = ours.counters();
    assert!(c[0] + c[1] + c[2] > 0, "the corpus got replies: {c:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn generated_frames_rust_equals_host_cuda(
        kind in 0u8..3,
        ours in any::<bool>(),
        ty in prop_oneof![Just(8u8), Just(0), Just(128), Just(129), any::<u8>()],
        oper in prop_oneof![Just(1u16), Just(2), any::<u16>()],
        vlan in proptest::option::of(any::<u16>()),
        size in 60u16..300,
        damage in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..4),
        cut in proptest::option::of(any::<u16>()),
    ) {
        let r = responder();
        let mut f = match kind {
            0 => arp_frame(if ours { [192, 0, 2, 1] } else { [192, 0, 2, 2] }, oper, vlan),
            1 => echo_frame(if ours { "10.0.0.1" } else { "10.0.0.2" }, ty, vlan, size),
            _ => echo_frame(if ours { "2001:db8::1" } else { "2001:db8::2" }, ty, vlan, size),
        };
        for (at, b) in damage {
            let i = at as usize % f.len();
            f[i] = b;
        }
        if let Some(c) = cut {
            f.truncate(c as usize % (f.len() + 1));
        }
        check(&r, &f);
    }
}

/// How a generated request is made hostile (or not).
#[derive(Clone, Debug)]
struct Hostile {
    /// 0: ARP, 1: ICMP echo, 2: ICMPv6 echo.
    kind: u8,
    ours: bool,
    /// Index into the family's sources: 0 unicast, then unspecified, broadcast / multicast.
    src: usize,
    /// 0 unicast, 1 broadcast, 2 multicast Ethernet source (ARP: 3 = multicast sender
    /// hardware address with a unicast Ethernet source).
    eth: u8,
    bad_icmp_sum: bool,
    bad_ip_sum: bool,
    hop_by_hop: bool,
    routing: Option<u8>,
    vlan: Option<u16>,
    data: usize,
    padding: usize,
    /// Bytes the IP length field claims past the frame.
    past: u16,
}

const SRC4: [&str; 5] = [
    "192.0.2.50",
    "0.0.0.0",
    "255.255.255.255",
    "224.0.0.1",
    "239.9.9.9",
];
const SRC6: [&str; 4] = ["2001:db8::50", "::", "ff02::1", "ff05::1:3"];
/// ARP senders: a host, a probe (answered), broadcast, multicast, an announcement of ours.
const ARP_SRC: [[u8; 4]; 5] = [
    [192, 0, 2, 50],
    [0, 0, 0, 0],
    [255; 4],
    [224, 0, 0, 9],
    [10, 0, 0, 1],
];
const GROUP_MACS: [[u8; 6]; 2] = [[0xff; 6], [0x01, 0, 0x5e, 0, 0, 9]];

fn hostile() -> impl Strategy<Value = Hostile> {
    (
        (0u8..3, any::<bool>(), 0usize..5, 0u8..4),
        (
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.2),
            any::<bool>(),
        ),
        (
            prop::option::weighted(0.4, 0u8..3),
            prop::option::of(0u16..4096),
        ),
        (
            0usize..80,
            prop_oneof![Just(0usize), 1usize..50],
            prop_oneof![3 => Just(0u16), 1 => 1u16..9],
        ),
    )
        .prop_map(
            |(
                (kind, ours, src, eth),
                (bad_icmp_sum, bad_ip_sum, hop_by_hop),
                (routing, vlan),
                (data, padding, past),
            )| Hostile {
                kind,
                ours,
                src,
                eth,
                bad_icmp_sum,
                bad_ip_sum,
                hop_by_hop,
                routing,
                vlan,
                data,
                padding,
                past,
            },
        )
}

impl Hostile {
    /// The frame, and whether it is a valid request for one of our addresses (the ones the
    /// stage must answer).
    fn build(&self) -> (Vec<u8>, bool) {
        let eth_ok = self.eth == 0 || (self.kind != 0 && self.eth == 3);
        let eth_src = match self.eth {
            1 | 2 => GROUP_MACS[usize::from(self.eth) - 1],
            _ => [2, 0, 0, 0, 0, 7],
        };
        if self.kind == 0 {
            let spa = ARP_SRC[self.src % ARP_SRC.len()];
            let mut a = Arp::request(
                spa,
                if self.ours {
                    [10, 0, 0, 1]
                } else {
                    [10, 0, 0, 2]
                },
            );
            a.eth_src = eth_src;
            if self.eth == 3 {
                a.sender_hw = GROUP_MACS[1];
            }
            // Sender 0.0.0.0 is an ARP probe (RFC 5227): answered.
            let ok = self.ours && self.eth == 0 && self.src % ARP_SRC.len() < 2;
            return (a.build(), ok);
        }
        let v4 = self.kind == 1;
        let (srcs, dst): (&[&str], _) = match (v4, self.ours) {
            (true, true) => (&SRC4, "10.0.0.1"),
            (true, false) => (&SRC4, "10.0.0.2"),
            (false, true) => (&SRC6, "2001:db8::1"),
            (false, false) => (&SRC6, "2001:db8::2"),
        };
        let src = self.src % srcs.len();
        let mut e = Echo::new(srcs[src], dst);
        e.eth_src = eth_src;
        e.vlan = self.vlan;
        e.data = (0..self.data).map(|i| (i * 7) as u8).collect();
        e.padding = self.padding;
        if !v4 {
            e.hop_by_hop = self.hop_by_hop;
            e.routing = self.routing;
        }
        let mut f = e.build();
        let l3 = e.l3();
        let l4 = usize::from(parse_frame(&f).l4_offset);
        if self.bad_icmp_sum {
            f[l4 + 2] ^= 0x10;
        }
        let len_at = l3 + if v4 { 2 } else { 4 };
        let n = u16::from_be_bytes([f[len_at], f[len_at + 1]]);
        let claimed = n + self.past;
        f[len_at..len_at + 2].copy_from_slice(&claimed.to_be_bytes());
        let past_frame = usize::from(claimed) + l3 + if v4 { 0 } else { 40 } > f.len();
        if v4 {
            f[l3 + 10..l3 + 12].fill(0);
            let c = checksum::checksum(&f[l3..l3 + 20]) ^ u16::from(self.bad_ip_sum);
            f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        // A length that grows into the padding sums the padding too: not what was summed.
        let ok = self.ours
            && src == 0
            && eth_ok
            && !self.bad_icmp_sum
            && !(v4 && self.bad_ip_sum)
            && self.past == 0
            && !past_frame
            && e.routing.is_none_or(|left| left == 0);
        (f, ok)
    }
}

/// A reply is well formed: from our MAC to a unicast one; ARP: an Ethernet / IPv4 reply of 28
/// bytes; ICMP: the frame ends with the IP packet, header and ICMP checksums valid over exactly
/// its bytes, type 0 / 129, from one of our addresses to a unicast one.
fn well_formed(f: &[u8]) {
    assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 0x99], "source MAC");
    assert_eq!(f[0] & 1, 0, "unicast destination MAC");
    let m = parse_frame(f);
    let l3 = usize::from(m.l3_offset);
    if m.flags & pipeline::meta::mf::ARP != 0 {
        assert_eq!(f.len(), l3 + 28);
        let p = arp::Packet::new_checked(&f[l3..]).unwrap();
        let rep = arp::Repr::parse(&p).unwrap();
        assert_eq!((rep.oper, rep.sender_ip), (2, [10, 0, 0, 1]));
        assert_eq!(&f[..6], &rep.target_hw);
        return;
    }
    let l4 = usize::from(m.l4_offset);
    if m.ip_version == 4 {
        let total = usize::from(u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]));
        assert_eq!(f.len(), l3 + total, "frame ends with the IP packet");
        assert!(checksum::verify(0, &f[l3..l3 + 20]), "IPv4 header checksum");
        assert!(checksum::verify(0, &f[l4..]), "ICMP checksum");
        assert_eq!((f[l4], &f[l3 + 12..l3 + 16]), (0, &[10, 0, 0, 1][..]));
        let d = &f[l3 + 16..l3 + 20];
        assert!(d != [0; 4] && d[0] < 224, "reply to {d:?}");
    } else {
        let plen = usize::from(u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]));
        assert_eq!(f.len(), l3 + 40 + plen, "frame ends with the IP packet");
        let a = |at: usize| <[u8; 16]>::try_from(&f[at..at + 16]).unwrap();
        let (s, d) = (a(l3 + 8), a(l3 + 24));
        let pseudo = checksum::pseudo_v6(s, d, 58, (f.len() - l4) as u32);
        assert!(checksum::verify(pseudo, &f[l4..]), "ICMPv6 checksum");
        assert_eq!(f[l4], 129);
        assert_eq!(
            s,
            "2001:db8::1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets()
        );
        assert!(d != [0; 16] && d[0] != 0xff, "reply to {d:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn hostile_requests_rust_equals_host_cuda(h in hostile()) {
        let r = responder();
        let (f, valid) = h.build();
        let (out, reply) = check(&r, &f);
        prop_assert_eq!(out == Outcome::Reply, valid, "answered or not: {:?}", h);
        if out == Outcome::Reply {
            well_formed(&reply);
        }
    }
}
