//! Reloading stage options in place: a reload that changes a stage's options (a `custom:`
//! stage's) rebuilds that stage aside and publishes every rebuilt stage, which moves the
//! pipeline's stage-parameter generation on; a GPU executor then publishes the stages' new CUDA
//! parameter blocks by epoch (`GpuExecutor::publish_stage_params`), as it does ACL tables.

use crate::stage::config::StageConfig;
use crate::stage::run::{Pipeline, Stage};

/// What [`Pipeline::reload_stage_options`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OptionsReload {
    /// The stages rebuilt with new options, by name, in pipeline order.
    pub rebuilt: Vec<String>,
    /// The stage-parameter generation now in force.
    pub generation: u64,
}

impl Pipeline {
    /// The stage-parameter generation now in force: 0 at start, and it grows with every
    /// stage build a reload publishes (the sum of the `custom:` stages' rebuilds and of the
    /// `route` stages' table generations: a reload that rebuilds two stages moves it on by
    /// two). A route table is part of its stage's GPU parameter block, so a new one is a new
    /// parameter set to publish.
    pub fn params_generation(&self) -> u64 {
        self.stages
            .iter()
            .map(|s| match s {
                Stage::Custom(c) => c.rebuilds() + c.cpu().params_generation(),
                Stage::Route(r) => r.generation(),
                Stage::RateLimit(rl) => rl.generation(),
                _ => 0,
            })
            .sum()
    }

