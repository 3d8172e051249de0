//! The fronthaul stage on one CPU thread (no GPU needed): decompressed PRBs per second of the
//! whole Rust stage (`FronthaulStage::process_at`: frame checks, sequence and Ta4 tracking,
//! slot grid) over the bench's generated frames (`--fh-eaxcs` x `--fh-slots`, 273 PRBs, 50 PRBs
//! and 2 sections a packet, VLAN), against, over the same PRBs and in the same rounds, the plain
//! scalar decoder (bit by bit, `bfp::decompress_prb_scalar`) and pktwarp's 16-bit decoder alone
//! (`bfp::decompress_prb_i16`, no frame work: what the stage adds per packet is the difference).
//!
//! One stage serves every round, as a running receiver's does (its grids reused): between
//! rounds (untimed) every frame moves on by whole radio frames (frameId, receive time) and its
//! sequence id by the packets an eAxC sent in a round, so each round's slots are new (a closed
//! slot's packets are refused) and the ids run on without gaps. Checked in the same run: no
//! packet refused or rejected, every PRB counted, every slot complete, and every slot grid of a
//! stage equal to the scalar decoder's, sample for sample.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash as _, Hasher as _};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use pipeline::burst::Burst;
use pipeline::meta::PacketMeta;
use pipeline::verdict::Verdict;
use pipeline::wire::{ecpri, ethernet};
use pktwarp_fronthaul::bfp::{self, Method, PRB_SAMPLES};
use pktwarp_fronthaul::decode::{self, Message, Sections};
use pktwarp_fronthaul::grid::GridData;
use pktwarp_fronthaul::oran_gen::OranGenOptions;
use pktwarp_fronthaul::stage::SYMBOLS;
use pktwarp_fronthaul::{FnSink, FronthaulConfig, FronthaulStage, SlotGrid};
use serde_json::json;

use super::fronthaul::{frames_of, setup_shape, CELL_PRBS_PER_S};
use super::inputs::median;
use super::{Args, Json, Table};

/// One width's figures (PRB/s per round, in round order).
pub struct CpuRow {
    pub width: u8,
    pub frames: usize,
    pub prbs_per_pass: u64,
    pub stage: Vec<f64>,
    pub decoder: Vec<f64>,
    pub scalar: Vec<f64>,
    pub grids_equal: bool,
}

impl CpuRow {
    /// The whole stage's median PRB/s.
    pub fn stage_median(&self) -> f64 {
        median(&mut self.stage.clone())
    }
}

/// A shape whose frames and grid stay in a core's cache (as the criterion bench's): the same
/// stage on it tells the memory traffic of the full shape from the work a PRB costs.
const SMALL: (usize, u64) = (1, 4);
/// PRBs a timed round decodes at least (a small shape is passed over several times).
const ROUND_PRBS: u64 = 2 << 20;

/// The table: one row per compression width and shape (`--fh-eaxcs` x `--fh-slots`, then
/// [`SMALL`]). Returns the full shape's rows (the GPU table's CPU peer).
pub fn section(a: &Args, md: &mut Table, js: &mut Json) -> anyhow::Result<Vec<CpuRow>> {
    let feature = |yes: bool| if yes { "yes" } else { "no" };
    #[cfg(target_arch = "x86_64")]
    let (avx2, bmi2) = (
        std::is_x86_feature_detected!("avx2"),
        std::is_x86_feature_detected!("bmi2"),
    );
    #[cfg(not(target_arch = "x86_64"))]
    let (avx2, bmi2) = (false, false);
    md.line(format!(
        "\n### Fronthaul on one CPU thread: the whole Rust stage vs the plain scalar decoder, 273 PRBs, 50 PRBs / 2 sections a packet, median of {} rounds (AVX2 {}, BMI2 {})\n",
        a.fh_rounds, feature(avx2), feature(bmi2)
    ));
    md.line("| compression | eAxCs x slots | frames | PRBs a pass | the Rust stage, 1 thread: M PRB/s (min-max) | 100 MHz 4T4R cells | pktwarp decoder alone (16-bit) M PRB/s | scalar decoder (bit by bit) M PRB/s | stage / scalar | grids == scalar |".into());
    md.line("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |".into());
    let mut rows = Vec::new();
    let mut out = Vec::new();
    for &width in &a.fh_widths {
        for (shape, small) in [((a.fh_eaxcs, a.fh_slots), false), (SMALL, true)] {
            let r = bench_width(a, width, shape)
                .with_context(|| format!("fronthaul CPU BFP{width}, {shape:?}"))?;
            let label = format!(
                "{} x {}{}",
                shape.0,
                shape.1,
                if small { " (in cache)" } else { "" }
            );
            let m = |v: &[f64]| median(&mut v.to_vec());
            let lo = r.stage.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = r.stage.iter().copied().fold(0.0, f64::max);
            let (stage, decoder, scalar) = (m(&r.stage), m(&r.decoder), m(&r.scalar));
            md.line(format!(
                "| BFP{} | {label} | {} | {} | {:.1} ({:.1}-{:.1}) | {:.2} | {:.1} | {:.2} | {:.1}x | {} |",
                r.width,
                r.frames,
                r.prbs_per_pass,
                stage / 1e6,
                lo / 1e6,
                hi / 1e6,
                stage / CELL_PRBS_PER_S,
                decoder / 1e6,
                scalar / 1e6,
                stage / scalar,
                r.grids_equal
            ));
            rows.push(
                json!({"comp": format!("bfp{}", r.width), "frames": r.frames,
                "eaxcs": shape.0, "slots": shape.1, "prbs_per_pass": r.prbs_per_pass,
                "stage_prbs_per_s": stage, "cells_100mhz_4t4r": stage / CELL_PRBS_PER_S,
                "decoder_prbs_per_s": decoder, "scalar_prbs_per_s": scalar,
                "stage_runs": r.stage, "decoder_runs": r.decoder, "scalar_runs": r.scalar,
                "grids_equal": r.grids_equal, "avx2": avx2, "bmi2": bmi2}),
            );
            if !small {
                out.push(r);
            }
        }
    }
    js.insert("fronthaul_cpu".into(), json!(rows));
    Ok(out)
}

