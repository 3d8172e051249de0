//! On a GPU: the `inspect` stage on the GPU executor equals the CPU executor frame by frame:
//! `parse -> inspect -> count` and `parse -> conntrack -> inspect -> count` over generated
//! traffic with planted payloads (VLAN, IPv6 with extension headers, VXLAN, GTP-U, fragments,
//! cut frames), the fixed rule set and property-generated ones: every frame's action and drop
//! reason, the stage's counters and every rule's hits read back from the device buffer, in
//! every mode and ring placement, bursts of 32 and 256. Needs a CUDA GPU (listed in
//! docs/hardware-only-tests.md); `scripts/gpu-suite.sh` runs it (check `inspect-gpu`), and
//! scripts/gpu-inspect-check.sh compares the whole daemon with ET Open.

mod inspect_common;

use inspect_common::{fixed_rules, pipeline, random_rules, rule_sids, scratch, sid_hits, traffic};
use pipeline::burst::Burst;
use pipeline::counters::QueueCounters;
use pipeline::internal::executor::gpu::{
    image_for_pipeline, GpuExecutor, GpuOptions, Mode, PipelineDesc, Placement,
};
use pipeline::stage::{Pipeline, Stage};

const QUEUES: usize = 2;

fn check(p: &Pipeline, what: &str, mode: Mode, placement: Placement, burst: usize) {
    let what = format!("{what}: {mode:?} / {placement:?} / bursts of {burst}");
    let frames = traffic(7, 20_000);
    let k = p
        .stages
        .iter()
        .position(|s| s.name() == "inspect")
        .expect("inspect");
    // The CPU executor's answer, frame by frame (one queue's frames in arrival order).
    let c = QueueCounters::new(p.stages.len(), 0);
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    let mut want = Vec::with_capacity(frames.len());
    for chunk in frames.chunks(burst) {
        p.run_frames(
            chunk.iter().map(|(d, f)| (*d, f.as_slice())),
            &mut metas,
            &mut verdicts,
            &c,
        );
        for v in &verdicts {
            want.push((v.action as u8, v.reason.map_or(0xFF, |r| r as u8)));
        }
    }
    let Stage::Custom(slot) = &p.stages[k] else {
        panic!("pipeline[{k}] is inspect")
    };
    let cpu_counters: Vec<u64> = slot.counters().iter().take(5).map(|c| c.1).collect();
    let cpu_hits = sid_hits(slot);
    let sids = rule_sids(p, k);

    let image = image_for_pipeline(p).expect("image");
    let pd = PipelineDesc {
        parse: true,
        acl: None,
        count: true,
        default_action: 0,
    };
    let opts = GpuOptions {
        mode,
        placement,
        burst_size: burst as u32,
        ring_slots: 8,
        emit_meta: true,
        tagged: Some(false),
        ..GpuOptions::default()
    };
    let mut ex = GpuExecutor::new(opts, pd, QUEUES, &image).expect("executor");
    ex.start().expect("start");
    let mut got: Vec<Option<(u8, u8)>> = vec![None; frames.len()];
    for q in 0..QUEUES {
        let idx: Vec<usize> = (0..frames.len())
            .filter(|&i| frames[i].0.queue as usize == q)
            .collect();
        let bursts: Vec<&[usize]> = idx.chunks(burst).collect();
        let (mut done, mut next) = (0usize, 0usize);
        let t = std::time::Instant::now();
        while done < bursts.len() {
            while next < bursts.len() && next - done < 6 {
                let mut b = Burst::default();
                for &i in bursts[next] {
                    let (d, f) = &frames[i];
                    b.push(f, *d);
                }
                ex.submit(q, &b).expect("submit");
                next += 1;
            }
            ex.poll(q, |seq, v, _| {
                for (j, &i) in bursts[seq as usize].iter().enumerate() {
                    got[i] = Some((v[j].action, v[j].drop_reason));
                }
                done += 1;
            })
            .expect("poll");
            assert!(t.elapsed().as_secs() < 60, "{what}: bursts never finished");
        }
    }
    // `want` is in chunk order over all frames; the CPU ran them in arrival order, as each
    // queue's bursts run on the GPU (the stage keeps no state across frames but conntrack's).
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(
            Some(*w),
            *g,
            "{what}: frame {i}: (action, reason) cpu vs gpu"
        );
    }
    let snap = ex.counters().expect("counters");
    let mut gpu_counters = vec![0u64; 5];
    for q in &snap.stages {
        for (s, v) in gpu_counters.iter_mut().zip(&q[k].v[1..6]) {
            *s += v;
        }
    }
    assert_eq!(gpu_counters, cpu_counters, "{what}: inspect counters");
    let hits = ex.read_stage_buffer(k, 0).expect("hit buffer");
    let mut gpu_hits = std::collections::BTreeMap::new();
    for (r, w) in hits.chunks_exact(8).enumerate() {
        let h = u64::from_le_bytes(w.try_into().unwrap());
        if h > 0 {
            *gpu_hits.entry(sids[r]).or_insert(0u64) += h;
        }
    }
    assert_eq!(gpu_hits, cpu_hits, "{what}: rule hits by sid");
    assert_eq!(
        gpu_hits.values().sum::<u64>(),
        gpu_counters[1],
        "{what}: hits sum to alerts"
    );
    ex.shutdown().expect("shutdown");
}

