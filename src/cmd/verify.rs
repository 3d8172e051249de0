//! `pktwarp verify` (not yet implemented).

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<i32> {
    anyhow::bail!("`pktwarp verify` is not implemented yet")
}
