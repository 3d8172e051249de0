//! The token-bucket table: fixed capacity, one flat array of [`RateEntry`] in buckets of
//! [`BUCKET_ENTRIES`], tokens in integer fixed point refilled from the frames' receive times.
//! The semantics are docs/rate-limit.md's; `gpu-kernels/cuda/rate_limit.cuh` implements the same
//! on the same bytes (`pw_rl_entry`, `pw_rl_table`, `pw_rl_counters`), and the differential tests
//! hold the two equal.

use pktwarp_core::meta::{mf, PacketMeta};

use super::config::{KeySpec, OnFull, RateConfig};
use crate::config::FlowError;

/// Entries per bucket: a bucket is one 512-byte run of the array.
pub const BUCKET_ENTRIES: usize = 8;
/// The largest table (entries).
pub const MAX_ENTRIES: u64 = 1 << 31;
/// Size of [`RateEntry`] (`PW_RL_ENTRY_SIZE`): one cache line.
pub const ENTRY_SIZE: usize = 64;
/// Most rules of one stage (`PW_RL_MAX_RULES`).
pub const MAX_RULES: usize = 32;
/// Token units one frame costs: a bucket refills `rate_pps` units per nanosecond, exactly.
pub const UNIT: u64 = 1_000_000_000;
/// The highest rate: 10^9 frames per second.
pub const MAX_RATE_PPS: u64 = 1_000_000_000;
/// The deepest bucket: 2^32 - 1 frames (its units fit a u64 with room for a refill).
pub const MAX_BURST: u64 = u32::MAX as u64;
/// [`RateResult::rule`] of a frame no rule matched.
pub const NO_RULE: u8 = 0xff;

/// [`RuleAbi::key_kind`] values.
pub mod kind {
    pub const SRC: u8 = 0;
    pub const DST: u8 = 1;
    pub const FLOW: u8 = 2;
}

/// [`RuleAbi::match_flags`] bits.
pub mod mflag {
    pub const IP: u8 = 0x01;
    pub const PROTO: u8 = 0x02;
    pub const SRC_PORT: u8 = 0x04;
    pub const DST_PORT: u8 = 0x08;
    pub const TCP_FLAGS: u8 = 0x10;
}

/// What the table did with a frame (`PW_RL_*`).
pub mod outcome {
    /// No rule matched: untouched.
    pub const UNMATCHED: u8 = 0;
    /// Its bucket had a token: passes.
    pub const PASSED: u8 = 1;
    /// Its bucket was empty: dropped `rate_limited`.
    pub const LIMITED: u8 = 2;
    /// No bucket could be had; `on_full` decides.
    pub const TABLE_FULL: u8 = 3;
}

/// A bucket's key (`pw_rl_key`, 40 bytes). `src` / `dst` keys hold the masked address in
/// `addr[0]`; `flow` keys the two endpoints in canonical order (the smaller (address, port)
/// first), so both directions are one key.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateKey {
    pub addr: [[u32; 4]; 2],
    pub port: [u16; 2],
    /// The rule's index.
    pub rule: u8,
    /// `flow` keys: the IP protocol; else 0.
    pub proto: u8,
    pub ip_version: u8,
    pub reserved: u8,
}

// SAFETY: RateEntry is repr(C), ENTRY_SIZE bytes of integers with no padding (pinned by its
// layout test).
unsafe impl crate::table::PlainEntry for RateEntry {}

/// One bucket (`pw_rl_entry`, 64 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateEntry {
    pub key: RateKey,
    /// Token units ([`UNIT`] per frame), at most the rule's `burst * UNIT`.
    pub tokens: u64,
    /// The largest receive time applied (ns): tokens are as of then.
    pub last_ns: u64,
    /// [`ENTRY_OCCUPIED`].
    pub flags: u32,
    /// Frames this key had dropped (saturating).
    pub drops: u32,
}

/// [`RateEntry::flags`]: the slot holds a bucket.
pub const ENTRY_OCCUPIED: u32 = 1;

