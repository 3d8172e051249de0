//! One thread per queue, as the CPU executor has one worker per queue: it takes the bursts the
//! ingest threads built for its queue, submits them to its GPU queue, polls that queue for the
//! verdicts, counts them and passes the bursts to the TX thread in the order the GPU finished
//! them (which is submit order: TX order per queue is receive order). Only this thread touches
//! its GPU queue's submit and poll, so no queue waits on another's.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use super::device::{QueueDevice, TxView};
use super::reap::Reaper;
use super::{wait_on, RingHold, Slot};
use crate::config::OnFull;
use crate::control::watchdog::RestartBoard;
use crate::counters::QueueCounters;
use crate::executor::gpu::abi::{self, TxDesc, Verdict};
use crate::executor::gpu::SubmitError;
use crate::ring::{Consumer, Producer};
use crate::verdict::DropReason;

/// Bursts submitted between two polls at most, so verdicts keep flowing under a full input.
const FEED_MAX: usize = 16;

/// How long the last bursts may take once the input is done.
pub(crate) const LAST_BURSTS_TIMEOUT: Duration = Duration::from_secs(10);

/// What a queue's thread works with.
pub(crate) struct QueueCtx<'a> {
    pub q: usize,
    pub dev: &'a dyn QueueDevice,
    pub counters: &'a QueueCounters,
    pub reaper: Reaper,
    pub on_full: OnFull,
    /// One flag per ingest thread, set once it handed over its last burst.
    pub ingest_done: &'a [AtomicBool],
    pub failed: &'a AtomicBool,
    /// The watchdog's restart requests (`on_stall: restart`).
    pub restarts: &'a RestartBoard,
    /// The pipeline rewrites frames: what the TX thread sends is the GPU's copy of them.
    pub rewrites: bool,
    /// Where the TX thread reads the frames (`tx::plan`): where they arrived, or the slot the
    /// device holds until the TX thread releases it (`QueueDevice::hold_slots`), or a copy the
    /// reap makes.
    pub tx: super::tx::TxPlan,
    /// The stages' host sides pace the input: a burst is submitted only when the gate has
    /// room (their polls covered what ran before it), else held as a full ring holds it.
    pub gate: Option<&'a crate::stage::gpu_host::PollGate>,
    /// Flow export: the queue's sweeps of its device table, made quiet for them.
    pub flows: Option<&'a super::flow_export::GpuFlows<'a>>,
}

/// A queue thread's rings: from each ingest thread, to the TX thread (none without an output
/// port), and each ingest thread's channel for empty slots.
pub(crate) struct QueueIo {
    pub inputs: Vec<Consumer<Slot>>,
    pub to_tx: Option<Producer<Slot>>,
    pub frees: Vec<Sender<Slot>>,
    /// The sampling verifier's tap (`verify.sample` on).
    pub verify: Option<super::verify::GpuTap>,
}

struct Worker<'c, 'a> {
    ctx: &'c QueueCtx<'a>,
    io: QueueIo,
    /// Submitted bursts with their sequence numbers, oldest first.
    pending: VecDeque<(u32, Slot)>,
    /// A burst the GPU ring (`on_full: wait`) or the poll gate had no room for, submitted
    /// first next time.
    held: Option<Slot>,
    /// `held` waits for the poll gate (counted once as a stall).
    gated: bool,
    /// Reaped bursts on their way to the TX thread.
    reaped: Vec<Slot>,
    next_input: usize,
}

