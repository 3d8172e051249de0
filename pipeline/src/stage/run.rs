//! A pipeline ready to run: the ordered stages of a queue, built once from the config and shared
//! (read-only) by every worker. Each worker keeps its own scratch state.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::burst::{Burst, FrameDesc};
use crate::counters::{QueueCounters, PARSE_STATUS_SLOTS};
use crate::meta::PacketMeta;
use crate::rewrite::stage::RouteState;
use crate::stage::acl::{AclResult, AclStage};
use crate::stage::custom::CustomSlot;
use crate::stage::descriptor::StageDescriptor;
use crate::stage::parse;
use crate::stage::registry::StageRegistry;
use crate::verdict::{Action, DropReason, Verdict};

pub use crate::stage::api::CustomStage;

/// Most stages one pipeline may have.
pub const MAX_STAGES: usize = 16;

/// One stage, ready to run.
pub enum Stage {
    Parse,
    Count,
    Acl(AclSlot),
    /// A stage of the application's own (`custom:` in the config), labelled by its own name in
    /// stage lists, metrics and the summary.
    Custom(Box<CustomSlot>),
    /// Rewrite stages (`crate::rewrite`): they change the frame in place.
    L2fwd(crate::rewrite::L2fwd),
    Vlan(crate::rewrite::Vlan),
    Dscp(crate::rewrite::Dscp),
    Route(Box<crate::rewrite::stage::RouteSlot>),
    /// ARP / ICMP echo responder (`respond:`): answers in place, out of the ingress port.
    Respond(Box<crate::rewrite::stage::RespondSlot>),
    /// Send time = receive time + delay (`tx_time:`), into `Verdict::send_ns`.
    TxTime(crate::rewrite::TxTime),
    /// Connection tracking (`conntrack:`): a flow table per queue, the state into the metadata.
    Conntrack(Box<crate::stage::conntrack::ConntrackStage>),
    /// Per-flow statistics for IPFIX export (`flow_stats:`), over conntrack's tables or its own.
    FlowStats(Box<crate::stage::flow_stats::FlowStatsStage>),
    /// Per-key token buckets (`rate_limit:`): a table per queue, over the rate dropped.
    RateLimit(Box<crate::stage::rate_limit::RateLimitStage>),
}

/// The published ACL tables of an `acl` stage. Immutable once published: a reload builds the new
/// tables aside and publishes them with one pointer swap; each worker loads the pointer once per
/// burst (so a burst is classified wholly by one rule set), and the old tables are freed when the
/// last worker still holding them drops its reference.
pub struct AclSlot {
    tables: ArcSwap<AclStage>,
}

impl AclSlot {
    pub fn new(stage: AclStage) -> Self {
        AclSlot {
            tables: ArcSwap::from_pointee(stage),
        }
    }

    /// The tables in force now.
    pub fn current(&self) -> Arc<AclStage> {
        self.tables.load_full()
    }
}

impl Stage {
    /// The stage's descriptor: a built-in's, or a registered stage's when it was registered
    /// with one (`StageRegistry::register_stage`); `None` for a stage registered by factory
    /// alone, whose description its factory and built stage give.
    pub fn descriptor(&self) -> Option<&'static StageDescriptor> {
        use crate::rewrite as rw;
        Some(match self {
            Stage::Parse => &parse::DESCRIPTOR,
            Stage::Count => &crate::stage::count::DESCRIPTOR,
            Stage::Acl(_) => &crate::stage::acl::DESCRIPTOR,
            Stage::Custom(c) => return c.descriptor(),
            Stage::L2fwd(_) => &rw::l2fwd::DESCRIPTOR,
            Stage::Vlan(_) => &rw::vlan::DESCRIPTOR,
            Stage::Dscp(_) => &rw::dscp::DESCRIPTOR,
            Stage::Route(_) => &rw::route::DESCRIPTOR,
            Stage::Respond(_) => &rw::respond::DESCRIPTOR,
            Stage::TxTime(_) => &rw::tx_time::DESCRIPTOR,
            Stage::Conntrack(_) => &crate::stage::conntrack::DESCRIPTOR,
            Stage::FlowStats(_) => &crate::stage::flow_stats::DESCRIPTOR,
            Stage::RateLimit(_) => &crate::stage::rate_limit::DESCRIPTOR,
        })
    }

    /// The stage's name in the config, logs and metrics: a built-in's key, or a custom stage's
    /// registered name.
    pub fn name(&self) -> &str {
        match self {
            Stage::Custom(c) => c.name(),
            s => s.descriptor().map_or("", |d| d.name),
        }
    }

    /// The registered stage's Rust implementation as its own type `T`, if this is one of type
    /// `T` (the crate that made it finds it so in a running pipeline: its host side, its
    /// reports).
    pub fn custom_as<T: std::any::Any + Send + Sync>(&self) -> Option<Arc<T>> {
        match self {
            Stage::Custom(c) => c.cpu_arc().as_any_arc().downcast::<T>().ok(),
            _ => None,
        }
    }

    /// The `rate_limit` stage, if this is one.
    pub fn rate_limit(&self) -> Option<&crate::stage::rate_limit::RateLimitStage> {
        match self {
            Stage::RateLimit(r) => Some(r),
            _ => None,
        }
    }

    /// Whether the stage reads the packet metadata (needs `parse` before it).
    pub fn reads_meta(&self) -> bool {
        match self {
            Stage::Custom(c) => c.reads_meta(),
            s => s.descriptor().is_some_and(|d| d.needs.reads_meta),
        }
    }

    /// The drop reasons the stage may give.
    pub fn drop_reasons(&self) -> &'static [DropReason] {
        match self {
            // A registered stage's descriptor says its reasons; without one it may give
            // `stage_drop` (what a drop that names no reason becomes).
            Stage::Custom(c) => c
                .descriptor()
                .map_or(&[DropReason::StageDrop], |d| d.drop_reasons),
            s => s.descriptor().map_or(&[], |d| d.drop_reasons),
        }
    }

    /// Whether the stage changes frame bytes (a rewrite stage, or an `acl` stage whose rule
    /// set has rewrite actions: a reload never changes that, see [`Pipeline::check_acl_reload`]).
    pub fn rewrites(&self) -> bool {
        match self {
            Stage::Acl(a) => a.current().writes_frames(),
            Stage::Custom(c) => c.needs().writes_frame,
            s => s.descriptor().is_some_and(|d| d.needs.writes_frame),
        }
    }
}