/// One rule as the table reads it (`pw_rl_rule`, 48 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleAbi {
    pub rate_pps: u64,
    /// `burst * UNIT`.
    pub cap: u64,
    /// ns an empty bucket takes to fill: `ceil(cap / rate_pps)`.
    pub full_ns: u64,
    pub src_lo: u16,
    pub src_hi: u16,
    pub dst_lo: u16,
    pub dst_hi: u16,
    pub flags_mask: u16,
    pub flags_value: u16,
    /// [`mflag`] bits: which of the fields below are tested.
    pub match_flags: u8,
    pub proto: u8,
    pub ip_version: u8,
    /// [`kind`].
    pub key_kind: u8,
    pub prefix_v4: u8,
    pub prefix_v6: u8,
    pub reserved: [u8; 6],
}

/// The table's parameters (`pw_rl_table`): the rules and what a full table does. Swapped whole
/// by a reload.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateTableAbi {
    /// Address of the first entry (host or device memory).
    pub entries: u64,
    pub nbuckets: u32,
    pub seed: u32,
    pub nrules: u32,
    /// 1: a frame that finds no bucket is dropped.
    pub on_full_drop: u32,
    pub rules: [RuleAbi; MAX_RULES],
}

/// Bytes of [`RateTableAbi`] (`pw_rl_table`).
pub const TABLE_ABI_BYTES: usize = 24 + 48 * MAX_RULES;
/// Bytes of [`RateCounters`] (`pw_rl_counters`).
pub const COUNTERS_BYTES: usize = 16 + 24 * MAX_RULES;

impl RateTableAbi {
    /// The block as the CUDA side reads it (`pw_rl_table`, little-endian), without unsafe
    /// casts: the GPU stage's parameter block embeds it.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(TABLE_ABI_BYTES);
        b.extend_from_slice(&self.entries.to_le_bytes());
        for w in [self.nbuckets, self.seed, self.nrules, self.on_full_drop] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        for r in &self.rules {
            for w in [r.rate_pps, r.cap, r.full_ns] {
                b.extend_from_slice(&w.to_le_bytes());
            }
            for h in [
                r.src_lo,
                r.src_hi,
                r.dst_lo,
                r.dst_hi,
                r.flags_mask,
                r.flags_value,
            ] {
                b.extend_from_slice(&h.to_le_bytes());
            }
            b.extend_from_slice(&[
                r.match_flags,
                r.proto,
                r.ip_version,
                r.key_kind,
                r.prefix_v4,
                r.prefix_v6,
            ]);
            b.extend_from_slice(&r.reserved);
        }
        debug_assert_eq!(b.len(), TABLE_ABI_BYTES);
        b
    }
}

impl RateCounters {
    /// Counters as the CUDA side writes them (`pw_rl_counters`, little-endian u64s); `None`
    /// when `b` is not [`COUNTERS_BYTES`] long.
    pub fn from_bytes(b: &[u8]) -> Option<RateCounters> {
        if b.len() != COUNTERS_BYTES {
            return None;
        }
        let w = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[8 * i..8 * i + 8]);
            u64::from_le_bytes(x)
        };
        let mut c = RateCounters {
            created: w(0),
            reused: w(1),
            ..RateCounters::default()
        };
        for (i, r) in c.rules.iter_mut().enumerate() {
            *r = RuleCounters {
                matched: w(2 + 3 * i),
                limited: w(3 + 3 * i),
                table_full: w(4 + 3 * i),
            };
        }
        Some(c)
    }

    /// The counters as the CUDA side lays them out (`pw_rl_counters`): the inverse of
    /// [`RateCounters::from_bytes`].
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(COUNTERS_BYTES);
        b.extend_from_slice(&self.created.to_le_bytes());
        b.extend_from_slice(&self.reused.to_le_bytes());
        for r in &self.rules {
            for w in [r.matched, r.limited, r.table_full] {
                b.extend_from_slice(&w.to_le_bytes());
            }
        }
        b
    }

    /// What grew from `old` to `self`, field by field (a field that went down adds nothing:
    /// counters only grow).
    pub fn growth_since(&self, old: &RateCounters) -> RateCounters {
        let mut g = RateCounters {
            created: self.created.saturating_sub(old.created),
            reused: self.reused.saturating_sub(old.reused),
            ..RateCounters::default()
        };
        for ((g, n), o) in g.rules.iter_mut().zip(&self.rules).zip(&old.rules) {
            *g = RuleCounters {
                matched: n.matched.saturating_sub(o.matched),
                limited: n.limited.saturating_sub(o.limited),
                table_full: n.table_full.saturating_sub(o.table_full),
            };
        }
        g
    }
}

