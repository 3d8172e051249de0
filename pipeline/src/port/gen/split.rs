//! A generator split by queue: each queue's receive thread draws the port's one seeded frame
//! sequence (the draws are a few RNG calls a frame) and keeps the frames the steering gives its
//! queue, so every queue sees the frames, order, marks and drops that one thread steering the
//! whole port gives it. The distinct frames are built and steered once, at the split, into a
//! pool the queues share; a queue copies only its own frames out of it (with their
//! identification stamped). Malformed frames (`malformed_ratio`) are built and steered per
//! frame by every queue: they are no pool frame.
//!
//! By reference ([`QueueRx::rx_refs`]): the pool, complete after the split, is the frame store
//! a receiver copies once into memory the GPU reads, and each frame is its pool entry's
//! descriptor. The one field the copying path writes per frame, the IPv4 identification (with
//! the header checksum) or the low 16 bits of the IPv6 flow label, then stays as the pool built
//! it, 0: no stage's verdict reads it (`parse` puts the identification in `frag_id`), every
//! generated IPv4 frame is unfragmented, and a constant flow label per flow is what RFC 6437
//! asks of a source. A port with malformed frames (built per frame) copies.

use std::sync::Arc;

use super::frame::write_frame;
use super::pool::{Entry, FramePool};
use super::GenRx;
use crate::burst::{Burst, FrameDesc};
use crate::meta::PacketMeta;
use crate::port::pace::{Pacer, Rate};
use crate::port::{PortError, QueueRx, QueueTally, RxStatus};
use crate::steer::Steering;

/// What the steering did with one distinct frame.
#[derive(Clone, Copy, Debug)]
struct Steered {
    queue: u16,
    dropped: bool,
    mark: u32,
}

/// The distinct frames, built and steered once, shared by the queues of a port.
struct Shared {
    pool: FramePool,
    /// By pool key; `None`: the key never comes (an unused size of a header cannot happen,
    /// but the index is dense).
    steered: Vec<Option<(Entry, Steered)>>,
}

/// The receive side of one queue of a split `gen` port.
pub struct GenQueueRx {
    name: String,
    queue: u16,
    nq: usize,
    /// The port's sequence, drawn here from the start (a copy of the port's generator state).
    gen: GenRx,
    shared: Arc<Shared>,
    steering: Arc<Steering>,
    meta: PacketMeta,
    scratch: Vec<u8>,
}

/// Why `rx` cannot be split by queue (`None`: it can).
fn refusal(rx: &GenRx) -> Option<String> {
    if rx.source.is_some() {
        return Some("a generator mode's frames are generated on one thread".into());
    }
    if rx.payloads.is_some() {
        return Some(
            "its planted payloads (gen.payload) are drawn per frame, outside the frame pool".into(),
        );
    }
    if !matches!(rx.pacer.rate(), Rate::Unlimited) {
        return Some(
            "its rate (pps/bps) paces the port as a whole, so one thread generates it".into(),
        );
    }
    if rx.pool.is_none() {
        return Some(
            "its headers are drawn afresh per frame (no flows.flow_count or trace, or more \
             distinct frames than the pool indexes): every queue would build and steer every \
             frame"
                .into(),
        );
    }
    if rx.produced > 0 || rx.pending.is_some() {
        return Some("it has produced frames already".into());
    }
    None
}

