//! The `pcap` port: replay (loops, rates, capture timing) and recording (pcap and pcapng round
//! trips through CaptureReader).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use pipeline::burst::Burst;
use pipeline::internal::port::pace::Rate;
use pipeline::internal::port::pcap::{
    CaptureReader, CaptureWriter, Loops, PcapRx, PcapRxOptions, PcapTx, PcapTxOptions, WriteFormat,
};
use pipeline::port::{RxPort, RxStatus, TxPort};

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pktwarp-port-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// One received frame: bytes, wire length, timestamp, port.
type Got = (Vec<u8>, u32, u64, u16);

/// Drains a port; returns the frames and how long it took.
fn drain(rx: &mut dyn RxPort, limit: usize) -> (Vec<Got>, Duration) {
    let start = Instant::now();
    let mut out = Vec::new();
    let mut burst = Burst::with_capacity(32, 32 * 2048);
    while out.len() < limit {
        burst.clear();
        match rx.rx_burst(&mut burst, 32).unwrap() {
            RxStatus::Frames(n) => {
                assert_eq!(n, burst.len());
                for (d, f) in burst.frames() {
                    out.push((f.to_vec(), d.wire_len, d.timestamp_ns, d.port));
                }
            }
            RxStatus::Idle => std::thread::yield_now(),
            RxStatus::End => break,
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "port never ended"
        );
    }
    (out, start.elapsed())
}

fn write_file(path: &PathBuf, format: WriteFormat, frames: &[(Vec<u8>, u64)]) {
    let mut w = CaptureWriter::create(path, format, 65535).unwrap();
    for (f, ts) in frames {
        w.write_frame(f, 0, *ts).unwrap();
    }
}

fn sample_frames(n: usize, gap_ns: u64) -> Vec<(Vec<u8>, u64)> {
    (0..n)
        .map(|i| {
            let mut f = vec![0u8; 60 + i % 7];
            f[12] = 0x08;
            f[20] = i as u8;
            (f, 1_000_000_000 + i as u64 * gap_ns)
        })
        .collect()
}

#[test]
fn replays_file_in_order_with_loops() {
    let mut opts = PcapRxOptions::new(pipeline::internal::testdata::multi_proto_pcap());
    opts.loops = Loops::Count(3);
    let mut rx = PcapRx::open(&opts, 7).unwrap();
    assert_eq!(rx.expected_frames(), Some(69));
    let (frames, _) = drain(&mut rx, usize::MAX);
    assert_eq!(frames.len(), 69);
    let mut r = CaptureReader::open(&opts.path).unwrap();
    let mut i = 0;
    while let Some(f) = r.next_frame().unwrap() {
        for k in 0..3 {
            let got = &frames[k * 23 + i];
            assert_eq!(got.0, f.data);
            assert_eq!(got.1, f.orig_len);
            assert_eq!(got.3, 7);
        }
        assert_eq!(frames[i].2, f.timestamp_ns);
        i += 1;
    }
    // Later loops carry later timestamps.
    assert!(frames[23].2 > frames[22].2 && frames[46].2 > frames[45].2);
    let mut b = Burst::default();
    assert_eq!(rx.rx_burst(&mut b, 32).unwrap(), RxStatus::End);
}

#[test]
fn forever_keeps_going() {
    let mut opts = PcapRxOptions::new(pipeline::internal::testdata::multi_proto_pcap());
    opts.loops = Loops::Forever;
    let mut rx = PcapRx::open(&opts, 0).unwrap();
    assert_eq!(rx.expected_frames(), None);
    let (frames, _) = drain(&mut rx, 1000);
    assert!(frames.len() >= 1000);
}

#[test]
fn non_ethernet_file_is_refused_with_name_and_type() {
    let opts = PcapRxOptions::new(pipeline::internal::testdata::linux_sll_pcap());
    let e = PcapRx::open(&opts, 0).unwrap_err().to_string();
    assert!(
        e.contains("linux_sll.pcap") && e.contains("113 (linux-sll)"),
        "{e}"
    );
    let e = PcapRx::open(&PcapRxOptions::new("/nonexistent/x.pcap"), 0).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/x.pcap"), "{e}");
}

#[test]
fn pps_rate_paces() {
    let path = tmp("pps.pcap");
    write_file(&path, WriteFormat::Pcap, &sample_frames(50, 1000));
    let mut opts = PcapRxOptions::new(&path);
    opts.rate = Rate::Pps(500.0);
    let mut rx = PcapRx::open(&opts, 0).unwrap();
    let (frames, took) = drain(&mut rx, usize::MAX);
    assert_eq!(frames.len(), 50);
    // 50 frames at 500 pps: the last goes at 49 / 500 s = 98 ms.
    assert!(took >= Duration::from_millis(95), "{took:?}");
}

#[test]
fn bps_rate_paces() {
    let path = tmp("bps.pcap");
    let frames: Vec<_> = (0..20).map(|i| (vec![0u8; 1000], i)).collect();
    write_file(&path, WriteFormat::Pcap, &frames);
    let mut opts = PcapRxOptions::new(&path);
    opts.rate = Rate::Bps(1_600_000.0); // 200 frames of 1000 B per second
    let mut rx = PcapRx::open(&opts, 0).unwrap();
    let (got, took) = drain(&mut rx, usize::MAX);
    assert_eq!(got.len(), 20);
    // Frame k goes once k * 8000 bits have had time: the last at 19 / 200 s = 95 ms.
    assert!(took >= Duration::from_millis(90), "{took:?}");
}

