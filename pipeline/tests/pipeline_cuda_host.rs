//! Differential test of composed pipelines: the generated CUDA `pw_pipeline_frame` (the stage
//! ABI, compiled for the host by pktwarp-kernels' HostPipeline) equals the CPU executor's
//! `Pipeline::run_frames` frame by frame (metadata, verdict, rule, mark) and in every counter
//! (frames per stage, count bytes, parse errors, ACL matches and defaults, rule hits, the user
//! stage's own), for the shipped configs' stage lists, a user stage and other orders and subsets,
//! on generated frames (malformed ones included) and, in a corpus test, on the tcpdump corpus.

mod parse_common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pipeline::burst::FrameDesc;
use pipeline::counters::QueueCounters;
use pipeline::internal::port::gen::{GenOptions, GenRx};
use pipeline::internal::stage::acl::AclStage;
use pipeline::internal::stage::{
    AclSlot, BuiltStage, CustomSlot, CustomStage, GpuStage, Pipeline, Stage,
};
use pipeline::meta::PacketMeta;
use pipeline::port::{RxPort, RxStatus};
use pipeline::verdict::{Action, DropReason, Verdict};
use pktwarp_kernels::host::{AclSel, HostPipeline, META_BYTES, VERDICT_BYTES};
use pktwarp_kernels::{StageKind, StageSpec};

/// A user stage with one semantics in Rust and CUDA: TCP SYNs (SYN set, ACK clear) from a source
/// port below `min_port` (its 4-byte parameter block) are dropped and counted.
struct SynFloor {
    min_port: u16,
    dropped: AtomicU64,
}

impl CustomStage for SynFloor {
    fn process(&self, _frame: &[u8], m: &PacketMeta, v: &mut Verdict) {
        if m.ip_proto == 6 && m.tcp_flags & 0x12 == 0x02 && m.src_port < self.min_port {
            v.action = Action::Drop;
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn counter_names(&self) -> Vec<String> {
        vec!["dropped".into()]
    }
    fn counters(&self) -> Vec<u64> {
        vec![self.dropped.load(Ordering::Relaxed)]
    }
}

const SYN_FLOOR_CUDA: &str =
    "PW_DEVICE void syn_floor(const pw_frame *f, pw_packet_meta *m, pw_verdict *v,
                           const void *params, pw_stage_counters *c) {
    (void)f;
    const uint32_t min_port = *(const uint32_t *)params;
    if (m->ip_proto == 6u && (m->tcp_flags & 0x12u) == 0x02u && m->src_port < min_port) {
        v->action = (uint8_t)PW_ACTION_DROP;
        PW_ADD64(&c->v[1], 1);
    }
}
";
const MIN_PORT: u16 = 30000;

fn rules() -> AclStage {
    let p = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../configs/rules/inline-filter.rules.yaml"
    ));
    AclStage::load(p, flow_rules::acl::RuleFormat::Yaml, Action::Pass).expect("shipped rules")
}

/// The CPU pipeline and the matching stage specs for a list of names (`syn_floor` = the user
/// stage).
fn build(names: &[&str]) -> (Pipeline, Vec<StageSpec>, Arc<SynFloor>) {
    let floor = Arc::new(SynFloor {
        min_port: MIN_PORT,
        dropped: AtomicU64::new(0),
    });
    let mut stages = Vec::new();
    for n in names {
        stages.push(match *n {
            "parse" => Stage::Parse,
            "count" => Stage::Count,
            "acl" => Stage::Acl(AclSlot::new(rules())),
            "syn_floor" => Stage::Custom(Box::new(
                CustomSlot::new(
                    "syn_floor",
                    BuiltStage {
                        cpu: floor.clone(),
                        gpu: Some(GpuStage {
                            source: SYN_FLOOR_CUDA.into(),
                            function: "syn_floor".into(),
                            params: u32::from(MIN_PORT).to_le_bytes().to_vec(),
                            counter_names: vec!["dropped".into()],
                            buffers: Vec::new(),
                        }),
                    },
                    true,
                )
                .expect("a valid user stage"),
            )),
            other => panic!("no stage {other}"),
        });
    }
    let p = Pipeline::new(stages);
    // The GPU executor's own bridge from the pipeline to the kernel generator.
    let (specs, params) =
        pipeline::internal::executor::gpu::compose::stage_specs(&p).expect("specs");
    for (n, s) in names.iter().zip(&specs) {
        assert_eq!(*n, s.name);
    }
    assert_eq!(params.len(), names.len());
    (p, specs, floor)
}

