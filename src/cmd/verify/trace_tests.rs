//! verify's trace input on an IPv6 ClassBench-style set (flow-rules' generator, as `pktwarp
//! acl-gen` writes it) with IPv4 lines mixed in: the frames of both families, the CPU
//! reference's rule for each equal to `classify`'s where the frame carries the whole key, and the
//! host-compiled CUDA pipeline (the GPU's stage code) equal to the reference frame by frame, on
//! the table bytes verify hands the GPU. Needs no GPU.

use clap::Parser as _;
use flow_rules::abi::ACL_NO_MATCH;
use flow_rules::acl::gen6::{generate, GenSpec, Profile};
use flow_rules::acl::{classbench, load_rules, read_text, RuleFormat};
use pipeline::burst::Burst;
use pipeline::verdict::Action;
use pipeline::verify::Expected;
use pktwarp_kernels::host::{AclSel, HostPipeline, META_BYTES, VERDICT_BYTES};
use std::path::{Path, PathBuf};

use super::source::Source;
use super::{load_acl, Args};

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    a: Args,
}

/// `verify ARGS` as the command line gives them.
fn args(argv: &[&str]) -> Args {
    Cli::try_parse_from(std::iter::once("verify").chain(argv.iter().copied()))
        .expect("verify arguments")
        .a
}

/// Rules and trace (IPv6 from the generator, then three IPv4 lines) in a fresh folder.
fn write_set(dir: &Path) -> (PathBuf, PathBuf) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let g = generate(&GenSpec {
        profile: Profile::Acl,
        rules: 300,
        headers: 3000,
        miss_frac: 0.15,
        seed: 21,
    });
    let (rules, trace) = (dir.join("ipv6_acl"), dir.join("ipv6_acl_trace"));
    std::fs::write(&rules, g.rules).unwrap();
    let v4 = "3232235777\t167772162\t1024\t80\t6\t0\t0\n10.0.0.1 10.0.0.2 53 53 17\n\
              10.0.0.3\t10.0.0.4\t0\t0\t1\n";
    std::fs::write(&trace, format!("{}{v4}", g.trace)).unwrap();
    (rules, trace)
}

#[test]
fn ipv6_trace_frames_equal_on_cpu_and_host_compiled_cuda() {
    let dir = std::env::temp_dir().join(format!("pw-verify-trace6-{}", std::process::id()));
    let (rules, trace) = write_set(&dir);
    let a = args(&[
        "--trace",
        trace.to_str().unwrap(),
        "--rules",
        rules.to_str().unwrap(),
    ]);
    let acl = load_acl(&rules, Action::Pass).expect("IPv6 rules");
    let mut src = Source::from_args(&a).expect("IPv6 trace");
    let mut chunk = Burst::default();
    assert!(src.fill(&mut chunk, 1 << 20).unwrap());
    // classify's reading of the same files.
    let text = read_text(&trace).unwrap();
    let lines = classbench::parse_trace(&trace, &text).unwrap();
    assert_eq!(chunk.len(), lines.len());
    assert_eq!(chunk.len(), 3003);
    let mut want = Expected::default();
    let frames = chunk.frames().map(|(d, f)| (*d, f));
    acl.reference.run(frames, true, &mut want, None);
    let keys: Vec<_> = lines.iter().map(|l| l.key).collect();
    let mut classify = vec![0u32; keys.len()];
    load_rules(&rules, RuleFormat::ClassBench)
        .unwrap()
        .compile()
        .classify_batch(&keys, &mut classify);
    let (mut v6, mut v6_matched, mut v6_missed) = (0, 0, 0);
    for (i, ((_, f), l)) in chunk.frames().zip(&lines).enumerate() {
        let ethertype = u16::from_be_bytes([f[12], f[13]]);
        assert_eq!(
            ethertype,
            if l.key.ip_version == 6 {
                0x86DD
            } else {
                0x0800
            },
            "frame {i}"
        );
        // The generator writes no SCTP header (a 64-byte frame is then SCTP-truncated).
        if l.key.proto != 132 {
            assert_eq!(want.metas[i].status, 0, "frame {i} parses: {:?}", l.key);
        }
        v6 += usize::from(l.key.ip_version == 6);
        // TCP and UDP frames carry the line's whole key (ports included).
        if [6, 17].contains(&l.key.proto) {
            assert_eq!(want.verdicts[i].rule, classify[i], "frame {i}: {:?}", l.key);
        }
        if l.key.ip_version == 6 {
            if want.verdicts[i].rule == ACL_NO_MATCH {
                v6_missed += 1;
            } else {
                v6_matched += 1;
            }
        }
    }
    assert_eq!(v6, 3000);
    assert!(
        v6_matched > 2000 && v6_missed > 300,
        "{v6_matched} {v6_missed}"
    );
    host_cuda_equals(&acl, &chunk, &want);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The reference's pipeline compiled from the CUDA stages for the host, on the very table
/// bytes verify gives the GPU: every frame's metadata and verdict, and the rule hits, equal.
fn host_cuda_equals(acl: &super::Acl, chunk: &Burst, want: &Expected) {
    let (specs, _) =
        pipeline::internal::executor::gpu::compose::stage_specs(acl.reference.pipeline())
            .expect("stage specs");
    let host = HostPipeline::compile(&specs).expect("host-compiled CUDA pipeline");
    let t = acl.tables();
    let image: Vec<u32> = t
        .bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let mut hits = vec![0u64; t.n_rules as usize];
    let sel = AclSel {
        tables: image.as_ptr() as u64,
        rule_hits: hits.as_mut_ptr() as u64,
        n_rules: t.n_rules,
        default_action: acl.default_action(),
        stage_params: 0,
    };
    let params: Vec<&[u8]> = specs.iter().map(|_| &[][..]).collect();
    let mut counters = [[0u64; 8]; pktwarp_kernels::MAX_STAGES];
    let mut cpu_hits = vec![0u64; t.n_rules as usize];
    for (i, (d, f)) in chunk.frames().enumerate() {
        let (mut gm, mut gv) = ([0xAAu8; META_BYTES], [0x55u8; VERDICT_BYTES]);
        host.run_frame(
            f,
            d.wire_len,
            d.port,
            &params,
            Some(&sel),
            &mut gm,
            &mut gv,
            &mut counters,
        );
        let cv = want.verdicts[i];
        let got = (
            gv[0],
            gv[1],
            u32::from_le_bytes([gv[4], gv[5], gv[6], gv[7]]),
            u32::from_le_bytes([gv[8], gv[9], gv[10], gv[11]]),
        );
        assert_eq!(
            got,
            (cv.action, cv.drop_reason, cv.rule, cv.mark),
            "frame {i}: verdict"
        );
        assert!(&gm == want.metas[i].as_bytes(), "frame {i}: metadata");
        if let Some(h) = cpu_hits.get_mut(cv.rule as usize) {
            *h += 1;
        }
    }
    assert_eq!(hits, cpu_hits, "rule hits");
}
