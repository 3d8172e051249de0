//! Slots of the GPU fronthaul stage completing during a run, as on the CPU executor.
//!
//! The kernel keeps, per ring entry of its slot grid, the entry's slot tag and the PRBs stored
//! with it (`pw_fh_slot_state`). The host looks at those words every poll ([`Completer::poll`]):
//! a tag it has not seen opens a slot; a slot whose count reached every expected PRB (every
//! PRB of every eAxC of the grid, summed over the GPUs) closes complete; while more than
//! `max_open_slots` are open the oldest closes (partial); a slot whose first frame was received
//! more than `slot_timeout_us` before the latest frame stored in an open slot (receive times,
//! the frames' `timestamp_ns`, as on the CPU) closes partial. A closed slot
//! is read back (that ring entry's cells and marks, merged over the GPUs) and handed on, in
//! closing order, each once. A ring entry is taken by a later slot only `2 x max_open_slots`
//! slots on, so a slot closes long before its entry is reused when the poll keeps up; and it
//! keeps up however fast the input: the executor hands the GPU at most
//! [`Completer::frames_per_poll`] frames beyond what a completed poll covered
//! (`GpuHostSide::frames_per_poll`, `pipeline::stage::gpu_host::PollGate`).
//!
//! Closing a slot first writes its tag into the entry's closed word on every GPU
//! ([`GridSource::mark_closed`]), then reads the entry back: the kernel refuses the slot's later
//! packets (counted `slot_closed` per eAxC, as the CPU's assembler does), so the slot handed to
//! the sink is the one that stays in the ring. The one window: a frame that read the closed
//! word before the host's write landed and stores after the read-back; its PRBs are then in
//! the ring entry (and its count) but neither delivered nor counted `slot_closed`. The write
//! is a memset on the stream the read-back copies on, so it lands before the read-back starts,
//! and that frame must have been running on the GPU across the write (microseconds). A slot
//! closed complete with no sink has no read-back: there the write is not waited for at all.
//!
//! The rule is the CPU assembler's (docs/fronthaul.md, "When a slot opens and closes"), taken
//! at each poll rather than at each packet: polled after every frame it decides as the CPU
//! does (fronthaul/tests/fronthaul_slot_rule.rs holds the two equal, with frames delivered far
//! slower than their radio time too: host time decides only how often the poll looks); a poll
//! that lags sees several frames at once, and the frames of a slot the kernel stored before the
//! host's closed word landed are delivered with it rather than refused.
//!
//! Completion latency: from when the host handed the GPU the burst holding the slot's last
//! packet (the [`HandedLog`] entry whose receive times hold the entry's latest receive time)
//! to when the host handed the slot to the sink.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::config::FronthaulConfig;
use super::decode::SYMBOLS_PER_SLOT;
use super::gpu::{entry_bytes, entry_state, merge, slot_of_entry, Layout};
use super::grid::SlotGrid;
pub use pipeline::stage::HandedLog;
use pipeline::stage::{GpuHostSide, StageGpuMemory};

/// One GPU's copy of a fronthaul stage's ring.
pub trait GridSource {
    /// The slot state buffer (`pw_fh_slot_state[ring]`).
    fn slot_states(&self) -> anyhow::Result<Vec<u8>>;
    /// Ring entry `r`'s grid bytes (empty unless `samples`) and its cells' marks.
    fn entry(&self, r: usize, samples: bool) -> anyhow::Result<(Vec<u8>, Vec<u8>)>;
    /// Tells the kernel that slot `tag` of ring entry `r` closed (`fronthaul.closed[r]`): its
    /// later packets are refused.
    fn mark_closed(&self, r: usize, tag: u32) -> anyhow::Result<()>;
}

/// A slot closed by the completion poll.
pub struct Closed {
    pub grid: SlotGrid,
    /// The latest receive time of the frames that stored PRBs in it (0: none had one).
    pub last_ns: u64,
}

#[derive(Clone, Copy, Debug)]
struct Open {
    tag: u32,
    /// The slot's first receive time: its entry's latest receive time when the poll first saw
    /// it (the kernel restarts that word when a slot takes the entry), 0 when untimed.
    first_ns: u64,
}

