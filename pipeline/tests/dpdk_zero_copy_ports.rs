//! The CPU executor's zero-copy path with several DPDK ports (l2fwd / l3fwd style): each
//! forwarded frame leaves on the port its verdict names (`out_port`, here set by a read-only
//! user stage), as the mbuf it arrived in; a frame routed to a port with no transmit side is a
//! `tx_error` drop, as on the copying path.

#![cfg(feature = "dpdk")]

mod dpdk_common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use pipeline::config::OnFull;
use pipeline::internal::executor::cpu::zero_copy::{ports_refusal, run_ports, ZeroCopyPorts};
use pipeline::internal::executor::cpu::{CpuRunSpec, CpuShared};
use pipeline::internal::port::dpdk::{DpdkPort, MbufBurst};
use pipeline::internal::stage::{BuiltStage, CustomSlot, Pipeline, Stage};
use pipeline::internal::steer::Steering;
use pipeline::meta::PacketMeta;
use pipeline::port::{RxStatus, TxPort};
use pipeline::stage::CustomStage;
use pipeline::verdict::{Action, Verdict};

/// Frame i: UDP to port 2000 (the rule sends it to `b`), 23 (dropped) or 80 (default: `a`).
fn frames() -> Vec<Vec<u8>> {
    (0..90u32)
        .map(|i| {
            let dport = [2000, 23, 80][i as usize % 3];
            dpdk_common::frame(
                17,
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                1000,
                dport,
                70 + i as usize,
                i,
            )
        })
        .collect()
}

/// A read-only stage that routes by UDP destination port: 2000 to output 1 (`b`), 23
/// dropped, the rest to the default output (`a`).
struct ByPort;

impl CustomStage for ByPort {
    fn process(&self, frame: &[u8], _: &PacketMeta, v: &mut Verdict) {
        match frame.get(36..38).map(|p| u16::from_be_bytes([p[0], p[1]])) {
            Some(2000) => v.out_port = 1,
            Some(23) => v.action = Action::Drop,
            _ => {}
        }
    }
}

/// One queue, parse and the routing stage.
fn spec() -> CpuRunSpec {
    let built = BuiltStage {
        cpu: Arc::new(ByPort),
        gpu: None,
    };
    let slot = CustomSlot::new("by_port", built, false).expect("a valid stage");
    let pipeline = Pipeline::new(vec![
        Stage::Parse,
        Stage::Custom(Box::new(slot)),
        Stage::Count,
    ]);
    assert!(!pipeline.rewrites(), "routing alone writes no frame");
    CpuRunSpec {
        queues: 1,
        burst: 32,
        ring_slots: 8,
        on_full: OnFull::Wait,
        pipeline: Arc::new(pipeline),
        steering: Arc::new(Steering::rss_only(1).expect("steering")),
        observer: None,
        verify_sample: 0,
        rx_threads: Default::default(),
    }
}

/// Up to `want` frames of `port`'s RX queue 0 (a net_ring port: what was sent on TX queue 0),
/// with their mbuf addresses.
fn drain(port: &DpdkPort, want: usize) -> (Vec<Vec<u8>>, Vec<usize>) {
    let mut rx = port.rx(&[0]).expect("rx");
    let (mut frames, mut addrs) = (Vec::new(), Vec::new());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut burst = MbufBurst::new();
    while frames.len() < want && std::time::Instant::now() < deadline {
        match rx.rx_mbufs(&mut burst, 32).expect("rx_mbufs") {
            RxStatus::Frames(_) => {
                for i in 0..burst.len() {
                    addrs.push(burst.mbuf_addr(i));
                    frames.push(burst.frame(i).to_vec());
                }
                burst.clear();
            }
            _ => std::thread::yield_now(),
        }
    }
    (frames, addrs)
}

/// Runs the zero-copy path from `input` (primed with `frames`) to `outputs` until 300 ms
/// after the start; returns the shared counters and the run's outcome.
fn run(
    input: &DpdkPort,
    outputs: Vec<Option<&DpdkPort>>,
    frames: &[Vec<u8>],
) -> (
    Arc<CpuShared>,
    pipeline::internal::executor::cpu::RunOutcome,
) {
    let sent = input
        .tx(0)
        .expect("tx")
        .tx_burst(&mut frames.iter().map(|f| f.as_slice()))
        .expect("prime");
    assert_eq!(sent, frames.len());
    let spec = spec();
    let zc = ZeroCopyPorts {
        inputs: vec![input],
        outputs,
        default: Some(0),
        mirror: None,
    };
    assert_eq!(ports_refusal(&spec, &zc), None);
    let shared = CpuShared::new(&spec);
    let stopper = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            shared.stop.store(true, Ordering::Relaxed);
        })
    };
    let out = run_ports(&spec, &shared, &zc);
    stopper.join().expect("stopper");
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    (shared, out)
}

