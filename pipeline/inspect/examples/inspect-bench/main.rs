//! The whole inspection (per-buffer prefilter + every candidate rule's full check) with the
//! whole loaded ET Open 2019 set, against Hyperscan block mode as the prefilter of the same
//! candidate lists and rule checks, on one core and on N threads (each with its own scratch),
//! for 64 / 512 / 1460-byte payloads with planted hits at a small rate. Before timing, every
//! engine's candidate list of every frame must be equal (exit 1 otherwise).
//!
//! ```text
//! cargo run --release -p pktwarp-inspect --features hyperscan --example inspect-bench -- \
//!     [--threads N (default: all cores)] [--sizes 64,512,1460] [--secs 2] [--mib 16]
//!     [--hit-rate 0.01] [--http-share 0.1] [--seed 1] [--rules DIR] [--pcaps DIR]
//!     [--dump DIR] [--dump-only] [--flow-rules]
//! ```
//!
//! `--flow-rules` adds the skipped rules that need only the flow table (3,715 of ET Open 2019:
//! `flow:established,...`, flowbits, threshold), checked without those conditions: the prefilter
//! and rule-check load the stage will carry once the flow table exists (4,156 rules).
//!
//! `--rules` defaults to `ids/etopen-2019` and `--pcaps` to `pcaps` under the shared data
//! folder (`$PKTWARP_DATA`); `--dump DIR` writes each size's frames and the compiled rules
//! for the GPU probe (`dump.rs`, `tools/gpu-probes/inspect_bench_gpu.cu`) into `DIR/SIZE/`.
//! Prints one Markdown table: payload Gbit/s and Mpps per engine, threads and size, and each
//! pktwarp row's ratio to the Hyperscan row of the same threads, size and scope.

#[path = "../../tests/common/corpus.rs"]
mod corpus;
mod dump;
mod engine;
mod traffic;

use std::path::PathBuf;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use engine::{Prefilter, Rules, Scratch};
use pktwarp_inspect::eval::Frame;
use pktwarp_inspect::rules::{load_dir, LoadOptions, Variables};

struct Args {
    threads: usize,
    sizes: Vec<usize>,
    secs: f64,
    mib: usize,
    hit_rate: f64,
    http_share: f64,
    seed: u64,
    rules: PathBuf,
    pcaps: PathBuf,
    dump: Option<PathBuf>,
    dump_only: bool,
    flow_rules: bool,
}

fn parse_args() -> Result<Args, String> {
    let data = flow_rules::input::data_dir();
    let mut a = Args {
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        sizes: vec![64, 512, 1460],
        secs: 2.0,
        mib: 16,
        hit_rate: 0.01,
        http_share: 0.1,
        seed: 1,
        rules: data.join("ids/etopen-2019"),
        pcaps: data.join("pcaps"),
        dump: None,
        dump_only: false,
        flow_rules: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "--dump-only" || k == "--flow-rules" {
            a.dump_only |= k == "--dump-only";
            a.flow_rules |= k == "--flow-rules";
            continue;
        }
        let v = it.next().ok_or_else(|| format!("{k}: needs a value"))?;
        let num = |what: &str| -> Result<f64, String> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("{what}: `{v}` is not a number >= 0"))
        };
        match k.as_str() {
            "--threads" => a.threads = num("--threads")? as usize,
            "--size" | "--sizes" => {
                a.sizes = v
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse::<usize>()
                            .ok()
                            .filter(|n| (1..=65535).contains(n))
                    })
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| format!("{k}: `{v}`: sizes 1 ..= 65535, comma separated"))?
            }
            "--secs" => a.secs = num("--secs")?,
            "--mib" => a.mib = num("--mib")? as usize,
            "--hit-rate" => a.hit_rate = num("--hit-rate")?.min(1.0),
            "--http-share" => a.http_share = num("--http-share")?.min(1.0),
            "--seed" => a.seed = num("--seed")? as u64,
            "--rules" => a.rules = PathBuf::from(v),
            "--pcaps" => a.pcaps = PathBuf::from(v),
            "--dump" => a.dump = Some(PathBuf::from(v)),
            _ => return Err(format!("unknown option {k} (see the example's header)")),
        }
    }
    if a.threads == 0 || a.mib == 0 || a.sizes.is_empty() {
        return Err("--threads, --mib and --sizes must be at least 1".into());
    }
    Ok(a)
}

