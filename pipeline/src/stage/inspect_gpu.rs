//! The `inspect` stage on the GPU executor: its library stage (gpu-kernels/cuda/
//! inspect_stage.cuh) gets the rule set in force as its parameter block
//! ([`pktwarp_inspect::gpu::block`]) and a device buffer of hit counters (u64 per rule), which
//! its host side reads while the run goes and at its end and adds to the stage's per-rule hits
//! (`pktwarp_inspect_rule_hits_total`, the summary's top rules), as the CPU stage counts them.
//! The stage's own counters come back through its counter block like any stage's.
//!
//! What stays on the CPU executor (the GPU refuses the pipeline, saying why, and `auto` picks
//! the CPU): a rule reading an HTTP buffer or keeping state (named by sid, file and line), an
//! EVE log (each alert's fields would have to come back with the frame), and a rule reload
//! while a GPU run goes (the kernel keeps the set it started with: restart).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::stage::gpu_host::{GpuHostSide, StageGpuMemory};
use crate::stage::inspect::{AlertTo, InspectStage};
use crate::stage::run::Pipeline;
use crate::stage::GpuParams;

/// Why the GPU executor does not run an `inspect` stage with an EVE log.
pub const EVE_REFUSAL: &str = "the EVE alert log (`eve:`) is written by the CPU executor only: \
     the GPU stage counts alerts and returns verdicts, not each alert's frame";

/// How often the host side reads the hit counters.
const POLL: Duration = Duration::from_millis(250);

impl InspectStage {
    /// The GPU side ([`crate::stage::CustomStage::gpu_library`]).
    pub(crate) fn gpu_params(&self) -> Result<GpuParams, String> {
        let p = self.shared.current.load();
        let alert_to = match self.shared.cfg.alert_to {
            AlertTo::None => pktwarp_inspect::gpu::ALERT_NONE,
            AlertTo::Host => pktwarp_inspect::gpu::ALERT_HOST,
            AlertTo::Mirror => pktwarp_inspect::gpu::ALERT_MIRROR,
        };
        let block = pktwarp_inspect::gpu::block(&p.set, alert_to)?;
        if self.shared.cfg.eve.is_some() {
            return Err(EVE_REFUSAL.into());
        }
        Ok(GpuParams {
            block,
            buffers: vec![pktwarp_kernels::StageBuffer {
                name: "rule hits".into(),
                bytes: p.set.len().max(1) * 8,
                addr_at: pktwarp_inspect::gpu::HITS_AT,
            }],
        })
    }

    /// The host side that reads the hit counters of the stage at `position`; from now on a
    /// rule reload is refused (the kernel runs the set it started with).
    pub(crate) fn gpu_side(&self, position: usize) -> Box<dyn GpuHostSide> {
        self.shared.on_gpu.store(true, Ordering::Relaxed);
        Box::new(HitsReader {
            stage: Arc::clone(&self.shared),
            position,
            seen: Vec::new(),
        })
    }
}

/// Reads the device hit counters (summed over the GPUs) and adds what grew to the rule set's.
struct HitsReader {
    stage: Arc<crate::stage::inspect::Shared>,
    position: usize,
    seen: Vec<u64>,
}

impl HitsReader {
    fn read(&mut self, mem: &dyn StageGpuMemory) -> anyhow::Result<()> {
        let p = self.stage.current.load();
        let mut sum = vec![0u64; p.set.len()];
        for gpu in 0..mem.gpus() {
            let b = mem.read_buffer(gpu, self.position, 0)?;
            for (s, w) in sum.iter_mut().zip(b.chunks_exact(8)) {
                *s += u64::from_le_bytes(w.try_into().unwrap_or_default());
            }
        }
        self.seen.resize(sum.len(), 0);
        for (r, (now, old)) in sum.iter().zip(self.seen.iter_mut()).enumerate() {
            if *now > *old {
                p.hits.add(r as u32, *now - *old);
                *old = *now;
            }
        }
        Ok(())
    }
}

impl GpuHostSide for HitsReader {
    fn name(&self) -> &str {
        "inspect"
    }

    fn poll_interval(&self) -> Duration {
        POLL
    }

    fn poll(&mut self, _: &Pipeline, mem: &dyn StageGpuMemory) -> anyhow::Result<()> {
        self.read(mem)
    }

    fn finish(mut self: Box<Self>, _: &Pipeline, mem: &dyn StageGpuMemory) -> anyhow::Result<()> {
        self.read(mem)
    }
}
