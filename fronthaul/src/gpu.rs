//! The GPU side of the `fronthaul` stage (`gpu-kernels/cuda/fronthaul_stage.cuh`): its parameter
//! block, built from the [`FronthaulConfig`] (the `#[repr(C)]` mirror of `pw_fh_stage_params`,
//! pinned by a layout test against the header), the device buffers it owns (slot grid ring,
//! arrival marks, slot states, per-eAxC counters, stats), and the host's reading of them back
//! into slot grids and [`FronthaulCounters`]. Slots complete during a run through
//! [`super::live`]; what is left is closed at the end ([`absorb_from_gpu`]).

use std::mem::offset_of;

use super::config::{CompHdr, CompMethodName, FronthaulConfig, GridFormat};
use super::decode::{Reject, SYMBOLS_PER_SLOT};
use super::grid::{SlotGrid, SlotKey};
use super::stage::{EaxcCounters, FronthaulCounters};
use crate::bfp::PRB_SAMPLES;

/// Most eAxCs of a GPU grid (`PW_FH_MAX_EAXCS`).
pub const MAX_EAXCS: usize = 64;
/// Words of the stats buffer (`PW_FH_STATS`): `[code]` rejects by code, `[0]` saturated samples.
pub const STATS: usize = 32;
/// Word of the stats buffer counting the slots that took a ring entry (`PW_FH_STAT_TAKEN`).
pub const STAT_TAKEN: usize = 31;
/// Stage counter words (`pw_stage_counters.v[k]`, `PW_FH_CTR_*`).
pub const CTR_UPLANE: usize = 1;
pub const CTR_CPLANE: usize = 2;
pub const CTR_NOT_ECPRI: usize = 3;
pub const CTR_REJECTED: usize = 4;
pub const CTR_PRBS: usize = 5;
pub const CTR_DUPLICATE_PRBS: usize = 6;
pub const CTR_EAXC_UNEXPECTED: usize = 7;
/// Bytes of one `pw_fh_eaxc_counters`.
pub const EAXC_COUNTER_BYTES: usize = 80;
/// Bytes of one `pw_fh_slot_state` (a ring entry's tag and PRB count, its latest receive time).
pub const SLOT_STATE_BYTES: usize = 16;

/// `pw_fh_params`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeBlock {
    pub carrier_prbs: u16,
    pub numerology: u8,
    pub dynamic: u8,
    pub method: u8,
    pub width: u8,
    pub reserved: [u8; 2],
}

/// `pw_fh_stage_params`: the stage's parameter block.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StageParams {
    pub decode: DecodeBlock,
    pub n_eaxcs: u32,
    pub ring_slots: u32,
    pub format: u32,
    pub beta: f32,
    pub grid: u64,
    pub marks: u64,
    pub slot_state: u64,
    pub eaxc_counters: u64,
    pub stats: u64,
    pub eaxc_ids: [u16; MAX_EAXCS],
    pub ta4_min_ns: i64,
    pub ta4_max_ns: i64,
    pub time_offset_ns: u64,
    pub seq: u64,
    pub closed: u64,
}

/// The buffers of the stage, in the order of [`Layout::buffers`] (`KernelImage::buffers[k]`).
pub const BUF_GRID: usize = 0;
pub const BUF_MARKS: usize = 1;
pub const BUF_SLOT_STATE: usize = 2;
pub const BUF_EAXC_COUNTERS: usize = 3;
pub const BUF_STATS: usize = 4;
pub const BUF_SEQ: usize = 5;
/// The newest slot tag the host closed per ring entry (`u32 [ring]`, written by the host's
/// completion poll, read by the kernel to refuse a closed slot's packets).
pub const BUF_CLOSED: usize = 6;

/// The shape of the GPU stage's state for one config.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub eaxcs: Vec<u16>,
    pub prbs: usize,
    /// Slot buffers in the ring: twice the open slots the CPU stage keeps, so a slot stays
    /// readable while the next ones fill.
    pub ring: usize,
    pub format: GridFormat,
    pub beta: f32,
    pub numerology: u8,
}

