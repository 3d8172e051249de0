//! A registered stage's own metric families and summary section reach the Prometheus
//! exposition and the run summary, labelled by the stage's name and position.

use std::sync::Arc;

use crate::counters::QueueCounters;
use crate::meta::PacketMeta;
use crate::stage::api::{CustomStage, MetricKind, StageMetricFamily};
use crate::stage::custom::CustomSlot;
use crate::stage::registry::BuiltStage;
use crate::stage::run::{Pipeline, Stage};
use crate::verdict::Verdict;

/// Declares a gauge with a `dir` label and a counter without labels; samples both (and one
/// sample naming no family and one with a label too many, which are left out).
struct Flows(f64);
impl CustomStage for Flows {
    fn process(&self, _: &[u8], _: &PacketMeta, _: &mut Verdict) {}
    fn metric_families(&self) -> Vec<StageMetricFamily> {
        vec![
            StageMetricFamily {
                name: "flows_open".into(),
                help: "Flows open now.".into(),
                kind: MetricKind::Gauge,
                labels: vec!["dir".into()],
            },
            StageMetricFamily {
                name: "flows_evicted_total".into(),
                help: "Flows evicted.".into(),
                kind: MetricKind::Counter,
                labels: Vec::new(),
            },
        ]
    }
    fn metric_samples(&self) -> Vec<(usize, Vec<String>, f64)> {
        vec![
            (0, vec!["in".into()], self.0),
            (1, Vec::new(), 7.0),
            (2, Vec::new(), 1.0),
            (1, vec!["extra".into()], 1.0),
        ]
    }
    fn summary_section(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({ "open": self.0 }))
    }
    /// Under a key of its own; more than 4 flows open fails the run.
    fn summary_report(&self, position: usize) -> Option<crate::stage::report::StageReport> {
        Some(crate::stage::report::StageReport {
            key: "flow_report",
            position,
            json: serde_json::json!({ "position": position, "open": self.0 }),
            lines: vec![format!("stage {position}: {} open", self.0)],
            errors: (self.0 > 4.0)
                .then(|| format!("stage {position}: too many flows open"))
                .into_iter()
                .collect(),
        })
    }
}

fn flows(name: &str, open: f64) -> Stage {
    let built = BuiltStage {
        cpu: Arc::new(Flows(open)),
        gpu: None,
    };
    Stage::Custom(Box::new(
        CustomSlot::new(name, built, false).expect("valid"),
    ))
}

