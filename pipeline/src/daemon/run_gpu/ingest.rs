//! One ingest thread per receiving port, as in the CPU executor: it receives bursts, steers
//! each frame to its queue (software steering, as a NIC would), packs each queue's frames into
//! a burst the size of a GPU slot, and hands full bursts to that queue's thread. A partial
//! burst leaves after [`DRAIN`] or as soon as its port goes quiet, so a slow input still sees
//! its frames classified while a fast one sends full bursts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use super::{wait_on, GpuHold, Slot};
use crate::burst::{Burst, FrameDesc};
use crate::config::OnFull;
use crate::counters::QueueCounters;
use crate::executor::cpu::CpuShared;
use crate::meta::PacketMeta;
use crate::port::gpu_rx::{GpuRx, GpuRxBurst, GpuRxStatus};
use crate::port::{PortError, RxPort, RxStatus};
use crate::ring::Producer;
use crate::steer::Steering;
use crate::verdict::DropReason;

/// How long a queue's partial burst may wait for more frames (as l2fwd drains its TX buffers).
pub(crate) const DRAIN: Duration = Duration::from_micros(100);

/// What every ingest thread shares.
pub(crate) struct IngestCtx<'a> {
    pub shared: &'a CpuShared,
    pub steering: &'a Steering,
    pub queues: usize,
    /// Frames an RX call asks for.
    pub burst: usize,
    /// Frames a slot's burst holds at most (the GPU slot; at least `burst`).
    pub slot_frames: usize,
    /// Frame bytes a burst holds at most (the GPU slot's data area).
    pub slot_cap: usize,
    /// Bytes left after every frame for the stages to grow it into (`Pipeline::frame_room`).
    pub room: usize,
    pub on_full: OnFull,
    /// Set when another thread failed: stop at once.
    pub failed: &'a AtomicBool,
}

/// One port's counts for one queue over one received burst, added once per burst (several
/// ingest threads count into the same queue, so these adds are atomic).
#[derive(Clone, Copy, Default)]
struct Tally {
    rx_frames: u64,
    rx_bytes: u64,
    steering_drops: u64,
    too_long: u64,
}

impl Tally {
    fn publish(&mut self, c: &QueueCounters) {
        if self.rx_frames > 0 {
            c.rx_frames.add_shared(self.rx_frames);
            c.rx_bytes.add_shared(self.rx_bytes);
            c.drops[DropReason::SteeringDrop as usize].add_shared(self.steering_drops);
            c.drops[DropReason::TooLong as usize].add_shared(self.too_long);
        }
        *self = Tally::default();
    }
}

struct Ingest<'c, 'a> {
    ctx: &'c IngestCtx<'a>,
    port_id: usize,
    /// To each queue's thread.
    out: Vec<Producer<Slot>>,
    /// Slots back from the queue threads and the TX thread.
    free: Receiver<Slot>,
    /// Slots this thread kept (a burst dropped because its queue's ring was full).
    spare: Vec<Slot>,
    /// Each queue's partial burst, and when it got its first frame.
    building: Vec<Slot>,
    first_at: Vec<Option<Instant>>,
}

/// Runs port `port_id`'s ingest until the port ends or fails, `shared.stop` is set, or another
/// thread failed; the partial bursts are handed over at the end (a stop drains them).
pub(crate) fn run(
    ctx: &IngestCtx<'_>,
    port_id: usize,
    port: &mut dyn RxPort,
    out: Vec<Producer<Slot>>,
    free: Receiver<Slot>,
) -> Result<(), PortError> {
    run_with(ctx, port_id, out, free, |ing| ing.receive(port))
}

/// [`run`] for a port whose frames are in GPU memory, received in place (see `gpu_ingest`):
/// each frame goes to the queue the NIC chose (its RX queue, modulo the queue count), its
/// descriptor is built here and its bytes stay in GPU memory until the queue's GPU gathers
/// them into the ring slot.
pub(crate) fn run_gpu_frames(
    ctx: &IngestCtx<'_>,
    port_id: usize,
    port: &mut dyn GpuRx,
    out: Vec<Producer<Slot>>,
    free: Receiver<Slot>,
) -> Result<(), PortError> {
    run_with(ctx, port_id, out, free, |ing| ing.receive_gpu(port))
}

