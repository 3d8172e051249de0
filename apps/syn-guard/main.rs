//! syn-guard: a SYN-flood scrubber written on the pktwarp library, in the spirit of DPDK's
//! examples: open ports, build a pipeline with one stage of our own, run the CPU executor.
//!
//! Every TCP SYN is counted per source address in a small table of counters; once a source has
//! sent more than `--max-syn` SYNs, its further SYNs are dropped (reason `stage_drop`). All other
//! traffic passes to the output capture.
//!
//!     syn-guard --input capture.pcap --output clean.pcap --max-syn 100
//!     syn-guard --gen 1000000 --output /tmp/clean.pcap

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use clap::Parser;
use pipeline::config::OnFull;
use pipeline::executor::cpu::{self, CpuRunSpec, CpuShared};
use pipeline::meta::PacketMeta;
use pipeline::port::gen::{GenOptions, GenRx};
use pipeline::port::pcap::{PcapRx, PcapRxOptions, PcapTx, PcapTxOptions};
use pipeline::port::{RxPort, TxPort};
use pipeline::stage::{CustomStage, Pipeline, Stage};
use pipeline::steer::Steering;
use pipeline::verdict::{Action, Verdict};

#[derive(Parser)]
struct Args {
    /// Capture to scrub (pcap or pcapng).
    #[arg(long, conflicts_with = "gen")]
    input: Option<PathBuf>,
    /// Instead of a capture, this many generated frames (20% SYNs).
    #[arg(long)]
    gen: Option<u64>,
    /// Where passed frames go.
    #[arg(long)]
    output: Option<PathBuf>,
    /// SYNs a source may send before its SYNs are dropped.
    #[arg(long, default_value_t = 100)]
    max_syn: u32,
    /// Worker threads (RX queues).
    #[arg(long, default_value_t = 2)]
    queues: u16,
}

const TCP_SYN: u16 = 0x02;
const TCP_ACK: u16 = 0x10;
const BUCKETS: usize = 1 << 16;

/// The stage: SYN counters per source, hashed into 64K buckets (a collision only makes the
/// guard stricter for the sources sharing a bucket).
struct SynGuard {
    max_syn: u32,
    syns: Vec<AtomicU32>,
}

impl CustomStage for SynGuard {
    fn process(&self, _frame: &[u8], m: &PacketMeta, v: &mut Verdict) {
        let is_syn = m.ip_proto == 6 && m.tcp_flags & (TCP_SYN | TCP_ACK) == TCP_SYN;
        if !is_syn {
            return;
        }
        let h = m
            .src_ip
            .iter()
            .fold(0u32, |h, w| h.rotate_left(7) ^ w.wrapping_mul(0x9E37_79B1));
        let n = self.syns[h as usize % BUCKETS].fetch_add(1, Ordering::Relaxed);
        if n >= self.max_syn {
            v.action = Action::Drop;
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rx: Box<dyn RxPort> = match (&args.input, args.gen) {
        (Some(path), _) => Box::new(PcapRx::open(&PcapRxOptions::new(path), 0)?),
        (None, Some(count)) => {
            let opts = GenOptions {
                count: Some(count),
                tcp_flags: TCP_SYN as u8,
                ..GenOptions::default()
            };
            Box::new(GenRx::new(&opts, 0)?)
        }
        (None, None) => anyhow::bail!("give --input CAPTURE or --gen N"),
    };
    let tx: Option<Box<dyn TxPort>> = match &args.output {
        Some(p) => Some(Box::new(PcapTx::create(&PcapTxOptions::new(p))?)),
        None => None,
    };
    let guard = SynGuard {
        max_syn: args.max_syn,
        syns: (0..BUCKETS).map(|_| AtomicU32::new(0)).collect(),
    };
    let pipeline = Pipeline::new(vec![
        Stage::Parse,
        Stage::Custom(Arc::new(guard)),
        Stage::Count,
    ]);
    let spec = CpuRunSpec {
        queues: args.queues as usize,
        burst: 32,
        ring_slots: 256,
        on_full: OnFull::Wait,
        pipeline: Arc::new(pipeline),
        steering: Arc::new(Steering::rss_only(args.queues)?),
        observer: None,
    };
    let shared = CpuShared::new(&spec);
    let out = cpu::run(&spec, &shared, vec![rx], tx);
    let (mut rx_frames, mut passed, mut dropped) = (0, 0, 0);
    for c in &shared.counters {
        rx_frames += c.rx_frames.get();
        passed += c.passed.get();
        dropped += c.drop_count(pipeline::verdict::DropReason::StageDrop);
    }
    println!(
        "{rx_frames} frames in {:.3} s: {passed} passed, {dropped} SYNs dropped",
        out.elapsed.as_secs_f64()
    );
    for e in &out.errors {
        eprintln!("syn-guard: {e}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_syns_of_a_source_past_the_limit_only() {
        let g = SynGuard {
            max_syn: 2,
            syns: (0..BUCKETS).map(|_| AtomicU32::new(0)).collect(),
        };
        let mut syn = PacketMeta {
            ip_proto: 6,
            tcp_flags: TCP_SYN,
            ..PacketMeta::default()
        };
        syn.src_ip[0] = 0x0a00_0001;
        let verdicts: Vec<Action> = (0..4)
            .map(|_| {
                let mut v = Verdict::PASS;
                g.process(&[], &syn, &mut v);
                v.action
            })
            .collect();
        assert_eq!(
            verdicts,
            [Action::Pass, Action::Pass, Action::Drop, Action::Drop]
        );
        let mut synack = syn;
        synack.tcp_flags = TCP_SYN | TCP_ACK;
        let mut v = Verdict::PASS;
        g.process(&[], &synack, &mut v);
        assert_eq!(v.action, Action::Pass, "SYN-ACKs are not counted");
        let mut other = syn;
        other.src_ip[0] = 0x0a00_0002;
        let mut v = Verdict::PASS;
        g.process(&[], &other, &mut v);
        assert_eq!(v.action, Action::Pass, "another source has its own budget");
    }
}
