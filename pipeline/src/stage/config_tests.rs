//! The config side of stages: `custom:` in YAML, unknown stage names, stage order, and the
//! pipeline built with a registry.

use std::path::Path;
use std::sync::Arc;

use crate::config::{self, StageConfig};
use crate::counters::QueueCounters;
use crate::stage::{build_with, BuiltStage, StageFactory, StageRegistry};
use crate::testdata::MaxLen;
use crate::verdict::{Action, DropReason};

/// testdata's MaxLen without a CUDA side; `reads_meta` as given (`meta_reader`).
pub(super) struct MaxLenFactory {
    reads_meta: bool,
}

impl StageFactory for MaxLenFactory {
    fn build(&self, options: &serde_json::Value) -> anyhow::Result<BuiltStage> {
        let max_len = MaxLen::option(options)?;
        Ok(BuiltStage {
            cpu: Arc::new(MaxLen::new(max_len as usize)),
            gpu: None,
        })
    }
    fn reads_meta(&self) -> bool {
        self.reads_meta
    }
}

pub(super) fn registry() -> StageRegistry {
    let mut r = StageRegistry::default();
    r.register("max_len", Arc::new(MaxLenFactory { reads_meta: false }))
        .unwrap();
    r.register("meta_reader", Arc::new(MaxLenFactory { reads_meta: true }))
        .unwrap();
    r
}

fn cfg_text(pipeline: &str) -> String {
    format!(
        "ports:
  - name: g
    gen: {{ count: 10 }}
pipeline:
{pipeline}
executor: {{ kind: cpu }}
"
    )
}

fn parse(pipeline: &str) -> Result<config::Config, config::ConfigError> {
    config::parse_str(&cfg_text(pipeline), Path::new("/cfg/x.yaml"))
}

#[test]
fn custom_stage_yaml_keeps_name_and_options() {
    let cfg =
        parse("  - parse\n  - custom: { name: max_len, max_len: 100, tag: [1, 2] }\n  - count")
            .unwrap();
    let StageConfig::Custom(c) = &cfg.pipeline[1].value else {
        panic!("not custom: {:?}", cfg.pipeline[1].value);
    };
    assert_eq!(c.name, "max_len");
    assert_eq!(
        c.options,
        serde_json::json!({ "max_len": 100, "tag": [1, 2] })
    );
    assert_eq!(cfg.pipeline[1].value.name(), "max_len");
    config::check_custom_stages(&cfg, &registry()).unwrap();
}

/// An unknown stage key is answered with the registry's names, at its line and column.
#[test]
fn an_unknown_stage_names_the_registrys_stages() {
    let e = parse("  - parse\n  - sample\n  - count").unwrap_err();
    assert_eq!((e.line, e.column), (6, 5), "{e}");
    assert!(e.message.starts_with("unknown stage `sample`"), "{e}");
    for d in crate::stage::BUILTINS {
        assert!(e.message.contains(d.name), "{} missing: {e}", d.name);
    }
    assert!(e.message.contains("custom: { name: NAME"), "{e}");
}

#[test]
fn custom_without_a_string_name_is_a_config_error_with_a_line() {
    for (stage, want) in [
        ("  - custom: { max_len: 3 }", "needs `name`"),
        ("  - custom: { name: 7 }", "must be a string"),
        ("  - custom: 5", ""),
    ] {
        let e = parse(stage).unwrap_err();
        assert!(e.line > 0, "{stage}: {e}");
        assert!(e.to_string().contains(want), "{stage}: {e}");
    }
}

#[test]
fn an_unknown_custom_stage_names_the_stage_line_key_and_the_registered_names() {
    let cfg = parse("  - parse\n  - custom: { name: syn_gaurd }").unwrap();
    let e = config::check_custom_stages(&cfg, &registry()).unwrap_err();
    assert_eq!(e.file, Path::new("/cfg/x.yaml"));
    assert_eq!(e.line, 6, "{e}");
    assert_eq!(e.key, "pipeline[1].custom.name");
    assert!(e.message.contains("`syn_gaurd`"), "{e}");
    assert!(
        e.message.contains("registered: max_len, meta_reader"),
        "{e}"
    );
    let e = config::check_custom_stages(&cfg, &StageRegistry::default()).unwrap_err();
    assert!(e.message.contains("none are registered"), "{e}");
}

