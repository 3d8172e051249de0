//! The `respond` stage on hostile and malformed requests: what it must not answer (bad
//! checksums, group or unspecified sources, IPv6 packets routed on, lengths past the frame) and
//! the shape of what it answers (no Ethernet padding echoed, ARP probes answered).

use super::respond::{Respond, RespondConfig};
use super::{config::Mac, Outcome};
use crate::stage::parse::parse_frame;
use crate::testdata::respond::{Arp, Echo, REQUESTER_MAC};
use crate::verdict::Verdict;
use crate::wire::{arp, checksum};

const MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x99];

fn responder() -> Respond {
    Respond::new(&RespondConfig {
        mac: Mac(MAC),
        ipv4: vec!["192.0.2.1".parse().unwrap()],
        ipv6: vec!["2001:db8::1".parse().unwrap()],
    })
    .unwrap()
}

/// The stage on `f`: its outcome and the frame after it; the meta after it equals a fresh
/// parse of the frame either way.
fn run(r: &Respond, f: &[u8]) -> (Outcome, Vec<u8>) {
    let mut g = f.to_vec();
    let mut m = parse_frame(&g);
    let out = r.apply(&mut g, &mut m, &Verdict::PASS);
    assert_eq!(m, parse_frame(&g), "meta of {g:02x?}");
    (out, g)
}

fn declined(r: &Respond, f: &[u8], what: &str) {
    let (out, g) = run(r, f);
    assert_eq!(out, Outcome::Skipped, "{what}: answered");
    assert_eq!(g, f, "{what}: changed");
}

/// The reply to `e`: the IP packet and nothing after it, both checksums valid, addresses
/// swapped, from our MAC to the requester's.
fn check_reply(e: &Echo, f: &[u8]) {
    let l3 = e.l3();
    assert_eq!(&f[..6], &e.eth_src);
    assert_eq!(&f[6..12], &MAC);
    let m = parse_frame(f);
    let l4 = usize::from(m.l4_offset);
    if e.src.is_ipv4() {
        let total = usize::from(u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]));
        assert_eq!(
            f.len(),
            l3 + total,
            "the reply ends where its IP packet does"
        );
        assert!(checksum::verify(0, &f[l3..l3 + 20]), "header checksum");
        assert!(checksum::verify(0, &f[l4..]), "ICMP checksum");
        assert_eq!(f[l4], 0);
    } else {
        let plen = usize::from(u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]));
        assert_eq!(
            f.len(),
            l3 + 40 + plen,
            "the reply ends where its IP packet does"
        );
        let a = |at: usize| <[u8; 16]>::try_from(&f[at..at + 16]).unwrap();
        let pseudo = checksum::pseudo_v6(a(l3 + 8), a(l3 + 24), 58, (f.len() - l4) as u32);
        assert!(checksum::verify(pseudo, &f[l4..]), "ICMPv6 checksum");
        assert_eq!(f[l4], 129);
    }
    let want: Vec<u8> = [&e.ident.to_be_bytes()[..], &e.seq.to_be_bytes(), &e.data].concat();
    assert_eq!(
        &f[l4 + 4..],
        &want[..],
        "identifier, sequence and data echoed"
    );
}

fn answered(r: &Respond, e: &Echo) {
    let (out, g) = run(r, &e.build());
    assert_eq!(out, Outcome::Reply, "{e:?}");
    check_reply(e, &g);
}

#[test]
fn declines_echo_requests_with_bad_checksums() {
    let r = responder();
    for e in [
        Echo::new("192.0.2.50", "192.0.2.1"),
        Echo::new("2001:db8::50", "2001:db8::1"),
    ] {
        answered(&r, &e);
        let good = e.build();
        let l4 = usize::from(parse_frame(&good).l4_offset);
        // A data byte changed under the ICMP checksum.
        let mut f = good.clone();
        f[l4 + 12] ^= 0x40;
        declined(&r, &f, "bad ICMP checksum");
        // The checksum field itself off by one.
        let mut f = good.clone();
        f[l4 + 3] = f[l4 + 3].wrapping_add(1);
        declined(&r, &f, "bad ICMP checksum field");
    }
    // IPv4: a header checksum that does not match (TTL changed under it).
    let e = Echo::new("192.0.2.50", "192.0.2.1");
    let mut f = e.build();
    f[e.l3() + 8] -= 1;
    declined(&r, &f, "bad IPv4 header checksum");
}