/// The tcpdump corpus's Ethernet frames; None (the test does not run) without the corpus
/// outside CI (`require_corpus`).
fn corpus_frames() -> Option<Vec<(FrameDesc, Vec<u8>)>> {
    let mut out = Vec::new();
    for path in parse_common::ethernet_captures()? {
        parse_common::for_each_frame(&path, |f| {
            let port = (out.len() % 3) as u16;
            out.push((desc(f.len(), port), f.to_vec()));
        });
    }
    Some(out)
}

/// Frames the project generates: the multi-protocol capture and `gen` traffic.
fn frames() -> Vec<(FrameDesc, Vec<u8>)> {
    let mut out = Vec::new();
    for f in pipeline::internal::testdata::multi_proto_frames() {
        let port = (out.len() % 3) as u16;
        out.push((desc(f.len(), port), f));
    }
    // Generated traffic: TCP SYNs from random source ports, IPv6, VLANs, 10% malformed.
    for (seed, vlan) in [(1u64, None), (2, Some(100u16))] {
        let opts = GenOptions {
            count: Some(20_000),
            seed,
            malformed_ratio: 0.1,
            vlan,
            tcp_flags: 0x02,
            ..GenOptions::default()
        };
        let mut rx = GenRx::new(&opts, 0).expect("gen port");
        let mut b = pipeline::burst::Burst::default();
        loop {
            b.clear();
            let st = rx.rx_burst(&mut b, 256).expect("gen rx");
            for (d, f) in b.frames() {
                out.push((desc(f.len(), d.port), f.to_vec()));
            }
            if matches!(st, RxStatus::End) {
                break;
            }
        }
    }
    out
}

fn desc(len: usize, port: u16) -> FrameDesc {
    FrameDesc {
        port,
        len: len as u32,
        wire_len: len as u32,
        ..FrameDesc::default()
    }
}

fn cpu_verdict_bytes(v: &Verdict) -> [u8; VERDICT_BYTES] {
    let mut b = [0u8; VERDICT_BYTES];
    b[0] = v.action as u8;
    b[1] = v.reason.map_or(0xFF, |r| r as u8);
    b[4..8].copy_from_slice(&v.rule.to_le_bytes());
    b[8..12].copy_from_slice(&v.mark.to_le_bytes());
    b
}

