//! A composed pipeline (a user stage with CUDA) on the GPU host side: its stage counters reach
//! the queue counters while the run goes and at its end, and a reload of the stage's options
//! is published to the device as a new parameter set.

use super::*;
use crate::stage::registry::{BuiltStage, GpuStage, StageFactory, StageRegistry};
use crate::testdata::MaxLen;

/// testdata's MaxLen with a CUDA side (parameter block: `max_len` as u32).
struct Factory;
impl StageFactory for Factory {
    fn build(&self, o: &serde_json::Value) -> anyhow::Result<BuiltStage> {
        let max_len = MaxLen::option(o)?;
        Ok(BuiltStage {
            cpu: Arc::new(MaxLen::new(max_len as usize)),
            gpu: Some(GpuStage {
                source: "PW_DEVICE void max_len_stage(const pw_frame *f, pw_packet_meta *m, \
                         pw_verdict *v, const void *p, pw_stage_counters *c) {}"
                    .into(),
                function: "max_len_stage".into(),
                params: (max_len as u32).to_le_bytes().to_vec(),
                counter_names: vec!["too_long".into()],
                buffers: Vec::new(),
            }),
        })
    }
    fn reads_meta(&self) -> bool {
        false
    }
}

fn prepared_composed(queues: u32) -> Prepared {
    let yaml = format!(
        "ports:\n{}queues: {{ count: {queues}, burst: 32, ring_slots: 8 }}\npipeline:\n  - parse\n  \
         - custom: {{ name: max_len, max_len: 300 }}\n  - acl: {{ rules: rules/inline-filter.rules.yaml, \
         default: pass }}\n  - count\nexecutor: {{ kind: cpu }}\n",
        gen_port("a", 6000, 11, "imix")
    );
    let cfg = config::parse_str(&yaml, &configs_dir().join("test.yaml")).expect("config");
    let mut r = StageRegistry::default();
    r.register("max_len", Arc::new(Factory)).unwrap();
    crate::daemon::prepare_with(cfg, &r).expect("prepare")
}

#[test]
fn a_composed_pipelines_stage_counters_reach_the_queue_counters() {
    let p = prepared_composed(3);
    assert!(
        crate::executor::gpu::compose::is_composed(&p.pipeline),
        "a user stage takes the composed template"
    );
    let cpu = run_cpu_ref(&p, false);
    assert!(cpu.s.counted.iter().any(|c| c.1 > 0), "{:?}", cpu.s.counted);
    let gpu = run_fake(&p, 4, 1, false);
    // `counted` comes from the count stage's frames: on the composed template only the folded
    // device counters give it (the reaper counts no stage).
    assert_same_counts(&gpu.s, &cpu.s, "composed");
    assert!(gpu.s.counted.iter().all(|c| c.1 > 0), "{:?}", gpu.s.counted);
}

#[test]
fn a_reload_of_stage_options_is_published_as_a_new_parameter_set() {
    let p = prepared_composed(1);
    let dev = CpuStandIn::new(&p, 4, 0);
    let mut publisher = reload::ParamsPublisher::new(true, 0);
    publisher.check(&p.pipeline, &dev).unwrap();
    assert!(
        dev.params_published.lock().unwrap().is_empty(),
        "nothing new at start"
    );
    let mut cfgs: Vec<config::StageConfig> =
        p.cfg.pipeline.iter().map(|s| s.value.clone()).collect();
    if let config::StageConfig::Custom(c) = &mut cfgs[1] {
        c.options = serde_json::json!({ "max_len": 900 });
    }
    let r = p.pipeline.reload_stage_options(&cfgs).unwrap();
    assert_eq!(r.rebuilt, ["max_len"]);
    publisher.check(&p.pipeline, &dev).unwrap();
    publisher.check(&p.pipeline, &dev).unwrap();
    let published = dev.params_published.lock().unwrap().clone();
    assert_eq!(published.len(), 1, "published once");
    let (g, blocks) = &published[0];
    assert_eq!(*g, 1);
    assert_eq!(blocks.len(), 4, "one block per stage");
    assert_eq!(blocks[1], 900u32.to_le_bytes(), "the new options' block");
    assert!(blocks[0].is_empty() && blocks[3].is_empty());
    // The fused template has no parameter blocks: nothing is published there.
    let mut fused = reload::ParamsPublisher::new(false, 0);
    fused.check(&p.pipeline, &dev).unwrap();
    assert_eq!(dev.params_published.lock().unwrap().len(), 1);
}
