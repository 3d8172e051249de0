//! `inspect`: payload inspection with IDS rules in Suricata syntax (pktwarp-inspect,
//! docs/inspect.md), on the CPU executor.
//!
//! Each IP frame's L4 payload (the inner packet's when `parse` found a VXLAN or GTP-U tunnel
//! with an inner L4 header) and the HTTP/1.x buffers of a head the TCP segment carries go
//! through the rule set's prefilter, then each candidate rule's full check
//! ([`pktwarp_inspect::engine`]). A matching `pass` rule ends inspection; otherwise every
//! matching rule alerts (its hit counter, an EVE line) and a `drop` / `reject` rule drops the
//! frame (`inspect_drop`); an alerted frame that is not dropped goes to the host or is mirrored
//! when `alert_to` says so.
//!
//! The rule set is one immutable build shared read-only by every queue, published by one
//! pointer swap: SIGHUP re-reads the rule files aside ([`CustomStage::reload_files`]) and a bad
//! file leaves the set in force, the error naming its file and line.
//!
//! It comes through the registry door (as `ttl` does): a factory builds it from its options
//! (a JSON object of [`InspectStageConfig`], paths resolved), so its counters, metric family
//! (`pktwarp_inspect_rule_hits_total{sid}`), summary section and hooks are a registered
//! stage's. On the GPU executor it is the library stage `pw_stage_inspect` (inspect_gpu.rs)
//! for rule sets of the payload without state; the GPU refuses any other, naming why, and
//! `auto` picks the CPU.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwap;
use pktwarp_inspect::alert::{
    Alert, AlertAction, AlertLog, AlertLogHandle, AlertSender, EveConfig, RuleHits,
};
use pktwarp_inspect::engine::{Decision, RuleSet, Scratch, SetConfig};
use pktwarp_inspect::eval::state::{StateConfig, StateCounters, Stateful};
use pktwarp_inspect::eval::{self, decode};
use serde::{Deserialize, Serialize};

use crate::meta::{mf, PacketMeta};
use crate::stage::api::{CustomStage, FilesReload, HookCtx, RxInfo, StageHooks, StageMetricFamily};
use crate::stage::descriptor::{GpuImpl, StageDescriptor, StageNeeds};
use crate::verdict::{Action, DropReason, Verdict};

/// The stage's counters (`pktwarp_stage_counter_total{stage="inspect"}`).
pub const COUNTER_NAMES: [&str; 7] = [
    "inspected",
    "alerts",
    "drops",
    "passes",
    "heads_split",
    "eve_dropped",
    "eve_lost",
];

/// The `inspect` stage, described (the stage descriptor, `stage::descriptor`).
pub const DESCRIPTOR: StageDescriptor = StageDescriptor {
    name: "inspect",
    usage: "`inspect: { rules: [FILE, DIR or GLOB], vars, strict, eve: {...}, alert_to, gpu_rules_only, state: { flows, trackers } }`",
    summary: "IDS rules in Suricata syntax (docs/inspect.md): a multi-pattern prefilter over the L4 payload (inside VXLAN / GTP-U too) and the HTTP buffers, then each candidate rule's full check; `drop` rules drop (`inspect_drop`), alerts are counted per rule and written as EVE JSON; reloaded by SIGHUP. On the GPU: payload and HTTP rules, flowbits and thresholds in per-queue device tables (EVE payloads keep it on the CPU)",
    needs: StageNeeds {
        reads_meta: true,
        reads_payload: true,
        reads_time: true,
        ..StageNeeds::NONE
    },
    drop_reasons: &[DropReason::InspectDrop],
    counters: &COUNTER_NAMES,
    gpu: GpuImpl::Library {
        function: "pw_stage_inspect",
    },
    reloads: true,
};

/// Rule-hit series a scrape shows at most (the rest summed under `sid="other"`).
pub const MAX_SID_SERIES: usize = 500;
/// Rules the summary lists by hits.
pub const TOP_RULES: usize = 10;