impl Layout {
    /// The GPU layout of a config. The GPU grid's eAxCs are fixed: a config without `eaxcs`
    /// (a grid learnt in arrival order) has none, and the error says so.
    pub fn new(cfg: &FronthaulConfig) -> Result<Layout, String> {
        cfg.validate()?;
        if cfg.eaxcs.is_empty() {
            return Err("fronthaul.eaxcs: the GPU stage needs the grid's eAxC ids listed (a grid learnt in arrival order is CPU only)".into());
        }
        Ok(Layout {
            eaxcs: cfg.eaxcs.clone(),
            prbs: usize::from(cfg.carrier_prbs),
            ring: 2 * usize::from(cfg.max_open_slots),
            format: cfg.grid.format,
            beta: cfg.grid.beta,
            numerology: cfg.numerology,
        })
    }

    /// PRB cells of one slot.
    pub fn cells(&self) -> usize {
        self.eaxcs.len() * SYMBOLS_PER_SLOT as usize * self.prbs
    }

    /// (name, bytes) of each buffer, in `BUF_*` order.
    pub fn buffers(&self) -> [(&'static str, usize); 7] {
        let cells = self.ring * self.cells();
        [
            ("fronthaul.grid", cells * PRB_SAMPLES * 2),
            ("fronthaul.marks", cells * 4),
            ("fronthaul.slot_state", self.ring * SLOT_STATE_BYTES),
            (
                "fronthaul.eaxc_counters",
                self.eaxcs.len() * EAXC_COUNTER_BYTES,
            ),
            ("fronthaul.stats", STATS * 8),
            ("fronthaul.seq", super::seqlog::LOG_BYTES),
            ("fronthaul.closed", self.ring * 4),
        ]
    }

    /// Offset in the parameter block of each buffer's address, in `BUF_*` order.
    pub fn address_offsets() -> [usize; 7] {
        [
            offset_of!(StageParams, grid),
            offset_of!(StageParams, marks),
            offset_of!(StageParams, slot_state),
            offset_of!(StageParams, eaxc_counters),
            offset_of!(StageParams, stats),
            offset_of!(StageParams, seq),
            offset_of!(StageParams, closed),
        ]
    }
}

/// The parameter block of `cfg` with the buffers at `addrs` (`BUF_*` order; zeros when the
/// executor patches them in).
pub fn param_block(cfg: &FronthaulConfig, l: &Layout, addrs: [u64; 7]) -> Vec<u8> {
    let (dynamic, method, width) = match cfg.comp.hdr {
        CompHdr::Dynamic => (1, 0, 0),
        CompHdr::Static => (
            0,
            match cfg.comp.method {
                CompMethodName::None => 0,
                CompMethodName::Bfp => 1,
            },
            cfg.comp.iq_width,
        ),
    };
    let mut b = vec![0u8; std::mem::size_of::<StageParams>()];
    let d = offset_of!(StageParams, decode);
    b[d..d + 2].copy_from_slice(&cfg.carrier_prbs.to_le_bytes());
    b[d + 2] = cfg.numerology;
    b[d + 3] = dynamic;
    b[d + 4] = method;
    b[d + 5] = width;
    let mut put32 = |at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    put32(offset_of!(StageParams, n_eaxcs), l.eaxcs.len() as u32);
    put32(offset_of!(StageParams, ring_slots), l.ring as u32);
    put32(
        offset_of!(StageParams, format),
        u32::from(l.format == GridFormat::Fp16),
    );
    put32(offset_of!(StageParams, beta), l.beta.to_bits());
    let mut put64 = |at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    for (at, a) in Layout::address_offsets().iter().zip(addrs) {
        put64(*at, a);
    }
    put64(offset_of!(StageParams, ta4_min_ns), cfg.ta4.min_ns as u64);
    put64(offset_of!(StageParams, ta4_max_ns), cfg.ta4.max_ns as u64);
    put64(offset_of!(StageParams, time_offset_ns), cfg.time_offset_ns);
    let ids = offset_of!(StageParams, eaxc_ids);
    for (i, id) in l.eaxcs.iter().take(MAX_EAXCS).enumerate() {
        b[ids + 2 * i..ids + 2 * i + 2].copy_from_slice(&id.to_le_bytes());
    }
    b
}

/// The stage's GPU side for the executor: its block (addresses zero) and its buffers.
pub fn gpu_params(cfg: &FronthaulConfig) -> Result<pipeline::stage::GpuParams, String> {
    let l = Layout::new(cfg)?;
    let buffers = l
        .buffers()
        .iter()
        .zip(Layout::address_offsets())
        .map(|(&(name, bytes), addr_at)| pktwarp_kernels::StageBuffer {
            name: name.to_string(),
            bytes,
            addr_at,
        })
        .collect();
    Ok(pipeline::stage::GpuParams {
        block: param_block(cfg, &l, [0; 7]),
        buffers,
    })
}

/// The composed kernel of the pipeline `[fronthaul]` alone with `cfg`'s block and buffers (the
/// decompression benchmark runs it over device-resident frames, `pktwarp bench`).
pub fn kernel_image(cfg: &FronthaulConfig) -> anyhow::Result<pktwarp_kernels::KernelImage> {
    let g = gpu_params(cfg).map_err(|e| anyhow::anyhow!(e))?;
    let spec = pktwarp_kernels::StageSpec::builtin("fronthaul")
        .ok_or_else(|| anyhow::anyhow!("fronthaul is not a library stage"))?;
    let mut img =
        pktwarp_kernels::image_for(&[spec], vec![g.block]).map_err(|e| anyhow::anyhow!("{e}"))?;
    img.buffers = vec![g.buffers];
    Ok(img)
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    b.get(4 * i..4 * i + 4)
        .map_or(0, |w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    b.get(8 * i..8 * i + 8).map_or(0, |w| {
        u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]])
    })
}

