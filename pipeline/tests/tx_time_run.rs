//! Timed send end to end through the daemon (CPU executor): pcap in -> `[parse, tx_time]` ->
//! pcap out, and every record of the output is stamped with its frame's send time (the input
//! record's time plus the delay), frame by frame, in order, for a nanosecond and a microsecond
//! input, into pcap and pcapng outputs; the frames `parse` drops are not sent. The GPU
//! executor's TX thread hands the TX ring's send times to the same ports (`port::out::Dest`).

use std::path::{Path, PathBuf};

use pipeline::config;
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::port::gen::{build_frame, FrameSpec};
use pipeline::internal::port::pcap::{CaptureReader, CaptureWriter, WriteFormat};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-txtime-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run_config(path: &Path) -> daemon::Summary {
    let cfg = config::load(path).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap_or_else(|e| panic!("{e:#}"));
    let ports = daemon::open_ports(&p.cfg).unwrap();
    let shared = CpuShared::new(&p.cpu_spec());
    daemon::run_cpu(&p, &shared, ports)
}

/// (bytes, timestamp ns) of every record.
fn records(path: &Path) -> Vec<(Vec<u8>, u64)> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut v = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        v.push((f.data.to_vec(), f.timestamp_ns));
    }
    v
}

/// 60 frames, every 7th cut short (a `parse_error` drop), at irregular times from
/// 2026-12-04 (ns apart, or whole us for a microsecond file); returns (frame, its time, kept).
fn input(path: &Path, micro: bool) -> Vec<(Vec<u8>, u64, bool)> {
    let base = 1_796_342_400_000_000_000u64;
    let mut out = Vec::new();
    let mut t = base;
    for i in 0..60u64 {
        let mut f = build_frame(&FrameSpec::tcp(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            1000 + i as u16,
            80,
            64 + (i as u16 % 9) * 40,
        ));
        let keep = i % 7 != 3;
        if !keep {
            f.truncate(20);
        }
        t += 1 + (i * i * 7919) % 3_000_000;
        if micro {
            t -= t % 1000;
        }
        out.push((f, t, keep));
    }
    if micro {
        let frames: Vec<Vec<u8>> = out.iter().map(|(f, _, _)| f.clone()).collect();
        // testdata::write_pcap stamps its own times; write the microsecond records here.
        let mut b = Vec::new();
        for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 262_144, 1] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for ((_, t, _), f) in out.iter().zip(&frames) {
            let us = t / 1000;
            let len = f.len() as u32;
            for v in [(us / 1_000_000) as u32, (us % 1_000_000) as u32, len, len] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend_from_slice(f);
        }
        std::fs::write(path, b).unwrap();
    } else {
        let mut w = CaptureWriter::create(path, WriteFormat::Pcap, 65535).unwrap();
        for (f, t, _) in &out {
            w.write_frame(f, f.len() as u32, *t).unwrap();
        }
        w.flush().unwrap();
    }
    out
}

fn check(tag: &str, micro: bool, format: &str, delay_ns: u64) {
    let dir = tmpdir(tag);
    let frames = input(&dir.join("in.pcap"), micro);
    let yaml = format!(
        "ports:\n  - name: in\n    pcap: {{ rx: {{ path: in.pcap }} }}\n\
         \x20 - name: out\n    pcap: {{ tx: {{ path: out.pcap, format: {format} }} }}\n\
         queues: {{ count: 1, burst: 8 }}\n\
         pipeline:\n  - parse\n  - tx_time: {{ delay_ns: {delay_ns} }}\n  - count\n\
         executor: {{ kind: cpu }}\noutput: {{ port: out }}\nmetrics: {{ enabled: false }}\n"
    );
    std::fs::write(dir.join("c.yaml"), yaml).unwrap();
    let s = run_config(&dir.join("c.yaml"));
    let want: Vec<(Vec<u8>, u64)> = frames
        .iter()
        .filter(|(_, _, keep)| *keep)
        .map(|(f, t, _)| (f.clone(), t + delay_ns))
        .collect();
    let got = records(&dir.join("out.pcap"));
    assert_eq!(s.tx_frames, want.len() as u64, "{tag}");
    assert_eq!(got.len(), want.len(), "{tag}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.0, w.0, "{tag}: frame {i} bytes");
        assert_eq!(
            g.1, w.1,
            "{tag}: frame {i} record time is not its send time"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn pcap_records_carry_the_send_times_frame_by_frame() {
    check("ns-pcap", false, "pcap", 1_234_567);
    check("us-pcap", true, "pcap", 250_000);
    check("ns-pcapng", false, "pcapng", 60_000_000_000);
    check("zero-delay", false, "pcap", 0);
}

#[test]
fn without_tx_time_records_are_stamped_at_the_time_sent() {
    let dir = tmpdir("untimed");
    let frames = input(&dir.join("in.pcap"), false);
    let yaml = "ports:\n  - name: in\n    pcap: { rx: { path: in.pcap } }\n\
                \x20 - name: out\n    pcap: { tx: { path: out.pcap } }\n\
                pipeline: [parse]\nexecutor: { kind: cpu }\noutput: { port: out }\n\
                metrics: { enabled: false }\n";
    std::fs::write(dir.join("c.yaml"), yaml).unwrap();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    run_config(&dir.join("c.yaml"));
    let got = records(&dir.join("out.pcap"));
    assert_eq!(got.len(), frames.iter().filter(|f| f.2).count());
    assert!(
        got.iter().all(|(_, t)| *t >= before),
        "send now = wall clock"
    );
    std::fs::remove_dir_all(&dir).ok();
}
