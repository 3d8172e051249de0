//! The `rate_limit` stage on the CPU executor: generated traffic through parse -> rate_limit ->
//! count (the source over budget dropped at the right frame, the others passing, every frame
//! counted once), per-queue tables, the counters in the metrics, SIGHUP reload (a new rate in
//! force; a bad config refused at its file and line with the rules in force kept) and bad
//! configs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::burst::Burst;
use crate::counters::QueueCounters;
use crate::stage::config::StageConfig;
use crate::stage::{Pipeline, Stage};

/// An Ethernet / IPv4 / TCP frame from `src` (port `sport`) to 192.0.2.1:80 with `flags`.
fn tcp(src: [u8; 4], sport: u16, flags: u8) -> Vec<u8> {
    let mut f = vec![0u8; 54];
    f[12] = 0x08;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&40u16.to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&[192, 0, 2, 1]);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    f[46] = 0x50;
    f[47] = flags;
    f[48..50].copy_from_slice(&64000u16.to_be_bytes());
    f
}

const SYN_RULE: &str = "{ entries: 64, rules: [ { name: syn_budget, match: { proto: tcp, tcp_flags: \"syn !ack\" }, key: src, rate_pps: 10, burst: 5 } ] }";

fn pipeline(rate_limit: &str) -> Pipeline {
    let yaml = format!("- parse\n- rate_limit: {rate_limit}\n- count\n");
    let stages: Vec<StageConfig> = serde_saphyr::from_str(&yaml).expect("stage list");
    crate::stage::build(&stages, |p| p.to_path_buf()).expect("pipeline")
}

fn stage(p: &Pipeline) -> &RateLimitStage {
    p.stages
        .iter()
        .find_map(|s| match s {
            Stage::RateLimit(r) => Some(&**r),
            _ => None,
        })
        .expect("a rate_limit stage")
}

/// Runs `frames` (bytes, receive time, queue) in bursts of 32 on one queue's counters; returns
/// whether each frame passed.
fn run(p: &Pipeline, frames: &[(Vec<u8>, u64, u16)], c: &QueueCounters) -> Vec<bool> {
    let mut out = Vec::new();
    for chunk in frames.chunks(32) {
        let mut b = Burst::default();
        for (f, t, q) in chunk {
            let d = FrameDesc {
                len: f.len() as u32,
                wire_len: f.len() as u32,
                timestamp_ns: *t,
                queue: *q,
                ..FrameDesc::default()
            };
            b.push(f, d);
        }
        let mut verdicts = Vec::new();
        p.run_burst(&b, &mut Vec::new(), &mut verdicts, c);
        for v in verdicts {
            if v.action == Action::Drop {
                assert_eq!(v.reason, Some(DropReason::RateLimited));
            }
            out.push(v.action == Action::Pass);
        }
    }
    out
}

const FLOODER: [u8; 4] = [198, 51, 100, 66];

/// 200 SYNs from the flooder 1 ms apart, among generated traffic: SYNs from 40 clients (at
/// most 4 each), their ACKs and SYN+ACKs (not SYN-only: no rule), in a seeded order.
fn traffic(seed: u64, queue: impl Fn(usize) -> u16) -> Vec<(Vec<u8>, u64, u16)> {
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let t0 = 1_000_000_000u64;
    let mut frames = Vec::new();
    for i in 0..200u64 {
        let t = t0 + i * 1_000_000;
        frames.push((tcp(FLOODER, 1000 + i as u16, 0x02), t));
        for _ in 0..next() % 3 {
            let client = [10, 1, 0, (next() % 40) as u8 + 1];
            let flags = [0x02, 0x10, 0x12, 0x18][(next() % 4) as usize];
            frames.push((tcp(client, 40000, flags), t));
        }
    }
    // A client's SYNs are kept to 4 (under its burst of 5): drop the rest.
    let mut syns = std::collections::HashMap::new();
    frames.retain(|(f, _)| {
        let n = syns.entry(f[26..30].to_vec()).or_insert(0);
        if f[47] == 0x02 && f[26..30] != FLOODER {
            *n += 1;
        }
        *n <= 4
    });
    frames
        .into_iter()
        .enumerate()
        .map(|(i, (f, t))| (f, t, queue(i)))
        .collect()
}

