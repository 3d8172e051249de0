//! `pktwarp bench`: the GPU measurements of issue 4 in one run, one table at the end (and JSON +
//! markdown under `--out`). Builds nothing; needs a GPU.
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

use anyhow::Context as _;
use pipeline::burst::Burst;
use pipeline::counters::QueueCounters as CpuCounters;
use pipeline::executor::gpu::abi::{self, Desc, Desc8, Verdict};
use pipeline::executor::gpu::{
    measure_htod, AclTablesRef, GpuExecutor, GpuOptions, Mode, PipelineDesc, Placement, SubmitError,
};
use pipeline::stage::acl::AclStage;
use pipeline::stage::{AclSlot, Pipeline, Stage};
use pipeline::verdict::Action;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::verify::{cpu_reference, kernel_image};

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
    /// Skip parts: any of throughput, e2e, latency.
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
}

fn set_paths(dir: &Path, set: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    let pick = |base: String| -> anyhow::Result<PathBuf> {
        for c in [base.clone(), format!("{base}.gz")] {
            let p = dir.join(&c);
            if p.exists() {
                return Ok(p);
            }
        }
        anyhow::bail!("{}: no {base} or {base}.gz", dir.display())
    };
    Ok((pick(set.to_string())?, pick(format!("{set}_trace"))?))
}

/// Frames generated from every line of a trace (once), `size` bytes on the wire.
fn trace_frames(trace: &Path, size: u16) -> anyhow::Result<Burst> {
    let g = pipeline::port::gen::GenOptions {
        trace: Some(trace.to_path_buf()),
        size: pipeline::port::gen::FrameSize::Fixed(size),
        ..Default::default()
    };
    let mut rx = pipeline::port::gen::GenRx::new(&g, 0)?;
    let mut b = Burst::default();
    use pipeline::port::{RxPort, RxStatus};
    loop {
        match rx.rx_burst(&mut b, 4096)? {
            RxStatus::End => break,
            _ => continue,
        }
    }
    Ok(b)
}

fn repeat_to(b: &Burst, n: usize) -> Burst {
    let mut out = Burst::with_capacity(n, b.data.len() * n.div_ceil(b.len().max(1)));
    'outer: loop {
        for (d, f) in b.frames() {
            if out.len() >= n {
                break 'outer;
            }
            out.push(f, *d);
        }
    }
    out
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn load_stage(rules: &Path) -> anyhow::Result<AclStage> {
    let name = rules.to_string_lossy();
    let format = if name.ends_with(".yaml") || name.ends_with(".yml") {
        flow_rules::acl::RuleFormat::Yaml
    } else {
        flow_rules::acl::RuleFormat::ClassBench
    };
    AclStage::load(rules, format, Action::Pass)
}

/// A rule set and its trace as the bulk kernel takes them: the ACL stage, its flat image, the
/// trace's 64 B frames repeated to `--frames`, and their GPU descriptors.
struct BulkSet {
    stage: AclStage,
    n_rules: u32,
    bytes: Vec<u8>,
    frames: Burst,
    descs: Vec<Desc>,
}

impl BulkSet {
    fn load(a: &Args, set: &str) -> anyhow::Result<BulkSet> {
        let (rules, trace) = set_paths(&a.classbench, set)?;
        let stage = load_stage(&rules)?;
        let n_rules = stage.classifier.header().num_rules;
        let bytes = stage.classifier.image_bytes();
        let frames = repeat_to(&trace_frames(&trace, 64)?, a.frames);
        let descs = frames.descs.iter().map(Desc::from).collect();
        Ok(BulkSet {
            stage,
            n_rules,
            bytes,
            frames,
            descs,
        })
    }

    /// parse + acl (this set) + count.
    fn pipeline(&self) -> PipelineDesc<'_> {
        PipelineDesc {
            parse: true,
            acl: Some(AclTablesRef {
                bytes: &self.bytes,
                n_rules: self.n_rules,
            }),
            count: true,
            default_action: self.stage.default as u8,
        }
    }
}

/// A GPU executor for the bulk kernel only (launch mode: no persistent kernel, tiny rings).
fn bulk_executor(device: u32, pd: PipelineDesc<'_>) -> anyhow::Result<GpuExecutor> {
    let opts = GpuOptions {
        mode: Mode::Launch,
        burst_size: 32,
        ring_slots: 4,
        device,
        ..Default::default()
    };
    GpuExecutor::new(opts, pd, 1, &kernel_image())
}

/// The latency verdict check so far: a line of the table (`what` qualifies it) and
/// `latency_verdicts` in the JSON (the last call's totals stay).
fn report_verdicts(
    md: &mut Table,
    js: &mut serde_json::Map<String, serde_json::Value>,
    what: &str,
    checked: u64,
    bad: u64,
) {
    md.line(format!(
        "\nVerdicts checked against the CPU executor{what}: {checked}, mismatches: {bad}{}",
        if bad > 0 { " !!" } else { "" }
    ));
    js.insert(
        "latency_verdicts".into(),
        json!({"checked": checked, "mismatches": bad}),
    );
}

struct Table {
    rows: Vec<String>,
}

impl Table {
    fn line(&mut self, s: String) {
        println!("{s}");
        self.rows.push(s);
    }
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    if !(a.latency_gap_us.is_finite() && (0.0..=1e6).contains(&a.latency_gap_us)) {
        anyhow::bail!(
            "--latency-gap-us: must be 0 ..= 1000000 microseconds, got {}",
            a.latency_gap_us
        );
    }
    let info = match pipeline::executor::gpu::probe(a.device) {
        Ok(i) => i,
        Err(why) => {
            eprintln!("pktwarp bench: no usable GPU: {why}");
            return Ok(3);
        }
    };
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default();
    println!(
        "bench: {} ({} SMs, driver {}), CPU {} x {threads} threads",
        info.name, info.multiprocessors, info.driver_version, cpu_model
    );
    let mut md = Table { rows: Vec::new() };
    let mut js = serde_json::Map::new();
    js.insert(
        "machine".into(),
        json!({"gpu": info.name, "sms": info.multiprocessors, "driver": info.driver_version,
               "cpu": cpu_model, "cpu_threads": threads}),
    );
    let skip = |p: &str| a.skip.iter().any(|s| s == p);

