//! The slot rule of docs/fronthaul.md ("When a slot opens and closes") decided alike by the
//! CPU executor's stage and by the GPU executor's two halves: the CUDA stage compiled for the
//! host (`pw_stage_fronthaul`, its buffers host memory) and the host's completion poll
//! (`fronthaul::live::Completer`, polled after every frame, as a poll that keeps up does), on
//! generated captures whose slots arrive in order, interleaved, evicted, revisited, timed out
//! on their receive times (the test runs in far less host time than the radio time its
//! frames span), and with PRBs missing. Every slot reaches the sink on both, in the same order,
//! with the same cells; every frame gets the same verdict; the refused packets are the same,
//! per eAxC.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pipeline::burst::{Burst, FrameDesc};
use pipeline::counters::QueueCounters;
use pipeline::meta::PacketMeta;
use pipeline::stage::Pipeline;
use pipeline::stage::{GpuHostSide, StageGpuMemory};
use pipeline::verdict::Verdict;
use pktwarp_fronthaul::config::SinkConfig;
use pktwarp_fronthaul::gpu::{self, Layout};
use pktwarp_fronthaul::live::LiveStages;
use pktwarp_fronthaul::live::{Closed, Completer, GridSource};
use pktwarp_fronthaul::oran_gen::{frame, OranGenOptions};
use pktwarp_fronthaul::{FnSink, FronthaulConfig, FronthaulStage, SlotGrid};
use pktwarp_kernels::host::{HostFrame, HostPipeline, META_BYTES, VERDICT_BYTES};
use pktwarp_kernels::StageSpec;

fn bytes(w: &[u64]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The CUDA stage's buffers in host memory, read and written as the completion poll reads
/// and writes a GPU's.
struct HostBufs {
    l: Layout,
    bufs: RefCell<Vec<Vec<u64>>>,
}

impl GridSource for HostBufs {
    fn slot_states(&self) -> anyhow::Result<Vec<u8>> {
        Ok(bytes(&self.bufs.borrow()[gpu::BUF_SLOT_STATE]))
    }

    fn entry(&self, r: usize, samples: bool) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
        let (gb, mb) = gpu::entry_bytes(&self.l);
        let b = self.bufs.borrow();
        let grid = bytes(&b[gpu::BUF_GRID]);
        let marks = bytes(&b[gpu::BUF_MARKS]);
        let g = if samples {
            grid[r * gb..(r + 1) * gb].to_vec()
        } else {
            Vec::new()
        };
        Ok((g, marks[r * mb..(r + 1) * mb].to_vec()))
    }

    fn mark_closed(&self, r: usize, tag: u32) -> anyhow::Result<()> {
        let mut b = self.bufs.borrow_mut();
        let w = &mut b[gpu::BUF_CLOSED][r / 2];
        let shift = 32 * (r % 2);
        *w = (*w & !(0xFFFF_FFFFu64 << shift)) | (u64::from(tag) << shift);
        Ok(())
    }
}

/// What one executor did with a capture: each frame's (action, drop reason code), the slots
/// its sink got, in order, and per eAxC (packets refused, their PRBs).
#[derive(Debug, PartialEq)]
struct Outcome {
    verdicts: Vec<(u8, u8)>,
    slots: Vec<Slot>,
    refused: Vec<(u64, u64)>,
    /// Slots stored and never delivered (the GPU's poll fell a ring behind; 0 on the CPU).
    lost: u64,
}

/// The stats buffer of the host-compiled stage, as the GPUs' counters give it.
struct HostStats(Vec<u8>);

impl gpu::CounterSource for HostStats {
    fn stage_block(&self, _k: usize) -> [u64; 8] {
        [0; 8]
    }

    fn stage_buffers(&self, _k: usize, i: usize) -> anyhow::Result<Vec<Vec<u8>>> {
        assert_eq!(i, gpu::BUF_STATS);
        Ok(vec![self.0.clone()])
    }
}

/// A delivered slot: its number, complete, filled PRBs per eAxC, and its samples.
#[derive(Debug, PartialEq)]
struct Slot {
    number: u32,
    complete: bool,
    filled: Vec<usize>,
    data: Vec<u8>,
}

fn slot_of(g: &SlotGrid, numerology: u8) -> Slot {
    Slot {
        number: g.key.number(numerology),
        complete: g.complete,
        filled: (0..g.rows()).map(|e| g.filled_for(e)).collect(),
        data: g.rows_bytes(),
    }
}