#[test]
fn a_source_over_budget_is_dropped_at_the_right_frame() {
    for seed in [1, 7, 42] {
        let p = pipeline(SYN_RULE);
        let c = QueueCounters::new(p.stages.len(), 0);
        let frames = traffic(seed, |_| 0);
        let passed = run(&p, &frames, &c);
        let flood: Vec<bool> = frames
            .iter()
            .zip(&passed)
            .filter(|((f, ..), _)| f[26..30] == FLOODER)
            .map(|(_, p)| *p)
            .collect();
        // Burst 5, then 10/s: a token 100 ms after the fifth SYN's 4 ms (0.4 tokens refilled
        // by then): SYN 100.
        let got: Vec<usize> = (0..flood.len()).filter(|&i| flood[i]).collect();
        assert_eq!(got, [0, 1, 2, 3, 4, 100], "seed {seed}");
        assert!(
            frames
                .iter()
                .zip(&passed)
                .filter(|((f, ..), _)| f[26..30] != FLOODER)
                .all(|(_, p)| *p),
            "a client under its budget was dropped (seed {seed})"
        );
        // Every frame received is counted once: passed or dropped, with the stage's reason.
        let drops = c.drop_count(DropReason::RateLimited);
        assert_eq!(drops, 194);
        assert_eq!(c.passed.get() + drops, frames.len() as u64);
        let rules = stage(&p).rule_counters();
        let syns = frames.iter().filter(|(f, ..)| f[47] == 0x02).count() as u64;
        assert_eq!(rules, [("syn_budget".to_string(), [syns, 194, 0])]);
    }
}

/// Each queue has a table of its own: the flooder's SYNs spread over two queues get a budget on
/// each.
#[test]
fn each_queue_has_its_own_buckets() {
    let p = pipeline(SYN_RULE);
    let c = QueueCounters::new(p.stages.len(), 0);
    let frames: Vec<_> = (0..20u64)
        .map(|i| (tcp(FLOODER, 1000, 0x02), 5 + i, (i % 2) as u16))
        .collect();
    let passed = run(&p, &frames, &c);
    assert_eq!(passed.iter().filter(|p| **p).count(), 10, "5 per queue");
    assert_eq!(stage(&p).buckets(), 2);
}