/// Runs queue `ctx.q` until every ingest thread is done and every burst is reaped (an error
/// when the GPU does not finish them within [`LAST_BURSTS_TIMEOUT`], or its kernel stopped),
/// or until another thread failed.
pub(crate) fn run(ctx: &QueueCtx<'_>, io: QueueIo) -> anyhow::Result<()> {
    let mut w = Worker {
        ctx,
        io,
        pending: VecDeque::new(),
        held: None,
        gated: false,
        reaped: Vec::new(),
        next_input: 0,
    };
    let backoff = Backoff::new();
    let mut idle_since: Option<Instant> = None;
    loop {
        if ctx.restarts.take(ctx.q) {
            let r = w.restart();
            ctx.restarts.answer(ctx.q, &r);
            // A failed restart is the watchdog's to act on (it ends the daemon, exit 4).
            if let Err(e) = r {
                tracing::error!(event = "kernel_restart_failed", queue = ctx.q, "{e:#}");
            }
        }
        // A sweep due: no submit until the bursts in flight are reaped, then the sweep.
        let quiet = ctx
            .flows
            .is_some_and(|f| f.sweep_due(ctx.q, Instant::now()));
        let work = w.reap()? + if quiet { 0 } else { w.feed()? };
        w.gauges();
        if quiet && w.pending.is_empty() {
            w.sweep()?;
            continue;
        }
        if work > 0 {
            backoff.reset();
            idle_since = None;
            continue;
        }
        if ctx.failed.load(Ordering::Relaxed) {
            return Ok(());
        }
        // Done flags before the rings: an ingest thread sets its flag after its last push.
        let input_done = ctx.ingest_done.iter().all(|d| d.load(Ordering::Acquire))
            && w.io.inputs.iter().all(Consumer::is_empty)
            && w.held.is_none();
        if input_done && w.pending.is_empty() {
            return Ok(());
        }
        if input_done {
            let t = *idle_since.get_or_insert_with(Instant::now);
            if t.elapsed() > LAST_BURSTS_TIMEOUT {
                anyhow::bail!(
                    "queue {}: the GPU did not finish its last {} bursts within {} s",
                    ctx.q,
                    w.pending.len(),
                    LAST_BURSTS_TIMEOUT.as_secs()
                );
            }
        }
        if w.pending.is_empty() && w.held.is_none() {
            wait_on(&backoff);
        } else {
            // Bursts on the GPU: keep polling (a yield at most, never a sleep).
            backoff.snooze();
        }
    }
}

impl Worker<'_, '_> {
    /// `on_stall: restart`: stops the queue's kernel, reaps what it finished, gives up the burst
    /// it held (its frames counted as `kernel_stall` drops) and starts it again. The other
    /// queues never pause.
    fn restart(&mut self) -> anyhow::Result<()> {
        let ctx = self.ctx;
        ctx.dev.stop_queue(ctx.q)?;
        self.reap()?;
        let r = ctx.dev.relaunch_queue(ctx.q)?;
        let mut lost_frames = 0u64;
        if let Some((seq, _)) = r.lost {
            match self.pending.pop_front() {
                Some((want, slot)) if want == seq => {
                    lost_frames = slot.burst.len() as u64;
                    ctx.counters.drops[DropReason::KernelStall as usize].add(lost_frames);
                    // Never reaped, and nothing of it for a host-side poll to read: the poll
                    // gate must not wait for it.
                    if let Some(g) = ctx.gate {
                        g.reaped(lost_frames);
                    }
                    self.free(slot);
                }
                other => anyhow::bail!(
                    "queue {}: the restart gave up burst {seq} where this queue expected {}",
                    ctx.q,
                    other.map_or("none".to_string(), |(w, _)| w.to_string())
                ),
            }
        }
        tracing::warn!(
            event = "kernel_restart",
            queue = ctx.q,
            lost_burst = ?r.lost.map(|l| l.0),
            lost_frames,
            "queue {} kernel restarted; {lost_frames} frames of the burst it held counted as \
             kernel_stall",
            ctx.q
        );
        Ok(())
    }

