//! The GPU kernel of a configured pipeline: its stages as the kernel generator sees them
//! (pktwarp-kernels), then the built-in image when the fused template serves the list, else the
//! generated module (compiled with NVRTC at start, cached on disk by source hash).

use super::KernelImage;
use crate::stage::{GpuStageKind, Pipeline};
use pktwarp_kernels::{StageBuffer, StageKind, StageSpec};

/// What the GPU kernel of a pipeline is made of: the stage list for the kernel generator, each
/// stage's parameter block, and each stage's device buffers.
pub struct StageSet {
    pub specs: Vec<StageSpec>,
    pub params: Vec<Vec<u8>>,
    pub buffers: Vec<Vec<StageBuffer>>,
    /// Each stage's per-queue state (`KernelImage::queue_state`).
    pub queue_state: Vec<Vec<StageBuffer>>,
}

/// The stage list of `p` for the kernel generator, with each stage's parameter block and
/// buffers. A stage without a CUDA implementation cannot run on the GPU: the error names it.
pub fn stage_set(p: &Pipeline) -> anyhow::Result<StageSet> {
    if let Some(why) = p.gpu_refusal() {
        anyhow::bail!("{why} (run it with executor kind cpu, or auto)");
    }
    let mut set = StageSet {
        specs: Vec::new(),
        params: Vec::new(),
        buffers: Vec::new(),
        queue_state: Vec::new(),
    };
    for (i, s) in p.gpu_stage_list().into_iter().enumerate() {
        let no_cuda = || {
            anyhow::anyhow!(
                "pipeline[{i}]: stage `{}` has no CUDA implementation",
                s.name
            )
        };
        let builtin = s.builtin_spec();
        let queue_state = s.queue_state.clone();
        let (spec, params, buffers) = match (s.kind, s.custom, s.library) {
            (GpuStageKind::Parse | GpuStageKind::Acl | GpuStageKind::Count, _, _) => {
                (builtin.ok_or_else(no_cuda)?, Vec::new(), Vec::new())
            }
            (GpuStageKind::Custom, Some(g), _) => (
                StageSpec {
                    name: s.name.to_string(),
                    kind: StageKind::Custom {
                        function: g.function,
                        source: g.source,
                        writes_frame: s.custom_writes,
                    },
                },
                g.params,
                g.buffers,
            ),
            // builtin_spec: flow_stats with a table of its own is the library's second form.
            (GpuStageKind::Library, _, Some(l)) => {
                (builtin.ok_or_else(no_cuda)?, l.block, l.buffers)
            }
            _ => return Err(no_cuda()),
        };
        for b in &buffers {
            if b.addr_at.checked_add(8).is_none_or(|e| e > params.len()) {
                anyhow::bail!(
                    "pipeline[{i}]: stage `{}`: buffer `{}` has its address at byte {} of a \
                     {}-byte parameter block",
                    s.name,
                    b.name,
                    b.addr_at,
                    params.len()
                );
            }
        }
        // The per-queue state's base address (8 bytes) and queue count (4) go into the block.
        for b in &queue_state {
            if b.addr_at.checked_add(12).is_none_or(|e| e > params.len()) {
                anyhow::bail!(
                    "pipeline[{i}]: stage `{}`: per-queue state `{}` has its address at byte {} \
                     of a {}-byte parameter block (12 bytes needed there)",
                    s.name,
                    b.name,
                    b.addr_at,
                    params.len()
                );
            }
        }
        set.specs.push(spec);
        set.params.push(params);
        set.buffers.push(buffers);
        set.queue_state.push(queue_state);
    }
    Ok(set)
}

/// The stage list of `p` for the kernel generator, with each stage's parameter block.
pub fn stage_specs(p: &Pipeline) -> anyhow::Result<(Vec<StageSpec>, Vec<Vec<u8>>)> {
    let set = stage_set(p)?;
    Ok((set.specs, set.params))
}

