//! pktwarp's GPU kernels: the CUDA sources (`cuda/`: the ABI header, one header per stage, the
//! transport), the pipeline-kernel generator, the build-time compile of the built-in pipeline
//! (pinned nvcc when present), run-time compiles with NVRTC and their on-disk cache, and (feature
//! `host`) the stage code compiled for the host for differential tests.
//!
//! A binary that embeds pktwarp gets the kernels through this crate: no build script of its own.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

pub mod codegen;
#[cfg(feature = "host")]
pub mod host;

pub use codegen::{CodegenError, StageKind, StageSpec, Target, Template, MAX_STAGES};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
}

/// A kernel module to load: a prebuilt image and / or the source to compile with NVRTC.
#[derive(Clone, Debug)]
pub struct KernelImage {
    /// Prebuilt fatbin / CUBIN / PTX for the target, or `None`.
    pub binary: Option<Cow<'static, [u8]>>,
    /// The module's source with every include inlined (for NVRTC).
    pub source: Cow<'static, str>,
    /// How `binary` was made, or where it came from (logs).
    pub origin: Cow<'static, str>,
    /// The stage list the module runs (logs), e.g. `parse -> acl -> count`.
    pub pipeline: String,
    /// The template the module was generated from.
    pub template: Template,
    /// The stages, in order (composed template: what `pw_pipeline_frame` calls).
    pub stages: Vec<StageSpec>,
    /// Each stage's parameter block as its CUDA code reads it (empty: none), uploaded to device
    /// memory by the executor (composed template).
    pub params: Vec<Vec<u8>>,
    /// Each stage's device buffers (`buffers[k]`, empty or absent: none): allocated zeroed by
    /// the executor, their addresses written into the stage's parameter block.
    pub buffers: Vec<Vec<StageBuffer>>,
    /// Each stage's per-queue state (`queue_state[k]`, empty or absent: none): for every buffer
    /// the executor allocates `bytes` per queue of its own, contiguous (queue q's at the base
    /// address + q * `bytes`, q being `pw_frame.queue`), zeroed at start and freed at the end,
    /// and writes the base address into the stage's parameter block at `addr_at`. The stage's
    /// code finds its queue's part from `pw_frame.queue` and the size it put in its block. A
    /// stage that changes it in frame order is one of `codegen::ORDERED` (conntrack's flow
    /// table; docs/stages.md, "Per-queue stage state").
    pub queue_state: Vec<Vec<StageBuffer>>,
    /// Bytes a rewriting stage may grow a frame by (`vlan` pushes): the host leaves that much
    /// room after every frame of a slot (`pw_queue_desc.frame_room`).
    pub frame_room: u32,
}

/// A device buffer a stage owns (a slot grid, a state table): allocated zeroed by the executor
/// for the pipeline (shared by every queue, so stages update it with atomics), kept across
/// parameter reloads, and readable by the host. Its device address is written, as a
/// little-endian u64, into the stage's parameter block at `addr_at`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageBuffer {
    /// Name, for logs and errors.
    pub name: String,
    /// Size in bytes.
    pub bytes: usize,
    /// Offset in the stage's parameter block of the u64 that receives the buffer's address.
    pub addr_at: usize,
}

/// The built-in (fused) pipeline's module: every in-order subset of parse, acl, count. Prebuilt
/// when this crate was built with the pinned nvcc.
pub fn builtin_image() -> KernelImage {
    KernelImage {
        binary: embedded::BUILTIN_BINARY.map(Cow::Borrowed),
        source: Cow::Borrowed(embedded::BUILTIN_SOURCE),
        origin: Cow::Borrowed(embedded::BUILTIN_ORIGIN),
        pipeline: "parse -> acl -> count (built-in)".into(),
        template: Template::Fused,
        stages: ["parse", "acl", "count"]
            .iter()
            .filter_map(|n| StageSpec::builtin(n))
            .collect(),
        params: Vec::new(),
        buffers: Vec::new(),
        queue_state: Vec::new(),
        frame_room: 0,
    }
}