#[test]
fn acl_before_parse_is_a_config_error_naming_acl() {
    let e = parse("  - acl: { rules: r.yaml }\n  - parse").unwrap_err();
    assert_eq!(e.key, "pipeline[0]");
    assert_eq!(e.line, 5, "{e}");
    assert!(e.message.contains("the `acl` stage"), "{e}");
    assert!(e.message.contains("`parse` stage before it"), "{e}");
    let e = parse("  - count\n  - acl: { rules: r.yaml }").unwrap_err();
    assert_eq!(e.key, "pipeline[1]");
}

#[test]
fn a_custom_stage_reading_meta_needs_parse_before_it() {
    let cfg = parse("  - custom: { name: meta_reader, max_len: 1 }\n  - parse").unwrap();
    let e = config::check_custom_stages(&cfg, &registry()).unwrap_err();
    assert_eq!(e.key, "pipeline[0]");
    assert!(e.message.contains("the `meta_reader` stage"), "{e}");
    // One that reads only frame bytes may come first.
    let cfg = parse("  - custom: { name: max_len, max_len: 1 }\n  - parse").unwrap();
    config::check_custom_stages(&cfg, &registry()).unwrap();
}

#[test]
fn more_than_max_stages_is_a_config_error() {
    let many = "  - count\n".repeat(crate::stage::run::MAX_STAGES + 1);
    let e = parse(many.trim_end()).unwrap_err();
    assert_eq!(e.key, "pipeline");
    assert!(e.message.contains("at most 16 stages"), "{e}");
}

/// A well-formed TCP frame of `size` bytes on the wire.
pub(super) fn tcp(size: u16) -> Vec<u8> {
    use crate::port::gen::{build_frame, FrameSpec};
    let ip = |a| std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, a));
    build_frame(&FrameSpec::tcp(ip(1), ip(2), 1000, 80, size))
}

fn stages(cfg: &config::Config) -> Vec<StageConfig> {
    cfg.pipeline.iter().map(|s| s.value.clone()).collect()
}

#[test]
fn build_with_runs_the_custom_stage_by_its_name() {
    let cfg = parse("  - parse\n  - custom: { name: max_len, max_len: 60 }\n  - count").unwrap();
    let p = build_with(&stages(&cfg), |p| p.to_path_buf(), &registry()).unwrap();
    assert_eq!(p.stage_names(), ["parse", "max_len", "count"]);
    // Built-ins only: the custom stage is unknown.
    let e = crate::stage::build(&stages(&cfg), |p| p.to_path_buf())
        .err()
        .unwrap();
    assert!(
        format!("{e:#}").contains("unknown custom stage `max_len`"),
        "{e:#}"
    );
    // A bad option is the factory's error, naming the stage.
    let cfg = parse("  - parse\n  - custom: { name: max_len, max_len: x }").unwrap();
    let e = build_with(&stages(&cfg), |p| p.to_path_buf(), &registry())
        .err()
        .unwrap();
    let msg = format!("{e:#}");
    assert!(
        msg.contains("custom stage `max_len`") && msg.contains("max_len"),
        "{msg}"
    );

    // Frames of 42 and 100 bytes: the long one is dropped by the stage (stage_drop), counted by
    // it, and never reaches `count`.
    let (short, long) = (&tcp(64), &tcp(200));
    assert!(short.len() <= 60 && long.len() > 60);
    let mut burst = crate::burst::Burst::default();
    for f in [short, long, short] {
        burst.push(
            f,
            crate::burst::FrameDesc {
                len: f.len() as u32,
                wire_len: f.len() as u32,
                ..Default::default()
            },
        );
    }
    let cfg = parse("  - parse\n  - custom: { name: max_len, max_len: 60 }\n  - count").unwrap();
    let p = build_with(&stages(&cfg), |p| p.to_path_buf(), &registry()).unwrap();
    let c = QueueCounters::new(3, 0);
    let (mut m, mut v) = (Vec::new(), Vec::new());
    p.run_burst(&burst, &mut m, &mut v, &c);
    let actions: Vec<Action> = v.iter().map(|v| v.action).collect();
    assert_eq!(actions, [Action::Pass, Action::Drop, Action::Pass]);
    assert_eq!(v[1].reason, Some(DropReason::StageDrop));
    assert_eq!(c.stage_frames[1].get(), 3);
    assert_eq!(c.stage_frames[2].get(), 2);
    let crate::stage::Stage::Custom(slot) = &p.stages[1] else {
        panic!("stage 1 is the custom stage");
    };
    assert_eq!(slot.counters(), [("too_long", 1)]);
}

