//! Receive threads on the GPU host side: a port split by queue (`pcap`, `gen` with a fixed set
//! of distinct frames) is received by one thread per queue, which gives each queue the
//! frames, counts and TX order that one thread steering the whole port gives it, on either
//! executor.

use super::*;

fn with_threads(yaml: &str, mode: &str) -> String {
    yaml.replace("rx_threads: MODE", &format!("rx_threads: {mode}"))
}

/// Runs `yaml` (its queues' `rx_threads: MODE`) per port and per queue on the CPU executor and
/// on the GPU host side: the same counts and, per queue, the same TX order everywhere; the
/// receive threads are one per port or one per queue.
fn same_everywhere(yaml: &str, queues: usize) {
    let pp = prepared(&with_threads(yaml, "per_port"));
    let pq = prepared(&with_threads(yaml, "per_queue"));
    let reference = run_cpu_ref(&pp, true);
    assert_eq!(reference.s.receive_threads, 1);
    let want = by_queue(&pp, &reference.tx);
    assert!(want.iter().all(|q| !q.is_empty()), "every queue transmits");
    let runs = [
        ("cpu per_queue", run_cpu_ref(&pq, true), queues),
        ("gpu per_port", run_fake(&pp, 2, 1, true), 1),
        ("gpu per_queue", run_fake(&pq, 2, 1, true), queues),
    ];
    for (what, r, threads) in &runs {
        assert_eq!(r.s.receive_threads, *threads, "{what}: receive threads");
        assert_same_counts(&r.s, &reference.s, what);
        let got = by_queue(&pp, &r.tx);
        for q in 0..queues {
            assert_same_frames(&got[q], &want[q], &format!("{what}: queue {q} TX order"));
        }
    }
}

#[test]
fn pcap_per_queue_threads_count_and_send_as_one_per_port() {
    let input = crate::testdata::multi_proto_pcap();
    let yaml = format!(
        "ports:\n  - name: in\n    pcap: {{ rx: {{ path: {}, loops: 4 }} }}\n\
         queues: {{ count: 3, burst: 8, ring_slots: 4, rx_threads: MODE }}\n{INLINE}",
        input.display()
    );
    same_everywhere(&yaml, 3);
}

/// A generator whose distinct frames are pooled (a fixed flow set), with malformed frames
/// (built per frame) among them.
const GEN_POOLED: &str = "  - name: g\n    gen: { count: 5000, seed: 5, size: imix, malformed_ratio: 0.03, \
    flows: { flow_count: 300, ipv6_share: 0.2 } }\n";

#[test]
fn gen_per_queue_threads_count_and_send_as_one_per_port() {
    let yaml = format!(
        "ports:\n{GEN_POOLED}queues: {{ count: 3, burst: 16, ring_slots: 4, rx_threads: MODE }}\n{INLINE}"
    );
    same_everywhere(&yaml, 3);
}

#[test]
fn a_queue_thread_moves_what_overflows_a_slot_to_the_next_and_drops_what_never_fits() {
    let yaml = format!(
        "ports:\n{GEN_POOLED}queues: {{ count: 2, burst: 16, rx_threads: MODE }}\n{INLINE}"
    );
    let run = |mode: &str| {
        let p = prepared(&with_threads(&yaml, mode));
        let mut dev = CpuStandIn::new(&p, 8, 0);
        // A few small frames a slot: a receive call overflows it often; 576 and 1514 B
        // frames never fit.
        dev.slot_cap = 700;
        let shared = cpu::CpuShared::new(&p.cpu_spec());
        let (r, s) = run_host(&p, &dev, &shared, None);
        r.expect("host run");
        s
    };
    let (one, each) = (run("per_port"), run("per_queue"));
    assert_eq!((one.receive_threads, each.receive_threads), (1, 2));
    let too_long = |s: &Summary| s.drops.iter().find(|(n, _)| n == "too_long").map_or(0, |d| d.1);
    assert!(too_long(&each) > 0, "{:?}", each.drops);
    assert_same_counts(&each, &one, "slot overflow");
    let handled: u64 = each
        .queues
        .iter()
        .map(|q| q.passed + q.mirrored + q.to_host)
        .sum();
    let dropped: u64 = each.drops.iter().map(|(_, n)| n).sum();
    assert_eq!(handled + dropped, 5000);
}
