//! Flow export's view of the table: the flows that end inside `apply` (reclaimed on a bucket
//! visit, evicted for a new flow, reopened by a SYN) are kept with their cause while reporting
//! is on, never when it is off, and at most `ENDED_CAP`; `sweep_buckets` removes the expired
//! entries of the buckets it visits and hands every live one to its callback.

mod common;

use common::*;
use pktwarp_flow::testgen;
use pktwarp_flow::{Ended, FlowTable, Timeouts, ENDED_CAP};

const SEC: u64 = 1_000_000_000;

fn udp(i: u32) -> Vec<u8> {
    let src = (
        std::net::IpAddr::from([10, 0, (i >> 8) as u8, i as u8]),
        5000,
    );
    testgen::udp_frame(None, src, ep("192.0.2.1", 53), 10)
}

fn take(t: &mut FlowTable) -> Vec<(pktwarp_flow::FlowRecord, Ended)> {
    let mut v = Vec::new();
    t.take_ended(&mut v);
    v
}

#[test]
fn evicted_expired_and_reopened_flows_are_kept_with_their_cause() {
    // One bucket of 8: the ninth unreplied flow evicts the least recently seen.
    let mut t = FlowTable::new(8, Timeouts::default()).unwrap();
    t.report_ended(true);
    for i in 0..9u32 {
        let f = udp(i);
        t.apply(&parse(&f), &f, SEC * (1 + u64::from(i)));
    }
    let ended = take(&mut t);
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0].1, Ended::Evicted);
    assert_eq!(ended[0].0.src.0[0], 0x0a00_0000, "flow 0 was the oldest");
    assert_eq!(ended[0].0.packets, [1, 0]);
    assert!(take(&mut t).is_empty(), "taken once");
    // 31 s after the last (udp_unreplied 30 s): every flow of the bucket expires on a visit.
    let f = udp(100);
    t.apply(&parse(&f), &f, SEC * 40);
    let ended = take(&mut t);
    assert_eq!(ended.len(), 8);
    assert!(ended.iter().all(|e| e.1 == Ended::Expired));
    // A closed TCP connection reopened by a SYN: the old flow ended with its counts.
    let mut t = FlowTable::new(64, Timeouts::default()).unwrap();
    t.report_ended(true);
    let (c, s) = (ep("10.0.0.9", 40000), ep("10.0.0.1", 80));
    for (k, f) in [
        seg(c, s, "S", 1, 0, 0),
        seg(s, c, "SA", 1, 2, 0),
        seg(c, s, "A", 2, 2, 0),
        seg(c, s, "R", 2, 2, 0),
        seg(c, s, "S", 100, 0, 0),
    ]
    .iter()
    .enumerate()
    {
        t.apply(&parse(f), f, SEC * (1 + k as u64));
    }
    let ended = take(&mut t);
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0].1, Ended::Reopened);
    assert_eq!(ended[0].0.packets, [3, 1]);
    assert_eq!(t.records().next().unwrap().packets, [1, 0], "the new flow");
}

#[test]
fn nothing_is_kept_when_reporting_is_off_and_at_most_the_cap_when_on() {
    let mut t = FlowTable::new(8, Timeouts::default()).unwrap();
    for i in 0..20u32 {
        let f = udp(i);
        t.apply(&parse(&f), &f, SEC);
    }
    assert!(take(&mut t).is_empty());
    assert_eq!(t.counters().early_evicted, 12);
    t.report_ended(true);
    let n = ENDED_CAP as u32 + 10;
    for i in 0..n {
        let f = udp(1000 + i);
        t.apply(&parse(&f), &f, SEC);
    }
    assert_eq!(take(&mut t).len(), ENDED_CAP);
    assert_eq!(t.ended_lost(), 10);
    t.report_ended(false);
    let f = udp(7);
    t.apply(&parse(&f), &f, SEC);
    assert!(take(&mut t).is_empty());
}

#[test]
fn sweep_buckets_removes_the_expired_and_shows_the_live_and_resumes() {
    let mut t = FlowTable::new(64, Timeouts::default()).unwrap();
    for i in 0..20u32 {
        let f = udp(i);
        // Even flows at 1 s, odd ones at 20 s (udp_unreplied: 30 s, so no visit reclaims).
        let at = if i % 2 == 0 { SEC } else { 20 * SEC };
        t.apply(&parse(&f), &f, at);
    }
    assert_eq!(t.nbuckets(), 8);
    let (mut out, mut live) = (Vec::new(), 0);
    // 4 buckets, then the other 4: the second call goes on where the first stopped.
    let next = t.sweep_buckets(6, 4, 40 * SEC, |_| live += 1, &mut out);
    assert_eq!(next, 2);
    let next = t.sweep_buckets(next, 4, 40 * SEC, |_| live += 1, &mut out);
    assert_eq!(next, 6);
    assert_eq!((out.len(), live), (10, 10));
    assert!(out.iter().all(|r| r.last_seen_ns == SEC));
    assert_eq!(t.counters().expired, 10);
    assert_eq!(t.len(), 10);
    // The callback may change a live entry's counters (flow export's active timeout).
    t.sweep_buckets(0, 100, 40 * SEC, |e| e.packets = [0, 0], &mut out);
    assert!(t.records().all(|r| r.packets == [0, 0]));
}
