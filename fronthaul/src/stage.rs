//! The `fronthaul` stage: decode, track, assemble, sink; counters per eAxC.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

use super::bfp::{self, PRB_SAMPLES};
use super::config::{FronthaulConfig, SinkConfig};
use super::decode::{self, DecodeParams, Message, Reject, Section, Sections, SYMBOLS_PER_SLOT};
use super::grid::{Assembler, Closed, SlotGrid, SlotKey, SlotRing};
use super::sink::{BackgroundSink, NpySink, SlotSink};
use super::track::{Arrival, SeqEvent, SeqTracker, Timing};
use pipeline::meta::PacketMeta;
use pipeline::verdict::{DropReason, Verdict};

/// Counters of one eAxC (the `eaxc` label of the metrics).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EaxcCounters {
    pub eaxc: u16,
    /// U-plane packets accepted.
    pub packets: u64,
    pub prbs: u64,
    pub early: u64,
    pub on_time: u64,
    pub late: u64,
    /// Packets without a receive time: their timing was not judged (the GPU executor when the
    /// transport gives no timestamp).
    pub untimed: u64,
    /// Packets missing by the sequence ids.
    pub seq_gaps: u64,
    pub seq_duplicates: u64,
    pub seq_out_of_order: u64,
    pub duplicate_prbs: u64,
    /// Packets (and their PRBs) not stored because their slot had already closed, or their
    /// ring entry held a later slot (see [`super::grid::SlotRing`]): the frame is dropped
    /// (queue drop reason `fronthaul_reject`; here and in the metrics reason `slot_closed`).
    /// Counted in `packets` and judged for sequence and Ta4 as any packet; their PRBs are not
    /// in `prbs`.
    pub slot_closed: u64,
    pub slot_closed_prbs: u64,
    /// Rejected frames whose eAxC id could be read, by [`Reject::index`].
    pub errors: [u64; Reject::COUNT],
    /// Slots closed with every PRB of this eAxC / with some missing.
    pub slots_complete: u64,
    pub slots_partial: u64,
}

/// The stage's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FronthaulCounters {
    /// Frames seen.
    pub frames: u64,
    /// Frames that are not eCPRI (passed on untouched, not errors).
    pub not_ecpri: u64,
    pub uplane: u64,
    pub cplane: u64,
    pub prbs: u64,
    /// Rejected frames by [`Reject::index`] (`not_ecpri` is never counted here).
    pub errors: [u64; Reject::COUNT],
    pub duplicate_prbs: u64,
    /// Samples that did not fit 16 bits in the grid (exponent too large for the width).
    pub saturated_samples: u64,
    /// U-plane packets of an eAxC outside the grid (not listed, or beyond `max_eaxcs`).
    pub eaxc_unexpected: u64,
    pub slots_complete: u64,
    pub slots_partial: u64,
    /// GPU executor: slots the kernel stored that the completion poll never saw (it fell a
    /// whole ring behind): never handed to the sink. Set at the end of a run.
    pub slots_lost: u64,
    pub sink_errors: u64,
    /// Completion latency of the complete slots (the last [`LATENCY_KEEP`] measured): from
    /// the burst holding the slot's last packet (CPU executor: when its worker started that
    /// packet; GPU executor: when the host handed that burst to the GPU) to the slot handed to
    /// the sink, host clock. Count measured, p50, p99 (ns; 0 when none).
    pub slot_latency_count: u64,
    pub slot_latency_p50_ns: u64,
    pub slot_latency_p99_ns: u64,
    /// Every measured completion latency by [`SLOT_LATENCY_BUCKETS_NS`] (not cumulative; the
    /// last entry is above the last bound) and their sum (ns): the /metrics histogram.
    pub slot_latency_buckets: Vec<u64>,
    pub slot_latency_sum_ns: u64,
    /// Per eAxC, in grid order.
    pub per_eaxc: Vec<EaxcCounters>,
}

