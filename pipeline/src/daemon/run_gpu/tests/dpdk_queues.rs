//! The GPU host side on a DPDK port (cargo feature `dpdk`, a real EAL on net_null, an endless
//! source) with 1, 2 and 4 RX queues and as many queues: one receive thread per RX queue, named
//! `pw-in0q<queue>`, each feeding its own queue; stopped from outside, every frame received is
//! accounted for (received = counted + drops) on every queue.

use super::*;

fn dpdk_yaml(nq: usize) -> String {
    format!(
        "ports:\n  - name: wire\n    dpdk:\n      eal_args: [--no-huge, --no-pci, --no-shconf, -m, \"512\", \
         --file-prefix=pwgq{pid}, -l, \"0\", \"--log-level=*:warning\"]\n      \
         vdev: \"net_null_g{nq},size=64\"\n      mempool_size: 4095\n      rx_queues: {nq}\n      tx_queues: {nq}\n\
         queues: {{ count: {nq}, burst: 32, ring_slots: 4 }}\n{INLINE}",
        pid = std::process::id()
    )
}

/// The names of this process's threads that start with `pw-in`.
fn receive_thread_names() -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for t in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Ok(c) = std::fs::read_to_string(t.path().join("comm")) {
            if c.starts_with("pw-in") {
                out.insert(c.trim().to_string());
            }
        }
    }
    out
}

#[test]
fn dpdk_rx_queues_each_feed_their_own_gpu_queue() {
    for nq in [1usize, 2, 4] {
        let p = prepared(&dpdk_yaml(nq));
        let dev = CpuStandIn::new(&p, 4, 1);
        let shared = cpu::CpuShared::new(&p.cpu_spec());
        let want: std::collections::BTreeSet<String> =
            (0..nq).map(|q| format!("pw-in0q{q}")).collect();
        let (r, s, seen) = std::thread::scope(|sc| {
            let watcher = sc.spawn(|| {
                // Until every queue has frames and its thread is seen (10 s at most), then stop.
                let t = Instant::now();
                let mut seen = receive_thread_names();
                while t.elapsed() < std::time::Duration::from_secs(10)
                    && (seen != want || shared.counters.iter().any(|c| c.rx_frames.get() == 0))
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    seen = receive_thread_names();
                }
                shared.stop.store(true, Ordering::Relaxed);
                seen
            });
            let (r, s) = run_host(&p, &dev, &shared, None);
            (r, s, watcher.join().expect("watcher"))
        });
        r.expect("host run");
        assert_eq!(seen, want, "{nq} queues: receive threads");
        assert_eq!(s.receive_threads, nq, "{nq} queues");
        let counted: u64 = s.counted.iter().map(|c| c.1).sum();
        let drops: u64 = s.drops.iter().map(|d| d.1).sum();
        assert!(s.rx_frames > 0);
        assert_eq!(
            s.rx_frames,
            counted + drops,
            "{nq} queues: received = counted + drops"
        );
        for q in &s.queues {
            assert!(q.rx_frames > 0, "{nq} queues: queue {} receives", q.queue);
        }
        // Received per burst into host memory: staged, and the summary says why.
        let gi = s.gpu_ingest.first().expect("the port's GPU ingest path");
        assert!(gi.reason.contains("received burst by burst"), "{gi:?}");
    }
}
