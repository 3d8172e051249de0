//! Runs a config end to end: opens the ports, builds the pipeline and steering, picks the
//! executor, runs it, and returns a summary. `pktwarp run` is a thin shell around this, and so is
//! any app built on the library.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::burst::Burst;
use crate::config::{Config, ExecutorKind};
use crate::counters::QueueCounters;
use crate::executor::cpu::{self, CpuRunSpec, CpuShared};
use crate::port::gen::GenRx;
use crate::port::pcap::{PcapRx, PcapTx};
use crate::port::{RxPort, RxStatus, TxPort};
use crate::stage::{self, Pipeline};
use crate::steer::Steering;
use crate::verdict::DropReason;

/// The opened ports of a config.
pub struct OpenPorts {
    pub rx: Vec<Box<dyn RxPort>>,
    pub rx_names: Vec<String>,
    pub tx: Option<Box<dyn TxPort>>,
    /// The DPDK devices behind `rx` (same order; `None` for other backends) and behind `tx`,
    /// for the CPU executor's zero-copy path.
    #[cfg(feature = "dpdk")]
    pub dpdk_rx: Vec<Option<crate::port::dpdk::DpdkPort>>,
    #[cfg(feature = "dpdk")]
    pub dpdk_tx: Option<crate::port::dpdk::DpdkPort>,
}

/// Opens every port of the config: receiving sides in config order (their index is the `port`
/// of their frames), and the output port's transmit side.
pub fn open_ports(cfg: &Config) -> anyhow::Result<OpenPorts> {
    let mut rx: Vec<Box<dyn RxPort>> = Vec::new();
    let mut rx_names = Vec::new();
    let mut tx: Option<Box<dyn TxPort>> = None;
    #[cfg(feature = "dpdk")]
    let (mut dpdk_rx, mut dpdk_tx) = (Vec::new(), None);
    let out_name = cfg.output.as_ref().map(|o| o.port.value.clone());
    for p in &cfg.ports {
        let p = &p.value;
        let id = rx.len() as u16;
        if let Some(pc) = &p.pcap {
            if let Some(r) = &pc.rx {
                let mut o = r.clone();
                o.path = cfg.resolve(&o.path);
                rx.push(Box::new(
                    PcapRx::open(&o, id).with_context(|| format!("port `{}`", p.name))?,
                ));
                rx_names.push(p.name.clone());
                #[cfg(feature = "dpdk")]
                dpdk_rx.push(None);
            }
            if let Some(t) = &pc.tx {
                if out_name.as_deref() == Some(p.name.as_str()) {
                    let mut o = t.clone();
                    o.path = cfg.resolve(&o.path);
                    tx = Some(Box::new(
                        PcapTx::create(&o).with_context(|| format!("port `{}`", p.name))?,
                    ));
                }
            }
        }
        if let Some(g) = &p.gen {
            let mut o = g.clone();
            if let Some(t) = &mut o.trace {
                *t = cfg.resolve(t);
            }
            rx.push(Box::new(
                GenRx::new(&o, id).with_context(|| format!("port `{}`", p.name))?,
            ));
            rx_names.push(p.name.clone());
            #[cfg(feature = "dpdk")]
            dpdk_rx.push(None);
        }
        #[cfg(feature = "dpdk")]
        if let Some(d) = &p.dpdk {
            // One device for both directions: RX polls every queue, TX (when this is the
            // output port) uses queue 0. The device closes when both handles are dropped.
            let port = crate::port::dpdk::DpdkPort::open(d, id)
                .with_context(|| format!("port `{}`", p.name))?;
            if out_name.as_deref() == Some(p.name.as_str()) {
                tx = Some(Box::new(
                    port.tx(0).with_context(|| format!("port `{}`", p.name))?,
                ));
                dpdk_tx = Some(port.clone());
            }
            rx.push(Box::new(
                port.rx(&[]).with_context(|| format!("port `{}`", p.name))?,
            ));
            rx_names.push(p.name.clone());
            dpdk_rx.push(Some(port));
        }
    }
    Ok(OpenPorts {
        rx,
        rx_names,
        tx,
        #[cfg(feature = "dpdk")]
        dpdk_rx,
        #[cfg(feature = "dpdk")]
        dpdk_tx,
    })
}

/// Builds the runnable pipeline of a config (rule files are read and compiled here).
pub fn build_pipeline(cfg: &Config) -> anyhow::Result<Pipeline> {
    let stages: Vec<_> = cfg.pipeline.iter().map(|s| s.value.clone()).collect();
    stage::build(&stages, |p| cfg.resolve(p))
}

/// Which executor runs, and why.
#[derive(Clone, Debug)]
pub struct ExecutorChoice {
    pub name: &'static str,
    pub reason: String,
}

