//! The CPU executor's zero-copy path (DPDK in and out) through the daemon API, with a real EAL:
//! steering drops, parse drops and passes land exactly where the copying path would put them,
//! the output capture holds the passed frames byte for byte, the reasons the daemon gives for
//! not choosing zero-copy, RX/TX callbacks seeing every burst, and a NIC's steering mark carried
//! into the frame descriptors.

#![cfg(feature = "dpdk")]

mod dpdk_common;

use pipeline::internal::testdata::capture_frames;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pipeline::config::OnFull;
use pipeline::internal::executor::cpu::zero_copy::zero_copy_refusal;
use pipeline::internal::executor::cpu::{CpuRunSpec, CpuShared};
use pipeline::internal::port::dpdk::{sys, DpdkPort, MbufBurst};
use pipeline::internal::steer::Steering;
use pipeline::port::{RxStatus, TxPort};
use pipeline::stage::{Pipeline, Stage};

#[test]
fn pktwarp_run_forwards_zero_copy_with_steering_and_parse_drops() {
    let dir = dpdk_common::scratch("zc-daemon");
    let input = dir.join("in.pcap");
    let output = dir.join("out.pcap");
    // 300 frames: every 5th is DNS (dropped by the steering rule), every 7th truncated to 20
    // bytes (a parse error), the rest pass.
    let mut frames = Vec::new();
    let (mut dns, mut bad) = (0u64, 0u64);
    for i in 0..300u32 {
        let f = if i % 5 == 0 {
            dns += 1;
            dpdk_common::frame(17, [10, 0, 0, 1], [10, 0, 0, 53], 4000, 53, 80, i)
        } else if i % 7 == 0 {
            bad += 1;
            dpdk_common::frame(6, [10, 0, 0, 2], [10, 0, 0, 3], 4000, 80, 100, i)[..20].to_vec()
        } else {
            dpdk_common::frame(
                6,
                [10, 0, 0, 2],
                [10, 0, 0, 3],
                4000,
                80,
                60 + i as usize,
                i,
            )
        };
        frames.push(f);
    }
    dpdk_common::write_pcap(&input, &frames);
    std::fs::write(
        dir.join("steer.yaml"),
        "queues: 1\nrules:\n  - name: drop-dns\n    match:\n      udp: { dst_port: 53 }\n    actions: [drop]\n",
    )
    .expect("write steering rules");
    let eal: Vec<String> = dpdk_common::eal_args()
        .iter()
        .map(|a| format!("{a:?}"))
        .collect();
    let cfg = dir.join("zc.yaml");
    std::fs::write(
        &cfg,
        format!(
            "ports:
  - name: wire
    dpdk:
      eal_args: [{}]
      vdev: \"net_pcap40,rx_pcap={},tx_pcap={}\"
      mempool_size: 2047
      rx_descriptors: 256
      tx_descriptors: 256
      idle_end_ms: 300
queues: {{ count: 1, burst: 32 }}
steering: {{ rules: steer.yaml }}
pipeline: [parse, count]
executor: {{ kind: cpu }}
metrics: {{ enabled: false }}
output: {{ port: wire }}
",
            eal.join(", "),
            input.display(),
            output.display()
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
    let drop = |r: &str| s.drops.iter().find(|(k, _)| k == r).map_or(0, |(_, n)| *n);
    assert_eq!(s.rx_frames, frames.len() as u64);
    assert_eq!(drop("steering_drop"), dns, "{s:?}");
    assert_eq!(drop("parse_error"), bad, "{s:?}");
    assert_eq!(s.tx_frames, frames.len() as u64 - dns - bad, "{s:?}");
    assert_eq!(drop("tx_error"), 0);
    // count saw the passed frames and their bytes.
    let passed: Vec<&Vec<u8>> = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 5 != 0 && i % 7 != 0)
        .map(|(_, f)| f)
        .collect();
    let bytes: u64 = passed.iter().map(|f| f.len() as u64).sum();
    assert_eq!(s.counted, vec![(1, passed.len() as u64, bytes)]);
    assert_eq!(s.tx_bytes, bytes);
    let ipackets = s.port_counters[0]
        .1
        .iter()
        .find(|(k, _)| k == "ethdev_ipackets")
        .map(|(_, v)| *v);
    assert_eq!(ipackets, Some(frames.len() as u64));
    check_output(&output, &passed);
    let _ = std::fs::remove_dir_all(dir);
}

/// The devices were closed when run_cpu returned (pcap dumper flushed): the output holds the
/// passed frames, in order, byte for byte.
fn check_output(output: &std::path::Path, passed: &[&Vec<u8>]) {
    let got = capture_frames(output).unwrap();
    assert_eq!(got.len(), passed.len());
    for (i, (g, w)) in got.iter().zip(passed).enumerate() {
        assert_eq!(g, *w, "frame {i} differs");
    }
}

fn spec(queues: usize, rules: bool) -> CpuRunSpec {
    let mut steering = Steering::rss_only(queues as u16).expect("steering");
    if rules {
        let dir = dpdk_common::scratch("zc-rules");
        let f = dir.join("s.yaml");
        std::fs::write(
            &f,
            "queues: 2\nrules:\n  - name: q1\n    match:\n      udp: { dst_port: 53 }\n    actions: [{ queue: 1 }]\n",
        )
        .expect("rules");
        let cfg = dir.join("c.yaml");
        std::fs::write(
            &cfg,
            "ports: [{ name: g, gen: { count: 1 } }]\nqueues: { count: 2 }\nsteering: { rules: s.yaml }\npipeline: [parse]\n",
        )
        .expect("cfg");
        let c = pipeline::config::load(&cfg).expect("config");
        steering = c.build_steering().expect("steering rules");
    }
    CpuRunSpec {
        queues,
        burst: 32,
        ring_slots: 8,
        on_full: OnFull::Wait,
        pipeline: Arc::new(Pipeline::new(vec![Stage::Parse])),
        steering: Arc::new(steering),
        observer: None,
        verify_sample: 0,
        rx_threads: Default::default(),
    }
}

#[test]
fn zero_copy_is_refused_with_a_reason() {
    let mut o = dpdk_common::vdev("net_ring41");
    o.rx_queues = 2;
    o.tx_queues = 1;
    let two_rx = DpdkPort::open(&o, 0).expect("ring port");
    let mut o = dpdk_common::vdev("net_ring42");
    o.rx_queues = 2;
    o.tx_queues = 2;
    let two_both = DpdkPort::open(&o, 1).expect("ring port");
    // One queue: always possible.
    assert_eq!(zero_copy_refusal(&spec(1, false), &two_rx, &two_rx), None);
    // Two workers need two TX queues on the output port.
    let why = zero_copy_refusal(&spec(2, false), &two_rx, &two_rx).expect("refused");
    assert!(why.contains("TX queues"), "{why}");
    assert_eq!(zero_copy_refusal(&spec(2, false), &two_rx, &two_both), None);
    // Steering rules with several queues: a frame cannot move between workers.
    let why = zero_copy_refusal(&spec(2, true), &two_both, &two_both).expect("refused");
    assert!(why.contains("steering rules"), "{why}");
    // An observer reads copied bursts.
    let mut s = spec(1, false);
    s.observer = Some(Arc::new(|_, _, _, _, _| {}));
    let why = zero_copy_refusal(&s, &two_rx, &two_rx).expect("refused");
    assert!(why.contains("observer"), "{why}");
}

static RX_SEEN: AtomicU64 = AtomicU64::new(0);
static TX_SEEN: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn count_rx(
    _port: u16,
    _queue: u16,
    _pkts: *mut *mut sys::rte_mbuf,
    nb: u16,
    _max: u16,
    _user: *mut std::ffi::c_void,
) -> u16 {
    RX_SEEN.fetch_add(u64::from(nb), Ordering::Relaxed);
    nb
}

unsafe extern "C" fn count_tx(
    _port: u16,
    _queue: u16,
    _pkts: *mut *mut sys::rte_mbuf,
    nb: u16,
    _user: *mut std::ffi::c_void,
) -> u16 {
    TX_SEEN.fetch_add(u64::from(nb), Ordering::Relaxed);
    nb
}

/// The bursts go through DPDK's ethdev layer as `rte_eth_rx_burst` / `rte_eth_tx_burst` do
/// (dpdk-sys mirrors the inline functions where the installed DPDK allows): RX and TX
/// callbacks an application installs on a queue see every frame of both paths.
#[test]
fn rx_and_tx_callbacks_see_every_burst() {
    let port = DpdkPort::open(&dpdk_common::vdev("net_ring43"), 0).expect("ring port");
    let id = port.setup().port_id;
    // SAFETY: a started port, queue 0 configured; the functions match the callback types and
    // live for the whole process; no user parameter.
    unsafe {
        assert!(
            !sys::rte_eth_add_rx_callback(id, 0, Some(count_rx), std::ptr::null_mut()).is_null()
        );
        assert!(
            !sys::rte_eth_add_tx_callback(id, 0, Some(count_tx), std::ptr::null_mut()).is_null()
        );
    }
    let (mut rx, mut tx) = (port.rx(&[]).expect("rx"), port.tx(0).expect("tx"));
    let f = dpdk_common::frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 64, 0);
    // Copying TX into the loopback ring, then zero-copy around it twice.
    assert_eq!(
        tx.tx_burst(&mut std::iter::repeat_n(f.as_slice(), 20))
            .expect("tx"),
        20
    );
    let mut burst = MbufBurst::new();
    for round in 1..=2u64 {
        let t = std::time::Instant::now();
        loop {
            match rx.rx_mbufs(&mut burst, 32).expect("rx") {
                RxStatus::Frames(_) => break,
                _ => assert!(t.elapsed().as_secs() < 5, "no frames back"),
            }
        }
        assert_eq!(burst.len(), 20);
        assert_eq!(RX_SEEN.load(Ordering::Relaxed), 20 * round);
        assert_eq!(tx.tx_mbufs(&mut burst).expect("tx").sent, 20);
        assert_eq!(TX_SEEN.load(Ordering::Relaxed), 20 * (round + 1));
    }
}

