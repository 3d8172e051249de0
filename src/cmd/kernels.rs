//! `pktwarp kernels CONFIG`: the GPU kernel a config's pipeline runs: its template (the
//! built-in fused kernel, or a generated composed one), its stages and, with `--emit FILE`, the
//! self-contained CUDA source (what NVRTC compiles at start; scripts/check-kernels.sh compiles
//! it with the pinned nvcc to report registers and spills). Needs no GPU. Exit 3: the pipeline
//! has a stage without a CUDA implementation (CPU executor only).

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// YAML config whose pipeline to generate.
    pub config: PathBuf,
    #[command(flatten)]
    pub set: super::ConfigSet,
    /// Write the kernel module's CUDA source (includes inlined) to this file.
    #[arg(long)]
    pub emit: Option<PathBuf>,
}

pub fn run_with(args: Args, registry: &pipeline::stage::StageRegistry) -> anyhow::Result<i32> {
    let cfg = args.set.load(&args.config)?;
    let p = pipeline::daemon::build_pipeline_with(&cfg, registry)?;
    if let Some(why) = p.gpu_refusal() {
        super::to_stdout("the result", |w| {
            writeln!(
                w,
                "{}: runs on the CPU executor only: {why}",
                args.config.display()
            )
        })?;
        return Ok(3);
    }
    let image = pipeline::daemon::image_for_pipeline(&p)
        .map_err(|e| anyhow::anyhow!("{}: {e:#}", args.config.display()))?;
    let key = pktwarp_kernels::source_key(&image.source, (9, 0));
    super::to_stdout("the result", |w| {
        writeln!(
            w,
            "{}: pipeline {}, {:?} template, prebuilt image: {}, source {} bytes, sm_90 cache key {}",
        args.config.display(),
        image.pipeline,
        image.template,
        if image.binary.is_some() {
            "yes"
        } else {
            "no (NVRTC at start)"
        },
        image.source.len(),
        &key[..16]
        )
    })?;
    if let Some(out) = &args.emit {
        std::fs::write(out, image.source.as_bytes())
            .map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
    }
    Ok(0)
}
