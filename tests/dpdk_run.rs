//! `pktwarp run` end to end on a DPDK port (cargo feature `dpdk`): net_pcap in -> CPU executor
//! (parse, count) -> net_pcap out, with a real EAL on a virtual device. The output capture holds
//! the input's frames byte for byte and in order, minus the drops the summary counts.

#![cfg(feature = "dpdk")]

use std::path::{Path, PathBuf};
use std::process::Command;

use pipeline::port::pcap::CaptureReader;

fn data(rel: &str) -> PathBuf {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data")).join(rel);
    assert!(p.exists(), "test data missing: {}", p.display());
    p
}

fn frames_of(path: &Path) -> Vec<Vec<u8>> {
    let mut r = CaptureReader::open(path).expect("open capture");
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().expect("read capture") {
        out.push(f.data.to_vec());
    }
    out
}

#[test]
fn pktwarp_run_net_pcap_in_cpu_executor_net_pcap_out() {
    let dir = std::env::temp_dir().join(format!("pktwarp-dpdk-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let input = data("pcaps/tcpdump/afs.pcap");
    let output = dir.join("out.pcap");
    let cfg = dir.join("dpdk.yaml");
    std::fs::write(
        &cfg,
        format!(
            "ports:
  - name: wire
    dpdk:
      eal_args: [--no-huge, --no-pci, --no-shconf, -m, \"256\", --file-prefix=pwrun{pid}, -l, \"0\", \"--log-level=*:warning\"]
      vdev: \"net_pcap0,rx_pcap={input},tx_pcap={output}\"
      mempool_size: 2047
      idle_end_ms: 500
queues: {{ count: 1, burst: 32 }}
pipeline:
  - parse
  - count
executor: {{ kind: cpu }}
metrics: {{ enabled: false }}
output:
  port: wire
",
            pid = std::process::id(),
            input = input.display(),
            output = output.display()
        ),
    )
    .expect("write config");

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