/// Where an alerted frame that is not dropped goes.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AlertTo {
    /// On as it was (the alert is in the log and the counters).
    #[default]
    None,
    /// To the slow path (`output.to_host`) instead of the output port.
    Host,
    /// To the output port and a copy to the mirror port (`output.mirror`).
    Mirror,
}

/// Why `auto` keeps inspection on the CPU: on the H100 (2026-12-07) the GPU stage passed a
/// frame the CPU sent to the host, and a rule reload on a running persistent kernel never
/// finished (docs/inspect.md, "Executors").
pub const GPU_CAUTION: &str = "the inspect stage's GPU implementation is not yet equal to the \
     CPU's on a GPU (docs/inspect.md, \"Executors\"); executor.kind: gpu runs it there";

/// `inspect:` in the pipeline.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct InspectStageConfig {
    /// Rule files, folders (their `*.rules`) or globs in the last component, relative to the
    /// config file.
    pub rules: Vec<PathBuf>,
    /// Rule variables over Suricata's defaults (`HOME_NET`, `EXTERNAL_NET`, `HTTP_PORTS`, ...).
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
    /// A malformed rule refuses the rule set, naming its file and line (default); `false`
    /// skips it with its reason (for third-party sets with a few rules pktwarp cannot read).
    #[serde(default = "yes")]
    pub strict: bool,
    /// The EVE JSON alert log (docs/inspect-alerts.md); none: alerts are counted only.
    #[serde(default)]
    pub eve: Option<EveConfig>,
    #[serde(default)]
    pub alert_to: AlertTo,
    /// Load only the rules the GPU stage runs too, on either executor, so a set runs the same
    /// on both; the others are skipped, counted by reason (the GPU takes every rule that loads,
    /// state included: a set is refused there only as a whole).
    #[serde(default)]
    pub gpu_rules_only: bool,
    /// Sizes of each queue's flowbits and threshold tables (docs/inspect.md, "Flow keywords"),
    /// on either executor.
    #[serde(default)]
    pub state: StateLimits,
    /// A `conntrack` stage runs before this one ([`conntrack_before`]): set by the pipeline
    /// build, not a config key.
    #[serde(skip)]
    pub flow_table: bool,
}

/// `inspect.state`: the most flows with flowbits and the most threshold counters each queue
/// keeps (what does not fit is counted, `flows_full` / `trackers_full`).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StateLimits {
    #[serde(default = "default_state_entries")]
    pub flows: usize,
    #[serde(default = "default_state_entries")]
    pub trackers: usize,
}

/// Most entries `inspect.state.flows` / `.trackers` may ask for (the GPU's tables take twice as
/// many slots, sized in u32).
pub const MAX_STATE_ENTRIES: usize = 1 << 24;

fn default_state_entries() -> usize {
    StateConfig::default().max_flows
}

impl Default for StateLimits {
    fn default() -> Self {
        StateLimits {
            flows: default_state_entries(),
            trackers: default_state_entries(),
        }
    }
}

impl StateLimits {
    /// The tables' config (the idle time of a flow's bits is the default's).
    pub fn config(&self) -> StateConfig {
        StateConfig {
            max_flows: self.flows,
            max_trackers: self.trackers,
            ..StateConfig::default()
        }
    }
}

/// The options key that carries [`InspectStageConfig::flow_table`] to the factory.
const FLOW_TABLE_OPTION: &str = "conntrack_before";

/// Whether a `conntrack` stage stands before `stages[i]`: then the connection state and
/// direction are in the frame's metadata and `inspect` loads the flow keywords.
pub fn conntrack_before(stages: &[crate::stage::config::StageConfig], i: usize) -> bool {
    stages
        .iter()
        .take(i)
        .any(|s| matches!(s, crate::stage::config::StageConfig::Conntrack(_)))
}

fn yes() -> bool {
    true
}

