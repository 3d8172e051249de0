//! The shipped configs work on a fresh clone: each one validates, and the two main ones run to
//! the end of their generated input with every frame accounted for.

use std::path::PathBuf;
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

/// Runs a shipped config as shipped, changed only by `--set` (a smaller frame count, the metrics
/// endpoint off as tests run in parallel, and outputs in a folder of the test's own).
fn run_shipped(name: &str, set: &[&str]) -> serde_json::Value {
    let dir = std::env::temp_dir().join(format!("pktwarp-shipped-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = pktwarp();
    cmd.args(["run", "--quiet", "--json"])
        .arg(root().join("configs").join(name))
        .args(["--set", "metrics.enabled=false"]);
    for s in set {
        cmd.arg("--set")
            .arg(s.replace("{dir}", &dir.display().to_string()));
    }
    let out = cmd.output().unwrap();
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
    let s = run_shipped("inline-filter.yaml", &["ports.0.gen.count=50000"]);
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
    let s = run_shipped(
        "l2fwd.yaml",
        &[
            "ports.0.gen.count=20000",
            "ports.1.pcap.tx.path={dir}/out.pcap",
        ],
    );
    assert_eq!(s["rx_frames"], 20000);
    assert_eq!(s["tx_frames"], 20000);
    assert_eq!(total_drops(&s), 0);
}

#[test]
fn delay_line_sends_everything_it_parses() {
    let s = run_shipped(
        "delay-line.yaml",
        &[
            "ports.0.gen.count=5000",
            "ports.1.pcap.tx.path={dir}/out.pcap",
        ],
    );
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

/// `--set` changes a shipped config for one run; a wrong change is refused naming it, and a
/// change the config's checks refuse says it came from `--set`.
#[test]
fn set_changes_a_run_and_bad_changes_are_named() {
    let s = run_shipped(
        "inline-filter.yaml",
        &["ports.0.gen.count=3000", "queues.count=1"],
    );
    assert_eq!(s["rx_frames"], 3000);
    assert_eq!(s["queues"].as_array().map(Vec::len), Some(1), "{s}");
    let cfg = root().join("configs/inline-filter.yaml");
    for (set, want) in [
        ("queues.count=0", "as changed by --set queues.count=0"),
        (
            "ports.3.gen.count=1",
            "`ports` has 1 entries: index 3 is past its end",
        ),
        ("executor=[1", "the value is not YAML"),
        ("nokey", "expected KEY=VALUE"),
    ] {
        let out = pktwarp()
            .arg("validate")
            .arg(&cfg)
            .args(["--set", set])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{set}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{set}: {err}");
    }
}

#[test]
fn ddos_scrubber_limits_the_floods_and_accounts_for_every_frame() {
    let s = run_shipped("ddos-scrubber.yaml", &["ports.0.gen.count=100000"]);
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
