//! Loading the kernel module: a prebuilt image (the built-in pipeline's fatbin that
//! pktwarp-kernels' build.rs made with the pinned nvcc), a generated pipeline's PTX from the
//! on-disk cache, or its source compiled at start by the machine's NVRTC.

use super::driver::{Context, Module};

pub use pktwarp_kernels::KernelImage;

/// Which way the module was obtained.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoadedFrom {
    pub how: String,
    pub seconds: f64,
}

pub(crate) fn load(ctx: &Context, image: &KernelImage) -> anyhow::Result<(Module, LoadedFrom)> {
    let t = std::time::Instant::now();
    let mut prebuilt_err = None;
    if let Some(bin) = &image.binary {
        match Module::load(ctx, bin) {
            Ok(m) => {
                return Ok((
                    m,
                    LoadedFrom {
                        how: format!("prebuilt image ({})", image.origin),
                        seconds: t.elapsed().as_secs_f64(),
                    },
                ))
            }
            Err(e) => prebuilt_err = Some(e),
        }
    }
    let (maj, min) = ctx.info.compute_capability;
    let arch = (maj, min);
    // Generated pipelines are cached on disk by source hash (a restart does not recompile);
    // the built-in source is compiled afresh only when the prebuilt image is missing or refused.
    let cache = match image.template {
        pktwarp_kernels::Template::Composed => pktwarp_kernels::default_cache_dir(),
        pktwarp_kernels::Template::Fused => None,
    };
    let compiled = pktwarp_kernels::load_or_compile(&image.source, arch, cache.as_deref())
        .map_err(|e| {
            anyhow::anyhow!(
                "no usable kernel image for the pipeline {}: {}{e}",
                image.pipeline,
                match &prebuilt_err {
                    Some(p) => format!("the prebuilt image was refused ({p}); "),
                    None => String::new(),
                }
            )
        })?;
    let module = match Module::load(ctx, &compiled.ptx) {
        Ok(m) => m,
        Err(e) if compiled.how.starts_with("cache hit") => {
            // A stale or damaged cache entry: compile again.
            tracing::warn!("kernel cache entry refused by the driver ({e}); compiling again");
            if let Some(dir) = &cache {
                pktwarp_kernels::evict(&image.source, arch, dir);
            }
            let again = pktwarp_kernels::load_or_compile(&image.source, arch, cache.as_deref())
                .map_err(anyhow::Error::msg)?;
            Module::load(ctx, &again.ptx)?
        }
        Err(e) => return Err(e.into()),
    };
    Ok((
        module,
        LoadedFrom {
            how: format!(
                "{} for compute_{maj}{min}, pipeline {}{}",
                compiled.how,
                image.pipeline,
                match prebuilt_err {
                    Some(e) => format!(" (prebuilt image refused: {e})"),
                    None => String::new(),
                }
            ),
            seconds: t.elapsed().as_secs_f64(),
        },
    ))
}