/// The radio time of a slot tag (`number in the cycle + 1`).
pub fn key_of_tag(tag: u32, numerology: u8) -> SlotKey {
    let n = tag.saturating_sub(1);
    let mu = u32::from(numerology.min(6));
    SlotKey {
        frame_id: ((n >> mu) / 10) as u8,
        subframe_id: ((n >> mu) % 10) as u8,
        slot_id: (n & ((1 << mu) - 1)) as u8,
    }
}

/// Ring entry `r`'s state in the slot state buffer: (tag, PRBs stored with it, latest
/// receive time); zeros past the buffer's end.
pub fn entry_state(state: &[u8], r: usize) -> (u32, u32, u64) {
    let w = u64_at(state, 2 * r);
    ((w >> 32) as u32, w as u32, u64_at(state, 2 * r + 1))
}

/// Ring entry `r`'s slot of tag `tag` from that entry's grid words (`grid`: the entry's bytes,
/// int16 or FP16) and marks (`marks`: its cells' u32 marks): the PRBs whose mark is the tag,
/// the others zero (as a Rust slot grid starts).
pub fn slot_of_entry(l: &Layout, tag: u32, grid: &[u8], marks: &[u8]) -> SlotGrid {
    let words: Vec<u16> = grid
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    let filled = |c: usize| u32_at(marks, c) == tag;
    let mut g = SlotGrid::restore(
        key_of_tag(tag, l.numerology),
        l.eaxcs.len(),
        l.prbs,
        l.format,
        l.beta,
        &words,
        &filled,
    );
    g.eaxc_ids = l.eaxcs.clone();
    g
}

