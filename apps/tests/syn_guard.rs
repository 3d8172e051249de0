//! syn-guard both ways: the Rust stage's rules one by one; its CUDA implementation (compiled for
//! the host through the stage ABI, as the GPU kernel generator composes it) equal to the Rust
//! one frame by frame and counter by counter on generated SYN traffic and the tcpdump corpus;
//! its options and config errors; and `syn-guard run` / `validate` on the shipped config.

use std::path::{Path, PathBuf};

use pipeline::burst::{Burst, FrameDesc};
use pipeline::counters::QueueCounters;
use pipeline::internal::port::gen::{GenOptions, GenRx};
use pipeline::internal::port::pcap::CaptureReader;
use pipeline::meta::PacketMeta;
use pipeline::port::{RxPort, RxStatus};
use pipeline::stage::{CustomStage, Pipeline, Stage, StageRegistry};
use pipeline::verdict::{Action, DropReason, Verdict};
use pktwarp_kernels::host::{HostPipeline, META_BYTES, VERDICT_BYTES};
use syn_guard::stage::{SynGuard, SynGuardOptions, COUNTERS};

fn shipped_config() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/syn-guard/syn-guard.yaml"
    ))
}

fn meta(flags: u16, src_port: u16, dst_port: u16) -> PacketMeta {
    PacketMeta {
        ip_version: 4,
        ip_proto: 6,
        tcp_flags: flags,
        src_port,
        dst_port,
        ..PacketMeta::default()
    }
}

#[test]
fn the_rust_stage_applies_each_rule_and_counts_it() {
    let g = SynGuard::new(SynGuardOptions {
        min_src_port: 1024,
        blocked_dst_ports: vec![23, 445],
    });
    let cases: [(PacketMeta, Action); 9] = [
        (meta(0x02, 40000, 80), Action::Pass), // a SYN from an ephemeral port
        (meta(0x02, 80, 80), Action::Drop),    // low source port
        (meta(0x02, 40000, 23), Action::Drop), // blocked destination port
        (meta(0x02, 1024, 445), Action::Drop), // not low, but blocked
        (meta(0x03, 40000, 80), Action::Drop), // SYN+FIN
        (meta(0x16, 40000, 80), Action::Drop), // SYN+RST+ACK
        (meta(0x12, 80, 23), Action::Pass),    // SYN-ACK: not a connection attempt
        (meta(0x10, 1, 23), Action::Pass),     // plain ACK
        (
            PacketMeta {
                ip_proto: 17,
                ..meta(0x02, 1, 23)
            },
            Action::Pass,
        ), // UDP: tcp_flags means nothing
    ];
    for (i, (m, want)) in cases.iter().enumerate() {
        let mut v = Verdict::PASS;
        g.process(&[], m, &mut v);
        assert_eq!(v.action, *want, "case {i}: {m:?}");
    }
    assert_eq!(g.counter_names(), COUNTERS);
    // syn, bad_flags, low_src_port, blocked_dst_port
    assert_eq!(g.counters(), [4, 2, 1, 2]);
}

#[test]
fn bad_options_are_errors_naming_the_stage() {
    let r = syn_guard::registry();
    for (opts, want) in [
        (serde_json::json!({ "min_src_port": 70000 }), "min_src_port"),
        (
            serde_json::json!({ "blocked_dst_ports": "23" }),
            "blocked_dst_ports",
        ),
        (
            serde_json::json!({ "min_port": 1 }),
            "unknown option `min_port`",
        ),
        (
            serde_json::json!({ "blocked_dst_ports": [80, -1] }),
            "blocked_dst_ports[1]",
        ),
        (
            serde_json::json!({ "blocked_dst_ports": (0..17).collect::<Vec<u16>>() }),
            "at most 16",
        ),
    ] {
        let e = r.build("syn_guard", &opts).err().unwrap();
        let msg = format!("{e:#}");
        assert!(msg.contains("custom stage `syn_guard`"), "{msg}");
        assert!(msg.contains(want), "{opts}: {msg}");
    }
    let b = r.build("syn_guard", &serde_json::json!({})).unwrap();
    let g = b.gpu.expect("syn_guard has CUDA");
    // Defaults: min_src_port 1024, no blocked ports; the block is 4 + 2 * 16 bytes.
    assert_eq!(&g.params[..4], &[0x00, 0x04, 0, 0]);
    assert_eq!(g.params.len(), 36);
}

fn load(text_edit: impl Fn(String) -> String) -> pipeline::config::Config {
    let path = shipped_config();
    let text = text_edit(std::fs::read_to_string(&path).unwrap());
    pipeline::config::parse_str(&text, &path).unwrap()
}

