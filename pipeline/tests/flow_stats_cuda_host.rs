//! Flow export on the GPU executor, compiled for the host, equals the CPU executor's: the CPU
//! runs `parse -> conntrack -> flow_stats` (`Pipeline::run_frames`, the stage exporting at each
//! frame's visit, its sweeps and its shutdown flush); the GPU side runs the same pipeline as the
//! GPU executor generates it (cuda/conntrack_stage.cuh with the ended-flow ring after each
//! queue's table, cuda/flow_stats_stage.cuh doing nothing per frame), its host side draining the
//! rings, sweeping each quiet queue's device buckets and copying the device tables at the end
//! for the stage's flush (`GpuFlowDrain`). The exported records (flows,
//! packets and octets per direction, start and end, TCP flags, end reason) are equal as
//! multisets, and so are the stage's counters and conntrack's (the sweeps' removals counted).
//! Sweeps run on both sides at the same frames with the same clock (the queue's largest receive
//! time, plus a step), so the active timeout splits the same flows at the same times.
//!
//! The same with flow_stats keeping a table of its own (`parse -> flow_stats`, no conntrack): on
//! the GPU `pw_stage_flow_stats_own` (cuda/flow_stats_stage.cuh: conntrack's apply without the
//! metadata store, its tables and rings the stage's per-queue state), whose metadata, tables
//! (byte for byte, after every frame for small tables) and table counters equal the CPU stage's.
//!
//! Traffic: generated connections with churn over two queues (a large table, and one so small
//! that flows are evicted and new ones refused), and the tcpdump corpus.

#[allow(dead_code)]
mod conntrack_common;
mod host_cuda_common;

use std::sync::mpsc::Receiver;

use conntrack_common::{queue_of, traffic};
use host_cuda_common::host_frame;
use pipeline::burst::FrameDesc;
use pipeline::counters::QueueCounters;
use pipeline::internal::stage::config::StageConfig;
use pipeline::internal::stage::flow_stats::FlowStatsStage;
use pipeline::internal::stage::flow_stats_gpu::GpuFlowDrain;
use pipeline::internal::stage::flow_tables::lock;
use pipeline::stage::{Pipeline, Stage};
use pktwarp_flow::ipfix::{EndReason, FlowQueue, FlowRecord};
use pktwarp_kernels::host::HostPipeline;

const SEC: u64 = 1_000_000_000;

fn pipeline_of(yaml: &str) -> Pipeline {
    let stages: Vec<StageConfig> = serde_saphyr::from_str(yaml).expect("stages");
    pipeline::internal::stage::build(&stages, |x| x.to_path_buf()).expect("pipeline")
}

