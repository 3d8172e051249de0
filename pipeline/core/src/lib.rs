//! The data path's core types, below every stage, port and executor: the per-packet metadata
//! record (`meta`), frame descriptors and bursts (`burst`), the burst ring (`ring`), verdicts and
//! drop reasons (`verdict`), per-queue counters (`counters`), software RSS (`rss`), the
//! `#[repr(C)]` mirrors of the host <-> GPU ABI header (`abi`), and data-path thread helpers.
//! It imports nothing of the layers above it.

pub mod abi;
pub mod affinity;
pub mod burst;
pub mod config_error;
pub mod counters;
pub mod meta;
pub mod ring;
pub mod rss;
pub mod threads;
pub mod verdict;
