//! Flowbits and thresholds on crafted frame sequences, against Suricata's documented
//! semantics: docs.suricata.io, "Flow Keywords" (flowbits: set, isset, isnotset, toggle, unset,
//! noalert; `|` an OR of names for isset / isnotset) and "Thresholding Keywords" (threshold
//! type limit / threshold / both, track by_src / by_dst, count, seconds; detection_filter).

use super::*;
use crate::eval::program::Program;
use crate::eval::{matching, Frame};
use crate::rules::{parse_rule, Variables};

const SEC: u64 = 1_000_000_000;

fn rules(opts: &[&str]) -> (Program, Stateful) {
    let parsed: Vec<Rule> = opts
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let text = format!("alert tcp any any -> any any ({o} sid:{};)", i + 1);
            let r = parse_rule(&text, &Variables::default()).unwrap();
            assert!(r.blockers_with(true).is_empty(), "{text}");
            r
        })
        .collect();
    let mut p = Program::new();
    for r in &parsed {
        p.add(r).unwrap();
    }
    let refs: Vec<&Rule> = parsed.iter().collect();
    (p, Stateful::new(&refs, StateConfig::default()))
}

fn frame<'a>(
    src: &str,
    sport: u16,
    dst: &str,
    dport: u16,
    dir: u8,
    payload: &'a [u8],
) -> Frame<'a> {
    Frame {
        ip_proto: 6,
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        src_port: sport,
        dst_port: dport,
        tcp_flags: 0x18,
        icmp_type: 0,
        icmp_code: 0,
        ct_state: 2,
        ct_dir: dir,
        payload,
        http: None,
    }
}

fn req(payload: &[u8]) -> Frame<'_> {
    frame("10.0.0.1", 40000, "10.0.0.2", 80, 1, payload)
}

fn resp(payload: &[u8]) -> Frame<'_> {
    frame("10.0.0.2", 80, "10.0.0.1", 40000, 2, payload)
}

/// sids that fire on `f` at `t` seconds.
fn fire(p: &Program, s: &mut Stateful, f: &Frame, t: u64) -> Vec<u32> {
    let m = matching(p, f);
    s.apply(f, t * SEC, &m)
        .into_iter()
        .map(|i| p.rules[i].sid)
        .collect()
}

#[test]
fn set_then_isset_across_directions_and_noalert() {
    // The docs' example: a login sets the bit (noalert), a later reply on the flow alerts.
    let (p, mut s) = rules(&[
        r#"content:"USER"; flowbits:set,logged_in; flowbits:noalert;"#,
        r#"content:"OK"; flowbits:isset,logged_in;"#,
    ]);
    assert_eq!(fire(&p, &mut s, &resp(b"OK"), 0), Vec::<u32>::new());
    assert_eq!(fire(&p, &mut s, &req(b"USER x"), 1), Vec::<u32>::new());
    assert_eq!(fire(&p, &mut s, &resp(b"OK"), 2), [2]);
    // Another flow (other client port) has its own bits.
    let other = frame("10.0.0.2", 80, "10.0.0.1", 40001, 2, b"OK");
    assert_eq!(fire(&p, &mut s, &other, 3), Vec::<u32>::new());
    assert_eq!(s.flows(), 1);
    assert_eq!(s.counters().suppressed, 1);
}

#[test]
fn a_setter_runs_before_a_reader_in_the_same_frame() {
    // The reader comes first in the file; Suricata orders setters before readers.
    let (p, mut s) = rules(&[
        r#"content:"A"; flowbits:isset,x;"#,
        r#"content:"A"; flowbits:set,x;"#,
    ]);
    assert_eq!(fire(&p, &mut s, &req(b"A"), 0), [1, 2]);
}

#[test]
fn unset_toggle_isnotset_and_or_groups() {
    let (p, mut s) = rules(&[
        r#"content:"S"; flowbits:set,a;"#,
        r#"content:"U"; flowbits:unset,a;"#,
        r#"content:"T"; flowbits:toggle,b;"#,
        r#"content:"?"; flowbits:isnotset,a;"#,
        r#"content:"?"; flowbits:isset,a|b;"#,
        r#"content:"?"; flowbits:isnotset,a|b;"#,
    ]);
    let q = |s: &mut Stateful, t| fire(&p, s, &req(b"?"), t);
    // Nothing set: isnotset a, isnotset a|b (any not set).
    assert_eq!(q(&mut s, 0), [4, 6]);
    fire(&p, &mut s, &req(b"S"), 1);
    assert_eq!(q(&mut s, 2), [5, 6]);
    fire(&p, &mut s, &req(b"T"), 3);
    // a and b set: isset a|b only.
    assert_eq!(q(&mut s, 4), [5]);
    fire(&p, &mut s, &req(b"U"), 5);
    assert_eq!(q(&mut s, 6), [4, 5, 6]);
    fire(&p, &mut s, &req(b"T"), 7);
    assert_eq!(q(&mut s, 8), [4, 6]);
}