/// Per-rule counters (`pw_rl_rule_counters`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleCounters {
    /// Frames that took this rule.
    pub matched: u64,
    /// Frames dropped over the limit.
    pub limited: u64,
    /// Frames that found no bucket (passed or dropped as `on_full` says).
    pub table_full: u64,
}

/// Table counters (`pw_rl_counters`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateCounters {
    /// Buckets made (a new key).
    pub created: u64,
    /// Of those, made in the slot of an idle bucket (one full again, whose key it forgets).
    pub reused: u64,
    pub rules: [RuleCounters; MAX_RULES],
}

impl Default for RateCounters {
    fn default() -> Self {
        RateCounters {
            created: 0,
            reused: 0,
            rules: [RuleCounters::default(); MAX_RULES],
        }
    }
}

/// A frame's result (`pw_rl_result`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateResult {
    /// The rule's index, [`NO_RULE`] when none matched.
    pub rule: u8,
    /// [`outcome`].
    pub outcome: u8,
    /// 1: drop the frame (`rate_limited`).
    pub drop: u8,
    pub reserved: u8,
}

/// Checks a table size: a positive multiple of [`BUCKET_ENTRIES`], at most [`MAX_ENTRIES`].
pub fn check_capacity(entries: u64) -> Result<(), FlowError> {
    let bad = |message: String| {
        Err(FlowError::Config {
            key: "entries".into(),
            message,
        })
    };
    if entries == 0 || entries % BUCKET_ENTRIES as u64 != 0 {
        return bad(format!(
            "{entries} is not a positive multiple of {BUCKET_ENTRIES} (entries per bucket)"
        ));
    }
    if entries > MAX_ENTRIES {
        return bad(format!("{entries} is more than the limit of {MAX_ENTRIES}"));
    }
    Ok(())
}

/// A rule's parameters as the table reads them.
fn rule_abi(r: &super::config::RateRule) -> RuleAbi {
    let cap = r.burst() * UNIT;
    let mut a = RuleAbi {
        rate_pps: r.rate_pps,
        cap,
        full_ns: cap.div_ceil(r.rate_pps),
        ..RuleAbi::default()
    };
    let m = &r.matches;
    if let Some(v) = m.ip {
        a.match_flags |= mflag::IP;
        a.ip_version = v.0;
    }
    if let Some(p) = m.proto {
        a.match_flags |= mflag::PROTO;
        a.proto = p.0;
    }
    if let Some(p) = m.src_port {
        a.match_flags |= mflag::SRC_PORT;
        (a.src_lo, a.src_hi) = (p.lo, p.hi);
    }
    if let Some(p) = m.dst_port {
        a.match_flags |= mflag::DST_PORT;
        (a.dst_lo, a.dst_hi) = (p.lo, p.hi);
    }
    if let Some(f) = m.tcp_flags {
        a.match_flags |= mflag::TCP_FLAGS;
        (a.flags_mask, a.flags_value) = (f.mask, f.value);
    }
    (a.key_kind, a.prefix_v4, a.prefix_v6) = match r.key {
        KeySpec::Src { v4, v6 } => (kind::SRC, v4, v6),
        KeySpec::Dst { v4, v6 } => (kind::DST, v4, v6),
        KeySpec::Flow => (kind::FLOW, 0, 0),
    };
    a
}

/// The parameter block of a checked config, `entries` 0 (set by [`RateTable::abi`]).
pub fn params_of(c: &RateConfig) -> Result<RateTableAbi, FlowError> {
    c.validate()?;
    let mut p = RateTableAbi {
        entries: 0,
        nbuckets: (c.entries / BUCKET_ENTRIES as u64) as u32,
        seed: c.hash_seed,
        nrules: c.rules.len() as u32,
        on_full_drop: (c.on_full == OnFull::Drop) as u32,
        rules: [RuleAbi::default(); MAX_RULES],
    };
    for (slot, r) in p.rules.iter_mut().zip(c.rule_values()) {
        *slot = rule_abi(r);
    }
    Ok(p)
}

/// The top `bits` of an address word `i` (32 bits each) kept: a prefix mask.
fn mask_word(prefix: u8, i: usize) -> u32 {
    let bits = (prefix as i32 - 32 * i as i32).clamp(0, 32);
    if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    }
}