    // Host->device copy bandwidth first: no persistent kernel may run while its buffers are freed.
    let htod = measure_htod(a.device, 256 << 20, 10)?;
    println!(
        "host->device copy from pinned memory: {:.1} GB/s",
        htod / 1e9
    );
    js.insert("htod_bytes_per_s".into(), json!(htod));

    let (rules0, trace0) = set_paths(&a.classbench, &a.sets[0])?;

    if !skip("throughput") {
        md.line(
            "\n### Stage throughput, device-resident frames, parse + acl + count (64 B frames)\n"
                .into(),
        );
        md.line(format!(
            "| rule set | rules | frames | GPU Mpps | CPU Mpps ({threads} threads) | GPU / CPU | verdicts equal |"
        ));
        md.line("| --- | ---: | ---: | ---: | ---: | ---: | --- |".into());
        let mut rows = Vec::new();
        for set in &a.sets {
            let r = throughput(&a, set, threads).with_context(|| format!("throughput {set}"))?;
            md.line(format!(
                "| {} | {} | {} | {:.1} | {:.1} | {:.1}x | {} |",
                set,
                r.0,
                r.1,
                r.2,
                r.3,
                r.2 / r.3,
                r.4
            ));
            rows.push(
                json!({"set": set, "rules": r.0, "frames": r.1, "gpu_mpps": r.2,
                             "cpu_mpps": r.3, "cpu_threads": threads, "ratio": r.2 / r.3,
                             "verdicts_equal": r.4, "gpu_ms_runs": r.5}),
            );
        }
        js.insert("throughput".into(), json!(rows));
    }

    if !skip("e2e") {
        let stage = load_stage(&rules0)?;
        let bytes = stage.classifier.image_bytes();
        let tables = AclTablesRef {
            bytes: &bytes,
            n_rules: stage.classifier.header().num_rules,
        };
        md.line(format!(
            "\n### End to end: host bursts -> pinned staging -> ring -> persistent kernel (parse + acl {} + count) -> verdicts on the host\n",
            a.sets[0]
        ));
        md.line(format!(
            "host->device copy bandwidth measured in this run: {:.1} GB/s\n",
            htod / 1e9
        ));
        md.line(format!(
            "{} persistent CTAs per queue, one feeding host thread per queue; frames of 256 bytes and more copied into mapped rings with {} stores. A mapped ring's frames stay in host memory: the kernel reads across PCIe what parse needs (whole 64-byte frames; a chunk of 1518-byte frames does not fit shared memory and is parsed in place, headers only), so \"H2D GB/s\" (every frame and descriptor byte handed over, per second) can pass the copy bandwidth\n",
            a.e2e_ctas,
            if a.cached_stores { "plain (cached)" } else { "non-temporal" }
        ));
        md.line("| frame | placement | queues | burst | Mpps | Gbit/s (frames) | % of 400GbE pps | H2D GB/s | % of copy bw | ring-full retries |".into());
        md.line("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |".into());
        let mut rows = Vec::new();
        for &size in &[64u16, 1518] {
            let base = trace_frames(&trace0, size)?;
            for placement in [Placement::Device, Placement::Mapped] {
                for &nq in &a.e2e_queues {
                    let burst = if size == 64 { 1024 } else { 256 };
                    let r = e2e(&a, &base, &stage, tables, placement, nq, burst)?;
                    let line_pps = if size == 64 { 595.2e6 } else { 32.5e6 };
                    md.line(format!(
                        "| {} | {:?} | {} | {} | {:.1} | {:.1} | {:.1}% | {:.1} | {:.1}% | {} |",
                        size,
                        placement,
                        nq,
                        burst,
                        r.pps / 1e6,
                        r.pps * size as f64 * 8.0 / 1e9,
                        100.0 * r.pps / line_pps,
                        r.h2d_bytes_per_s / 1e9,
                        100.0 * r.h2d_bytes_per_s / htod,
                        r.ring_full
                    ));
                    rows.push(
                        json!({"size": size, "placement": format!("{placement:?}"), "queues": nq,
                        "burst": burst, "pps": r.pps, "gbps": r.pps * size as f64 * 8.0 / 1e9,
                        "line_rate_pps": line_pps, "h2d_bytes_per_s": r.h2d_bytes_per_s,
                        "copy_bw_fraction": r.h2d_bytes_per_s / htod, "frames": r.frames,
                        "seconds": r.seconds, "ring_full_retries": r.ring_full,
                        "verdicts_checked": r.checked, "verdict_mismatches": r.mismatches}),
                    );
                    if r.mismatches > 0 {
                        md.line(format!(
                            "  !! {} verdict mismatches in the run above",
                            r.mismatches
                        ));
                    }
                }
            }
        }
        js.insert("e2e".into(), json!(rows));
    }