/// The grid of slot `tag` when every cell of it arrived and its samples are not wanted.
pub fn complete_slot(l: &Layout, tag: u32) -> SlotGrid {
    let mut g = SlotGrid::all_filled(
        key_of_tag(tag, l.numerology),
        l.eaxcs.len(),
        l.prbs,
        l.format,
        l.beta,
    );
    g.eaxc_ids = l.eaxcs.clone();
    g
}

/// Bytes of one ring entry's grid and of its marks.
pub fn entry_bytes(l: &Layout) -> (usize, usize) {
    (l.cells() * PRB_SAMPLES * 2, l.cells() * 4)
}

/// Every slot the ring holds (ring entries with a tag), ring order. Buffers shorter than the
/// layout read as empty.
pub fn read_slots(l: &Layout, grid: &[u8], marks: &[u8], state: &[u8]) -> Vec<SlotGrid> {
    let (gb, mb) = entry_bytes(l);
    let mut out = Vec::new();
    for r in 0..l.ring {
        let (tag, _, _) = entry_state(state, r);
        if tag == 0 {
            continue;
        }
        let g = grid.get(r * gb..(r + 1) * gb).unwrap_or(&[]);
        let m = marks.get(r * mb..(r + 1) * mb).unwrap_or(&[]);
        out.push(slot_of_entry(l, tag, g, m));
    }
    out
}

/// The stage's counters from its GPU state: `stage` is its stage counter block summed over the
/// queues (8 words), `eaxc` and `stats` its buffers (summed over the GPUs), `seq` per eAxC index
/// (gaps, duplicates, out of order) as the host judged the sequence log
/// ([`super::seqlog::SeqJudge`]). Slots complete / partial are the host's to count (as they
/// close); per-eAxC rejects by reason are not kept on the GPU (their total is the second value,
/// per eAxC index).
pub fn read_counters(
    l: &Layout,
    stage: &[u64; 8],
    eaxc: &[u8],
    stats: &[u8],
    seq: &[[u64; 3]],
) -> (FronthaulCounters, Vec<u64>) {
    let mut c = FronthaulCounters {
        frames: stage[0],
        uplane: stage[CTR_UPLANE],
        cplane: stage[CTR_CPLANE],
        not_ecpri: stage[CTR_NOT_ECPRI],
        prbs: stage[CTR_PRBS],
        duplicate_prbs: stage[CTR_DUPLICATE_PRBS],
        eaxc_unexpected: stage[CTR_EAXC_UNEXPECTED],
        saturated_samples: u64_at(stats, 0),
        ..FronthaulCounters::default()
    };
    for r in Reject::ALL {
        c.errors[r.index()] = u64_at(stats, r as usize);
    }
    let mut rejected = Vec::new();
    for (i, &id) in l.eaxcs.iter().enumerate() {
        let w = |k: usize| u64_at(eaxc, i * EAXC_COUNTER_BYTES / 8 + k);
        c.per_eaxc.push(EaxcCounters {
            eaxc: id,
            packets: w(0),
            prbs: w(1),
            untimed: w(2),
            duplicate_prbs: w(3),
            early: w(5),
            on_time: w(6),
            late: w(7),
            seq_gaps: seq.get(i).map_or(0, |s| s[0]),
            seq_duplicates: seq.get(i).map_or(0, |s| s[1]),
            seq_out_of_order: seq.get(i).map_or(0, |s| s[2]),
            slot_closed: w(8),
            slot_closed_prbs: w(9),
            ..EaxcCounters::default()
        });
        rejected.push(w(4));
    }
    (c, rejected)
}

/// At the end of a GPU run (drained, before shutdown): the slots the completion poll (`live`)
/// has not closed yet closed now, oldest first, and handed to the sink, the sequence log
/// judged to its end; then each fronthaul stage's GPU counters read back into the Rust stage
/// ([`absorb_stage`]), so the summary and /metrics see them.
pub fn absorb_from_gpu(
    p: &pipeline::stage::Pipeline,
    mem: &dyn pipeline::stage::StageGpuMemory,
    mut live: super::live::LiveStages,
) -> anyhow::Result<()> {
    live.finish(p, mem)?;
    let src = GpuCounters::new(mem)?;
    live.absorb_counters(p, &src)?;
    live.report_lost(p, &src)
}

