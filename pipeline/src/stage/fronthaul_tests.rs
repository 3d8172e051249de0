//! The built-in `fronthaul` stage in a pipeline: its config key, option errors with line and
//! key, the CPU executor running it on the O-RAN captures (conformant frames decoded and passed,
//! non-conformant ones dropped and counted), the GPU executor refusing it without `eaxcs`
//! and taking it, with its parameter block and buffers, with them.

use std::path::Path;

use crate::burst::{Burst, FrameDesc};
use crate::config::{self, StageConfig};
use crate::counters::QueueCounters;
use crate::port::pcap::CaptureReader;
use crate::stage::{Pipeline, Stage};
use crate::verdict::{Action, DropReason};

fn parse(stages: &str) -> Result<config::Config, config::ConfigError> {
    let text = format!(
        "ports:\n  - name: g\n    gen: {{ count: 10 }}\npipeline:\n{stages}\nexecutor: {{ kind: cpu }}\n"
    );
    config::parse_str(&text, Path::new("/cfg/fh.yaml"))
}

const FH: &str = "  - parse\n  - fronthaul: { carrier_prbs: 273, comp: { method: bfp, iq_width: 9, hdr: static } }\n  - count";

#[test]
fn the_fronthaul_key_builds_the_stage() {
    let cfg = parse(FH).unwrap();
    assert!(matches!(cfg.pipeline[1].value, StageConfig::Fronthaul(_)));
    assert_eq!(cfg.pipeline[1].value.name(), "fronthaul");
    let p = crate::daemon::build_pipeline(&cfg).unwrap();
    assert_eq!(p.stage_names(), ["parse", "fronthaul", "count"]);
    // Without `eaxcs` (a grid learnt in arrival order) it has no GPU layout: the GPU executor
    // refuses it by name.
    let why = p.gpu_refusal().unwrap();
    assert!(why.contains("`fronthaul` (pipeline[1])"), "{why}");
}

#[test]
fn with_its_eaxcs_listed_the_stage_runs_on_the_gpu_with_its_buffers() {
    let cfg =
        parse(&FH.replace("carrier_prbs: 273,", "carrier_prbs: 273, eaxcs: [0, 1],")).unwrap();
    let p = crate::daemon::build_pipeline(&cfg).unwrap();
    assert_eq!(p.gpu_refusal(), None);
    let set = crate::executor::gpu::compose::stage_set(&p).unwrap();
    let names: Vec<&str> = set.specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["parse", "fronthaul", "count"]);
    assert_eq!(set.params[1].len(), 232, "pw_fh_stage_params");
    let bufs: Vec<(&str, usize)> = set.buffers[1]
        .iter()
        .map(|b| (b.name.as_str(), b.addr_at))
        .collect();
    assert_eq!(
        bufs,
        [
            ("fronthaul.grid", 24),
            ("fronthaul.marks", 32),
            ("fronthaul.slot_state", 40),
            ("fronthaul.eaxc_counters", 48),
            ("fronthaul.stats", 56),
            ("fronthaul.seq", 216),
            ("fronthaul.closed", 224),
        ]
    );
    // 8 ring slots x 2 eAxCs x 14 symbols x 273 PRBs x 24 int16 samples.
    assert_eq!(set.buffers[1][0].bytes, 8 * 2 * 14 * 273 * 48);
    let img = crate::executor::gpu::image_for_pipeline(&p).unwrap();
    assert!(img.source.contains("pw_stage_fronthaul("));
}

#[test]
fn bad_fronthaul_options_name_line_and_key() {
    let e = parse("  - parse\n  - fronthaul: { numerology: 9 }").unwrap_err();
    assert_eq!(e.key, "pipeline[1].fronthaul.numerology", "{e}");
    assert_eq!(e.line, 6, "{e}");
    let e = parse("  - fronthaul: { bogus: 1 }").unwrap_err();
    assert!(e.line > 0 && e.message.contains("bogus"), "{e}");
}

fn frames_of(file: &str) -> Vec<Vec<u8>> {
    let d = flow_rules::input::data_dir().join("oran");
    let mut r = CaptureReader::open(d.join(file)).unwrap();
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        out.push(f.data.to_vec());
    }
    out
}

fn run(p: &Pipeline, frames: &[Vec<u8>]) -> (Vec<Action>, QueueCounters) {
    let mut b = Burst::default();
    for f in frames {
        let d = FrameDesc {
            len: f.len() as u32,
            wire_len: f.len() as u32,
            timestamp_ns: 1,
            ..FrameDesc::default()
        };
        b.push(f, d);
    }
    let c = QueueCounters::new(p.stages.len(), 0);
    let (mut m, mut v) = (Vec::new(), Vec::new());
    p.run_burst(&b, &mut m, &mut v, &c);
    (v.iter().map(|v| v.action).collect(), c)
}

#[test]
fn the_cpu_executor_decodes_conformant_frames_and_drops_the_rest() {
    let p = crate::daemon::build_pipeline(&parse(FH).unwrap()).unwrap();
    let good = frames_of("up_bfp9.pcap");
    let (actions, c) = run(&p, &good);
    assert_eq!(actions, vec![Action::Pass; good.len()]);
    assert_eq!(
        c.stage_frames[2].get(),
        good.len() as u64,
        "all reach count"
    );
    let Stage::Fronthaul(f) = &p.stages[1] else {
        panic!("stage 1 is fronthaul");
    };
    let n = f.counters();
    assert_eq!(n.uplane, good.len() as u64);
    assert_eq!(n.prbs, 4 * good.len() as u64, "one section of 4 PRBs each");
    assert_eq!(n.errors_total(), 0);

    // Without `parse` before it (the stage reads the frame bytes only), the malformed captures'
    // frames are the fronthaul stage's to refuse.
    let cfg = parse(&FH.replace("  - parse\n", "")).unwrap();
    let p = crate::daemon::build_pipeline(&cfg).unwrap();
    let Stage::Fronthaul(f) = &p.stages[0] else {
        panic!("stage 0 is fronthaul");
    };
    let mut bad = frames_of("malformed_test_simple.pcap");
    bad.extend(frames_of("malformed_sample_oran.pcap"));
    let (actions, c) = run(&p, &bad);
    let dropped = actions.iter().filter(|a| **a == Action::Drop).count();
    assert!(dropped > 0, "{actions:?}");
    assert_eq!(c.drop_count(DropReason::FronthaulReject), dropped as u64);
    assert_eq!(c.drop_count(DropReason::StageDrop), 0);
    assert!(f.counters().errors_total() >= dropped as u64);
}
