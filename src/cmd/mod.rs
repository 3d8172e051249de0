//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> Result<exit code>`.

pub mod acl_gen;
pub mod bench;
pub mod classify;
pub mod flow_gen;
pub mod fronthaul;
pub mod kernels;
pub mod parse;
pub mod progress;
pub mod run;
pub mod stages;
pub mod validate;
pub mod verify;

/// `--set KEY=VALUE` (repeatable): changes to the config file for this run, applied before it is
/// read (`pipeline::config::Override`).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ConfigSet {
    /// Change one config value for this run: a dotted key path and a YAML value, e.g.
    /// `--set executor.kind=gpu --set ports.0.gen.count=1000000` (repeatable; a reload applies
    /// it again).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_override)]
    pub set: Vec<pipeline::config::Override>,
}

fn parse_override(s: &str) -> Result<pipeline::config::Override, String> {
    pipeline::config::Override::parse(s)
}

impl ConfigSet {
    /// Loads `path` with these changes.
    pub fn load(
        &self,
        path: &std::path::Path,
    ) -> Result<pipeline::config::Config, pipeline::config::ConfigError> {
        pipeline::config::load_with(path, &self.set)
    }
}

/// Exit status when writing stdout failed (`> /dev/full`, a closed pipe): the command did its
/// work (a run's data path included) but its output was lost; the error says why.
pub const EXIT_STDOUT: i32 = 1;

/// Writing a command's output to stdout failed; `what` names the output (`the summary`).
#[derive(Debug)]
pub struct StdoutFailed {
    pub what: &'static str,
    pub source: std::io::Error,
}

impl std::fmt::Display for StdoutFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "writing {} to stdout failed: {}", self.what, self.source)
    }
}

// No `source()`: the message already ends with the I/O error, `{:#}` would repeat it.
impl std::error::Error for StdoutFailed {}

/// Writes `what` to stdout with `write` and flushes it; any error is a [`StdoutFailed`] (never
/// the panic of `println!`).
pub fn to_stdout(
    what: &'static str,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), StdoutFailed> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    write(&mut out)
        .and_then(|()| out.flush())
        .map_err(|source| StdoutFailed { what, source })
}

/// Logs go to stderr: human-readable by default, JSON with `--log-json`; level from RUST_LOG
/// (default `info`). Colours only on a terminal (and not with `NO_COLOR` set): a log file,
/// journald or a pipe gets plain `key=value` text that grep and log shippers read. A line stderr
/// does not take is dropped and counted (`pipeline::control::logs`), never a panic.
pub fn init_logging(json: bool) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(use_colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR"),
        ))
        .with_writer(|| pipeline::internal::control::logs::Stderr)
        // Its report of a failed write is an `eprintln!`, which panics; the writer counts them.
        .log_internal_errors(false);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// Colour escapes in the human-readable log: on a terminal, unless `NO_COLOR` is set to
/// anything but the empty string (no-color.org).
fn use_colour(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::use_colour;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_colour(true, None));
        assert!(use_colour(true, Some("".into())));
        assert!(!use_colour(true, Some("1".into())));
        assert!(!use_colour(false, None));
    }
}