/// A frame as a stage list sees it: read-only bytes, or a writable buffer (the frame's `len`
/// bytes and the room after them).
enum Cur<'a> {
    Ro(&'a [u8]),
    Rw { buf: &'a mut [u8], len: usize },
}

impl Cur<'_> {
    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            Cur::Ro(f) => f,
            Cur::Rw { buf, len } => &buf[..(*len).min(buf.len())],
        }
    }
}

/// One frame handed to [`Pipeline::run_frames`] or [`Pipeline::run_burst_mut`].
pub(super) enum Item<'a> {
    Ro(FrameDesc, &'a [u8]),
    Rw(&'a mut FrameDesc, &'a mut [u8]),
}

/// One burst's loaded ACL and route tables, by stage index.
pub(super) type StageTables<'a> = (
    &'a [Option<Arc<AclStage>>; MAX_STAGES],
    &'a [Option<Arc<RouteState>>; MAX_STAGES],
);

/// The ACL and route tables one burst runs with, by stage index, and the rule-set generation
/// when they were loaded (an `acl` stage's tables carry their own).
#[derive(Clone, Default)]
pub struct BurstTables {
    generation: u64,
    acl: [Option<Arc<AclStage>>; MAX_STAGES],
    routes: [Option<Arc<RouteState>>; MAX_STAGES],
}

impl BurstTables {
    /// The generation of the first `acl` stage's tables (the ones a GPU classifies with);
    /// `None` without one.
    pub fn acl_generation(&self) -> Option<u64> {
        self.acl.iter().flatten().next().map(|a| a.generation)
    }
}

/// The ordered stages every queue runs.
pub struct Pipeline {
    pub stages: Vec<Stage>,
    /// Rule-set generation: 0 at start, +1 per published reload.
    generation: AtomicU64,
}

impl Pipeline {
    /// The stages in order. More than [`MAX_STAGES`] stages: the extra ones are not counted
    /// (use [`build`], which refuses them).
    pub fn new(stages: Vec<Stage>) -> Self {
        Pipeline {
            stages,
            generation: AtomicU64::new(0),
        }
    }

    /// Rules in the (first) ACL stage now in force.
    pub fn rule_count(&self) -> usize {
        self.acl().map(|a| a.rule_count()).unwrap_or(0)
    }

    /// The ACL tables in force now (first `acl` stage), if the pipeline has one.
    pub fn acl(&self) -> Option<Arc<AclStage>> {
        self.stages.iter().find_map(|s| match s {
            Stage::Acl(a) => Some(a.current()),
            _ => None,
        })
    }