/// Resolves `executor.kind`: `auto` takes the GPU when it is usable, else the CPU, and says why.
pub fn choose_executor(kind: ExecutorKind, device: u32) -> anyhow::Result<ExecutorChoice> {
    match kind {
        ExecutorKind::Cpu => Ok(ExecutorChoice {
            name: "cpu",
            reason: "executor.kind is cpu".into(),
        }),
        ExecutorKind::Gpu | ExecutorKind::Auto => {
            let probe = crate::executor::gpu::probe(device);
            match (kind, probe) {
                (_, Ok(dev)) => Ok(ExecutorChoice {
                    name: "gpu",
                    reason: format!(
                        "GPU {} usable: {} (sm_{}{}, {} SMs)",
                        dev.index,
                        dev.name,
                        dev.compute_capability.0,
                        dev.compute_capability.1,
                        dev.multiprocessors
                    ),
                }),
                (ExecutorKind::Gpu, Err(why)) => {
                    anyhow::bail!("executor.kind is gpu but no GPU is usable: {why}")
                }
                (_, Err(why)) => Ok(ExecutorChoice {
                    name: "cpu",
                    reason: format!("executor.kind is auto and no GPU is usable ({why})"),
                }),
            }
        }
    }
}

/// Totals over all queues, for the final summary.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct QueueSummary {
    pub queue: usize,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub passed: u64,
    pub mirrored: u64,
    pub to_host: u64,
    pub tx_frames: u64,
    pub drops: Vec<(String, u64)>,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    pub executor: String,
    pub executor_reason: String,
    pub elapsed_s: f64,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub mpps: f64,
    pub gbps: f64,
    pub drops: Vec<(String, u64)>,
    pub parse_errors: Vec<(String, u64)>,
    pub queues: Vec<QueueSummary>,
    /// Rules with hits, (rule index, hits), most hit first, at most 20.
    pub top_rules: Vec<(u32, u64)>,
    pub acl_default: u64,
    /// Frames and bytes counted by each `count` stage (stage index, frames, bytes).
    pub counted: Vec<(usize, u64, u64)>,
    pub errors: Vec<String>,
    /// Each receiving port's own counters (DPDK ethdev stats and xstats), by port.
    pub port_counters: Vec<(String, Vec<(String, u64)>)>,
    /// How frames moved from input to output: `copy` (into bursts and out again) or
    /// `zero_copy` (DPDK in and out: mbufs passed along, see executor::cpu::zero_copy).
    pub forwarding: String,
}

pub fn summarize(
    counters: &[Arc<QueueCounters>],
    pipeline: &Pipeline,
    elapsed: Duration,
    choice: &ExecutorChoice,
    errors: Vec<String>,
) -> Summary {
    let mut s = Summary {
        executor: choice.name.to_string(),
        executor_reason: choice.reason.clone(),
        elapsed_s: elapsed.as_secs_f64(),
        errors,
        forwarding: "copy".into(),
        ..Summary::default()
    };
    let mut drops = [0u64; DropReason::COUNT];
    let mut parse = vec![0u64; crate::counters::PARSE_STATUS_SLOTS];
    let mut rules = vec![0u64; pipeline.rule_count()];
    let mut counted: Vec<(usize, u64, u64)> = pipeline
        .stages
        .iter()
        .enumerate()
        .filter(|(_, st)| matches!(st, stage::Stage::Count))
        .map(|(i, _)| (i, 0, 0))
        .collect();
    for (q, c) in counters.iter().enumerate() {
        let qs = QueueSummary {
            queue: q,
            rx_frames: c.rx_frames.get(),
            rx_bytes: c.rx_bytes.get(),
            passed: c.passed.get(),
            mirrored: c.mirrored.get(),
            to_host: c.to_host.get(),
            tx_frames: c.tx_frames.get(),
            drops: DropReason::ALL
                .iter()
                .filter(|r| c.drop_count(**r) > 0)
                .map(|r| (r.name().to_string(), c.drop_count(*r)))
                .collect(),
        };
        s.rx_frames += qs.rx_frames;
        s.rx_bytes += qs.rx_bytes;
        s.tx_frames += qs.tx_frames;
        s.tx_bytes += c.tx_bytes.get();
        s.acl_default += c.acl_default.get();
        for r in DropReason::ALL {
            drops[r as usize] += c.drop_count(r);
        }
        for (i, p) in c.parse_status.iter().enumerate() {
            parse[i] += p.get();
        }
        for (i, h) in c.rule_hits.iter().enumerate() {
            rules[i] += h.get();
        }
        for (si, f, b) in counted.iter_mut() {
            *f += c.stage_frames[*si].get();
            *b += c.stage_bytes[*si].get();
        }
        s.queues.push(qs);
    }
    s.drops = DropReason::ALL
        .iter()
        .map(|r| (r.name().to_string(), drops[*r as usize]))
        .collect();
    s.parse_errors = parse
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| (crate::meta::ParseStatus::describe(i as u16), *n))
        .collect();
    let mut top: Vec<(u32, u64)> = rules
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| (i as u32, *n))
        .collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    top.truncate(20);
    s.top_rules = top;
    s.counted = counted;
    if s.elapsed_s > 0.0 {
        s.mpps = s.rx_frames as f64 / s.elapsed_s / 1e6;
        s.gbps = s.rx_bytes as f64 * 8.0 / s.elapsed_s / 1e9;
    }
    s
}

