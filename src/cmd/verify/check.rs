//! One input through one (mode, placement): the reference and the GPU executor on the same
//! frames, every frame compared (the comparison itself is `pipeline::verify`).

use pipeline::burst::Burst;
use pipeline::internal::executor::gpu::abi::{self, QueueCounters, Verdict};
use pipeline::internal::executor::gpu::multi::{Devices, MultiGpu};
use pipeline::internal::executor::gpu::{GpuOptions, Mode, PipelineDesc, Placement};
use pipeline::meta::PacketMeta;
use pipeline::verify::{
    compare_chunk, split_bursts, Expected, ExpectedCounters, GpuChunk, Reference, Tally,
};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::rules::Acl;
use super::source::Source;
use super::{kernel_image, slot_data_bytes, Args};

/// Frames read, run by the reference and put through the GPU at a time.
pub const CHUNK: usize = 65536;

#[derive(Default)]
pub struct RunReport {
    pub input: String,
    pub mode: String,
    pub placement: String,
    pub frames: u64,
    pub bursts: u64,
    pub meta_mismatches: u64,
    /// Metadata was written back and compared (not with --no-meta).
    pub meta_compared: bool,
    pub verdict_mismatches: u64,
    pub bulk_mismatches: u64,
    pub counter_mismatches: Vec<String>,
    pub parse_errors: u64,
    pub acl_matched: u64,
    pub skipped_inputs: Vec<String>,
    pub seconds: f64,
    pub kernel: String,
    /// GPU of each executor (queues round-robin over them).
    pub devices: Vec<u32>,
}

impl RunReport {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "input": self.input, "mode": self.mode, "placement": self.placement,
            "frames": self.frames, "bursts": self.bursts,
            "meta_mismatches": self.meta_mismatches, "meta_compared": self.meta_compared, "verdict_mismatches": self.verdict_mismatches,
            "bulk_mismatches": self.bulk_mismatches, "counter_mismatches": self.counter_mismatches,
            "parse_errors": self.parse_errors, "acl_matched": self.acl_matched,
            "skipped_inputs": self.skipped_inputs.len(), "seconds": self.seconds,
            "kernel": self.kernel, "devices": self.devices, "ok": self.ok(),
        })
    }

    pub fn ok(&self) -> bool {
        self.meta_mismatches == 0
            && self.verdict_mismatches == 0
            && self.bulk_mismatches == 0
            && self.counter_mismatches.is_empty()
            && self.frames > 0
    }
}