/// The completion state of one fronthaul stage (all its GPUs).
#[derive(Debug)]
pub struct Completer {
    l: Layout,
    expected: u64,
    max_open: usize,
    timeout_ns: u64,
    /// Slots in the order they opened.
    open: VecDeque<Open>,
    /// Per ring entry: the tag of the last slot closed from it (0: none).
    closed: Vec<u32>,
    /// The tag that opened last (new tags are taken in frame-cycle order after it).
    last: u32,
    /// Per GPU and ring entry, the tag the poll last saw there, and how many tags it has seen
    /// take an entry (the kernel counts those it stored: the difference were never seen).
    seen: Vec<Vec<u32>>,
    observed: u64,
    /// Whether a closed slot's samples are read back (a stage without a sink needs only its
    /// marks, for the complete / partial counts per eAxC).
    pub samples: bool,
}

impl Completer {
    pub fn new(cfg: &FronthaulConfig) -> Result<Completer, String> {
        let l = Layout::new(cfg)?;
        Ok(Completer {
            expected: (l.eaxcs.len() * SYMBOLS_PER_SLOT as usize * l.prbs) as u64,
            max_open: usize::from(cfg.max_open_slots).max(1),
            timeout_ns: cfg.slot_timeout_us.saturating_mul(1000),
            open: VecDeque::new(),
            closed: vec![0; l.ring],
            last: 0,
            seen: Vec::new(),
            observed: 0,
            samples: true,
            l,
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.l
    }

    /// Frames the GPU may take between two polls so that none of them overwrites a ring entry
    /// the poll has not closed: a ring entry is taken again `2 x max_open_slots` slots on and
    /// at most `max_open_slots` are open after a poll, so `max_open_slots` new slots may
    /// arrive before the next, and a whole slot is at least a frame per symbol of each grid
    /// eAxC. (A feed of partial slots, fewer frames each, can still outrun it: slots it
    /// overwrote before the poll saw them are counted lost, which fails the run.)
    pub fn frames_per_poll(&self) -> u64 {
        (self.max_open as u64 * u64::from(SYMBOLS_PER_SLOT) * self.l.eaxcs.len() as u64).max(1)
    }

    /// Slots open now.
    pub fn open_slots(&self) -> usize {
        self.open.len()
    }

    fn cycle(&self) -> u32 {
        2560 << self.l.numerology.min(6)
    }

    fn entry_of(&self, tag: u32) -> usize {
        (tag.saturating_sub(1) as usize) % self.l.ring.max(1)
    }

    /// (PRBs, latest receive time) of `tag` summed over the GPUs' states.
    fn count(&self, states: &[Vec<u8>], tag: u32) -> (u64, u64) {
        let r = self.entry_of(tag);
        states.iter().fold((0, 0), |(n, last), st| {
            let (t, prbs, l) = entry_state(st, r);
            if t == tag {
                (n + u64::from(prbs), last.max(l))
            } else {
                (n, last)
            }
        })
    }

    /// One look at the GPUs' rings (`srcs`, one per GPU): new slots opened, complete ones
    /// closed, the oldest closed while more than `max_open_slots` are open, the timed out ones
    /// closed (on the frames' receive times: docs/fronthaul.md, "When a slot opens and
    /// closes"); each closed slot is read back and handed to `close`, in closing order.
    /// Returns how many closed.
    pub fn poll(
        &mut self,
        srcs: &[&dyn GridSource],
        close: &mut dyn FnMut(Closed),
    ) -> anyhow::Result<usize> {
        let states = srcs
            .iter()
            .map(|s| s.slot_states())
            .collect::<anyhow::Result<Vec<_>>>()?;
        self.observe(&states);
        self.open_new(&states);
        let mut n = 0;
        let mut i = 0;
        while i < self.open.len() {
            if self.count(&states, self.open[i].tag).0 >= self.expected {
                let o = self.open.remove(i).expect("index in range");
                self.close(srcs, &states, o, true, close)?;
                n += 1;
            } else {
                i += 1;
            }
        }
        while self.open.len() > self.max_open {
            let o = self.open.pop_front().expect("more than max_open");
            self.close(srcs, &states, o, false, close)?;
            n += 1;
        }
        // The clock: the latest receive time stored in an open slot (as the CPU's assembler).
        let now = (self.open.iter())
            .map(|o| self.count(&states, o.tag).1)
            .max()
            .unwrap_or(0);
        let timeout = self.timeout_ns;
        while let Some(i) = self
            .open
            .iter()
            .position(|o| now > 0 && now.saturating_sub(o.first_ns) > timeout)
        {
            let o = self.open.remove(i).expect("index in range");
            self.close(srcs, &states, o, false, close)?;
            n += 1;
        }
        Ok(n)
    }

    /// The end of a run (drained): one last look, then every slot still open closed, oldest
    /// first. Returns how many closed.
    pub fn finish(
        &mut self,
        srcs: &[&dyn GridSource],
        close: &mut dyn FnMut(Closed),
    ) -> anyhow::Result<usize> {
        let mut n = self.poll(srcs, close)?;
        let states = srcs
            .iter()
            .map(|s| s.slot_states())
            .collect::<anyhow::Result<Vec<_>>>()?;
        while let Some(o) = self.open.pop_front() {
            self.close(srcs, &states, o, false, close)?;
            n += 1;
        }
        Ok(n)
    }

    /// Slots the poll has seen take a ring entry, over every GPU.
    pub fn observed(&self) -> u64 {
        self.observed
    }

    fn observe(&mut self, states: &[Vec<u8>]) {
        self.seen.resize(states.len(), vec![0; self.l.ring]);
        for (seen, st) in self.seen.iter_mut().zip(states) {
            for (r, s) in seen.iter_mut().enumerate() {
                let tag = entry_state(st, r).0;
                if tag != 0 && tag != *s {
                    *s = tag;
                    self.observed += 1;
                }
            }
        }
    }

    /// Opens the tags of the states that are neither open nor closed, in frame-cycle order
    /// after the newest open one.
    fn open_new(&mut self, states: &[Vec<u8>]) {
        let mut fresh: Vec<u32> = Vec::new();
        for r in 0..self.l.ring {
            for st in states {
                let (tag, _, _) = entry_state(st, r);
                if tag != 0
                    && !crate::grid::at_or_after(self.closed[r], tag, self.cycle())
                    && !fresh.contains(&tag)
                    && !self.open.iter().any(|o| o.tag == tag)
                {
                    fresh.push(tag);
                }
            }
        }
        let (cycle, last) = (self.cycle(), self.last);
        fresh.sort_by_key(|&t| (t % cycle + cycle - last % cycle) % cycle);
        for tag in fresh {
            let first_ns = self.count(states, tag).1;
            self.open.push_back(Open { tag, first_ns });
            self.last = tag;
        }
    }

    fn close(
        &mut self,
        srcs: &[&dyn GridSource],
        states: &[Vec<u8>],
        o: Open,
        complete: bool,
        close: &mut dyn FnMut(Closed),
    ) -> anyhow::Result<()> {
        let r = self.entry_of(o.tag);
        let cycle = self.cycle();
        let newest =
            if self.closed[r] == 0 || crate::grid::at_or_after(o.tag, self.closed[r], cycle) {
                o.tag
            } else {
                self.closed[r]
            };
        // Before the read-back: a packet the kernel takes after this is refused, so what is
        // read is what stays.
        for s in srcs {
            s.mark_closed(r, newest)?;
        }
        let mut grid: Option<SlotGrid> = None;
        // Complete on one GPU and no samples wanted: its count says every cell is the slot's,
        // so the marks need no read-back (a poll that reads less keeps up with a faster feed).
        let known = complete && !self.samples && srcs.len() == 1;
        if known {
            grid = Some(super::gpu::complete_slot(&self.l, o.tag));
        }
        // Every GPU whose entry holds a tag: cells still marked with this slot's tag are its,
        // even where the entry has moved on to a later slot.
        for (s, st) in srcs.iter().zip(states) {
            if known || entry_state(st, r).0 == 0 {
                continue;
            }
            let (g, m) = s.entry(r, self.samples)?;
            let got = slot_of_entry(&self.l, o.tag, &g, &m);
            grid = Some(match grid {
                Some(a) => merge(&self.l, &a, &got),
                None => got,
            });
        }
        let grid = grid.unwrap_or_else(|| slot_of_entry(&self.l, o.tag, &[], &[]));
        self.closed[r] = newest;
        let (_, last_ns) = self.count(states, o.tag);
        close(Closed { grid, last_ns });
        Ok(())
    }
}

/// A [`GridSource`] over one GPU executor's buffers of the stage at pipeline position `k`.
/// One GPU's copy of a fronthaul stage's buffers, through the executor's stage memory.
pub struct ExecutorSource<'a> {
    pub mem: &'a dyn StageGpuMemory,
    pub gpu: usize,
    pub k: usize,
    pub layout: &'a Layout,
}

impl GridSource for ExecutorSource<'_> {
    fn slot_states(&self) -> anyhow::Result<Vec<u8>> {
        let n = self.layout.buffers()[super::gpu::BUF_SLOT_STATE].1;
        self.mem
            .read_buffer_range(self.gpu, self.k, super::gpu::BUF_SLOT_STATE, 0, n)
    }

