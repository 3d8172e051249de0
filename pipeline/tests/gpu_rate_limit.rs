//! On a GPU: the DDoS scrubber's rate limits (`parse -> rate_limit -> count`, the rules of
//! configs/ddos-scrubber.yaml) on the GPU executor equal the CPU executor frame by frame (action
//! and drop reason), and the per-rule and table counters the GPU daemon reads back from each
//! queue's state and folds into the stage (`stage::rate_limit_gpu::GpuRateFold`, over
//! `GpuExecutor::read_queue_state`) equal the CPU stage's: connection traffic over two queues
//! with a SYN flood from sixteen sources, bursts of 32 and 256, persistent and launch, mapped and
//! device rings; then a reload (rules re-rated, or renamed so the buckets start afresh) published
//! as a new parameter block between two halves of the traffic. Then rate_limit beside a second
//! stage with per-queue state in frame order (`parse -> conntrack -> rate_limit -> count` and
//! `parse -> flow_stats (own table) -> rate_limit -> count`: each ordered on its own channel of
//! cuda/flow_order.cuh): every frame's connection state, action and drop reason, the table
//! counters of both stages and rate_limit's per-rule counters. Needs a CUDA GPU (listed in
//! docs/hardware-only-tests.md); the GPU suite runs it (step `rate-limit`), and
//! scripts/gpu-rate-limit-check.sh compares the whole daemon.

#[allow(dead_code)]
mod conntrack_common;
mod gpu_common;
#[allow(dead_code)]
mod rate_limit_common;

use pipeline::burst::{Burst, FrameDesc};
use pipeline::counters::QueueCounters;
use pipeline::internal::executor::gpu::abi::Verdict;
use pipeline::internal::executor::gpu::{
    image_for_pipeline, GpuExecutor, GpuOptions, Mode, Placement,
};
use pipeline::internal::stage::config::StageConfig;
use pipeline::internal::stage::rate_limit_gpu::GpuRateFold;
use pipeline::meta::PacketMeta;
use pipeline::stage::{Pipeline, Stage};
use pipeline::verdict::Action;
use rate_limit_common::{rules_edited, scrubber, with_flood};

const QUEUES: usize = 2;

/// Each frame's (action, drop reason code; 0xFF none).
type Outcome = (u8, u8);

/// The CPU executor's outcomes of `frames` (bursts of `burst` in arrival order).
fn cpu_run(p: &Pipeline, frames: &[(FrameDesc, Vec<u8>)], burst: usize) -> Vec<Outcome> {
    let c = QueueCounters::new(p.stages.len(), 0);
    gpu_common::cpu_answers(p, &c, frames, burst, |_, v| {
        (v.action as u8, v.reason.map_or(0xFF, |r| r as u8))
    })
}

/// Submits each queue's frames to `ex` in bursts of `burst`, in arrival order with up to six
/// in flight, and polls them back: what `pick` reads of each frame (its index in its burst,
/// the burst's verdicts and metadata), by frame; none for a frame that never came back.
fn run_bursts<T>(
    ex: &GpuExecutor,
    frames: &[(FrameDesc, Vec<u8>)],
    burst: usize,
    what: &str,
    mut pick: impl FnMut(usize, &[Verdict], Option<&[PacketMeta]>) -> T,
) -> Vec<Option<T>> {
    let mut got: Vec<Option<T>> = std::iter::repeat_with(|| None).take(frames.len()).collect();
    for q in 0..QUEUES {
        let idx: Vec<usize> = (0..frames.len())
            .filter(|&i| frames[i].0.queue as usize == q)
            .collect();
        let bursts: Vec<&[usize]> = idx.chunks(burst).collect();
        let (mut done, mut next) = (0usize, 0usize);
        let mut seqs = std::collections::HashMap::new();
        let t = std::time::Instant::now();
        while done < bursts.len() {
            while next < bursts.len() && next - done < 6 {
                let mut b = Burst::default();
                for &i in bursts[next] {
                    b.push(&frames[i].1, frames[i].0);
                }
                seqs.insert(ex.submit(q, &b).expect("submit"), next);
                next += 1;
            }
            ex.poll(q, |seq, v, m| {
                for (k, &i) in bursts[seqs[&seq]].iter().enumerate() {
                    got[i] = Some(pick(k, v, m));
                }
                done += 1;
            })
            .expect("poll");
            assert!(t.elapsed().as_secs() < 60, "{what}: bursts never finished");
        }
    }
    got
}

/// Runs `frames` on the executor, each queue's in arrival order; their outcomes.
fn gpu_run(
    ex: &GpuExecutor,
    frames: &[(FrameDesc, Vec<u8>)],
    burst: usize,
    what: &str,
) -> Vec<Outcome> {
    let got = run_bursts(ex, frames, burst, what, |k, v, _| {
        (v[k].action, v[k].drop_reason)
    });
    got.into_iter()
        .enumerate()
        .map(|(i, g)| g.unwrap_or_else(|| panic!("{what}: frame {i} never came back")))
        .collect()
}