/// The kernel image that runs `p` on the GPU.
pub fn image_for_pipeline(p: &Pipeline) -> anyhow::Result<KernelImage> {
    let set = stage_set(p)?;
    let mut img =
        pktwarp_kernels::image_for(&set.specs, set.params).map_err(|e| anyhow::anyhow!("{e}"))?;
    img.buffers = set.buffers;
    img.queue_state = set.queue_state;
    img.frame_room = u32::try_from(p.frame_room())
        .map_err(|_| anyhow::anyhow!("the stages' frame room does not fit 32 bits"))?;
    Ok(img)
}

/// Whether `p` runs on the composed template (its own generated kernel), whose stages count in
/// their own counter blocks ([`super::CountersSnapshot::stages`]).
pub fn is_composed(p: &Pipeline) -> bool {
    stage_specs(p).is_ok_and(|(specs, _)| {
        pktwarp_kernels::codegen::template_of(&specs) == Ok(pktwarp_kernels::Template::Composed)
    })
}

/// Folds a composed pipeline's GPU stage counters (per queue, from
/// [`super::CountersSnapshot::stages`]) into the CPU executor's counters as they grow: frames
/// per stage, the count stage's bytes, and a user stage's named counters (published to its
/// slot). Called periodically while the run goes (live metrics) and once at its end; each call
/// adds what grew since the last one.
#[derive(Default)]
pub struct StageCounterFold {
    seen: Vec<Vec<super::abi::StageCounters>>,
}

