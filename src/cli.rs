//! The `pktwarp` command line, as a library function: a binary of your own runs every pktwarp
//! subcommand (`run`, `validate`, ...) with its own stages registered, e.g.
//!
//! ```no_run
//! let mut stages = pipeline::stage::StageRegistry::default();
//! // stages.register("my_stage", std::sync::Arc::new(MyStageFactory))?;
//! pktwarp::cli::main_with(stages);
//! ```
//!
//! Subcommands are added here (the `Command` enum) with their module under `src/cmd/`.

use std::ffi::OsString;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use pipeline::stage::StageRegistry;

use crate::cmd;

#[derive(Parser)]
#[command(
    name = "pktwarp",
    version,
    about = "GPU packet processing: parse, filter, forward"
)]
struct Cli {
    /// Log as JSON lines instead of human-readable text (level via RUST_LOG).
    #[arg(long, global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon on a YAML config.
    Run(cmd::run::Args),
    /// Check a YAML config and its rule files without running.
    Validate(cmd::validate::Args),
    /// Print one JSON line per frame of a capture with the parsed fields and status.
    Parse(cmd::parse::Args),
    /// Decode the O-RAN U-plane PRBs of a capture: one JSON line per PRB.
    Fronthaul(cmd::fronthaul::Args),
    /// Classify a header trace against a rule file (ClassBench / dpdk-test-acl format or YAML).
    Classify(cmd::classify::Args),
    /// Write a seeded ClassBench-like IPv6 rule set and trace (dpdk-test-acl --ipv6 format).
    AclGen(cmd::acl_gen::Args),
    /// Write a pcap of seeded connection traffic with churn (for the conntrack stage).
    FlowGen(cmd::flow_gen::Args),
    /// Run the CPU and GPU executors on the same input and compare every packet.
    Verify(cmd::verify::Args),
    /// GPU benchmarks: stage throughput, end to end, latency.
    Bench(cmd::bench::Args),
    /// Show (and with --emit write) the GPU kernel a config's pipeline runs.
    Kernels(cmd::kernels::Args),
    /// List the stages this binary knows (built-in and registered), from the stage registry.
    Stages(cmd::stages::Args),
}

/// Runs the subcommand named on this process's command line, with `registry`'s stages usable
/// in configs (`- custom: { name: ... }`), and exits with its status: 0 ok, 1 the run reported
/// errors or writing stdout failed, 2 it could not run (the error is printed).
pub fn main_with(registry: StageRegistry) -> ! {
    std::process::exit(run_with(&registry, std::env::args_os()))
}

/// [`main_with`] on given arguments (`args[0]` is the program name, as in `argv`), returning the
/// exit status instead of exiting. Help and usage errors exit here, as clap does.
pub fn run_with(registry: &StageRegistry, args: impl IntoIterator<Item = OsString>) -> i32 {
    let args: Vec<OsString> = args.into_iter().collect();
    // The stages of the applications pktwarp ships, under config keys of their own: before any
    // config is read.
    pktwarp_fronthaul::register();
    // Before anything else: a SIGHUP while the daemon loads its config and rules (seconds with a
    // large rule set) must not kill it; it is noted and acted on once the control plane runs.
    if let Err(e) = pipeline::control::hold_sighup() {
        errln!("pktwarp: warning: cannot handle SIGHUP: {e}");
    }
    // Help and errors name the binary that embeds pktwarp (`syn-guard run`), not `pktwarp`.
    let bin = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pktwarp".into());
    let matches = Cli::command().bin_name(bin.clone()).get_matches_from(args);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if !matches!(cli.command, Command::Run(_)) {
        pipeline::control::release_sighup();
    }
    cmd::init_logging(cli.log_json);
    let result = match cli.command {
        Command::Run(a) => cmd::run::run_with(a, registry),
        Command::Validate(a) => cmd::validate::run_with(a, registry),
        Command::Parse(a) => cmd::parse::run(a),
        Command::Fronthaul(a) => cmd::fronthaul::run(a),
        Command::Classify(a) => cmd::classify::run(a),
        Command::AclGen(a) => cmd::acl_gen::run(a),
        Command::FlowGen(a) => cmd::flow_gen::run(a),
        Command::Verify(a) => cmd::verify::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Kernels(a) => cmd::kernels::run_with(a, registry),
        Command::Stages(a) => cmd::stages::run_with(a, registry),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            errln!("{bin}: error: {e:#}");
            if e.downcast_ref::<cmd::StdoutFailed>().is_some() {
                cmd::EXIT_STDOUT
            } else {
                2
            }
        }
    }
}