impl InspectStageConfig {
    /// The config with its paths resolved (`resolve`: against the config file's folder).
    pub fn resolved(&self, resolve: &impl Fn(&Path) -> PathBuf) -> InspectStageConfig {
        let mut c = self.clone();
        c.rules = c.rules.iter().map(|p| resolve(p)).collect();
        if let Some(e) = &mut c.eve {
            e.path = resolve(&e.path);
            e.classification = e.classification.as_ref().map(|p| resolve(p));
        }
        c
    }

    /// The config with [`InspectStageConfig::flow_table`] set.
    pub fn with_flow_table(mut self, flow_table: bool) -> InspectStageConfig {
        self.flow_table = flow_table;
        self
    }

    /// The options the factory builds from (the config and whether conntrack runs before).
    pub fn options(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.insert(FLOW_TABLE_OPTION.into(), self.flow_table.into());
        }
        v
    }

    /// The config of factory `options` ([`InspectStageConfig::options`]).
    pub fn from_options(options: &serde_json::Value) -> anyhow::Result<InspectStageConfig> {
        let mut o = options.clone();
        let flow_table = match o.as_object_mut().and_then(|m| m.remove(FLOW_TABLE_OPTION)) {
            None => false,
            Some(serde_json::Value::Bool(b)) => b,
            Some(other) => anyhow::bail!("options: `{FLOW_TABLE_OPTION}`: {other} is not a bool"),
        };
        let cfg: InspectStageConfig =
            serde_json::from_value(o).map_err(|e| anyhow::anyhow!("options: {e}"))?;
        Ok(cfg.with_flow_table(flow_table))
    }

    /// Checks made when the config is loaded (no file is read): the rule list and the
    /// variables. Errors name the key under the stage (`rules`, `vars.HOME_NET`).
    pub fn check(&self) -> Result<(), (String, String)> {
        if self.rules.is_empty() {
            return Err((
                "rules".into(),
                "empty: name at least one rule file, folder or glob".into(),
            ));
        }
        for (key, n) in [
            ("state.flows", self.state.flows),
            ("state.trackers", self.state.trackers),
        ] {
            if !(1..=MAX_STATE_ENTRIES).contains(&n) {
                return Err((
                    key.into(),
                    format!("{n} is out of range 1..={MAX_STATE_ENTRIES}"),
                ));
            }
        }
        pktwarp_inspect::engine::variables(&self.vars).map_err(|e| match e {
            pktwarp_inspect::engine::SetError::Config { key, msg } => (key, msg),
            other => ("vars".into(), other.to_string()),
        })?;
        Ok(())
    }

    fn set_config(&self) -> SetConfig {
        SetConfig {
            rules: self.rules.clone(),
            vars: self.vars.clone(),
            strict: self.strict,
            flow_table: self.flow_table,
            gpu_rules_only: self.gpu_rules_only,
            state: self.state.config(),
        }
    }
}

/// The factory of the `inspect` stage (options: an [`InspectStageConfig`] with paths
/// resolved).
pub fn factory() -> Arc<dyn crate::stage::StageFactory> {
    Arc::new(InspectFactory)
}

struct InspectFactory;

impl crate::stage::StageFactory for InspectFactory {
    fn build(&self, options: &serde_json::Value) -> anyhow::Result<crate::stage::BuiltStage> {
        let cfg = InspectStageConfig::from_options(options)?;
        Ok(crate::stage::BuiltStage {
            cpu: Arc::new(InspectStage::new(&cfg)?),
            gpu: None,
        })
    }
}

/// Queues with flowbits / threshold state of their own; a queue number past them shares the
/// state of its number modulo this (correct, behind its lock, but contended).
const STATE_QUEUES: usize = crate::stage::flow_tables::MAX_QUEUES;

/// A published rule set, its hit counters (by its rule indices) and its flowbits / threshold
/// state, one per queue: a queue's worker is its only user (both directions of a flow reach
/// one queue, as `conntrack` requires), so the lock is uncontended but for the control
/// thread's counter reads. A reload starts with empty state (rule indices change).
pub(crate) struct Published {
    pub(crate) set: RuleSet,
    pub(crate) hits: RuleHits,
    pub(crate) generation: u64,
    states: Box<[OnceLock<Mutex<Stateful>>]>,
    /// The GPU stage's state counters for this set (flows_full, trackers_full, suppressed),
    /// as its host side reads them.
    pub(crate) gpu_state: [AtomicU64; 3],
}

