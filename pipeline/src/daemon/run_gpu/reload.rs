//! Hot swap on the GPU: a reload (control thread, `Pipeline::reload_acl`,
//! `Pipeline::reload_stage_options`) bumps one of the pipeline's generations;
//! [`AclPublisher::check`] uploads the new ACL tables and [`ParamsPublisher::check`] the stages'
//! new parameter blocks to the GPU, after which every burst submitted names them in its slot
//! header. [`LiveStageCounters`] brings a composed pipeline's stage counters to the metrics
//! while the run goes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::device::QueueDevice;
use super::verify::PublishedTables;
use crate::counters::QueueCounters;
use crate::executor::gpu::compose::{stage_set, StageCounterFold};
use crate::executor::gpu::AclTablesRef;
use crate::stage::rate_limit_gpu::GpuRateFold;
use crate::stage::Pipeline;

/// The generation of the ACL tables the GPU classifies with.
pub(crate) struct AclPublisher {
    acl_on: bool,
    have: u64,
    /// Where the sampling verifier learns which tables the GPU has (sampling on).
    record: Option<Arc<PublishedTables>>,
}

impl AclPublisher {
    /// `acl_on`: the GPU runs an acl stage. The GPU starts with the tables in force when its
    /// pipeline was built, generation `start`.
    pub fn new(acl_on: bool, start: u64) -> AclPublisher {
        AclPublisher {
            acl_on,
            have: start,
            record: None,
        }
    }

    /// Marks each publish in `record` (begun before it, ended with its generation after).
    pub fn recording(self, record: Option<Arc<PublishedTables>>) -> AclPublisher {
        AclPublisher { record, ..self }
    }

    /// The generation the GPU has.
    #[cfg(test)]
    pub fn generation(&self) -> u64 {
        self.have
    }

    /// Publishes the pipeline's tables when they are newer than the GPU's. The generation
    /// compared is the one stamped into the tables read (`acl.generation`), so a reload racing
    /// this check is picked up by the next one.
    pub fn check(&mut self, pipeline: &Pipeline, dev: &dyn QueueDevice) -> anyhow::Result<()> {
        if !self.acl_on || pipeline.generation() == self.have {
            return Ok(());
        }
        let Some(a) = pipeline.acl() else {
            return Ok(());
        };
        if a.generation == self.have {
            return Ok(());
        }
        let bytes = a.gpu_image_bytes();
        if let Some(r) = &self.record {
            r.begin();
        }
        dev.publish_acl(
            &AclTablesRef {
                bytes: &bytes,
                n_rules: a.rule_count() as u32,
            },
            a.generation,
            a.default as u8,
        )?;
        if let Some(r) = &self.record {
            r.end_acl(a.generation);
        }
        tracing::info!(
            event = "gpu_acl_swap",
            generation = a.generation,
            rules = a.rule_count(),
            "GPU executor now classifies with rule-set generation {}",
            a.generation
        );
        self.have = a.generation;
        Ok(())
    }
}

/// The stage-parameter generation the GPU runs with (composed template only: the fused
/// template's stages have no parameter blocks).
pub(crate) struct ParamsPublisher {
    composed: bool,
    have: u64,
    record: Option<Arc<PublishedTables>>,
}

impl ParamsPublisher {
    pub fn new(composed: bool, start: u64) -> ParamsPublisher {
        ParamsPublisher {
            composed,
            have: start,
            record: None,
        }
    }

    /// Marks each publish in `record` (see [`AclPublisher::recording`]).
    pub fn recording(self, record: Option<Arc<PublishedTables>>) -> ParamsPublisher {
        ParamsPublisher { record, ..self }
    }

    /// The stage-parameter generation the GPU has.
    pub fn generation(&self) -> u64 {
        self.have
    }

    /// Publishes the stages' parameter blocks when a reload rebuilt a stage since the last
    /// publish. The generation is read before the blocks, so a reload racing this check is
    /// published by the next one.
    pub fn check(&mut self, pipeline: &Pipeline, dev: &dyn QueueDevice) -> anyhow::Result<()> {
        let g = pipeline.params_generation();
        if !self.composed || g == self.have {
            return Ok(());
        }
        let set = stage_set(pipeline)?;
        if let Some(r) = &self.record {
            r.begin();
        }
        dev.publish_stage_params(&set.params, g)?;
        if let Some(r) = &self.record {
            r.end_params(g);
        }
        tracing::info!(
            event = "gpu_params_swap",
            generation = g,
            "GPU executor now runs with stage-parameter generation {g}"
        );
        self.have = g;
        Ok(())
    }
}

/// How often a composed pipeline's stage counters are read from the GPU for the metrics.
const LIVE_EVERY: Duration = Duration::from_millis(250);

/// A composed pipeline's per-stage counters, read from the GPU every [`LIVE_EVERY`] while the
/// run goes and once at its end, and folded into the queue counters the metrics read; with
/// them the `rate_limit` stages' table counters, from each queue's per-queue state.
pub(crate) struct LiveStageCounters {
    composed: bool,
    fold: StageCounterFold,
    rate: GpuRateFold,
    last: Option<Instant>,
}

impl LiveStageCounters {
    /// `pipeline`: its rules in force are those the GPU starts with.
    pub fn new(composed: bool, pipeline: &Pipeline) -> LiveStageCounters {
        LiveStageCounters {
            composed,
            fold: StageCounterFold::default(),
            rate: GpuRateFold::new(pipeline),
            last: None,
        }
    }

    /// [`ParamsPublisher::check`], the `rate_limit` counters folded just before a publish
    /// (under the names of the rules the GPU applied until then) and their names taken from
    /// the rules published after it.
    pub fn publish_params(
        &mut self,
        params: &mut ParamsPublisher,
        pipeline: &Pipeline,
        dev: &dyn QueueDevice,
        counters: &[std::sync::Arc<QueueCounters>],
    ) -> anyhow::Result<()> {
        let due = self.composed && pipeline.params_generation() != params.generation();
        if due && !self.rate.is_empty() {
            self.check(pipeline, dev, counters, true)?;
        }
        params.check(pipeline, dev)?;
        if due {
            self.rate.published(pipeline);
        }
        Ok(())
    }

    /// Folds what grew since the last read, when [`LIVE_EVERY`] has passed (or `now` is set).
    pub fn check(
        &mut self,
        pipeline: &Pipeline,
        dev: &dyn QueueDevice,
        counters: &[std::sync::Arc<QueueCounters>],
        now: bool,
    ) -> anyhow::Result<()> {
        if !self.composed {
            return Ok(());
        }
        if !now && self.last.is_some_and(|t| t.elapsed() < LIVE_EVERY) {
            return Ok(());
        }
        self.last = Some(Instant::now());
        let stages = dev.stage_counters()?;
        self.fold.fold(pipeline, &stages, counters);
        if !self.rate.is_empty() {
            self.rate
                .fold(pipeline, counters.len(), &mut |k, q, off, len| {
                    dev.read_queue_state(k, 0, q, off, len)
                })?;
        }
        Ok(())
    }
}