#[test]
fn declines_group_and_unspecified_sources() {
    let r = responder();
    for src in ["0.0.0.0", "255.255.255.255", "224.0.0.1", "239.255.255.250"] {
        declined(&r, &Echo::new(src, "192.0.2.1").build(), src);
    }
    for src in ["::", "ff02::1", "ff0e::1:3"] {
        declined(&r, &Echo::new(src, "2001:db8::1").build(), src);
    }
    let group_macs = [
        [0xff; 6],
        [0x01, 0, 0x5e, 0, 0, 1],
        [0x33, 0x33, 0, 0, 0, 1],
    ];
    for mac in group_macs {
        for (s, d) in [("192.0.2.50", "192.0.2.1"), ("2001:db8::50", "2001:db8::1")] {
            let mut e = Echo::new(s, d);
            e.eth_src = mac;
            declined(&r, &e.build(), &format!("Ethernet source {mac:02x?}"));
        }
        let mut a = Arp::request([192, 0, 2, 50], [192, 0, 2, 1]);
        a.eth_src = mac;
        declined(&r, &a.build(), &format!("ARP, Ethernet source {mac:02x?}"));
        let mut a = Arp::request([192, 0, 2, 50], [192, 0, 2, 1]);
        a.sender_hw = mac;
        declined(&r, &a.build(), &format!("ARP, sender hardware {mac:02x?}"));
    }
    // An ARP Announcement of our address (sender IP = target IP, RFC 5227 2.3) asks nothing.
    for sip in [
        [255, 255, 255, 255],
        [224, 0, 0, 251],
        [239, 1, 2, 3],
        [192, 0, 2, 1],
    ] {
        let a = Arp::request(sip, [192, 0, 2, 1]);
        declined(&r, &a.build(), &format!("ARP, sender {sip:?}"));
    }
}

#[test]
fn answers_arp_probes_to_the_sender_hardware_address() {
    let r = responder();
    // RFC 5227 2.1.1: a probe's sender IP is 0.0.0.0; the owner answers (RFC 826), and the
    // reply's target is the prober: its hardware address and 0.0.0.0. The Ethernet source
    // differs from the sender hardware address: RFC 826 sends to the latter.
    let mut a = Arp::request([0, 0, 0, 0], [192, 0, 2, 1]);
    a.eth_src = [0x02, 0, 0, 0, 0, 0x55];
    let (out, f) = run(&r, &a.build());
    assert_eq!(out, Outcome::Reply);
    assert_eq!(&f[..12], &[REQUESTER_MAC, MAC].concat()[..]);
    let rep = arp::Repr::parse(&arp::Packet::new_checked(&f[14..]).unwrap()).unwrap();
    assert_eq!(
        rep,
        arp::Repr {
            oper: 2,
            sender_hw: MAC,
            sender_ip: [192, 0, 2, 1],
            target_hw: REQUESTER_MAC,
            target_ip: [0, 0, 0, 0],
        }
    );
    assert_eq!(f.len(), 14 + 28, "no padding after the ARP packet");
    assert_eq!(r.counters(), [1, 0, 0]);
}

#[test]
fn declines_ipv6_requests_routed_on() {
    let r = responder();
    for hbh in [false, true] {
        let mut e = Echo::new("2001:db8::50", "2001:db8::1");
        e.hop_by_hop = hbh;
        e.routing = Some(0);
        // Segments left 0: we are the final destination.
        answered(&r, &e);
        for left in [1, 2] {
            e.routing = Some(left);
            declined(
                &r,
                &e.build(),
                &format!("segments left {left}, hop-by-hop {hbh}"),
            );
        }
    }
}

#[test]
fn replies_carry_no_padding_and_lengths_past_the_frame_are_declined() {
    let r = responder();
    for (s, d) in [("192.0.2.50", "192.0.2.1"), ("2001:db8::50", "2001:db8::1")] {
        for (data, padding, vlan) in [(32, 20, None), (0, 18, None), (3, 5, Some(7))] {
            let mut e = Echo::new(s, d);
            e.data = (0..data).map(|i| i as u8 ^ 0x5a).collect();
            e.padding = padding;
            e.vlan = vlan;
            answered(&r, &e);
        }
        // A length field 2 bytes past the frame (the IPv4 header checksum fixed to match).
        let e = Echo::new(s, d);
        let mut f = e.build();
        let at = e.l3() + if e.src.is_ipv4() { 2 } else { 4 };
        let n = u16::from_be_bytes([f[at], f[at + 1]]) + 2;
        f[at..at + 2].copy_from_slice(&n.to_be_bytes());
        if e.src.is_ipv4() {
            let l3 = e.l3();
            f[l3 + 10..l3 + 12].fill(0);
            let c = checksum::checksum(&f[l3..l3 + 20]);
            f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        declined(&r, &f, &format!("{s}: IP length past the frame"));
    }
}
