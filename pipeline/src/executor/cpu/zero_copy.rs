//! Zero-copy forwarding between DPDK ports, DPDK l2fwd style: one run-to-completion worker per
//! queue polls its own RX queue(s) of the input port, runs the pipeline on the frames where the
//! NIC put them (`Pipeline::run_frames` over the mbufs; a rewriting pipeline rewrites them in
//! the mbuf, `Pipeline::run_frames_mut` over `MbufBurst::rewrite`), frees the frames the
//! verdicts drop in bulk and hands the rest to its own TX queue of the output port
//! (`DpdkTx::tx_mbufs`): the mbuf sent is the mbuf received. With several ports (DPDK
//! l2fwd / l3fwd style: every port receives and sends) a worker polls its RX queues of each
//! input port in turn and sends each forwarded frame on its TX queue of the port its verdict's
//! `out_port` names (a burst split by port with `MbufBurst::move_into`: pointers move, nothing
//! is copied); a frame routed to a port with no transmit side is a `tx_error` drop, as on the
//! copying path; the sends are `port::dpdk::send`'s, as the GPU executor's (a port's error
//! counts its frames `tx_error`, the other ports still get theirs, then the worker stops with
//! the error). A `mirror` frame goes to the mirror port (a DPDK port, TX queue q) as a second
//! reference to the same mbuf (`MbufBurst::share_into`: reference count 2, the buffer returns
//! to its pool after both sends). No ingest or TX thread, no ring, no copy. Chosen by the
//! daemon when [`zero_copy_refusal`] finds no reason against any input / output pair; the
//! counters, verdict accounting and summary are the copying path's.

use super::*;
use crate::port::dpdk::{
    BurstSent, DpdkPort, DpdkRx, MbufBurst, MbufDest, MbufOuts, MAX_BURST, NOWHERE,
};
use crate::port::out::OutRoute;

/// Why the zero-copy path cannot run this configuration (`None`: it can). The input and
/// output must be DPDK ports with host-memory RX buffers, with no burst observer; with
/// several queues each worker needs its own TX queue, RX queues to poll, and no `steering:`
/// rules (the NIC's queues stand for the software steering's: a frame cannot move to another
/// worker without a copy or a ring).
pub fn zero_copy_refusal(spec: &CpuRunSpec, rx: &DpdkPort, tx: &DpdkPort) -> Option<String> {
    let nq = spec.queues.max(1);
    if spec.observer.is_some() {
        return Some("a burst observer is attached (it reads copied bursts)".into());
    }
    if spec.verify_sample > 0 {
        return Some("verify.sample is on (the verifier checks copied bursts)".into());
    }
    if spec
        .pipeline
        .stages
        .iter()
        .any(|s| matches!(s, crate::stage::Stage::TxTime(_)))
    {
        // Send times are honoured by the copying TX path (DpdkTx::tx_burst_timed).
        return Some("the pipeline sets send times (tx_time)".into());
    }
    if rx.buffer_placement() == crate::port::dpdk::BufferPlacement::GpuDirect {
        return Some(format!(
            "the input port {} receives into GPU memory",
            rx.setup().name
        ));
    }
    if nq > 1 {
        if spec.steering.has_rules() && !rx.steered_in_nic() {
            return Some(format!(
                "{nq} queues with steering rules (the zero-copy path keeps each frame on the NIC queue it arrived on)"
            ));
        }
        if (rx.setup().rx_queues as usize) < nq {
            return Some(format!(
                "{nq} queues but the input port {} has {} RX queues (one per worker needed)",
                rx.setup().name,
                rx.setup().rx_queues
            ));
        }
        if (tx.setup().tx_queues as usize) < nq {
            return Some(format!(
                "{nq} queues but the output port {} has {} TX queues (one per worker needed)",
                tx.setup().name,
                tx.setup().tx_queues
            ));
        }
    }
    None
}

/// Why the zero-copy path cannot send mirror copies to `mirror` (`None`: it can, by
/// reference): worker q sends on its TX queue q.
pub fn mirror_refusal(spec: &CpuRunSpec, mirror: &DpdkPort) -> Option<String> {
    let nq = spec.queues.max(1);
    (usize::from(mirror.setup().tx_queues) < nq).then(|| {
        format!(
            "{nq} queues but the mirror port {} has {} TX queues (one per worker needed)",
            mirror.setup().name,
            mirror.setup().tx_queues
        )
    })
}