/// Compares frame by frame; the frames limited.
fn compare(
    want: &[Outcome],
    got: &[Outcome],
    frames: &[(FrameDesc, Vec<u8>)],
    what: &str,
) -> usize {
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        assert_eq!(
            w, g,
            "{what}: frame {i} (queue {}): (action, reason) cpu vs gpu",
            frames[i].0.queue
        );
    }
    want.iter().filter(|o| o.0 == Action::Drop as u8).count()
}

/// The scrubber's rules re-rated (syn_flood 100 -> 150 a second), and renamed when `rename`.
fn reloaded(rename: bool) -> Vec<StageConfig> {
    let r = rules_edited(65536, &|t| {
        let t = t.replace("rate_pps: 100\n", "rate_pps: 150\n");
        if rename {
            t.replace("name: syn_flood", "name: syn_budget")
        } else {
            t
        }
    });
    vec![
        StageConfig::Parse,
        StageConfig::RateLimit(r),
        StageConfig::Count,
    ]
}

fn check(mode: Mode, placement: Placement, burst: usize, rename: bool) {
    let what = format!("{mode:?} / {placement:?} / bursts of {burst} / rename {rename}");
    let (cpu, gpu) = (scrubber(65536), scrubber(65536));
    let frames = with_flood(7, 4000, 8000);
    let half = frames.len() / 2;
    let image = image_for_pipeline(&gpu).expect("image");
    assert!(pktwarp_kernels::codegen::pipeline_orders_flows(
        &image.stages
    ));
    let pd = gpu_common::counting(true);
    let opts = gpu_common::burst_opts(mode, placement, burst);
    let mut ex = GpuExecutor::new(opts, pd, QUEUES, &image).expect("executor");
    ex.start().expect("start");
    let mut fold = GpuRateFold::new(&gpu);
    let mut read =
        |k: usize, q: usize, off: usize, len: usize| ex.read_queue_state(k, 0, q, off, len);
    // The first half, then the reload on both (the GPU's as the daemon publishes it: fold,
    // publish the new block, take the new names), then the second half.
    let want = cpu_run(&cpu, &frames[..half], burst);
    let got = gpu_run(&ex, &frames[..half], burst, &what);
    let mut limited = compare(&want, &got, &frames[..half], &what);
    fold.fold(&gpu, QUEUES, &mut read).expect("fold");
    for p in [&cpu, &gpu] {
        p.reload_stage_options(&reloaded(rename)).expect("reload");
    }
    let params: Vec<Vec<u8>> = gpu
        .gpu_stage_list()
        .iter()
        .map(|s| s.library.as_ref().map_or(Vec::new(), |l| l.block.clone()))
        .collect();
    ex.publish_stage_params(&params, gpu.params_generation())
        .expect("publish");
    fold.published(&gpu);
    let want = cpu_run(&cpu, &frames[half..], burst);
    let got = gpu_run(&ex, &frames[half..], burst, &what);
    limited += compare(&want, &got, &frames[half..], &what);
    assert!(limited > 100, "{what}: only {limited} frames limited");
    fold.fold(&gpu, QUEUES, &mut read).expect("fold");
    let (c, g) = (cpu.stages[1].rate_limit(), gpu.stages[1].rate_limit());
    let (c, g) = (c.expect("rate_limit"), g.expect("rate_limit"));
    assert_eq!(g.counters(), c.counters(), "{what}: table counters");
    assert_eq!(
        g.rule_counters(),
        c.rule_counters(),
        "{what}: rule counters"
    );
    let names: Vec<String> = c.rule_counters().into_iter().map(|r| r.0).collect();
    assert_eq!(names.len(), if rename { 5 } else { 4 }, "{what}: {names:?}");
    ex.shutdown().expect("shutdown");
}

#[test]
fn rate_limit_on_the_gpu_equals_the_cpu_frame_by_frame() {
    if pipeline::internal::testdata::no_gpu(
        file!(),
        "rate_limit_on_the_gpu_equals_the_cpu_frame_by_frame",
    ) {
        return;
    }
    for burst in [32, 256] {
        for mode in [Mode::Persistent, Mode::Launch] {
            for placement in [Placement::Mapped, Placement::Device] {
                check(mode, placement, burst, placement == Placement::Device);
            }
        }
    }
}

/// Per-source budgets beside a flow table (pipeline/tests/ordered_pair_cuda_host.rs's rules).
const PAIR_RL: &str = "{ entries: 256, rules: [\
    { name: syn, match: { proto: tcp, tcp_flags: \"syn !ack\" }, key: src, rate_pps: 100, burst: 50 },\
    { name: per_net, key: src_prefix/24/48, rate_pps: 2000, burst: 60 } ] }";

