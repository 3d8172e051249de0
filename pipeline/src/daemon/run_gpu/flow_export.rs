//! Flow export on the GPU host side (docs/flow-export-gpu.md): the `flow_stats` stage's records
//! come from the device's flow tables. The control loop drains every queue's ended-flow ring
//! every [`SWEEP_PERIOD`] (reads of device memory on the side stream: the data path never
//! waits); each queue's thread, which alone submits to its queue, makes the queue quiet every
//! [`SWEEP_PERIOD`] (it stops submitting until its bursts in flight are reaped) and sweeps the
//! next [`SWEEP_BUCKETS`] buckets of its device table by the CPU's code on the CPU's clock; after
//! the last burst the rings are drained once more and the device tables copied into the stage's
//! CPU tables, which the control thread's flush exports as on the CPU executor.
//! The tables and rings are the per-queue device state of the stage that keeps them: a
//! `conntrack` stage's (on the device flow_stats then does nothing), or flow_stats' own when the
//! pipeline has no conntrack (its device stage applies the frames: cuda/flow_stats_stage.cuh).

use std::sync::Mutex;
use std::time::Instant;

use super::device::QueueDevice;
use crate::control::flow_export::{SWEEP_BUCKETS, SWEEP_PERIOD};
use crate::stage::conntrack::ConntrackStage;
use crate::stage::flow_stats::FlowStatsStage;
use crate::stage::flow_stats_gpu::{gpu_ring_cap, GpuFlowDrain};
use crate::stage::flow_tables::FlowTables;
use crate::stage::{Pipeline, Stage};

/// The run's flow export (see the module doc).
pub(crate) struct GpuFlows<'p> {
    /// The position of the stage whose per-queue state holds the tables and rings.
    k: usize,
    tables: &'p FlowTables,
    /// The conntrack stage whose tables they are (its `expired` counts the sweeps' removals);
    /// `None` when they are flow_stats' own (whose table counters the CPU does not publish).
    ct: Option<&'p ConntrackStage>,
    fs: &'p FlowStatsStage,
    queues: usize,
    drain: Mutex<GpuFlowDrain>,
    next_drain: Mutex<Option<Instant>>,
    /// Per queue: when its next sweep is due.
    next_sweep: Vec<Mutex<Option<Instant>>>,
}

