//! The control plane seen from outside: spawns `pktwarp run` on a generator config, scrapes
//! /metrics over HTTP, reloads with SIGHUP (a bad rule file, then a good one), watches the rule
//! file, and stops with SIGTERM, checking the JSON logs, the metrics and the exit status.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{put, scratch, sum, Daemon};

const RULES_A: &str = "rules:
  - { name: a-tcp-low, proto: tcp, dst_port: 1-511, action: drop }
  - { name: a-udp, proto: udp, action: mirror }
";
const RULES_B: &str = "rules:
  - { name: b-udp-high, proto: udp, dst_port: 512-1023, action: drop }
  - { name: b-tcp, proto: tcp, action: mirror }
  - { name: b-icmp, proto: icmp, action: drop }
";

/// The daemon on `cfg`, its /metrics address known.
fn start(cfg: &Path) -> (Daemon, String) {
    let d = Daemon::run(cfg);
    let addr = d.metrics_addr();
    (d, addr)
}

/// Sum of every sample of `name` whose labels contain `labels`, from a fresh scrape.
fn metric(addr: &str, name: &str, labels: &str) -> f64 {
    sum(&common::scrape(addr), name, labels)
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn config(dir: &Path, gen: &str, control: &str) -> PathBuf {
    let p = dir.join("cfg.yaml");
    std::fs::write(
        &p,
        format!(
            "ports:
  - name: wire
    gen:
{gen}
      size: 64
      flows: {{ src: 10.0.0.0/8, dst: 192.168.0.0/16, dst_ports: 1-1023 }}
queues: {{ count: 2, burst: 32 }}
pipeline:
  - parse
  - acl: {{ rules: rules.yaml }}
  - count
executor: {{ kind: cpu }}
metrics: {{ listen: 127.0.0.1:0, rule_series_cap: 2 }}
{control}
"
        ),
    )
    .unwrap();
    p
}

#[test]
fn sighup_reload_bad_then_good_and_sigterm_drains() {
    let dir = scratch("daemon-hup");
    put(&dir.join("rules.yaml"), RULES_A);
    let cfg = config(&dir, "      rate: { pps: 20000 }", "");
    let (d, addr) = start(&cfg);
    wait_until("frames counted", || {
        metric(&addr, "pktwarp_rx_frames_total", "") > 0.0
    });
    let m = common::scrape(&addr);
    assert_eq!(sum(&m, "pktwarp_ruleset_generation", ""), 0.0);
    assert_eq!(sum(&m, "pktwarp_ruleset_rules", ""), 2.0);
    assert_eq!(sum(&m, "pktwarp_executor_info", "executor=\"cpu\""), 1.0);
    assert!(sum(&m, "pktwarp_burst_latency_seconds_count", "queue=\"0\"") > 0.0);

    // A rule file with a bad port range on line 3: rejected, logged with file, line, reason.
    put(
        &dir.join("rules.yaml"),
        "rules:\n  - { proto: tcp, action: drop }\n  - { proto: tcp, dst_port: 900-80, action: drop }\n",
    );
    d.signal("-HUP");
    let ev = d.wait_log("reload", |v| v["fields"]["result"] == "failure");
    let f = &ev["fields"];
    assert_eq!(ev["level"], "ERROR");
    assert!(f["file"].as_str().unwrap().ends_with("rules.yaml"), "{ev}");
    assert_eq!(f["line"], 3, "{ev}");
    assert!(f["reason"].as_str().unwrap().contains("dst_port"), "{ev}");
    let m = common::scrape(&addr);
    assert_eq!(
        sum(&m, "pktwarp_rule_reloads_total", "result=\"failure\""),
        1.0
    );
    assert_eq!(
        sum(&m, "pktwarp_rule_reloads_total", "result=\"success\""),
        0.0
    );
    assert_eq!(sum(&m, "pktwarp_ruleset_generation", ""), 0.0);
    assert_eq!(
        sum(&m, "pktwarp_ruleset_rules", ""),
        2.0,
        "old rules still in force"
    );

    // The old rules keep classifying: hits still land on rule 0/1 (A's), not on "other".
    let hits_before = metric(&addr, "pktwarp_acl_rule_hits_total", "rule=\"1\"");
    wait_until("old rules keep matching", || {
        metric(&addr, "pktwarp_acl_rule_hits_total", "rule=\"1\"") > hits_before
    });

    put(&dir.join("rules.yaml"), RULES_B);
    d.signal("-HUP");
    d.wait_log("reload", |v| v["fields"]["result"] == "success");
    let m = common::scrape(&addr);
    assert_eq!(sum(&m, "pktwarp_ruleset_generation", ""), 1.0);
    assert_eq!(sum(&m, "pktwarp_ruleset_rules", ""), 3.0);
    assert_eq!(
        sum(&m, "pktwarp_rule_reloads_total", "result=\"success\""),
        1.0
    );
    // B has 3 rules and the series cap is 2: rule 2's hits go to "other".
    wait_until("rule past the cap counted as other", || {
        metric(&addr, "pktwarp_acl_rule_hits_total", "rule=\"other\"") > 0.0
    });

    d.signal("-TERM");
    d.wait_log("shutdown", |v| v["fields"]["signal"] == "SIGTERM");
    let (code, out, _) = d.wait(Duration::from_secs(15));
    assert_eq!(code, 0, "{out}");
    let s: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON summary");
    let rx = s["rx_frames"].as_u64().unwrap();
    assert!(rx > 0);
    // Drained: every received frame has a verdict or a counted drop.
    let mut accounted = 0;
    for q in s["queues"].as_array().unwrap() {
        accounted += q["passed"].as_u64().unwrap()
            + q["mirrored"].as_u64().unwrap()
            + q["to_host"].as_u64().unwrap();
        for d in q["drops"].as_array().unwrap() {
            accounted += d[1].as_u64().unwrap();
        }
    }
    assert_eq!(accounted, rx, "{s}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn linger_serves_final_totals_and_watch_reloads_on_change() {
    let dir = scratch("daemon-watch");
    put(&dir.join("rules.yaml"), RULES_A);
    let cfg = config(
        &dir,
        "      count: 3000\n      rate: { pps: 30000 }",
        "control: { linger: true, watch_rules: true, watch_interval_ms: 100 }",
    );
    let (d, addr) = start(&cfg);
    d.wait_log("linger", |_| true);
    // The input ended; the endpoint still serves the final totals.
    assert_eq!(metric(&addr, "pktwarp_rx_frames_total", ""), 3000.0);
    // Changing the rule file is picked up without a signal.
    put(&dir.join("rules.yaml"), RULES_B);
    d.wait_log("reload", |v| {
        v["fields"]["result"] == "success" && v["fields"]["trigger"] == "rule_file_changed"
    });
    assert_eq!(metric(&addr, "pktwarp_ruleset_generation", ""), 1.0);
    d.signal("-INT");
    let (code, out, _) = d.wait(Duration::from_secs(15));
    assert_eq!(code, 0, "{out}");
    let s: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON summary");
    assert_eq!(s["rx_frames"], 3000);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_metrics_and_control_settings_are_config_errors() {
    let dir = scratch("daemon-cfg");
    put(&dir.join("rules.yaml"), RULES_A);
    for (section, key) in [
        ("metrics: { listen: 'localhost' }", "metrics.listen"),
        ("control: { on_stall: reboot }", "reboot"),
        (
            "control: { watch_interval_ms: 1 }",
            "control.watch_interval_ms",
        ),
    ] {
        let p = dir.join("cfg.yaml");
        std::fs::write(
            &p,
            format!(
                "ports: [{{ name: g, gen: {{ count: 1 }} }}]\npipeline: [parse, {{ acl: {{ rules: rules.yaml }} }}]\n{section}\n"
            ),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_pktwarp"))
            .arg("validate")
            .arg(&p)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{section}: accepted");
        assert!(
            err.contains("cfg.yaml") && err.contains(key),
            "{section}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