#[test]
fn inspect_on_the_gpu_equals_the_cpu_frame_by_frame() {
    if let Err(e) = pipeline::internal::executor::gpu::probe(0) {
        pipeline::internal::testdata::skip(
            file!(),
            "inspect_on_the_gpu_equals_the_cpu_frame_by_frame",
            &format!("no usable GPU: {e}"),
        );
        return;
    }
    let d = scratch("gpu");
    let fixed = d.join("fixed.rules");
    std::fs::write(&fixed, fixed_rules(true)).unwrap();
    let random = d.join("random.rules");
    std::fs::write(&random, random_rules(42, 200, true)).unwrap();
    for burst in [32, 256] {
        for mode in [Mode::Persistent, Mode::Launch] {
            for placement in [Placement::Mapped, Placement::Device] {
                // A fresh pipeline each time: the CPU's counters and conntrack's tables are
                // the run's.
                check(
                    &pipeline(&fixed, false, "host"),
                    "fixed",
                    mode,
                    placement,
                    burst,
                );
                check(
                    &pipeline(&fixed, true, "none"),
                    "fixed + conntrack",
                    mode,
                    placement,
                    burst,
                );
                check(
                    &pipeline(&random, true, "mirror"),
                    "random",
                    mode,
                    placement,
                    burst,
                );
            }
        }
    }
}

/// A rule reload on a running GPU executor: the new set's block published by epoch
/// (`publish_stage_params`); bursts submitted before it run set a, those after it set b, each
/// frame's (action, reason) as the CPU stage's under that set, and set b's hits in bank 1.
fn check_reload(mode: Mode, placement: Placement) {
    use pktwarp_inspect::gpu;
    let what = format!("reload: {mode:?} / {placement:?}");
    let d = scratch(&format!("gpu-reload-{mode:?}-{placement:?}"));
    let rules = d.join("r.rules");
    std::fs::write(&rules, fixed_rules(false)).unwrap();
    let p = pipeline(&rules, false, "host");
    let frames = traffic(11, 8000);
    // The CPU's answer for every frame under each set (the stage keeps no state here).
    let answers = |p: &Pipeline| -> Vec<(u8, u8)> {
        let c = QueueCounters::new(p.stages.len(), 0);
        let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
        let mut out = Vec::new();
        for chunk in frames.chunks(32) {
            p.run_frames(
                chunk.iter().map(|(d, f)| (*d, f.as_slice())),
                &mut metas,
                &mut verdicts,
                &c,
            );
            out.extend(
                verdicts
                    .iter()
                    .map(|v| (v.action as u8, v.reason.map_or(0xFF, |r| r as u8))),
            );
        }
        out
    };
    let want_a = answers(&p);
    let image = image_for_pipeline(&p).expect("image");
    let pd = PipelineDesc {
        parse: true,
        acl: None,
        count: true,
        default_action: 0,
    };
    let opts = GpuOptions {
        mode,
        placement,
        burst_size: 32,
        ring_slots: 8,
        tagged: Some(false),
        ..GpuOptions::default()
    };
    let mut ex = GpuExecutor::new(opts, pd, 1, &image).expect("executor");
    ex.start().expect("start");
    let bursts: Vec<Vec<usize>> = (0..frames.len())
        .collect::<Vec<_>>()
        .chunks(32)
        .map(|c| c.to_vec())
        .collect();
    let half = bursts.len() / 2;
    let mut got: Vec<Option<(u8, u8)>> = vec![None; frames.len()];
    let (mut done, mut next) = (0usize, 0usize);
    let mut want_b = Vec::new();
    let t = std::time::Instant::now();
    while done < bursts.len() {
        while next < bursts.len() && next - done < 6 {
            if next == half {
                std::fs::write(&rules, random_rules(9, 80, false)).unwrap();
                let Stage::Custom(slot) = &p.stages[1] else {
                    panic!("inspect")
                };
                let r = slot.cpu().reload_files().expect("reload").expect("files");
                (r.publish)();
                want_b = answers(&p);
                let (_, params) =
                    pipeline::internal::executor::gpu::compose::stage_specs(&p).expect("specs");
                ex.publish_stage_params(&params, p.params_generation())
                    .expect("publish");
            }
            let mut b = Burst::default();
            for &i in &bursts[next] {
                let (d, f) = &frames[i];
                b.push(f, *d);
            }
            ex.submit(0, &b).expect("submit");
            next += 1;
        }
        ex.poll(0, |seq, v, _| {
            for (j, &i) in bursts[seq as usize].iter().enumerate() {
                got[i] = Some((v[j].action, v[j].drop_reason));
            }
            done += 1;
        })
        .expect("poll");
        assert!(t.elapsed().as_secs() < 60, "{what}: bursts never finished");
    }
    for (n, b) in bursts.iter().enumerate() {
        let want = if n < half { &want_a } else { &want_b };
        for &i in b {
            assert_eq!(got[i], Some(want[i]), "{what}: frame {i} (burst {n})");
        }
    }
    let hits = ex.read_stage_buffer(1, 0).expect("hit buffer");
    let bank1: u64 = hits[gpu::MAX_RULES * 8..]
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
        .sum();
    assert!(bank1 > 0, "{what}: set b counted in bank 1");
    ex.shutdown().expect("shutdown");
}

#[test]
fn a_rule_reload_on_the_gpu_publishes_the_new_set_by_epoch() {
    if let Err(e) = pipeline::internal::executor::gpu::probe(0) {
        pipeline::internal::testdata::skip(
            file!(),
            "a_rule_reload_on_the_gpu_publishes_the_new_set_by_epoch",
            &format!("no usable GPU: {e}"),
        );
        return;
    }
    for mode in [Mode::Persistent, Mode::Launch] {
        for placement in [Placement::Mapped, Placement::Device] {
            check_reload(mode, placement);
        }
    }
}