impl FronthaulCounters {
    pub fn errors_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// (reason name, count) of the non-zero error counters.
    pub fn errors_by_reason(&self) -> Vec<(&'static str, u64)> {
        Reject::ALL
            .iter()
            .filter(|r| self.errors[r.index()] > 0)
            .map(|r| (r.name(), self.errors[r.index()]))
            .collect()
    }

    pub fn early(&self) -> u64 {
        self.per_eaxc.iter().map(|e| e.early).sum()
    }
    pub fn on_time(&self) -> u64 {
        self.per_eaxc.iter().map(|e| e.on_time).sum()
    }
    pub fn late(&self) -> u64 {
        self.per_eaxc.iter().map(|e| e.late).sum()
    }
    /// Packets of every eAxC whose slot had closed (see [`EaxcCounters::slot_closed`]).
    pub fn slot_closed(&self) -> u64 {
        self.per_eaxc.iter().map(|e| e.slot_closed).sum()
    }

    /// One line: PRBs, slots, timing, errors by reason.
    pub fn summary(&self) -> String {
        let latency = if self.slot_latency_count > 0 {
            format!(
                ", slot completion latency p50 {:.1} us / p99 {:.1} us ({} slots)",
                self.slot_latency_p50_ns as f64 / 1e3,
                self.slot_latency_p99_ns as f64 / 1e3,
                self.slot_latency_count
            )
        } else {
            String::new()
        };
        let errs: Vec<String> = self
            .errors_by_reason()
            .iter()
            .map(|(n, c)| format!("{n}={c}"))
            .collect();
        format!(
            "fronthaul: {} frames ({} U-plane, {} C-plane, {} not eCPRI), {} PRBs decoded, slots {} complete / {} partial{latency}, {} packets after their slot closed, early {} / on time {} / late {}, {} duplicate PRBs, {} errors{}{}",
            self.frames,
            self.uplane,
            self.cplane,
            self.not_ecpri,
            self.prbs,
            self.slots_complete,
            self.slots_partial,
            self.slot_closed(),
            self.early(),
            self.on_time(),
            self.late(),
            self.duplicate_prbs,
            self.errors_total(),
            if errs.is_empty() { "" } else { ": " },
            errs.join(" ")
        )
    }
}

/// Completion latencies kept for the percentiles (the newest).
pub const LATENCY_KEEP: usize = 1 << 16;

/// Upper bounds (ns) of the completion latency histogram: 1 us (a CPU worker) to 100 ms (ten
/// times the GPU executor's worst measured), 1-2-5 steps.
pub const SLOT_LATENCY_BUCKETS_NS: [u64; 16] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
];

/// The newest [`LATENCY_KEEP`] completion latencies (ns), how many were measured, and all of
/// them by histogram bucket.
#[derive(Default)]
struct Latencies {
    ring: Vec<u64>,
    next: usize,
    count: u64,
    buckets: [u64; SLOT_LATENCY_BUCKETS_NS.len() + 1],
    sum_ns: u64,
}

impl Latencies {
    fn observe(&mut self, ns: u64) {
        let b = SLOT_LATENCY_BUCKETS_NS.partition_point(|&bound| bound < ns);
        self.buckets[b] += 1;
        self.sum_ns = self.sum_ns.saturating_add(ns);
        if self.ring.len() < LATENCY_KEEP {
            self.ring.push(ns);
        } else {
            self.ring[self.next] = ns;
        }
        self.next = (self.next + 1) % LATENCY_KEEP;
        self.count += 1;
    }

    /// (count, p50, p99).
    fn summary(&self) -> (u64, u64, u64) {
        if self.ring.is_empty() {
            return (0, 0, 0);
        }
        let mut v = self.ring.clone();
        v.sort_unstable();
        let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        (self.count, at(0.5), at(0.99))
    }
}

