//! pktwarp's data path: checked packet views (`wire`), the per-packet metadata record that
//! crosses to the GPU (`meta`), bursts and queues, ports, stages, executors and the config.

pub mod affinity;
pub mod burst;
pub mod config;
pub mod control;
pub mod counters;
pub mod daemon;
pub mod executor;
pub mod fronthaul;
pub mod meta;
pub mod port;
pub mod rewrite;
pub mod ring;
pub mod rss;
pub mod stage;
pub mod steer;
pub mod testdata;
mod threads;
pub mod verdict;
pub mod verify;
pub mod wire;
