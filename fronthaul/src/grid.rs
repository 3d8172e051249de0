//! The slot grid (eAxC index x symbol x PRB x 24 samples, int16 or FP16) and the assembler that
//! fills open slots and closes them complete or partial.

use super::bfp::PRB_SAMPLES;
use super::config::GridFormat;
use super::decode::SYMBOLS_PER_SLOT;

/// A slot's radio time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SlotKey {
    pub frame_id: u8,
    pub subframe_id: u8,
    pub slot_id: u8,
}

impl SlotKey {
    /// The slot's number in the 2.56 s frame cycle, `(frameId * 10 + subframeId) * 2^mu +
    /// slotId` (the GPU ring's index before the modulo).
    pub fn number(&self, numerology: u8) -> u32 {
        ((u32::from(self.frame_id) * 10 + u32::from(self.subframe_id)) << numerology.min(6))
            + u32::from(self.slot_id)
    }

    /// The slot's tag (its number + 1; 0 is "none"), as the GPU stage marks its PRBs.
    pub fn tag(&self, numerology: u8) -> u32 {
        self.number(numerology) + 1
    }
}

/// Slots in the 2.56 s frame cycle (tags are 1 ..= this).
pub fn cycle_slots(numerology: u8) -> u32 {
    2560 << numerology.min(6)
}

/// Whether tag `a` is tag `b` or later in the frame cycle (less than half a cycle after it);
/// 0 (none) is never.
pub fn at_or_after(a: u32, b: u32, cycle: u32) -> bool {
    a != 0 && b != 0 && (a % cycle + cycle - b % cycle) % cycle < cycle / 2
}

/// Where a slot's packets may still go: the ring of `ring` entries (a slot's entry is its
/// number modulo the ring, as on the GPU) with, per entry, the newest tag that stored PRBs
/// there and the newest tag closed there. A packet is refused ([`Self::refuses`]) when its slot
/// has closed (delivered: the slot handed to the sink never changes) or its entry has moved on
/// to a later slot (the packet is at least `ring` slots late). The same rule on the CPU's
/// assembler and on the GPU (`pw_fh_slot_refused`, with the host's closed tags).
#[derive(Clone, Debug)]
pub struct SlotRing {
    numerology: u8,
    stored: Vec<u32>,
    closed: Vec<u32>,
}

impl SlotRing {
    pub fn new(numerology: u8, ring: usize) -> Self {
        SlotRing {
            numerology,
            stored: vec![0; ring.max(1)],
            closed: vec![0; ring.max(1)],
        }
    }

    fn entry(&self, tag: u32) -> usize {
        (tag.saturating_sub(1) as usize) % self.stored.len()
    }

    /// Whether a packet of slot `key` is refused: its slot closed, or its ring entry holds a
    /// later slot.
    pub fn refuses(&self, key: SlotKey) -> bool {
        let (tag, cycle) = (key.tag(self.numerology), cycle_slots(self.numerology));
        let r = self.entry(tag);
        at_or_after(self.closed[r], tag, cycle)
            || (self.stored[r] != tag && at_or_after(self.stored[r], tag, cycle))
    }

    /// A packet of `key` stores PRBs: its entry holds it unless it holds a later slot.
    pub fn stored(&mut self, key: SlotKey) {
        let (tag, cycle) = (key.tag(self.numerology), cycle_slots(self.numerology));
        let r = self.entry(tag);
        if self.stored[r] == 0 || at_or_after(tag, self.stored[r], cycle) {
            self.stored[r] = tag;
        }
    }

    /// `key`'s slot closed.
    pub fn closed(&mut self, key: SlotKey) {
        let (tag, cycle) = (key.tag(self.numerology), cycle_slots(self.numerology));
        let r = self.entry(tag);
        if self.closed[r] == 0 || at_or_after(tag, self.closed[r], cycle) {
            self.closed[r] = tag;
        }
    }
}

/// The samples of one slot.
#[derive(Clone, Debug, PartialEq)]
pub enum GridData {
    Int16(Vec<i16>),
    /// IEEE half-precision bit patterns.
    Fp16(Vec<u16>),
}

