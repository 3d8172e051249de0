use super::*;
use crate::burst::{Burst, FrameDesc};
use crate::counters::QueueCounters;
use crate::stage::config::StageConfig;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pw-inspect-stage-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch folder");
    d
}

/// Ethernet / IPv4 / TCP 10.0.0.1:40000 -> 192.0.2.1:80 with `payload`.
pub(crate) fn tcp_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    let total = (40 + payload.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 192, 0, 2, 1]);
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&80u16.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xfa, 0, 0, 0, 0, 0]);
    f.extend_from_slice(payload);
    f
}

/// The same TCP packet inside VXLAN (outer UDP 4789).
fn vxlan_frame(payload: &[u8]) -> Vec<u8> {
    let inner = tcp_frame(payload);
    let mut udp = Vec::new();
    udp.extend_from_slice(&5555u16.to_be_bytes());
    udp.extend_from_slice(&4789u16.to_be_bytes());
    udp.extend_from_slice(&((8 + 8 + inner.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&[0x08, 0, 0, 0, 0, 0, 1, 0]);
    udp.extend_from_slice(&inner);
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 172, 16, 0, 1, 172, 16, 0, 2]);
    f.extend_from_slice(&udp);
    f
}

const RULES: &str = "\
alert tcp any any -> any 80 (msg:\"probe\"; content:\"probe-me\"; sid:9000001; rev:1;)
drop tcp any any -> any any (msg:\"kill\"; content:\"kill-me\"; nocase; sid:9000002; rev:1;)
pass tcp any any -> any any (msg:\"trusted\"; content:\"trusted-peer\"; sid:9000003; rev:1;)
alert http any any -> any any (msg:\"ua\"; content:\"EvilAgent\"; http_user_agent; sid:9000004; rev:1;)
alert tcp any any -> any any (msg:\"flow\"; flow:established,to_server; content:\"x\"; sid:9000005; rev:1;)
";

fn stage_cfg(dir: &Path, extra: &str) -> StageConfig {
    let yaml = format!(
        "- inspect:\n    rules: [\"{}\"]\n    eve: {{ path: \"{}\" }}\n{extra}",
        dir.join("*.rules").display(),
        dir.join("eve.json").display()
    );
    serde_saphyr::from_str::<Vec<StageConfig>>(&yaml)
        .expect("config")
        .remove(0)
}

fn pipeline(dir: &Path, extra: &str) -> Arc<crate::stage::Pipeline> {
    let stages = [
        StageConfig::Parse,
        stage_cfg(dir, extra),
        StageConfig::Count,
    ];
    Arc::new(crate::stage::build(&stages, |x| x.to_path_buf()).expect("pipeline"))
}

fn inspect_of(p: &crate::stage::Pipeline) -> &crate::stage::CustomSlot {
    match &p.stages[1] {
        crate::stage::Stage::Custom(c) => c,
        _ => panic!("stage 1 is inspect"),
    }
}

fn run(p: &crate::stage::Pipeline, q: &QueueCounters, frames: &[Vec<u8>]) -> Vec<Verdict> {
    let mut b = Burst::default();
    for f in frames {
        let d = FrameDesc {
            len: f.len() as u32,
            wire_len: f.len() as u32,
            ..FrameDesc::default()
        };
        b.push(f, d);
    }
    let (mut m, mut v) = (Vec::new(), Vec::new());
    p.run_burst(&b, &mut m, &mut v, q);
    v
}

/// The EVE lines' sids, parsed with serde_json.
fn eve_sids(dir: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(dir.join("eve.json")).unwrap_or_default();
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("an EVE line is JSON");
            assert_eq!(v["event_type"], "alert");
            v["alert"]["signature_id"].as_u64().expect("sid")
        })
        .collect()
}

/// The executors' `start` hook: the alert log starts with the run.
fn open(p: &crate::stage::Pipeline) {
    let hooks = inspect_of(p).cpu_arc();
    hooks.hooks().expect("hooks").start(&HookCtx {
        executor: "cpu",
        position: 1,
    });
}

fn close(p: &crate::stage::Pipeline) {
    let c = inspect_of(p);
    let hooks = c.cpu_arc();
    hooks.hooks().expect("hooks").end(&HookCtx {
        executor: "cpu",
        position: 1,
    });
}

#[test]
fn alerts_drops_passes_and_counters() {
    let dir = scratch("verdicts");
    std::fs::write(dir.join("local.rules"), RULES).expect("rules");
    let mirror = pipeline(&dir, "    alert_to: mirror\n");
    let q = QueueCounters::new(mirror.stages.len(), 0);
    let v = run(
        &mirror,
        &q,
        &[tcp_frame(b"probe-me"), tcp_frame(b"kill-me")],
    );
    assert_eq!((v[0].action, v[1].action), (Action::Mirror, Action::Drop));
    let p = pipeline(&dir, "    alert_to: host\n");
    assert!(!dir.join("eve.json").exists(), "building writes nothing");
    open(&p);
    let q = QueueCounters::new(p.stages.len(), 0);
    let http = b"GET / HTTP/1.1\r\nHost: a\r\nUser-Agent: EvilAgent/1\r\n\r\n";
    let frames = vec![
        tcp_frame(b"nothing to see"),
        tcp_frame(b"please probe-me now"),
        tcp_frame(b"KILL-ME"),
        tcp_frame(b"probe-me kill-me trusted-peer"),
        tcp_frame(http),
        vxlan_frame(b"tunnelled probe-me"),
        // Not IP: not inspected.
        vec![0xff; 60],
    ];
    let v = run(&p, &q, &frames);
    let actions: Vec<Action> = v.iter().map(|v| v.action).collect();
    assert_eq!(
        actions,
        [
            Action::Pass,
            Action::ToHost,
            Action::Drop,
            Action::Pass,
            Action::ToHost,
            Action::ToHost,
            Action::Pass,
        ]
    );
    assert_eq!(v[2].reason, Some(DropReason::InspectDrop));
    let c = inspect_of(&p).counters();
    let get = |n: &str| c.iter().find(|x| x.0 == n).map(|x| x.1);
    assert_eq!(get("inspected"), Some(6));
    assert_eq!(get("alerts"), Some(4));
    assert_eq!(get("drops"), Some(1));
    assert_eq!(get("passes"), Some(1));
    // received = counted + drops.
    let counted = q.stage_frames[2].get();
    let drops: u64 = DropReason::ALL.iter().map(|r| q.drop_count(*r)).sum();
    assert_eq!(counted + drops, frames.len() as u64);
    assert_eq!(q.drop_count(DropReason::InspectDrop), 1);
    close(&p);
    let mut sids = eve_sids(&dir);
    sids.sort_unstable();
    assert_eq!(sids, [9000001, 9000001, 9000002, 9000004]);
    // The flow rule is skipped (no flow table in the rule language yet), by its reason.
    let sec = inspect_of(&p).cpu().summary_section().expect("section");
    assert_eq!(sec["rules"]["loaded"], 4);
    assert_eq!(
        sec["rules"]["skipped_by_reason"]["needs the flow table (flow)"],
        1
    );
    assert_eq!(sec["top_rules"][0]["sid"], 9000001);
    assert_eq!(sec["top_rules"][0]["hits"], 2);
    let lines = validate_lines(&p);
    assert_eq!(
        lines,
        ["pipeline[1] inspect: 4 rules loaded, 1 skipped; 1 needs the flow table (flow)"]
    );
}

/// Per-sid hits and the stage's counters reach the metrics.
#[test]
fn rule_hits_reach_the_metrics() {
    let dir = scratch("metrics");
    std::fs::write(dir.join("local.rules"), RULES).expect("rules");
    let p = pipeline(&dir, "");
    let q = Arc::new(QueueCounters::new(p.stages.len(), 0));
    run(&p, &q, &[tcp_frame(b"probe-me"), tcp_frame(b"probe-me")]);
    let text = crate::control::metrics::render_for_test(q, Arc::clone(&p));
    let has = |s: &str| text.lines().any(|l| l == s);
    assert!(
        has(r#"pktwarp_inspect_rule_hits_total{stage="inspect",position="1",sid="9000001"} 2"#),
        "{text}"
    );
    assert!(
        has(r#"pktwarp_stage_counter_total{stage="inspect",position="1",counter="alerts"} 2"#),
        "{text}"
    );
    close(&p);
}

#[test]
fn bad_inputs_are_errors_naming_file_line_or_key() {
    let dir = scratch("bad");
    // No rule file.
    let stages = [StageConfig::Parse, stage_cfg(&dir, ""), StageConfig::Count];
    let e = crate::stage::build(&stages, |x| x.to_path_buf())
        .err()
        .expect("no rule file");
    let t = format!("{e:#}");
    assert!(t.contains("pipeline[1]") && t.contains("rules[0]"), "{t}");
    assert!(t.contains("matches no rule file"), "{t}");
    // A malformed rule: its file and line.
    std::fs::write(
        dir.join("bad.rules"),
        "# comment\nalert tcp any any -> any any (msg:\"a\"; content:\"a\"; sid:1;)\nalert tcp any any -> any any (msg:\"b\"; sid:x;)\n",
    )
    .expect("rules");
    let e = crate::stage::build(&stages, |x| x.to_path_buf())
        .err()
        .expect("malformed");
    let t = format!("{e:#}");
    assert!(t.contains("bad.rules:3:"), "{t}");
    // Bad vars: refused when the config is read, by key.
    let s = stage_cfg(&dir, "    vars: { HOME_NET: \"[10.0.0.0/99]\" }\n");
    let StageConfig::Inspect(c) = &s else {
        panic!("inspect")
    };
    let (k, _) = c.check().expect_err("bad var");
    assert_eq!(k, "vars.HOME_NET");
    // Unknown keys and alert_to values.
    let e = serde_saphyr::from_str::<Vec<StageConfig>>("- inspect: { rules: [a], colour: red }\n")
        .expect_err("unknown key");
    assert!(e.to_string().contains("colour"), "{e}");
    let e =
        serde_saphyr::from_str::<Vec<StageConfig>>("- inspect: { rules: [a], alert_to: tap }\n")
            .expect_err("bad alert_to");
    assert!(e.to_string().contains("tap"), "{e}");
    // The state tables' sizes: in range, known keys only.
    for (yaml, key) in [
        ("    state: { flows: 0 }\n", "state.flows"),
        ("    state: { trackers: 99999999999 }\n", "state.trackers"),
    ] {
        let s = stage_cfg(&dir, yaml);
        let StageConfig::Inspect(c) = &s else {
            panic!("inspect")
        };
        let (k, m) = c.check().expect_err(yaml);
        assert!(k == key && m.contains("out of range"), "{k}: {m}");
    }
    let s = stage_cfg(&dir, "    state: { flows: 8, trackers: 3 }\n");
    let StageConfig::Inspect(c) = &s else {
        panic!("inspect")
    };
    assert_eq!(
        (c.state.config().max_flows, c.state.config().max_trackers),
        (8, 3)
    );
    let e = serde_saphyr::from_str::<Vec<StageConfig>>(
        "- inspect: { rules: [a], state: { flows: 8, size: 3 } }\n",
    )
    .expect_err("unknown state key");
    assert!(e.to_string().contains("size"), "{e}");
}

/// SIGHUP's path: the same options re-read the rule files; a good file switches the set (a
/// sid alerts, another no longer does), a bad one keeps the set in force and names its line.
#[test]
fn reload_switches_sets_and_a_bad_file_keeps_the_old_one() {
    let dir = scratch("reload");
    let file = dir.join("local.rules");
    std::fs::write(&file, RULES).expect("rules");
    let p = pipeline(&dir, "");
    open(&p);
    let cfgs = [StageConfig::Parse, stage_cfg(&dir, ""), StageConfig::Count];
    let q = QueueCounters::new(p.stages.len(), 0);
    let frames = [tcp_frame(b"probe-me"), tcp_frame(b"newsig-here")];
    run(&p, &q, &frames);
    std::fs::write(
        &file,
        "alert tcp any any -> any any (msg:\"new\"; content:\"newsig\"; sid:9100001; rev:1;)\n",
    )
    .expect("rules");
    let r = p.reload_stage_options(&cfgs).expect("good reload");
    assert_eq!(r.rebuilt, ["inspect"]);
    let stage = inspect_of(&p);
    run(&p, &q, &frames);
    // A bad file: refused, naming the line; the set in force stays.
    std::fs::write(
        &file,
        "alert tcp any any -> any any (msg:\"ok\"; content:\"q\"; sid:1;)\n\nalert tcp any any -> any any (msg:\"bad\"; content:\"q\"; sid:;)\n",
    )
    .expect("rules");
    let e = p.reload_stage_options(&cfgs).expect_err("bad reload");
    assert!(format!("{e:#}").contains("local.rules:3:"), "{e:#}");
    run(&p, &q, &frames);
    let c = stage.counters();
    assert_eq!(c.iter().find(|x| x.0 == "alerts").map(|x| x.1), Some(3));
    close(&p);
    assert_eq!(eve_sids(&dir), [9000001, 9100001, 9100001]);
    let sec = stage.cpu().summary_section().expect("section");
    assert_eq!(sec["generation"], 1);
    assert_eq!(sec["rules"]["loaded"], 1);
}

#[test]
fn the_gpu_executor_takes_its_http_rules() {
    let dir = scratch("gpu");
    std::fs::write(dir.join("local.rules"), RULES).expect("rules");
    let p = pipeline(&dir, "");
    // The HTTP user-agent rule runs on the GPU too (the head parsed there as here), EVE log and
    // all (its alert ring); the flow rule is skipped without conntrack.
    assert_eq!(p.gpu_refusal(), None);
    let sec = inspect_of(&p).cpu().summary_section().expect("section");
    assert_eq!(sec["rules"]["loaded"], 4, "{sec}");
    let lib = inspect_of(&p)
        .cpu()
        .gpu_library()
        .expect("library")
        .expect("GPU");
    let http_off = u32::from_le_bytes(lib.block[52..56].try_into().unwrap());
    assert!(http_off > 0, "the user agent's prefilter in the block");
    close(&p);
}

/// What SIGHUP runs (`control::reload::Reloader`) over a config file: a good rule file is
/// published (a new sid alerts, the old one no longer does); a bad one is refused with its
/// file and line and the set in force stays; editing the stage's options rebuilds it.
#[test]
fn sighup_reload_through_the_config() {
    use crate::control::reload::Reloader;
    use crate::control::ControlState;
    let dir = scratch("sighup");
    let rules = dir.join("local.rules");
    std::fs::write(&rules, RULES).expect("rules");
    let cfg_path = dir.join("c.yaml");
    let yaml = "ports:\n  - name: g\n    gen: { count: 10 }\npipeline:\n  - parse\n  - inspect:\n      rules: [local.rules]\n      eve: { path: eve.json }\n  - count\nexecutor: { kind: cpu }\nmetrics: { enabled: false }\n";
    std::fs::write(&cfg_path, yaml).expect("config");
    let cfg = crate::config::load(&cfg_path).expect("config loads");
    let p = Arc::new(crate::daemon::build_pipeline(&cfg).expect("pipeline"));
    open(&p);
    let q = QueueCounters::new(p.stages.len(), 0);
    let frames = [tcp_frame(b"probe-me"), tcp_frame(b"newsig-here")];
    run(&p, &q, &frames);
    let reloader = Reloader::new(&cfg_path, Arc::clone(&p), ControlState::new(None));
    std::fs::write(
        &rules,
        "alert tcp any any -> any any (msg:\"new\"; content:\"newsig\"; sid:9100001; rev:1;)\n",
    )
    .expect("rules");
    let r = reloader.reload("sighup").expect("good reload");
    assert!(r.published(), "{r:?}");
    assert_eq!(r.rebuilt, ["inspect"]);
    run(&p, &q, &frames);
    std::fs::write(
        &rules,
        "alert tcp any any -> any any (msg:\"bad\"; sid:1; content:\"q\";\n",
    )
    .expect("rules");
    let e = reloader.reload("sighup").expect_err("bad rule file");
    assert!(e.reason.contains("local.rules:1:"), "{e}");
    run(&p, &q, &frames);
    close(&p);
    assert_eq!(eve_sids(&dir), [9000001, 9100001, 9100001]);
    // New options: the stage is rebuilt (its counters carry on).
    std::fs::write(
        &rules,
        "alert tcp any any -> any any (msg:\"new\"; content:\"newsig\"; sid:9100001; rev:1;)\n",
    )
    .expect("rules");
    std::fs::write(
        &cfg_path,
        yaml.replace("  - count", "      alert_to: host\n  - count"),
    )
    .expect("config");
    let r = reloader.reload("sighup").expect("new options");
    assert_eq!(r.rebuilt, ["inspect"]);
    let v = run(&p, &q, &frames);
    assert_eq!((v[0].action, v[1].action), (Action::Pass, Action::ToHost));
    let alerts = inspect_of(&p)
        .counters()
        .into_iter()
        .find(|x| x.0 == "alerts");
    assert_eq!(alerts, Some(("alerts", 4)));
}

/// Workers on several threads (one counter shard each): the counters are their sum.
#[test]
fn counters_sum_over_worker_threads() {
    let dir = scratch("threads");
    std::fs::write(dir.join("local.rules"), RULES).expect("rules");
    let p = pipeline(&dir, "");
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let q = QueueCounters::new(p.stages.len(), 0);
                for _ in 0..25 {
                    run(&p, &q, &[tcp_frame(b"probe-me"), tcp_frame(b"clean")]);
                }
            });
        }
    });
    let c = inspect_of(&p).counters();
    assert_eq!(c[0], ("inspected", 200));
    assert_eq!(c[1], ("alerts", 100));
    close(&p);
}

