//! A prepared config on the GPU executor.

use std::sync::Arc;
use std::time::Duration;

use super::{summarize, OpenPorts, Prepared, Summary};
use crate::burst::Burst;
use crate::executor::cpu::CpuShared;
use crate::port::{RxStatus, TxPort};
use crate::stage::{self, Pipeline};
use crate::verdict::DropReason;

/// The GPU executor's view of the config's pipeline: `parse`, `acl`, `count` in this order (each
/// optional), which is what the CUDA driver runs.
fn gpu_pipeline_flags(p: &Pipeline) -> anyhow::Result<(bool, bool, bool)> {
    let names: Vec<String> = p.stage_names().iter().map(|n| n.to_string()).collect();
    let order = ["parse", "acl", "count"];
    let mut last = 0;
    for n in &names {
        let pos = order.iter().position(|o| *o == n).unwrap_or(usize::MAX);
        if pos == usize::MAX || pos < last {
            anyhow::bail!(
                "the gpu executor runs the stages parse, acl, count in this order (each at most \
                 once); this pipeline is {}",
                names.join(" -> ")
            );
        }
        last = pos + 1;
    }
    let has = |stage: &str| names.iter().any(|n| n == stage);
    Ok((has("parse"), has("acl"), has("count")))
}

/// Runs a prepared config on the GPU executor: this thread plays the NIC (ingest with software
/// steering into each queue's GPU ring), reaps verdicts, and transmits passed frames. Counters
/// land in the same per-queue counters as the CPU executor's, so the summary and the metrics
/// read the same for both.
pub fn run_gpu(
    p: &Prepared,
    shared: &Arc<CpuShared>,
    mut ports: OpenPorts,
    image: &crate::executor::gpu::KernelImage,
) -> anyhow::Result<Summary> {
    use crate::executor::gpu::multi::MultiGpu;
    use crate::executor::gpu::{AclTablesRef, PipelineDesc, SubmitError};
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    let setup = std::time::Instant::now();
    let nq = p.cfg.queues.count as usize;
    let burst = p.cfg.queues.burst as usize;
    let on_full = p.cfg.queues.on_full;
    let mut opts = p.cfg.executor.gpu.clone();
    opts.burst_size = burst as u32;
    opts.ring_slots = p.cfg.queues.ring_slots;
    let (parse, acl_on, count) = gpu_pipeline_flags(&p.pipeline)?;
    let acl = p.pipeline.acl();
    let acl_bytes = acl.as_ref().map(|a| a.classifier.image_bytes());
    let desc = PipelineDesc {
        parse,
        acl: match (&acl, &acl_bytes) {
            (Some(a), Some(b)) if acl_on => Some(AclTablesRef {
                bytes: b,
                n_rules: a.rule_count() as u32,
            }),
            _ => None,
        },
        count,
        default_action: acl
            .as_ref()
            .map_or(crate::verdict::Action::Pass, |a| a.default) as u8,
    };
    // One executor per GPU of `executor.gpu.devices` (queues round-robin), or one on `device`.
    let mut gpu = MultiGpu::new(opts, desc, nq, image)?;
    // The run's rates count from here: creating the context, loading the kernels, uploading the
    // tables and allocating the rings take a few hundred ms once, which would otherwise dominate
    // the rate of a short run.
    tracing::info!(
        "GPU executor ready in {:.3} s (context, kernels, tables, rings)",
        setup.elapsed().as_secs_f64()
    );
    let start = std::time::Instant::now();
    // ACL table hot swap: a reload (control thread, Pipeline::reload_acl) bumps the pipeline's
    // generation; this loop publishes the new tables to the GPU (every burst submitted after
    // that names them in its slot header). `acl.generation` is the one stamped into the tables
    // actually loaded, so a reload racing this check is picked up on the next iteration.
    let mut gpu_generation = acl.as_ref().map_or(0, |a| a.generation);
    let publish_reload = |gpu: &MultiGpu, have: &mut u64| -> anyhow::Result<()> {
        if !acl_on || p.pipeline.generation() == *have {
            return Ok(());
        }
        if let Some(a) = p.pipeline.acl() {
            if a.generation != *have {
                let bytes = a.classifier.image_bytes();
                gpu.publish_acl(
                    &AclTablesRef {
                        bytes: &bytes,
                        n_rules: a.rule_count() as u32,
                    },
                    a.generation,
                    a.default as u8,
                )?;
                tracing::info!(
                    event = "gpu_acl_swap",
                    generation = a.generation,
                    rules = a.rule_count(),
                    "GPU executor now classifies with rule-set generation {}",
                    a.generation
                );
                *have = a.generation;
            }
        }
        Ok(())
    };
    let count_stage = p
        .pipeline
        .stages
        .iter()
        .position(|s| matches!(s, stage::Stage::Count));

    // Applies one finished burst's verdicts to the counters and transmits its passed frames.
    let reap = |q: usize,
                b: &Burst,
                v: &[crate::executor::gpu::abi::Verdict],
                tx: &mut Option<Box<dyn TxPort>>,
                errors: &mut Vec<String>| {
        let c = &shared.counters[q];
        let mut fwd = 0u64;
        let mut fwd_bytes = 0u64;
        for (i, (d, _)) in b.frames().enumerate() {
            let Some(vd) = v.get(i) else { break };
            let action = crate::verdict::Action::from_code(vd.action);
            match action {
                crate::verdict::Action::Pass => c.passed.add(1),
                crate::verdict::Action::Mirror => c.mirrored.add(1),
                crate::verdict::Action::ToHost => c.to_host.add(1),
                crate::verdict::Action::Drop => {
                    if let Some(r) = DropReason::from_code(vd.drop_reason) {
                        c.drops[r as usize].add(1);
                    }
                }
            }
            let classified = action != crate::verdict::Action::Drop
                || vd.drop_reason == DropReason::AclDrop as u8;
            if acl_on && classified {
                match c.rule_hits.get(vd.rule as usize) {
                    Some(h) => h.add(1),
                    None if vd.rule == flow_rules::abi::ACL_NO_MATCH => c.acl_default.add(1),
                    None => c.rule_hits_other.add(1),
                }
            }
            if let Some(si) = count_stage {
                if action != crate::verdict::Action::Drop {
                    c.stage_frames[si].add(1);
                    c.stage_bytes[si].add(d.len as u64);
                }
            }
            if action.forwards() {
                fwd += 1;
                fwd_bytes += d.len as u64;
            }
        }
        if let Some(t) = tx.as_mut() {
            let mut frames = b
                .frames()
                .zip(v.iter())
                .filter(|(_, vd)| crate::verdict::Action::from_code(vd.action).forwards())
                .map(|((_, f), _)| f);
            match t.tx_burst(&mut frames) {
                Ok(sent) => {
                    c.tx_frames.add(sent as u64);
                    c.tx_bytes.add(fwd_bytes);
                    c.drops[DropReason::TxError as usize].add(fwd.saturating_sub(sent as u64));
                }
                Err(e) => {
                    c.drops[DropReason::TxError as usize].add(fwd);
                    errors.push(format!("{}: {e}", t.name()));
                }
            }
        }
    };

    // Two host threads, as a NIC driver has an RX and a completion path: this one receives,
    // steers, builds and submits bursts; the completion thread polls the queues, applies the
    // verdicts, transmits and recycles the bursts. Each submitted burst travels to the completion
    // thread through its queue's channel, in submit order (the order the GPU finishes them).
    let (spare_tx, spare_rx) = mpsc::channel::<Burst>();
    let mut to_reap: Vec<mpsc::Sender<Burst>> = Vec::with_capacity(nq);
    let mut reap_rx: Vec<mpsc::Receiver<Burst>> = Vec::with_capacity(nq);
    for _ in 0..nq {
        let (t, r) = mpsc::channel();
        to_reap.push(t);
        reap_rx.push(r);
    }
    let ingest_done = AtomicBool::new(false);
    let failed = AtomicBool::new(false);
    let slot_cap = gpu.slot_data_capacity() as usize;
    let mut tx_port = ports.tx.take();
    let gpu_ref = &gpu;

    let (ingest_result, completion) = std::thread::scope(|sc| {
        let ingest_done = &ingest_done;
        let failed = &failed;
        let tx_port = &mut tx_port;
        let completion = sc.spawn(move || -> (anyhow::Result<()>, Vec<String>) {
            let mut errors = Vec::new();
            let mut pending: Vec<VecDeque<Burst>> = (0..nq).map(|_| VecDeque::new()).collect();
            let mut idle_since: Option<std::time::Instant> = None;
            let r = (|| -> anyhow::Result<()> {
                loop {
                    let finished_ingest = ingest_done.load(Ordering::Acquire);
                    let mut work = 0usize;
                    for q in 0..nq {
                        while let Ok(b) = reap_rx[q].try_recv() {
                            pending[q].push_back(b);
                        }
                        let queue = &mut pending[q];
                        let rx = &reap_rx[q];
                        work += gpu_ref.poll(q, |_, v, _| {
                            // The burst was sent right after its submit returned: it is in the
                            // channel or about to be.
                            let b = match queue.pop_front() {
                                Some(b) => Some(b),
                                None => rx.recv().ok(),
                            };
                            if let Some(b) = b {
                                reap(q, &b, v, tx_port, &mut errors);
                                let _ = spare_tx.send(b);
                            }
                        })?;
                        let c = &shared.counters[q];
                        if let Some((_, heartbeat, _)) = gpu_ref.queue_state(q) {
                            c.kernel_heartbeat.set(heartbeat as u64);
                        }
                        c.in_flight_bursts.set(gpu_ref.in_flight(q) as u64);
                    }
                    if work > 0 {
                        idle_since = None;
                        continue;
                    }
                    if finished_ingest && (0..nq).all(|q| gpu_ref.in_flight(q) == 0) {
                        return Ok(());
                    }
                    if failed.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    // Bounded wait for the last bursts once the input is done.
                    if finished_ingest {
                        let t = *idle_since.get_or_insert_with(std::time::Instant::now);
                        if t.elapsed() > Duration::from_secs(10) {
                            anyhow::bail!(
                                "GPU queues did not finish their last bursts within 10 s"
                            );
                        }
                    }
                    std::hint::spin_loop();
                }
            })();
            if r.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            (r, errors)
        });

        // Ingest (this thread).
        let mut errors = Vec::new();
        let r = (|| -> anyhow::Result<()> {
            let mut building: Vec<Burst> = (0..nq)
                .map(|_| Burst::with_capacity(burst, burst * 2048))
                .collect();
            // When each queue's partial burst got its first frame: a partial burst leaves after
            // DRAIN (as l2fwd drains its TX buffers) or when the input goes quiet, so a slow
            // input still sees its frames classified, and a fast one sends full bursts.
            const DRAIN: Duration = Duration::from_micros(100);
            let mut first_at: Vec<Option<std::time::Instant>> = vec![None; nq];
            let mut rx = Burst::with_capacity(burst, burst * 2048);
            let mut meta = crate::meta::PacketMeta::default();
            let mut done = vec![false; ports.rx.len()];
            let submit = |q: usize, b: &mut Burst| -> anyhow::Result<()> {
                if b.is_empty() {
                    return Ok(());
                }
                loop {
                    match gpu_ref.submit(q, b) {
                        Ok(_) => {
                            let fresh = spare_rx
                                .try_recv()
                                .unwrap_or_else(|_| Burst::with_capacity(burst, burst * 2048));
                            let full = std::mem::replace(b, fresh);
                            b.clear();
                            // Sent before anything else takes the queue's lock (flush does in
                            // graph mode): the completion thread may be waiting for this burst
                            // inside a poll of that queue.
                            if let Err(e) = to_reap[q].send(full) {
                                anyhow::bail!("queue {q}: completion thread gone ({e})");
                            }
                            gpu_ref.flush(q)?;
                            return Ok(());
                        }
                        Err(SubmitError::RingFull { .. })
                            if on_full == crate::config::OnFull::Wait =>
                        {
                            // The completion thread frees slots; give it the core if shared.
                            gpu_ref.flush(q)?;
                            if failed.load(Ordering::Relaxed) {
                                anyhow::bail!("queue {q}: completion thread failed");
                            }
                            std::thread::yield_now();
                        }
                        Err(SubmitError::RingFull { .. }) => {
                            shared.counters[q].drops[DropReason::RingFull as usize]
                                .add(b.len() as u64);
                            b.clear();
                            return Ok(());
                        }
                        Err(SubmitError::TooLarge { .. }) => {
                            shared.counters[q].drops[DropReason::TooLong as usize]
                                .add(b.len() as u64);
                            b.clear();
                            return Ok(());
                        }
                        Err(e) => anyhow::bail!("queue {q}: {e}"),
                    }
                }
            };
            'outer: while !done.iter().all(|d| *d) {
                publish_reload(gpu_ref, &mut gpu_generation)?;
                if failed.load(Ordering::Relaxed) {
                    break;
                }
                let mut got = 0usize;
                for (pi, port) in ports.rx.iter_mut().enumerate() {
                    if done[pi] {
                        continue;
                    }
                    if shared.stop.load(Ordering::Relaxed) {
                        break 'outer;
                    }
                    rx.clear();
                    match port.rx_burst(&mut rx, burst) {
                        Ok(RxStatus::End) => done[pi] = true,
                        Ok(RxStatus::Idle) => {}
                        Ok(RxStatus::Frames(_)) => {}
                        Err(e) => {
                            errors.push(format!("{}: {e}", port.name()));
                            done[pi] = true;
                        }
                    }
                    got += rx.len();
                    shared
                        .rx_total
                        .fetch_add(rx.len() as u64, Ordering::Relaxed);
                    for (d, frame) in rx.frames() {
                        let (q, verdict) = p.steering.steer(frame, &mut meta, nq);
                        let c = &shared.counters[q];
                        c.rx_frames.add(1);
                        c.rx_bytes.add(d.len as u64);
                        if let Some(reason) = verdict {
                            c.drops[reason as usize].add(1);
                            continue;
                        }
                        if frame.len() > slot_cap {
                            c.drops[DropReason::TooLong as usize].add(1);
                            continue;
                        }
                        if building[q].len() >= burst
                            || building[q].data.len() + frame.len() > slot_cap
                        {
                            submit(q, &mut building[q])?;
                            first_at[q] = None;
                        }
                        let mut dd = *d;
                        dd.port = pi as u16;
                        dd.queue = q as u16;
                        building[q].push(frame, dd);
                        first_at[q].get_or_insert_with(std::time::Instant::now);
                    }
                }
                for (q, (b, first)) in building.iter_mut().zip(first_at.iter_mut()).enumerate() {
                    let full = b.len() >= burst;
                    let stale = first.is_some_and(|t| t.elapsed() >= DRAIN);
                    if !b.is_empty() && (full || got == 0 || stale) {
                        submit(q, b)?;
                        *first = None;
                    }
                }
            }
            for (q, b) in building.iter_mut().enumerate() {
                submit(q, b)?;
            }
            Ok(())
        })();
        if r.is_err() {
            failed.store(true, Ordering::Relaxed);
        }
        ingest_done.store(true, Ordering::Release);
        drop(to_reap);
        let completion = completion.join().unwrap_or_else(|_| {
            (
                Err(anyhow::anyhow!("GPU completion thread panicked")),
                Vec::new(),
            )
        });
        ((r, errors), completion)
    });
    let (ingest_r, mut errors) = ingest_result;
    let (completion_r, completion_errors) = completion;
    errors.extend(completion_errors);
    ingest_r?;
    completion_r?;
    ports.tx = tx_port;
    gpu.shutdown()?;
    if let Some(t) = ports.tx.as_mut() {
        if let Err(e) = t.flush() {
            errors.push(format!("{}: {e}", t.name()));
        }
    }
    let mut s = summarize(
        &shared.counters,
        &p.pipeline,
        start.elapsed(),
        &p.choice,
        errors,
    );
    s.port_counters = ports
        .rx
        .iter()
        .map(|port| (port.name().to_string(), port.port_counters()))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    Ok(s)
}