/// One slot's IQ for every eAxC of the grid, with which PRBs have arrived.
#[derive(Clone, Debug)]
pub struct SlotGrid {
    pub key: SlotKey,
    eaxcs: usize,
    prbs: usize,
    beta: f32,
    data: GridData,
    filled: Vec<u64>,
    filled_count: usize,
    /// Arrival (ns) of the slot's first packet.
    pub first_ns: u64,
    /// The latest arrival (ns) of a packet stored in it.
    pub last_ns: u64,
    /// eAxC ids by grid index, at close.
    pub eaxc_ids: Vec<u16>,
    /// Whether every expected PRB arrived (set at close).
    pub complete: bool,
}

/// Calls `f(word index, mask of those cells in the word)` for cells `at..end` of a `filled`
/// bit set, a word of 64 cells at a time, until `f` returns false.
#[inline(always)]
fn each_word_mask(mut at: usize, end: usize, mut f: impl FnMut(usize, u64) -> bool) {
    while at < end {
        let (w, b) = (at / 64, at % 64);
        let k = (64 - b).min(end - at);
        if !f(w, (u64::MAX >> (64 - k)) << b) {
            return;
        }
        at += k;
    }
}

impl SlotGrid {
    pub fn new(eaxcs: usize, prbs: usize, format: GridFormat, beta: f32) -> Self {
        let cells = eaxcs * SYMBOLS_PER_SLOT as usize * prbs;
        let n = cells * PRB_SAMPLES;
        SlotGrid {
            key: SlotKey::default(),
            eaxcs,
            prbs,
            beta,
            data: match format {
                GridFormat::Int16 => GridData::Int16(vec![0; n]),
                GridFormat::Fp16 => GridData::Fp16(vec![0; n]),
            },
            filled: vec![0; cells.div_ceil(64)],
            filled_count: 0,
            first_ns: 0,
            last_ns: 0,
            eaxc_ids: Vec::new(),
            complete: false,
        }
    }

    /// A slot grid whose every cell arrived, its samples not read (zero): a GPU slot that
    /// closed complete and goes to no sink, counted without reading its ring entry back.
    pub fn all_filled(
        key: SlotKey,
        eaxcs: usize,
        prbs: usize,
        format: GridFormat,
        beta: f32,
    ) -> Self {
        let mut g = SlotGrid::new(eaxcs, prbs, format, beta);
        g.key = key;
        let cells = eaxcs * SYMBOLS_PER_SLOT as usize * prbs;
        g.filled.fill(u64::MAX);
        if let (Some(last), r @ 1..) = (g.filled.last_mut(), cells % 64) {
            *last = (1u64 << r) - 1;
        }
        g.filled_count = cells;
        g.complete = cells > 0;
        g
    }

    /// A slot grid from its parts (a GPU grid read back): `words[c * 24 ..]` are cell `c`'s
    /// samples (int16 or FP16 bits, cells in [`Self::shape`] order), `filled(c)` whether cell
    /// `c` arrived; cells that did not are zero, as in a grid filled here. `complete` is set when
    /// every cell arrived.
    pub fn restore(
        key: SlotKey,
        eaxcs: usize,
        prbs: usize,
        format: GridFormat,
        beta: f32,
        words: &[u16],
        filled: &dyn Fn(usize) -> bool,
    ) -> Self {
        let mut g = SlotGrid::new(eaxcs, prbs, format, beta);
        g.key = key;
        let cells = eaxcs * SYMBOLS_PER_SLOT as usize * prbs;
        for c in (0..cells).filter(|&c| filled(c)) {
            g.filled[c / 64] |= 1 << (c % 64);
            g.filled_count += 1;
            let (range, src) = (
                c * PRB_SAMPLES..(c + 1) * PRB_SAMPLES,
                words.get(c * PRB_SAMPLES..(c + 1) * PRB_SAMPLES),
            );
            let Some(src) = src else { continue };
            match &mut g.data {
                GridData::Int16(v) => {
                    for (o, w) in v[range].iter_mut().zip(src) {
                        *o = *w as i16;
                    }
                }
                GridData::Fp16(v) => v[range].copy_from_slice(src),
            }
        }
        g.complete = cells > 0 && g.filled_count == cells;
        g
    }

