//! The CPU state of `flowbits`, `threshold` and `detection_filter` (Suricata's semantics,
//! docs.suricata.io "Flow Keywords" / "Thresholding"): per flow a fixed-size bit table of the
//! rule set's flowbit names, per (rule, tracked address) a counter with its time window on
//! the frames' receive time. Both tables are bounded; what does not fit is counted.
//!
//! [`Stateful::apply`] takes the rules the stateless evaluator matched on a frame (in program
//! order) and returns those that fire. Rules that set, unset or toggle flowbits run before
//! rules that read them (Suricata orders its rules so), in program order otherwise. A rule's
//! flowbits reads (`isset`, `isnotset`, all of them) are conditions; its writes happen when it
//! matches, whatever its threshold says; `noalert`, `threshold` and `detection_filter` decide
//! only whether it fires. A frame without a tracked flow (`ct_dir` 0) matches no flowbits rule.

use super::Frame;
use crate::rules::{FlowbitCmd, Rule, Threshold, ThresholdKind, Track};
use std::collections::HashMap;
use std::net::IpAddr;

/// Table sizes.
#[derive(Debug, Clone, Copy)]
pub struct StateConfig {
    /// Most flows with flowbits.
    pub max_flows: usize,
    /// Most threshold / detection_filter counters.
    pub max_trackers: usize,
    /// A flow's bits are dropped after this long without a frame (ns), when room is needed.
    pub flow_idle_ns: u64,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            max_flows: 65536,
            max_trackers: 65536,
            flow_idle_ns: 600_000_000_000,
        }
    }
}

/// What the state tables could not hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateCounters {
    /// Frames whose flow found no room for its bits (their writes are lost).
    pub flows_full: u64,
    /// Matches whose threshold counter found no room (counted as a first match).
    pub trackers_full: u64,
    /// Matches a threshold, detection_filter or noalert kept from firing.
    pub suppressed: u64,
}

#[derive(Debug, Clone, Default)]
struct RuleState {
    /// (command, flowbit indices) in rule order.
    bits: Vec<(FlowbitCmd, Vec<usize>)>,
    noalert: bool,
    filters: Vec<Threshold>,
    /// 0 writes only, 1 writes and reads, 2 reads or nothing: the order within a frame.
    class: u8,
}

/// The flow a frame belongs to, the same for both directions.
type FlowKey = (u8, (IpAddr, u16), (IpAddr, u16));
type TrackKey = (usize, Option<IpAddr>, Option<IpAddr>);

#[derive(Debug, Clone, Copy)]
struct Tracker {
    start_ns: u64,
    /// The rule's window (its entries expire on their own window, whatever rule sweeps).
    window_ns: u64,
    count: u32,
}

/// What [`Stateful::apply_actions`] decided for a frame's matches (rule indices, ascending).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The rules that alert.
    pub fired: Vec<usize>,
    /// The rules whose action applies (a superset of `fired`).
    pub acted: Vec<usize>,
}

/// The state of one rule set.
#[derive(Debug, Clone)]
pub struct Stateful {
    cfg: StateConfig,
    rules: Vec<RuleState>,
    words: usize,
    flows: HashMap<FlowKey, (u64, Vec<u64>)>,
    trackers: HashMap<TrackKey, Tracker>,
    counters: StateCounters,
    /// When each full table was last swept (receive time): at most one sweep a second, so a
    /// full table of live entries costs each new one a lookup, not a scan.
    swept_ns: [Option<u64>; 2],
}

/// Sweeps of a full table are this far apart at least (receive time).
const SWEEP_GAP_NS: u64 = 1_000_000_000;

fn may_sweep(last: &mut Option<u64>, now_ns: u64) -> bool {
    if last.is_some_and(|l| now_ns.saturating_sub(l) < SWEEP_GAP_NS) {
        return false;
    }
    *last = Some(now_ns);
    true
}

