//! net_pcap in -> DPDK port RX -> DPDK port TX -> net_pcap out, through a real EAL: the output
//! capture holds the input's frames byte for byte, minus the drops the port counted. Both
//! paths: the copying one (`rx_burst` / `tx_burst`) and the zero-copy one (`rx_mbufs`, the
//! parse + count stages on the mbufs, `retain`, `tx_mbufs`), plus chained (jumbo) mbufs.

#![cfg(feature = "dpdk")]

mod dpdk_common;

use pipeline::internal::testdata::capture_frames;
use std::path::Path;

use pipeline::burst::Burst;
use pipeline::internal::port::dpdk::DpdkPort;
use pipeline::port::{RxPort, RxStatus, TxPort};

fn counter(c: &[(String, u64)], name: &str) -> u64 {
    c.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no counter {name} in {c:?}"))
}

/// Forwards every frame of `input` through one DPDK port that reads and writes pcap files.
fn forward(input: &Path, tag: &str, id: u32) {
    let dir = dpdk_common::scratch(tag);
    let out = dir.join("out.pcap");
    let devargs = format!(
        "net_pcap{id},rx_pcap={},tx_pcap={}",
        input.display(),
        out.display()
    );
    let mut opts = dpdk_common::vdev(&devargs);
    opts.idle_end_ms = Some(300);
    let port = DpdkPort::open(&opts, 0).expect("open net_pcap port");
    assert_eq!(port.setup().driver, "net_pcap");
    let mut rx = port.rx(&[]).expect("rx handle");
    let mut tx = port.tx(0).expect("tx handle");
    let mut burst = Burst::with_capacity(64, 64 * 2048);
    let (mut received, mut sent) = (0usize, 0usize);
    loop {
        burst.clear();
        match rx.rx_burst(&mut burst, 32).expect("rx") {
            RxStatus::Frames(n) => {
                received += n;
                assert_eq!(burst.len(), n);
                for d in &burst.descs {
                    assert_eq!(d.queue, 0);
                    assert!(d.timestamp_ns > 0);
                }
                sent += tx
                    .tx_burst(&mut burst.frames().map(|(_, f)| f))
                    .expect("tx");
            }
            RxStatus::Idle => std::thread::yield_now(),
            RxStatus::End => break,
        }
    }
    tx.flush().expect("flush");
    let counters = port.counters();
    assert_eq!(
        rx.port_counters(),
        port.counters(),
        "RxPort exposes the port's counters"
    );
    let drops = counter(&counters, "pktwarp_tx_full")
        + counter(&counters, "pktwarp_tx_nombuf")
        + counter(&counters, "pktwarp_tx_oversize");
    assert_eq!(counter(&counters, "ethdev_ipackets"), received as u64);
    assert_eq!(counter(&counters, "pktwarp_rx_frames"), received as u64);
    assert_eq!(counter(&counters, "pktwarp_tx_frames"), sent as u64);
    assert_eq!(
        received as u64,
        sent as u64 + drops,
        "every frame sent or counted"
    );
    assert!(
        counters.iter().any(|(k, _)| k.starts_with("xstat_")),
        "xstats present: {counters:?}"
    );
    // Closing the port closes the pcap dumper.
    drop((rx, tx, port));

    let want = capture_frames(input).unwrap();
    let got = capture_frames(&out).unwrap();
    assert_eq!(want.len(), received, "net_pcap delivered every input frame");
    assert_eq!(drops, 0, "no drops expected on a pcap-to-pcap forward");
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "frame {i} differs");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn pcap_to_pcap_is_byte_identical_multi_proto() {
    forward(
        &pipeline::internal::testdata::multi_proto_pcap(),
        "pcap-multi",
        10,
    );
}

#[test]
fn pcap_to_pcap_is_byte_identical_imix() {
    // 601 generated frames, up to full-size: several RX bursts, TX of every size.
    forward(&pipeline::internal::testdata::imix_pcap(), "pcap-imix", 11);
}

#[test]
fn second_eal_args_must_match() {
    let mut o = dpdk_common::vdev("net_null_never0");
    o.eal_args = vec!["--no-huge".into()];
    // Initialise with the shared args first (another test may already have).
    drop(DpdkPort::open(&dpdk_common::vdev("net_null9"), 0).expect("null port"));
    let err = DpdkPort::open(&o, 0)
        .err()
        .expect("different eal_args refused");
    assert!(err.to_string().contains("one EAL per process"), "{err}");
}

// ---- The zero-copy path: rx_mbufs -> pipeline on the mbufs -> free dropped -> tx_mbufs. ----