#[test]
fn a_stages_families_and_summary_section_are_exposed() {
    let p = Arc::new(Pipeline::new(vec![
        Stage::Count,
        flows("flows", 3.0),
        flows("flows_b", 4.5),
    ]));
    let q = Arc::new(QueueCounters::new(p.stages.len(), 0));
    let text = crate::control::metrics::render_for_test(Arc::clone(&q), Arc::clone(&p));
    let has = |series: &str| text.lines().any(|l| l == series);
    assert!(
        has(r#"pktwarp_flows_open{stage="flows",position="1",dir="in"} 3"#),
        "{text}"
    );
    assert!(
        has(r#"pktwarp_flows_open{stage="flows_b",position="2",dir="in"} 4.5"#),
        "{text}"
    );
    assert!(
        has(r#"pktwarp_flows_evicted_total{stage="flows",position="1"} 7"#),
        "{text}"
    );
    assert!(has("# TYPE pktwarp_flows_open gauge"), "{text}");
    assert!(
        has("# HELP pktwarp_flows_evicted_total Flows evicted."),
        "{text}"
    );
    // One family for both stages, and the samples that fit no declaration are left out.
    assert_eq!(text.matches("# TYPE pktwarp_flows_open ").count(), 1);
    assert_eq!(
        text.matches("pktwarp_flows_evicted_total{").count(),
        2,
        "{text}"
    );
    let choice = crate::prepare::ExecutorChoice {
        name: "cpu",
        reason: "test".into(),
    };
    let s = crate::daemon::summarize(&[q], &p, std::time::Duration::ZERO, &choice, Vec::new());
    let sections: Vec<_> = s.custom_stages.iter().map(|c| c.section.clone()).collect();
    assert_eq!(
        sections,
        [
            Some(serde_json::json!({ "open": 3.0 })),
            Some(serde_json::json!({ "open": 4.5 }))
        ]
    );
}

#[test]
fn a_stages_report_reaches_the_summary_under_its_own_key() {
    let p = Arc::new(Pipeline::new(vec![
        Stage::Count,
        flows("flows", 3.0),
        flows("flows_b", 4.5),
    ]));
    let q = Arc::new(QueueCounters::new(p.stages.len(), 0));
    let choice = crate::prepare::ExecutorChoice {
        name: "cpu",
        reason: "test".into(),
    };
    let s = crate::daemon::summarize(&[q], &p, std::time::Duration::ZERO, &choice, Vec::new());
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(
        json["flow_report"],
        serde_json::json!([{ "position": 1, "open": 3.0 }, { "position": 2, "open": 4.5 }]),
        "one entry per stage, in pipeline order, at the summary's top level"
    );
    let lines: Vec<_> = s
        .stage_lines
        .iter()
        .map(|(k, l)| format!("{k} {l}"))
        .collect();
    assert_eq!(
        lines,
        [
            "flow_report stage 1: 3 open",
            "flow_report stage 2: 4.5 open"
        ]
    );
    assert_eq!(
        s.errors,
        ["stage 2: too many flows open"],
        "its errors fail the run"
    );
    // No stage reports: no key.
    let plain = Pipeline::new(vec![Stage::Count]);
    let q = Arc::new(QueueCounters::new(1, 0));
    let s = crate::daemon::summarize(&[q], &plain, std::time::Duration::ZERO, &choice, Vec::new());
    assert!(s.stage_reports.is_empty() && s.stage_lines.is_empty());
}

/// Records the lengths it saw; `writes` says which entry point it expects (the other panics).
struct Seen {
    writes: bool,
    lens: std::sync::Mutex<Vec<usize>>,
}
impl CustomStage for Seen {
    fn process(&self, f: &[u8], _: &PacketMeta, _: &mut Verdict) {
        assert!(!self.writes, "a writing stage was called read-only");
        self.lens.lock().unwrap().push(f.len());
    }
    fn process_mut(&self, f: &mut crate::stage::FrameMut<'_>, _: &mut PacketMeta, _: &mut Verdict) {
        assert!(
            self.writes,
            "a read-only stage was handed the frame writable"
        );
        self.lens.lock().unwrap().push(f.len());
        f.bytes_mut()[0] ^= 0xFF;
    }
}

/// In a list that rewrites (a `vlan` push), only the stage whose needs say `writes_frame` gets
/// the frame writable; the other reads it, as rewritten so far. Both with the burst writable
/// (`run_burst_mut`) and read-only (`run_burst`, rewrites on a copy).
#[test]
fn only_a_stage_that_says_it_writes_gets_the_frame_writable() {
    use crate::burst::{Burst, FrameDesc};
    let ro = Arc::new(Seen {
        writes: false,
        lens: Default::default(),
    });
    let rw = Arc::new(Seen {
        writes: true,
        lens: Default::default(),
    });
    let slot = |name: &str, s: &Arc<Seen>, writes| {
        let needs = crate::stage::StageNeeds {
            writes_frame: writes,
            ..crate::stage::StageNeeds::NONE
        };
        let cpu: Arc<dyn CustomStage> = s.clone();
        let built = BuiltStage { cpu, gpu: None };
        Stage::Custom(Box::new(
            CustomSlot::with_needs(name, built, needs).unwrap(),
        ))
    };
    let push = crate::rewrite::Vlan::Push {
        tpid: 0x8100,
        tci: 7,
    };
    let p = Pipeline::new(vec![
        Stage::Vlan(push),
        slot("ro", &ro, false),
        slot("rw", &rw, true),
    ]);
    assert!(p.rewrites() && p.frame_room() == 4);
    let f = vec![0x11u8; 60];
    let d = FrameDesc {
        len: 60,
        wire_len: 60,
        ..FrameDesc::default()
    };
    let mut b = Burst::default();
    b.push_with_room(&f, d, p.frame_room());
    let q = QueueCounters::new(3, 0);
    p.run_burst_mut(&mut b, &mut Vec::new(), &mut Vec::new(), &q);
    assert_eq!(b.frame(0).len(), 64);
    assert_eq!(b.frame(0)[0], 0xEE, "the writing stage's change is kept");
    p.run_burst(&b, &mut Vec::new(), &mut Vec::new(), &q);
    assert_eq!(*ro.lens.lock().unwrap(), [64, 68]);
    assert_eq!(*rw.lens.lock().unwrap(), [64, 68]);
}

/// A family named as one of the daemon's is refused when the metrics endpoint starts, naming
/// the stage and the family.
#[test]
fn a_family_named_as_the_daemons_is_refused() {
    struct Clash;
    impl CustomStage for Clash {
        fn process(&self, _: &[u8], _: &PacketMeta, _: &mut Verdict) {}
        fn metric_families(&self) -> Vec<StageMetricFamily> {
            vec![StageMetricFamily {
                name: "drops_total".into(),
                help: "h".into(),
                kind: MetricKind::Counter,
                labels: Vec::new(),
            }]
        }
    }
    let clash = BuiltStage {
        cpu: Arc::new(Clash),
        gpu: None,
    };
    let p = Pipeline::new(vec![
        flows("flows", 1.0),
        Stage::Custom(Box::new(
            CustomSlot::new("clash", clash, false).expect("valid"),
        )),
    ]);
    let e = crate::control::metrics::check_stage_families(&p).unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains("`clash`") && e.contains("pktwarp_drops_total"),
        "{e}"
    );
    assert!(
        crate::control::metrics::check_stage_families(&Pipeline::new(vec![flows("flows", 1.0)]))
            .is_ok()
    );
}
