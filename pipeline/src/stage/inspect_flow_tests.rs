//! `inspect` after `conntrack`: `flow:` direction and state, flowbits across the packets of a
//! flow and a threshold on the frames' receive time, through the whole CPU pipeline. Expected
//! alerts from Suricata's documented semantics (docs.suricata.io, "Flow Keywords",
//! "Thresholding").

use super::*;
use crate::burst::{Burst, FrameDesc};
use crate::counters::QueueCounters;
use crate::stage::config::StageConfig;
use pktwarp_flow::testgen::{tcp_frame, Tcp};
use std::net::IpAddr;

const RULES: &str = "\
alert tcp any any -> any any (msg:\"get a\"; flow:established,to_server; content:\"GET /a\"; sid:1;)
alert tcp any any -> any any (msg:\"request\"; flow:established,to_server; content:\"GET /secret\"; flowbits:set,asked; flowbits:noalert; sid:2;)
alert tcp any any -> any any (msg:\"answer\"; flow:established,to_client; content:\"secret-data\"; flowbits:isset,asked; sid:3;)
alert tcp any any -> any any (msg:\"limited\"; flow:established,to_server; content:\"LIMIT\"; threshold:type limit, track by_src, count 1, seconds 60; sid:4;)
";

/// The receive time of the tests' first frame: 2023-11-14T22:13:20Z.
const T0_S: u64 = 1_700_000_000;

type Ep = (IpAddr, u16);

fn scratch(name: &str) -> PathBuf {
    scratch_with(name, RULES)
}

fn scratch_with(name: &str, rules: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pw-inspect-flow-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch folder");
    std::fs::write(d.join("flow.rules"), rules).expect("rules");
    d
}

fn inspect_cfg(dir: &Path) -> StageConfig {
    let yaml = format!(
        "- inspect:\n    rules: [\"{}\"]\n    eve: {{ path: \"{}\" }}\n",
        dir.join("*.rules").display(),
        dir.join("eve.json").display()
    );
    serde_saphyr::from_str::<Vec<StageConfig>>(&yaml)
        .expect("config")
        .remove(0)
}

fn conntrack_cfg() -> StageConfig {
    serde_saphyr::from_str::<Vec<StageConfig>>("- conntrack: { entries: 64 }\n")
        .expect("config")
        .remove(0)
}

fn build(stages: &[StageConfig]) -> crate::stage::Pipeline {
    crate::stage::build(stages, |x| x.to_path_buf()).expect("pipeline")
}

fn inspect_at(p: &crate::stage::Pipeline, i: usize) -> &crate::stage::CustomSlot {
    match &p.stages[i] {
        crate::stage::Stage::Custom(c) if c.name() == "inspect" => c,
        _ => panic!("stage {i} is inspect"),
    }
}

fn hook_ctx(i: usize) -> HookCtx {
    HookCtx {
        executor: "cpu",
        position: i,
    }
}

/// A TCP segment with `payload`; `seq` / `ack` as a real connection has them.
fn seg(src: Ep, dst: Ep, flags: u16, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
    let t = Tcp {
        flags,
        seq,
        ack,
        win: 65535,
        len: payload.len() as u16,
        wscale: None,
    };
    let mut f = tcp_frame(None, src, dst, t);
    // Ethernet, IPv4 and TCP headers without options; a short frame is padded after.
    f[54..54 + payload.len()].copy_from_slice(payload);
    f
}

/// A connection's frames: the handshake, then `talk` (to the server when true, payload).
/// Each gets its receive time in seconds after [`T0_S`] from `at`.
fn connection(
    client: Ep,
    server: Ep,
    talk: &[(bool, &[u8])],
    at: &mut impl Iterator<Item = u64>,
) -> Vec<(u64, Vec<u8>)> {
    const SYN: u16 = 0x02;
    const ACK: u16 = 0x10;
    const PSH_ACK: u16 = 0x18;
    let (mut cs, mut ss) = (1000u32, 5000u32);
    let mut out = vec![
        (at.next().unwrap(), seg(client, server, SYN, cs, 0, b"")),
        (
            at.next().unwrap(),
            seg(server, client, SYN | ACK, ss, cs + 1, b""),
        ),
    ];
    cs += 1;
    ss += 1;
    out.push((at.next().unwrap(), seg(client, server, ACK, cs, ss, b"")));
    for (to_server, payload) in talk {
        let n = payload.len() as u32;
        let f = if *to_server {
            cs += n;
            seg(client, server, PSH_ACK, cs - n, ss, payload)
        } else {
            ss += n;
            seg(server, client, PSH_ACK, ss - n, cs, payload)
        };
        out.push((at.next().unwrap(), f));
    }
    out
}

/// Runs `frames` (receive time in s after [`T0_S`], bytes) one burst each, in order; their
/// verdicts' actions.
fn run(p: &crate::stage::Pipeline, frames: &[(u64, Vec<u8>)]) -> Vec<Action> {
    run_on(p, 0, frames)
}

/// [`run`] on RX queue `queue`.
fn run_on(p: &crate::stage::Pipeline, queue: u16, frames: &[(u64, Vec<u8>)]) -> Vec<Action> {
    let q = QueueCounters::new(p.stages.len(), 0);
    let mut out = Vec::new();
    for (t, f) in frames {
        let mut b = Burst::default();
        let d = FrameDesc {
            len: f.len() as u32,
            wire_len: f.len() as u32,
            timestamp_ns: (T0_S + t) * 1_000_000_000,
            queue,
            ..FrameDesc::default()
        };
        b.push(f, d);
        let (mut m, mut v) = (Vec::new(), Vec::new());
        p.run_burst(&b, &mut m, &mut v, &q);
        out.push(v[0].action);
    }
    out
}

/// The EVE lines' (sid, timestamp).
fn eve(dir: &Path) -> Vec<(u64, String)> {
    let text = std::fs::read_to_string(dir.join("eve.json")).unwrap_or_default();
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("an EVE line is JSON");
            let sid = v["alert"]["signature_id"].as_u64().expect("sid");
            (sid, v["timestamp"].as_str().expect("timestamp").to_string())
        })
        .collect()
}

fn traffic() -> Vec<(u64, Vec<u8>)> {
    let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
    let srv = (ip("192.0.2.1"), 80);
    let (a, b) = ((ip("10.0.0.1"), 40000), (ip("10.0.0.2"), 40001));
    let mut at = 1..;
    let mut frames = connection(
        a,
        srv,
        &[
            // sids 1 and 4 (the first LIMIT of 10.0.0.1 in its window).
            (true, b"GET /a LIMIT"),
            // To the client: neither sid 1 (direction) nor sid 3 (no request seen yet).
            (false, b"GET /a secret-data"),
            // Sid 2 sets `asked` without alerting; sid 4 is past its limit.
            (true, b"GET /secret LIMIT"),
            // Sid 3: `asked` is set on this flow.
            (false, b"secret-data"),
        ],
        &mut at,
    );
    frames.extend(connection(
        b,
        srv,
        &[
            // Sids 1 and 4: another source, its own threshold window.
            (true, b"GET /a LIMIT"),
            // Nothing: this flow never asked.
            (false, b"secret-data"),
        ],
        &mut at,
    ));
    // 66 s after 10.0.0.1's first LIMIT: a new window, sid 4 fires again.
    frames.push((
        70,
        seg(a, srv, 0x18, 1001 + 12 + 17, 5001 + 18 + 11, b"LIMIT again"),
    ));
    frames
}

#[test]
fn flow_flowbits_and_threshold_run_after_conntrack() {
    let dir = scratch("with");
    let p = build(&[
        StageConfig::Parse,
        conntrack_cfg(),
        inspect_cfg(&dir),
        StageConfig::Count,
    ]);
    let c = inspect_at(&p, 2).cpu_arc();
    let lines = validate_lines(&p);
    assert_eq!(lines, ["pipeline[2] inspect: 4 rules loaded, 0 skipped"]);
    c.hooks().expect("hooks").start(&hook_ctx(2));
    run(&p, &traffic());
    c.hooks().expect("hooks").end(&hook_ctx(2));
    let got = eve(&dir);
    let sids: Vec<u64> = got.iter().map(|x| x.0).collect();
    assert_eq!(sids, [1, 4, 3, 1, 4, 4], "{got:?}");
    // The EVE timestamp is the frame's receive time (the 4th frame, T0 + 4 s), not the clock.
    assert_eq!(got[0].1, "2023-11-14T22:13:24.000000+0000");
    assert_eq!(got[5].1, "2023-11-14T22:14:30.000000+0000");
    let sec = c.summary_section().expect("summary");
    assert_eq!(sec["flow_table"], true);
    // Sid 2 (noalert) and sid 4's second match in its window (limit).
    assert_eq!(
        sec["state"],
        serde_json::json!({"flows_full": 0, "trackers_full": 0, "suppressed": 2})
    );
    let samples = c.metric_samples();
    assert!(
        samples.contains(&(1, vec!["suppressed".to_string()], 2.0)),
        "{samples:?}"
    );
    let hits = |sid: &str| {
        samples
            .iter()
            .find(|s| s.0 == 0 && s.1[0] == sid)
            .map_or(0.0, |s| s.2)
    };
    assert_eq!(
        (hits("1"), hits("2"), hits("3"), hits("4")),
        (2.0, 0.0, 1.0, 3.0)
    );
}

#[test]
fn without_conntrack_before_it_the_flow_rules_are_skipped() {
    let dir = scratch("without");
    let after = build(&[
        StageConfig::Parse,
        inspect_cfg(&dir),
        conntrack_cfg(),
        StageConfig::Count,
    ]);
    let none = build(&[StageConfig::Parse, inspect_cfg(&dir), StageConfig::Count]);
    for p in [&after, &none] {
        let lines = validate_lines(p);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].starts_with(
                "pipeline[1] inspect: 0 rules loaded, 4 skipped; 4 needs the flow table"
            ),
            "{lines:?}"
        );
        let c = inspect_at(p, 1).cpu_arc();
        assert_eq!(c.summary_section().expect("summary")["flow_table"], false);
        c.hooks().expect("hooks").start(&hook_ctx(1));
        run(p, &traffic());
        c.hooks().expect("hooks").end(&hook_ctx(1));
        assert_eq!(eve(&dir), []);
    }
}

