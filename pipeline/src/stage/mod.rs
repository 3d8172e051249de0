//! Stages: one step of per-packet work, each with a Rust (reference, CPU) and a CUDA implementation.
pub mod parse;
