//! The arrangement of the GPU host side, the CPU executor's own: one ingest thread per
//! receiving port, one thread per queue (submit, poll, count), one TX thread, joined by bounded
//! SPSC rings (ingest -> queue per port and queue, queue -> TX per queue) and a channel per
//! ingest thread for empty slots. This thread publishes reloaded ACL tables meanwhile.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use super::device::QueueDevice;
use super::ingest::{self, IngestCtx};
use super::queue::{self, QueueCtx, QueueIo};
use super::reap::Reaper;
use super::reload::LiveStageCounters;
use super::verify::HostVerify;
use super::{gpu_ingest, tx, Slot};
use crate::config::OnFull;
use crate::daemon::summary::GpuIngest;
use crate::executor::cpu::CpuShared;
use crate::port::out::{OutPorts, OutTally};
use crate::port::{PortError, RxPort};
use crate::ring::{self, Consumer, Producer};
use crate::stage::hooks::HookDriver;
use crate::stage::Pipeline;
use crate::steer::Steering;
use crate::threads::spawn_named;

/// How often this thread looks for a reload while the queues run.
const RELOAD_CHECK: Duration = Duration::from_micros(500);

/// Bursts a hand-off ring (ingest -> queue, queue -> TX) holds at most. The queue's ring is the
/// GPU ring (`queues.ring_slots`, where `on_full` applies); the hand-offs only absorb a thread's
/// short pauses (a 20 us idle sleep is a few bursts at line rate), so they stay small: less
/// memory and less latency behind a slow queue.
const HANDOFF_MAX: usize = 32;

/// What the host side runs.
pub(crate) struct HostSpec<'a> {
    pub queues: usize,
    /// Frames an RX call asks for (`queues.burst`).
    pub burst: usize,
    /// Frames a GPU slot holds: RX bursts are gathered into slots this large.
    pub slot_frames: usize,
    /// Bursts the GPU ring of each queue holds (the hand-off rings hold at most
    /// [`HANDOFF_MAX`]).
    pub ring_slots: usize,
    pub on_full: OnFull,
    pub pipeline: &'a Pipeline,
    pub steering: &'a Steering,
    /// The device runs an acl stage, with the tables of this generation at start.
    pub acl_on: bool,
    pub acl_generation: u64,
    /// The device runs the composed template (stage parameter blocks and counter blocks),
    /// with the stage parameters of this generation at start.
    pub composed: bool,
    pub params_generation: u64,
    /// `verify.sample` (0: off) and the pipeline its verifier re-runs bursts on.
    pub verify: (u64, std::sync::Arc<Pipeline>),
}

/// What the host side did: a failure that stopped the run, the ports' errors and what each
/// destination took.
pub(crate) struct HostOutcome {
    pub result: anyhow::Result<()>,
    pub errors: Vec<String>,
    pub outputs: Vec<OutTally>,
    /// How each port whose frames are in GPU memory was received.
    pub gpu_ingest: Vec<GpuIngest>,
}

/// Sets a flag (or counts) when its thread ends, by return or by panic, so no other thread
/// waits for it forever; a panic also marks the run failed.
struct OnExit<'a> {
    done: Option<&'a AtomicBool>,
    count: Option<&'a AtomicUsize>,
    failed: &'a AtomicBool,
}

impl Drop for OnExit<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.failed.store(true, Ordering::Relaxed);
        }
        if let Some(d) = self.done {
            d.store(true, Ordering::Release);
        }
        if let Some(c) = self.count {
            c.fetch_add(1, Ordering::Release);
        }
    }
}

/// The rings between the threads, before they are handed out.
struct Rings {
    /// [port][queue]
    to_queue: Vec<Vec<Producer<Slot>>>,
    /// [queue][port]
    queue_in: Vec<Vec<Consumer<Slot>>>,
    /// [queue], empty without an output port.
    to_tx: Vec<Producer<Slot>>,
    tx_in: Vec<Consumer<Slot>>,
    free_tx: Vec<mpsc::Sender<Slot>>,
    free_rx: Vec<mpsc::Receiver<Slot>>,
}

impl Rings {
    fn new(ports: usize, queues: usize, slots: usize, with_tx: bool) -> Rings {
        let mut r = Rings {
            to_queue: (0..ports).map(|_| Vec::new()).collect(),
            queue_in: (0..queues).map(|_| Vec::new()).collect(),
            to_tx: Vec::new(),
            tx_in: Vec::new(),
            free_tx: Vec::new(),
            free_rx: Vec::new(),
        };
        for p in 0..ports {
            for q in 0..queues {
                let (tp, tc) = ring::ring(slots);
                r.to_queue[p].push(tp);
                r.queue_in[q].push(tc);
            }
            let (ft, fr) = mpsc::channel();
            r.free_tx.push(ft);
            r.free_rx.push(fr);
        }
        if with_tx {
            for _ in 0..queues {
                let (tp, tc) = ring::ring(slots);
                r.to_tx.push(tp);
                r.tx_in.push(tc);
            }
        }
        r
    }
}