/// Slots that took a ring entry of the stage at position `k`, summed over the GPUs.
pub fn taken_slots(src: &dyn CounterSource, k: usize) -> anyhow::Result<u64> {
    Ok(src
        .stage_buffers(k, BUF_STATS)?
        .iter()
        .map(|b| u64_at(b, STAT_TAKEN))
        .sum())
}

/// Where a fronthaul stage's GPU counters are read from.
pub trait CounterSource {
    /// The stage counter block of the stage at pipeline position `k`, summed over every queue
    /// and GPU.
    fn stage_block(&self, k: usize) -> [u64; 8];
    /// Buffer `i` (`BUF_*`) of that stage, one copy per GPU.
    fn stage_buffers(&self, k: usize, i: usize) -> anyhow::Result<Vec<Vec<u8>>>;
}

/// The GPUs' counters: one snapshot of every queue's counter blocks, buffers read on demand.
pub struct GpuCounters<'a> {
    mem: &'a dyn pipeline::stage::StageGpuMemory,
    blocks: Vec<[u64; 8]>,
}

impl<'a> GpuCounters<'a> {
    pub fn new(mem: &'a dyn pipeline::stage::StageGpuMemory) -> anyhow::Result<GpuCounters<'a>> {
        Ok(GpuCounters {
            blocks: mem.counter_blocks()?,
            mem,
        })
    }
}

impl CounterSource for GpuCounters<'_> {
    fn stage_block(&self, k: usize) -> [u64; 8] {
        self.blocks.get(k).copied().unwrap_or_default()
    }

    fn stage_buffers(&self, k: usize, i: usize) -> anyhow::Result<Vec<Vec<u8>>> {
        (0..self.mem.gpus())
            .map(|gpu| self.mem.read_buffer(gpu, k, i))
            .collect()
    }
}

/// The GPU counters of the fronthaul stage `f` at pipeline position `k` into the Rust stage:
/// its stage counter block and its buffers' counters summed over the GPUs, `seq` per eAxC
/// index as the sequence log was judged. Run by the completion poll while the run goes
/// (/metrics live) and at its end.
pub fn absorb_stage(
    f: &super::FronthaulStage,
    k: usize,
    src: &dyn CounterSource,
    seq: &[[u64; 3]],
) -> anyhow::Result<()> {
    let l = Layout::new(f.config()).map_err(|e| anyhow::anyhow!(e))?;
    let mut eaxc = vec![0u64; l.buffers()[BUF_EAXC_COUNTERS].1 / 8];
    let mut stats = vec![0u64; STATS];
    for b in src.stage_buffers(k, BUF_EAXC_COUNTERS)? {
        add_words(&mut eaxc, &b);
    }
    for b in src.stage_buffers(k, BUF_STATS)? {
        add_words(&mut stats, &b);
    }
    let stage = src.stage_block(k);
    let (c, _) = read_counters(&l, &stage, &to_bytes(&eaxc), &to_bytes(&stats), seq);
    f.absorb_gpu_counters(c);
    Ok(())
}

fn add_words(acc: &mut [u64], b: &[u8]) {
    for (i, a) in acc.iter_mut().enumerate() {
        *a += u64_at(b, i);
    }
}

