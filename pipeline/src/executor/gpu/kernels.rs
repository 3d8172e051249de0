//! The kernel module: a prebuilt image (fatbin/CUBIN/PTX that build.rs made with the pinned
//! nvcc) and the CUDA source with its headers already inlined, compiled at start by the
//! machine's NVRTC when there is no prebuilt image or the driver refuses it.

use super::driver::{Context, Module};

/// What the binary carries (made by the root build.rs; see `pktwarp::cmd::verify::kernel_image`).
#[derive(Clone, Copy, Debug)]
pub struct KernelImage {
    /// Prebuilt fatbin / CUBIN / PTX for the target, or `None` when no compiler was found.
    pub binary: Option<&'static [u8]>,
    /// `kernels.cu` with every `#include "..."` of gpu-kernels/ inlined (for NVRTC).
    pub source: &'static str,
    /// How `binary` was made (compiler and version), for logs.
    pub origin: &'static str,
}

/// Which way the module was obtained.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoadedFrom {
    pub how: String,
    pub seconds: f64,
}

/// Stage capabilities the module was built with (`pw_caps`).
pub const CAP_PARSE: u32 = 1;
pub const CAP_ACL: u32 = 2;

pub(crate) fn load(ctx: &Context, image: &KernelImage) -> anyhow::Result<(Module, LoadedFrom)> {
    let t = std::time::Instant::now();
    let mut prebuilt_err = None;
    if let Some(bin) = image.binary {
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
    // SAFETY: only tries to dlopen libnvrtc; no NVRTC call is made when it is absent.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        anyhow::bail!(
            "no usable kernel image: {} and libnvrtc (CUDA 13.0) could not be loaded to compile \
             the embedded source",
            match &prebuilt_err {
                Some(e) => format!("the prebuilt image was refused ({e})"),
                None => "this binary was built without a CUDA compiler".to_string(),
            }
        );
    }
    let (maj, min) = ctx.info.compute_capability;
    let opts = cudarc::nvrtc::CompileOptions {
        options: vec![
            format!("--gpu-architecture=compute_{maj}{min}"),
            "--std=c++17".to_string(),
        ],
        name: Some("kernels.cu".to_string()),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(image.source, opts).map_err(|e| match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => anyhow::anyhow!(
            "NVRTC could not compile the embedded kernels:\n{}",
            log.to_string_lossy()
        ),
        other => anyhow::anyhow!("NVRTC could not compile the embedded kernels: {other}"),
    })?;
    let bytes = ptx
        .as_bytes()
        .ok_or_else(|| anyhow::anyhow!("NVRTC returned no PTX"))?;
    let module = Module::load(ctx, bytes)?;
    Ok((
        module,
        LoadedFrom {
            how: format!(
                "NVRTC at start for compute_{maj}{min}{}",
                match prebuilt_err {
                    Some(e) => format!(" (prebuilt image refused: {e})"),
                    None => String::new(),
                }
            ),
            seconds: t.elapsed().as_secs_f64(),
        },
    ))
}

pub(crate) fn caps(module: &Module) -> anyhow::Result<u32> {
    Ok(module.global_u32(c"pw_caps")?)
}