/// eAxC id -> grid index, looked up once a packet: hashed by one multiplication (SipHash, the
/// default, costs 120 instructions a packet, 2.5% of the stage's; the ids are at most
/// `max_eaxcs`, so a crafted collision costs little).
type EaxcIndex = HashMap<u16, usize, BuildHasherDefault<IdHasher>>;

/// The hasher of [`EaxcIndex`]: the id times an odd constant (a bijection: distinct ids,
/// distinct hashes, spread over the high bits the table's control bytes take).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u16(&mut self, id: u16) {
        self.0 = u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

struct State {
    latencies: Latencies,
    assembler: Assembler,
    /// Which slots closed (packets of theirs are refused).
    ring: SlotRing,
    index: EaxcIndex,
    seq: Vec<SeqTracker>,
    counters: FronthaulCounters,
    sink: Option<Box<dyn SlotSink>>,
}

/// The fronthaul stage. Shared by the CPU executor's workers (`Send + Sync`): decoding checks
/// run outside the lock, the grid writes and counters under one mutex (eAxCs steered to
/// different queues still share slots, so the slot state is one).
pub struct FronthaulStage {
    cfg: FronthaulConfig,
    params: DecodeParams,
    timing: Timing,
    fixed_eaxcs: bool,
    max_eaxcs: usize,
    state: Mutex<State>,
}

impl FronthaulStage {
    /// Builds the stage and the sink its config names.
    pub fn from_config(cfg: &FronthaulConfig) -> Result<Self, String> {
        // The file sinks write from a thread of their own (sink_writer's text says why).
        let sink: Option<Box<dyn SlotSink>> = match &cfg.sink {
            SinkConfig::None => None,
            SinkConfig::Npy { dir, max_files } => Some(Box::new(BackgroundSink::spawn(
                "npy",
                Box::new(NpySink::create(dir, *max_files)?),
            )?)),
            SinkConfig::Raw(r) => Some(Box::new(BackgroundSink::spawn(
                "raw",
                Box::new(super::raw::RawSink::create(&r.dir, r.max_files, cfg)?),
            )?)),
        };
        Self::build(cfg, sink)
    }

    /// Builds the stage with a library sink (the config's `sink` is ignored).
    pub fn with_sink(cfg: &FronthaulConfig, sink: Box<dyn SlotSink>) -> Result<Self, String> {
        Self::build(cfg, Some(sink))
    }

    fn build(cfg: &FronthaulConfig, sink: Option<Box<dyn SlotSink>>) -> Result<Self, String> {
        cfg.validate()?;
        let fixed = !cfg.eaxcs.is_empty();
        let n = if fixed {
            cfg.eaxcs.len()
        } else {
            usize::from(cfg.max_eaxcs)
        };
        let mut index = EaxcIndex::default();
        let mut counters = FronthaulCounters::default();
        for (i, &id) in cfg.eaxcs.iter().enumerate() {
            index.insert(id, i);
            counters.per_eaxc.push(EaxcCounters {
                eaxc: id,
                ..Default::default()
            });
        }
        Ok(FronthaulStage {
            cfg: cfg.clone(),
            params: cfg.decode_params(),
            timing: Timing {
                numerology: cfg.numerology,
                ta4: cfg.ta4,
                offset_ns: cfg.time_offset_ns,
            },
            fixed_eaxcs: fixed,
            max_eaxcs: n,
            state: Mutex::new(State {
                latencies: Latencies::default(),
                assembler: Assembler::new(
                    n,
                    usize::from(cfg.carrier_prbs),
                    cfg.grid.format,
                    cfg.grid.beta,
                    usize::from(cfg.max_open_slots),
                    cfg.slot_timeout_us.saturating_mul(1000),
                ),
                // The GPU stage's ring (gpu::Layout::ring), so both refuse the same packets.
                ring: SlotRing::new(cfg.numerology, 2 * usize::from(cfg.max_open_slots)),
                index,
                seq: vec![SeqTracker::default(); if fixed { n } else { 0 }],
                counters,
                sink,
            }),
        })
    }

