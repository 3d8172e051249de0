//! The arrangement of the GPU host side, the CPU executor's own: receive threads (one per
//! (port, queue) where the port splits by queue, else one per port; `queues.rx_threads`), one
//! thread per queue (submit, poll, count), one TX thread per queue (`pw-tx{q}`; one for all
//! with `queues.tx_threads: one`), joined by bounded SPSC rings
//! (receive thread -> each queue it feeds, queue -> TX per queue) and a channel per receive
//! thread for empty slots. This thread publishes reloaded ACL tables meanwhile.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::device::QueueDevice;
use super::flow_export;
use super::ingest::{self, IngestCtx};
use super::queue::{self, QueueCtx, QueueIo};
use super::reap::Reaper;
use super::reload::LiveStageCounters;
use super::verify::HostVerify;
use super::{gpu_ingest, tx, FrameStore, GpuHold, Slot};
use crate::config::OnFull;
use crate::daemon::summary::GpuIngest;
use crate::executor::cpu::CpuShared;
use crate::executor::cpu::RxThreads;
use crate::port::out::{OutPorts, OutTally};
use crate::port::{PortError, QueueRx, RxPort};
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
    pub steering: &'a std::sync::Arc<Steering>,
    /// Receive threads per queue or per port, and their cores.
    pub rx_threads: RxThreads,
    /// The device runs an acl stage, with the tables of this generation at start.
    pub acl_on: bool,
    pub acl_generation: u64,
    /// The device runs the composed template (stage parameter blocks and counter blocks),
    /// with the stage parameters of this generation at start.
    pub composed: bool,
    pub params_generation: u64,
    /// `verify.sample` (0: off) and the pipeline its verifier re-runs bursts on.
    pub verify: (u64, std::sync::Arc<Pipeline>),
    /// `executor.gpu.by_reference`: loaded frames may go by reference.
    pub by_reference: bool,
    /// The stages' host sides that pace the input: a burst waits until their polls covered
    /// what ran before it ([`crate::stage::gpu_host::PollGate`]).
    pub gate: Option<std::sync::Arc<crate::stage::gpu_host::PollGate>>,
    /// DPDK in and out: the received mbufs are sent themselves (`mbufs`), where the input
    /// port splits by RX queue.
    #[cfg(feature = "dpdk")]
    pub mbufs: Option<super::mbufs::MbufPlan>,
    /// The input ports whose RX pool is pinned host memory mapped for the GPU, by input index
    /// (`gpu_buffers: pinned`): received by reference where they can ([`pinned_feeds`]).
    #[cfg(feature = "dpdk")]
    pub pinned: Vec<Option<crate::port::dpdk::DpdkPort>>,
}

/// What the host side did: a failure that stopped the run, the ports' errors and what each
/// destination took.
pub(crate) struct HostOutcome {
    pub result: anyhow::Result<()>,
    pub errors: Vec<String>,
    pub outputs: Vec<OutTally>,
    /// How each port whose frames are in GPU memory was received.
    pub gpu_ingest: Vec<GpuIngest>,
    /// Where the TX threads read the frames they sent (none without a destination).
    pub tx: Option<crate::daemon::summary::GpuTx>,
    /// Receive threads started (one per port, or one per queue of a port split by queue).
    pub receive_threads: usize,
    /// The ports' loaded frames in host memory the device reads (by reference), for the
    /// caller to drop once the device's kernels have stopped ([`super::device::HostFrames`]:
    /// a free under a running persistent kernel waits for it to end). The run's threads only
    /// ever held clones of these.
    pub pinned: Vec<GpuHold>,
}

impl HostOutcome {
    /// A run stopped before it started.
    fn failed(e: anyhow::Error) -> Self {
        HostOutcome {
            result: Err(e),
            errors: Vec::new(),
            outputs: Vec::new(),
            gpu_ingest: Vec::new(),
            tx: None,
            receive_threads: 0,
            pinned: Vec::new(),
        }
    }
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
    /// [feeder][i]: to each queue the receive thread feeds (every queue, in order, for a
    /// port's thread; its one queue for a queue's).
    to_queue: Vec<Vec<Producer<Slot>>>,
    /// [queue][j]: from each receive thread that feeds it.
    queue_in: Vec<Vec<Consumer<Slot>>>,
    /// [queue], empty without an output port.
    to_tx: Vec<Producer<Slot>>,
    tx_in: Vec<Consumer<Slot>>,
    /// [feeder]: empty slots back to their receive thread.
    free_tx: Vec<mpsc::Sender<Slot>>,
    free_rx: Vec<mpsc::Receiver<Slot>>,
}