    /// Counts the bursts the GPU finished and passes them on; how many.
    fn reap(&mut self) -> anyhow::Result<usize> {
        if self.pending.is_empty() {
            return Ok(0);
        }
        let ctx = self.ctx;
        let c = ctx.counters;
        let has_tx = self.io.to_tx.is_some();
        let (pending, reaped, frees) = (&mut self.pending, &mut self.reaped, &self.io.frees);
        let verify = &mut self.io.verify;
        let mut out_of_order = None;
        let (rewrites, plan, q) = (ctx.rewrites, ctx.tx, ctx.q);
        let mut reaped_frames = 0u64;
        let n = ctx.dev.poll(ctx.q, &mut |seq, v, tx| {
            let mut slot = match pending.pop_front() {
                Some((want, slot)) if want == seq => slot,
                other => {
                    out_of_order.get_or_insert((seq, other.map(|(want, _)| want)));
                    return;
                }
            };
            reaped_frames += slot.burst.len() as u64;
            ctx.reaper.count(c, &slot.burst, v);
            if let Some(t) = verify.as_mut() {
                t.reaped(seq, v, tx.as_ref(), rewrites);
            }
            c.burst_latency
                .observe_ns(slot.handed.elapsed().as_nanos() as u64);
            if has_tx {
                // The store the frames arrived in stays held until the TX thread sent them
                // (it releases the slot then).
                let mut slot = slot;
                slot.verdicts.clear();
                slot.verdicts.extend_from_slice(v);
                slot.as_received = plan.as_received;
                // SAFETY: `plan.holds` means the device's hold_slots returned true: the
                // burst's data stays put until the TX thread releases (q, seq) after sending it.
                slot.ring = plan
                    .holds
                    .then(|| unsafe { RingHold::new(q, seq, tx.as_ref().map(|t| t.data)) });
                let copy_back = rewrites && !plan.holds && !plan.as_received;
                fill_tx(&mut slot, v, tx, copy_back);
                reaped.push(slot);
            } else {
                // The GPU is done with the burst, and so with its frames' buffers in GPU
                // memory. No output port: passed frames are counted, and the slot goes back.
                slot.release();
                let _ = frees[slot.owner].send(slot);
            }
        })?;
        // Finished on the GPU: a host-side poll that begins from now on sees their results.
        if let Some(g) = ctx.gate {
            g.reaped(reaped_frames);
        }
        if let Some((seq, want)) = out_of_order {
            anyhow::bail!(
                "queue {}: the GPU finished burst {seq} where this queue expected {}",
                ctx.q,
                want.map_or("none".to_string(), |w| w.to_string())
            );
        }
        self.pass_to_tx();
        Ok(n)
    }

    /// Hands the reaped bursts to the TX thread, in order (waiting for room).
    fn pass_to_tx(&mut self) {
        let Some(out) = self.io.to_tx.as_mut() else {
            return;
        };
        let backoff = Backoff::new();
        for slot in self.reaped.drain(..) {
            let mut slot = slot;
            while let Err(back) = out.push(slot) {
                if out.is_consumer_closed() {
                    // The TX thread is gone (it panicked): nothing will send these frames.
                    break;
                }
                slot = back;
                wait_on(&backoff);
            }
        }
    }

    /// The next burst from the ingest threads, taking them in turn.
    fn next_input(&mut self) -> Option<Slot> {
        let n = self.io.inputs.len();
        for k in 0..n {
            let i = (self.next_input + k) % n;
            if let Some(s) = self.io.inputs[i].pop() {
                self.next_input = (i + 1) % n;
                return Some(s);
            }
        }
        None
    }

    fn free(&self, mut slot: Slot) {
        slot.reset();
        let owner = slot.owner;
        let _ = self.io.frees[owner].send(slot);
    }