/// One input through one (mode, placement): every frame compared.
pub fn verify_one(
    a: &Args,
    acl: Option<&Acl>,
    mode: Mode,
    placement: Placement,
    show: &mut usize,
) -> anyhow::Result<RunReport> {
    let t0 = Instant::now();
    let mut src = Source::from_args(a)?;
    let mut left = a.limit.unwrap_or(u64::MAX);
    let input = describe_input(a);
    let opts = GpuOptions {
        emit_meta: !a.no_meta,
        ..gpu_options(a, mode, placement)
    };
    let tagged = opts.tagged_queue(0);
    let mut report = RunReport {
        input,
        mode: format!("{mode:?}").to_lowercase(),
        placement: format!("{placement:?}{}", if tagged { " tagged" } else { "" }).to_lowercase(),
        meta_compared: !a.no_meta,
        ..Default::default()
    };
    // Slots big enough for the largest frame seen so far is not knowable up front for a stream;
    // 256 KiB of data per slot holds any Ethernet frame in the corpus (jumbo included) and
    // bursts are cut by bytes as well as frames below.
    let data_cap = slot_data_bytes(a);
    let pd = PipelineDesc {
        parse: true,
        acl: acl.map(Acl::tables),
        count: true,
        default_action: acl.map_or(abi::ACTION_PASS, Acl::default_action),
    };
    let mut ex = MultiGpu::new(opts, pd, queues_for(a), &kernel_image())?;
    report.kernel = kernel_origin(&ex);
    report.devices = ex.devices().to_vec();
    let plain;
    let reference = match acl {
        Some(x) => &x.reference,
        None => {
            plain = Reference::new(None);
            &plain
        }
    };
    let mut expect = ExpectedCounters::new(acl.map_or(0, |x| x.n_rules as usize));
    // The reference's metadata is kept only when it is compared (not with --no-meta).
    let keep_meta = !a.no_meta;
    let mut tally = Tally::default();
    let mut chunk = Burst::default();
    let mut frame_base: u64 = 0;
    loop {
        chunk.clear();
        if left == 0 || !src.fill(&mut chunk, CHUNK.min(left.min(usize::MAX as u64) as usize))? {
            break;
        }
        let n = chunk.len();
        left = left.saturating_sub(n as u64);
        let mut want = Expected::default();
        let frames = chunk.frames().map(|(d, f)| (*d, f));
        reference.run(frames, keep_meta, &mut want, Some(&mut expect));
        tracing::debug!("chunk at frame {frame_base}: {n} frames, CPU reference done");
        // GPU: cut the chunk into bursts (by frames and bytes), round-robin over queues.
        let bursts = split_bursts(&chunk, a.burst as usize, data_cap as usize);
        let got = run_bursts(&ex, &bursts, n, keep_meta)?;
        // Bulk kernel over the same frames (device-resident, the throughput path).
        let bulk = if a.bulk {
            let v = bulk_verdicts(&ex, &chunk)?;
            tracing::debug!("chunk at frame {frame_base}: bulk kernel done");
            Some(v)
        } else {
            None
        };
        let gpu = GpuChunk {
            verdicts: &got.verdicts,
            seen: &got.seen,
            metas: keep_meta.then_some(got.metas.as_slice()),
            bulk: bulk.as_deref(),
        };
        compare_chunk(&chunk, frame_base, &want, &gpu, &mut tally, |m| {
            if *show > 0 {
                *show -= 1;
                outln_or_drop!("the verify report"; "{m}");
            }
        });
        report.frames += n as u64;
        report.bursts += bursts.len() as u64;
        frame_base += n as u64;
    }
    report.meta_mismatches = tally.meta;
    report.verdict_mismatches = tally.verdict;
    report.bulk_mismatches = tally.bulk;
    // Counters: the GPU's count stage against the same rules applied on the CPU.
    let snap = ex.counters()?;
    ex.shutdown()?;
    let mut got = QueueCounters::default();
    for c in &snap.queues {
        got.merge(c);
    }
    report.counter_mismatches = expect.compare(report.bursts, &got, &snap.rule_hits);
    report.parse_errors = expect.queue.parse_errors;
    report.acl_matched = expect.queue.acl_matched;
    report.skipped_inputs = src.skipped().to_vec();
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// What the GPU returned for one chunk's bursts, by frame of the chunk.
struct GpuOut {
    verdicts: Vec<Verdict>,
    /// Empty unless metadata is kept.
    metas: Vec<PacketMeta>,
    seen: Vec<bool>,
}

/// Submits `bursts` (a chunk of `n` frames) round-robin over the queues and polls every one back.
fn run_bursts(
    ex: &MultiGpu,
    bursts: &[(usize, Burst)],
    n: usize,
    keep_meta: bool,
) -> anyhow::Result<GpuOut> {
    let mut out = GpuOut {
        verdicts: vec![
            Verdict {
                action: 0xEE,
                ..Default::default()
            };
            n
        ],
        metas: vec![PacketMeta::default(); if keep_meta { n } else { 0 }],
        seen: vec![false; n],
    };
    // Per queue: (seq, first frame index, frames) of bursts in flight.
    let nq = ex.n_queues();
    let mut inflight: Vec<VecDeque<(u32, usize, usize)>> = vec![Default::default(); nq];
    let mut next = 0usize;
    let deadline = Duration::from_secs(60);
    let mut last_progress = Instant::now();
    while next < bursts.len() || inflight.iter().any(|q| !q.is_empty()) {
        let mut progressed = false;
        if next < bursts.len() {
            let q = next % nq;
            let (first, b) = &bursts[next];
            match ex.submit(q, b) {
                Ok(seq) => {
                    inflight[q].push_back((seq, *first, b.len()));
                    next += 1;
                    progressed = true;
                }
                Err(pipeline::internal::executor::gpu::SubmitError::RingFull { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            if next == bursts.len() {
                for q in 0..nq {
                    ex.flush(q)?;
                }
            }
        }
        for (q, fl) in inflight.iter_mut().enumerate() {
            let got = ex.poll(q, |seq, v, m| {
                if let Some(&(s, first, len)) = fl.front() {
                    if s == seq && len == v.len() {
                        out.verdicts[first..first + len].copy_from_slice(v);
                        if let (Some(m), true) = (m, keep_meta) {
                            out.metas[first..first + len].copy_from_slice(m);
                        }
                        for s in &mut out.seen[first..first + len] {
                            *s = true;
                        }
                    }
                    fl.pop_front();
                }
            })?;
            progressed |= got > 0;
        }
        if progressed {
            last_progress = Instant::now();
        } else if last_progress.elapsed() > deadline {
            anyhow::bail!("GPU made no progress for {deadline:?}");
        } else if next >= bursts.len() {
            std::hint::spin_loop();
        }
    }
    Ok(out)
}

/// The bulk (stage throughput) kernel's verdicts for `chunk`, on the last GPU of the list (the
/// first one with one GPU).
fn bulk_verdicts(ex: &MultiGpu, chunk: &Burst) -> anyhow::Result<Vec<Verdict>> {
    let descs: Vec<abi::Desc> = chunk.descs.iter().map(abi::Desc::from).collect();
    let bx = ex
        .executors()
        .last()
        .ok_or_else(|| anyhow::anyhow!("no GPU executor"))?;
    let f = bx.upload_frames(&chunk.data, &descs)?;
    bx.run_bulk(&f, 1)?;
    bx.bulk_verdicts(&f)
}

/// The GPU executor's options for one (mode, placement) of a verify run.
pub fn gpu_options(a: &Args, mode: Mode, placement: Placement) -> GpuOptions {
    GpuOptions {
        mode,
        placement,
        burst_size: a.burst,
        ring_slots: 64,
        graph_bursts: 8,
        slot_data_bytes: Some(slot_data_bytes(a)),
        device: a.device,
        devices: devices_opt(a),
        idle_timeout_ms: 120_000,
        ctas_per_queue: a.ctas,
        burst_ctas: a.burst_ctas,
        tagged: a.tagged,
        block_threads: a.block_threads,
        ..Default::default()
    }
}

/// `--devices` as the executor option (None: `--device` alone).
fn devices_opt(a: &Args) -> Option<Devices> {
    if a.devices.is_empty() {
        None
    } else {
        Some(Devices::List(a.devices.clone()))
    }
}

/// Queues to run: at least one per GPU executor.
pub fn queues_for(a: &Args) -> usize {
    a.queues.max(a.devices.len()).max(1)
}

fn kernel_origin(ex: &MultiGpu) -> String {
    ex.executors()
        .first()
        .map_or(String::new(), |e| e.loaded_from.how.clone())
}

fn describe_input(a: &Args) -> String {
    let base = if let Some(c) = &a.config {
        format!("config {}", c.display())
    } else if let Some(p) = &a.input {
        format!("pcap {}", p.display())
    } else if let Some(t) = &a.trace {
        format!("trace {}", t.display())
    } else {
        format!(
            "gen {} frames ({}% malformed, {}% IPv6)",
            a.gen.unwrap_or(0),
            a.malformed * 100.0,
            a.ipv6 * 100.0
        )
    };
    match &a.rules {
        Some(r) => format!("{base} + rules {}", r.display()),
        None => base,
    }
}