    if !skip("latency") {
        let pinned = if a.latency_unpinned {
            None
        } else {
            let cpu = match a.latency_cpu {
                Some(c) => c,
                None => *pipeline::affinity::allowed_cpus()
                    .context("latency: the process's CPU set")?
                    .last()
                    .ok_or_else(|| anyhow::anyhow!("latency: no CPU to pin the host thread to"))?,
            };
            let saved = pipeline::affinity::pin_current_thread(cpu)
                .with_context(|| format!("latency: pinning the host thread to CPU {cpu}"))?;
            Some((cpu, saved))
        };
        js.insert(
            "latency_host_cpu".into(),
            json!(pinned.as_ref().map(|(c, _)| *c)),
        );
        js.insert("latency_gap_us".into(), json!(a.latency_gap_us));
        let jit = host_jitter(Duration::from_millis(500));
        js.insert(
            "latency_host_jitter".into(),
            json!({"stalls_per_s": jit.stalls_per_s, "max_us": jit.max_us, "lost_share": jit.lost,
                "stall_us": STALL.as_secs_f64() * 1e6}),
        );
        let stage = load_stage(&rules0)?;
        let bytes = stage.classifier.image_bytes();
        let tables = AclTablesRef {
            bytes: &bytes,
            n_rules: stage.classifier.header().num_rules,
        };
        let base = trace_frames(&trace0, 64)?;
        md.line(format!(
            "\n### Latency per burst, 64 B frames, parse + acl {} + count, light load (us: p50 / p99 / p99.9; next burst {}; host thread {})\n",
            a.sets[0],
            if a.latency_gap_us > 0.0 {
                format!("after a random 0-{} us", a.latency_gap_us)
            } else {
                "at once (closed loop)".to_string()
            },
            pinned.as_ref().map_or("not pinned".to_string(), |(c, _)| format!("pinned to CPU {c}"))
        ));
        md.line(format!(
            "Host thread off its CPU for {} us or more (back-to-back clock reads at least that far \
             apart, on the latency thread's core, for 0.5 s before these rows): {:.0} times a second, \
             longest {:.1} us, {:.2}% of the time. A burst during which that happened is \"stalled\" \
             below.\n",
            STALL.as_micros(),
            jit.stalls_per_s,
            jit.max_us,
            100.0 * jit.lost
        ));
        md.line("| burst | placement | persistent | launch | graph (8 bursts) | launch p99 / persistent p99 |".into());
        md.line("| ---: | --- | --- | --- | --- | ---: |".into());
        let mut rows = Vec::new();
        let (mut lat_checked, mut lat_bad) = (0u64, 0u64);
        // Stalled bursts of the 32-frame mapped rows, persistent then launch: (stalled, of, p99
        // without them).
        let mut stall_rows: Vec<(usize, usize, f64)> = Vec::new();
        for &burst in &[16u32, 32, 256] {
            for placement in [Placement::Device, Placement::Mapped] {
                let mut cells = Vec::new();
                let mut p99 = [0f64; 3];
                for (k, mode) in [Mode::Persistent, Mode::Launch, Mode::Graph]
                    .into_iter()
                    .enumerate()
                {
                    let lat = latency(
                        &a,
                        &base,
                        LatCase::full(tables, &stage, mode, placement, burst),
                    )?;
                    lat_checked += lat.checked;
                    lat_bad += lat.mismatches;
                    let tagged = lat.tagged;
                    let (stalled, unstalled) = (lat.stalled, lat.unstalled);
                    let lat = lat.samples;
                    let (p50, p_99, p999) = (pct(&lat, 0.5), pct(&lat, 0.99), pct(&lat, 0.999));
                    // NaN (JSON null) when every burst stalled.
                    let p99_unstalled = if unstalled.is_empty() {
                        f64::NAN
                    } else {
                        pct(&unstalled, 0.99)
                    };
                    if burst == 32 && placement == Placement::Mapped && mode != Mode::Graph {
                        stall_rows.push((stalled, lat.len(), p99_unstalled));
                    }
                    p99[k] = p_99;
                    cells.push(format!("{p50:.2} / {p_99:.2} / {p999:.2}"));
                    rows.push(
                        json!({"burst": burst, "placement": format!("{placement:?}"),
                        "mode": format!("{mode:?}"), "p50_us": p50, "p99_us": p_99, "p999_us": p999,
                        "max_us": lat[lat.len() - 1], "samples": lat.len(), "tagged": tagged,
                        "stalled_bursts": stalled, "p99_unstalled_us": nan_null(p99_unstalled)}),
                    );
                }
                md.line(format!(
                    "| {burst} | {placement:?} | {} | {} | {} | {:.2}x |",
                    cells[0],
                    cells[1],
                    cells[2],
                    p99[1] / p99[0]
                ));
            }
        }
        js.insert("latency".into(), json!(rows));
        if let [(ps, pn, pp), (ls, ln, lp)] = stall_rows[..] {
            md.line(format!(
                "\n32 frames, mapped: stalled bursts persistent {ps} of {pn} ({:.2}%), launch {ls} of \
                 {ln} ({:.2}%); p99 of the bursts without a stall: persistent {pp:.2}, launch {lp:.2} \
                 ({:.2}x). The goals are judged on every burst (the table).",
                100.0 * ps as f64 / pn as f64,
                100.0 * ls as f64 / ln as f64,
                lp / pp
            ));
        }

        // The transport choices on a mapped ring, untraced, interleaved three times (the runs
        // move by a microsecond or more at p99 between rounds): tagged words (the default for
        // these bursts) and untagged.
        md.line("\n### Mapped ring transport, persistent, untraced, three interleaved rounds (us: p50 / p99 / p99.9)\n".into());
        md.line("| burst | tagged (default) | untagged |".into());
        md.line("| ---: | --- | --- |".into());
        let mut trows = Vec::new();
        for &burst in &[16u32, 32] {
            for _round in 0..3 {
                let mut cells = Vec::new();
                for tagged in [None, Some(false)] {
                    let r = latency(
                        &a,
                        &base,
                        LatCase {
                            tagged,
                            ..LatCase::full(
                                tables,
                                &stage,
                                Mode::Persistent,
                                Placement::Mapped,
                                burst,
                            )
                        },
                    )?;
                    lat_checked += r.checked;
                    lat_bad += r.mismatches;
                    let l = &r.samples;
                    let (p50, p_99, p999) = (pct(l, 0.5), pct(l, 0.99), pct(l, 0.999));
                    cells.push(format!("{p50:.2} / {p_99:.2} / {p999:.2}"));
                    trows.push(json!({"burst": burst, "tagged": r.tagged,
                        "p50_us": p50, "p99_us": p_99, "p999_us": p999}));
                }
                md.line(format!("| {burst} | {} | {} |", cells[0], cells[1]));
            }
        }
        js.insert("latency_transport".into(), json!(trows));
        report_verdicts(&mut md, &mut js, "", lat_checked, lat_bad);

        // Where the time goes: the same 32-frame burst with fewer stages, and with one thread
        // per frame (32 threads: no cooperative ACL lookup, fewer staging loads in flight), with
        // the GPU-side steps of each burst (%globaltimer in the kernel).
        md.line(
            "\n### Latency decomposition, burst 32, persistent (us: p50 / p99 / p99.9; GPU steps: median (p99))\n".into(),
        );
        md.line("| stages | threads x CTAs per burst | placement | tagged | total | seen->staged | stages | of which parse pass | to done | counters (after done) | outside the GPU | of which host submit |".into());
        md.line(
            "| --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
                .into(),
        );
        let mut rows = Vec::new();
        // Each row: the default 32-frame persistent configuration with one thing changed.
        let full = Decomp {
            name: "parse + acl + count",
            parse: true,
            acl: Some(tables),
            ..Decomp::default()
        };
        let cases = [
            Decomp {
                name: "count only (transport)",
                ..Decomp::default()
            },
            Decomp {
                name: "parse + count",
                parse: true,
                ..Decomp::default()
            },
            full,
            Decomp {
                name: "parse + acl + count, 1 CTA per burst",
                burst_ctas: Some(1),
                ..full
            },
            Decomp {
                name: "parse + acl + count, 2 CTAs per burst",
                burst_ctas: Some(2),
                ..full
            },
            Decomp {
                name: "parse + acl + count, 4 CTAs per burst",
                burst_ctas: Some(4),
                ..full
            },
            Decomp {
                name: "parse + acl + count, 1 CTA of 32 threads",
                threads: Some(32),
                burst_ctas: Some(1),
                ..full
            },
            Decomp {
                name: "parse + acl + count, 1 CTA of 256 threads",
                threads: Some(256),
                burst_ctas: Some(1),
                ..full
            },
            Decomp {
                name: "count only (transport), untagged",
                tagged: Some(false),
                ..Decomp::default()
            },
            Decomp {
                name: "parse + acl + count, untagged",
                tagged: Some(false),
                ..full
            },
        ];
        for Decomp {
            name,
            parse,
            acl,
            threads,
            burst_ctas,
            tagged,
        } in cases
        {
            for placement in [Placement::Device, Placement::Mapped] {
                if tagged == Some(false) && placement == Placement::Device {
                    continue; // the same as the row above: device rings are never tagged
                }
                let r = latency(
                    &a,
                    &base,
                    LatCase {
                        tables: acl,
                        parse,
                        mode: Mode::Persistent,
                        placement,
                        burst: 32,
                        threads,
                        trace: true,
                        burst_ctas,
                        tagged,
                        stage: acl.map(|_| &stage),
                    },
                )?;
                lat_checked += r.checked;
                lat_bad += r.mismatches;
                let lat = &r.samples;
                let (p50, p_99, p999) = (pct(lat, 0.5), pct(lat, 0.99), pct(lat, 0.999));
                let m = step_pct(&r.steps, 0.5);
                let m99 = step_pct(&r.steps, 0.99);
                let (th, parts) = (r.threads, r.parts);
                let parse_pass = if m[6].is_nan() {
                    "-".to_string()
                } else {
                    format!("{:.2} ({:.2})", m[6], m99[6])
                };
                md.line(format!(
                    "| {name} | {th} x {parts} | {placement:?} | {} | {p50:.2} / {p_99:.2} / {p999:.2} | {:.2} ({:.2}) | {:.2} ({:.2}) | {parse_pass} | {:.2} ({:.2}) | {:.2} ({:.2}) | {:.2} ({:.2}) | {:.2} ({:.2}) |",
                    if r.tagged { "yes" } else { "no" },
                    m[0], m99[0], m[1], m99[1], m[2], m99[2], m[3], m99[3], m[4], m99[4], m[5], m99[5]
                ));
                rows.push(
                    json!({"stages": name, "threads": th, "ctas_per_burst": parts, "placement": format!("{placement:?}"), "tagged": r.tagged,
                    "p50_us": p50, "p99_us": p_99, "p999_us": p999, "traced": r.steps.len(),
                    "gpu_steps_median_us": {"seen_to_staged": m[0], "stages": m[1], "parse_pass": nan_null(m[6]),
                        "to_done": m[2], "counters_after_done": m[3], "outside_gpu": m[4], "host_submit": m[5]},
                    "gpu_steps_p99_us": {"seen_to_staged": m99[0], "stages": m99[1], "parse_pass": nan_null(m99[6]),
                        "to_done": m99[2], "counters_after_done": m99[3], "outside_gpu": m99[4], "host_submit": m99[5]}}),
                );
            }
        }
        js.insert("latency_decomposition".into(), json!(rows));
        report_verdicts(
            &mut md,
            &mut js,
            ", every latency row with parse + acl so far",
            lat_checked,
            lat_bad,
        );
        if let Some((_, saved)) = &pinned {
            pipeline::affinity::restore(saved)
                .context("latency: restoring the host thread's CPU set")?;
        }
    }

