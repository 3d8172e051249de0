//! The registry is the only list: a built-in-style stage added from one folder
//! (tests/door_stage: descriptor, options, Rust, CUDA) with one registration line is named by
//! the config check, labelled in the stage list the metrics use, described as the built-ins are,
//! and runs on the CPU executor and the host-compiled CUDA with the same results.

mod door_stage;

use std::path::Path;

use pipeline::burst::{Burst, FrameDesc};
use pipeline::counters::QueueCounters;
use pipeline::internal::executor::gpu::compose::stage_set;
use pipeline::internal::stage::{build_with, Stage, StageRegistry};
use pipeline::verdict::{Action, Verdict};
use pktwarp_kernels::host::{HostFrame, HostPipeline, META_BYTES, VERDICT_BYTES};

fn registry() -> StageRegistry {
    let mut r = StageRegistry::default();
    r.register_stage(&door_stage::DESCRIPTOR, door_stage::factory())
        .expect("registers");
    r
}

fn config(stages: &str) -> pipeline::config::Config {
    let text = format!(
        "ports:\n  - name: g\n    gen: {{ count: 10 }}\npipeline:\n{stages}\nexecutor: {{ kind: cpu }}\n"
    );
    pipeline::config::parse_str(&text, Path::new("/cfg/door.yaml")).expect("config")
}

#[test]
fn the_registry_names_and_describes_the_stage() {
    let r = registry();
    assert_eq!(r.names(), ["swap_macs"]);
    assert_eq!(r.descriptor("swap_macs"), Some(&door_stage::DESCRIPTOR));
    assert_eq!(r.needs("swap_macs"), Some(door_stage::DESCRIPTOR.needs));
    // `validate`'s names: a misspelt stage is an error listing the registered ones, with the
    // file, line and key.
    let cfg = config("  - parse\n  - custom: { name: swap_mac }");
    let e = pipeline::config::check_custom_stages(&cfg, &r).unwrap_err();
    assert_eq!(
        (e.line, e.key.as_str()),
        (6, "pipeline[1].custom.name"),
        "{e}"
    );
    assert!(e.message.contains("registered: swap_macs"), "{e}");
    // Its needs are its descriptor's: it reads the metadata, so `parse` comes first.
    let cfg = config("  - custom: { name: swap_macs }\n  - parse");
    let e = pipeline::config::check_custom_stages(&cfg, &r).unwrap_err();
    assert!(e.message.contains("the `swap_macs` stage"), "{e}");
    // A bad option is the stage's own error, naming the stage and the key.
    let e = r
        .build("swap_macs", &serde_json::json!({ "proto": 300 }))
        .err()
        .unwrap();
    assert!(
        format!("{e:#}").contains("custom stage `swap_macs`: option `proto`"),
        "{e:#}"
    );
    // A second registration of the name, or a descriptor claiming a kernel-library stage, is
    // refused.
    let mut r2 = registry();
    assert!(r2
        .register_stage(&door_stage::DESCRIPTOR, door_stage::factory())
        .is_err());
    static LIB: pipeline::stage::StageDescriptor = pipeline::stage::StageDescriptor {
        name: "lib_claim",
        gpu: pipeline::stage::GpuImpl::Library { function: "pw_x" },
        ..door_stage::DESCRIPTOR
    };
    let e = r2.register_stage(&LIB, door_stage::factory()).unwrap_err();
    assert!(e.to_string().contains("its own CUDA"), "{e}");
}

fn verdict_bytes(v: &Verdict) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[0] = v.action as u8;
    b[1] = v.reason.map_or(0xFF, |r| r as u8);
    b[2..4].copy_from_slice(&v.out_port.to_le_bytes());
    b[4..8].copy_from_slice(&v.rule.to_le_bytes());
    b[8..12].copy_from_slice(&v.mark.to_le_bytes());
    b
}

#[test]
fn the_folder_stage_runs_equal_on_the_cpu_and_the_host_compiled_cuda() {
    let r = registry();
    let cfg = config("  - parse\n  - custom: { name: swap_macs, proto: 17 }\n  - count");
    pipeline::config::check_custom_stages(&cfg, &r).expect("config check");
    let stages: Vec<_> = cfg.pipeline.iter().map(|s| s.value.clone()).collect();
    let cpu = build_with(&stages, |p| p.to_path_buf(), &r).expect("builds");
    // The metrics' `stage` labels and the descriptor come from the registry.
    assert_eq!(cpu.stage_names(), ["parse", "swap_macs", "count"]);
    assert_eq!(cpu.stages[1].descriptor(), Some(&door_stage::DESCRIPTOR));
    assert_eq!(
        cpu.stages[1].drop_reasons(),
        door_stage::DESCRIPTOR.drop_reasons
    );
    assert!(cpu.rewrites());
    let set = stage_set(&cpu).expect("specs");
    let host = HostPipeline::compile(&set.specs).unwrap_or_else(|e| panic!("{e}"));
    let params: Vec<&[u8]> = set.params.iter().map(Vec::as_slice).collect();
    let c = QueueCounters::new(3, 0);
    let mut gc = [[0u64; 8]; pktwarp_kernels::MAX_STAGES];
    let mut frames = pipeline::internal::testdata::multi_proto_frames();
    frames.extend(
        pipeline::internal::testdata::mixed_frames(600)
            .into_iter()
            .map(|(f, _)| f),
    );
    // Broadcast UDP (DHCP-like) frames: dropped on both sides.
    let bcast: Vec<Vec<u8>> = frames
        .iter()
        .take(40)
        .map(|f| {
            let mut f = f.clone();
            let n = f.len().min(6);
            f[..n].fill(0xFF);
            f
        })
        .collect();
    frames.extend(bcast);
    let (mut swapped, mut dropped) = (0, 0);
    for chunk in frames.chunks(32) {
        let mut burst = Burst::default();
        for f in chunk {
            let d = FrameDesc {
                len: f.len() as u32,
                wire_len: f.len() as u32,
                ..FrameDesc::default()
            };
            burst.push(f, d);
        }
        let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
        cpu.run_burst_mut(&mut burst, &mut metas, &mut verdicts, &c);
        for (i, f) in chunk.iter().enumerate() {
            let mut buf = f.clone();
            let mut hf = HostFrame {
                len: f.len(),
                wire_len: f.len() as u32,
                ..HostFrame::default()
            };
            let (mut gm, mut gv) = ([0u8; META_BYTES], [0u8; VERDICT_BYTES]);
            host.run_frame_mut(&mut buf, &mut hf, &params, None, &mut gm, &mut gv, &mut gc);
            assert_eq!(&buf[..hf.len], burst.frame(i), "frame {i}: bytes");
            assert_eq!(&gm, metas[i].as_bytes(), "frame {i}: metadata");
            assert_eq!(gv[..12], verdict_bytes(&verdicts[i]), "frame {i}: verdict");
            swapped += usize::from(buf != *f);
            dropped += usize::from(verdicts[i].action == Action::Drop && metas[i].status == 0);
        }
    }
    let Stage::Custom(slot) = &cpu.stages[1] else {
        panic!("stage 1 is swap_macs")
    };
    let counts: Vec<u64> = slot.counters().iter().map(|(_, v)| *v).collect();
    assert_eq!(gc[1][1..3], counts[..], "the stage's counters");
    assert!(
        swapped > 50 && dropped > 0,
        "{swapped} swapped, {dropped} dropped"
    );
}
