//! A DPDK port received by one thread per RX queue (`queues.rx_threads: per_queue`, the
//! default) on the CPU executor, through a real EAL: net_ring (TX queue q loops back to RX
//! queue q) with 1, 2 and 4 RX queues, RX queue q primed with 40 * (q + 1) frames of ONE flow.
//! Each RX queue's frames reach the pipeline queue of its number (software RSS, what one thread
//! per port does, would put the one flow on one queue), every frame is accounted for
//! (received = counted + drops), and the receive threads are one per queue, named
//! `pw-in<port>q<queue>`. Refusals (queue counts that differ, software steering rules) keep one
//! thread per port and say why; asking a vdev for more queues than it has names the key. The same
//! split on memif between two processes: each of the client's TX queues reaches its own queue.
//! One TX thread per queue: queue q's frames leave on TX queue q of the output port, in order;
//! a config giving a port fewer TX queues than queues is refused naming `dpdk.tx_queues`.

#![cfg(feature = "dpdk")]

mod dpdk_common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use pipeline::internal::executor::cpu::{self, CpuRunSpec, CpuShared, RxThreads};
use pipeline::internal::port::dpdk::DpdkPort;
use pipeline::internal::ring::OnFull;
use pipeline::internal::steer::Steering;
use pipeline::port::{RxPort, TxPort};
use pipeline::stage::{Pipeline, Stage};

fn spec(queues: usize, per_queue: bool) -> CpuRunSpec {
    CpuRunSpec {
        queues,
        burst: 32,
        ring_slots: 8,
        on_full: OnFull::Wait,
        pipeline: Arc::new(Pipeline::new(vec![Stage::Parse, Stage::Count])),
        steering: Arc::new(Steering::rss_only(queues as u16).expect("steering")),
        observer: None,
        verify_sample: 0,
        rx_threads: RxThreads {
            per_queue,
            cores: Vec::new(),
            one_per_port: None,
            tx_per_queue: true,
        },
    }
}

/// Frames RX queue `q` is primed with.
fn primed(q: usize) -> u64 {
    40 * (q as u64 + 1)
}

/// A net_ring port with `nq` RX and TX queues, each RX queue primed (through its TX queue)
/// with [`primed`] frames of one UDP flow; the port ends 300 ms after its last frame.
fn primed_ring(name: &str, nq: u16) -> DpdkPort {
    let mut o = dpdk_common::vdev(name);
    o.rx_queues = nq;
    o.tx_queues = nq;
    o.idle_end_ms = Some(300);
    let port = DpdkPort::open(&o, 0).expect("net_ring port");
    for q in 0..nq {
        let frames: Vec<Vec<u8>> = (0..primed(q as usize) as u32)
            .map(|i| dpdk_common::frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000, 80, i))
            .collect();
        let mut tx = port.tx(q).expect("tx");
        for chunk in frames.chunks(32) {
            let n = tx
                .tx_burst(&mut chunk.iter().map(|f| f.as_slice()))
                .expect("tx");
            assert_eq!(n, chunk.len(), "queue {q}: the ring took the burst");
        }
    }
    port
}

/// What a run did: each queue's received frames, the receive threads, and the names of this
/// process's `pw-in*` threads seen while it ran.
struct Ran {
    per_queue_rx: Vec<u64>,
    receive_threads: usize,
    names: BTreeSet<String>,
}