/// The DPDK ports of a zero-copy run.
pub struct ZeroCopyPorts<'a> {
    /// Every receiving port (all DPDK), in config order.
    pub inputs: Vec<&'a DpdkPort>,
    /// The output ports by `out_port` index (`Config::tx_port_names` order); `None` where the
    /// port has no transmit side open (frames routed there are `tx_error` drops).
    pub outputs: Vec<Option<&'a DpdkPort>>,
    /// The index of `output.port` (where `Verdict::OUT_DEFAULT` frames go); `None`: such
    /// frames are counted and released.
    pub default: Option<usize>,
    /// The mirror port, whose TX queue q takes worker q's mirror copies.
    pub mirror: Option<&'a DpdkPort>,
}

/// Why the zero-copy path cannot run with these ports (`None`: it can): the reasons of
/// [`zero_copy_refusal`] for each input and output port, and of [`mirror_refusal`].
pub fn ports_refusal(spec: &CpuRunSpec, ports: &ZeroCopyPorts) -> Option<String> {
    let outs: Vec<&DpdkPort> = ports.outputs.iter().flatten().copied().collect();
    for rx in &ports.inputs {
        // With no output port only the input's own reasons count (it stands for the output).
        let pairs = if outs.is_empty() {
            vec![*rx]
        } else {
            outs.clone()
        };
        if let Some(why) = pairs.iter().find_map(|tx| zero_copy_refusal(spec, rx, tx)) {
            return Some(why);
        }
    }
    ports.mirror.and_then(|m| mirror_refusal(spec, m))
}

/// Runs the pipeline from `rx` to `tx` until the input ends (or `shared.stop`), one worker
/// per queue: worker q polls the input's RX queues q, q + queues, ... and sends on TX queue
/// q. The caller checked [`zero_copy_refusal`]. No mirror port (see [`run_ports`]).
pub fn run(spec: &CpuRunSpec, shared: &Arc<CpuShared>, rx: &DpdkPort, tx: &DpdkPort) -> RunOutcome {
    let ports = ZeroCopyPorts {
        inputs: vec![rx],
        outputs: vec![Some(tx)],
        default: Some(0),
        mirror: None,
    };
    run_ports(spec, shared, &ports)
}

/// What one worker's sends took: per output port, and the mirror.
#[derive(Clone, Default)]
struct Took {
    out: Vec<BurstSent>,
    mirror: BurstSent,
}

impl Took {
    fn add(&mut self, other: &Took) {
        if self.out.len() < other.out.len() {
            self.out.resize(other.out.len(), BurstSent::default());
        }
        for (a, b) in self.out.iter_mut().zip(&other.out) {
            a.add(*b);
        }
        self.mirror.add(other.mirror);
    }
}

/// A worker's queues: its RX queues of every input port, its TX queue of every open output
/// port (by `out_port` index) and of the mirror port.
struct WorkerPorts {
    rx: Vec<DpdkRx>,
    tx: MbufOuts,
    mirror: Option<MbufDest>,
}

/// Opens worker q's queues: RX queues q, q + queues, ... of each input, TX queue q of each
/// output and of the mirror.
fn open_worker(ports: &ZeroCopyPorts, q: usize, nq: usize) -> Result<WorkerPorts, PortError> {
    let mut rx = Vec::with_capacity(ports.inputs.len());
    for p in &ports.inputs {
        let queues: Vec<u16> = (0..p.setup().rx_queues)
            .filter(|k| *k as usize % nq == q)
            .collect();
        if !queues.is_empty() {
            rx.push(p.rx(&queues)?);
        }
    }
    let tx = ports
        .outputs
        .iter()
        .map(|o| o.map(|p| p.tx(q as u16)).transpose())
        .collect::<Result<Vec<_>, _>>()?;
    let mirror = ports.mirror.map(|m| m.tx(q as u16)).transpose()?;
    Ok(WorkerPorts {
        rx,
        tx: MbufOuts::new(tx),
        mirror: mirror.map(MbufDest::new),
    })
}

