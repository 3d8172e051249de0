//! Data-path counters. Each counter has exactly one writer thread (the ingest, a worker or the
//! TX thread), so an add is a plain load + store (no locked instruction on the hot path); any
//! thread may read them at any time (the summary, the metrics endpoint) without pausing anyone.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::verdict::DropReason;

/// A single-writer monotonically increasing counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Must only be called from the counter's one writer thread.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Overwrites the value (gauges, and counters mirrored from GPU-side memory).
    #[inline]
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }
}

/// Number of distinct parse status codes tracked per queue.
pub const PARSE_STATUS_SLOTS: usize = 128;

/// Counters of one RX queue.
#[derive(Debug)]
pub struct QueueCounters {
    /// Written by the ingest.
    pub rx_frames: Counter,
    pub rx_bytes: Counter,
    /// Bursts waiting in the ring (gauge, written by the ingest).
    pub ring_occupancy: Counter,
    /// Written by the worker.
    pub passed: Counter,
    pub mirrored: Counter,
    pub to_host: Counter,
    /// Frames each stage processed (index = position in the pipeline).
    pub stage_frames: Vec<Counter>,
    /// Bytes the `count` stages saw (index = position in the pipeline; 0 for other stages).
    pub stage_bytes: Vec<Counter>,
    /// Frames rejected by `parse`, by parse status code.
    pub parse_status: Vec<Counter>,
    /// Hits per ACL rule (index = rule position in the file); empty without an `acl` stage.
    pub rule_hits: Vec<Counter>,
    /// Hits on rules past the end of `rule_hits` (a reload grew the rule set).
    pub rule_hits_other: Counter,
    /// Frames no ACL rule matched.
    pub acl_default: Counter,
    /// Written by the TX thread.
    pub tx_frames: Counter,
    pub tx_bytes: Counter,
    /// Drops by reason (ring_full by the ingest, tx_error by TX, the rest by the worker).
    pub drops: [Counter; DropReason::COUNT],
}

impl QueueCounters {
    pub fn new(stages: usize, rules: usize) -> Self {
        QueueCounters {
            rx_frames: Counter::default(),
            rx_bytes: Counter::default(),
            ring_occupancy: Counter::default(),
            passed: Counter::default(),
            mirrored: Counter::default(),
            to_host: Counter::default(),
            stage_frames: (0..stages).map(|_| Counter::default()).collect(),
            stage_bytes: (0..stages).map(|_| Counter::default()).collect(),
            parse_status: (0..PARSE_STATUS_SLOTS)
                .map(|_| Counter::default())
                .collect(),
            rule_hits: (0..rules).map(|_| Counter::default()).collect(),
            rule_hits_other: Counter::default(),
            acl_default: Counter::default(),
            tx_frames: Counter::default(),
            tx_bytes: Counter::default(),
            drops: Default::default(),
        }
    }

    pub fn drop_count(&self, r: DropReason) -> u64 {
        self.drops[r as usize].get()
    }

    pub fn total_drops(&self) -> u64 {
        self.drops.iter().map(Counter::get).sum()
    }
}