impl Rings {
    /// One ring from each receive thread to each queue it feeds.
    fn new(feeds: &[Feed<'_>], queues: usize, slots: usize, with_tx: bool) -> Rings {
        let mut r = Rings {
            to_queue: feeds.iter().map(|_| Vec::new()).collect(),
            queue_in: (0..queues).map(|_| Vec::new()).collect(),
            to_tx: Vec::new(),
            tx_in: Vec::new(),
            free_tx: Vec::new(),
            free_rx: Vec::new(),
        };
        for (f, feed) in feeds.iter().enumerate() {
            for &q in &feed.queues {
                let (tp, tc) = ring::ring(slots);
                r.to_queue[f].push(tp);
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

/// One receive thread's source: a whole port (it steers; received in place or not), one
/// queue of a port split by queue, or such a queue whose frames go by reference into host
/// memory the GPU reads (the port's store).
enum Source<'p> {
    Port(&'p mut dyn RxPort, bool),
    Queue(Box<dyn QueueRx>),
    Refs(Box<dyn QueueRx>, Arc<FrameStore>),
    /// One RX queue of a DPDK port whose mbufs are kept for TX (`mbufs`), and its queue.
    #[cfg(feature = "dpdk")]
    Mbufs(crate::port::dpdk::DpdkRx, usize),
    /// A DPDK port's RX pool in pinned host memory, by reference: one RX queue's handle and
    /// its queue, or every RX queue's (`None`, the thread steers); whether its mbufs are sent
    /// themselves (`mbufs`).
    #[cfg(feature = "dpdk")]
    Pinned(crate::port::dpdk::DpdkRx, Option<usize>, bool),
}

/// A receive thread: its port, its source, the queues it feeds.
struct Feed<'p> {
    port: usize,
    src: Source<'p>,
    queues: Vec<usize>,
}

impl Feed<'_> {
    /// Whether it keeps the mbufs it receives for the TX threads to send (`mbufs`).
    fn keeps_mbufs(&self) -> bool {
        #[cfg(feature = "dpdk")]
        return matches!(self.src, Source::Mbufs(..) | Source::Pinned(_, _, true));
        #[cfg(not(feature = "dpdk"))]
        false
    }

    /// The thread's name (`pw-in<port>`, `pw-in<port>q<queue>`) and its index into
    /// `queues.cores` (the port's, or the queue's).
    fn thread_name(&self) -> (String, usize) {
        match &self.src {
            Source::Port(..) => (format!("pw-in{}", self.port), self.port),
            Source::Queue(q) | Source::Refs(q, ..) => {
                (format!("pw-in{}q{}", self.port, q.queue()), self.queues[0])
            }
            #[cfg(feature = "dpdk")]
            Source::Mbufs(_, q) | Source::Pinned(_, Some(q), _) => {
                (format!("pw-in{}q{q}", self.port), *q)
            }
            #[cfg(feature = "dpdk")]
            Source::Pinned(_, None, _) => (format!("pw-in{}", self.port), self.port),
        }
    }
}

/// The receive threads of `rx`: one per queue of each port that splits by queue (not one
/// received in place), else one per port. A split port whose frames can go by reference is
/// copied once into host memory the GPU reads (its hold also returned, for
/// [`HostOutcome::pinned`]); each host-memory port's path is decided (logged,
/// `event=gpu_ingest`) into `decided`.
fn feeds<'p>(
    dev: &dyn QueueDevice,
    spec: &HostSpec<'_>,
    rx: &'p mut [Box<dyn RxPort>],
    in_place: &[bool],
    decided: &mut Vec<GpuIngest>,
) -> (Vec<Feed<'p>>, Vec<GpuHold>) {
    let nq = spec.queues;
    let mut out = Vec::new();
    let mut pinned = Vec::new();
    // Pinned ports that are staged: their decision (why not by reference) is the one kept.
    #[cfg_attr(not(feature = "dpdk"), allow(unused_mut))]
    let mut pinned_staged: Vec<String> = Vec::new();
    for (pi, port) in rx.iter_mut().enumerate() {
        if in_place[pi] {
            out.push(Feed {
                port: pi,
                src: Source::Port(port.as_mut(), true),
                queues: (0..nq).collect(),
            });
            continue;
        }
        let gpu_port = port.gpu_rx().is_some();
        let name = port.name().to_string();
        let split =
            crate::executor::cpu::split_port(&spec.rx_threads, spec.steering, nq, port.as_mut());
        #[cfg(feature = "dpdk")]
        match pinned_feeds(dev, spec, pi, &split, decided, &name) {
            Pinned::ByReference(f) => {
                out.extend(f);
                continue;
            }
            Pinned::Staged => pinned_staged.push(name.clone()),
            Pinned::No => {}
        }
        let qs = match split {
            Ok(qs) => qs,
            Err(why) => {
                if !gpu_port {
                    decided.push(gpu_ingest::host_port(&name, false, Err(&why), None));
                }
                out.push(Feed {
                    port: pi,
                    src: Source::Port(port.as_mut(), false),
                    queues: (0..nq).collect(),
                });
                continue;
            }
        };
        #[cfg(feature = "dpdk")]
        if let Some(m) = mbuf_feeds(spec, pi, &qs, decided, &name) {
            out.extend(m);
            continue;
        }
        let refs = by_reference(dev, spec, &qs);
        if let Ok((store, _)) = &refs {
            pinned.push(Arc::clone(&store.hold));
        }
        if !gpu_port {
            let note = qs.first().and_then(|q| q.store_note());
            let how = match &refs {
                Ok((_, read)) => Ok(*read),
                Err(why) => Err(why.as_str()),
            };
            decided.push(gpu_ingest::host_port(&name, true, how, note));
        }
        out.extend(qs.into_iter().map(|q| Feed {
            port: pi,
            queues: vec![usize::from(q.queue()).min(nq - 1)],
            src: match &refs {
                Ok((store, _)) => Source::Refs(q, Arc::clone(store)),
                Err(_) => Source::Queue(q),
            },
        }));
    }
    let mut seen = Vec::new();
    decided.retain(|g| {
        let first = !seen.contains(&g.port);
        seen.push(g.port.clone());
        first || !pinned_staged.contains(&g.port)
    });
    (out, pinned)
}

/// A pinned port's receive threads ([`pinned_feeds`]).
#[cfg(feature = "dpdk")]
enum Pinned<'p> {
    /// Not a pinned port.
    No,
    /// Staged: the usual receive threads copy its frames (its decision is made).
    Staged,
    ByReference(Vec<Feed<'p>>),
}

/// The receive threads of port `pi` when its RX pool is pinned host memory mapped for the GPU
/// (`spec.pinned`), by reference: one per RX queue where the port splits (`split`), else one
/// that steers. Its decision (`gpu_ingest::decide_pinned`, logged) goes into `decided`.
#[cfg(feature = "dpdk")]
fn pinned_feeds<'p>(
    dev: &dyn QueueDevice,
    spec: &HostSpec<'_>,
    pi: usize,
    split: &Result<Vec<Box<dyn QueueRx>>, String>,
    decided: &mut Vec<GpuIngest>,
    name: &str,
) -> Pinned<'p> {
    let Some(Some(port)) = spec.pinned.get(pi) else {
        return Pinned::No;
    };
    let by_mbuf = spec.mbufs.is_some();
    let mut facts = gpu_ingest::PinnedFacts {
        verify: spec.verify.0 > 0,
        // The pool is GPU 0's (`gpu::cuda_pinned`).
        rings: dev.pinned_frames(0),
        one_thread: split.as_ref().err().cloned(),
        sends_mbufs: by_mbuf,
    };
    let mut feeds = Err(String::new());
    if gpu_ingest::decide_pinned(name, &facts).path == gpu_ingest::BY_REFERENCE {
        let nq = spec.queues;
        feeds = match split {
            Ok(qs) => qs
                .iter()
                .map(|q| {
                    let queue = usize::from(q.queue()).min(nq - 1);
                    port.rx(&[q.queue()]).map(|rx| Feed {
                        port: pi,
                        queues: vec![queue],
                        src: Source::Pinned(rx, Some(queue), by_mbuf),
                    })
                })
                .collect::<Result<Vec<_>, _>>(),
            Err(_) => {
                let all: Vec<u16> = (0..port.setup().rx_queues).collect();
                port.rx(&all).map(|rx| {
                    vec![Feed {
                        port: pi,
                        queues: (0..nq).collect(),
                        src: Source::Pinned(rx, None, by_mbuf),
                    }]
                })
            }
        }
        .map_err(|e| format!("no receive handle: {e}"));
        if let Err(why) = &feeds {
            facts.rings = Err(why.clone());
        }
    }
    let d = gpu_ingest::decide_pinned(name, &facts);
    gpu_ingest::log(&d);
    decided.push(d);
    match feeds {
        Ok(f) => Pinned::ByReference(f),
        Err(_) => Pinned::Staged,
    }
}