#[test]
fn the_flow_table_is_not_a_config_key() {
    let dir = scratch("key");
    let yaml = format!(
        "- inspect:\n    rules: [\"{}\"]\n    flow_table: true\n",
        dir.join("*.rules").display()
    );
    let e = serde_saphyr::from_str::<Vec<StageConfig>>(&yaml).expect_err("unknown key");
    assert!(e.to_string().contains("flow_table"), "{e}");
    // The factory's own option refuses a value that is not a bool.
    let mut o = InspectStageConfig::from_options(&serde_json::json!({
        "rules": [dir.join("*.rules")],
    }))
    .expect("options")
    .with_flow_table(true)
    .options();
    o["conntrack_before"] = serde_json::json!("yes");
    let e = InspectStageConfig::from_options(&o).expect_err("not a bool");
    assert!(e.to_string().contains("conntrack_before"), "{e}");
}

#[test]
fn a_limited_drop_rule_drops_every_match_and_alerts_once() {
    let dir = scratch_with(
        "drop",
        "drop tcp any any -> any any (msg:\"drop limited\"; flow:established,to_server; \
         content:\"LIMIT\"; threshold:type limit, track by_src, count 1, seconds 60; sid:5;)\n",
    );
    let p = build(&[
        StageConfig::Parse,
        conntrack_cfg(),
        inspect_cfg(&dir),
        StageConfig::Count,
    ]);
    let c = inspect_at(&p, 2).cpu_arc();
    c.hooks().expect("hooks").start(&hook_ctx(2));
    let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
    let frames = connection(
        (ip("10.0.0.1"), 40000),
        (ip("192.0.2.1"), 80),
        &[(true, b"LIMIT 1"), (true, b"LIMIT 2"), (false, b"LIMIT 3")],
        &mut (1..),
    );
    let actions = run(&p, &frames);
    c.hooks().expect("hooks").end(&hook_ctx(2));
    // Suricata: a `limit` threshold applies a drop rule's action to every match, alerting
    // on the first `count` only; the server's LIMIT is not to_server.
    let (pass, drop) = (Action::Pass, Action::Drop);
    assert_eq!(actions, [pass, pass, pass, drop, drop, pass]);
    assert_eq!(eve(&dir).iter().map(|x| x.0).collect::<Vec<_>>(), [5]);
    assert_eq!(c.counters()[2], 2, "drops");
    assert_eq!(c.counters()[1], 1, "alerts");
}