    if a.devices.len() > 1 && !skip("scaling") {
        let r = scaling(&a).context("multi-GPU scaling")?;
        md.line(format!(
            "\n### Several GPUs: parse + acl {} + count on device-resident frames, 1 vs {} executors (GPUs {:?})\n",
            a.sets[0],
            a.devices.len(),
            a.devices
        ));
        md.line("| executors | GPUs | frames per executor | Mpps (aggregate) | scaling vs 1 | verdicts equal |".into());
        md.line("| ---: | --- | ---: | ---: | ---: | --- |".into());
        md.line(format!(
            "| 1 | {:?} | {} | {:.1} | 1.00x | {} |",
            &a.devices[..1],
            r.frames,
            r.one_mpps,
            r.equal
        ));
        md.line(format!(
            "| {} | {:?} | {} | {:.1} | {:.2}x | {} |",
            a.devices.len(),
            a.devices,
            r.frames,
            r.all_mpps,
            r.all_mpps / r.one_mpps,
            r.equal
        ));
        js.insert(
            "scaling".into(),
            json!({"set": a.sets[0], "devices": a.devices, "frames_per_executor": r.frames,
                   "one_gpu_mpps": r.one_mpps, "all_mpps": r.all_mpps,
                   "ratio": r.all_mpps / r.one_mpps, "verdicts_equal": r.equal,
                   "one_ms_runs": r.one_ms, "all_wall_ms_runs": r.all_ms}),
        );
    }

    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
        std::fs::write(dir.join("bench.json"), serde_json::to_vec_pretty(&js)?)
            .with_context(|| format!("{}", dir.display()))?;
        std::fs::write(dir.join("bench.md"), md.rows.join("\n") + "\n")
            .with_context(|| format!("{}", dir.display()))?;
    }
    Ok(0)
}