fn run_with(
    ctx: &IngestCtx<'_>,
    port_id: usize,
    out: Vec<Producer<Slot>>,
    free: Receiver<Slot>,
    receive: impl FnOnce(&mut Ingest<'_, '_>) -> Result<(), PortError>,
) -> Result<(), PortError> {
    let mut ing = Ingest {
        ctx,
        port_id,
        out,
        free,
        spare: Vec::new(),
        building: Vec::with_capacity(ctx.queues),
        first_at: vec![None; ctx.queues],
    };
    for _ in 0..ctx.queues {
        let s = ing.fresh();
        ing.building.push(s);
    }
    let r = receive(&mut ing);
    for q in 0..ctx.queues {
        if !ing.hand(q) {
            break;
        }
    }
    r
}

impl Ingest<'_, '_> {
    fn receive(&mut self, port: &mut dyn RxPort) -> Result<(), PortError> {
        let ctx = self.ctx;
        let nq = ctx.queues;
        let mut rx = Burst::with_capacity(ctx.burst, ctx.burst * 2048);
        let mut meta = PacketMeta::default();
        let mut tally = vec![Tally::default(); nq];
        let backoff = Backoff::new();
        loop {
            if ctx.shared.stop.load(Ordering::Relaxed) || ctx.failed.load(Ordering::Relaxed) {
                return Ok(());
            }
            rx.clear();
            let status = port.rx_burst(&mut rx, ctx.burst);
            ctx.shared
                .rx_total
                .fetch_add(rx.len() as u64, Ordering::Relaxed);
            // Asked per burst: the port's rules can be replaced between bursts.
            let nic = port.steered_in_nic();
            for (d, frame) in rx.frames() {
                let (q, verdict, mark) = if nic {
                    crate::steer::nic_steered(d, nq)
                } else {
                    ctx.steering.steer_marked(frame, &mut meta, nq)
                };
                let t = &mut tally[q];
                t.rx_frames += 1;
                t.rx_bytes += d.len as u64;
                if verdict.is_some() {
                    t.steering_drops += 1;
                    continue;
                }
                let need = frame.len() + ctx.room;
                if need > ctx.slot_cap {
                    t.too_long += 1;
                    continue;
                }
                let b = &self.building[q].burst;
                if (b.len() >= ctx.slot_frames || b.data.len() + need > ctx.slot_cap)
                    && !self.hand(q)
                {
                    return Ok(());
                }
                let mut dd = *d;
                dd.port = self.port_id as u16;
                dd.queue = q as u16;
                // A software rule's mark, else the one the port delivered (a NIC's rte_flow MARK).
                if mark != 0 {
                    dd.mark = mark;
                }
                self.building[q].burst.push_with_room(frame, dd, ctx.room);
                self.first_at[q].get_or_insert_with(Instant::now);
            }
            for (t, c) in tally.iter_mut().zip(&ctx.shared.counters) {
                t.publish(c);
            }
            // Ports end with an empty burst; frames that came with an error are kept.
            match status {
                Ok(RxStatus::End) => return Ok(()),
                Err(e) => return Err(e),
                Ok(_) => {}
            }
            let quiet = rx.is_empty();
            if !self.drain(quiet) {
                return Ok(());
            }
            if quiet {
                wait_on(&backoff);
            } else {
                backoff.reset();
            }
        }
    }

    /// Hands over each queue's burst that is full, or waited long enough, or every partial one
    /// when the port is `quiet`. False when another thread failed meanwhile.
    fn drain(&mut self, quiet: bool) -> bool {
        let ctx = self.ctx;
        for q in 0..ctx.queues {
            let n = self.building[q].burst.len();
            let stale = self.first_at[q].is_some_and(|t| t.elapsed() >= DRAIN);
            if n > 0 && (n >= ctx.slot_frames || quiet || stale) && !self.hand(q) {
                return false;
            }
        }
        true
    }