    pub fn params(&self) -> &DecodeParams {
        &self.params
    }

    /// Whether closed slots go to a sink (else only counted).
    pub fn has_sink(&self) -> bool {
        self.lock().sink.is_some()
    }

    /// The stage's options (validated).
    pub fn config(&self) -> &FronthaulConfig {
        &self.cfg
    }

    /// The stage on a frame that arrived at `arrival_ns` (capture timestamp on replay).
    /// Non-eCPRI frames pass untouched; rejected frames are dropped (`fronthaul_reject`) and
    /// counted by reason; U-plane PRBs go into the slot grid.
    pub fn process_at(&self, frame: &[u8], arrival_ns: u64, _meta: &PacketMeta, v: &mut Verdict) {
        self.process_inner(frame, Some(arrival_ns), v);
    }

    /// The stage on a frame without a receive time: everything but the Ta4 window (counted
    /// `untimed`) and the slot timeout (slots close complete, by eviction or at the end). The
    /// GPU stage's semantics for a frame whose receive time is 0.
    pub fn process_untimed(&self, frame: &[u8], _meta: &PacketMeta, v: &mut Verdict) {
        self.process_inner(frame, None, v);
    }

    fn process_inner(&self, frame: &[u8], arrival_ns: Option<u64>, v: &mut Verdict) {
        let started = std::time::Instant::now();
        let checked = decode::check(frame, &self.params);
        let mut st = self.lock();
        let st = &mut *st;
        st.counters.frames += 1;
        match checked {
            Err(Reject::NotEcpri) => st.counters.not_ecpri += 1,
            Err(r) => {
                st.counters.errors[r.index()] += 1;
                // Looked up, not learnt: a malformed frame must not take a grid index.
                if let Some(&i) = peek_eaxc(frame).and_then(|id| st.index.get(&id)) {
                    st.counters.per_eaxc[i].errors[r.index()] += 1;
                }
                *v = Verdict::drop(DropReason::FronthaulReject);
            }
            Ok(Message::Cplane(_)) => st.counters.cplane += 1,
            Ok(Message::Uplane(u)) => {
                if self.uplane(st, frame, &u, arrival_ns, started) == Taken::Refused {
                    *v = Verdict::drop(DropReason::FronthaulReject);
                }
            }
        }
    }

