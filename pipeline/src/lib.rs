//! pktwarp's data path as a library: a YAML config, the stages it names (built-in and your own),
//! the ports and executors that run them, and the control thread beside them.
//!
//! # The public API
//!
//! What an embedding user needs, and nothing else (docs/public-api.txt lists every path;
//! `scripts/check-api.py` fails CI when it grows without the list):
//!
//! - **A stage of your own**, [`stage`]: implement [`stage::CustomStage`] (per frame: read the
//!   [`meta::PacketMeta`] that `parse` filled in, set the [`verdict::Verdict`]; optional counters,
//!   metric families, hooks, a CUDA part as [`stage::GpuStage`]), build it from its config
//!   options in a [`stage::StageFactory`], and register the factory under a name in a
//!   [`stage::StageRegistry`]; a config then uses it as `- custom: { name: ... }`. A
//!   [`stage::Pipeline`] is the built stage list of a queue (`run_frames` runs it on the CPU).
//! - **A config**, [`config`]: [`config::load`] / [`config::parse_str`] parse and check a YAML
//!   document into a [`config::Config`] (errors name the file, line and key); nothing is opened.
//! - **A run**, [`daemon`]: [`daemon::prepare_with`] turns a config and a registry into a
//!   [`daemon::Prepared`] (the pipeline, the steering and the executor choice:
//!   [`daemon::ExecutorChoice`], from `executor: auto | cpu | gpu`); [`daemon::open_ports`] opens
//!   its ports; [`daemon::run_cpu`] / [`daemon::run_gpu`] run it to the end of its input and
//!   return a [`daemon::Summary`] (frames, rates, drops by reason, rule hits, per-stage reports,
//!   the sampled self-check). [`daemon::Control`] is the control thread (`/metrics`, SIGHUP
//!   reload, bounded drain on SIGTERM); [`control`] has its exit statuses and signal set-up.
//! - **Ports**, [`port`]: the [`port::RxPort`] / [`port::TxPort`] traits a port backend
//!   implements; the backends themselves (`pcap`, `gen`, `dpdk`, `tap`) are built from the config.
//! - **Verification**, [`verify`]: the CPU reference and the frame-by-frame comparison that hold
//!   the GPU executor equal to the CPU one (`pktwarp verify`).
//! - **The data a stage sees**: [`burst`] (frames and their descriptors), [`meta`] (the
//!   per-packet metadata record), [`verdict`], [`counters`] (per-queue counters) and [`wire`]
//!   (checked packet views).
//!
//! The `pktwarp` crate's `cli::main_with(registry)` wraps all of this in the `pktwarp` command
//! line; `apps/examples/embed.rs` is a complete binary with one stage of its own.
//!
//! ```
//! use pipeline::meta::PacketMeta;
//! use pipeline::stage::{BuiltStage, CustomStage, StageFactory, StageRegistry};
//! use pipeline::verdict::{Action, Verdict};
//! use std::sync::Arc;
//!
//! struct DropIpv6;
//! impl CustomStage for DropIpv6 {
//!     fn process(&self, _frame: &[u8], m: &PacketMeta, v: &mut Verdict) {
//!         if m.ip_version == 6 {
//!             v.action = Action::Drop;
//!         }
//!     }
//! }
//! struct Factory;
//! impl StageFactory for Factory {
//!     fn build(&self, _options: &serde_json::Value) -> anyhow::Result<BuiltStage> {
//!         Ok(BuiltStage { cpu: Arc::new(DropIpv6), gpu: None })
//!     }
//! }
//! let mut stages = StageRegistry::default();
//! stages.register("drop_ipv6", Arc::new(Factory)).unwrap();
//! assert!(stages.register("drop_ipv6", Arc::new(Factory)).is_err(), "one name, one stage");
//! ```
//!
//! # Not the public API
//!
//! Everything else (the executors, the port backends, the built-in stages' implementations,
//! steering, test fixtures) is crate-private, reachable from outside only through
//! [`internal`]: for this workspace's own crates and tests, with no stability promise.

pub use pktwarp_core::burst;
pub mod config;
pub mod control;
pub use pktwarp_core::counters;
pub mod daemon;
pub(crate) mod executor;
pub use pktwarp_core::meta;
pub mod port;
pub(crate) mod prepare;
pub(crate) mod rewrite;
pub(crate) use pktwarp_core::{affinity, ring, rss, threads};
pub mod stage;
pub(crate) mod steer;
pub(crate) mod testdata;
pub use pktwarp_core::verdict;
pub mod verify;
pub use pktwarp_wire as wire;

