//! pktwarp as a library: the CLI's subcommands ([`cli::main_with`]) for a binary that embeds
//! pktwarp with stages of its own. The data path itself is the `pipeline` crate.

pub mod cli;
pub mod cmd;
