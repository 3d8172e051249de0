//! `pktwarp run` on a DPDK net_null port (an endless source) with 1, 2 and 4 RX queues and as
//! many pipeline queues, on the CPU executor (cargo feature `dpdk`): one receive thread per RX
//! queue, named `pw-in0q<queue>` and logged (`event=rx_threads`), every queue receives, and
//! after SIGTERM every frame is accounted for (received = counted + drops). Bad input: more RX
//! queues than the vdev has is an error naming `dpdk.rx_queues` and the port; RX queues and
//! pipeline queues that differ keep one thread for the port and log why.

#![cfg(feature = "dpdk")]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::Daemon;

/// `dir/<tag>.yaml`: one DPDK port `wire` on `vdev` with `rxq` RX queues, `nq` pipeline
/// queues, parse + count on the CPU executor.
fn config(dir: &Path, tag: &str, vdev: &str, rxq: u16, nq: u16) -> PathBuf {
    let cfg = dir.join(format!("{tag}.yaml"));
    common::put(
        &cfg,
        &format!(
            "ports:
  - name: wire
    dpdk:
      eal_args: [--no-huge, --no-pci, --no-shconf, -m, \"512\", --file-prefix=pwq{tag}{pid}, -l, \"0\", \"--log-level=*:warning\"]
      vdev: \"{vdev}\"
      mempool_size: 4095
      rx_queues: {rxq}
queues: {{ count: {nq}, burst: 32 }}
pipeline: [parse, count]
executor: {{ kind: cpu }}
metrics: {{ enabled: false }}
",
            pid = std::process::id()
        ),
    );
    cfg
}

/// The names of `pid`'s threads that start with `prefix`.
fn threads(pid: u32, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if let Ok(d) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in d.flatten() {
            if let Ok(c) = std::fs::read_to_string(t.path().join("comm")) {
                if c.starts_with(prefix) {
                    out.insert(c.trim().to_string());
                }
            }
        }
    }
    out
}

/// SIGTERM, then the JSON summary of a clean exit.
fn stop(d: Daemon) -> serde_json::Value {
    d.signal("-TERM");
    let (code, out, _) = d.wait(Duration::from_secs(30));
    assert_eq!(code, 0, "{out}");
    serde_json::from_str(
        out.lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .expect("JSON summary"),
    )
    .expect("summary JSON")
}

#[test]
fn net_null_rx_queues_each_get_a_receive_thread() {
    let dir = common::scratch("dpdk-queues");
    for nq in [1u16, 2, 4] {
        let cfg = config(
            &dir,
            &format!("null{nq}"),
            &format!("net_null{nq},size=64"),
            nq,
            nq,
        );
        let d = Daemon::run(&cfg);
        let ev = d.wait_log("rx_threads", |_| true);
        assert_eq!(ev["fields"]["threads"], "per_queue", "{ev}");
        assert_eq!(ev["fields"]["count"], u64::from(nq), "{ev}");
        let want: BTreeSet<String> = (0..nq).map(|q| format!("pw-in0q{q}")).collect();
        let t = Instant::now();
        let mut seen = threads(d.child.id(), "pw-in");
        while seen != want && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
            seen = threads(d.child.id(), "pw-in");
        }
        assert_eq!(seen, want, "{nq} queues: receive threads");
        std::thread::sleep(Duration::from_millis(300));
        let s = stop(d);
        assert_eq!(s["receive_threads"], u64::from(nq), "{s}");
        let rx = s["rx_frames"].as_u64().expect("rx_frames");
        let counted: u64 = s["counted"]
            .as_array()
            .expect("counted")
            .iter()
            .map(|c| c[1].as_u64().unwrap_or(0))
            .sum();
        let drops: u64 = s["drops"]
            .as_array()
            .expect("drops")
            .iter()
            .map(|d| d[1].as_u64().unwrap_or(0))
            .sum();
        assert!(rx > 0, "{s}");
        assert_eq!(
            rx,
            counted + drops,
            "{nq} queues: received = counted + drops: {s}"
        );
        let queues = s["queues"].as_array().expect("queues");
        assert_eq!(queues.len(), nq as usize, "{s}");
        for q in queues {
            assert!(
                q["rx_frames"].as_u64().unwrap_or(0) > 0,
                "every queue receives: {s}"
            );
        }
    }
}

#[test]
fn rx_queues_unlike_queues_count_keep_one_thread_and_say_why() {
    let dir = common::scratch("dpdk-queues-mis");
    let cfg = config(&dir, "mis", "net_null9,size=64", 2, 4);
    let d = Daemon::run(&cfg);
    let ev = d.wait_log("rx_threads", |_| true);
    assert_eq!(ev["fields"]["threads"], "per_port", "{ev}");
    let why = ev["fields"]["reason"].as_str().unwrap_or("");
    assert!(
        why.contains("dpdk.rx_queues") && why.contains("queues.count"),
        "{ev}"
    );
    let s = stop(d);
    assert_eq!(s["receive_threads"], 1, "{s}");
}

#[test]
fn more_rx_queues_than_the_vdev_has_names_the_key() {
    let dir = common::scratch("dpdk-queues-bad");
    // net_ring makes 16 rings: 17 RX queues cannot be had.
    let cfg = config(&dir, "bad", "net_ring_bad0", 17, 17);
    let out = common::pktwarp(&["run", "--quiet"], &cfg);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("dpdk.rx_queues is 17"), "{err}");
    assert!(err.contains("port `wire`"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