/// Whether `m` meets rule `r`'s match (an IPv4 / IPv6 frame).
fn rule_matches(r: &RuleAbi, m: &PacketMeta) -> bool {
    let f = r.match_flags;
    if f & mflag::IP != 0 && m.ip_version != r.ip_version {
        return false;
    }
    if f & mflag::PROTO != 0 && m.ip_proto != r.proto {
        return false;
    }
    let l4 = m.flags & mf::L4 != 0;
    if f & mflag::SRC_PORT != 0 && !(l4 && (r.src_lo..=r.src_hi).contains(&m.src_port)) {
        return false;
    }
    if f & mflag::DST_PORT != 0 && !(l4 && (r.dst_lo..=r.dst_hi).contains(&m.dst_port)) {
        return false;
    }
    if f & mflag::TCP_FLAGS != 0 && !(l4 && m.tcp_flags & r.flags_mask == r.flags_value) {
        return false;
    }
    true
}

/// The frame's rule and its bucket key: the first rule it meets; `None` for a frame that is not
/// IPv4 / IPv6 or meets no rule.
pub fn classify(p: &RateTableAbi, m: &PacketMeta) -> Option<RateKey> {
    if m.ip_version != 4 && m.ip_version != 6 {
        return None;
    }
    let n = (p.nrules as usize).min(MAX_RULES);
    let i = p.rules[..n].iter().position(|r| rule_matches(r, m))?;
    let r = &p.rules[i];
    let mut k = RateKey {
        rule: i as u8,
        ip_version: m.ip_version,
        ..RateKey::default()
    };
    let prefix = if m.ip_version == 4 {
        r.prefix_v4
    } else {
        r.prefix_v6
    };
    match r.key_kind {
        kind::SRC | kind::DST => {
            let a = if r.key_kind == kind::SRC {
                &m.src_ip
            } else {
                &m.dst_ip
            };
            for (w, (o, x)) in k.addr[0].iter_mut().zip(a).enumerate() {
                *o = x & mask_word(prefix, w);
            }
        }
        _ => {
            let ports = m.flags & mf::L4 != 0 && matches!(m.ip_proto, 6 | 17 | 132);
            let (sp, dp) = if ports {
                (m.src_port, m.dst_port)
            } else {
                (0, 0)
            };
            let a_first = (m.src_ip, sp) <= (m.dst_ip, dp);
            let (a, b) = if a_first {
                ((m.src_ip, sp), (m.dst_ip, dp))
            } else {
                ((m.dst_ip, dp), (m.src_ip, sp))
            };
            k.addr = [a.0, b.0];
            k.port = [a.1, b.1];
            k.proto = m.ip_proto;
        }
    }
    Some(k)
}

/// The key's hash: [`crate::key::murmur3_words`] over its ten words (addresses, ports,
/// rule | proto | version), as the flow table hashes its keys.
pub fn hash(k: &RateKey, seed: u32) -> u32 {
    let mut words = [0u32; 10];
    words[..4].copy_from_slice(&k.addr[0]);
    words[4..8].copy_from_slice(&k.addr[1]);
    words[8] = u32::from(k.port[0]) | u32::from(k.port[1]) << 16;
    words[9] = u32::from(k.rule) | u32::from(k.proto) << 8 | u32::from(k.ip_version) << 16;
    crate::key::murmur3_words(&words, seed)
}

/// A per-queue token-bucket table (see the module doc).
#[derive(Clone)]
pub struct RateTable {
    entries: Vec<RateEntry>,
    params: RateTableAbi,
    counters: RateCounters,
}

impl std::fmt::Debug for RateTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateTable")
            .field("capacity", &self.entries.len())
            .field("rules", &self.params.nrules)
            .finish_non_exhaustive()
    }
}

impl RateTable {
    /// An empty table as the config says (its size, seed and rules); errors name the key, or
    /// the bytes the table needs when they cannot be had.
    pub fn from_config(c: &RateConfig) -> Result<RateTable, FlowError> {
        let params = params_of(c)?;
        let n = c.entries as usize;
        let mut entries = Vec::new();
        entries
            .try_reserve_exact(n)
            .map_err(|e| FlowError::Memory {
                entries: c.entries,
                bytes: c.entries.saturating_mul(ENTRY_SIZE as u64),
                reason: e.to_string(),
            })?;
        entries.resize(n, RateEntry::default());
        Ok(RateTable {
            entries,
            params,
            counters: RateCounters::default(),
        })
    }