use pipeline::counters::QueueCounters;
use pipeline::internal::port::dpdk::MbufBurst;
use pipeline::stage::{Pipeline, Stage};

/// Verdicts of the parse + count pipeline on `frames` through the copying path's entry point
/// (`run_burst`), the reference for what the zero-copy path must forward.
fn reference_forwards(frames: &[Vec<u8>]) -> Vec<bool> {
    let p = Pipeline::new(vec![Stage::Parse, Stage::Count]);
    let mut b = Burst::default();
    for f in frames {
        b.push(f, Default::default());
    }
    let c = QueueCounters::new(2, 0);
    let (mut m, mut v) = (Vec::new(), Vec::new());
    p.run_burst(&b, &mut m, &mut v, &c);
    v.iter().map(|v| v.action.forwards()).collect()
}

/// Forwards `input` through a net_pcap port zero-copy with the parse + count stages run on
/// the mbufs: the output holds exactly the input frames the verdicts pass, byte for byte, and
/// every other frame is a counted drop.
fn forward_zero_copy(input: &Path, tag: &str, id: u32) {
    let dir = dpdk_common::scratch(tag);
    let out = dir.join("out.pcap");
    let devargs = format!(
        "net_pcap{id},rx_pcap={},tx_pcap={}",
        input.display(),
        out.display()
    );
    let mut opts = dpdk_common::vdev(&devargs);
    opts.idle_end_ms = Some(300);
    let port = DpdkPort::open(&opts, 0).expect("open net_pcap port");
    let mut rx = port.rx(&[]).expect("rx handle");
    let mut tx = port.tx(0).expect("tx handle");
    let pipeline = Pipeline::new(vec![Stage::Parse, Stage::Count]);
    let c = QueueCounters::new(2, 0);
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    let mut burst = MbufBurst::new();
    let (mut received, mut dropped, mut sent) = (0usize, 0usize, 0usize);
    loop {
        match rx.rx_mbufs(&mut burst, 32).expect("rx") {
            RxStatus::Frames(n) => {
                assert_eq!(burst.len(), n);
                received += n;
                pipeline.run_frames(burst.frames(), &mut metas, &mut verdicts, &c);
                dropped += burst.retain(|i| verdicts[i].action.forwards());
                let want = burst.len();
                let r = tx.tx_mbufs(&mut burst).expect("tx");
                assert!(burst.is_empty());
                assert_eq!(r.sent + r.dropped, want);
                sent += r.sent;
            }
            RxStatus::Idle => std::thread::yield_now(),
            RxStatus::End => break,
        }
    }
    tx.flush().expect("flush");
    let counters = port.counters();
    let tx_drops = counter(&counters, "pktwarp_tx_full")
        + counter(&counters, "pktwarp_tx_nombuf")
        + counter(&counters, "pktwarp_tx_oversize");
    assert_eq!(counter(&counters, "ethdev_ipackets"), received as u64);
    assert_eq!(counter(&counters, "pktwarp_rx_frames"), received as u64);
    assert_eq!(counter(&counters, "pktwarp_tx_frames"), sent as u64);
    assert_eq!(
        received,
        sent + dropped + tx_drops as usize,
        "every frame sent or counted"
    );
    assert_eq!(
        c.stage_frames[0].get(),
        received as u64,
        "parse ran on every frame"
    );
    drop((rx, tx, port));

    let want_all = capture_frames(input).unwrap();
    assert_eq!(
        want_all.len(),
        received,
        "net_pcap delivered every input frame"
    );
    let pass = reference_forwards(&want_all);
    assert_eq!(
        pass.iter().filter(|p| !**p).count(),
        dropped,
        "the verdicts on the mbufs equal the copying path's"
    );
    let want: Vec<&Vec<u8>> = want_all
        .iter()
        .zip(&pass)
        .filter(|(_, p)| **p)
        .map(|(f, _)| f)
        .collect();
    let got = capture_frames(&out).unwrap();
    assert_eq!(tx_drops, 0);
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, *w, "frame {i} differs");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn zero_copy_pcap_to_pcap_is_byte_identical_multi_proto() {
    forward_zero_copy(
        &pipeline::internal::testdata::multi_proto_pcap(),
        "pcap-zc-multi",
        20,
    );
}

#[test]
fn zero_copy_pcap_to_pcap_is_byte_identical_imix() {
    forward_zero_copy(
        &pipeline::internal::testdata::imix_pcap(),
        "pcap-zc-imix",
        21,
    );
}

