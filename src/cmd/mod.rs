//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> Result<exit code>`.

pub mod acl_gen;
pub mod bench;
pub mod classify;
pub mod fronthaul;
pub mod kernels;
pub mod parse;
pub mod progress;
pub mod run;
pub mod validate;
pub mod verify;

/// Logs go to stderr: human-readable by default, JSON with `--log-json`; level from RUST_LOG
/// (default `info`).
pub fn init_logging(json: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}
