//! The fronthaul decoder on the shared O-RAN vectors: every PRB of up_bfp{8,9,12,14}.pcap equal
//! to its truth file, the malformed captures rejected with their reasons, and the stage's
//! counters and slot grid on the same captures.

use std::path::PathBuf;

use pipeline::internal::port::pcap::CaptureReader;
use pipeline::meta::PacketMeta;
use pipeline::verdict::{Action, Verdict};
use pktwarp_fronthaul::bfp::Method;
use pktwarp_fronthaul::config::{CompConfig, CompHdr, CompMethodName};
use pktwarp_fronthaul::decode::{decode_frame, Compression, DecodeParams, Message, Reject};
use pktwarp_fronthaul::{FnSink, FronthaulConfig, FronthaulStage};

/// The shared O-RAN vectors' folder; None (the test does not run) without the corpus outside
/// CI (`require_corpus`).
fn oran_corpus() -> Option<PathBuf> {
    flow_rules::input::require_corpus("oran")
}

fn oran(name: &str) -> PathBuf {
    let p = flow_rules::input::data_dir().join("oran").join(name);
    assert!(p.is_file(), "test data missing: {}", p.display());
    p
}

/// (timestamp, frame) of every frame of a capture.
fn frames(name: &str) -> Vec<(u64, Vec<u8>)> {
    let mut r = CaptureReader::open_ethernet(oran(name)).expect("open capture");
    let mut v = vec![];
    while let Some(f) = r.next_frame().expect("read frame") {
        v.push((f.timestamp_ns, f.data.to_vec()));
    }
    v
}

fn params(width: u8) -> DecodeParams {
    DecodeParams {
        carrier_prbs: 273,
        numerology: 1,
        compression: Compression::Static {
            method: Method::Bfp,
            width,
        },
    }
}

#[test]
fn every_prb_equals_the_truth_file() {
    if oran_corpus().is_none() {
        return;
    }
    for w in [8u8, 9, 12, 14] {
        let name = format!("up_bfp{w}.pcap");
        let truth: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(oran(&format!("{name}.truth.json"))).expect("truth file"),
        )
        .expect("truth JSON");
        let truth = truth.as_array().expect("a list per packet");
        let fs = frames(&name);
        assert_eq!(fs.len(), truth.len(), "{name}: packets");
        let mut prbs = 0;
        for (i, ((_, f), t)) in fs.iter().zip(truth).enumerate() {
            let t = t.as_array().expect("a list per PRB");
            let mut got = vec![];
            let m = decode_frame(f, &params(w), |_, s, prb, e, iq| {
                got.push((s.start_prb, prb, e, *iq));
            })
            .unwrap_or_else(|r| panic!("{name} frame {}: {}", i + 1, r.name()));
            assert!(matches!(m, Message::Uplane(_)));
            assert_eq!(got.len(), t.len(), "{name} frame {}: PRBs", i + 1);
            for (k, ((start, prb, e, iq), tp)) in got.iter().zip(t).enumerate() {
                assert_eq!(*prb as usize, *start as usize + k);
                let exp = tp["exponent"].as_i64().expect("exponent");
                assert_eq!(
                    i64::from(*e),
                    exp,
                    "{name} frame {} PRB {k}: exponent",
                    i + 1
                );
                let want: Vec<i64> = tp["mantissas"]
                    .as_array()
                    .expect("mantissas")
                    .iter()
                    .map(|m| m.as_i64().expect("integer") << exp)
                    .collect();
                let have: Vec<i64> = iq.iter().map(|&x| i64::from(x)).collect();
                assert_eq!(have, want, "{name} frame {} PRB {k}", i + 1);
                // And within one quantisation step of the original samples.
                for (h, o) in have.iter().zip(tp["orig"].as_array().expect("orig")) {
                    let o = o.as_i64().expect("integer");
                    assert!((o - h).abs() < 1 << exp, "{name}: {o} decoded as {h}");
                }
                prbs += 1;
            }
        }
        assert_eq!(prbs, 32, "{name}");
    }
}

#[test]
fn a_wrong_width_does_not_match_the_truth() {
    if oran_corpus().is_none() {
        return;
    }
    // The same frames read as BFP8 instead of BFP9: 4 PRBs of 25 bytes leave 12 bytes that
    // read as a second section that does not fit (the carrier or the payload), so every frame
    // is rejected, not decoded wrong.
    for (_, f) in frames("up_bfp9.pcap") {
        let r = decode_frame(&f, &params(8), |_, _, _, _, _| {
            panic!("PRB of a rejected frame")
        });
        let e = r.unwrap_err();
        assert!(
            matches!(e, Reject::PrbBytesExceedPayload | Reject::PrbOutOfCarrier),
            "{e:?}"
        );
    }
}

