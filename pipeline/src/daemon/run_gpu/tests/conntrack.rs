//! The stateful firewall (parse -> conntrack -> acl -> count) on the GPU host side: flow-key
//! steering, bursts to the device and back, the summary's conntrack section. The stand-in runs
//! the CPU pipeline at submit, so this holds the host side, not the kernel (that is
//! pipeline/tests/conntrack_cuda_host.rs, and on the GPU machine gpu_conntrack.rs).

use super::*;
use crate::port::pcap::{CaptureWriter, WriteFormat};

/// The firewall on a capture of generated connection traffic, its inside the generator's
/// clients (10.0.0.0/16).
fn firewall(dir: &Path, queues: u32) -> Prepared {
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
         - acl: {{ rules: {}, default: drop }}\n  - count\nexecutor: {{ kind: cpu }}\n",
        pcap.display(),
        dir.join("rules.yaml").display()
    );
    let cfg = config::parse_str(&yaml, &dir.join("c.yaml")).expect("config");
    prepare(cfg).expect("prepare")
}

fn conntrack_counters(s: &Summary) -> serde_json::Value {
    let v = serde_json::to_value(s).expect("summary");
    v["custom_stages"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == "conntrack"))
        .map(|x| x["counters"].clone())
        .expect("a conntrack section")
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