impl Stateful {
    /// The state for `rules`, the rule set in program order (rule `i` is the program's `i`).
    pub fn new(rules: &[&Rule], cfg: StateConfig) -> Self {
        let mut names: HashMap<&str, usize> = HashMap::new();
        let mut out = Vec::with_capacity(rules.len());
        for r in rules {
            let mut st = RuleState::default();
            let (mut writes, mut reads) = (false, false);
            for fb in &r.flowbits {
                let idx = fb
                    .names
                    .iter()
                    .map(|n| {
                        let next = names.len();
                        *names.entry(n.as_str()).or_insert(next)
                    })
                    .collect();
                match fb.cmd {
                    FlowbitCmd::NoAlert => st.noalert = true,
                    FlowbitCmd::IsSet | FlowbitCmd::IsNotSet => reads = true,
                    _ => writes = true,
                }
                st.bits.push((fb.cmd, idx));
            }
            st.class = match (writes, reads) {
                (true, false) => 0,
                (true, true) => 1,
                _ => 2,
            };
            st.filters = r
                .detection_filter
                .iter()
                .chain(&r.threshold)
                .copied()
                .collect();
            out.push(st);
        }
        Stateful {
            cfg,
            rules: out,
            words: names.len().div_ceil(64),
            flows: HashMap::new(),
            trackers: HashMap::new(),
            counters: StateCounters::default(),
            swept_ns: [None; 2],
        }
    }

    pub fn counters(&self) -> StateCounters {
        self.counters
    }

    /// The same state with other table sizes (the tables must be empty: a fresh state).
    pub fn with_config(mut self, cfg: StateConfig) -> Self {
        self.cfg = cfg;
        self
    }

    /// The table sizes.
    pub fn config(&self) -> StateConfig {
        self.cfg
    }

    /// 64-bit words of a flow's bits (the rule set's flowbit names / 64, rounded up).
    pub fn bit_words(&self) -> usize {
        self.words
    }

    /// The rules' state as the GPU stage reads it (gpu-kernels/cuda/inspect_state.cuh): u32
    /// `n_rules`, then per rule the word offset of its record, 0 for a rule without state
    /// ([`Stateful::has_state`]); a record is `[class | noalert << 8 | n_bits << 16,
    /// n_filters]`, each filter `[kind, track, count, seconds]` (detection_filter first, as
    /// [`Stateful::apply_actions`] applies them), then each flowbits keyword `[cmd | n_names
    /// << 8, names...]` (codes: [`gpu_code`]). Errors when the names pass
    /// [`GPU_FLOWBIT_WORDS`] words.
    pub fn gpu_section(&self) -> Result<Vec<u32>, String> {
        if self.words > GPU_FLOWBIT_WORDS {
            return Err(format!(
                "more than {} flowbit names (the GPU stage's flow entries hold that many)",
                GPU_FLOWBIT_WORDS * 64
            ));
        }
        let n = self.rules.len();
        let mut w = vec![0u32; 1 + n];
        w[0] = n as u32;
        for (i, r) in self.rules.iter().enumerate() {
            if !self.has_state(i) {
                continue;
            }
            w[1 + i] = w.len() as u32;
            w.push(u32::from(r.class) | u32::from(r.noalert) << 8 | (r.bits.len() as u32) << 16);
            w.push(r.filters.len() as u32);
            for t in &r.filters {
                let (kind, track) = gpu_code(t);
                w.extend([kind, track, t.count, t.seconds]);
            }
            for (cmd, names) in &r.bits {
                w.push(flowbit_code(*cmd) | (names.len() as u32) << 8);
                w.extend(names.iter().map(|&x| x as u32));
            }
        }
        Ok(w)
    }

    /// Whether rule `i` has anything [`Stateful::apply`] decides: flowbits, `noalert`, a
    /// threshold or a detection_filter (a rule without fires whenever it matches).
    pub fn has_state(&self, i: usize) -> bool {
        self.rules
            .get(i)
            .is_some_and(|r| !r.bits.is_empty() || r.noalert || !r.filters.is_empty())
    }

    /// Flows holding bits now.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Of `matched` (the rule indices the stateless evaluator matched on `f`, ascending), the
    /// ones that fire, ascending; `now_ns` is the frame's receive time.
    pub fn apply(&mut self, f: &Frame, now_ns: u64, matched: &[usize]) -> Vec<usize> {
        self.apply_actions(f, now_ns, matched).fired
    }