impl Published {
    fn new(set: RuleSet, generation: u64) -> Published {
        let hits = RuleHits::new(set.catalog());
        Published {
            set,
            hits,
            generation,
            states: (0..STATE_QUEUES).map(|_| OnceLock::new()).collect(),
            gpu_state: Default::default(),
        }
    }

    /// Of `matched` (rule indices, ascending), those that alert and those whose action
    /// applies, after flowbits and thresholds on queue `queue`'s state at receive time
    /// `now_ns`.
    fn fire(
        &self,
        queue: u16,
        now_ns: u64,
        f: &eval::Frame,
        matched: &[u32],
    ) -> (Vec<u32>, Vec<u32>) {
        if !matched.iter().any(|&r| self.set.is_stateful(r)) {
            return (matched.to_vec(), matched.to_vec());
        }
        let st = self.states[usize::from(queue) % STATE_QUEUES]
            .get_or_init(|| Mutex::new(self.set.new_state()));
        let idx: Vec<usize> = matched.iter().map(|&r| r as usize).collect();
        let a = st
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .apply_actions(f, now_ns, &idx);
        let back = |v: Vec<usize>| v.into_iter().map(|r| r as u32).collect();
        (back(a.fired), back(a.acted))
    }

    /// The state counters over every queue.
    fn state_counters(&self) -> StateCounters {
        let g = |i: usize| self.gpu_state[i].load(Ordering::Relaxed);
        let mut c = StateCounters {
            flows_full: g(0),
            trackers_full: g(1),
            suppressed: g(2),
        };
        for s in self.states.iter().filter_map(OnceLock::get) {
            add_state(
                &mut c,
                &s.lock().unwrap_or_else(|p| p.into_inner()).counters(),
            );
        }
        c
    }
}

fn add_state(into: &mut StateCounters, c: &StateCounters) {
    into.flows_full += c.flows_full;
    into.trackers_full += c.trackers_full;
    into.suppressed += c.suppressed;
}

/// What the stage and its published reloads share.
pub(crate) struct Shared {
    pub(crate) cfg: InspectStageConfig,
    pub(crate) current: ArcSwap<Published>,
    /// Alerts a GPU's ring overwrote before the host read them.
    pub(crate) gpu_lost: AtomicU64,
    /// The alert log's sender and handle once it runs: it starts with the run (the `start`
    /// hook), so building the stage (`pktwarp validate`) writes nothing.
    log_ends: OnceLock<(AlertSender, AlertLogHandle)>,
    /// Hits of the sets replaced by reloads, by sid.
    carried: Mutex<BTreeMap<u32, u64>>,
    /// State counters of the sets replaced by reloads.
    carried_state: Mutex<StateCounters>,
    /// The counters, one shard per worker thread (modulo [`SHARDS`]), so queues on other
    /// cores do not bounce one cache line per frame; read as their sum.
    counters: Box<[Shard]>,
}

/// Counter shards: worker threads beyond this share them (correct, a little contended).
const SHARDS: usize = 64;

/// One thread's counters, alone on its cache line.
#[derive(Default)]
#[repr(align(128))]
struct Shard([AtomicU64; 7]);

impl Shared {
    fn publish(&self, set: RuleSet) {
        let g = self.current.load().generation + 1;
        let old = self.current.swap(Arc::new(Published::new(set, g)));
        add_state(
            &mut self.carried_state.lock().unwrap_or_else(|p| p.into_inner()),
            &old.state_counters(),
        );
        let mut c = self.carried.lock().unwrap_or_else(|p| p.into_inner());
        for (labels, n) in old.hits.series(usize::MAX) {
            if let Ok(sid) = labels[0].1.parse::<u32>() {
                *c.entry(sid).or_insert(0) += n;
            }
        }
    }

