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

    /// Adds `n` atomically, for the few counters with several writers (the ingest threads of
    /// several receiving ports count into the same queue).
    #[inline]
    pub fn add_shared(&self, n: u64) {
        if n > 0 {
            self.0.fetch_add(n, Ordering::Relaxed);
        }
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

/// Upper bounds (ns) of the burst-latency buckets: 1 us doubling to ~1 s; one more bucket past
/// the last bound counts everything slower.
pub const LATENCY_BUCKETS_NS: [u64; 21] = {
    let mut b = [0u64; 21];
    let mut i = 0;
    while i < 21 {
        b[i] = 1000u64 << i;
        i += 1;
    }
    b
};

/// A single-writer latency histogram with fixed power-of-two buckets: one relaxed add per
/// observation (no locked instruction), read at scrape time.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    /// Non-cumulative counts, index = bucket (the last one is +Inf).
    buckets: [Counter; LATENCY_BUCKETS_NS.len() + 1],
    sum_ns: Counter,
}

impl LatencyHistogram {
    /// Records one observation. Single writer only.
    #[inline]
    pub fn observe_ns(&self, ns: u64) {
        let us = ns.div_ceil(1000);
        let idx = if us <= 1 {
            0
        } else {
            (64 - (us - 1).leading_zeros()) as usize
        };
        self.buckets[idx.min(LATENCY_BUCKETS_NS.len())].add(1);
        self.sum_ns.add(ns);
    }

    /// Observations in bucket `i` (not cumulative); `LATENCY_BUCKETS_NS.len()` is +Inf.
    pub fn bucket(&self, i: usize) -> u64 {
        self.buckets.get(i).map_or(0, Counter::get)
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().map(Counter::get).sum()
    }

    pub fn sum_ns(&self) -> u64 {
        self.sum_ns.get()
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
    /// GPU executor only (written by its host loop): the queue kernel's heartbeat word and the
    /// bursts handed over but not yet reaped, for the control thread's watchdog.
    pub kernel_heartbeat: Counter,
    pub in_flight_bursts: Counter,
    /// Per burst: ingest hand-off to the worker finishing the pipeline (written by the worker).
    pub burst_latency: LatencyHistogram,
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
            kernel_heartbeat: Counter::default(),
            in_flight_bursts: Counter::default(),
            burst_latency: LatencyHistogram::default(),
            drops: Default::default(),
        }
    }

    pub fn drop_count(&self, r: DropReason) -> u64 {
        self.drops[r as usize].get()
    }

    pub fn total_drops(&self) -> u64 {
        self.drops.iter().map(Counter::get).sum()
    }

    /// Every counter the stages write, in a fixed order: what tests compare between two ways of
    /// running the same stages.
    #[doc(hidden)]
    pub fn stage_snapshot(&self) -> Vec<u64> {
        let mut v = vec![
            self.passed.get(),
            self.mirrored.get(),
            self.to_host.get(),
            self.acl_default.get(),
            self.rule_hits_other.get(),
        ];
        for list in [
            &self.stage_frames,
            &self.stage_bytes,
            &self.parse_status,
            &self.rule_hits,
        ] {
            v.extend(list.iter().map(Counter::get));
        }
        v.extend(self.drops.iter().map(Counter::get));
        v
    }
}

#[cfg(test)]
mod latency_tests {
    use super::*;

    #[test]
    fn buckets_hold_their_bounds() {
        let h = LatencyHistogram::default();
        // (observation ns, bucket index whose upper bound is the first >= it)
        for (ns, want) in [
            (0, 0),
            (1000, 0),
            (1001, 1),
            (2000, 1),
            (2001, 2),
            (4000, 2),
            (4001, 3),
            (1_000_000, 10),
            (u64::MAX / 2, 21),
        ] {
            let before = h.bucket(want);
            h.observe_ns(ns);
            assert_eq!(h.bucket(want), before + 1, "{ns} ns");
            if want < LATENCY_BUCKETS_NS.len() {
                assert!(ns <= LATENCY_BUCKETS_NS[want]);
            }
            if want > 0 {
                assert!(ns > LATENCY_BUCKETS_NS[want - 1]);
            }
        }
        assert_eq!(h.count(), 9);
    }
}
