//! `flow_stats`: per-flow statistics for IPFIX flow export (docs/ipfix.md). The flows are a
//! flow table's ([`FlowTables`]): a `conntrack` stage's when the pipeline has one (this stage
//! then only exports what conntrack tracks), else a table per queue of this stage's own, to which
//! it applies every frame that reaches it. Each flow has per direction its packets, IP octets and
//! OR of TCP flags, and its first and last packet's receive time (docs/flow-table.md).
//!
//! A flow becomes a record when it ends: aged out of the table (idle timeout, or end of flow
//! when TCP saw FIN or RST), evicted for a new flow (lack of resources), reopened by a SYN, still
//! active after `active_timeout_s` (its counters are exported and start again), or alive at
//! shutdown (forced end). The data path pushes the records into the exporter's bounded queue
//! ([`FlowQueue::try_push`], never blocking; a full queue drops and counts); the control thread
//! sweeps the tables for idle and active flows ([`FlowStatsStage::sweep`]) and runs the exporter.
//!
//! On the GPU executor the tables are device memory, conntrack's or this stage's own (then the
//! device stage is conntrack's apply without the metadata store, on per-queue state of its own:
//! [`FlowStatsStage::gpu_own_block`]); the GPU host side drains, sweeps and flushes them through
//! this stage's code (`stage::flow_stats_gpu`, docs/flow-export-gpu.md).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use pktwarp_flow::ipfix::{EndReason, FlowQueue, FlowRecord as IpfixRecord};
use pktwarp_flow::table::Ended;
use pktwarp_flow::tcp::st;
use pktwarp_flow::{FlowConfig, FlowEntry, FlowRecord, FlowTable, Timeouts};
use serde::Deserialize;

use crate::burst::FrameDesc;
use crate::meta::PacketMeta;
use crate::stage::descriptor::{GpuImpl, StageDescriptor, StageNeeds};
use crate::stage::flow_tables::{lock, FlowTables, MAX_QUEUES};

/// The stage's counters: records made, by end reason, and records lost (the exporter's queue
/// full, no exporter, or too many ended flows waiting in a table).
pub const COUNTER_NAMES: [&str; 6] = [
    "idle_timeout",
    "active_timeout",
    "end_of_flow",
    "forced_end",
    "lack_of_resources",
    "records_dropped",
];

/// The `flow_stats` stage, described (the stage descriptor, `stage::descriptor`).
pub const DESCRIPTOR: StageDescriptor = StageDescriptor {
    name: "flow_stats",
    usage: "`flow_stats: { active_timeout_s, entries, hash_seed, timeouts }`",
    summary: "per-flow packets, bytes, times and TCP flags per direction, exported as IPFIX to the `ipfix:` collector when a flow ends (docs/ipfix.md); conntrack's flow table when the pipeline has one, else a table per queue of its own (on the GPU too: docs/flow-export-gpu.md); drops nothing",
    needs: StageNeeds {
        reads_meta: true,
        reads_time: true,
        ..StageNeeds::NONE
    },
    drop_reasons: &[],
    counters: &COUNTER_NAMES,
    // Over conntrack's tables; with a table of its own the executor picks the library's
    // `pw_stage_flow_stats_own` (pktwarp_kernels::codegen::StageSpec::flow_stats).
    gpu: GpuImpl::Library {
        function: "pw_stage_flow_stats",
    },
    reloads: false,
};

/// Buckets a sweep visits per lock hold: a worker waits for the table at most that long
/// (256 KiB of entries).
pub const SWEEP_CHUNK: u32 = 256;

/// `flow_stats:` options. The table keys (`entries`, `hash_seed`, `timeouts`) are for a
/// pipeline without `conntrack`; with one, the table is conntrack's and they are refused.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FlowStatsConfig {
    /// Flow table entries per queue (a multiple of 8), without `conntrack`: required then.
    #[serde(default)]
    pub entries: Option<u64>,
    /// Bucket hash seed of the own table.
    #[serde(default)]
    pub hash_seed: Option<u32>,
    /// Idle timeouts of the own table (docs/flow-table.md, "Aging").
    #[serde(default)]
    pub timeouts: Option<Timeouts>,
    /// Seconds after its start (or its last active-timeout record) at which a flow still active
    /// is exported; its counters then start again. Default 1800.
    #[serde(default)]
    pub active_timeout_s: Option<u64>,
}

/// Default `active_timeout_s` (as common exporters: 30 minutes).
pub const DEFAULT_ACTIVE_TIMEOUT_S: u64 = 1800;
/// The largest `active_timeout_s` (a week).
pub const MAX_ACTIVE_TIMEOUT_S: u64 = 7 * 86_400;

