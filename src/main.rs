//! `pktwarp`: the CLI and daemon. The subcommands are in `src/cli.rs` (the library, so a binary
//! of your own can run them with its own stages: `pktwarp::cli::main_with`).

fn main() {
    pktwarp::cli::main_with(pipeline::stage::StageRegistry::default())
}