/// The scope a row times.
#[derive(Clone, Copy, PartialEq)]
enum Scope {
    Prefilter,
    Whole,
}

/// The calling thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID): on a loaded machine wall
/// time counts other processes' turns on the core; the two agree on an idle one.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the one timespec it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What one timed run did: frames, payload bytes, wall seconds (the slowest thread), CPU
/// seconds (all threads).
#[derive(Default)]
struct Done {
    frames: u64,
    bytes: u64,
    wall: f64,
    cpu: f64,
}

/// Runs `engines[t]` on thread t over its share of `frames` for `secs`.
fn timed(
    r: &Rules,
    frames: &[Frame],
    engines: Vec<Box<dyn Prefilter + Send + '_>>,
    scope: Scope,
    secs: f64,
) -> Done {
    let n = engines.len();
    let start = Barrier::new(n + 1);
    let deadline = Duration::from_secs_f64(secs);
    std::thread::scope(|sc| {
        let handles: Vec<_> = engines
            .into_iter()
            .enumerate()
            .map(|(t, mut pf)| {
                let (start, part) = (
                    &start,
                    &frames[t * frames.len() / n..(t + 1) * frames.len() / n],
                );
                sc.spawn(move || {
                    let mut s = Scratch::new(r);
                    let (mut done, mut bytes, mut sink) = (0u64, 0u64, 0u64);
                    start.wait();
                    let (t0, c0) = (Instant::now(), thread_cpu_ns());
                    'outer: loop {
                        for chunk in part.chunks(64) {
                            for f in chunk {
                                match scope {
                                    Scope::Prefilter => {
                                        engine::candidates(r, pf.as_mut(), f, &mut s);
                                        sink += s.cands.len() as u64;
                                    }
                                    Scope::Whole => {
                                        sink += u64::from(
                                            engine::inspect(r, pf.as_mut(), f, &mut s).rule,
                                        );
                                    }
                                }
                                bytes += f.payload.len() as u64;
                            }
                            done += chunk.len() as u64;
                            if t0.elapsed() >= deadline {
                                break 'outer;
                            }
                        }
                    }
                    std::hint::black_box(sink);
                    Done {
                        frames: done,
                        bytes,
                        wall: t0.elapsed().as_secs_f64(),
                        cpu: thread_cpu_ns().saturating_sub(c0) as f64 / 1e9,
                    }
                })
            })
            .collect();
        start.wait();
        let mut tot = Done::default();
        for h in handles {
            let d = h.join().unwrap_or_default();
            tot.frames += d.frames;
            tot.bytes += d.bytes;
            tot.wall = tot.wall.max(d.wall);
            tot.cpu += d.cpu;
        }
        tot
    })
}

/// Every frame's candidate list by the image walker, the aho-corasick crate and Hyperscan:
/// equal, or the first difference. Returns (candidates, matching rules, frames with a verdict).
fn check_candidates(r: &Rules, frames: &[Frame]) -> Result<(u64, u64, u64), String> {
    let mut walker = engine::Walker(r);
    let mut ac = engine::Ac::new(r)?;
    #[cfg(feature = "hyperscan")]
    let mut hs = engine::Hs::new(r)?;
    let (mut a, mut b) = (Scratch::new(r), Scratch::new(r));
    let (mut cands, mut hits, mut alerted) = (0u64, 0u64, 0u64);
    for (i, f) in frames.iter().enumerate() {
        let v = engine::inspect(r, &mut walker, f, &mut a);
        cands += a.cands.len() as u64;
        hits += a
            .cands
            .iter()
            .filter(|&&c| pktwarp_inspect::eval::rule_matches(&r.program, c as usize, f))
            .count() as u64;
        alerted += u64::from(v.rule != pktwarp_inspect::eval::image::NO_RULE);
        let others: Vec<(&str, &mut dyn Prefilter)> = vec![
            ("aho-corasick", &mut ac),
            #[cfg(feature = "hyperscan")]
            ("hyperscan", &mut hs),
        ];
        for (name, pf) in others {
            engine::candidates(r, pf, f, &mut b);
            if a.cands != b.cands {
                return Err(format!(
                    "candidate lists differ: frame {i}: {name} gives {} candidates, the image walker {}",
                    b.cands.len(),
                    a.cands.len()
                ));
            }
        }
    }
    Ok((cands, hits, alerted))
}