    /// The flowbits / threshold counters over every set published.
    fn state_counters(&self) -> StateCounters {
        let mut c = *self.carried_state.lock().unwrap_or_else(|p| p.into_inner());
        add_state(&mut c, &self.current.load().state_counters());
        c
    }

    /// Adds `n` hits of rule `sid` of a set no longer in force (a GPU's late counts).
    pub(crate) fn carry_hits(&self, sid: u32, n: u64) {
        *self
            .carried
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(sid)
            .or_insert(0) += n;
    }

    /// Adds `d` to state counter `i` (flows_full, trackers_full, suppressed) of the sets no
    /// longer in force (a GPU's late counts).
    pub(crate) fn carry_state(&self, i: usize, d: u64) {
        let mut c = self.carried_state.lock().unwrap_or_else(|p| p.into_inner());
        match i {
            0 => c.flows_full += d,
            1 => c.trackers_full += d,
            _ => c.suppressed += d,
        }
    }

    /// The alert log's sender, once the log runs.
    pub(crate) fn sender(&self) -> Option<AlertSender> {
        self.log_ends.get().map(|(s, _)| s.clone())
    }

    /// Hits by sid over every set published.
    fn hits_by_sid(&self) -> BTreeMap<u32, u64> {
        let mut m = self
            .carried
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for (labels, n) in self.current.load().hits.series(usize::MAX) {
            if let Ok(sid) = labels[0].1.parse::<u32>() {
                *m.entry(sid).or_insert(0) += n;
            }
        }
        m
    }
}

/// The stage: the rule set in force, the alert log, the counters.
pub struct InspectStage {
    pub(crate) shared: Arc<Shared>,
    log: Mutex<Option<AlertLog>>,
}

/// The next thread's counter shard.
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Each worker's prefilter scratch (reused frame to frame, whatever set is in force).
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    /// This thread's counter shard.
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed);
}

impl InspectStage {
    /// Loads the rule set and starts the alert log. Errors name the key or the rule file's
    /// line.
    pub fn new(cfg: &InspectStageConfig) -> anyhow::Result<InspectStage> {
        cfg.check()
            .map_err(|(k, m)| anyhow::anyhow!("key `{k}`: {m}"))?;
        let classes = match &cfg.eve {
            Some(e) => e
                .classifications()
                .map_err(|e| anyhow::anyhow!("key `eve.classification`: {e}"))?,
            None => pktwarp_inspect::alert::Classifications::standard(),
        };
        let set = RuleSet::load(&cfg.set_config(), &classes)?;
        tracing::info!("inspect: {}", set.report());
        if let Some(e) = &cfg.eve {
            e.check()
                .map_err(|e| anyhow::anyhow!("key `{}`: {}", e.key, e.msg))?;
        }
        Ok(InspectStage {
            shared: Arc::new(Shared {
                cfg: cfg.clone(),
                current: ArcSwap::from_pointee(Published::new(set, 0)),
                gpu_lost: AtomicU64::new(0),
                log_ends: OnceLock::new(),
                carried: Mutex::new(BTreeMap::new()),
                carried_state: Mutex::new(StateCounters::default()),
                counters: (0..SHARDS).map(|_| Shard::default()).collect(),
            }),
            log: Mutex::new(None),
        })
    }

    /// Starts the alert log (once; without `eve`, nothing).
    pub fn open_log(&self) {
        let Some(e) = &self.shared.cfg.eve else {
            return;
        };
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if self.shared.log_ends.get().is_some() {
            return;
        }
        let cat = Arc::clone(self.shared.current.load().set.catalog());
        match AlertLog::start(e, cat) {
            Ok(l) => {
                let _ = self.shared.log_ends.set((l.sender(), l.handle()));
                *log = Some(l);
            }
            // Checked when built: only a thread that cannot be started fails here.
            Err(err) => tracing::error!("inspect: the alert log does not run: {err}"),
        }
    }

    /// The rule set's load report now in force.
    pub fn report(&self) -> pktwarp_inspect::engine::SetReport {
        self.shared.current.load().set.report().clone()
    }