    /// The rule-set generation now in force.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Publishes new ACL tables (built and validated by the caller) with one swap and returns
    /// the new generation. Workers pick them up at their next burst. Errors when the pipeline
    /// has no `acl` stage.
    pub fn reload_acl(&self, mut new: AclStage) -> anyhow::Result<u64> {
        self.check_acl_reload(&new)?;
        let slot = self
            .stages
            .iter()
            .find_map(|s| match s {
                Stage::Acl(a) => Some(a),
                _ => None,
            })
            .ok_or_else(|| anyhow::anyhow!("the pipeline has no acl stage to reload"))?;
        // The generation is stamped into the tables and published with them in the one swap, so
        // a burst reports exactly the generation it was classified with (two separate atomics
        // could pair a generation with the other rule set). Reloads come from the one control
        // thread, so generations are stored in order.
        let g = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        new.generation = g;
        slot.tables.store(Arc::new(new));
        Ok(g)
    }

    /// Whether `new` may replace the ACL tables in force: not when one rule set has rewrite
    /// actions and the other none (the pipeline would change between reading and rewriting
    /// frames, and the GPU kernel between its fused and composed templates: restart needed).
    pub fn check_acl_reload(&self, new: &AclStage) -> anyhow::Result<()> {
        let Some(now) = self.acl() else {
            anyhow::bail!("the pipeline has no acl stage to reload");
        };
        // The reloaded stage is the first `acl`: its `ct:` rules need a `conntrack` before it.
        for (i, s) in self.stages.iter().enumerate() {
            match s {
                Stage::Conntrack(_) => break,
                Stage::Acl(_) => {
                    check_ct_rule_set(new, i)?;
                    break;
                }
                _ => {}
            }
        }
        if now.writes_frames() != new.writes_frames() && now.has_rewrites() == new.has_rewrites() {
            let (a, b) = if new.writes_frames() {
                (
                    "rewrites frame bytes (`set: { dscp / dst_mac }`)",
                    "only routes",
                )
            } else {
                ("only routes (`set: { port }`)", "rewrites frame bytes")
            };
            anyhow::bail!(
                "{}: the new rule set {a} where the one in force {b}: that changes how frames \
                 are held and sent, restart needed",
                new.path.display()
            );
        }
        if now.has_rewrites() != new.has_rewrites() {
            let (a, b) = if new.has_rewrites() {
                ("has rewrite actions (`set:`)", "has none")
            } else {
                ("has no rewrite actions (`set:`)", "has some")
            };
            anyhow::bail!(
                "{}: the new rule set {a} where the one in force {b}: that changes the \
                 pipeline's kernel, restart needed",
                new.path.display()
            );
        }
        Ok(())
    }

    /// The stages' names in order (custom stages by their registered names).
    pub fn stage_names(&self) -> Vec<String> {
        self.stages.iter().map(|s| s.name().to_string()).collect()
    }

    /// Bytes of room each frame needs after it for the stage list to grow it in place: 4 per
    /// `vlan` push, and each writing registered stage's `frame_room`. The CPU executor's ingest
    /// reserves it ([`Burst::push_with_room`]), the GPU executor's ring slots too.
    pub fn frame_room(&self) -> usize {
        self.stages
            .iter()
            .map(|s| match s {
                Stage::Vlan(crate::rewrite::Vlan::Push { .. }) => 4,
                Stage::Custom(c) if c.needs().writes_frame => usize::from(c.needs().frame_room),
                _ => 0,
            })
            .sum()
    }

    /// Whether any stage rewrites frames (then [`Pipeline::run_burst_mut`] keeps the result).
    pub fn rewrites(&self) -> bool {
        self.stages.iter().any(Stage::rewrites)
    }

    /// Re-reads every `route` stage's route file and publishes the new tables, all built
    /// before any is published (see [`Pipeline::prepare_routes`]). Returns each stage's (IPv4
    /// routes, IPv6 routes, generation); a bad file changes nothing and names file, line, key.
    pub fn reload_routes(&self) -> Result<Vec<(usize, usize, u64)>, flow_rules::error::RuleError> {
        let next = self.prepare_routes()?;
        Ok(self.publish_routes(next))
    }

    /// Runs every stage on every frame of `burst`, writing one verdict (and one metadata record)
    /// per frame, and counting into `c` (this worker is the single writer of its queue's worker
    /// counters). Returns the rule-set generation the burst was classified with. The frames are
    /// read-only: rewrite stages run on a scratch copy (verdicts, metadata and counters are
    /// theirs, the rewritten bytes are not kept; see [`Pipeline::run_burst_mut`]).
    pub fn run_burst(
        &self,
        burst: &Burst,
        metas: &mut Vec<PacketMeta>,
        verdicts: &mut Vec<Verdict>,
        c: &QueueCounters,
    ) -> u64 {
        self.run_frames(burst.frames().map(|(d, f)| (*d, f)), metas, verdicts, c)
    }