    /// A U-plane packet into the grid; whether it was taken or refused (its slot closed).
    fn uplane(
        &self,
        st: &mut State,
        frame: &[u8],
        u: &decode::Uplane,
        arrival: Option<u64>,
        started: std::time::Instant,
    ) -> Taken {
        st.counters.uplane += 1;
        let arrival_ns = arrival.unwrap_or(0);
        let Some(e) = self.eaxc_index(st, u.eaxc) else {
            st.counters.eaxc_unexpected += 1;
            return Taken::Passed;
        };
        let expected = st.index.len();
        let c = &mut st.counters.per_eaxc[e];
        c.packets += 1;
        match st.seq[e].observe(u.seq.seq) {
            SeqEvent::InOrder => {}
            SeqEvent::Gap(n) => c.seq_gaps += u64::from(n),
            SeqEvent::Duplicate => c.seq_duplicates += 1,
            SeqEvent::OutOfOrder => c.seq_out_of_order += 1,
        }
        match arrival.map(|t| self.timing.classify(&u.radio, t)) {
            Some(Arrival::Early) => c.early += 1,
            Some(Arrival::OnTime) => c.on_time += 1,
            Some(Arrival::Late) => c.late += 1,
            None => c.untimed += 1,
        }
        let key = SlotKey {
            frame_id: u.radio.frame_id,
            subframe_id: u.radio.subframe_id,
            slot_id: u.radio.slot_id,
        };
        if st.ring.refuses(key) {
            // Its slot was handed over (or its entry moved on): the delivered slot must not
            // change, and a new partial slot of the same radio time would be a second copy.
            c.slot_closed += 1;
            c.slot_closed_prbs += u64::from(u.prbs);
            return Taken::Refused;
        }
        c.prbs += u64::from(u.prbs);
        st.ring.stored(key);
        let grid = st.assembler.slot(key, arrival_ns);
        if grid.eaxc_ids.len() != st.index.len() {
            grid.eaxc_ids = ids_by_index(&st.index);
        }
        let (mut dups, mut sat) = (0u64, 0u64);
        for s in Sections::new(frame, u, &self.params).flatten() {
            let (d, n) = store_section(grid, e, &s, frame);
            dups += d;
            sat += n;
        }
        self.take_from_earlier(st, key, e, frame, u);
        st.counters.prbs += u64::from(u.prbs);
        st.counters.duplicate_prbs += dups;
        st.counters.saturated_samples += sat;
        st.counters.per_eaxc[e].duplicate_prbs += dups;
        let (counters, sink, lat, ring) = (
            &mut st.counters,
            &mut st.sink,
            &mut st.latencies,
            &mut st.ring,
        );
        // A learnt grid does not know its eAxCs yet: a slot that looks complete may still get
        // an eAxC that has not sent yet, so it closes by eviction, timeout or the end of input
        // (docs/fronthaul.md, "When a slot closes").
        if self.fixed_eaxcs {
            st.assembler.close_if_complete(key, expected, &mut |c| {
                lat.observe(started.elapsed().as_nanos() as u64);
                on_close(counters, sink, ring, c)
            });
        }
        // Then the oldest past `max_open_slots`, then the timed out: the GPU's poll's order.
        st.assembler
            .evict(expected, &mut |c| on_close(counters, sink, ring, c));
        // The timeout's clock is the latest receive time stored in an open slot, judged after
        // the packet is stored: what the GPU executor's completion poll sees in the slot
        // states (docs/fronthaul.md, "When a slot opens and closes").
        let now = st.assembler.latest_ns();
        if now > 0 {
            st.assembler
                .expire(now, expected, &mut |c| on_close(counters, sink, ring, c));
        }
        Taken::Stored
    }

    /// A packet of slot `key` stored its cells: an earlier slot still open in the same ring
    /// entry (slots `2 x max_open_slots` apart) loses those cells and its receive time, as
    /// on the GPU, where the later slot took the entry (docs/fronthaul.md).
    fn take_from_earlier(
        &self,
        st: &mut State,
        key: SlotKey,
        e: usize,
        frame: &[u8],
        u: &decode::Uplane,
    ) {
        let (mu, ring) = (
            self.cfg.numerology,
            2 * usize::from(self.cfg.max_open_slots),
        );
        let entry = |k: SlotKey| (k.number(mu) as usize) % ring.max(1);
        let mine = entry(key);
        for g in st.assembler.others_mut(key, |k| entry(k) == mine) {
            g.last_ns = 0;
            for s in Sections::new(frame, u, &self.params).flatten() {
                for k in 0..s.num_prb {
                    g.unfill(e, s.symbol, s.prb(k));
                }
            }
        }
    }

    /// The grid index of an eAxC, learning it when the grid is not fixed and has room.
    fn eaxc_index(&self, st: &mut State, id: u16) -> Option<usize> {
        if let Some(&i) = st.index.get(&id) {
            return Some(i);
        }
        if self.fixed_eaxcs || st.index.len() >= self.max_eaxcs {
            return None;
        }
        let i = st.index.len();
        st.index.insert(id, i);
        st.seq.push(SeqTracker::default());
        st.counters.per_eaxc.push(EaxcCounters {
            eaxc: id,
            ..Default::default()
        });
        st.assembler.set_eaxc_ids(&ids_by_index(&st.index));
        Some(i)
    }

