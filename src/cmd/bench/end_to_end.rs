//! End to end through the ingest path: host bursts -> pinned staging -> DMA (or straight into a
//! mapped ring) -> persistent kernel -> verdicts read back by the host, one feeding host thread
//! per queue, against 400 GbE line rate and the host->device copy bandwidth of the same run.

use pipeline::burst::Burst;
use pipeline::internal::executor::gpu::abi::{self, Desc8};
use pipeline::internal::executor::gpu::{
    AclTablesRef, GpuExecutor, GpuOptions, Mode, PipelineDesc, Placement, SubmitError,
};
use pipeline::verify::Reference;
use serde_json::json;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::super::verify::kernel_image;
use super::inputs::{load_rules, trace_frames};
use super::{Args, Json, Table};

/// The end-to-end table: 64 B and 1518 B frames, both placements, every `--e2e-queues` count.
pub fn section(
    a: &Args,
    rules0: &Path,
    trace0: &Path,
    htod: f64,
    md: &mut Table,
    js: &mut Json,
) -> anyhow::Result<()> {
    let acl = load_rules(rules0)?;
    let tables = acl.tables();
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
        let base = trace_frames(trace0, size)?;
        for placement in [Placement::Device, Placement::Mapped] {
            for &nq in &a.e2e_queues {
                let burst = if size == 64 { 1024 } else { 256 };
                let r = e2e(a, &base, &acl.reference, tables, placement, nq, burst)?;
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
    Ok(())
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
    reference: &Reference,
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
    let bursts: Vec<Burst> = pipeline::verify::split_bursts(base, burst as usize, usize::MAX)
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
                                    for (k, want) in
                                        reference.verdicts(&bursts[bi]).iter().enumerate()
                                    {
                                        checked += 1;
                                        bad += u64::from(v.get(k) != Some(want));
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

/// `v` rounded up to a multiple of `a`.
pub fn round_up(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}
