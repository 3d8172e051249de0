//! Timed send through a real DPDK virtual device (net_pcap, `--no-huge --no-pci`), which has
//! no Tx timestamp offload, so the port paces in software: frames are held until their send
//! time and handed to the device then. net_pcap stamps each record with the time it was sent,
//! so its output shows the pacing: every frame leaves no earlier than its send time, the
//! records are spaced at least as the send times are, and the run lasts at least as long. A
//! send time beyond `tx_max_hold_ms` is a `tx_horizon` drop, one in the past is sent at once.
//! Directly on a TX handle, and end to end through the daemon (pcap in -> [parse, tx_time] ->
//! DPDK out).

#![cfg(feature = "dpdk")]

mod dpdk_common;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pipeline::config;
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::port::dpdk::DpdkPort;
use pipeline::internal::port::pcap::{CaptureReader, CaptureWriter, WriteFormat};
use pipeline::port::TxPort;

/// The realtime clock, as the port's pacing and net_pcap's record times read it.
fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// net_pcap's record times follow the TSC from its own start-up reading of the realtime
/// clock, ours from another: allow them this much apart.
const CLOCKS: u64 = 2_000_000;

fn counter(c: &[(String, u64)], name: &str) -> u64 {
    c.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no counter {name} in {c:?}"))
}

/// (frame's sequence number from its payload, record time) of every record.
fn records(path: &Path) -> Vec<(u32, u64)> {
    let mut r = CaptureReader::open(path).expect("open output");
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().expect("read output") {
        let seq = u32::from_be_bytes(f.data[42..46].try_into().unwrap());
        out.push((seq, f.timestamp_ns));
    }
    out
}