    /// The rule-set generation in force: 0 at start, +1 per reload published.
    pub fn generation(&self) -> u64 {
        self.shared.current.load().generation
    }

    /// Writes what the alert log holds and closes it (the `end` hook; tests).
    pub fn close_log(&self) {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(l) = log {
            l.shutdown();
        }
    }

    fn count(&self, i: usize, n: u64) {
        let shard = SHARD.with(|s| *s) % SHARDS;
        self.shared.counters[shard].0[i].fetch_add(n, Ordering::Relaxed);
    }

    /// Sends the alerts of `matched` (rule indices of `p`) for the frame.
    fn alert(
        &self,
        p: &Published,
        ts_ns: u64,
        f: &eval::Frame,
        meta: &PacketMeta,
        matched: &[u32],
    ) {
        self.count(1, matched.len() as u64);
        for &r in matched {
            p.hits.hit(r);
        }
        let Some((tx, _)) = self.shared.log_ends.get() else {
            return;
        };
        let mut vlan = [None, None];
        for (i, v) in vlan
            .iter_mut()
            .enumerate()
            .take(usize::from(meta.vlan_count))
        {
            *v = Some(meta.vlan_tci[i] & 0x0fff);
        }
        for &r in matched {
            let action = p
                .set
                .action(r)
                .map_or(AlertAction::Allowed, |a| AlertAction::of_rule(a, true));
            let a = Alert::of_frame(ts_ns, f, vlan, r, action, tx.wants_payload());
            tx.send_for(a, p.set.catalog());
        }
    }
}

/// The packet inspection sees: the inner one of a VXLAN / GTP-U tunnel whose inner L4 header
/// `parse` found, else the outer IP packet. None for a frame without IP.
pub fn inspected_packet<'a>(frame: &'a [u8], meta: &PacketMeta) -> Option<eval::Frame<'a>> {
    let tunnel = mf::TUNNEL | mf::INNER_L4;
    let l3 = if meta.flags & tunnel == tunnel {
        meta.inner_l3_offset
    } else if meta.ip_version == 4 || meta.ip_version == 6 {
        meta.l3_offset
    } else {
        return None;
    };
    let mut f = decode::decode_ip(frame.get(usize::from(l3)..)?)?;
    // What `flow:` tests: the conntrack stage's state and direction (0 without one).
    f.ct_state = meta.ct_state;
    f.ct_dir = meta.ct_dir;
    Some(f)
}