    /// Closes every open slot (end of input or shutdown), delivering them to the sink, and
    /// waits until the sink has delivered every slot (its errors counted).
    pub fn flush(&self) {
        let mut st = self.lock();
        let st = &mut *st;
        let expected = st.index.len();
        st.assembler.flush(expected, &mut |c| {
            on_close(&mut st.counters, &mut st.sink, &mut st.ring, c)
        });
        if let Some(sink) = st.sink.as_mut() {
            sink.finish();
            let (n, first) = sink.late_errors();
            count_sink_errors(&mut st.counters, n, first);
        }
    }

    pub fn counters(&self) -> FronthaulCounters {
        let st = self.lock();
        let mut c = st.counters.clone();
        (
            c.slot_latency_count,
            c.slot_latency_p50_ns,
            c.slot_latency_p99_ns,
        ) = st.latencies.summary();
        c.slot_latency_buckets = st.latencies.buckets.to_vec();
        c.slot_latency_sum_ns = st.latencies.sum_ns;
        c
    }

    /// A slot the GPU executor's completion poll closed (see [`super::live`]): counted
    /// complete / partial and handed to the sink; a complete one's latency is measured from
    /// `handed` (when the host handed the GPU the burst with its last packet), when known.
    pub fn close_gpu_slot(&self, g: &super::SlotGrid, handed: Option<std::time::Instant>) {
        let mut st = self.lock();
        let st = &mut *st;
        if let (true, Some(h)) = (g.complete, handed) {
            st.latencies.observe(
                std::time::Instant::now()
                    .saturating_duration_since(h)
                    .as_nanos() as u64,
            );
        }
        let c = Closed {
            grid: g,
            complete: g.complete,
        };
        on_close(&mut st.counters, &mut st.sink, &mut st.ring, c);
    }

    /// The GPU executor's counters of this stage (see [`super::gpu`]): they replace the
    /// stage's (which saw no frame), but for the slot counts, which [`Self::close_gpu_slot`]
    /// kept here.
    pub fn absorb_gpu_counters(&self, mut counters: FronthaulCounters) {
        let mut st = self.lock();
        let old = &st.counters;
        counters.slots_complete = old.slots_complete;
        counters.slots_partial = old.slots_partial;
        counters.slots_lost = old.slots_lost;
        counters.sink_errors = old.sink_errors;
        for (n, o) in counters.per_eaxc.iter_mut().zip(&old.per_eaxc) {
            n.slots_complete = o.slots_complete;
            n.slots_partial = o.slots_partial;
        }
        st.counters = counters;
    }

