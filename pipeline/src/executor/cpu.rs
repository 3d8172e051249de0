//! The CPU executor, DPDK lcore style: receive threads (one per (port, queue) where the port
//! splits its frames by queue, see `queue_rx`; else one per port that spreads frames over the
//! RX queues by software steering: RSS on the 5-tuple, as a NIC would), one run-to-completion worker
//! thread per queue runs the pipeline over whole bursts, and one TX thread per queue (`pw-tx{q}`;
//! one for all with `queues.tx_threads: one`) sends each queue's frames to their destinations. Bursts move between threads through lock-free SPSC rings and are recycled, so
//! the steady state allocates nothing. No frame is lost without a counted reason.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use super::tx::TxFate;
use crate::burst::Burst;
use crate::counters::QueueCounters;
use crate::meta::PacketMeta;
use crate::port::out::{Destinations, OutPorts, OutTally};
use crate::port::{PortError, RxPort, RxStatus, TxPort};
use crate::ring::OnFull;
use crate::ring::{self, Consumer, Producer};
use crate::stage::hooks::HookDriver;
use crate::stage::Pipeline;
use crate::steer::Steering;
use crate::threads::spawn_named;
use crate::verdict::{Action, DropReason, Verdict};
use crate::verify::sampler::{VerifyBoard, VerifyTap, VerifyWiring};

mod queue_rx;
pub use queue_rx::RxThreads;
pub(crate) use queue_rx::{pin, split_port};

/// A burst in flight with its per-frame results.
struct Slot {
    burst: Burst,
    verdicts: Vec<Verdict>,
    metas: Vec<PacketMeta>,
    /// When the ingest handed the burst over (burst latency = worker done - this).
    handed: Instant,
}

/// Sees every burst after the pipeline ran on it, on the worker thread: queue, frames, per-frame
/// metadata and verdicts, and the rule-set generation used. For tests, `verify`, and taps; it
/// runs on the data path, so it must be quick.
pub type BurstObserver = Arc<dyn Fn(usize, &Burst, &[PacketMeta], &[Verdict], u64) + Send + Sync>;

impl Slot {
    fn new(burst: usize) -> Box<Slot> {
        Box::new(Slot {
            burst: Burst::with_capacity(burst, burst * 2048),
            verdicts: Vec::with_capacity(burst),
            metas: Vec::with_capacity(burst),
            handed: Instant::now(),
        })
    }
}

/// How the executor runs.
pub struct CpuRunSpec {
    pub queues: usize,
    pub burst: usize,
    pub ring_slots: usize,
    pub on_full: OnFull,
    pub pipeline: Arc<Pipeline>,
    pub steering: Arc<Steering>,
    /// Optional per-burst observer (see [`BurstObserver`]).
    pub observer: Option<BurstObserver>,
    /// `verify.sample`: re-check one burst in this many on the reference (0: off; see
    /// `verify::sampler`).
    pub verify_sample: u64,
    /// Receive threads: per queue or per port, and their cores (`queues.rx_threads`,
    /// `queues.cores`).
    pub rx_threads: RxThreads,
}

/// Shared state a caller (the daemon's control thread) can watch while the executor runs.
pub struct CpuShared {
    pub counters: Vec<Arc<QueueCounters>>,
    /// Set to stop intake; in-flight bursts are drained.
    pub stop: AtomicBool,
    /// Frames received so far over all ports (for the progress bar).
    pub rx_total: AtomicU64,
    /// The receiving ports' own counters for the metrics (refreshed by the control thread).
    pub port_counters: Arc<crate::port::PortCounterBoard>,
    /// The watchdog's restart requests to the GPU queue threads (unused by the CPU executor).
    pub restarts: Arc<crate::executor::restart_board::RestartBoard>,
    /// What the sampling verifier did (`verify:`), for the metrics and the summary.
    pub verify: Arc<VerifyBoard>,
}

