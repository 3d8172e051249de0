//! The CPU-vs-GPU comparison engine: what `pktwarp verify` and the differential tests hold equal,
//! frame by frame.
//!
//! One reference: the CPU executor's own pipeline ([`crate::stage::Pipeline::run_frames`]),
//! built as `parse -> [acl] -> count` by [`Reference`]. Its verdicts are put in the GPU's form
//! ([`abi::Verdict`](pktwarp_core::abi::Verdict): action, drop reason, rule, mark) so
//! the two compare field for field, and its metadata is the same 144-byte [`PacketMeta`] the GPU
//! writes back. [`compare_chunk`] checks one chunk of frames (metadata, verdict, the bulk
//! kernel's verdict, a verdict that never came back) and hands every mismatch to the caller,
//! which decides how many to print; [`ExpectedCounters`] holds the queue counters and per-rule
//! hits the GPU's count stage must report for the same frames.
//!
//! `sampler` runs the same comparison inside the daemon, on one burst in N (`verify:`).
//!
//! What drives the GPU (submitting bursts, polling them back, the ACL hot swap) stays with the
//! caller: it depends on the executor, this module only on the ABI types.
//!
//! [`PacketMeta`]: crate::meta::PacketMeta

mod bursts;
mod compare;
mod reference;
pub(crate) mod sampler;

pub use bursts::split_bursts;
pub use compare::{compare_chunk, hex, meta_diff, GpuChunk, Mismatch, Tally};
pub use reference::{to_abi, Expected, ExpectedCounters, Reference};
// The daemon's sampled self-check as its summary reports it.
pub use sampler::VerifySummary;
