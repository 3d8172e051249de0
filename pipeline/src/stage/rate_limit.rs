//! `rate_limit`: per-key token buckets on the CPU executor (docs/rate-limit.md). Each queue owns
//! a table (`pktwarp_flow::rate::RateTable`); a frame takes the first rule whose `match` it
//! meets, its key (source or destination address or prefix, or flow) picks its bucket, and a
//! frame that finds its bucket empty is dropped `rate_limited`, counted per rule.
//!
//! The GPU side is the library stage `pw_stage_rate_limit` (gpu-kernels/cuda/
//! rate_limit_stage.cuh) over the executor's per-queue stage state ([`queue_state_bytes`]: each
//! queue's entries, then its counters), frames of one bucket in arrival order, the rules in
//! [`gpu_block`]; pipeline/tests/rate_limit_cuda_host.rs holds it equal to this stage frame by
//! frame. The GPU daemon reads each queue's counters back and folds their growth into this
//! stage ([`crate::stage::rate_limit_gpu::GpuRateFold`]), so the metrics and the summary count
//! the GPU's frames.
//!
//! SIGHUP reloads the rules (rates, bursts, matches, `on_full`): published by one pointer swap,
//! each queue's table takes them at its next frame. Buckets are kept when the rules key them as
//! before (same names and keys in order), otherwise they start afresh (full). `entries` and
//! `hash_seed` need a restart.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwap;
use pktwarp_flow::rate::{RateConfig, RateTable};

use crate::burst::FrameDesc;
use crate::meta::PacketMeta;
use crate::stage::descriptor::{GpuImpl, StageDescriptor, StageNeeds};
use crate::verdict::{Action, DropReason, Verdict};

/// The table-wide counters (per-rule ones are `pktwarp_rate_limit_frames_total`).
pub const COUNTER_NAMES: [&str; 2] = ["created", "reused"];

/// A rule's counters, by `result` label.
pub const RULE_RESULTS: [&str; 3] = ["matched", "limited", "table_full"];

/// The `rate_limit` stage, described (the stage descriptor, `stage::descriptor`).
pub const DESCRIPTOR: StageDescriptor = StageDescriptor {
    name: "rate_limit",
    usage: "`rate_limit: { entries, rules: [{ name, match, key, rate_pps, burst }], on_full }`",
    summary: "per-key token buckets, a table per queue (docs/rate-limit.md): a frame takes the first rule it matches, keyed by source / destination address or prefix, or flow; over the rate: `rate_limited` drop, counted per rule; SIGHUP reloads the rules",
    needs: StageNeeds {
        reads_meta: true,
        reads_time: true,
        ..StageNeeds::NONE
    },
    drop_reasons: &[DropReason::RateLimited],
    counters: &COUNTER_NAMES,
    gpu: GpuImpl::Library {
        function: "pw_stage_rate_limit",
    },
    reloads: true,
};

/// Queues with a table of their own; a queue number past them shares the table of its number
/// modulo this (correct, behind the lock, but contended).
pub const MAX_QUEUES: usize = 256;

/// Bytes of the GPU parameter block (`pw_rl_params` of rate_limit_stage.cuh): the state's base,
/// queue count and one queue's bytes, then the table's parameters (`pw_rl_table`).
pub const GPU_BLOCK: usize = 24 + pktwarp_flow::rate::TABLE_ABI_BYTES;
/// Where the executor writes the per-queue state's base address (u64) and queue count (u32 at
/// +8) in the block (`pktwarp_kernels::KernelImage::queue_state`).
pub const GPU_STATE_AT: usize = 0;

/// Bytes of one queue's state on the GPU: its entries (64 bytes each), then its counters
/// (`pw_rl_counters`, [`pktwarp_flow::rate::COUNTERS_BYTES`]).
pub fn queue_state_bytes(config: &RateConfig) -> u64 {
    config
        .entries
        .saturating_mul(pktwarp_flow::rate::ENTRY_SIZE as u64)
        .saturating_add(pktwarp_flow::rate::COUNTERS_BYTES as u64)
}