/// GTP-U carries IP without Ethernet: the inner packet (its addresses, ports and payload) is
/// what the rules see; the outer UDP payload is not inspected as such.
#[test]
fn the_inner_packet_of_gtpu_is_inspected() {
    let dir = scratch("gtpu");
    std::fs::write(
        dir.join("local.rules"),
        "alert tcp 10.0.0.1 any -> 192.0.2.1 80 (msg:\"inner\"; content:\"probe-me\"; sid:1;)\n\
         alert udp any any -> any 2152 (msg:\"outer\"; content:\"probe-me\"; sid:2;)\n",
    )
    .expect("rules");
    let p = pipeline(&dir, "");
    open(&p);
    let inner = tcp_frame(b"probe-me")[14..].to_vec();
    let mut gtp = vec![0x30, 0xff];
    gtp.extend_from_slice(&(inner.len() as u16).to_be_bytes());
    gtp.extend_from_slice(&[0, 0, 0, 7]);
    gtp.extend_from_slice(&inner);
    let mut udp = 2152u16.to_be_bytes().to_vec();
    udp.extend_from_slice(&2152u16.to_be_bytes());
    udp.extend_from_slice(&((8 + gtp.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&gtp);
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00, 0x45, 0];
    f.extend_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 172, 16, 0, 1, 172, 16, 0, 2]);
    f.extend_from_slice(&udp);
    let q = QueueCounters::new(p.stages.len(), 0);
    run(&p, &q, &[f]);
    close(&p);
    assert_eq!(eve_sids(&dir), [1]);
}