    fn entry(&self, r: usize, samples: bool) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
        let (gb, mb) = entry_bytes(self.layout);
        let g = if samples {
            self.mem
                .read_buffer_range(self.gpu, self.k, super::gpu::BUF_GRID, r * gb, gb)?
        } else {
            Vec::new()
        };
        let m = self
            .mem
            .read_buffer_range(self.gpu, self.k, super::gpu::BUF_MARKS, r * mb, mb)?;
        Ok((g, m))
    }

    fn mark_closed(&self, r: usize, tag: u32) -> anyhow::Result<()> {
        self.mem
            .set_buffer_word(self.gpu, self.k, super::gpu::BUF_CLOSED, r * 4, tag)
    }
}

impl super::seqlog::LogSource for ExecutorSource<'_> {
    fn seq_head(&self) -> anyhow::Result<u64> {
        let b = self
            .mem
            .read_buffer_range(self.gpu, self.k, super::gpu::BUF_SEQ, 0, 8)?;
        let w: [u8; 8] = b
            .get(..8)
            .and_then(|w| w.try_into().ok())
            .ok_or_else(|| anyhow::anyhow!("fronthaul.seq: short read of the log head"))?;
        Ok(u64::from_le_bytes(w))
    }

    fn seq_entries(&self, at: usize, n: usize) -> anyhow::Result<Vec<u8>> {
        use super::seqlog::{ENTRY_BYTES, HEAD_BYTES};
        self.mem.read_buffer_range(
            self.gpu,
            self.k,
            super::gpu::BUF_SEQ,
            HEAD_BYTES + at * ENTRY_BYTES,
            n * ENTRY_BYTES,
        )
    }

    fn ring_slots(&self) -> u32 {
        self.mem.ring_slots()
    }
}