    /// GPU executor, end of a run: `n` slots the completion poll never saw (see
    /// [`FronthaulCounters::slots_lost`]).
    pub fn set_slots_lost(&self, n: u64) {
        if n > 0 {
            tracing::warn!(
                event = "fronthaul_slots_lost",
                lost = n,
                "fronthaul: {n} slots the GPU stored were never seen by the completion poll \
                 (it fell a whole ring of 2 x max_open_slots slots behind, though the input \
                 waits for it after max_open_slots x 14 x eAxCs frames: slots of fewer frames \
                 than that) and never reached the sink"
            );
        }
        self.lock().counters.slots_lost = n;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic in a sink must not stop the data path: the state stays consistent between
        // packets, so a poisoned lock is taken as it is.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What became of a U-plane packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Taken {
    /// Its PRBs went into the grid.
    Stored,
    /// Refused, its slot closed: dropped (`fronthaul_reject`), counted `slot_closed`.
    Refused,
    /// Not the grid's (an eAxC outside it): passed on untouched.
    Passed,
}

/// Stores a section's PRBs in eAxC index `e`'s cells; returns (PRBs already there, samples
/// saturated). PRBs whose samples all fit 16 bits (the common case) are decoded straight into
/// their int16 cells, a run of consecutive PRBs at a time; the rest as 32-bit samples,
/// saturated by the store.
fn store_section(grid: &mut SlotGrid, e: usize, s: &Section, frame: &[u8]) -> (u64, u64) {
    let (mut dups, mut sat) = (0u64, 0u64);
    let mut iq = [0i32; PRB_SAMPLES];
    let mut k = 0;
    while k < s.num_prb {
        if s.stride == 1 {
            if let Some((c, cells)) = grid.run_i16(e, s.symbol, s.prb(k), s.num_prb - k) {
                let rest = frame
                    .get(s.data + usize::from(k) * s.prb_bytes..)
                    .unwrap_or(&[]);
                let done = bfp::decompress_run_i16(rest, s.method, s.width, cells);
                dups += u64::from(grid.mark_run(c, done));
                k += done as u16;
                if k == s.num_prb {
                    break;
                }
            }
        }
        // One PRB the run did not take: a sample may not fit, a stride of 2, an FP16 grid.
        let bytes = s.prb_bytes_of(frame, k);
        let direct = grid.store_direct(e, s.symbol, s.prb(k), |o| {
            bfp::decompress_prb_i16(bytes, s.method, s.width, o).is_some()
        });
        if let Some(dup) = direct {
            dups += u64::from(dup);
        } else {
            s.decode(frame, k, &mut iq);
            if let Some((dup, n)) = grid.store(e, s.symbol, s.prb(k), &iq) {
                dups += u64::from(dup);
                sat += u64::from(n);
            }
        }
        k += 1;
    }
    (dups, sat)
}

/// Counts a closed slot (overall and per eAxC), marks it closed in `ring` and hands it to the
/// sink.
fn on_close(
    counters: &mut FronthaulCounters,
    sink: &mut Option<Box<dyn SlotSink>>,
    ring: &mut SlotRing,
    c: Closed,
) {
    ring.closed(c.grid.key);
    if c.complete {
        counters.slots_complete += 1;
    } else {
        counters.slots_partial += 1;
    }
    let [e, s, p] = c.grid.shape();
    for (i, ec) in counters.per_eaxc.iter_mut().enumerate().take(e) {
        if c.grid.filled_for(i) == s * p {
            ec.slots_complete += 1;
        } else {
            ec.slots_partial += 1;
        }
    }
    if let Some(sink) = sink.as_mut() {
        let now = sink.slot(c.grid).err();
        let (late, first) = sink.late_errors();
        count_sink_errors(counters, late + u64::from(now.is_some()), first.or(now));
    }
}

/// Counts `n` sink errors; the first of the run is logged with its message.
fn count_sink_errors(counters: &mut FronthaulCounters, n: u64, first: Option<String>) {
    if n == 0 {
        return;
    }
    if counters.sink_errors == 0 {
        let why = first.as_deref().unwrap_or("(no message)");
        tracing::warn!("fronthaul sink: {why} (further sink errors only counted)");
    }
    counters.sink_errors += n;
}

/// eAxC ids in grid order.
fn ids_by_index(index: &EaxcIndex) -> Vec<u16> {
    let mut v: Vec<(usize, u16)> = index.iter().map(|(&id, &i)| (i, id)).collect();
    v.sort_unstable();
    v.into_iter().map(|(_, id)| id).collect()
}

/// The PC_ID of a frame that looks like eCPRI IQ data / RTC far enough, for attributing errors.
fn peek_eaxc(frame: &[u8]) -> Option<u16> {
    let mut off = 12;
    let mut ty = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    let mut tags = 0;
    while pipeline::wire::ethernet::ether_type::is_vlan(ty) && tags < decode::MAX_VLAN {
        off += 4;
        ty = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
        tags += 1;
    }
    let mt = *frame.get(off + 3)?;
    (ty == pipeline::wire::ethernet::ether_type::ECPRI && (mt == 0 || mt == 2)).then(|| {
        Some(u16::from_be_bytes([
            *frame.get(off + 6)?,
            *frame.get(off + 7)?,
        ]))
    })?
}

impl FronthaulStage {
    /// The stage in a pipeline's stage list (a stage of the stage API, as a registered one).
    pub fn into_stage(self) -> pipeline::stage::Stage {
        let built = pipeline::stage::BuiltStage {
            cpu: std::sync::Arc::new(self),
            gpu: None,
        };
        match pipeline::internal::stage::CustomSlot::with_descriptor(&DESCRIPTOR, built) {
            Ok(slot) => pipeline::stage::Stage::Custom(Box::new(slot)),
            // A stage without counters or CUDA source: nothing to refuse.
            Err(e) => unreachable!("the fronthaul stage's build is checked: {e:#}"),
        }
    }

