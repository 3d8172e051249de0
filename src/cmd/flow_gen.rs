//! `pktwarp flow-gen`: writes a pcap of connection traffic (`pktwarp_flow::testgen`): interleaved
//! TCP conversations (handshakes, data both ways, FIN and RST teardowns, abandoned ones), UDP
//! request / response, ICMP echo and ICMP errors about them, fragments and ARP, over IPv4 and
//! IPv6, some VLAN-tagged, with record times that advance and sometimes idle long enough for
//! flows to age out (churn). Input for the `conntrack` stage on either executor
//! (scripts/gpu-conntrack-check.sh). Same arguments, same file.

use anyhow::Context;
use pipeline::internal::port::pcap::{CaptureWriter, WriteFormat};
use pktwarp_flow::testgen::{generate, GenConfig};
use std::path::PathBuf;

/// Most frames one capture may have (the generator holds them in memory).
const MAX_FRAMES: usize = 20_000_000;

#[derive(clap::Args)]
pub struct Args {
    /// Output pcap file.
    #[arg(long)]
    out: PathBuf,
    /// Frames to write (about: the last conversations are cut).
    #[arg(long, default_value_t = 100_000)]
    frames: usize,
    /// Conversations open at once.
    #[arg(long, default_value_t = 64)]
    concurrent: usize,
    /// Distinct client addresses (10.0.0.0/16 and 2001:db8::/64; servers 10.100.0.0/16).
    #[arg(long, default_value_t = 1000)]
    clients: u32,
    /// Percent of gaps between frames that are idles of 40 s (flows age out).
    #[arg(long, default_value_t = 1)]
    idle_pct: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    check(&a)?;
    let frames = generate(&GenConfig {
        seed: a.seed,
        frames: a.frames,
        concurrent: a.concurrent,
        clients: a.clients,
        idle_pct: a.idle_pct,
        ..GenConfig::default()
    });
    let mut w = CaptureWriter::create(&a.out, WriteFormat::Pcap, 65535)
        .with_context(|| format!("creating {}", a.out.display()))?;
    // Record times from the epoch, as the generator's receive times (ns), so a replay gives
    // the conntrack stage the same clock on every run.
    for f in &frames {
        w.write_frame(&f.bytes, f.bytes.len() as u32, f.time_ns)
            .with_context(|| format!("writing {}", a.out.display()))?;
    }
    w.flush()
        .with_context(|| format!("writing {}", a.out.display()))?;
    super::to_stdout("the result", |out| {
        writeln!(out, "{}: {} frames", a.out.display(), frames.len())
    })?;
    Ok(0)
}

fn check(a: &Args) -> anyhow::Result<()> {
    if a.frames == 0 || a.frames > MAX_FRAMES {
        anyhow::bail!("--frames {}: must be 1..={MAX_FRAMES}", a.frames);
    }
    if a.concurrent == 0 || a.concurrent > 65_536 {
        anyhow::bail!("--concurrent {}: must be 1..=65536", a.concurrent);
    }
    if a.clients == 0 || a.clients > 65_535 {
        anyhow::bail!("--clients {}: must be 1..=65535", a.clients);
    }
    if a.idle_pct > 100 {
        anyhow::bail!("--idle-pct {}: must be 0..=100", a.idle_pct);
    }
    Ok(())
}
