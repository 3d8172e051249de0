//! `pktwarp run` end to end on a DPDK port (cargo feature `dpdk`): net_pcap in -> CPU executor
//! (parse, count) -> net_pcap out, with a real EAL on a virtual device. The output capture holds
//! the input's frames byte for byte and in order, minus the drops the summary counts.

#![cfg(feature = "dpdk")]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use pipeline::internal::port::pcap::CaptureReader;

fn frames_of(path: &Path) -> Vec<Vec<u8>> {
    let mut r = CaptureReader::open(path).expect("open capture");
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().expect("read capture") {
        out.push(f.data.to_vec());
    }
    out
}

/// `dir/dpdk.yaml`: a net_pcap port `wire` from `input` to `output` (EAL file prefix
/// `prefix` + pid, no hugepages), then `rest` (queues, stages, executor, metrics, output).
fn dpdk_config(dir: &Path, prefix: &str, input: &Path, output: &Path, rest: &str) -> PathBuf {
    let cfg = dir.join("dpdk.yaml");
    std::fs::write(
        &cfg,
        format!(
            "ports:
  - name: wire
    dpdk:
      eal_args: [--no-huge, --no-pci, --no-shconf, -m, \"256\", --file-prefix={prefix}{pid}, -l, \"0\", \"--log-level=*:warning\"]
      vdev: \"net_pcap0,rx_pcap={input},tx_pcap={output}\"
      mempool_size: 2047
      idle_end_ms: 500
{rest}",
            pid = std::process::id(),
            input = input.display(),
            output = output.display()
        ),
    )
    .expect("write config");
    cfg
}

#[test]
fn pktwarp_run_net_pcap_in_cpu_executor_net_pcap_out() {
    let dir = common::scratch("dpdk-run");
    let input = pipeline::internal::testdata::imix_pcap();
    let output = dir.join("out.pcap");
    let cfg = dpdk_config(
        &dir,
        "pwrun",
        &input,
        &output,
        "queues: { count: 1, burst: 32 }
pipeline:
  - parse
  - count
executor: { kind: cpu }
metrics: { enabled: false }
output:
  port: wire
",
    );

    let validate = Command::new(env!("CARGO_BIN_EXE_pktwarp"))
        .arg("validate")
        .arg(&cfg)
        .output()
        .expect("run pktwarp validate");
    assert!(
        validate.status.success(),
        "validate: {}",
        String::from_utf8_lossy(&validate.stderr)
    );

    let out = Command::new(env!("CARGO_BIN_EXE_pktwarp"))
        .arg("run")
        .arg(&cfg)
        .arg("--json")
        .output()
        .expect("run pktwarp");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "pktwarp run failed:\n{stdout}\n{stderr}"
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON summary in:\n{stdout}\n{stderr}"));
    let summary: serde_json::Value = serde_json::from_str(line).expect("summary JSON");
    let rx = summary["rx_frames"].as_u64().expect("rx_frames");
    let tx = summary["tx_frames"].as_u64().expect("tx_frames");
    let drops: u64 = summary["drops"]
        .as_array()
        .expect("drops")
        .iter()
        .map(|d| d[1].as_u64().unwrap_or(0))
        .sum();

    // DPDK in and out: the CPU executor forwards zero-copy (mbufs passed along), and says so.
    assert_eq!(summary["forwarding"], "zero_copy", "{summary}\n{stderr}");
    assert!(
        stderr.contains("forwarding zero-copy"),
        "the chosen path is logged:\n{stderr}"
    );
    let want = frames_of(&input);
    let got = frames_of(&output);
    assert_eq!(
        rx,
        want.len() as u64,
        "every input frame received: {summary}"
    );
    assert_eq!(tx + drops, rx, "every frame sent or counted: {summary}");
    assert_eq!(got.len() as u64, tx, "the output holds what was sent");
    // One queue keeps the order; drops (none expected for parse + count) would be gaps.
    assert_eq!(drops, 0, "{summary}");
    // The port's own ethdev counters reach the summary and agree with pktwarp's.
    let pc = summary["port_counters"].as_array().expect("port_counters");
    let ipackets = pc
        .iter()
        .flat_map(|p| p[1].as_array().into_iter().flatten())
        .find(|kv| kv[0] == "ethdev_ipackets")
        .and_then(|kv| kv[1].as_u64());
    assert_eq!(
        ipackets,
        Some(rx),
        "ethdev ipackets in the summary: {summary}"
    );
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "frame {i} differs");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Sum of the samples of `series` (name plus labels, exactly as exposed) in a scrape.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The DPDK port's ethdev stats and xstats on /metrics: `pktwarp run` with a net_pcap port,
/// metrics on, lingering after its input ends; the scraped `pktwarp_port_*` series equal the
/// summary's port_counters, and promtool accepts the exposition.
#[test]
fn pktwarp_run_exposes_dpdk_port_counters_on_metrics() {
    use std::time::Duration;

    let dir = common::scratch("dpdk-metrics");
    let input = pipeline::internal::testdata::imix_pcap();
    let output = dir.join("out.pcap");
    let cfg = dpdk_config(
        &dir,
        "pwmet",
        &input,
        &output,
        "queues: { count: 1, burst: 32 }
pipeline: [parse, count]
executor: { kind: cpu }
metrics: { listen: \"127.0.0.1:0\" }
control: { linger: true }
output:
  port: wire
",
    );
    let d = common::Daemon::run(&cfg);
    let addr = d.metrics_addr();
    // Input ended, summary values published, still serving.
    d.wait_log("linger", |_| true);
    let body = common::scrape(&addr);
    d.signal("-TERM");
    let (code, out, _) = d.wait(Duration::from_secs(15));
    assert_eq!(code, 0, "{out}");
    let summary: serde_json::Value = serde_json::from_str(
        out.lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .expect("JSON summary"),
    )
    .expect("summary JSON");
    assert_eq!(summary["forwarding"], "zero_copy");
    let pc: Vec<(String, u64)> = summary["port_counters"][0][1]
        .as_array()
        .expect("port_counters")
        .iter()
        .map(|kv| {
            (
                kv[0].as_str().unwrap_or("").to_string(),
                kv[1].as_u64().unwrap_or(u64::MAX),
            )
        })
        .collect();
    let get = |k: &str| pc.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
    assert_eq!(get("ethdev_ipackets"), Some(601), "{summary}");
    for (family, field) in [
        ("pktwarp_port_rx_frames_total", "ethdev_ipackets"),
        ("pktwarp_port_tx_frames_total", "ethdev_opackets"),
        ("pktwarp_port_rx_bytes_total", "ethdev_ibytes"),
        ("pktwarp_port_tx_bytes_total", "ethdev_obytes"),
        ("pktwarp_port_rx_missed_total", "ethdev_imissed"),
        ("pktwarp_port_rx_errors_total", "ethdev_ierrors"),
        ("pktwarp_port_tx_errors_total", "ethdev_oerrors"),
        ("pktwarp_port_rx_nombuf_total", "ethdev_rx_nombuf"),
    ] {
        assert_eq!(
            sample(&body, &format!("{family}{{port=\"wire\"}}")),
            get(field).map(|v| v as f64),
            "{family} vs summary {field}\n{body}"
        );
    }
    let xstats: Vec<&(String, u64)> = pc.iter().filter(|(k, _)| k.starts_with("xstat_")).collect();
    assert!(!xstats.is_empty(), "{summary}");
    for (k, v) in xstats {
        let name = &k["xstat_".len()..];
        assert_eq!(
            sample(
                &body,
                &format!("pktwarp_port_xstat{{port=\"wire\",name=\"{name}\"}}")
            ),
            Some(*v as f64),
            "xstat {name}\n{body}"
        );
    }
    // No rule file: the port's NIC steers nothing (the gauge says who steers).
    assert_eq!(get("pktwarp_steering_in_nic"), Some(0), "{summary}");
    assert_eq!(
        sample(&body, "pktwarp_port_steering_in_nic{port=\"wire\"}"),
        Some(0.0),
        "{body}"
    );
    // The exposition passes Prometheus' own linter (installed by scripts/install-deps.sh).
    common::promtool_check(&body);
    let _ = std::fs::remove_dir_all(dir);
}

/// Rules for the steering runs: every TCP frame dropped, every UDP frame marked.
const STEER_RULES: &str = "rules:
  - name: tcp-drop
    match: { tcp: }
    actions: [drop]
  - name: udp-mark
    match: { udp: }
    actions: [{ mark: 0x42 }]
";

/// One `pktwarp run --json` of the steering test: (summary, stderr, output frames).
fn steer_run(name: &str, steering: &str, queues: u16) -> (serde_json::Value, String, Vec<Vec<u8>>) {
    let dir = common::scratch(name);
    std::fs::write(dir.join("steer.yaml"), STEER_RULES).expect("write rules");
    let input = pipeline::internal::testdata::multi_proto_pcap();
    let output = dir.join("out.pcap");
    let cfg = dpdk_config(
        &dir,
        "pwst",
        &input,
        &output,
        &format!(
            "queues: {{ count: {queues}, burst: 32 }}
steering: {steering}
pipeline: [parse, count]
executor: {{ kind: cpu }}
metrics: {{ enabled: false }}
output:
  port: wire
"
        ),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_pktwarp"))
        .arg("run")
        .arg(&cfg)
        .arg("--json")
        .output()
        .expect("run pktwarp");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "pktwarp run failed:\n{stdout}\n{stderr}"
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON summary in:\n{stdout}\n{stderr}"));
    let summary: serde_json::Value = serde_json::from_str(line).expect("summary JSON");
    let frames = frames_of(&output);
    let _ = std::fs::remove_dir_all(dir);
    (summary, stderr, frames)
}

fn drop_count(summary: &serde_json::Value, reason: &str) -> u64 {
    summary["drops"]
        .as_array()
        .expect("drops")
        .iter()
        .find(|d| d[0] == reason)
        .and_then(|d| d[1].as_u64())
        .unwrap_or(0)
}

/// The daemon tries to put its config's steering rules in each DPDK port's NIC; net_pcap has
/// no rte_flow, so the port refuses the set and the ingest steers in software: logged
/// (`event=steering_path`), in the summary (`steering`) and as the port gauge's 0. The counts
/// equal those of `steering.offload: off` (software by choice), and of a queue count the port
/// does not have (software, another reason).
#[test]
fn pktwarp_run_steers_in_software_where_the_dpdk_port_refuses_the_rules() {
    let (auto, log, out_auto) = steer_run("dpdk-steer-auto", "{ rules: steer.yaml }", 1);
    let st = &auto["steering"][0];
    assert_eq!(st["port"], "wire", "{auto}");
    assert_eq!(st["by"], "software", "{auto}");
    let reason = st["reason"].as_str().unwrap_or("");
    assert!(
        reason.starts_with("the NIC refused rule tcp-drop:"),
        "names the rule and the PMD's reason: {reason}"
    );
    assert!(
        log.contains("steering_path") && log.contains("port wire steered by software"),
        "the choice is logged:\n{log}"
    );
    let pc = auto["port_counters"][0][1]
        .as_array()
        .expect("port_counters");
    let in_nic = pc.iter().find(|kv| kv[0] == "pktwarp_steering_in_nic");
    assert_eq!(in_nic.and_then(|kv| kv[1].as_u64()), Some(0), "{auto}");
    let flows_hw = pc.iter().find(|kv| kv[0] == "pktwarp_flow_rules_hw");
    assert_eq!(
        flows_hw.and_then(|kv| kv[1].as_u64()),
        Some(0),
        "nothing left in the NIC"
    );
    let rx = auto["rx_frames"].as_u64().expect("rx");
    let tcp_drops = drop_count(&auto, "steering_drop");
    assert!(
        tcp_drops > 0 && tcp_drops < rx,
        "the TCP frames dropped in software: {auto}"
    );
    assert_eq!(
        auto["tx_frames"].as_u64().expect("tx")
            + drop_count(&auto, "steering_drop")
            + drop_count(&auto, "parse_error"),
        rx,
        "{auto}"
    );

    let (off, _, out_off) = steer_run("dpdk-steer-off", "{ rules: steer.yaml, offload: off }", 1);
    assert_eq!(off["steering"][0]["by"], "software", "{off}");
    assert_eq!(
        off["steering"][0]["reason"], "steering.offload: off",
        "{off}"
    );
    for k in ["rx_frames", "tx_frames", "drops"] {
        assert_eq!(off[k], auto[k], "{k}: offload off vs refused");
    }
    assert_eq!(out_off, out_auto, "the same frames sent");

    let (two, _, out_two) = steer_run("dpdk-steer-2q", "{ rules: steer.yaml }", 2);
    let reason = two["steering"][0]["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("1 RX queues and queues.count is 2"),
        "{two}"
    );
    for k in ["rx_frames", "tx_frames"] {
        assert_eq!(two[k], auto[k], "{k}: two queues vs one");
    }
    assert_eq!(drop_count(&two, "steering_drop"), tcp_drops, "{two}");
    assert_eq!(out_two.len(), out_auto.len());
}

/// `steering.offload` takes `auto` or `off`; anything else is refused by `pktwarp validate`
/// naming the file, line and key.
#[test]
fn steering_offload_bad_values_are_refused_with_file_line_and_key() {
    let dir = common::scratch("dpdk-steer-bad");
    std::fs::write(dir.join("steer.yaml"), STEER_RULES).expect("write rules");
    let input = pipeline::internal::testdata::multi_proto_pcap();
    for bad in ["nic", "on", "true", "2", "\"\"", "[auto]"] {
        let cfg = dpdk_config(
            &dir,
            "pwbad",
            &input,
            &dir.join("out.pcap"),
            &format!(
                "queues: {{ count: 1 }}
steering:
  rules: steer.yaml
  offload: {bad}
pipeline: [parse]
executor: {{ kind: cpu }}
output: {{ port: wire }}
"
            ),
        );
        let out = Command::new(env!("CARGO_BIN_EXE_pktwarp"))
            .arg("validate")
            .arg(&cfg)
            .output()
            .expect("run pktwarp validate");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "offload: {bad} accepted");
        assert!(
            err.contains("dpdk.yaml:11:"),
            "offload: {bad}: file and line: {err}"
        );
        assert!(err.contains("key `offload`"), "offload: {bad}: key: {err}");
        if !bad.starts_with('[') {
            assert!(
                err.contains("`auto` or `off`"),
                "offload: {bad}: the allowed values: {err}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