fn check(names: &[&str], all: &[(FrameDesc, Vec<u8>)]) {
    let (cpu, specs, floor) = build(names);
    let host = HostPipeline::compile(&specs).unwrap_or_else(|e| panic!("{names:?}: {e}"));
    let acl = cpu.acl();
    let n_rules = acl.as_ref().map_or(0, |a| a.rule_count());
    let mut hits = vec![0u64; n_rules];
    let sel = acl.as_ref().map(|a| AclSel {
        tables: a.classifier.image().as_ptr() as u64,
        rule_hits: hits.as_mut_ptr() as u64,
        n_rules: n_rules as u32,
        default_action: a.default as u8,
        stage_params: 0,
    });
    let floor_params = u32::from(MIN_PORT).to_le_bytes();
    let params: Vec<&[u8]> = names
        .iter()
        .map(|n| {
            if *n == "syn_floor" {
                &floor_params[..]
            } else {
                &[][..]
            }
        })
        .collect();
    let c = QueueCounters::new(names.len(), n_rules);
    let mut gc = [[0u64; 8]; pktwarp_kernels::MAX_STAGES];
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    for chunk in all.chunks(64) {
        cpu.run_frames(
            chunk.iter().map(|(d, f)| (*d, f.as_slice())),
            &mut metas,
            &mut verdicts,
            &c,
        );
        for (i, (d, f)) in chunk.iter().enumerate() {
            let mut gm = [0xAAu8; META_BYTES];
            let mut gv = [0x55u8; VERDICT_BYTES];
            host.run_frame(
                f,
                d.wire_len,
                d.port,
                &params,
                sel.as_ref(),
                &mut gm,
                &mut gv,
                &mut gc,
            );
            let cv = cpu_verdict_bytes(&verdicts[i]);
            assert!(
                &gm == metas[i].as_bytes() && gv[..2] == cv[..2] && gv[4..] == cv[4..],
                "{names:?}: a frame of {} bytes differs\ncpu verdict {:?} meta {:?}\ngpu verdict {gv:?}",
                f.len(),
                verdicts[i],
                metas[i]
            );
        }
    }
    for (k, n) in names.iter().enumerate() {
        assert_eq!(
            gc[k][0],
            c.stage_frames[k].get(),
            "{names:?}: frames at stage {k} ({n})"
        );
        match *n {
            "count" => assert_eq!(gc[k][1], c.stage_bytes[k].get(), "{names:?}: count bytes"),
            "parse" => assert_eq!(
                gc[k][1],
                c.drop_count(DropReason::ParseError),
                "{names:?}: parse errors"
            ),
            "acl" => {
                assert_eq!(gc[k][2], c.acl_default.get(), "{names:?}: acl defaults");
                let cpu_hits: Vec<u64> = c.rule_hits.iter().map(|h| h.get()).collect();
                assert_eq!(hits, cpu_hits, "{names:?}: rule hits");
                assert_eq!(gc[k][1], hits.iter().sum::<u64>(), "{names:?}: acl matches");
            }
            "syn_floor" => {
                assert_eq!(gc[k][1], floor.dropped.load(Ordering::Relaxed));
                assert_eq!(gc[k][1], c.drop_count(DropReason::StageDrop));
            }
            _ => {}
        }
    }
    // The comparison covered frames that reached the last stage and frames dropped early.
    let last = names.len() - 1;
    assert!(
        c.stage_frames[last].get() > 0,
        "{names:?}: no frame reached the end"
    );
    if names.contains(&"syn_floor") {
        assert!(
            floor.dropped.load(Ordering::Relaxed) > 0,
            "no SYN was dropped"
        );
    }
}

/// Every stage list the tests compile.
const LISTS: [&[&str]; 7] = [
    &["parse", "acl", "count"], // configs/inline-filter.yaml
    &["count"],                 // configs/l2fwd.yaml
    &["parse", "syn_floor", "count"],
    &["parse", "count"],
    &["parse", "syn_floor", "acl", "count"],
    &["count", "parse", "acl"],
    &["parse", "acl", "syn_floor"],
];

#[test]
fn generated_cuda_pipelines_equal_the_cpu_pipeline() {
    let all = frames();
    assert!(all.len() > 40_000, "{} frames", all.len());
    for names in LISTS {
        check(names, &all);
    }
}

#[test]
fn generated_cuda_pipelines_equal_the_cpu_pipeline_on_the_corpus() {
    let Some(all) = corpus_frames() else { return };
    assert!(all.len() > 5000, "{} corpus frames", all.len());
    for names in LISTS {
        check(names, &all);
    }
}

#[test]
fn a_user_stage_that_does_not_compile_is_a_clear_error() {
    let spec = vec![
        StageSpec::builtin("parse").unwrap(),
        StageSpec {
            name: "broken".into(),
            kind: StageKind::Custom {
                function: "broken".into(),
                source: "PW_DEVICE void broken(int x) { return x; }".into(),
                writes_frame: false,
            },
        },
    ];
    let e = HostPipeline::compile(&spec)
        .err()
        .expect("must not compile");
    assert!(e.contains("could not compile"), "{e}");
}