    /// Submits waiting bursts to the GPU queue (at most [`FEED_MAX`]); how many it took or
    /// dropped. A full GPU ring holds the burst (`on_full: wait`) or drops it as `ring_full`.
    fn feed(&mut self) -> anyhow::Result<usize> {
        let ctx = self.ctx;
        let (q, dev, c) = (ctx.q, ctx.dev, ctx.counters);
        let mut n = 0;
        while n < FEED_MAX {
            let Some(slot) = self.held.take().or_else(|| self.next_input()) else {
                break;
            };
            let frames = slot.burst.len() as u64;
            if let Some(g) = ctx.gate {
                if !g.try_take(frames) {
                    // The stages' host sides have not read what ran before: the burst waits
                    // (the queue keeps reaping meanwhile), as for a full ring.
                    if !self.gated {
                        g.stalled();
                        self.gated = true;
                    }
                    dev.flush(q)?;
                    self.held = Some(slot);
                    break;
                }
                self.gated = false;
            }
            let submitted = if slot.gpu_srcs.is_empty() {
                match self.io.verify.as_mut() {
                    Some(t) => t.submit(&slot.burst, |b| dev.submit(q, b)),
                    None => dev.submit(q, &slot.burst),
                }
            } else {
                // SAFETY: the addresses are of frames the ingest received in GPU memory of the
                // GPU `gpu_ingest` checked; the slot holds their buffers (`holds`) until it is
                // reaped, or freed here without being submitted.
                unsafe {
                    dev.submit_gpu_frames(q, &slot.burst.descs, &slot.gpu_srcs, slot.gpu_bytes)
                }
            };
            if let (Some(g), Err(_)) = (ctx.gate, &submitted) {
                g.give_back(frames);
            }
            match submitted {
                Ok(seq) => {
                    if let Some(f) = ctx.flows {
                        f.submitted(q, slot.burst.descs.iter().map(|d| d.timestamp_ns));
                    }
                    self.pending.push_back((seq, slot));
                    dev.flush(q)?;
                }
                Err(SubmitError::RingFull { .. }) if ctx.on_full == OnFull::Wait => {
                    // The next poll frees slots.
                    dev.flush(q)?;
                    self.held = Some(slot);
                    break;
                }
                Err(SubmitError::RingFull { .. }) => {
                    c.drops[DropReason::RingFull as usize].add_shared(slot.burst.len() as u64);
                    self.free(slot);
                }
                Err(SubmitError::TooLarge { .. }) => {
                    c.drops[DropReason::TooLong as usize].add_shared(slot.burst.len() as u64);
                    self.free(slot);
                }
                Err(e) => anyhow::bail!("queue {q}: {e}"),
            }
            n += 1;
        }
        Ok(n)
    }

    /// Flow export's sweep of this queue's device table (the queue is quiet: nothing in
    /// flight).
    fn sweep(&mut self) -> anyhow::Result<()> {
        let ctx = self.ctx;
        let Some(f) = ctx.flows else {
            return Ok(());
        };
        f.sweep(ctx.dev, ctx.q, Instant::now())
    }

    /// The watchdog's view of this queue: the kernel's heartbeat and the bursts in flight.
    fn gauges(&self) {
        let c = self.ctx.counters;
        if let Some(h) = self.ctx.dev.heartbeat(self.ctx.q) {
            c.kernel_heartbeat.set(h as u64);
        }
        c.in_flight_bursts.set(self.pending.len() as u64);
    }
}

/// What the TX thread sends of a reaped burst ([`Slot::tx`]): the kernel's TX ring (the port
/// reads the frames as a NIC reads its ring: no verdict is looked at), or, without a TX ring
/// (the built-in pipeline), every frame the verdicts do not drop. `copy_back`: the frames the
/// ring names are copied from the GPU's slot into the burst (a device that does not hold its
/// slots for the TX thread; held slots are sent from where they are, [`Slot::ring`]).
fn fill_tx(slot: &mut Slot, v: &[Verdict], tx: Option<TxView<'_>>, copy_back: bool) {
    slot.tx.clear();
    slot.tx_times.clear();
    let Some(t) = tx else {
        // Descriptors only: a burst by reference has no bytes on the host.
        for (i, (d, vd)) in slot.burst.descs.iter().zip(v).enumerate() {
            if vd.action != abi::ACTION_DROP {
                slot.tx.push(TxDesc {
                    offset: d.offset,
                    len: d.len,
                    frame: i as u16,
                    out_port: vd.out_port,
                    action: vd.action,
                    // The built-in pipeline (parse, acl, count) sets no send time.
                    ..TxDesc::default()
                });
            }
        }
        return;
    };
    if copy_back && slot.burst.data.len() < t.data.len() {
        // Frames by reference arrived with no bytes in the burst: room for the copy.
        slot.burst.data.resize(t.data.len(), 0);
    }
    for d in t.descs {
        let r = d.offset as usize..d.offset as usize + d.len as usize;
        if copy_back {
            // A descriptor outside either buffer was refused when the ring was read
            // (GpuExecutor::take_tx); the burst's buffer holds the frame and its room.
            if let (Some(src), Some(dst)) = (t.data.get(r.clone()), slot.burst.data.get_mut(r)) {
                dst.copy_from_slice(src);
            }
        }
        slot.tx.push(*d);
    }
    slot.tx_times.extend_from_slice(t.times);
}
