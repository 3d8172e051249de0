//! Runs a config end to end: opens the ports, builds the pipeline and steering, picks the
//! executor, runs it, and returns a summary. `pktwarp run` is a thin shell around this, and so is
//! any app built on the library.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::config::{Config, ExecutorKind};
use crate::counters::QueueCounters;
use crate::executor::cpu::{self, CpuRunSpec, CpuShared};
use crate::port::gen::GenRx;
use crate::port::pcap::{PcapRx, PcapTx};
use crate::port::{RxPort, TxPort};
use crate::stage::{self, Pipeline};
use crate::steer::Steering;
use crate::verdict::DropReason;

/// The opened ports of a config.
pub struct OpenPorts {
    pub rx: Vec<Box<dyn RxPort>>,
    pub rx_names: Vec<String>,
    pub tx: Option<Box<dyn TxPort>>,
}

/// Opens every port of the config: receiving sides in config order (their index is the `port`
/// of their frames), and the output port's transmit side.
pub fn open_ports(cfg: &Config) -> anyhow::Result<OpenPorts> {
    let mut rx: Vec<Box<dyn RxPort>> = Vec::new();
    let mut rx_names = Vec::new();
    let mut tx: Option<Box<dyn TxPort>> = None;
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
        }
    }
    Ok(OpenPorts { rx, rx_names, tx })
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
pub fn choose_executor(kind: ExecutorKind) -> anyhow::Result<ExecutorChoice> {
    match kind {
        ExecutorKind::Cpu => Ok(ExecutorChoice {
            name: "cpu",
            reason: "executor.kind is cpu".into(),
        }),
        ExecutorKind::Gpu | ExecutorKind::Auto => {
            let probe = crate::executor::gpu::probe(0);
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
    let choice = choose_executor(cfg.executor.kind)?;
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
    let out = cpu::run(&spec, shared, ports.rx, ports.tx);
    summarize(
        &shared.counters,
        &p.pipeline,
        out.elapsed,
        &p.choice,
        out.errors,
    )
}
