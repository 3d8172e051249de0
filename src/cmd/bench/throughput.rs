//! Stage throughput on device-resident frames (the bulk kernel) against the CPU executor's
//! pipeline on every core, and the same on several GPU executors at once (`--devices`).

use anyhow::Context as _;
use pipeline::burst::Burst;
use pipeline::counters::QueueCounters as CpuCounters;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::inputs::{bulk_executor, median, BulkSet};
use super::{Args, Json, Table};

/// The stage-throughput table: one row per rule set of `--sets`.
pub fn section(a: &Args, threads: usize, md: &mut Table, js: &mut Json) -> anyhow::Result<()> {
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
        let r = throughput(a, set, threads).with_context(|| format!("throughput {set}"))?;
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
    Ok(())
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

    // CPU: the CPU executor's pipeline (the reference's: parse + acl + count), one worker per
    // thread, bursts of 256.
    let pipeline = set.acl.reference.pipeline();
    let frames = &set.frames;
    let bursts: Vec<Burst> = pipeline::verify::split_bursts(frames, 256, usize::MAX)
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
    Ok((set.acl.n_rules, frames.len(), gpu_mpps, cpu_mpps, equal, ms))
}

/// The several-GPU table: the first set on `devices[0]` alone, then on every entry at once.
pub fn scaling_section(a: &Args, md: &mut Table, js: &mut Json) -> anyhow::Result<()> {
    let r = scaling(a).context("multi-GPU scaling")?;
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
    Ok(())
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
        let (_, want) = set.acl.reference.frame(frames.frame(i), d.port);
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
