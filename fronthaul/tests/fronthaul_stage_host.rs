//! The GPU `fronthaul` stage (gpu-kernels/cuda/fronthaul_stage.cuh on the stage ABI) equals the
//! Rust `FronthaulStage` (`process_at` for a frame with a receive time, `process_untimed` for
//! one without, timestamp 0; slots never time out here) at the stage level: the
//! generated host pipeline (`HostPipeline::compile` over `[fronthaul]` and `[parse, fronthaul]`,
//! its parameter block built by `fronthaul::gpu` from the config, its buffers host memory
//! allocated here) and the Rust stage take the same frames and give the same verdict per frame,
//! the same slot grids (every PRB's samples and arrival mark; each ring entry's PRB count is
//! its slot's filled PRBs and its latest receive time the latest of the frames that stored
//! there), and the same counters (stage, per eAxC incl. the Ta4 windows, by reject reason). Inputs: the shared O-RAN vectors and malformed captures, gen
//! round trips (int16 and FP16 grids, every compression form), property-generated packets with
//! mutations, truncations, duplicates, drops and moves (sequence ids judged from the GPU's log in
//! arrival order, out of order included), frames run in another order than their arrival.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use pipeline::internal::port::pcap::CaptureReader;
use pipeline::meta::PacketMeta;
use pipeline::verdict::{Action, Verdict};
use pktwarp_fronthaul::config::{
    CompConfig, CompHdr, CompMethodName, GridConfig, GridFormat, SinkConfig,
};
use pktwarp_fronthaul::decode::{check, Message};
use pktwarp_fronthaul::gpu::{self, Layout};
use pktwarp_fronthaul::oran_gen::{build_uplane_frames, OranGenOptions};
use pktwarp_fronthaul::seqlog::{self, LogSource, SeqJudge};
use pktwarp_fronthaul::{FnSink, FronthaulConfig, FronthaulStage, SlotGrid};
use pktwarp_kernels::host::{HostFrame, HostPipeline, META_BYTES, VERDICT_BYTES};
use pktwarp_kernels::StageSpec;
use proptest::prelude::*;

/// Words as little-endian bytes.
fn bytes(w: &[u64]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The CUDA stage compiled for the host, with its buffers.
struct HostStage<'a> {
    pipe: &'a HostPipeline,
    with_parse: bool,
    layout: Layout,
    block: Vec<u64>,
    bufs: Vec<Vec<u64>>,
    counters: [[u64; 8]; pktwarp_kernels::MAX_STAGES],
    /// The next frame's arrival position in `run` (burst 0, this index).
    next: u32,
}

/// The stage's sequence log in host memory, as the completion poll reads it on a GPU.
struct HostLog<'b>(&'b [u8]);

impl LogSource for HostLog<'_> {
    fn seq_head(&self) -> anyhow::Result<u64> {
        Ok(u64::from_le_bytes(self.0[..8].try_into()?))
    }
    fn seq_entries(&self, at: usize, n: usize) -> anyhow::Result<Vec<u8>> {
        let s = seqlog::HEAD_BYTES + at * seqlog::ENTRY_BYTES;
        Ok(self.0[s..s + n * seqlog::ENTRY_BYTES].to_vec())
    }
    fn ring_slots(&self) -> u32 {
        1
    }
}

/// The generated host pipelines of `[fronthaul]` and `[parse, fronthaul]`.
struct Pipes {
    alone: HostPipeline,
    parsed: HostPipeline,
    // HostPipeline builds in a folder named by the process and the source and removes it when
    // dropped: two tests compiling the same stage list at once would share (and remove) it.
    _one: std::sync::MutexGuard<'static, ()>,
}

fn pipes() -> Pipes {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let compile = |names: &[&str]| {
        let specs: Vec<StageSpec> = names.iter().filter_map(|n| StageSpec::builtin(n)).collect();
        assert_eq!(specs.len(), names.len(), "fronthaul is a library stage");
        HostPipeline::compile(&specs).expect("host pipeline")
    };
    Pipes {
        alone: compile(&["fronthaul"]),
        parsed: compile(&["parse", "fronthaul"]),
        _one: one,
    }
}

impl<'a> HostStage<'a> {
    fn new(pipes: &'a Pipes, cfg: &FronthaulConfig, with_parse: bool) -> HostStage<'a> {
        let pipe = if with_parse {
            &pipes.parsed
        } else {
            &pipes.alone
        };
        let layout = Layout::new(cfg).expect("GPU layout");
        // u64 words: every buffer 8-byte aligned, as device allocations are.
        let mut bufs: Vec<Vec<u64>> = layout
            .buffers()
            .iter()
            .map(|(_, n)| vec![0u64; n.div_ceil(8)])
            .collect();
        let addrs: [u64; 7] = std::array::from_fn(|i| bufs[i].as_mut_ptr() as u64);
        let b = gpu::param_block(cfg, &layout, addrs);
        let block = b
            .chunks(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(w)
            })
            .collect();
        HostStage {
            pipe,
            with_parse,
            layout,
            block,
            bufs,
            counters: [[0; 8]; pktwarp_kernels::MAX_STAGES],
            next: 0,
        }
    }

