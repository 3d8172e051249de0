//! `verify: { sample: N }`: the daemon re-runs sampled bursts on the CPU reference beside the
//! executor. On the CPU executor (checked against itself) the shipped inline filter and l3fwd
//! (which rewrites frames) give zero mismatches; a stage whose verdict depends on its own past
//! (it drops one frame on its first run only) is caught, and the frame reaches the slow path.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pipeline::config;
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::port::pcap::CaptureReader;
use pipeline::internal::stage::registry::{BuiltStage, StageFactory, StageRegistry};
use pipeline::internal::verify::sampler::VerifySummary;
use pipeline::meta::PacketMeta;
use pipeline::stage::CustomStage;
use pipeline::verdict::{Action, Verdict};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-verify-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../configs")
        .join(name)
}

/// Runs config `text` (relative paths against `path`'s folder) on the CPU executor.
fn run_text(text: &str, path: &Path, registry: &StageRegistry) -> daemon::Summary {
    let cfg = config::parse_str(text, path).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare_with(cfg, registry).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(p.choice.name, "cpu");
    let ports = daemon::open_ports(&p.cfg).unwrap_or_else(|e| panic!("{e:#}"));
    let shared = CpuShared::new(&p.cpu_spec());
    daemon::run_cpu(&p, &shared, ports)
}

/// A shipped config with its executor forced to the CPU, fewer frames, and `verify` on.
fn shipped_with_verify(name: &str, frames: &str, extra: &[(&str, String)]) -> String {
    let mut text = std::fs::read_to_string(shipped(name)).unwrap();
    assert!(text.contains("kind: auto"), "{name}: executor line moved");
    text = text.replace("kind: auto", "kind: cpu #");
    let count = text
        .lines()
        .find(|l| l.trim_start().starts_with("count: ") && l.len() - l.trim_start().len() == 6)
        .unwrap_or_else(|| panic!("{name}: no generator count"))
        .to_string();
    text = text.replace(&count, &format!("      count: {frames}"));
    for (from, to) in extra {
        assert!(text.contains(from), "{name}: no {from}");
        text = text.replace(from, to);
    }
    text + "verify: { sample: 1 }\n"
}

fn verify_of(s: &daemon::Summary) -> VerifySummary {
    s.verify.clone().expect("verify counts in the summary")
}

#[test]
fn the_inline_filter_checked_against_itself_has_no_mismatch() {
    let text = shipped_with_verify("inline-filter.yaml", "20000", &[]);
    let s = run_text(
        &text,
        &shipped("inline-filter.yaml"),
        &StageRegistry::default(),
    );
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    let v = verify_of(&s);
    assert!(v.sampled_bursts > 0 && v.sampled_frames > 0, "{v:?}");
    assert_eq!((v.mismatch_frames, v.counter_mismatches), (0, 0), "{v:?}");
    assert_eq!(v.sample, 1);
    // Every burst is due (sample: 1): each was checked or skipped while the verifier was busy.
    let bursts_min = s.rx_frames.div_ceil(64);
    assert!(v.sampled_bursts + v.skipped_busy >= bursts_min, "{v:?}");
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["verify"]["mismatch_frames"], 0);
    assert!(json["verify"]["sampled_frames"].as_u64().unwrap() > 0);
}

