//! The CPU reference: the CPU executor's pipeline itself, its results in the GPU's form.

use std::sync::Arc;

use flow_rules::abi::ACL_NO_MATCH;

use crate::burst::{Burst, FrameDesc};
use crate::counters::QueueCounters as CpuCounters;
use crate::meta::PacketMeta;
use crate::stage::acl::AclStage;
use crate::stage::{AclSlot, Pipeline, Stage};
use crate::verdict;
use pktwarp_core::abi::{self, QueueCounters, Verdict};

/// Frames the reference runs at a time: its scratch metadata stays this small when the caller
/// keeps none (a chunk of 64K frames would otherwise hold 9 MB of it).
const SLICE: usize = 256;

/// A CPU verdict in the GPU's form (`pw_verdict`): the action and drop reason as their ABI codes
/// (the enums carry the same values, pinned by the ABI tests), no reason (`DROP_NONE`) unless
/// the frame is dropped.
pub fn to_abi(v: &verdict::Verdict) -> Verdict {
    Verdict {
        action: v.action as u8,
        drop_reason: match (v.action, v.reason) {
            (verdict::Action::Drop, Some(r)) => r as u8,
            _ => abi::DROP_NONE,
        },
        out_port: v.out_port,
        rule: v.rule,
        mark: v.mark,
    }
}

/// The CPU executor's pipeline, `parse -> [acl] -> count`, as the reference every GPU result is
/// compared with. Shared read-only (`&self`) by any number of threads.
pub struct Reference {
    pipeline: Pipeline,
    /// Scratch counters `run_frames` writes (their figures are not used: the GPU's counters are
    /// checked against [`ExpectedCounters`], which follows the GPU count stage's rules).
    counters: CpuCounters,
}

/// The reference's answer for a chunk of frames: one verdict per frame and, when asked for, its
/// metadata.
#[derive(Default)]
pub struct Expected {
    pub metas: Vec<PacketMeta>,
    pub verdicts: Vec<Verdict>,
}

impl Reference {
    /// `parse -> acl (acl) -> count`, or `parse -> count` without rules.
    pub fn new(acl: Option<AclStage>) -> Reference {
        let mut stages = vec![Stage::Parse];
        if let Some(a) = acl {
            stages.push(Stage::Acl(AclSlot::new(a)));
        }
        stages.push(Stage::Count);
        let pipeline = Pipeline::new(stages);
        let counters = CpuCounters::new(pipeline.stages.len(), pipeline.rule_count());
        Reference { pipeline, counters }
    }

    /// The pipeline itself (the CPU executor's `run_burst` runs it).
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The ACL tables of the pipeline's `acl` stage, if it has one.
    pub fn acl(&self) -> Option<Arc<AclStage>> {
        self.pipeline.acl()
    }

    /// Runs the reference over `frames`; appends their verdicts to `out.verdicts` and, with
    /// `keep_meta`, their metadata to `out.metas`; counts them into `counters` when given.
    pub fn run<'f>(
        &self,
        frames: impl ExactSizeIterator<Item = (FrameDesc, &'f [u8])>,
        keep_meta: bool,
        out: &mut Expected,
        mut counters: Option<&mut ExpectedCounters>,
    ) {
        let acl = self.acl().is_some();
        let (mut descs, mut bytes): (Vec<FrameDesc>, Vec<&'f [u8]>) = (Vec::new(), Vec::new());
        let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
        let mut frames = frames.peekable();
        while frames.peek().is_some() {
            descs.clear();
            bytes.clear();
            for (d, f) in frames.by_ref().take(SLICE) {
                descs.push(d);
                bytes.push(f);
            }
            let slice = descs.iter().copied().zip(bytes.iter().copied());
            self.pipeline
                .run_frames(slice, &mut metas, &mut verdicts, &self.counters);
            for ((m, v), d) in metas.iter().zip(&verdicts).zip(&descs) {
                let v = to_abi(v);
                if let Some(c) = counters.as_deref_mut() {
                    c.add_frame(m.status == 0, acl, &v, d.wire_len);
                }
                out.verdicts.push(v);
            }
            if keep_meta {
                out.metas.extend_from_slice(&metas);
            }
        }
    }

    /// The reference's verdict for every frame of `burst`.
    pub fn verdicts(&self, burst: &Burst) -> Vec<Verdict> {
        let mut out = Expected::default();
        self.run(burst.frames().map(|(d, f)| (*d, f)), false, &mut out, None);
        out.verdicts
    }

    /// The reference's metadata and verdict for one frame received on `port`.
    pub fn frame(&self, frame: &[u8], port: u16) -> (PacketMeta, Verdict) {
        let d = FrameDesc {
            len: frame.len() as u32,
            wire_len: frame.len() as u32,
            port,
            ..Default::default()
        };
        let mut out = Expected::default();
        self.run(std::iter::once((d, frame)), true, &mut out, None);
        (out.metas[0], out.verdicts[0])
    }
}

/// The queue counters and per-rule hits the GPU's `count` stage must report for the frames the
/// reference ran (the rules of `pw_count_frame` in count.cuh).
pub struct ExpectedCounters {
    pub queue: QueueCounters,
    pub rule_hits: Vec<u64>,
}

impl ExpectedCounters {
    /// Zero counters for a rule set of `n_rules` rules (0: no acl stage).
    pub fn new(n_rules: usize) -> ExpectedCounters {
        ExpectedCounters {
            queue: QueueCounters::default(),
            rule_hits: vec![0; n_rules],
        }
    }