fn on_cpu(cfg: &FronthaulConfig, frames: &[(Vec<u8>, u64)]) -> Outcome {
    let seen: Arc<Mutex<Vec<SlotGrid>>> = Arc::default();
    let s2 = seen.clone();
    let sink = FnSink(move |g: &SlotGrid| s2.lock().unwrap().push(g.clone()));
    let stage = FronthaulStage::with_sink(cfg, Box::new(sink)).unwrap();
    let verdicts = frames
        .iter()
        .map(|(f, ts)| {
            let mut v = Verdict::PASS;
            stage.process_at(f, *ts, &PacketMeta::default(), &mut v);
            (v.action as u8, v.reason.map_or(0xFF, |r| r as u8))
        })
        .collect();
    stage.flush();
    let slots = seen
        .lock()
        .unwrap()
        .iter()
        .map(|g| slot_of(g, cfg.numerology))
        .collect();
    let c = stage.counters();
    Outcome {
        verdicts,
        slots,
        refused: c
            .per_eaxc
            .iter()
            .map(|e| (e.slot_closed, e.slot_closed_prbs))
            .collect(),
        lost: c.slots_lost,
    }
}

/// The GPU executor's halves on `frames`, the completion poll looking after every
/// `poll_every` frames (1: a poll that keeps up).
fn on_gpu(
    pipe: &HostPipeline,
    cfg: &FronthaulConfig,
    frames: &[(Vec<u8>, u64)],
    poll_every: usize,
) -> Outcome {
    let l = Layout::new(cfg).expect("GPU layout");
    // u64 words: every buffer 8-byte aligned, as device allocations are.
    let mut bufs: Vec<Vec<u64>> = l
        .buffers()
        .iter()
        .map(|(_, n)| vec![0u64; n.div_ceil(8)])
        .collect();
    let addrs: [u64; 7] = std::array::from_fn(|i| bufs[i].as_mut_ptr() as u64);
    let block: Vec<u8> = gpu::param_block(cfg, &l, addrs);
    // The block as 8-byte aligned words, as a device block is.
    let words: Vec<u64> = block
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect();
    let src = HostBufs {
        l: l.clone(),
        bufs: RefCell::new(bufs),
    };
    let mut completer = Completer::new(cfg).unwrap();
    let mut slots = Vec::new();
    let mut counters = [[0u64; 8]; pktwarp_kernels::MAX_STAGES];
    let mut verdicts = Vec::new();
    for (i, (f, ts)) in frames.iter().enumerate() {
        // SAFETY: a view of the block's u64 words as the bytes the C stage reads (FFI
        // boundary: the host pipeline takes byte blocks); the words outlive the call.
        let view =
            unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8) };
        let mut meta = [0u8; META_BYTES];
        let mut v = [0u8; VERDICT_BYTES];
        let mut buf = f.clone();
        let mut hf = HostFrame {
            len: f.len(),
            wire_len: f.len() as u32,
            timestamp_ns: *ts,
            burst_index: i as u32,
            ..HostFrame::default()
        };
        pipe.run_frame_mut(
            &mut buf,
            &mut hf,
            &[view],
            None,
            &mut meta,
            &mut v,
            &mut counters,
        );
        verdicts.push((v[0], v[1]));
        if (i + 1) % poll_every != 0 {
            continue;
        }
        completer
            .poll(&[&src], &mut |c: Closed| {
                slots.push(slot_of(&c.grid, cfg.numerology))
            })
            .unwrap();
    }
    completer
        .finish(&[&src], &mut |c: Closed| {
            slots.push(slot_of(&c.grid, cfg.numerology))
        })
        .unwrap();
    let b = src.bufs.borrow();
    let (c, _) = gpu::read_counters(
        &l,
        &counters[0],
        &bytes(&b[gpu::BUF_EAXC_COUNTERS]),
        &bytes(&b[gpu::BUF_STATS]),
        &vec![[0; 3]; l.eaxcs.len()],
    );
    let taken = gpu::taken_slots(&HostStats(bytes(&b[gpu::BUF_STATS])), 0).unwrap();
    Outcome {
        verdicts,
        slots,
        refused: c
            .per_eaxc
            .iter()
            .map(|e| (e.slot_closed, e.slot_closed_prbs))
            .collect(),
        lost: taken - completer.observed(),
    }
}