#[test]
fn malformed_captures_are_rejected_with_their_reasons() {
    if oran_corpus().is_none() {
        return;
    }
    for (name, n) in [
        ("malformed_sample_oran.pcap", 8),
        ("malformed_test_simple.pcap", 5),
    ] {
        let fs = frames(name);
        assert_eq!(fs.len(), n, "{name}");
        for (i, (_, f)) in fs.iter().enumerate() {
            let r = decode_frame(f, &params(9), |_, _, _, _, _| {
                panic!("{name}: PRB handed out")
            });
            // eCPRI payload size 14352.. bytes in a 13133-byte frame (and message type 0x33).
            assert_eq!(
                r.unwrap_err(),
                Reject::EcpriLenExceedsFrame,
                "{name} frame {}",
                i + 1
            );
            // Had the size been right, the message type would have refused it.
            let mut fixed = f.clone();
            let size = (fixed.len() - 18) as u16;
            fixed[16..18].copy_from_slice(&size.to_be_bytes());
            let r = decode_frame(&fixed, &params(9), |_, _, _, _, _| {});
            assert_eq!(r.unwrap_err(), Reject::EcpriUnsupportedType);
        }
    }
}

fn stage_config(w: u8) -> FronthaulConfig {
    FronthaulConfig {
        comp: CompConfig {
            method: CompMethodName::Bfp,
            iq_width: w,
            hdr: CompHdr::Static,
        },
        eaxcs: vec![0],
        ..FronthaulConfig::default()
    }
}

#[test]
fn the_stage_counts_and_fills_the_grid() {
    if oran_corpus().is_none() {
        return;
    }
    use std::sync::{Arc, Mutex};
    /// Per closed slot: complete, PRBs filled, PRB 0 of symbol 0 of eAxC 0.
    type Seen = Vec<(bool, usize, Option<Vec<i16>>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let s2 = seen.clone();
    let sink = FnSink(move |g: &pktwarp_fronthaul::SlotGrid| {
        let first = g.prb_i16(0, 0, 0).map(|p| p.to_vec());
        s2.lock()
            .unwrap()
            .push((g.complete, g.filled_count(), first));
    });
    let stage = FronthaulStage::with_sink(&stage_config(9), Box::new(sink)).unwrap();
    let meta = PacketMeta::default();
    for (ts, f) in frames("up_bfp9.pcap") {
        let mut v = Verdict::PASS;
        stage.process_at(&f, ts, &meta, &mut v);
        assert_eq!(v.action, Action::Pass);
    }
    for (ts, f) in frames("malformed_test_simple.pcap") {
        let mut v = Verdict::PASS;
        stage.process_at(&f, ts, &meta, &mut v);
        assert_eq!(v.action, Action::Drop);
    }
    let mut v = Verdict::PASS;
    stage.process_at(&[0u8; 60], 0, &meta, &mut v);
    assert_eq!(v.action, Action::Pass, "non-eCPRI frames pass untouched");
    stage.flush();
    let c = stage.counters();
    assert_eq!((c.frames, c.uplane, c.prbs, c.not_ecpri), (14, 8, 32, 1));
    assert_eq!(c.errors_by_reason(), [("ecpri_len_exceeds_frame", 5)]);
    let e = &c.per_eaxc[0];
    assert_eq!((e.packets, e.prbs), (8, 32));
    assert_eq!(e.early + e.on_time + e.late, 8);
    assert_eq!(
        e.seq_gaps + e.seq_duplicates + e.seq_out_of_order,
        0,
        "{e:?}"
    );
    assert!(c.slots_partial >= 1 && c.slots_complete == 0, "{c:?}");
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.iter().map(|s| s.1).sum::<usize>() as u64 + c.duplicate_prbs,
        32
    );
    // The grid holds the first PRB of frame 1 (exponent 1, mantissa 41 -> 82).
    let first = seen
        .iter()
        .find_map(|s| s.2.clone().filter(|p| p[0] != 0))
        .expect("a filled PRB 0");
    assert_eq!(&first[..2], &[82, 366]);
}
