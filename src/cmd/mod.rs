//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> Result<exit code>`.

pub mod acl_gen;
pub mod bench;
pub mod classify;
pub mod fronthaul;
pub mod kernels;
pub mod parse;
pub mod progress;
pub mod run;
pub mod stages;
pub mod validate;
pub mod verify;

/// Logs go to stderr: human-readable by default, JSON with `--log-json`; level from RUST_LOG
/// (default `info`). Colours only on a terminal (and not with `NO_COLOR` set): a log file,
/// journald or a pipe gets plain `key=value` text that grep and log shippers read.
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
        .with_writer(std::io::stderr);
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