    /// (action, drop reason code) of one frame received at `ts` (0: no receive time), the next
    /// in arrival order.
    fn run(&mut self, frame: &[u8], ts: u64) -> (u8, u8) {
        self.next += 1;
        self.run_at(frame, ts, 0, self.next - 1)
    }

    /// [`HostStage::run`] of a frame at arrival position (`burst`, `index`) of queue 0.
    fn run_at(&mut self, frame: &[u8], ts: u64, burst: u32, index: u32) -> (u8, u8) {
        // SAFETY: a view of the block's u64 words (8-byte aligned, as a device block is) as the
        // bytes the C stage reads (FFI boundary: the host pipeline takes byte blocks); the words
        // outlive the call and nothing writes them meanwhile.
        let view = unsafe {
            std::slice::from_raw_parts(self.block.as_ptr().cast::<u8>(), self.block.len() * 8)
        };
        let params: Vec<&[u8]> = if self.with_parse {
            vec![&[], view]
        } else {
            vec![view]
        };
        let mut meta = [0u8; META_BYTES];
        let mut v = [0u8; VERDICT_BYTES];
        let mut buf = frame.to_vec();
        let mut hf = HostFrame {
            len: frame.len(),
            wire_len: frame.len() as u32,
            timestamp_ns: ts,
            burst_seq: burst,
            burst_index: index,
            ..HostFrame::default()
        };
        self.pipe.run_frame_mut(
            &mut buf,
            &mut hf,
            &params,
            None,
            &mut meta,
            &mut v,
            &mut self.counters,
        );
        (v[0], v[1])
    }

    /// Per eAxC index (gaps, duplicates, out of order): the sequence log judged to its end.
    fn seq(&self) -> Vec<[u64; 3]> {
        let b = bytes(&self.bufs[gpu::BUF_SEQ]);
        let mut j = SeqJudge::new(self.layout.eaxcs.len());
        j.poll(&[&HostLog(&b)], true).expect("host log");
        assert_eq!(j.lost, 0);
        j.counts().to_vec()
    }

    fn slots(&self) -> Vec<SlotGrid> {
        gpu::read_slots(
            &self.layout,
            &bytes(&self.bufs[gpu::BUF_GRID]),
            &bytes(&self.bufs[gpu::BUF_MARKS]),
            &bytes(&self.bufs[gpu::BUF_SLOT_STATE]),
        )
    }

    /// Slot `g`'s cells as its ring entry holds them now (what the host reads back when it
    /// closes the slot).
    fn slot_now(&self, g: &SlotGrid) -> SlotGrid {
        let tag = g.key.tag(self.layout.numerology);
        let r = (tag as usize - 1) % self.layout.ring;
        let (gb, mb) = gpu::entry_bytes(&self.layout);
        let (grid, marks) = (
            bytes(&self.bufs[gpu::BUF_GRID]),
            bytes(&self.bufs[gpu::BUF_MARKS]),
        );
        gpu::slot_of_entry(
            &self.layout,
            tag,
            &grid[r * gb..(r + 1) * gb],
            &marks[r * mb..(r + 1) * mb],
        )
    }

    /// What the host's completion poll does when it closes a slot (pktwarp_fronthaul::live):
    /// the newest closed tag of its ring entry into `fronthaul.closed`, for the kernel.
    fn mark_closed(&mut self, g: &SlotGrid) {
        let tag = g.key.tag(self.layout.numerology);
        let cycle = pktwarp_fronthaul::grid::cycle_slots(self.layout.numerology);
        let r = (tag as usize - 1) % self.layout.ring;
        let w = &mut self.bufs[gpu::BUF_CLOSED][r / 2];
        let shift = 32 * (r % 2);
        let old = (*w >> shift) as u32;
        if old == 0 || pktwarp_fronthaul::grid::at_or_after(tag, old, cycle) {
            *w = (*w & !(0xFFFF_FFFFu64 << shift)) | (u64::from(tag) << shift);
        }
    }

    /// (tag, PRBs, latest receive time) of every ring entry.
    fn states(&self) -> Vec<(u32, u32, u64)> {
        let b = bytes(&self.bufs[gpu::BUF_SLOT_STATE]);
        (0..self.layout.ring)
            .map(|r| gpu::entry_state(&b, r))
            .collect()
    }
}

/// The Rust stage with a sink that keeps every closed slot.
fn rust_stage(cfg: &FronthaulConfig) -> (FronthaulStage, Arc<Mutex<Vec<SlotGrid>>>) {
    let seen: Arc<Mutex<Vec<SlotGrid>>> = Arc::default();
    let s2 = seen.clone();
    let sink = FnSink(move |g: &SlotGrid| s2.lock().expect("sink").push(g.clone()));
    (
        FronthaulStage::with_sink(cfg, Box::new(sink)).unwrap(),
        seen,
    )
}

