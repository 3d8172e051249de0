//! pktwarp as a library: the CLI's subcommands ([`cli::main_with`]) for a binary that embeds
//! pktwarp with stages of its own. The data path itself is the `pipeline` crate.

/// `eprintln!` that never panics: a line stderr does not take is dropped and counted
/// (`pipeline::control::logs`), so a closed log pipe or a full disk cannot end a command.
macro_rules! errln {
    ($($arg:tt)*) => {
        pipeline::control::logs::stderr_line(format_args!($($arg)*))
    };
}

pub mod cli;
pub mod cmd;