/// `gpu_rules_only: true` (no EVE log) with conntrack before: the GPU takes rules with state
/// too, so none is skipped; the GPU executor takes the pipeline, its HTTP rule and its
/// flowbits rule included, with per-queue state tables for the stage.
#[test]
fn gpu_rules_only_makes_a_set_both_executors_run() {
    let dir = scratch("gpu-only");
    let rules = format!(
        "{RULES}alert tcp any any -> any any (msg:\"fb\"; content:\"y\"; flowbits:set,z; sid:9000006;)\n"
    );
    std::fs::write(dir.join("local.rules"), rules).expect("rules");
    let yaml = format!(
        "- parse\n- conntrack: {{ entries: 1024 }}\n- inspect:\n    rules: [\"{}\"]\n    gpu_rules_only: true\n- count\n",
        dir.join("local.rules").display()
    );
    let stages = serde_saphyr::from_str::<Vec<StageConfig>>(&yaml).expect("config");
    let p = crate::stage::build(&stages, |x| x.to_path_buf()).expect("pipeline");
    assert_eq!(p.gpu_refusal(), None);
    let crate::stage::Stage::Custom(slot) = &p.stages[2] else {
        panic!("stage 2 is inspect")
    };
    let sec = slot.cpu().summary_section().expect("section");
    assert_eq!(sec["rules"]["loaded"], 6, "{sec}");
    assert_eq!(sec["rules"]["skipped"], 0, "{sec}");
    let (specs, _) = crate::executor::gpu::compose::stage_specs(&p).expect("specs");
    assert_eq!(specs[2].function(), "pw_stage_inspect");
    let st = p.stages[2].gpu_queue_state();
    assert_eq!(st.len(), 1, "the stage's flowbits / threshold tables");
    let limits = crate::stage::inspect::StateLimits::default();
    assert_eq!(
        (st[0].addr_at, st[0].bytes),
        (
            pktwarp_inspect::gpu::STATE_AT,
            pktwarp_inspect::gpu::state_queue_bytes(&limits.config())
        )
    );
}