/// Two workers, DPDK l2fwd style: worker q polls RX queue q of a two-queue net_ring port and
/// sends on its TX queue q (net_ring loops each queue back to itself, so the frames keep
/// circling until the stop flag): both workers forward, and every frame each one received was
/// sent or counted.
#[test]
fn two_workers_each_own_their_queue_pair() {
    let mut o = dpdk_common::vdev("net_ring44");
    o.rx_queues = 2;
    o.tx_queues = 2;
    let port = DpdkPort::open(&o, 0).expect("ring port");
    // 32 frames into each queue's ring (the copying TX path, one handle per queue).
    let f = dpdk_common::frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 64, 0);
    for q in 0..2 {
        let mut tx = port.tx(q).expect("tx");
        assert_eq!(
            tx.tx_burst(&mut std::iter::repeat_n(f.as_slice(), 32))
                .expect("prime"),
            32
        );
    }
    let mut s = spec(2, false);
    s.pipeline = Arc::new(Pipeline::new(vec![Stage::Parse, Stage::Count]));
    assert_eq!(zero_copy_refusal(&s, &port, &port), None);
    let shared = CpuShared::new(&s);
    let stopper = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            shared.stop.store(true, Ordering::Relaxed);
        })
    };
    let out = pipeline::internal::executor::cpu::zero_copy::run(&s, &shared, &port, &port);
    stopper.join().expect("stopper");
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    for (q, c) in shared.counters.iter().enumerate() {
        let rx = c.rx_frames.get();
        assert!(rx > 32, "queue {q} forwarded (received {rx})");
        assert_eq!(c.total_drops(), 0, "queue {q}");
        assert_eq!(c.tx_frames.get(), rx, "queue {q}: every frame sent");
        assert_eq!(c.passed.get(), rx, "queue {q}: verdicts");
        assert_eq!(c.stage_frames[1].get(), rx, "queue {q}: count stage");
    }
}

