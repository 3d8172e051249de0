//! net_ring (TX queue i loops back to RX queue i) and net_null through a real EAL: frames come
//! back intact at full speed, ethdev counters agree, and steering rules the PMD refuses
//! (net_ring has no rte_flow) fall back to software steering that still puts every frame in
//! the right queue, also while the rules are replaced under traffic.

#![cfg(feature = "dpdk")]

mod dpdk_common;

use std::time::{Duration, Instant};

use dpdk_common::frame;
use flow_rules::steering::SteerRuleSet;
use pipeline::burst::Burst;
use pipeline::internal::port::dpdk::{DpdkPort, FlowOutcome, MbufBurst};
use pipeline::port::{RxPort, RxStatus, TxPort};

fn counter(c: &[(String, u64)], name: &str) -> u64 {
    c.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| *v)
        .unwrap_or(0)
}

/// Receives until `want` frames arrived or 5 s passed.
fn drain(rx: &mut impl RxPort, burst: &mut Burst, want: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while burst.len() < want && Instant::now() < deadline {
        match rx.rx_burst(burst, 32).expect("rx") {
            RxStatus::Frames(_) => {}
            RxStatus::Idle => std::thread::yield_now(),
            RxStatus::End => break,
        }
    }
}

#[test]
fn ring_loops_frames_back_intact() {
    let port = DpdkPort::open(&dpdk_common::vdev("net_ring_a0"), 3).expect("net_ring port");
    assert_eq!(port.setup().driver, "net_ring");
    let mut tx = port.tx(0).expect("tx");
    let mut rx = port.rx(&[0]).expect("rx");
    let frames: Vec<Vec<u8>> = (0..200u32)
        .map(|i| {
            frame(
                17,
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                1000,
                2000 + i as u16,
                60 + (i as usize * 7) % 1400,
                i,
            )
        })
        .collect();
    let mut burst = Burst::default();
    for chunk in frames.chunks(32) {
        let n = tx
            .tx_burst(&mut chunk.iter().map(|f| f.as_slice()))
            .expect("tx");
        assert_eq!(n, chunk.len());
        let want = burst.len() + n;
        drain(&mut rx, &mut burst, want);
    }
    assert_eq!(burst.len(), frames.len());
    for (i, (d, f)) in burst.frames().enumerate() {
        assert_eq!(f, frames[i].as_slice(), "frame {i}");
        assert_eq!(d.port, 3);
        assert_eq!(d.queue, 0);
    }
    let c = port.counters();
    assert_eq!(counter(&c, "ethdev_opackets"), 200);
    assert_eq!(counter(&c, "ethdev_ipackets"), 200);
}

#[test]
fn ring_frame_larger_than_one_mbuf_is_counted_not_sent() {
    let port = DpdkPort::open(&dpdk_common::vdev("net_ring_b0"), 0).expect("net_ring port");
    let mut tx = port.tx(0).expect("tx");
    // net_ring cannot send mbuf chains: a 9000-byte frame is refused and counted.
    let big = frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 9000, 0);
    let small = frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 64, 1);
    let n = tx
        .tx_burst(&mut [big.as_slice(), small.as_slice()].into_iter())
        .expect("tx");
    let c = port.counters();
    if port.setup().tx_multi_seg {
        assert_eq!(n, 2);
    } else {
        assert_eq!(n, 1);
        assert_eq!(counter(&c, "pktwarp_tx_oversize"), 1);
    }
}

const RULES: &str = "\
queues: 4
rules:
  - name: gtpu-to-3
    match: {udp: {dst_port: 2152}}
    actions: [{queue: 3}]
  - name: dns-drop
    match: {udp: {dst_port: 53}}
    actions: [drop]
  - name: web-rss
    match: {tcp: {dst_port: 80}}
    actions: [{rss: {queues: [1, 2]}}]
";

const RULES_V2: &str = "\
queues: 4
rules:
  - name: gtpu-to-2
    match: {udp: {dst_port: 2152}}
    actions: [{queue: 2}]
";

