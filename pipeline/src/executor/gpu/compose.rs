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
            (GpuStageKind::Custom, None) => {
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
