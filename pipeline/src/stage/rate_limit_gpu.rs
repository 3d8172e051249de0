//! The GPU executor's `rate_limit` counters brought back to the stage: each queue's table
//! counters (`pw_rl_counters`, after its buckets in the per-queue stage state) are read while
//! the run goes and at its end, and what grew since the last read is added to the stage
//! ([`RateLimitStage::add_gpu_counters`]), so `pktwarp_rate_limit_frames_total`, the table
//! counters and the summary's `rate_limit` section count the GPU's frames as the CPU
//! executor's tables count theirs.
//!
//! The device counts per rule *index*; the names they go under are those of the rules the GPU
//! applies, i.e. of the parameter block published last. A reload publishes its rules to the
//! stage first (the control thread) and to the GPU later (the GPU host side): the host side
//! folds just before it publishes the new block ([`GpuRateFold::fold`]), with the old names,
//! then takes the new names ([`GpuRateFold::published`]). Bursts already on the GPU when the
//! block is swapped still run with the old rules: when the reload changed the rules' names,
//! their counts (a ring's worth of frames a queue at most) go under the new names.

use pktwarp_flow::rate::{RateCounters, COUNTERS_BYTES};

use crate::stage::rate_limit::{queue_counters_at, RateLimitStage};
use crate::stage::{Pipeline, Stage};

/// One `rate_limit` stage's fold state.
struct Tracked {
    /// The stage's position in the pipeline.
    k: usize,
    /// The names of the rules the GPU applies, by index.
    names: Vec<String>,
    /// Per queue, the device counters read last.
    seen: Vec<RateCounters>,
}

/// Reads a queue's part of a stage's per-queue state: `(stage, queue, offset, len)`.
pub type ReadQueueState<'a> = dyn FnMut(usize, usize, usize, usize) -> anyhow::Result<Vec<u8>> + 'a;

/// The fold of every `rate_limit` stage of a pipeline (see the module doc).
pub struct GpuRateFold {
    stages: Vec<Tracked>,
}

fn rate_limit_at(p: &Pipeline, k: usize) -> Option<&RateLimitStage> {
    p.stages.get(k).and_then(Stage::rate_limit)
}

impl GpuRateFold {
    /// The fold of `p`'s `rate_limit` stages, the GPU applying the rules in force now (those
    /// its kernel image was built with).
    pub fn new(p: &Pipeline) -> GpuRateFold {
        let stages = p
            .stages
            .iter()
            .enumerate()
            .filter_map(|(k, s)| {
                s.rate_limit().map(|rl| Tracked {
                    k,
                    names: rl.rule_names(),
                    seen: Vec::new(),
                })
            })
            .collect();
        GpuRateFold { stages }
    }

    /// Whether `p` has a `rate_limit` stage (else [`GpuRateFold::fold`] reads nothing).
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// Reads every queue's counters of every `rate_limit` stage (`queues` queues) and adds what
    /// grew since the last read to the stage, under the names of the rules the GPU applies.
    pub fn fold(
        &mut self,
        p: &Pipeline,
        queues: usize,
        read: &mut ReadQueueState<'_>,
    ) -> anyhow::Result<()> {
        for t in &mut self.stages {
            let Some(rl) = rate_limit_at(p, t.k) else {
                continue;
            };
            let at = usize::try_from(queue_counters_at(&rl.config()))
                .map_err(|_| anyhow::anyhow!("pipeline[{}]: the table is too large", t.k))?;
            t.seen.resize(queues, RateCounters::default());
            let mut grown = RateCounters::default();
            for (q, seen) in t.seen.iter_mut().enumerate() {
                let bytes = read(t.k, q, at, COUNTERS_BYTES)?;
                let now = RateCounters::from_bytes(&bytes).ok_or_else(|| {
                    anyhow::anyhow!(
                        "pipeline[{}] (rate_limit), queue {q}: {} bytes of counters, not \
                         {COUNTERS_BYTES}",
                        t.k,
                        bytes.len()
                    )
                })?;
                add(&mut grown, &now.growth_since(seen));
                *seen = now;
            }
            rl.add_gpu_counters(&t.names, &grown);
        }
        Ok(())
    }

