//! The `inspect` stage on the GPU executor: its library stage (gpu-kernels/cuda/
//! inspect_stage.cuh) gets the rule set in force as its parameter block
//! ([`pktwarp_inspect::gpu::block`]) and a device buffer of hit counters (u64 per rule), which
//! its host side reads while the run goes and at its end and adds to the stage's per-rule hits
//! (`pktwarp_inspect_rule_hits_total`, the summary's top rules), as the CPU stage counts them.
//! The stage's own counters come back through its counter block like any stage's.
//!
//! Alerts come back through a device ring (`pw_insp_alert` entries, tagged with their log
//! index) that the host side reads in log order into the EVE log, as the CPU stage's alerts.
//!
//! What stays on the CPU executor (the GPU refuses the pipeline, saying why, and `auto` picks
//! the CPU): a rule reading an HTTP buffer or keeping state (named by sid, file and line), EVE
//! lines with the payload, and a rule reload while a GPU run goes (the kernel keeps the set it
//! started with: restart).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::stage::gpu_host::{GpuHostSide, StageGpuMemory};
use crate::stage::inspect::{AlertTo, InspectStage};
use crate::stage::run::Pipeline;
use crate::stage::GpuParams;
use pktwarp_inspect::alert::AlertSender;
use pktwarp_inspect::gpu;

/// Why the GPU executor does not run an `inspect` stage whose EVE lines carry the payload.
pub const EVE_PAYLOAD_REFUSAL: &str = "`eve.payload: true`: the GPU stage's alert ring carries \
     each alert's tuple and time, not the payload";

/// How often the host side reads the alert ring and the hit counters: at 65,536 entries a
/// ring, 6.5 M alerts/s before a lap overwrites unread ones.
const POLL: Duration = Duration::from_millis(10);

impl InspectStage {
    /// The GPU side ([`crate::stage::CustomStage::gpu_library`]).
    pub(crate) fn gpu_params(&self) -> Result<GpuParams, String> {
        let p = self.shared.current.load();
        let alert_to = match self.shared.cfg.alert_to {
            AlertTo::None => gpu::ALERT_NONE,
            AlertTo::Host => gpu::ALERT_HOST,
            AlertTo::Mirror => gpu::ALERT_MIRROR,
        };
        let eve = self.shared.cfg.eve.as_ref();
        let cap = if eve.is_some() { gpu::ALERT_RING } else { 0 };
        let block = gpu::block(&p.set, alert_to, cap as u32)?;
        if eve.is_some_and(|e| e.payload) {
            return Err(EVE_PAYLOAD_REFUSAL.into());
        }
        let mut buffers = vec![pktwarp_kernels::StageBuffer {
            name: "rule hits".into(),
            bytes: p.set.len().max(1) * 8,
            addr_at: gpu::HITS_AT,
        }];
        if cap > 0 {
            buffers.push(pktwarp_kernels::StageBuffer {
                name: "alert ring".into(),
                bytes: gpu::ring_bytes(cap),
                addr_at: gpu::ALERTS_AT,
            });
        }
        Ok(GpuParams { block, buffers })
    }

    /// The host side that reads the hit counters and the alert ring of the stage at
    /// `position`; from now on a rule reload is refused (the kernel runs the set it started
    /// with).
    pub(crate) fn gpu_side(&self, position: usize) -> Box<dyn GpuHostSide> {
        self.shared.on_gpu.store(true, Ordering::Relaxed);
        let ring = self.shared.cfg.eve.is_some().then_some(gpu::ALERT_RING);
        Box::new(GpuReader {
            stage: Arc::clone(&self.shared),
            sender: self.shared.sender(),
            position,
            seen: Vec::new(),
            ring,
            next: Vec::new(),
        })
    }
}

/// Reads the device hit counters (summed over the GPUs) into the rule set's, and the alert
/// rings into the EVE log.
struct GpuReader {
    stage: Arc<crate::stage::inspect::Shared>,
    /// The alert log's sender, once the log runs (the `start` hook opens it).
    sender: Option<AlertSender>,
    position: usize,
    seen: Vec<u64>,
    /// The ring's entries, when the stage has one.
    ring: Option<usize>,
    /// Per GPU, the next log index to read.
    next: Vec<u64>,
}

impl GpuReader {
    fn read_hits(&mut self, mem: &dyn StageGpuMemory) -> anyhow::Result<()> {
        let p = self.stage.current.load();
        let mut sum = vec![0u64; p.set.len()];
        for g in 0..mem.gpus() {
            let b = mem.read_buffer(g, self.position, 0)?;
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

    /// The alerts each GPU's ring holds past what was read, in log order, to the EVE log. A
    /// ring that went a whole lap ahead lost the entries it overwrote (counted `eve_lost`).
    fn read_alerts(&mut self, mem: &dyn StageGpuMemory) -> anyhow::Result<()> {
        let Some(cap) = self.ring else { return Ok(()) };
        if self.sender.is_none() {
            self.sender = self.stage.sender();
        }
        let Some(tx) = &self.sender else {
            return Ok(());
        };
        let p = self.stage.current.load();
        self.next.resize(mem.gpus(), 0);
        let now = crate::stage::inspect::host_now_ns();
        for g in 0..mem.gpus() {
            let h = mem.read_buffer_range(g, self.position, 1, 0, 8)?;
            let head = u64::from_le_bytes(h[..8].try_into().unwrap_or_default());
            let mut next = self.next[g];
            if head.saturating_sub(next) > cap as u64 {
                let lost = head - next - cap as u64;
                self.stage.gpu_lost.fetch_add(lost, Ordering::Relaxed);
                next += lost;
            }
            while next < head {
                // The entries up to the ring's end, at most.
                let slot = (next % cap as u64) as usize;
                let n = ((head - next) as usize).min(cap - slot);
                let bytes = mem.read_buffer_range(
                    g,
                    self.position,
                    1,
                    gpu::RING_HEADER + slot * gpu::ALERT_BYTES,
                    n * gpu::ALERT_BYTES,
                )?;
                let mut read = 0;
                for e in bytes.chunks_exact(gpu::ALERT_BYTES) {
                    let Some(a) = gpu::alert_of(&p.set, e, next + read as u64, now) else {
                        break;
                    };
                    tx.send_for(a, p.set.catalog());
                    read += 1;
                }
                next += read as u64;
                if read < n {
                    break; // an entry being written: the next poll takes it
                }
            }
            self.next[g] = next;
        }
        Ok(())
    }
}

impl GpuHostSide for GpuReader {
    fn name(&self) -> &str {
        "inspect"
    }

    fn poll_interval(&self) -> Duration {
        POLL
    }

    fn poll(&mut self, _: &Pipeline, mem: &dyn StageGpuMemory) -> anyhow::Result<()> {
        self.read_alerts(mem)?;
        self.read_hits(mem)
    }

    fn finish(mut self: Box<Self>, _: &Pipeline, mem: &dyn StageGpuMemory) -> anyhow::Result<()> {
        self.read_alerts(mem)?;
        self.read_hits(mem)
    }
}
