//! `pktwarp bench`: the GPU data path's measurements (BENCHMARKS.md, "GPU data path") in one run,
//! one table at the end (and JSON + markdown under `--out`). Builds nothing; needs a GPU but for
//! the fronthaul CPU table, which runs without one (the rest is then skipped, exit status 3 when
//! any of it was asked for).
//!
//! 1. Stage throughput on device-resident frames (parse + acl + count) per ClassBench set, against
//!    the CPU executor's pipeline (`pipeline::stage::run::Pipeline::run_burst`) on every core of
//!    this machine over the same frames.
//! 2. End to end through the ingest path (host bursts -> pinned staging -> DMA -> ring ->
//!    persistent kernel -> verdicts read back by the host), 64 B and 1518 B frames, against 400 GbE
//!    line rate and the host->device copy bandwidth measured in the same run.
//! 3. Latency per burst at light load (one burst in flight; graph mode: one graph's worth),
//!    bursts of 16 / 32 / 256, modes persistent / launch / graph, placements device / mapped.
//!    Each burst is handed over a random time (`--latency-gap-us`) after the last one's verdicts
//!    arrived, so arrivals do not lock to the persistent kernel's poll rounds (a closed loop's
//!    latency moves by a poll round trip with the host's own time between bursts).
//! 4. Fronthaul decompression (`fronthaul`, run first): decompressed PRBs per second of the
//!    composed `[fronthaul]` kernel over device-resident O-RAN frames (BFP9, BFP14), against the
//!    Rust stage on one thread; the GPU's slot grids checked equal to the CPU's. Before it, with
//!    or without a GPU (`fronthaul_cpu`): the whole Rust stage on one thread against the plain
//!    scalar decoder over the same PRBs, median of `--fh-rounds` rounds.
//!
//! The modules, in that order: `inputs` (rule sets and trace frames), `throughput` (1, and the
//! multi-GPU scaling of `--devices`), `end_to_end` (2), `latency` (one latency configuration
//! timed) and `latency_tables` (3: the tables built from those).

mod end_to_end;
mod fronthaul;
mod fronthaul_cpu;
mod inputs;
mod l3fwd;
mod latency;
mod latency_tables;
mod throughput;

use anyhow::Context as _;
use serde_json::json;
use std::path::PathBuf;

use inputs::set_paths;

#[derive(clap::Args)]
pub struct Args {
    /// Folder with the ClassBench rule files and traces (`<set>` and `<set>_trace`, `.gz` too).
    #[arg(long, default_value = "../shared/data/classbench")]
    pub classbench: PathBuf,
    /// Rule sets for stage throughput (the first one is used for end to end and latency).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "acl1_10K,fw1_10K,ipc1_10K"
    )]
    pub sets: Vec<String>,
    /// Frames for stage throughput (the trace is repeated to this many).
    #[arg(long, default_value_t = 8 << 20)]
    pub frames: usize,
    /// CPU threads for the CPU figure (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seconds per end-to-end configuration.
    #[arg(long, default_value_t = 2.0)]
    pub e2e_seconds: f64,
    /// Queues (each fed by its own host thread) for end to end, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,12")]
    pub e2e_queues: Vec<usize>,
    /// Persistent CTAs per queue for end to end (16: at 64 B one CTA's burst is mostly PCIe
    /// round trips, so more bursts in flight per queue keep the link busy; 12 queues x 16 CTAs
    /// fit on an H200 at two CTAs per SM).
    #[arg(long, default_value_t = 16)]
    pub e2e_ctas: u32,
    /// Threads per CTA of the l3fwd end to end (a multiple of 32; 128 puts two of the composed
    /// kernel's CTAs on an SM, whose registers hold one CTA of 256).
    #[arg(long, default_value_t = 256)]
    pub l3fwd_threads: u32,
    /// End to end: copy large frames into mapped rings with plain (cached) stores instead of the
    /// default non-temporal ones (executor option `nt_stores: false`), for comparison.
    #[arg(long)]
    pub cached_stores: bool,
    /// Bursts timed per latency configuration.
    #[arg(long, default_value_t = 5000)]
    pub latency_bursts: usize,
    /// CPU core the latency host thread (submit, then poll for the verdicts) is pinned to, as
    /// a DPDK lcore is. Default: the last core the process may use.
    #[arg(long)]
    pub latency_cpu: Option<usize>,
    /// Leave the latency host thread unpinned (the scheduler may move it between cores).
    #[arg(long, conflicts_with = "latency_cpu")]
    pub latency_unpinned: bool,
    /// Latency: the host waits a random time, uniform in [0, this] microseconds, after a
    /// burst's verdicts before it hands over the next (light load: a burst arrives at any point
    /// of the kernel's poll, which reads host memory in rounds of one PCIe round trip, ~2 us).
    /// 0: the next burst goes at once (a closed loop, whose latency then depends on how long
    /// the host takes between bursts, as that sets where in a poll round the burst lands).
    #[arg(long, default_value_t = 4.0)]
    pub latency_gap_us: f64,
    /// Skip parts: any of throughput, e2e, l3fwd, latency, fronthaul (skipping every part that
    /// reads the ClassBench sets leaves `--classbench` unread).
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
    /// Folder for bench.json and bench.md.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// CUDA device index.
    #[arg(long, default_value_t = 0)]
    pub device: u32,
    /// Multi-GPU scaling: parse + acl + count throughput (first set) on the first GPU of this
    /// list alone, then on every entry at once (one executor per entry, `0,0` = two executors on
    /// GPU 0), in the same run; prints the scaling ratio.
    #[arg(long, value_delimiter = ',')]
    pub devices: Vec<u32>,
    /// Fronthaul decompression: eAxCs of the generated carrier (1..=64).
    #[arg(long, default_value_t = 32)]
    pub fh_eaxcs: usize,
    /// Fronthaul decompression: slots generated (1..=32: the GPU ring holds them all).
    #[arg(long, default_value_t = 32)]
    pub fh_slots: u64,
    /// Fronthaul compression widths (BFP), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "9,14")]
    pub fh_widths: Vec<u8>,
    /// Fronthaul on one CPU thread: timed rounds (the table gives their median).
    #[arg(long, default_value_t = 7)]
    pub fh_rounds: usize,
}