fn frame(seq: u32) -> Vec<u8> {
    dpdk_common::frame(17, [10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000, 100, seq)
}

/// Frames `first..first + n` with send times `start + k * gap`: in order, each record no
/// earlier than its send time (a frame may leave late, on a loaded machine, never early), the
/// records spaced as asked (the median gap at least `gap` less 0.5 ms, every gap at least
/// `gap` less the earlier frame's lateness), the span at least as long. Returns the largest
/// lateness (ns).
fn assert_paced(recs: &[(u32, u64)], first: u32, n: u32, start: u64, gap: u64) -> u64 {
    let paced: Vec<&(u32, u64)> = recs
        .iter()
        .filter(|(s, _)| (first..first + n).contains(s))
        .collect();
    assert_eq!(paced.len(), n as usize, "{recs:?}");
    let mut late = Vec::new();
    for (k, (s, t)) in paced.iter().enumerate() {
        assert_eq!(*s, first + k as u32, "held frames leave in time order");
        let due = start + k as u64 * gap;
        assert!(
            *t + CLOCKS >= due,
            "frame {s} left {} us before its send time",
            (due - *t) / 1000
        );
        late.push(t.saturating_sub(due));
    }
    let mut gaps = Vec::new();
    for (k, w) in paced.windows(2).enumerate() {
        let d = w[1].1.saturating_sub(w[0].1);
        assert!(
            d + late[k] + CLOCKS / 2 >= gap,
            "frames {} and {} only {} us apart (asked {} us)",
            w[0].0,
            w[1].0,
            d / 1000,
            gap / 1000
        );
        gaps.push(d);
    }
    gaps.sort_unstable();
    let median = gaps[gaps.len() / 2];
    assert!(
        median + 500_000 >= gap,
        "median gap {median} ns, asked {gap}"
    );
    let span = paced[paced.len() - 1].1 - paced[0].1;
    assert!(
        span + late[0] + CLOCKS >= (n as u64 - 1) * gap,
        "span {span} ns"
    );
    let worst = late.iter().copied().max().unwrap_or(0);
    eprintln!(
        "paced {n} frames {} us apart: median gap {} us, lateness median {} us, max {} us",
        gap / 1000,
        median / 1000,
        {
            let mut l = late.clone();
            l.sort_unstable();
            l[l.len() / 2] / 1000
        },
        worst / 1000
    );
    worst
}

#[test]
fn software_pacing_on_a_tx_handle() {
    let dir = dpdk_common::scratch("dpdk-timed-handle");
    let (input, output) = (dir.join("empty.pcap"), dir.join("out.pcap"));
    dpdk_common::write_pcap(&input, &[]);
    let mut opts = dpdk_common::vdev(&format!(
        "net_pcap20,rx_pcap={},tx_pcap={}",
        input.display(),
        output.display()
    ));
    opts.tx_max_hold_ms = 1000;
    let port = DpdkPort::open(&opts, 0).expect("open net_pcap port");
    assert_eq!(
        port.setup().tx_timestamp,
        None,
        "net_pcap has no Tx timestamp offload"
    );
    let mut tx = port.tx(0).expect("tx handle");
    let (n, gap) = (20u32, 10_000_000u64);
    let frames: Vec<Vec<u8>> = (0..n + 3).map(frame).collect();
    let t0 = Instant::now();
    let start = wall_ns() + 100_000_000;
    // 0..n paced; n: far beyond the horizon; n + 1: in the past; n + 2: no time (now).
    let mut timed: Vec<(&[u8], u64)> = (0..n)
        .map(|k| (&frames[k as usize][..], start + u64::from(k) * gap))
        .collect();
    timed.push((&frames[n as usize], start + 5_000_000_000));
    timed.push((&frames[n as usize + 1], wall_ns() - 1_000_000_000));
    timed.push((&frames[n as usize + 2], 0));
    // For queue 3: the frames held are reported for it once they went out.
    let r = tx
        .tx_burst_queued(&mut timed.iter().copied(), 3)
        .expect("tx");
    // Sent now: the late one and the one without a time; held: the paced ones (not sent yet).
    assert_eq!((r.sent, r.held, r.too_far), (2, n as usize, 1));
    let bytes = |fs: &[Vec<u8>]| fs.iter().map(|f| f.len() as u64).sum::<u64>();
    assert_eq!(
        r.bytes,
        Some(bytes(&frames[n as usize + 1..n as usize + 3]))
    );
    // The TX thread's loop: polls without waiting.
    while t0.elapsed() < Duration::from_millis(150) {
        let p = Instant::now();
        tx.tx_poll().expect("poll");
        assert!(p.elapsed() < Duration::from_millis(5), "tx_poll waited");
        std::thread::sleep(Duration::from_micros(200));
    }
    // The rest is held; flush waits for it.
    tx.flush().expect("flush");
    let took = t0.elapsed();
    let c = port.counters();
    assert_eq!(counter(&c, "pktwarp_tx_paced"), u64::from(n));
    assert_eq!(counter(&c, "pktwarp_tx_horizon"), 1);
    assert_eq!(counter(&c, "pktwarp_tx_late"), 1);
    assert_eq!(counter(&c, "pktwarp_tx_frames"), u64::from(n) + 2);
    // Every held frame settled as sent, for the queue it was offered for.
    let mut settled = Vec::new();
    tx.take_settled(&mut settled);
    assert_eq!(
        settled,
        vec![pipeline::port::Settled {
            queue: 3,
            sent: u64::from(n),
            bytes: bytes(&frames[..n as usize]),
            failed: 0,
        }]
    );
    drop(tx);
    drop(port);
    assert!(
        took >= Duration::from_nanos(100_000_000 + u64::from(n - 1) * gap - CLOCKS),
        "the run took {took:?}"
    );
    let recs = records(&output);
    assert_eq!(recs.len(), n as usize + 2, "{recs:?}");
    // The two untimed ones left at once, before every paced one.
    assert_eq!((recs[0].0, recs[1].0), (n + 1, n + 2));
    assert!(recs[1].1 + CLOCKS < start);
    assert_paced(&recs, 0, n, start, gap);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn delay_line_through_the_daemon_to_net_pcap() {
    let dir = dpdk_common::scratch("dpdk-timed-daemon");
    let (empty, input, output) = (
        dir.join("empty.pcap"),
        dir.join("in.pcap"),
        dir.join("out.pcap"),
    );
    dpdk_common::write_pcap(&empty, &[]);
    // The capture's record times are the receive times the pcap port gives (its own clock):
    // here the realtime clock from now on, 8 ms apart, and one 5 s ahead.
    let (n, gap, delay) = (25u32, 8_000_000u64, 50_000_000u64);
    // Far enough ahead that config loading and the EAL's start leave every frame on time.
    let t0 = Instant::now();
    let base = wall_ns() + 1_000_000_000;
    let mut w = CaptureWriter::create(&input, WriteFormat::Pcap, 65535).unwrap();
    for k in 0..n {
        let f = frame(k);
        w.write_frame(&f, f.len() as u32, base + u64::from(k) * gap)
            .unwrap();
    }
    let far = frame(n);
    w.write_frame(&far, far.len() as u32, base + 5_000_000_000)
        .unwrap();
    w.flush().unwrap();
    let eal: Vec<String> = dpdk_common::eal_args()
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect();
    let yaml = format!(
        "ports:\n  - name: in\n    pcap: {{ rx: {{ path: in.pcap }} }}\n\
         \x20 - name: wire\n    dpdk:\n      eal_args: [{}]\n      vdev: \"net_pcap21,rx_pcap={},tx_pcap={}\"\n      mempool_size: 2047\n      idle_end_ms: 100\n      tx_max_hold_ms: 2000\n\
         queues: {{ count: 1, burst: 8 }}\n\
         pipeline:\n  - parse\n  - tx_time: {{ delay_ns: {delay} }}\n\
         executor: {{ kind: cpu }}\noutput: {{ port: wire }}\nmetrics: {{ enabled: false }}\n",
        eal.join(", "),
        empty.display(),
        output.display()
    );
    std::fs::write(dir.join("c.yaml"), yaml).unwrap();
    let cfg = config::load(&dir.join("c.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap_or_else(|e| panic!("{e:#}"));
    let ports = daemon::open_ports(&p.cfg).unwrap();
    let shared = CpuShared::new(&p.cpu_spec());
    let s = daemon::run_cpu(&p, &shared, ports);
    let took = t0.elapsed();
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.rx_frames, u64::from(n) + 1);
    assert_eq!(s.tx_frames, u64::from(n));
    let horizon = s.drops.iter().find(|(r, _)| r == "tx_horizon").map(|d| d.1);
    assert_eq!(horizon, Some(1), "{:?}", s.drops);
    let (_, pc) = s
        .port_counters
        .iter()
        .find(|(name, _)| name.contains("net_pcap21"))
        .expect("the DPDK port's counters");
    assert_eq!(counter(pc, "pktwarp_tx_paced"), u64::from(n));
    assert_eq!(counter(pc, "pktwarp_tx_late"), 0);
    assert_eq!(counter(pc, "pktwarp_tx_horizon"), 1);
    assert!(
        took >= Duration::from_nanos(1_000_000_000 + delay + u64::from(n - 1) * gap - CLOCKS),
        "the run took {took:?}"
    );
    let recs = records(&output);
    assert_eq!(recs.len(), n as usize);
    assert_paced(&recs, 0, n, base + delay, gap);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_tx_max_hold_ms_is_an_error_naming_file_line_key_and_range() {
    let dir = dpdk_common::scratch("dpdk-timed-bad");
    for (value, wanted) in [
        ("0", "0 is out of range"),
        ("-5", "-5 is out of range"),
        ("60001", "60001 is out of range"),
        ("1.5", "floating point"),
        ("soon", "\"soon\""),
        ("[1]", "sequence"),
    ] {
        let yaml = format!(
            "ports:\n  - name: in\n    pcap: {{ rx: {{ path: in.pcap }} }}\n\
             \x20 - name: wire\n    dpdk:\n      vdev: net_null9\n      tx_max_hold_ms: {value}\n\
             pipeline: [parse, {{ tx_time: {{ delay_ns: 5 }} }}]\noutput: {{ port: wire }}\n"
        );
        let path = dir.join("bad.yaml");
        std::fs::write(&path, yaml).unwrap();
        let e = match config::load(&path) {
            Ok(_) => panic!("{value}: accepted"),
            Err(e) => e.to_string(),
        };
        for w in ["bad.yaml:7", "tx_max_hold_ms", "1 ..= 60000", wanted] {
            assert!(e.contains(w), "{value}: `{w}` missing from: {e}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