/// (rules, frames, GPU Mpps, CPU Mpps, verdicts equal, GPU ms per run)
fn throughput(
    a: &Args,
    set: &str,
    threads: usize,
) -> anyhow::Result<(u32, usize, f64, f64, bool, Vec<f64>)> {
    let set = BulkSet::load(a, set)?;
    // GPU: bulk kernel over device-resident frames.
    let ex = bulk_executor(a.device, set.pipeline())?;
    let f = ex.upload_frames(&set.frames.data, &set.descs)?;
    ex.run_bulk(&f, 3)?; // warm-up
    let ms = ex.run_bulk(&f, 10)?;
    let gpu_mpps = set.frames.len() as f64 / (median(&mut ms.clone()) / 1e3) / 1e6;
    let gv = ex.bulk_verdicts(&f)?;
    drop(f);
    drop(ex);

    // CPU: the CPU executor's pipeline, one worker per thread, bursts of 256.
    let BulkSet {
        stage,
        n_rules,
        frames,
        ..
    } = set;
    let pipeline = Pipeline::new(vec![
        Stage::Parse,
        Stage::Acl(AclSlot::new(stage)),
        Stage::Count,
    ]);
    let bursts: Vec<Burst> = super::verify::split_bursts(&frames, 256, usize::MAX)
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    let next = AtomicU64::new(0);
    let mut cpu_runs = Vec::new();
    let mut equal = true;
    for rep in 0..3 {
        next.store(0, Ordering::Relaxed);
        let t = Instant::now();
        let ok = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let c = CpuCounters::new(3, pipeline.rule_count());
                        let (mut m, mut v) = (Vec::new(), Vec::new());
                        let mut ok = true;
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                            let Some(b) = bursts.get(i) else { break };
                            pipeline.run_burst(b, &mut m, &mut v, &c);
                            if rep == 0 {
                                // Compare with the GPU verdicts of the same frames.
                                for (k, cv) in v.iter().enumerate() {
                                    let g = &gv[i * 256 + k];
                                    ok &= g.rule == cv.rule
                                        && g.action == cv.action as u8
                                        && g.mark == cv.mark;
                                }
                            }
                        }
                        ok
                    })
                })
                .collect();
            hs.into_iter().all(|h| h.join().unwrap_or(false))
        });
        cpu_runs.push(t.elapsed().as_secs_f64());
        if rep == 0 {
            equal = ok;
        }
    }
    let cpu_mpps = frames.len() as f64 / median(&mut cpu_runs) / 1e6;
    Ok((n_rules, frames.len(), gpu_mpps, cpu_mpps, equal, ms))
}

struct Scaling {
    frames: usize,
    one_mpps: f64,
    all_mpps: f64,
    equal: bool,
    one_ms: Vec<f64>,
    all_ms: Vec<f64>,
}

/// Stage throughput of the first set on `devices[0]` alone, then on every entry of `devices` at
/// once (one executor per entry, each over the same device-resident frames, one host thread
/// each), wall time over every executor's passes. Medians of 5 rounds of 10 passes.
fn scaling(a: &Args) -> anyhow::Result<Scaling> {
    let set = BulkSet::load(a, &a.sets[0])?;
    let mut execs = Vec::with_capacity(a.devices.len());
    for &d in &a.devices {
        execs.push(bulk_executor(d, set.pipeline()).with_context(|| format!("GPU {d}"))?);
    }
    let frames = &set.frames;
    let uploaded: Vec<_> = execs
        .iter()
        .map(|ex| ex.upload_frames(&frames.data, &set.descs))
        .collect::<anyhow::Result<_>>()?;
    for (ex, f) in execs.iter().zip(&uploaded) {
        ex.run_bulk(f, 2)?; // warm-up
    }
    const PASSES: usize = 10;
    let mut one_ms = Vec::new();
    let mut all_ms = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        execs[0].run_bulk(&uploaded[0], PASSES)?;
        one_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        std::thread::scope(|s| -> anyhow::Result<()> {
            let hs: Vec<_> = execs
                .iter()
                .zip(&uploaded)
                .map(|(ex, f)| s.spawn(move || ex.run_bulk(f, PASSES).map(|_| ())))
                .collect();
            for h in hs {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a scaling thread panicked"))??;
            }
            Ok(())
        })?;
        all_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let per = frames.len() as f64 * PASSES as f64;
    let one_mpps = per / (median(&mut one_ms.clone()) / 1e3) / 1e6;
    let all_mpps = per * execs.len() as f64 / (median(&mut all_ms.clone()) / 1e3) / 1e6;
    // Every executor's verdicts equal the CPU reference on a sample, and each other.
    let v0 = execs[0].bulk_verdicts(&uploaded[0])?;
    let mut equal = true;
    for (ex, f) in execs.iter().zip(&uploaded).skip(1) {
        equal &= ex.bulk_verdicts(f)? == v0;
    }
    for i in (0..frames.len()).step_by(997) {
        let d = &frames.descs[i];
        let (_, want) = cpu_reference(frames.frame(i), d.port, Some(&set.stage));
        equal &= v0[i] == want;
    }
    drop(uploaded);
    Ok(Scaling {
        frames: frames.len(),
        one_mpps,
        all_mpps,
        equal,
        one_ms,
        all_ms,
    })
}