pub const COUNTERS_EVERY: Duration = Duration::from_millis(100);

/// The completion poll of every fronthaul stage of a pipeline on the GPU executor, with the
/// log of handed bursts its latency reads.
pub struct LiveStages {
    /// (pipeline position, its completion state, its sequence judge)
    stages: Vec<(usize, Completer, super::seqlog::SeqJudge)>,
    pub handed: std::sync::Arc<HandedLog>,
    /// When the GPU counters were last read into the stages.
    counters_at: Option<Instant>,
    /// Where the completion poll's time went (logged at the end of the run).
    pub stats: PollStats,
}

/// The completion poll's own time, per part of a poll: what bounds how soon after its last
/// PRB a slot reaches the sink (besides the kernel and the poll interval).
#[derive(Clone, Copy, Debug, Default)]
pub struct PollStats {
    pub polls: u64,
    /// Reading and judging the sequence logs.
    pub seq: PartTime,
    /// Reading the slot states and closing slots (read-back included).
    pub slots: PartTime,
    /// Reading the GPU counters into the stages.
    pub counters: PartTime,
    /// Between the starts of two polls (the poll itself and its sleep).
    pub gap: PartTime,
    last_start: Option<Instant>,
}

/// Total and longest time of one part of the completion poll.
#[derive(Clone, Copy, Debug, Default)]
pub struct PartTime {
    pub total: Duration,
    pub max: Duration,
}

impl PartTime {
    fn add(&mut self, d: Duration) {
        self.total += d;
        self.max = self.max.max(d);
    }

    fn describe(&self, polls: u64) -> String {
        let mean = self.total.as_secs_f64() * 1e6 / polls.max(1) as f64;
        format!(
            "mean {mean:.1} us, max {:.1} us",
            self.max.as_secs_f64() * 1e6
        )
    }
}

impl PollStats {
    /// One line for the end-of-run log.
    pub fn describe(&self) -> String {
        format!(
            "{} polls; between poll starts {}; sequence log {}; slot states and closing {}; counters {}",
            self.polls,
            self.gap.describe(self.polls.saturating_sub(1)),
            self.seq.describe(self.polls),
            self.slots.describe(self.polls),
            self.counters.describe(self.polls),
        )
    }
}

impl LiveStages {
    /// One completion state per fronthaul stage of `p` (none: nothing to poll).
    pub fn new(p: &pipeline::stage::Pipeline) -> anyhow::Result<LiveStages> {
        Self::with_handed(p, std::sync::Arc::default())
    }

