//! The receive threads, as in the CPU executor: one per (port, queue) for a port split by
//! queue ([`crate::port::RxPort::split_by_queue`]: its frames come already steered, written
//! straight into the queue's slot burst), else one per port that steers each frame to its
//! queue (software steering, as a NIC would). Either packs a queue's frames into a burst the
//! size of a GPU slot and hands full bursts to that queue's thread. A partial burst leaves
//! after [`DRAIN`] or as soon as its source goes quiet, so a slow input still sees its frames
//! classified while a fast one sends full bursts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use super::{wait_on, FrameStore, GpuHold, Slot};
use crate::burst::{Burst, FrameDesc};
use crate::config::OnFull;
use crate::counters::QueueCounters;
use crate::executor::cpu::CpuShared;
use crate::meta::PacketMeta;
use crate::port::gpu_rx::{GpuRx, GpuRxBurst, GpuRxStatus};
use crate::port::{PortError, QueueRx, QueueTally, RxPort, RxStatus};
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
    /// A per-queue receive call's counts (`got`), its frames added to the run's total.
    fn received(ctx: &IngestCtx<'_>, got: &QueueTally) -> Tally {
        ctx.shared
            .rx_total
            .fetch_add(got.rx_frames, Ordering::Relaxed);
        Tally {
            rx_frames: got.rx_frames,
            rx_bytes: got.rx_bytes,
            steering_drops: got.steering_drops,
            too_long: 0,
        }
    }

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
    /// This thread's index among the receive threads (its slots' `owner`).
    feeder: usize,
    /// The queue of each of `out`, `building` and `first_at` (every queue for a port's
    /// thread, in order; the one queue of a queue's thread).
    qmap: Vec<usize>,
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
    ids: Feeder,
    port: &mut dyn RxPort,
    out: Vec<Producer<Slot>>,
    free: Receiver<Slot>,
) -> Result<(), PortError> {
    run_with(ctx, ids, None, out, free, |ing| ing.receive(port))
}

/// Where a queue's frames handed over by reference are: the port's loaded frames in host
/// memory the device reads.
pub(crate) struct Refs {
    pub store: Arc<FrameStore>,
}

/// Runs one queue's receive thread of a split port whose frames go by reference: the slot
/// bursts carry descriptors and each frame's address in host memory the GPU reads, and the
/// GPU gathers the frames into the ring slot (no frame byte copied here).
pub(crate) fn run_queue_refs(
    ctx: &IngestCtx<'_>,
    ids: Feeder,
    src: &mut dyn QueueRx,
    refs: Refs,
    out: Producer<Slot>,
    free: Receiver<Slot>,
) -> Result<(), PortError> {
    let q = usize::from(src.queue());
    run_with(ctx, ids, Some(q), vec![out], free, |ing| {
        ing.receive_refs(src, &refs)
    })
}

/// Runs one queue's receive thread of a split DPDK port whose mbufs are sent themselves
/// (see `mbufs`): each frame is copied into the queue's slot burst and its mbuf kept with the
/// slot until the TX thread sends or frees it.
#[cfg(feature = "dpdk")]
pub(crate) fn run_queue_mbufs(
    ctx: &IngestCtx<'_>,
    ids: Feeder,
    rx: &mut crate::port::dpdk::DpdkRx,
    q: usize,
    out: Producer<Slot>,
    free: Receiver<Slot>,
) -> Result<(), PortError> {
    run_with(ctx, ids, Some(q), vec![out], free, |ing| {
        ing.receive_mbufs(rx)
    })
}

/// Runs a receive thread of a DPDK port whose RX pool is pinned host memory mapped for the GPU
/// (`gpu_buffers: pinned`), by reference (see `gpu_ingest`): one RX queue's (`queue`: its
/// pipeline queue) or every RX queue's, steering each frame as [`run`] does. Each frame's
/// descriptor and address go into its queue's slot burst (no frame byte copied here) and its
/// mbuf into the slot ([`Slot::kept`]) until the slot is reaped, or sent where it transmits
/// (`by_mbuf`: the TX thread sends the mbufs themselves).
#[cfg(feature = "dpdk")]
pub(crate) fn run_pinned(
    ctx: &IngestCtx<'_>,
    ids: Feeder,
    rx: &mut crate::port::dpdk::DpdkRx,
    (queue, by_mbuf): (Option<usize>, bool),
    out: Vec<Producer<Slot>>,
    free: Receiver<Slot>,
) -> Result<(), PortError> {
    run_with(ctx, ids, queue, out, free, |ing| {
        ing.receive_pinned(rx, by_mbuf)
    })
}