    /// [`Pipeline::run_burst`] that rewrites the burst's frames in place: a frame's bytes,
    /// and its `len` (and `wire_len`) when a stage changes its length (within its room,
    /// [`Pipeline::frame_room`]).
    pub fn run_burst_mut(
        &self,
        burst: &mut Burst,
        metas: &mut Vec<PacketMeta>,
        verdicts: &mut Vec<Verdict>,
        c: &QueueCounters,
    ) -> u64 {
        self.run_items(
            burst.frames_mut().map(|(d, b)| Item::Rw(d, b)),
            metas,
            verdicts,
            c,
        )
    }

    /// [`Pipeline::run_burst`] over any source of frames: each item is a frame's descriptor
    /// (`len` and `port` are read; `offset` is not) and its bytes, wherever they live (a
    /// [`Burst`], or the mbufs of a zero-copy DPDK burst). One verdict and one metadata record
    /// per frame, in order. Read-only, as [`Pipeline::run_burst`].
    pub fn run_frames<'f>(
        &self,
        frames: impl ExactSizeIterator<Item = (FrameDesc, &'f [u8])>,
        metas: &mut Vec<PacketMeta>,
        verdicts: &mut Vec<Verdict>,
        c: &QueueCounters,
    ) -> u64 {
        self.run_items(frames.map(|(d, f)| Item::Ro(d, f)), metas, verdicts, c)
    }