#[test]
fn flowbits_need_a_tracked_flow() {
    let (p, mut s) = rules(&[r#"content:"S"; flowbits:set,a;"#, r#"flowbits:isnotset,a;"#]);
    let untracked = frame("10.0.0.1", 1, "10.0.0.2", 2, 0, b"S");
    assert_eq!(fire(&p, &mut s, &untracked, 0), Vec::<u32>::new());
    assert_eq!(s.flows(), 0);
}

#[test]
fn the_flow_table_is_bounded_and_counts_what_does_not_fit() {
    let parsed = parse_rule(
        r#"alert tcp any any -> any any (flowbits:set,a; sid:1;)"#,
        &Variables::default(),
    )
    .unwrap();
    let mut p = Program::new();
    p.add(&parsed).unwrap();
    let cfg = StateConfig {
        max_flows: 2,
        flow_idle_ns: 10 * SEC,
        ..StateConfig::default()
    };
    let mut s = Stateful::new(&[&parsed], cfg);
    for port in 1..=3 {
        fire(
            &p,
            &mut s,
            &frame("10.0.0.1", port, "10.0.0.2", 80, 1, b""),
            0,
        );
    }
    assert_eq!((s.flows(), s.counters().flows_full), (2, 1));
    // After the idle time, old flows make room.
    fire(
        &p,
        &mut s,
        &frame("10.0.0.1", 9, "10.0.0.2", 80, 1, b""),
        20,
    );
    assert_eq!((s.flows(), s.counters().flows_full), (1, 1));
}

/// Alerts (by second) of one rule hit once a second at `times`, from one source.
fn alerts(opts: &str, times: &[u64]) -> Vec<u64> {
    let (p, mut s) = rules(&[opts]);
    times
        .iter()
        .copied()
        .filter(|&t| !fire(&p, &mut s, &req(b"x"), t).is_empty())
        .collect()
}

#[test]
fn threshold_types() {
    let t: Vec<u64> = (0..8).collect();
    // limit: the first `count` matches of each window.
    assert_eq!(
        alerts(
            "threshold:type limit, track by_src, count 2, seconds 60;",
            &t
        ),
        [0, 1]
    );
    // threshold: every count-th match in the window.
    assert_eq!(
        alerts(
            "threshold:type threshold, track by_src, count 3, seconds 60;",
            &t
        ),
        [2, 5]
    );
    // both: once per window, at the count-th match.
    assert_eq!(
        alerts(
            "threshold: type both, track by_dst, count 3, seconds 60;",
            &t
        ),
        [2]
    );
    // detection_filter: every match after the first count in the window.
    assert_eq!(
        alerts("detection_filter:track by_src, count 5, seconds 60;", &t),
        [5, 6, 7]
    );
    // count 1: every match, in every window.
    assert_eq!(
        alerts(
            "threshold:type threshold, track by_src, count 1, seconds 2;",
            &[0, 1, 5, 6]
        ),
        [0, 1, 5, 6]
    );
    // both, count 2, 2 s windows: the second match of each window.
    assert_eq!(
        alerts(
            "threshold:type both, track by_src, count 2, seconds 2;",
            &[0, 1, 2, 3, 4, 5]
        ),
        [1, 4]
    );
    // detection_filter count 1, 2 s windows: from the second match of each window.
    assert_eq!(
        alerts(
            "detection_filter:track by_src, count 1, seconds 2;",
            &[0, 1, 2, 3, 4]
        ),
        [1, 2, 4]
    );
    // A new window starts when the old one has passed: limit 1 per 3 s.
    let ts = [0, 1, 3, 4, 5, 9];
    assert_eq!(
        alerts(
            "threshold:type limit, track by_src, count 1, seconds 3;",
            &ts
        ),
        [0, 4, 9]
    );
}

#[test]
fn threshold_tracks_by_source_or_destination() {
    let (p, mut s) = rules(&["threshold:type limit, track by_src, count 1, seconds 60;"]);
    let a = frame("10.0.0.1", 1, "10.0.0.9", 2, 1, b"");
    let b = frame("10.0.0.3", 1, "10.0.0.9", 2, 1, b"");
    assert_eq!(fire(&p, &mut s, &a, 0), [1]);
    assert_eq!(fire(&p, &mut s, &a, 1), Vec::<u32>::new());
    assert_eq!(fire(&p, &mut s, &b, 2), [1]);
    let (p, mut s) = rules(&["threshold:type limit, track by_dst, count 1, seconds 60;"]);
    assert_eq!(fire(&p, &mut s, &a, 0), [1]);
    assert_eq!(fire(&p, &mut s, &b, 1), Vec::<u32>::new());
}

#[test]
fn tracker_table_is_bounded() {
    let parsed = parse_rule(
        "alert tcp any any -> any any (threshold:type limit, track by_src, count 1, seconds 60; sid:1;)",
        &Variables::default(),
    )
    .unwrap();
    let mut p = Program::new();
    p.add(&parsed).unwrap();
    let cfg = StateConfig {
        max_trackers: 2,
        ..StateConfig::default()
    };
    let mut s = Stateful::new(&[&parsed], cfg);
    for i in 1..=3 {
        let src = format!("10.0.0.{i}");
        assert_eq!(
            fire(&p, &mut s, &frame(&src, 1, "10.0.0.9", 2, 1, b""), 0),
            [1]
        );
    }
    assert_eq!(s.counters().trackers_full, 1);
}

#[test]
fn a_sweep_keeps_counters_inside_their_own_window() {
    // Rule 1 counts over 100 s, rule 2 over 1 s; a table of 2 counters.
    let parsed: Vec<Rule> = [
        "content:\"A\"; threshold:type limit, track by_src, count 1, seconds 100;",
        "content:\"B\"; threshold:type limit, track by_src, count 1, seconds 1;",
    ]
    .iter()
    .enumerate()
    .map(|(i, o)| {
        let t = format!("alert tcp any any -> any any ({o} sid:{};)", i + 1);
        parse_rule(&t, &Variables::default()).unwrap()
    })
    .collect();
    let mut p = Program::new();
    parsed.iter().for_each(|r| {
        p.add(r).unwrap();
    });
    let cfg = StateConfig {
        max_trackers: 2,
        ..StateConfig::default()
    };
    let mut s = Stateful::new(&parsed.iter().collect::<Vec<_>>(), cfg);
    let ab = frame("10.0.0.1", 1, "10.0.0.9", 2, 1, b"AB");
    let a = frame("10.0.0.1", 1, "10.0.0.9", 2, 1, b"A");
    let b = frame("10.0.0.3", 1, "10.0.0.9", 2, 1, b"B");
    assert_eq!(fire(&p, &mut s, &ab, 0), [1, 2]);
    // At 10 s the table is full; b's rule-2 counter sweeps it: rule 2's counter for a (1 s)
    // has expired and goes, rule 1's (100 s) stays, so a may not fire rule 1 again at 11 s.
    assert_eq!(fire(&p, &mut s, &b, 10), [2]);
    assert_eq!(s.counters().trackers_full, 0);
    assert_eq!(fire(&p, &mut s, &a, 11), Vec::<u32>::new());
}

#[test]
fn the_gpu_image_takes_stateful_rules_and_the_section_encodes_their_state() {
    let (p, s) = rules(&[
        "flowbits:isset,a|b; flowbits:set,c; detection_filter:track by_dst, count 2, seconds 5; \
         threshold:type both, track by_src, count 3, seconds 7;",
        "flow:established,to_server;",
        "flowbits:set,a; flowbits:noalert;",
    ]);
    assert!(p.image().is_ok());
    let w = s.gpu_section().unwrap();
    assert_eq!(&w[..4], &[3, 4, 0, 19]);
    // Rule 0: reads and writes (class 1), 2 flowbits keywords, 2 filters (detection_filter
    // first: kind 3, by_dst 1), then isset (3) of names a (0) | b (1), set (0) of c (2).
    assert_eq!(
        &w[4..19],
        &[
            1 | 2 << 16,
            2,
            3,
            1,
            2,
            5,
            2,
            0,
            3,
            7,
            3 | 2 << 8,
            0,
            1,
            1 << 8,
            2
        ]
    );
    // Rule 2: writes only (class 0), noalert, set a, then the noalert keyword (5, no names).
    assert_eq!(&w[19..], &[1 << 8 | 2 << 16, 0, 1 << 8, 0, 5]);
    assert!(!s.has_state(1) && s.has_state(2));
}

#[test]
fn actions_apply_where_suricata_applies_them() {
    // Per match, in one window: (fired, acted) for each option set (docs.suricata.io,
    // "Thresholding Keywords": limit and both apply the action past the alert; threshold and
    // detection_filter only where they alert; noalert suppresses the alert only).
    let cases: [(&str, [(bool, bool); 4]); 5] = [
        (
            "threshold:type limit, track by_src, count 1, seconds 60;",
            [(true, true), (false, true), (false, true), (false, true)],
        ),
        (
            "threshold:type both, track by_src, count 2, seconds 60;",
            [(false, false), (true, true), (false, true), (false, true)],
        ),
        (
            "threshold:type threshold, track by_src, count 2, seconds 60;",
            [(false, false), (true, true), (false, false), (true, true)],
        ),
        (
            "detection_filter:track by_src, count 2, seconds 60;",
            [(false, false), (false, false), (true, true), (true, true)],
        ),
        (
            "flowbits:noalert;",
            [(false, true), (false, true), (false, true), (false, true)],
        ),
    ];
    for (opts, want) in cases {
        let (_, mut s) = rules(&[opts]);
        let got: Vec<(bool, bool)> = (0..4u64)
            .map(|k| {
                let a = s.apply_actions(&req(b"x"), (k + 1) * SEC, &[0]);
                (a.fired == [0], a.acted == [0])
            })
            .collect();
        assert_eq!(got, want, "{opts}");
    }
}