    /// [`Ingest::receive`] for frames in GPU memory: no byte is read here, so no software
    /// steering (`gpu_ingest` sends ports that need it the other way).
    fn receive_gpu(&mut self, port: &mut dyn GpuRx) -> Result<(), PortError> {
        let ctx = self.ctx;
        let nq = ctx.queues;
        let mut tally = vec![Tally::default(); nq];
        let backoff = Backoff::new();
        loop {
            if ctx.shared.stop.load(Ordering::Relaxed) || ctx.failed.load(Ordering::Relaxed) {
                return Ok(());
            }
            let (quiet, end) = match port.rx_gpu_burst(ctx.burst)? {
                GpuRxStatus::Frames(rx) => {
                    ctx.shared
                        .rx_total
                        .fetch_add(rx.frames.len() as u64, Ordering::Relaxed);
                    let placed = self.place_gpu(rx, &mut tally);
                    for (t, c) in tally.iter_mut().zip(&ctx.shared.counters) {
                        t.publish(c);
                    }
                    if !placed {
                        return Ok(());
                    }
                    (false, false)
                }
                GpuRxStatus::Idle => (true, false),
                GpuRxStatus::End => (true, true),
            };
            if end {
                return Ok(());
            }
            if !self.drain(quiet) {
                return Ok(());
            }
            if quiet {
                wait_on(&backoff);
            } else {
                backoff.reset();
            }
        }
    }

    /// Adds a received burst's frames in GPU memory to their queues' bursts (descriptors,
    /// device addresses, the hold on their buffers). False when another thread failed while a
    /// full burst waited for its ring.
    fn place_gpu(&mut self, rx: GpuRxBurst, tally: &mut [Tally]) -> bool {
        let ctx = self.ctx;
        let nq = ctx.queues;
        let hold: GpuHold = Arc::new(Mutex::new(rx.hold));
        for f in &rx.frames {
            let q = usize::from(f.queue) % nq;
            let t = &mut tally[q];
            t.rx_frames += 1;
            t.rx_bytes += u64::from(f.len);
            let need = f.len as usize + ctx.room;
            if need > ctx.slot_cap {
                t.too_long += 1;
                continue;
            }
            let s = &self.building[q];
            if (s.burst.len() >= ctx.slot_frames || s.gpu_bytes + need > ctx.slot_cap)
                && !self.hand(q)
            {
                return false;
            }
            let s = &mut self.building[q];
            if s.holds.last().is_none_or(|h| !Arc::ptr_eq(h, &hold)) {
                s.holds.push(Arc::clone(&hold));
            }
            s.burst.descs.push(FrameDesc {
                offset: s.gpu_bytes as u32,
                len: f.len,
                wire_len: f.wire_len.max(f.len),
                port: self.port_id as u16,
                queue: q as u16,
                rss_hash: f.rss_hash,
                mark: f.mark,
                timestamp_ns: rx.timestamp_ns,
            });
            s.gpu_srcs.push(f.addr);
            s.gpu_bytes += need;
            self.first_at[q].get_or_insert_with(Instant::now);
        }
        true
    }

    /// An empty slot: one kept here, one back from the other threads, or a new one (the slots
    /// alive are bounded by the rings and the GPU queues they wait in).
    fn fresh(&mut self) -> Slot {
        let mut s = match self.spare.pop().or_else(|| self.free.try_recv().ok()) {
            Some(s) => s,
            None => Slot::new(self.port_id, self.ctx.slot_frames),
        };
        s.reset();
        s
    }

    /// Hands queue `q`'s partial burst to its thread. With `on_full: wait` this waits for room
    /// in the ring; with `drop` a full ring drops the burst's frames as `ring_full`. False when
    /// another thread failed while this one waited.
    fn hand(&mut self, q: usize) -> bool {
        if self.building[q].burst.is_empty() {
            return true;
        }
        let ctx = self.ctx;
        let c = &ctx.shared.counters[q];
        let fresh = self.fresh();
        let mut slot = std::mem::replace(&mut self.building[q], fresh);
        self.first_at[q] = None;
        // One clock read per burst: the start of the burst-latency measurement.
        slot.handed = Instant::now();
        let backoff = Backoff::new();
        loop {
            match self.out[q].push(slot) {
                Ok(()) => break,
                Err(mut back) if ctx.on_full == OnFull::Drop => {
                    c.drops[DropReason::RingFull as usize].add_shared(back.burst.len() as u64);
                    back.reset();
                    self.spare.push(back);
                    return true;
                }
                Err(back) => {
                    if ctx.failed.load(Ordering::Relaxed) {
                        return false;
                    }
                    slot = back;
                    wait_on(&backoff);
                }
            }
        }
        c.ring_occupancy.set(self.out[q].len() as u64);
        true
    }
}
