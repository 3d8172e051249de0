//! The `pcap` port's replay memory: the capture is loaded once (bounded by
//! `pcap.rx.max_bytes`), `validate` reads only its header and first record, and a capture split
//! by queue replays each queue's frames as one thread steering the whole capture would.

use std::path::PathBuf;

use pipeline::burst::Burst;
use pipeline::internal::port::pcap::{CaptureWriter, Loops, PcapRx, PcapRxOptions, WriteFormat};
use pipeline::internal::steer::Steering;
use pipeline::meta::PacketMeta;
use pipeline::port::{QueueTally, RxPort, RxStatus};

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pktwarp-pcap-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn write_capture(path: &PathBuf, n: usize) {
    let mut w = CaptureWriter::create(path, WriteFormat::Pcap, 65535).unwrap();
    for i in 0..n {
        let mut f = vec![0u8; 60];
        f[12] = 0x08;
        f[20] = i as u8;
        w.write_frame(&f, 0, 1_000 + i as u64).unwrap();
    }
}

#[test]
fn a_capture_over_max_bytes_is_refused_naming_its_size_and_the_key() {
    let path = tmp("big.pcap");
    write_capture(&path, 100);
    drop(std::fs::File::open(&path).unwrap());
    let size = std::fs::metadata(&path).unwrap().len();
    let mut o = PcapRxOptions::new(&path);
    o.max_bytes = Some(1000);
    for e in [
        PcapRx::open(&o, 0).unwrap_err().to_string(),
        PcapRx::probe(&o).unwrap_err().to_string(),
    ] {
        assert!(e.contains(&size.to_string()), "{e}");
        assert!(e.contains("pcap.rx.max_bytes") && e.contains("1000"), "{e}");
    }
    // At the limit it loads.
    o.max_bytes = Some(size);
    assert_eq!(PcapRx::open(&o, 0).unwrap().frames_per_loop(), 100);
}

#[test]
fn probe_reads_the_header_and_first_record_only() {
    // A good header and first record, then a record header that claims more bytes than the
    // file holds: loading fails, the probe (validate) does not read that far.
    let path = tmp("cut.pcap");
    write_capture(&path, 2);
    let mut bytes = std::fs::read(&path).unwrap();
    let cut = bytes.len() - 30;
    bytes.truncate(cut);
    std::fs::write(&path, &bytes).unwrap();
    let o = PcapRxOptions::new(&path);
    assert!(PcapRx::open(&o, 0).is_err());
    PcapRx::probe(&o).unwrap();
    // A bad header is still found.
    std::fs::write(&path, b"not a capture at all").unwrap();
    assert!(PcapRx::probe(&o).is_err());
    let e = PcapRx::probe(&PcapRxOptions::new(tmp("absent.pcap")))
        .unwrap_err()
        .to_string();
    assert!(e.contains("absent.pcap"), "{e}");
}

#[test]
fn bad_max_bytes_is_named() {
    let dir = tmp("cfg");
    std::fs::create_dir_all(&dir).unwrap();
    let input = pipeline::internal::testdata::multi_proto_pcap();
    for (v, want) in [
        ("0", "must be > 0"),
        ("lots", "max_bytes"),
        ("-5", "max_bytes"),
    ] {
        let path = dir.join("c.yaml");
        std::fs::write(
            &path,
            format!(
                "ports:\n  - name: in\n    pcap:\n      rx: {{ path: {}, max_bytes: {v} }}\npipeline: [count]\n",
                input.display()
            ),
        )
        .unwrap();
        let e = pipeline::config::load(&path).unwrap_err().to_string();
        assert!(e.contains(want), "max_bytes: {v}: {e}");
    }
}

type Got = (Vec<u8>, u64, u16, u32);

/// What one thread steering the whole capture gives each queue.
fn steered(rx: &mut PcapRx, st: &Steering, nq: usize) -> (Vec<Vec<Got>>, Vec<u64>) {
    let mut per_q = vec![Vec::new(); nq];
    let mut drops = vec![0u64; nq];
    let mut b = Burst::default();
    let mut meta = PacketMeta::default();
    loop {
        b.clear();
        match rx.rx_burst(&mut b, 32).unwrap() {
            RxStatus::End => break,
            _ => {
                for (d, f) in b.frames() {
                    let (q, drop, mark) = st.steer_marked(f, &mut meta, nq);
                    if drop.is_some() {
                        drops[q] += 1;
                    } else {
                        per_q[q].push((f.to_vec(), d.timestamp_ns, q as u16, mark));
                    }
                }
            }
        }
    }
    (per_q, drops)
}

#[test]
fn split_queues_replay_what_one_steering_thread_gives_them() {
    let mut o = PcapRxOptions::new(pipeline::internal::testdata::multi_proto_pcap());
    o.loops = Loops::Count(3);
    let nq = 4;
    let st = std::sync::Arc::new(Steering::rss_only(nq as u16).unwrap());
    let (want, _) = steered(&mut PcapRx::open(&o, 2).unwrap(), &st, nq);
    assert!(
        want.iter().filter(|q| !q.is_empty()).count() > 1,
        "RSS spreads"
    );
    for room in [0usize, 4] {
        let mut rx = PcapRx::open(&o, 2).unwrap();
        let queues = rx.split_by_queue(&st, nq).unwrap();
        assert_eq!(queues.len(), nq);
        for (q, mut src) in queues.into_iter().enumerate() {
            assert_eq!(src.queue() as usize, q);
            let mut got = Vec::new();
            let mut tally = QueueTally::default();
            let mut b = Burst::default();
            loop {
                b.clear();
                match src.rx_queue(&mut b, 5, room, &mut tally).unwrap() {
                    RxStatus::End => break,
                    RxStatus::Idle => panic!("an unpaced capture is never idle"),
                    RxStatus::Frames(n) => assert_eq!(n, b.len()),
                }
                for (i, (d, f)) in b.frames().enumerate() {
                    assert_eq!(d.port, 2);
                    let end = b
                        .descs
                        .get(i + 1)
                        .map_or(b.data.len(), |n| n.offset as usize);
                    assert_eq!(
                        end - d.offset as usize,
                        f.len() + room,
                        "room after each frame"
                    );
                    got.push((f.to_vec(), d.timestamp_ns, d.queue, d.mark));
                }
            }
            assert_eq!(got, want[q], "queue {q}, room {room}");
            assert_eq!(tally.rx_frames, want[q].len() as u64);
            let bytes: u64 = want[q].iter().map(|g| g.0.len() as u64).sum();
            assert_eq!(tally.rx_bytes, bytes);
        }
        // The capture moved into the shares.
        assert_eq!(rx.frames_per_loop(), 0);
    }
    // A paced (pps) port is replayed by one thread: the pace is the port's.
    o.rate = pipeline::internal::port::pace::Rate::Pps(1000.0);
    let e = PcapRx::open(&o, 0)
        .unwrap()
        .split_by_queue(&st, nq)
        .err()
        .unwrap();
    assert!(e.contains("rate"), "{e}");
}
