//! A TX thread (one per queue, or one for all: `executor::tx`), as in the CPU executor: it
//! sends each of its queues' bursts in the order its queue
//! thread reaped them to their destinations ([`OutPorts`]: the output port each frame names,
//! the mirror port, the slow path), counts what each took, and returns the slots to their
//! ingest threads. What to send comes from the burst's TX list ([`Slot::tx`]): the TX ring the
//! kernel wrote (frames as the stages left them), or, for the built-in pipeline, the list its
//! queue thread made from the verdicts; no verdict is read here.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;

use super::device::QueueDevice;
use super::{wait_on, Slot};
use crate::executor::cpu::CpuShared;
use crate::executor::gpu::abi::{self, TxDesc};
pub(crate) use crate::executor::tx::{lanes_of, split_out};
use crate::executor::tx::{TxBurst, TxFate};
use crate::port::out::{OutPorts, OutTally};
use crate::port::WireFrame;
use crate::ring::Consumer;

/// The bytes of TX entry `d`: where the frame arrived when no stage changed it
/// ([`Slot::as_received`], [`as_received`]); else in the GPU slot the burst ran in where it is
/// held with its frames ([`Slot::ring`]), else in the burst the reap copied them into (empty
/// when it lies outside: never sent).
pub(crate) fn frame_of<'s>(slot: &'s Slot, d: &TxDesc) -> &'s [u8] {
    if slot.as_received {
        return as_received(slot, d).unwrap_or(&[]);
    }
    let (a, n) = (d.offset as usize, d.len as usize);
    let data = slot
        .ring
        .as_ref()
        .and_then(|r| r.data())
        .unwrap_or(&slot.burst.data);
    data.get(a..a + n).unwrap_or(&[])
}

/// Frame `d.frame` of the burst where it arrived: in the port's store the burst holds
/// ([`Slot::store`], frames by reference), in its mbuf of a pinned pool
/// ([`Slot::host_srcs`]), else in the burst its receive thread filled. `None`
/// when the entry names no frame of the burst, or more bytes than arrived.
fn as_received<'s>(slot: &'s Slot, d: &TxDesc) -> Option<&'s [u8]> {
    let i = usize::from(d.frame);
    let got = slot.burst.descs.get(i)?;
    let n = d.len as usize;
    if d.len > got.len {
        return None;
    }
    match &slot.store {
        Some(store) => store.frame(*slot.gpu_srcs.get(i)?, n),
        None if slot.host_srcs => {
            let at = *slot.gpu_srcs.get(i)?;
            // SAFETY: `host_srcs`: frame i's n <= got.len bytes lie at host address `at` in
            // its mbuf, which the slot holds (`kept`) until it is released, after this read.
            Some(unsafe { std::slice::from_raw_parts(at as *const u8, n) })
        }
        None => {
            let a = got.offset as usize;
            slot.burst.data.get(a..a + n)
        }
    }
}

/// Where the TX threads read the frames (see [`plan`]).
pub(crate) const AS_RECEIVED: &str = "as_received";
pub(crate) const GPU_SLOT: &str = "gpu_slot";
pub(crate) const COPIED_OUT: &str = "copied_out";
pub(crate) const MBUF: &str = "mbuf";

/// Where a run's TX threads read its frames: `as_received` (no stage changes a frame, so each
/// leaves from where it arrived), else `holds` (the device holds each reaped slot until its
/// frames are sent from it) or neither (the reap copies them out of the slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TxPlan {
    pub as_received: bool,
    pub holds: bool,
}

/// The TX plan of a run (none without an output port, mirror or slow path) and its report:
/// `rewrites` is the pipeline's [`crate::stage::Pipeline::rewrites`] (an ACL reload that would
/// change it is refused, so it holds for the run); `ingest` says where each port's frames
/// arrive. The device is asked to hold its slots only when the frames are sent from them
/// (before the first submit). Logged (`event=tx_path`).
pub(crate) fn plan(
    dev: &dyn QueueDevice,
    (with_tx, by_mbuf): (bool, bool),
    pipeline: &crate::stage::Pipeline,
    ingest: &[crate::daemon::summary::GpuIngest],
) -> (TxPlan, Option<crate::daemon::summary::GpuTx>) {
    let rewrites = pipeline.rewrites();
    let none = TxPlan {
        as_received: false,
        holds: false,
    };
    if !with_tx {
        return (none, None);
    }
    let (plan, path, reason) = if !rewrites {
        let from: Vec<String> = ingest
            .iter()
            .map(|g| match g.path.as_str() {
                super::gpu_ingest::BY_REFERENCE
                    if g.reason.starts_with(super::gpu_ingest::PINNED_POOL) =>
                {
                    format!("{}: its mbufs in the pinned RX pool", g.port)
                }
                super::gpu_ingest::BY_REFERENCE => {
                    format!("{}: its loaded frames in pinned host memory", g.port)
                }
                _ => format!("{}: the burst its receive thread copied it into", g.port),
            })
            .collect();
        let mut reason = "no stage rewrites frames: each is sent from where it arrived, not \
                          from the GPU slot (which is free again once reaped)"
            .to_string();
        if !from.is_empty() {
            reason.push_str(" (");
            reason.push_str(&from.join("; "));
            reason.push(')');
        }
        let p = TxPlan {
            as_received: true,
            holds: false,
        };
        (p, AS_RECEIVED, reason)
    } else if dev.hold_slots() {
        let p = TxPlan {
            as_received: false,
            holds: true,
        };
        let why = "the stages rewrite frames on the GPU: each is sent from the GPU slot it ran \
                   in, held until its frames are sent";
        (p, GPU_SLOT, why.to_string())
    } else {
        let why = "the stages rewrite frames on the GPU and the device does not hold its slots: \
                   the reap copies the frames out of the slot before they are sent";
        (none, COPIED_OUT, why.to_string())
    };
    let (path, reason) = if by_mbuf {
        let how = if plan.as_received {
            "no stage rewrites frames: no copy on the TX side"
        } else {
            "the frames the stages rewrote are copied from the GPU slot back into their mbufs \
             first: one copy per frame, not zero"
        };
        let why = format!(
            "DPDK in and out: the received mbufs are sent themselves (dropped ones freed in \
             bulk, mirror copies as a second reference); {how}"
        );
        (MBUF, why)
    } else {
        (path, reason)
    };
    tracing::info!(event = "tx_path", path, reason = %reason, "GPU executor TX: {path}: {reason}");
    let report = crate::daemon::summary::GpuTx {
        path: path.to_string(),
        reason,
    };
    (plan, Some(report))
}