static MARK_SEEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Plays a NIC whose rte_flow rules matched (no virtual device of DPDK 22.11 implements the
/// MARK action: net_tap's TC flower takes queue, rss, drop and passthru only). Frame k of the
/// queue, in arrival order: k % 3 == 0 gets MARK id 1000 + k (`RTE_MBUF_F_RX_FDIR |
/// RTE_MBUF_F_RX_FDIR_ID`, the id in `hash.fdir.hi`), k % 3 == 1 a FLAG (`RTE_MBUF_F_RX_FDIR`
/// alone, with junk in `hash.fdir.hi` that must not be read), the rest nothing.
unsafe extern "C" fn mark_rx(
    _port: u16,
    _queue: u16,
    pkts: *mut *mut sys::rte_mbuf,
    nb: u16,
    _max: u16,
    _user: *mut std::ffi::c_void,
) -> u16 {
    for i in 0..usize::from(nb) {
        let k = MARK_SEEN.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the nb mbufs the PMD just returned, owned by the RX call until it returns.
        let m = unsafe { &mut **pkts.add(i) };
        let (fdir, id) = (
            u64::from(sys::RTE_MBUF_F_RX_FDIR),
            u64::from(sys::RTE_MBUF_F_RX_FDIR_ID),
        );
        match k % 3 {
            0 => {
                m.ol_flags |= fdir | id;
                m.__bindgen_anon_2.hash.fdir.hi = 1000 + k;
            }
            1 => {
                m.ol_flags |= fdir;
                m.__bindgen_anon_2.hash.fdir.hi = 0xdead;
            }
            _ => {}
        }
    }
    nb
}

/// A NIC's steering mark (rte_flow MARK: `RTE_MBUF_F_RX_FDIR_ID`, `hash.fdir.hi`) reaches
/// `FrameDesc::mark` on both receive paths, the copying one (`rx_burst`) and the zero-copy one
/// (`rx_mbufs`); frames without it, or with a FLAG only, have mark 0.
#[test]
fn nic_mark_reaches_the_frame_descriptor_on_both_rx_paths() {
    let port = DpdkPort::open(&dpdk_common::vdev("net_ring45"), 0).expect("ring port");
    let id = port.setup().port_id;
    // SAFETY: a started port, queue 0 configured; the function matches the callback type and
    // lives for the whole process; no user parameter.
    unsafe {
        assert!(
            !sys::rte_eth_add_rx_callback(id, 0, Some(mark_rx), std::ptr::null_mut()).is_null()
        );
    }
    let want = |k: u32| if k % 3 == 0 { 1000 + k } else { 0 };
    let (mut rx, mut tx) = (port.rx(&[]).expect("rx"), port.tx(0).expect("tx"));
    let frames: Vec<Vec<u8>> = (0..30u32)
        .map(|i| dpdk_common::frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 64, i))
        .collect();
    let send = |tx: &mut dyn TxPort| {
        let n = tx
            .tx_burst(&mut frames.iter().map(|f| f.as_slice()))
            .expect("tx");
        assert_eq!(n, frames.len());
    };
    // Copying path.
    send(&mut tx);
    let mut burst = pipeline::burst::Burst::default();
    let t = std::time::Instant::now();
    while burst.len() < frames.len() {
        use pipeline::port::RxPort;
        rx.rx_burst(&mut burst, 32).expect("rx");
        assert!(t.elapsed().as_secs() < 5, "{} frames back", burst.len());
    }
    let marks: Vec<u32> = burst.descs.iter().map(|d| d.mark).collect();
    assert_eq!(marks, (0..30).map(want).collect::<Vec<_>>());
    assert!(burst
        .frames()
        .zip(&frames)
        .all(|((_, a), b)| a == b.as_slice()));
    // Zero-copy path.
    send(&mut tx);
    let mut mb = MbufBurst::new();
    let t = std::time::Instant::now();
    // One call takes all 30 (net_ring hands back what one TX burst put in).
    while mb.is_empty() {
        rx.rx_mbufs(&mut mb, 32).expect("rx");
        assert!(t.elapsed().as_secs() < 5, "no frames back");
    }
    assert_eq!(mb.len(), frames.len());
    let marks: Vec<u32> = mb.frames().map(|(d, _)| d.mark).collect();
    assert_eq!(marks, (30..60).map(want).collect::<Vec<_>>());
    assert_eq!(MARK_SEEN.load(Ordering::Relaxed), 60);
}