    /// New rules (a reload): the same table size and seed. `keep` keeps the buckets (the
    /// rules key them as before); otherwise every bucket starts afresh (empty slots are full
    /// buckets).
    pub fn set_rules(&mut self, c: &RateConfig, keep: bool) -> Result<(), FlowError> {
        let p = params_of(c)?;
        if p.nbuckets != self.params.nbuckets || p.seed != self.params.seed {
            return Err(FlowError::Config {
                key: "entries".into(),
                message: "a reload cannot change `entries` or `hash_seed` (restart needed)".into(),
            });
        }
        if !keep {
            self.entries.fill(RateEntry::default());
        }
        self.params = p;
        Ok(())
    }

    /// The per-rule counters, zeroed here (a reload that renames the rules moves them to the
    /// old names).
    pub fn take_rule_counters(&mut self) -> [RuleCounters; MAX_RULES] {
        std::mem::replace(
            &mut self.counters.rules,
            [RuleCounters::default(); MAX_RULES],
        )
    }

    /// Every counter, zeroed here (a test's stand-in for the GPU moves them to the device's
    /// side this way).
    pub fn take_counters(&mut self) -> RateCounters {
        std::mem::take(&mut self.counters)
    }

    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Occupied entries (a full scan).
    pub fn len(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.flags & ENTRY_OCCUPIED != 0)
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn counters(&self) -> RateCounters {
        self.counters
    }

    pub fn entries(&self) -> &[RateEntry] {
        &self.entries
    }

    /// The entry array as bytes (what the CUDA copy holds byte for byte).
    pub fn as_bytes(&self) -> &[u8] {
        crate::table::entry_bytes(&self.entries)
    }

    /// The parameter block rate_limit.cuh reads, with `entries` the address of a copy of
    /// [`RateTable::entries`].
    pub fn abi(&self, entries: u64) -> RateTableAbi {
        RateTableAbi {
            entries,
            ..self.params
        }
    }

    /// The bucket of a key.
    pub fn bucket_of(&self, k: &RateKey) -> u32 {
        hash(k, self.params.seed) % self.params.nbuckets
    }

    /// Whether entry `e` is full again at `now` (so forgetting it changes nothing): its slot
    /// may hold another key. An entry of a rule that no longer exists is idle too.
    fn idle(&self, e: &RateEntry, now: u64) -> bool {
        let r = e.key.rule as usize;
        if r >= (self.params.nrules as usize).min(MAX_RULES) {
            return true;
        }
        now.saturating_sub(e.last_ns) >= self.params.rules[r].full_ns
    }

    /// Applies one frame (parse metadata, receive time in ns).
    pub fn apply(&mut self, m: &PacketMeta, now: u64) -> RateResult {
        let Some(k) = classify(&self.params, m) else {
            return RateResult {
                rule: NO_RULE,
                ..RateResult::default()
            };
        };
        self.apply_key(&k, now)
    }

