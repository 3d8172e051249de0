//! Hot reload under traffic, on the CPU executor: the ACL rule set is swapped 100 times between
//! two different rule sets while a generator feeds 2 queues. Every packet's rule and action are
//! checked against the linear reference (`AclRuleSet::classify_linear`) of the rule set whose
//! generation the worker reports for its burst (so a burst is classified wholly by one rule
//! set), no packet is lost, and the old tables are freed once no worker holds them. Plus: an
//! invalid rule file is rejected with file, line and reason and the running rules stay.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flow_rules::abi::ACL_NO_MATCH;
use flow_rules::acl::{self, AclRuleSet, RuleFormat};
use pipeline::control::ControlState;
use pipeline::daemon;
use pipeline::internal::control::reload::Reloader;
use pipeline::internal::executor::cpu::{self, BurstObserver, CpuShared};
use pipeline::internal::stage::acl::key_from_meta;
use pipeline::verdict::{Action, DropReason};

/// Rule set A: by protocol and low destination ports.
const RULES_A: &str = "rules:
  - { name: a-tcp-low, proto: tcp, dst_port: 1-511, action: drop }
  - { name: a-udp, proto: udp, action: mirror }
  - { name: a-src-half, src: 10.0.0.0/9, action: to-host }
";
/// Rule set B: different fields, different order, different actions.
const RULES_B: &str = "rules:
  - { name: b-udp-high, proto: udp, dst_port: 512-1023, action: drop }
  - { name: b-src-upper, src: 10.128.0.0/9, action: pass }
  - { name: b-tcp, proto: tcp, action: mirror }
  - { name: b-icmp, proto: icmp, action: drop }