impl CpuShared {
    pub fn new(spec: &CpuRunSpec) -> Arc<Self> {
        let stages = spec.pipeline.stages.len();
        let rules = spec.pipeline.rule_count();
        Arc::new(CpuShared {
            counters: (0..spec.queues)
                .map(|_| Arc::new(QueueCounters::new(stages, rules)))
                .collect(),
            stop: AtomicBool::new(false),
            rx_total: AtomicU64::new(0),
            port_counters: Arc::default(),
            restarts: Arc::new(crate::executor::restart_board::RestartBoard::new(
                spec.queues,
            )),
            verify: VerifyBoard::new(spec.verify_sample),
        })
    }
}

/// What a run did.
#[derive(Debug, Default)]
pub struct RunOutcome {
    pub elapsed: Duration,
    /// The first port error, if any stopped a port early.
    pub errors: Vec<String>,
    /// Each receiving port's own counters at its end (name, (counter, value)); a DPDK port
    /// gives its ethdev stats and xstats here.
    pub port_counters: Vec<(String, Vec<(String, u64)>)>,
    /// What each destination took (output ports, mirror, slow path), see [`OutPorts`].
    pub out: Vec<OutTally>,
    /// Receive threads the run had (one per port, or one per (port, queue) for a port split by
    /// queue).
    pub receive_threads: usize,
}

#[derive(Clone, Copy, Default)]
struct IngestTally {
    rx_frames: u64,
    rx_bytes: u64,
    steering_drops: u64,
    ring_full: u64,
}

impl IngestTally {
    fn publish(&mut self, c: &QueueCounters) {
        if self.rx_frames > 0 {
            c.rx_frames.add_shared(self.rx_frames);
            c.rx_bytes.add_shared(self.rx_bytes);
            c.drops[DropReason::SteeringDrop as usize].add_shared(self.steering_drops);
            c.drops[DropReason::RingFull as usize].add_shared(self.ring_full);
        }
        *self = IngestTally::default();
    }
}

fn wait_on(backoff: &Backoff) {
    if backoff.is_completed() {
        // Long idle: give the core away (two cores may host ingest, workers and TX).
        std::thread::sleep(Duration::from_micros(20));
    } else {
        backoff.snooze();
    }
}

/// How often the hook thread looks for a newly published stage-parameter generation.
const HOOK_POLL: Duration = Duration::from_millis(2);

/// Runs the pipeline until every receiving port is exhausted (or `shared.stop` is set), then
/// drains the queues and flushes the output.
pub fn run(
    spec: &CpuRunSpec,
    shared: &Arc<CpuShared>,
    rx: Vec<Box<dyn RxPort>>,
    tx: Option<Box<dyn TxPort>>,
) -> RunOutcome {
    // One port for every forwarded frame (a `route`'s output port is not looked at).
    run_out(spec, shared, rx, OutPorts::single(tx))
}