    /// [`Stateful::apply`], with the rules whose action (`drop`, `reject`) applies to the
    /// frame too. Suricata applies a rule's action where it alerts, and also: under `noalert`;
    /// on every match of a `limit` threshold's window; on every match of a `both` window from
    /// its count on (docs.suricata.io, "Thresholding Keywords").
    pub fn apply_actions(&mut self, f: &Frame, now_ns: u64, matched: &[usize]) -> Applied {
        let mut order: Vec<usize> = matched
            .iter()
            .copied()
            .filter(|&i| i < self.rules.len())
            .collect();
        order.sort_by_key(|&i| self.rules[i].class);
        let key = flow_key(f);
        let (mut fired, mut acted) = (Vec::new(), Vec::new());
        for i in order {
            if !self.rules[i].bits.is_empty() && !self.flowbits(i, f, key, now_ns) {
                continue;
            }
            let (mut fire, mut act) = (!self.rules[i].noalert, true);
            for t in self.rules[i].filters.clone() {
                let (fi, ac) = self.threshold(i, &t, f, now_ns);
                fire &= fi;
                act &= ac;
            }
            if act {
                acted.push(i);
            }
            if fire {
                fired.push(i);
            } else {
                self.counters.suppressed += 1;
            }
        }
        fired.sort_unstable();
        acted.sort_unstable();
        Applied { fired, acted }
    }

    /// Rule `i`'s flowbits on the frame's flow: false when a read fails (nothing written).
    fn flowbits(&mut self, i: usize, f: &Frame, key: FlowKey, now_ns: u64) -> bool {
        if f.ct_dir == 0 {
            return false;
        }
        let zero = vec![0u64; self.words];
        let cur = self.flows.get(&key).map_or(&zero, |(_, b)| b);
        let is = |b: &[u64], n: usize| b[n / 64] >> (n % 64) & 1 == 1;
        let st = &self.rules[i];
        for (cmd, names) in &st.bits {
            let ok = match cmd {
                FlowbitCmd::IsSet => names.iter().any(|&n| is(cur, n)),
                FlowbitCmd::IsNotSet => names.iter().any(|&n| !is(cur, n)),
                _ => true,
            };
            if !ok {
                return false;
            }
        }
        let writes: Vec<(FlowbitCmd, usize)> = st
            .bits
            .iter()
            .filter(|(c, _)| matches!(c, FlowbitCmd::Set | FlowbitCmd::Unset | FlowbitCmd::Toggle))
            .flat_map(|(c, ns)| ns.iter().map(move |&n| (*c, n)))
            .collect();
        if writes.is_empty() {
            return true;
        }
        let Some(bits) = self.entry(key, now_ns) else {
            self.counters.flows_full += 1;
            return true;
        };
        for (c, n) in writes {
            let (w, m) = (n / 64, 1u64 << (n % 64));
            match c {
                FlowbitCmd::Set => bits[w] |= m,
                FlowbitCmd::Unset => bits[w] &= !m,
                _ => bits[w] ^= m,
            }
        }
        true
    }

    /// The flow's bits, made when there is room (idle flows are dropped to make it).
    fn entry(&mut self, key: FlowKey, now_ns: u64) -> Option<&mut Vec<u64>> {
        if !self.flows.contains_key(&key) && self.flows.len() >= self.cfg.max_flows {
            let idle = self.cfg.flow_idle_ns;
            if may_sweep(&mut self.swept_ns[0], now_ns) {
                self.flows
                    .retain(|_, (seen, _)| now_ns.saturating_sub(*seen) <= idle);
            }
            if self.flows.len() >= self.cfg.max_flows {
                return None;
            }
        }
        let words = self.words;
        let e = self.flows.entry(key).or_insert((now_ns, vec![0; words]));
        e.0 = now_ns;
        Some(&mut e.1)
    }