/// Where a queue's counters start in its state ([`queue_state_bytes`]).
pub fn queue_counters_at(config: &RateConfig) -> u64 {
    config
        .entries
        .saturating_mul(pktwarp_flow::rate::ENTRY_SIZE as u64)
}

/// The GPU parameter block of `config` (`pw_rl_params`): the state's base and queue count left 0
/// (the executor writes them), the key epoch ([`RateLimitStage::gpu_rules`]), one queue's
/// bytes, and the rules (`pw_rl_table`, its entry
/// address left 0: the kernel computes its queue's). `None` for a config that fails its checks.
pub fn gpu_block(config: &RateConfig, keys_epoch: u32) -> Option<Vec<u8>> {
    let abi = pktwarp_flow::rate::params_of(config).ok()?;
    let mut b = vec![0u8; 24];
    b[12..16].copy_from_slice(&keys_epoch.to_le_bytes());
    b[16..24].copy_from_slice(&queue_state_bytes(config).to_le_bytes());
    b.extend_from_slice(&abi.to_bytes());
    Some(b)
}

/// The rules in force, with the generation a reload stamps on them.
struct RuleSet {
    config: RateConfig,
    generation: u64,
    /// Reloads so far that changed the rules' keys: the GPU stage's buckets of another epoch
    /// are free slots (the CPU tables start afresh in `take_rules`).
    keys_epoch: u32,
}

/// One queue's table and the rules it applies.
struct QueueTable {
    table: RateTable,
    rules: Arc<RuleSet>,
}

/// The stage: the rules in force and one table per queue, made when the queue's first frame
/// comes (queue 0's at start, so a table that cannot be had is an error then).
pub struct RateLimitStage {
    rules: ArcSwap<RuleSet>,
    tables: Vec<OnceLock<Option<Mutex<QueueTable>>>>,
    /// Per-rule counts of tables whose rules were replaced by a reload that changed the keys,
    /// and the GPU tables' counts ([`RateLimitStage::add_gpu_counters`]), by rule name, so
    /// every rule's series only grows.
    retired: Mutex<BTreeMap<String, [u64; 3]>>,
    generation: AtomicU64,
    /// The GPU executor's tables' counters (device, folded in as they grow): created, reused.
    gpu: [AtomicU64; 2],
}

fn err(e: pktwarp_flow::FlowError) -> anyhow::Error {
    anyhow::anyhow!("stage `rate_limit`: {e}")
}

impl RateLimitStage {
    /// Checks the config and makes queue 0's table.
    pub fn new(config: &RateConfig) -> anyhow::Result<RateLimitStage> {
        let rules = Arc::new(RuleSet {
            config: config.clone(),
            generation: 0,
            keys_epoch: 0,
        });
        let first = RateTable::from_config(config).map_err(err)?;
        let tables: Vec<OnceLock<Option<Mutex<QueueTable>>>> =
            (0..MAX_QUEUES).map(|_| OnceLock::new()).collect();
        let _ = tables[0].set(Some(Mutex::new(QueueTable {
            table: first,
            rules: Arc::clone(&rules),
        })));
        Ok(RateLimitStage {
            rules: ArcSwap::new(rules),
            tables,
            retired: Mutex::new(BTreeMap::new()),
            generation: AtomicU64::new(0),
            gpu: Default::default(),
        })
    }

    /// The config in force.
    pub fn config(&self) -> RateConfig {
        self.rules.load().config.clone()
    }

    /// The rules in force and their key epoch, for the GPU parameter block ([`gpu_block`]).
    pub fn gpu_rules(&self) -> (RateConfig, u32) {
        let r = self.rules.load();
        (r.config.clone(), r.keys_epoch)
    }

    /// Reloads published so far.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Checks `new` against the rules in force: `Ok(None)` when nothing changed, `Ok(Some)` with
    /// the config to publish, an error when it is bad or changes what only a restart changes.
    pub fn prepare_reload(&self, new: &RateConfig) -> anyhow::Result<Option<RateConfig>> {
        let now = self.rules.load();
        let old = &now.config;
        if new.entries != old.entries || new.hash_seed != old.hash_seed {
            anyhow::bail!(
                "stage `rate_limit`: `entries` and `hash_seed` change only with a restart \
                 ({} / {} in force)",
                old.entries,
                old.hash_seed
            );
        }
        new.validate().map_err(err)?;
        let same = new.on_full == old.on_full && new.rule_values().eq(old.rule_values());
        Ok((!same).then(|| new.clone()))
    }