    /// Applies a frame whose key is `k` (from [`classify`]).
    pub fn apply_key(&mut self, k: &RateKey, now: u64) -> RateResult {
        let ri = k.rule as usize;
        let r = self.params.rules[ri];
        self.counters.rules[ri].matched += 1;
        let base = self.bucket_of(k) as usize * BUCKET_ENTRIES;
        let (mut found, mut free, mut idle) = (None, None, None);
        for i in base..base + BUCKET_ENTRIES {
            let e = &self.entries[i];
            if e.flags & ENTRY_OCCUPIED == 0 {
                free = free.or(Some(i));
            } else if e.key == *k {
                found = Some(i);
                break;
            } else if idle.is_none() && self.idle(e, now) {
                idle = Some(i);
            }
        }
        let res = |outcome: u8, drop: bool| RateResult {
            rule: k.rule,
            outcome,
            drop: drop as u8,
            reserved: 0,
        };
        let i = match (found, free, idle) {
            (Some(i), _, _) => {
                let e = &mut self.entries[i];
                let dt = now.saturating_sub(e.last_ns);
                e.tokens = if dt >= r.full_ns {
                    r.cap
                } else {
                    r.cap.min(e.tokens + dt * r.rate_pps)
                };
                e.last_ns = e.last_ns.max(now);
                i
            }
            (None, Some(i), _) | (None, None, Some(i)) => {
                if free.is_none() {
                    self.counters.reused += 1;
                }
                self.counters.created += 1;
                self.entries[i] = RateEntry {
                    key: *k,
                    tokens: r.cap,
                    last_ns: now,
                    flags: ENTRY_OCCUPIED,
                    drops: 0,
                };
                i
            }
            (None, None, None) => {
                self.counters.rules[ri].table_full += 1;
                return res(outcome::TABLE_FULL, self.params.on_full_drop != 0);
            }
        };
        let e = &mut self.entries[i];
        if e.tokens >= UNIT {
            e.tokens -= UNIT;
            res(outcome::PASSED, false)
        } else {
            e.drops = e.drops.saturating_add(1);
            self.counters.rules[ri].limited += 1;
            res(outcome::LIMITED, true)
        }
    }

