//! Stages: one step of per-packet work, each with a Rust (reference, CPU) and a CUDA implementation.
pub mod acl;
pub mod parse;
pub mod run;

pub use run::{build, AclSlot, CustomStage, Pipeline, Stage};
