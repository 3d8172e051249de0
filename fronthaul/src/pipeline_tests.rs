//! The built-in `fronthaul` stage in a pipeline: its config key, option errors with line and
//! key, the CPU executor running it on generated U-plane frames (conformant ones decoded and
//! passed, non-conformant copies dropped and counted), the GPU executor refusing it without `eaxcs`
//! and taking it, with its parameter block and buffers, with them.

use std::path::Path;

use crate::oran_gen::{build_uplane_frames, OranGenOptions};
use pipeline::burst::{Burst, FrameDesc};
use pipeline::config::{self, StageConfig};
use pipeline::counters::QueueCounters;
use pipeline::stage::Pipeline;
use pipeline::verdict::{Action, DropReason};

fn parse(stages: &str) -> Result<config::Config, config::ConfigError> {
    crate::register();
    let text = format!(
        "ports:\n  - name: g\n    gen: {{ count: 10 }}\npipeline:\n{stages}\nexecutor: {{ kind: cpu }}\n"
    );
    config::parse_str(&text, Path::new("/cfg/fh.yaml"))
}

const FH: &str = "  - parse\n  - fronthaul: { carrier_prbs: 273, comp: { method: bfp, iq_width: 9, hdr: static } }\n  - count";

#[test]
fn the_fronthaul_key_builds_the_stage() {
    let cfg = parse(FH).unwrap();
    assert!(matches!(&cfg.pipeline[1].value, StageConfig::Keyed(k) if k.options.is_some()));
    assert_eq!(cfg.pipeline[1].value.name(), "fronthaul");
    let p = pipeline::daemon::build_pipeline(&cfg).unwrap();
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
    let p = pipeline::daemon::build_pipeline(&cfg).unwrap();
    assert_eq!(p.gpu_refusal(), None);
    let set = pipeline::internal::executor::gpu::compose::stage_set(&p).unwrap();
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
    let img = pipeline::daemon::image_for_pipeline(&p).unwrap();
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

/// PRBs of each generated packet: a symbol of the 273-PRB carrier in 3 packets.
const PACKET_PRBS: u16 = 91;

/// One slot of conformant U-plane frames for the `FH` carrier (BFP 9, static header), from the
/// `gen` port's encoder.
fn conformant_frames() -> Vec<Vec<u8>> {
    let o = OranGenOptions {
        carrier_prbs: 273,
        prbs_per_packet: PACKET_PRBS,
        ..OranGenOptions::default()
    };
    build_uplane_frames(&o).map(|f| f.data).collect()
}

/// Non-conformant copies of them: cut inside the eCPRI header, the radio header, a section
/// header and a PRB's samples; a wrong eCPRI revision; a payload size past the frame.
fn malformed_frames() -> Vec<Vec<u8>> {
    let good = conformant_frames();
    let mut bad = Vec::new();
    for (i, f) in good.iter().enumerate().take(6) {
        let cut = [16usize, 22, 30, f.len() - 7, f.len() / 2, 36][i];
        bad.push(f[..cut].to_vec());
    }
    let mut f = good[0].clone();
    f[14] = 0x20; // eCPRI revision 2
    bad.push(f);
    let mut f = good[1].clone();
    f[16] = 0xFF; // payload size 0xFF.. past the frame's end
    bad.push(f);
    bad
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
    let p = pipeline::daemon::build_pipeline(&parse(FH).unwrap()).unwrap();
    let good = conformant_frames();
    assert_eq!(good.len(), 14 * 3);
    let (actions, c) = run(&p, &good);
    assert_eq!(actions, vec![Action::Pass; good.len()]);
    assert_eq!(
        c.stage_frames[2].get(),
        good.len() as u64,
        "all reach count"
    );
    let Some(f) = crate::FronthaulStage::of(&p.stages[1]) else {
        panic!("stage 1 is fronthaul");
    };
    let n = f.counters();
    assert_eq!(n.uplane, good.len() as u64);
    assert_eq!(
        n.prbs,
        u64::from(PACKET_PRBS) * good.len() as u64,
        "one section of {PACKET_PRBS} PRBs each"
    );
    assert_eq!(n.errors_total(), 0);

    // Without `parse` before it (the stage reads the frame bytes only), the malformed captures'
    // frames are the fronthaul stage's to refuse.
    let cfg = parse(&FH.replace("  - parse\n", "")).unwrap();
    let p = pipeline::daemon::build_pipeline(&cfg).unwrap();
    let Some(f) = crate::FronthaulStage::of(&p.stages[0]) else {
        panic!("stage 0 is fronthaul");
    };
    let bad = malformed_frames();
    let (actions, c) = run(&p, &bad);
    let dropped = actions.iter().filter(|a| **a == Action::Drop).count();
    assert_eq!(dropped, bad.len(), "{actions:?}");
    assert_eq!(c.drop_count(DropReason::FronthaulReject), dropped as u64);
    assert_eq!(c.drop_count(DropReason::StageDrop), 0);
    assert!(f.counters().errors_total() >= dropped as u64);
}

/// A frame without a receive time (timestamp 0: a port that gives none) is untimed on the CPU
/// executor as on the GPU: no Ta4 window, and no slot times out on it, however slowly the
/// frames come. Judged on the host's clock, this slot would time out half way (its frames take
/// over 3 ms to come, its timeout is 0.5 ms) and its second half be refused.
#[test]
fn untimed_frames_time_no_slot_out_on_the_host_clock() {
    let fh = FH.replace(
        "carrier_prbs: 273,",
        "carrier_prbs: 273, eaxcs: [0], slot_timeout_us: 500,",
    );
    let p = pipeline::daemon::build_pipeline(&parse(&fh).unwrap()).unwrap();
    let frames = conformant_frames();
    let c = QueueCounters::new(p.stages.len(), 0);
    for (i, f) in frames.iter().enumerate() {
        if i % 14 == 13 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut b = Burst::default();
        let d = FrameDesc {
            len: f.len() as u32,
            wire_len: f.len() as u32,
            timestamp_ns: 0,
            ..FrameDesc::default()
        };
        b.push(f, d);
        let (mut m, mut v) = (Vec::new(), Vec::new());
        p.run_burst(&b, &mut m, &mut v, &c);
        assert_eq!(v[0].action, Action::Pass, "frame {i}");
    }
    let f = crate::FronthaulStage::of(&p.stages[1]).expect("stage 1 is fronthaul");
    let n = f.counters();
    assert_eq!(
        (n.slots_complete, n.slots_partial),
        (1, 0),
        "{}",
        n.summary()
    );
    let e = &n.per_eaxc[0];
    assert_eq!((e.untimed, e.early + e.on_time + e.late), (42, 0));
    assert_eq!(e.slot_closed, 0);
}

/// The stage keeps state from every frame: the sampled self-check, which re-runs bursts, is
/// refused with it.
#[test]
fn verify_is_refused_with_a_fronthaul_stage() {
    crate::register();
    let text = "ports:\n  - name: wire\n    gen: { count: 10 }\npipeline:\n  - fronthaul: {}\n\
                verify: { sample: 5 }\n";
    let e = match config::parse_str(text, Path::new("v.yaml")) {
        Ok(_) => panic!("verify accepted with a fronthaul stage"),
        Err(e) => e,
    };
    assert_eq!((e.key.as_str(), e.line), ("verify.sample", 6), "{e}");
    assert!(e.message.contains("fronthaul"), "{e}");
    assert!(e.message.contains("slot grid"), "{e}");
}