impl FlowStatsConfig {
    /// Checks the options; `conntrack`: whether the pipeline has a `conntrack` stage. The error
    /// is (key, why).
    pub fn validate(&self, conntrack: bool) -> Result<(), (String, String)> {
        let a = self.active_timeout_s.unwrap_or(DEFAULT_ACTIVE_TIMEOUT_S);
        if a == 0 || a > MAX_ACTIVE_TIMEOUT_S {
            return Err((
                "active_timeout_s".into(),
                format!("{a}: must be 1 to {MAX_ACTIVE_TIMEOUT_S} seconds"),
            ));
        }
        let own = [
            ("entries", self.entries.is_some()),
            ("hash_seed", self.hash_seed.is_some()),
            ("timeouts", self.timeouts.is_some()),
        ];
        match (conntrack, own.iter().find(|k| k.1)) {
            (true, Some((key, _))) => Err((
                key.to_string(),
                "the pipeline has a `conntrack` stage, whose flow table flow_stats exports: set \
                 the table's keys there"
                    .into(),
            )),
            (false, _) => match self.table_config() {
                Some(c) => c.validate().map_err(|e| match e {
                    pktwarp_flow::FlowError::Config { key, message } => (key, message),
                    other => (String::new(), other.to_string()),
                }),
                None => Err((
                    "entries".into(),
                    "required without a `conntrack` stage: flow_stats needs a flow table of its \
                     own (entries per queue, a multiple of 8)"
                        .into(),
                )),
            },
            (true, None) => Ok(()),
        }
    }

    /// The own table's config (`entries` given).
    pub fn table_config(&self) -> Option<FlowConfig> {
        Some(FlowConfig {
            entries: self.entries?,
            strict: false,
            hash_seed: self.hash_seed.unwrap_or(0),
            timeouts: self.timeouts.unwrap_or_default(),
        })
    }
}

/// Per queue, what the control thread's sweeps keep: the receive clock and where to go on.
#[derive(Clone, Copy)]
struct SweepState {
    /// The queue's largest receive time when the control thread last saw it change, and when.
    seen_rx_ns: u64,
    seen_at: Option<Instant>,
    /// The next bucket to visit.
    cursor: u32,
}

/// The stage (see the module doc).
pub struct FlowStatsStage {
    tables: Arc<FlowTables>,
    /// This stage applies the frames (no `conntrack` does).
    applies: bool,
    active_ns: u64,
    /// Per queue slot: the largest receive time of a frame seen (one writer: the queue's
    /// worker).
    last_rx: Vec<AtomicU64>,
    sink: OnceLock<FlowQueue>,
    /// [`COUNTER_NAMES`].
    counters: [AtomicU64; 6],
    sweeps: Mutex<Vec<SweepState>>,
    flushed: AtomicBool,
}

impl FlowStatsStage {
    /// The stage over `conntrack`'s tables, or over tables of its own (then `entries` must be
    /// set).
    pub fn new(
        c: &FlowStatsConfig,
        conntrack: Option<Arc<FlowTables>>,
    ) -> anyhow::Result<FlowStatsStage> {
        c.validate(conntrack.is_some())
            .map_err(|(k, why)| anyhow::anyhow!("stage `flow_stats`: {k}: {why}"))?;
        let applies = conntrack.is_none();
        let tables = match conntrack {
            Some(t) => t,
            None => {
                let tc = c.table_config().ok_or_else(|| {
                    anyhow::anyhow!("stage `flow_stats`: entries: required without `conntrack`")
                })?;
                Arc::new(FlowTables::new(&tc, "flow_stats")?)
            }
        };
        tables.report_ended();
        let active_s = c.active_timeout_s.unwrap_or(DEFAULT_ACTIVE_TIMEOUT_S);
        Ok(FlowStatsStage {
            tables,
            applies,
            active_ns: active_s.saturating_mul(1_000_000_000),
            last_rx: (0..MAX_QUEUES).map(|_| AtomicU64::new(0)).collect(),
            sink: OnceLock::new(),
            counters: Default::default(),
            sweeps: Mutex::new(vec![
                SweepState {
                    seen_rx_ns: 0,
                    seen_at: None,
                    cursor: 0,
                };
                MAX_QUEUES
            ]),
            flushed: AtomicBool::new(false),
        })
    }

    /// Where the records go: the exporter's queue (the control thread attaches it before the
    /// first frame). Without one, records are counted `records_dropped`. A second call is
    /// ignored.
    pub fn attach(&self, q: FlowQueue) {
        let _ = self.sink.set(q);
    }

