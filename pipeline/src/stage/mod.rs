//! Stages: one step of per-packet work, each with a Rust (reference, CPU) and a CUDA implementation.
pub mod acl;
pub mod api;
#[cfg(test)]
mod api_tests;
mod burstwise;
#[cfg(test)]
mod burstwise_acl_tests;
pub mod config;
#[cfg(test)]
mod config_tests;
pub mod conntrack;
pub mod count;
pub mod custom;
pub mod descriptor;
pub mod flow_stats;
pub mod flow_stats_gpu;
pub mod flow_tables;
pub mod gpu_host;
pub mod gpu_list;
pub mod hooks;
pub mod inspect;
mod inspect_gpu;
pub mod keyed;
#[cfg(test)]
mod keyed_tests;
pub mod params;
pub mod parse;
pub mod rate_limit;
pub mod rate_limit_gpu;
pub mod registry;
#[cfg(test)]
mod reload_tests;
pub mod report;
pub mod run;

pub use api::{FilesReload, FrameMut, HookCtx, MetricKind, RxInfo, StageHooks, StageMetricFamily};
pub use custom::CustomSlot;
pub use descriptor::{GpuImpl, StageDescriptor, StageNeeds, BUILTINS};
pub use gpu_list::{GpuParams, GpuStageKind, GpuStageRef};
pub use registry::{BuiltStage, GpuStage, StageFactory, StageRegistry};
pub use run::{build, build_for, build_with, AclSlot, BurstTables, CustomStage, Pipeline, Stage};

/// parse -> acl (the shipped inline-filter rules, default pass) -> count: the pipeline the unit
/// tests of several modules run.
#[cfg(test)]
pub(crate) fn test_inline_filter_pipeline() -> Pipeline {
    use crate::stage::config::{AclStageConfig, DefaultAction, StageConfig};
    let rules = std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../configs/rules/inline-filter.rules.yaml"
    ));
    let stages = vec![
        StageConfig::Parse,
        StageConfig::Acl(AclStageConfig {
            rules,
            format: None,
            default: DefaultAction::Pass,
        }),
        StageConfig::Count,
    ];
    build(&stages, |p| p.to_path_buf()).expect("the shipped inline-filter rules load")
}