    /// [`Pipeline::run_frames`] that rewrites each frame in place wherever it lives (the
    /// mbufs of a zero-copy DPDK burst): its bytes, and its descriptor's `len` when a stage
    /// changes its length within the slice (the frame and its room).
    pub fn run_frames_mut<'f>(
        &self,
        frames: impl ExactSizeIterator<Item = (&'f mut FrameDesc, &'f mut [u8])>,
        metas: &mut Vec<PacketMeta>,
        verdicts: &mut Vec<Verdict>,
        c: &QueueCounters,
    ) -> u64 {
        self.run_items(frames.map(|(d, b)| Item::Rw(d, b)), metas, verdicts, c)
    }

    /// The ACL and route tables in force now, one load of each pointer (what a burst is run
    /// with: [`Pipeline::run_burst_mut_with`]).
    pub fn load_tables(&self) -> BurstTables {
        let mut t = BurstTables {
            generation: self.generation(),
            acl: Default::default(),
            routes: Default::default(),
        };
        for ((slot, route), s) in t.acl.iter_mut().zip(t.routes.iter_mut()).zip(&self.stages) {
            match s {
                Stage::Acl(a) => *slot = Some(a.current()),
                Stage::Route(r) => *route = Some(r.current()),
                _ => {}
            }
        }
        t
    }

    /// [`Pipeline::run_burst_mut`] with tables loaded before ([`Pipeline::load_tables`]): the
    /// verifier re-runs a sampled burst on the very tables the executor used, whatever reload
    /// happened in between.
    pub fn run_burst_mut_with(
        &self,
        burst: &mut Burst,
        metas: &mut Vec<PacketMeta>,
        verdicts: &mut Vec<Verdict>,
        c: &QueueCounters,
        tables: &BurstTables,
    ) -> u64 {
        let items = burst.frames_mut().map(|(d, b)| Item::Rw(d, b));
        self.run_items_with(items, metas, verdicts, c, tables)
    }

    fn run_items<'f>(
        &self,
        frames: impl ExactSizeIterator<Item = Item<'f>>,
        metas: &mut Vec<PacketMeta>,
        verdicts: &mut Vec<Verdict>,
        c: &QueueCounters,
    ) -> u64 {
        // One load of each ACL / route table pointer per burst (no allocation: at most
        // MAX_STAGES).
        let tables = self.load_tables();
        self.run_items_with(frames, metas, verdicts, c, &tables)
    }

    fn run_items_with<'f>(
        &self,
        frames: impl ExactSizeIterator<Item = Item<'f>>,
        metas: &mut Vec<PacketMeta>,
        verdicts: &mut Vec<Verdict>,
        c: &QueueCounters,
        loaded: &BurstTables,
    ) -> u64 {
        let (generation, tables, routes) = (loaded.generation, &loaded.acl, &loaded.routes);
        // The loaded tables decide for the acl stages (a burst is wholly one rule set's).
        let rewrites = self
            .stages
            .iter()
            .any(|s| !matches!(s, Stage::Acl(_)) && s.rewrites())
            || tables.iter().flatten().any(|t| t.writes_frames());
        // `set: { port }` alone: read-only frames, routed frame by frame.
        let acl_routes = tables.iter().flatten().any(|t| t.has_rewrites());
        let mut t = Tally::default();
        // The burst-wise ACL pass walks the one classifier: a rule set with `ct:` rules (its
        // per-state classifiers) runs frame by frame.
        let ct_rules = tables.iter().flatten().any(|t| t.ct.is_some());
        if !rewrites && !ct_rules && !acl_routes && self.burstwise() {
            // Stage by stage over the burst (see stage::burstwise): same results.
            self.run_burstwise(frames, metas, verdicts, tables, &mut t, c);
        } else {
            self.run_framewise(
                frames,
                metas,
                verdicts,
                (tables, routes),
                rewrites,
                &mut t,
                c,
            );
        }
        self.flush_tally(&t, c);
        // The generation of the tables actually used (see reload_acl).
        tables
            .iter()
            .flatten()
            .next()
            .map_or(generation, |t| t.generation)
    }

    /// Every stage on one frame, then the next frame: any stage list.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_framewise<'f>(
        &self,
        frames: impl ExactSizeIterator<Item = Item<'f>>,
        metas: &mut Vec<PacketMeta>,
        verdicts: &mut Vec<Verdict>,
        (tables, routes): StageTables<'_>,
        rewrites: bool,
        t: &mut Tally,
        c: &QueueCounters,
    ) {
        let room = self.frame_room();
        // Read-only frames meet rewrite stages on a copy (grown once, reused per frame).
        let mut scratch: Vec<u8> = Vec::new();
        let n = frames.len();
        metas.clear();
        metas.resize(n, PacketMeta::default());
        verdicts.clear();
        verdicts.resize(n, Verdict::PASS);
        for ((meta, v), item) in metas.iter_mut().zip(verdicts.iter_mut()).zip(frames) {
            let (desc, mut cur, back) = match item {
                Item::Ro(d, f) if rewrites => {
                    scratch.clear();
                    scratch.extend_from_slice(f);
                    scratch.resize(f.len() + room, 0);
                    let cur = Cur::Rw {
                        buf: &mut scratch[..],
                        len: f.len(),
                    };
                    (d, cur, None)
                }
                Item::Ro(d, f) => (d, Cur::Ro(f), None),
                Item::Rw(d, buf) => {
                    let len = d.len as usize;
                    (*d, Cur::Rw { buf, len }, Some(d))
                }
            };
            self.run_frame(&desc, &mut cur, meta, v, tables, routes, t, c);
            if let (Some(d), Cur::Rw { len, .. }) = (back, &cur) {
                let new = *len as u32;
                if new != d.len {
                    // Same change on the wire (a VLAN tag is 4 bytes there too).
                    d.wire_len = (i64::from(d.wire_len) + i64::from(new) - i64::from(d.len))
                        .max(i64::from(new)) as u32;
                    d.len = new;
                }
            }
            match v.action {
                Action::Pass => t.passed += 1,
                Action::Mirror => t.mirrored += 1,
                Action::ToHost => t.to_host += 1,
                Action::Drop => {
                    if let Some(r) = v.reason {
                        t.drops[r as usize] += 1;
                    }
                }
            }
        }
    }

    /// Adds one burst's tally to the queue's counters.
    pub(super) fn flush_tally(&self, t: &Tally, c: &QueueCounters) {
        for (si, _) in self.stages.iter().enumerate().take(MAX_STAGES) {
            c.stage_frames[si].add(t.stage_frames[si]);
            c.stage_bytes[si].add(t.stage_bytes[si]);
        }
        c.passed.add(t.passed);
        c.mirrored.add(t.mirrored);
        c.to_host.add(t.to_host);
        c.acl_default.add(t.acl_default);
        // The ingest and TX threads count their own reasons (one writer per counter).
        let theirs = [
            DropReason::RingFull as usize,
            DropReason::TxError as usize,
            DropReason::TxHorizon as usize,
        ];
        for (r, n) in t.drops.iter().enumerate() {
            if *n > 0 && !theirs.contains(&r) {
                c.drops[r].add(*n);
            }
        }
    }

    /// The stage list on one frame.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn run_frame(
        &self,
        desc: &FrameDesc,
        cur: &mut Cur<'_>,
        meta: &mut PacketMeta,
        v: &mut Verdict,
        tables: &[Option<Arc<AclStage>>; MAX_STAGES],
        routes: &[Option<Arc<RouteState>>; MAX_STAGES],
        t: &mut Tally,
        c: &QueueCounters,
    ) {
        use crate::rewrite::stage::apply_outcome;
        for (si, stage) in self.stages.iter().enumerate() {
            if let Some(slot) = t.stage_frames.get_mut(si) {
                *slot += 1;
            }
            match stage {
                Stage::Parse => {
                    parse::parse(cur.bytes(), meta);
                    meta.steer_mark = desc.mark;
                    if meta.status != 0 {
                        *v = Verdict::drop(DropReason::ParseError);
                        let s = (meta.status as usize).min(PARSE_STATUS_SLOTS - 1);
                        c.parse_status[s].add(1);
                        break;
                    }
                }
                Stage::Count => {
                    if let Some(slot) = t.stage_bytes.get_mut(si) {
                        *slot += cur.bytes().len() as u64;
                    }
                }
                Stage::Custom(c) => {
                    match cur {
                        // A stage that writes the frame gets it writable (`run_items` made
                        // every frame so: the list rewrites).
                        Cur::Rw { buf, len } if c.needs().writes_frame => {
                            let mut f = crate::stage::api::FrameMut::new(buf, len);
                            c.cpu().process_mut(&mut f, meta, v);
                        }
                        _ => {
                            let rx = crate::stage::api::RxInfo {
                                queue: desc.queue,
                                timestamp_ns: desc.timestamp_ns,
                            };
                            c.cpu().process_rx(cur.bytes(), rx, meta, v)
                        }
                    }
                    if v.action == Action::Drop {
                        v.reason.get_or_insert(DropReason::StageDrop);
                        break;
                    }
                }
                Stage::TxTime(op) => op.apply(desc.timestamp_ns, v),
                Stage::Conntrack(ct) => ct.apply(desc, cur.bytes(), meta),
                Stage::FlowStats(fs) => fs.apply(desc, cur.bytes(), meta),
                Stage::RateLimit(rl) => {
                    rl.apply(desc, meta, v);
                    if v.action == Action::Drop {
                        break;
                    }
                }
                Stage::Acl(_) => {
                    let Some(acl) = tables.get(si).and_then(Option::as_ref) else {
                        continue;
                    };
                    let r = acl.classify(meta, desc.port);
                    // The frame's drop is tallied with the others after its stage list.
                    if acl_verdict(r, v, t, c) {
                        break;
                    }
                    if r.rule != flow_rules::abi::ACL_NO_MATCH && acl.has_rewrites() {
                        // Writable when the tables write bytes (run_items saw to it); a rule
                        // set that only routes (`set: { port }`) sees read-only frames.
                        match cur {
                            Cur::Rw { buf, len } => {
                                let n = (*len).min(buf.len());
                                acl.apply_rewrite(r.rule, &mut buf[..n], meta, v);
                            }
                            Cur::Ro(_) => acl.apply_route(r.rule, v),
                        }
                    }
                }
                _ => {
                    // A rewrite stage: `run_items` made every frame writable when the list has
                    // one.
                    let Cur::Rw { buf, len } = cur else { continue };
                    let n = (*len).min(buf.len());
                    let (out, ports) = match stage {
                        Stage::L2fwd(op) => (op.apply(&mut buf[..n], meta, v), &[][..]),
                        Stage::Dscp(op) => (op.apply(&mut buf[..n], meta, v), &[][..]),
                        Stage::Vlan(op) => (op.apply_in(buf, len, meta, v), &[][..]),
                        Stage::Route(_) => match routes.get(si).and_then(Option::as_ref) {
                            Some(r) => (r.route.apply(&mut buf[..n], meta, v), &r.out_ports[..]),
                            None => continue,
                        },
                        Stage::Respond(r) => {
                            // A reply may be shorter than the request (no padding).
                            if r.op.apply_in(buf, len, meta, v) == crate::rewrite::Outcome::Reply {
                                v.out_port = r.out_port(desc.port);
                            }
                            continue;
                        }
                        _ => continue,
                    };
                    if apply_outcome(out, v, ports) {
                        break;
                    }
                }
            }
        }
    }
}

