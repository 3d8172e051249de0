//! The TX threads of the host runtime, written once for both executors: one per worker queue
//! (`pw-tx{q}`, the default) or one for every queue (`pw-tx`, `queues.tx_threads: one`), each
//! with its own senders where the port gives one per TX queue ([`OutPorts::per_queue`]). A TX
//! thread takes each of its queues' finished bursts in the order the queue finished them, sends every frame to where its verdict
//! sends it ([`OutPorts`]: the output port the frame names, the mirror port, the slow path),
//! counts what each destination took, lets ports that hold frames for their send time send them
//! when due, and hands each burst back to its owner ([`TxBurst`] says how an executor's burst
//! is read; the executor's `release` callback what becomes of it after).

use crossbeam_utils::Backoff;

use crate::counters::QueueCounters;
use crate::port::out::{count_settled, merge_tallies, Destinations, OutPorts, OutTally};
use crate::port::WireFrame;
use crate::ring::Consumer;
use crate::verdict::DropReason;

/// What a verdict does with a frame, as the TX thread sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxFate {
    /// To its output port.
    Forward,
    /// To its output port, and a copy to the mirror port.
    Mirror,
    /// To the slow path.
    ToHost,
    /// Nowhere (counted where it was dropped).
    Drop,
}

impl TxFate {
    #[inline]
    fn forwards(self) -> bool {
        matches!(self, TxFate::Forward | TxFate::Mirror)
    }
}