/// The markdown table the bench prints as it goes and writes to `bench.md`.
struct Table {
    rows: Vec<String>,
}

impl Table {
    fn line(&mut self, s: String) {
        outln_or_drop!("the bench table"; "{s}");
        self.rows.push(s);
    }
}

/// The JSON object written to `bench.json`.
type Json = serde_json::Map<String, serde_json::Value>;

pub fn run(a: Args) -> anyhow::Result<i32> {
    if !(a.latency_gap_us.is_finite() && (0.0..=1e6).contains(&a.latency_gap_us)) {
        anyhow::bail!(
            "--latency-gap-us: must be 0 ..= 1000000 microseconds, got {}",
            a.latency_gap_us
        );
    }
    fronthaul::check_args(&a)?;
    let skip = |p: &str| a.skip.iter().any(|s| s == p);
    let info = match pipeline::internal::executor::gpu::probe(a.device) {
        Ok(i) => i,
        Err(why) => {
            errln!("pktwarp bench: no usable GPU: {why}");
            if skip("fronthaul") {
                return Ok(3);
            }
            return cpu_only(&a);
        }
    };
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let cpu_model = cpu_model();
    outln!("the bench table";
        "bench: {} ({} SMs, driver {}), CPU {} x {threads} threads",
        info.name, info.multiprocessors, info.driver_version, cpu_model
    );
    let mut md = Table { rows: Vec::new() };
    let mut js = Json::new();
    js.insert(
        "machine".into(),
        json!({"gpu": info.name, "sms": info.multiprocessors, "driver": info.driver_version,
               "cpu": cpu_model, "cpu_threads": threads}),
    );

    // Host->device copy bandwidth first: no persistent kernel may run while its buffers are freed.
    let htod = pipeline::internal::executor::gpu::measure_htod(a.device, 256 << 20, 10)?;
    outln!("the bench table";
        "host->device copy from pinned memory: {:.1} GB/s",
        htod / 1e9
    );
    js.insert("htod_bytes_per_s".into(), json!(htod));

    if !skip("fronthaul") {
        let cpu = fronthaul_cpu::section(&a, &mut md, &mut js)?;
        fronthaul::section(&a, &cpu, &mut md, &mut js)?;
    }
    let reads_sets =
        GPU_PARTS.iter().any(|p| !skip(p)) || (a.devices.len() > 1 && !skip("scaling"));
    if reads_sets {
        let (rules0, trace0) = set_paths(&a.classbench, &a.sets[0])?;
        if !skip("throughput") {
            throughput::section(&a, threads, &mut md, &mut js)?;
        }
        if !skip("e2e") {
            end_to_end::section(&a, &rules0, &trace0, htod, &mut md, &mut js)?;
        }
        if !skip("l3fwd") {
            l3fwd::section(&a, &trace0, &mut md, &mut js)?;
        }
        if !skip("latency") {
            latency_tables::section(&a, &rules0, &trace0, &mut md, &mut js)?;
        }
        if a.devices.len() > 1 && !skip("scaling") {
            throughput::scaling_section(&a, &mut md, &mut js)?;
        }
    }

    write_out(&a, &md, &js)?;
    Ok(0)
}

/// The parts that read the ClassBench sets, each on the GPU.
const GPU_PARTS: [&str; 4] = ["throughput", "e2e", "l3fwd", "latency"];

/// Without a GPU: the fronthaul CPU table alone; exit status 3 when a GPU part was asked for.
fn cpu_only(a: &Args) -> anyhow::Result<i32> {
    let mut md = Table { rows: Vec::new() };
    let mut js = Json::new();
    let cpu = cpu_model();
    outln!("the bench table"; "bench: no GPU: the fronthaul CPU table only, CPU {cpu}");
    js.insert("machine".into(), json!({ "cpu": cpu }));
    fronthaul_cpu::section(a, &mut md, &mut js)?;
    write_out(a, &md, &js)?;
    Ok(if GPU_PARTS.iter().all(|p| a.skip.iter().any(|s| s == p)) {
        0
    } else {
        3
    })
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default()
}

/// bench.json and bench.md under `--out`.
fn write_out(a: &Args, md: &Table, js: &Json) -> anyhow::Result<()> {
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
        std::fs::write(dir.join("bench.json"), serde_json::to_vec_pretty(js)?)
            .with_context(|| format!("{}", dir.display()))?;
        std::fs::write(dir.join("bench.md"), md.rows.join("\n") + "\n")
            .with_context(|| format!("{}", dir.display()))?;
    }
    Ok(())
}