#[test]
fn refused_rte_flow_rules_fall_back_to_software_steering() {
    let mut o = dpdk_common::vdev("net_ring_c0");
    o.rx_queues = 4;
    o.tx_queues = 4;
    let port = DpdkPort::open(&o, 0).expect("net_ring port");
    let set = SteerRuleSet::parse(RULES, "inline.steering.yaml").expect("rules");
    let outcomes = port.install_rules(&set.rules);
    assert_eq!(outcomes.len(), 3);
    for o in &outcomes {
        match o {
            FlowOutcome::Software { reason, .. } => {
                assert!(!reason.is_empty());
                eprintln!("net_ring refused the rule: {reason}");
            }
            FlowOutcome::Hardware { .. } => panic!("net_ring has no rte_flow: {o:?}"),
        }
    }
    let sw = port.software_steering();
    assert_eq!(sw.software_rules().count(), 3);
    let c = port.counters();
    assert_eq!(counter(&c, "pktwarp_flow_rules_sw"), 3);

    // Everything is sent on TX queue 0 and so arrives on RX queue 0; software steering moves it.
    let mut tx = port.tx(0).expect("tx");
    let mut rx = port.rx(&[]).expect("rx");
    let mut frames = Vec::new();
    for i in 0..64u32 {
        frames.push(frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 40000, 2152, 100, i)); // -> 3
        frames.push(frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 40000, 53, 100, i)); // dropped
        frames.push(frame(
            6,
            [10, 0, 1, i as u8],
            [10, 0, 0, 2],
            1024 + i as u16,
            80,
            100,
            i,
        )); // rss 1|2
        frames.push(frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 40000, 9999, 100, i));
        // stays 0
    }
    let sent = tx
        .tx_burst(&mut frames.iter().map(|f| f.as_slice()))
        .expect("tx");
    assert_eq!(sent, frames.len());
    let mut burst = Burst::default();
    drain(&mut rx, &mut burst, 64 * 3);
    assert_eq!(
        burst.len(),
        64 * 3,
        "the 64 DNS frames are dropped by steering"
    );
    let mut per_queue = [0usize; 4];
    let mut rss_queues = std::collections::BTreeSet::new();
    for (d, f) in burst.frames() {
        per_queue[d.queue as usize] += 1;
        let dport = u16::from_be_bytes([f[36], f[37]]);
        match dport {
            2152 => assert_eq!(d.queue, 3),
            80 => {
                assert!(d.queue == 1 || d.queue == 2, "rss queue {}", d.queue);
                rss_queues.insert(d.queue);
            }
            9999 => assert_eq!(d.queue, 0),
            other => panic!("unexpected frame to port {other}"),
        }
    }
    assert_eq!(rss_queues.len(), 2, "64 flows spread over both RSS queues");
    assert_eq!(counter(&port.counters(), "pktwarp_rx_steering_drop"), 64);

    // Replace the rules while a sender thread keeps traffic flowing.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        let mut tx = port.tx(1).expect("tx 1");
        std::thread::spawn(move || {
            let f = frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 40000, 2152, 100, 7);
            let mut n = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += tx
                    .tx_burst(&mut std::iter::repeat_n(f.as_slice(), 8))
                    .expect("tx");
                std::thread::sleep(Duration::from_micros(200));
            }
            n
        })
    };
    let mut rx1 = port.rx(&[1]).expect("rx 1");
    let mut b = Burst::default();
    drain(&mut rx1, &mut b, 8);
    assert!(b.descs.iter().all(|d| d.queue == 3), "old rules: to 3");
    let v2 = SteerRuleSet::parse(RULES_V2, "v2.steering.yaml").expect("rules v2");
    port.install_rules(&v2.rules);
    // Frames received after the swap go to queue 2; none is lost or misfiled in between.
    let mut seen_new = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen_new < 32 && Instant::now() < deadline {
        b.clear();
        if let RxStatus::Frames(_) = rx1.rx_burst(&mut b, 32).expect("rx") {
            for d in &b.descs {
                assert!(d.queue == 2 || d.queue == 3, "queue {}", d.queue);
                if d.queue == 2 {
                    seen_new += 1;
                }
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = sender.join().expect("sender");
    assert!(sent > 0);
    assert!(seen_new >= 32, "new rule in effect");
}

const MARK_RULES: &str = "\
queues: 4
rules:
  - name: gtpu-3-marked
    match: {udp: {dst_port: 2152}}
    actions: [{queue: 3}, {mark: 0x77}]
  - name: dns-drop
    match: {udp: {dst_port: 53}}
    actions: [drop]
  - name: web-mark-only
    match: {tcp: {dst_port: 80}}
    actions: [{mark: 0x50}]
  - name: ssh-rss-marked
    match: {tcp: {dst_port: 22}}
    actions: [{rss: {queues: [1, 2]}}, {mark: 0x22}]
";

/// The frames of the mark test: (destination port, protocol) x 16 flows.
fn mark_frames() -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    for i in 0..16u32 {
        for (proto, dport) in [(17, 2152), (17, 53), (6, 80), (6, 22), (17, 9999)] {
            let src = [10, 0, 2, i as u8];
            frames.push(frame(
                proto,
                src,
                [10, 0, 0, 2],
                2000 + i as u16,
                dport,
                100,
                i,
            ));
        }
    }
    frames
}

/// The mark a NIC running MARK_RULES would give a frame to `dport` (None: dropped).
fn nic_mark(dport: u16) -> Option<u32> {
    match dport {
        2152 => Some(0x77),
        53 => None,
        80 => Some(0x50),
        22 => Some(0x22),
        _ => Some(0),
    }
}

/// The port's own software fallback (rules the PMD refused) marks a frame as the NIC would
/// (queue + mark, RSS + mark, mark only with the default fate; a dropped frame has none), on
/// the copying and the zero-copy receive paths, and agrees with the executor's software
/// steering (`pipeline::steer::Steering`) on every mark and every rule-decided queue.
#[test]
fn refused_rules_mark_in_software_as_the_nic_would() {
    let mut o = dpdk_common::vdev("net_ring_m0");
    o.rx_queues = 4;
    o.tx_queues = 4;
    let port = DpdkPort::open(&o, 0).expect("net_ring port");
    let set = SteerRuleSet::parse(MARK_RULES, "mark.steering.yaml").expect("rules");
    let outcomes = port.install_rules(&set.rules);
    assert!(outcomes
        .iter()
        .all(|o| matches!(o, FlowOutcome::Software { .. })));
    let steering =
        pipeline::internal::steer::Steering::from_rules(&set, 4).expect("executor steering");
    let frames = mark_frames();
    let mut tx = port.tx(0).expect("tx");
    let mut rx = port.rx(&[]).expect("rx");
    let sent = tx
        .tx_burst(&mut frames.iter().map(|f| f.as_slice()))
        .expect("tx");
    assert_eq!(sent, frames.len());
    let mut burst = Burst::default();
    drain(&mut rx, &mut burst, 16 * 4);
    assert_eq!(burst.len(), 16 * 4, "the 16 DNS frames are dropped");
    let mut meta = pipeline::meta::PacketMeta::default();
    for (d, f) in burst.frames() {
        let dport = u16::from_be_bytes([f[36], f[37]]);
        assert_eq!(Some(d.mark), nic_mark(dport), "copying path, port {dport}");
        let (q, drop, mark) = steering.steer_marked(f, &mut meta, 4);
        assert!(drop.is_none());
        assert_eq!(mark, d.mark, "executor's mark, port {dport}");
        match dport {
            2152 => assert_eq!((d.queue, q), (3, 3)),
            22 => assert_eq!(d.queue as usize, q, "the same RSS queue"),
            // Default fate: the NIC's RSS (net_ring: the queue it arrived on).
            _ => assert_eq!(d.queue, 0),
        }
    }
    // The zero-copy path: marks (and drops) as on the copying path; the queue stays.
    let sent = tx
        .tx_burst(&mut frames.iter().map(|f| f.as_slice()))
        .expect("tx");
    assert_eq!(sent, frames.len());
    let mut mb = MbufBurst::new();
    let mut seen = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen < 16 * 4 && Instant::now() < deadline {
        if let RxStatus::Frames(_) = rx.rx_mbufs(&mut mb, 32).expect("rx_mbufs") {
            for i in 0..mb.len() {
                let f = mb.frame(i).to_vec();
                let dport = u16::from_be_bytes([f[36], f[37]]);
                assert_eq!(
                    Some(mb.desc(i).mark),
                    nic_mark(dport),
                    "zero-copy, port {dport}"
                );
                seen += 1;
            }
            mb.clear();
        }
    }
    assert_eq!(
        seen,
        16 * 4,
        "the 16 DNS frames are dropped on the zero-copy path too"
    );
    assert_eq!(counter(&port.counters(), "pktwarp_rx_steering_drop"), 32);
}

/// Forwards net_null RX to a second net_null (which frees what it sends)
/// for a fixed time and checks the counters agree; prints the rate.
#[test]
fn null_forwarding_at_full_speed() {
    let a = DpdkPort::open(&dpdk_common::vdev("net_null_f0"), 0).expect("null a");
    let b = DpdkPort::open(&dpdk_common::vdev("net_null_f1"), 1).expect("null b");
    let mut rx = a.rx(&[]).expect("rx");
    let mut tx = b.tx(0).expect("tx");
    let mut burst = Burst::with_capacity(32, 32 * 64);
    let (mut frames, mut sent) = (0u64, 0u64);
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        for _ in 0..64 {
            burst.clear();
            if let RxStatus::Frames(n) = rx.rx_burst(&mut burst, 32).expect("rx") {
                frames += n as u64;
                sent += tx
                    .tx_burst(&mut burst.frames().map(|(_, f)| f))
                    .expect("tx") as u64;
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    assert!(frames > 0);
    assert_eq!(sent, frames, "net_null takes everything");
    assert_eq!(counter(&b.counters(), "ethdev_opackets"), sent);
    assert_eq!(counter(&a.counters(), "ethdev_ipackets"), frames);
    eprintln!(
        "net_null -> net_null: {:.2} Mpps over {secs:.2} s",
        frames as f64 / secs / 1e6
    );
}

#[test]
fn gpu_buffers_choice_is_automatic_and_reported() {
    use pipeline::internal::port::dpdk::{gpu::gpudirect_check, BufferPlacement, GpuBuffers};
    // Virtual devices cannot DMA into GPU memory: auto picks host buffers and says why.
    let why = gpudirect_check("net_ring").expect_err("net_ring has no GPUDirect");
    assert!(why.contains("mlx5"), "{why}");
    let port = DpdkPort::open(&dpdk_common::vdev("net_ring_g0"), 0).expect("net_ring port");
    assert_eq!(port.buffer_placement(), BufferPlacement::Host);
    let mut rx = port.rx(&[]).expect("rx");
    let err = rx.rx_gpu(32).err().expect("rx_gpu needs GPU buffers");
    assert!(err.to_string().contains("GPU memory"), "{err}");
    // Nor does the GPU executor's ingest see frames in GPU memory there: it stages the port.
    assert!(
        rx.gpu_rx().is_none(),
        "host buffers are not handed over in place"
    );
    // Forcing GPU buffers where they are impossible is an error naming what is missing.
    let mut o = dpdk_common::vdev("net_null_g1");
    o.gpu_buffers = GpuBuffers::Gpu;
    let err = DpdkPort::open(&o, 0).err().expect("gpu buffers refused");
    assert!(
        err.to_string().contains("GPUDirect RDMA is not possible"),
        "{err}"
    );
    assert!(err.to_string().contains("mlx5"), "{err}");
}

#[test]
fn options_reject_unknown_keys_and_bad_values() {
    use pipeline::internal::port::dpdk::DpdkPortOptions;
    let ok: DpdkPortOptions =
        serde_saphyr::from_str("vdev: net_null0\nrx_queues: 2\ngpu_buffers: host\n")
            .expect("valid");
    assert_eq!(ok.rx_queues, 2);
    assert!(ok.validate().is_ok());
    let bad = serde_saphyr::from_str::<DpdkPortOptions>("vdev: net_null0\nrx_queus: 2\n");
    assert!(bad.is_err(), "unknown key refused");
    let two: DpdkPortOptions =
        serde_saphyr::from_str("vdev: net_null0\nport_id: 1\n").expect("parses");
    assert!(two.validate().unwrap_err().contains("exactly one"));
    let burst: DpdkPortOptions =
        serde_saphyr::from_str("name: x\nburst_size: 0\n").expect("parses");
    assert!(burst.validate().unwrap_err().contains("burst_size"));
}