/// HostPipeline builds in a folder named by the process and the source and removes it when
/// dropped: two tests compiling the same stage list at once would share (and remove) it.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn compile() -> HostPipeline {
    let specs: Vec<StageSpec> = StageSpec::builtin("fronthaul").into_iter().collect();
    HostPipeline::compile(&specs).expect("host pipeline")
}

/// The stage compiled, with the lock that keeps other compiles out meanwhile.
fn compiled() -> (std::sync::MutexGuard<'static, ()>, HostPipeline) {
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    (one, compile())
}

thread_local! {
    /// The property test's cases share one compile.
    static PIPE: HostPipeline = {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        compile()
    };
}

fn gen() -> OranGenOptions {
    OranGenOptions {
        carrier_prbs: 4,
        prbs_per_packet: 2,
        eaxcs: vec![1, 2],
        slots: 16,
        ..OranGenOptions::default()
    }
}

/// A packet: (eAxC index, slot, symbol, packet of the symbol).
type Pkt = (usize, u64, u8, u16);

/// Every packet of `slot`, symbol by symbol, eAxCs and packets within.
fn whole(slot: u64) -> Vec<Pkt> {
    let mut v = Vec::new();
    for sym in 0..14 {
        for e in 0..2 {
            for p in 0..2 {
                v.push((e, slot, sym, p));
            }
        }
    }
    v
}

/// Packets of several slots taken in turn.
fn interleave(slots: &[u64]) -> Vec<Pkt> {
    let each: Vec<Vec<Pkt>> = slots.iter().map(|&s| whole(s)).collect();
    (0..each[0].len())
        .flat_map(|i| each.iter().map(move |w| w[i]))
        .collect()
}

/// The frames of `pkts`, received `gap_ns` apart from 1 s on.
fn frames(pkts: &[Pkt], gap_ns: u64) -> Vec<(Vec<u8>, u64)> {
    let o = gen();
    pkts.iter()
        .enumerate()
        .map(|(i, &(e, slot, sym, p))| {
            (
                frame(&o, e, slot, sym, p, i as u8),
                1_000_000_000 + i as u64 * gap_ns,
            )
        })
        .collect()
}

fn config(max_open: u16, timeout_us: u64) -> FronthaulConfig {
    let o = gen();
    FronthaulConfig {
        carrier_prbs: o.carrier_prbs,
        numerology: o.numerology,
        eaxcs: o.eaxcs.clone(),
        max_open_slots: max_open,
        slot_timeout_us: timeout_us,
        ..FronthaulConfig::default()
    }
}

#[test]
fn both_executors_open_close_evict_and_time_out_slots_alike() {
    let (_one, pipe) = compiled();
    let half = |slot: u64, first: bool| -> Vec<Pkt> {
        let w = whole(slot);
        let n = w.len() / 2;
        if first {
            w[..n].to_vec()
        } else {
            w[n..].to_vec()
        }
    };
    let mut missing = whole(0);
    missing.remove(7);
    let cases: Vec<(&str, FronthaulConfig, Vec<Pkt>, u64)> = vec![
        (
            "in order",
            config(4, 2000),
            (0..6).flat_map(whole).collect(),
            9_000,
        ),
        (
            "interleaved",
            config(4, 2000),
            interleave(&[0, 1, 2]),
            9_000,
        ),
        ("evicted", config(2, 2000), interleave(&[0, 1, 2, 3]), 9_000),
        (
            "revisited",
            config(1, 2000),
            [half(0, true), whole(1), half(0, false), whole(0), whole(2)].concat(),
            9_000,
        ),
        (
            // 56 packets 40 us apart: a slot's packets span 2.2 ms, past its 1 ms timeout.
            "timed out",
            config(4, 1000),
            interleave(&[4, 5]),
            40_000,
        ),
        (
            "a PRB missing",
            config(2, 2000),
            [missing, whole(1), whole(2)].concat(),
            9_000,
        ),
    ];
    for (name, cfg, pkts, gap) in cases {
        let fs = frames(&pkts, gap);
        let cpu = on_cpu(&cfg, &fs);
        let gpu = on_gpu(&pipe, &cfg, &fs, 1);
        assert_eq!((cpu.lost, gpu.lost), (0, 0), "{name}: nothing lost");
        assert_eq!(cpu.verdicts, gpu.verdicts, "{name}: verdicts");
        assert_eq!(cpu.refused, gpu.refused, "{name}: refused per eAxC");
        let numbers = |o: &Outcome| {
            o.slots
                .iter()
                .map(|s| (s.number, s.complete))
                .collect::<Vec<_>>()
        };
        assert_eq!(numbers(&cpu), numbers(&gpu), "{name}: slots delivered");
        assert_eq!(cpu.slots, gpu.slots, "{name}: slot contents");
        let mut seen: Vec<u32> = pkts.iter().map(|p| p.1 as u32).collect();
        seen.sort_unstable();
        seen.dedup();
        let mut got: Vec<u32> = cpu.slots.iter().map(|s| s.number).collect();
        got.sort_unstable();
        assert_eq!(got, seen, "{name}: every slot reaches the sink once");
        match name {
            "revisited" => assert!(cpu.refused.iter().any(|r| r.0 > 0), "{name}"),
            "timed out" | "evicted" => assert!(cpu.slots.iter().any(|s| !s.complete), "{name}"),
            _ => {}
        }
    }
}

