//! Reload with a custom stage in the pipeline: the ACL rules swap, the custom stage (and its
//! state) stays. Before custom stages could be named in the config, a pipeline with one
//! (spliced in by the application) had names the config never had (`custom`), so every SIGHUP
//! was refused as "the pipeline's stages changed".

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config_tests::{registry, tcp};
use crate::burst::{Burst, FrameDesc};
use crate::control::reload::Reloader;
use crate::control::ControlState;
use crate::counters::QueueCounters;
use crate::stage::{CustomSlot, Pipeline, Stage};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-stages-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_config(dir: &Path, stages: &str) -> PathBuf {
    std::fs::write(
        dir.join("rules.yaml"),
        "rules:\n  - { name: udp, proto: udp, action: drop }\n",
    )
    .unwrap();
    let cfg = dir.join("cfg.yaml");
    std::fs::write(
        &cfg,
        format!(
            "ports:\n  - name: g\n    gen: {{ count: 10 }}\npipeline:\n{stages}\n\
             executor: {{ kind: cpu }}\nmetrics: {{ enabled: false }}\n"
        ),
    )
    .unwrap();
    cfg
}

/// One 64-byte and one 200-byte TCP frame through the pipeline.
fn run_two(p: &Pipeline) {
    let mut b = Burst::default();
    for f in [tcp(64), tcp(200)] {
        let d = FrameDesc {
            len: f.len() as u32,
            wire_len: f.len() as u32,
            ..FrameDesc::default()
        };
        b.push(&f, d);
    }
    let c = QueueCounters::new(p.stages.len(), p.rule_count());
    p.run_burst(&b, &mut Vec::new(), &mut Vec::new(), &c);
}

fn custom_slot(p: &Pipeline) -> &CustomSlot {
    p.stages
        .iter()
        .find_map(|s| match s {
            Stage::Custom(c) => Some(&**c),
            _ => None,
        })
        .expect("a custom stage")
}