/// The host clock (ns since the Unix epoch): the receive time of a frame whose port gives none.
pub(crate) fn host_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl CustomStage for InspectStage {
    fn process(&self, frame: &[u8], meta: &PacketMeta, v: &mut Verdict) {
        self.process_rx(frame, RxInfo::default(), meta, v);
    }

    fn process_rx(&self, frame: &[u8], rx: RxInfo, meta: &PacketMeta, v: &mut Verdict) {
        let Some(mut f) = inspected_packet(frame, meta) else {
            return;
        };
        self.count(0, 1);
        let mut ec = eval::Counters::default();
        let head = eval::http_of(f.ip_proto, f.payload, &mut ec);
        if ec.http_split > 0 {
            self.count(4, ec.http_split);
        }
        f.http = head.as_ref();
        let p = self.shared.current.load();
        let now_ns = match rx.timestamp_ns {
            0 => host_now_ns(),
            t => t,
        };
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            // A `pass` rule's flowbits and threshold decide whether it passes the frame.
            let pass_holds = |r: u32| !p.fire(rx.queue, now_ns, &f, &[r]).1.is_empty();
            match p.set.inspect_gated(&f, &mut s, pass_holds) {
                Decision::Clean => {}
                Decision::Pass(_) => self.count(3, 1),
                Decision::Alert { .. } => {
                    let (fired, acted) = p.fire(rx.queue, now_ns, &f, &s.matched);
                    if !fired.is_empty() {
                        self.alert(&p, now_ns, &f, meta, &fired);
                    }
                    // A `drop` rule drops where its action applies, alerting or not
                    // (`noalert`, a `limit` past its count).
                    let drop = acted.iter().any(|&r| {
                        matches!(
                            p.set.action(r),
                            Some(pktwarp_inspect::rules::Action::Drop)
                                | Some(pktwarp_inspect::rules::Action::Reject)
                        )
                    });
                    if drop {
                        self.count(2, 1);
                        v.action = Action::Drop;
                        v.reason = Some(DropReason::InspectDrop);
                    } else if !fired.is_empty() {
                        match self.shared.cfg.alert_to {
                            AlertTo::None => {}
                            AlertTo::Host => v.action = Action::ToHost,
                            // A frame already going to the host stays so.
                            AlertTo::Mirror if v.action == Action::Pass => {
                                v.action = Action::Mirror
                            }
                            AlertTo::Mirror => {}
                        }
                    }
                }
            }
        });
    }

    fn counter_names(&self) -> Vec<String> {
        COUNTER_NAMES.iter().map(|s| s.to_string()).collect()
    }

    fn counters(&self) -> Vec<u64> {
        let mut v = vec![0u64; COUNTER_NAMES.len()];
        for s in self.shared.counters.iter() {
            for (x, c) in v.iter_mut().zip(&s.0) {
                *x += c.load(Ordering::Relaxed);
            }
        }
        if let Some((_, h)) = self.shared.log_ends.get() {
            let c = h.counters();
            v[5] = c.dropped;
            v[6] = c.lost + self.shared.gpu_lost.load(Ordering::Relaxed);
        }
        v
    }

    fn hooks(&self) -> Option<&dyn StageHooks> {
        Some(self)
    }

    fn metric_families(&self) -> Vec<StageMetricFamily> {
        vec![
            StageMetricFamily {
                name: "inspect_rule_hits_total".into(),
                help: "Frames each IDS rule matched and alerted on, by sid (the rules with most \
                   hits; the rest under sid=\"other\")"
                    .into(),
                kind: crate::stage::MetricKind::Counter,
                labels: vec!["sid".into()],
            },
            StageMetricFamily {
                name: "inspect_state_total".into(),
                help: "Flowbits / threshold state events: `flows_full` (a flow found no room for \
                   its bits), `trackers_full` (a threshold counter found no room), \
                   `suppressed` (matches a threshold, detection_filter or noalert kept from \
                   alerting)"
                    .into(),
                kind: crate::stage::MetricKind::Counter,
                labels: vec!["event".into()],
            },
        ]
    }

    fn metric_samples(&self) -> Vec<(usize, Vec<String>, f64)> {
        let mut by: Vec<(u32, u64)> = self.shared.hits_by_sid().into_iter().collect();
        by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let other: u64 = by.iter().skip(MAX_SID_SERIES).map(|x| x.1).sum();
        by.truncate(MAX_SID_SERIES);
        let mut out: Vec<_> = by
            .into_iter()
            .map(|(sid, n)| (0, vec![sid.to_string()], n as f64))
            .collect();
        if other > 0 {
            out.push((0, vec!["other".into()], other as f64));
        }
        let c = self.shared.state_counters();
        for (k, n) in state_fields(&c) {
            out.push((1, vec![k.into()], n as f64));
        }
        out
    }

    fn summary_section(&self) -> Option<serde_json::Value> {
        let p = self.shared.current.load();
        let r = p.set.report();
        let cat = p.set.catalog();
        let top: Vec<serde_json::Value> = p
            .hits
            .top(TOP_RULES)
            .iter()
            .map(|h| {
                let msg = cat.get(h.index).map_or("", |r| r.signature.as_str());
                serde_json::json!({ "sid": h.sid, "msg": msg, "hits": h.hits })
            })
            .collect();
        let eve = self.shared.log_ends.get().map(|(_, h)| {
            let c = h.counters();
            serde_json::json!({
                "written": c.written, "dropped": c.dropped, "lost": c.lost,
                "write_errors": c.write_errors,
            })
        });
        Some(serde_json::json!({
            "generation": p.generation,
            "rules": {
                "files": r.files, "loaded": r.loaded, "skipped": r.skipped,
                "skipped_by_reason": r.skipped_by_reason, "patterns": r.patterns,
                "without_prefilter": r.unfiltered,
            },
            "flow_table": self.shared.cfg.flow_table,
            "state": state_fields(&self.shared.state_counters())
                .into_iter()
                .collect::<BTreeMap<_, _>>(),
            "top_rules": top,
            "eve": eve,
        }))
    }

    fn gpu_library(&self) -> Option<Result<crate::stage::GpuParams, String>> {
        Some(self.gpu_params())
    }

    fn gpu_caution(&self) -> Option<&'static str> {
        Some(GPU_CAUTION)
    }

    fn gpu_queue_state(&self) -> Vec<pktwarp_kernels::StageBuffer> {
        self.gpu_state_buffers()
    }

    /// The rule sets published by file reloads (the GPU block's rule set moves with them).
    fn params_generation(&self) -> u64 {
        self.generation()
    }

    fn gpu_host_side(
        &self,
        position: usize,
        _: &Arc<crate::stage::gpu_host::HandedLog>,
    ) -> anyhow::Result<Option<Box<dyn crate::stage::gpu_host::GpuHostSide>>> {
        Ok(Some(self.gpu_side(position)))
    }

    fn reload_files(&self) -> anyhow::Result<Option<FilesReload>> {
        // Log rotation: a SIGHUP reopens the alert log, whatever becomes of the rule files.
        if let Some((_, h)) = self.shared.log_ends.get() {
            h.reopen();
        }

        let cfg = &self.shared.cfg;
        let classes = match &cfg.eve {
            Some(e) => e
                .classifications()
                .map_err(|e| anyhow::anyhow!("stage `inspect`: eve.classification: {e}"))?,
            None => pktwarp_inspect::alert::Classifications::standard(),
        };
        let set = RuleSet::load(&cfg.set_config(), &classes)
            .map_err(|e| anyhow::anyhow!("stage `inspect`: {e}"))?;
        let what = format!("inspect: {}", set.report());
        let shared = Arc::clone(&self.shared);
        Ok(Some(FilesReload {
            what,
            publish: Box::new(move || shared.publish(set)),
        }))
    }
}