struct Row {
    size: usize,
    scope: Scope,
    engine: &'static str,
    threads: usize,
    gbit: f64,
    mpps: f64,
    /// Gbit/s per CPU-second of the threads.
    gbit_cpu: f64,
}

fn engines_for<'a>(
    r: &'a Rules,
    name: &str,
    threads: usize,
) -> Result<Vec<Box<dyn Prefilter + Send + 'a>>, String> {
    let mut v: Vec<Box<dyn Prefilter + Send + 'a>> = Vec::new();
    match name {
        "pktwarp" => (0..threads).for_each(|_| v.push(Box::new(engine::Walker(r)))),
        #[cfg(feature = "hyperscan")]
        "hyperscan" => {
            let proto = engine::Hs::new(r)?;
            for _ in 0..threads {
                v.push(Box::new(proto.try_clone()?));
            }
        }
        _ => return Err(format!("engine {name} not built")),
    }
    Ok(v)
}

fn run() -> Result<(), String> {
    let a = parse_args()?;
    for (what, p) in [("--rules", &a.rules), ("--pcaps", &a.pcaps)] {
        if !p.is_dir() {
            return Err(format!(
                "{what} {}: not a folder (set PKTWARP_DATA or pass {what})",
                p.display()
            ));
        }
    }
    if !a.pcaps.join("INDEX.tsv").is_file() {
        return Err(format!(
            "--pcaps {}: no INDEX.tsv (the shared corpus's pcaps folder)",
            a.pcaps.display()
        ));
    }
    let opts = LoadOptions {
        vars: Variables::with(&[("HOME_NET", "any"), ("EXTERNAL_NET", "any")]),
        strict: false,
        flow_table: false,
    };
    let rep = load_dir(&a.rules, &opts).map_err(|e| e.to_string())?;
    let mut set = rep.loaded.clone();
    if a.flow_rules {
        use pktwarp_inspect::rules::{load::Skipped, Blocker, LoadedRule};
        let only_flow = |s: &Skipped| {
            s.error.is_none()
                && !s.blockers.is_empty()
                && s.blockers
                    .iter()
                    .all(|b| matches!(b, Blocker::FlowTable(_)))
        };
        // Checked without their flow conditions (the benchmark's frames carry no connection
        // state, and the GPU image keeps no flowbits / threshold state).
        set.extend(rep.skipped.iter().filter(|s| only_flow(s)).filter_map(|s| {
            let mut rule = s.rule.clone()?;
            rule.flow = None;
            rule.flowbits.clear();
            rule.threshold = None;
            rule.detection_filter = None;
            Some(LoadedRule {
                file: s.file.clone(),
                line: s.line,
                rule,
            })
        }));
    }
    let (rules, refused) = Rules::new(&set)?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "rules{}: {} of {} ({} skipped by the loader, {} not compiled), {} without a fast pattern; {} fast patterns in {} buffers; {} threads; load average {}",
        if a.flow_rules { " (loaded + flow-table-only)" } else { " (loaded)" },
        rules.program.rules.len(),
        rep.total(),
        rep.skipped.len(),
        refused,
        rules.always.len(),
        rules.n_patterns(),
        rules.bufs.len(),
        a.threads,
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    let mut stream = corpus::tcpdump_payloads(&a.pcaps, 4 << 20).concat();
    stream.extend(corpus::http_like(4000, 7).concat());
    let mut rows = Vec::new();
    for &size in &a.sizes {
        if stream.len() <= size {
            return Err(format!(
                "--pcaps {}: too little payload for {size}-byte frames",
                a.pcaps.display()
            ));
        }
        let mix = traffic::Mix {
            size,
            frames: ((a.mib << 20) / size).max(1),
            http_share: a.http_share,
            hit_rate: a.hit_rate,
            seed: a.seed,
        };
        let owned = traffic::frames(&rules, &stream, &mix);
        if let Some(d) = &a.dump {
            dump::dump(&d.join(size.to_string()), &rules, &owned)?;
        }
        if a.dump_only {
            continue;
        }
        let frames: Vec<Frame> = owned.iter().map(|o| o.frame()).collect();
        let (cands, hits, alerted) = check_candidates(&rules, &frames)?;
        let n = frames.len() as f64;
        println!(
            "{size} B: {} frames ({} HTTP, {} planted); candidates equal in every engine: {:.2} a frame, {:.3} matching rules a frame, {:.2}% of frames with a verdict",
            frames.len(),
            owned.iter().filter(|o| o.head.is_some()).count(),
            owned.iter().filter(|o| o.planted).count(),
            cands as f64 / n,
            hits as f64 / n,
            100.0 * alerted as f64 / n
        );
        let mut names = vec!["pktwarp"];
        if cfg!(feature = "hyperscan") {
            names.push("hyperscan");
        }
        let mut counts = vec![1];
        if a.threads > 1 {
            counts.push(a.threads);
        }
        for scope in [Scope::Prefilter, Scope::Whole] {
            for &t in &counts {
                for &name in &names {
                    let d = timed(
                        &rules,
                        &frames,
                        engines_for(&rules, name, t)?,
                        scope,
                        a.secs,
                    );
                    let per = |s: f64| if s > 0.0 { 1.0 / s } else { 0.0 };
                    rows.push(Row {
                        size,
                        scope,
                        engine: name,
                        threads: t,
                        gbit: d.bytes as f64 * 8.0 * per(d.wall) / 1e9,
                        mpps: d.frames as f64 * per(d.wall) / 1e6,
                        gbit_cpu: d.bytes as f64 * 8.0 * per(d.cpu) / 1e9,
                    });
                }
            }
        }
    }
    print_table(&rows);
    Ok(())
}