    /// Starts the grid over for slot `key`. The samples stay: a reused grid's cells are
    /// rewritten by the PRBs that arrive, and [`Self::zero_missing`] zeroes the others when
    /// the slot closes (zeroing every cell here was a memset of the whole grid per slot, 13%
    /// of the stage's instructions, for cells that are nearly all overwritten).
    fn reset(&mut self, key: SlotKey, first_ns: u64) {
        self.key = key;
        self.first_ns = first_ns;
        self.last_ns = first_ns;
        self.filled.fill(0);
        self.filled_count = 0;
        self.complete = false;
    }

    /// Zeroes the samples of every cell that has not arrived (a grid handed on holds zero
    /// there, as a new grid does). One look per 64 cells when all arrived.
    fn zero_missing(&mut self) {
        let cells = self.eaxcs * SYMBOLS_PER_SLOT as usize * self.prbs;
        for (w, &bits) in self.filled.iter().enumerate() {
            let mut missing = !bits;
            while missing != 0 {
                let c = w * 64 + missing.trailing_zeros() as usize;
                missing &= missing - 1;
                if c >= cells {
                    break;
                }
                let range = c * PRB_SAMPLES..(c + 1) * PRB_SAMPLES;
                match &mut self.data {
                    GridData::Int16(v) => v[range].fill(0),
                    GridData::Fp16(v) => v[range].fill(0),
                }
            }
        }
    }

    /// Grid dimensions: eAxCs, symbols, PRBs (each PRB 12 REs x I/Q).
    pub fn shape(&self) -> [usize; 3] {
        [self.eaxcs, SYMBOLS_PER_SLOT as usize, self.prbs]
    }

    pub fn data(&self) -> &GridData {
        &self.data
    }

    /// The eAxC rows in use: one per id of `eaxc_ids` (a learnt grid has room for
    /// `max_eaxcs` and takes them in order of arrival), or every row when no ids are set.
    pub fn rows(&self) -> usize {
        if self.eaxc_ids.is_empty() {
            self.eaxcs
        } else {
            self.eaxc_ids.len().min(self.eaxcs)
        }
    }