impl StageCounterFold {
    pub fn fold(
        &mut self,
        p: &Pipeline,
        stages: &[Vec<super::abi::StageCounters>],
        counters: &[impl std::ops::Deref<Target = crate::counters::QueueCounters>],
    ) {
        use crate::stage::Stage;
        const W: usize = super::abi::STAGE_COUNTERS;
        let mut custom_sums: Vec<[u64; W]> = vec![[0; W]; p.stages.len()];
        self.seen.resize(stages.len(), Vec::new());
        for (q, (sc, seen)) in stages.iter().zip(self.seen.iter_mut()).enumerate() {
            seen.resize(sc.len(), super::abi::StageCounters::default());
            let Some(c) = counters.get(q) else { continue };
            for (k, ((stage, block), old)) in p.stages.iter().zip(sc).zip(seen.iter()).enumerate() {
                // Device counters only grow; a smaller value (a restarted kernel) adds nothing.
                let d = |w: usize| block.v[w].saturating_sub(old.v[w]);
                if let Some(f) = c.stage_frames.get(k) {
                    f.add(d(0));
                }
                match stage {
                    Stage::Count => {
                        if let Some(b) = c.stage_bytes.get(k) {
                            b.add(d(super::abi::COUNT_CTR_BYTES));
                        }
                    }
                    Stage::Custom(_) => {
                        for (sum, v) in custom_sums[k].iter_mut().zip(block.v) {
                            *sum += v;
                        }
                    }
                    // The flow table's counters are v[1..=6] (conntrack_stage.cuh), in the
                    // order of the CPU stage's COUNTER_NAMES.
                    Stage::Conntrack(ct) => {
                        let grown: Vec<u64> = (1..=6).map(d).collect();
                        ct.add_gpu_counters(&grown);
                    }
                    // The responder counts its replies in v[1..=3] (rewrite_stages.cuh), as
                    // the CPU stage counts them into the same atomics.
                    Stage::Respond(r) => {
                        for (i, n) in r.op.replies.iter().enumerate() {
                            n.fetch_add(d(i + 1), std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    _ => {}
                }
            }
            seen.clone_from(sc);
        }
        for (stage, sums) in p.stages.iter().zip(&custom_sums) {
            if let Stage::Custom(slot) = stage {
                slot.set_gpu_counters(&sums[1..]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::QueueCounters;
    use crate::stage::Stage;
    use std::sync::Arc;

    fn block(frames: u64, bytes: u64) -> super::super::abi::StageCounters {
        let mut c = super::super::abi::StageCounters::default();
        c.v[0] = frames;
        c.v[super::super::abi::COUNT_CTR_BYTES] = bytes;
        c
    }

    /// The GPU tables' counters (v[1..=6] of conntrack's block, per queue) are added to the
    /// stage's as they grow, in COUNTER_NAMES order.
    #[test]
    fn the_flow_tables_counters_are_folded_into_conntracks() {
        let cfg: pktwarp_flow::FlowConfig = serde_saphyr::from_str("entries: 64\n").unwrap();
        let ct = crate::stage::conntrack::ConntrackStage::new(&cfg).unwrap();
        let p = Pipeline::new(vec![Stage::Parse, Stage::Conntrack(Box::new(ct))]);
        let q = vec![
            Arc::new(QueueCounters::new(2, 0)),
            Arc::new(QueueCounters::new(2, 0)),
        ];
        let mut b0 = block(5, 0);
        b0.v[1..7].copy_from_slice(&[1, 2, 3, 4, 5, 6]);
        let mut b1 = block(5, 0);
        b1.v[1..7].copy_from_slice(&[10, 0, 0, 0, 0, 1]);
        let mut fold = StageCounterFold::default();
        fold.fold(&p, &[vec![block(5, 0), b0], vec![block(5, 0), b1]], &q);
        b0.v[1] = 4; // queue 0 created 3 more
        fold.fold(&p, &[vec![block(5, 0), b0], vec![block(5, 0), b1]], &q);
        let Stage::Conntrack(ct) = &p.stages[1] else {
            unreachable!()
        };
        let got: Vec<(&str, u64)> = ct.counters();
        assert_eq!(
            got,
            [
                ("created", 14),
                ("expired", 2),
                ("early_evicted", 3),
                ("table_full", 4),
                ("untracked", 5),
                ("invalid", 7)
            ]
        );
    }

    #[test]
    fn the_responders_replies_are_folded_into_its_counters() {
        let cfg: crate::rewrite::RespondConfig = serde_json::from_value(
            serde_json::json!({"mac": "02:00:00:00:00:99", "ipv4": ["192.0.2.1"]}),
        )
        .unwrap();
        let slot = crate::rewrite::stage::RespondSlot {
            op: crate::rewrite::Respond::new(&cfg).unwrap(),
            ingress_out: Vec::new(),
        };
        let p = Pipeline::new(vec![Stage::Parse, Stage::Respond(Box::new(slot))]);
        let q = vec![Arc::new(QueueCounters::new(2, 0))];
        let mut replies = block(9, 0);
        replies.v[1..4].copy_from_slice(&[2, 3, 4]);
        let mut fold = StageCounterFold::default();
        fold.fold(&p, &[vec![block(9, 0), replies]], &q);
        replies.v[2] = 5;
        fold.fold(&p, &[vec![block(9, 0), replies]], &q);
        let Stage::Respond(r) = &p.stages[1] else {
            unreachable!()
        };
        let got: Vec<u64> =
            r.op.replies
                .iter()
                .map(|n| n.load(std::sync::atomic::Ordering::Relaxed))
                .collect();
        assert_eq!(got, [2, 5, 4]);
    }

    #[test]
    fn folding_again_adds_only_what_grew() {
        let p = Pipeline::new(vec![Stage::Parse, Stage::Count]);
        let q: Vec<Arc<QueueCounters>> =
            (0..2).map(|_| Arc::new(QueueCounters::new(2, 0))).collect();
        let mut fold = StageCounterFold::default();
        fold.fold(
            &p,
            &[
                vec![block(10, 0), block(8, 800)],
                vec![block(3, 0), block(3, 90)],
            ],
            &q,
        );
        fold.fold(
            &p,
            &[
                vec![block(25, 0), block(20, 2000)],
                vec![block(3, 0), block(3, 90)],
            ],
            &q,
        );
        // A restarted kernel's counters start again from 0: nothing is taken away.
        fold.fold(
            &p,
            &[
                vec![block(1, 0), block(1, 100)],
                vec![block(4, 0), block(4, 120)],
            ],
            &q,
        );
        assert_eq!(
            (q[0].stage_frames[0].get(), q[0].stage_frames[1].get()),
            (25, 20)
        );
        assert_eq!(q[0].stage_bytes[1].get(), 2000);
        assert_eq!(
            (q[1].stage_frames[1].get(), q[1].stage_bytes[1].get()),
            (4, 120)
        );
    }
}