/// A file of `gpu-kernels/cuda/` as embedded in this crate.
pub fn library_file(name: &str) -> Option<&'static str> {
    embedded::CUDA_LIBRARY
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
}

/// Names of the embedded `cuda/` files.
pub fn library_files() -> impl Iterator<Item = &'static str> {
    embedded::CUDA_LIBRARY.iter().map(|(n, _)| *n)
}

/// The self-contained source (includes inlined) of a stage list's kernel module or host build.
pub fn pipeline_source(stages: &[StageSpec], target: Target) -> Result<String, CodegenError> {
    let text = codegen::generate(stages, target)?;
    codegen::inline_includes(&text, &|n| library_file(n).map(str::to_string)).map_err(|m| {
        CodegenError {
            stage: 0,
            message: m,
        }
    })
}

/// The kernel module for a stage list with each stage's parameter block (`params[k]`, empty for
/// none): the built-in image when the fused template serves it, else its generated source
/// (compiled at start with [`load_or_compile`]).
pub fn image_for(stages: &[StageSpec], params: Vec<Vec<u8>>) -> Result<KernelImage, CodegenError> {
    let names: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
    if params.len() > stages.len() {
        return Err(CodegenError {
            stage: stages.len(),
            message: format!(
                "{} parameter blocks for {} stages",
                params.len(),
                stages.len()
            ),
        });
    }
    match codegen::template_of(stages)? {
        Template::Fused => {
            let mut img = builtin_image();
            img.pipeline = names.join(" -> ");
            img.stages = stages.to_vec();
            Ok(img)
        }
        Template::Composed => Ok(KernelImage {
            binary: None,
            source: Cow::Owned(pipeline_source(stages, Target::Gpu)?),
            origin: Cow::Borrowed("generated"),
            pipeline: names.join(" -> "),
            template: Template::Composed,
            stages: stages.to_vec(),
            params,
            buffers: Vec::new(),
            queue_state: Vec::new(),
            frame_room: 0,
        }),
    }
}

/// The cache key of a source compiled for `arch` (hex SHA-256 of both).
pub fn source_key(source: &str, arch: (u32, u32)) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(format!(
        "pktwarp-kernels {} sm_{}{}\n",
        env!("CARGO_PKG_VERSION"),
        arch.0,
        arch.1
    ));
    h.update(source.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Where compiled modules are cached: `$PKTWARP_KERNEL_CACHE`, else
/// `$XDG_CACHE_HOME/pktwarp/kernels`, else `$HOME/.cache/pktwarp/kernels`, else none.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("PKTWARP_KERNEL_CACHE") {
        return (!d.is_empty()).then(|| PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("pktwarp/kernels"));
    }
    std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(|h| PathBuf::from(h).join(".cache/pktwarp/kernels"))
}

/// Compiles `source` to PTX for `arch` with the machine's NVRTC (CUDA 13.0, loaded at run time).
pub fn compile_ptx(source: &str, arch: (u32, u32), name: &str) -> Result<Vec<u8>, String> {
    if source.contains('\0') {
        return Err(format!("{name}: the CUDA source contains a NUL byte"));
    }
    // SAFETY: only tries to dlopen libnvrtc; no NVRTC call is made when it is absent.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err("libnvrtc (CUDA 13.0) could not be loaded".into());
    }
    let opts = cudarc::nvrtc::CompileOptions {
        options: vec![
            format!("--gpu-architecture=compute_{}{}", arch.0, arch.1),
            "--std=c++17".to_string(),
        ],
        name: Some(name.to_string()),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(source, opts).map_err(|e| match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => {
            format!("NVRTC could not compile {name}:\n{}", log.to_string_lossy())
        }
        other => format!("NVRTC could not compile {name}: {other}"),
    })?;
    ptx.as_bytes()
        .map(<[u8]>::to_vec)
        .ok_or_else(|| "NVRTC returned no PTX".to_string())
}

/// A compiled module and how it was obtained.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub ptx: Vec<u8>,
    /// `cache hit <path>` or `NVRTC ... (cached to <path>)`.
    pub how: String,
}