#[test]
fn the_config_names_the_stage_and_only_its_registry_knows_it() {
    let cfg = load(|t| t);
    let p = pipeline::daemon::build_pipeline_with(&cfg, &syn_guard::registry()).unwrap();
    assert_eq!(p.stage_names(), ["parse", "syn_guard", "count"]);
    assert_eq!(p.gpu_refusal(), None);
    // Plain pktwarp (built-ins only): a config error naming the stage, line and key.
    let e = pipeline::daemon::build_pipeline_with(&cfg, &StageRegistry::default())
        .err()
        .unwrap();
    let ce = e
        .downcast_ref::<pipeline::config::ConfigError>()
        .expect("a config error");
    assert_eq!(ce.key, "pipeline[1].custom.name");
    assert!(ce.line > 0);
    assert!(
        ce.message.contains("unknown custom stage `syn_guard`"),
        "{ce}"
    );
}

/// Generated TCP SYN traffic with every flag mix the stage distinguishes, ports over the whole
/// range, IPv4 and IPv6, some malformed; then the multi-protocol capture.
fn frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (seed, flags) in [(1u64, 0x02u8), (2, 0x03), (3, 0x06), (4, 0x12), (5, 0x10)] {
        let text = format!(
            "count: 4000\nseed: {seed}\ntcp_flags: {flags}\nmalformed_ratio: 0.05\n\
             flows: {{ src_ports: 0-65535, dst_ports: 0-1023, ipv6_share: 0.3 }}\n"
        );
        let opts: GenOptions = serde_saphyr::from_str(&text).unwrap();
        let mut rx = GenRx::new(&opts, 0).unwrap();
        let mut b = Burst::default();
        loop {
            b.clear();
            let st = rx.rx_burst(&mut b, 256).unwrap();
            out.extend(b.frames().map(|(_, f)| f.to_vec()));
            if matches!(st, RxStatus::End) {
                break;
            }
        }
    }
    out.extend(pipeline::internal::testdata::multi_proto_frames());
    out
}

/// The Ethernet captures of the tcpdump corpus; None (the test does not run) without the
/// corpus outside CI (`require_corpus`).
fn corpus_frames() -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let dir = pipeline::internal::testdata::require_corpus("pcaps/tcpdump")?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        .collect();
    files.sort();
    for f in files {
        // Non-Ethernet captures are refused by the reader; malformed ones end where they break.
        let Ok(mut r) = CaptureReader::open_ethernet(&f) else {
            continue;
        };
        while let Ok(Some(fr)) = r.next_frame() {
            out.push(fr.data.to_vec());
        }
    }
    Some(out)
}

fn desc(len: usize) -> FrameDesc {
    FrameDesc {
        len: len as u32,
        wire_len: len as u32,
        ..FrameDesc::default()
    }
}

fn custom_counters(p: &Pipeline) -> Vec<u64> {
    p.stages
        .iter()
        .find_map(|s| match s {
            Stage::Custom(c) => Some(c.counters().iter().map(|(_, v)| *v).collect()),
            _ => None,
        })
        .unwrap()
}

#[test]
fn cuda_and_rust_agree_frame_by_frame_and_in_every_counter() {
    let all = frames();
    assert!(all.len() > 20_000, "{} frames", all.len());
    agree(&all, true);
}

#[test]
fn cuda_and_rust_agree_on_the_corpus() {
    let Some(all) = corpus_frames() else { return };
    assert!(all.len() > 5_000, "{} corpus frames", all.len());
    agree(&all, false);
}

