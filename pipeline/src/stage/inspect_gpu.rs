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
//! A SIGHUP that re-reads the rule files publishes the new set by epoch as the route and ACL
//! tables are: its generation moves `Pipeline::params_generation` on and the GPU host side
//! uploads the new block; its hits count in the other of two banks, so bursts of the set before
//! it still running count for that one.
//!
//! Rules keeping state (flowbits, noalert, threshold, detection_filter) run over per-queue
//! tables in device memory ([`InspectStage::gpu_state_buffers`], the executor's per-queue stage
//! state), whose counters come back after the hit banks into the set's state counters.
//!
//! What stays on the CPU executor (the GPU refuses the pipeline, saying why, and `auto` picks
//! the CPU): EVE lines with the payload.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::stage::gpu_host::{GpuHostSide, StageGpuMemory};
use crate::stage::inspect::{AlertTo, InspectStage, Published, Shared};
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
        let block = gpu::block(&p.set, alert_to, cap as u32, p.generation)?;
        if eve.is_some_and(|e| e.payload) {
            return Err(EVE_PAYLOAD_REFUSAL.into());
        }
        // Fixed sizes: a reload's block keeps the buffers the kernel has.
        let mut buffers = vec![pktwarp_kernels::StageBuffer {
            name: "rule hits".into(),
            bytes: gpu::HIT_BYTES,
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

    /// The flowbits / threshold tables of every queue, when rules keeping state may load (a
    /// `conntrack` before the stage): sized from `state` whatever the set in force, so a
    /// reload's set finds them.
    pub(crate) fn gpu_state_buffers(&self) -> Vec<pktwarp_kernels::StageBuffer> {
        if !self.shared.cfg.flow_table {
            return Vec::new();
        }
        vec![pktwarp_kernels::StageBuffer {
            name: "flowbits / threshold tables".into(),
            bytes: gpu::state_queue_bytes(&self.shared.cfg.state.config()),
            addr_at: gpu::STATE_AT,
        }]
    }

    /// The host side that reads the hit counters and the alert ring of the stage at
    /// `position`.
    pub(crate) fn gpu_side(&self, position: usize) -> Box<dyn GpuHostSide> {
        let ring = self.shared.cfg.eve.is_some().then_some(gpu::ALERT_RING);
        let cur = self.shared.current.load_full();
        let mut sets: [Option<Arc<Published>>; 2] = [None, None];
        let b = (cur.generation & 1) as usize;
        sets[b] = Some(cur);
        Box::new(GpuReader {
            stage: Arc::clone(&self.shared),
            sender: self.shared.sender(),
            position,
            sets,
            seen: [vec![0; gpu::MAX_RULES], vec![0; gpu::MAX_RULES]],
            seen_state: [[0; 3]; 2],
            ring,
            next: Vec::new(),
        })
    }
}

/// Reads the device hit counters (summed over the GPUs) into the rule sets', and the alert
/// rings into the EVE log. Bank `b` counts for the set of generation parity `b`: a reload's
/// set takes the bank of the set two generations before it, whose counts were all read while
/// the set between them was in force.
struct GpuReader {
    stage: Arc<Shared>,
    /// The alert log's sender, once the log runs (the `start` hook opens it).
    sender: Option<AlertSender>,
    position: usize,
    /// The set each bank counts for.
    sets: [Option<Arc<Published>>; 2],
    /// Each bank's counts as last read (summed over GPUs).
    seen: [Vec<u64>; 2],
    /// Each bank's state counters as last read (flows_full, trackers_full, suppressed).
    seen_state: [[u64; 3]; 2],
    /// The ring's entries, when the stage has one.
    ring: Option<usize>,
    /// Per GPU, the next log index to read.
    next: Vec<u64>,
}

impl GpuReader {
    /// Takes the set in force into its bank (a reload published since the last read).
    fn follow(&mut self) {
        let cur = self.stage.current.load_full();
        let b = (cur.generation & 1) as usize;
        if self.sets[b]
            .as_ref()
            .is_none_or(|s| s.generation != cur.generation)
        {
            self.sets[b] = Some(cur);
        }
    }

    fn read_hits(&mut self, mem: &dyn StageGpuMemory) -> anyhow::Result<()> {
        let cur = self.stage.current.load().generation;
        for b in 0..2 {
            let Some(set) = self.sets[b].clone() else {
                continue;
            };
            let n = set.set.len();
            let mut sum = vec![0u64; n];
            for g in 0..mem.gpus() {
                let bytes =
                    mem.read_buffer_range(g, self.position, 0, b * gpu::MAX_RULES * 8, n * 8)?;
                for (s, w) in sum.iter_mut().zip(bytes.chunks_exact(8)) {
                    *s += u64::from_le_bytes(w.try_into().unwrap_or_default());
                }
            }
            let mut st = [0u64; 3];
            for g in 0..mem.gpus() {
                let at = gpu::STATE_COUNTERS_AT + 32 * b;
                let bytes = mem.read_buffer_range(g, self.position, 0, at, 24)?;
                for (s, w) in st.iter_mut().zip(bytes.chunks_exact(8)) {
                    *s += u64::from_le_bytes(w.try_into().unwrap_or_default());
                }
            }
            for (i, (now, old)) in st.iter().zip(self.seen_state[b].iter_mut()).enumerate() {
                if *now > *old {
                    let d = *now - *old;
                    *old = *now;
                    if set.generation == cur {
                        set.gpu_state[i].fetch_add(d, Ordering::Relaxed);
                    } else {
                        self.stage.carry_state(i, d);
                    }
                }
            }
            for (r, (now, old)) in sum.iter().zip(self.seen[b].iter_mut()).enumerate() {
                if *now <= *old {
                    continue;
                }
                let d = *now - *old;
                *old = *now;
                if set.generation == cur {
                    set.hits.add(r as u32, d);
                } else if let Some(info) = set.set.catalog().rules.get(r) {
                    // A set replaced by a reload: its late counts go where its hits went.
                    self.stage.carry_hits(info.sid, d);
                }
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
        let Some(tx) = self.sender.clone() else {
            return Ok(());
        };
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
                let at = gpu::RING_HEADER + slot * gpu::ALERT_BYTES;
                let bytes = mem.read_buffer_range(g, self.position, 1, at, n * gpu::ALERT_BYTES)?;
                let mut read = 0;
                for e in bytes.chunks_exact(gpu::ALERT_BYTES) {
                    let Some(p) = self.sets[gpu::alert_bank(e)].as_ref() else {
                        break;
                    };
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
        self.follow();
        self.read_alerts(mem)?;
        self.read_hits(mem)
    }

    fn finish(mut self: Box<Self>, _: &Pipeline, mem: &dyn StageGpuMemory) -> anyhow::Result<()> {
        self.follow();
        self.read_alerts(mem)?;
        self.read_hits(mem)
    }
}
