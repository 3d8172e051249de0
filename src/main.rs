//! `pktwarp`: the CLI and daemon.

use clap::{Parser, Subcommand};

mod cmd;

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
    /// Run the CPU and GPU executors on the same input and compare every packet.
    Verify(cmd::verify::Args),
    /// GPU benchmarks: stage throughput, end to end, latency.
    Bench(cmd::bench::Args),
}

fn main() {
    // Before anything else: a SIGHUP while the daemon loads its config and rules (seconds with a
    // large rule set) must not kill it; it is noted and acted on once the control plane runs.
    if let Err(e) = pipeline::control::hold_sighup() {
        eprintln!("pktwarp: warning: cannot handle SIGHUP: {e}");
    }
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Run(_)) {
        pipeline::control::release_sighup();
    }
    cmd::init_logging(cli.log_json);
    let result = match cli.command {
        Command::Run(a) => cmd::run::run(a),
        Command::Validate(a) => cmd::validate::run(a),
        Command::Parse(a) => cmd::parse::run(a),
        Command::Fronthaul(a) => cmd::fronthaul::run(a),
        Command::Classify(a) => cmd::classify::run(a),
        Command::Verify(a) => cmd::verify::run(a),
        Command::Bench(a) => cmd::bench::run(a),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("pktwarp: error: {e:#}");
            std::process::exit(2);
        }
    }
}