/// Frames larger than one mbuf arrive from net_pcap as mbuf chains: the zero-copy path reads
/// each as one contiguous frame (copied once), sends the chain as it is to a device that takes
/// chains (net_ring, looped back: the same bytes come out), and frees and counts
/// (`tx_oversize`) a chain offered to a device that does not (net_null). `drop_frame` frees
/// one frame and closes the gap.
#[test]
fn zero_copy_chained_frames() {
    let dir = dpdk_common::scratch("pcap-zc-chain");
    let input = dir.join("in.pcap");
    let sizes = [60usize, 3000, 9000, 1514, 5000, 64];
    let frames: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| dpdk_common::frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 7, 9, n, i as u32))
        .collect();
    dpdk_common::write_pcap(&input, &frames);
    let pcap_in = |id: u32, index: u16| {
        let mut o = dpdk_common::vdev(&format!("net_pcap{id},rx_pcap={}", input.display()));
        o.idle_end_ms = Some(300);
        DpdkPort::open(&o, index).expect("open net_pcap port")
    };
    let receive = |rx: &mut pipeline::internal::port::dpdk::DpdkRx, burst: &mut MbufBurst| loop {
        match rx.rx_mbufs(burst, 32).expect("rx") {
            RxStatus::Frames(n) => return n,
            RxStatus::Idle => std::thread::yield_now(),
            RxStatus::End => panic!("no frames"),
        }
    };
    let port = pcap_in(22, 0);
    let ring = DpdkPort::open(&dpdk_common::vdev("net_ring22"), 1).expect("ring port");
    assert!(ring.setup().tx_multi_seg, "net_ring sends chains");
    let null = DpdkPort::open(&dpdk_common::vdev("net_null22"), 2).expect("null port");
    assert!(!null.setup().tx_multi_seg, "net_null takes no chains");
    // Which receiving ports may deliver chains (TX checks bursts from those only).
    assert!(port.setup().rx_may_chain && ring.setup().rx_may_chain);
    assert!(!null.setup().rx_may_chain);
    let mut rx = port.rx(&[]).expect("rx");
    let (mut ring_rx, mut ring_tx) = (ring.rx(&[]).expect("ring rx"), ring.tx(0).expect("ring tx"));
    let mut null_tx = null.tx(0).expect("null tx");

    let mut burst = MbufBurst::new();
    assert_eq!(
        receive(&mut rx, &mut burst),
        frames.len(),
        "one receive call"
    );
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(
            burst.is_chained(i),
            f.len() > 2048,
            "frame {i} ({} B)",
            f.len()
        );
        assert_eq!(burst.frame(i), f.as_slice(), "frame {i} reads back whole");
        assert_eq!(burst.desc(i).len as usize, f.len());
    }
    // A second receive into a burst still holding frames is refused (nothing freed unseen).
    assert!(rx.rx_mbufs(&mut burst, 32).is_err());
    // Drop the first frame (verdict drop): the rest move down.
    burst.drop_frame(0);
    assert_eq!(burst.len(), frames.len() - 1);
    assert_eq!(burst.frame(0), frames[1].as_slice());
    assert_eq!(
        burst.bytes(),
        frames[1..].iter().map(|f| f.len() as u64).sum::<u64>()
    );
    let r = ring_tx.tx_mbufs(&mut burst).expect("ring tx");
    assert_eq!((r.sent, r.dropped), (frames.len() - 1, 0));
    // The chains come back out of the ring as they went in.
    assert_eq!(receive(&mut ring_rx, &mut burst), frames.len() - 1);
    for (i, f) in frames[1..].iter().enumerate() {
        assert_eq!(burst.is_chained(i), f.len() > 2048);
        assert_eq!(
            burst.frame(i),
            f.as_slice(),
            "frame {} after the ring",
            i + 1
        );
    }
    burst.clear();

    // The same frames again (a second net_pcap device on the file) into net_null.
    let port2 = pcap_in(23, 3);
    let mut rx2 = port2.rx(&[]).expect("rx2");
    assert_eq!(receive(&mut rx2, &mut burst), frames.len());
    let chains = sizes.iter().filter(|n| **n > 2048).count();
    let r = null_tx.tx_mbufs(&mut burst).expect("null tx");
    assert_eq!((r.sent, r.dropped), (frames.len() - chains, chains));
    assert_eq!(
        counter(&null.counters(), "pktwarp_tx_oversize"),
        chains as u64,
        "chains the device cannot send are counted"
    );
    drop(burst);
    drop((rx, ring_rx, ring_tx, rx2, null_tx, port, port2, ring, null));
    let _ = std::fs::remove_dir_all(dir);
}