/// An `acl` stage's result `r` on one frame, as the frame-by-frame and the burst-wise loop
/// both apply it: the default or rule-hit count, then the verdict's rule, mark and action (a
/// drop with its reason, `AclDrop`). True when the frame is dropped; the caller tallies the
/// drop (the frame-by-frame loop counts every reason once the frame's list is done).
#[inline]
pub(super) fn acl_verdict(r: AclResult, v: &mut Verdict, t: &mut Tally, c: &QueueCounters) -> bool {
    if r.rule == flow_rules::abi::ACL_NO_MATCH {
        t.acl_default += 1;
    } else {
        match c.rule_hits.get(r.rule as usize) {
            Some(h) => h.add(1),
            // A reload grew the rule set past the counters' size.
            None => c.rule_hits_other.add(1),
        }
    }
    v.rule = r.rule;
    v.mark = r.mark;
    v.action = r.action;
    if r.action == Action::Drop {
        v.reason = Some(DropReason::AclDrop);
        return true;
    }
    false
}

/// One burst's counts, added to the queue's counters once at its end.
pub(super) struct Tally {
    pub(super) stage_frames: [u64; MAX_STAGES],
    pub(super) stage_bytes: [u64; MAX_STAGES],
    pub(super) passed: u64,
    pub(super) mirrored: u64,
    pub(super) to_host: u64,
    pub(super) acl_default: u64,
    pub(super) drops: [u64; DropReason::COUNT],
}