/// TX entry `i` of `slot` with its bytes, send time (0: now, or no times in the ring) and wire
/// length: the received frame's, changed by as much as the stages changed its length (as the
/// CPU executor and `pw_rw_set_len` do: never below the bytes).
fn timed<'s>(slot: &'s Slot, i: usize, d: &TxDesc) -> WireFrame<'s> {
    let wire = slot.burst.descs.get(usize::from(d.frame)).map_or(0, |r| {
        let w = i64::from(r.wire_len) + i64::from(d.len) - i64::from(r.len);
        w.clamp(i64::from(d.len), i64::from(u32::MAX)) as u32
    });
    (
        frame_of(slot, d),
        slot.tx_times.get(i).copied().unwrap_or(0),
        wire,
    )
}

/// What the TX ring entry's action does with its frame.
fn fate(d: &TxDesc) -> TxFate {
    match d.action {
        abi::ACTION_PASS => TxFate::Forward,
        abi::ACTION_MIRROR => TxFate::Mirror,
        abi::ACTION_TO_HOST => TxFate::ToHost,
        _ => TxFate::Drop,
    }
}

impl TxBurst for Slot {
    fn entries(&self) -> impl Iterator<Item = (TxFate, u16, WireFrame<'_>)> {
        self.tx
            .iter()
            .enumerate()
            .filter(move |(_, d)| !(self.by_mbuf && sent_as_mbuf(d)))
            .map(move |(i, d)| (fate(d), d.out_port, timed(self, i, d)))
    }
}

/// Whether TX entry `d` of a burst whose mbufs were kept is sent as its mbuf ([`SlotSender`]).
fn sent_as_mbuf(d: &TxDesc) -> bool {
    #[cfg(feature = "dpdk")]
    return super::mbufs::by_mbuf(d);
    #[cfg(not(feature = "dpdk"))]
    {
        let _ = d;
        false
    }
}

/// Sends what of a burst a TX thread sends besides its ports' copies (DPDK in and out: the
/// received mbufs themselves), after them, and counts it as the ports' sends are counted.
pub(crate) trait SlotSender: Send {
    /// Sends `slot`'s part (queue counters `c`).
    fn send(&mut self, slot: &mut Slot, c: &crate::counters::QueueCounters);
    /// Flushes: what each destination took and the errors.
    fn finish(self: Box<Self>) -> (Vec<OutTally>, Vec<String>);
}

/// The frames the sampling verifier found to differ (for the slow path), and its done flag.
pub(crate) type Captures<'a> = (
    Option<std::sync::mpsc::Receiver<crate::burst::Burst>>,
    &'a std::sync::atomic::AtomicBool,
);

/// Runs until every queue thread and the verifier are done (`queues_done` reaches `nq`, the
/// number of queues, and the verifier's flag is set) and the rings are empty; flushes the ports.
/// The verifier's captures go to the slow path meanwhile. Returns what each destination took and the ports' errors:
/// after a destination's first error its frames count as failed without calling it again.
pub(crate) fn run(
    shared: &CpuShared,
    out: &mut OutPorts,
    mut inputs: Vec<(usize, Consumer<Slot>)>,
    frees: Vec<Sender<Slot>>,
    (queues_done, nq, (captured, verify_done)): (&AtomicUsize, usize, Captures<'_>),
    dev: &dyn QueueDevice,
    mut sender: Option<Box<dyn SlotSender + '_>>,
) -> (Vec<OutTally>, Vec<String>) {
    // Every destination is done with the frames (ports copy what they keep): the GPU slot may
    // take the next burst.
    let release = |q: usize, mut slot: Slot| {
        if let (Some(s), Some(c)) = (sender.as_mut(), shared.counters.get(q)) {
            s.send(&mut slot, c);
        }
        if let Some(h) = slot.ring.take() {
            dev.release(h.q, h.seq);
        }
        // Sent: the store (or buffers) its frames were read from may go.
        slot.release();
        if let Some(f) = frees.get(slot.owner) {
            let _ = f.send(slot);
        }
    };
    // The verifier's flag after the queues': it finishes after them, and its last captures are
    // queued before it sets it (taken on the next turn, and once more at the end).
    let done = || queues_done.load(Ordering::Acquire) == nq && verify_done.load(Ordering::Acquire);
    let captures = |dest: &mut crate::port::out::Destinations<'_>| {
        captured
            .as_ref()
            .is_some_and(|c| crate::executor::tx::send_captures(c, dest))
    };
    let r = crate::executor::tx::run(
        &shared.counters,
        out,
        &mut inputs,
        done,
        release,
        captures,
        wait_on,
    );
    match sender {
        Some(s) => crate::executor::tx::merge(vec![r, s.finish()]),
        None => r,
    }
}