/// Splits `rx` over `nq` queues by `steering`: every distinct frame built and steered once.
/// `Err(why)` leaves `rx` as it was (received by one thread).
pub(super) fn split(
    rx: &mut GenRx,
    steering: &Arc<Steering>,
    nq: usize,
) -> Result<Vec<GenQueueRx>, String> {
    if let Some(why) = refusal(rx) {
        return Err(why);
    }
    let nq = nq.max(1);
    let Some(mut pool) = rx.pool.take() else {
        return Err("no frame pool".into());
    };
    let mut meta = PacketMeta::default();
    let sizes = rx.sizes.sizes.len();
    let mut steered = Vec::with_capacity(pool.keys());
    for key in 0..pool.keys() {
        let Some(spec) = rx.spec_of_key(key / sizes, key % sizes) else {
            steered.push(None);
            continue;
        };
        let Some(e) = pool.entry(key, &spec) else {
            rx.pool = Some(pool);
            return Err(format!(
                "its distinct frames exceed the frame pool ({} MiB)",
                super::pool::POOL_MAX_BYTES >> 20
            ));
        };
        let (q, drop, mark) = steering.steer_marked(pool.bytes(e), &mut meta, nq);
        steered.push(Some((
            e,
            Steered {
                queue: q.min(nq - 1) as u16,
                dropped: drop.is_some(),
                mark,
            },
        )));
    }
    let shared = Arc::new(Shared { pool, steered });
    Ok((0..nq)
        .map(|q| GenQueueRx {
            name: format!("{}#q{q}", rx.name),
            queue: q as u16,
            nq,
            gen: rx.fork(),
            shared: Arc::clone(&shared),
            steering: Arc::clone(steering),
            meta: PacketMeta::default(),
            scratch: Vec::new(),
        })
        .collect())
}

impl GenRx {
    /// A copy of the generator's state before its first frame (no pool: the split's is
    /// shared), drawing the same sequence.
    fn fork(&self) -> GenRx {
        GenRx {
            name: self.name.clone(),
            port: self.port,
            rng: self.rng.clone(),
            headers: self.headers.clone(),
            sizes: self.sizes.clone(),
            vlan: self.vlan,
            tcp_flags: self.tcp_flags,
            malformed_ratio: self.malformed_ratio,
            count: self.count,
            duration_ns: self.duration_ns,
            pacer: Pacer::new(Rate::Unlimited),
            produced: 0,
            pending: None,
            pool: None,
            wall_start_ns: self.wall_start_ns,
            source: None,
            payloads: None,
        }
    }
}

impl GenQueueRx {
    /// The queue, drop and mark of a frame not in the pool (built into the scratch buffer).
    fn steer_built(&mut self, spec: &super::FrameSpec) -> (Steered, u32) {
        self.scratch.clear();
        let (_, wire) = write_frame(&mut self.scratch, spec);
        let (q, drop, mark) = self
            .steering
            .steer_marked(&self.scratch, &mut self.meta, self.nq);
        let s = Steered {
            queue: q.min(self.nq - 1) as u16,
            dropped: drop.is_some(),
            mark,
        };
        (s, wire as u32)
    }
}

/// What [`GenQueueRx::draw`] found: a pooled frame of this queue (its entry), one the steering
/// dropped or another queue's (skipped), or a frame built per frame (its spec; by copy only).
enum Drawn {
    Pooled(Entry, Steered),
    Skipped,
    Built(super::FrameSpec),
}

impl GenQueueRx {
    /// Draws the port's next frame; a frame of this queue is counted into `tally`.
    fn draw(&mut self, tally: &mut QueueTally) -> (Drawn, u16) {
        let (spec, key) = self.gen.next_keyed();
        self.gen.produced += 1;
        match key.and_then(|k| self.shared.steered.get(k).copied().flatten()) {
            Some((e, st)) if st.queue == self.queue => {
                tally.rx_frames += 1;
                tally.rx_bytes += u64::from(e.len);
                if st.dropped {
                    tally.steering_drops += 1;
                    return (Drawn::Skipped, spec.ip_id);
                }
                (Drawn::Pooled(e, st), spec.ip_id)
            }
            Some(_) => (Drawn::Skipped, spec.ip_id),
            None => (Drawn::Built(spec), spec.ip_id),
        }
    }

    /// Whether the sequence is over at pacer time `now` (ns).
    fn over(&self, now: u64) -> bool {
        self.gen.duration_ns.is_some_and(|d| now >= d)
            || self.gen.count.is_some_and(|c| self.gen.produced >= c)
    }