impl StageHooks for InspectStage {
    fn start(&self, _: &HookCtx) {
        self.open_log();
    }

    /// A build published by a reload (new options) gets its calls from here on.
    fn epoch_published(&self, _: &HookCtx, _: u64) {
        self.open_log();
    }

    fn end(&self, _: &HookCtx) {
        self.close_log();
    }
}

/// The state counters by name (metric label, summary key).
fn state_fields(c: &StateCounters) -> [(&'static str, u64); 3] {
    [
        ("flows_full", c.flows_full),
        ("trackers_full", c.trackers_full),
        ("suppressed", c.suppressed),
    ]
}

/// The lines `pktwarp validate` prints for the pipeline's `inspect` stages: loaded and skipped
/// rules by reason.
pub fn validate_lines(p: &crate::stage::Pipeline) -> Vec<String> {
    let mut out = Vec::new();
    for (i, s) in p.stages.iter().enumerate() {
        let crate::stage::Stage::Custom(c) = s else {
            continue;
        };
        if c.name() != DESCRIPTOR.name {
            continue;
        }
        let Some(sec) = c.cpu().summary_section() else {
            continue;
        };
        let r = &sec["rules"];
        let mut line = format!(
            "pipeline[{i}] inspect: {} rules loaded, {} skipped",
            r["loaded"], r["skipped"]
        );
        if let Some(m) = r["skipped_by_reason"].as_object() {
            for (reason, n) in m {
                line.push_str(&format!("; {n} {reason}"));
            }
        }
        out.push(line);
    }
    out
}

#[cfg(test)]
#[path = "inspect_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "inspect_flow_tests.rs"]
mod flow_tests;
