//! net_pcap in -> DPDK port RX -> DPDK port TX -> net_pcap out, through a real EAL: the output
//! capture holds the input's frames byte for byte, minus the drops the port counted.

#![cfg(feature = "dpdk")]

mod dpdk_common;

use std::path::Path;

use pipeline::burst::Burst;
use pipeline::port::dpdk::DpdkPort;
use pipeline::port::pcap::CaptureReader;
use pipeline::port::{RxPort, RxStatus, TxPort};

fn frames_of(path: &Path) -> Vec<Vec<u8>> {
    let mut r = CaptureReader::open(path).expect("open capture");
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().expect("read capture") {
        out.push(f.data.to_vec());
    }
    out
}

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

    let want = frames_of(input);
    let got = frames_of(&out);
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
        &dpdk_common::shared_data().join("pcaps/multi_proto.pcap"),
        "pcap-multi",
        10,
    );
}

#[test]
fn pcap_to_pcap_is_byte_identical_afs() {
    // 601 frames, up to full-size: several RX bursts, TX of every size.
    forward(
        &dpdk_common::shared_data().join("pcaps/tcpdump/afs.pcap"),
        "pcap-afs",
        11,
    );
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
