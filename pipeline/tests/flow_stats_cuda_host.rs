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
//! Traffic: generated connections with churn over two queues (a large table, and one so small
//! that flows are evicted), and the tcpdump corpus.

#[allow(dead_code)]
mod conntrack_common;

use std::sync::mpsc::Receiver;

use conntrack_common::{queue_of, traffic};
use pipeline::burst::FrameDesc;
use pipeline::counters::QueueCounters;
use pipeline::internal::port::pcap::CaptureReader;
use pipeline::internal::stage::config::StageConfig;
use pipeline::internal::stage::flow_stats_gpu::GpuFlowDrain;
use pipeline::internal::stage::flow_tables::lock;
use pipeline::stage::{Pipeline, Stage};
use pktwarp_flow::ipfix::{EndReason, FlowQueue, FlowRecord};
use pktwarp_kernels::host::{HostFrame, HostPipeline, META_BYTES, VERDICT_BYTES};

const SEC: u64 = 1_000_000_000;

fn pipeline_of(yaml: &str) -> Pipeline {
    let stages: Vec<StageConfig> = serde_saphyr::from_str(yaml).expect("stages");
    pipeline::internal::stage::build(&stages, |x| x.to_path_buf()).expect("pipeline")
}

/// What one comparison saw.
struct Outcome {
    records: Vec<FlowRecord>,
    counters: Vec<(&'static str, u64)>,
}

fn sorted(rx: &Receiver<FlowRecord>) -> Vec<FlowRecord> {
    let mut v: Vec<FlowRecord> = rx.try_iter().collect();
    v.sort_by_key(|r| format!("{r:?}"));
    v
}

/// Runs `frames` (over `queues` queues) through both sides with a table of `entries` a queue
/// and `active_s`, sweeping `buckets` buckets a queue every `every` bursts of 32 at the queue's
/// largest receive time plus `step_ns`; compares and returns the CPU side's outcome.
fn compare(
    frames: &[(FrameDesc, Vec<u8>)],
    queues: usize,
    entries: u64,
    active_s: u64,
    (every, buckets, step_ns): (usize, u32, u64),
) -> Outcome {
    let table =
        format!("{{ entries: {entries}, timeouts: {{ udp_unreplied: 5, udp_replied: 20 }} }}");
    let yaml = format!(
        "[parse, {{ conntrack: {table} }}, {{ flow_stats: {{ active_timeout_s: {active_s} }} }}]"
    );
    let cpu = pipeline_of(&yaml);
    let (Stage::Conntrack(cpu_ct), Stage::FlowStats(cpu_fs)) = (&cpu.stages[1], &cpu.stages[2])
    else {
        panic!("parse, conntrack, flow_stats")
    };
    let (q, cpu_rx) = FlowQueue::channel(1 << 20);
    cpu_fs.attach(q);
    // The GPU side: the same pipeline as the GPU executor composes it (flow_stats turned
    // conntrack's rings on; its CUDA stage does nothing per frame), its flow_stats stage fed
    // only by the host side.
    let gpu = pipeline_of(&yaml);
    let (Stage::Conntrack(ct), Stage::FlowStats(gfs)) = (&gpu.stages[1], &gpu.stages[2]) else {
        panic!("parse, conntrack, flow_stats")
    };
    let (q, gpu_rx) = FlowQueue::channel(1 << 20);
    gfs.attach(q);
    assert_eq!(gpu.gpu_refusal(), None);
    assert_eq!(ct.gpu_ring_cap(), pktwarp_flow::ENDED_CAP as u32);
    let (specs, params) =
        pipeline::internal::executor::gpu::compose::stage_specs(&gpu).expect("specs");
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["parse", "conntrack", "flow_stats"]);
    let host = HostPipeline::compile(&specs).unwrap_or_else(|e| panic!("{e}"));
    let state = gpu.stages[1].gpu_queue_state();
    let per_queue = state[0].bytes;
    let mut dev = vec![0u64; per_queue * queues / 8];
    let mut block = params[1].clone();
    let at = state[0].addr_at;
    block[at..at + 8].copy_from_slice(&(dev.as_mut_ptr() as u64).to_le_bytes());
    block[at + 8..at + 12].copy_from_slice(&(queues as u32).to_le_bytes());
    let mut blocks: Vec<&[u8]> = params.iter().map(Vec::as_slice).collect();
    blocks[1] = &block;
    let c = QueueCounters::new(cpu.stages.len(), 0);
    let mut gc = [[0u64; 8]; pktwarp_kernels::MAX_STAGES];
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    let mut drain = GpuFlowDrain::default();
    let mut cursors = vec![0u32; queues];
    let mut last_rx = vec![0u64; queues];
    let dev_ptr = dev.as_mut_ptr() as *mut u8;
    let dev_len = dev.len() * 8;
    // The device state as bytes, read and written by the host side's closures only between
    // bursts (the host build runs no kernel beside them).
    let read = |q: usize, off: usize, len: usize| -> anyhow::Result<Vec<u8>> {
        // SAFETY: `dev` outlives the closures and no frame runs while they do; the range is
        // inside queue q's part (checked).
        let s = unsafe { std::slice::from_raw_parts(dev_ptr, dev_len) };
        anyhow::ensure!(off + len <= per_queue, "past queue {q}'s state");
        Ok(s[q * per_queue + off..][..len].to_vec())
    };
    let write = |q: usize, off: usize, b: &[u8]| -> anyhow::Result<()> {
        // SAFETY: as `read`.
        let s = unsafe { std::slice::from_raw_parts_mut(dev_ptr, dev_len) };
        anyhow::ensure!(off + b.len() <= per_queue, "past queue {q}'s state");
        s[q * per_queue + off..][..b.len()].copy_from_slice(b);
        Ok(())
    };
    let (mut read, mut write) = (read, write);
    for (n, chunk) in frames.chunks(32).enumerate() {
        cpu.run_frames(
            chunk.iter().map(|(d, f)| (*d, f.as_slice())),
            &mut metas,
            &mut verdicts,
            &c,
        );
        for (i, (d, f)) in chunk.iter().enumerate() {
            let mut buf = f.clone();
            let mut hf = HostFrame {
                len: f.len(),
                wire_len: d.wire_len,
                port: d.port,
                timestamp_ns: d.timestamp_ns,
                queue: d.queue,
                burst_seq: n as u32,
                burst_index: i as u32,
            };
            let (mut gm, mut gv) = ([0u8; META_BYTES], [0u8; VERDICT_BYTES]);
            host.run_frame_mut(&mut buf, &mut hf, &blocks, None, &mut gm, &mut gv, &mut gc);
            assert_eq!(&gm, metas[i].as_bytes(), "frame {}", n * 32 + i);
            let q = d.queue as usize;
            last_rx[q] = last_rx[q].max(d.timestamp_ns);
            gfs.note_rx(q, d.timestamp_ns);
        }
        if (n + 1) % every != 0 {
            continue;
        }
        // The sweeps: the CPU's on its tables, the GPU host side's on the device buckets of
        // each (quiet) queue after draining its ring.
        drain
            .drain(ct, gfs, queues, &mut read, &mut write)
            .expect("drain");
        for q in 0..queues {
            if last_rx[q] == 0 {
                continue;
            }
            let now = last_rx[q] + step_ns;
            if let Some(t) = cpu_ct.tables().table(q as u16) {
                cursors[q] = cpu_fs.sweep_table(&mut lock(t), cursors[q], buckets, now);
            }
            drain
                .sweep(ct, gfs, q, now, buckets, &mut read, &mut write)
                .expect("sweep");
        }
    }
    cpu_fs.flush(&mut || {});
    drain
        .drain(ct, gfs, queues, &mut read, &mut write)
        .expect("drain");
    drain.load_tables(ct, queues, &mut read).expect("load");
    gfs.flush(&mut || {});
    let (want, got) = (sorted(&cpu_rx), sorted(&gpu_rx));
    assert_eq!(want.len(), got.len(), "records");
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w, g);
    }
    assert_eq!(cpu_fs.counters(), gfs.counters(), "flow_stats counters");
    let mut gpu_ct: Vec<u64> = gc[1][1..7].to_vec();
    let cpu_ct_counters = cpu_ct.counters();
    let expired = cpu_ct_counters
        .iter()
        .position(|c| c.0 == "expired")
        .expect("expired");
    gpu_ct[expired] += drain.swept();
    let want_ct: Vec<u64> = cpu_ct_counters.iter().map(|c| c.1).collect();
    assert_eq!(want_ct, gpu_ct, "conntrack counters {cpu_ct_counters:?}");
    for (k, g) in gc.iter().enumerate().take(3) {
        assert_eq!(g[0], c.stage_frames[k].get(), "frames at stage {k}");
    }
    Outcome {
        records: want,
        counters: cpu_fs.counters(),
    }
}