    /// Applies a burst in order; `out[i]` is frame i's result. The slices must be of one length.
    pub fn apply_burst(
        &mut self,
        metas: &[PacketMeta],
        now: &[u64],
        out: &mut [RateResult],
    ) -> Result<(), FlowError> {
        let n = metas.len();
        if now.len() != n || out.len() != n {
            return Err(FlowError::BurstLengths {
                metas: n,
                frames: n,
                times: now.len(),
                out: out.len(),
            });
        }
        for ((m, &t), r) in metas.iter().zip(now).zip(out.iter_mut()) {
            *r = self.apply(m, t);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rules: &str) -> RateTable {
        let c: RateConfig =
            serde_saphyr::from_str(&format!("entries: 8\nrules:\n{rules}")).expect("config");
        RateTable::from_config(&c).expect("table")
    }

    fn syn_from(src: u32, v: u8) -> PacketMeta {
        PacketMeta {
            ip_version: v,
            ip_proto: 6,
            flags: mf::L4,
            tcp_flags: 0x02,
            src_ip: [src, 0, 0, if v == 6 { 7 } else { 0 }],
            dst_ip: [0x0a00_0001, 0, 0, 0],
            src_port: 40000,
            dst_port: 80,
            ..PacketMeta::default()
        }
    }

    #[test]
    fn a_bucket_drains_and_refills_exactly() {
        let mut t = table("  - { name: a, key: src, rate_pps: 2, burst: 3 }\n");
        let m = syn_from(1, 4);
        let got: Vec<u8> = (0..5).map(|_| t.apply(&m, 1000).outcome).collect();
        assert_eq!(got, [1, 1, 1, 2, 2]);
        // 2 per second: one token takes 500 ms; 499_999_999 ns later there is none yet.
        assert_eq!(t.apply(&m, 1000 + 499_999_999).outcome, outcome::LIMITED);
        assert_eq!(t.apply(&m, 1000 + 500_000_000).outcome, outcome::PASSED);
        let c = t.counters();
        assert_eq!(
            (c.created, c.rules[0].matched, c.rules[0].limited),
            (1, 7, 3)
        );
        assert_eq!(t.entries().iter().map(|e| e.drops).sum::<u32>(), 3);
        // A time before the last one refills nothing and moves nothing back.
        assert_eq!(t.apply(&m, 5).outcome, outcome::LIMITED);
    }

    #[test]
    fn prefixes_group_sources_and_rules_are_first_match() {
        let mut t = table(concat!(
            "  - { name: web, match: { proto: tcp, dst_port: 80 }, key: src_prefix/24/48, rate_pps: 1, burst: 1 }\n",
            "  - { name: rest, key: flow, rate_pps: 1, burst: 1 }\n"
        ));
        let a = syn_from(0xc000_0201, 4);
        let b = syn_from(0xc000_02fe, 4);
        let c = syn_from(0xc000_0301, 4);
        assert_eq!(t.apply(&a, 1).outcome, outcome::PASSED);
        assert_eq!(t.apply(&b, 1).outcome, outcome::LIMITED, "same /24");
        assert_eq!(t.apply(&c, 1).outcome, outcome::PASSED, "another /24");
        // IPv6: /48 keeps word 0 and the top half of word 1; word 3 differs and is masked.
        let v6 = syn_from(0x2001_0db8, 6);
        assert_eq!(t.apply(&v6, 1).outcome, outcome::PASSED);
        let mut v6b = v6;
        v6b.src_ip[3] = 99;
        assert_eq!(t.apply(&v6b, 1).outcome, outcome::LIMITED);
        // Not port 80: the second rule, keyed by flow; the reply direction is the same flow.
        let mut f = a;
        f.dst_port = 22;
        let mut r = f;
        std::mem::swap(&mut r.src_ip, &mut r.dst_ip);
        std::mem::swap(&mut r.src_port, &mut r.dst_port);
        assert_eq!(
            t.apply(&f, 1),
            RateResult {
                rule: 1,
                outcome: 1,
                drop: 0,
                reserved: 0
            }
        );
        assert_eq!(t.apply(&r, 1).outcome, outcome::LIMITED);
        // Not IP: no rule.
        assert_eq!(t.apply(&PacketMeta::default(), 1).rule, NO_RULE);
    }

    #[test]
    fn a_full_bucket_reuses_idle_slots_then_follows_on_full() {
        for (on_full, drop) in [("pass", 0), ("drop", 1)] {
            let c: RateConfig = serde_saphyr::from_str(&format!(
                "entries: 8\non_full: {on_full}\nrules:\n  - {{ name: a, key: src, rate_pps: 1, burst: 2 }}\n"
            ))
            .unwrap();
            let mut t = RateTable::from_config(&c).unwrap();
            for s in 0..8 {
                t.apply(&syn_from(s, 4), 0);
            }
            let r = t.apply(&syn_from(100, 4), 1);
            assert_eq!((r.outcome, r.drop), (outcome::TABLE_FULL, drop));
            // Two seconds on, every bucket is full again: a slot is reused.
            let r = t.apply(&syn_from(100, 4), 2_000_000_000);
            assert_eq!(r.outcome, outcome::PASSED);
            let k = t.counters();
            assert_eq!((k.created, k.reused, k.rules[0].table_full), (9, 1, 1));
            assert_eq!(t.len(), 8);
        }
    }

    #[test]
    fn a_reload_keeps_or_clears_buckets() {
        let mut t = table("  - { name: a, key: src, rate_pps: 1, burst: 1 }\n");
        let m = syn_from(1, 4);
        t.apply(&m, 0);
        assert_eq!(t.apply(&m, 0).outcome, outcome::LIMITED);
        let faster: RateConfig = serde_saphyr::from_str(
            "entries: 8\nrules:\n  - { name: a, key: src, rate_pps: 1000, burst: 1 }\n",
        )
        .unwrap();
        t.set_rules(&faster, true).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(
            t.apply(&m, 1_000_000).outcome,
            outcome::PASSED,
            "1 ms at 1000/s"
        );
        t.set_rules(&faster, false).unwrap();
        assert!(t.is_empty());
        let bigger: RateConfig = serde_saphyr::from_str(
            "entries: 16\nrules:\n  - { name: a, key: src, rate_pps: 1, burst: 1 }\n",
        )
        .unwrap();
        assert!(t.set_rules(&bigger, true).is_err());
    }

    /// The bytes the host reads from the device decode to the counters written, and the growth
    /// between two reads is per field, never negative.
    #[test]
    fn counters_round_trip_their_bytes_and_grow_per_field() {
        let mut c = RateCounters {
            created: 5,
            reused: 1,
            ..RateCounters::default()
        };
        c.rules[0].matched = 9;
        c.rules[31].table_full = 4;
        let b = c.to_bytes();
        assert_eq!(b.len(), COUNTERS_BYTES);
        assert_eq!(RateCounters::from_bytes(&b), Some(c));
        assert_eq!(&b[16 + 24 * 31 + 16..], &4u64.to_le_bytes());
        let mut later = c;
        later.created = 7;
        later.rules[0].matched = 10;
        later.reused = 0; // a restarted device's counter: adds nothing
        let g = later.growth_since(&c);
        assert_eq!((g.created, g.reused, g.rules[0].matched), (2, 0, 1));
        assert_eq!(g.rules[31], RuleCounters::default());
    }
}