/// [`run`] with every destination of the verdicts: each forwarded frame goes to its output
/// port (`Verdict::out_port`), mirror copies to the mirror port, `to_host` frames to the slow
/// path ([`OutPorts`]).
pub fn run_out(
    spec: &CpuRunSpec,
    shared: &Arc<CpuShared>,
    rx: Vec<Box<dyn RxPort>>,
    out: OutPorts,
) -> RunOutcome {
    let nq = spec.queues;
    let nports = rx.len();
    // Per (port, queue): ingest -> worker ring, and a return ring for empty slots.
    let mut to_worker: Vec<Vec<Producer<Box<Slot>>>> = (0..nports).map(|_| Vec::new()).collect();
    let mut worker_in: Vec<Vec<Consumer<Box<Slot>>>> = (0..nq).map(|_| Vec::new()).collect();
    let mut free_prod: Vec<Vec<Producer<Box<Slot>>>> = (0..nq).map(|_| Vec::new()).collect();
    let mut free_cons: Vec<Vec<Consumer<Box<Slot>>>> = (0..nports).map(|_| Vec::new()).collect();
    for p in 0..nports {
        for q in 0..nq {
            let (tp, tc) = ring::ring(spec.ring_slots);
            to_worker[p].push(tp);
            worker_in[q].push(tc);
            let (fp, fc) = ring::ring(spec.ring_slots);
            free_prod[q].push(fp);
            free_cons[p].push(fc);
        }
    }
    let has_tx = !out.is_empty();
    let TxRings {
        to_tx,
        tx_in,
        tx_ret_prod,
        tx_ret_cons,
    } = TxRings::new(has_tx, nq, nports, spec.ring_slots);
    // The TX threads and their senders (a port that cannot give one per queue fails the run
    // before anything starts).
    let start = Instant::now();
    let to_host = out.to_host.is_some();
    let lanes = match super::tx::lanes(out, tx_in, spec.rx_threads.tx_per_queue) {
        Ok(l) if has_tx => l,
        Ok(_) => Vec::new(),
        Err(e) => {
            return RunOutcome {
                elapsed: start.elapsed(),
                errors: vec![e],
                ..RunOutcome::default()
            }
        }
    };
    // The split steers a capture once, as its loading parsed it once: not the run's time.
    let feeds = queue_rx::plan(spec, rx);
    let receivers: usize = feeds.iter().map(queue_rx::Feed::threads).sum();
    let ingest_done: Vec<AtomicBool> = (0..receivers).map(|_| AtomicBool::new(false)).collect();
    let workers_done = AtomicU64::new(0);
    // The sampling verifier: one sample in flight at most, mismatching frames to the TX
    // thread's slow path through a bounded queue.
    let verify = VerifyWiring::new(spec.verify_sample, &spec.pipeline, &shared.verify, to_host);
    let verify_done = AtomicBool::new(verify.verifier.is_none());
    let errors = std::sync::Mutex::new(Vec::new());
    let port_counters = std::sync::Mutex::new(Vec::new());
    let tallies = std::sync::Mutex::new(Vec::new());
    let pipeline = &spec.pipeline;
    let mut hooks = HookDriver::start(pipeline, "cpu", pipeline.params_generation());
    let sinks = queue_rx::IngestSinks {
        spec,
        shared,
        done: &ingest_done,
        errors: &errors,
        port_counters: &port_counters,
    };

    std::thread::scope(|s| {
        // Receive threads.
        let rings: Vec<queue_rx::PortRings> = to_worker
            .into_iter()
            .zip(free_cons)
            .zip(tx_ret_cons)
            .map(|((p, f), t)| (p, f, t))
            .collect();
        queue_rx::spawn_ingest(s, &sinks, feeds, rings);
        // Workers.
        let mut to_tx_iter = to_tx.into_iter();
        for (q, (inputs, frees)) in worker_in.into_iter().zip(free_prod).enumerate() {
            let out = to_tx_iter.next();
            let counters = Arc::clone(&shared.counters[q]);
            let ingest_done = &ingest_done;
            let workers_done = &workers_done;
            let pipeline = Arc::clone(&spec.pipeline);
            let observer = spec.observer.clone();
            let tap = verify
                .taps
                .as_ref()
                .map(|t| VerifyTap::new(spec.verify_sample, Arc::clone(&shared.verify), t.clone()));
            spawn_named(s, format!("pw-q{q}"), move || {
                let mut ctx = WorkerCtx {
                    queue: q,
                    pipeline: &pipeline,
                    counters: &counters,
                    observer,
                    verify: tap,
                };
                worker(&mut ctx, inputs, frees, out, ingest_done);
                workers_done.fetch_add(1, Ordering::Release);
            });
        }
        spawn_hooks(s, &mut hooks, pipeline, &workers_done, nq);
        // The workers hold the only senders: the verifier ends after the last worker.
        drop(verify.taps);
        if let Some((v, rx)) = verify.verifier {
            let done = &verify_done;
            spawn_named(s, "pw-verify".to_string(), move || {
                v.run(rx);
                // Its captures are queued by now: the TX thread may finish once it took them.
                done.store(true, Ordering::Release);
            });
        }
        // TX threads; the verifier's captures go to the slow path through the first.
        let ends = (&workers_done, &verify_done, nq);
        let (t, e) = run_tx_lanes(s, shared, lanes, tx_ret_prod, verify.capture, ends);
        if let Ok(mut v) = errors.lock() {
            v.extend(e);
        }
        if let Ok(mut v) = tallies.lock() {
            *v = t;
        }
    });
    hooks.end(pipeline);
    let mut port_counters = port_counters.into_inner().unwrap_or_default();
    port_counters.sort();
    RunOutcome {
        elapsed: start.elapsed(),
        errors: errors.into_inner().unwrap_or_default(),
        port_counters,
        out: tallies.into_inner().unwrap_or_default(),
        receive_threads: receivers,
    }
}