    /// Whether the flows are this stage's own (no `conntrack` in the pipeline).
    pub fn owns_tables(&self) -> bool {
        self.applies
    }

    /// With a table of its own, its GPU parameter block: conntrack's (`pw_ct_params`,
    /// [`crate::stage::conntrack::gpu_block`]) over the own table's config, the ended-flow
    /// rings on (the stage exports what ends); `None` over conntrack's tables.
    pub fn gpu_own_block(&self) -> Option<Vec<u8>> {
        self.applies
            .then(|| crate::stage::conntrack::gpu_block(self.tables.config(), self.gpu_ring_cap()))
    }

    /// With a table of its own, the bytes of one queue's GPU state (its table, then its ring:
    /// [`crate::stage::conntrack::queue_state_bytes`]); `None` over conntrack's tables.
    pub fn gpu_own_queue_state_bytes(&self) -> Option<u64> {
        self.applies.then(|| {
            crate::stage::conntrack::queue_state_bytes(self.tables.config(), self.gpu_ring_cap())
        })
    }

    /// Slots of each queue's ended-flow ring on the GPU for the own table (the stage turned
    /// the tables' reporting on when it was made).
    fn gpu_ring_cap(&self) -> u32 {
        crate::stage::flow_stats_gpu::gpu_ring_cap(&self.tables)
    }

    /// The tables whose flows the stage exports.
    pub fn tables(&self) -> &Arc<FlowTables> {
        &self.tables
    }

    /// One frame: applied to its queue's table when the stage owns it; the flows that ended
    /// meanwhile go to the exporter.
    #[inline]
    pub fn apply(&self, desc: &FrameDesc, frame: &[u8], meta: &PacketMeta) {
        let q = desc.queue as usize % MAX_QUEUES;
        let rx = &self.last_rx[q];
        if desc.timestamp_ns > rx.load(Relaxed) {
            rx.store(desc.timestamp_ns, Relaxed);
        }
        let Some(t) = self.tables.table(desc.queue) else {
            return;
        };
        let mut ended = Vec::new();
        {
            let mut t = lock(t);
            if self.applies {
                t.apply(meta, frame, desc.timestamp_ns);
            }
            t.take_ended(&mut ended);
        }
        for (r, why) in ended {
            self.emit(&r, ended_reason(&r, why), &mut || {});
        }
    }

    /// The control thread's sweep at `now`: per queue, `buckets` buckets from where the last
    /// sweep stopped (in chunks of [`SWEEP_CHUNK`] per lock hold), exporting the flows that aged
    /// out and the active ones past `active_timeout_s`. A queue's clock is
    /// [`FlowStatsStage::queue_clock`]; a queue whose frames carry no receive time ages nothing.
    pub fn sweep(&self, now: Instant, buckets: u32) {
        let mut found = Vec::new();
        for (q, t) in self.tables.made() {
            let Some(now_ns) = self.queue_clock(q, now) else {
                continue;
            };
            let nbuckets = lock(t).nbuckets();
            let mut left = buckets.min(nbuckets);
            while left > 0 {
                let n = left.min(SWEEP_CHUNK);
                {
                    let mut t = lock(t);
                    let mut sweeps = self.sweeps.lock().unwrap_or_else(|p| p.into_inner());
                    let s = &mut sweeps[q];
                    s.cursor = self.sweep_found(&mut t, s.cursor, n, now_ns, &mut found);
                }
                left -= n;
                for (r, reason) in found.drain(..) {
                    self.emit(&r, reason, &mut || {});
                }
            }
        }
    }

    /// Queue `q`'s sweep clock at `now`: its largest receive time, run on at wall-clock speed
    /// since it last changed (a quiet queue's flows still age); `None` while its frames carried
    /// no receive time. The GPU executor's host side sweeps on this clock too.
    pub fn queue_clock(&self, q: usize, now: Instant) -> Option<u64> {
        let rx = self.last_rx.get(q)?.load(Relaxed);
        if rx == 0 {
            return None;
        }
        let mut sweeps = self.sweeps.lock().unwrap_or_else(|p| p.into_inner());
        let s = &mut sweeps[q];
        if rx != s.seen_rx_ns || s.seen_at.is_none() {
            (s.seen_rx_ns, s.seen_at) = (rx, Some(now));
        }
        let ran = s
            .seen_at
            .map_or(0, |at| now.saturating_duration_since(at).as_nanos());
        Some(
            s.seen_rx_ns
                .saturating_add(ran.min(u64::MAX as u128) as u64),
        )
    }

