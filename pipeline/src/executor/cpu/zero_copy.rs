//! Zero-copy forwarding between DPDK ports, DPDK l2fwd style: one run-to-completion worker per
//! queue polls its own RX queue(s) of the input port, runs the pipeline on the frames where the
//! NIC put them (`Pipeline::run_frames` over the mbufs; a rewriting pipeline rewrites them in
//! the mbuf, `Pipeline::run_frames_mut` over `MbufBurst::rewrite`), frees the frames the
//! verdicts drop in bulk and hands the rest to its own TX queue of the output port
//! (`DpdkTx::tx_mbufs`): the mbuf sent is the mbuf received. A `mirror` frame goes to the
//! mirror port (a DPDK port, TX queue q) as a second reference to the same mbuf
//! (`MbufBurst::share_into`: reference count 2, the buffer returns to its pool after both
//! sends). No ingest or TX thread, no ring, no copy. Chosen by the daemon when
//! [`zero_copy_refusal`] finds no reason against it; the counters, verdict accounting and
//! summary are the copying path's.

use super::*;
use crate::port::dpdk::{DpdkPort, DpdkRx, DpdkTx, MbufBurst, MAX_BURST};

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
    if spec.pipeline.rewrites() && rx.setup().rx_may_chain {
        // A chain's bytes are read from a copy: a rewrite would not reach the mbufs.
        return Some(format!(
            "the pipeline rewrites frames and the input port {} may deliver chained mbufs",
            rx.setup().name
        ));
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

/// Runs the pipeline from `rx` to `tx` until the input ends (or `shared.stop`), one worker
/// per queue: worker q polls the input's RX queues q, q + queues, ... and sends on TX queue
/// q. The caller checked [`zero_copy_refusal`]. No mirror port (see [`run_mirrored`]).
pub fn run(spec: &CpuRunSpec, shared: &Arc<CpuShared>, rx: &DpdkPort, tx: &DpdkPort) -> RunOutcome {
    run_mirrored(spec, shared, rx, tx, None)
}

/// What one worker's sends took: (output, mirror) as (frames, bytes, failed).
#[derive(Clone, Copy, Default)]
struct Took {
    out: (u64, u64, u64),
    mirror: (u64, u64, u64),
}

/// `a += b`, field by field.
fn add3(a: &mut (u64, u64, u64), b: (u64, u64, u64)) {
    (a.0, a.1, a.2) = (a.0 + b.0, a.1 + b.1, a.2 + b.2);
}

/// [`run`] with `mirror` frames also sent to the mirror port `mirror` (its TX queue q for
/// worker q; the caller checked [`mirror_refusal`]) as a second reference to the same mbuf.
pub fn run_mirrored(
    spec: &CpuRunSpec,
    shared: &Arc<CpuShared>,
    rx: &DpdkPort,
    tx: &DpdkPort,
    mirror: Option<&DpdkPort>,
) -> RunOutcome {
    let start = Instant::now();
    let nq = spec.queues.max(1);
    let errors = std::sync::Mutex::new(Vec::new());
    let took = std::sync::Mutex::new(Took::default());
    let mut handles = Vec::with_capacity(nq);
    let mut open_errors = Vec::new();
    for q in 0..nq {
        let queues: Vec<u16> = (0..rx.setup().rx_queues)
            .filter(|k| *k as usize % nq == q)
            .collect();
        let m = mirror.map(|m| m.tx(q as u16)).transpose();
        match (rx.rx(&queues), tx.tx(q as u16), m) {
            (Ok(r), Ok(t), Ok(m)) => handles.push((q, r, Sends { tx: t, mirror: m })),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                open_errors.push(format!("queue {q}: {e}"))
            }
        }
    }
    if !open_errors.is_empty() {
        return RunOutcome {
            elapsed: start.elapsed(),
            errors: open_errors,
            ..RunOutcome::default()
        };
    }
    let pipeline: &Pipeline = &spec.pipeline;
    let mut hooks = HookDriver::start(pipeline, "cpu", pipeline.params_generation());
    let (workers, done) = (handles.len(), AtomicU64::new(0));
    std::thread::scope(|s| {
        for (q, r, sends) in handles {
            let shared = Arc::clone(shared);
            let (errors, done, took) = (&errors, &done, &took);
            spawn_named(s, format!("pw-q{q}"), move || {
                // Each worker receives its own RX queue(s): pinned as receive threads are.
                pin(&spec.rx_threads.cores, q, "pw-q");
                let label = format!("dpdk:{}", r.port().setup().name);
                let mut mine = Took::default();
                if let Err(e) = worker(spec, &shared, q, r, sends, &mut mine) {
                    if let Ok(mut v) = errors.lock() {
                        v.push(format!("{label}: {e}"));
                    }
                }
                if let Ok(mut t) = took.lock() {
                    add3(&mut t.out, mine.out);
                    add3(&mut t.mirror, mine.mirror);
                }
                done.fetch_add(1, Ordering::Release);
            });
        }
        super::spawn_hooks(s, &mut hooks, pipeline, &done, workers);
    });
    hooks.end(pipeline);
    let t = took.into_inner().unwrap_or_default();
    let tally =
        |role: &'static str, name: &str, (frames, bytes, failed): (u64, u64, u64)| OutTally {
            role,
            name: name.to_string(),
            frames,
            bytes,
            failed,
        };
    let mut out = vec![tally("output", &format!("dpdk:{}", tx.setup().name), t.out)];
    if let Some(m) = mirror {
        out.push(tally(
            "mirror",
            &format!("dpdk:{}", m.setup().name),
            t.mirror,
        ));
    }
    RunOutcome {
        elapsed: start.elapsed(),
        errors: errors.into_inner().unwrap_or_default(),
        // Read once every worker is done, as the copying path reads it at its ingest's end.
        port_counters: vec![(format!("dpdk:{}", rx.setup().name), rx.counters())],
        out,
        // The workers receive: one per queue.
        receive_threads: nq,
    }
}

