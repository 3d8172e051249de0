//! pktwarp as a library: the CLI's subcommands ([`cli::main_with`]) for a binary that embeds
//! pktwarp with stages of its own. The data path itself is the `pipeline` crate.

/// `eprintln!` that never panics: a line stderr does not take is dropped and counted
/// (`pipeline::control::logs`), so a closed log pipe or a full disk cannot end a command.
macro_rules! errln {
    ($($arg:tt)*) => {
        pipeline::internal::control::logs::stderr_line(format_args!($($arg)*))
    };
}

/// `println!` that never panics, in a function returning `anyhow::Result`: the line goes to stdout
/// through `cmd::to_stdout`; a stdout that does not take it (`> /dev/full`, a closed pipe) is
/// the command's error (`cmd::StdoutFailed`: exit 1, naming `what`).
macro_rules! outln {
    ($what:expr; $($arg:tt)*) => {
        $crate::cmd::to_stdout($what, |w| {
            writeln!(w, $($arg)*)
        })?
    };
}

/// [`outln!`] where no error can be returned (a report's detail lines): a line stdout does not
/// take is dropped; the command's closing line, written with [`outln!`], then fails on the
/// same stdout and says so.
macro_rules! outln_or_drop {
    ($what:expr; $($arg:tt)*) => {
        let _ = $crate::cmd::to_stdout($what, |w| {
            writeln!(w, $($arg)*)
        });
    };
}

pub mod cli;
pub mod cmd;