/// A completion poll that falls more than a ring (`2 x max_open_slots` slots) behind the kernel
/// never sees the slots in between: they cannot reach the sink, and the run counts them.
#[test]
fn slots_a_lagging_poll_never_saw_are_counted_lost() {
    let (_one, pipe) = compiled();
    let cfg = config(2, 2000);
    let fs = frames(&(0..12).flat_map(whole).collect::<Vec<_>>(), 9_000);
    let all_at_once = on_gpu(&pipe, &cfg, &fs, fs.len());
    // The ring holds the last 4 slots when the poll first looks.
    let numbers: Vec<u32> = all_at_once.slots.iter().map(|s| s.number).collect();
    assert_eq!(numbers, [8, 9, 10, 11]);
    assert_eq!(all_at_once.lost, 8);
    let kept_up = on_gpu(&pipe, &cfg, &fs, 1);
    assert_eq!((kept_up.slots.len(), kept_up.lost), (12, 0));
}

/// The GPU executor holds its input until the completion poll has covered what ran (the
/// stage's `frames_per_poll`): a poll after that many frames of whole slots, in order, closes
/// every slot as the CPU does, while a poll six times further apart loses slots (the unpaced
/// generator's failure).
#[test]
fn a_poll_every_frames_per_poll_frames_keeps_every_slot() {
    let (_one, pipe) = compiled();
    let cfg = config(2, 2000);
    let per_poll = Completer::new(&cfg).unwrap().frames_per_poll();
    // 2 open slots x 14 symbols x 2 eAxCs; a whole slot here is 56 frames (2 a symbol).
    assert_eq!(per_poll, 56);
    let stage = FronthaulStage::from_config(&cfg).unwrap();
    let live = LiveStages::of_stage(0, &stage, Arc::default()).unwrap();
    assert_eq!(GpuHostSide::frames_per_poll(&live), Some(per_poll));
    let fs = frames(&(0..24).flat_map(whole).collect::<Vec<_>>(), 9_000);
    let cpu = on_cpu(&cfg, &fs);
    let paced = on_gpu(&pipe, &cfg, &fs, per_poll as usize);
    assert_eq!((cpu.lost, paced.lost), (0, 0));
    assert_eq!(paced.slots, cpu.slots, "every slot, the same cells");
    assert!(paced.slots.iter().all(|s| s.complete));
    let unpaced = on_gpu(&pipe, &cfg, &fs, 6 * per_poll as usize);
    assert!(
        unpaced.lost > 0,
        "a poll 6 x frames_per_poll apart lost nothing"
    );
    assert!(unpaced.slots.len() < cpu.slots.len());
}

use proptest::prelude::*;

