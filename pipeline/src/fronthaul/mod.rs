//! O-RAN 7.2x fronthaul receive (eCPRI over Ethernet): U-plane decoding with BFP / no
//! compression, static or dynamic udCompHdr, into a slot grid; sequence and Ta4 tracking per
//! eAxC; slot completion; sinks. The Rust side is the reference; `gpu-kernels/cuda/fronthaul.cuh`
//! implements the same decode semantics for the GPU.

pub mod bfp;
#[cfg(target_arch = "x86_64")]
mod bfp_avx2;
pub mod config;
pub mod decode;
pub mod gen_mode;
pub mod gpu;
pub mod grid;
pub mod live;
pub mod raw;
pub mod register;
pub mod report;
pub mod seqlog;
pub mod sink;
mod sink_writer;
pub mod stage;
pub mod track;

pub use config::FronthaulConfig;
pub use register::register;
pub use decode::{check, decode_frame, DecodeParams, Message, Reject};
pub use grid::{SlotGrid, SlotKey};
pub use sink::{BackgroundSink, FnSink, NpySink, SlotSink};
pub use stage::{EaxcCounters, FronthaulCounters, FronthaulStage};
