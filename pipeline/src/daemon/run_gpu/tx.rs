//! The TX thread, as in the CPU executor: it sends each queue's bursts in the order its queue
//! thread reaped them to their destinations ([`OutPorts`]: the output port each frame names,
//! the mirror port, the slow path), counts what each took, and returns the slots to their
//! ingest threads. What to send comes from the burst's TX list ([`Slot::tx`]): the TX ring the
//! kernel wrote (frames as the stages left them), or, for the built-in pipeline, the list its
//! queue thread made from the verdicts; no verdict is read here.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;

use crossbeam_utils::Backoff;

use super::device::QueueDevice;
use super::{wait_on, Slot};
use crate::executor::cpu::CpuShared;
use crate::executor::gpu::abi::{self, TxDesc};
use crate::port::out::{count_settled, Destinations, OutPorts, OutTally};
use crate::port::WireFrame;
use crate::ring::Consumer;
use crate::verdict::DropReason;

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

fn forwards(d: &TxDesc) -> bool {
    d.action == abi::ACTION_PASS || d.action == abi::ACTION_MIRROR
}

/// Runs until every queue thread is done (`queues_done` reaches the number of queues) and its
/// ring is empty; flushes the ports. Returns what each destination took and the ports' errors:
/// after a destination's first error its frames count as failed without calling it again.
pub(crate) fn run(
    shared: &CpuShared,
    out: &mut OutPorts,
    mut inputs: Vec<Consumer<Slot>>,
    frees: Vec<Sender<Slot>>,
    queues_done: &AtomicUsize,
    dev: &dyn QueueDevice,
) -> (Vec<OutTally>, Vec<String>) {
    let backoff = Backoff::new();
    let mut dest = Destinations::new(out);
    let mut settled = Vec::new();
    let route = dest.route;
    let target = |d: &TxDesc| route.target(d.out_port);
    loop {
        let mut got = false;
        for (q, input) in inputs.iter_mut().enumerate() {
            while let Some(slot) = input.pop() {
                got = true;
                let c = &shared.counters[q];
                let s = &slot;
                for (k, d) in dest.ports.iter_mut() {
                    let k = *k;
                    let r = d.send_frames(q as u16, || {
                        s.tx.iter()
                            .enumerate()
                            .filter(move |(_, t)| forwards(t) && target(t) == Some(k))
                            .map(move |(i, t)| timed(s, i, t))
                    });
                    c.tx_frames.add(r.sent);
                    c.tx_bytes.add(r.bytes);
                    c.drops[DropReason::TxError as usize].add_shared(r.failed());
                    c.drops[DropReason::TxHorizon as usize].add_shared(r.too_far);
                }
                // Forwarded to a port that is not open (a route to the mirror or slow-path
                // port): not sent, counted.
                let lost =
                    s.tx.iter()
                        .filter(|t| forwards(t))
                        .filter_map(target)
                        .filter(|k| !dest.is_open(*k))
                        .count();
                c.drops[DropReason::TxError as usize].add_shared(lost as u64);
                // Copies and the slow path are counted by their destinations (OutTally).
                if let Some(d) = dest.mirror.as_mut() {
                    d.send_frames(q as u16, || {
                        s.tx.iter()
                            .enumerate()
                            .filter(|(_, t)| t.action == abi::ACTION_MIRROR)
                            .map(move |(i, t)| timed(s, i, t))
                    });
                }
                if let Some(d) = dest.slow.as_mut() {
                    d.send_frames(q as u16, || {
                        s.tx.iter()
                            .enumerate()
                            .filter(|(_, t)| t.action == abi::ACTION_TO_HOST)
                            .map(move |(i, t)| timed(s, i, t))
                    });
                }
                // Every destination is done with the frames (ports copy what they keep):
                // the GPU slot may take the next burst.
                let mut slot = slot;
                if let Some(h) = slot.ring.take() {
                    dev.release(h.q, h.seq);
                }
                if let Some(f) = frees.get(slot.port) {
                    let _ = f.send(slot);
                }
            }
        }
        // Frames a port holds for their send time go out when due, bursts or not; each is
        // counted for its queue once it went out (or did not).
        dest.poll(&mut settled);
        count_settled(&shared.counters, &settled);
        settled.clear();
        if got {
            backoff.reset();
            continue;
        }
        if queues_done.load(Ordering::Acquire) == inputs.len()
            && inputs.iter().all(|i| i.is_empty())
        {
            break;
        }
        wait_on(&backoff);
    }
    let r = dest.finish(&mut settled);
    count_settled(&shared.counters, &settled);
    r
}
