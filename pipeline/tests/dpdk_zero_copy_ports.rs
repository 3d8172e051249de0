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
    let yaml = format!(
        "ports:\n{}{}queues: {{ count: 1, burst: 32 }}\npipeline: [parse, count]\n\
         executor: {{ kind: cpu }}\nmetrics: {{ enabled: false }}\noutput: {{ port: a }}\n",
        dpdk_common::pcap_port_yaml("a", "net_pcap60", &in_a, &out_a),
        dpdk_common::pcap_port_yaml("b", "net_pcap61", &in_b, &out_b)
    );
    let s = dpdk_common::run_cpu_yaml(&dir, "two.yaml", &yaml);
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

/// Frames larger than one buffer arrive as chains (net_pcap): a rewriting pipeline (MACs
/// swapped, a VLAN tag pushed: 4 bytes more) rewrites each in a copy and writes it back into
/// the chain's own segments, the last growing into its tailroom; the chains then leave as
/// they are (net_ring takes chains) and come back out rewritten, byte for byte. A chain whose
/// last segment is full (4,224 B: net_pcap's first segment holds 2,048 bytes after the
/// headroom, its second the whole 2,176-byte buffer) cannot grow: it keeps the bytes it
/// came with and says so (`unwritten`).
#[test]
fn chains_are_rewritten_in_their_own_segments() {
    use pipeline::internal::rewrite::{L2fwd, Vlan};
    let dir = dpdk_common::scratch("zc-chain-rw");
    let input = dir.join("in.pcap");
    let sizes = [60usize, 3000, 9000, 1514, 4224, 5000, 64];
    let full = 4;
    let frames = dpdk_common::udp_frames(&sizes);
    dpdk_common::write_pcap(&input, &frames);
    let mut o = dpdk_common::vdev(&format!("net_pcap70,rx_pcap={}", input.display()));
    o.idle_end_ms = Some(300);
    let port = DpdkPort::open(&o, 0).expect("net_pcap");
    let ring = DpdkPort::open(&dpdk_common::vdev("net_ring_zcp5"), 1).expect("ring");
    let mut burst = MbufBurst::new();
    let mut rx = port.rx(&[]).expect("rx");
    while burst.is_empty() {
        match rx.rx_mbufs(&mut burst, 32).expect("rx") {
            RxStatus::End => panic!("no frames"),
            _ => std::thread::yield_now(),
        }
    }
    assert_eq!(burst.len(), frames.len(), "one receive call");
    let received: Vec<usize> = (0..burst.len()).map(|i| burst.mbuf_addr(i)).collect();
    let p = Pipeline::new(vec![
        Stage::Parse,
        Stage::L2fwd(L2fwd::swap()),
        Stage::Vlan(Vlan::Push {
            tpid: 0x8100,
            tci: 100,
        }),
    ]);
    let spec = spec();
    let c = &CpuShared::new(&spec).counters[0];
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    burst
        .rewrite(p.frame_room(), |f| {
            p.run_frames_mut(f, &mut metas, &mut verdicts, c)
        })
        .expect("rewrite");
    let want: Vec<Vec<u8>> = frames
        .iter()
        .map(|f| {
            let mut w = Vec::with_capacity(f.len() + 4);
            w.extend_from_slice(&f[6..12]);
            w.extend_from_slice(&f[0..6]);
            w.extend_from_slice(&[0x81, 0x00, 0x00, 100]);
            w.extend_from_slice(&f[12..]);
            w
        })
        .collect();
    for (i, w) in want.iter().enumerate() {
        assert_eq!(burst.is_chained(i), sizes[i] > 2048, "frame {i}");
        if i == full {
            assert!(burst.unwritten(i), "a full last segment cannot grow");
            assert_eq!(burst.frame(i), frames[i].as_slice(), "kept as received");
        } else {
            assert!(!burst.unwritten(i), "frame {i} fits");
            assert_eq!(burst.frame(i), w.as_slice(), "frame {i} rewritten");
        }
    }
    // A frame rewritten elsewhere (as the GPU executor's are) written back into its chain:
    // the same length, and 100 bytes shorter.
    let mut want = want;
    want[1][2999] ^= 0xff;
    want[2].truncate(8904);
    for i in [1, 2] {
        burst.write_frame(i, &want[i]).expect("fits its chain");
        assert_eq!(burst.frame(i), want[i].as_slice(), "frame {i} reads back");
    }
    let too_long = vec![0u8; 20_000];
    assert!(
        burst.write_frame(1, &too_long).is_err(),
        "more than the chain holds"
    );
    burst.drop_frame(full);
    let sent = ring.tx(0).expect("tx").tx_mbufs(&mut burst).expect("send");
    assert_eq!(sent.sent, frames.len() - 1);
    let (got, addrs) = drain(&ring, frames.len() - 1);
    let mut received = received;
    want.remove(full);
    received.remove(full);
    assert_eq!(got, want, "the chains' segments hold the rewritten frames");
    assert_eq!(addrs, received, "each frame left in the mbuf it came in");
    drop((rx, port, ring));
    let _ = std::fs::remove_dir_all(dir);
}

/// `pktwarp run`'s zero-copy path with a rewriting pipeline on net_pcap (which delivers
/// chains, and sends none: `tx_oversize`, as on the copying path): the one-buffer frames out
/// with their VLAN tag; the chain that cannot grow, and the two the device cannot send,
/// counted `tx_error`, as the copying path counts a frame the port could not take.
#[test]
fn the_daemon_rewrites_chains_zero_copy_and_counts_the_one_that_cannot_grow() {
    let dir = dpdk_common::scratch("zc-chain-daemon");
    let (input, output) = (dir.join("in.pcap"), dir.join("out.pcap"));
    let sizes = [60usize, 3000, 1514, 4224, 9000, 64];
    let frames = dpdk_common::udp_frames(&sizes);
    dpdk_common::write_pcap(&input, &frames);
    let yaml = format!(
        "ports:\n{}queues: {{ count: 1, burst: 32 }}\n\
         pipeline: [parse, {{ vlan: {{ push: {{ vid: 100 }} }} }}, count]\n\
         executor: {{ kind: cpu }}\nmetrics: {{ enabled: false }}\noutput: {{ port: wire }}\n",
        dpdk_common::pcap_port_yaml("wire", "net_pcap71", &input, &output)
    );
    let s = dpdk_common::run_cpu_yaml(&dir, "rw.yaml", &yaml);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.forwarding, "zero_copy", "{s:?}");
    let drop = |r: &str| s.drops.iter().find(|(k, _)| k == r).map_or(0, |(_, n)| *n);
    assert_eq!(s.rx_frames, 6);
    assert_eq!(drop("tx_error"), 3, "{s:?}");
    assert_eq!(s.tx_frames, 3, "{s:?}");
    let oversize = s.port_counters[0]
        .1
        .iter()
        .find(|(k, _)| k == "pktwarp_tx_oversize")
        .map(|(_, v)| *v);
    assert_eq!(oversize, Some(2), "the 3,000- and 9,000-byte chains");
    let got = pipeline::internal::testdata::capture_frames(&output).expect("output");
    let want: Vec<Vec<u8>> = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| sizes[*i] <= 2048)
        .map(|(_, f)| {
            let mut w = f[..12].to_vec();
            w.extend_from_slice(&[0x81, 0x00, 0x00, 100]);
            w.extend_from_slice(&f[12..]);
            w
        })
        .collect();
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(dir);
}