/// What one comparison saw.
struct Outcome {
    records: Vec<FlowRecord>,
    counters: Vec<(&'static str, u64)>,
    /// The CPU tables' counters.
    table: pktwarp_flow::FlowCounters,
}

fn sorted(rx: &Receiver<FlowRecord>) -> Vec<FlowRecord> {
    let mut v: Vec<FlowRecord> = rx.try_iter().collect();
    v.sort_by_key(|r| format!("{r:?}"));
    v
}

/// The two pipelines of one comparison (`own`: flow_stats with a table of its own,
/// `parse -> flow_stats`; else `parse -> conntrack -> flow_stats`), each flow_stats stage's
/// records into a channel: the CPU's, and the GPU side's, which only its host side feeds.
fn pipelines(
    entries: u64,
    active_s: u64,
    own: bool,
) -> (
    Pipeline,
    Receiver<FlowRecord>,
    Pipeline,
    Receiver<FlowRecord>,
) {
    let table = format!("entries: {entries}, timeouts: {{ udp_unreplied: 5, udp_replied: 20 }}");
    let yaml = if own {
        format!("[parse, {{ flow_stats: {{ {table}, active_timeout_s: {active_s} }} }}]")
    } else {
        format!(
            "[parse, {{ conntrack: {{ {table} }} }}, \
             {{ flow_stats: {{ active_timeout_s: {active_s} }} }}]"
        )
    };
    let (cpu, gpu) = (pipeline_of(&yaml), pipeline_of(&yaml));
    let (q, cpu_rx) = FlowQueue::channel(1 << 20);
    fs_of(&cpu).attach(q);
    let (q, gpu_rx) = FlowQueue::channel(1 << 20);
    fs_of(&gpu).attach(q);
    assert_eq!(fs_of(&gpu).owns_tables(), own);
    assert_eq!(gpu.gpu_refusal(), None);
    assert_eq!(
        pipeline::internal::stage::flow_stats_gpu::gpu_ring_cap(fs_of(&gpu).tables()),
        pktwarp_flow::ENDED_CAP as u32
    );
    (cpu, cpu_rx, gpu, gpu_rx)
}

/// The GPU side's code compiled for the host, as the GPU executor composes `gpu` (the stage
/// that keeps the tables is pipeline[1] either way), and its per-queue state for `queues`
/// queues: one zeroed buffer, queue q's part at q * its bytes, its address and the queue count
/// in the keeper's block. Returns the build, the blocks (the keeper's patched), the state and
/// one queue's bytes of it.
fn host_build(
    gpu: &Pipeline,
    own: bool,
    queues: usize,
) -> (HostPipeline, Vec<Vec<u8>>, Vec<u64>, usize) {
    let (specs, mut params) =
        pipeline::internal::executor::gpu::compose::stage_specs(gpu).expect("specs");
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let functions: Vec<&str> = specs.iter().map(|s| s.function()).collect();
    if own {
        assert_eq!(names, ["parse", "flow_stats"]);
        assert_eq!(functions[1], "pw_stage_flow_stats_own");
    } else {
        assert_eq!(names, ["parse", "conntrack", "flow_stats"]);
        assert_eq!(functions[2], "pw_stage_flow_stats");
    }
    // Frames of one flow in arrival order on the GPU (flow_order.cuh), as conntrack's.
    assert!(pktwarp_kernels::codegen::pipeline_orders_flows(&specs));
    let host = HostPipeline::compile(&specs).unwrap_or_else(|e| panic!("{e}"));
    let state = gpu.stages[1].gpu_queue_state();
    assert_eq!(state.len(), 1, "one per-queue state: the tables and rings");
    let per_queue = state[0].bytes;
    let mut dev = vec![0u64; per_queue * queues / 8];
    let at = state[0].addr_at;
    params[1][at..at + 8].copy_from_slice(&(dev.as_mut_ptr() as u64).to_le_bytes());
    params[1][at + 8..at + 12].copy_from_slice(&(queues as u32).to_le_bytes());
    (host, params, dev, per_queue)
}

/// Runs `frames` (over `queues` queues) through both sides with a table of `entries` a queue
/// and `active_s`, sweeping `buckets` buckets a queue every `every` bursts of 32 at the queue's
/// largest receive time plus `step_ns`; compares and returns the CPU side's outcome. `own`:
/// flow_stats with a table of its own (on the GPU `pw_stage_flow_stats_own`), else over
/// conntrack's. After every frame the metadata is the CPU's, and every table's bytes are the
/// CPU's after every frame (tables of up to 64 entries) or burst, and after every sweep.
fn compare(
    frames: &[(FrameDesc, Vec<u8>)],
    queues: usize,
    entries: u64,
    active_s: u64,
    (every, buckets, step_ns): (usize, u32, u64),
    own: bool,
) -> Outcome {
    let (cpu, cpu_rx, gpu, gpu_rx) = pipelines(entries, active_s, own);
    let (cpu_fs, gfs) = (fs_of(&cpu), fs_of(&gpu));
    let tables = gfs.tables();
    let (host, params, mut dev, per_queue) = host_build(&gpu, own, queues);
    let blocks: Vec<&[u8]> = params.iter().map(Vec::as_slice).collect();
    let table_bytes = pktwarp_flow::bytes_needed(entries) as usize;
    let c = QueueCounters::new(cpu.stages.len(), 0);
    let mut gc = [[0u64; 8]; pktwarp_kernels::MAX_STAGES];
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    let mut drain = GpuFlowDrain::default();
    let mut cursors = vec![0u32; queues];
    let mut last_rx = vec![0u64; queues];
    let dev_ptr = dev.as_mut_ptr() as *mut u8;
    let dev_len = dev.len() * 8;
    // The device state as bytes, read and written by the host side's closures only between
    // frames (the host build runs no kernel beside them).
    let mut read = |q: usize, off: usize, len: usize| -> anyhow::Result<Vec<u8>> {
        // SAFETY: `dev` outlives the closures and no frame runs while they do; the range is
        // inside queue q's part (checked).
        let s = unsafe { std::slice::from_raw_parts(dev_ptr, dev_len) };
        anyhow::ensure!(off + len <= per_queue, "past queue {q}'s state");
        Ok(s[q * per_queue + off..][..len].to_vec())
    };
    let mut write = |q: usize, off: usize, b: &[u8]| -> anyhow::Result<()> {
        // SAFETY: as `read`.
        let s = unsafe { std::slice::from_raw_parts_mut(dev_ptr, dev_len) };
        anyhow::ensure!(off + b.len() <= per_queue, "past queue {q}'s state");
        s[q * per_queue + off..][..b.len()].copy_from_slice(b);
        Ok(())
    };
    // The device's table of queue q against the CPU's, byte for byte.
    let same_table = |read: &mut dyn FnMut(usize, usize, usize) -> anyhow::Result<Vec<u8>>,
                      q: usize,
                      what: &str| {
        let Some(t) = cpu_fs.tables().table(q as u16) else {
            return;
        };
        let want = lock(t).as_bytes().to_vec();
        let got = read(q, 0, table_bytes).expect("read");
        let e = (0..want.len())
            .find(|&i| want[i] != got[i])
            .map(|i| i / 128);
        if let Some(e) = e {
            panic!(
                "{what}: queue {q}'s table differs first at entry {e}: cpu {:?} gpu {:?}",
                &want[e * 128..][..128],
                &got[e * 128..][..128]
            );
        }
    };
    let per_frame = entries <= 64;
    for (n, chunk) in frames.chunks(32).enumerate() {
        for (i, (d, f)) in chunk.iter().enumerate() {
            let at = n * 32 + i;
            cpu.run_frames(
                std::iter::once((*d, f.as_slice())),
                &mut metas,
                &mut verdicts,
                &c,
            );
            let (gm, _) = host_frame(&host, (n, i), (d, f), &blocks, None, &mut gc);
            assert_eq!(&gm, metas[0].as_bytes(), "frame {at}: metadata");
            let q = d.queue as usize;
            last_rx[q] = last_rx[q].max(d.timestamp_ns);
            gfs.note_rx(q, d.timestamp_ns);
            if per_frame {
                same_table(&mut read, q, &format!("frame {at}"));
            }
        }
        for q in (0..queues).filter(|_| !per_frame) {
            same_table(&mut read, q, &format!("burst {n}"));
        }
        if (n + 1) % every != 0 {
            continue;
        }
        // The sweeps: the CPU's on its tables, the GPU host side's on the device buckets of
        // each (quiet) queue after draining its ring.
        drain
            .drain(tables, gfs, queues, &mut read, &mut write)
            .expect("drain");
        for q in (0..queues).filter(|&q| last_rx[q] != 0) {
            let now = last_rx[q] + step_ns;
            if let Some(t) = cpu_fs.tables().table(q as u16) {
                cursors[q] = cpu_fs.sweep_table(&mut lock(t), cursors[q], buckets, now);
            }
            drain
                .sweep(tables, gfs, q, now, buckets, &mut read, &mut write)
                .expect("sweep");
            same_table(&mut read, q, &format!("the sweep after burst {n}"));
        }
    }
    cpu_fs.flush(&mut || {});
    drain
        .drain(tables, gfs, queues, &mut read, &mut write)
        .expect("drain");
    drain.load_tables(tables, queues, &mut read).expect("load");
    gfs.flush(&mut || {});
    finish(&cpu, &gpu, (&cpu_rx, &gpu_rx), &gc, drain.swept(), &c)
}

/// The end of a comparison: the records of both sides as multisets, flow_stats' counters, the
/// table's counters (conntrack's block, or flow_stats' own v[1..=6]: created, expired,
/// early_evicted, table_full, untracked, invalid; the sweeps' removals, `swept`, added as
/// `expired`) and the frames per stage.
fn finish(
    cpu: &Pipeline,
    gpu: &Pipeline,
    (cpu_rx, gpu_rx): (&Receiver<FlowRecord>, &Receiver<FlowRecord>),
    gc: &[[u64; 8]],
    swept: u64,
    c: &QueueCounters,
) -> Outcome {
    let (cpu_fs, gfs) = (fs_of(cpu), fs_of(gpu));
    let (want, got) = (sorted(cpu_rx), sorted(gpu_rx));
    assert_eq!(want.len(), got.len(), "records");
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w, g);
    }
    assert_eq!(cpu_fs.counters(), gfs.counters(), "flow_stats counters");
    let mut gpu_table: Vec<u64> = gc[1][1..7].to_vec();
    gpu_table[1] += swept;
    let t = cpu_fs.tables().counters();
    let want_table = vec![
        t.created,
        t.expired,
        t.early_evicted,
        t.table_full,
        t.untracked,
        t.invalid,
    ];
    assert_eq!(want_table, gpu_table, "table counters {t:?}");
    if let Stage::Conntrack(ct) = &cpu.stages[1] {
        let named: Vec<u64> = ct.counters().iter().map(|c| c.1).collect();
        assert_eq!(
            named, want_table,
            "conntrack's named counters are its tables'"
        );
    }
    for (k, g) in gc.iter().enumerate().take(cpu.stages.len()) {
        assert_eq!(g[0], c.stage_frames[k].get(), "frames at stage {k}");
    }
    Outcome {
        records: want,
        counters: cpu_fs.counters(),
        table: t,
    }
}

