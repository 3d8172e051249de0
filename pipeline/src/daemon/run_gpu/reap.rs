//! A finished burst's verdicts into its queue's counters, as the CPU executor's worker counts
//! them, so the summary and the metrics read the same on both executors.

use crate::burst::Burst;
use crate::counters::QueueCounters;
use crate::executor::gpu::abi::Verdict;
use crate::stage::{Pipeline, Stage};
use crate::verdict::{Action, DropReason};

/// How verdicts are counted for one pipeline.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reaper {
    /// The GPU runs an acl stage: classified frames count a rule hit or the default.
    pub acl_on: bool,
    /// Position of the `count` stage, whose frames and bytes are the frames not dropped.
    pub count_stage: Option<usize>,
    /// Drop reasons only stages after the acl stage give (a frame dropped for one of them
    /// was classified first, and its rule hit or default counts).
    pub after_acl: [bool; DropReason::COUNT],
}

/// [`Reaper::after_acl`] of a pipeline: reasons of the stages after its acl stage that no stage
/// before it gives.
fn after_acl(p: &Pipeline) -> [bool; DropReason::COUNT] {
    let mut out = [false; DropReason::COUNT];
    let Some(a) = p.stages.iter().position(|s| matches!(s, Stage::Acl(_))) else {
        return out;
    };
    for s in &p.stages[a + 1..] {
        for r in s.drop_reasons() {
            out[*r as usize] = true;
        }
    }
    for s in &p.stages[..a] {
        for r in s.drop_reasons() {
            out[*r as usize] = false;
        }
    }
    out
}

impl Reaper {
    pub fn new(pipeline: &Pipeline, acl_on: bool) -> Reaper {
        Reaper {
            acl_on,
            // A composed pipeline's stages count on the GPU (folded in at the end of the run).
            count_stage: if crate::executor::gpu::compose::is_composed(pipeline) {
                None
            } else {
                pipeline
                    .stages
                    .iter()
                    .position(|s| matches!(s, Stage::Count))
            },
            after_acl: after_acl(pipeline),
        }
    }

    /// Counts one burst's verdicts (`v[i]` is frame `i`'s; frames past the end of `v` are not
    /// counted). Called by the queue's own thread only: it is the single writer of the
    /// verdict counters. Drops are added atomically: the ingest threads count `too_long` and
    /// `ring_full` into the same array.
    pub fn count(&self, c: &QueueCounters, b: &Burst, v: &[Verdict]) {
        let (mut passed, mut mirrored, mut to_host) = (0u64, 0u64, 0u64);
        let (mut counted, mut counted_bytes) = (0u64, 0u64);
        let mut drops = [0u64; DropReason::COUNT];
        // Descriptors only: a burst of frames in GPU memory has no bytes on the host.
        for (d, vd) in b.descs.iter().zip(v) {
            let action = Action::from_code(vd.action);
            match action {
                Action::Pass => passed += 1,
                Action::Mirror => mirrored += 1,
                Action::ToHost => to_host += 1,
                Action::Drop => {
                    if let Some(r) = DropReason::from_code(vd.drop_reason) {
                        drops[r as usize] += 1;
                    }
                }
            }
            let classified = action != Action::Drop
                || vd.drop_reason == DropReason::AclDrop as u8
                || self
                    .after_acl
                    .get(usize::from(vd.drop_reason))
                    .copied()
                    .unwrap_or(false);
            if self.acl_on && classified {
                match c.rule_hits.get(vd.rule as usize) {
                    Some(h) => h.add(1),
                    None if vd.rule == flow_rules::abi::ACL_NO_MATCH => c.acl_default.add(1),
                    None => c.rule_hits_other.add(1),
                }
            }
            if action != Action::Drop {
                counted += 1;
                counted_bytes += d.len as u64;
            }
        }
        c.passed.add(passed);
        c.mirrored.add(mirrored);
        c.to_host.add(to_host);
        for (slot, n) in c.drops.iter().zip(drops) {
            slot.add_shared(n);
        }
        if let Some(si) = self.count_stage {
            c.stage_frames[si].add(counted);
            c.stage_bytes[si].add(counted_bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::burst::FrameDesc;

    fn verdict(action: u8, drop_reason: u8, rule: u32) -> Verdict {
        Verdict {
            action,
            drop_reason,
            out_port: crate::executor::gpu::abi::OUT_DEFAULT,
            rule,
            mark: 0,
        }
    }

    fn burst(lens: &[usize]) -> Burst {
        let mut b = Burst::with_capacity(lens.len(), 4096);
        for &n in lens {
            b.push(&vec![0u8; n], FrameDesc::default());
        }
        b
    }

    #[test]
    fn counts_every_verdict_as_the_cpu_worker_does() {
        let c = QueueCounters::new(3, 4);
        let r = Reaper {
            acl_on: true,
            count_stage: Some(2),
            after_acl: [false; DropReason::COUNT],
        };
        let b = burst(&[60, 70, 80, 90, 100, 110]);
        let v = [
            verdict(0, 0xFF, 1),                             // pass, rule 1
            verdict(0, 0xFF, flow_rules::abi::ACL_NO_MATCH), // pass, default
            verdict(1, DropReason::AclDrop as u8, 3),        // acl drop, rule 3
            verdict(
                1,
                DropReason::ParseError as u8,
                flow_rules::abi::ACL_NO_MATCH,
            ),
            verdict(2, 0xFF, 9), // mirror, a rule past the table (a reload grew it)
            verdict(3, 0xFF, 0), // to host, rule 0
        ];
        r.count(&c, &b, &v);
        assert_eq!(
            (c.passed.get(), c.mirrored.get(), c.to_host.get()),
            (2, 1, 1)
        );
        assert_eq!(c.drop_count(DropReason::AclDrop), 1);
        assert_eq!(c.drop_count(DropReason::ParseError), 1);
        let hits: Vec<u64> = c.rule_hits.iter().map(|h| h.get()).collect();
        assert_eq!(hits, [1, 1, 0, 1]);
        assert_eq!((c.acl_default.get(), c.rule_hits_other.get()), (1, 1));
        assert_eq!(
            (c.stage_frames[2].get(), c.stage_bytes[2].get()),
            (4, 60 + 70 + 100 + 110)
        );
    }

    #[test]
    fn without_acl_no_rule_is_counted_and_short_verdicts_stop_early() {
        let c = QueueCounters::new(1, 0);
        let r = Reaper {
            acl_on: false,
            count_stage: None,
            after_acl: [false; DropReason::COUNT],
        };
        let b = burst(&[60, 60, 60]);
        r.count(&c, &b, &[verdict(0, 0xFF, 0)]);
        assert_eq!(c.passed.get(), 1);
        assert_eq!((c.acl_default.get(), c.rule_hits_other.get()), (0, 0));
    }
}
