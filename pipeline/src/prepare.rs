//! Everything a run needs before any port opens: the pipeline, the steering, the executor.

use std::sync::Arc;

use crate::config::{Config, ExecutorKind};
use crate::executor::cpu::CpuRunSpec;
use crate::stage::{self, Pipeline, StageRegistry};
use crate::steer::Steering;

/// Builds the runnable pipeline of a config (rule files are read and compiled here).
pub fn build_pipeline(cfg: &Config) -> anyhow::Result<Pipeline> {
    build_pipeline_with(cfg, &StageRegistry::default())
}

/// [`build_pipeline`] with the `custom:` stages a binary registered (an unknown name is a
/// config error naming its line and the registered names).
pub fn build_pipeline_with(cfg: &Config, registry: &StageRegistry) -> anyhow::Result<Pipeline> {
    crate::config::check_custom_stages(cfg, registry)?;
    let stages: Vec<_> = cfg.pipeline.iter().map(|s| s.value.clone()).collect();
    let ports = cfg.port_names();
    stage::build_for(&stages, |p| cfg.resolve(p), registry, Some(&ports))
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

/// A config ready to run.
pub struct Prepared {
    pub cfg: Config,
    pub pipeline: Arc<Pipeline>,
    pub steering: Arc<Steering>,
    pub choice: ExecutorChoice,
}

/// Loads everything a run needs, failing before any port is opened.
pub fn prepare(cfg: Config) -> anyhow::Result<Prepared> {
    prepare_with(cfg, &StageRegistry::default())
}

/// [`prepare`] with the `custom:` stages a binary registered.
pub fn prepare_with(cfg: Config, registry: &StageRegistry) -> anyhow::Result<Prepared> {
    let pipeline = Arc::new(build_pipeline_with(&cfg, registry)?);
    let steering = Arc::new(cfg.build_steering()?);
    // A stage without CUDA keeps the pipeline off the GPU: an error for `gpu`, the CPU for
    // `auto` (the reason is the choice's, logged at start).
    let refusal = pipeline.gpu_refusal();
    let refusal = match cfg.executor.kind {
        ExecutorKind::Auto => refusal.or_else(|| pipeline.gpu_caution()),
        _ => refusal,
    };
    let choice = match (cfg.executor.kind, refusal) {
        (ExecutorKind::Gpu, Some(why)) => anyhow::bail!("executor.kind is gpu but {why}"),
        (ExecutorKind::Auto, Some(why)) => ExecutorChoice {
            name: "cpu",
            reason: format!("executor.kind is auto and {why}"),
        },
        _ => choose_executor(cfg.executor.kind, cfg.executor.gpu.device)?,
    };
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
            verify_sample: crate::config::verify::sample_of(&self.cfg.verify),
            rx_threads: self.rx_threads(),
        }
    }

    /// The receive threads' layout (`queues.rx_threads`, `queues.cores`), both executors.
    pub fn rx_threads(&self) -> crate::executor::cpu::RxThreads {
        let q = &self.cfg.queues;
        crate::executor::cpu::RxThreads {
            per_queue: q.rx_threads == crate::config::RxThreadsMode::PerQueue,
            tx_per_queue: q.tx_threads == crate::config::TxThreadsMode::PerQueue,
            cores: q.cores.clone().unwrap_or_default(),
            one_per_port: self.pipeline.orders_across_queues().map(|name| {
                format!(
                    "stage `{name}` keeps one state for every queue, so the port feeds the \
                     queues in its own order"
                )
            }),
        }
    }
}