    /// The samples of the rows in use ([`Self::rows`]), as little-endian bytes: what the file
    /// sinks write, shape (rows, 14, PRBs, 12, 2).
    pub fn rows_bytes(&self) -> Vec<u8> {
        let n = self.rows() * SYMBOLS_PER_SLOT as usize * self.prbs * PRB_SAMPLES;
        match &self.data {
            GridData::Int16(v) => v[..n].iter().flat_map(|x| x.to_le_bytes()).collect(),
            GridData::Fp16(v) => v[..n].iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    fn cell(&self, eaxc: usize, symbol: u8, prb: u16) -> Option<usize> {
        (eaxc < self.eaxcs && symbol < SYMBOLS_PER_SLOT && usize::from(prb) < self.prbs).then(
            || {
                (eaxc * SYMBOLS_PER_SLOT as usize + usize::from(symbol)) * self.prbs
                    + usize::from(prb)
            },
        )
    }

    /// Takes cell (eaxc, symbol, prb) from this slot: a later slot of its ring entry stored
    /// there (on the GPU that cell's mark now holds the later slot's tag, so this slot's copy
    /// reads it as missing). Returns whether it was filled.
    pub fn unfill(&mut self, eaxc: usize, symbol: u8, prb: u16) -> bool {
        let Some(c) = self.cell(eaxc, symbol, prb) else {
            return false;
        };
        let bit = 1u64 << (c % 64);
        let was = self.filled[c / 64] & bit != 0;
        if was {
            self.filled[c / 64] &= !bit;
            self.filled_count -= 1;
        }
        was
    }

    pub fn is_filled(&self, eaxc: usize, symbol: u8, prb: u16) -> bool {
        self.cell(eaxc, symbol, prb)
            .is_some_and(|c| self.filled[c / 64] >> (c % 64) & 1 != 0)
    }

    /// PRBs received so far.
    pub fn filled_count(&self) -> usize {
        self.filled_count
    }

    /// PRBs of eAxC index `e` received.
    pub fn filled_for(&self, e: usize) -> usize {
        let per = SYMBOLS_PER_SLOT as usize * self.prbs;
        // A word of 64 cells at a time (the stage counts every eAxC of every closed slot).
        let mut n = 0;
        each_word_mask(e * per, (e + 1) * per, |w, mask| {
            n += self
                .filled
                .get(w)
                .map_or(0, |x| (x & mask).count_ones() as usize);
            true
        });
        n
    }

    /// The 24 int16 samples of a PRB (int16 grids).
    pub fn prb_i16(&self, eaxc: usize, symbol: u8, prb: u16) -> Option<&[i16]> {
        let c = self.cell(eaxc, symbol, prb)?;
        match &self.data {
            GridData::Int16(v) => v.get(c * PRB_SAMPLES..(c + 1) * PRB_SAMPLES),
            GridData::Fp16(_) => None,
        }
    }

    /// The 24 FP16 samples of a PRB as f32 (FP16 grids).
    pub fn prb_f32(&self, eaxc: usize, symbol: u8, prb: u16) -> Option<[f32; PRB_SAMPLES]> {
        let c = self.cell(eaxc, symbol, prb)?;
        match &self.data {
            GridData::Fp16(v) => {
                let mut o = [0f32; PRB_SAMPLES];
                for (x, b) in o
                    .iter_mut()
                    .zip(v.get(c * PRB_SAMPLES..(c + 1) * PRB_SAMPLES)?)
                {
                    *x = half::f16::from_bits(*b).to_f32();
                }
                Some(o)
            }
            GridData::Int16(_) => None,
        }
    }

    /// The int16 cells of PRBs `first..first + n` of (`eaxc`, `symbol`) (consecutive in the
    /// grid, 24 samples each) and the first one's cell number, to decode a section's PRBs
    /// straight into; `None` when the grid is not int16 or the run leaves it. Mark what was
    /// stored with [`Self::mark_run`].
    #[inline]
    pub fn run_i16(
        &mut self,
        eaxc: usize,
        symbol: u8,
        first: u16,
        n: u16,
    ) -> Option<(usize, &mut [i16])> {
        let c = self.cell(eaxc, symbol, first)?;
        let last = first.checked_add(n.checked_sub(1)?)?;
        self.cell(eaxc, symbol, last)?;
        let GridData::Int16(v) = &mut self.data else {
            return None;
        };
        let cells = v.get_mut(c * PRB_SAMPLES..(c + usize::from(n)) * PRB_SAMPLES)?;
        Some((c, cells))
    }

    /// Marks cells `c..c + n` arrived (a run [`Self::run_i16`] gave); returns how many of them
    /// had already arrived (duplicates). A word of 64 cells at a time.
    #[inline]
    pub fn mark_run(&mut self, c: usize, n: usize) -> u32 {
        let mut dups = 0;
        let filled = &mut self.filled;
        each_word_mask(c, c + n, |w, mask| {
            let Some(word) = filled.get_mut(w) else {
                return false;
            };
            dups += (*word & mask).count_ones();
            *word |= mask;
            true
        });
        self.filled_count += n - dups as usize;
        dups
    }

    /// Stores a PRB that `decode` writes straight into its int16 cell (returning true). Returns
    /// whether the PRB was already there; `None`, with nothing marked, when the grid is not
    /// int16, the position is outside it or `decode` returned false (the caller then stores
    /// the PRB with [`Self::store`], which saturates).
    #[inline]
    pub fn store_direct(
        &mut self,
        eaxc: usize,
        symbol: u8,
        prb: u16,
        decode: impl FnOnce(&mut [i16; PRB_SAMPLES]) -> bool,
    ) -> Option<bool> {
        let c = self.cell(eaxc, symbol, prb)?;
        let GridData::Int16(v) = &mut self.data else {
            return None;
        };
        let o = <&mut [i16; PRB_SAMPLES]>::try_from(&mut v[c * PRB_SAMPLES..(c + 1) * PRB_SAMPLES])
            .ok()?;
        if !decode(o) {
            return None;
        }
        let bit = 1u64 << (c % 64);
        let dup = self.filled[c / 64] & bit != 0;
        if !dup {
            self.filled[c / 64] |= bit;
            self.filled_count += 1;
        }
        Some(dup)
    }

    /// Stores a PRB. Returns (was it already there, samples saturated to 16 bits); `None` when
    /// the position is outside the grid.
    #[inline]
    pub fn store(
        &mut self,
        eaxc: usize,
        symbol: u8,
        prb: u16,
        iq: &[i32; PRB_SAMPLES],
    ) -> Option<(bool, u32)> {
        let c = self.cell(eaxc, symbol, prb)?;
        let bit = 1u64 << (c % 64);
        let dup = self.filled[c / 64] & bit != 0;
        if !dup {
            self.filled[c / 64] |= bit;
            self.filled_count += 1;
        }
        let mut sat = 0;
        let range = c * PRB_SAMPLES..(c + 1) * PRB_SAMPLES;
        match &mut self.data {
            GridData::Int16(v) => {
                // A cell is exactly PRB_SAMPLES long (`cell` checked the position).
                if let Ok(o) = <&mut [i16; PRB_SAMPLES]>::try_from(&mut v[range]) {
                    sat = saturate_i16(iq, o);
                }
            }
            GridData::Fp16(v) => {
                for (o, &x) in v[range].iter_mut().zip(iq) {
                    // The 16-bit sample first (as int16 grids), then the scale.
                    let s = x.clamp(i32::from(i16::MIN), i32::from(i16::MAX));
                    sat += u32::from(s != x);
                    *o = half::f16::from_f32(s as f32 * self.beta).to_bits();
                }
            }
        }
        Some((dup, sat))
    }
}

/// `iq` saturated to 16 bits into `out`; returns the samples that did not fit. Samples nearly
/// always fit (the exponent of real BFP data keeps them within 16 bits), so one OR over every
/// sample's magnitude bits decides for the PRB and the fitting PRB is a plain narrowing copy:
/// both vectorise on baseline x86-64 (SSE2), where a per-sample clamp and count stayed scalar
/// (SSE2 has no 32-bit min / max), 28% of the whole stage's instructions.
#[inline]
fn saturate_i16(iq: &[i32; PRB_SAMPLES], out: &mut [i16; PRB_SAMPLES]) -> u32 {
    // x ^ (x >> 31) is x for x >= 0 and -x - 1 below: under 2^15 exactly when x fits i16.
    let bits = iq.iter().fold(0i32, |a, &x| a | (x ^ (x >> 31)));
    if bits < 0x8000 {
        for (o, &x) in out.iter_mut().zip(iq) {
            *o = x as i16;
        }
        return 0;
    }
    let mut sat = 0u32;
    for (o, &x) in out.iter_mut().zip(iq) {
        let s = x.clamp(i32::from(i16::MIN), i32::from(i16::MAX));
        sat += u32::from(s != x);
        *o = s as i16;
    }
    sat
}

/// What closing a slot reports.
pub struct Closed<'a> {
    pub grid: &'a SlotGrid,
    pub complete: bool,
}

/// Open slots, oldest first, and spare grids to reuse.
pub struct Assembler {
    open: Vec<SlotGrid>,
    spare: Vec<SlotGrid>,
    max_open: usize,
    eaxcs: usize,
    prbs: usize,
    format: GridFormat,
    beta: f32,
    timeout_ns: u64,
}

impl Assembler {
    pub fn new(
        eaxcs: usize,
        prbs: usize,
        format: GridFormat,
        beta: f32,
        max_open: usize,
        timeout_ns: u64,
    ) -> Self {
        Assembler {
            open: Vec::new(),
            spare: Vec::new(),
            max_open: max_open.max(1),
            eaxcs,
            prbs,
            format,
            beta,
            timeout_ns,
        }
    }

