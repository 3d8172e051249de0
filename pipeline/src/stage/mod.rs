//! Stages: one step of per-packet work, each with a Rust (reference, CPU) and a CUDA implementation.
pub(crate) mod acl;
pub(crate) mod api;
#[cfg(test)]
mod api_tests;
mod burstwise;
#[cfg(test)]
mod burstwise_acl_tests;
pub(crate) mod config;
#[cfg(test)]
mod config_tests;
pub(crate) mod conntrack;
pub(crate) mod count;
pub(crate) mod custom;
pub(crate) mod descriptor;
pub(crate) mod flow_stats;
pub(crate) mod flow_stats_gpu;
pub(crate) mod flow_tables;
pub(crate) mod gpu_host;
pub(crate) mod gpu_list;
pub(crate) mod hooks;
pub(crate) mod inspect;
mod inspect_gpu;
pub(crate) mod keyed;
#[cfg(test)]
mod keyed_tests;
pub(crate) mod params;
pub(crate) mod parse;
pub(crate) mod rate_limit;
pub(crate) mod rate_limit_gpu;
pub(crate) mod registry;
#[cfg(test)]
mod reload_tests;
pub(crate) mod report;
pub(crate) mod run;

// The stage API of an embedding user (a stage of one's own, its factory and registry, the
// pipeline it runs in); listed in docs/public-api.txt. The rest is `crate::internal::stage`.
pub use api::{FilesReload, FrameMut, HookCtx, MetricKind, RxInfo, StageHooks, StageMetricFamily};
pub use descriptor::{GpuImpl, StageDescriptor, StageNeeds};
pub use gpu_host::{GpuHostSide, HandedLog, StageGpuMemory};
pub use gpu_list::GpuParams;
pub use registry::{BuiltStage, GpuStage, StageFactory, StageRegistry};
pub use report::{
    ExportedFamily, ExportedKind, ExportedSamples, ExportedValue, Labels, StageReport,
};
pub use run::{CustomStage, Pipeline, Stage};

pub(crate) use descriptor::BUILTINS;
pub(crate) use gpu_list::GpuStageKind;
pub(crate) use run::{build_for, AclSlot, BurstTables};
// The unit tests' short paths (outside the crate: `crate::internal::stage`).
#[cfg(test)]
pub(crate) use {
    custom::CustomSlot,
    run::{build, build_with},
};

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