";

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Replaces a file in one rename, as an operator's deploy tool would.
fn put(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn config(dir: &Path, gen: &str) -> PathBuf {
    let cfg = dir.join("cfg.yaml");
    std::fs::write(
        &cfg,
        format!(
            "ports:
  - name: wire
    gen:
{gen}
      size: 64
      flows: {{ src: 10.0.0.0/8, dst: 192.168.0.0/16, dst_ports: 1-1023 }}
queues: {{ count: 2, burst: 32, ring_slots: 64 }}
pipeline:
  - parse
  - acl: {{ rules: rules.yaml, default: pass }}
  - count
executor: {{ kind: cpu }}
metrics: {{ enabled: false }}
"
        ),
    )
    .unwrap();
    cfg
}

fn ruleset(dir: &Path, name: &str, text: &str) -> AclRuleSet {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    acl::load_rules(&p, RuleFormat::Yaml).unwrap()
}

fn action_of(set: &AclRuleSet, rule: Option<usize>) -> Action {
    match rule {
        None => Action::Pass,
        Some(i) => match set.rules[i].action.verdict {
            acl::Verdict::Pass => Action::Pass,
            acl::Verdict::Drop => Action::Drop,
            acl::Verdict::Mirror => Action::Mirror,
            acl::Verdict::ToHost => Action::ToHost,
        },
    }
}

#[derive(Default)]
struct Tally {
    packets: AtomicU64,
    bursts: AtomicU64,
    mismatches: AtomicU64,
    /// Packets whose rule differs between A and B: the check can tell the sets apart.
    discriminating: AtomicU64,
    first_mismatch: Mutex<Option<String>>,
    generations: Mutex<std::collections::BTreeSet<u64>>,
}

#[test]
fn reload_torture_100_swaps_under_traffic() {
    let dir = scratch("reload-torture");
    let sets = [
        ruleset(&dir, "a.yaml", RULES_A),
        ruleset(&dir, "b.yaml", RULES_B),
    ];
    put(&dir.join("rules.yaml"), RULES_A);
    // Endless random flows, paced so the 2-core CI machine keeps up; stopped by the test.
    let cfg_path = config(&dir, "      rate: { pps: 400000 }");
    let cfg = pipeline::config::load(&cfg_path).unwrap();
    let prepared = daemon::prepare(cfg).unwrap();
    let sets = Arc::new(sets);
    let tally = Arc::new(Tally::default());
    let observer: BurstObserver = {
        let sets = Arc::clone(&sets);
        let tally = Arc::clone(&tally);
        Arc::new(move |_q, burst, metas, verdicts, generation| {
            // Generation g is rule set A when even, B when odd (the test alternates, starting
            // from A at generation 0, and every reload must succeed).
            let set = &sets[(generation % 2) as usize];
            let other = &sets[((generation + 1) % 2) as usize];
            let mut bad = 0;
            let mut disc = 0;
            for (i, (desc, _)) in burst.frames().enumerate() {
                let v = verdicts[i];
                if v.reason == Some(DropReason::ParseError) {
                    continue;
                }
                let key = key_from_meta(&metas[i], desc.port);
                let want = set.classify_linear(&key);
                let got = (v.rule != ACL_NO_MATCH).then_some(v.rule as usize);
                if other.classify_linear(&key) != want {
                    disc += 1;
                }
                if got != want || v.action != action_of(set, want) {
                    bad += 1;
                    if let Ok(mut f) = tally.first_mismatch.lock() {
                        f.get_or_insert_with(|| {
                            format!(
                                "gen {generation}: key {key:?} got {got:?}/{:?} want {want:?}",
                                v.action
                            )
                        });
                    }
                }
            }
            tally
                .packets
                .fetch_add(burst.len() as u64, Ordering::Relaxed);
            tally.bursts.fetch_add(1, Ordering::Relaxed);
            tally.mismatches.fetch_add(bad, Ordering::Relaxed);
            tally.discriminating.fetch_add(disc, Ordering::Relaxed);
            if let Ok(mut g) = tally.generations.lock() {
                g.insert(generation);
            }
        })
    };
    let mut spec = prepared.cpu_spec();
    spec.observer = Some(observer);
    let shared = CpuShared::new(&spec);
    let ports = daemon::open_ports(&prepared.cfg).unwrap();
    let state = ControlState::new(None);
    let reloader = Reloader::new(
        &cfg_path,
        Arc::clone(&prepared.pipeline),
        Arc::clone(&state),
    );
    let mut old_tables = Vec::new();

    let outcome = std::thread::scope(|s| {
        let run = s.spawn(|| cpu::run(&spec, &shared, ports.rx, ports.tx));
        // Let traffic flow before the first swap.
        while tally.packets.load(Ordering::Relaxed) < 2000 {
            std::thread::sleep(Duration::from_millis(5));
        }
        for i in 1..=100u64 {
            old_tables.push(Arc::downgrade(&prepared.pipeline.acl().unwrap()));
            put(
                &dir.join("rules.yaml"),
                if i % 2 == 1 { RULES_B } else { RULES_A },
            );
            let r = reloader.reload("test").expect("valid rule set must reload");
            assert_eq!(r.generation, i);
            assert_eq!(prepared.pipeline.generation(), i);
            // Traffic between swaps: at least one more burst per swap, on average.
            let seen = tally.bursts.load(Ordering::Relaxed);
            let t = std::time::Instant::now();
            while tally.bursts.load(Ordering::Relaxed) < seen + 2
                && t.elapsed() < Duration::from_millis(200)
            {
                std::thread::sleep(Duration::from_micros(500));
            }
        }
        shared.stop.store(true, Ordering::Relaxed);
        run.join().unwrap()
    });
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);

    let packets = tally.packets.load(Ordering::Relaxed);
    let mismatches = tally.mismatches.load(Ordering::Relaxed);
    let gens = tally.generations.lock().unwrap().clone();
    eprintln!(
        "{packets} packets in {} bursts over {} generations, {} discriminating, {mismatches} mismatches",
        tally.bursts.load(Ordering::Relaxed),
        gens.len(),
        tally.discriminating.load(Ordering::Relaxed)
    );
    assert_eq!(
        mismatches,
        0,
        "first: {:?}",
        tally.first_mismatch.lock().unwrap()
    );
    // The check had teeth: the two sets disagree on many packets, and traffic ran under most
    // of the 101 generations.
    assert!(tally.discriminating.load(Ordering::Relaxed) > packets / 4);
    assert!(
        gens.len() >= 50,
        "traffic under only {} generations",
        gens.len()
    );
    assert_eq!(state.reload_ok.load(Ordering::Relaxed), 100);
    assert_eq!(state.reload_failed.load(Ordering::Relaxed), 0);

    // No packet lost: every received frame was processed (passed / mirrored / to host) or
    // dropped with a counted reason, and the observer saw each one.
    let mut rx = 0;
    for c in &shared.counters {
        let processed = c.passed.get() + c.mirrored.get() + c.to_host.get();
        assert_eq!(c.rx_frames.get(), processed + c.total_drops());
        assert_eq!(c.drop_count(DropReason::RingFull), 0);
        rx += c.rx_frames.get();
    }
    assert_eq!(rx, packets);

    // Old tables were freed once the last worker dropped them.
    let live = old_tables.iter().filter(|w| w.upgrade().is_some()).count();
    assert_eq!(live, 0, "{live} old rule tables still alive after the run");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn invalid_reload_keeps_the_running_rules() {
    let dir = scratch("reload-invalid");
    put(&dir.join("rules.yaml"), RULES_A);
    let cfg_path = config(&dir, "      count: 1");
    let cfg = pipeline::config::load(&cfg_path).unwrap();
    let prepared = daemon::prepare(cfg).unwrap();
    let state = ControlState::new(None);
    let reloader = Reloader::new(
        &cfg_path,
        Arc::clone(&prepared.pipeline),
        Arc::clone(&state),
    );
    let before = prepared.pipeline.acl().unwrap();

    // Line 3 has a prefix length no IPv4 address has.
    put(
        &dir.join("rules.yaml"),
        "rules:\n  - { name: ok, proto: udp, action: drop }\n  - { name: bad, src: 10.0.0.0/33, action: drop }\n",
    );
    let e = reloader.reload("test").unwrap_err();
    assert_eq!(e.file, dir.join("rules.yaml"));
    assert_eq!(e.line, 3, "{e}");
    assert!(e.reason.contains("src") && e.reason.contains("33"), "{e}");
    assert_eq!(state.reload_failed.load(Ordering::Relaxed), 1);
    assert_eq!(state.reload_ok.load(Ordering::Relaxed), 0);
    assert_eq!(prepared.pipeline.generation(), 0);
    assert!(Arc::ptr_eq(&before, &prepared.pipeline.acl().unwrap()));

    // A broken config file is rejected too, naming the config file and line.
    let good_cfg = std::fs::read_to_string(&cfg_path).unwrap();
    put(
        &cfg_path,
        &good_cfg.replace("count: 2,", "count: 2, bogus: 1,"),
    );
    let e = reloader.reload("test").unwrap_err();
    assert_eq!(e.file, cfg_path);
    assert!(e.line > 0 && e.reason.contains("bogus"), "{e}");
    assert_eq!(state.reload_failed.load(Ordering::Relaxed), 2);
    // ... and so is a config whose stages changed (that needs a restart).
    put(&cfg_path, &good_cfg.replace("  - count\n", ""));
    let e = reloader.reload("test").unwrap_err();
    assert!(e.reason.contains("restart"), "{e}");
    assert_eq!(state.reload_failed.load(Ordering::Relaxed), 3);

    // Fixing the files makes the next reload succeed.
    put(&cfg_path, &good_cfg);
    put(&dir.join("rules.yaml"), RULES_B);
    let r = reloader.reload("test").unwrap();
    assert_eq!((r.generation, r.rules), (1, 4));
    assert_eq!(state.reload_ok.load(Ordering::Relaxed), 1);
    assert_eq!(prepared.pipeline.acl().unwrap().generation, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Routes of the route-reload test: 4 prefixes, both families.
const ROUTES4: &str = "routes:
  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:01', port: out }
  - { prefix: 10.1.0.0/16, via: '02:00:00:00:00:02', port: out }
  - { prefix: 192.168.0.0/16, via: '02:00:00:00:00:03', port: out }
  - { prefix: '2001:db8::/32', via: '02:00:00:00:00:04', port: out }
";

fn route_config(dir: &Path, control: &str) -> PathBuf {
    let cfg = dir.join("cfg.yaml");
    put(
        &cfg,
        &format!(
            "ports:
  - name: wire
    gen: {{ count: 1, size: 64 }}
  - name: out
    pcap: {{ tx: {{ path: {} }} }}
queues: {{ count: 1, burst: 32, ring_slots: 64 }}
pipeline:
  - parse
  - route: {{ routes: r.routes.yaml }}
  - count
executor: {{ kind: cpu }}
metrics: {{ enabled: false }}
{control}",
            dir.join("out.pcap").display()
        ),
    );
    cfg
}

/// An emptied or half-written route file would route nothing (every frame `no_route`): the
/// reload is refused as the ACL's is, naming the file and both counts, the table in force
/// stays, and the failure is counted; `control.allow_rule_shrink: true` lets it through.
#[test]
fn a_reload_to_an_emptied_or_truncated_route_file_is_refused() {
    let dir = scratch("reload-route-shrink");
    let routes = dir.join("r.routes.yaml");
    put(&routes, ROUTES4);
    let cfg_path = route_config(&dir, "");
    let cfg = pipeline::config::load(&cfg_path).unwrap();
    let prepared = daemon::prepare(cfg).unwrap();
    let state = ControlState::new(None);
    let reloader = Reloader::new(
        &cfg_path,
        Arc::clone(&prepared.pipeline),
        Arc::clone(&state),
    );
    let gen0 = prepared.pipeline.params_generation();
    let refused = |text: &str, new: usize, failures: u64| {
        put(&routes, text);
        let e = reloader.reload("test").unwrap_err();
        assert_eq!(e.file, routes, "{e}");
        assert!(
            e.reason.contains(&format!("{new} routes"))
                && e.reason.contains("4 are in force")
                && e.reason.contains("allow_rule_shrink"),
            "{e}"
        );
        assert_eq!(state.reload_failed.load(Ordering::Relaxed), failures);
        assert_eq!(state.reload_ok.load(Ordering::Relaxed), 0);
        assert_eq!(prepared.pipeline.params_generation(), gen0, "{e}");
    };
    refused("routes: []\n", 0, 1);
    refused("routes:\n", 0, 2);
    // Truncated: 1 of the 4 routes left.
    refused(
        &ROUTES4[..ROUTES4.find("  - { prefix: 10.1").unwrap()],
        1,
        3,
    );
    // Half of them is not a likely truncation: published.
    let half: String = ROUTES4.lines().take(3).map(|l| format!("{l}\n")).collect();
    put(&routes, &half);
    let r = reloader.reload("test").unwrap();
    assert_eq!(r.routes, vec![(2, 0, 1)]);
    // Allowed by the config: an empty table is published.
    put(&routes, "routes: []\n");
    route_config(&dir, "control: { allow_rule_shrink: true }\n");
    let r = reloader.reload("test").unwrap();
    assert_eq!(r.routes, vec![(0, 0, 2)]);
    assert_eq!(state.reload_ok.load(Ordering::Relaxed), 2);
    assert_eq!(state.reload_failed.load(Ordering::Relaxed), 3);
    let _ = std::fs::remove_dir_all(&dir);
}