fn fs_of(p: &Pipeline) -> &FlowStatsStage {
    p.stages
        .iter()
        .find_map(|s| match s {
            Stage::FlowStats(f) => Some(&**f),
            _ => None,
        })
        .expect("a flow_stats stage")
}

fn by_reason(o: &Outcome, r: EndReason) -> usize {
    o.records.iter().filter(|x| x.end_reason == r).count()
}

fn get(o: &Outcome, name: &str) -> u64 {
    o.counters.iter().find(|c| c.0 == name).map_or(0, |c| c.1)
}

#[test]
fn generated_connections_export_the_same_records_on_both() {
    generated_connections(false);
}

/// flow_stats with a table of its own (`pw_stage_flow_stats_own`): the same as over
/// conntrack's.
#[test]
fn generated_connections_export_the_same_records_with_an_own_table() {
    generated_connections(true);
}

fn generated_connections(own: bool) {
    let frames = traffic(21, 6000);
    let span = frames.last().unwrap().0.timestamp_ns - frames[0].0.timestamp_ns;
    assert!(span > 20 * SEC, "{span} ns");
    // Active timeout 10 s, sweeps every 8 bursts of a third of the table 2 s ahead.
    let o = compare(&frames, 2, 4096, 10, (8, 4096 / 8 / 3, 2 * SEC), own);
    for r in [
        EndReason::IdleTimeout,
        EndReason::ActiveTimeout,
        EndReason::EndOfFlow,
        EndReason::ForcedEnd,
    ] {
        assert!(by_reason(&o, r) > 0, "no {r:?} record: {:?}", o.counters);
    }
    assert_eq!(get(&o, "records_dropped"), 0);
    assert!(o.records.len() > 200, "{} records", o.records.len());
}