    pub fn open_slots(&self) -> usize {
        self.open.len()
    }

    /// The open slots other than `key` that `pick` selects.
    pub fn others_mut(
        &mut self,
        key: SlotKey,
        pick: impl Fn(SlotKey) -> bool,
    ) -> impl Iterator<Item = &mut SlotGrid> {
        self.open
            .iter_mut()
            .filter(move |g| g.key != key && pick(g.key))
    }

    /// The grid's eAxC ids changed (one was learnt): every open slot takes them.
    pub fn set_eaxc_ids(&mut self, ids: &[u16]) {
        for g in &mut self.open {
            g.eaxc_ids.clear();
            g.eaxc_ids.extend_from_slice(ids);
        }
    }

    /// The slot timeout's clock: the latest arrival of a packet stored in an open slot (0:
    /// none). A slot that closed no longer counts, so one far-off timestamp closes its own
    /// slot and not every slot after it.
    pub fn latest_ns(&self) -> u64 {
        self.open.iter().map(|g| g.last_ns).max().unwrap_or(0)
    }

    /// Closes the open slots that timed out at `now_ns` (with `expected_eaxcs` eAxCs in use).
    pub fn expire(&mut self, now_ns: u64, expected_eaxcs: usize, on_close: &mut dyn FnMut(Closed)) {
        while let Some(i) = self
            .open
            .iter()
            .position(|g| now_ns.saturating_sub(g.first_ns) > self.timeout_ns)
        {
            self.close(i, expected_eaxcs, on_close);
        }
    }