#[test]
fn a_pass_rule_passes_only_where_its_flowbits_hold() {
    let dir = scratch_with(
        "pass",
        "alert tcp any any -> any any (msg:\"request\"; flow:established,to_server; \
         content:\"GET /secret\"; flowbits:set,asked; flowbits:noalert; sid:2;)\n\
         pass tcp any any -> any any (msg:\"asked for\"; flow:established,to_client; \
         content:\"secret-data\"; flowbits:isset,asked; sid:6;)\n\
         alert tcp any any -> any any (msg:\"leak\"; content:\"secret-data\"; sid:7;)\n",
    );
    let p = build(&[
        StageConfig::Parse,
        conntrack_cfg(),
        inspect_cfg(&dir),
        StageConfig::Count,
    ]);
    let c = inspect_at(&p, 2).cpu_arc();
    c.hooks().expect("hooks").start(&hook_ctx(2));
    let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
    let srv = (ip("192.0.2.1"), 80);
    let mut at = 1..;
    // The first flow leaks before its request (sid 7), then answers a request (pass).
    let mut frames = connection(
        (ip("10.0.0.1"), 40000),
        srv,
        &[
            (false, b"secret-data"),
            (true, b"GET /secret"),
            (false, b"secret-data"),
        ],
        &mut at,
    );
    // Another flow never asked: sid 7.
    frames.extend(connection(
        (ip("10.0.0.2"), 40001),
        srv,
        &[(false, b"secret-data")],
        &mut at,
    ));
    run(&p, &frames);
    c.hooks().expect("hooks").end(&hook_ctx(2));
    assert_eq!(eve(&dir).iter().map(|x| x.0).collect::<Vec<_>>(), [7, 7]);
    assert_eq!(c.counters()[3], 1, "passes");
}

#[test]
fn thresholds_count_per_queue() {
    let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
    let srv = (ip("192.0.2.1"), 80);
    // Two connections of one source, each sending a LIMIT (sid 4: limit 1 per 60 s by_src).
    let mut at = 1..;
    let one = connection((ip("10.0.0.1"), 40000), srv, &[(true, b"LIMIT")], &mut at);
    let two = connection((ip("10.0.0.1"), 40001), srv, &[(true, b"LIMIT")], &mut at);
    for (queues, want) in [([0u16, 0], vec![4]), ([0, 1], vec![4, 4])] {
        let dir = scratch(&format!("queues-{}", queues[1]));
        let p = build(&[
            StageConfig::Parse,
            conntrack_cfg(),
            inspect_cfg(&dir),
            StageConfig::Count,
        ]);
        let c = inspect_at(&p, 2).cpu_arc();
        c.hooks().expect("hooks").start(&hook_ctx(2));
        run_on(&p, queues[0], &one);
        run_on(&p, queues[1], &two);
        c.hooks().expect("hooks").end(&hook_ctx(2));
        let sids: Vec<u64> = eve(&dir).iter().map(|x| x.0).collect();
        assert_eq!(sids, want, "queues {queues:?}");
    }
}