impl Default for Tally {
    #[inline]
    fn default() -> Self {
        Tally {
            stage_frames: [0; MAX_STAGES],
            stage_bytes: [0; MAX_STAGES],
            passed: 0,
            mirrored: 0,
            to_host: 0,
            acl_default: 0,
            drops: [0; DropReason::COUNT],
        }
    }
}

/// Builds the runnable pipeline from the config's stage list (built-in stages only: a
/// `custom:` stage is an error; see [`build_with`]).
pub fn build(
    stages: &[crate::stage::config::StageConfig],
    resolve: impl Fn(&Path) -> std::path::PathBuf,
) -> anyhow::Result<Pipeline> {
    build_with(stages, resolve, &StageRegistry::default())
}

/// Builds the runnable pipeline from the config's stage list, with `custom:` stages from
/// `registry`.
pub fn build_with(
    stages: &[crate::stage::config::StageConfig],
    resolve: impl Fn(&Path) -> std::path::PathBuf,
    registry: &StageRegistry,
) -> anyhow::Result<Pipeline> {
    build_for(stages, resolve, registry, None)
}

/// [`build_with`], knowing the config's ports ([`crate::rewrite::stage::PortNames`]): a
/// `route` next hop's port must be one with a transmit side and becomes its index
/// (`Verdict::out_port`); a `respond` reply goes to its ingress port's transmit side. `None`:
/// each route table's own port order, replies to the default output.
pub fn build_for(
    stages: &[crate::stage::config::StageConfig],
    resolve: impl Fn(&Path) -> std::path::PathBuf,
    registry: &StageRegistry,
    ports: Option<&crate::rewrite::stage::PortNames>,
) -> anyhow::Result<Pipeline> {
    let tx_ports = ports.map(|p| &p.tx[..]);
    use crate::rewrite as rw;
    use crate::stage::config::StageConfig;
    if stages.len() > MAX_STAGES {
        anyhow::bail!(
            "a pipeline has at most {MAX_STAGES} stages, this one has {}",
            stages.len()
        );
    }
    let mut out = Vec::with_capacity(stages.len());
    // `flow_stats` is built after the loop: it shares a `conntrack` stage's tables wherever
    // that stands in the list.
    let mut flow_stats = None;
    for (i, s) in stages.iter().enumerate() {
        out.push(match s {
            StageConfig::Parse => Stage::Parse,
            StageConfig::Count => Stage::Count,
            StageConfig::Acl(a) => {
                Stage::Acl(AclSlot::new(AclStage::from_config(a, &resolve, tx_ports)?))
            }
            StageConfig::Keyed(k) => Stage::Custom(Box::new(keyed_stage(k, &resolve)?)),
            StageConfig::Custom(c) => Stage::Custom(Box::new(CustomSlot::from_registry(
                &c.name, &c.options, registry,
            )?)),
            StageConfig::L2fwd(c) => Stage::L2fwd(rw::L2fwd::new(c)?),
            StageConfig::Vlan(c) => Stage::Vlan(rw::Vlan::new(c)?),
            StageConfig::Ttl => Stage::Custom(Box::new(CustomSlot::builtin(
                &rw::ttl::DESCRIPTOR,
                rw::ttl::factory(),
                &serde_json::Value::Null,
            )?)),
            StageConfig::Dscp(c) => Stage::Dscp(rw::Dscp::new(c)?),
            StageConfig::TxTime(c) => Stage::TxTime(rw::TxTime::new(c)?),
            StageConfig::Conntrack(c) => {
                Stage::Conntrack(Box::new(crate::stage::conntrack::ConntrackStage::new(c)?))
            }
            StageConfig::FlowStats(c) => {
                if flow_stats.replace((i, c)).is_some() {
                    anyhow::bail!("pipeline[{i}]: a pipeline has at most one `flow_stats` stage");
                }
                Stage::Count // replaced below
            }
            StageConfig::RateLimit(c) => {
                Stage::RateLimit(Box::new(crate::stage::rate_limit::RateLimitStage::new(c)?))
            }
            StageConfig::Inspect(c) => Stage::Custom(Box::new(
                CustomSlot::builtin(
                    &crate::stage::inspect::DESCRIPTOR,
                    crate::stage::inspect::factory(),
                    &c.resolved(&resolve)
                        .with_flow_table(crate::stage::inspect::conntrack_before(stages, i))
                        .options(),
                )
                .map_err(|e| anyhow::anyhow!("pipeline[{i}]: {e:#}"))?,
            )),
            StageConfig::Respond(c) => Stage::Respond(Box::new(rw::stage::RespondSlot {
                op: rw::Respond::new(c)?,
                ingress_out: ports.map(|p| p.ingress_out()).unwrap_or_default(),
            })),
            StageConfig::Route(c) => Stage::Route(Box::new(
                rw::stage::RouteSlot::load(&resolve(&c.routes), tx_ports)
                    .map_err(|e| anyhow::anyhow!("stage `route`: {e}"))?,
            )),
        });
    }
    if let Some((i, c)) = flow_stats {
        let tables = out.iter().find_map(|s| match s {
            Stage::Conntrack(ct) => Some(Arc::clone(ct.tables())),
            _ => None,
        });
        let fs = crate::stage::flow_stats::FlowStatsStage::new(c, tables)?;
        out[i] = Stage::FlowStats(Box::new(fs));
    }
    let mut parsed = false;
    for (i, s) in out.iter().enumerate() {
        if s.reads_meta() && !parsed {
            anyhow::bail!(
                "pipeline[{i}]: the `{}` stage reads the packet metadata and needs a `parse` \
                 stage before it",
                s.name()
            );
        }
        parsed |= matches!(s, Stage::Parse);
    }
    check_ct_rules(&out)?;
    Ok(Pipeline::new(out))
}

