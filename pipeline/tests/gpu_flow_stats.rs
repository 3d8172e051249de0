//! On a GPU: flow export on the GPU executor equals the CPU executor's. The CPU runs
//! `parse -> conntrack -> flow_stats -> count`; the GPU executor runs the same pipeline (the
//! ended-flow rings on, cuda/flow.cuh `pw_flow_ring`; flow_stats' CUDA stage a no-op), and its
//! host side's `GpuFlowDrain` drains the rings, sweeps each quiet queue's device buckets and
//! copies the device tables at the end for the stage's flush, over
//! `GpuExecutor::read_queue_state` / `write_queue_state`. The exported records (flows, packets
//! and octets per direction, start and end, TCP flags, end reason) are equal as multisets, and
//! so are the stage's counters: generated connection traffic with churn over two queues, a large
//! table and one so small that flows are evicted, bursts of 32 and 256, persistent and launch,
//! mapped and device rings. Sweeps run on both
//! sides between the same bursts on the same clock, so the active timeout splits the same flows.
//! Needs a CUDA GPU (listed in docs/hardware-only-tests.md; the GPU suite runs it, step
//! `flow-stats`).

#[allow(dead_code)]
mod conntrack_common;
mod gpu_common;

use conntrack_common::traffic;
use pipeline::burst::{Burst, FrameDesc};
use pipeline::counters::QueueCounters;
use pipeline::internal::executor::gpu::{
    image_for_pipeline, GpuExecutor, GpuOptions, Mode, Placement,
};
use pipeline::internal::stage::config::StageConfig;
use pipeline::internal::stage::flow_stats_gpu::GpuFlowDrain;
use pipeline::internal::stage::flow_tables::lock;
use pipeline::stage::{Pipeline, Stage};
use pktwarp_flow::ipfix::{EndReason, FlowQueue, FlowRecord};

const QUEUES: usize = 2;
const SEC: u64 = 1_000_000_000;

fn pipeline_of(yaml: &str) -> Pipeline {
    let stages: Vec<StageConfig> = serde_saphyr::from_str(yaml).expect("stages");
    pipeline::internal::stage::build(&stages, |x| x.to_path_buf()).expect("pipeline")
}

/// Runs `frames` on the executor, each queue's in arrival order, until all are reaped.
fn gpu_run(ex: &GpuExecutor, frames: &[(FrameDesc, Vec<u8>)], burst: usize, what: &str) {
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
                    b.push(&frames[i].1, frames[i].0);
                }
                ex.submit(q, &b).expect("submit");
                next += 1;
            }
            ex.poll(q, |_, _, _| done += 1).expect("poll");
            assert!(t.elapsed().as_secs() < 60, "{what}: bursts never finished");
        }
    }
}

fn sorted(rx: &std::sync::mpsc::Receiver<FlowRecord>) -> Vec<FlowRecord> {
    let mut v: Vec<FlowRecord> = rx.try_iter().collect();
    v.sort_by_key(|r| format!("{r:?}"));
    v
}

/// The flow_stats stage of `p`.
fn fs_of(p: &Pipeline) -> &pipeline::internal::stage::flow_stats::FlowStatsStage {
    p.stages
        .iter()
        .find_map(|s| match s {
            Stage::FlowStats(f) => Some(&**f),
            _ => None,
        })
        .expect("a flow_stats stage")
}

