//! Per-rule hit counters: one atomic per loaded rule, bumped by the data path; the top rules
//! for the summary and a bounded set of series for `pktwarp_inspect_rule_hits_total{sid}`.

use super::RuleCatalog;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// The metric family the pipeline registers.
pub const RULE_HITS_METRIC: &str = "pktwarp_inspect_rule_hits_total";

/// Hits of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleHit {
    pub index: u32,
    pub sid: u32,
    pub gid: u32,
    pub hits: u64,
}

/// One counter per rule, in rule-index order.
#[derive(Debug)]
pub struct RuleHits {
    hits: Box<[AtomicU64]>,
    ids: Box<[(u32, u32)]>,
    /// Hits for an index past the last rule (a caller's bug; counted, never a panic).
    out_of_range: AtomicU64,
}

impl RuleHits {
    /// Counters for the rules of `cat`.
    pub fn new(cat: &RuleCatalog) -> Self {
        Self::from_ids(cat.rules.iter().map(|r| (r.gid, r.sid)))
    }

    /// Counters for rules given as (gid, sid), in rule-index order.
    pub fn from_ids(ids: impl IntoIterator<Item = (u32, u32)>) -> Self {
        let ids: Box<[(u32, u32)]> = ids.into_iter().collect();
        RuleHits {
            hits: ids.iter().map(|_| AtomicU64::new(0)).collect(),
            ids,
            out_of_range: AtomicU64::new(0),
        }
    }

    /// Counts one hit of rule `index`.
    #[inline]
    pub fn hit(&self, index: u32) {
        self.add(index, 1);
    }

    /// Counts `n` hits of rule `index` (a batch's count).
    #[inline]
    pub fn add(&self, index: u32, n: u64) {
        match self.hits.get(index as usize) {
            Some(c) => c.fetch_add(n, Ordering::Relaxed),
            None => self.out_of_range.fetch_add(n, Ordering::Relaxed),
        };
    }

    pub fn get(&self, index: u32) -> u64 {
        self.hits
            .get(index as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    pub fn out_of_range(&self) -> u64 {
        self.out_of_range.load(Ordering::Relaxed)
    }

    pub fn len(&self) -> usize {
        self.hits.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hits.is_empty()
    }

    /// Every rule with hits, most hits first (ties: lower sid, then lower index).
    fn with_hits(&self) -> Vec<RuleHit> {
        let mut v: Vec<RuleHit> = self
            .hits
            .iter()
            .zip(self.ids.iter())
            .enumerate()
            .filter_map(|(i, (c, &(gid, sid)))| {
                let hits = c.load(Ordering::Relaxed);
                (hits > 0).then_some(RuleHit {
                    index: i as u32,
                    sid,
                    gid,
                    hits,
                })
            })
            .collect();
        v.sort_by(|a, b| {
            b.hits
                .cmp(&a.hits)
                .then(a.sid.cmp(&b.sid))
                .then(a.index.cmp(&b.index))
        });
        v
    }

    /// The `n` rules with most hits (only rules with hits), for the summary.
    pub fn top(&self, n: usize) -> Vec<RuleHit> {
        let mut v = self.with_hits();
        v.truncate(n);
        v
    }

    /// The series of [`RULE_HITS_METRIC`]: labels and value. Only sids with hits, at most
    /// `max_series` of them (most hits first); the hits of the rest are summed under
    /// `sid="other"` (one more series, present only when non-zero), so the family's
    /// cardinality stays bounded whatever the rule set. Rules that share a sid (under
    /// different gids) are one series.
    pub fn series(&self, max_series: usize) -> Vec<(Vec<(&'static str, String)>, u64)> {
        let mut by_sid: HashMap<u32, u64> = HashMap::new();
        for h in self.with_hits() {
            *by_sid.entry(h.sid).or_insert(0) += h.hits;
        }
        let mut sids: Vec<(u32, u64)> = by_sid.into_iter().collect();
        sids.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let other: u64 = sids.iter().skip(max_series).map(|s| s.1).sum();
        sids.truncate(max_series);
        let mut out: Vec<_> = sids
            .into_iter()
            .map(|(sid, n)| (vec![("sid", sid.to_string())], n))
            .collect();
        if other > 0 {
            out.push((vec![("sid", "other".to_string())], other));
        }
        out
    }
}
