//! `pktwarp run` with `verify: { sample: 1 }` on the CPU executor (checked against itself):
//! /metrics has `pktwarp_verify_sampled_total` growing and `pktwarp_verify_mismatch_total` at 0
//! across a SIGHUP rule reload (each sampled burst is re-run on the tables it used),
//! `promtool check metrics` accepts the exposition, and the JSON summary has the counts.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{put, scratch, sum, Daemon};

const RULES_A: &str = "rules:
  - { name: a-tcp-low, proto: tcp, dst_port: 1-511, action: drop }
  - { name: a-udp, proto: udp, action: mirror }
";
const RULES_B: &str = "rules:
  - { name: b-udp-high, proto: udp, dst_port: 512-1023, action: drop }
  - { name: b-tcp, proto: tcp, action: to-host }
";

fn config(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("cfg.yaml");
    put(
        &p,
        "ports:
  - name: wire
    gen:
      rate: { pps: 50000 }
      size: 64
      flows: { src: 10.0.0.0/8, dst: 192.168.0.0/16, dst_ports: 1-1023 }
queues: { count: 2, burst: 32 }
pipeline:
  - parse
  - acl: { rules: rules.yaml }
  - count
executor: { kind: cpu }
metrics: { listen: 127.0.0.1:0 }
verify: { sample: 1 }
",
    );
    p
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn verify_metrics_pass_promtool_and_stay_clean_across_a_reload() {
    let dir = scratch("verify-daemon");
    put(&dir.join("rules.yaml"), RULES_A);
    let d = Daemon::run(&config(&dir));
    let addr = d.metrics_addr();
    let sampled = |m: &str| sum(m, "pktwarp_verify_sampled_total", "");
    wait_until("frames sampled", || sampled(&common::scrape(&addr)) > 0.0);
    let before = sampled(&common::scrape(&addr));
    put(&dir.join("rules.yaml"), RULES_B);
    d.signal("-HUP");
    d.wait_log("reload", |v| v["fields"]["result"] == "success");
    // Sampling goes on with the new rules (some frames now to_host).
    wait_until("frames sampled after the reload", || {
        let m = common::scrape(&addr);
        sampled(&m) > before + 2000.0 && sum(&m, "pktwarp_verdicts_total", "to_host") > 0.0
    });
    let m = common::scrape(&addr);
    assert_eq!(sum(&m, "pktwarp_verify_mismatch_total", ""), 0.0, "{m}");
    assert_eq!(sum(&m, "pktwarp_verify_burst_mismatch_total", ""), 0.0);
    assert!(
        m.contains("# TYPE pktwarp_verify_sampled_total counter"),
        "{m}"
    );
    common::promtool_check(&m);

    d.signal("-TERM");
    let (code, out, _) = d.wait(Duration::from_secs(15));
    assert_eq!(code, 0, "{out}");
    let s: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON summary");
    let v = &s["verify"];
    assert_eq!(v["sample"], 1, "{s}");
    assert!(v["sampled_frames"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(v["mismatch_frames"], 0, "{s}");
    let _ = std::fs::remove_dir_all(&dir);
}
