//! Aging, the sweep and flow records: expiry at last seen + timeout (per protocol and state),
//! lazy reclaim on a bucket visit, `sweep` bounded by `max` and resuming where it stopped, and
//! the records' per-direction counts, flags and orientation; UDP and ICMP pseudo-states.

mod common;

use common::*;
use pktwarp_flow::testgen;
use pktwarp_flow::{ct, outcome, FlowTable, Timeouts};

const SEC: u64 = 1_000_000_000;

#[test]
fn a_record_counts_each_direction_from_the_original_sender() {
    let mut t = FlowTable::new(64, Timeouts::default()).unwrap();
    // The server's address sorts first, so the original direction (client -> server) is b -> a.
    let (c, s) = (ep("10.0.0.9", 40000), ep("10.0.0.1", 80));
    let frames = [
        seg(c, s, "S", 1, 0, 0),
        seg(s, c, "SA", 1, 2, 0),
        seg(c, s, "A", 2, 2, 0),
        seg(c, s, "PA", 2, 2, 100),
        seg(s, c, "FA", 2, 102, 0),
    ];
    for (i, f) in frames.iter().enumerate() {
        let r = t.apply(&parse(f), f, SEC * (1 + i as u64));
        assert_eq!(r.dir, [0, 1, 0, 0, 1][i]);
    }
    let r = t.records().next().unwrap();
    assert_eq!(r.src, ([0x0a00_0009, 0, 0, 0], 40000));
    assert_eq!(r.dst, ([0x0a00_0001, 0, 0, 0], 80));
    assert_eq!(r.packets, [3, 2]);
    assert_eq!(r.bytes, [40 + 40 + 140, 40 + 40]);
    assert_eq!(r.tcp_flags, [0x02 | 0x10 | 0x08, 0x12 | 0x01]);
    assert_eq!((r.first_seen_ns, r.last_seen_ns), (SEC, 5 * SEC));
    assert!(r.replied && r.assured);
}

#[test]
fn flows_expire_at_last_seen_plus_their_timeout_and_sweep_reports_them() {
    let to = Timeouts {
        udp_unreplied: 30,
        udp_replied: 120,
        icmp: 30,
        tcp_syn_sent: 120,
        ..Timeouts::default()
    };
    let mut t = FlowTable::new(1024, to).unwrap();
    let (c, s) = (ep(C, 1000), ep(S, 53));
    let udp1 = testgen::udp_frame(None, c, s, 10);
    let rep = testgen::udp_frame(None, s, c, 10);
    let udp2 = testgen::udp_frame(None, ep(C, 1001), s, 10);
    let syn = seg(ep(C, 1002), ep(S, 80), "S", 1, 0, 0);
    let ping = testgen::echo_frame(None, v4(C), v4(S), true, 7, 1);
    let pong = testgen::echo_frame(None, v4(S), v4(C), false, 7, 1);
    let mut cts = Vec::new();
    for f in [&udp1, &rep, &udp2, &syn, &ping, &pong] {
        cts.push(t.apply(&parse(f), f, 10 * SEC).ct_state);
    }
    assert_eq!(
        cts,
        [
            ct::NEW,
            ct::ESTABLISHED,
            ct::NEW,
            ct::NEW,
            ct::NEW,
            ct::ESTABLISHED
        ]
    );
    assert_eq!(t.len(), 4);
    let mut out = Vec::new();
    // One ns before 30 s of idleness: nothing; at 30 s the unreplied UDP and the ICMP flows.
    assert_eq!(t.sweep(40 * SEC - 1, 100, &mut out), 0);
    assert_eq!(t.sweep(40 * SEC, 100, &mut out), 2);
    let mut ports: Vec<u16> = out.iter().map(|r| r.src.1).collect();
    ports.sort();
    assert_eq!(ports, [7, 1001]);
    // The replied UDP flow lives 120 s, the SYN 120 s.
    assert_eq!(t.sweep(130 * SEC - 1, 100, &mut out), 0);
    assert_eq!(t.sweep(130 * SEC, 100, &mut out), 2);
    assert!(t.is_empty());
    assert_eq!(t.counters().expired, 4);
}

#[test]
fn sweep_stops_at_max_and_resumes() {
    let mut t = FlowTable::new(256, Timeouts::default()).unwrap();
    for p in 0..100u16 {
        let f = testgen::udp_frame(None, ep(C, 2000 + p), ep(S, 53), 1);
        t.apply(&parse(&f), &f, SEC);
    }
    let n = t.len();
    assert!(n > 90, "{n}");
    let mut out = Vec::new();
    let mut total = 0;
    for _ in 0..100 {
        let k = t.sweep(100 * SEC, 7, &mut out);
        assert!(k <= 7);
        total += k;
        if k == 0 {
            break;
        }
    }
    assert_eq!(total, n);
    assert_eq!(out.len(), n);
    assert!(t.is_empty());
}

