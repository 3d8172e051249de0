//! A capture split by queue at load: the software steering runs once per frame when the
//! capture is loaded, each queue keeps the list of its frames in the one loaded copy (shared,
//! not copied: the memory stays the capture's), and each queue's receive thread replays its
//! share in capture order, lap after lap, with no
//! steering and no parsing on the data path. The frames a queue sees, their order, queue,
//! mark and timestamps are those the one-thread ingest would have given it.

use std::sync::Arc;

use super::{Loops, PcapRx, Stored};
use crate::burst::{Burst, FrameDesc};
use crate::meta::PacketMeta;
use crate::port::pace::{Pacer, Rate};
use crate::port::{PortError, QueueRx, QueueTally, RxStatus};
use crate::steer::Steering;

/// One frame of a queue's share.
#[derive(Clone, Copy, Debug)]
struct Share {
    /// Offset in the loaded capture.
    offset: usize,
    len: u32,
    orig_len: u32,
    rel_ns: u64,
    mark: u32,
    /// Steering drops it: counted on this queue (as the one-thread ingest counts it), never
    /// handed over.
    dropped: bool,
}

/// The receive side of one queue of a split `pcap` port.
pub struct PcapQueueRx {
    name: String,
    port: u16,
    queue: u16,
    /// The loaded capture, shared by every queue of the port.
    data: Arc<Vec<u8>>,
    frames: Vec<Share>,
    base_ns: u64,
    loop_ns: u64,
    loops: Loops,
    loop_idx: u64,
    next: usize,
    pacer: Pacer,
}

/// Why `rx` cannot be split by queue (`None`: it can).
pub(super) fn refusal(rx: &PcapRx) -> Option<String> {
    match rx.pacer.rate() {
        Rate::Pps(_) | Rate::Bps(_) => {
            Some("its rate (pps/bps) paces the port as a whole, so one thread replays it".into())
        }
        _ => None,
    }
}

/// Splits the loaded capture of `rx` over `nq` queues by `steering` (the capture moves into
/// the shares; `rx` is left empty).
pub(super) fn split(rx: &mut PcapRx, steering: &Steering, nq: usize) -> Vec<PcapQueueRx> {
    let nq = nq.max(1);
    let data = Arc::new(std::mem::take(&mut rx.data));
    let stored: Vec<Stored> = std::mem::take(&mut rx.frames);
    let mut meta = PacketMeta::default();
    // Two passes: counts first, so each share's list is allocated once.
    let mut picks = Vec::with_capacity(stored.len());
    let mut counts = vec![0usize; nq];
    for s in &stored {
        let frame = &data[s.offset..s.offset + s.len as usize];
        let (q, drop, mark) = steering.steer_marked(frame, &mut meta, nq);
        let q = q.min(nq - 1);
        counts[q] += 1;
        picks.push((q, drop.is_some(), mark));
    }
    let mut out: Vec<PcapQueueRx> = (0..nq)
        .map(|q| PcapQueueRx {
            name: format!("{}#q{q}", rx.name),
            port: rx.port,
            queue: q as u16,
            data: Arc::clone(&data),
            frames: Vec::with_capacity(counts[q]),
            base_ns: rx.base_ns,
            loop_ns: rx.loop_ns,
            loops: rx.loops,
            loop_idx: 0,
            next: 0,
            pacer: Pacer::new(rx.pacer.rate()),
        })
        .collect();
    for (s, (q, dropped, mark)) in stored.iter().zip(picks) {
        out[q].frames.push(Share {
            offset: s.offset,
            len: s.len,
            orig_len: s.orig_len,
            rel_ns: s.rel_ns,
            mark,
            dropped,
        });
    }
    out
}

impl PcapQueueRx {
    /// Frames of this queue in one pass over the capture (steering drops included).
    pub fn frames_per_loop(&self) -> usize {
        self.frames.len()
    }

    fn done(&self) -> bool {
        match self.loops {
            Loops::Count(c) => self.loop_idx >= c,
            Loops::Forever => false,
        }
    }
}

/// Bytes of the capture not yet copied into the burst: a queue's frames that lie back to back
/// in the capture (all of them with one queue) are one copy.
struct Run {
    start: usize,
    len: usize,
}

impl Run {
    fn flush(&mut self, share: &[u8], burst: &mut Burst) {
        if self.len > 0 {
            burst
                .data
                .extend_from_slice(&share[self.start..self.start + self.len]);
        }
        self.len = 0;
    }
}

