//! `count`: frames and bytes that reach it (the queue's `stage_frames` / `stage_bytes` at its
//! position). Its work is done by the executors' counting; this is its description.

/// The `count` stage, described (the stage descriptor, `stage::descriptor`).
pub const DESCRIPTOR: crate::stage::descriptor::StageDescriptor =
    crate::stage::descriptor::StageDescriptor {
        name: "count",
        usage: "`count`",
        summary: "frames and bytes reaching it",
        needs: crate::stage::descriptor::StageNeeds::NONE,
        drop_reasons: &[],
        counters: &[],
        gpu: crate::stage::descriptor::GpuImpl::Fused,
        reloads: false,
    };