    fn desc(&self, mark: u32, now: u64) -> FrameDesc {
        FrameDesc {
            port: self.gen.port,
            queue: self.queue,
            mark,
            timestamp_ns: self.gen.wall_start_ns.saturating_add(now),
            ..FrameDesc::default()
        }
    }
}

impl QueueRx for GenQueueRx {
    fn rx_queue(
        &mut self,
        burst: &mut Burst,
        max: usize,
        room: usize,
        tally: &mut QueueTally,
    ) -> Result<RxStatus, PortError> {
        let now = self.gen.pacer.now_ns();
        if self.over(now) {
            return Ok(RxStatus::End);
        }
        let (mut pushed, mut seen) = (0usize, 0usize);
        // `seen` bounds the call: the frames of the other queues are drawn and skipped here.
        let bound = max.max(1).saturating_mul(self.nq).saturating_mul(4);
        while pushed < max && seen < bound && !self.over(now) {
            seen += 1;
            match self.draw(tally) {
                (Drawn::Skipped, _) => {}
                (Drawn::Pooled(e, st), ip_id) => {
                    let desc = self.desc(st.mark, now);
                    self.shared.pool.push_entry(e, ip_id, burst, desc, room);
                    pushed += 1;
                }
                (Drawn::Built(spec), _) => {
                    let (st, wire) = self.steer_built(&spec);
                    if st.queue != self.queue {
                        continue;
                    }
                    tally.rx_frames += 1;
                    tally.rx_bytes += self.scratch.len() as u64;
                    if st.dropped {
                        tally.steering_drops += 1;
                        continue;
                    }
                    let desc = FrameDesc {
                        wire_len: wire,
                        ..self.desc(st.mark, now)
                    };
                    burst.push_with_room(&self.scratch, desc, room);
                    pushed += 1;
                }
            }
        }
        Ok(if pushed > 0 || seen > 0 {
            RxStatus::Frames(pushed)
        } else {
            RxStatus::End
        })
    }

    fn frame_store(&self) -> Result<Arc<Vec<u8>>, String> {
        if self.gen.malformed_ratio > 0.0 {
            return Err(
                "its malformed frames (gen.malformed_ratio) are built per frame, outside the \
                 frame pool"
                    .into(),
            );
        }
        Ok(self.shared.pool.store())
    }

    fn store_note(&self) -> Option<&'static str> {
        Some(
            "a generator's frames keep their pool copy's IPv4 identification / IPv6 flow label \
             (0; copied, each frame gets its number there)",
        )
    }

    fn rx_refs(
        &mut self,
        refs: &mut Vec<FrameDesc>,
        max: usize,
        tally: &mut QueueTally,
    ) -> Result<RxStatus, PortError> {
        let now = self.gen.pacer.now_ns();
        if self.over(now) {
            return Ok(RxStatus::End);
        }
        let (mut pushed, mut seen) = (0usize, 0usize);
        let bound = max.max(1).saturating_mul(self.nq).saturating_mul(4);
        while pushed < max && seen < bound && !self.over(now) {
            seen += 1;
            match self.draw(tally) {
                (Drawn::Skipped, _) => {}
                (Drawn::Pooled(e, st), _) => {
                    refs.push(FrameDesc {
                        offset: e.offset as u32,
                        len: e.len,
                        wire_len: e.len,
                        ..self.desc(st.mark, now)
                    });
                    pushed += 1;
                }
                (Drawn::Built(_), _) => {
                    return Err(PortError::Config(format!(
                        "{}: a frame outside the frame pool cannot go by reference",
                        self.name
                    )))
                }
            }
        }
        Ok(if pushed > 0 || seen > 0 {
            RxStatus::Frames(pushed)
        } else {
            RxStatus::End
        })
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn queue(&self) -> u16 {
        self.queue
    }
}
