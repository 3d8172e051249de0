//! `pktwarp validate CONFIG`: every check `pktwarp run` makes before it starts, without running:
//! loads the config and every rule file it names and compiles them, opens and reads every input
//! (pcap RX files, gen traces), checks that every pcap TX path could be created (nothing is
//! written) and that `metrics.listen` can be bound. Problems name file, line, column and key.

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// YAML config to check.
    pub config: PathBuf,
    #[command(flatten)]
    pub set: super::ConfigSet,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    run_with(args, &pipeline::stage::StageRegistry::default())
}

/// [`run`] with the `custom:` stages of `registry` usable in the config.
pub fn run_with(args: Args, registry: &pipeline::stage::StageRegistry) -> anyhow::Result<i32> {
    let cfg = args.set.load(&args.config)?;
    pipeline::daemon::preflight(&cfg)?;
    let ports = cfg.ports.len();
    if cfg.executor.kind == pipeline::config::ExecutorKind::Gpu {
        // The pipeline must be one the GPU executor can generate a kernel for (stage order,
        // CUDA for every stage) whether or not this machine has a GPU; without one, that is said,
        // not an error: the config is checked for the machine it is meant for.
        let p = pipeline::daemon::build_pipeline_with(&cfg, registry)?;
        let image = pipeline::daemon::image_for_pipeline(&p)
            .map_err(|e| anyhow::anyhow!("{}: executor gpu: {e:#}", args.config.display()))?;
        pipeline::internal::executor::gpu::check_options(&cfg.executor.gpu, &image)
            .map_err(|e| anyhow::anyhow!("{}: {e:#}", args.config.display()))?;
        if let Err(why) = pipeline::internal::executor::gpu::probe(cfg.executor.gpu.device) {
            super::to_stdout("the result", |w| {
                writeln!(
                    w,
                    "{}: ok for the gpu executor ({} ports, {} queues, stages: {}, {:?} \
                     template), but no GPU is usable on this machine: {why}",
                    args.config.display(),
                    ports,
                    cfg.queues.count,
                    image.pipeline,
                    image.template
                )
            })?;
            return Ok(0);
        }
    }
    let prepared = pipeline::daemon::prepare_with(cfg, registry)?;
    super::to_stdout("the result", |w| {
        writeln!(
            w,
            "{}: ok ({} ports, {} queues, stages: {}, {} ACL rules, executor would be {}: {})",
            args.config.display(),
            ports,
            prepared.cfg.queues.count,
            prepared.pipeline.stage_names().join(" -> "),
            prepared.pipeline.rule_count(),
            prepared.choice.name,
            prepared.choice.reason
        )?;
        for line in pipeline::internal::stage::inspect::validate_lines(&prepared.pipeline) {
            writeln!(w, "{line}")?;
        }
        Ok(())
    })?;
    Ok(0)
}