#[test]
fn an_expired_flow_is_reclaimed_when_its_bucket_is_visited_and_starts_anew() {
    let mut t = FlowTable::new(8, Timeouts::default()).unwrap();
    let (c, s) = (ep(C, 1000), ep(S, 53));
    let req = testgen::udp_frame(None, c, s, 10);
    let rep = testgen::udp_frame(None, s, c, 10);
    assert_eq!(t.apply(&parse(&req), &req, SEC).ct_state, ct::NEW);
    assert_eq!(
        t.apply(&parse(&rep), &rep, 2 * SEC).ct_state,
        ct::ESTABLISHED
    );
    // 120 s after the reply (replied timeout): the reply now opens a new flow, as original.
    let r = t.apply(&parse(&rep), &rep, 122 * SEC);
    assert_eq!(
        (r.ct_state, r.dir, r.outcome),
        (ct::NEW, 0, outcome::TRACKED)
    );
    assert_eq!(t.counters().expired, 1);
    assert_eq!(t.counters().created, 2);
    assert_eq!(t.records().next().unwrap().packets, [1, 0]);
}

#[test]
fn untracked_and_invalid_frames_are_counted_and_make_no_flow() {
    let mut t = FlowTable::new(64, Timeouts::default()).unwrap();
    let (c, s) = (ep(C, 1000), ep(S, 53));
    let mut truncated = seg(c, s, "S", 1, 0, 0);
    truncated.truncate(14 + 20 + 10);
    let frames = [
        (testgen::arp_frame(), outcome::UNTRACKED),
        (testgen::fragment_frame(c, s, true), outcome::UNTRACKED),
        (testgen::fragment_frame(c, s, false), outcome::UNTRACKED),
        (
            testgen::echo_frame(None, v4(S), v4(C), false, 1, 1),
            outcome::INVALID,
        ),
        (truncated, outcome::INVALID),
    ];
    for (f, want) in &frames {
        let r = t.apply(&parse(f), f, SEC);
        assert_eq!(r.outcome, *want, "{f:02x?}");
    }
    assert!(t.is_empty());
    assert_eq!((t.counters().untracked, t.counters().invalid), (3, 2));
}

#[test]
fn the_same_five_tuple_in_two_vlans_is_two_flows() {
    let mut t = FlowTable::new(64, Timeouts::default()).unwrap();
    let (c, s) = (ep(C, 1000), ep(S, 53));
    for vlan in [None, Some(10), Some(20), Some(10)] {
        let f = testgen::udp_frame(vlan, c, s, 10);
        t.apply(&parse(&f), &f, SEC);
    }
    let mut zones: Vec<u16> = t.records().map(|r| r.key.zone).collect();
    zones.sort();
    assert_eq!(zones, [0, 10, 20]);
}

#[test]
fn icmp_errors_about_a_flow_are_related_and_change_nothing() {
    for (c_ip, s_ip) in [("10.0.0.1", "10.0.0.2"), ("2001:db8::1", "2001:db8::2")] {
        let mut t = FlowTable::new(64, Timeouts::default()).unwrap();
        let (c, s) = (ep(c_ip, 1000), ep(s_ip, 53));
        let req = testgen::udp_frame(None, c, s, 10);
        t.apply(&parse(&req), &req, SEC);
        let before: Vec<_> = t.records().collect();
        // From the server (or a router on the way) back to the client: the reply direction.
        let err = testgen::icmp_error_frame(s.0, c.0, &req);
        let r = t.apply(&parse(&err), &err, 2 * SEC);
        assert_eq!(
            (r.ct_state, r.dir, r.outcome),
            (ct::RELATED, 1, outcome::TRACKED),
            "{c_ip}"
        );
        assert_eq!(t.records().collect::<Vec<_>>(), before, "the flow changed");
        // Quoting a packet of the reply direction: related, original direction.
        let rep = testgen::udp_frame(None, s, c, 10);
        let err = testgen::icmp_error_frame(c.0, s.0, &rep);
        let r = t.apply(&parse(&err), &err, 2 * SEC);
        assert_eq!((r.ct_state, r.dir), (ct::RELATED, 0));
        // About no flow: invalid; quoting an ICMP error: untracked; cut quote: invalid.
        let other = testgen::udp_frame(None, c, ep(s_ip, 54), 10);
        let err = testgen::icmp_error_frame(s.0, c.0, &other);
        assert_eq!(
            t.apply(&parse(&err), &err, 2 * SEC).outcome,
            outcome::INVALID
        );
        let nested = testgen::icmp_error_frame(c.0, s.0, &err);
        assert_eq!(
            t.apply(&parse(&nested), &nested, 2 * SEC).outcome,
            outcome::UNTRACKED
        );
        let mut cut = testgen::icmp_error_frame(s.0, c.0, &req);
        let ip_end = if c_ip.contains(':') {
            14 + 40 + 8 + 40 + 2
        } else {
            14 + 20 + 8 + 20 + 2
        };
        cut.truncate(ip_end);
        if !c_ip.contains(':') {
            // Keep the outer IPv4 length consistent with the cut frame (else parse rejects it).
            let tl = (cut.len() - 14) as u16;
            cut[16..18].copy_from_slice(&tl.to_be_bytes());
        } else {
            let pl = (cut.len() - 54) as u16;
            cut[18..20].copy_from_slice(&pl.to_be_bytes());
        }
        let m = parse(&cut);
        assert_eq!(
            t.apply(&m, &cut, 2 * SEC).outcome,
            outcome::INVALID,
            "{c_ip} cut: {m:?}"
        );
        assert_eq!(t.counters().invalid, 2);
    }
}
