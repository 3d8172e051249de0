//! `pktwarp validate CONFIG`: every check `pktwarp run` makes before it starts, without running:
//! loads the config and every rule file it names and compiles them, opens and reads every input
//! (pcap RX files, gen traces), checks that every pcap TX path could be created (nothing is
//! written) and that `metrics.listen` can be bound. Problems name file, line, column and key.

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// YAML config to check.
    pub config: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    run_with(args, &pipeline::stage::StageRegistry::default())
}

/// [`run`] with the `custom:` stages of `registry` usable in the config.
pub fn run_with(args: Args, registry: &pipeline::stage::StageRegistry) -> anyhow::Result<i32> {
    let cfg = pipeline::config::load(&args.config)?;
    pipeline::config::preflight(&cfg)?;
    let ports = cfg.ports.len();
    let prepared = pipeline::daemon::prepare_with(cfg, registry)?;
    println!(
        "{}: ok ({} ports, {} queues, stages: {}, {} ACL rules, executor would be {}: {})",
        args.config.display(),
        ports,
        prepared.cfg.queues.count,
        prepared.pipeline.stage_names().join(" -> "),
        prepared.pipeline.rule_count(),
        prepared.choice.name,
        prepared.choice.reason
    );
    Ok(0)
}