#[test]
fn reload_keeps_a_custom_stage_and_its_state() {
    let dir = scratch("reload-custom");
    let cfg_path = write_config(
        &dir,
        "  - parse\n  - custom: { name: max_len, max_len: 60 }\n  - acl: { rules: rules.yaml }\n  - count",
    );
    let cfg = crate::config::load(&cfg_path).unwrap();
    let prepared = crate::daemon::prepare_with(cfg, &registry()).unwrap();
    let p = Arc::clone(&prepared.pipeline);
    run_two(&p);
    let before = custom_slot(&p).cpu_arc();
    assert_eq!(custom_slot(&p).counters(), [("too_long", 1)]);

    let state = ControlState::new(None);
    let reloader = Reloader::new(&cfg_path, Arc::clone(&p), Arc::clone(&state));
    for g in 1..=3 {
        let r = reloader.reload("sighup").unwrap();
        assert_eq!(r.generation, g);
    }
    assert_eq!(p.stage_names(), ["parse", "max_len", "acl", "count"]);
    assert!(
        Arc::ptr_eq(&before, &custom_slot(&p).cpu_arc()),
        "the same stage runs"
    );
    run_two(&p);
    assert_eq!(custom_slot(&p).counters(), [("too_long", 2)], "state kept");

    // Renaming the custom stage in the config is a change of stages: refused, restart needed.
    std::fs::write(
        &cfg_path,
        std::fs::read_to_string(&cfg_path)
            .unwrap()
            .replace("name: max_len", "name: meta_reader"),
    )
    .unwrap();
    let e = reloader.reload("sighup").unwrap_err();
    assert!(e.reason.contains("stages changed"), "{e}");
    assert!(e.reason.contains("meta_reader"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stage_spliced_outside_the_config_is_refused_with_how_to_fix_it() {
    let dir = scratch("reload-spliced");
    let cfg_path = write_config(&dir, "  - parse\n  - acl: { rules: rules.yaml }\n  - count");
    let cfg = crate::config::load(&cfg_path).unwrap();
    let mut p = crate::daemon::build_pipeline(&cfg).unwrap();
    let built = registry()
        .build("max_len", &serde_json::json!({ "max_len": 60 }))
        .unwrap();
    let spliced = CustomSlot::new("max_len", built, false).unwrap();
    p.stages.insert(1, Stage::Custom(Box::new(spliced)));
    let reloader = Reloader::new(&cfg_path, Arc::new(p), ControlState::new(None));
    let e = reloader.reload("sighup").unwrap_err();
    assert!(e.reason.contains("not in the config"), "{e}");
    assert!(e.reason.contains("custom: { name"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn metrics_label_a_custom_stage_by_its_name_with_its_counters() {
    let dir = scratch("metrics-custom");
    let cfg_path = write_config(
        &dir,
        "  - parse\n  - custom: { name: max_len, max_len: 60 }\n  - count",
    );
    let cfg = crate::config::load(&cfg_path).unwrap();
    let p = Arc::new(crate::daemon::build_pipeline_with(&cfg, &registry()).unwrap());
    let q = Arc::new(QueueCounters::new(p.stages.len(), 0));
    let mut b = Burst::default();
    for f in [tcp(64), tcp(200), tcp(300)] {
        let d = FrameDesc {
            len: f.len() as u32,
            wire_len: f.len() as u32,
            ..FrameDesc::default()
        };
        b.push(&f, d);
    }
    p.run_burst(&b, &mut Vec::new(), &mut Vec::new(), &q);
    let text = crate::control::metrics::render_for_test(q, Arc::clone(&p));
    let has = |series: &str| text.lines().any(|l| l == series);
    assert!(
        has(r#"pktwarp_stage_frames_total{queue="0",stage="max_len",position="1"} 3"#),
        "{text}"
    );
    assert!(
        has(r#"pktwarp_stage_counter_total{stage="max_len",position="1",counter="too_long"} 2"#),
        "{text}"
    );
    // A GPU executor's published counts add to the series.
    custom_slot(&p).set_gpu_counters(&[5]);
    assert_eq!(custom_slot(&p).counters(), [("too_long", 7)]);
    assert!(!text.contains("stage=\"custom\""));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stage_without_cuda_keeps_the_pipeline_off_the_gpu() {
    let dir = scratch("gpu-refusal");
    let stages = "  - parse\n  - custom: { name: max_len, max_len: 60 }\n  - count";
    let cfg_path = write_config(&dir, stages);
    for (kind, ok) in [("gpu", false), ("auto", true)] {
        let text = std::fs::read_to_string(&cfg_path).unwrap();
        let text = text.replace("kind: cpu", &format!("kind: {kind}"));
        let cfg = crate::config::parse_str(&text, &cfg_path).unwrap();
        match crate::daemon::prepare_with(cfg, &registry()) {
            Ok(p) => {
                assert!(ok, "{kind}: accepted");
                assert_eq!(p.choice.name, "cpu");
                assert!(p.choice.reason.contains("auto"), "{}", p.choice.reason);
                assert!(p.choice.reason.contains("`max_len`"), "{}", p.choice.reason);
            }
            Err(e) => {
                assert!(!ok, "{kind}: {e:#}");
                let msg = format!("{e:#}");
                assert!(msg.contains("executor.kind is gpu"), "{msg}");
                assert!(msg.contains("`max_len` (pipeline[1]) has no CUDA"), "{msg}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A built-in stage's options changed in a pipeline with nothing reloadable: a restart is
/// needed, which the reload says; it is not a failed reload (that fires the failure alert).
#[test]
fn a_built_in_option_change_without_reloadable_tables_needs_a_restart() {
    let dir = scratch("reload-builtin-options");
    let cfg_path = write_config(&dir, "  - parse\n  - dscp: { set: 10 }\n  - count");
    let baseline = crate::config::load(&cfg_path).unwrap();
    let prepared = crate::daemon::prepare(crate::config::load(&cfg_path).unwrap()).unwrap();
    let state = ControlState::new(None);
    let reloader = Reloader::new(
        &cfg_path,
        Arc::clone(&prepared.pipeline),
        Arc::clone(&state),
    )
    .with_baseline(&baseline);
    // Unchanged: nothing to reload, an error as before.
    let e = reloader.reload("sighup").unwrap_err();
    assert!(e.reason.contains("nothing to reload"), "{e}");
    let text = std::fs::read_to_string(&cfg_path).unwrap();
    std::fs::write(&cfg_path, text.replace("set: 10", "set: 46")).unwrap();
    let r = reloader
        .reload("sighup")
        .expect("a restart is needed, not a failure");
    assert_eq!(r.restart_needed, ["pipeline"]);
    assert!(!r.published(), "{r:?}");
    assert_eq!((r.generation, r.params_generation), (0, 0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reload_rebuilds_a_custom_stage_whose_options_changed() {
    for with_acl in [true, false] {
        let dir = scratch(&format!("reload-options-{with_acl}"));
        let acl = if with_acl {
            "  - acl: { rules: rules.yaml }\n"
        } else {
            ""
        };
        let cfg_path = write_config(
            &dir,
            &format!("  - parse\n  - custom: {{ name: max_len, max_len: 60 }}\n{acl}  - count"),
        );
        let cfg = crate::config::load(&cfg_path).unwrap();
        let baseline = crate::config::load(&cfg_path).unwrap();
        let prepared = crate::daemon::prepare_with(cfg, &registry()).unwrap();
        let p = Arc::clone(&prepared.pipeline);
        run_two(&p);
        assert_eq!(custom_slot(&p).counters(), [("too_long", 1)]);
        let state = ControlState::new(None);
        let reloader =
            Reloader::new(&cfg_path, Arc::clone(&p), Arc::clone(&state)).with_baseline(&baseline);
        if !with_acl {
            let e = reloader.reload("sighup").unwrap_err();
            assert!(e.reason.contains("nothing to reload"), "{e}");
        }
        std::fs::write(
            &cfg_path,
            std::fs::read_to_string(&cfg_path)
                .unwrap()
                .replace("max_len: 60", "max_len: 250"),
        )
        .unwrap();
        let r = reloader.reload("sighup").unwrap();
        assert_eq!(r.rebuilt, ["max_len"]);
        assert_eq!(r.params_generation, 1);
        assert!(r.restart_needed.is_empty(), "{:?}", r.restart_needed);
        assert_eq!(r.generation, u64::from(with_acl));
        // 64 and 200 bytes both pass max_len 250; the first build's count stays.
        run_two(&p);
        assert_eq!(custom_slot(&p).counters(), [("too_long", 1)]);
        assert_eq!(custom_slot(&p).options()["max_len"], 250);
        // A bad option: refused, the stage in force stays.
        std::fs::write(
            &cfg_path,
            std::fs::read_to_string(&cfg_path)
                .unwrap()
                .replace("max_len: 250", "max_len: nope"),
        )
        .unwrap();
        let e = reloader.reload("sighup").unwrap_err();
        assert!(e.reason.contains("max_len"), "{e}");
        assert_eq!(p.params_generation(), 1);
        assert_eq!(custom_slot(&p).options()["max_len"], 250);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn reload_rebuilds_the_route_tables_from_their_files() {
    let dir = scratch("reload-routes");
    let routes = dir.join("routes.yaml");
    std::fs::write(
        &routes,
        "routes:\n  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:01', port: out }\n",
    )
    .unwrap();
    let cfg_path = dir.join("cfg.yaml");
    std::fs::write(
        &cfg_path,
        format!(
            "ports:\n  - name: g\n    gen: {{ count: 10 }}\n  - name: out\n    pcap: {{ tx: {{ path: {} }} }}\n\
             pipeline:\n  - parse\n  - route: {{ routes: routes.yaml }}\n  - count\n\
             executor: {{ kind: cpu }}\noutput: {{ port: out }}\nmetrics: {{ enabled: false }}\n",
            dir.join("out.pcap").display()
        ),
    )
    .unwrap();
    let cfg = crate::config::load(&cfg_path).unwrap();
    let p = Arc::new(crate::daemon::build_pipeline(&cfg).unwrap());
    let reloader = Reloader::new(&cfg_path, Arc::clone(&p), ControlState::new(None));
    std::fs::write(
        &routes,
        "routes:\n  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:01', port: out }\n  \
         - { prefix: '2001:db8::/32', via: '02:00:00:00:00:02', port: out }\n",
    )
    .unwrap();
    let r = reloader.reload("sighup").unwrap();
    assert_eq!(r.routes.len(), 1, "{r:?}");
    assert_eq!(
        (r.routes[0].0, r.routes[0].1),
        (1, 1),
        "1 IPv4 and 1 IPv6 route now"
    );
    assert_eq!(
        r.generation, 0,
        "no acl stage: the rule-set generation stays"
    );
    // The new table is a new stage-parameter set (the GPU host side uploads the route block).
    assert_eq!((r.params_generation, p.params_generation()), (1, 1));
    // A broken route file: refused naming the file and line, the table in force stays.
    std::fs::write(
        &routes,
        "routes:\n  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:01', port: out }\n  \
         - { prefix: 10.0.0.0/33, via: '02:00:00:00:00:01', port: out }\n",
    )
    .unwrap();
    let e = reloader.reload("sighup").unwrap_err();
    assert!(e.file.ends_with("routes.yaml") && e.line == 3, "{e}");
    assert_eq!(p.params_generation(), 1, "nothing published");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Steering rules are installed once at start (in a NIC or the ingest) and never swapped by a
/// reload: an edited steering rule file, or a changed `steering.offload`, is reported as
/// needing a restart, and the ACL reload goes on.
#[test]
fn an_edited_steering_rule_file_needs_a_restart() {
    let dir = scratch("reload-steering");
    let cfg_path = write_config(&dir, "  - parse\n  - acl: { rules: rules.yaml }\n  - count");
    let steer = "rules:\n  - match: { udp: }\n    actions: [drop]\n";
    std::fs::write(dir.join("steer.yaml"), steer).unwrap();
    let text = std::fs::read_to_string(&cfg_path).unwrap();
    let with_steering = text.replace("pipeline:", "steering: { rules: steer.yaml }\npipeline:");
    std::fs::write(&cfg_path, &with_steering).unwrap();
    let baseline = crate::config::load(&cfg_path).unwrap();
    let prepared =
        crate::daemon::prepare_with(crate::config::load(&cfg_path).unwrap(), &registry()).unwrap();
    let state = ControlState::new(None);
    let reloader =
        Reloader::new(&cfg_path, Arc::clone(&prepared.pipeline), state).with_baseline(&baseline);
    let r = reloader.reload("sighup").unwrap();
    assert!(r.restart_needed.is_empty(), "{:?}", r.restart_needed);
    std::fs::write(
        dir.join("steer.yaml"),
        steer.replace("drop", "{ queue: 0 }"),
    )
    .unwrap();
    let r = reloader.reload("sighup").unwrap();
    assert_eq!(r.restart_needed, ["steering"]);
    std::fs::write(dir.join("steer.yaml"), steer).unwrap();
    let off = with_steering.replace("steer.yaml }", "steer.yaml, offload: off }");
    std::fs::write(&cfg_path, off).unwrap();
    let r = reloader.reload("sighup").unwrap();
    assert_eq!(r.restart_needed, ["steering"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reload reads the config with the command line's `--set` changes again: the rule file the
/// change names stays in force, not the file's own.
#[test]
fn reload_applies_the_command_lines_changes_again() {
    let dir = scratch("reload-set");
    let cfg_path = write_config(&dir, "  - parse\n  - acl: { rules: rules.yaml }\n  - count");
    std::fs::write(
        dir.join("other.yaml"),
        "rules:\n  - { name: tcp, proto: tcp, action: drop }\n",
    )
    .unwrap();
    let set = [crate::config::Override::parse("pipeline.1.acl.rules=other.yaml").unwrap()];
    let cfg = crate::config::load_with(&cfg_path, &set).unwrap();
    let prepared =
        crate::daemon::prepare(crate::config::load_with(&cfg_path, &set).unwrap()).unwrap();
    let p = Arc::clone(&prepared.pipeline);
    let reloader =
        Reloader::new(&cfg_path, Arc::clone(&p), ControlState::new(None)).with_baseline(&cfg);
    let r = reloader.reload("sighup").unwrap();
    assert_eq!(r.rule_file, dir.join("other.yaml"), "{r:?}");
    // Without the change, the file's own rules.
    let plain = Reloader::new(&cfg_path, p, ControlState::new(None))
        .with_baseline(&crate::config::load(&cfg_path).unwrap());
    assert_eq!(
        plain.reload("sighup").unwrap().rule_file,
        dir.join("rules.yaml")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