/// A finished burst as the TX thread reads it: per frame, in order, its fate, its `out_port`
/// and its bytes with its send time and its length on the wire.
pub trait TxBurst {
    /// Every frame of the burst that has a TX entry: (fate, out_port, frame with send time and
    /// wire length).
    /// Called more than once per burst: it yields the same frames each time.
    fn entries(&self) -> impl Iterator<Item = (TxFate, u16, WireFrame<'_>)>;
}

/// Sends one burst of queue `q` to its destinations and counts it in `c`.
pub(crate) fn send_burst(
    dest: &mut Destinations<'_>,
    q: usize,
    burst: &impl TxBurst,
    c: &QueueCounters,
) {
    let route = dest.route;
    let target = |out_port: u16| route.target(out_port);
    for (k, d) in dest.ports.iter_mut() {
        let k = *k;
        let r = d.send_frames(q as u16, || {
            burst
                .entries()
                .filter(move |(fate, port, _)| fate.forwards() && target(*port) == Some(k))
                .map(|(_, _, f)| f)
        });
        // Shared adds: another queue's TX thread may count this queue's settled frames
        // (`count_settled` through a `SharedTx`) at the same time.
        c.tx_frames.add_shared(r.sent);
        c.tx_bytes.add_shared(r.bytes);
        c.drops[DropReason::TxError as usize].add_shared(r.failed());
        c.drops[DropReason::TxHorizon as usize].add_shared(r.too_far);
    }
    // Forwarded to a port that is not open (a route to the mirror or slow-path port): not sent,
    // counted.
    let lost = burst
        .entries()
        .filter(|(fate, _, _)| fate.forwards())
        .filter_map(|(_, port, _)| target(port))
        .filter(|k| !dest.is_open(*k))
        .count();
    c.drops[DropReason::TxError as usize].add_shared(lost as u64);
    // Copies and the slow path are counted by their destinations (OutTally).
    for (d, want) in [
        (dest.mirror.as_mut(), TxFate::Mirror),
        (dest.slow.as_mut(), TxFate::ToHost),
    ] {
        if let Some(d) = d {
            d.send_frames(q as u16, || {
                burst
                    .entries()
                    .filter(move |(fate, _, _)| *fate == want)
                    .map(|(_, _, f)| f)
            });
        }
    }
}

/// The frames the verifier found to differ, to the slow path as received (they count in its
/// tally); whether there were any. Called by the TX thread of either
/// executor (`verify: { sample: N }`).
pub(crate) fn send_captures(
    cap: &std::sync::mpsc::Receiver<crate::burst::Burst>,
    dest: &mut Destinations<'_>,
) -> bool {
    let mut any = false;
    while let Ok(b) = cap.try_recv() {
        any = true;
        if let Some(sp) = dest.slow.as_mut() {
            sp.send_frames(0, || b.frames().map(|(d, f)| (f, 0, d.wire_len)));
        }
    }
    any
}

/// One TX thread of a run: its name, its destinations and the queues it sends (queue index,
/// that queue's finished bursts).
pub(crate) struct TxLane<B> {
    pub name: String,
    pub out: OutPorts,
    pub inputs: Vec<(usize, Consumer<B>)>,
}

/// The TX threads for `inputs` (one per queue, in queue order): with `per_queue`, one thread
/// per queue named `pw-tx{q}`, each with its own senders ([`OutPorts::per_queue`]); else one
/// thread `pw-tx` for every queue. `Err` names the port that cannot give a sender per queue.
pub(crate) fn lanes<B>(
    out: OutPorts,
    inputs: Vec<Consumer<B>>,
    per_queue: bool,
) -> Result<Vec<TxLane<B>>, String> {
    let outs = split_out(out, inputs.len(), per_queue)?;
    Ok(lanes_of(outs, inputs, per_queue))
}

/// The destinations of each TX thread ([`lanes`]' first half, for a caller that opens its
/// queues' rings after it): `nq` with `per_queue`, else one.
pub(crate) fn split_out(
    out: OutPorts,
    nq: usize,
    per_queue: bool,
) -> Result<Vec<OutPorts>, String> {
    if per_queue {
        out.per_queue(nq)
    } else {
        Ok(vec![out])
    }
}

/// The TX threads over `outs` ([`split_out`] with the same `per_queue`): `pw-tx{q}` for queue
/// q's, or `pw-tx` for every queue.
pub(crate) fn lanes_of<B>(
    outs: Vec<OutPorts>,
    inputs: Vec<Consumer<B>>,
    per_queue: bool,
) -> Vec<TxLane<B>> {
    if inputs.is_empty() {
        // Nothing to transmit: no TX thread.
        return Vec::new();
    }
    let count = if per_queue { inputs.len() } else { 1 };
    tracing::info!(
        event = "tx_threads",
        threads = if per_queue { "per_queue" } else { "one" },
        count,
        "{count} TX thread(s)"
    );
    if per_queue {
        return outs
            .into_iter()
            .zip(inputs.into_iter().enumerate())
            .map(|(out, (q, input))| TxLane {
                name: format!("pw-tx{q}"),
                out,
                inputs: vec![(q, input)],
            })
            .collect();
    }
    outs.into_iter()
        .next()
        .map(|out| TxLane {
            name: "pw-tx".to_string(),
            out,
            inputs: inputs.into_iter().enumerate().collect(),
        })
        .into_iter()
        .collect()
}

/// What the TX threads took, as one: tallies summed per destination, errors without repeats
/// (threads sharing a port report its error each).
pub(crate) fn merge(per_thread: Vec<(Vec<OutTally>, Vec<String>)>) -> (Vec<OutTally>, Vec<String>) {
    let mut errors: Vec<String> = Vec::new();
    let mut tallies = Vec::new();
    for (t, e) in per_thread {
        tallies.push(t);
        for e in e {
            if !errors.contains(&e) {
                errors.push(e);
            }
        }
    }
    (merge_tallies(tallies), errors)
}

/// Runs the TX thread until `done()` (every producer finished) and every input is empty; then
/// flushes the ports. `release(q, burst)` takes each burst back once every destination is done
/// with its frames (ports copy what they keep); `side(dest)` runs every turn and once more
/// before the flush, for frames from elsewhere (the verifier's captures), and says whether it
/// sent any. Returns what each destination took and the
/// ports' errors: after a destination's first error its frames count as failed without calling
/// it again.
pub(crate) fn run<B: TxBurst>(
    counters: &[std::sync::Arc<QueueCounters>],
    out: &mut OutPorts,
    inputs: &mut [(usize, Consumer<B>)],
    done: impl Fn() -> bool,
    mut release: impl FnMut(usize, B),
    mut side: impl FnMut(&mut Destinations<'_>) -> bool,
    wait: impl Fn(&Backoff),
) -> (Vec<OutTally>, Vec<String>) {
    let backoff = Backoff::new();
    let mut dest = Destinations::new(out);
    let mut settled = Vec::new();
    loop {
        let mut got = false;
        for (q, input) in inputs.iter_mut() {
            let q = *q;
            while let Some(burst) = input.pop() {
                got = true;
                send_burst(&mut dest, q, &burst, &counters[q]);
                release(q, burst);
            }
        }
        got |= side(&mut dest);
        // Frames a port holds for their send time go out when due, bursts or not; each is
        // counted for its queue once it went out (or did not).
        dest.poll(&mut settled);
        count_settled(counters, &settled);
        settled.clear();
        if got {
            backoff.reset();
            continue;
        }
        if done() && inputs.iter().all(|(_, i)| i.is_empty()) {
            break;
        }
        wait(&backoff);
    }
    side(&mut dest);
    let r = dest.finish(&mut settled);
    count_settled(counters, &settled);
    r
}
