//! `pktwarp run` on the shipped fronthaul config (fewer slots, metrics on, lingering after the
//! input ends): /metrics has the `pktwarp_fronthaul_*` families per eAxC with the run's final
//! counts and the slot completion latency histogram, `promtool check metrics` accepts the
//! exposition, and the JSON summary's `fronthaul` block says the same.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{scrape, Daemon};

fn configs() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/configs"))
}

/// The shipped config with 4 slots, metrics on an ephemeral port and `control.linger`.
fn config(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(configs().join("fronthaul.yaml")).unwrap();
    let rules = configs().join("rules/fronthaul-gen.steering.yaml");
    let text = text.replace("slots: 2000 ", "slots: 4 ").replace(
        "rules/fronthaul-gen.steering.yaml",
        &rules.display().to_string(),
    );
    assert!(text.contains("slots: 4 "));
    let text = format!("{text}\nmetrics: {{ listen: 127.0.0.1:0 }}\ncontrol: {{ linger: true }}\n");
    let p = dir.join("fronthaul.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

/// The value of the one sample of `name` whose labels contain every one of `labels`.
fn value(text: &str, name: &str, labels: &[&str]) -> f64 {
    let hits: Vec<f64> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, v) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name && labels.iter().all(|x| rest.contains(x))).then(|| v.parse().ok())?
        })
        .collect();
    assert_eq!(hits.len(), 1, "{name} {labels:?}:\n{text}");
    hits[0]
}

#[test]
fn metrics_per_eaxc_pass_promtool_and_match_the_summary() {
    let dir = common::scratch("fh-metrics");
    let d = Daemon::run(&config(&dir));
    let addr = d.metrics_addr();
    d.wait_log("linger", |_| true);
    let m = scrape(&addr);
    // 4 slots x 14 symbols x 6 packets of 273 PRBs in all, per eAxC.
    for e in ["0", "1"] {
        let eaxc = format!("eaxc=\"{e}\"");
        let eaxc = eaxc.as_str();
        assert_eq!(value(&m, "pktwarp_fronthaul_packets_total", &[eaxc]), 336.0);
        assert_eq!(value(&m, "pktwarp_fronthaul_prbs_total", &[eaxc]), 15288.0);
        let on_time = ["window=\"on_time\"", eaxc];
        assert_eq!(
            value(&m, "pktwarp_fronthaul_arrivals_total", &on_time),
            336.0
        );
        let late = ["window=\"late\"", eaxc];
        assert_eq!(value(&m, "pktwarp_fronthaul_arrivals_total", &late), 0.0);
        let gaps = ["kind=\"gap\"", eaxc];
        assert_eq!(value(&m, "pktwarp_fronthaul_seq_errors_total", &gaps), 0.0);
        let complete = ["result=\"complete\"", eaxc];
        assert_eq!(value(&m, "pktwarp_fronthaul_slots_total", &complete), 4.0);
        let closed = ["reason=\"slot_closed\"", eaxc];
        assert_eq!(
            value(&m, "pktwarp_fronthaul_dropped_packets_total", &closed),
            0.0
        );
    }
    // The completion latency of the 4 complete slots as a histogram in seconds.
    let pos = ["position=\"1\""];
    let lat = "pktwarp_fronthaul_slot_latency_seconds";
    assert_eq!(value(&m, &format!("{lat}_count"), &pos), 4.0);
    assert_eq!(
        value(&m, &format!("{lat}_bucket"), &["le=\"+Inf\"", pos[0]]),
        4.0
    );
    assert!(value(&m, &format!("{lat}_sum"), &pos) > 0.0);
    assert!(m.contains(&format!("# TYPE {lat} histogram")), "{m}");
    let uplane = ["kind=\"uplane\"", "position=\"1\""];
    assert_eq!(value(&m, "pktwarp_fronthaul_frames_total", &uplane), 672.0);
    let rej = ["kind=\"rejected\""];
    assert_eq!(value(&m, "pktwarp_fronthaul_frames_total", &rej), 0.0);
    let partial = ["result=\"partial\""];
    assert_eq!(
        value(&m, "pktwarp_fronthaul_cell_slots_total", &partial),
        0.0
    );

    common::promtool_check(&m);

    d.signal("-INT");
    let (code, out, _) = d.wait(Duration::from_secs(15));
    assert_eq!(code, 0, "{out}");
    let s: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON summary");
    let f = &s["fronthaul"][0];
    assert_eq!(f["position"], 1);
    assert_eq!(f["prbs"], 2 * 15288);
    assert_eq!(
        (f["slots_complete"].as_u64(), f["slots_partial"].as_u64()),
        (Some(4), Some(0))
    );
    assert_eq!(f["per_eaxc"][1]["eaxc"], 1);
    assert_eq!(f["per_eaxc"][1]["on_time"], 336);
    assert_eq!(f["errors"], serde_json::json!([]));
    let _ = std::fs::remove_dir_all(&dir);
}