fn pipeline_of(yaml: &str) -> Pipeline {
    let stages: Vec<StageConfig> = serde_saphyr::from_str(yaml).expect("stages");
    pipeline::internal::stage::build(&stages, |x| x.to_path_buf()).expect("pipeline")
}

/// `first` (a conntrack or flow_stats stage with a table of its own) then rate_limit, on the
/// GPU against the CPU: (ct_state, action, reason) of every frame, the flow table's counters
/// (stage 1's v[1..7]) and rate_limit's counters folded from the device.
fn check_pair(first: &str, mode: Mode, placement: Placement, burst: usize) {
    let what = format!("{first} / {mode:?} / {placement:?} / bursts of {burst}");
    let yaml = format!("[parse, {first}, {{ rate_limit: {PAIR_RL} }}, count]");
    let (cpu, gpu) = (pipeline_of(&yaml), pipeline_of(&yaml));
    assert_eq!(gpu.gpu_refusal(), None, "{what}");
    let frames = with_flood(9, 6000, 6000);
    let c = QueueCounters::new(cpu.stages.len(), 0);
    let want = gpu_common::cpu_answers(&cpu, &c, &frames, burst, |m, v| {
        (
            m.ct_state,
            v.action as u8,
            v.reason.map_or(0xFF, |r| r as u8),
        )
    });
    let image = image_for_pipeline(&gpu).expect("image");
    assert_eq!(image.stages.iter().filter(|s| s.orders_flows()).count(), 2);
    let pd = gpu_common::counting(true);
    let opts = GpuOptions {
        emit_meta: true,
        ..gpu_common::burst_opts(mode, placement, burst)
    };
    let mut ex = GpuExecutor::new(opts, pd, QUEUES, &image).expect("executor");
    assert_eq!(ex.options().parts(), 1, "{what}: one CTA a burst");
    ex.start().expect("start");
    let got = run_bursts(&ex, &frames, burst, &what, |k, v, m| {
        let m = m.expect("metadata back (emit_meta)");
        (m[k].ct_state, v[k].action, v[k].drop_reason)
    });
    let mut limited = 0usize;
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(
            Some(*w),
            *g,
            "{what}: frame {i} (queue {}): (ct_state, action, reason) cpu vs gpu",
            frames[i].0.queue
        );
        limited += usize::from(w.1 == Action::Drop as u8);
    }
    assert!(limited > 100, "{what}: only {limited} frames limited");
    let tables = match &cpu.stages[1] {
        Stage::Conntrack(ct) => ct.tables().counters(),
        Stage::FlowStats(fs) => fs.tables().counters(),
        _ => panic!("{what}: pipeline[1] keeps a flow table"),
    };
    let cpu_table = [
        tables.created,
        tables.expired,
        tables.early_evicted,
        tables.table_full,
        tables.untracked,
        tables.invalid,
    ];
    let snap = ex.counters().expect("counters");
    let mut gpu_table = [0u64; 6];
    for q in &snap.stages {
        for (s, v) in gpu_table.iter_mut().zip(&q[1].v[1..7]) {
            *s += v;
        }
    }
    assert_eq!(gpu_table, cpu_table, "{what}: flow table counters");
    let mut fold = GpuRateFold::new(&gpu);
    let mut read =
        |k: usize, q: usize, off: usize, len: usize| ex.read_queue_state(k, 0, q, off, len);
    fold.fold(&gpu, QUEUES, &mut read).expect("fold");
    let (c, g) = (cpu.stages[2].rate_limit(), gpu.stages[2].rate_limit());
    let (c, g) = (c.expect("rate_limit"), g.expect("rate_limit"));
    assert_eq!(g.counters(), c.counters(), "{what}: rate table counters");
    assert_eq!(
        g.rule_counters(),
        c.rule_counters(),
        "{what}: rule counters"
    );
    ex.shutdown().expect("shutdown");
}

/// Two stages with per-queue state in frame order in one GPU pipeline, each by its own key
/// (the flow's, the source's): the same as the CPU, which runs both per frame in arrival order.
#[test]
fn rate_limit_beside_a_flow_table_on_the_gpu_equals_the_cpu() {
    if pipeline::internal::testdata::no_gpu(
        file!(),
        "rate_limit_beside_a_flow_table_on_the_gpu_equals_the_cpu",
    ) {
        return;
    }
    for first in [
        "{ conntrack: { entries: 1024 } }",
        "{ flow_stats: { entries: 1024, active_timeout_s: 1800 } }",
    ] {
        for burst in [32, 256] {
            for mode in [Mode::Persistent, Mode::Launch] {
                for placement in [Placement::Mapped, Placement::Device] {
                    check_pair(first, mode, placement, burst);
                }
            }
        }
    }
}