    /// The grid of `key`, opened when new (then more than `max_open` may be open until
    /// [`Self::evict`]: the packet that opens a slot is stored before the oldest closes, as
    /// the GPU's kernel stores it before the host's poll sees the new slot).
    pub fn slot(&mut self, key: SlotKey, now_ns: u64) -> &mut SlotGrid {
        let i = match self.open.iter().position(|g| g.key == key) {
            Some(i) => {
                let g = &mut self.open[i];
                g.last_ns = g.last_ns.max(now_ns);
                i
            }
            None => {
                let mut g = self.spare.pop().unwrap_or_else(|| {
                    SlotGrid::new(self.eaxcs, self.prbs, self.format, self.beta)
                });
                g.reset(key, now_ns);
                self.open.push(g);
                self.open.len() - 1
            }
        };
        &mut self.open[i]
    }

    /// Closes `key`'s slot if every expected PRB is there; returns whether it did.
    pub fn close_if_complete(
        &mut self,
        key: SlotKey,
        expected_eaxcs: usize,
        on_close: &mut dyn FnMut(Closed),
    ) -> bool {
        let want = expected_eaxcs * SYMBOLS_PER_SLOT as usize * self.prbs;
        match self.open.iter().position(|g| g.key == key) {
            Some(i) if want > 0 && self.open[i].filled_count >= want => {
                self.close(i, expected_eaxcs, on_close);
                true
            }
            _ => false,
        }
    }

    /// Closes the oldest open slots while more than `max_open` are open (eviction).
    pub fn evict(&mut self, expected_eaxcs: usize, on_close: &mut dyn FnMut(Closed)) {
        while self.open.len() > self.max_open {
            self.close(0, expected_eaxcs, on_close);
        }
    }

    /// Closes every open slot (end of input).
    pub fn flush(&mut self, expected_eaxcs: usize, on_close: &mut dyn FnMut(Closed)) {
        while !self.open.is_empty() {
            self.close(0, expected_eaxcs, on_close);
        }
    }