    /// A frame of queue `q` received at `rx_ns` (the GPU executor's host side, whose frames do
    /// not pass [`FlowStatsStage::apply`]): the queue's sweep clock follows it.
    pub fn note_rx(&self, q: usize, rx_ns: u64) {
        if let Some(rx) = self.last_rx.get(q) {
            rx.fetch_max(rx_ns, Relaxed);
        }
    }

    /// Sweeps `n` buckets of `t` from bucket `cursor` at `now_ns` and exports what they held:
    /// the flows that aged out, the live ones past the active timeout (their counters started
    /// again) and any the table reported ended. Returns the bucket to go on from. The GPU
    /// executor's host side runs it on a copy of a quiet queue's device buckets.
    pub fn sweep_table(&self, t: &mut FlowTable, cursor: u32, n: u32, now_ns: u64) -> u32 {
        let mut found = Vec::new();
        let next = self.sweep_found(t, cursor, n, now_ns, &mut found);
        for (r, reason) in found {
            self.emit(&r, reason, &mut || {});
        }
        next
    }

    /// [`FlowStatsStage::sweep_table`]'s records, not yet exported.
    fn sweep_found(
        &self,
        t: &mut FlowTable,
        cursor: u32,
        n: u32,
        now_ns: u64,
        found: &mut Vec<(FlowRecord, EndReason)>,
    ) -> u32 {
        let (mut expired, mut active, mut ended) = (Vec::new(), Vec::new(), Vec::new());
        let next = t.sweep_buckets(
            cursor,
            n,
            now_ns,
            |e| self.active_check(e, now_ns, &mut active),
            &mut expired,
        );
        t.take_ended(&mut ended);
        found.extend(expired.into_iter().map(|r| {
            let why = idle_reason(&r);
            (r, why)
        }));
        found.extend(active.into_iter().map(|r| (r, EndReason::ActiveTimeout)));
        found.extend(ended.into_iter().map(|(r, why)| {
            let reason = ended_reason(&r, why);
            (r, reason)
        }));
        next
    }

    /// A live entry past the active timeout: its record now, its counters started again.
    fn active_check(&self, e: &mut FlowEntry, now_ns: u64, out: &mut Vec<FlowRecord>) {
        if e.packets == [0, 0] || e.first_seen_ns.saturating_add(self.active_ns) > now_ns {
            return;
        }
        out.push(FlowRecord::of(e));
        // The next record counts from here: its start is this export (the first packet after
        // it is not known to the sweep).
        e.packets = [0, 0];
        e.bytes = [0, 0];
        e.tcp_flags = [0, 0];
        e.first_seen_ns = now_ns;
    }

    /// At shutdown, after the last frame: every flow still in the tables (and every ended one
    /// not yet taken) as a record; `drain` is called when the exporter's queue is full (the
    /// control thread sends what is queued) and the record tried once more. Only the first call
    /// exports.
    pub fn flush(&self, drain: &mut dyn FnMut()) {
        if self.flushed.swap(true, Relaxed) {
            return;
        }
        for (_, t) in self.tables.made() {
            self.flush_table(&mut lock(t), drain);
        }
    }

    /// [`FlowStatsStage::flush`] of one table: its ended flows not yet taken, then every flow
    /// in it (end of flow when TCP saw its end, else forced end). The GPU executor's host side
    /// runs it on a copy of each queue's device table once the kernels stopped.
    pub fn flush_table(&self, t: &mut FlowTable, drain: &mut dyn FnMut()) {
        let mut ended = Vec::new();
        t.take_ended(&mut ended);
        for (r, why) in ended {
            self.emit(&r, ended_reason(&r, why), drain);
        }
        for r in t.records() {
            let reason = if tcp_closed(&r) {
                EndReason::EndOfFlow
            } else {
                EndReason::ForcedEnd
            };
            self.emit(&r, reason, drain);
        }
    }

    /// A flow that ended inside a frame's table visit, read from a GPU queue's ended-flow ring
    /// (`stage::flow_stats_gpu`): exported as the CPU table's ended flows are.
    pub fn emit_ended(&self, r: &FlowRecord, why: Ended) {
        self.emit(r, ended_reason(r, why), &mut || {});
    }

    /// Records lost before they reached the stage (a GPU ring that was full).
    pub fn add_dropped(&self, n: u64) {
        self.counters[5].fetch_add(n, Relaxed);
    }