/// A worker's TX queues: of the output port, and of the mirror port if any.
struct Sends {
    tx: DpdkTx,
    mirror: Option<DpdkTx>,
}

/// Sends `burst` (every frame of it) on `tx`; (frames sent, bytes, frames not sent) with the
/// bytes as the copying path counts them (the bytes handed to the port). On an error the
/// burst is freed (the caller counts it and stops).
fn send_all(tx: &mut DpdkTx, burst: &mut MbufBurst) -> Result<(u64, u64, u64), PortError> {
    let wanted = burst.len();
    let bytes = burst.bytes();
    match tx.tx_mbufs(burst) {
        Ok(out) => {
            let sent = out.sent.min(wanted);
            Ok((sent as u64, bytes, (wanted - sent) as u64))
        }
        Err(e) => {
            burst.clear();
            Err(e)
        }
    }
}

fn worker(
    spec: &CpuRunSpec,
    shared: &CpuShared,
    q: usize,
    mut rx: DpdkRx,
    mut sends: Sends,
    took: &mut Took,
) -> Result<(), PortError> {
    let c = &shared.counters[q];
    let nq = spec.queues.max(1);
    // The NIC steers the whole rule set: nothing to do here (its drops never arrive).
    let steer = spec.steering.has_rules() && !rx.port().steered_in_nic();
    let burst_max = spec.burst.clamp(1, MAX_BURST);
    let mut burst = MbufBurst::new();
    let mut copies = MbufBurst::new();
    let mut metas = Vec::with_capacity(burst_max);
    let mut verdicts = Vec::with_capacity(burst_max);
    let mut meta = PacketMeta::default();
    let mut steer_drop = vec![false; MAX_BURST];
    let (rewrites, room) = (spec.pipeline.rewrites(), spec.pipeline.frame_room());
    let backoff = Backoff::new();
    let mut result = Ok(());
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        match rx.rx_mbufs(&mut burst, burst_max) {
            Ok(RxStatus::End) => break,
            Ok(RxStatus::Idle) => {
                wait_on(&backoff);
                continue;
            }
            Ok(RxStatus::Frames(_)) => backoff.reset(),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
        // Burst latency: frames in hand -> pipeline done (no hand-off on this path).
        let t0 = Instant::now();
        let n = burst.len();
        shared.rx_total.fetch_add(n as u64, Ordering::Relaxed);
        c.rx_frames.add(n as u64);
        c.rx_bytes.add(burst.bytes());
        if steer {
            // One queue (see zero_copy_refusal): steering rules can only drop and mark
            // here; a rule's mark goes into the mbuf as a NIC's MARK would.
            for (i, d) in steer_drop.iter_mut().enumerate().take(n) {
                let (_, verdict, mark) = spec.steering.steer_marked(burst.frame(i), &mut meta, nq);
                *d = verdict.is_some();
                if mark != 0 {
                    burst.set_mark(i, mark);
                }
            }
            let gone = burst.retain(|i| !steer_drop[i]);
            c.drops[DropReason::SteeringDrop as usize].add(gone as u64);
        }
        if rewrites {
            // The stages rewrite the mbufs themselves (a chain would be refused: the port
            // cannot deliver one, see zero_copy_refusal).
            let p = &spec.pipeline;
            let ran = burst.rewrite(room, |f| p.run_frames_mut(f, &mut metas, &mut verdicts, c));
            if let Err(e) = ran {
                c.drops[DropReason::TxError as usize].add(burst.len() as u64);
                burst.clear();
                result = Err(e);
                break;
            }
        } else {
            spec.pipeline
                .run_frames(burst.frames(), &mut metas, &mut verdicts, c);
        }
        c.burst_latency.observe_ns(t0.elapsed().as_nanos() as u64);
        if sends.mirror.is_some() {
            // The mirror copies: the same mbufs, one reference more each (sent below).
            let mirrored = |i: usize| verdicts.get(i).is_some_and(|v| v.action == Action::Mirror);
            burst.share_into(&mut copies, mirrored);
        }
        burst.retain(|i| verdicts.get(i).is_some_and(|v| v.action.forwards()));
        if !burst.is_empty() {
            // As on the copying path: tx_bytes are the bytes handed to the output port.
            let wanted = burst.len() as u64;
            match send_all(&mut sends.tx, &mut burst) {
                Ok((sent, bytes, failed)) => {
                    c.tx_frames.add(sent);
                    c.tx_bytes.add(bytes);
                    c.drops[DropReason::TxError as usize].add(failed);
                    add3(&mut took.out, (sent, bytes, failed));
                }
                Err(e) => {
                    c.drops[DropReason::TxError as usize].add(wanted);
                    copies.clear();
                    result = Err(e);
                    break;
                }
            }
        }
        if let (Some(m), false) = (sends.mirror.as_mut(), copies.is_empty()) {
            // Copies are counted by their destination, as on the copying path.
            match send_all(m, &mut copies) {
                Ok(t) => add3(&mut took.mirror, t),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
    }
    let flushed = sends.tx.flush();
    let mflushed = sends.mirror.as_mut().map_or(Ok(()), DpdkTx::flush);
    result.and(flushed).and(mflushed)
}