/// **Not a stable API.** The crate's internals, for the crates of this workspace (the `pktwarp`
/// binary, `pktwarp-fronthaul`, `pktwarp-apps`), the integration tests, benches and fuzz
/// targets: executors, port backends, built-in stages, steering, test fixtures. Paths and items
/// here change without notice; an embedding user takes the crate root's modules instead.
///
/// Each module mirrors the crate module of the same name (`internal::port::gen` is
/// `crate::port::gen`), whole: its public items, and those of its submodules.
pub mod internal {
    pub use pktwarp_core::{affinity, ring, rss, threads};

    pub mod control {
        pub use crate::control::*;
        pub mod flow_export {
            pub use crate::control::flow_export::*;
        }
        pub mod http {
            pub use crate::control::http::*;
        }
        pub mod logs {
            pub use crate::control::logs::*;
        }
        pub mod metrics {
            pub use crate::control::metrics::*;
        }
        pub mod reload {
            pub use crate::control::reload::*;
        }
        pub mod watchdog {
            pub use crate::control::watchdog::*;
        }
    }
    pub mod executor {
        pub use crate::executor::*;
    }
    pub mod port {
        pub use crate::port::*;
        #[cfg(feature = "dpdk")]
        pub mod dpdk {
            pub use crate::port::dpdk::*;
        }
        pub mod gen {
            pub use crate::port::gen::*;
        }
        pub mod gpu_rx {
            pub use crate::port::gpu_rx::*;
        }
        pub mod out {
            pub use crate::port::out::*;
        }
        pub mod pace {
            pub use crate::port::pace::*;
        }
        pub mod pcap {
            pub use crate::port::pcap::*;
        }
        pub mod tap {
            pub use crate::port::tap::*;
        }
    }
    pub mod prepare {
        pub use crate::prepare::*;
    }
    pub mod rewrite {
        pub use crate::rewrite::*;
    }
    pub mod stage {
        pub use crate::stage::custom::CustomSlot;
        pub use crate::stage::descriptor::BUILTINS;
        pub use crate::stage::gpu_list::{GpuStageKind, GpuStageRef};
        pub use crate::stage::run::{build, build_for, build_with, AclSlot, BurstTables};
        pub use crate::stage::*;
        pub mod acl {
            pub use crate::stage::acl::*;
        }
        pub mod api {
            pub use crate::stage::api::*;
        }
        pub mod config {
            pub use crate::stage::config::*;
        }
        pub mod conntrack {
            pub use crate::stage::conntrack::*;
        }
        pub mod count {
            pub use crate::stage::count::*;
        }
        pub mod custom {
            pub use crate::stage::custom::*;
        }
        pub mod descriptor {
            pub use crate::stage::descriptor::*;
        }
        pub mod flow_stats {
            pub use crate::stage::flow_stats::*;
        }
        pub mod flow_stats_gpu {
            pub use crate::stage::flow_stats_gpu::*;
        }
        pub mod flow_tables {
            pub use crate::stage::flow_tables::*;
        }
        pub mod gpu_host {
            pub use crate::stage::gpu_host::*;
        }
        pub mod gpu_list {
            pub use crate::stage::gpu_list::*;
        }
        pub mod hooks {
            pub use crate::stage::hooks::*;
        }
        pub mod inspect {
            pub use crate::stage::inspect::*;
        }
        pub mod keyed {
            pub use crate::stage::keyed::*;
        }
        pub mod params {
            pub use crate::stage::params::*;
        }
        pub mod parse {
            pub use crate::stage::parse::*;
        }
        pub mod rate_limit {
            pub use crate::stage::rate_limit::*;
        }
        pub mod rate_limit_gpu {
            pub use crate::stage::rate_limit_gpu::*;
        }
        pub mod registry {
            pub use crate::stage::registry::*;
        }
        pub mod report {
            pub use crate::stage::report::*;
        }
        pub mod run {
            pub use crate::stage::run::*;
        }
    }
    pub mod steer {
        pub use crate::steer::*;
    }
    pub mod testdata {
        pub use crate::testdata::*;
    }
    pub mod verify {
        pub use crate::verify::*;
        pub mod sampler {
            pub use crate::verify::sampler::*;
        }
    }
}
