//! O-RAN 7.2x fronthaul receive (eCPRI over Ethernet): U-plane decoding with BFP / no
//! compression, static or dynamic udCompHdr, into a slot grid; sequence and Ta4 tracking per
//! eAxC; slot completion; sinks. The Rust side is the reference; `gpu-kernels/cuda/fronthaul.cuh`
//! implements the same decode semantics for the GPU.
//!
//! A stage on the library's stage API (crate `pipeline`), which knows nothing of it: the binary
//! that runs it calls [`register()`] before it reads a config, which adds the `fronthaul:` key of
//! the stage list ([`register::Key`], a keyed stage) and the `gen` port's `oran:` mode
//! ([`gen_mode`]). The executors reach the stage as any registered one: its receive time through
//! `CustomStage::process_rx`, its GPU side as a kernel-library stage
//! (`CustomStage::library_gpu_params`, `pw_stage_fronthaul` of the kernel crate), its slot
//! completion as a `GpuHostSide`, its summary as a `StageReport`, its metrics as
//! `ExportedFamily`s.

pub mod bfp;
#[cfg(target_arch = "x86_64")]
mod bfp_avx2;
pub mod config;
pub mod decode;
pub mod gen_mode;
pub mod gpu;
pub mod grid;
pub mod live;
pub mod oran_gen;
pub mod raw;
pub mod register;
pub mod report;
pub mod seqlog;
pub mod sink;
mod sink_writer;
pub mod stage;
pub mod testdata;
pub mod track;

#[cfg(test)]
mod pipeline_tests;

pub use config::FronthaulConfig;
pub use decode::{check, decode_frame, DecodeParams, Message, Reject};
pub use grid::{SlotGrid, SlotKey};
pub use register::register;
pub use sink::{BackgroundSink, FnSink, NpySink, SlotSink};
pub use stage::{EaxcCounters, FronthaulCounters, FronthaulStage};
