//! `pktwarp bench` (not yet implemented).

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<i32> {
    anyhow::bail!("`pktwarp bench` is not implemented yet")
}