/// One run at a time: the thread names are read from the whole process (every test that
/// starts receive threads takes it).
static ONE_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(port: &DpdkPort, spec: &CpuRunSpec) -> Ran {
    let _one = ONE_RUN.lock().unwrap_or_else(|p| p.into_inner());
    let shared = CpuShared::new(spec);
    let rx: Vec<Box<dyn RxPort>> = vec![Box::new(port.rx(&[]).expect("rx"))];
    let mut names = BTreeSet::new();
    let out = std::thread::scope(|s| {
        let h = s.spawn(|| cpu::run(spec, &shared, rx, None));
        while !h.is_finished() {
            for t in std::fs::read_dir("/proc/self/task")
                .expect("tasks")
                .flatten()
            {
                if let Ok(c) = std::fs::read_to_string(t.path().join("comm")) {
                    if c.starts_with("pw-in") {
                        names.insert(c.trim().to_string());
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        h.join().expect("run")
    });
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let count_stage = 1;
    for (q, c) in shared.counters.iter().enumerate() {
        assert_eq!(
            c.rx_frames.get(),
            c.stage_frames[count_stage].get() + c.total_drops(),
            "queue {q}: received = counted + drops"
        );
    }
    Ran {
        per_queue_rx: shared.counters.iter().map(|c| c.rx_frames.get()).collect(),
        receive_threads: out.receive_threads,
        names,
    }
}

#[test]
fn each_rx_queue_has_its_own_thread_feeding_its_own_queue() {
    for nq in [1u16, 2, 4] {
        let port = primed_ring(&format!("net_ring_pq{nq}"), nq);
        let r = run(&port, &spec(nq as usize, true));
        let want: Vec<u64> = (0..nq as usize).map(primed).collect();
        assert_eq!(r.per_queue_rx, want, "{nq} queues: per-queue counts");
        assert_eq!(
            r.receive_threads, nq as usize,
            "{nq} queues: receive threads"
        );
        let names: BTreeSet<String> = (0..nq).map(|q| format!("pw-in0q{q}")).collect();
        assert_eq!(r.names, names, "{nq} queues: thread names");
        let c = port.counters();
        let rx = c
            .iter()
            .find(|(k, _)| k == "pktwarp_rx_frames")
            .map(|kv| kv.1);
        assert_eq!(rx, Some(want.iter().sum()), "{nq} queues: port counter");
    }
}

#[test]
fn one_thread_per_port_steers_the_one_flow_to_one_queue() {
    // The other layout, on the same input: software RSS puts the one flow on one queue, so
    // the per-queue counts above are the split's doing.
    let port = primed_ring("net_ring_pp4", 4);
    let r = run(&port, &spec(4, false));
    let total: u64 = (0..4).map(primed).sum();
    assert_eq!(r.receive_threads, 1);
    assert_eq!(r.per_queue_rx.iter().sum::<u64>(), total);
    assert_eq!(r.per_queue_rx.iter().filter(|n| **n > 0).count(), 1);
    assert_eq!(r.names, BTreeSet::from(["pw-in0".to_string()]));
}

#[test]
fn queue_counts_that_differ_keep_one_thread_and_say_why() {
    let port = primed_ring("net_ring_mis", 2);
    let steering = Arc::new(Steering::rss_only(4).expect("steering"));
    let mut rx = port.rx(&[]).expect("rx");
    let why = rx
        .split_by_queue(&steering, 4)
        .err()
        .expect("refused: 2 RX queues, 4 pipeline queues");
    assert!(
        why.contains("dpdk.rx_queues") && why.contains("queues.count"),
        "{why}"
    );
    // A handle on part of the queues is not split either.
    let mut part = port.rx(&[1]).expect("rx");
    let steering = Arc::new(Steering::rss_only(2).expect("steering"));
    let why = part.split_by_queue(&steering, 2).err().expect("refused");
    assert!(why.contains("[1]"), "{why}");
    // The whole port, as many pipeline queues: split.
    assert_eq!(
        rx.split_by_queue(&steering, 2).map(|q| q.len()).ok(),
        Some(2)
    );
}

#[test]
fn more_queues_than_the_vdev_has_is_an_error_naming_the_key() {
    let mut o = dpdk_common::vdev("net_ring_big");
    o.rx_queues = 64;
    o.tx_queues = 1;
    let e = DpdkPort::open(&o, 0).err().expect("net_ring has 16 queues");
    let e = e.to_string();
    assert!(e.contains("dpdk.rx_queues is 64"), "{e}");
    assert!(e.contains("at most"), "{e}");
}

const MEMIF_CHILD_ENV: &str = "PKTWARP_MEMIF_QUEUES_SOCKET";

/// The memif client, run only as the second process: sends [`primed`] frames of one flow on
/// each of its 2 TX queues (client TX queue q reaches the server's RX queue q), then stays
/// connected while the server reads them.
#[test]
#[ignore = "run by memif_rx_queues_between_two_processes as the second process"]
fn memif_queues_child() {
    let Ok(socket) = std::env::var(MEMIF_CHILD_ENV) else {
        return;
    };
    let mut o = dpdk_common::vdev(&format!("net_memif0,role=client,id=9,socket={socket}"));
    o.rx_queues = 2;
    o.tx_queues = 2;
    let port = DpdkPort::open(&o, 0).expect("memif client");
    assert!(port.wait_link_up(Duration::from_secs(10)), "client link up");
    for q in 0..2u16 {
        let frames: Vec<Vec<u8>> = (0..primed(q as usize) as u32)
            .map(|i| dpdk_common::frame(17, [10, 9, 0, 1], [10, 9, 0, 2], 7, 8, 90, i))
            .collect();
        let mut tx = port.tx(q).expect("tx");
        let mut off = 0;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while off < frames.len() && std::time::Instant::now() < deadline {
            off += tx
                .tx_burst(&mut frames[off..].iter().take(32).map(|f| f.as_slice()))
                .expect("tx");
        }
        assert_eq!(off, frames.len(), "queue {q}: every frame sent");
    }
    std::thread::sleep(Duration::from_secs(3));
}

#[test]
fn memif_rx_queues_between_two_processes() {
    let dir = dpdk_common::scratch("memif-queues");
    let socket = dir.join("memif.sock");
    let mut o = dpdk_common::vdev(&format!(
        "net_memif1,role=server,id=9,socket={}",
        socket.display()
    ));
    o.rx_queues = 2;
    o.tx_queues = 2;
    o.idle_end_ms = Some(1000);
    let port = DpdkPort::open(&o, 0).expect("memif server");
    let exe = std::env::current_exe().expect("test binary path");
    let child = std::process::Command::new(exe)
        .args(["--exact", "memif_queues_child", "--ignored", "--nocapture"])
        .env(MEMIF_CHILD_ENV, &socket)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the memif client process");
    assert!(
        port.wait_link_up(Duration::from_secs(10)),
        "memif peer connected"
    );
    let r = run(&port, &spec(2, true));
    let out = child.wait_with_output().expect("client process");
    assert!(
        out.status.success(),
        "client failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        r.per_queue_rx,
        vec![primed(0), primed(1)],
        "per-queue counts"
    );
    assert_eq!(r.receive_threads, 2);
    let names: BTreeSet<String> = (0..2).map(|q| format!("pw-in0q{q}")).collect();
    assert_eq!(r.names, names);
    let _ = std::fs::remove_dir_all(dir);
}

/// Frames RX queue `q` of the per-queue TX test is primed with: source address 10.0.0.(q+1),
/// the sequence number in the payload.
fn tagged(q: u16, i: u32) -> Vec<u8> {
    dpdk_common::frame(
        17,
        [10, 0, 0, q as u8 + 1],
        [10, 0, 0, 99],
        1000,
        2000,
        80,
        i,
    )
}

#[test]
fn each_queue_sends_on_its_own_tx_queue_of_the_output_port() {
    // Its receive threads are named as `run`'s are: not while another test reads the names.
    let _one = ONE_RUN.lock().unwrap_or_else(|p| p.into_inner());
    for nq in [1u16, 2, 4] {
        // Input: RX queue q primed with queue q's tagged frames (one receive thread per queue
        // feeds pipeline queue q).
        let mut o = dpdk_common::vdev(&format!("net_ring_txin{nq}"));
        (o.rx_queues, o.tx_queues, o.idle_end_ms) = (nq, nq, Some(300));
        let input = DpdkPort::open(&o, 0).expect("net_ring input");
        for q in 0..nq {
            let frames: Vec<Vec<u8>> = (0..primed(q as usize) as u32)
                .map(|i| tagged(q, i))
                .collect();
            let mut tx = input.tx(q).expect("tx");
            for chunk in frames.chunks(32) {
                let n = tx
                    .tx_burst(&mut chunk.iter().map(|f| f.as_slice()))
                    .expect("tx");
                assert_eq!(n, chunk.len());
            }
        }
        // Output: a net_ring whose TX queue q loops back to its RX queue q.
        let mut o = dpdk_common::vdev(&format!("net_ring_txout{nq}"));
        (o.rx_queues, o.tx_queues) = (nq, nq);
        let output = DpdkPort::open(&o, 1).expect("net_ring output");
        let spec = spec(nq as usize, true);
        let shared = CpuShared::new(&spec);
        let rx: Vec<Box<dyn RxPort>> = vec![Box::new(input.rx(&[]).expect("rx"))];
        let tx: Box<dyn TxPort> = Box::new(output.tx(0).expect("tx"));
        let r = cpu::run(&spec, &shared, rx, Some(tx));
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        let total: u64 = (0..nq as usize).map(primed).sum();
        let sent: u64 = shared.counters.iter().map(|c| c.tx_frames.get()).sum();
        assert_eq!(sent, total, "{nq} queues: every frame sent");
        for q in 0..nq {
            let mut back = pipeline::burst::Burst::default();
            let mut rxq = output.rx(&[q]).expect("rx");
            let want = primed(q as usize) as usize;
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while back.len() < want && std::time::Instant::now() < deadline {
                if let Ok(pipeline::port::RxStatus::Idle) = rxq.rx_burst(&mut back, 32) {
                    std::thread::yield_now();
                }
            }
            assert_eq!(
                back.len(),
                want,
                "{nq} queues: TX queue {q} got its queue's frames"
            );
            for (i, (_, f)) in back.frames().enumerate() {
                assert_eq!(
                    f,
                    tagged(q, i as u32).as_slice(),
                    "{nq} queues: TX queue {q} frame {i}: queue {q}'s frame {i}, in order"
                );
            }
        }
    }
}

#[test]
fn a_dpdk_port_with_fewer_tx_queues_than_queues_is_refused_naming_the_key() {
    let dir = dpdk_common::scratch("txq-bad");
    let cfg = dir.join("c.yaml");
    std::fs::write(
        &cfg,
        "ports:\n  - name: wire\n    dpdk:\n      vdev: net_null0\n      rx_queues: 4\n      tx_queues: 2\n\
         queues: { count: 4 }\npipeline: [parse]\n",
    )
    .expect("write config");
    let Err(e) = pipeline::config::load(&cfg) else {
        panic!("2 TX queues for 4 queues is refused");
    };
    let e = e.to_string();
    assert!(e.contains("ports[0].dpdk.tx_queues"), "{e}");
    assert!(e.contains("`wire`") && e.contains("2 TX queues"), "{e}");
    assert!(e.contains("c.yaml"), "{e}");
    // With one TX thread for every queue, two TX queues are plenty.
    std::fs::write(
        &cfg,
        "ports:\n  - name: wire\n    dpdk:\n      vdev: net_null0\n      rx_queues: 4\n      tx_queues: 2\n\
         queues: { count: 4, tx_threads: one }\npipeline: [parse]\n",
    )
    .expect("write config");
    pipeline::config::load(&cfg).expect("tx_threads: one takes it");
}