/// The per-rule counters are `pktwarp_rate_limit_frames_total{rule}`, the table's
/// `pktwarp_stage_counter_total{stage="rate_limit"}`, the drops `reason="rate_limited"`.
#[test]
fn counters_reach_the_metrics() {
    let p = Arc::new(pipeline(SYN_RULE));
    let q = Arc::new(QueueCounters::new(p.stages.len(), 0));
    let frames: Vec<_> = (0..8u64)
        .map(|i| (tcp(FLOODER, 1000, 0x02), i, 0))
        .collect();
    run(&p, &frames, &q);
    let text = crate::control::metrics::render_for_test(q, Arc::clone(&p));
    let has = |series: &str| text.lines().any(|l| l == series);
    for series in [
        r#"pktwarp_rate_limit_frames_total{position="1",rule="syn_budget",result="matched"} 8"#,
        r#"pktwarp_rate_limit_frames_total{position="1",rule="syn_budget",result="limited"} 3"#,
        r#"pktwarp_stage_counter_total{stage="rate_limit",position="1",counter="created"} 1"#,
    ] {
        assert!(has(series), "{series} not in\n{text}");
    }
    assert!(
        text.lines().any(|l| l.starts_with("pktwarp_drops_total")
            && l.contains(r#"reason="rate_limited""#)
            && l.ends_with(" 3")),
        "{text}"
    );
}

#[test]
fn the_gpu_executor_takes_it_with_its_rules_and_tables() {
    let p = pipeline(SYN_RULE);
    assert_eq!(p.gpu_refusal(), None);
    let l = p.gpu_stage_list();
    let rl = l.iter().find(|s| s.name == "rate_limit").expect("listed");
    assert_eq!(rl.kind, crate::stage::GpuStageKind::Library);
    let (rules, epoch) = stage(&p).gpu_rules();
    let block = gpu_block(&rules, epoch).expect("block");
    assert_eq!(rl.library.as_ref().map(|g| &g.block), Some(&block));
    assert_eq!(rl.queue_state.len(), 1);
    assert_eq!(rl.queue_state[0].bytes as u64, queue_state_bytes(&rules));
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-rl-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A config whose rate_limit stage has `rule` (at line 9).
fn write_config(path: &Path, rule: &str) {
    std::fs::write(
        path,
        format!(
            "ports:\n  - name: g\n    gen: {{ count: 10 }}\npipeline:\n  - parse\n  - rate_limit:\n      entries: 64\n      rules:\n        {rule}\n  - count\nexecutor: {{ kind: cpu }}\nmetrics: {{ enabled: false }}\n"
        ),
    )
    .unwrap();
}

fn reload_err(r: &crate::control::reload::Reloader) -> crate::control::reload::ReloadError {
    r.reload("sighup").expect_err("refused")
}

#[test]
fn sighup_reload_changes_the_rate_and_a_bad_config_keeps_the_rules() {
    use crate::control::reload::Reloader;
    use crate::control::ControlState;
    let dir = scratch("reload");
    let cfg_path = dir.join("cfg.yaml");
    let rule = |rate: &str| {
        format!("- {{ name: syn_budget, match: {{ proto: tcp, tcp_flags: \"syn !ack\" }}, key: src, rate_pps: {rate}, burst: 1 }}")
    };
    write_config(&cfg_path, &rule("1"));
    let cfg = crate::config::load(&cfg_path).unwrap();
    let baseline = crate::config::load(&cfg_path).unwrap();
    let p = Arc::new(crate::daemon::build_pipeline(&cfg).unwrap());
    let c = QueueCounters::new(p.stages.len(), 0);
    // 1/s, burst 1: of SYNs 1 ms apart, only the first passes.
    let syns = |from: u64| -> Vec<_> {
        (0..10u64)
            .map(|i| (tcp(FLOODER, 1000, 0x02), from + i * 1_000_000, 0))
            .collect()
    };
    assert_eq!(
        run(&p, &syns(1_000_000_000), &c)
            .iter()
            .filter(|x| **x)
            .count(),
        1
    );
    let reloader =
        Reloader::new(&cfg_path, Arc::clone(&p), ControlState::new(None)).with_baseline(&baseline);

    // 1000/s: a token every ms, so every SYN 1 ms apart passes (the bucket is kept).
    write_config(&cfg_path, &rule("1000"));
    let r = reloader.reload("sighup").expect("reloaded");
    assert_eq!(r.rebuilt, ["rate_limit"]);
    assert!(r.restart_needed.is_empty(), "{:?}", r.restart_needed);
    assert_eq!(stage(&p).generation(), 1);
    assert_eq!(run(&p, &syns(2_000_000_000), &c), [true; 10]);

    // A bad value: refused at its file and line, the rules in force stay.
    write_config(&cfg_path, &rule("0"));
    let e = reload_err(&reloader);
    assert_eq!((e.file.as_path(), e.line), (cfg_path.as_path(), 9), "{e}");
    assert!(e.reason.contains("rate_pps"), "{e}");
    write_config(&cfg_path, &rule("1000").replace("key: src", "key: source"));
    let e = reload_err(&reloader);
    assert_eq!(e.line, 9, "{e}");
    assert!(e.reason.contains("key"), "{e}");
    assert_eq!(stage(&p).generation(), 1);
    assert_eq!(stage(&p).config().rules[0].value.rate_pps, 1000);
    assert_eq!(run(&p, &syns(3_000_000_000), &c), [true; 10]);

    // The table's size changes only with a restart.
    write_config(&cfg_path, &rule("1000"));
    let text = std::fs::read_to_string(&cfg_path)
        .unwrap()
        .replace("entries: 64", "entries: 128");
    std::fs::write(&cfg_path, text).unwrap();
    let e = reload_err(&reloader);
    assert!(e.reason.contains("restart"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reload that renames the rules starts the buckets afresh and keeps each name's counts.
#[test]
fn renamed_rules_start_afresh_and_keep_their_counts() {
    let p = pipeline(SYN_RULE);
    let c = QueueCounters::new(p.stages.len(), 0);
    let frames: Vec<_> = (0..8u64)
        .map(|i| (tcp(FLOODER, 1000, 0x02), i, 0))
        .collect();
    run(&p, &frames, &c);
    let renamed: StageConfig = serde_saphyr::from_str(&format!(
        "rate_limit: {}",
        SYN_RULE.replace("syn_budget", "syns")
    ))
    .unwrap();
    let configs = [StageConfig::Parse, renamed, StageConfig::Count];
    assert_eq!(
        p.reload_stage_options(&configs).unwrap().rebuilt,
        ["rate_limit"]
    );
    // The bucket is new (full): 5 pass again at the same time.
    let passed = run(&p, &frames, &c);
    assert_eq!(passed.iter().filter(|x| **x).count(), 5);
    assert_eq!(
        stage(&p).rule_counters(),
        [
            ("syns".to_string(), [8, 3, 0]),
            ("syn_budget".to_string(), [8, 3, 0])
        ]
    );
}

#[test]
fn bad_configs_are_errors_naming_file_line_and_key() {
    let base = "ports:\n  - name: g\n    gen: { count: 10 }\npipeline:\n  - parse\n";
    for (stage, line, want) in [
        // (the stage entry from line 6; the error's line; words in the message)
        ("  - rate_limit: { entries: 64, rules: [] }\n", 6, "rules"),
        ("  - rate_limit: { entries: 60, rules: [ { name: a, key: src, rate_pps: 1 } ] }\n", 6, "entries"),
        ("  - rate_limit:\n      entries: 64\n      rules:\n        - { name: a, key: src, rate_pps: 1 }\n        - { name: a, key: flow, rate_pps: 1 }\n", 10, "rules[1].name"),
        ("  - rate_limit:\n      entries: 64\n      rules:\n        - { name: a, key: src, rate_pps: 1, burst: 5000000000 }\n", 9, "burst"),
        ("  - rate_limit:\n      entries: 64\n      rules:\n        - { name: a, key: src, rate_pps: 1, match: { dst_port: 53 } }\n", 9, "dst_port"),
        ("  - rate_limit:\n      entries: 64\n      rules:\n        - { name: a, key: src_prefix/40, rate_pps: 1 }\n", 9, "prefix length"),
        ("  - rate_limit:\n      entries: 64\n      rules:\n        - { name: a, key: src, rate_pps: 1, match: { tcp_flags: \"syn !syn\" } }\n", 9, "tcp_flags"),
        ("  - rate_limit:\n      entries: 64\n      rules:\n        - { name: a, key: src, rate: 1 }\n", 9, "rate"),
        ("  - rate_limit: { entries: 64, rules: [ { name: a, key: src, rate_pps: 1 } ], on_full: maybe }\n", 6, "on_full"),
    ] {
        let text = format!("{base}{stage}executor: {{ kind: cpu }}\n");
        let e = crate::config::parse_str(&text, Path::new("cfg.yaml"))
            .expect_err(stage)
            .to_string();
        assert!(e.starts_with(&format!("cfg.yaml:{line}:")), "{stage}: {e}");
        assert!(e.contains(want), "{stage}: {e}");
    }
    // The sampling verifier would take each sampled frame's token twice.
    let text = format!("{base}  - rate_limit: {SYN_RULE}\nverify: {{ sample: 10 }}\n");
    let e = crate::config::parse_str(&text, Path::new("cfg.yaml"))
        .expect_err("verify")
        .to_string();
    assert!(
        e.contains("verify.sample") && e.contains("rate_limit"),
        "{e}"
    );
    // A stage that reads the metadata: parse before it.
    let text = "ports:\n  - name: g\n    gen: { count: 10 }\npipeline:\n  - rate_limit: { entries: 64, rules: [ { name: a, key: src, rate_pps: 1 } ] }\n";
    let e = crate::config::parse_str(text, Path::new("cfg.yaml"))
        .expect_err("no parse")
        .to_string();
    assert!(e.contains("parse"), "{e}");
}