/// Runs the TX threads (one per lane: `executor::tx::lanes`) until every worker and the
/// verifier are done (`ends`: workers done, verifier done, queues), then returns what each
/// destination took and the errors. Queue q's slots go back through `returns[q]`; the
/// verifier's captures go to the slow path through the first thread.
fn run_tx_lanes<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    shared: &Arc<CpuShared>,
    lanes: Vec<super::tx::TxLane<Finished>>,
    mut returns: Vec<Vec<Producer<Box<Slot>>>>,
    mut capture: Option<std::sync::mpsc::Receiver<Burst>>,
    (workers_done, verify_done, nq): (&'s AtomicU64, &'s AtomicBool, usize),
) -> (Vec<OutTally>, Vec<String>) {
    let mut joins = Vec::new();
    for lane in lanes {
        let shared = Arc::clone(shared);
        let ends = TxEnds {
            workers_done,
            nq,
            verify_done,
            capture: capture.take(),
        };
        // This thread's queues' return rings (indexed by queue; empty for the others).
        let mut mine: Vec<Vec<Producer<Box<Slot>>>> = (0..nq).map(|_| Vec::new()).collect();
        for (q, _) in &lane.inputs {
            mine[*q] = std::mem::take(&mut returns[*q]);
        }
        joins.push(spawn_named(s, lane.name, move || {
            let mut out = lane.out;
            tx_loop(&shared, &mut out, lane.inputs, mine, &ends)
        }));
    }
    let mut done = Vec::new();
    for j in joins {
        done.push(
            j.join()
                .unwrap_or_else(|_| (Vec::new(), vec!["a TX thread panicked".to_string()])),
        );
    }
    super::tx::merge(done)
}

/// The registered stages' host hooks on a thread of their own, beside the workers until the
/// last one ends (none when no stage has hooks).
fn spawn_hooks<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    hooks: &'s mut HookDriver,
    pipeline: &'s Pipeline,
    workers_done: &'s AtomicU64,
    nq: usize,
) {
    if hooks.is_empty() {
        return;
    }
    spawn_named(s, "pw-hooks".to_string(), move || {
        while workers_done.load(Ordering::Acquire) < nq as u64 {
            hooks.poll(pipeline, pipeline.params_generation());
            std::thread::sleep(hooks.sleep_for(HOOK_POLL));
        }
    });
}

/// Worker -> TX rings (TX returns the slot to the right ingest through the worker's free ring
/// pair, so the TX thread gets its own return rings); all empty without a TX thread.
struct TxRings {
    to_tx: Vec<Producer<(usize, Box<Slot>)>>,
    tx_in: Vec<Consumer<(usize, Box<Slot>)>>,
    /// Per queue, one per port; per port, one per queue.
    tx_ret_prod: Vec<Vec<Producer<Box<Slot>>>>,
    tx_ret_cons: Vec<Vec<Consumer<Box<Slot>>>>,
}

impl TxRings {
    fn new(has_tx: bool, nq: usize, nports: usize, slots: usize) -> TxRings {
        let mut r = TxRings {
            to_tx: Vec::new(),
            tx_in: Vec::new(),
            tx_ret_prod: (0..nq).map(|_| Vec::new()).collect(),
            tx_ret_cons: (0..nports).map(|_| Vec::new()).collect(),
        };
        if has_tx {
            for prods in r.tx_ret_prod.iter_mut() {
                let (p, c) = ring::ring::<(usize, Box<Slot>)>(slots);
                r.to_tx.push(p);
                r.tx_in.push(c);
                for cons in r.tx_ret_cons.iter_mut() {
                    let (rp, rc) = ring::ring(slots);
                    prods.push(rp);
                    cons.push(rc);
                }
            }
        }
        r
    }
}