    /// The pipeline's fronthaul stages, learning when bursts went to the GPU from `handed`
    /// (the log the GPU executor records into).
    pub fn with_handed(
        p: &pipeline::stage::Pipeline,
        handed: std::sync::Arc<HandedLog>,
    ) -> anyhow::Result<LiveStages> {
        let mut stages = Vec::new();
        for (k, st) in p.stages.iter().enumerate() {
            if let Some(f) = super::FronthaulStage::of(st) {
                let mut c = Completer::new(f.config()).map_err(|e| anyhow::anyhow!(e))?;
                c.samples = f.has_sink();
                let j = super::seqlog::SeqJudge::new(c.layout().eaxcs.len());
                stages.push((k, c, j));
            }
        }
        Ok(LiveStages {
            stages,
            handed,
            counters_at: None,
            stats: PollStats::default(),
        })
    }

    /// The completion poll of the one fronthaul stage `f` at pipeline position `k` (its host
    /// side on the GPU executor).
    pub fn of_stage(
        k: usize,
        f: &super::FronthaulStage,
        handed: std::sync::Arc<HandedLog>,
    ) -> anyhow::Result<LiveStages> {
        let mut c = Completer::new(f.config()).map_err(|e| anyhow::anyhow!(e))?;
        c.samples = f.has_sink();
        let j = super::seqlog::SeqJudge::new(c.layout().eaxcs.len());
        Ok(LiveStages {
            stages: vec![(k, c, j)],
            handed,
            counters_at: None,
            stats: PollStats::default(),
        })
    }

    /// Per eAxC index of the stage at pipeline position `k`: (gaps, duplicates, out of order)
    /// judged so far (empty for a position without a fronthaul stage).
    pub fn seq_counts(&self, k: usize) -> &[[u64; 3]] {
        self.stages
            .iter()
            .find(|s| s.0 == k)
            .map_or(&[], |s| s.2.counts())
    }

    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// One poll of every stage over every GPU of `gpu`; the slots that closed go to their
    /// stage's sink, the sequence log is judged as far as it can be, and every
    /// [`COUNTERS_EVERY`] the GPU counters go into the stages. Returns how many slots closed.
    pub fn poll(
        &mut self,
        p: &pipeline::stage::Pipeline,
        mem: &dyn StageGpuMemory,
    ) -> anyhow::Result<usize> {
        let start = Instant::now();
        if let Some(last) = self.stats.last_start.replace(start) {
            self.stats.gap.add(start.saturating_duration_since(last));
        }
        self.stats.polls += 1;
        let n = self.each(p, mem, false)?;
        let t = Instant::now();
        if self.counters_due(t) {
            self.absorb_counters(p, &super::gpu::GpuCounters::new(mem)?)?;
            self.stats.counters.add(t.elapsed());
        }
        Ok(n)
    }

    /// Whether the GPU counters are to be read at `now` (the first poll, then every
    /// [`COUNTERS_EVERY`]); if so, `now` is when they were.
    pub fn counters_due(&mut self, now: Instant) -> bool {
        let due = self
            .counters_at
            .is_none_or(|t| now.saturating_duration_since(t) >= COUNTERS_EVERY);
        if due {
            self.counters_at = Some(now);
        }
        due
    }

    /// Every stage's GPU counters (and its sequence counts so far) into the Rust stage.
    pub fn absorb_counters(
        &self,
        p: &pipeline::stage::Pipeline,
        src: &dyn super::gpu::CounterSource,
    ) -> anyhow::Result<()> {
        for (k, _, j) in &self.stages {
            if let Some(f) = p.stages.get(*k).and_then(super::FronthaulStage::of) {
                super::gpu::absorb_stage(&f, *k, src, j.counts())?;
            }
        }
        Ok(())
    }

    /// The end of a run, after [`Self::finish`]: each stage's slots the kernel stored that
    /// the poll never saw (it fell a whole ring behind) counted lost.
    pub fn report_lost(
        &self,
        p: &pipeline::stage::Pipeline,
        src: &dyn super::gpu::CounterSource,
    ) -> anyhow::Result<()> {
        for (k, c, _) in &self.stages {
            if let Some(f) = p.stages.get(*k).and_then(super::FronthaulStage::of) {
                let taken = super::gpu::taken_slots(src, *k)?;
                f.set_slots_lost(taken.saturating_sub(c.observed()));
            }
        }
        Ok(())
    }