fn by_reason(o: &Outcome, r: EndReason) -> usize {
    o.records.iter().filter(|x| x.end_reason == r).count()
}

fn get(o: &Outcome, name: &str) -> u64 {
    o.counters.iter().find(|c| c.0 == name).map_or(0, |c| c.1)
}

#[test]
fn generated_connections_export_the_same_records_on_both() {
    let frames = traffic(21, 6000);
    let span = frames.last().unwrap().0.timestamp_ns - frames[0].0.timestamp_ns;
    assert!(span > 20 * SEC, "{span} ns");
    // Active timeout 10 s, sweeps every 8 bursts of a third of the table 2 s ahead.
    let o = compare(&frames, 2, 4096, 10, (8, 4096 / 8 / 3, 2 * SEC));
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
    let frames = traffic(5, 4000);
    let o = compare(&frames, 2, 16, 1800, (4, 1, 0));
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
}

/// The corpus's Ethernet captures one after another, a millisecond apart (their own times go
/// back between captures), on the queue the flow-key steering picks; None (the test does not
/// run) without the corpus outside CI (`require_corpus`).
fn corpus_frames() -> Option<Vec<(FrameDesc, Vec<u8>)>> {
    let d = flow_rules::input::require_corpus("pcaps")?;
    let index = std::fs::read_to_string(d.join("INDEX.tsv")).expect("pcaps/INDEX.tsv");
    let mut frames = Vec::new();
    for line in index.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 3 || !cols[2].starts_with("ether ") {
            continue;
        }
        if let Ok(mut r) = CaptureReader::open_ethernet(d.join(cols[0])) {
            while let Ok(Some(f)) = r.next_frame() {
                let b = f.data.to_vec();
                let desc = FrameDesc {
                    queue: queue_of(&b),
                    len: b.len() as u32,
                    wire_len: b.len() as u32,
                    timestamp_ns: 1_700_000_000 * SEC + frames.len() as u64 * 1_000_000,
                    ..FrameDesc::default()
                };
                frames.push((desc, b));
            }
        }
    }
    Some(frames)
}

#[test]
fn the_tcpdump_corpus_exports_the_same_records_on_both() {
    let Some(frames) = corpus_frames() else {
        return;
    };
    assert!(frames.len() > 5000, "{} frames", frames.len());
    // Active timeout 3 s (the corpus spans many seconds at 1 ms a frame); sweeps 6 s ahead,
    // past the unreplied UDP timeout.
    let o = compare(&frames, 2, 1024, 3, (16, 64, 6 * SEC));
    for r in [
        EndReason::IdleTimeout,
        EndReason::ActiveTimeout,
        EndReason::ForcedEnd,
    ] {
        assert!(by_reason(&o, r) > 0, "no {r:?} record: {:?}", o.counters);
    }
}
