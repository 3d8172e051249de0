//! Does scraping /metrics slow the data path? Runs the CPU executor (gen port, 64 B frames,
//! parse + acl + count, 2 queues) to the end of a fixed frame count, alternating runs without
//! a scraper and with one scraping /metrics over HTTP at several intervals (1 s, 100 ms, and
//! back to back), and prints the median Mpps of each mode and its ratio to "no scrape".
//!
//! `cargo bench -p pipeline --bench control_scrape` (FRAMES and ROUNDS env vars override the
//! defaults). Results: BENCHMARKS.md, control-plane section.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pipeline::control::{Control, ControlSetup};
use pipeline::daemon;
use pipeline::internal::executor::cpu::{self, CpuShared};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn scrape(addr: SocketAddr) -> usize {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return 0;
    };
    let _ = write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut body = Vec::new();
    let _ = s.read_to_end(&mut body);
    body.len()
}

/// One run: frames per second, scrapes done, mean scrape round trip.
fn run(cfg_path: &std::path::Path, interval: Option<Duration>) -> (f64, u64, Duration) {
    let cfg = pipeline::config::load(cfg_path).expect("bench config");
    let prepared = daemon::prepare(cfg).expect("prepare");
    let spec = prepared.cpu_spec();
    let shared = CpuShared::new(&spec);
    let ports = daemon::open_ports(&prepared.cfg).expect("ports");
    let control = Control::start(
        &prepared,
        &shared,
        &ports.rx_names,
        ControlSetup {
            install_signals: false,
            probe: None,
            on_fatal: None,
        },
    )
    .expect("control");
    let addr = control.metrics_addr().expect("metrics enabled");
    let done = AtomicBool::new(false);
    let scrapes = AtomicU64::new(0);
    let scrape_ns = AtomicU64::new(0);
    let elapsed = std::thread::scope(|s| {
        if let Some(iv) = interval {
            let (done, scrapes, scrape_ns) = (&done, &scrapes, &scrape_ns);
            s.spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    let t0 = Instant::now();
                    if scrape(addr) > 0 {
                        scrapes.fetch_add(1, Ordering::Relaxed);
                        scrape_ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    }
                    if !iv.is_zero() {
                        std::thread::sleep(iv);
                    }
                }
            });
        }
        // The run's own clock: not the wait for a sleeping scraper to notice the end.
        let out = cpu::run(&spec, &shared, ports.rx, ports.tx);
        done.store(true, Ordering::Relaxed);
        out.elapsed
    });
    control.finish();
    let rx: u64 = shared.counters.iter().map(|c| c.rx_frames.get()).sum();
    let n = scrapes.load(Ordering::Relaxed);
    let mean = Duration::from_nanos(scrape_ns.load(Ordering::Relaxed) / n.max(1));
    (rx as f64 / elapsed.as_secs_f64(), n, mean)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    // `cargo test --benches` runs this with --bench absent: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let frames = env_u64("FRAMES", if quick { 20_000 } else { 3_000_000 });
    let rounds = env_u64("ROUNDS", if quick { 1 } else { 5 });
    let dir = std::env::temp_dir().join(format!("pktwarp-bench-scrape-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let rules = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../configs/rules/inline-filter.rules.yaml"
    );
    let cfg = dir.join("cfg.yaml");
    std::fs::write(
        &cfg,
        format!(
            "ports:
  - name: wire
    gen:
      count: {frames}
      size: 64
      flows: {{ src: 10.0.0.0/8, dst: 192.168.0.0/16, dst_ports: 1-1023 }}
queues: {{ count: 2, burst: 32 }}
pipeline:
  - parse
  - acl: {{ rules: {rules} }}
  - count
executor: {{ kind: cpu }}
metrics: {{ listen: 127.0.0.1:0 }}
"
        ),
    )
    .expect("write config");
    let modes: [(&str, Option<Duration>); 4] = [
        ("no scrape", None),
        ("scrape every 1 s", Some(Duration::from_secs(1))),
        ("scrape every 100 ms", Some(Duration::from_millis(100))),
        ("scrape back to back", Some(Duration::ZERO)),
    ];
    let mut mpps: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut scrapes = vec![(0u64, Duration::ZERO); modes.len()];
    // Warm-up (page cache, allocator, CPU clocks).
    run(&cfg, None);
    for _ in 0..rounds {
        // Interleaved, so drift on the machine hits every mode alike.
        for (i, (_, iv)) in modes.iter().enumerate() {
            let (fps, n, mean) = run(&cfg, *iv);
            mpps[i].push(fps / 1e6);
            scrapes[i].0 += n;
            scrapes[i].1 = mean;
        }
    }
    // Paired ratios: each scrape run against the no-scrape run of the same round, so drift
    // between rounds cancels; the no-scrape spread shows the run-to-run noise.
    let base = median(&mut mpps[0].clone());
    let (lo, hi) = mpps[0]
        .iter()
        .fold((f64::MAX, 0f64), |(l, h), v| (l.min(*v), h.max(*v)));
    println!("control_scrape: {frames} frames x {rounds} rounds, 2 queues, parse+acl+count, 64 B");
    println!("no-scrape runs: median {base:.3} Mpps, min {lo:.3}, max {hi:.3} (run-to-run noise)");
    println!(
        "{:<22} {:>12} {:>13} {:>10} {:>16}",
        "mode", "median Mpps", "paired ratio", "scrapes", "mean scrape RTT"
    );
    for (i, (name, _)) in modes.iter().enumerate() {
        let mut ratios: Vec<f64> = mpps[i].iter().zip(&mpps[0]).map(|(m, b)| m / b).collect();
        let m = median(&mut mpps[i]);
        println!(
            "{:<22} {:>12.3} {:>13.3} {:>10} {:>13.0} us",
            name,
            m,
            median(&mut ratios),
            scrapes[i].0,
            scrapes[i].1.as_secs_f64() * 1e6
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
