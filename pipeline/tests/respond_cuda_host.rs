//! The CUDA responder (gpu-kernels/cuda/respond.cuh, compiled for the host through
//! host/respond_host.cpp by pktwarp-kernels' `host` feature) equals the Rust reference
//! (pipeline::rewrite::respond) byte for byte: the output frame, the outcome, the reply's
//! counter and the metadata after it, on property-generated ARP and ICMP / ICMPv6 echo frames
//! (ours or not, requests or not, VLAN tags, random byte damage, cuts) and on every frame of the
//! Ethernet corpus captures.

use std::net::IpAddr;

use pipeline::meta::PacketMeta;
use pipeline::port::gen::{build_frame, FrameSpec};
use pipeline::port::pcap::CaptureReader;
use pipeline::rewrite::config::Mac;
use pipeline::rewrite::respond::{RespondParams, COUNTER_NAMES};
use pipeline::rewrite::{Outcome, Respond, RespondConfig};
use pipeline::stage::parse::parse_frame;
use pipeline::verdict::Verdict;
use pipeline::wire::{arp, icmp};
use proptest::prelude::*;

// Keeps the kernels crate (and its host static library) linked into this test.
use pktwarp_kernels as _;

extern "C" {
    fn pw_host_respond(
        f: *mut u8,
        len: u32,
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

/// Rust and host CUDA on one frame: same bytes, outcome, counter and meta.
fn check(r: &Respond, f: &[u8]) {
    let mut rust = f.to_vec();
    let mut rm = parse_frame(f);
    let mut cm = rm;
    let before = r.counters();
    let out = r.apply(&mut rust, &mut rm, &Verdict::PASS);
    let after = r.counters();
    let rust_ctr = (0..3)
        .find(|&k| after[k] != before[k])
        .map_or(0, |k| k as u32 + 1);
    let mut cuda = f.to_vec();
    let p = r.params();
    let mut ctr = 0u32;
    // SAFETY: `cuda` holds `len` bytes; meta, params and ctr are live and of the C layouts
    // (PacketMeta / RespondParams layouts are pinned by their tests).
    let code =
        unsafe { pw_host_respond(cuda.as_mut_ptr(), cuda.len() as u32, &mut cm, &p, &mut ctr) };
    let want = match out {
        Outcome::Reply => PW_RW_REPLY,
        Outcome::Skipped => PW_RW_SKIPPED,
        o => panic!("respond returned {o:?}"),
    };
    assert_eq!(code, want, "outcome, frame {f:02x?}");
    assert_eq!(cuda, rust, "bytes, frame {f:02x?}");
    assert_eq!(cm, rm, "meta, frame {f:02x?}");
    assert_eq!(ctr, rust_ctr, "counter ({COUNTER_NAMES:?})");
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
    let d = flow_rules::input::require_corpus("pcaps")?;
    let index = std::fs::read_to_string(d.join("INDEX.tsv")).expect("pcaps/INDEX.tsv");
    let mut frames = Vec::new();
    for line in index.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 3 || !cols[2].starts_with("ether ") {
            continue;
        }
        if let Ok(mut r) = CaptureReader::open_ethernet(d.join(cols[0])) {
            while let Ok(Some(f)) = r.next_frame() {
                frames.push(f.data.to_vec());
            }
        }
    }
    Some(frames)
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