/// The bench's frames with what moves them on by a round.
struct Rounds {
    frames: Burst,
    times: Vec<u64>,
    /// Offsets in a frame of the radio header's frameId and of the SEQ_ID's sequence id.
    frame_id_at: usize,
    seq_at: usize,
    /// Radio frames a round moves on (the slots of a round fit), and the sequence ids.
    step_frames: u8,
    step_seq: u8,
}

impl Rounds {
    fn new(o: &OranGenOptions) -> Self {
        let frames = frames_of(o);
        let times = frames.descs.iter().map(|d| d.timestamp_ns).collect();
        // Ethernet (+ a tag), the eCPRI common header, PC_ID (2), then SEQ_ID; the radio
        // header after SEQ_ID (2), frameId its second byte.
        let tag = if o.vlan.is_some() {
            ethernet::VlanTag::LEN
        } else {
            0
        };
        let ecpri_at = ethernet::HEADER_LEN + tag + ecpri::Header::HEADER_LEN;
        let slots_per_frame = 10u64 << o.numerology;
        let per_eaxc = o.slots * SYMBOLS as u64 * u64::from(o.packets_per_symbol());
        Rounds {
            frames,
            times,
            frame_id_at: ecpri_at + 4 + 1,
            seq_at: ecpri_at + 2,
            step_frames: o.slots.div_ceil(slots_per_frame).max(1) as u8,
            step_seq: (per_eaxc % 256) as u8,
        }
    }

    fn advance(&mut self) {
        let (fi, sq) = (self.frame_id_at, self.seq_at);
        for (i, d) in self.frames.descs.iter().enumerate() {
            let at = d.offset as usize;
            let f = &mut self.frames.data[at..at + d.len as usize];
            f[fi] = f[fi].wrapping_add(self.step_frames);
            f[sq] = f[sq].wrapping_add(self.step_seq);
            self.times[i] += u64::from(self.step_frames) * 10_000_000;
        }
    }

    fn pass(&self, st: &FronthaulStage) {
        let meta = PacketMeta::default();
        for ((_, f), &t) in self.frames.frames().zip(&self.times) {
            let mut v = Verdict::PASS;
            st.process_at(f, t, &meta, &mut v);
        }
    }
}

/// (offset in the burst's data, cell in the slot grid) of every PRB, and each slot's range.
type PrbList = (Vec<(u32, u32)>, Vec<Range<usize>>);

/// Every PRB of the frames as the decoders take it: (offset in the burst's data, cell in the
/// slot grid), and each slot's range of that list.
fn prb_list(frames: &Burst, cfg: &FronthaulConfig) -> anyhow::Result<PrbList> {
    let p = cfg.decode_params();
    let prbs = usize::from(cfg.carrier_prbs);
    let (mut list, mut slots) = (Vec::new(), Vec::new());
    let (mut key, mut from) = (None, 0);
    for (d, f) in frames.frames() {
        let Ok(Message::Uplane(u)) = decode::check(f, &p) else {
            anyhow::bail!("a generated frame is not a valid U-plane frame");
        };
        let e = cfg
            .eaxcs
            .iter()
            .position(|&x| x == u.eaxc)
            .context("an unlisted eAxC")?;
        let k = (u.radio.frame_id, u.radio.subframe_id, u.radio.slot_id);
        if key.is_some_and(|x| x != k) {
            slots.push(from..list.len());
            from = list.len();
        }
        key = Some(k);
        for s in Sections::new(f, &u, &p).flatten() {
            for j in 0..s.num_prb {
                let at = d.offset as usize + s.data + usize::from(j) * s.prb_bytes;
                let cell = (e * SYMBOLS + usize::from(s.symbol)) * prbs + usize::from(s.prb(j));
                list.push((at as u32, cell as u32));
            }
        }
    }
    slots.push(from..list.len());
    Ok((list, slots))
}

