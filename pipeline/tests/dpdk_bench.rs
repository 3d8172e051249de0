//! Forwarding throughput of pktwarp's DPDK port on virtual devices, run by
//! scripts/bench-dpdk.sh in a release build next to `dpdk-testpmd --forward-mode=io` on the
//! same devices (ignored in a plain test run: it takes seconds and wants a quiet CPU).
//!
//! Same shape as testpmd's io forwarding: one thread, two ports, paired (RX 0 -> TX 1 and
//! RX 1 -> TX 0), bursts of 32. Three ways, one test each per device:
//! - `zc`: the zero-copy path (`rx_mbufs` -> `tx_mbufs`: mbuf pointers passed along, as testpmd
//!   io does), no stages: the like-for-like comparison with testpmd io;
//! - `zc_stages`: the zero-copy path with the pipeline's `parse` and `count` stages run on every
//!   frame in place (`Pipeline::run_frames`), dropped frames freed before TX;
//! - `copy`: the copying path (`rx_burst` copies each frame into a `Burst`, `tx_burst` into a
//!   fresh mbuf), for reference.
//!
//! Prints `PKTWARP_MPPS <device> <Mpps>` (frames received per wall second) and
//! `PKTWARP_MPPS_CPU <device> <Mpps>` (per second this thread was on a CPU), and
//! `PKTWARP_FWD <device> <received> <sent>`.

#![cfg(feature = "dpdk")]

mod dpdk_common;

use std::time::{Duration, Instant};

use pipeline::burst::Burst;
use pipeline::counters::QueueCounters;
use pipeline::internal::port::dpdk::{DpdkPort, DpdkPortOptions, DpdkRx, DpdkTx, MbufBurst};
use pipeline::meta::PacketMeta;
use pipeline::port::{RxPort, RxStatus, TxPort};
use pipeline::stage::{Pipeline, Stage};
use pipeline::verdict::Verdict;

/// CPU time of the calling thread (ns).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid clock id and out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn seconds() -> f64 {
    std::env::var("PKTWARP_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0)
}

fn opts(devargs: &str) -> DpdkPortOptions {
    // The script pins this process to one CPU and names it as the only lcore.
    let lcore = std::env::var("PKTWARP_BENCH_LCORE").unwrap_or_else(|_| "0".into());
    let mut o = DpdkPortOptions::vdev(
        &[
            "--no-huge",
            "--no-pci",
            "--no-shconf",
            "-m",
            "512",
            "--log-level=*:warning",
        ],
        devargs,
    );
    o.eal_args
        .push(format!("--file-prefix=pwbench{}", std::process::id()));
    o.eal_args.push("-l".into());
    o.eal_args.push(lcore);
    // A DPDK without its drivers installed (scripts/cpu-peer-bundle.sh): load them from there.
    if let Ok(d) = std::env::var("PW_DPDK_PMDS") {
        o.eal_args.push("-d".into());
        o.eal_args.push(d);
    }
    o.mempool_size = 8191;
    o
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    ZeroCopy,
    ZeroCopyStages,
    Copy,
}

/// One forwarding thread's state for one direction-independent loop.
struct Fwd {
    way: Way,
    pipeline: Pipeline,
    counters: QueueCounters,
    metas: Vec<PacketMeta>,
    verdicts: Vec<Verdict>,
    /// One per direction, as testpmd's io forwarding has one array per stream.
    mbufs: [MbufBurst; 2],
    burst: Burst,
}

impl Fwd {
    /// One RX burst from `rx` forwarded to `tx` (direction `dir`): (received, sent).
    fn step(&mut self, dir: usize, rx: &mut DpdkRx, tx: &mut DpdkTx) -> (u64, u64) {
        if self.way == Way::Copy {
            self.burst.clear();
            return match rx.rx_burst(&mut self.burst, 32).expect("rx") {
                RxStatus::Frames(n) => (
                    n as u64,
                    tx.tx_burst(&mut self.burst.frames().map(|(_, f)| f))
                        .expect("tx") as u64,
                ),
                _ => (0, 0),
            };
        }
        let mbufs = &mut self.mbufs[dir];
        match rx.rx_mbufs(mbufs, 32).expect("rx") {
            RxStatus::Frames(_) => {
                let n = mbufs.len() as u64;
                if self.way == Way::ZeroCopyStages {
                    self.pipeline.run_frames(
                        mbufs.frames(),
                        &mut self.metas,
                        &mut self.verdicts,
                        &self.counters,
                    );
                    let v = &self.verdicts;
                    mbufs.retain(|i| v[i].action.forwards());
                }
                (n, tx.tx_mbufs(mbufs).expect("tx").sent as u64)
            }
            _ => (0, 0),
        }
    }
}