    /// Publishes rules checked by [`RateLimitStage::prepare_reload`]; each queue's table takes
    /// them at its next frame.
    pub fn publish(&self, new: RateConfig) {
        let g = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        let old = self.rules.load();
        let keys_epoch = if old.config.same_keys(&new) {
            old.keys_epoch
        } else {
            // 24 bits in the GPU buckets' flags: wraps after 16M key changes.
            old.keys_epoch.wrapping_add(1) & 0x00ff_ffff
        };
        self.rules.store(Arc::new(RuleSet {
            config: new,
            generation: g,
            keys_epoch,
        }));
    }

    fn table(&self, queue: u16) -> Option<&Mutex<QueueTable>> {
        self.tables[queue as usize % MAX_QUEUES]
            .get_or_init(|| {
                let rules = self.rules.load_full();
                match RateTable::from_config(&rules.config) {
                    Ok(table) => Some(Mutex::new(QueueTable { table, rules })),
                    Err(e) => {
                        // The config was checked at start: only memory can fail here.
                        tracing::error!(
                            queue,
                            "rate_limit: queue {queue}'s table cannot be made ({e}): its frames \
                             pass unlimited"
                        );
                        None
                    }
                }
            })
            .as_ref()
    }

    /// Applies one frame to its queue's table: an over-limit frame is dropped `rate_limited`.
    #[inline]
    pub fn apply(&self, desc: &FrameDesc, meta: &PacketMeta, v: &mut Verdict) {
        let Some(t) = self.table(desc.queue) else {
            return;
        };
        // A worker that panicked while holding the lock left the table between two frames.
        let mut q = t.lock().unwrap_or_else(|p| p.into_inner());
        let now = self.rules.load();
        if now.generation != q.rules.generation {
            self.take_rules(&mut q, Arc::clone(&now));
        }
        if q.table.apply(meta, desc.timestamp_ns).drop != 0 {
            v.action = Action::Drop;
            v.reason = Some(DropReason::RateLimited);
        }
    }

    /// A queue's table takes the rules in force (a reload happened since its last frame).
    fn take_rules(&self, q: &mut QueueTable, now: Arc<RuleSet>) {
        let keep = q.rules.config.same_keys(&now.config);
        if !keep {
            // The rules' indices change meaning: their counts so far go under the old names.
            let old = q.table.take_rule_counters();
            let mut r = self.retired.lock().unwrap_or_else(|p| p.into_inner());
            for (rule, c) in q.rules.config.rule_values().zip(old) {
                let slot = r.entry(rule.name.clone()).or_default();
                slot[0] += c.matched;
                slot[1] += c.limited;
                slot[2] += c.table_full;
            }
        }
        // Same size and seed: prepare_reload refused any other.
        if let Err(e) = q.table.set_rules(&now.config, keep) {
            tracing::error!("rate_limit: the reloaded rules cannot be applied ({e})");
        }
        q.rules = now;
    }

    /// Adds growth of the GPU tables' counters (summed over queues): the table-wide ones, and
    /// each rule's under `names[i]` for rule index i: the names of the rules the GPU applied,
    /// those of the parameter block published last (`stage::rate_limit_gpu`), which
    /// a reload makes differ from the rules in force here until the GPU has the new block.
    pub fn add_gpu_counters(&self, names: &[String], grown: &pktwarp_flow::rate::RateCounters) {
        self.gpu[0].fetch_add(grown.created, Ordering::Relaxed);
        self.gpu[1].fetch_add(grown.reused, Ordering::Relaxed);
        let mut r = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        for (name, c) in names.iter().zip(grown.rules) {
            if c == pktwarp_flow::rate::RuleCounters::default() {
                continue;
            }
            let slot = r.entry(name.clone()).or_default();
            slot[0] += c.matched;
            slot[1] += c.limited;
            slot[2] += c.table_full;
        }
    }