/// Runs `frames` (without receive times) through both and compares everything; returns the
/// GPU slots.
fn compare(
    pipes: &Pipes,
    cfg: &FronthaulConfig,
    frames: &[Vec<u8>],
    with_parse: bool,
) -> Vec<SlotGrid> {
    let timed: Vec<(Vec<u8>, u64)> = frames.iter().map(|f| (f.clone(), 0)).collect();
    compare_timed(pipes, cfg, &timed, with_parse).0
}

/// Runs (frame, receive time) pairs through both and compares everything; returns the GPU
/// slots and the (equal) counters. Slots never time out (`slot_timeout_us` at its largest): the GPU ring has no
/// timeout, the host's completion poll has (pktwarp_fronthaul::live).
fn compare_timed(
    pipes: &Pipes,
    cfg: &FronthaulConfig,
    frames: &[(Vec<u8>, u64)],
    with_parse: bool,
) -> (Vec<SlotGrid>, pktwarp_fronthaul::FronthaulCounters) {
    let cfg = &FronthaulConfig {
        slot_timeout_us: u64::MAX / 1000,
        ..cfg.clone()
    };
    let mut host = HostStage::new(pipes, cfg, with_parse);
    let (rust, seen) = rust_stage(cfg);
    let (reached, latest, at_close) =
        run_frames_both(&mut host, &rust, &seen, cfg, frames, with_parse);
    rust.flush();
    let k = usize::from(with_parse);
    let (gc, rejected) = gpu::read_counters(
        &host.layout,
        &host.counters[k],
        &bytes(&host.bufs[gpu::BUF_EAXC_COUNTERS]),
        &bytes(&host.bufs[gpu::BUF_STATS]),
        &host.seq(),
    );
    let rc = rust.counters();
    assert_eq!(gc.frames, reached);
    assert_eq!(rc.frames, reached);
    assert_counters_equal(&gc, &rc, &rejected);
    let gpu_slots = host.slots();
    assert_slots_equal(&gpu_slots, &at_close, &seen.lock().unwrap());
    assert_ring_states(&host, cfg, &gpu_slots, &latest);
    (gpu_slots, rc)
}

/// Each frame through the host-compiled stage and the Rust one, verdicts compared frame by
/// frame; each slot the Rust stage closes (into `seen`) is closed on the host-compiled side as
/// the host's completion poll does (its closed word, then its cells read). Returns the frames
/// that reached the stage, per slot tag the latest receive time of the U-plane frames that
/// store PRBs, and the GPU's copy of each slot closed during the run, read when it closed.
fn run_frames_both(
    host: &mut HostStage<'_>,
    rust: &FronthaulStage,
    seen: &Mutex<Vec<SlotGrid>>,
    cfg: &FronthaulConfig,
    frames: &[(Vec<u8>, u64)],
    with_parse: bool,
) -> (u64, BTreeMap<u32, u64>, Vec<SlotGrid>) {
    let mut reached = 0u64;
    let mut latest: BTreeMap<u32, u64> = BTreeMap::new();
    let mut at_close: Vec<SlotGrid> = Vec::new();
    let refused = |r: &FronthaulStage| r.counters().slot_closed();
    let mut refused_so_far = 0;
    let p = cfg.decode_params();
    for (i, (f, ts)) in frames.iter().enumerate() {
        let got = host.run(f, *ts);
        let mut meta = PacketMeta::default();
        let mut v = Verdict::PASS;
        if with_parse {
            pipeline::internal::stage::parse::parse(f, &mut meta);
        }
        if with_parse && meta.status != 0 {
            v = Verdict::drop(pipeline::verdict::DropReason::ParseError);
        } else {
            reached += 1;
            if *ts == 0 {
                rust.process_untimed(f, &meta, &mut v);
            } else {
                rust.process_at(f, *ts, &meta, &mut v);
            }
            if let Ok(Message::Uplane(u)) = check(f, &p) {
                let now_refused = refused(rust);
                let stored = now_refused == refused_so_far;
                refused_so_far = now_refused;
                if cfg.eaxcs.contains(&u.eaxc) && stored {
                    let n = ((u32::from(u.radio.frame_id) * 10 + u32::from(u.radio.subframe_id))
                        << cfg.numerology)
                        + u32::from(u.radio.slot_id);
                    let l = latest.entry(n + 1).or_insert(0);
                    *l = (*l).max(*ts);
                }
            }
        }
        let want = (v.action as u8, v.reason.map_or(0xFF, |r| r as u8));
        assert_eq!(got, want, "frame {i}: verdict");
        // The slots this frame closed (a completed one, an evicted one), closed on the GPU side
        // before the next frame.
        let now: Vec<SlotGrid> = seen.lock().unwrap()[at_close.len()..].to_vec();
        for g in &now {
            host.mark_closed(g);
            at_close.push(host.slot_now(g));
        }
    }
    (reached, latest, at_close)
}