/// Runs the paired forward for the configured time; `prime` frames are sent into each port
/// first (net_ring only carries what was put in it).
fn forward(dev: &str, a: &str, b: &str, prime: usize, way: Way) {
    let pa = DpdkPort::open(&opts(a), 0).expect("port a");
    let pb = DpdkPort::open(&opts(b), 1).expect("port b");
    let (mut rxa, mut txa) = (pa.rx(&[]).expect("rx a"), pa.tx(0).expect("tx a"));
    let (mut rxb, mut txb) = (pb.rx(&[]).expect("rx b"), pb.tx(0).expect("tx b"));
    if prime > 0 {
        let f = dpdk_common::frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 64, 0);
        let sa = txa
            .tx_burst(&mut std::iter::repeat_n(f.as_slice(), prime))
            .expect("prime a");
        let sb = txb
            .tx_burst(&mut std::iter::repeat_n(f.as_slice(), prime))
            .expect("prime b");
        assert_eq!((sa, sb), (prime, prime));
    }
    let stages = vec![Stage::Parse, Stage::Count];
    let mut fwd = Fwd {
        way,
        counters: QueueCounters::new(stages.len(), 0),
        pipeline: Pipeline::new(stages),
        metas: Vec::with_capacity(32),
        verdicts: Vec::with_capacity(32),
        mbufs: [MbufBurst::new(), MbufBurst::new()],
        burst: Burst::with_capacity(32, 32 * 2048),
    };
    // Warm up (caches, mempool caches, page faults).
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(300) {
        fwd.step(0, &mut rxa, &mut txb);
        fwd.step(1, &mut rxb, &mut txa);
    }
    let total = Duration::from_secs_f64(seconds());
    let (mut rx, mut sent) = (0u64, 0u64);
    let cpu0 = thread_cpu_ns();
    let start = Instant::now();
    // The clock is read every 4096 bursts (a clock_gettime costs ~0.5 us on this VM).
    while start.elapsed() < total {
        for _ in 0..2048 {
            let (r1, s1) = fwd.step(0, &mut rxa, &mut txb);
            let (r2, s2) = fwd.step(1, &mut rxb, &mut txa);
            rx += r1 + r2;
            sent += s1 + s2;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = (thread_cpu_ns() - cpu0) as f64 / 1e9;
    // Per wall-clock second, and per second this thread was on a CPU: the second does not
    // depend on how busy the (shared) machine was. Frames received, as testpmd's RX-packets.
    println!("PKTWARP_MPPS {dev} {:.3}", rx as f64 / secs / 1e6);
    println!("PKTWARP_MPPS_CPU {dev} {:.3}", rx as f64 / cpu / 1e6);
    println!("PKTWARP_FWD {dev} {rx} {sent}");
    if way == Way::ZeroCopyStages {
        // Every frame went through the stages (parse + count), and the stages ran on the
        // frames actually received.
        let c = &fwd.counters;
        let parsed = c.stage_frames[0].get();
        println!(
            "PKTWARP_STAGES {dev} parsed={parsed} counted={} drops={}",
            c.stage_frames[1].get(),
            c.total_drops()
        );
        assert!(parsed >= rx, "parse ran on every frame");
    }
    if way != Way::ZeroCopyStages || fwd.counters.total_drops() == 0 {
        assert!(sent * 100 >= rx * 99, "forwarded {sent} of {rx}");
    }
}

#[test]
#[ignore = "benchmark: run by scripts/bench-dpdk.sh"]
fn bench_net_null_zc() {
    forward("net_null", "net_null0", "net_null1", 0, Way::ZeroCopy);
}

#[test]
#[ignore = "benchmark: run by scripts/bench-dpdk.sh"]
fn bench_net_null_zc_stages() {
    forward("net_null", "net_null0", "net_null1", 0, Way::ZeroCopyStages);
}

#[test]
#[ignore = "benchmark: run by scripts/bench-dpdk.sh"]
fn bench_net_null_copy() {
    forward("net_null", "net_null0", "net_null1", 0, Way::Copy);
}

// testpmd --tx-first puts one burst of 32 into each port; do the same.
#[test]
#[ignore = "benchmark: run by scripts/bench-dpdk.sh"]
fn bench_net_ring_zc() {
    forward("net_ring", "net_ring0", "net_ring1", 32, Way::ZeroCopy);
}

#[test]
#[ignore = "benchmark: run by scripts/bench-dpdk.sh"]
fn bench_net_ring_zc_stages() {
    forward(
        "net_ring",
        "net_ring0",
        "net_ring1",
        32,
        Way::ZeroCopyStages,
    );
}

#[test]
#[ignore = "benchmark: run by scripts/bench-dpdk.sh"]
fn bench_net_ring_copy() {
    forward("net_ring", "net_ring0", "net_ring1", 32, Way::Copy);
}