/// Receives from `rx` until `want` frames are in `burst` (or 5 s passed).
fn take_mbufs(rx: &mut pipeline::internal::port::dpdk::DpdkRx, burst: &mut MbufBurst, want: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut part = MbufBurst::new();
    while burst.len() < want && std::time::Instant::now() < deadline {
        match rx.rx_mbufs(&mut part, 32).expect("rx_mbufs") {
            RxStatus::Frames(_) => {
                let n = part.len();
                part.share_into(burst, |_| true);
                assert_eq!(part.retain(|_| false), n);
            }
            _ => std::thread::yield_now(),
        }
    }
}

#[test]
fn rewritten_in_the_mbuf_and_mirrored_by_reference_without_a_copy() {
    // One net_ring port: TX queue q loops back to RX queue q. Queue 0 is the input, queue 1
    // the output, queue 2 the mirror port.
    let mut o = dpdk_common::vdev("net_ring_zcrw0");
    (o.rx_queues, o.tx_queues) = (3, 3);
    let port = DpdkPort::open(&o, 0).expect("net_ring port");
    let frames: Vec<Vec<u8>> = (0..40u32)
        .map(|i| {
            dpdk_common::frame(
                17,
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                1000,
                2000,
                90 + i as usize,
                i,
            )
        })
        .collect();
    let n = port
        .tx(0)
        .expect("tx")
        .tx_burst(&mut frames.iter().map(|f| f.as_slice()))
        .expect("prime");
    assert_eq!(n, frames.len());
    let mut burst = MbufBurst::new();
    take_mbufs(&mut port.rx(&[0]).expect("rx"), &mut burst, frames.len());
    assert_eq!(burst.len(), frames.len());
    let received: Vec<usize> = (0..burst.len()).map(|i| burst.mbuf_addr(i)).collect();
    // l2fwd swaps the MACs in the mbufs themselves.
    let pipeline = Pipeline::new(vec![Stage::L2fwd(
        pipeline::internal::rewrite::L2fwd::swap(),
    )]);
    assert!(pipeline.rewrites());
    let spec = CpuRunSpec {
        queues: 1,
        burst: 32,
        ring_slots: 8,
        on_full: OnFull::Wait,
        pipeline: Arc::new(Pipeline::new(vec![Stage::Parse])),
        steering: Arc::new(Steering::rss_only(1).expect("steering")),
        observer: None,
        verify_sample: 0,
        rx_threads: Default::default(),
    };
    let c = &CpuShared::new(&spec).counters[0];
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    burst
        .rewrite(pipeline.frame_room(), |f| {
            pipeline.run_frames_mut(f, &mut metas, &mut verdicts, c)
        })
        .expect("one-segment frames");
    let swapped: Vec<Vec<u8>> = frames
        .iter()
        .map(|f| {
            let mut s = f.clone();
            s[0..6].copy_from_slice(&f[6..12]);
            s[6..12].copy_from_slice(&f[0..6]);
            s
        })
        .collect();
    for (i, want) in swapped.iter().enumerate() {
        assert_eq!(
            burst.frame(i),
            want.as_slice(),
            "frame {i} rewritten in its mbuf"
        );
    }
    // Every third frame mirrored: a second reference to the same mbuf.
    let mut copies = MbufBurst::new();
    let shared = burst.share_into(&mut copies, |i| i % 3 == 0);
    assert_eq!(shared, 14);
    for (k, i) in (0..frames.len()).filter(|i| i % 3 == 0).enumerate() {
        assert_eq!(
            copies.mbuf_addr(k),
            received[i],
            "the mirror copy is the same mbuf"
        );
        assert_eq!(burst.refcnt(i), 2, "frame {i}: two references");
    }
    let sent = port.tx(1).expect("tx").tx_mbufs(&mut burst).expect("send");
    assert_eq!(sent.sent, frames.len());
    let sent = port.tx(2).expect("tx").tx_mbufs(&mut copies).expect("send");
    assert_eq!(sent.sent, 14);
    // What the output and the mirror queue got: the very mbufs received, rewritten, intact.
    let (mut out, mut mir) = (MbufBurst::new(), MbufBurst::new());
    take_mbufs(&mut port.rx(&[1]).expect("rx"), &mut out, frames.len());
    take_mbufs(&mut port.rx(&[2]).expect("rx"), &mut mir, 14);
    assert_eq!((out.len(), mir.len()), (frames.len(), 14));
    for i in 0..frames.len() {
        assert_eq!(
            out.mbuf_addr(i),
            received[i],
            "frame {i}: sent from the mbuf it came in"
        );
        assert_eq!(
            out.frame(i),
            swapped[i].as_slice(),
            "output frame {i} intact"
        );
    }
    for (k, i) in (0..frames.len()).filter(|i| i % 3 == 0).enumerate() {
        assert_eq!(mir.mbuf_addr(k), received[i]);
        assert_eq!(
            mir.frame(k),
            swapped[i].as_slice(),
            "mirror frame {k} intact"
        );
    }
    // take_mbufs's own references: each frame held by out/mir once more, then freed.
    out.clear();
    mir.clear();
}