/// Runs the host side over `dev` until every port is exhausted (or `shared.stop`), then
/// drains the queues; the counters land in `shared`, as the CPU executor's do.
pub(crate) fn run(
    dev: &dyn QueueDevice,
    spec: &HostSpec<'_>,
    shared: &CpuShared,
    rx: &mut [Box<dyn RxPort>],
    out: &mut OutPorts,
) -> HostOutcome {
    let nq = spec.queues;
    let handoff = spec.ring_slots.clamp(2, HANDOFF_MAX);
    let with_tx = !out.is_empty();
    let holds = tx_from_slot(dev, with_tx);
    let rings = Rings::new(rx.len(), nq, handoff, with_tx);
    let outputs = Mutex::new(Vec::<OutTally>::new());
    let failed = AtomicBool::new(false);
    let ingest_done: Vec<AtomicBool> = rx.iter().map(|_| AtomicBool::new(false)).collect();
    let queues_done = AtomicUsize::new(0);
    let errors = Mutex::new(Vec::<String>::new());
    let fatal = Mutex::new(None::<anyhow::Error>);
    let fail = |e: anyhow::Error| {
        failed.store(true, Ordering::Relaxed);
        let mut f = fatal.lock().unwrap_or_else(|p| p.into_inner());
        f.get_or_insert(e);
    };
    let ictx = IngestCtx {
        shared,
        steering: spec.steering,
        queues: nq,
        burst: spec.burst.max(1),
        slot_frames: spec.slot_frames.max(spec.burst).max(1),
        slot_cap: dev.slot_data_capacity(),
        room: spec.pipeline.frame_room(),
        on_full: spec.on_full,
        failed: &failed,
    };
    let (in_place, gpu_ingest) = ingest_paths(dev, spec, rx, with_tx);
    let reaper = Reaper::new(spec.pipeline, spec.acl_on);
    let mut verify = HostVerify::new(spec, &shared.verify, out.to_host.is_some());
    let (mut publisher, mut params) = verify.publishers(spec);
    let mut live = LiveStageCounters::new(spec.composed);
    let mut hooks = HookDriver::start(spec.pipeline, "gpu", params.generation());
    let Rings {
        to_queue,
        queue_in,
        to_tx,
        tx_in,
        free_tx,
        free_rx,
    } = rings;
    std::thread::scope(|s| {
        let mut threads = Vec::new();
        for (pi, ((port, out), free)) in rx.iter_mut().zip(to_queue).zip(free_rx).enumerate() {
            let (ictx, errors, done, failed) = (&ictx, &errors, &ingest_done[pi], &failed);
            let in_place = in_place[pi];
            threads.push(spawn_named(s, format!("pw-in{pi}"), move || {
                let _exit = OnExit {
                    done: Some(done),
                    count: None,
                    failed,
                };
                if let Err(e) = ingest_port(ictx, pi, port.as_mut(), in_place, out, free) {
                    let mut v = errors.lock().unwrap_or_else(|p| p.into_inner());
                    v.push(format!("{}: {e}", port.name()));
                }
            }));
        }
        let mut to_tx = to_tx.into_iter();
        for (q, inputs) in queue_in.into_iter().enumerate() {
            let io = QueueIo {
                inputs,
                to_tx: to_tx.next(),
                frees: free_tx.clone(),
                verify: verify.tap(q),
            };
            let qctx = QueueCtx {
                q,
                dev,
                counters: &shared.counters[q],
                reaper,
                on_full: spec.on_full,
                ingest_done: &ingest_done,
                failed: &failed,
                restarts: &shared.restarts,
                rewrites: spec.pipeline.rewrites(),
                holds,
            };
            let (fail, queues_done, failed) = (&fail, &queues_done, &failed);
            threads.push(spawn_named(s, format!("pw-q{q}"), move || {
                let _exit = OnExit {
                    done: None,
                    count: Some(queues_done),
                    failed,
                };
                if let Err(e) = queue::run(&qctx, io) {
                    fail(e);
                }
            }));
        }
        let captures = verify.start(s);
        if with_tx {
            let (frees, queues_done, errors, failed, outputs) =
                (free_tx.clone(), &queues_done, &errors, &failed, &outputs);
            threads.push(spawn_named(s, "pw-tx".to_string(), move || {
                let _exit = OnExit {
                    done: None,
                    count: None,
                    failed,
                };
                let (t, e) = tx::run(shared, out, tx_in, frees, (queues_done, captures), dev);
                errors.lock().unwrap_or_else(|p| p.into_inner()).extend(e);
                *outputs.lock().unwrap_or_else(|p| p.into_inner()) = t;
            }));
        }
        drop(free_tx);
        // Reloads reach the GPU from here while the queues run (the data path never waits
        // for the control thread, nor for this one).
        while queues_done.load(Ordering::Acquire) < nq {
            if !failed.load(Ordering::Relaxed) {
                let r = publisher
                    .check(spec.pipeline, dev)
                    .and_then(|()| params.check(spec.pipeline, dev))
                    .and_then(|()| live.check(spec.pipeline, dev, &shared.counters, false));
                if let Err(e) = r {
                    fail(e);
                }
                // After the publish: a stage hears of a generation once the GPU has it.
                hooks.poll(spec.pipeline, params.generation());
            }
            std::thread::sleep(RELOAD_CHECK);
        }
        // Joined here, not by the scope, so a panic is this run's error, not this thread's.
        for t in threads {
            if t.join().is_err() {
                fail(anyhow::anyhow!("a GPU host thread panicked"));
            }
        }
        // Every burst is reaped: the stage counters are final.
        if let Err(e) = live.check(spec.pipeline, dev, &shared.counters, true) {
            fail(e);
        }
    });
    hooks.end(spec.pipeline);
    HostOutcome {
        result: first_error(fatal),
        errors: errors.into_inner().unwrap_or_else(|p| p.into_inner()),
        outputs: outputs.into_inner().unwrap_or_else(|p| p.into_inner()),
        gpu_ingest,
    }
}