/// The stage compiled for the host and the Rust one agree on every frame of `all` and in every
/// counter; with `every_outcome`, the frames covered every rule and both outcomes.
fn agree(all: &[Vec<u8>], every_outcome: bool) {
    let cfg = load(|t| t);
    let cpu = pipeline::daemon::build_pipeline_with(&cfg, &syn_guard::registry()).unwrap();
    let (specs, params) = pipeline::internal::executor::gpu::compose::stage_specs(&cpu).unwrap();
    let host = HostPipeline::compile(&specs).unwrap_or_else(|e| panic!("{e}"));
    let params: Vec<&[u8]> = params.iter().map(Vec::as_slice).collect();
    let c = QueueCounters::new(cpu.stages.len(), 0);
    let mut gc = [[0u64; 8]; pktwarp_kernels::MAX_STAGES];
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    let mut by_action = [0usize; 4];
    for (n, chunk) in all.chunks(64).enumerate() {
        cpu.run_frames(
            chunk.iter().map(|f| (desc(f.len()), f.as_slice())),
            &mut metas,
            &mut verdicts,
            &c,
        );
        for (i, f) in chunk.iter().enumerate() {
            let (mut gm, mut gv) = ([0u8; META_BYTES], [0u8; VERDICT_BYTES]);
            host.run_frame(
                f,
                f.len() as u32,
                0,
                &params,
                None,
                &mut gm,
                &mut gv,
                &mut gc,
            );
            let v = &verdicts[i];
            let want_reason = v.reason.map_or(0xFF, |r| r as u8);
            assert_eq!(
                (gv[0], gv[1]),
                (v.action as u8, want_reason),
                "frame {}: CUDA verdict {:?}, Rust {v:?}",
                n * 64 + i,
                &gv[..2]
            );
            by_action[v.action as usize] += 1;
        }
    }
    // Every counter: frames reaching each stage, count bytes, and syn_guard's own four.
    for (k, block) in gc.iter().enumerate().take(cpu.stages.len()) {
        assert_eq!(block[0], c.stage_frames[k].get(), "stage {k} frames");
    }
    assert_eq!(gc[2][1], c.stage_bytes[2].get(), "count bytes");
    let rust = custom_counters(&cpu);
    assert_eq!(
        &gc[1][1..5],
        rust.as_slice(),
        "syn_guard counters {COUNTERS:?}"
    );
    if !every_outcome {
        return;
    }
    // The comparison covered every rule and both outcomes.
    assert!(rust.iter().all(|n| *n > 0), "{rust:?}");
    assert!(by_action[Action::Pass as usize] > 0 && by_action[Action::Drop as usize] > 0);
    assert!(c.drop_count(DropReason::StageDrop) > 0 && c.drop_count(DropReason::ParseError) > 0);
}

fn syn_guard_bin() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_syn-guard"))
}

fn scratch_config(dir: &Path, executor: &str) -> PathBuf {
    let text = std::fs::read_to_string(shipped_config()).unwrap();
    let text = text
        .replace(
            "/tmp/syn-guard-clean.pcap",
            &dir.join("clean.pcap").to_string_lossy(),
        )
        .replace("count: 100000", "count: 20000")
        .replace("executor: { kind: auto }", executor);
    let p = dir.join("syn-guard.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn syn_guard_runs_and_validates_its_config() {
    let dir = std::env::temp_dir().join(format!("syn-guard-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = scratch_config(&dir, "executor: { kind: cpu }");
    let out = syn_guard_bin().arg("validate").arg(&cfg).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("stages: parse -> syn_guard -> count"),
        "{stdout}"
    );

    let out = syn_guard_bin()
        .args(["run", "--json", "--quiet"])
        .arg(&cfg)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["rx_frames"], 20000, "{s}");
    let drops = s["drops"].as_array().unwrap();
    let stage_drops = drops
        .iter()
        .find(|d| d[0] == "stage_drop")
        .and_then(|d| d[1].as_u64())
        .unwrap();
    assert!(stage_drops > 0, "{s}");
    assert_eq!(s["tx_frames"].as_u64().unwrap() + stage_drops, 20000, "{s}");
    // The summary labels the stage by its name, with its own counters; its drop counters add
    // up to the stage drops.
    let cs = &s["custom_stages"][0];
    assert_eq!(cs["name"], "syn_guard", "{s}");
    assert_eq!(cs["position"], 1, "{s}");
    let counters: Vec<(String, u64)> = serde_json::from_value(cs["counters"].clone()).unwrap();
    let names: Vec<&str> = counters.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, COUNTERS);
    let dropped: u64 = counters[1..].iter().map(|(_, v)| v).sum();
    assert_eq!(dropped, stage_drops, "{s}");
    assert!(counters[0].1 > 0, "{s}");

    // A bad option is refused before anything runs, naming the stage.
    let bad = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("min_src_port: 1024", "min_src_port: -1");
    std::fs::write(&cfg, bad).unwrap();
    let out = syn_guard_bin().arg("validate").arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("syn-guard: error"), "{stderr}");
    assert!(stderr.contains("custom stage `syn_guard`"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_gpu_pipeline_with_syn_guard_needs_only_a_gpu() {
    // syn_guard has CUDA, so `executor: gpu` is refused only for want of a GPU (never for the
    // stage); on a machine with one, it is accepted.
    let dir = std::env::temp_dir().join(format!("syn-guard-gpu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = scratch_config(&dir, "executor: { kind: gpu }");
    let cfg = pipeline::config::load(&cfg).unwrap();
    match pipeline::daemon::prepare_with(cfg, &syn_guard::registry()) {
        Ok(p) => assert_eq!(p.choice.name, "gpu"),
        Err(e) => {
            let msg = format!("{e:#}");
            assert!(msg.contains("no GPU is usable"), "{msg}");
            assert!(!msg.contains("syn_guard"), "{msg}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