/// A config ready to run.
pub struct Prepared {
    pub cfg: Config,
    pub pipeline: Arc<Pipeline>,
    pub steering: Arc<Steering>,
    pub choice: ExecutorChoice,
}

/// Loads everything a run needs, failing before any port is opened.
pub fn prepare(cfg: Config) -> anyhow::Result<Prepared> {
    let pipeline = Arc::new(build_pipeline(&cfg)?);
    let steering = Arc::new(Steering::from_config(&cfg)?);
    let choice = choose_executor(cfg.executor.kind, cfg.executor.gpu.device)?;
    Ok(Prepared {
        cfg,
        pipeline,
        steering,
        choice,
    })
}

impl Prepared {
    pub fn cpu_spec(&self) -> CpuRunSpec {
        let q = &self.cfg.queues;
        CpuRunSpec {
            queues: q.count as usize,
            burst: q.burst as usize,
            ring_slots: q.ring_slots as usize,
            on_full: q.on_full,
            pipeline: Arc::clone(&self.pipeline),
            steering: Arc::clone(&self.steering),
            observer: None,
        }
    }
}

/// Runs a prepared config on the CPU executor to the end of its input (or until `shared.stop`).
pub fn run_cpu(p: &Prepared, shared: &Arc<CpuShared>, ports: OpenPorts) -> Summary {
    let spec = p.cpu_spec();
    #[cfg(feature = "dpdk")]
    if let Some(mut s) = run_cpu_zero_copy(p, &spec, shared, &ports) {
        // The copying handles were never polled; dropping them (and the plan's clones) closes
        // the devices.
        drop(ports);
        s.forwarding = "zero_copy".into();
        return s;
    }
    let out = cpu::run(&spec, shared, ports.rx, ports.tx);
    summarize_cpu_run(p, shared, out)
}

/// The summary of a CPU executor run (either forwarding path): the shared counters, the run's
/// time and errors, and its ports' own counters.
fn summarize_cpu_run(p: &Prepared, shared: &CpuShared, out: cpu::RunOutcome) -> Summary {
    let mut s = summarize(
        &shared.counters,
        &p.pipeline,
        out.elapsed,
        &p.choice,
        out.errors,
    );
    s.port_counters = out.port_counters;
    s
}

/// The zero-copy path (DPDK in and out, see `cpu::zero_copy`) when the ports allow it: logs
/// which forwarding path runs and why, and returns `None` to let the copying path run.
#[cfg(feature = "dpdk")]
fn run_cpu_zero_copy(
    p: &Prepared,
    spec: &CpuRunSpec,
    shared: &Arc<CpuShared>,
    ports: &OpenPorts,
) -> Option<Summary> {
    let why_not: Option<String> = match (ports.dpdk_rx.as_slice(), &ports.dpdk_tx) {
        ([Some(rx)], Some(tx)) => cpu::zero_copy::zero_copy_refusal(spec, rx, tx),
        ([Some(_)], None) => Some("the output port is not a DPDK port (or there is none)".into()),
        ([_], _) => Some("the input port is not a DPDK port".into()),
        (many, _) => Some(format!("{} input ports (zero-copy takes one)", many.len())),
    };
    if let Some(why) = why_not {
        tracing::info!(event = "forwarding_path", path = "copy", reason = %why, "forwarding by copy: {why}");
        return None;
    }
    let (rx, tx) = match (ports.dpdk_rx.first(), &ports.dpdk_tx) {
        (Some(Some(rx)), Some(tx)) => (rx, tx),
        _ => return None,
    };
    tracing::info!(
        event = "forwarding_path",
        path = "zero_copy",
        input = %rx.setup().name,
        output = %tx.setup().name,
        queues = spec.queues,
        "forwarding zero-copy: DPDK {} -> DPDK {}, mbufs passed along, one worker per queue",
        rx.setup().name,
        tx.setup().name
    );
    Some(summarize_cpu_run(
        p,
        shared,
        cpu::zero_copy::run(spec, shared, rx, tx),
    ))
}

/// The GPU executor's view of the config's pipeline: `parse`, `acl`, `count` in this order (each
/// optional), which is what the CUDA driver runs.
fn gpu_pipeline_flags(p: &Pipeline) -> anyhow::Result<(bool, bool, bool)> {
    let names = p.stage_names();
    let order = ["parse", "acl", "count"];
    let mut last = 0;
    for n in &names {
        let pos = order.iter().position(|o| o == n).unwrap_or(usize::MAX);
        if pos == usize::MAX || pos < last {
            anyhow::bail!(
                "the gpu executor runs the stages parse, acl, count in this order (each at most \
                 once); this pipeline is {}",
                names.join(" -> ")
            );
        }
        last = pos + 1;
    }
    Ok((
        names.contains(&"parse"),
        names.contains(&"acl"),
        names.contains(&"count"),
    ))
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