#[test]
fn a_small_table_evicts_and_exports_the_same_records_on_both() {
    small_table(false);
}

/// A full own table (evictions, and new flows refused where a bucket holds assured flows
/// only), frame by frame equal to the CPU's.
#[test]
fn a_small_own_table_evicts_and_exports_the_same_records_on_both() {
    small_table(true);
}

fn small_table(own: bool) {
    let frames = traffic(5, 4000);
    let o = compare(&frames, 2, 16, 1800, (4, 1, 0), own);
    assert!(
        by_reason(&o, EndReason::LackOfResources) > 0,
        "{:?}",
        o.counters
    );
    assert!(
        by_reason(&o, EndReason::IdleTimeout) > 0,
        "{:?}",
        o.counters
    );
    assert!(o.table.early_evicted > 0, "{:?}", o.table);
    assert!(o.table.table_full > 0, "{:?}", o.table);
}

/// The corpus's Ethernet captures one after another, a millisecond apart (their own times go
/// back between captures), on the queue the flow-key steering picks; None (the test does not
/// run) without the corpus outside CI (`require_corpus`).
fn corpus_frames() -> Option<Vec<(FrameDesc, Vec<u8>)>> {
    pipeline::internal::testdata::corpus_ethernet_descs(|i, b| FrameDesc {
        queue: queue_of(b),
        len: b.len() as u32,
        wire_len: b.len() as u32,
        timestamp_ns: 1_700_000_000 * SEC + i as u64 * 1_000_000,
        ..FrameDesc::default()
    })
}

#[test]
fn the_tcpdump_corpus_exports_the_same_records_on_both() {
    let Some(frames) = corpus_frames() else {
        return;
    };
    assert!(frames.len() > 5000, "{} frames", frames.len());
    // Active timeout 3 s (the corpus spans many seconds at 1 ms a frame); sweeps 6 s ahead,
    // past the unreplied UDP timeout. Over conntrack's tables and with an own table.
    for own in [false, true] {
        let o = compare(&frames, 2, 1024, 3, (16, 64, 6 * SEC), own);
        for r in [
            EndReason::IdleTimeout,
            EndReason::ActiveTimeout,
            EndReason::ForcedEnd,
        ] {
            assert!(
                by_reason(&o, r) > 0,
                "own table {own}: no {r:?} record: {:?}",
                o.counters
            );
        }
    }
}