impl<'p> GpuFlows<'p> {
    /// The flow export of `p` on `queues` queues: `None` without a `flow_stats` stage, or when
    /// the tables' rings are off.
    pub fn of(p: &'p Pipeline, queues: usize) -> Option<GpuFlows<'p>> {
        let (at, fs) = p.stages.iter().enumerate().find_map(|(k, s)| match s {
            Stage::FlowStats(f) => Some((k, f)),
            _ => None,
        })?;
        let (k, ct) = if fs.owns_tables() {
            (at, None)
        } else {
            p.stages.iter().enumerate().find_map(|(k, s)| match s {
                Stage::Conntrack(c) => Some((k, Some(&**c))),
                _ => None,
            })?
        };
        let tables = fs.tables();
        if gpu_ring_cap(tables) == 0 {
            return None;
        }
        Some(GpuFlows {
            k,
            tables,
            ct,
            fs,
            queues,
            drain: Mutex::new(GpuFlowDrain::default()),
            next_drain: Mutex::new(None),
            next_sweep: (0..queues).map(|_| Mutex::new(None)).collect(),
        })
    }

    /// A burst of queue `q` was submitted: the queue's sweep clock follows its receive times.
    pub fn submitted(&self, q: usize, times: impl Iterator<Item = u64>) {
        if let Some(t) = times.max() {
            self.fs.note_rx(q, t);
        }
    }

    /// Whether queue `q`'s sweep is due at `now` (its thread then stops submitting until its
    /// bursts in flight are reaped, and calls [`GpuFlows::sweep`]).
    pub fn sweep_due(&self, q: usize, now: Instant) -> bool {
        self.next_sweep.get(q).is_some_and(|m| {
            let next = m.lock().unwrap_or_else(|p| p.into_inner());
            next.is_none_or(|t| now >= t)
        })
    }

    /// Queue `q`'s sweep at `now`, its queue quiet: the rings drained first (their records came
    /// before), then the next [`SWEEP_BUCKETS`] buckets of its table.
    pub fn sweep(&self, dev: &dyn QueueDevice, q: usize, now: Instant) -> anyhow::Result<()> {
        let (read, write) = (&mut self.reads(dev), &mut self.writes(dev));
        if let Some(m) = self.next_sweep.get(q) {
            *m.lock().unwrap_or_else(|p| p.into_inner()) = Some(now + SWEEP_PERIOD);
        }
        let mut d = self.drain.lock().unwrap_or_else(|p| p.into_inner());
        d.drain(self.tables, self.fs, self.queues, read, write)?;
        let Some(now_ns) = self.fs.queue_clock(q, now) else {
            // No receive time yet: nothing ages.
            return Ok(());
        };
        let before = d.swept();
        d.sweep(self.tables, self.fs, q, now_ns, SWEEP_BUCKETS, read, write)?;
        // The sweep's removals are conntrack's `expired`, as the CPU table counts them.
        if let Some(ct) = self.ct {
            ct.add_gpu_counters(&[0, d.swept() - before, 0, 0, 0, 0]);
        }
        Ok(())
    }

    /// The control loop's call: drains every queue's ring when [`SWEEP_PERIOD`] has passed (a
    /// queue thread's sweep holding the drain makes it wait for the next time).
    fn tick(&self, dev: &dyn QueueDevice, now: Instant) -> anyhow::Result<()> {
        {
            let mut next = self.next_drain.lock().unwrap_or_else(|p| p.into_inner());
            if next.is_some_and(|t| now < t) {
                return Ok(());
            }
            *next = Some(now + SWEEP_PERIOD);
        }
        let Ok(mut d) = self.drain.try_lock() else {
            return Ok(());
        };
        d.drain(
            self.tables,
            self.fs,
            self.queues,
            &mut self.reads(dev),
            &mut self.writes(dev),
        )?;
        Ok(())
    }

    /// After the last burst was reaped: the rings drained, the device tables copied into the
    /// stage's CPU tables for the control thread's flush.
    fn finish(&self, dev: &dyn QueueDevice) -> anyhow::Result<()> {
        let (read, write) = (&mut self.reads(dev), &mut self.writes(dev));
        let mut d = self.drain.lock().unwrap_or_else(|p| p.into_inner());
        d.drain(self.tables, self.fs, self.queues, read, write)?;
        d.load_tables(self.tables, self.queues, read)
    }

    /// Reads of the table-keeping stage's per-queue state on `dev`.
    fn reads<'d>(
        &self,
        dev: &'d dyn QueueDevice,
    ) -> impl FnMut(usize, usize, usize) -> anyhow::Result<Vec<u8>> + 'd {
        let k = self.k;
        move |q, off, len| dev.read_queue_state(k, 0, q, off, len)
    }

    /// Writes of the table-keeping stage's per-queue state on `dev`.
    fn writes<'d>(
        &self,
        dev: &'d dyn QueueDevice,
    ) -> impl FnMut(usize, usize, &[u8]) -> anyhow::Result<()> + 'd {
        let k = self.k;
        move |q, off, b| dev.write_queue_state(k, 0, q, off, b)
    }
}

/// The control loop's call (nothing without flow export): drains the rings every
/// [`SWEEP_PERIOD`].
pub(crate) fn tick(flows: Option<&GpuFlows<'_>>, dev: &dyn QueueDevice) -> anyhow::Result<()> {
    flows.map_or(Ok(()), |f| f.tick(dev, Instant::now()))
}

/// After the last burst (nothing without flow export): [`GpuFlows::finish`].
pub(crate) fn finish(flows: Option<&GpuFlows<'_>>, dev: &dyn QueueDevice) -> anyhow::Result<()> {
    flows.map_or(Ok(()), |f| f.finish(dev))
}