#[test]
fn l3fwd_rewrites_checked_against_itself_have_no_mismatch() {
    let dir = tmpdir("l3fwd");
    let p0 = dir.join("p0.pcap").display().to_string();
    let p1 = dir.join("p1.pcap").display().to_string();
    let text = shipped_with_verify(
        "l3fwd.yaml",
        "5000",
        &[
            ("/tmp/pktwarp-l3fwd-port0.pcap", p0),
            ("/tmp/pktwarp-l3fwd-port1.pcap", p1),
        ],
    );
    let s = run_text(&text, &shipped("l3fwd.yaml"), &StageRegistry::default());
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert!(s.tx_frames > 0, "l3fwd forwards frames");
    let v = verify_of(&s);
    assert!(v.sampled_frames > 0, "{v:?}");
    assert_eq!((v.mismatch_frames, v.counter_mismatches), (0, 0), "{v:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Drops the `k`-th frame it ever sees: on the executor's run, not on the reference's re-run
/// of the same burst (interior state: what a stage with a hidden dependency on its past does).
struct FirstRunDrop {
    k: u64,
    seen: AtomicU64,
}

impl CustomStage for FirstRunDrop {
    fn process(&self, _frame: &[u8], _meta: &PacketMeta, v: &mut Verdict) {
        if self.seen.fetch_add(1, Ordering::Relaxed) == self.k {
            v.action = Action::Drop;
        }
    }
}

struct FirstRunDropFactory;

impl StageFactory for FirstRunDropFactory {
    fn build(&self, _options: &serde_json::Value) -> anyhow::Result<BuiltStage> {
        // CPU only (a test stage: the CPU executor is the executor checked here).
        Ok(BuiltStage {
            cpu: Arc::new(FirstRunDrop {
                k: 5,
                seen: AtomicU64::new(0),
            }),
            gpu: None,
        })
    }
}

/// One queue (its first burst is always sampled), the diverging stage, and `output` (with
/// `to_host` when `slow`).
fn diverging_config(dir: &Path, slow: bool) -> (String, PathBuf) {
    let to_host = if slow {
        ", to_host: { pcap: host.pcap }"
    } else {
        ""
    };
    let text = format!(
        "ports:\n  - name: g\n    gen: {{ count: 3000, size: 64, seed: 3 }}\n\
         \x20 - name: out\n    pcap: {{ tx: {{ path: out.pcap }} }}\n\
         queues: {{ count: 1, burst: 32 }}\n\
         pipeline:\n  - parse\n  - custom: {{ name: first_run_drop }}\n  - count\n\
         executor: {{ kind: cpu }}\n\
         output: {{ port: out{to_host} }}\n\
         verify: {{ sample: 1 }}\n"
    );
    (text, dir.join("c.yaml"))
}

fn registry() -> StageRegistry {
    let mut r = StageRegistry::default();
    r.register("first_run_drop", Arc::new(FirstRunDropFactory))
        .unwrap();
    r
}

fn frames_in(path: &Path) -> Vec<Vec<u8>> {
    let mut r = CaptureReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        out.push(f.data.to_vec());
    }
    out
}

#[test]
fn a_diverging_stage_is_caught_and_its_frame_reaches_the_slow_path() {
    let dir = tmpdir("diverge");
    let (text, path) = diverging_config(&dir, true);
    let s = run_text(&text, &path, &registry());
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    let v = verify_of(&s);
    // Frame 5 of the first burst: dropped by the executor's run, passed by the reference's.
    assert_eq!(v.mismatch_frames, 1, "{v:?}");
    assert_eq!(v.counter_mismatches, 1, "{v:?}");
    assert_eq!((v.captured_frames, v.capture_dropped), (1, 0), "{v:?}");
    let slow = s
        .outputs
        .iter()
        .find(|o| o.role == "to_host")
        .unwrap_or_else(|| panic!("no slow path in {:?}", s.outputs));
    assert_eq!(slow.frames, 1, "{:?}", s.outputs);
    let host = frames_in(&dir.join("host.pcap"));
    let out = frames_in(&dir.join("out.pcap"));
    assert_eq!(host.len(), 1);
    // The captured frame is the one the executor dropped: the 6th frame the stage saw, which
    // is missing between the 5th and the 7th of the output.
    assert_eq!(out.len() as u64, s.rx_frames - 1);
    let gen = generated(3000, 3);
    assert_eq!(host[0], gen[5]);
    assert_eq!(out[5], gen[6]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn without_a_slow_path_mismatching_frames_are_counted() {
    let dir = tmpdir("diverge-noslow");
    let (text, path) = diverging_config(&dir, false);
    let s = run_text(&text, &path, &registry());
    let v = verify_of(&s);
    assert_eq!(v.mismatch_frames, 1, "{v:?}");
    assert_eq!((v.captured_frames, v.capture_dropped), (0, 1), "{v:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The generator's frames for `count` and `seed` (size 64), in order.
fn generated(count: u64, seed: u64) -> Vec<Vec<u8>> {
    use pipeline::port::{RxPort, RxStatus};
    let g = pipeline::internal::port::gen::GenOptions {
        count: Some(count),
        size: pipeline::internal::port::gen::FrameSize::Fixed(64),
        seed,
        ..Default::default()
    };
    let mut rx = pipeline::internal::port::gen::GenRx::new(&g, 0).expect("generator");
    let mut b = pipeline::burst::Burst::default();
    while !matches!(rx.rx_burst(&mut b, 512).expect("gen"), RxStatus::End) {}
    b.frames().map(|(_, f)| f.to_vec()).collect()
}
