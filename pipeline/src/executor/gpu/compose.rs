//! The GPU kernel of a configured pipeline: its stages as the kernel generator sees them
//! (pktwarp-kernels), then the built-in image when the fused template serves the list, else the
//! generated module (compiled with NVRTC at start, cached on disk by source hash).

use super::KernelImage;
use crate::stage::{GpuStageKind, Pipeline};
use pktwarp_kernels::{StageKind, StageSpec};

/// The stage list of `p` for the kernel generator, with each stage's parameter block. A user
/// stage without CUDA source cannot run on the GPU: the error names it.
pub fn stage_specs(p: &Pipeline) -> anyhow::Result<(Vec<StageSpec>, Vec<Vec<u8>>)> {
    if let Some(why) = p.gpu_refusal() {
        anyhow::bail!("{why} (run it with executor kind cpu, or auto)");
    }
    let mut specs = Vec::new();
    let mut params = Vec::new();
    for (i, s) in p.gpu_stage_list().iter().enumerate() {
        let kind = match (s.kind, s.custom) {
            (GpuStageKind::Parse, _) => StageKind::Parse,
            (GpuStageKind::Acl, _) => StageKind::Acl,
            (GpuStageKind::Count, _) => StageKind::Count,
            (GpuStageKind::Custom, Some(g)) => StageKind::Custom {
                function: g.function.clone(),
                source: g.source.clone(),
            },
            (GpuStageKind::Custom, None) | (GpuStageKind::CpuOnly, _) => {
                anyhow::bail!(
                    "pipeline[{i}]: stage `{}` has no CUDA implementation",
                    s.name
                )
            }
        };
        params.push(s.custom.map(|g| g.params.clone()).unwrap_or_default());
        specs.push(StageSpec {
            name: s.name.to_string(),
            kind,
        });
    }
    Ok((specs, params))
}

/// The kernel image that runs `p` on the GPU.
pub fn image_for_pipeline(p: &Pipeline) -> anyhow::Result<KernelImage> {
    let (specs, params) = stage_specs(p)?;
    pktwarp_kernels::image_for(&specs, params).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Whether `p` runs on the composed template (its own generated kernel), whose stages count in
/// their own counter blocks ([`super::CountersSnapshot::stages`]).
pub fn is_composed(p: &Pipeline) -> bool {
    stage_specs(p).is_ok_and(|(specs, _)| {
        pktwarp_kernels::codegen::template_of(&specs) == Ok(pktwarp_kernels::Template::Composed)
    })
}

/// Adds a composed pipeline's GPU stage counters (per queue, from
/// [`super::CountersSnapshot::stages`]) to the CPU executor's counters: frames per stage, the
/// count stage's bytes, and a user stage's named counters (published to its slot).
pub fn fold_stage_counters(
    p: &Pipeline,
    stages: &[Vec<super::abi::StageCounters>],
    counters: &[impl std::ops::Deref<Target = crate::counters::QueueCounters>],
) {
    use crate::stage::Stage;
    let mut custom_sums: Vec<[u64; super::abi::STAGE_COUNTERS]> =
        vec![[0; super::abi::STAGE_COUNTERS]; p.stages.len()];
    for (q, sc) in stages.iter().enumerate() {
        let Some(c) = counters.get(q) else { continue };
        for (k, (stage, block)) in p.stages.iter().zip(sc).enumerate() {
            if let Some(f) = c.stage_frames.get(k) {
                f.add(block.v[0]);
            }
            match stage {
                Stage::Count => {
                    if let Some(b) = c.stage_bytes.get(k) {
                        b.add(block.v[super::abi::COUNT_CTR_BYTES]);
                    }
                }
                Stage::Custom(_) => {
                    for (sum, v) in custom_sums[k].iter_mut().zip(block.v) {
                        *sum += v;
                    }
                }
                _ => {}
            }
        }
    }
    for (stage, sums) in p.stages.iter().zip(&custom_sums) {
        if let Stage::Custom(slot) = stage {
            slot.set_gpu_counters(&sums[1..]);
        }
    }
}