/// Which receive thread: its port (in config order) and its index among the receive threads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Feeder {
    pub port: usize,
    pub feeder: usize,
}

/// Runs one queue's receive thread of a port split by queue (`src`'s frames are steered, its
/// queue's only) until the source ends, `shared.stop`, or another thread failed.
pub(crate) fn run_queue(
    ctx: &IngestCtx<'_>,
    ids: Feeder,
    src: &mut dyn QueueRx,
    out: Producer<Slot>,
    free: Receiver<Slot>,
) -> Result<(), PortError> {
    let q = usize::from(src.queue());
    run_with(ctx, ids, Some(q), vec![out], free, |ing| {
        ing.receive_queue(src)
    })
}

/// [`run`] for a port whose frames are in GPU memory, received in place (see `gpu_ingest`):
/// each frame goes to the queue the NIC chose (its RX queue, modulo the queue count), its
/// descriptor is built here and its bytes stay in GPU memory until the queue's GPU gathers
/// them into the ring slot.
pub(crate) fn run_gpu_frames(
    ctx: &IngestCtx<'_>,
    ids: Feeder,
    port: &mut dyn GpuRx,
    out: Vec<Producer<Slot>>,
    free: Receiver<Slot>,
) -> Result<(), PortError> {
    run_with(ctx, ids, None, out, free, |ing| ing.receive_gpu(port))
}

