//! Hot reload at ClassBench scale: how long a reload of a 10K-rule set takes (re-read the config,
//! parse, validate and compile the tables aside, publish with one swap), and what reloading
//! every 100 ms under traffic does to throughput. The rule file alternates between acl1_10K and
//! fw1_10K while a `gen` port replays the acl1_10K header trace into 2 queues (parse + acl +
//! count, CPU executor).
//!
//! `cargo bench -p pipeline --bench control_reload` (ROUNDS, FRAMES override). Needs
//! ../shared/data/classbench. Results: BENCHMARKS.md, control-plane section.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pipeline::control::ControlState;
use pipeline::daemon;
use pipeline::internal::control::reload::Reloader;
use pipeline::internal::executor::cpu::{self, CpuShared};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn data(name: &str) -> PathBuf {
    flow_rules::input::require_data(&format!("classbench/{name}"))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One run to the end of the trace replay; with `reload_every`, a reload each period
/// (alternating the two rule sets). Returns (Mpps, reload durations in ms).
fn run(
    cfg: &Path,
    dir: &Path,
    sets: &[String; 2],
    reload_every: Option<Duration>,
) -> (f64, Vec<f64>) {
    std::fs::write(dir.join("rules.txt"), &sets[0]).expect("write rules");
    let prepared = daemon::prepare(pipeline::config::load(cfg).expect("config")).expect("prepare");
    let spec = prepared.cpu_spec();
    let shared = CpuShared::new(&spec);
    let ports = daemon::open_ports(&prepared.cfg).expect("ports");
    let reloader = Reloader::new(cfg, Arc::clone(&prepared.pipeline), ControlState::new(None));
    let done = AtomicBool::new(false);
    let mut took = Vec::new();
    let out = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let o = cpu::run(&spec, &shared, ports.rx, ports.tx);
            done.store(true, Ordering::Release);
            o
        });
        if let Some(every) = reload_every {
            let mut i = 1;
            while !done.load(Ordering::Acquire) {
                std::thread::sleep(every);
                let tmp = dir.join("rules.tmp");
                std::fs::write(&tmp, &sets[i % 2]).expect("write rules");
                std::fs::rename(&tmp, dir.join("rules.txt")).expect("rename");
                let t = Instant::now();
                reloader.reload("bench").expect("reload");
                took.push(t.elapsed().as_secs_f64() * 1e3);
                i += 1;
            }
        }
        h.join().expect("executor thread")
    });
    let rx: u64 = shared.counters.iter().map(|c| c.rx_frames.get()).sum();
    (rx as f64 / out.elapsed.as_secs_f64() / 1e6, took)
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let frames = env_u64("FRAMES", if quick { 20_000 } else { 4_000_000 });
    let rounds = env_u64("ROUNDS", if quick { 1 } else { 5 });
    let dir = std::env::temp_dir().join(format!("pktwarp-bench-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let sets = [
        std::fs::read_to_string(data("acl1_10K")).expect("acl1_10K"),
        std::fs::read_to_string(data("fw1_10K")).expect("fw1_10K"),
    ];
    let cfg = dir.join("cfg.yaml");
    std::fs::write(
        &cfg,
        format!(
            "ports:
  - name: wire
    gen: {{ trace: {}, count: {frames}, size: 64 }}
queues: {{ count: 2, burst: 32 }}
pipeline:
  - parse
  - acl: {{ rules: rules.txt, format: classbench }}
  - count
executor: {{ kind: cpu }}
metrics: {{ enabled: false }}
",
            data("acl1_10K_trace").display()
        ),
    )
    .expect("write config");
    run(&cfg, &dir, &sets, None); // warm-up
    let (mut base, mut with, mut ratios, mut took) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (b, _) = run(&cfg, &dir, &sets, None);
        let (w, t) = run(&cfg, &dir, &sets, Some(Duration::from_millis(100)));
        base.push(b);
        with.push(w);
        ratios.push(w / b);
        took.extend(t);
    }
    let n = took.len();
    let max = took.iter().cloned().fold(0.0, f64::max);
    println!("control_reload: {frames} frames of acl1_10K_trace x {rounds} rounds, 2 queues, parse+acl+count");
    println!("reload acl1_10K <-> fw1_10K: {n} reloads, median {:.1} ms, max {max:.1} ms (config + parse + compile aside + swap)", median(&mut took));
    println!(
        "throughput: no reloads {:.3} Mpps, reload every 100 ms {:.3} Mpps, paired ratio {:.3}",
        median(&mut base),
        median(&mut with),
        median(&mut ratios)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
