//! pktwarp's data path: checked packet views (`wire`), the per-packet metadata record that
//! crosses to the GPU (`meta`), bursts and queues, ports, stages, executors and the config.

pub use pktwarp_core::affinity;
pub use pktwarp_core::burst;
pub mod config;
pub mod control;
pub use pktwarp_core::counters;
pub mod daemon;
pub mod executor;
pub use pktwarp_core::meta;
pub mod port;
pub mod prepare;
pub mod rewrite;
pub use pktwarp_core::ring;
pub use pktwarp_core::rss;
pub mod stage;
pub mod steer;
pub mod testdata;
pub use pktwarp_core::threads;
pub use pktwarp_core::verdict;
pub mod verify;
pub use pktwarp_wire as wire;