/// One feeder thread's totals: frames, H2D bytes, ring-full retries, verdicts checked, mismatches.
type FeedTotals = (u64, u64, u64, u64, u64);

struct E2e {
    pps: f64,
    h2d_bytes_per_s: f64,
    frames: u64,
    seconds: f64,
    ring_full: u64,
    checked: u64,
    mismatches: u64,
}

fn e2e(
    a: &Args,
    base: &Burst,
    stage: &AclStage,
    tables: AclTablesRef<'_>,
    placement: Placement,
    nq: usize,
    burst: u32,
) -> anyhow::Result<E2e> {
    let slot_bytes = base
        .frames()
        .take(burst as usize)
        .map(|(_, f)| f.len())
        .sum::<usize>()
        .max(1);
    let opts = GpuOptions {
        mode: Mode::Persistent,
        placement,
        burst_size: burst,
        ring_slots: 64,
        slot_data_bytes: Some(round_up(slot_bytes * 2, 4096) as u32),
        device: a.device,
        ctas_per_queue: a.e2e_ctas,
        nt_stores: !a.cached_stores,
        ..Default::default()
    };
    let pd = PipelineDesc {
        parse: true,
        acl: Some(tables),
        count: true,
        default_action: abi::ACTION_PASS,
    };
    let ex = GpuExecutor::new(opts, pd, nq, &kernel_image())?;
    // Expected verdicts for a sample check: the first burst of every thread is compared.
    let bursts: Vec<Burst> = super::verify::split_bursts(base, burst as usize, usize::MAX)
        .into_iter()
        .map(|(_, b)| b)
        .filter(|b| b.len() == burst as usize)
        .collect();
    if bursts.is_empty() {
        anyhow::bail!("trace too short for bursts of {burst}");
    }
    // Descriptor bytes a frame costs across PCIe (the executor picks compact descriptors when
    // every frame of a burst allows: these generated frames always do).
    let desc_size = Desc8::size_of_format(Desc8::format_for(&bursts[0].descs));
    let stop = AtomicBool::new(false);
    let dur = Duration::from_secs_f64(a.e2e_seconds);
    let t0 = Instant::now();
    let results: Vec<anyhow::Result<FeedTotals>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..nq)
            .map(|q| {
                let ex = &ex;
                let bursts = &bursts;
                let stop = &stop;
                s.spawn(move || -> anyhow::Result<FeedTotals> {
                    let (mut frames, mut bytes, mut full) = (0u64, 0u64, 0u64);
                    let (mut checked, mut bad) = (0u64, 0u64);
                    let mut i = q % bursts.len();
                    let mut first: Option<(u32, usize)> = None;
                    let start = Instant::now();
                    while start.elapsed() < dur && !stop.load(Ordering::Relaxed) {
                        let b = &bursts[i];
                        match ex.submit(q, b) {
                            Ok(seq) => {
                                if first.is_none() {
                                    first = Some((seq, i));
                                }
                                i = (i + 1) % bursts.len();
                            }
                            Err(SubmitError::RingFull { .. }) => full += 1,
                            Err(e) => return Err(e.into()),
                        }
                        ex.poll(q, |seq, v, _| {
                            frames += v.len() as u64;
                            bytes += (v.len() * desc_size) as u64;
                            if let Some((s0, bi)) = first {
                                if seq == s0 {
                                    for (k, (d, f)) in bursts[bi].frames().enumerate() {
                                        let (_, want) = cpu_reference(f, d.port, Some(stage));
                                        checked += 1;
                                        bad += u64::from(!same(&want, &v[k]));
                                    }
                                }
                            }
                        })?;
                    }
                    ex.drain(q, Duration::from_secs(10), |_, v, _| {
                        frames += v.len() as u64;
                    })?;
                    let data: u64 = bursts.iter().map(|b| b.data.len() as u64).sum::<u64>()
                        / bursts.len() as u64;
                    bytes += data * (frames / burst as u64);
                    Ok((frames, bytes, full, checked, bad))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a feeder thread panicked")))
            })
            .collect()
    });
    let secs = t0.elapsed().as_secs_f64();
    let mut tot = E2e {
        pps: 0.0,
        h2d_bytes_per_s: 0.0,
        frames: 0,
        seconds: secs,
        ring_full: 0,
        checked: 0,
        mismatches: 0,
    };
    let mut bytes = 0u64;
    for r in results {
        let (f, b, full, c, bad) = r?;
        tot.frames += f;
        bytes += b;
        tot.ring_full += full;
        tot.checked += c;
        tot.mismatches += bad;
    }
    tot.pps = tot.frames as f64 / secs;
    tot.h2d_bytes_per_s = bytes as f64 / secs;
    let snap = ex.counters()?;
    let gpu_frames: u64 = snap.queues.iter().map(|c| c.packets).sum();
    if gpu_frames != tot.frames {
        anyhow::bail!(
            "e2e: the GPU counted {gpu_frames} frames, the host read {} verdicts",
            tot.frames
        );
    }
    Ok(tot)
}

fn same(want: &Verdict, got: &Verdict) -> bool {
    want == got
}

fn round_up(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}