/// The decoders timed against the stage.
#[derive(Clone, Copy)]
enum Decoder {
    /// Bit by bit, 32-bit samples, then saturated to the int16 cell.
    Scalar,
    /// pktwarp's: straight into the cell when no sample can saturate, as the stage stores.
    Pktwarp,
}

/// Decodes `list`'s PRBs of `data` into `grid` (one slot's cells).
fn decode_prbs(data: &[u8], list: &[(u32, u32)], width: u8, grid: &mut [i16], d: Decoder) {
    let pb = bfp::prb_bytes(Method::Bfp, width);
    let mut iq = [0i32; PRB_SAMPLES];
    for &(at, cell) in list {
        let (at, cell) = (at as usize, cell as usize * PRB_SAMPLES);
        let (Some(bytes), Some(out)) = (
            data.get(at..at + pb),
            grid.get_mut(cell..cell + PRB_SAMPLES),
        ) else {
            continue;
        };
        let Ok(out) = <&mut [i16; PRB_SAMPLES]>::try_from(out) else {
            continue;
        };
        match d {
            Decoder::Scalar => {
                bfp::decompress_prb_scalar(bytes, Method::Bfp, width, &mut iq);
            }
            Decoder::Pktwarp => {
                if bfp::decompress_prb_i16(bytes, Method::Bfp, width, out).is_some() {
                    continue;
                }
                bfp::decompress_prb(bytes, Method::Bfp, width, &mut iq);
            }
        }
        for (o, &x) in out.iter_mut().zip(&iq) {
            *o = x.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16;
        }
    }
}

fn hash_i16(v: &[i16]) -> u64 {
    let mut h = DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

fn bench_width(a: &Args, width: u8, shape: (usize, u64)) -> anyhow::Result<CpuRow> {
    let (o, cfg) = setup_shape(width, shape.0, shape.1)?;
    let mut r = Rounds::new(&o);
    let (list, slots) = prb_list(&r.frames, &cfg)?;
    let prbs_per_pass = list.len() as u64;
    let passes = ROUND_PRBS.div_ceil(prbs_per_pass.max(1)).max(1);
    let cells = cfg.eaxcs.len() * SYMBOLS * usize::from(cfg.carrier_prbs);
    let mut grid = vec![0i16; cells * PRB_SAMPLES];

    let st = FronthaulStage::from_config(&cfg).map_err(anyhow::Error::msg)?;
    // A warm-up pass: the stage's grids allocated, the frames and the list paged in.
    r.pass(&st);
    decode_prbs(&r.frames.data, &list, width, &mut grid, Decoder::Pktwarp);
    let rate = |s: f64| (passes * prbs_per_pass) as f64 / s;
    let (mut stage, mut decoder, mut scalar) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..a.fh_rounds {
        let mut s = 0.0;
        for _ in 0..passes {
            r.advance();
            let t = Instant::now();
            r.pass(&st);
            s += t.elapsed().as_secs_f64();
        }
        stage.push(rate(s));
        for (d, v) in [
            (Decoder::Pktwarp, &mut decoder),
            (Decoder::Scalar, &mut scalar),
        ] {
            let t = Instant::now();
            for _ in 0..passes {
                decode_prbs(&r.frames.data, &list, width, &mut grid, d);
            }
            v.push(rate(t.elapsed().as_secs_f64()));
        }
    }
    let c = st.counters();
    let passes = a.fh_rounds as u64 * passes + 1;
    anyhow::ensure!(
        c.errors_total() == 0 && c.slot_closed() == 0,
        "the stage rejected or refused frames: {}",
        c.summary()
    );
    anyhow::ensure!(
        c.prbs == passes * prbs_per_pass && c.slots_complete == passes * o.slots,
        "the stage decoded {} PRBs / {} complete slots in {passes} passes of {prbs_per_pass} / {}",
        c.prbs,
        c.slots_complete,
        o.slots
    );
    let gaps: u64 = c
        .per_eaxc
        .iter()
        .map(|e| e.seq_gaps + e.seq_out_of_order)
        .sum();
    anyhow::ensure!(gaps == 0, "sequence ids did not run on: {}", c.summary());

    // Every slot of a stage equal to the scalar decoder's.
    let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
    let keep = seen.clone();
    let sink = FnSink(move |g: &SlotGrid| {
        if let GridData::Int16(v) = g.data() {
            keep.lock().expect("sink").push(hash_i16(v));
        }
    });
    let check = FronthaulStage::with_sink(&cfg, Box::new(sink)).map_err(anyhow::Error::msg)?;
    r.pass(&check);
    check.flush();
    let mut want = Vec::new();
    for s in &slots {
        decode_prbs(
            &r.frames.data,
            &list[s.clone()],
            width,
            &mut grid,
            Decoder::Scalar,
        );
        want.push(hash_i16(&grid));
    }
    let grids_equal = *seen.lock().expect("sink") == want;
    Ok(CpuRow {
        width,
        frames: r.frames.len(),
        prbs_per_pass,
        stage,
        decoder,
        scalar,
        grids_equal,
    })
}