/// Packets drawn from a window of slots that moves on (so slots open, interleave, complete,
/// get evicted, come back late and time out), some dropped or sent twice, their receive times
/// jittered (not always increasing) and sometimes missing.
fn packets() -> impl Strategy<Value = (Vec<(Pkt, u64)>, u16, u64)> {
    let pkt = (0u64..3, 0usize..56, 0u64..100_000, 0u8..20);
    (
        proptest::collection::vec(pkt, 1..400),
        1u16..5,
        200u64..3000,
    )
        .prop_map(|(picks, max_open, timeout_us)| {
            let mut v = Vec::new();
            for (i, (ahead, k, jitter, untimed)) in picks.into_iter().enumerate() {
                let slot = i as u64 / 40 + ahead;
                let p = whole(slot)[k];
                let ts = if untimed == 0 {
                    0
                } else {
                    1_000_000_000 + i as u64 * 9_000 + jitter
                };
                v.push((p, ts));
            }
            (v, max_open, timeout_us)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn property_both_executors_decide_every_slot_alike((pkts, max_open, timeout_us) in packets()) {
        let o = gen();
        let fs: Vec<(Vec<u8>, u64)> = pkts
            .iter()
            .enumerate()
            .map(|(i, &((e, slot, sym, p), ts))| (frame(&o, e, slot, sym, p, i as u8), ts))
            .collect();
        let cfg = config(max_open, timeout_us);
        let cpu = on_cpu(&cfg, &fs);
        let gpu = PIPE.with(|pipe| on_gpu(pipe, &cfg, &fs, 1));
        prop_assert_eq!(&cpu.verdicts, &gpu.verdicts);
        prop_assert_eq!(&cpu.refused, &gpu.refused);
        prop_assert_eq!(&cpu.slots, &gpu.slots);
        prop_assert_eq!((cpu.lost, gpu.lost), (0, 0));
    }
}

/// The CUDA stage's buffers (host memory) as the GPU executor's stage memory, for the whole
/// GPU host side of the stage (`LiveStages`: the completion poll, the sequence log, the
/// counters, the sink) as the daemon polls it: one GPU, the fronthaul stage at position 0.
struct HostMem {
    sizes: Vec<usize>,
    bufs: Mutex<Vec<Vec<u64>>>,
    counters: Mutex<[[u64; 8]; pktwarp_kernels::MAX_STAGES]>,
}

impl HostMem {
    fn buffer(&self, k: usize, i: usize) -> anyhow::Result<Vec<u8>> {
        anyhow::ensure!(k == 0, "stage {k}: the fronthaul stage is at position 0");
        let b = self.bufs.lock().unwrap();
        let w = b.get(i).ok_or_else(|| anyhow::anyhow!("no buffer {i}"))?;
        let mut v = bytes(w);
        v.truncate(self.sizes[i]);
        Ok(v)
    }
}

impl StageGpuMemory for HostMem {
    fn gpus(&self) -> usize {
        1
    }

    fn read_buffer(&self, _gpu: usize, k: usize, i: usize) -> anyhow::Result<Vec<u8>> {
        self.buffer(k, i)
    }

    fn read_buffer_range(
        &self,
        _gpu: usize,
        k: usize,
        i: usize,
        offset: usize,
        len: usize,
    ) -> anyhow::Result<Vec<u8>> {
        anyhow::ensure!(k == 0, "stage {k}: the fronthaul stage is at position 0");
        let n = self.sizes.get(i).copied().unwrap_or(0);
        anyhow::ensure!(offset + len <= n, "buffer {i}: {offset}+{len} past {n}");
        // The range alone (the sequence log is 1 MiB, read every poll).
        let b = self.bufs.lock().unwrap();
        Ok((offset..offset + len)
            .map(|j| b[i][j / 8].to_le_bytes()[j % 8])
            .collect())
    }

    fn set_buffer_word(
        &self,
        _gpu: usize,
        k: usize,
        i: usize,
        offset: usize,
        value: u32,
    ) -> anyhow::Result<()> {
        anyhow::ensure!(k == 0 && offset % 4 == 0 && offset + 4 <= self.sizes[i]);
        let mut b = self.bufs.lock().unwrap();
        let w = &mut b[i][offset / 8];
        let shift = 32 * (offset % 8 / 4);
        *w = (*w & !(0xFFFF_FFFFu64 << shift)) | (u64::from(value) << shift);
        Ok(())
    }

    fn counter_blocks(&self) -> anyhow::Result<Vec<[u64; 8]>> {
        Ok(vec![self.counters.lock().unwrap()[0]])
    }

    fn ring_slots(&self) -> u32 {
        1
    }
}

/// What a whole executor left: each frame's verdict, the slot files (name, bytes) its npy sink
/// wrote, and the stage's counters (completion latency, host-clock measured, left out).
#[derive(Debug, PartialEq)]
struct Written {
    verdicts: Vec<(u8, u8)>,
    files: Vec<(String, Vec<u8>)>,
    counters: pktwarp_fronthaul::FronthaulCounters,
}

fn written(dir: &std::path::Path, stage: &FronthaulStage, verdicts: Vec<(u8, u8)>) -> Written {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    files.sort();
    let mut counters = stage.counters();
    counters.slot_latency_count = 0;
    counters.slot_latency_p50_ns = 0;
    counters.slot_latency_p99_ns = 0;
    counters.slot_latency_buckets.clear();
    counters.slot_latency_sum_ns = 0;
    Written {
        verdicts,
        files,
        counters,
    }
}

/// The frames, with the host time to wait before each (the delivery: the radio time of the
/// frames is their receive time, the wait is how slowly they come).
type Delivery = [((Vec<u8>, u64), Duration)];

/// The CPU executor's pipeline `[fronthaul]` on `frames`, one burst a frame.
fn cpu_executor(cfg: &FronthaulConfig, frames: &Delivery) -> Written {
    let stage = FronthaulStage::from_config(cfg).unwrap();
    let p = Pipeline::new(vec![stage.into_stage()]);
    let c = QueueCounters::new(1, 0);
    let mut verdicts = Vec::new();
    for ((f, ts), wait) in frames {
        std::thread::sleep(*wait);
        let mut b = Burst::default();
        b.push(
            f,
            FrameDesc {
                len: f.len() as u32,
                wire_len: f.len() as u32,
                timestamp_ns: *ts,
                ..FrameDesc::default()
            },
        );
        let (mut m, mut v) = (Vec::new(), Vec::new());
        p.run_burst(&b, &mut m, &mut v, &c);
        verdicts.push((v[0].action as u8, v[0].reason.map_or(0xFF, |r| r as u8)));
    }
    let f = FronthaulStage::of(&p.stages[0]).expect("stage 0 is fronthaul");
    f.flush();
    written(sink_dir(cfg), &f, verdicts)
}

fn sink_dir(cfg: &FronthaulConfig) -> &std::path::Path {
    match &cfg.sink {
        SinkConfig::Npy { dir, .. } => dir,
        _ => panic!("an npy sink"),
    }
}

/// The GPU executor's halves on `frames`: the CUDA stage compiled for the host, and the stage's
/// GPU host side (`LiveStages`) polled, as the daemon's poll thread does, every 50 us of the
/// waits and after every frame, then finished as at the end of a run.
fn gpu_executor(pipe: &HostPipeline, cfg: &FronthaulConfig, frames: &Delivery) -> Written {
    let l = Layout::new(cfg).expect("GPU layout");
    let sizes: Vec<usize> = l.buffers().iter().map(|(_, n)| *n).collect();
    let mut bufs: Vec<Vec<u64>> = sizes.iter().map(|n| vec![0u64; n.div_ceil(8)]).collect();
    let addrs: [u64; 7] = std::array::from_fn(|i| bufs[i].as_mut_ptr() as u64);
    let words: Vec<u64> = gpu::param_block(cfg, &l, addrs)
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect();
    let mem = HostMem {
        sizes,
        bufs: Mutex::new(bufs),
        counters: Mutex::new([[0u64; 8]; pktwarp_kernels::MAX_STAGES]),
    };
    let p = Pipeline::new(vec![FronthaulStage::from_config(cfg).unwrap().into_stage()]);
    let mut live = LiveStages::new(&p).unwrap();
    let mut verdicts = Vec::new();
    for (i, ((f, ts), wait)) in frames.iter().enumerate() {
        let until = Instant::now() + *wait;
        while Instant::now() < until {
            live.poll(&p, &mem).unwrap();
            std::thread::sleep(Duration::from_micros(50));
        }
        // SAFETY: a view of the block's u64 words as the bytes the C stage reads (FFI
        // boundary: the host pipeline takes byte blocks); the words outlive the call.
        let view =
            unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8) };
        let (mut meta, mut v) = ([0u8; META_BYTES], [0u8; VERDICT_BYTES]);
        let mut buf = f.clone();
        let mut hf = HostFrame {
            len: f.len(),
            wire_len: f.len() as u32,
            timestamp_ns: *ts,
            burst_index: i as u32,
            ..HostFrame::default()
        };
        {
            // The stage writes its buffers (through the block's addresses) and its counters:
            // the host side reads neither meanwhile.
            let _bufs = mem.bufs.lock().unwrap();
            let mut counters = mem.counters.lock().unwrap();
            pipe.run_frame_mut(
                &mut buf,
                &mut hf,
                &[view],
                None,
                &mut meta,
                &mut v,
                &mut counters,
            );
        }
        verdicts.push((v[0], v[1]));
        live.poll(&p, &mem).unwrap();
    }
    GpuHostSide::finish(Box::new(live), &p, &mem).unwrap();
    let f = FronthaulStage::of(&p.stages[0]).expect("stage 0 is fronthaul");
    f.flush();
    written(sink_dir(cfg), &f, verdicts)
}

