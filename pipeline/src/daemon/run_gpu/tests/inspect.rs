//! The IDS pipeline (parse -> conntrack -> inspect -> count) on the GPU host side: generated
//! traffic with planted payloads, bursts to the device and back, the stage's counters and its
//! summary section (hits by sid) as the CPU executor's. The stand-in runs the CPU pipeline at
//! submit (the CPU stage then writes the EVE lines itself), so this holds the host side, not
//! the kernel or its alert ring (that is
//! pipeline/tests/inspect_cuda_host.rs, and on the GPU machine gpu_inspect.rs).

use super::*;

/// The shipped IDS example's payload rules (configs/rules/ids.rules without its HTTP ones),
/// on a generator planting their patterns, `queues` queues, alerts to `alert_to`.
fn ids(dir: &Path, queues: u32, alert_to: &str, eve: &Path) -> Prepared {
    let text = std::fs::read_to_string(configs_dir().join("rules/ids.rules")).expect("rules");
    let payload: String = text
        .lines()
        .filter(|l| !l.contains(" http "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.join("ids.rules"), payload).expect("rules copy");
    let yaml = format!(
        "ports:\n  - name: wire\n    gen:\n      count: 6000\n      seed: 5\n      size: imix\n      \
         flows: {{ src: 10.0.0.0/8, dst: 192.168.0.0/16, dst_ports: 1-1023 }}\n      \
         payload:\n        ratio: 0.5\n        fill: random\n        plant:\n          \
         - {{ hex: \"90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90\" }}\n          \
         - {{ text: pktwarp-marker }}\n          - {{ text: c2-test }}\n\
         queues: {{ count: {queues}, burst: 32, ring_slots: 8 }}\npipeline:\n  - parse\n  \
         - conntrack: {{ entries: 4096 }}\n  - inspect:\n      rules: [{}]\n      vars: {{ HOME_NET: \
         \"[10.0.0.0/8,192.168.0.0/16]\", EXTERNAL_NET: any }}\n      alert_to: {alert_to}\n      \
         eve: {{ path: {} }}\n  - count\nexecutor: {{ kind: cpu }}\n",
        dir.join("ids.rules").display(),
        eve.display()
    );
    let cfg = config::parse_str(&yaml, &dir.join("c.yaml")).expect("config");
    prepare(cfg).expect("prepare")
}

fn inspect_section(s: &Summary) -> (serde_json::Value, serde_json::Value) {
    let v = serde_json::to_value(s).expect("summary");
    let st = v["custom_stages"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == "inspect"))
        .cloned()
        .expect("an inspect section");
    (st["counters"].clone(), st["section"]["top_rules"].clone())
}

#[test]
fn the_ids_pipeline_counts_and_sends_as_the_cpu_executor() {
    let dir = std::env::temp_dir().join(format!("pw-standin-insp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (queues, alert_to) in [(1, "none"), (3, "mirror")] {
        let (ce, ge) = (
            dir.join(format!("cpu-eve-{queues}.json")),
            dir.join(format!("gpu-eve-{queues}.json")),
        );
        let _ = (std::fs::remove_file(&ce), std::fs::remove_file(&ge));
        let cpu = run_cpu_ref(&ids(&dir, queues, alert_to, &ce), true);
        let p = ids(&dir, queues, alert_to, &ge);
        assert_eq!(p.pipeline.gpu_refusal(), None);
        let gpu = run_fake(&p, 4, 1, true);
        let what = format!("{queues} queues, alert_to {alert_to}");
        assert_same_counts(&gpu.s, &cpu.s, &what);
        let (gc, gt) = inspect_section(&gpu.s);
        let (cc, ct) = inspect_section(&cpu.s);
        assert_eq!((&gc, &gt), (&cc, &ct), "{what}");
        let alerts = cc[1][1].as_u64().unwrap_or(0);
        assert!(alerts > 100, "{what}: {cc}");
        assert!(ct.as_array().is_some_and(|a| a.len() >= 2), "{what}: {ct}");
        let (mut g, mut c) = (gpu.tx.clone(), cpu.tx.clone());
        if queues > 1 {
            g.sort();
            c.sort();
        }
        assert_same_frames(&g, &c, &what);
        // The EVE lines, as sets (queues interleave), without their timestamps: the
        // generator stamps frames with the host clock of each run.
        let lines = |p: &Path| {
            let mut v: Vec<String> = std::fs::read_to_string(p)
                .unwrap_or_default()
                .lines()
                .map(|l| l.split_once(",\"flow_id\"").map_or(l, |x| x.1).to_string())
                .collect();
            v.sort();
            v
        };
        let (gl, cl) = (lines(&ge), lines(&ce));
        assert_eq!(cl.len() as u64, alerts, "{what}: a line per alert");
        let first = gl.iter().zip(&cl).position(|(g, c)| g != c);
        assert!(
            gl.len() == cl.len() && first.is_none(),
            "{what}: EVE lines differ: {:?} vs {:?}",
            first.map(|i| &gl[i]),
            first.map(|i| &cl[i])
        );
    }
}

/// The shipped configs/ids.yaml (HTTP rules, an EVE log) runs on the GPU too: its HTTP rules
/// are parsed there as on the CPU (cuda/inspect_http.cuh).
#[test]
fn the_shipped_ids_config_is_taken_by_the_gpu() {
    let cfg = config::load(&configs_dir().join("ids.yaml")).expect("ids.yaml");
    let p = prepare(cfg).expect("prepare");
    assert_eq!(p.pipeline.gpu_refusal(), None);
}

/// A SIGHUP that re-reads the rule files (options unchanged) is published to the device as a
/// new parameter set: the new set's block, counting in the other hit bank.
#[test]
fn a_rule_file_reload_is_published_as_a_new_parameter_set() {
    let dir = std::env::temp_dir().join(format!("pw-standin-insp-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = ids(&dir, 1, "none", &dir.join("eve.json"));
    let dev = CpuStandIn::new(&p, 4, 0);
    let mut publisher = super::reload::ParamsPublisher::new(true, 0);
    publisher.check(&p.pipeline, &dev).unwrap();
    assert!(
        dev.params_published.lock().unwrap().is_empty(),
        "nothing new"
    );
    std::fs::write(
        dir.join("ids.rules"),
        "alert udp any any -> any any (msg:\"one\"; content:\"x\"; sid:1;)\n",
    )
    .unwrap();
    let cfgs: Vec<config::StageConfig> = p.cfg.pipeline.iter().map(|s| s.value.clone()).collect();
    p.pipeline.reload_stage_options(&cfgs).expect("reload");
    publisher.check(&p.pipeline, &dev).unwrap();
    publisher.check(&p.pipeline, &dev).unwrap();
    let published = dev.params_published.lock().unwrap().clone();
    assert_eq!(published.len(), 1, "published once");
    let (g, blocks) = &published[0];
    assert_eq!(*g, 1);
    let b = &blocks[2];
    let word = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    assert_eq!(word(8), 1, "the new set's one rule");
    assert_eq!(word(pktwarp_inspect::gpu::BANK_AT), 1, "the other hit bank");
}