    /// The fronthaul stage `s` is, if it is one.
    pub fn of(s: &pipeline::stage::Stage) -> Option<std::sync::Arc<FronthaulStage>> {
        s.custom_as::<FronthaulStage>()
    }
}

/// Through the stage API the receive time is the frame's (`RxInfo`); without one the frame is
/// untimed, as on the GPU: the host's clock never times a slot out.
impl pipeline::stage::CustomStage for FronthaulStage {
    fn process(&self, frame: &[u8], meta: &PacketMeta, verdict: &mut Verdict) {
        self.process_untimed(frame, meta, verdict);
    }

    fn process_rx(
        &self,
        frame: &[u8],
        rx: pipeline::stage::RxInfo,
        meta: &PacketMeta,
        verdict: &mut Verdict,
    ) {
        if rx.timestamp_ns != 0 {
            self.process_at(frame, rx.timestamp_ns, meta, verdict);
        } else {
            self.process_untimed(frame, meta, verdict);
        }
    }

    /// The GPU grid's eAxCs are fixed: a config without `fronthaul.eaxcs` is CPU only.
    fn gpu_library(&self) -> Option<Result<pipeline::stage::GpuParams, String>> {
        Some(super::gpu::gpu_params(self.config()))
    }

    fn exported_families(&self) -> &'static [pipeline::stage::ExportedFamily] {
        &super::report::EXPORTED
    }

    fn exported_samples(
        &self,
        pipeline: &pipeline::stage::Pipeline,
    ) -> Vec<pipeline::stage::ExportedSamples> {
        super::report::exported_samples(pipeline)
    }

    fn gpu_host_side(
        &self,
        position: usize,
        handed: &std::sync::Arc<pipeline::stage::HandedLog>,
    ) -> anyhow::Result<Option<Box<dyn pipeline::stage::GpuHostSide>>> {
        let live = super::live::LiveStages::of_stage(position, self, handed.clone())?;
        Ok(Some(Box::new(live)))
    }

    fn summary_report(&self, position: usize) -> Option<pipeline::stage::StageReport> {
        Some(super::report::stage_report(position, self))
    }
}

/// Symbols per slot, re-exported for sinks that index the grid.
pub const SYMBOLS: usize = SYMBOLS_PER_SLOT as usize;

/// The `fronthaul` stage, described (`pipeline::stage::descriptor`).
pub const DESCRIPTOR: pipeline::stage::StageDescriptor =
    pipeline::stage::StageDescriptor {
        name: "fronthaul",
        usage: "`fronthaul: {...}`",
        summary: "O-RAN 7.2x U-plane decode (BFP / none, static or dynamic udCompHdr) into the slot grid; malformed frames and packets of a closed slot dropped as `fronthaul_reject`; on the GPU only with `eaxcs` listed: see [5G fronthaul](#5g-fronthaul)",
        needs: pipeline::stage::StageNeeds {
        reads_payload: true,
        reads_time: true,
        orders_across_queues: true,
        ..pipeline::stage::StageNeeds::NONE
    },
        drop_reasons: &[pipeline::verdict::DropReason::FronthaulReject, pipeline::verdict::DropReason::StageDrop],
        counters: &[],
        gpu: pipeline::stage::GpuImpl::Library {
        function: "pw_stage_fronthaul",
    },
        reloads: false,
    };

#[cfg(test)]
#[path = "rule_tests.rs"]
mod rule_tests;