/// The stage's counters, total and per eAxC, equal between the GPU's (`gc`, with `rejected`
/// per eAxC) and Rust's (`rc`).
fn assert_counters_equal(
    gc: &pktwarp_fronthaul::FronthaulCounters,
    rc: &pktwarp_fronthaul::FronthaulCounters,
    rejected: &[u64],
) {
    assert_eq!(
        (gc.uplane, gc.cplane, gc.not_ecpri, gc.prbs),
        (rc.uplane, rc.cplane, rc.not_ecpri, rc.prbs)
    );
    assert_eq!(gc.errors, rc.errors, "rejects by reason");
    assert_eq!(
        (gc.duplicate_prbs, gc.saturated_samples, gc.eaxc_unexpected),
        (rc.duplicate_prbs, rc.saturated_samples, rc.eaxc_unexpected)
    );
    assert_eq!(gc.per_eaxc.len(), rc.per_eaxc.len());
    for ((g, r), rej) in gc.per_eaxc.iter().zip(&rc.per_eaxc).zip(rejected) {
        assert_eq!(g.eaxc, r.eaxc);
        assert_eq!(
            (g.packets, g.prbs, g.untimed, g.duplicate_prbs),
            (r.packets, r.prbs, r.untimed, r.duplicate_prbs),
            "eAxC {}",
            r.eaxc
        );
        assert_eq!(
            (g.early, g.on_time, g.late),
            (r.early, r.on_time, r.late),
            "eAxC {}: Ta4 windows",
            r.eaxc
        );
        assert_eq!(
            (g.slot_closed, g.slot_closed_prbs),
            (r.slot_closed, r.slot_closed_prbs),
            "eAxC {}: packets after their slot closed",
            r.eaxc
        );
        assert_eq!(
            (g.seq_gaps, g.seq_duplicates, g.seq_out_of_order),
            (r.seq_gaps, r.seq_duplicates, r.seq_out_of_order),
            "eAxC {}: sequence ids",
            r.eaxc
        );
        assert_eq!(
            g.packets,
            g.early + g.on_time + g.late + g.untimed,
            "eAxC {}",
            r.eaxc
        );
        assert_eq!(
            *rej,
            r.errors.iter().sum::<u64>(),
            "eAxC {} rejects",
            r.eaxc
        );
    }
}

/// The same slots on both sides, every PRB's samples and arrival: on the GPU side those
/// closed during the run (`at_close`) as the ring held them then, the others as it holds them
/// at the end (`gpu_slots`); a slot closed during the run that the ring still holds has not
/// changed since (its later packets were refused).
fn assert_slots_equal(gpu_slots: &[SlotGrid], at_close: &[SlotGrid], seen: &[SlotGrid]) {
    let key = |g: &SlotGrid| (g.key.frame_id, g.key.subframe_id, g.key.slot_id);
    let rmap: BTreeMap<_, &SlotGrid> = seen.iter().map(|g| (key(g), g)).collect();
    assert_eq!(rmap.len(), seen.len(), "a Rust slot closed twice");
    let mut gmap: BTreeMap<_, &SlotGrid> = at_close.iter().map(|g| (key(g), g)).collect();
    for g in gpu_slots {
        match gmap.get(&key(g)) {
            Some(d) => assert!(
                d.data() == g.data() && d.filled_count() == g.filled_count(),
                "slot {:?} changed after it was delivered",
                g.key
            ),
            None => {
                gmap.insert(key(g), g);
            }
        }
    }
    assert_eq!(
        gmap.keys().collect::<Vec<_>>(),
        rmap.keys().collect::<Vec<_>>(),
        "slots"
    );
    for (k, g) in &gmap {
        let r = rmap[k];
        assert_eq!(g.shape(), r.shape());
        let [e, s, p] = g.shape();
        for ei in 0..e {
            for sym in 0..s as u8 {
                for prb in 0..p as u16 {
                    assert_eq!(
                        g.is_filled(ei, sym, prb),
                        r.is_filled(ei, sym, prb),
                        "slot {k:?} eAxC {ei} symbol {sym} PRB {prb}: arrival"
                    );
                }
            }
        }
        assert_eq!(g.filled_count(), r.filled_count());
        assert_eq!(g.complete, r.complete, "slot {k:?}");
        assert!(g.data() == r.data(), "slot {k:?}: samples differ");
    }
}