    fn close(&mut self, i: usize, expected_eaxcs: usize, on_close: &mut dyn FnMut(Closed)) {
        let mut g = self.open.remove(i);
        g.zero_missing();
        let want = expected_eaxcs * SYMBOLS_PER_SLOT as usize * self.prbs;
        g.complete = want > 0 && g.filled_count >= want;
        on_close(Closed {
            complete: g.complete,
            grid: &g,
        });
        self.spare.push(g);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_filled_is_a_restored_grid_with_every_cell_arrived() {
        // 2 x 14 x 3 = 84 cells: the last filled word is partial.
        let key = SlotKey::default();
        let a = SlotGrid::all_filled(key, 2, 3, GridFormat::Int16, 1.0);
        let b = SlotGrid::restore(key, 2, 3, GridFormat::Int16, 1.0, &[], &|_| true);
        assert_eq!(
            (a.filled.clone(), a.filled_count, a.complete),
            (b.filled.clone(), b.filled_count, b.complete)
        );
        assert!(a.complete);
        assert_eq!(a.data, b.data);
    }

    #[test]
    fn store_saturates_and_counts_duplicates() {
        let mut g = SlotGrid::new(2, 3, GridFormat::Int16, 1.0);
        let mut iq = [0i32; 24];
        iq[0] = 40000;
        iq[1] = -5;
        assert_eq!(g.store(1, 13, 2, &iq), Some((false, 1)));
        assert_eq!(g.store(1, 13, 2, &iq), Some((true, 1)));
        assert_eq!(g.store(2, 0, 0, &iq), None);
        assert_eq!(g.store(0, 14, 0, &iq), None);
        assert_eq!(g.store(0, 0, 3, &iq), None);
        assert_eq!(g.prb_i16(1, 13, 2).map(|p| (p[0], p[1])), Some((32767, -5)));
        assert!(g.is_filled(1, 13, 2) && !g.is_filled(0, 13, 2));
        assert_eq!(
            (g.filled_count(), g.filled_for(1), g.filled_for(0)),
            (1, 1, 0)
        );
        let mut f = SlotGrid::new(1, 1, GridFormat::Fp16, 0.5);
        f.store(0, 0, 0, &iq);
        let p = f.prb_f32(0, 0, 0).unwrap();
        assert_eq!((p[0], p[1]), (16384.0, -2.5));
    }

    #[test]
    fn slots_complete_time_out_and_evict() {
        let mut a = Assembler::new(1, 2, GridFormat::Int16, 1.0, 2, 1000);
        let mut closed = vec![];
        let mut rec = |c: Closed| closed.push((c.grid.key.slot_id, c.complete));
        let k = |s| SlotKey {
            frame_id: 0,
            subframe_id: 0,
            slot_id: s,
        };
        for sym in 0..14 {
            for prb in 0..2 {
                a.slot(k(0), 0).store(0, sym, prb, &[1; 24]);
            }
        }
        assert!(a.close_if_complete(k(0), 1, &mut rec));
        a.slot(k(1), 10).store(0, 0, 0, &[1; 24]);
        a.evict(1, &mut rec);
        a.slot(k(2), 20);
        a.evict(1, &mut rec);
        a.slot(k(3), 30);
        a.evict(1, &mut rec); // evicts slot 1 (two open at most)
        a.expire(1025, 1, &mut rec); // slot 2 timed out; slot 3 not yet
        assert_eq!(a.open_slots(), 1);
        a.flush(1, &mut rec);
        assert_eq!(closed, [(0, true), (1, false), (2, false), (3, false)]);
        // A reused grid starts empty, and what did not arrive is zero when it is handed on
        // (its cells held slot 3's, then slot 0's samples).
        let g = a.slot(k(4), 40);
        assert_eq!(g.filled_count(), 0);
        g.store(0, 13, 1, &[5; 24]);
        let mut got = vec![];
        a.flush(1, &mut |c: Closed| {
            got.push((
                c.grid.prb_i16(0, 0, 0).map(|p| p.to_vec()),
                c.grid.prb_i16(0, 13, 1).map(|p| p[0]),
            ))
        });
        assert_eq!(got, [(Some(vec![0i16; 24]), Some(5))]);
    }

    #[test]
    fn runs_mark_as_cells_do() {
        // 2 eAxCs x 14 x 100 PRBs: runs crossing 64-cell words, duplicates, the last cell.
        let mut g = SlotGrid::new(2, 100, GridFormat::Int16, 1.0);
        let mut h = g.clone();
        for &(e, sym, first, n) in &[
            (0usize, 0u8, 0u16, 100u16),
            (0, 0, 50, 30),
            (1, 13, 37, 63),
            (0, 5, 60, 10),
            (0, 5, 63, 2),
            (1, 0, 99, 1),
        ] {
            let (c, cells) = g.run_i16(e, sym, first, n).unwrap();
            assert_eq!(cells.len(), usize::from(n) * PRB_SAMPLES);
            for (k, cell) in cells.chunks_exact_mut(PRB_SAMPLES).enumerate() {
                cell.fill(first as i16 + k as i16);
            }
            let dups = g.mark_run(c, usize::from(n));
            let mut want = 0;
            for k in 0..n {
                let iq = [i32::from(first + k); PRB_SAMPLES];
                want += u32::from(h.store(e, sym, first + k, &iq).unwrap().0);
            }
            assert_eq!(dups, want, "run {e} {sym} {first} {n}");
            assert_eq!(g.filled_count(), h.filled_count());
            assert_eq!(g.data(), h.data());
            assert_eq!(
                (g.filled_for(0), g.filled_for(1)),
                (h.filled_for(0), h.filled_for(1))
            );
        }
        assert_eq!(g.filled, h.filled);
        assert!(g.run_i16(0, 0, 90, 11).is_none(), "past the carrier");
        assert!(g.run_i16(2, 0, 0, 1).is_none() && g.run_i16(0, 14, 0, 1).is_none());
        assert!(g.run_i16(0, 0, 0, 0).is_none());
        let mut f = SlotGrid::new(1, 4, GridFormat::Fp16, 1.0);
        assert!(
            f.run_i16(0, 0, 0, 4).is_none(),
            "FP16 grids take the saturating store"
        );
    }
}