    /// The GPU now applies the rules in force (a parameter block built from them was
    /// published): later growth goes under their names.
    pub fn published(&mut self, p: &Pipeline) {
        for t in &mut self.stages {
            if let Some(rl) = rate_limit_at(p, t.k) {
                t.names = rl.rule_names();
            }
        }
    }
}

fn add(sum: &mut RateCounters, g: &RateCounters) {
    sum.created += g.created;
    sum.reused += g.reused;
    for (s, r) in sum.rules.iter_mut().zip(&g.rules) {
        s.matched += r.matched;
        s.limited += r.limited;
        s.table_full += r.table_full;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::config::StageConfig;
    use pktwarp_flow::rate::RateConfig;

    fn config(names: [&str; 2]) -> RateConfig {
        serde_saphyr::from_str(&format!(
            "entries: 64\nrules:\n  - {{ name: {}, key: src, rate_pps: 10 }}\n  \
             - {{ name: {}, key: dst, rate_pps: 10 }}\n",
            names[0], names[1]
        ))
        .expect("config")
    }

    fn pipeline(names: [&str; 2]) -> Pipeline {
        let stages = [StageConfig::Parse, StageConfig::RateLimit(config(names))];
        crate::stage::build(&stages, |x| x.to_path_buf()).expect("pipeline")
    }

    /// Device counters of one queue: `matched` of rule 0 and 1, `created`.
    fn device(m0: u64, m1: u64, created: u64) -> Vec<u8> {
        let mut c = RateCounters {
            created,
            ..RateCounters::default()
        };
        c.rules[0].matched = m0;
        c.rules[1].matched = m1;
        c.to_bytes()
    }

    fn rules(p: &Pipeline) -> Vec<(String, u64)> {
        let rl = p.stages[1].rate_limit().expect("rate_limit");
        rl.rule_counters()
            .into_iter()
            .map(|(n, v)| (n, v[0]))
            .collect()
    }

    /// Two queues' counters are summed, only their growth is added, and a reload that renamed
    /// the rules sends the growth before the publish to the old names, after it to the new.
    #[test]
    fn growth_of_every_queue_goes_under_the_names_the_gpu_applies() {
        let p = pipeline(["syn", "dns"]);
        let mut fold = GpuRateFold::new(&p);
        assert!(!fold.is_empty());
        let at = queue_counters_at(&config(["a", "b"])) as usize;
        let mut dev = [device(3, 1, 2), device(4, 0, 1)];
        let read = |dev: &[Vec<u8>; 2]| {
            let dev = dev.clone();
            move |k: usize, q: usize, off: usize, len: usize| {
                assert_eq!((k, off, len), (1, at, COUNTERS_BYTES));
                Ok(dev[q].clone())
            }
        };
        fold.fold(&p, 2, &mut read(&dev)).unwrap();
        fold.fold(&p, 2, &mut read(&dev)).unwrap();
        assert_eq!(rules(&p), [("syn".into(), 7), ("dns".into(), 1)]);
        let rl = p.stages[1].rate_limit().unwrap();
        assert_eq!(rl.counters(), [("created", 3), ("reused", 0)]);
        // A reload renames rule 0: the stage has it before the GPU does.
        let new = [
            StageConfig::Parse,
            StageConfig::RateLimit(config(["flood", "dns"])),
        ];
        p.reload_stage_options(&new).expect("reload");
        dev[0] = device(5, 1, 2);
        fold.fold(&p, 2, &mut read(&dev)).unwrap();
        fold.published(&p);
        dev[1] = device(10, 0, 1);
        fold.fold(&p, 2, &mut read(&dev)).unwrap();
        assert_eq!(
            rules(&p),
            [("flood".into(), 6), ("dns".into(), 1), ("syn".into(), 9)]
        );
    }

    #[test]
    fn counters_of_the_wrong_size_are_an_error_naming_the_stage_and_queue() {
        let p = pipeline(["syn", "dns"]);
        let mut fold = GpuRateFold::new(&p);
        let e = fold
            .fold(&p, 1, &mut |_, _, _, _| Ok(vec![0u8; 8]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("pipeline[1] (rate_limit), queue 0"), "{e}");
        let e = fold
            .fold(&p, 1, &mut |_, q, _, _| anyhow::bail!("queue {q}: gone"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("queue 0: gone"), "{e}");
    }
}
