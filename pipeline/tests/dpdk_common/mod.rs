//! Helpers shared by the DPDK test binaries. Each binary is one process and so one EAL; its
//! tests share it (same arguments) and use distinct vdev names.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use pipeline::internal::port::dpdk::DpdkPortOptions;

/// EAL arguments for virtual devices only: no hugepages, no PCI scan, 512 MiB of ordinary
/// memory, a file prefix unique to this process, no shared config files.
pub fn eal_args() -> &'static [String] {
    static ARGS: OnceLock<Vec<String>> = OnceLock::new();
    ARGS.get_or_init(|| {
        [
            "--no-huge".to_string(),
            "--no-pci".into(),
            "--no-shconf".into(),
            "-m".into(),
            "512".into(),
            format!("--file-prefix=pwtest{}", std::process::id()),
            "-l".into(),
            "0".into(),
            "--log-level=*:warning".into(),
        ]
        .to_vec()
    })
}

/// Options for a vdev with small pools (tests run many ports in 512 MiB).
pub fn vdev(devargs: &str) -> DpdkPortOptions {
    let mut o = DpdkPortOptions::vdev(&[], devargs);
    o.eal_args = eal_args().to_vec();
    o.mempool_size = 2047;
    o.rx_descriptors = 256;
    o.tx_descriptors = 256;
    o
}

/// A unique scratch directory under the system temp dir.
pub fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

/// An Ethernet / IPv4 / UDP (proto 17) or TCP (6) frame with a payload pattern of `len` bytes
/// in total; `seq` is written into the payload so frames differ.
pub fn frame(
    proto: u8,
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    len: usize,
    seq: u32,
) -> Vec<u8> {
    let l4_len = if proto == 6 { 20 } else { 8 };
    let len = len.max(14 + 20 + l4_len + 4);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let mut sum = 0u32;
    for c in ip.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let l4 = &mut f[34..];
    l4[0..2].copy_from_slice(&sport.to_be_bytes());
    l4[2..4].copy_from_slice(&dport.to_be_bytes());
    if proto == 6 {
        l4[12] = 0x50;
        l4[13] = 0x10;
    } else {
        l4[4..6].copy_from_slice(&((len - 34) as u16).to_be_bytes());
    }
    let p = 34 + l4_len;
    f[p..p + 4].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[p + 4..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(7).wrapping_add(seq as u8);
    }
    f
}

/// Writes a classic pcap file (microsecond timestamps, Ethernet) holding `frames`.
pub fn write_pcap(path: &std::path::Path, frames: &[Vec<u8>]) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        for v in [1_700_000_000u32, i as u32, f.len() as u32, f.len() as u32] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).expect("write pcap");
}

/// A `ports:` entry of a config: the DPDK port `name` on a net_pcap device (`vdev`, e.g.
/// `net_pcap60`) reading the capture `rx` and writing `tx`, with small pools, this process's
/// EAL arguments and an end 300 ms after the capture's last frame.
pub fn pcap_port_yaml(
    name: &str,
    vdev: &str,
    rx: &std::path::Path,
    tx: &std::path::Path,
) -> String {
    let eal: Vec<String> = eal_args().iter().map(|a| format!("{a:?}")).collect();
    format!(
        "  - name: {name}
    dpdk:
      eal_args: [{}]
      vdev: \"{vdev},rx_pcap={},tx_pcap={}\"
      mempool_size: 2047
      rx_descriptors: 256
      tx_descriptors: 256
      idle_end_ms: 300
",
        eal.join(", "),
        rx.display(),
        tx.display()
    )
}

/// Writes `yaml` to `dir/name`, then loads, prepares and runs it on the CPU executor as
/// `pktwarp run` would: the run's summary.
pub fn run_cpu_yaml(dir: &std::path::Path, name: &str, yaml: &str) -> pipeline::daemon::Summary {
    let cfg = dir.join(name);
    std::fs::write(&cfg, yaml).expect("write config");
    let cfg = pipeline::config::load(&cfg).expect("config");
    let p = pipeline::daemon::prepare(cfg).expect("prepare");
    let ports = pipeline::daemon::open_ports(&p.cfg).expect("open ports");
    let shared = pipeline::daemon::CpuShared::new(&p.cpu_spec());
    pipeline::daemon::run_cpu(&p, &shared, ports)
}

/// UDP frames 10.0.0.1:7 -> 10.0.0.2:9 of the given sizes, frame i carrying i.
pub fn udp_frames(sizes: &[usize]) -> Vec<Vec<u8>> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 7, 9, n, i as u32))
        .collect()
}
