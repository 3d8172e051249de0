//! The slot rule of docs/fronthaul.md ("When a slot opens and closes") on the CPU stage:
//! learnt eAxCs, refused packets as drops, and the file sinks of a learnt grid.

use super::*;
use crate::oran_gen::{frame, OranGenOptions};
use crate::raw::read_slot;
use crate::{FnSink, SlotGrid};
use pipeline::meta::PacketMeta;
use std::sync::{Arc, Mutex as StdMutex};

fn gen() -> OranGenOptions {
    OranGenOptions {
        carrier_prbs: 4,
        eaxcs: vec![1, 2],
        slots: 4,
        ..OranGenOptions::default()
    }
}

fn config(o: &OranGenOptions, listed: bool) -> FronthaulConfig {
    FronthaulConfig {
        carrier_prbs: o.carrier_prbs,
        numerology: o.numerology,
        eaxcs: if listed { o.eaxcs.clone() } else { Vec::new() },
        ..FronthaulConfig::default()
    }
}

/// Every symbol of slot `slot` of eAxC index `e`, with receive times 35 us apart from the
/// slot's start (a slot is 500 us at 30 kHz).
fn slot_frames(o: &OranGenOptions, e: usize, slot: u64) -> Vec<(Vec<u8>, u64)> {
    (0..14u8)
        .map(|sym| {
            let ts = 1_000_000_000 + slot * 500_000 + u64::from(sym) * 35_000;
            (frame(o, e, slot, sym, 0, (slot * 14) as u8 + sym), ts)
        })
        .collect()
}

/// Slot 0 of eAxC 1 whole before eAxC 2 sends anything, then slots 1 and 2 of both.
fn late_second_eaxc(o: &OranGenOptions) -> Vec<(Vec<u8>, u64)> {
    let mut v = slot_frames(o, 0, 0);
    v.extend(slot_frames(o, 1, 0));
    for slot in 1..3 {
        for (a, b) in slot_frames(o, 0, slot)
            .into_iter()
            .zip(slot_frames(o, 1, slot))
        {
            v.push(a);
            v.push(b);
        }
    }
    v
}

type Seen = Arc<StdMutex<Vec<SlotGrid>>>;

fn stage_with_sink(cfg: &FronthaulConfig) -> (FronthaulStage, Seen) {
    let seen: Seen = Arc::default();
    let s2 = seen.clone();
    let sink = FnSink(move |g: &SlotGrid| s2.lock().unwrap().push(g.clone()));
    (
        FronthaulStage::with_sink(cfg, Box::new(sink)).unwrap(),
        seen,
    )
}

fn feed(stage: &FronthaulStage, frames: &[(Vec<u8>, u64)]) -> Vec<Verdict> {
    frames
        .iter()
        .map(|(f, ts)| {
            let mut v = Verdict::PASS;
            stage.process_at(f, *ts, &PacketMeta::default(), &mut v);
            v
        })
        .collect()
}

#[test]
fn a_learnt_grid_closes_no_slot_before_its_eaxcs_are_known() {
    let o = gen();
    for listed in [false, true] {
        let (stage, seen) = stage_with_sink(&config(&o, listed));
        let verdicts = feed(&stage, &late_second_eaxc(&o));
        assert!(
            verdicts.iter().all(|v| *v == Verdict::PASS),
            "listed {listed}"
        );
        stage.flush();
        let c = stage.counters();
        assert_eq!(c.slot_closed(), 0, "listed {listed}: no packet refused");
        assert_eq!(
            (c.slots_complete, c.slots_partial),
            (3, 0),
            "listed {listed}"
        );
        let seen = seen.lock().unwrap();
        let got: Vec<(u32, bool, Vec<u16>)> = seen
            .iter()
            .map(|g| (g.key.number(1), g.complete, g.eaxc_ids.clone()))
            .collect();
        let want: Vec<(u32, bool, Vec<u16>)> = (0..3).map(|s| (s, true, vec![1, 2])).collect();
        assert_eq!(got, want, "listed {listed}");
    }
}

#[test]
fn a_learnt_grids_raw_files_read_back_with_the_learnt_eaxcs() {
    let o = gen();
    let dir = std::env::temp_dir().join(format!("pw-fh-learnt-raw-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (sink, ext) in [
        (
            SinkConfig::Raw(crate::config::RawSinkConfig {
                dir: dir.clone(),
                max_files: None,
            }),
            "json",
        ),
        (
            SinkConfig::Npy {
                dir: dir.clone(),
                max_files: None,
            },
            "npy",
        ),
    ] {
        let cfg = FronthaulConfig {
            sink,
            ..config(&o, false)
        };
        let stage = FronthaulStage::from_config(&cfg).unwrap();
        feed(&stage, &late_second_eaxc(&o));
        stage.flush();
        assert_eq!(stage.counters().sink_errors, 0);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == ext))
            .collect();
        files.sort();
        assert_eq!(files.len(), 3, "{files:?}");
        for p in &files {
            if ext == "json" {
                let (m, data) = read_slot(p).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(
                    (m.eaxcs.clone(), m.shape[0], m.complete),
                    (vec![1, 2], 2, true)
                );
                let crate::grid::GridData::Int16(v) = data else {
                    panic!("int16")
                };
                assert_eq!(v.len(), 2 * 14 * 4 * 24);
            } else {
                let b = std::fs::read(p).unwrap();
                let h = String::from_utf8_lossy(&b[10..128]).into_owned();
                assert!(h.contains("'shape': (2, 14, 4, 12, 2)"), "{h}");
            }
        }
        assert_eq!(
            std::fs::read_to_string(dir.join("eaxcs.json"))
                .ok()
                .filter(|_| ext == "npy"),
            (ext == "npy").then(|| "[1,2]".to_string())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_refused_packet_is_dropped_as_fronthaul_reject() {
    let o = gen();
    let (stage, _) = stage_with_sink(&config(&o, true));
    let frames = late_second_eaxc(&o);
    assert!(feed(&stage, &frames).iter().all(|v| *v == Verdict::PASS));
    // Slot 0 closed complete: its packets again are refused, each one a counted drop.
    let again = feed(&stage, &frames[..28]);
    let reject = Verdict::drop(DropReason::FronthaulReject);
    assert!(again.iter().all(|v| *v == reject), "{again:?}");
    assert_eq!(stage.counters().slot_closed(), 28);
}

#[test]
fn a_sink_folder_that_takes_no_file_is_a_config_error() {
    // /proc/self is a folder nobody (root included) can create a file in.
    for sink in [
        SinkConfig::Npy {
            dir: "/proc/self".into(),
            max_files: None,
        },
        SinkConfig::Raw(crate::config::RawSinkConfig {
            dir: "/proc/self".into(),
            max_files: None,
        }),
    ] {
        let cfg = FronthaulConfig {
            sink,
            ..FronthaulConfig::default()
        };
        let e = FronthaulStage::from_config(&cfg).err().expect("refused");
        assert!(
            e.contains("sink.") && e.contains("cannot write a file there"),
            "{e}"
        );
    }
}
