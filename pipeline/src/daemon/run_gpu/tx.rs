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

/// The bytes of TX entry `d`: in the GPU slot the burst ran in where it is held with its
/// frames ([`Slot::ring`]), else in the burst (empty when it lies outside: never sent).
fn frame_of<'s>(slot: &'s Slot, d: &TxDesc) -> &'s [u8] {
    let (a, n) = (d.offset as usize, d.len as usize);
    let data = slot
        .ring
        .as_ref()
        .and_then(|r| r.data())
        .unwrap_or(&slot.burst.data);
    data.get(a..a + n).unwrap_or(&[])
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
            .map(move |(i, d)| (fate(d), d.out_port, timed(self, i, d)))
    }
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
) -> (Vec<OutTally>, Vec<String>) {
    // Every destination is done with the frames (ports copy what they keep): the GPU slot may
    // take the next burst.
    let release = |_q: usize, mut slot: Slot| {
        if let Some(h) = slot.ring.take() {
            dev.release(h.q, h.seq);
        }
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
    crate::executor::tx::run(
        &shared.counters,
        out,
        &mut inputs,
        done,
        release,
        captures,
        wait_on,
    )
}