#[test]
fn capture_timing_follows_timestamps() {
    let path = tmp("cap.pcapng");
    write_file(&path, WriteFormat::Pcapng, &sample_frames(11, 8_000_000));
    let mut opts = PcapRxOptions::new(&path);
    opts.rate = Rate::Capture;
    opts.loops = Loops::Count(2);
    let mut rx = PcapRx::open(&opts, 0).unwrap();
    let (got, took) = drain(&mut rx, usize::MAX);
    assert_eq!(got.len(), 22);
    // One loop spans 80 ms plus one 8 ms gap; the second loop's last frame is due at 168 ms.
    assert!(took >= Duration::from_millis(160), "{took:?}");
    assert_eq!(got[11].2 - got[0].2, 88_000_000);
}

#[test]
fn bad_rate_is_a_config_error() {
    let mut opts = PcapRxOptions::new(pipeline::internal::testdata::multi_proto_pcap());
    opts.rate = Rate::Pps(0.0);
    assert!(PcapRx::open(&opts, 0).is_err());
}

#[test]
fn tx_round_trips_both_formats() {
    for format in [WriteFormat::Pcap, WriteFormat::Pcapng] {
        let path = tmp(&format!("tx-{format:?}"));
        let mut opts = PcapTxOptions::new(&path);
        opts.format = format;
        opts.snaplen = 100;
        let mut tx = PcapTx::create(&opts).unwrap();
        let frames: Vec<Vec<u8>> = (0..5).map(|i| vec![i as u8; 60 + i * 37]).collect();
        let n = tx
            .tx_burst(&mut frames.iter().map(|f| f.as_slice()))
            .unwrap();
        assert_eq!(n, 5);
        tx.write_frame(&[9u8; 61], 1500, 42).unwrap();
        tx.flush().unwrap();
        drop(tx);
        let mut r = CaptureReader::open_ethernet(&path).unwrap();
        for f in &frames {
            let got = r.next_frame().unwrap().unwrap();
            let cut = f.len().min(100);
            assert_eq!(got.data, &f[..cut]);
            assert_eq!(got.orig_len as usize, f.len());
            assert!(got.timestamp_ns > 1_600_000_000_000_000_000);
        }
        let got = r.next_frame().unwrap().unwrap();
        assert_eq!(
            (got.data.len(), got.orig_len, got.timestamp_ns),
            (61, 1500, 42)
        );
        assert!(r.next_frame().unwrap().is_none());
    }
}

#[test]
fn tx_flushes_on_drop() {
    let path = tmp("drop.pcap");
    {
        let mut tx = PcapTx::create(&PcapTxOptions::new(&path)).unwrap();
        tx.tx_burst(&mut [&[1u8; 64][..]].into_iter()).unwrap();
    }
    let mut r = CaptureReader::open(&path).unwrap();
    assert_eq!(r.next_frame().unwrap().unwrap().data, &[1u8; 64]);
}

#[test]
fn options_deserialize_with_clear_errors() {
    let o: PcapRxOptions =
        serde_json::from_str(r#"{"path": "a.pcap", "loops": "forever", "rate": {"pps": 1000}}"#)
            .unwrap();
    assert_eq!((o.loops, o.rate), (Loops::Forever, Rate::Pps(1000.0)));
    let o: PcapRxOptions =
        serde_json::from_str(r#"{"path": "a.pcap", "loops": 4, "rate": "capture"}"#).unwrap();
    assert_eq!((o.loops, o.rate), (Loops::Count(4), Rate::Capture));
    let o: PcapRxOptions = serde_json::from_str(r#"{"path": "a.pcap"}"#).unwrap();
    assert_eq!((o.loops, o.rate), (Loops::Count(1), Rate::Unlimited));
    assert!(serde_json::from_str::<PcapRxOptions>(r#"{"path": "a", "loops": 0}"#).is_err());
    assert!(serde_json::from_str::<PcapRxOptions>(r#"{"path": "a", "loop": 2}"#).is_err());
    let t: PcapTxOptions =
        serde_json::from_str(r#"{"path": "o.pcapng", "format": "pcapng"}"#).unwrap();
    assert_eq!((t.format, t.snaplen), (WriteFormat::Pcapng, 262_144));
    assert!(serde_json::from_str::<PcapTxOptions>(r#"{"path": "o", "fmt": "pcap"}"#).is_err());
}

#[test]
fn options_from_yaml() {
    let o: PcapRxOptions =
        serde_saphyr::from_str("path: in.pcap\nloops: forever\nrate: {bps: 1.0e9}\n").unwrap();
    assert_eq!((o.loops, o.rate), (Loops::Forever, Rate::Bps(1e9)));
    let o: PcapRxOptions =
        serde_saphyr::from_str("path: in.pcap\nloops: 2\nrate: capture\n").unwrap();
    assert_eq!((o.loops, o.rate), (Loops::Count(2), Rate::Capture));
    let o: PcapRxOptions = serde_saphyr::from_str("path: in.pcap\nrate:\n  pps: 100\n").unwrap();
    assert_eq!(o.rate, Rate::Pps(100.0));
    let e = serde_saphyr::from_str::<PcapRxOptions>("path: in.pcap\nrate: fast\n").unwrap_err();
    assert!(e.to_string().contains("fast"), "{e}");
}