/// The receive threads of port `pi` when its mbufs are kept for TX (`spec.mbufs` has it, and
/// the port splits by queue: `qs` are its copying queue handles, replaced here by a DPDK RX handle
/// on each queue); its ingest decision goes into `decided`.
#[cfg(feature = "dpdk")]
fn mbuf_feeds<'p>(
    spec: &HostSpec<'_>,
    pi: usize,
    qs: &[Box<dyn QueueRx>],
    decided: &mut Vec<GpuIngest>,
    name: &str,
) -> Option<Vec<Feed<'p>>> {
    let port = spec.mbufs.as_ref()?.rx.get(pi)?;
    let mut out = Vec::new();
    for q in qs {
        let queue = usize::from(q.queue()).min(spec.queues - 1);
        match port.rx(&[q.queue()]) {
            Ok(rx) => out.push(Feed {
                port: pi,
                queues: vec![queue],
                src: Source::Mbufs(rx, queue),
            }),
            Err(e) => {
                tracing::warn!("{name}: the mbufs are not kept for TX: {e}");
                return None;
            }
        }
    }
    let why = "its mbufs are kept with the slot until the TX thread sends them (DPDK in and out)";
    decided.push(gpu_ingest::host_port(name, true, Err(why), None));
    Some(out)
}

/// A split port's loaded frames in host memory the GPU reads (copied there once) and how the
/// GPU gets them; `Err(why)` when its queues copy their frames. A transmitting config sends
/// the frames no stage changed from this store (`Slot::as_received`).
fn by_reference(
    dev: &dyn QueueDevice,
    spec: &HostSpec<'_>,
    qs: &[Box<dyn QueueRx>],
) -> Result<(Arc<FrameStore>, &'static str), String> {
    // The port's own reason first: whether it has loaded frames at all.
    let store = qs.first().ok_or("the port has no queue")?.frame_store()?;
    if !spec.by_reference {
        return Err("executor.gpu.by_reference is false".into());
    }
    if spec.verify.0 > 0 {
        return Err("verify.sample re-runs sampled bursts on the CPU from their host bytes".into());
    }
    let h = dev.host_frames(&store)?;
    let (base, host, len, read) = (h.base, h.host, h.len, h.read);
    let hold: GpuHold = Arc::new(Mutex::new(h.keep));
    // SAFETY: host_frames' result: `host..+len` are the bytes the device reads at `base`,
    // allocated by `keep` (now owned by `hold`) and never written again.
    let store = unsafe { FrameStore::new(base, host, len, hold) };
    Ok((Arc::new(store), read))
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
    let (with_tx, slow_path) = (!out.is_empty(), out.to_host.is_some());
    // Each TX thread's senders first: a port that cannot give one per queue stops the run.
    let per_queue_tx = spec.rx_threads.tx_per_queue;
    let outs = match tx::split_out(std::mem::take(out), nq, per_queue_tx) {
        Ok(o) => o,
        Err(e) => return HostOutcome::failed(anyhow::anyhow!(e)),
    };
    let (in_place, mut gpu_ingest) = ingest_paths(dev, spec, rx, with_tx);
    let (feeds, pinned) = feeds(dev, spec, rx, &in_place, &mut gpu_ingest);
    let (tx_plan, tx_report, by_mbuf) = plan_tx(dev, spec, with_tx, &feeds, &gpu_ingest);
    let rings = Rings::new(&feeds, nq, spec.ring_slots.clamp(2, HANDOFF_MAX), with_tx);
    let outputs = Mutex::new(Vec::<(Vec<OutTally>, Vec<String>)>::new());
    let failed = AtomicBool::new(false);
    let ingest_done: Vec<AtomicBool> = feeds.iter().map(|_| AtomicBool::new(false)).collect();
    let queues_done = AtomicUsize::new(0);
    let errors = Mutex::new(Vec::<String>::new());
    let fatal = Mutex::new(None::<anyhow::Error>);
    let fail = |e: anyhow::Error| {
        failed.store(true, Ordering::Relaxed);
        let mut f = fatal.lock().unwrap_or_else(|p| p.into_inner());
        f.get_or_insert(e);
    };
    let ictx = ingest_ctx(dev, spec, shared, &failed);
    let reaper = Reaper::new(spec.pipeline, spec.acl_on);
    let mut verify = HostVerify::new(spec, &shared.verify, slow_path);
    let (mut publisher, mut params) = verify.publishers(spec);
    let mut live = LiveStageCounters::new(spec.composed, spec.pipeline);
    let flows = flow_export::GpuFlows::of(spec.pipeline, nq);
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
        for (fi, ((feed, out), free)) in feeds.into_iter().zip(to_queue).zip(free_rx).enumerate() {
            let (ictx, errors, done, failed) = (&ictx, &errors, &ingest_done[fi], &failed);
            let cores = &spec.rx_threads.cores;
            let (name, pin_at) = feed.thread_name();
            threads.push(spawn_named(s, name, move || {
                let _exit = OnExit {
                    done: Some(done),
                    count: None,
                    failed,
                };
                crate::executor::cpu::pin(cores, pin_at, "pw-in");
                if let Err(e) = receive(ictx, fi, feed, out, free) {
                    let mut v = errors.lock().unwrap_or_else(|p| p.into_inner());
                    v.push(e);
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
                tx: tx_plan,
                gate: spec.gate.as_deref(),
                flows: flows.as_ref(),
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
        // TX threads; the verifier's captures go to the slow path through the first.
        let (captures, lanes) = (verify.start(s), tx::lanes_of(outs, tx_in, per_queue_tx));
        let ends = TxEnds {
            shared,
            dev,
            queues_done: &queues_done,
            nq,
            failed: &failed,
            outputs: &outputs,
            mbufs: by_mbuf.then_some(spec),
        };
        spawn_tx(s, &mut threads, lanes, &free_tx, captures, ends);
        drop(free_tx);
        // Reloads reach the GPU from here while the queues run (the data path never waits
        // for the control thread, nor for this one).
        while queues_done.load(Ordering::Acquire) < nq {
            if !failed.load(Ordering::Relaxed) {
                let r = publisher
                    .check(spec.pipeline, dev)
                    .and_then(|()| {
                        live.publish_params(&mut params, spec.pipeline, dev, &shared.counters)
                    })
                    .and_then(|()| live.check(spec.pipeline, dev, &shared.counters, false))
                    .and_then(|()| flow_export::tick(flows.as_ref(), dev));
                if let Err(e) = r {
                    fail(e);
                }
                // After the publish: a stage hears of a generation once the GPU has it.
                hooks.poll(spec.pipeline, params.generation());
            }
            std::thread::sleep(RELOAD_CHECK);
        }
        join_all(threads, &fail);
        // Every burst is reaped: the stage counters are final; flow export takes the last
        // ended flows and the tables for the control thread's flush.
        let end = live.check(spec.pipeline, dev, &shared.counters, true);
        if let Err(e) = end.and_then(|()| flow_export::finish(flows.as_ref(), dev)) {
            fail(e);
        }
    });
    hooks.end(spec.pipeline);
    let (outputs, errors) = tx_results(outputs, errors);
    HostOutcome {
        result: first_error(fatal),
        errors,
        outputs,
        gpu_ingest,
        tx: tx_report,
        receive_threads: ingest_done.len(),
        pinned,
    }
}

/// What the TX threads took (summed per destination) and every error of the run.
fn tx_results(
    outputs: Mutex<Vec<(Vec<OutTally>, Vec<String>)>>,
    errors: Mutex<Vec<String>>,
) -> (Vec<OutTally>, Vec<String>) {
    let (outputs, tx_errors) =
        crate::executor::tx::merge(outputs.into_inner().unwrap_or_else(|p| p.into_inner()));
    let mut errors = errors.into_inner().unwrap_or_else(|p| p.into_inner());
    errors.extend(tx_errors);
    (outputs, errors)
}

/// What the TX threads share: the counters, the device (slots are released to it), when to
/// end (`queues_done` reaching `nq`), the run's failure flag, and where each puts its result.
struct TxEnds<'s> {
    shared: &'s CpuShared,
    dev: &'s dyn QueueDevice,
    queues_done: &'s AtomicUsize,
    nq: usize,
    failed: &'s AtomicBool,
    outputs: &'s Mutex<Vec<(Vec<OutTally>, Vec<String>)>>,
    /// DPDK in and out, the mbufs kept by the receive threads (`mbufs`): each TX thread sends
    /// them on its own TX queue.
    mbufs: Option<&'s HostSpec<'s>>,
}

/// Starts the TX threads (one per lane, `executor::tx`): each sends its queues' reaped bursts
/// until every queue thread and the verifier are done, then puts what its destinations took
/// onto `ends.outputs`. The verifier's captures go to the first.
fn spawn_tx<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    threads: &mut Vec<std::thread::ScopedJoinHandle<'s, ()>>,
    lanes: Vec<crate::executor::tx::TxLane<Slot>>,
    free_tx: &[mpsc::Sender<Slot>],
    (mut captured, verify_done): tx::Captures<'s>,
    ends: TxEnds<'s>,
) {
    for lane in lanes {
        let frees = free_tx.to_vec();
        let captures = (captured.take(), verify_done);
        let TxEnds {
            shared,
            dev,
            queues_done,
            nq,
            failed,
            outputs,
            mbufs,
        } = ends;
        // Its TX queue of the DPDK ports: its queue's, or 0 for one thread sending every queue.
        let txq = match lane.inputs.as_slice() {
            [(q, _)] => *q as u16,
            _ => 0,
        };
        threads.push(spawn_named(s, lane.name, move || {
            let _exit = OnExit {
                done: None,
                count: None,
                failed,
            };
            let mut out = lane.out;
            let ends = (queues_done, nq, captures);
            let sender = match mbufs.map(|spec| mbuf_sender(spec, txq, &out)).transpose() {
                Ok(s) => s,
                Err(e) => {
                    // Checked when the plan was made (TX queues per thread): the run stops.
                    failed.store(true, Ordering::Relaxed);
                    outputs
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((Vec::new(), vec![e]));
                    None
                }
            };
            let r = tx::run(shared, &mut out, lane.inputs, frees, ends, dev, sender);
            outputs.lock().unwrap_or_else(|p| p.into_inner()).push(r);
        }));
    }
}

/// Where the TX threads read the frames (`tx::plan`; before the first submit), its report,
/// and whether the receive threads keep their mbufs for the TX threads to send.
fn plan_tx(
    dev: &dyn QueueDevice,
    spec: &HostSpec<'_>,
    with_tx: bool,
    feeds: &[Feed<'_>],
    ingest: &[GpuIngest],
) -> (tx::TxPlan, Option<crate::daemon::summary::GpuTx>, bool) {
    let by_mbuf = with_tx && feeds.iter().any(Feed::keeps_mbufs);
    let (plan, report) = tx::plan(dev, (with_tx, by_mbuf), spec.pipeline, ingest);
    (plan, report, by_mbuf)
}

/// A TX thread's sender of the kept mbufs on TX queue `q` of the plan's ports (`out`: its
/// destinations, whose names the tallies take).
fn mbuf_sender(
    spec: &HostSpec<'_>,
    q: u16,
    out: &OutPorts,
) -> Result<Box<dyn tx::SlotSender>, String> {
    #[cfg(feature = "dpdk")]
    if let Some(plan) = &spec.mbufs {
        let mirror = out
            .mirror
            .as_ref()
            .map(|m| m.name().to_string())
            .unwrap_or_default();
        let s = super::mbufs::MbufSender::new(plan, q, (&out.names, mirror))?;
        return Ok(Box::new(s));
    }
    let _ = (spec, out);
    Err(format!("TX queue {q}: no DPDK ports whose mbufs are sent"))
}

/// Joins the run's threads here, not by the scope, so a panic is this run's error, not this
/// thread's.
fn join_all(threads: Vec<std::thread::ScopedJoinHandle<'_, ()>>, fail: &dyn Fn(anyhow::Error)) {
    for t in threads {
        if t.join().is_err() {
            fail(anyhow::anyhow!("a GPU host thread panicked"));
        }
    }
}

/// The error that stopped the run, if one did.
fn first_error(fatal: Mutex<Option<anyhow::Error>>) -> anyhow::Result<()> {
    let e = fatal.into_inner().unwrap_or_else(|p| p.into_inner());
    e.map_or(Ok(()), Err)
}

/// What every receive thread shares.
fn ingest_ctx<'a>(
    dev: &dyn QueueDevice,
    spec: &HostSpec<'a>,
    shared: &'a CpuShared,
    failed: &'a AtomicBool,
) -> IngestCtx<'a> {
    IngestCtx {
        shared,
        steering: spec.steering,
        queues: spec.queues,
        burst: spec.burst.max(1),
        slot_frames: spec.slot_frames.max(spec.burst).max(1),
        slot_cap: dev.slot_data_capacity(),
        room: spec.pipeline.frame_room(),
        on_full: spec.on_full,
        failed,
    }
}