#[test]
fn each_frame_leaves_on_the_port_its_verdict_names() {
    let input = DpdkPort::open(&dpdk_common::vdev("net_ring_zcp0"), 0).expect("input");
    let a = DpdkPort::open(&dpdk_common::vdev("net_ring_zcp1"), 1).expect("a");
    let b = DpdkPort::open(&dpdk_common::vdev("net_ring_zcp2"), 2).expect("b");
    let frames = frames();
    let (shared, out) = run(&input, vec![Some(&a), Some(&b)], &frames);
    let c = &shared.counters[0];
    assert_eq!(c.rx_frames.get(), 90);
    assert_eq!(c.passed.get(), 60, "to a and to b");
    assert_eq!(c.total_drops(), 30, "the telnet rule's");
    assert_eq!(c.tx_frames.get(), 60, "every forwarded frame sent");
    let took: Vec<(&str, u64)> = out
        .out
        .iter()
        .map(|t| (t.name.as_str(), t.frames))
        .collect();
    assert_eq!(
        took,
        [("dpdk:net_ring_zcp1", 30), ("dpdk:net_ring_zcp2", 30)],
        "{:?}",
        out.out
    );
    // Each port got its frames, byte for byte, in arrival order, and no two frames share an
    // mbuf (a frame sent twice or a split that lost track would).
    let (got_a, addr_a) = drain(&a, 30);
    let (got_b, addr_b) = drain(&b, 30);
    let want = |k: usize| -> Vec<Vec<u8>> {
        frames
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 == k)
            .map(|(_, f)| f.clone())
            .collect()
    };
    assert_eq!(got_a, want(2), "port a: the frames to port 80");
    assert_eq!(got_b, want(0), "port b: the frames to port 2000");
    let mut all: Vec<usize> = addr_a.iter().chain(&addr_b).copied().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 60);
}

#[test]
fn a_frame_routed_to_a_port_without_a_transmit_side_is_a_tx_error() {
    let input = DpdkPort::open(&dpdk_common::vdev("net_ring_zcp3"), 0).expect("input");
    let a = DpdkPort::open(&dpdk_common::vdev("net_ring_zcp4"), 1).expect("a");
    let frames = frames();
    let (shared, out) = run(&input, vec![Some(&a), None], &frames);
    let c = &shared.counters[0];
    let tx_error = c.drops[pipeline::verdict::DropReason::TxError as usize].get();
    assert_eq!(tx_error, 30, "the frames to b");
    assert_eq!(c.tx_frames.get(), 30, "the frames to a");
    assert_eq!(c.total_drops(), 60, "telnet + tx_error");
    assert_eq!(out.out.len(), 1, "{:?}", out.out);
    let (got_a, _) = drain(&a, 30);
    assert_eq!(got_a.len(), 30);
}

/// The daemon picks the zero-copy path for two DPDK ports that each receive and send (the
/// second sends nothing here): both inputs' frames reach the default output.
#[test]
fn the_daemon_forwards_zero_copy_between_two_dpdk_ports() {
    let dir = dpdk_common::scratch("zc-two");
    let frames = frames();
    let (in_a, in_b, out_a, out_b) = (
        dir.join("in_a.pcap"),
        dir.join("in_b.pcap"),
        dir.join("out_a.pcap"),
        dir.join("out_b.pcap"),
    );
    dpdk_common::write_pcap(&in_a, &frames[..60]);
    dpdk_common::write_pcap(&in_b, &frames[60..]);
    let eal: Vec<String> = dpdk_common::eal_args()
        .iter()
        .map(|a| format!("{a:?}"))
        .collect();
    let port = |name: &str, k: u32, rx: &std::path::Path, tx: &std::path::Path| {
        format!(
            "  - name: {name}
    dpdk:
      eal_args: [{}]
      vdev: \"net_pcap6{k},rx_pcap={},tx_pcap={}\"
      mempool_size: 2047
      rx_descriptors: 256
      tx_descriptors: 256
      idle_end_ms: 300
",
            eal.join(", "),
            rx.display(),
            tx.display()
        )
    };
    let cfg = dir.join("two.yaml");
    std::fs::write(
        &cfg,
        format!(
            "ports:\n{}{}queues: {{ count: 1, burst: 32 }}\npipeline: [parse, count]\n\
             executor: {{ kind: cpu }}\nmetrics: {{ enabled: false }}\noutput: {{ port: a }}\n",
            port("a", 0, &in_a, &out_a),
            port("b", 1, &in_b, &out_b)
        ),
    )
    .expect("write config");
    let cfg = pipeline::config::load(&cfg).expect("config");
    let p = pipeline::daemon::prepare(cfg).expect("prepare");
    let ports = pipeline::daemon::open_ports(&p.cfg).expect("open ports");
    let shared = CpuShared::new(&p.cpu_spec());
    let s = pipeline::daemon::run_cpu(&p, &shared, ports);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.forwarding, "zero_copy", "{s:?}");
    assert_eq!(s.rx_frames, 90);
    assert_eq!(s.tx_frames, 90, "{s:?}");
    assert_eq!(s.port_counters.len(), 2, "both inputs' counters");
    let mut got = pipeline::internal::testdata::capture_frames(&out_a).expect("out_a");
    let mut want = frames.clone();
    // Two inputs interleave: the same frames, in each input's order.
    got.sort();
    want.sort();
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(dir);
}
