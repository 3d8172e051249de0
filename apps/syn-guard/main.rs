//! `syn-guard`: the pktwarp subcommands (`run`, `validate`, ...) with the `syn_guard` stage
//! registered; see apps/syn-guard/syn-guard.yaml.

fn main() {
    pktwarp::cli::main_with(syn_guard::registry())
}