/// Runs the pipeline over `ports` until every input ends (or `shared.stop`), one worker per
/// queue (see the module doc). The caller checked [`ports_refusal`].
pub fn run_ports(spec: &CpuRunSpec, shared: &Arc<CpuShared>, ports: &ZeroCopyPorts) -> RunOutcome {
    let start = Instant::now();
    let nq = spec.queues.max(1);
    let errors = std::sync::Mutex::new(Vec::new());
    let took = std::sync::Mutex::new(Took::default());
    let mut handles = Vec::with_capacity(nq);
    let mut open_errors = Vec::new();
    for q in 0..nq {
        match open_worker(ports, q, nq) {
            Ok(w) => handles.push((q, w)),
            Err(e) => open_errors.push(format!("queue {q}: {e}")),
        }
    }
    if !open_errors.is_empty() {
        return RunOutcome {
            elapsed: start.elapsed(),
            errors: open_errors,
            ..RunOutcome::default()
        };
    }
    let route = OutRoute::new(ports.default, false);
    let pipeline: &Pipeline = &spec.pipeline;
    let mut hooks = HookDriver::start(pipeline, "cpu", pipeline.params_generation());
    let (workers, done) = (handles.len(), AtomicU64::new(0));
    std::thread::scope(|s| {
        for (q, w) in handles {
            let shared = Arc::clone(shared);
            let (errors, done, took) = (&errors, &done, &took);
            spawn_named(s, format!("pw-q{q}"), move || {
                // Each worker receives its own RX queue(s): pinned as receive threads are.
                pin(&spec.rx_threads.cores, q, "pw-q");
                let mut mine = Took::default();
                if let Err(e) = worker(spec, &shared, q, route, w, &mut mine) {
                    if let Ok(mut v) = errors.lock() {
                        v.push(e);
                    }
                }
                if let Ok(mut t) = took.lock() {
                    t.add(&mine);
                }
                done.fetch_add(1, Ordering::Release);
            });
        }
        super::spawn_hooks(s, &mut hooks, pipeline, &done, workers);
    });
    hooks.end(pipeline);
    let t = took.into_inner().unwrap_or_default();
    RunOutcome {
        elapsed: start.elapsed(),
        errors: errors.into_inner().unwrap_or_default(),
        // Read once every worker is done, as the copying path reads it at its ingest's end.
        port_counters: ports
            .inputs
            .iter()
            .map(|p| (format!("dpdk:{}", p.setup().name), p.counters()))
            .collect(),
        out: tallies(ports, &t),
        // The workers receive: one per queue.
        receive_threads: nq,
    }
}

/// What each output port and the mirror took over the run.
fn tallies(ports: &ZeroCopyPorts, t: &Took) -> Vec<OutTally> {
    let tally = |role: &'static str, name: &str, took: BurstSent| OutTally {
        role,
        name: format!("dpdk:{name}"),
        frames: took.sent,
        bytes: took.bytes,
        failed: took.failed,
    };
    let mut out: Vec<OutTally> = ports
        .outputs
        .iter()
        .enumerate()
        .filter_map(|(k, p)| {
            let took = t.out.get(k).copied().unwrap_or_default();
            p.map(|p| tally("output", &p.setup().name, took))
        })
        .collect();
    if let Some(m) = ports.mirror {
        out.push(tally("mirror", &m.setup().name, t.mirror));
    }
    out
}

/// A worker's scratch, allocated once.
struct Scratch {
    burst: MbufBurst,
    copies: MbufBurst,
    metas: Vec<PacketMeta>,
    verdicts: Vec<Verdict>,
    meta: PacketMeta,
    steer_drop: Vec<bool>,
    /// Per frame: the output port index it goes to, or [`NOWHERE`].
    dest: Vec<u16>,
}

fn worker(
    spec: &CpuRunSpec,
    shared: &CpuShared,
    q: usize,
    route: OutRoute,
    mut ports: WorkerPorts,
    took: &mut Took,
) -> Result<(), String> {
    took.out.resize(ports.tx.len(), BurstSent::default());
    let burst_max = spec.burst.clamp(1, MAX_BURST);
    let mut sc = Scratch {
        burst: MbufBurst::new(),
        copies: MbufBurst::new(),
        metas: Vec::with_capacity(burst_max),
        verdicts: Vec::with_capacity(burst_max),
        meta: PacketMeta::default(),
        steer_drop: vec![false; MAX_BURST],
        dest: Vec::with_capacity(MAX_BURST),
    };
    let backoff = Backoff::new();
    let mut ended = vec![false; ports.rx.len()];
    let (mut next, mut idle_round) = (0usize, 0usize);
    let mut result = Ok(());
    while !shared.stop.load(Ordering::Relaxed) && ended.iter().any(|e| !e) {
        let k = next;
        next = (next + 1) % ports.rx.len();
        if ended[k] {
            continue;
        }
        let rx = &mut ports.rx[k];
        match rx.rx_mbufs(&mut sc.burst, burst_max) {
            Ok(RxStatus::End) => ended[k] = true,
            Ok(RxStatus::Idle) => {
                idle_round += 1;
                // Every input polled empty once: back off.
                if idle_round >= ports.rx.len() {
                    idle_round = 0;
                    wait_on(&backoff);
                }
            }
            Ok(RxStatus::Frames(_)) => {
                (idle_round, ()) = (0, backoff.reset());
                let label = format!("dpdk:{}", rx.port().setup().name);
                let steer = spec.steering.has_rules() && !rx.port().steered_in_nic();
                if let Err(e) = one_burst(spec, shared, q, route, steer, &mut ports, &mut sc, took)
                {
                    result = Err(format!("{label}: {e}"));
                    break;
                }
            }
            Err(e) => {
                result = Err(format!("dpdk:{}: {e}", rx.port().setup().name));
                break;
            }
        }
    }
    let mut flushed = Ok(());
    for t in ports.tx.dests_mut().chain(ports.mirror.as_mut()) {
        if let Err(e) = t.flush() {
            flushed = Err(format!("flush: {e}"));
        }
    }
    result.and(flushed)
}

