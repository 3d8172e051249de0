//! `pktwarp fronthaul CAPTURE` end to end: the JSON lines of the shared O-RAN vectors equal
//! their truth files, malformed captures give one error line per frame with its reason, bad
//! options and files are clear errors.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

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

fn pktwarp(args: &[&str]) -> (i32, Vec<Value>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pktwarp"))
        .args(args)
        .output()
        .expect("run pktwarp");
    let lines = String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    (
        out.status.code().unwrap_or(-1),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn truth_vectors_line_by_line() {
    if oran_corpus().is_none() {
        return;
    }
    for w in [8, 9, 12, 14] {
        let cap = oran(&format!("up_bfp{w}.pcap"));
        let truth: Value = serde_json::from_str(
            &std::fs::read_to_string(oran(&format!("up_bfp{w}.pcap.truth.json"))).expect("truth"),
        )
        .expect("truth JSON");
        let width = w.to_string();
        let (code, lines, err) =
            pktwarp(&["fronthaul", cap.to_str().unwrap(), "--iq-width", &width]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("32 PRBs decoded"), "{err}");
        let want: Vec<(u64, &Value)> = truth
            .as_array()
            .expect("list")
            .iter()
            .enumerate()
            .flat_map(|(i, p)| {
                p.as_array()
                    .expect("PRBs")
                    .iter()
                    .map(move |x| (i as u64 + 1, x))
            })
            .collect();
        assert_eq!(lines.len(), want.len(), "width {w}");
        for (l, (frame, t)) in lines.iter().zip(&want) {
            assert_eq!(l["frame"], *frame);
            assert_eq!(l["dir"], "dl");
            assert_eq!(l["eaxc"], 0);
            let e = t["exponent"].as_i64().expect("exponent");
            assert_eq!(l["exponent"].as_i64(), Some(e));
            let want: Vec<i64> = t["mantissas"]
                .as_array()
                .expect("mantissas")
                .iter()
                .map(|m| m.as_i64().expect("int") << e)
                .collect();
            let got: Vec<i64> = l["iq"]
                .as_array()
                .expect("iq")
                .iter()
                .map(|x| x.as_i64().expect("int"))
                .collect();
            assert_eq!(got, want, "width {w} frame {frame} PRB {}", l["prb"]);
            for k in ["frame_id", "subframe", "slot", "symbol", "section", "prb"] {
                assert!(l[k].is_u64(), "{k} missing in {l}");
            }
        }
    }
}

#[test]
fn malformed_captures_give_error_lines() {
    if oran_corpus().is_none() {
        return;
    }
    for (name, n) in [
        ("malformed_sample_oran.pcap", 8),
        ("malformed_test_simple.pcap", 5),
    ] {
        let (code, lines, err) = pktwarp(&["fronthaul", oran(name).to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(lines.len(), n, "{name}");
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(l["frame"], i as u64 + 1);
            assert_eq!(l["status"], "error");
            assert_eq!(l["reason"], "ecpri_len_exceeds_frame");
        }
        assert!(
            err.contains(&format!("ecpri_len_exceeds_frame={n}")),
            "{err}"
        );
    }
    // Not O-RAN at all: every frame an error line, not a crash.
    let multi = pipeline::internal::testdata::multi_proto_pcap();
    let (code, lines, _) = pktwarp(&["fronthaul", multi.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(lines.len(), 23);
    assert!(lines.iter().all(|l| l["status"] == "error"));
    assert!(lines.iter().filter(|l| l["reason"] == "not_ecpri").count() >= 20);
}

#[test]
fn options_and_files_are_checked() {
    // A generated capture: the options' checks need no real vector.
    let cap = pktwarp_fronthaul::testdata::fronthaul_pcap();
    let c = cap.to_str().unwrap();
    for (args, needle) in [
        (vec!["fronthaul", c, "--iq-width", "0"], "--iq-width"),
        (vec!["fronthaul", c, "--eaxc-bits", "4,4,4"], "--eaxc-bits"),
        (
            vec!["fronthaul", c, "--carrier-prbs", "2000"],
            "--carrier-prbs",
        ),
        (vec!["fronthaul", c, "--comp-method", "mulaw"], "mulaw"),
        (vec!["fronthaul", "/nonexistent.pcap"], "nonexistent"),
    ] {
        let (code, lines, err) = pktwarp(&args);
        assert_ne!(code, 0, "{args:?}");
        assert!(lines.is_empty());
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // A carrier smaller than the section: every frame rejected with its reason.
    let (_, lines, _) = pktwarp(&["fronthaul", c, "--iq-width", "9", "--carrier-prbs", "3"]);
    assert!(
        lines.iter().all(|l| l["reason"] == "prb_out_of_carrier"),
        "{lines:?}"
    );
    // --eaxc-bits changes the split, not the id.
    let (_, lines, _) = pktwarp(&["fronthaul", c, "--eaxc-bits", "2,6,4,4"]);
    assert_eq!(lines[0]["eaxc_parts"], serde_json::json!([0, 0, 0, 0]));
}

/// `pktwarp bench`'s fronthaul flags are checked before any table runs: a bad one is an error
/// naming the flag and the range, with nothing measured (stdout empty).
#[test]
fn bench_fronthaul_flags_are_checked_first() {
    for (args, wanted) in [
        (
            &["--fh-widths", "17"][..],
            "--fh-widths: 17 is not a BFP iqWidth (1..=16)",
        ),
        (
            &["--fh-widths", "9,0"][..],
            "--fh-widths: 0 is not a BFP iqWidth",
        ),
        (&["--fh-eaxcs", "0"][..], "--fh-eaxcs: 0 is not in 1..=64"),
        (&["--fh-eaxcs", "65"][..], "--fh-eaxcs: 65 is not in 1..=64"),
        (&["--fh-slots", "33"][..], "--fh-slots: 33 is not in 1..=32"),
        (&["--fh-rounds", "0"][..], "--fh-rounds: must be at least 1"),
    ] {
        let mut all = vec!["bench", "--skip", "throughput,e2e,l3fwd,latency"];
        all.extend_from_slice(args);
        let (code, lines, err) = pktwarp(&all);
        assert_ne!(code, 0, "{args:?} accepted: {err}");
        assert!(err.contains(wanted), "{args:?}: {err}");
        assert!(lines.is_empty(), "{args:?} measured something: {lines:?}");
    }
    let (code, _, err) = pktwarp(&["bench", "--fh-widths", "abc"]);
    assert_ne!(code, 0);
    assert!(err.contains("--fh-widths"), "{err}");
}