/// The error that stopped the run, if one did.
fn first_error(fatal: Mutex<Option<anyhow::Error>>) -> anyhow::Result<()> {
    let e = fatal.into_inner().unwrap_or_else(|p| p.into_inner());
    e.map_or(Ok(()), Err)
}

/// Whether frames are sent from the GPU slot they ran in: where the device can hold it for the
/// TX thread (asked before the first submit). Logged when the run transmits.
fn tx_from_slot(dev: &dyn QueueDevice, with_tx: bool) -> bool {
    let holds = with_tx && dev.hold_slots();
    if with_tx {
        tracing::info!(
            event = "tx_from_slot",
            held = holds,
            "GPU executor: {}",
            if holds {
                "frames sent from the GPU slots they ran in, each slot held until its frames are sent"
            } else {
                "frames copied out of the GPU slots before they are sent"
            }
        );
    }
    holds
}

/// Runs port `pi`'s ingest thread: frames in GPU memory received in place, or the usual way.
fn ingest_port(
    ictx: &IngestCtx<'_>,
    pi: usize,
    port: &mut dyn RxPort,
    in_place: bool,
    out: Vec<Producer<Slot>>,
    free: mpsc::Receiver<Slot>,
) -> Result<(), PortError> {
    if !in_place {
        return ingest::run(ictx, pi, port, out, free);
    }
    match port.gpu_rx() {
        Some(g) => ingest::run_gpu_frames(ictx, pi, g, out, free),
        None => Err(PortError::Config(
            "the port no longer hands over frames in GPU memory".into(),
        )),
    }
}

/// Which ports are received in place (frames in GPU memory gathered on the GPU), and the
/// decision for every port whose frames are in GPU memory (logged; see `gpu_ingest`).
fn ingest_paths(
    dev: &dyn QueueDevice,
    spec: &HostSpec<'_>,
    rx: &mut [Box<dyn RxPort>],
    transmits: bool,
) -> (Vec<bool>, Vec<GpuIngest>) {
    let mut decided = Vec::new();
    let in_place = rx
        .iter_mut()
        .map(|port| {
            let name = port.name().to_string();
            let nic = port.steered_in_nic();
            let Some(g) = port.gpu_rx() else {
                gpu_ingest::log_host_port(&name);
                return false;
            };
            let facts = gpu_ingest::Facts {
                transmits,
                software_steering: spec.steering.has_rules() && !nic,
                rings: dev.gpu_frames_refusal(g.gpu()),
            };
            let d = gpu_ingest::decide(&name, &facts);
            gpu_ingest::log(&d);
            let yes = d.path == gpu_ingest::IN_PLACE;
            decided.push(d);
            yes
        })
        .collect();
    (in_place, decided)
}