fn print_table(rows: &[Row]) {
    if rows.is_empty() {
        return;
    }
    println!(
        "\n| payload | scope | engine | threads | Gbit/s | Mpps | / Hyperscan | Gbit/s per CPU-s | / Hyperscan |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for r in rows {
        let peer = rows.iter().find(|p| {
            p.engine == "hyperscan"
                && p.size == r.size
                && p.scope == r.scope
                && p.threads == r.threads
        });
        let ratio = |a: f64, b: Option<f64>| match b {
            Some(b) if r.engine != "hyperscan" && b > 0.0 => format!("{:.2}", a / b),
            _ => "-".into(),
        };
        let (wall, cpu) = (
            ratio(r.gbit, peer.map(|p| p.gbit)),
            ratio(r.gbit_cpu, peer.map(|p| p.gbit_cpu)),
        );
        let scope = match r.scope {
            Scope::Prefilter => "prefilter + candidate lists",
            Scope::Whole => "whole (prefilter + rule checks)",
        };
        println!(
            "| {} B | {scope} | {} | {} | {:.3} | {:.3} | {wall} | {:.3} | {cpu} |",
            r.size, r.engine, r.threads, r.gbit, r.mpps, r.gbit_cpu
        );
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("inspect-bench: {e}");
        std::process::exit(if e.starts_with("candidate lists differ") {
            1
        } else {
            2
        });
    }
}
