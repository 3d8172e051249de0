//! Runs a config end to end: opens the ports, builds the pipeline and steering, picks the
//! executor, runs it, and returns a summary. `pktwarp run` is a thin shell around this, and so is
//! any app built on the library.
//!
//! - `ports`: opens the config's ports;
//! - `prepare`: builds the pipeline and steering and picks the executor;
//! - [`preflight`]: the start-up checks `pktwarp validate` runs (inputs opened, sockets bound);
//! - [`run_cpu`] / [`run_gpu`]: run a prepared config on one executor;
//! - `summary`: the totals a run reports.

mod ports;
mod preflight;
mod run_cpu;
mod run_gpu;
mod summary;

pub use crate::prepare::{
    build_pipeline, build_pipeline_with, choose_executor, prepare, prepare_with, ExecutorChoice,
    Prepared,
};
pub use ports::{open_ports, OpenPorts, PortSteering};
pub use preflight::preflight;
pub use run_cpu::run_cpu;
pub use run_gpu::run_gpu;
pub use summary::{summarize, CustomStageSummary, GpuIngest, GpuTx, QueueSummary, Summary};
// What a run needs from the layers below, so that running a config takes this module only.
pub use crate::control::{Control, ControlSetup, EXIT_DRAIN_TIMEOUT};
pub use crate::executor::cpu::CpuShared;
pub use crate::executor::gpu::{
    abandoned_executors, image_for_pipeline, KernelImage, KernelStillRunning,
};