/// Receive thread `fi`'s work: its source until it ends; an error names the source.
fn receive(
    ictx: &IngestCtx<'_>,
    fi: usize,
    feed: Feed<'_>,
    out: Vec<Producer<Slot>>,
    free: mpsc::Receiver<Slot>,
) -> Result<(), String> {
    let ids = ingest::Feeder {
        port: feed.port,
        feeder: fi,
    };
    let (who, r) = match feed.src {
        Source::Port(port, in_place) => (
            port.name().to_string(),
            ingest_port(ictx, ids, port, in_place, out, free),
        ),
        Source::Queue(mut q) => {
            let r = match out.into_iter().next() {
                Some(o) => ingest::run_queue(ictx, ids, q.as_mut(), o, free),
                None => Ok(()),
            };
            (q.name().to_string(), r)
        }
        #[cfg(feature = "dpdk")]
        Source::Pinned(mut rx, queue, by_mbuf) => {
            let r = ingest::run_pinned(ictx, ids, &mut rx, (queue, by_mbuf), out, free);
            (rx.port().setup().name.clone(), r)
        }
        #[cfg(feature = "dpdk")]
        Source::Mbufs(mut rx, q) => {
            let r = match out.into_iter().next() {
                Some(o) => ingest::run_queue_mbufs(ictx, ids, &mut rx, q, o, free),
                None => Ok(()),
            };
            (rx.port().setup().name.clone(), r)
        }
        Source::Refs(mut q, store) => {
            let r = match out.into_iter().next() {
                Some(o) => {
                    let src = ingest::Refs { store };
                    ingest::run_queue_refs(ictx, ids, q.as_mut(), src, o, free)
                }
                None => Ok(()),
            };
            (q.name().to_string(), r)
        }
    };
    r.map_err(|e| format!("{who}: {e}"))
}

/// Runs port `pi`'s ingest thread: frames in GPU memory received in place, or the usual way.
fn ingest_port(
    ictx: &IngestCtx<'_>,
    ids: ingest::Feeder,
    port: &mut dyn RxPort,
    in_place: bool,
    out: Vec<Producer<Slot>>,
    free: mpsc::Receiver<Slot>,
) -> Result<(), PortError> {
    if !in_place {
        return ingest::run(ictx, ids, port, out, free);
    }
    match port.gpu_rx() {
        Some(g) => ingest::run_gpu_frames(ictx, ids, g, out, free),
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
                // Decided with its receive threads (`feeds`).
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
