//! `pktwarp validate CONFIG`: loads the config and every rule file it names, compiles them, and
//! reports problems (file, line, column, key) without opening any port.

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// YAML config to check.
    pub config: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let cfg = pipeline::config::load(&args.config)?;
    let ports = cfg.ports.len();
    let prepared = pipeline::daemon::prepare(cfg)?;
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