/// One latency configuration.
#[derive(Clone, Copy)]
struct LatCase<'a> {
    tables: Option<AclTablesRef<'a>>,
    parse: bool,
    mode: Mode,
    placement: Placement,
    burst: u32,
    /// Threads per CTA (None: the executor's default).
    threads: Option<u32>,
    /// Record the GPU-side timestamps of every burst (`trace_bursts`).
    trace: bool,
    /// `burst_ctas` (None: the executor's default).
    burst_ctas: Option<u32>,
    /// `tagged` (None: the executor's default).
    tagged: Option<bool>,
    /// The acl stage of `tables`, for the CPU reference every verdict is checked against
    /// (parse + acl pipelines only).
    stage: Option<&'a AclStage>,
}

impl<'a> LatCase<'a> {
    /// Parse + acl (`tables`, every verdict checked against `stage`), untraced, the executor's
    /// defaults for everything else.
    fn full(
        tables: AclTablesRef<'a>,
        stage: &'a AclStage,
        mode: Mode,
        placement: Placement,
        burst: u32,
    ) -> Self {
        LatCase {
            tables: Some(tables),
            parse: true,
            mode,
            placement,
            burst,
            threads: None,
            trace: false,
            burst_ctas: None,
            tagged: None,
            stage: Some(stage),
        }
    }
}

/// One row of the latency decomposition (None: the executor's default).
#[derive(Clone, Copy, Default)]
struct Decomp<'a> {
    name: &'a str,
    parse: bool,
    acl: Option<AclTablesRef<'a>>,
    threads: Option<u32>,
    burst_ctas: Option<u32>,
    tagged: Option<bool>,
}

/// Per-burst latency samples (us, sorted) and, with `trace`, the GPU-side steps of each burst
/// (us): [seen -> staged, staged -> stages done, -> just before the done store, the counters
/// merged after done (off the latency path), outside the GPU (total minus seen -> fenced: host
/// writes, PCIe, the poll, the host seeing done), of which the host's `submit` call, of the
/// stages the small-burst path's parse pass (staged -> every frame's ACL key ready; NaN on other
/// paths)].
struct LatResult {
    samples: Vec<f64>,
    /// The samples of bursts without a host stall (sorted), and how many had one.
    unstalled: Vec<f64>,
    stalled: usize,
    steps: Vec<[f64; STEPS]>,
    /// Verdicts compared with the CPU reference, and how many differed.
    checked: u64,
    mismatches: u64,
    /// The queue carried tagged words.
    tagged: bool,
    /// Threads per CTA the executor ran with.
    threads: u32,
    /// CTAs per burst the executor ran with.
    parts: u32,
}

fn latency(a: &Args, base: &Burst, c: LatCase<'_>) -> anyhow::Result<LatResult> {
    let g = 8u32;
    let (mode, placement, burst) = (c.mode, c.placement, c.burst);
    let opts = GpuOptions {
        mode,
        placement,
        burst_size: burst,
        ring_slots: 32,
        graph_bursts: g,
        slot_data_bytes: Some(round_up(burst as usize * 64, 4096) as u32),
        device: a.device,
        block_threads: c.threads,
        trace_bursts: c.trace,
        burst_ctas: c.burst_ctas,
        tagged: c.tagged,
        ..Default::default()
    };
    let pd = PipelineDesc {
        parse: c.parse,
        acl: c.tables,
        count: true,
        default_action: abi::ACTION_PASS,
    };
    let ex = GpuExecutor::new(opts, pd, 1, &kernel_image())?;
    let bursts: Vec<Burst> = super::verify::split_bursts(base, burst as usize, usize::MAX)
        .into_iter()
        .map(|(_, b)| b)
        .filter(|b| b.len() == burst as usize)
        .take(64)
        .collect();
    if bursts.is_empty() {
        anyhow::bail!("trace too short for bursts of {burst}");
    }
    // What the CPU executor decides for each frame of each burst (parse + acl only).
    let want: Option<Vec<Vec<Verdict>>> = match (c.parse, c.stage) {
        (true, Some(st)) => Some(
            bursts
                .iter()
                .map(|b| {
                    b.frames()
                        .map(|(d, f)| cpu_reference(f, d.port, Some(st)).1)
                        .collect()
                })
                .collect(),
        ),
        _ => None,
    };
    let (mut checked, mut mismatches) = (0u64, 0u64);
    let per = if mode == Mode::Graph { g as usize } else { 1 };
    let warm = 200;
    let total = a.latency_bursts + warm;
    // (us, whether the host thread stalled during the burst) of each timed burst.
    let mut out: Vec<(f64, bool)> = Vec::with_capacity(a.latency_bursts);
    // (seq, total us) of measured bursts whose GPU trace is read once it is complete.
    let mut pending: Vec<(u32, f64, f64)> = Vec::new();
    let mut steps = Vec::new();
    let mut k = 0usize;
    let deadline = Duration::from_secs(5);
    // Uniform gaps from a fixed seed (xorshift64): every configuration sees the same sequence.
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    while k < total {
        if a.latency_gap_us > 0.0 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let gap = Duration::from_secs_f64(
                a.latency_gap_us * 1e-6 * (rng >> 11) as f64 / (1u64 << 53) as f64,
            );
            let t = Instant::now();
            while t.elapsed() < gap {
                std::hint::spin_loop();
            }
        }
        let mut t_submit = Vec::with_capacity(per);
        let mut submit_us = Vec::with_capacity(per);
        for j in 0..per {
            let t0 = Instant::now();
            t_submit.push(t0);
            ex.submit(0, &bursts[(k + j) % bursts.len()])
                .map_err(|e| anyhow::anyhow!("latency submit: {e}"))?;
            submit_us.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        let mut done = 0usize;
        // From here on (not across the submit calls: a launch takes several microseconds).
        let mut clock = StallClock::new();
        let t = clock.last;
        while done < per {
            ex.poll(0, |seq, v, _| {
                let now = Instant::now();
                let stalled = clock.gap_until(now) >= STALL;
                if let Some(w) = &want {
                    let w = &w[(k + done) % bursts.len()];
                    checked += v.len() as u64;
                    mismatches += v.iter().zip(w).filter(|(g, w)| g != w).count() as u64
                        + w.len().abs_diff(v.len()) as u64;
                }
                if k + done >= warm {
                    let us = now.duration_since(t_submit[done]).as_secs_f64() * 1e6;
                    out.push((us, stalled));
                    if c.trace {
                        pending.push((seq, us, submit_us[done]));
                    }
                }
                done += 1;
            })?;
            if clock.tick() - t > deadline {
                anyhow::bail!(
                    "latency: burst not done after {deadline:?} ({mode:?}, {placement:?})"
                );
            }
        }
        k += per;
        pending.retain(|&(seq, us, sub)| match ex.burst_trace(0, seq) {
            Some(tr) => {
                let d = |x: u64, y: u64| y.saturating_sub(x) as f64 / 1e3;
                let gpu = d(tr.seen, tr.fenced);
                steps.push([
                    d(tr.seen, tr.staged),
                    d(tr.staged, tr.ran),
                    d(tr.ran, tr.fenced),
                    d(tr.fenced, tr.merged),
                    us - gpu,
                    sub,
                    // Only the small-burst path's parse pass records it.
                    if tr.parsed == 0 {
                        f64::NAN
                    } else {
                        d(tr.staged, tr.parsed)
                    },
                ]);
                false
            }
            None => true,
        });
    }
    let stalled = out.iter().filter(|s| s.1).count();
    let mut unstalled: Vec<f64> = out.iter().filter(|s| !s.1).map(|s| s.0).collect();
    unstalled.sort_by(f64::total_cmp);
    let mut samples: Vec<f64> = out.into_iter().map(|s| s.0).collect();
    samples.sort_by(f64::total_cmp);
    Ok(LatResult {
        samples,
        unstalled,
        stalled,
        steps,
        checked,
        mismatches,
        tagged: ex.tagged(0),
        threads: ex.options().threads(),
        parts: ex.options().parts(),
    })
}

