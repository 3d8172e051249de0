//! The stateful firewall (parse -> conntrack -> acl -> count) on the GPU host side: flow-key
//! steering, bursts to the device and back, the summary's conntrack section; and with per-source
//! budgets after its ACL (a second stage with per-queue state in frame order, rate_limit, whose
//! counters the host side reads back from the stand-in's "device"). The stand-in runs the CPU
//! pipeline at submit, so this holds the host side, not the kernel (that is
//! pipeline/tests/conntrack_cuda_host.rs and ordered_pair_cuda_host.rs, and on the GPU machine
//! gpu_conntrack.rs and gpu_rate_limit.rs).

use super::*;
use crate::port::pcap::{CaptureWriter, WriteFormat};

/// The firewall on a capture of generated connection traffic, its inside the generator's
/// clients (10.0.0.0/16).
fn firewall(dir: &Path, queues: u32) -> Prepared {
    firewall_with(dir, queues, "")
}

/// [`firewall`] with `extra` (stage lines) between its ACL and `count`.
fn firewall_with(dir: &Path, queues: u32, extra: &str) -> Prepared {
    let pcap = dir.join("conn.pcap");
    let frames = pktwarp_flow::testgen::generate(&pktwarp_flow::testgen::GenConfig {
        seed: 9,
        frames: 6000,
        ..Default::default()
    });
    let mut w = CaptureWriter::create(&pcap, WriteFormat::Pcap, 65535).expect("capture");
    for f in &frames {
        w.write_frame(&f.bytes, f.bytes.len() as u32, f.time_ns)
            .expect("write");
    }
    w.flush().expect("flush");
    let rules = std::fs::read_to_string(configs_dir().join("rules/stateful-firewall.rules.yaml"))
        .expect("rules");
    std::fs::write(
        dir.join("rules.yaml"),
        rules.replace("10.1.0.0/16", "10.0.0.0/16"),
    )
    .expect("rules copy");
    let yaml = format!(
        "ports:\n  - name: wire\n    pcap:\n      rx: {{ path: {} }}\nqueues: {{ count: {queues}, \
         burst: 32, ring_slots: 8 }}\npipeline:\n  - parse\n  - conntrack: {{ entries: 256 }}\n  \
         - acl: {{ rules: {}, default: drop }}\n{extra}  - count\nexecutor: {{ kind: cpu }}\n",
        pcap.display(),
        dir.join("rules.yaml").display()
    );
    let cfg = config::parse_str(&yaml, &dir.join("c.yaml")).expect("config");
    prepare(cfg).expect("prepare")
}

fn conntrack_counters(s: &Summary) -> serde_json::Value {
    section(s, "conntrack")
}

/// The summary's counters of stage `name`.
fn section(s: &Summary, name: &str) -> serde_json::Value {
    let v = serde_json::to_value(s).expect("summary");
    v["custom_stages"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == name))
        .map(|x| x["counters"].clone())
        .unwrap_or_else(|| panic!("a {name} section"))
}

#[test]
fn the_stateful_firewall_counts_and_sends_as_the_cpu_executor() {
    let dir = std::env::temp_dir().join(format!("pw-standin-ct-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for queues in [1, 3] {
        // One prepared pipeline each: the tables are the run's state.
        let cpu = run_cpu_ref(&firewall(&dir, queues), true);
        let p = firewall(&dir, queues);
        assert_eq!(p.pipeline.gpu_refusal(), None);
        let gpu = run_fake(&p, 4, 1, true);
        let what = format!("{queues} queues");
        assert_same_counts(&gpu.s, &cpu.s, &what);
        assert_eq!(
            conntrack_counters(&gpu.s),
            conntrack_counters(&cpu.s),
            "{what}"
        );
        let created = conntrack_counters(&cpu.s)[0][1].as_u64().unwrap_or(0);
        assert!(created > 100, "{what}: {}", conntrack_counters(&cpu.s));
        assert!(cpu.s.tx_frames > 0 && cpu.s.acl_default > 0, "{what}");
        let (mut g, mut c) = (gpu.tx.clone(), cpu.tx.clone());
        if queues > 1 {
            g.sort();
            c.sort();
        }
        assert_same_frames(&g, &c, &what);
    }
}

/// Per-source budgets after the firewall's ACL: conntrack and rate_limit both keep per-queue
/// state in frame order, and the GPU executor runs them together (it refused that before):
/// counts, both stages' sections (rate_limit's folded from the stand-in's device counters) and
/// the frames sent equal the CPU executor's, with frames over budget.
#[test]
fn the_stateful_firewall_with_budgets_counts_and_sends_as_the_cpu_executor() {
    let dir = std::env::temp_dir().join(format!("pw-standin-ctrl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rl = "  - rate_limit: { entries: 256, rules: [{ name: per_net, key: src_prefix/24/48, \
              rate_pps: 50, burst: 10 }] }\n";
    for queues in [1, 2] {
        let cpu = run_cpu_ref(&firewall_with(&dir, queues, rl), true);
        let p = firewall_with(&dir, queues, rl);
        assert_eq!(p.pipeline.gpu_refusal(), None);
        assert!(crate::executor::gpu::compose::is_composed(&p.pipeline));
        let gpu = run_fake(&p, 4, 1, true);
        let what = format!("{queues} queues");
        assert_same_counts(&gpu.s, &cpu.s, &what);
        for name in ["conntrack", "rate_limit"] {
            assert_eq!(
                section(&gpu.s, name),
                section(&cpu.s, name),
                "{what}: {name}"
            );
        }
        let limited = cpu.s.drops.iter().find(|d| d.0 == "rate_limited");
        assert!(
            limited.is_some_and(|d| d.1 > 0),
            "{what}: {:?}",
            cpu.s.drops
        );
        let (mut g, mut c) = (gpu.tx.clone(), cpu.tx.clone());
        if queues > 1 {
            g.sort();
            c.sort();
        }
        assert_same_frames(&g, &c, &what);
    }
}