/// Gets an empty slot back from the worker or TX return rings, or makes a new one while the
/// number of slots per queue is below the ring size.
fn take_slot(
    frees: &mut Consumer<Box<Slot>>,
    tx_frees: Option<&mut Consumer<Box<Slot>>>,
    made: &mut usize,
    limit: usize,
    burst: usize,
) -> Option<Box<Slot>> {
    if let Some(s) = frees.pop() {
        return Some(s);
    }
    if let Some(t) = tx_frees {
        if let Some(s) = t.pop() {
            return Some(s);
        }
    }
    if *made < limit {
        *made += 1;
        return Some(Slot::new(burst));
    }
    None
}

#[allow(clippy::too_many_arguments)]
fn ingest(
    spec: &CpuRunSpec,
    shared: &CpuShared,
    port_id: u16,
    port: &mut dyn RxPort,
    mut producers: Vec<Producer<Box<Slot>>>,
    mut frees: Vec<Consumer<Box<Slot>>>,
    mut tx_frees: Vec<Consumer<Box<Slot>>>,
) -> Result<(), PortError> {
    let nq = spec.queues;
    let burst = spec.burst.max(1);
    // Slots alive per queue stay below ring_slots so a slot can always be returned.
    let limit = spec.ring_slots.saturating_sub(1).max(1);
    let mut made = vec![0usize; nq];
    let mut current: Vec<Option<Box<Slot>>> = (0..nq).map(|_| None).collect();
    let mut rx = Burst::with_capacity(burst, burst * 2048);
    let mut meta = PacketMeta::default();
    // Room after each frame for the stages that grow it in place (vlan push); 0 for most lists.
    let room = spec.pipeline.frame_room();
    // Per-queue counts of one RX burst, published once per burst: with several receiving
    // ports, several ingest threads count into the same queue, so these adds are atomic.
    let mut tally = vec![IngestTally::default(); nq];
    let backoff = Backoff::new();
    let mut result = Ok(());
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        rx.clear();
        let status = match port.rx_burst(&mut rx, burst) {
            Ok(s) => s,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        match status {
            RxStatus::End => break,
            RxStatus::Idle => {
                // Push partial bursts so a slow source still sees low latency.
                flush_all(spec, shared, &mut current, &mut producers, &backoff);
                wait_on(&backoff);
                continue;
            }
            RxStatus::Frames(_) => backoff.reset(),
        }
        shared
            .rx_total
            .fetch_add(rx.len() as u64, Ordering::Relaxed);
        // Asked per burst: the port's rules can be replaced between bursts.
        let nic = port.steered_in_nic();
        for (desc, frame) in rx.frames() {
            let (q, verdict, mark) = if nic {
                crate::steer::nic_steered(desc, nq)
            } else {
                spec.steering.steer_marked(frame, &mut meta, nq)
            };
            let t = &mut tally[q];
            t.rx_frames += 1;
            t.rx_bytes += desc.len as u64;
            if verdict.is_some() {
                t.steering_drops += 1;
                continue;
            }
            if current[q].is_none() {
                current[q] = acquire(
                    spec,
                    q,
                    &mut frees[q],
                    tx_frees.get_mut(q),
                    &mut made[q],
                    limit,
                    burst,
                );
            }
            let Some(slot) = current[q].as_mut() else {
                // on_full = drop and no slot: the ring is full.
                tally[q].ring_full += 1;
                continue;
            };
            let mut d = *desc;
            d.port = port_id;
            d.queue = q as u16;
            // A software rule's mark, else the one the port delivered (a NIC's rte_flow MARK).
            if mark != 0 {
                d.mark = mark;
            }
            slot.burst.push_with_room(frame, d, room);
            if slot.burst.len() >= burst {
                flush_queue(
                    spec,
                    shared,
                    q,
                    &mut current[q],
                    &mut producers[q],
                    &backoff,
                );
            }
        }
        for (t, c) in tally.iter_mut().zip(&shared.counters) {
            t.publish(c);
        }
        flush_all(spec, shared, &mut current, &mut producers, &backoff);
    }
    flush_all(spec, shared, &mut current, &mut producers, &backoff);
    result
}