/// Runs `receive` over an ingest of every queue (`queue`: `None`) or of one.
fn run_with(
    ctx: &IngestCtx<'_>,
    ids: Feeder,
    queue: Option<usize>,
    out: Vec<Producer<Slot>>,
    free: Receiver<Slot>,
    receive: impl FnOnce(&mut Ingest<'_, '_>) -> Result<(), PortError>,
) -> Result<(), PortError> {
    let qmap: Vec<usize> = match queue {
        Some(q) => vec![q],
        None => (0..ctx.queues).collect(),
    };
    let n = qmap.len();
    let mut ing = Ingest {
        ctx,
        port_id: ids.port,
        feeder: ids.feeder,
        qmap,
        out,
        free,
        spare: Vec::new(),
        building: Vec::with_capacity(n),
        first_at: vec![None; n],
    };
    for _ in 0..n {
        let s = ing.fresh();
        ing.building.push(s);
    }
    let r = receive(&mut ing);
    for q in 0..n {
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
            if !self.pace(quiet, &backoff) {
                return Ok(());
            }
        }
    }

    /// After a receive call: [`Ingest::drain`], then wait a little when the port was `quiet`
    /// (backing off), or go on at once. False when another thread failed meanwhile.
    fn pace(&mut self, quiet: bool, backoff: &Backoff) -> bool {
        if !self.drain(quiet) {
            return false;
        }
        if quiet {
            wait_on(backoff);
        } else {
            backoff.reset();
        }
        true
    }

    /// Hands over each queue's burst that is full, or waited long enough, or every partial one
    /// when the port is `quiet`. False when another thread failed meanwhile.
    fn drain(&mut self, quiet: bool) -> bool {
        let ctx = self.ctx;
        for q in 0..self.building.len() {
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
            if !self.pace(quiet, &backoff) {
                return Ok(());
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

    /// [`Ingest::receive`] for one queue of a port split by queue: the source writes its
    /// frames (steered already) straight into the queue's slot burst. A call that takes the
    /// burst past the slot's data area moves its last frames to the next slot.
    fn receive_queue(&mut self, src: &mut dyn QueueRx) -> Result<(), PortError> {
        let ctx = self.ctx;
        let c = &ctx.shared.counters[self.qmap[0]];
        let mut carry = Burst::default();
        let backoff = Backoff::new();
        loop {
            if ctx.shared.stop.load(Ordering::Relaxed) || ctx.failed.load(Ordering::Relaxed) {
                return Ok(());
            }
            let b = &mut self.building[0].burst;
            let before = b.len();
            let want = ctx.burst.min(ctx.slot_frames.saturating_sub(before)).max(1);
            let mut got = QueueTally::default();
            let status = src.rx_queue(b, want, ctx.room, &mut got);
            let added = b.len() > before;
            if added {
                self.first_at[0].get_or_insert_with(Instant::now);
            }
            // Past the slot's data area: full slots leave, the rest goes on in the next one.
            let (mut too_long, mut from) = (0, before);
            while self.building[0].burst.data.len() > ctx.slot_cap {
                too_long += spill(&mut self.building[0].burst, from, ctx.slot_cap, &mut carry);
                if !self.hand(0) {
                    return Ok(());
                }
                std::mem::swap(&mut self.building[0].burst, &mut carry);
                if !self.building[0].burst.is_empty() {
                    self.first_at[0] = Some(Instant::now());
                }
                from = 0;
            }
            Tally {
                too_long,
                ..Tally::received(ctx, &got)
            }
            .publish(c);
            let quiet = match status {
                Err(e) => return Err(e),
                Ok(RxStatus::End) => return Ok(()),
                Ok(RxStatus::Idle) => true,
                Ok(RxStatus::Frames(_)) => false,
            };
            if !self.pace(quiet, &backoff) {
                return Ok(());
            }
        }
    }

    /// [`Ingest::receive_queue`] by reference: each frame's descriptor and address go into
    /// the slot (as [`Ingest::place_gpu`] places frames in GPU memory), with the hold on the
    /// memory they are in.
    fn receive_refs(&mut self, src: &mut dyn QueueRx, refs: &Refs) -> Result<(), PortError> {
        let ctx = self.ctx;
        let c = &ctx.shared.counters[self.qmap[0]];
        let mut got_refs: Vec<FrameDesc> = Vec::with_capacity(ctx.burst);
        let backoff = Backoff::new();
        loop {
            if ctx.shared.stop.load(Ordering::Relaxed) || ctx.failed.load(Ordering::Relaxed) {
                return Ok(());
            }
            got_refs.clear();
            let mut got = QueueTally::default();
            let status = src.rx_refs(&mut got_refs, ctx.burst, &mut got);
            let mut tally = Tally::received(ctx, &got);
            for d in &got_refs {
                let need = d.len as usize + ctx.room;
                if need > ctx.slot_cap {
                    tally.too_long += 1;
                    continue;
                }
                let s = &self.building[0];
                if (s.burst.len() >= ctx.slot_frames || s.gpu_bytes + need > ctx.slot_cap)
                    && !self.hand(0)
                {
                    return Ok(());
                }
                let s = &mut self.building[0];
                if s.store.is_none() {
                    // Held until the burst is reaped, or sent where it transmits.
                    s.store = Some(Arc::clone(&refs.store));
                }
                s.gpu_srcs.push(refs.store.dev_addr(d.offset));
                s.burst.descs.push(FrameDesc {
                    offset: s.gpu_bytes as u32,
                    ..*d
                });
                s.gpu_bytes += need;
                self.first_at[0].get_or_insert_with(Instant::now);
            }
            tally.publish(c);
            let quiet = match status {
                Err(e) => return Err(e),
                Ok(RxStatus::End) => return Ok(()),
                Ok(RxStatus::Idle) => true,
                Ok(RxStatus::Frames(_)) => false,
            };
            if !self.pace(quiet, &backoff) {
                return Ok(());
            }
        }
    }

    /// [`Ingest::receive_queue`] for DPDK mbufs kept for TX: the frames copied into the slot
    /// burst, their mbufs moved into the slot ([`Slot::kept`]) before it is handed over.
    #[cfg(feature = "dpdk")]
    fn receive_mbufs(&mut self, rx: &mut crate::port::dpdk::DpdkRx) -> Result<(), PortError> {
        use crate::port::dpdk::{MbufBurst, MAX_BURST};
        let ctx = self.ctx;
        let q = self.qmap[0];
        let c = &ctx.shared.counters[q];
        let mut part = MbufBurst::new();
        let mut pick = vec![false; MAX_BURST];
        let backoff = Backoff::new();
        loop {
            if ctx.shared.stop.load(Ordering::Relaxed) || ctx.failed.load(Ordering::Relaxed) {
                return Ok(());
            }
            let have = self.building[0].burst.len();
            let want = ctx.burst.min(ctx.slot_frames.saturating_sub(have)).max(1);
            let status = rx.rx_mbufs(&mut part, want);
            let n = part.len();
            ctx.shared.rx_total.fetch_add(n as u64, Ordering::Relaxed);
            let mut tally = Tally {
                rx_frames: n as u64,
                rx_bytes: part.bytes(),
                ..Tally::default()
            };
            for i in 0..n {
                let mut d = part.desc(i);
                let need = d.len as usize + ctx.room;
                if need > ctx.slot_cap {
                    tally.too_long += 1;
                    continue;
                }
                let b = &self.building[0].burst;
                if b.len() >= ctx.slot_frames || b.data.len() + need > ctx.slot_cap {
                    self.building[0].kept.take_from(&mut part, |j| pick[j]);
                    pick.fill(false);
                    if !self.hand(0) {
                        part.clear();
                        return Ok(());
                    }
                }
                (d.port, d.queue) = (self.port_id as u16, q as u16);
                let s = &mut self.building[0];
                s.burst.push_with_room(part.frame(i), d, ctx.room);
                s.by_mbuf = true;
                pick[i] = true;
                self.first_at[0].get_or_insert_with(Instant::now);
            }
            if n > 0 {
                self.building[0].kept.take_from(&mut part, |j| pick[j]);
                pick.fill(false);
                // The slot holds its own reference to each frame it took; the rest (too long)
                // go back to their pool here.
                part.retain(|_| false);
            }
            tally.publish(c);
            let quiet = match status {
                Err(e) => return Err(e),
                Ok(RxStatus::End) => return Ok(()),
                Ok(RxStatus::Idle) => true,
                Ok(RxStatus::Frames(_)) => false,
            };
            if !self.pace(quiet, &backoff) {
                return Ok(());
            }
        }
    }

    /// [`run_pinned`]'s loop: `rx_mbufs`, then each frame steered (one queue's thread: its
    /// queue) and placed by address, its mbuf kept with the slot it went to.
    #[cfg(feature = "dpdk")]
    fn receive_pinned(
        &mut self,
        rx: &mut crate::port::dpdk::DpdkRx,
        by_mbuf: bool,
    ) -> Result<(), PortError> {
        use crate::port::dpdk::{MbufBurst, MAX_BURST};
        let ctx = self.ctx;
        let nq = ctx.queues;
        let one = self.qmap.len() == 1;
        let mut part = MbufBurst::new();
        // Per frame of `part`: the index into `building` it went to, or NONE.
        const NONE: usize = usize::MAX;
        let mut to = vec![NONE; MAX_BURST];
        let mut tally = vec![Tally::default(); self.qmap.len()];
        let mut meta = PacketMeta::default();
        let backoff = Backoff::new();
        loop {
            if ctx.shared.stop.load(Ordering::Relaxed) || ctx.failed.load(Ordering::Relaxed) {
                return Ok(());
            }
            let want = if one {
                let have = self.building[0].burst.len();
                ctx.burst.min(ctx.slot_frames.saturating_sub(have)).max(1)
            } else {
                ctx.burst
            };
            let status = rx.rx_mbufs(&mut part, want);
            let n = part.len();
            ctx.shared.rx_total.fetch_add(n as u64, Ordering::Relaxed);
            // Asked per burst: the port's rules can be replaced between bursts.
            let nic = one || rx.port().steered_in_nic();
            for i in 0..n {
                let d = part.desc(i);
                let (k, verdict, mark) = if one {
                    (0, None, d.mark)
                } else if nic {
                    crate::steer::nic_steered(&d, nq)
                } else {
                    // Pinned memory is host memory: the headers are read where they are.
                    ctx.steering.steer_marked(part.frame(i), &mut meta, nq)
                };
                let t = &mut tally[k];
                t.rx_frames += 1;
                t.rx_bytes += u64::from(d.len);
                if verdict.is_some() {
                    t.steering_drops += 1;
                    continue;
                }
                let need = d.len as usize + ctx.room;
                // A chain (a frame longer than one buffer) has no one address to read it at.
                let Some(addr) = part.data_addr(i).filter(|_| need <= ctx.slot_cap) else {
                    t.too_long += 1;
                    continue;
                };
                let s = &self.building[k];
                if s.burst.len() >= ctx.slot_frames || s.gpu_bytes + need > ctx.slot_cap {
                    self.building[k].kept.take_from(&mut part, |j| to[j] == k);
                    to[..i]
                        .iter_mut()
                        .filter(|t| **t == k)
                        .for_each(|t| *t = NONE);
                    if !self.hand(k) {
                        part.clear();
                        return Ok(());
                    }
                }
                let s = &mut self.building[k];
                s.gpu_srcs.push(addr);
                s.burst.descs.push(FrameDesc {
                    offset: s.gpu_bytes as u32,
                    port: self.port_id as u16,
                    queue: self.qmap[k] as u16,
                    mark: if mark != 0 { mark } else { d.mark },
                    ..d
                });
                s.gpu_bytes += need;
                (s.host_srcs, s.by_mbuf) = (true, by_mbuf);
                to[i] = k;
                self.first_at[k].get_or_insert_with(Instant::now);
            }
            if n > 0 {
                for k in 0..self.building.len() {
                    if to[..n].contains(&k) {
                        self.building[k].kept.take_from(&mut part, |j| to[j] == k);
                    }
                }
                to[..n].fill(NONE);
                // The slots hold their own reference to each frame they took; the rest
                // (steering drops, too long) go back to their pool here.
                part.retain(|_| false);
            }
            for (k, t) in tally.iter_mut().enumerate() {
                t.publish(&ctx.shared.counters[self.qmap[k]]);
            }
            let quiet = match status {
                Err(e) => return Err(e),
                Ok(RxStatus::End) => return Ok(()),
                Ok(RxStatus::Idle) => true,
                Ok(RxStatus::Frames(_)) => false,
            };
            if !self.pace(quiet, &backoff) {
                return Ok(());
            }
        }
    }

    /// An empty slot: one kept here, one back from the other threads, or a new one (the slots
    /// alive are bounded by the rings and the GPU queues they wait in).
    fn fresh(&mut self) -> Slot {
        let mut s = match self.spare.pop().or_else(|| self.free.try_recv().ok()) {
            Some(s) => s,
            None => Slot::new(self.feeder, self.ctx.slot_frames),
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
        let c = &ctx.shared.counters[self.qmap[q]];
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

/// Moves the frames of `b` from index `from` on that end past `cap` bytes of data into `carry`
/// (empty), for the next slot; a frame that alone takes more than `cap` is dropped. Returns
/// the frames dropped (`too_long`). Each frame keeps the room after it.
fn spill(b: &mut Burst, from: usize, cap: usize, carry: &mut Burst) -> u64 {
    let end = |b: &Burst, i: usize| -> usize {
        b.descs
            .get(i + 1)
            .map_or(b.data.len(), |d| d.offset as usize)
    };
    let Some(cut) = (from..b.len()).find(|&i| end(b, i) > cap) else {
        return 0;
    };
    let mut too_long = 0;
    for i in cut..b.len() {
        let d = b.descs[i];
        let span = end(b, i) - d.offset as usize;
        if span > cap {
            too_long += 1;
            continue;
        }
        let room = span - d.len as usize;
        carry.push_with_room(b.frame(i), d, room);
    }
    b.data.truncate(b.descs[cut].offset as usize);
    b.descs.truncate(cut);
    too_long
}
