//! The flow tables of a pipeline, one per queue, shared by the stages that use them: `conntrack`
//! applies frames to them, `flow_stats` exports what they hold (and applies the frames itself
//! when there is no `conntrack`). A table is made when its queue's first frame comes (a queue
//! that gets no traffic takes no memory); queue 0's when the set is made, so a table that cannot
//! be had is an error at start.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use pktwarp_flow::{FlowConfig, FlowCounters, FlowTable};

/// Queues with a table of their own; a queue number past them shares the table of its number
/// modulo this (correct, behind the lock, but contended).
pub const MAX_QUEUES: usize = 256;

/// One table per queue (see the module doc). Each queue has one worker, so a table's lock is
/// contended only by the control thread's flow-export sweeps.
pub struct FlowTables {
    config: FlowConfig,
    /// The stage that made the set, for errors and logs.
    owner: &'static str,
    tables: Vec<OnceLock<Option<Mutex<FlowTable>>>>,
    /// Whether the tables keep the flows that end inside `apply` (flow export is on).
    report_ended: AtomicBool,
}

impl FlowTables {
    /// Checks the config and makes queue 0's table; errors start with `stage `owner``.
    pub fn new(config: &FlowConfig, owner: &'static str) -> anyhow::Result<FlowTables> {
        config
            .validate()
            .map_err(|e| anyhow::anyhow!("stage `{owner}`: {e}"))?;
        let first =
            FlowTable::from_config(config).map_err(|e| anyhow::anyhow!("stage `{owner}`: {e}"))?;
        let tables: Vec<OnceLock<Option<Mutex<FlowTable>>>> =
            (0..MAX_QUEUES).map(|_| OnceLock::new()).collect();
        let _ = tables[0].set(Some(Mutex::new(first)));
        Ok(FlowTables {
            config: *config,
            owner,
            tables,
            report_ended: AtomicBool::new(false),
        })
    }

    pub fn config(&self) -> &FlowConfig {
        &self.config
    }

    /// Queue `queue`'s table, made now if it is the queue's first frame; `None` when it cannot
    /// be made (logged once; the queue's frames go untracked).
    pub fn table(&self, queue: u16) -> Option<&Mutex<FlowTable>> {
        self.tables[queue as usize % MAX_QUEUES]
            .get_or_init(|| match FlowTable::from_config(&self.config) {
                Ok(mut t) => {
                    t.report_ended(self.report_ended.load(Ordering::Acquire));
                    Some(Mutex::new(t))
                }
                Err(e) => {
                    // The config was checked at start: only memory can fail here.
                    tracing::error!(
                        queue,
                        "{}: queue {queue}'s flow table cannot be made ({e}): its frames go \
                         untracked",
                        self.owner
                    );
                    None
                }
            })
            .as_ref()
    }

    /// The tables made so far, by their queue slot.
    pub fn made(&self) -> impl Iterator<Item = (usize, &Mutex<FlowTable>)> {
        self.tables
            .iter()
            .enumerate()
            .filter_map(|(q, t)| Some((q, t.get()?.as_ref()?)))
    }

    /// From now on every table keeps the flows that end inside `apply` for flow export.
    pub fn report_ended(&self) {
        self.report_ended.store(true, Ordering::Release);
        for (_, t) in self.made() {
            lock(t).report_ended(true);
        }
    }

    /// The counters over every table.
    /// Whether the tables keep the flows that end for flow export ([`FlowTables::report_ended`]).
    pub fn reports_ended(&self) -> bool {
        self.report_ended.load(Ordering::Acquire)
    }

    pub fn counters(&self) -> FlowCounters {
        let mut sum = FlowCounters::default();
        for (_, t) in self.made() {
            let c = lock(t).counters();
            sum.created += c.created;
            sum.expired += c.expired;
            sum.early_evicted += c.early_evicted;
            sum.table_full += c.table_full;
            sum.untracked += c.untracked;
            sum.invalid += c.invalid;
        }
        sum
    }

    /// Flows held now, over every table.
    pub fn flows(&self) -> usize {
        self.made().map(|(_, t)| lock(t).len()).sum()
    }
}

/// A table's lock. A worker that panicked while holding it left the table as it was between two
/// frames (apply has no partial state worth refusing).
pub fn lock(t: &Mutex<FlowTable>) -> MutexGuard<'_, FlowTable> {
    t.lock().unwrap_or_else(|p| p.into_inner())
}