/// A rule reload moves the pipeline's stage-parameter generation on (the GPU host side then
/// publishes the new block) and the block's hit bank flips with the set's generation.
#[test]
fn a_rule_reload_moves_the_gpu_parameters_on() {
    let dir = scratch("gpu-reload");
    let payload: String = RULES
        .lines()
        .filter(|l| !l.contains("http"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.join("local.rules"), &payload).expect("rules");
    let p = pipeline(&dir, "");
    let bank = |p: &crate::stage::Pipeline| {
        let b = inspect_of(p)
            .cpu()
            .gpu_library()
            .expect("library")
            .expect("GPU");
        let at = pktwarp_inspect::gpu::BANK_AT;
        u32::from_le_bytes(b.block[at..at + 4].try_into().unwrap())
    };
    assert_eq!((p.params_generation(), bank(&p)), (0, 0));
    let cfgs = [StageConfig::Parse, stage_cfg(&dir, ""), StageConfig::Count];
    p.reload_stage_options(&cfgs).expect("reload");
    assert_eq!((p.params_generation(), bank(&p)), (1, 1));
    close(&p);
}

/// `auto` keeps an inspecting pipeline on the CPU (its GPU stage is not yet shown equal on a
/// GPU), saying why; without the inspect stage the same config is free to take the GPU.
#[test]
fn auto_keeps_inspection_on_the_cpu_and_says_why() {
    let dir = scratch("auto");
    std::fs::write(dir.join("local.rules"), RULES).expect("rules");
    let cfg_path = dir.join("c.yaml");
    let with = "ports:\n  - name: g\n    gen: { count: 10 }\npipeline:\n  - parse\n  - inspect:\n      rules: [local.rules]\n      gpu_rules_only: true\n  - count\nexecutor: { kind: auto }\nmetrics: { enabled: false }\n";
    std::fs::write(&cfg_path, with).expect("config");
    let cfg = crate::config::load(&cfg_path).expect("config loads");
    let p = crate::prepare::prepare(cfg).expect("prepared");
    assert_eq!(p.choice.name, "cpu");
    assert!(
        p.choice.reason.contains("stage `inspect` (pipeline[1])")
            && p.choice.reason.contains("not yet equal"),
        "{}",
        p.choice.reason
    );
    let without = with.replace(
        "  - inspect:\n      rules: [local.rules]\n      gpu_rules_only: true\n",
        "",
    );
    std::fs::write(&cfg_path, without).expect("config");
    let cfg = crate::config::load(&cfg_path).expect("config loads");
    let p = crate::prepare::prepare(cfg).expect("prepared");
    assert!(!p.choice.reason.contains("inspect"), "{}", p.choice.reason);
}
