//! The `flow_stats` library stage's entry of `codegen::LIBRARY_STAGES`
//! (cuda/flow_stats_stage.cuh). A child module of codegen.rs named by path, as build.rs
//! includes codegen.rs by path.

use super::LibraryStage;

/// Flow export over conntrack's tables: nothing per frame on the device (the ended-flow rings
/// are conntrack's); the host side drains, sweeps and exports (docs/flow-export-gpu.md). Its
/// needs are the CPU stage's (it reads the metadata and the receive time there).
pub(super) const FLOW_STATS: LibraryStage = LibraryStage {
    name: "flow_stats",
    function: "pw_stage_flow_stats",
    header: "flow_stats_stage.cuh",
    reads_meta: true,
    writes_frame: false,
    reads_time: true,
    sets_send_time: false,
};

/// Flow export with a flow table of its own (no `conntrack`): conntrack's device apply without
/// the metadata store, on per-queue state of its own, frames of one flow in arrival order (an
/// `ORDERED` stage). The executor picks it by the pipeline, under the name `flow_stats`.
pub(super) const FLOW_STATS_OWN: LibraryStage = LibraryStage {
    name: "flow_stats",
    function: "pw_stage_flow_stats_own",
    header: "flow_stats_stage.cuh",
    reads_meta: true,
    writes_frame: false,
    reads_time: true,
    sets_send_time: false,
};