/// The PTX of `source` for `arch`: from `cache` when a previous run compiled the same source
/// (by [`source_key`]), else compiled with NVRTC and stored there (a cache that cannot be written
/// is logged, not an error).
pub fn load_or_compile(
    source: &str,
    arch: (u32, u32),
    cache: Option<&Path>,
) -> Result<Compiled, String> {
    let key = source_key(source, arch);
    let path = cache.map(|d| d.join(format!("{key}.ptx")));
    if let Some(p) = &path {
        if let Ok(ptx) = std::fs::read(p) {
            if ptx.starts_with(b"//") || ptx.contains(&b'.') {
                return Ok(Compiled {
                    ptx,
                    how: format!("cache hit {}", p.display()),
                });
            }
        }
    }
    let t = std::time::Instant::now();
    let ptx = compile_ptx(source, arch, "pipeline.cu")?;
    let secs = t.elapsed().as_secs_f64();
    let how = match (&path, cache) {
        (Some(p), Some(dir)) => match store(dir, p, &ptx) {
            Ok(()) => format!("NVRTC in {secs:.2} s (cached to {})", p.display()),
            Err(e) => format!("NVRTC in {secs:.2} s (not cached: {e})"),
        },
        _ => format!("NVRTC in {secs:.2} s (no cache folder)"),
    };
    Ok(Compiled { ptx, how })
}

/// Writes `bytes` to `path` atomically (a temporary file renamed), so a reader never sees half.
fn store(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".tmp-{}-{}", std::process::id(), rand_suffix()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn rand_suffix() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Removes a cache entry the driver refused (then [`load_or_compile`] compiles it again).
pub fn evict(source: &str, arch: (u32, u32), cache: &Path) {
    let _ = std::fs::remove_file(cache.join(format!("{}.ptx", source_key(source, arch))));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_holds_every_header_and_the_builtin_source_is_self_contained() {
        for f in [
            "pktwarp_abi.h",
            "parse.cuh",
            "acl.cuh",
            "count.cuh",
            "stages.cuh",
            "flow.cuh",
            "kernels.cu",
        ] {
            assert!(library_file(f).is_some(), "{f}");
        }
        let img = builtin_image();
        assert!(
            !img.source.contains("#include \""),
            "includes left in the built-in source"
        );
        assert!(img.source.contains("pw_persistent_small"));
    }

    #[test]
    fn a_composed_source_is_self_contained_and_keyed_by_content() {
        let stages: Vec<StageSpec> = ["count", "parse", "acl"]
            .iter()
            .filter_map(|n| StageSpec::builtin(n))
            .collect();
        let img = image_for(&stages, Vec::new()).unwrap();
        assert_eq!(img.template, Template::Composed);
        assert!(!img.source.contains("#include \""));
        assert!(img.source.contains("PW_PIPELINE_COMPOSED 1"));
        let k1 = source_key(&img.source, (9, 0));
        assert_eq!(k1, source_key(&img.source, (9, 0)));
        assert_ne!(k1, source_key(&img.source, (8, 0)));
        assert_ne!(k1, source_key(&format!("{} ", img.source), (9, 0)));
        let fused = image_for(&stages[1..], Vec::new()).unwrap();
        assert_eq!(fused.template, Template::Fused);
    }

    #[test]
    fn the_cache_is_read_back_without_compiling() {
        let dir = std::env::temp_dir().join(format!("pw-kcache-{}", std::process::id()));
        let src = "extern \"C\" __global__ void k() {}";
        let key = source_key(src, (9, 0));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(format!("{key}.ptx")),
            b"// cached ptx\n.version 9.0\n",
        )
        .unwrap();
        let c = load_or_compile(src, (9, 0), Some(&dir)).unwrap();
        assert!(c.how.starts_with("cache hit"), "{}", c.how);
        assert_eq!(c.ptx, b"// cached ptx\n.version 9.0\n");
        evict(src, (9, 0), &dir);
        assert!(!dir.join(format!("{key}.ptx")).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_nul_in_the_source_is_an_error_not_a_panic() {
        assert!(compile_ptx("a\0b", (9, 0), "x.cu")
            .unwrap_err()
            .contains("NUL"));
    }
}