    /// The end of a run: every slot still open closed (see [`Completer::finish`]).
    pub fn finish(
        &mut self,
        p: &pipeline::stage::Pipeline,
        mem: &dyn StageGpuMemory,
    ) -> anyhow::Result<()> {
        self.each(p, mem, true)?;
        tracing::info!(
            event = "fronthaul_completion_poll",
            polls = self.stats.polls,
            "fronthaul slot completion poll: {}",
            self.stats.describe()
        );
        for (k, _, j) in &self.stages {
            if let Some(why) = lost_warning(*k, j.lost) {
                tracing::warn!(
                    event = "fronthaul_seq_lost",
                    position = *k,
                    lost = j.lost,
                    "{why}"
                );
            }
        }
        Ok(())
    }

    fn each(
        &mut self,
        p: &pipeline::stage::Pipeline,
        mem: &dyn StageGpuMemory,
        end: bool,
    ) -> anyhow::Result<usize> {
        let mut n = 0;
        for (k, c, j) in &mut self.stages {
            let Some(f) = p.stages.get(*k).and_then(super::FronthaulStage::of) else {
                continue;
            };
            let layout = c.layout().clone();
            let srcs: Vec<ExecutorSource<'_>> = (0..mem.gpus())
                .map(|gpu| ExecutorSource {
                    mem,
                    gpu,
                    k: *k,
                    layout: &layout,
                })
                .collect();
            let logs: Vec<&dyn super::seqlog::LogSource> = srcs
                .iter()
                .map(|s| s as &dyn super::seqlog::LogSource)
                .collect();
            let t = Instant::now();
            j.poll(&logs, end)?;
            self.stats.seq.add(t.elapsed());
            let t = Instant::now();
            let srcs: Vec<&dyn GridSource> = srcs.iter().map(|s| s as &dyn GridSource).collect();
            let handed = &self.handed;
            let mut close = |cl: Closed| f.close_gpu_slot(&cl.grid, handed.handed_at(cl.last_ns));
            n += if end {
                c.finish(&srcs, &mut close)?
            } else {
                c.poll(&srcs, &mut close)?
            };
            self.stats.slots.add(t.elapsed());
        }
        Ok(n)
    }
}

/// What to say when the GPU's sequence log lapped the host's reader: those packets' sequence ids
/// were never judged, so the gaps / duplicates / out-of-order counts are short by up to that many.
/// Time between two looks at the slot states: a slot is 0.5 ms at 30 kHz and a ring entry is
/// reused `2 x max_open_slots` slots later, so a slot closes within a poll or two of its last
/// PRB, long before its entry is taken again. A poll itself takes tens of microseconds (its
/// reads of GPU memory), which a sleep of 100 us doubled: slot completion latency p50 was
/// ~250 us at radio speed on the H200 (docs/perf-log.md, "the whole GPU fronthaul daemon, fed",
/// 2026-12-04).
pub const POLL: Duration = Duration::from_micros(20);

/// The fronthaul stages' slot completion on the GPU executor: slots that closed are handed to
/// their sinks while the run goes; what is still open at the end closes in
/// [`super::gpu::absorb_from_gpu`].
impl GpuHostSide for LiveStages {
    fn name(&self) -> &str {
        "fronthaul"
    }

    fn poll_interval(&self) -> Duration {
        POLL
    }

    /// The input waits for the completion poll: an unpaced feed (the generator, a capture
    /// replayed at full speed) must not run the kernel a ring of slots past it.
    fn frames_per_poll(&self) -> Option<u64> {
        self.stages.iter().map(|s| s.1.frames_per_poll()).min()
    }

    fn poll(
        &mut self,
        p: &pipeline::stage::Pipeline,
        mem: &dyn StageGpuMemory,
    ) -> anyhow::Result<()> {
        LiveStages::poll(self, p, mem)
            .map(|_| ())
            .map_err(|e| e.context("fronthaul slot completion"))
    }

    fn finish(
        self: Box<Self>,
        p: &pipeline::stage::Pipeline,
        mem: &dyn StageGpuMemory,
    ) -> anyhow::Result<()> {
        super::gpu::absorb_from_gpu(p, mem, *self)
    }
}

fn lost_warning(position: usize, lost: u64) -> Option<String> {
    (lost > 0).then(|| {
        format!(
            "fronthaul stage at position {position}: the GPU's sequence log lapped its reader; \
             {lost} packets' sequence ids were not judged (gaps, duplicates and out-of-order \
             counts may be low by up to that many)"
        )
    })
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
