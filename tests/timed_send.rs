//! `tx_time` bad input: negative, fractional, textual, out-of-range and unknown keys are
//! refused by `pktwarp validate` and by `pktwarp run` with the same error, naming the config
//! file, the line, the key and the allowed range; a good one validates.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::{pktwarp, scratch};

/// A config whose pipeline's second stage is `stage` (on line 7).
fn config(dir: &Path, stage: &str) -> PathBuf {
    let p = dir.join("cfg.yaml");
    std::fs::write(
        &p,
        format!(
            "ports:
  - name: wire
    gen: {{ count: 10 }}
  - name: out
    pcap: {{ tx: {{ path: out.pcap }} }}
pipeline:
  - parse
  - {stage}
executor: {{ kind: cpu }}
output: {{ port: out }}
metrics: {{ enabled: false }}
"
        ),
    )
    .unwrap();
    p
}

/// The error line of a failed command (its last non-empty stderr line).
fn error_of(o: &Output) -> String {
    let e = String::from_utf8_lossy(&o.stderr);
    e.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string()
}

#[test]
fn bad_tx_time_values_are_refused_alike_by_validate_and_run() {
    let dir = scratch("timed-send-bad");
    let range = "0 ..= 60000000000";
    let cases: &[(&str, &[&str])] = &[
        ("tx_time: { delay_ns: -1 }", &["-1", range]),
        ("tx_time: { delay_ns: -9223372036854775808 }", &[range]),
        (
            "tx_time: { delay_ns: 60000000001 }",
            &["60000000001", range],
        ),
        ("tx_time: { delay_ns: 18446744073709551615 }", &[range]),
        ("tx_time: { delay_ns: 1.5 }", &[range]),
        ("tx_time: { delay_ns: soon }", &[range]),
        ("tx_time: { delay_ns: [1] }", &[range]),
        ("tx_time: { delay: 5 }", &["delay"]),
        ("tx_time: {}", &["delay_ns"]),
        ("tx_time: 5", &["tx_time"]),
    ];
    for (stage, wanted) in cases {
        let cfg = config(&dir, stage);
        let v = pktwarp(&["validate"], &cfg);
        assert_eq!(v.status.code(), Some(2), "{stage}: validate: {v:?}");
        let ve = error_of(&v);
        assert!(ve.contains("cfg.yaml:8"), "{stage}: file and line: {ve}");
        for w in *wanted {
            assert!(ve.contains(w), "{stage}: `{w}` missing from: {ve}");
        }
        let key = if stage.contains("delay") {
            "key `delay"
        } else {
            "key `tx_time`"
        };
        assert!(ve.contains(key), "{stage}: key: {ve}");
        let r = pktwarp(&["run", "--quiet", "--json"], &cfg);
        assert_eq!(r.status.code(), Some(2), "{stage}: run: {r:?}");
        assert_eq!(error_of(&r), ve, "{stage}: run and validate differ");
    }
    // Tagged GPU queues have no TX ring to carry send times.
    let tagged = dir.join("tagged.yaml");
    let text = std::fs::read_to_string(config(&dir, "tx_time: { delay_ns: 5 }"))
        .unwrap()
        .replace(
            "executor: { kind: cpu }",
            "executor: { kind: auto, gpu: { tagged: true } }",
        );
    std::fs::write(&tagged, text).unwrap();
    let v = pktwarp(&["validate"], &tagged);
    let ve = error_of(&v);
    assert_eq!(v.status.code(), Some(2), "{ve}");
    assert!(
        ve.contains("tagged.yaml:8") && ve.contains("executor.gpu.tagged: true"),
        "{ve}"
    );
    let r = pktwarp(&["run", "--quiet", "--json"], &tagged);
    assert_eq!(error_of(&r), ve, "run and validate differ");
    let good = config(&dir, "tx_time: { delay_ns: 60000000000 }");
    let v = pktwarp(&["validate"], &good);
    let so = String::from_utf8_lossy(&v.stdout);
    assert!(
        v.status.success(),
        "{so}{}",
        String::from_utf8_lossy(&v.stderr)
    );
    assert!(so.contains("parse -> tx_time"), "{so}");
    let _ = std::fs::remove_dir_all(&dir);
}