    /// Rebuilds, aside, every `custom:` stage whose options in `configs` (the same stage list
    /// as the running pipeline, in order) differ from those in force, then publishes them all
    /// at once; nothing is published when any fails (the error names the stage). The `acl`
    /// stage's rules are not this method's (see [`Pipeline::reload_acl`]); a change to another
    /// built-in stage's options is an error (restart needed).
    pub fn reload_stage_options(&self, configs: &[StageConfig]) -> anyhow::Result<OptionsReload> {
        if configs.len() != self.stages.len() {
            anyhow::bail!(
                "the new config has {} stages where {} run",
                configs.len(),
                self.stages.len()
            );
        }
        let mut built = Vec::new();
        let mut limits = Vec::new();
        let mut files = Vec::new();
        for (i, (stage, cfg)) in self.stages.iter().zip(configs).enumerate() {
            match (stage, cfg) {
                (Stage::RateLimit(rl), StageConfig::RateLimit(c)) => {
                    let new = rl
                        .prepare_reload(c)
                        .map_err(|e| anyhow::anyhow!("pipeline[{i}]: {e:#}"))?;
                    if let Some(new) = new {
                        limits.push((rl, new));
                    }
                }
                (Stage::Custom(slot), StageConfig::Custom(c)) if c.name == slot.name() => {
                    let b = slot
                        .rebuild(&c.options)
                        .map_err(|e| anyhow::anyhow!("pipeline[{i}]: {e:#}"))?;
                    if let Some(b) = b {
                        built.push((slot, b));
                    }
                }
                // `inspect`: new options rebuild it; the same options re-read its rule files.
                (Stage::Custom(slot), StageConfig::Inspect(c)) if slot.name() == cfg.name() => {
                    let b = slot
                        .rebuild(
                            &c.clone()
                                .with_flow_table(crate::stage::inspect::conntrack_before(
                                    configs, i,
                                ))
                                .options(),
                        )
                        .map_err(|e| anyhow::anyhow!("pipeline[{i}]: {e:#}"))?;
                    match b {
                        Some(b) => built.push((slot, b)),
                        None => {
                            if let Some(r) = slot
                                .cpu()
                                .reload_files()
                                .map_err(|e| anyhow::anyhow!("pipeline[{i}]: {e:#}"))?
                            {
                                files.push((slot.name().to_string(), r));
                            }
                        }
                    }
                }
                // A built-in through the registry door (`ttl`): its options are not reloaded.
                (Stage::Custom(slot), cfg)
                    if !matches!(cfg, StageConfig::Custom(_)) && cfg.name() == slot.name() => {}
                (Stage::Custom(slot), _) => anyhow::bail!(
                    "pipeline[{i}]: the running stage `{}` is not in the new config",
                    slot.name()
                ),
                _ if stage.name() == cfg.name() => {}
                _ => anyhow::bail!(
                    "pipeline[{i}]: the running stage `{}` is `{}` in the new config",
                    stage.name(),
                    cfg.name()
                ),
            }
        }
        let mut out = OptionsReload {
            rebuilt: built.iter().map(|(s, _)| s.name().to_string()).collect(),
            generation: self.params_generation(),
        };
        out.rebuilt
            .extend(limits.iter().map(|_| "rate_limit".to_string()));
        // Stages whose files were re-read: published with the rebuilt ones, after every build
        // succeeded.
        for (name, r) in files {
            tracing::info!("reload: {}", r.what);
            (r.publish)();
            out.rebuilt.push(name);
        }
        if built.is_empty() && limits.is_empty() {
            return Ok(out);
        }
        for (slot, b) in built {
            slot.publish(b);
        }
        for (rl, new) in limits {
            rl.publish(new);
        }
        out.generation = self.params_generation();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::PacketMeta;
    use crate::stage::config::CustomStageConfig;
    use crate::stage::registry::{BuiltStage, GpuStage, StageFactory, StageRegistry};
    use crate::testdata::MaxLen;
    use crate::verdict::{Action, Verdict};
    use std::sync::Arc;

    /// testdata's MaxLen. Its CUDA parameter block is `max_len` as a u32; option
    /// `counters: 2` gives it a second counter (a shape change).
    struct Factory;
    impl StageFactory for Factory {
        fn build(&self, o: &serde_json::Value) -> anyhow::Result<BuiltStage> {
            let max_len = MaxLen::option(o)?;
            let two = o.get("counters").and_then(serde_json::Value::as_u64) == Some(2);
            let source = if o.get("other_cuda").is_some() {
                "B"
            } else {
                "A"
            };
            Ok(BuiltStage {
                cpu: Arc::new(if two {
                    MaxLen::new(max_len as usize).with_extra_counter()
                } else {
                    MaxLen::new(max_len as usize)
                }),
                gpu: Some(GpuStage {
                    source: format!("/* {source} */ PW_DEVICE void max_len() {{}}"),
                    function: "max_len".into(),
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

    fn cfgs(options: serde_json::Value) -> Vec<StageConfig> {
        vec![
            StageConfig::Parse,
            StageConfig::Custom(CustomStageConfig {
                name: "max_len".into(),
                options,
            }),
            StageConfig::Count,
        ]
    }

    fn pipeline() -> Pipeline {
        let mut r = StageRegistry::default();
        r.register("max_len", Arc::new(Factory)).unwrap();
        crate::stage::run::build_with(
            &cfgs(serde_json::json!({ "max_len": 100 })),
            |p| p.to_path_buf(),
            &r,
        )
        .unwrap()
    }

    fn slot(p: &Pipeline) -> &crate::stage::CustomSlot {
        match &p.stages[1] {
            Stage::Custom(c) => c,
            _ => unreachable!(),
        }
    }

    #[test]
    fn new_options_rebuild_the_stage_and_bump_the_generation() {
        let p = pipeline();
        assert_eq!(p.params_generation(), 0);
        let same = p
            .reload_stage_options(&cfgs(serde_json::json!({ "max_len": 100 })))
            .unwrap();
        assert!(same.rebuilt.is_empty());
        assert_eq!(same.generation, 0, "unchanged options: no new generation");
        let before = drops_raw(&p);
        let r = p
            .reload_stage_options(&cfgs(serde_json::json!({ "max_len": 200 })))
            .unwrap();
        assert_eq!(r.rebuilt, ["max_len"]);
        assert_eq!((r.generation, p.params_generation()), (1, 1));
        assert_eq!(slot(&p).options()["max_len"], 200);
        assert_eq!(slot(&p).gpu().unwrap().params, 200u32.to_le_bytes());
        let after = drops_raw(&p);
        assert_eq!((before, after), (2, 1), "150 passes with max_len 200");
        // The first build's count carries over.
        assert_eq!(slot(&p).counters(), [("too_long", 3)]);
    }

    /// Frames of 64, 150 and 300 bytes through the custom stage in force: how many it drops.
    fn drops_raw(p: &Pipeline) -> usize {
        let mut dropped = 0;
        for n in [64usize, 150, 300] {
            let mut v = Verdict::PASS;
            slot(p)
                .cpu()
                .process(&vec![0u8; n], &PacketMeta::default(), &mut v);
            dropped += (v.action == Action::Drop) as usize;
        }
        dropped
    }

    #[test]
    fn a_failed_rebuild_publishes_nothing() {
        let p = pipeline();
        let e = p
            .reload_stage_options(&cfgs(serde_json::json!({ "max_len": "x" })))
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("pipeline[1]") && format!("{e:#}").contains("max_len"),
            "{e:#}"
        );
        let e = p
            .reload_stage_options(&cfgs(serde_json::json!({ "max_len": 50, "counters": 2 })))
            .unwrap_err();
        assert!(format!("{e:#}").contains("counters"), "{e:#}");
        let e = p
            .reload_stage_options(&cfgs(serde_json::json!({ "max_len": 50, "other_cuda": 1 })))
            .unwrap_err();
        assert!(format!("{e:#}").contains("CUDA code"), "{e:#}");
        let mut other = cfgs(serde_json::json!({ "max_len": 50 }));
        other.swap(0, 2);
        assert!(
            p.reload_stage_options(&other).is_err(),
            "another stage order"
        );
        assert!(p.reload_stage_options(&other[..2]).is_err(), "fewer stages");
        assert_eq!(p.params_generation(), 0);
        assert_eq!(slot(&p).options()["max_len"], 100);
        assert_eq!(drops_raw(&p), 2);
    }
}