/// What [`PcapQueueRx::step`] found.
enum Step {
    /// The next frame of the queue, due at this time (ns after the first frame).
    Frame(Share, u64),
    /// A frame the steering drops (counted).
    Dropped,
    /// Nothing more now: the end, or the pace holds the next frame.
    Stop,
}

impl PcapQueueRx {
    /// Takes the next frame of the queue if it is due at `now`, counting it into `tally`.
    fn step(&mut self, now: u64, tally: &mut QueueTally) -> Step {
        if self.next == self.frames.len() {
            self.loop_idx += 1;
            self.next = 0;
        }
        if self.done() {
            return Step::Stop;
        }
        let s = self.frames[self.next];
        let due = self
            .loop_idx
            .saturating_mul(self.loop_ns)
            .saturating_add(s.rel_ns);
        if !self.pacer.admit(now, s.orig_len, due) {
            return Step::Stop;
        }
        self.next += 1;
        tally.rx_frames += 1;
        tally.rx_bytes += u64::from(s.len);
        if s.dropped {
            tally.steering_drops += 1;
            return Step::Dropped;
        }
        Step::Frame(s, due)
    }

    fn desc(&self, s: &Share, due: u64) -> FrameDesc {
        FrameDesc {
            len: s.len,
            wire_len: s.orig_len.max(s.len),
            port: self.port,
            queue: self.queue,
            mark: s.mark,
            timestamp_ns: self.base_ns.saturating_add(due),
            ..FrameDesc::default()
        }
    }

    /// What a call that pushed `pushed` frames and took `seen` in returns.
    fn status(&self, pushed: usize, seen: usize) -> RxStatus {
        if pushed > 0 || seen > 0 {
            RxStatus::Frames(pushed)
        } else if self.done() {
            RxStatus::End
        } else {
            RxStatus::Idle
        }
    }
}

impl QueueRx for PcapQueueRx {
    fn rx_queue(
        &mut self,
        burst: &mut Burst,
        max: usize,
        room: usize,
        tally: &mut QueueTally,
    ) -> Result<RxStatus, PortError> {
        if self.frames.is_empty() || self.done() {
            return Ok(RxStatus::End);
        }
        let now = self.pacer.now_ns();
        let (mut pushed, mut seen) = (0usize, 0usize);
        let mut run = Run { start: 0, len: 0 };
        // `seen` bounds the call too: a share of steering drops only must not spin here.
        while pushed < max && seen < max.max(1) * 4 {
            let (s, due) = match self.step(now, tally) {
                Step::Stop => break,
                Step::Dropped => {
                    seen += 1;
                    continue;
                }
                Step::Frame(s, due) => (s, due),
            };
            seen += 1;
            let desc = self.desc(&s, due);
            let bytes = &self.data[s.offset..s.offset + s.len as usize];
            if room > 0 {
                burst.push_with_room(bytes, desc, room);
            } else {
                if run.len > 0 && run.start + run.len != s.offset {
                    run.flush(&self.data, burst);
                }
                if run.len == 0 {
                    run.start = s.offset;
                }
                let offset = burst.data.len() + run.len;
                run.len += s.len as usize;
                burst.descs.push(FrameDesc {
                    offset: offset as u32,
                    ..desc
                });
            }
            pushed += 1;
        }
        run.flush(&self.data, burst);
        Ok(self.status(pushed, seen))
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn queue(&self) -> u16 {
        self.queue
    }

    fn frame_store(&self) -> Result<Arc<Vec<u8>>, String> {
        // Offsets past 4 GiB do not fit a descriptor's offset.
        if self.data.len() > u32::MAX as usize {
            return Err(format!(
                "its capture's frames take {} bytes, past what a descriptor's 32-bit offset \
                 reaches",
                self.data.len()
            ));
        }
        Ok(Arc::clone(&self.data))
    }

    fn rx_refs(
        &mut self,
        refs: &mut Vec<FrameDesc>,
        max: usize,
        tally: &mut QueueTally,
    ) -> Result<RxStatus, PortError> {
        if self.frames.is_empty() || self.done() {
            return Ok(RxStatus::End);
        }
        let now = self.pacer.now_ns();
        let (mut pushed, mut seen) = (0usize, 0usize);
        while pushed < max && seen < max.max(1) * 4 {
            match self.step(now, tally) {
                Step::Stop => break,
                Step::Dropped => {}
                Step::Frame(s, due) => {
                    refs.push(FrameDesc {
                        offset: s.offset as u32,
                        ..self.desc(&s, due)
                    });
                    pushed += 1;
                }
            }
            seen += 1;
        }
        Ok(self.status(pushed, seen))
    }
}