/// A gap at least this long between two consecutive clock reads of the latency host thread
/// while it polls for a burst's verdicts means it was off its CPU: an interrupt or, on a
/// virtual machine, the hypervisor running something else (a poll takes well under a
/// microsecond; on the GPU test machine the probe below finds few gaps of 1-2 us and many of
/// 2-50). The burst counts as stalled: the bench reports how many were and the p99 without
/// them beside the p99 of every burst, so a tail made by the machine can be told from one made
/// by pktwarp. The submit call is not watched (a launch takes several microseconds), so a
/// stall there is not caught: the count is a lower bound.
const STALL: Duration = Duration::from_micros(2);

/// The latency host thread's clock reads, keeping the longest gap between consecutive ones.
struct StallClock {
    last: Instant,
    max_gap: Duration,
}

impl StallClock {
    fn new() -> Self {
        Self {
            last: Instant::now(),
            max_gap: Duration::ZERO,
        }
    }

    fn tick(&mut self) -> Instant {
        let now = Instant::now();
        self.max_gap = self.max_gap.max(now - self.last);
        self.last = now;
        now
    }

    /// The longest gap so far, counting the one from the last tick to `now`.
    fn gap_until(&self, now: Instant) -> Duration {
        self.max_gap.max(now.saturating_duration_since(self.last))
    }
}

/// What [`host_jitter`] saw.
struct Jitter {
    /// Gaps of at least [`STALL`] per second, and the longest (us).
    stalls_per_s: f64,
    max_us: f64,
    /// Share of the time spent in those gaps.
    lost: f64,
}

/// The calling thread reads the clock back to back for `dur`: every gap of [`STALL`] or more is
/// time it was off its CPU. Run on the latency host thread's core just before the latency rows
/// (nothing else of the bench runs then), it says how often the machine takes that core away.
fn host_jitter(dur: Duration) -> Jitter {
    let t0 = Instant::now();
    let mut last = t0;
    let (mut n, mut max, mut lost) = (0u64, Duration::ZERO, Duration::ZERO);
    while last - t0 < dur {
        let now = Instant::now();
        let gap = now - last;
        if gap >= STALL {
            n += 1;
            lost += gap;
            max = max.max(gap);
        }
        last = now;
    }
    let secs = (last - t0).as_secs_f64();
    Jitter {
        stalls_per_s: n as f64 / secs,
        max_us: max.as_secs_f64() * 1e6,
        lost: lost.as_secs_f64() / secs,
    }
}

/// Columns of a traced burst's steps (LatResult::steps).
const STEPS: usize = 7;

/// JSON null for NaN (a step no burst took).
fn nan_null(x: f64) -> serde_json::Value {
    if x.is_nan() {
        serde_json::Value::Null
    } else {
        json!(x)
    }
}

/// Percentile `p` of each GPU step column (NaN samples, a step the burst did not take, left
/// out; NaN when no burst took it).
fn step_pct(steps: &[[f64; STEPS]], p: f64) -> [f64; STEPS] {
    let mut m = [0f64; STEPS];
    for (i, slot) in m.iter_mut().enumerate() {
        let mut col: Vec<f64> = steps.iter().map(|s| s[i]).filter(|x| !x.is_nan()).collect();
        if col.is_empty() {
            *slot = f64::NAN;
        } else {
            col.sort_by(f64::total_cmp);
            *slot = pct(&col, p);
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread put to sleep between two clock reads is a stall for the burst, and the longest
    /// gap is kept across later reads (a quiet moment after the stall does not hide it).
    #[test]
    fn stall_clock_keeps_the_longest_gap() {
        let mut c = StallClock::new();
        std::thread::sleep(Duration::from_millis(5));
        let now = Instant::now();
        assert!(c.gap_until(now) >= Duration::from_millis(5));
        c.tick();
        c.tick();
        assert!(c.max_gap >= Duration::from_millis(5));
        assert!(c.gap_until(Instant::now()) >= STALL);
    }
}