    /// One frame: whether it parsed, whether the acl stage ran, its verdict and wire length.
    pub fn add_frame(&mut self, parse_ok: bool, acl: bool, v: &Verdict, wire_len: u32) {
        self.queue.add_frame(parse_ok, acl && parse_ok, v, wire_len);
        if v.rule != ACL_NO_MATCH {
            if let Some(h) = self.rule_hits.get_mut(v.rule as usize) {
                *h += 1;
            }
        }
    }

    /// What differs from the GPU's counters (`gpu`, every queue merged) and rule hits, after
    /// `bursts` bursts: one line per difference, empty when equal.
    pub fn compare(&self, bursts: u64, gpu: &QueueCounters, gpu_hits: &[u64]) -> Vec<String> {
        let mut want = self.queue;
        want.bursts = bursts;
        let mut out = Vec::new();
        if *gpu != want {
            out.push(format!("queue counters: cpu {want:?} gpu {gpu:?}"));
        }
        if !self.rule_hits.is_empty() && gpu_hits != self.rule_hits.as_slice() {
            let bad = self
                .rule_hits
                .iter()
                .zip(gpu_hits)
                .filter(|(a, b)| a != b)
                .count();
            out.push(format!("per-rule hits differ for {bad} rules"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::parse;

    /// The shipped inline filter's rules as the reference's acl stage.
    fn inline_filter() -> AclStage {
        let p = std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../configs/rules/inline-filter.rules.yaml"
        ));
        AclStage::load(&p, flow_rules::acl::RuleFormat::Yaml, verdict::Action::Pass)
            .expect("the shipped inline-filter rules load")
    }

    /// Frames of every kind the reference must tell apart: generated flows (TCP, UDP, IPv6),
    /// malformed ones, and truncations down to nothing.
    fn frames() -> Burst {
        let g = crate::port::gen::GenOptions {
            count: Some(2000),
            malformed_ratio: 0.2,
            flows: Some(crate::port::gen::FlowOptions {
                ipv6_share: 0.3,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut rx = crate::port::gen::GenRx::new(&g, 0).expect("generator");
        let mut b = Burst::default();
        use crate::port::{RxPort, RxStatus};
        while !matches!(rx.rx_burst(&mut b, 512).expect("gen"), RxStatus::End) {}
        let whole = b.frame(0).to_vec();
        for cut in [0usize, 1, 13, 14, 20, 33] {
            b.push(&whole[..cut.min(whole.len())], FrameDesc::default());
        }
        b
    }

    /// The reference (the CPU pipeline) agrees with the verdict rule the GPU kernels implement
    /// (`abi::verdict_of` over the Rust parser and classifier) on every frame, and the expected
    /// counters follow the frames.
    #[test]
    fn reference_agrees_with_the_gpu_verdict_rule() {
        let r = Reference::new(Some(inline_filter()));
        let acl = r.acl().expect("acl stage");
        let b = frames();
        let mut out = Expected::default();
        let mut c = ExpectedCounters::new(acl.rule_count());
        r.run(
            b.frames().map(|(d, f)| (*d, f)),
            true,
            &mut out,
            Some(&mut c),
        );
        assert_eq!(out.verdicts.len(), b.len());
        assert_eq!(out.metas.len(), b.len());
        let (mut drops, mut matched) = (0u64, 0u64);
        for (i, (d, f)) in b.frames().enumerate() {
            let mut m = PacketMeta::default();
            parse::parse(f, &mut m);
            let ok = m.status == 0;
            let (mut rule, mut action, mut mark) = (ACL_NO_MATCH, abi::ACTION_PASS, 0);
            if ok {
                let x = acl.classify(&m, d.port);
                (rule, action, mark) = (x.rule, x.action as u8, x.mark);
            }
            let want = abi::verdict_of(
                ok,
                abi::PIPE_PARSE | abi::PIPE_DROP_MALFORMED,
                rule,
                action,
                mark,
            );
            assert_eq!(out.verdicts[i], want, "frame {i}");
            assert_eq!(out.metas[i], m, "frame {i}");
            drops += u64::from(want.action == abi::ACTION_DROP);
            matched += u64::from(ok && rule != ACL_NO_MATCH);
        }
        assert!(
            drops > 0 && matched > 0,
            "the frames must exercise drops and rule matches"
        );
        assert_eq!(c.queue.packets, b.len() as u64);
        assert_eq!(c.queue.acl_matched, matched);
        assert_eq!(c.rule_hits.iter().sum::<u64>(), matched);
        assert_eq!(r.verdicts(&b), out.verdicts);
        assert_eq!(
            r.frame(b.frame(3), b.descs[3].port),
            (out.metas[3], out.verdicts[3])
        );
    }

    /// Without `keep_meta` no metadata is kept; without rules nothing is classified.
    #[test]
    fn reference_without_meta_or_rules() {
        let r = Reference::new(None);
        let b = frames();
        let mut out = Expected::default();
        r.run(b.frames().map(|(d, f)| (*d, f)), false, &mut out, None);
        assert!(out.metas.is_empty());
        assert_eq!(out.verdicts.len(), b.len());
        assert!(out.verdicts.iter().all(|v| v.rule == ACL_NO_MATCH));
        let empty = Burst::default();
        assert!(r.verdicts(&empty).is_empty());
    }

    /// A counter or a rule hit off by one is reported, and equal counters are not.
    #[test]
    fn counters_compare_names_differences() {
        let mut c = ExpectedCounters::new(3);
        let v = Verdict {
            action: abi::ACTION_PASS,
            drop_reason: abi::DROP_NONE,
            out_port: abi::OUT_DEFAULT,
            rule: 1,
            mark: 0,
        };
        c.add_frame(true, true, &v, 64);
        let mut gpu = c.queue;
        gpu.bursts = 1;
        assert!(c.compare(1, &gpu, &[0, 1, 0]).is_empty());
        assert_eq!(c.compare(2, &gpu, &[0, 1, 0]).len(), 1);
        let p = c.compare(1, &gpu, &[1, 1, 0]);
        assert_eq!(p, vec!["per-rule hits differ for 1 rules".to_string()]);
        // A GPU that reports fewer rules than the reference has differs too.
        assert_eq!(c.compare(1, &gpu, &[0, 1]).len(), 1);
    }

    /// The ABI form of the CPU verdicts.
    #[test]
    fn to_abi_codes() {
        let p = to_abi(&verdict::Verdict::PASS);
        assert_eq!(
            (p.action, p.drop_reason, p.rule),
            (abi::ACTION_PASS, abi::DROP_NONE, ACL_NO_MATCH)
        );
        let d = to_abi(&verdict::Verdict::drop(verdict::DropReason::ParseError));
        assert_eq!(
            (d.action, d.drop_reason),
            (abi::ACTION_DROP, abi::DROP_PARSE_ERROR)
        );
        let a = to_abi(&verdict::Verdict::drop(verdict::DropReason::AclDrop));
        assert_eq!(a.drop_reason, abi::DROP_ACL);
    }
}