/// Runs the pipeline over the burst just received and sends (or frees) every frame of it.
#[allow(clippy::too_many_arguments)]
fn one_burst(
    spec: &CpuRunSpec,
    shared: &CpuShared,
    q: usize,
    route: OutRoute,
    steer: bool,
    ports: &mut WorkerPorts,
    sc: &mut Scratch,
    took: &mut Took,
) -> Result<(), PortError> {
    let c = &shared.counters[q];
    let nq = spec.queues.max(1);
    // Burst latency: frames in hand -> pipeline done (no hand-off on this path).
    let t0 = Instant::now();
    let burst = &mut sc.burst;
    let n = burst.len();
    shared.rx_total.fetch_add(n as u64, Ordering::Relaxed);
    c.rx_frames.add(n as u64);
    c.rx_bytes.add(burst.bytes());
    if steer {
        // One queue (see zero_copy_refusal): steering rules can only drop and mark
        // here; a rule's mark goes into the mbuf as a NIC's MARK would.
        for (i, d) in sc.steer_drop.iter_mut().enumerate().take(n) {
            let (_, verdict, mark) = spec.steering.steer_marked(burst.frame(i), &mut sc.meta, nq);
            *d = verdict.is_some();
            if mark != 0 {
                burst.set_mark(i, mark);
            }
        }
        let gone = burst.retain(|i| !sc.steer_drop[i]);
        c.drops[DropReason::SteeringDrop as usize].add(gone as u64);
    }
    let (metas, verdicts) = (&mut sc.metas, &mut sc.verdicts);
    if spec.pipeline.rewrites() {
        // The stages rewrite the mbufs themselves (a chain would be refused: the port
        // cannot deliver one, see zero_copy_refusal).
        let p = &spec.pipeline;
        let (room, m, v) = (p.frame_room(), &mut *metas, &mut *verdicts);
        if let Err(e) = burst.rewrite(room, |f| p.run_frames_mut(f, m, v, c)) {
            c.drops[DropReason::TxError as usize].add(burst.len() as u64);
            burst.clear();
            return Err(e);
        }
        // A chain that could not take its rewrite still holds the received bytes: neither
        // sent nor mirrored; a forwarded one is a `tx_error` drop, as a frame the port refused.
        for (i, v) in verdicts.iter_mut().enumerate().take(burst.len()) {
            if burst.unwritten(i) {
                if v.action.forwards() {
                    c.drops[DropReason::TxError as usize].add(1);
                }
                v.action = Action::Drop;
            }
        }
    } else {
        spec.pipeline.run_frames(burst.frames(), metas, verdicts, c);
    }
    c.burst_latency.observe_ns(t0.elapsed().as_nanos() as u64);
    if ports.mirror.is_some() {
        // The mirror copies: the same mbufs, one reference more each (sent below).
        let mirrored = |i: usize| verdicts.get(i).is_some_and(|v| v.action == Action::Mirror);
        burst.share_into(&mut sc.copies, mirrored);
    }
    // Each forwarded frame's port; one routed to a port with no transmit side is lost, as on
    // the copying path (`tx_error`), one with no default output is released uncounted.
    let mut lost = 0u64;
    let forwarded = |i: usize| verdicts.get(i).filter(|v| v.action.forwards());
    let dest = (0..burst.len())
        .map(|i| forwarded(i).map_or(NOWHERE, |v| ports.tx.dest(route, v.out_port, &mut lost)));
    sc.dest.clear();
    sc.dest.extend(dest);
    c.drops[DropReason::TxError as usize].add(lost);
    // As on the copying path: tx_bytes are the bytes handed to the output port. A port's error
    // stops this worker once the burst is sent (the other ports and the mirror still get
    // their frames of it).
    let out = &mut took.out;
    let mut result = ports.tx.send(burst, &mut sc.dest, |k, s| {
        c.tx_frames.add(s.sent);
        c.tx_bytes.add(s.bytes);
        c.drops[DropReason::TxError as usize].add(s.failed);
        if let Some(t) = out.get_mut(k) {
            t.add(s);
        }
    });
    if let (Some(m), false) = (ports.mirror.as_mut(), sc.copies.is_empty()) {
        // Copies are counted by their destination, as on the copying path.
        let (s, error) = m.send(&mut sc.copies);
        took.mirror.add(s);
        if let (Ok(()), Some(e)) = (&result, error) {
            result = Err(e);
        }
    }
    result
}