/// One configuration (`own`: flow_stats with a table of its own, no conntrack; `ctas`: CTAs
/// a burst, the owned layout when over 1); returns the records.
fn check(
    mode: Mode,
    placement: Placement,
    burst: usize,
    entries: u64,
    (own, ctas): (bool, u32),
) -> Vec<FlowRecord> {
    let what = format!(
        "{mode:?} / {placement:?} / bursts of {burst} / {entries} entries / own table {own} / \
         burst_ctas {ctas}"
    );
    let table = format!("entries: {entries}, timeouts: {{ udp_unreplied: 5, udp_replied: 20 }}");
    // The stage whose per-queue state holds the tables is pipeline[1] either way.
    let yaml = if own {
        format!("[parse, {{ flow_stats: {{ {table}, active_timeout_s: 10 }} }}, count]")
    } else {
        format!(
            "[parse, {{ conntrack: {{ {table} }} }}, {{ flow_stats: {{ active_timeout_s: 10 }} }}, \
             count]"
        )
    };
    let cpu = pipeline_of(&yaml);
    let cpu_fs = fs_of(&cpu);
    let (q, cpu_rx) = FlowQueue::channel(1 << 20);
    cpu_fs.attach(q);
    // The same pipeline as the GPU executor composes it: flow_stats turned the tables' rings
    // on (before the image is made: the block carries their size), and its records come only
    // through the host side.
    let gpu = pipeline_of(&yaml);
    let gfs = fs_of(&gpu);
    let tables = gfs.tables();
    assert_eq!(gfs.owns_tables(), own);
    assert_eq!(gpu.gpu_refusal(), None);
    let (q, gpu_rx) = FlowQueue::channel(1 << 20);
    gfs.attach(q);
    let image = image_for_pipeline(&gpu).expect("image");
    let pd = gpu_common::counting(true);
    let opts = GpuOptions {
        burst_ctas: (ctas > 1).then_some(ctas),
        ..gpu_common::burst_opts(mode, placement, burst)
    };
    let mut ex = GpuExecutor::new(opts, pd, QUEUES, &image).expect("executor");
    ex.start().expect("start");
    let frames = traffic(31, 8000);
    let c = QueueCounters::new(cpu.stages.len(), 0);
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    let mut drain = GpuFlowDrain::default();
    let mut cursors = [0u32; QUEUES];
    let mut last_rx = [0u64; QUEUES];
    let buckets = (entries / 8 / 3).max(1) as u32;
    {
        let mut read = |q: usize, off: usize, len: usize| ex.read_queue_state(1, 0, q, off, len);
        let mut write = |q: usize, off: usize, b: &[u8]| ex.write_queue_state(1, 0, q, off, b);
        // Eight parts, a sweep on both sides after each (every burst reaped: the queues are
        // quiet), 2 s past the queue's largest receive time.
        for part in frames.chunks(frames.len() / 8 + 1) {
            for chunk in part.chunks(burst) {
                cpu.run_frames(
                    chunk.iter().map(|(d, f)| (*d, f.as_slice())),
                    &mut metas,
                    &mut verdicts,
                    &c,
                );
            }
            gpu_run(&ex, part, burst, &what);
            for (d, _) in part {
                let q = d.queue as usize;
                last_rx[q] = last_rx[q].max(d.timestamp_ns);
                gfs.note_rx(q, d.timestamp_ns);
            }
            drain
                .drain(tables, gfs, QUEUES, &mut read, &mut write)
                .expect("drain");
            for q in 0..QUEUES {
                let now = last_rx[q] + 2 * SEC;
                if let Some(t) = cpu_fs.tables().table(q as u16) {
                    cursors[q] = cpu_fs.sweep_table(&mut lock(t), cursors[q], buckets, now);
                }
                drain
                    .sweep(tables, gfs, q, now, buckets, &mut read, &mut write)
                    .expect("sweep");
            }
        }
        cpu_fs.flush(&mut || {});
        drain
            .drain(tables, gfs, QUEUES, &mut read, &mut write)
            .expect("drain");
        drain.load_tables(tables, QUEUES, &mut read).expect("load");
        gfs.flush(&mut || {});
    }
    let (want, got) = (sorted(&cpu_rx), sorted(&gpu_rx));
    assert_eq!(want.len(), got.len(), "{what}: records");
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w, g, "{what}");
    }
    assert_eq!(
        cpu_fs.counters(),
        gfs.counters(),
        "{what}: flow_stats counters"
    );
    ex.shutdown().expect("shutdown");
    want
}

#[test]
fn flow_export_on_the_gpu_equals_the_cpu() {
    if pipeline::internal::testdata::no_gpu(file!(), "flow_export_on_the_gpu_equals_the_cpu") {
        return;
    }
    for own in [false, true] {
        for burst in [32, 256] {
            for mode in [Mode::Persistent, Mode::Launch] {
                for placement in [Placement::Mapped, Placement::Device] {
                    let r = check(mode, placement, burst, 65536, (own, 1));
                    for why in [
                        EndReason::IdleTimeout,
                        EndReason::ActiveTimeout,
                        EndReason::EndOfFlow,
                        EndReason::ForcedEnd,
                    ] {
                        assert!(
                            r.iter().any(|x| x.end_reason == why),
                            "own table {own}: no {why:?} record"
                        );
                    }
                }
            }
        }
        let r = check(Mode::Persistent, Placement::Device, 32, 16, (own, 1));
        assert!(
            r.iter().any(|x| x.end_reason == EndReason::LackOfResources),
            "own table {own}"
        );
    }
    // The owned layout (several CTAs a burst, each its part of the buckets by the order key:
    // pw_flow_stats_order_key) for the own table, whose only stage before it is parse.
    for ctas in [2, 4] {
        let r = check(
            Mode::Persistent,
            Placement::Device,
            256,
            65536,
            (true, ctas),
        );
        assert!(r.iter().any(|x| x.end_reason == EndReason::ActiveTimeout));
        let r = check(Mode::Persistent, Placement::Device, 32, 16, (true, ctas));
        assert!(r.iter().any(|x| x.end_reason == EndReason::LackOfResources));
    }
}