#[test]
fn build_refuses_a_meta_reader_before_parse() {
    // Stages given directly (not through a config file) are checked too.
    let s = vec![
        StageConfig::Custom(config::CustomStageConfig {
            name: "meta_reader".into(),
            options: serde_json::json!({ "max_len": 1 }),
        }),
        StageConfig::Parse,
    ];
    let e = build_with(&s, |p| p.to_path_buf(), &registry())
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .contains("pipeline[0]: the `meta_reader` stage"),
        "{e}"
    );
}

fn steering_cfg(steering: &str) -> Result<config::Config, config::ConfigError> {
    let text = format!(
        "ports:\n  - name: g\n    gen: {{ count: 10 }}\nsteering:\n{steering}\npipeline:\n  - parse\nexecutor: {{ kind: cpu }}\n"
    );
    config::parse_str(&text, Path::new("/cfg/steer.yaml"))
}

#[test]
fn steering_offload_takes_auto_and_off_and_defaults_to_auto() {
    use config::SteeringOffload;
    let offload = |t: &str| steering_cfg(t).unwrap().steering.unwrap().offload;
    assert_eq!(offload("  offload: auto"), SteeringOffload::Auto);
    assert_eq!(offload("  offload: off"), SteeringOffload::Off);
    assert_eq!(offload("  offload: \"off\""), SteeringOffload::Off);
    assert_eq!(offload("  rules: r.yaml"), SteeringOffload::Auto);
}

#[test]
fn steering_offload_bad_values_name_file_line_and_key() {
    for bad in [
        "  offload: on",
        "  offload: nic",
        "  offload: true",
        "  offload: 1",
        "  offload: [auto]",
        "  offload: AUTO",
    ] {
        let e = steering_cfg(bad).expect_err(bad);
        let shown = e.to_string();
        assert_eq!(e.file, Path::new("/cfg/steer.yaml"), "{bad}: {shown}");
        assert_eq!(e.line, 5, "{bad}: {shown}");
        assert!(e.key.contains("offload"), "{bad}: key {:?}: {shown}", e.key);
        if !bad.contains('[') {
            assert!(
                shown.contains("`auto` or `off`"),
                "{bad}: names the allowed values: {shown}"
            );
        }
    }
    let e = steering_cfg("  offload:").expect_err("empty");
    assert!(e.key.contains("offload"), "empty: {e}");
    let e = steering_cfg("  offlaod: off").expect_err("misspelt key");
    assert!(e.to_string().contains("offlaod"), "{e}");
}

/// A stage that keeps per-flow state: its needs say so, and until the flow table is there the
/// config check refuses it, naming the stage, its line and key (before either executor runs).
#[test]
fn a_stage_keeping_flow_state_is_refused_with_its_line_until_the_flow_table() {
    struct Stateful;
    impl StageFactory for Stateful {
        fn build(&self, o: &serde_json::Value) -> anyhow::Result<BuiltStage> {
            MaxLenFactory { reads_meta: false }.build(o)
        }
        fn needs(&self) -> crate::stage::StageNeeds {
            crate::stage::StageNeeds {
                keeps_flow_state: Some(32),
                ..crate::stage::StageNeeds::META
            }
        }
    }
    let mut r = registry();
    r.register("stateful", Arc::new(Stateful)).unwrap();
    let cfg = parse("  - parse\n  - custom: { name: stateful, max_len: 9 }").unwrap();
    let e = config::check_custom_stages(&cfg, &r).unwrap_err();
    assert_eq!(
        (e.line, e.key.as_str()),
        (6, "pipeline[1].custom.name"),
        "{e}"
    );
    assert!(e.message.contains("custom stage `stateful`"), "{e}");
    assert!(e.message.contains("32 bytes of state per flow"), "{e}");
    // Built outside the config check, the pipeline is refused the same way.
    let stages: Vec<StageConfig> = cfg.pipeline.iter().map(|s| s.value.clone()).collect();
    let e = build_with(&stages, |p| p.to_path_buf(), &r).err().unwrap();
    assert!(
        format!("{e:#}").contains("a registered stage cannot have yet"),
        "{e:#}"
    );
}