/// A capture delivered far slower than its radio time (a generator that gives 1 s of radio time
/// in 16 s): both executors judge the slot timeout on the frames' receive times, so they close
/// the same slots, complete, partial and refused alike, and write the same slot files, byte for
/// byte. A slot timed out on the host's clock would close partial here (its 56 packets take
/// 17 ms to come, its timeout is 2 ms).
#[test]
fn slow_delivery_closes_the_same_slots_and_writes_the_same_files_on_both_executors() {
    let (_one, pipe) = compiled();
    let half = |slot: u64, first: bool| -> Vec<Pkt> {
        let w = whole(slot);
        let n = w.len() / 2;
        (if first { &w[..n] } else { &w[n..] }).to_vec()
    };
    let mut missing = whole(9);
    missing.remove(11);
    let pkts: Vec<Pkt> = [
        whole(0),
        whole(1),
        // Three slots at once: the oldest evicted past max_open_slots (2), its later packets
        // refused.
        interleave(&[2, 3, 4]),
        // Slot 5 evicted by slot 7, then revisited: its second half refused.
        half(5, true),
        half(6, true),
        half(7, true),
        half(5, false),
        half(6, false),
        half(7, false),
        whole(8),
        // Slot 9 misses a PRB and times out (on the receive times) during slot 13.
        missing,
        whole(10),
        whole(11),
        whole(12),
        whole(13),
    ]
    .concat();
    // Radio time: a packet every 9 us (a slot's 56 packets in 0.5 ms). Host time: 2.5 ms every
    // 8 packets, 35 x the radio time.
    let delivery: Vec<((Vec<u8>, u64), Duration)> = frames(&pkts, 9_000)
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let wait = if i % 8 == 7 { 2_500 } else { 0 };
            (f, Duration::from_micros(wait))
        })
        .collect();
    let root = std::env::temp_dir().join(format!("pw-fh-slow-{}", std::process::id()));
    let cfg_for = |name: &str| FronthaulConfig {
        sink: SinkConfig::Npy {
            dir: root.join(name),
            max_files: None,
        },
        ..config(2, 2000)
    };
    let t0 = Instant::now();
    let cpu = cpu_executor(&cfg_for("cpu"), &delivery);
    let wall = t0.elapsed();
    let gpu = gpu_executor(&pipe, &cfg_for("gpu"), &delivery);
    std::fs::remove_dir_all(&root).ok();
    let radio = Duration::from_nanos(9_000 * pkts.len() as u64);
    assert!(
        wall > 10 * radio,
        "delivered in {wall:?}, radio time {radio:?}"
    );
    assert_eq!(cpu.verdicts, gpu.verdicts, "verdicts");
    let names = |w: &Written| w.files.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&cpu), names(&gpu), "slot files");
    assert_eq!(cpu.files, gpu.files, "slot file bytes");
    assert_eq!(cpu.counters, gpu.counters, "counters");
    // What the capture holds: every slot once; slots 2 and 5 refused after they closed; the
    // evicted (2, 5) and the timed out (9) partial, the rest complete.
    let c = &cpu.counters;
    let slots = names(&cpu)
        .iter()
        .filter(|n| n.starts_with("slot_"))
        .count();
    assert_eq!(slots, 14, "{:?}", names(&cpu));
    assert_eq!(
        (c.slots_complete, c.slots_partial),
        (11, 3),
        "{}",
        c.summary()
    );
    assert!(
        c.per_eaxc.iter().all(|e| e.slot_closed > 0),
        "{}",
        c.summary()
    );
}