#[test]
fn a_frame_rewritten_elsewhere_is_written_back_into_its_mbuf_and_sent_from_it() {
    // One net_ring port: TX queue 0 loops back to RX queue 0 (the input), queue 1 to 1 (the
    // output). Each received frame is "rewritten elsewhere" (as the GPU does in its slot):
    // every other one grows by 4 bytes, the rest shrink by 4, and the copy is written back
    // into the received mbuf, which is then sent.
    let mut o = dpdk_common::vdev("net_ring_zcwb0");
    (o.rx_queues, o.tx_queues) = (2, 2);
    let port = DpdkPort::open(&o, 0).expect("net_ring port");
    let before = port.mbufs_in_use();
    let frames: Vec<Vec<u8>> = (0..20u32)
        .map(|i| dpdk_common::frame(17, [10, 0, 0, 1], [10, 0, 0, 3], 7, 9, 100 + i as usize, i))
        .collect();
    let n = port
        .tx(0)
        .expect("tx")
        .tx_burst(&mut frames.iter().map(|f| f.as_slice()))
        .expect("prime");
    assert_eq!(n, frames.len());
    let mut burst = MbufBurst::new();
    take_mbufs(&mut port.rx(&[0]).expect("rx"), &mut burst, frames.len());
    assert_eq!(burst.len(), frames.len());
    assert!(port.mbufs_in_use() >= before + frames.len() as u64);
    let received: Vec<usize> = (0..burst.len()).map(|i| burst.mbuf_addr(i)).collect();
    let rewritten: Vec<Vec<u8>> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut r = f.clone();
            r[0..6].copy_from_slice(&[2, 0, 0, 0, 0, i as u8]);
            if i % 2 == 0 {
                r.extend_from_slice(&[0xAB; 4]);
            } else {
                r.truncate(f.len() - 4);
            }
            r
        })
        .collect();
    let bytes_before = burst.bytes();
    for (i, r) in rewritten.iter().enumerate() {
        burst.write_frame(i, r).expect("fits its mbuf");
        assert_eq!(burst.frame(i), r.as_slice(), "frame {i} written back");
    }
    // As many frames grew as shrank, by the same 4 bytes.
    assert_eq!(burst.bytes(), bytes_before);
    // Too long for any mbuf: refused, the frame unchanged.
    let huge = vec![0u8; 70_000];
    let e = burst.write_frame(0, &huge).expect_err("too long");
    assert!(e.to_string().contains("do not fit"), "{e}");
    assert_eq!(burst.frame(0), rewritten[0].as_slice());
    let sent = port.tx(1).expect("tx").tx_mbufs(&mut burst).expect("send");
    assert_eq!(sent.sent, frames.len());
    let mut out = MbufBurst::new();
    take_mbufs(&mut port.rx(&[1]).expect("rx"), &mut out, frames.len());
    assert_eq!(out.len(), frames.len());
    for (i, r) in rewritten.iter().enumerate() {
        assert_eq!(
            out.mbuf_addr(i),
            received[i],
            "frame {i}: the mbuf it came in"
        );
        assert_eq!(out.frame(i), r.as_slice(), "frame {i}: the rewritten bytes");
    }
    out.clear();
    // Every mbuf went back to its pool.
    assert_eq!(port.mbufs_in_use(), before, "no mbuf leaked");
}