#[allow(clippy::too_many_arguments)]
fn acquire(
    spec: &CpuRunSpec,
    _q: usize,
    frees: &mut Consumer<Box<Slot>>,
    mut tx_frees: Option<&mut Consumer<Box<Slot>>>,
    made: &mut usize,
    limit: usize,
    burst: usize,
) -> Option<Box<Slot>> {
    let backoff = Backoff::new();
    loop {
        if let Some(mut s) = take_slot(frees, tx_frees.as_deref_mut(), made, limit, burst) {
            s.burst.clear();
            return Some(s);
        }
        if spec.on_full == OnFull::Drop {
            return None;
        }
        wait_on(&backoff);
    }
}

/// Hands every queue's current partial burst to its worker.
fn flush_all(
    spec: &CpuRunSpec,
    shared: &CpuShared,
    current: &mut [Option<Box<Slot>>],
    producers: &mut [Producer<Box<Slot>>],
    backoff: &Backoff,
) {
    for (q, (cur, prod)) in current.iter_mut().zip(producers.iter_mut()).enumerate() {
        flush_queue(spec, shared, q, cur, prod, backoff);
    }
}

/// Hands the queue's current partial burst to its worker.
fn flush_queue(
    spec: &CpuRunSpec,
    shared: &CpuShared,
    q: usize,
    current: &mut Option<Box<Slot>>,
    producer: &mut Producer<Box<Slot>>,
    backoff: &Backoff,
) {
    let Some(slot) = current.take() else { return };
    if slot.burst.is_empty() {
        *current = Some(slot);
        return;
    }
    let mut slot = slot;
    // One clock read per burst: the start of the burst-latency measurement.
    slot.handed = Instant::now();
    loop {
        match producer.push(slot) {
            Ok(()) => break,
            Err(back) => {
                if spec.on_full == OnFull::Drop {
                    let c = &shared.counters[q];
                    c.drops[DropReason::RingFull as usize].add_shared(back.burst.len() as u64);
                    let mut back = back;
                    back.burst.clear();
                    *current = Some(back);
                    return;
                }
                slot = back;
                wait_on(backoff);
            }
        }
    }
    shared.counters[q].ring_occupancy.set(producer.len() as u64);
}

struct WorkerCtx<'a> {
    queue: usize,
    pipeline: &'a Pipeline,
    counters: &'a QueueCounters,
    observer: Option<BurstObserver>,
    verify: Option<VerifyTap>,
}

fn worker(
    ctx: &mut WorkerCtx<'_>,
    mut inputs: Vec<Consumer<Box<Slot>>>,
    mut frees: Vec<Producer<Box<Slot>>>,
    out: Option<Producer<(usize, Box<Slot>)>>,
    ingest_done: &[AtomicBool],
) {
    let mut out = out;
    let backoff = Backoff::new();
    loop {
        let mut got = false;
        for (pi, input) in inputs.iter_mut().enumerate() {
            while let Some(mut slot) = input.pop() {
                got = true;
                let Slot {
                    burst,
                    verdicts,
                    metas,
                    handed,
                } = &mut *slot;
                // In place: rewrite stages change the frames the TX thread then sends.
                let (pipeline, c) = (ctx.pipeline, ctx.counters);
                let sampled = ctx
                    .verify
                    .as_mut()
                    .and_then(|t| t.begin(pipeline, burst, c));
                let generation = match &sampled {
                    // A sampled burst runs with the tables the verifier will use.
                    Some(p) => pipeline.run_burst_mut_with(burst, metas, verdicts, c, p.tables()),
                    None => pipeline.run_burst_mut(burst, metas, verdicts, c),
                };
                if let (Some(p), Some(t)) = (sampled, ctx.verify.as_ref()) {
                    t.finish(p, ctx.queue, pipeline, burst, metas, verdicts, c);
                }
                ctx.counters
                    .burst_latency
                    .observe_ns(handed.elapsed().as_nanos() as u64);
                if let Some(obs) = &ctx.observer {
                    obs(ctx.queue, burst, metas, verdicts, generation);
                }
                match out.as_mut() {
                    Some(o) => {
                        let mut item = (pi, slot);
                        while let Err(back) = o.push(item) {
                            item = back;
                            wait_on(&backoff);
                        }
                    }
                    None => {
                        // No output port: passed frames are counted and released here.
                        let mut s = slot;
                        while let Err(back) = frees[pi].push(s) {
                            s = back;
                            wait_on(&backoff);
                        }
                    }
                }
            }
        }
        if got {
            backoff.reset();
            continue;
        }
        let all_done = ingest_done.iter().all(|d| d.load(Ordering::Acquire));
        if all_done && inputs.iter().all(|i| i.is_empty()) {
            break;
        }
        wait_on(&backoff);
    }
}