    /// The names of the rules in force, in order (a rule's index in the GPU's counters).
    pub fn rule_names(&self) -> Vec<String> {
        self.rules
            .load()
            .config
            .rule_values()
            .map(|r| r.name.clone())
            .collect()
    }

    /// Takes queue `queue`'s table counters out of the table (zeroed there): the tests' GPU
    /// stand-in runs this stage and moves its counts to its "device" this way, so that they
    /// reach the stage only through the GPU fold, as a GPU's do.
    #[cfg(test)]
    pub(crate) fn take_queue_counters(&self, queue: u16) -> pktwarp_flow::rate::RateCounters {
        self.table(queue).map_or_else(Default::default, |t| {
            t.lock()
                .unwrap_or_else(|p| p.into_inner())
                .table
                .take_counters()
        })
    }

    /// [`COUNTER_NAMES`] and their values, over every queue.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let (mut created, mut reused) = (
            self.gpu[0].load(Ordering::Relaxed),
            self.gpu[1].load(Ordering::Relaxed),
        );
        for t in self.tables.iter().filter_map(|t| t.get()).flatten() {
            let c = t.lock().unwrap_or_else(|p| p.into_inner()).table.counters();
            created += c.created;
            reused += c.reused;
        }
        COUNTER_NAMES
            .iter()
            .copied()
            .zip([created, reused])
            .collect()
    }

    /// Each rule's counters by name ([`RULE_RESULTS`] order), over every queue: the rules in
    /// force, then rules a reload removed. Each table's counts go under the names of the rules
    /// it applies; every table is held while the retired counts are read (the order
    /// [`RateLimitStage::apply`] takes the locks in), so no count is seen twice or missed.
    pub fn rule_counters(&self) -> Vec<(String, [u64; 3])> {
        let guards: Vec<_> = self
            .tables
            .iter()
            .filter_map(|t| t.get())
            .flatten()
            .map(|t| t.lock().unwrap_or_else(|p| p.into_inner()))
            .collect();
        let mut by_name = self
            .retired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for q in &guards {
            let c = q.table.counters();
            for (rule, r) in q.rules.config.rule_values().zip(c.rules) {
                let slot = by_name.entry(rule.name.clone()).or_default();
                slot[0] += r.matched;
                slot[1] += r.limited;
                slot[2] += r.table_full;
            }
        }
        drop(guards);
        let rules = self.rules.load();
        let mut out: Vec<(String, [u64; 3])> = Vec::new();
        for rule in rules.config.rule_values() {
            let v = by_name.remove(&rule.name).unwrap_or_default();
            out.push((rule.name.clone(), v));
        }
        out.extend(by_name);
        out
    }

    /// Buckets held now, over every queue.
    pub fn buckets(&self) -> usize {
        self.tables
            .iter()
            .filter_map(|t| t.get())
            .flatten()
            .map(|t| t.lock().unwrap_or_else(|p| p.into_inner()).table.len())
            .sum()
    }
}

/// The per-rule counters of every `rate_limit` stage of `p` as the control thread's metrics
/// take them: `pktwarp_rate_limit_frames_total` samples labelled `position`, `rule`, `result`.
#[allow(clippy::type_complexity)]
pub fn metric_families(
    p: &crate::stage::Pipeline,
) -> Vec<(&'static str, Vec<(Vec<(&'static str, String)>, u64)>)> {
    let mut samples = Vec::new();
    for (i, s) in p.stages.iter().enumerate() {
        let Some(rl) = s.rate_limit() else { continue };
        for (rule, v) in rl.rule_counters() {
            for (res, n) in RULE_RESULTS.iter().zip(v) {
                let labels = vec![
                    ("position", i.to_string()),
                    ("rule", rule.clone()),
                    ("result", res.to_string()),
                ];
                samples.push((labels, n));
            }
        }
    }
    if samples.is_empty() {
        return Vec::new();
    }
    vec![("pktwarp_rate_limit_frames_total", samples)]
}

#[cfg(test)]
#[path = "rate_limit_tests.rs"]
mod tests;