/// A slow path (`output.to_host`) keeps `pktwarp run` on the copying path (the zero-copy
/// workers have no way to it), and every `to_host` frame reaches it.
#[test]
fn a_slow_path_keeps_the_copying_path_and_gets_its_frames() {
    let dir = dpdk_common::scratch("zc-slow");
    let (input, output, slow) = (
        dir.join("in.pcap"),
        dir.join("out.pcap"),
        dir.join("slow.pcap"),
    );
    let frames: Vec<Vec<u8>> = (0..60u32)
        .map(|i| {
            let proto = if i % 3 == 0 { 17 } else { 6 };
            dpdk_common::frame(proto, [10, 0, 0, 1], [10, 0, 0, 2], 4000, 80, 90, i)
        })
        .collect();
    dpdk_common::write_pcap(&input, &frames);
    std::fs::write(
        dir.join("acl.yaml"),
        "rules:\n  - { name: udp-up, proto: udp, action: to-host }\n",
    )
    .expect("rules");
    let eal: Vec<String> = dpdk_common::eal_args()
        .iter()
        .map(|a| format!("{a:?}"))
        .collect();
    let cfg = dir.join("zc.yaml");
    std::fs::write(
        &cfg,
        format!(
            "ports:
  - name: wire
    dpdk:
      eal_args: [{}]
      vdev: \"net_pcap44,rx_pcap={},tx_pcap={}\"
      mempool_size: 2047
      rx_descriptors: 256
      tx_descriptors: 256
      idle_end_ms: 300
queues: {{ count: 1, burst: 32 }}
pipeline: [parse, {{ acl: {{ rules: acl.yaml }} }}]
executor: {{ kind: cpu }}
metrics: {{ enabled: false }}
output: {{ port: wire, to_host: {{ pcap: {} }} }}
",
            eal.join(", "),
            input.display(),
            output.display(),
            slow.display()
        ),
    )
    .expect("write config");
    let cfg = pipeline::config::load(&cfg).expect("config");
    let p = pipeline::daemon::prepare(cfg).expect("prepare");
    let ports = pipeline::daemon::open_ports(&p.cfg).expect("open ports");
    let shared = CpuShared::new(&p.cpu_spec());
    let s = pipeline::daemon::run_cpu(&p, &shared, ports);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.forwarding, "copy", "{s:?}");
    assert_eq!(
        capture_frames(&slow).unwrap().len(),
        20,
        "every UDP frame to the slow path"
    );
    assert_eq!(
        capture_frames(&output).unwrap().len(),
        40,
        "the TCP frames out"
    );
    let _ = std::fs::remove_dir_all(dir);
}