/// A worker's finished burst: (the receiving port whose ingest owns its slot, the slot).
type Finished = (usize, Box<Slot>);

/// A worker's finished burst, with the receiving port whose ingest owns its slot.
impl super::tx::TxBurst for (usize, Box<Slot>) {
    fn entries(&self) -> impl Iterator<Item = (TxFate, u16, crate::port::WireFrame<'_>)> {
        let s = &self.1;
        s.burst.frames().zip(&s.verdicts).map(|((d, f), v)| {
            let fate = match v.action {
                Action::Pass => TxFate::Forward,
                Action::Mirror => TxFate::Mirror,
                Action::ToHost => TxFate::ToHost,
                Action::Drop => TxFate::Drop,
            };
            (fate, v.out_port, (f, v.send_ns, d.wire_len))
        })
    }
}

/// When the TX thread may finish: every worker and the verifier done, and the verifier's
/// captured frames (for the slow path) taken.
struct TxEnds<'a> {
    workers_done: &'a AtomicU64,
    nq: usize,
    verify_done: &'a AtomicBool,
    capture: Option<std::sync::mpsc::Receiver<Burst>>,
}

/// The verifier's captured frames to the slow path; whether there were any.
fn take_captures(ends: &TxEnds<'_>, dest: &mut Destinations<'_>) -> bool {
    ends.capture
        .as_ref()
        .is_some_and(|cap| crate::executor::tx::send_captures(cap, dest))
}

/// The TX thread (the host runtime's, [`super::tx`]): each burst's frames to their
/// destinations in the order the queue's worker finished them, then the slot back to its
/// ingest.
fn tx_loop(
    shared: &CpuShared,
    out: &mut OutPorts,
    mut inputs: Vec<(usize, Consumer<Finished>)>,
    mut returns: Vec<Vec<Producer<Box<Slot>>>>,
    ends: &TxEnds<'_>,
) -> (Vec<OutTally>, Vec<String>) {
    let release = |q: usize, (port_idx, slot): (usize, Box<Slot>)| {
        let backoff = Backoff::new();
        let mut s = slot;
        while let Err(back) = returns[q][port_idx].push(s) {
            s = back;
            wait_on(&backoff);
        }
    };
    // The verifier's flag after the workers': it finishes after them, and its last captures
    // are queued before it sets it (taken on the next turn, and once more at the end).
    let done = || {
        ends.workers_done.load(Ordering::Acquire) as usize == ends.nq
            && ends.verify_done.load(Ordering::Acquire)
    };
    let captures = |dest: &mut Destinations<'_>| take_captures(ends, dest);
    super::tx::run(
        &shared.counters,
        out,
        &mut inputs,
        done,
        release,
        captures,
        wait_on,
    )
}

/// Zero-copy forwarding between DPDK ports (cpu/zero_copy.rs).
#[cfg(feature = "dpdk")]
pub mod zero_copy;
