//! A capture recorded with a small snap length (records cut: captured length 64 < original
//! length 200) replayed through a run (CPU executor) to pcap and pcapng outputs: every record's
//! captured length is the bytes it holds, its original length the input's wire length, and
//! tshark reads the output with nothing beyond the expected "[Packet size limited during
//! capture]".

#[path = "tshark_common/mod.rs"]
mod tshark_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use pipeline::config;
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::port::gen::{build_frame, FrameSpec};
use pipeline::internal::port::pcap::CaptureReader;

const SNAP: usize = 64;
const WIRE: usize = 200;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-snaplen-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `n` UDP frames of 200 bytes on the wire, as a capture with snap length 64 holds them: a
/// microsecond pcap written by hand (global header snaplen 64; records incl_len 64, orig_len
/// 200). Returns the captured bytes of each.
fn write_snapped(path: &Path, n: usize) -> Vec<Vec<u8>> {
    let mut b = Vec::new();
    for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, SNAP as u32, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    let mut cut = Vec::new();
    for i in 0..n {
        let mut spec = FrameSpec::tcp(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            1000 + i as u16,
            53,
            // The generator's size counts the 4-byte FCS, which captures leave out.
            WIRE as u16 + 4,
        );
        spec.proto = 17;
        let f = build_frame(&spec);
        assert_eq!(f.len(), WIRE);
        for v in [1 + i as u32, 0, SNAP as u32, WIRE as u32] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&f[..SNAP]);
        cut.push(f[..SNAP].to_vec());
    }
    std::fs::write(path, b).unwrap();
    cut
}

/// The records of a pcap file walked by hand: (incl_len, orig_len, bytes). Fails unless the
/// records end exactly at the end of the file (every incl_len is the bytes that follow).
fn pcap_records(path: &Path) -> Vec<(u32, u32, Vec<u8>)> {
    let b = std::fs::read(path).unwrap();
    let le = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    assert_eq!(le(0), 0xa1b2_3c4d, "nanosecond pcap");
    let mut at = 24;
    let mut out = Vec::new();
    while at < b.len() {
        assert!(at + 16 <= b.len(), "record header cut at {at}");
        let (incl, orig) = (le(at + 8), le(at + 12));
        let data = at + 16;
        assert!(
            data + incl as usize <= b.len(),
            "record at {at}: incl_len {incl} past the file"
        );
        out.push((incl, orig, b[data..data + incl as usize].to_vec()));
        at = data + incl as usize;
    }
    out
}

/// Replays `dir/in.pcap` to `dir/out.FORMAT`. The pipeline only counts: `parse` would drop the
/// cut frames (an IP length past the bytes present is a parse error).
fn run(dir: &Path, format: &str) -> PathBuf {
    let yaml = format!(
        "ports:\n  - name: in\n    pcap: {{ rx: {{ path: in.pcap }} }}\n\
         \x20 - name: out\n    pcap: {{ tx: {{ path: out.{format}, format: {format} }} }}\n\
         queues: {{ count: 1 }}\npipeline:\n  - count\n\
         executor: {{ kind: cpu }}\noutput: {{ port: out }}\n"
    );
    std::fs::write(dir.join("c.yaml"), yaml).unwrap();
    let cfg = config::load(&dir.join("c.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap();
    let ports = daemon::open_ports(&p.cfg).unwrap();
    let shared = CpuShared::new(&p.cpu_spec());
    let s = daemon::run_cpu(&p, &shared, ports);
    assert_eq!((s.rx_frames, s.tx_frames), (5, 5));
    dir.join(format!("out.{format}"))
}

/// tshark's frame and captured lengths of every frame, and that nothing in the file is
/// malformed or cut short (stderr empty, no `_ws.malformed`); `_ws.short` (the "[Packet size
/// limited during capture]" mark) is expected on every frame.
fn tshark_reads_it_cut(path: &Path) {
    let rows = tshark_common::tshark(
        path,
        &["frame.len", "frame.cap_len", "_ws.malformed", "_ws.short"],
    );
    assert_eq!(rows.len(), 5);
    for r in &rows {
        assert_eq!(&r[..3], ["200", "64", ""], "{}: {r:?}", path.display());
        assert!(
            !r[3].is_empty(),
            "{}: not marked cut: {r:?}",
            path.display()
        );
    }
    let out = Command::new("tshark").arg("-r").arg(path).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // As root tshark warns that it runs as root; nothing else may come.
    let complaints: Vec<&str> = err.lines().filter(|l| !l.contains("Running as")).collect();
    assert!(
        out.status.success() && complaints.is_empty(),
        "tshark: {err}"
    );
    let text = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(
        !text.contains("malformed") && !text.contains("cut short"),
        "{text}"
    );
}

#[test]
fn snapped_frames_come_out_with_their_captured_and_wire_lengths() {
    let dir = tmpdir("run");
    let cut = write_snapped(&dir.join("in.pcap"), 5);
    let out = run(&dir, "pcap");
    let recs = pcap_records(&out);
    assert_eq!(recs.len(), 5);
    for ((incl, orig, data), want) in recs.iter().zip(&cut) {
        assert_eq!((*incl, *orig), (SNAP as u32, WIRE as u32));
        assert_eq!(data, want);
    }
    tshark_reads_it_cut(&out);
    let out = run(&dir, "pcapng");
    let mut r = CaptureReader::open(&out).unwrap();
    let mut n = 0;
    while let Some(f) = r.next_frame().unwrap() {
        assert_eq!((f.data, f.orig_len), (&cut[n][..], WIRE as u32));
        n += 1;
    }
    assert_eq!(n, 5);
    tshark_reads_it_cut(&out);
    std::fs::remove_dir_all(&dir).ok();
}