/// Each ring entry counts its slot's filled PRBs, and keeps its latest receive time.
fn assert_ring_states(
    host: &HostStage<'_>,
    cfg: &FronthaulConfig,
    gpu_slots: &[SlotGrid],
    latest: &BTreeMap<u32, u64>,
) {
    let states = host.states();
    for g in gpu_slots {
        let n = ((u32::from(g.key.frame_id) * 10 + u32::from(g.key.subframe_id)) << cfg.numerology)
            + u32::from(g.key.slot_id);
        let (tag, prbs, last) = states[n as usize % host.layout.ring];
        assert_eq!(tag, n + 1);
        assert_eq!(
            prbs as usize,
            g.filled_count(),
            "slot {:?}: PRB count",
            g.key
        );
        assert_eq!(
            last,
            latest.get(&tag).copied().unwrap_or(0),
            "slot {:?}: latest receive time",
            g.key
        );
    }
}

fn capture(name: &str) -> Vec<Vec<u8>> {
    let p = flow_rules::input::data_dir().join("oran").join(name);
    let mut r = CaptureReader::open(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        out.push(f.data.to_vec());
    }
    out
}

/// A grid of the frames' eAxC ids plus one never sent, so no slot completes: every slot stays
/// open to the end on both sides (a Rust slot that completes closes, and a later copy of one of
/// its PRBs would open a new slot there but count a duplicate on the GPU, whose marks outlive it).
fn open_grid(frames: &[Vec<u8>], cfg: &FronthaulConfig) -> FronthaulConfig {
    let p = cfg.decode_params();
    let mut ids: Vec<u16> = frames
        .iter()
        .filter_map(|f| match check(f, &p) {
            Ok(Message::Uplane(u)) => Some(u.eaxc),
            _ => None,
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.truncate(62);
    ids.push(0xFFFE);
    if !ids.contains(&0xFFFF) {
        ids.push(0xFFFF);
    }
    FronthaulConfig {
        eaxcs: ids,
        max_open_slots: 16,
        sink: SinkConfig::None,
        ..cfg.clone()
    }
}

#[test]
fn shared_vectors_and_malformed_captures() {
    if flow_rules::input::require_corpus("oran").is_none() {
        return;
    }
    let pipes = pipes();
    let mut bad = capture("malformed_test_simple.pcap");
    bad.extend(capture("malformed_sample_oran.pcap"));
    for w in [8u8, 9, 12, 14] {
        let frames = capture(&format!("up_bfp{w}.pcap"));
        let base = FronthaulConfig {
            comp: CompConfig {
                method: CompMethodName::Bfp,
                iq_width: w,
                hdr: CompHdr::Static,
            },
            ..FronthaulConfig::default()
        };
        let cfg = open_grid(&frames, &base);
        let slots = compare(&pipes, &cfg, &frames, false);
        let prbs: usize = slots.iter().map(|g| g.filled_count()).sum();
        assert_eq!(prbs, 4 * frames.len(), "BFP{w}: every PRB in a grid");
        let mut all = frames.clone();
        all.extend(bad.iter().cloned());
        compare(&pipes, &cfg, &all, true);
        compare(&pipes, &cfg, &bad, false);
    }
}

/// A multiple of the 2.56 s frame cycle near 2026 (ns since the Unix epoch).
const RADIO_EPOCH: u64 = 1_795_961_014_000_000_000 / 2_560_000_000 * 2_560_000_000;

fn gen_cfg(o: &OranGenOptions, format: GridFormat, beta: f32) -> FronthaulConfig {
    FronthaulConfig {
        carrier_prbs: o.carrier_prbs,
        numerology: o.numerology,
        comp: CompConfig {
            method: o.comp_method,
            iq_width: o.iq_width,
            hdr: o.comp_hdr,
        },
        eaxcs: o.eaxcs.clone(),
        grid: GridConfig { format, beta },
        max_open_slots: 16,
        ..FronthaulConfig::default()
    }
}

#[test]
fn gen_round_trips_complete_slots_equal_to_what_gen_encoded() {
    let pipes = pipes();
    for (i, (method, width, hdr, format)) in [
        (CompMethodName::Bfp, 9, CompHdr::Static, GridFormat::Int16),
        (CompMethodName::Bfp, 14, CompHdr::Dynamic, GridFormat::Int16),
        (CompMethodName::None, 16, CompHdr::Static, GridFormat::Int16),
        (CompMethodName::Bfp, 5, CompHdr::Static, GridFormat::Fp16),
        (CompMethodName::None, 11, CompHdr::Dynamic, GridFormat::Fp16),
    ]
    .into_iter()
    .enumerate()
    {
        let o = OranGenOptions {
            carrier_prbs: 20,
            eaxcs: vec![0x0001, 0x0102],
            comp_method: method,
            iq_width: width,
            comp_hdr: hdr,
            prbs_per_packet: 8,
            sections_per_packet: 2,
            slots: 3,
            seed: 40 + i as u64,
            vlan: (i % 2 == 0).then_some(7),
            ..OranGenOptions::default()
        };
        // Receive times around each symbol's start (early, on time, late, before it, each edge
        // of the default Ta4 window 50 .. 331 us), some frames without one; the radio time's
        // origin moved in two of the lists.
        let offset = [0u64, 7_000_123, 0, 2_559_000_000, 0][i];
        let frames: Vec<(Vec<u8>, u64)> = build_uplane_frames(&o)
            .enumerate()
            .map(|(k, f)| {
                const AT: [i64; 8] = [
                    10_000, 100_000, 400_000, -5_000, 49_999, 50_000, 331_000, 331_001,
                ];
                let ts = match k % 9 {
                    8 => 0,
                    w => (RADIO_EPOCH + offset + f.timestamp_ns - o.ta4_offset_ns)
                        .wrapping_add(AT[w] as u64),
                };
                (f.data, ts)
            })
            .collect();
        let beta = if format == GridFormat::Fp16 {
            0.125
        } else {
            1.0
        };
        let cfg = FronthaulConfig {
            time_offset_ns: offset,
            ..gen_cfg(&o, format, beta)
        };
        let (slots, c) = compare_timed(&pipes, &cfg, &frames, i % 2 == 1);
        // Each edge of the window on each side: 10 us, 49.999 us and -5 us early; 50, 100,
        // 331 us on time; 331.001 and 400 us late.
        let n = frames.len() as u64;
        let per = |w: u64| (0..n).filter(|k| k % 9 == w).count() as u64;
        assert_eq!(c.early(), per(0) + per(3) + per(4), "early");
        assert_eq!(c.on_time(), per(1) + per(5) + per(6), "on time");
        assert_eq!(c.late(), per(2) + per(7), "late");
        assert_eq!(slots.len(), 3);
        for g in &slots {
            assert!(g.complete);
            let n = (0..3u64)
                .find(|&n| {
                    let r = o.radio(n, 0);
                    (r.frame_id, r.subframe_id, r.slot_id)
                        == (g.key.frame_id, g.key.subframe_id, g.key.slot_id)
                })
                .expect("a generated slot");
            for e in 0..2 {
                for sym in 0..14u8 {
                    for prb in 0..20u16 {
                        let want = o.expected(e, n, sym, prb);
                        match format {
                            GridFormat::Int16 => {
                                let got: Vec<i32> = g
                                    .prb_i16(e, sym, prb)
                                    .unwrap()
                                    .iter()
                                    .map(|&x| i32::from(x))
                                    .collect();
                                assert_eq!(got, want);
                            }
                            GridFormat::Fp16 => {
                                let got = g.prb_f32(e, sym, prb).unwrap();
                                for (x, w) in got.iter().zip(want) {
                                    let w =
                                        half::f16::from_f32(w.clamp(-32768, 32767) as f32 * beta);
                                    assert_eq!(*x, w.to_f32());
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn sequence_ids_with_gaps_duplicates_and_the_8_bit_wrap() {
    let pipes = pipes();
    let o = OranGenOptions {
        carrier_prbs: 12,
        eaxcs: vec![0x0005, 0x0101],
        prbs_per_packet: 6,
        slots: 12, // 336 frames per eAxC: the 8-bit id wraps
        seed: 9,
        ..OranGenOptions::default()
    };
    let all: Vec<Vec<u8>> = build_uplane_frames(&o).map(|f| f.data).collect();
    // Frames alternate eAxC in pairs (2 packets a symbol): drop 20 running frames of one eAxC
    // (ids 100..120 of eAxC 5) and 3 single ones, repeat 4 frames right after themselves.
    let p = gen_cfg(&o, GridFormat::Int16, 1.0).decode_params();
    let id_of = |f: &[u8]| match check(f, &p) {
        Ok(Message::Uplane(u)) => (u.eaxc, u.seq.seq),
        _ => panic!("a generated U-plane frame"),
    };
    let mut frames = Vec::new();
    let mut seen5 = 0u32;
    for (k, f) in all.iter().enumerate() {
        let (e, _) = id_of(f);
        if e == 5 {
            seen5 += 1;
            if (101..=120).contains(&seen5) {
                continue;
            }
        }
        if [31, 402, 555].contains(&k) {
            continue;
        }
        frames.push(f.clone());
        if [7, 300, 301, 640].contains(&k) {
            frames.push(f.clone());
        }
    }
    let (_, c) = compare_timed(
        &pipes,
        &gen_cfg(&o, GridFormat::Int16, 1.0),
        &frames.iter().map(|f| (f.clone(), 0)).collect::<Vec<_>>(),
        false,
    );
    let gaps: u64 = c.per_eaxc.iter().map(|e| e.seq_gaps).sum();
    let dups: u64 = c.per_eaxc.iter().map(|e| e.seq_duplicates).sum();
    let ooo: u64 = c.per_eaxc.iter().map(|e| e.seq_out_of_order).sum();
    assert_eq!((gaps, dups, ooo), (23, 4, 0));
    // The GPU's counts do not depend on the order its threads take the frames in: each frame
    // logs its arrival position (burst of 8, index in it) and the log is judged in that order.
    let cfg = gen_cfg(&o, GridFormat::Int16, 1.0);
    let run_reversed = |arrival: &[Vec<u8>]| {
        let mut host = HostStage::new(&pipes, &cfg, false);
        for (b, chunk) in arrival.chunks(8).enumerate() {
            for (i, f) in chunk.iter().enumerate().rev() {
                host.run_at(f, 0, b as u32, i as u32);
            }
        }
        host.seq()
    };
    let want: Vec<[u64; 3]> = c
        .per_eaxc
        .iter()
        .map(|e| [e.seq_gaps, e.seq_duplicates, e.seq_out_of_order])
        .collect();
    assert_eq!(run_reversed(&frames), want, "run in reverse within bursts");
    // A stream that arrives reordered (every run of 8 reversed): out of order judged alike.
    let reordered: Vec<Vec<u8>> = frames
        .chunks(8)
        .flat_map(|c| c.iter().rev().cloned())
        .collect();
    let (rust, _) = rust_stage(&cfg);
    for f in &reordered {
        rust.process_untimed(f, &PacketMeta::default(), &mut Verdict::PASS.clone());
    }
    let rc = rust.counters();
    let want: Vec<[u64; 3]> = rc
        .per_eaxc
        .iter()
        .map(|e| [e.seq_gaps, e.seq_duplicates, e.seq_out_of_order])
        .collect();
    let ooo: u64 = want.iter().map(|w| w[2]).sum();
    assert!(ooo > 100, "{ooo} out of order");
    assert_eq!(run_reversed(&reordered), want, "a reordered stream");
}

#[test]
fn packets_after_their_slot_closed_are_refused_alike() {
    let pipes = pipes();
    let o = OranGenOptions {
        carrier_prbs: 12,
        eaxcs: vec![0x0003, 0x0104],
        prbs_per_packet: 6,
        slots: 4,
        seed: 5,
        ..OranGenOptions::default()
    };
    let all: Vec<(Vec<u8>, u64)> = build_uplane_frames(&o)
        .map(|f| (f.data, RADIO_EPOCH + f.timestamp_ns))
        .collect();
    let per_slot = all.len() / 4;
    let slot = |n: usize| all[n * per_slot..(n + 1) * per_slot].to_vec();
    let changed = |fs: Vec<(Vec<u8>, u64)>, ts: u64| -> Vec<(Vec<u8>, u64)> {
        fs.into_iter()
            .map(|(mut f, t)| {
                let n = f.len();
                f[n - 1] ^= 0x33;
                (f, if ts == 0 { 0 } else { t + ts })
            })
            .collect()
    };
    // Two open slots at most (a ring of 4 entries). Slot 1 completes and closes; the first
    // halves of slots 0 and 2 arrive, then slot 3 (slot 0 evicted partial), the rest of slot
    // 2, then slot 1 again (closed: refused) with receive times, slot 0's second half (closed
    // by eviction: refused) without.
    let mut frames = slot(1);
    frames.extend(slot(0)[..per_slot / 2].to_vec());
    frames.extend(slot(2)[..per_slot / 2].to_vec());
    frames.extend(slot(3));
    frames.extend(slot(2)[per_slot / 2..].to_vec());
    frames.extend(changed(slot(1), 5_000));
    frames.extend(changed(slot(0)[per_slot / 2..].to_vec(), 0));
    let cfg = FronthaulConfig {
        max_open_slots: 2,
        ..gen_cfg(&o, GridFormat::Int16, 1.0)
    };
    let (slots, c) = compare_timed(&pipes, &cfg, &frames, false);
    let refused: u64 = c.per_eaxc.iter().map(|e| e.slot_closed).sum();
    assert_eq!(refused as usize, per_slot + per_slot / 2);
    assert_eq!(
        c.slots_complete + c.slots_partial,
        4,
        "each slot delivered once"
    );
    assert_eq!(c.slots_partial, 1, "slot 0, evicted");
    // compare_timed checked that the ring still holds what was delivered (slot 1's samples
    // are its first copy's).
    assert!(slots.iter().all(|g| g.complete || g.key.slot_id == 0));
    let prbs: u64 = c.per_eaxc.iter().map(|e| e.prbs).sum();
    let refused_prbs: u64 = c.per_eaxc.iter().map(|e| e.slot_closed_prbs).sum();
    assert_eq!(
        prbs + refused_prbs,
        frames.len() as u64 * 6,
        "every PRB stored or refused"
    );
    // A slot never opened whose ring entry already holds a later slot is refused too: half of
    // slot 4 takes slot 0's entry (open, not closed), then slot 0 comes.
    let o5 = OranGenOptions { slots: 5, ..o };
    let all: Vec<Vec<u8>> = build_uplane_frames(&o5).map(|f| f.data).collect();
    let mut frames: Vec<(Vec<u8>, u64)> = all[4 * per_slot..4 * per_slot + per_slot / 2]
        .iter()
        .map(|f| (f.clone(), 0))
        .collect();
    frames.extend(all[..per_slot].iter().map(|f| (f.clone(), 0)));
    let (_, c) = compare_timed(&pipes, &cfg, &frames, true);
    let refused: u64 = c.per_eaxc.iter().map(|e| e.slot_closed).sum();
    assert_eq!(refused as usize, per_slot);
}

/// One of the generator's frames, mutated.
#[derive(Clone, Debug)]
enum Change {
    Byte(usize, u8),
    Truncate(usize),
    Duplicate,
    Drop,
    /// Moved to another place in the stream (its sequence id arrives out of order).
    Move(usize),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Change::Byte(i, b)),
        1 => any::<usize>().prop_map(Change::Truncate),
        1 => Just(Change::Duplicate),
        1 => Just(Change::Drop),
        1 => any::<usize>().prop_map(Change::Move),
    ]
}

#[test]
fn property_generated_packets_mutated_truncated_duplicated_dropped_reordered() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 128,
        ..ProptestConfig::default()
    });
    let strategy = (
        1u8..=16,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        1u16..=3,
        proptest::collection::vec((any::<usize>(), change()), 0..12),
        any::<u64>(),
    );
    let pipes = pipes();
    runner
        .run(
            &strategy,
            |(width, bfp, dynamic, fp16, sections, changes, seed)| {
                let o = OranGenOptions {
                    carrier_prbs: 12,
                    eaxcs: vec![0x0003, 0x0040],
                    comp_method: if bfp {
                        CompMethodName::Bfp
                    } else {
                        CompMethodName::None
                    },
                    iq_width: width,
                    comp_hdr: if dynamic {
                        CompHdr::Dynamic
                    } else {
                        CompHdr::Static
                    },
                    prbs_per_packet: 6,
                    sections_per_packet: sections,
                    slots: 2,
                    seed,
                    ..OranGenOptions::default()
                };
                let mut frames: Vec<Vec<u8>> = build_uplane_frames(&o).map(|f| f.data).collect();
                for (at, c) in changes {
                    let i = at % frames.len();
                    match c {
                        Change::Byte(k, b) => {
                            let f = &mut frames[i];
                            let k = k % f.len();
                            f[k] = b;
                        }
                        Change::Truncate(k) => {
                            let n = k % frames[i].len();
                            frames[i].truncate(n);
                        }
                        Change::Duplicate => {
                            let f = frames[i].clone();
                            frames.insert(i, f);
                        }
                        Change::Drop => {
                            frames.remove(i);
                        }
                        Change::Move(to) => {
                            let f = frames.remove(i);
                            frames.insert(to % (frames.len() + 1), f);
                        }
                    }
                    if frames.is_empty() {
                        return Ok(());
                    }
                }
                let fmt = if fp16 {
                    GridFormat::Fp16
                } else {
                    GridFormat::Int16
                };
                let cfg = open_grid(&frames, &gen_cfg(&o, fmt, 0.5));
                // At most 16 slots open on the Rust side (more would evict, not a semantics the
                // GPU ring has).
                let p = cfg.decode_params();
                let mut keys: Vec<(u8, u8, u8)> = frames
                    .iter()
                    .filter_map(|f| match check(f, &p) {
                        Ok(Message::Uplane(u)) if cfg.eaxcs.contains(&u.eaxc) => {
                            Some((u.radio.frame_id, u.radio.subframe_id, u.radio.slot_id))
                        }
                        _ => None,
                    })
                    .collect();
                keys.sort_unstable();
                keys.dedup();
                prop_assume!(keys.len() <= 16);
                // ... and no two of them in one entry of the GPU's ring.
                let mut ring: Vec<u32> = keys
                    .iter()
                    .map(|&(f, sf, s)| {
                        (((u32::from(f) * 10 + u32::from(sf)) << o.numerology) + u32::from(s)) % 32
                    })
                    .collect();
                ring.sort_unstable();
                ring.dedup();
                prop_assume!(ring.len() == keys.len());
                // Receive times anywhere (any u64: the cycle arithmetic wraps), a quarter none.
                let timed: Vec<(Vec<u8>, u64)> = frames
                    .into_iter()
                    .enumerate()
                    .map(|(k, f)| {
                        let mut z = seed ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                        z ^= z >> 31;
                        (f, if z % 4 == 0 { 0 } else { z })
                    })
                    .collect();
                compare_timed(&pipes, &cfg, &timed, seed % 2 == 0);
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn a_config_without_eaxcs_has_no_gpu_layout() {
    let e = Layout::new(&FronthaulConfig::default()).unwrap_err();
    assert!(e.contains("fronthaul.eaxcs"), "{e}");
    let _ = Action::Pass;
}
