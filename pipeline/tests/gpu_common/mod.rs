//! What the GPU executor's test binaries share: the CPU executor's reference answer, burst by
//! burst, and the descriptor and options most of them run the GPU with.

#![allow(dead_code)]

use pipeline::burst::FrameDesc;
use pipeline::counters::QueueCounters;
use pipeline::internal::executor::gpu::{GpuOptions, Mode, PipelineDesc, Placement};
use pipeline::meta::PacketMeta;
use pipeline::stage::Pipeline;
use pipeline::verdict::{Action, Verdict};

/// The CPU executor's answer over `frames` in bursts of `burst` (its counters into `c`):
/// `answer(meta, verdict)` of each frame, in arrival order.
pub fn cpu_answers<T>(
    p: &Pipeline,
    c: &QueueCounters,
    frames: &[(FrameDesc, Vec<u8>)],
    burst: usize,
    mut answer: impl FnMut(&PacketMeta, &Verdict) -> T,
) -> Vec<T> {
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    let mut out = Vec::with_capacity(frames.len());
    for chunk in frames.chunks(burst) {
        p.run_frames(
            chunk.iter().map(|(d, f)| (*d, f.as_slice())),
            &mut metas,
            &mut verdicts,
            c,
        );
        out.extend(metas.iter().zip(&verdicts).map(|(m, v)| answer(m, v)));
    }
    out
}

/// A composed pipeline's descriptor with no ACL: counts, passes by default, parses if `parse`.
pub fn counting(parse: bool) -> PipelineDesc<'static> {
    PipelineDesc {
        parse,
        acl: None,
        count: true,
        default_action: Action::Pass as u8,
    }
}

/// A comparison run's options: bursts of `burst` frames, 8 ring slots, untagged frames.
pub fn burst_opts(mode: Mode, placement: Placement, burst: usize) -> GpuOptions {
    GpuOptions {
        mode,
        placement,
        burst_size: burst as u32,
        ring_slots: 8,
        tagged: Some(false),
        ..GpuOptions::default()
    }
}
