//! The shipped configs work on a fresh clone: each one validates, and the two main ones run to
//! the end of their generated input with every frame accounted for.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn pktwarp() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pktwarp"));
    c.env("RUST_LOG", "warn");
    c
}

#[test]
fn every_shipped_config_validates() {
    let mut n = 0;
    for e in std::fs::read_dir(root().join("configs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            let out = pktwarp().arg("validate").arg(&p).output().unwrap();
            assert!(
                out.status.success(),
                "{}: {}",
                p.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            n += 1;
        }
    }
    assert!(n >= 2, "configs/ has the shipped configs");
}

/// Runs a shipped config from a copy beside its rule files, with the metrics endpoint off (tests
/// run in parallel) and a smaller frame count.
fn run_shipped(name: &str, count_from: &str, count_to: &str) -> serde_json::Value {
    let dir = std::env::temp_dir().join(format!("pktwarp-shipped-{name}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("rules")).unwrap();
    for e in std::fs::read_dir(root().join("configs/rules")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join("rules").join(p.file_name().unwrap())).unwrap();
    }
    let text = std::fs::read_to_string(root().join("configs").join(name)).unwrap();
    assert!(text.contains(count_from), "{name} still has `{count_from}`");
    let text = text.replace(count_from, count_to) + "metrics: { enabled: false }\n";
    let cfg: &Path = &dir.join(name);
    std::fs::write(cfg, text).unwrap();
    let out = pktwarp()
        .args(["run", "--quiet", "--json"])
        .arg(cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn total_drops(s: &serde_json::Value) -> u64 {
    s["drops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d[1].as_u64().unwrap())
        .sum()
}

#[test]
fn inline_filter_runs_and_accounts_for_every_frame() {
    let s = run_shipped("inline-filter.yaml", "count: 2000000", "count: 50000");
    assert_eq!(s["rx_frames"], 50000);
    let counted = s["counted"][0][1].as_u64().unwrap();
    assert!(
        total_drops(&s) > 0,
        "malformed frames and ACL drops are counted"
    );
    assert_eq!(counted + total_drops(&s), 50000);
    assert!(
        !s["top_rules"].as_array().unwrap().is_empty(),
        "ACL rules hit"
    );
}

#[test]
fn l2fwd_forwards_everything() {
    let s = run_shipped("l2fwd.yaml", "count: 200000", "count: 20000");
    assert_eq!(s["rx_frames"], 20000);
    assert_eq!(s["tx_frames"], 20000);
    assert_eq!(total_drops(&s), 0);
}

#[test]
fn delay_line_sends_everything_it_parses() {
    let s = run_shipped("delay-line.yaml", "count: 100000", "count: 5000");
    assert_eq!(s["rx_frames"], 5000);
    assert_eq!(s["tx_frames"].as_u64().unwrap() + total_drops(&s), 5000);
    assert!(s["tx_frames"].as_u64().unwrap() > 0);
}

/// `classify` has no connection state: the stateful firewall's `ct:` rules are refused by file
/// and line, not matched as if every frame were untracked (`verify --trace` has the same
/// check).
#[test]
fn trace_commands_refuse_ct_rules() {
    let dir = std::env::temp_dir().join(format!("pktwarp-shipped-ct-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("t.trace");
    std::fs::write(&trace, "10.1.0.1 198.51.100.1 40000 443 6\n").unwrap();
    let rules = root().join("configs/rules/stateful-firewall.rules.yaml");
    let out = pktwarp()
        .arg("classify")
        .arg("--rules")
        .arg(&rules)
        .arg("--trace")
        .arg(&trace)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("stateful-firewall.rules.yaml:7") && err.contains("ct"),
        "{err}"
    );
}

#[test]
fn ddos_scrubber_limits_the_floods_and_accounts_for_every_frame() {
    let s = run_shipped("ddos-scrubber.yaml", "count: 1000000", "count: 100000");
    assert_eq!(s["rx_frames"], 100000);
    let drop = |reason: &str| {
        s["drops"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d[0] == reason)
            .map_or(0, |d| d[1].as_u64().unwrap())
    };
    // Sixteen sources, 60000 SYNs: over their budgets (100/s and 200 each) unless the run took
    // half a minute.
    assert!(drop("rate_limited") > 10_000, "{s}");
    let q = &s["queues"][0];
    let forwarded: u64 = ["passed", "mirrored", "to_host"]
        .iter()
        .map(|k| q[*k].as_u64().unwrap())
        .sum();
    assert_eq!(forwarded + total_drops(&s), 100000, "{s}");
    let rl = s["custom_stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "rate_limit")
        .unwrap_or_else(|| panic!("no rate_limit section: {s}"));
    let counters: Vec<(String, u64)> = serde_json::from_value(rl["counters"].clone()).unwrap();
    let limited: u64 = counters
        .iter()
        .filter(|(n, _)| n.ends_with(".limited"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(limited, drop("rate_limited"), "{counters:?}");
    assert!(
        counters
            .iter()
            .any(|(n, v)| n == "syn_flood.limited" && *v > 0),
        "{counters:?}"
    );
}