    /// Suricata's threshold handling for one match: whether it may fire, and whether the
    /// rule's action applies.
    fn threshold(&mut self, i: usize, t: &Threshold, f: &Frame, now_ns: u64) -> (bool, bool) {
        let (a, b) = match t.track {
            Track::BySrc => (Some(f.src), None),
            Track::ByDst => (Some(f.dst), None),
            Track::ByRule => (None, None),
            Track::ByBoth => (Some(f.src), Some(f.dst)),
        };
        // A rule with both a detection_filter and a threshold keeps two counters.
        let key = (
            i * 2 + usize::from(t.kind != ThresholdKind::Detection),
            a,
            b,
        );
        let window = u64::from(t.seconds) * 1_000_000_000;
        if let Some(e) = self.trackers.get_mut(&key) {
            if now_ns.saturating_sub(e.start_ns) <= window {
                e.count = e.count.saturating_add(1);
                return match t.kind {
                    ThresholdKind::Limit => (e.count <= t.count, true),
                    ThresholdKind::Threshold => {
                        let hit = e.count >= t.count;
                        if hit {
                            e.count = 0;
                        }
                        (hit, hit)
                    }
                    ThresholdKind::Both => (e.count == t.count, e.count >= t.count),
                    ThresholdKind::Detection => (e.count > t.count, e.count > t.count),
                };
            }
            // The window has passed: this match opens a new one.
            *e = Tracker {
                start_ns: now_ns,
                window_ns: window,
                count: 1,
            };
            let fire = first_fires(t);
            return (fire, fire || t.kind == ThresholdKind::Limit);
        }
        if self.trackers.len() >= self.cfg.max_trackers && may_sweep(&mut self.swept_ns[1], now_ns)
        {
            self.trackers
                .retain(|_, e| now_ns.saturating_sub(e.start_ns) <= e.window_ns);
        }
        if self.trackers.len() < self.cfg.max_trackers {
            self.trackers.insert(
                key,
                Tracker {
                    start_ns: now_ns,
                    window_ns: window,
                    count: 1,
                },
            );
        } else {
            self.counters.trackers_full += 1;
        }
        let fire = first_fires(t);
        (fire, fire || t.kind == ThresholdKind::Limit)
    }
}

/// Most 64-bit words of flowbits a flow keeps on the GPU (512 names; `PW_INSP_ST_WORDS`).
pub const GPU_FLOWBIT_WORDS: usize = 8;

/// A threshold's (kind, track) codes in [`Stateful::gpu_section`] (`PW_INSP_TH_*`,
/// `PW_INSP_TR_*`).
pub fn gpu_code(t: &Threshold) -> (u32, u32) {
    let kind = match t.kind {
        ThresholdKind::Limit => 0,
        ThresholdKind::Threshold => 1,
        ThresholdKind::Both => 2,
        ThresholdKind::Detection => 3,
    };
    let track = match t.track {
        Track::BySrc => 0,
        Track::ByDst => 1,
        Track::ByRule => 2,
        Track::ByBoth => 3,
    };
    (kind, track)
}

/// A flowbits command's code in [`Stateful::gpu_section`] (`PW_INSP_FB_*`; noalert 5).
fn flowbit_code(c: FlowbitCmd) -> u32 {
    match c {
        FlowbitCmd::Set => 0,
        FlowbitCmd::Unset => 1,
        FlowbitCmd::Toggle => 2,
        FlowbitCmd::IsSet => 3,
        FlowbitCmd::IsNotSet => 4,
        FlowbitCmd::NoAlert => 5,
    }
}

/// Whether the first match of a window fires.
fn first_fires(t: &Threshold) -> bool {
    match t.kind {
        ThresholdKind::Limit => true,
        ThresholdKind::Threshold | ThresholdKind::Both => t.count == 1,
        ThresholdKind::Detection => t.count == 0,
    }
}

fn flow_key(f: &Frame) -> FlowKey {
    let (a, b) = ((f.src, f.src_port), (f.dst, f.dst_port));
    if a <= b {
        (f.ip_proto, a, b)
    } else {
        (f.ip_proto, b, a)
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
