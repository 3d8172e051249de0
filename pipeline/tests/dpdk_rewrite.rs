//! l2fwd through a real DPDK virtual device (net_pcap, `--no-huge --no-pci`), from the config:
//! the DPDK port receives the capture, `l2fwd: { mac: swap }` rewrites every frame in its
//! mbuf (the zero-copy path: the frames are rewritten where they arrived), and the same port
//! transmits; the output capture is the input with the two MACs of every frame
//! exchanged and nothing else changed, frame by frame.

#![cfg(feature = "dpdk")]

mod dpdk_common;

use pipeline::internal::testdata::capture_frames;
use std::net::IpAddr;

use pipeline::config;
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::port::gen::{build_frame, FrameSpec};
use pipeline::internal::port::pcap::{CaptureWriter, WriteFormat};

#[test]
fn l2fwd_over_net_pcap_swaps_every_frames_macs() {
    let dir = dpdk_common::scratch("dpdk-l2fwd");
    let (input, output) = (dir.join("in.pcap"), dir.join("out.pcap"));
    let mut w = CaptureWriter::create(&input, WriteFormat::Pcap, 65535).unwrap();
    let mut sent = Vec::new();
    for i in 0..300u16 {
        let d: IpAddr = if i % 4 == 0 {
            "2001:db8::7".parse().unwrap()
        } else {
            "192.0.2.7".parse().unwrap()
        };
        let s: IpAddr = if d.is_ipv4() {
            "10.0.0.1".parse().unwrap()
        } else {
            "2001:db8::1".parse().unwrap()
        };
        let mut spec = FrameSpec::tcp(s, d, 1000 + i, 80, 64 + (i * 13) % 1400);
        if i % 3 == 0 {
            spec.proto = 17;
        }
        let mut f = build_frame(&spec);
        // Distinct MACs per frame, so a swap is visible.
        f[5] = i as u8;
        f[11] = (i >> 8) as u8 ^ 0x5a;
        w.write_frame(&f, f.len() as u32, u64::from(i) * 1000)
            .unwrap();
        sent.push(f);
    }
    w.flush().unwrap();
    let eal: Vec<String> = dpdk_common::eal_args()
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect();
    let yaml = format!(
        "ports:\n  - name: wire\n    dpdk:\n      eal_args: [{}]\n      vdev: \"net_pcap7,rx_pcap={},tx_pcap={}\"\n      mempool_size: 2047\n      idle_end_ms: 500\n\
         queues: {{ count: 1, burst: 32 }}\n\
         pipeline:\n  - l2fwd: {{ mac: swap }}\n  - count\n\
         executor: {{ kind: cpu }}\noutput: {{ port: wire }}\n",
        eal.join(", "),
        input.display(),
        output.display()
    );
    std::fs::write(dir.join("c.yaml"), yaml).unwrap();
    let cfg = config::load(&dir.join("c.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap_or_else(|e| panic!("{e:#}"));
    let ports = daemon::open_ports(&p.cfg).unwrap();
    let shared = CpuShared::new(&p.cpu_spec());
    let s = daemon::run_cpu(&p, &shared, ports);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(
        s.forwarding, "zero_copy",
        "rewrites run in the mbufs, on a port that may chain too"
    );
    assert_eq!((s.rx_frames, s.tx_frames), (300, 300));
    let got = capture_frames(&output).unwrap();
    assert_eq!(got.len(), sent.len());
    for (i, (g, f)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(g.len(), f.len(), "frame {i}");
        assert_eq!(&g[..6], &f[6..12], "frame {i}: destination = old source");
        assert_eq!(&g[6..12], &f[..6], "frame {i}: source = old destination");
        assert_eq!(&g[12..], &f[12..], "frame {i}: nothing else changes");
    }
    std::fs::remove_dir_all(&dir).ok();
}
