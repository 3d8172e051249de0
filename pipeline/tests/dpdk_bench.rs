//! Forwarding throughput of pktwarp's DPDK port on virtual devices, run by
//! scripts/bench-dpdk.sh in a release build next to `dpdk-testpmd --forward-mode=io` on the
//! same devices (ignored in a plain test run: it takes seconds and wants a quiet CPU).
//!
//! Same shape as testpmd's io forwarding: one thread, two ports, paired (RX 0 -> TX 1 and
//! RX 1 -> TX 0), bursts of 32. pktwarp copies every frame out of its mbuf into a burst and
//! back into a fresh mbuf on TX (its ports hand frames to the pipeline); testpmd passes mbuf
//! pointers along. Prints one `PKTWARP_MPPS <device> <value>` line.

#![cfg(feature = "dpdk")]

mod dpdk_common;

use std::time::{Duration, Instant};

use pipeline::burst::Burst;
use pipeline::port::dpdk::{DpdkPort, DpdkPortOptions};
use pipeline::port::{RxPort, RxStatus, TxPort};

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
    o.mempool_size = 8191;
    o
}

/// Runs the paired forward for the configured time; `prime` frames are sent into each port
/// first (net_ring only carries what was put in it).
fn forward(dev: &str, a: &str, b: &str, prime: usize) {
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
    let mut burst = Burst::with_capacity(32, 32 * 2048);
    let step = |rx: &mut dyn RxPort, tx: &mut dyn TxPort, burst: &mut Burst| -> u64 {
        burst.clear();
        match rx.rx_burst(burst, 32).expect("rx") {
            RxStatus::Frames(_) => tx
                .tx_burst(&mut burst.frames().map(|(_, f)| f))
                .expect("tx") as u64,
            _ => 0,
        }
    };
    // Warm up (caches, mempool caches, page faults).
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(300) {
        step(&mut rxa, &mut txb, &mut burst);
        step(&mut rxb, &mut txa, &mut burst);
    }
    let total = Duration::from_secs_f64(seconds());
    let mut fwd = 0u64;
    let cpu0 = thread_cpu_ns();
    let start = Instant::now();
    while start.elapsed() < total {
        for _ in 0..256 {
            fwd += step(&mut rxa, &mut txb, &mut burst);
            fwd += step(&mut rxb, &mut txa, &mut burst);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = (thread_cpu_ns() - cpu0) as f64 / 1e9;
    // Per wall-clock second, and per second this thread was on a CPU: the second does not
    // depend on how busy the (shared) machine was.
    println!("PKTWARP_MPPS {dev} {:.3}", fwd as f64 / secs / 1e6);
    println!("PKTWARP_MPPS_CPU {dev} {:.3}", fwd as f64 / cpu / 1e6);
}

#[test]
#[ignore = "benchmark: run by scripts/bench-dpdk.sh"]
fn bench_net_null() {
    forward("net_null", "net_null0", "net_null1", 0);
}

#[test]
#[ignore = "benchmark: run by scripts/bench-dpdk.sh"]
fn bench_net_ring() {
    // testpmd --tx-first puts one burst of 32 into each port; do the same.
    forward("net_ring", "net_ring0", "net_ring1", 32);
}
