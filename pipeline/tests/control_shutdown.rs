//! Shutdown and signals of the control plane, in-process with a fatal hook in place of
//! `process::exit`: the first SIGTERM stops intake (and lets the executor drain and finish), a
//! second one forces exit 130, a drain that outlives `drain_timeout_ms` exits 3, SIGHUP reloads.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pipeline::control::{Control, ControlSetup, FatalHook, EXIT_DRAIN_TIMEOUT, EXIT_FORCED};
use pipeline::daemon;
use pipeline::internal::executor::cpu::{self, CpuShared};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn config(dir: &Path, control: &str) -> PathBuf {
    std::fs::write(
        dir.join("rules.yaml"),
        "rules:\n  - { proto: udp, action: drop }\n",
    )
    .unwrap();
    let p = dir.join("cfg.yaml");
    std::fs::write(
        &p,
        format!(
            "ports:
  - name: wire
    gen: {{ rate: {{ pps: 20000 }}, size: 64 }}
queues: {{ count: 2 }}
pipeline: [parse, {{ acl: {{ rules: rules.yaml }} }}, count]
executor: {{ kind: cpu }}
metrics: {{ enabled: false }}
control: {{ {control} }}
"
        ),
    )
    .unwrap();
    p
}

fn hook() -> (FatalHook, Arc<Mutex<Vec<i32>>>) {
    let codes = Arc::new(Mutex::new(Vec::new()));
    let c = Arc::clone(&codes);
    (Arc::new(move |code| c.lock().unwrap().push(code)), codes)
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn signals_reload_then_drain_then_force() {
    use signal_hook::consts::{SIGHUP, SIGTERM};
    let dir = scratch("ctl-signals");
    let cfg = pipeline::config::load(&config(&dir, "drain_timeout_ms: 60000")).unwrap();
    let prepared = daemon::prepare(cfg).unwrap();
    let spec = prepared.cpu_spec();
    let shared = CpuShared::new(&spec);
    let ports = daemon::open_ports(&prepared.cfg).unwrap();
    let (on_fatal, codes) = hook();
    let control = Control::start(
        &prepared,
        &shared,
        &ports.rx_names,
        ControlSetup {
            install_signals: true,
            probe: None,
            on_fatal: Some(on_fatal),
        },
    )
    .unwrap();
    std::thread::scope(|s| {
        // An endless paced generator: only a stop ends this run.
        let run = s.spawn(|| cpu::run(&spec, &shared, ports.rx, ports.tx));
        wait_until("traffic", || shared.rx_total.load(Ordering::Relaxed) > 100);

        signal_hook::low_level::raise(SIGHUP).unwrap();
        wait_until("SIGHUP reload", || {
            control.state().reload_ok.load(Ordering::Relaxed) == 1
        });
        assert_eq!(prepared.pipeline.generation(), 1);

        signal_hook::low_level::raise(SIGTERM).unwrap();
        wait_until("intake stopped", || shared.stop.load(Ordering::Relaxed));
        assert!(control.state().shutting_down.load(Ordering::Relaxed));
        let out = run.join().unwrap();
        assert!(out.errors.is_empty(), "{:?}", out.errors);
    });
    // Drained: everything received was processed or dropped with a reason.
    for c in &shared.counters {
        let done = c.passed.get() + c.mirrored.get() + c.to_host.get() + c.total_drops();
        assert_eq!(c.rx_frames.get(), done);
    }
    assert!(codes.lock().unwrap().is_empty(), "no forced exit yet");
    // A second stop signal forces the exit.
    signal_hook::low_level::raise(SIGTERM).unwrap();
    wait_until("forced exit", || !codes.lock().unwrap().is_empty());
    assert_eq!(*codes.lock().unwrap(), vec![EXIT_FORCED]);
    control.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn drain_outliving_its_timeout_exits_3() {
    let dir = scratch("ctl-drain");
    let cfg = pipeline::config::load(&config(&dir, "drain_timeout_ms: 150")).unwrap();
    let prepared = daemon::prepare(cfg).unwrap();
    // No executor runs: the "drain" never finishes, as with a wedged queue.
    let shared = CpuShared::new(&prepared.cpu_spec());
    let (on_fatal, codes) = hook();
    let control = Control::start(
        &prepared,
        &shared,
        &[],
        ControlSetup {
            install_signals: false,
            probe: None,
            on_fatal: Some(on_fatal),
        },
    )
    .unwrap();
    let t = Instant::now();
    control.request_stop();
    wait_until("drain timeout", || !codes.lock().unwrap().is_empty());
    let waited = t.elapsed();
    assert_eq!(*codes.lock().unwrap(), vec![EXIT_DRAIN_TIMEOUT]);
    assert!(shared.stop.load(Ordering::Relaxed));
    assert!(
        waited >= Duration::from_millis(150) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    control.finish();
    let _ = std::fs::remove_dir_all(&dir);
}