fn to_bytes(w: &[u64]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One slot from two GPUs' copies: each cell from whichever has it.
pub(crate) fn merge(l: &Layout, a: &SlotGrid, b: &SlotGrid) -> SlotGrid {
    let [e, s, p] = a.shape();
    let mut words = vec![0u16; l.cells() * PRB_SAMPLES];
    let cell = |c: usize| (c / (s * p), (c / p % s) as u8, (c % p) as u16);
    for c in 0..e * s * p {
        let (ei, sym, prb) = cell(c);
        let src = if a.is_filled(ei, sym, prb) { a } else { b };
        let w = &mut words[c * PRB_SAMPLES..(c + 1) * PRB_SAMPLES];
        if let Some(x) = src.prb_i16(ei, sym, prb) {
            w.iter_mut().zip(x).for_each(|(o, v)| *o = *v as u16);
        } else if let super::grid::GridData::Fp16(v) = src.data() {
            w.copy_from_slice(&v[c * PRB_SAMPLES..(c + 1) * PRB_SAMPLES]);
        }
    }
    let filled = |c: usize| {
        let (ei, sym, prb) = cell(c);
        a.is_filled(ei, sym, prb) || b.is_filled(ei, sym, prb)
    };
    let mut g = SlotGrid::restore(a.key, e, p, l.format, l.beta, &words, &filled);
    g.eaxc_ids = l.eaxcs.clone();
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    fn header() -> &'static str {
        include_str!("../../gpu-kernels/cuda/fronthaul_stage.cuh")
    }

    fn define(name: &str) -> u64 {
        let h = header();
        let line = h
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("{name} not in fronthaul_stage.cuh"));
        let v = line
            .split_whitespace()
            .nth(2)
            .unwrap()
            .trim_end_matches('u');
        v.parse().unwrap()
    }

    #[test]
    fn layout_matches_the_header() {
        let h = header();
        assert_eq!(size_of::<DecodeBlock>(), 8);
        assert_eq!(size_of::<StageParams>(), 232);
        assert!(h.contains("sizeof(pw_fh_stage_params) == 232"));
        assert!(h.contains("sizeof(pw_fh_seq_entry) == 16"));
        assert!(h.contains(&format!(
            "#define PW_FH_SEQ_LOG {}u",
            super::super::seqlog::SEQ_LOG
        )));
        assert!(h.contains(&format!(
            "#define PW_FH_SEQ_HEAD_BYTES {}u",
            super::super::seqlog::HEAD_BYTES
        )));
        assert!(h.contains("sizeof(pw_fh_slot_state) == 16"));
        for (field, off) in [
            ("grid", offset_of!(StageParams, grid)),
            ("stats", offset_of!(StageParams, stats)),
            ("eaxc_ids", offset_of!(StageParams, eaxc_ids)),
            ("ta4_min_ns", offset_of!(StageParams, ta4_min_ns)),
        ] {
            let want = format!("PW_OFFSETOF(pw_fh_stage_params, {field}) == {off}");
            assert!(h.contains(&want), "{want}");
        }
        // Every field's offset is the one the header's comment gives.
        for (field, off) in [
            ("decode", offset_of!(StageParams, decode)),
            ("n_eaxcs", offset_of!(StageParams, n_eaxcs)),
            ("ring_slots", offset_of!(StageParams, ring_slots)),
            ("format", offset_of!(StageParams, format)),
            ("beta", offset_of!(StageParams, beta)),
            ("grid", offset_of!(StageParams, grid)),
            ("marks", offset_of!(StageParams, marks)),
            ("slot_state", offset_of!(StageParams, slot_state)),
            ("eaxc_counters", offset_of!(StageParams, eaxc_counters)),
            ("stats", offset_of!(StageParams, stats)),
            ("ta4_min_ns", offset_of!(StageParams, ta4_min_ns)),
            ("ta4_max_ns", offset_of!(StageParams, ta4_max_ns)),
            ("time_offset_ns", offset_of!(StageParams, time_offset_ns)),
            ("seq", offset_of!(StageParams, seq)),
            ("closed", offset_of!(StageParams, closed)),
        ] {
            let line = h
                .lines()
                .find(|l| l.contains(&format!(" {field};")) && l.contains("/*"))
                .unwrap_or_else(|| panic!("{field}"));
            let c = line.split("/*").nth(1).unwrap().trim_start();
            let n: usize = c.split_whitespace().next().unwrap().parse().unwrap();
            assert_eq!(n, off, "{field}: {line}");
        }
        assert!(h.contains("sizeof(pw_fh_eaxc_counters) == 80"));
        assert_eq!(define("PW_FH_MAX_EAXCS") as usize, MAX_EAXCS);
        assert_eq!(define("PW_FH_STATS") as usize, STATS);
        assert_eq!(define("PW_FH_STAT_TAKEN") as usize, STAT_TAKEN);
        for (name, v) in [
            ("PW_FH_CTR_UPLANE", CTR_UPLANE),
            ("PW_FH_CTR_CPLANE", CTR_CPLANE),
            ("PW_FH_CTR_NOT_ECPRI", CTR_NOT_ECPRI),
            ("PW_FH_CTR_REJECTED", CTR_REJECTED),
            ("PW_FH_CTR_PRBS", CTR_PRBS),
            ("PW_FH_CTR_DUPLICATE_PRBS", CTR_DUPLICATE_PRBS),
            ("PW_FH_CTR_EAXC_UNEXPECTED", CTR_EAXC_UNEXPECTED),
        ] {
            assert_eq!(define(name) as usize, v, "{name}");
        }
    }

    #[test]
    fn the_block_holds_the_config() {
        let cfg = FronthaulConfig {
            carrier_prbs: 106,
            numerology: 0,
            eaxcs: vec![3, 0x1234],
            ta4: crate::config::Ta4Window {
                min_ns: -7,
                max_ns: 300_000,
            },
            time_offset_ns: 123,
            ..FronthaulConfig::default()
        };
        let l = Layout::new(&cfg).unwrap();
        let b = param_block(&cfg, &l, [1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(b.len(), 232);
        assert_eq!(u64_at(&b, 27), 6, "the sequence state's address");
        assert_eq!(u64_at(&b, 28), 7, "the closed tags' address");
        assert_eq!(
            (u64_at(&b, 24) as i64, u64_at(&b, 25), u64_at(&b, 26)),
            (-7, 300_000, 123),
            "Ta4 window and time offset"
        );
        assert_eq!(&b[0..6], &[106, 0, 0, 0, 1, 9]);
        assert_eq!(u32_at(&b, 2), 2);
        assert_eq!(u32_at(&b, 3), 8, "ring = 2 x max_open_slots");
        assert_eq!(f32::from_bits(u32_at(&b, 5)), 1.0);
        assert_eq!((u64_at(&b, 3), u64_at(&b, 7)), (1, 5));
        assert_eq!(&b[64..68], &[3, 0, 0x34, 0x12]);
        let g = gpu_params(&cfg).unwrap();
        assert_eq!(g.buffers.len(), 7);
        assert_eq!(g.buffers[BUF_CLOSED].bytes, 8 * 4);
        assert_eq!(g.buffers[BUF_SEQ].bytes, 16 + 65536 * 16);
        assert_eq!(g.buffers[BUF_GRID].bytes, 8 * 2 * 14 * 106 * 48);
        assert_eq!(g.buffers[BUF_STATS].addr_at, 56);
        let e = Layout::new(&FronthaulConfig::default()).unwrap_err();
        assert!(e.contains("fronthaul.eaxcs"), "{e}");
        let img = kernel_image(&cfg).unwrap();
        assert_eq!(img.template, pktwarp_kernels::Template::Composed);
        assert!(img
            .source
            .contains("pw_stage_fronthaul(f, m, v, pw_stage_params(ctx, 0u)"));
        assert_eq!((img.params[0].len(), img.buffers[0].len()), (232, 7));
        let e = kernel_image(&FronthaulConfig::default()).unwrap_err();
        assert!(e.to_string().contains("fronthaul.eaxcs"), "{e}");
        // Tags name the slot's radio time.
        let k = key_of_tag((3 * 10 + 7) * 2 + 1 + 1, 1);
        assert_eq!((k.frame_id, k.subframe_id, k.slot_id), (3, 7, 1));
    }
}