/// An `acl` stage whose rules match on `ct:` needs a `conntrack` stage before it (else every
/// frame is `untracked`): the error names the rule's file and line.
fn check_ct_rules(stages: &[Stage]) -> anyhow::Result<()> {
    let mut tracked = false;
    for (i, s) in stages.iter().enumerate() {
        match s {
            Stage::Conntrack(_) => tracked = true,
            Stage::Acl(a) if !tracked => check_ct_rule_set(&a.current(), i)?,
            _ => {}
        }
    }
    Ok(())
}

/// The error for a rule set with `ct:` rules at `pipeline[i]` with no `conntrack` before it.
pub(crate) fn check_ct_rule_set(a: &AclStage, i: usize) -> anyhow::Result<()> {
    if let Some(r) = a.first_ct_rule() {
        anyhow::bail!(
            "{}: key `ct`: the rule matches on the connection state, but pipeline[{i}] (`acl`)              has no `conntrack` stage before it: add `- conntrack: {{ entries: N }}` after              `parse`",
            r.loc
        );
    }
    Ok(())
}

/// A keyed stage of a config (`crate::stage::keyed`), built from its checked options.
fn keyed_stage(
    k: &crate::stage::keyed::KeyedStageConfig,
    resolve: &impl Fn(&Path) -> std::path::PathBuf,
) -> anyhow::Result<CustomSlot> {
    let d = k.stage.descriptor();
    let Some(options) = &k.options else {
        anyhow::bail!(
            "stage `{}`: its options were not checked (the config was not read by \
             `config::parse_str`)",
            d.name
        );
    };
    let built = k
        .stage
        .build(options.as_ref(), resolve)
        .map_err(|e| anyhow::anyhow!("stage `{}`: {e:#}", d.name))?;
    CustomSlot::with_descriptor(d, built)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// run_frames over frames held outside any Burst (as the zero-copy DPDK path holds them in
    /// mbufs) gives the same metadata, verdicts, counters and generation as run_burst.
    #[test]
    fn run_frames_equals_run_burst() {
        let pipeline = crate::stage::test_inline_filter_pipeline();
        // The multi-protocol capture and 300 generated IMIX frames, some truncated (parse
        // errors), over two ports.
        let frames = crate::testdata::mixed_frames(300);
        assert_eq!(frames.len(), 23 + 300);
        let owned: Vec<(FrameDesc, Vec<u8>)> = frames
            .into_iter()
            .enumerate()
            .map(|(i, (bytes, timestamp_ns))| {
                let d = FrameDesc {
                    port: (i % 2) as u16,
                    len: bytes.len() as u32,
                    wire_len: bytes.len() as u32,
                    timestamp_ns,
                    ..FrameDesc::default()
                };
                (d, bytes)
            })
            .collect();
        let mut burst = Burst::default();
        for (d, f) in &owned {
            burst.push(f, *d);
        }
        let rules_n = pipeline.rule_count();
        let (c1, c2) = (
            QueueCounters::new(3, rules_n),
            QueueCounters::new(3, rules_n),
        );
        let (mut m1, mut v1, mut m2, mut v2) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let g1 = pipeline.run_burst(&burst, &mut m1, &mut v1, &c1);
        let g2 = pipeline.run_frames(
            owned.iter().map(|(d, f)| (*d, f.as_slice())),
            &mut m2,
            &mut v2,
            &c2,
        );
        assert_eq!(g1, g2);
        assert_eq!(v1.len(), owned.len());
        assert_eq!(m1, m2);
        assert_eq!(v1, v2);
        assert_eq!(c1.stage_snapshot(), c2.stage_snapshot());
        // The comparison covered passes and parse drops.
        assert!(c1.passed.get() > 0);
        assert!(c1.drop_count(DropReason::ParseError) > 0);
    }
}