    /// One record to the exporter's queue (records without packets, left by an active-timeout
    /// export, are not sent).
    fn emit(&self, r: &FlowRecord, reason: EndReason, drain: &mut dyn FnMut()) {
        if r.packets == [0, 0] {
            return;
        }
        let slot = match reason {
            EndReason::IdleTimeout => 0,
            EndReason::ActiveTimeout => 1,
            EndReason::EndOfFlow => 2,
            EndReason::ForcedEnd => 3,
            EndReason::LackOfResources => 4,
        };
        self.counters[slot].fetch_add(1, Relaxed);
        let Some(q) = self.sink.get() else {
            self.counters[5].fetch_add(1, Relaxed);
            return;
        };
        let rec = ipfix_record(r, reason);
        let mut sent = q.try_push(rec.clone());
        if sent == Err(pktwarp_flow::ipfix::PushError::Full) {
            drain();
            sent = q.try_push(rec);
        }
        if sent.is_err() {
            self.counters[5].fetch_add(1, Relaxed);
        }
    }

    /// [`COUNTER_NAMES`] and their values; `records_dropped` includes the ended flows a table
    /// could not keep.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let lost: u64 = self.tables.made().map(|(_, t)| lock(t).ended_lost()).sum();
        COUNTER_NAMES
            .iter()
            .zip(&self.counters)
            .map(|(n, c)| (*n, c.load(Relaxed)))
            .map(|(n, v)| (n, if n == "records_dropped" { v + lost } else { v }))
            .collect()
    }
}

impl crate::stage::Stage {
    /// A flow-table stage's name and counters (`conntrack`, `flow_stats`), for the metrics and
    /// the summary; `None` for other stages.
    pub fn flow_table_counters(&self) -> Option<(&'static str, Vec<(&'static str, u64)>)> {
        match self {
            crate::stage::Stage::Conntrack(ct) => Some(("conntrack", ct.counters())),
            crate::stage::Stage::FlowStats(f) => Some(("flow_stats", f.counters())),
            _ => None,
        }
    }
}

/// TCP that saw its end (FIN or RST: the states from FIN_WAIT on, but SYN_SENT2).
fn tcp_closed(r: &FlowRecord) -> bool {
    r.key.proto == pktwarp_flow::key::PROTO_TCP && (st::FIN_WAIT..=st::CLOSE).contains(&r.tcp_state)
}

/// The end reason of a flow that aged out.
fn idle_reason(r: &FlowRecord) -> EndReason {
    if tcp_closed(r) {
        EndReason::EndOfFlow
    } else {
        EndReason::IdleTimeout
    }
}

/// The end reason of a flow that left the table inside `apply`.
fn ended_reason(r: &FlowRecord, why: Ended) -> EndReason {
    match why {
        Ended::Expired => idle_reason(r),
        Ended::Evicted => EndReason::LackOfResources,
        Ended::Reopened => EndReason::EndOfFlow,
    }
}

/// A table's flow as the exporter's record: the original direction's sender is the initiator;
/// times in ms; ICMP echo as NetFlow exporters write it (source port 0, destination port the
/// echo request's type << 8).
pub fn ipfix_record(r: &FlowRecord, end_reason: EndReason) -> IpfixRecord {
    use pktwarp_flow::key::{PROTO_ICMP, PROTO_ICMPV6};
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let v6 = r.key.ip_version == 6;
    let ip = |w: [u32; 4]| -> IpAddr {
        if v6 {
            let mut b = [0u8; 16];
            for (i, x) in w.iter().enumerate() {
                b[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(b))
        } else {
            IpAddr::V4(Ipv4Addr::from(w[0]))
        }
    };
    let (mut sp, mut dp) = (r.src.1, r.dst.1);
    match (r.key.proto, v6) {
        (PROTO_ICMP, false) => (sp, dp) = (0, 8 << 8),
        (PROTO_ICMPV6, true) => (sp, dp) = (0, 128 << 8),
        _ => {}
    }
    IpfixRecord {
        vlan: r.key.zone,
        src: ip(r.src.0),
        dst: ip(r.dst.0),
        src_port: sp,
        dst_port: dp,
        protocol: r.key.proto,
        packets: r.packets[0],
        octets: r.bytes[0],
        rev_packets: r.packets[1],
        rev_octets: r.bytes[1],
        // An active-timeout continuation starts at that export (the sweep's clock), which a
        // slower receive clock may put after its packets: never later than its last one.
        start_ms: r.first_seen_ns.min(r.last_seen_ns) / 1_000_000,
        end_ms: r.last_seen_ns / 1_000_000,
        tcp_flags: r.tcp_flags[0] as u8,
        rev_tcp_flags: r.tcp_flags[1] as u8,
        end_reason,
    }
}
