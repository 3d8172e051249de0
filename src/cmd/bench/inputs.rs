//! What the bench runs on: ClassBench rule sets and the frames of their traces, and the small
//! statistics it prints.

use pipeline::burst::Burst;
use pipeline::internal::executor::gpu::abi::Desc;
use pipeline::internal::executor::gpu::{
    AclTablesRef, GpuExecutor, GpuOptions, Mode, PipelineDesc,
};
use pipeline::verdict::Action;
use std::path::{Path, PathBuf};

use super::super::verify::{kernel_image, load_acl, Acl};
use super::Args;

/// A set's rule file and trace in `dir` (`.gz` accepted).
pub fn set_paths(dir: &Path, set: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    let pick = |base: String| -> anyhow::Result<PathBuf> {
        for c in [base.clone(), format!("{base}.gz")] {
            let p = dir.join(&c);
            if p.exists() {
                return Ok(p);
            }
        }
        anyhow::bail!("{}: no {base} or {base}.gz", dir.display())
    };
    Ok((pick(set.to_string())?, pick(format!("{set}_trace"))?))
}

/// Frames generated from every line of a trace (once), `size` bytes on the wire.
pub fn trace_frames(trace: &Path, size: u16) -> anyhow::Result<Burst> {
    let g = pipeline::internal::port::gen::GenOptions {
        trace: Some(trace.to_path_buf()),
        size: pipeline::internal::port::gen::FrameSize::Fixed(size),
        ..Default::default()
    };
    let mut rx = pipeline::internal::port::gen::GenRx::new(&g, 0)?;
    let mut b = Burst::default();
    use pipeline::port::{RxPort, RxStatus};
    loop {
        match rx.rx_burst(&mut b, 4096)? {
            RxStatus::End => break,
            _ => continue,
        }
    }
    Ok(b)
}

/// `b`'s frames repeated (in order) until there are `n`.
fn repeat_to(b: &Burst, n: usize) -> Burst {
    let mut out = Burst::with_capacity(n, b.data.len() * n.div_ceil(b.len().max(1)));
    'outer: loop {
        for (d, f) in b.frames() {
            if out.len() >= n {
                break 'outer;
            }
            out.push(f, *d);
        }
    }
    out
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Percentile `p` (0..=1) of sorted samples.
pub fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// A rule set with the default action `pass`: the reference pipeline on it and its image.
pub fn load_rules(rules: &Path) -> anyhow::Result<Acl> {
    load_acl(rules, Action::Pass)
}

/// A rule set and its trace as the bulk kernel takes them: the rules (reference pipeline and
/// flat image), the trace's 64 B frames repeated to `--frames`, and their GPU descriptors.
pub struct BulkSet {
    pub acl: Acl,
    pub frames: Burst,
    pub descs: Vec<Desc>,
}

impl BulkSet {
    pub fn load(a: &Args, set: &str) -> anyhow::Result<BulkSet> {
        let (rules, trace) = set_paths(&a.classbench, set)?;
        let acl = load_rules(&rules)?;
        let frames = repeat_to(&trace_frames(&trace, 64)?, a.frames);
        let descs = frames.descs.iter().map(Desc::from).collect();
        Ok(BulkSet { acl, frames, descs })
    }

    /// parse + acl (this set) + count.
    pub fn pipeline(&self) -> PipelineDesc<'_> {
        PipelineDesc {
            parse: true,
            acl: Some(AclTablesRef {
                bytes: &self.acl.bytes,
                n_rules: self.acl.n_rules,
            }),
            count: true,
            default_action: self.acl.default_action(),
        }
    }
}

/// A GPU executor for the bulk kernel only (launch mode: no persistent kernel, tiny rings).
pub fn bulk_executor(device: u32, pd: PipelineDesc<'_>) -> anyhow::Result<GpuExecutor> {
    let opts = GpuOptions {
        mode: Mode::Launch,
        burst_size: 32,
        ring_slots: 4,
        device,
        ..Default::default()
    };
    GpuExecutor::new(opts, pd, 1, &kernel_image())
}
