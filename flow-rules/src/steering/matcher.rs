//! Software steering: the rules compiled to a first-match matcher the port ingest runs per frame.
//!
//! Why this shape: steering files hold tens of rules (hundreds at most), so a linear first-match
//! scan over rules that are cheap to test beats building a decision structure. Two things keep
//! it cheap:
//! - every rule is a branch-free test of 8 masked 64-bit words (all fields but the ports, packed
//!   once per frame) plus two port-range checks, so a rule costs a handful of instructions;
//! - a frame's class (VLAN or not, IPv4/IPv6/other, TCP/UDP/other L4/none, tunnel, eCPRI; 256
//!   values) selects a precomputed list of the rules that can match that class at all, so a UDP
//!   frame never looks at TCP, eCPRI or other-IP-version rules.
//!
//! The class lists only drop rules that cannot match, and the masked words encode every
//! constraint, so the result equals the reference `SteerRule::matches` scan (proptest in
//! tests/steering_matcher.rs).

use super::key::{Fate, RssTarget, SteerDecision, SteerKey, TUNNEL_GTPU, TUNNEL_VXLAN};
use super::model::{prefix_mask32, Action, Item, PortRange, SteerRule};

const WORDS: usize = 8;

// Word 0: ether_type | ip_proto << 16 | dscp << 24 | vlan_tci << 32 | flags << 48 | tunnel << 56.
const F_VLAN: u64 = 1 << 48;
const F_L4: u64 = 1 << 49;
const F_ECPRI: u64 = 1 << 50;
const F_IPV4: u64 = 1 << 51;
const F_IPV6: u64 = 1 << 52;
// Word 1: tunnel_id | ecpri_msg_type << 32 | ecpri_pc_id << 40.
// Words 2, 3: dst_mac, src_mac (48 bits, first byte most significant).
// Words 4, 5: src_ip (128 bits, IPv4 in the top 32 bits of word 4); words 6, 7: dst_ip.

/// The key packed into the words every compiled rule tests.
#[derive(Clone, Copy)]
struct Packed {
    w: [u64; WORDS],
    src_port: u16,
    dst_port: u16,
}

#[inline]
fn mac_word(m: &[u8; 6]) -> u64 {
    m.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
}

#[inline]
fn ip_words(ip: &[u32; 4]) -> (u64, u64) {
    (
        (u64::from(ip[0]) << 32) | u64::from(ip[1]),
        (u64::from(ip[2]) << 32) | u64::from(ip[3]),
    )
}

#[inline]
fn pack(k: &SteerKey) -> Packed {
    let mut flags = 0u64;
    if k.vlan_count > 0 {
        flags |= F_VLAN;
    }
    if k.l4 {
        flags |= F_L4;
    }
    if k.ecpri {
        flags |= F_ECPRI;
    }
    if k.ip_version == 4 {
        flags |= F_IPV4;
    }
    if k.ip_version == 6 {
        flags |= F_IPV6;
    }
    let (s0, s1) = ip_words(&k.src_ip);
    let (d0, d1) = ip_words(&k.dst_ip);
    Packed {
        w: [
            u64::from(k.ether_type)
                | u64::from(k.ip_proto) << 16
                | u64::from(k.dscp) << 24
                | u64::from(k.vlan_tci) << 32
                | flags
                | u64::from(k.tunnel) << 56,
            u64::from(k.tunnel_id)
                | u64::from(k.ecpri_msg_type) << 32
                | u64::from(k.ecpri_pc_id) << 40,
            mac_word(&k.dst_mac),
            mac_word(&k.src_mac),
            s0,
            s1,
            d0,
            d1,
        ],
        src_port: k.src_port,
        dst_port: k.dst_port,
    }
}

/// A frame's class: vlan (1 bit) | l3 (2: none/other, v4, v6) | l4 (2: none, tcp, udp, other) |
/// tunnel (2: none, vxlan, gtpu, other) | ecpri (1).
#[inline]
fn class_of(k: &SteerKey) -> usize {
    let l3 = match k.ip_version {
        4 => 1,
        6 => 2,
        _ => 0,
    };
    class_index(
        k.vlan_count > 0,
        l3,
        l4_kind(k.l4, k.ip_proto),
        tunnel_kind(k.tunnel),
        k.ecpri,
    )
}

#[inline]
fn l4_kind(l4: bool, proto: u8) -> usize {
    match (l4, proto) {
        (false, _) => 0,
        (true, 6) => 1,
        (true, 17) => 2,
        (true, _) => 3,
    }
}

#[inline]
fn tunnel_kind(t: u8) -> usize {
    match t {
        0 => 0,
        TUNNEL_VXLAN => 1,
        TUNNEL_GTPU => 2,
        _ => 3,
    }
}

#[inline]
fn class_index(vlan: bool, l3: usize, l4: usize, tunnel: usize, ecpri: bool) -> usize {
    usize::from(vlan) | l3 << 1 | l4 << 3 | tunnel << 5 | usize::from(ecpri) << 7
}

const CLASSES: usize = 256;

/// One rule as masks and values over the packed words, plus the two port ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CompiledRule {
    mask: [u64; WORDS],
    value: [u64; WORDS],
    sport_lo: u16,
    sport_span: u16,
    dport_lo: u16,
    dport_span: u16,
}

impl CompiledRule {
    #[inline]
    fn matches(&self, p: &Packed) -> bool {
        let mut diff = 0u64;
        for i in 0..WORDS {
            diff |= (p.w[i] & self.mask[i]) ^ self.value[i];
        }
        diff == 0
            && p.src_port.wrapping_sub(self.sport_lo) <= self.sport_span
            && p.dst_port.wrapping_sub(self.dport_lo) <= self.dport_span
    }

    /// Every key this rule's successor `other` matches, this rule matches too.
    fn covers(&self, other: &CompiledRule) -> bool {
        (0..WORDS).all(|i| {
            self.mask[i] & !other.mask[i] == 0 && other.value[i] & self.mask[i] == self.value[i]
        }) && range_covers(
            self.sport_lo,
            self.sport_span,
            other.sport_lo,
            other.sport_span,
        ) && range_covers(
            self.dport_lo,
            self.dport_span,
            other.dport_lo,
            other.dport_span,
        )
    }
}

fn range_covers(lo: u16, span: u16, olo: u16, ospan: u16) -> bool {
    let hi = u32::from(lo) + u32::from(span);
    let ohi = u32::from(olo) + u32::from(ospan);
    lo <= olo && ohi <= hi
}

/// Accumulates a rule's constraints.
struct Builder {
    r: CompiledRule,
    /// Two constraints disagree (or a value has bits its field cannot hold): no key can match,
    /// as the reference says for such a rule.
    impossible: bool,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            r: CompiledRule {
                mask: [0; WORDS],
                value: [0; WORDS],
                sport_lo: 0,
                sport_span: u16::MAX,
                dport_lo: 0,
                dport_span: u16::MAX,
            },
            impossible: false,
        }
    }

    /// Require the bits of word `w` under `mask` to equal `value`.
    fn set(&mut self, w: usize, mask: u64, value: u64) {
        let overlap = self.r.mask[w] & mask;
        if value & !mask != 0 || self.r.value[w] & overlap != value & overlap {
            self.impossible = true;
            return;
        }
        self.r.mask[w] |= mask;
        self.r.value[w] |= value;
    }

    fn field(&mut self, w: usize, shift: u32, width: u32, value: u64) {
        if width < 64 && value >> width != 0 {
            self.impossible = true;
            return;
        }
        let m = (if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        }) << shift;
        self.set(w, m, value << shift);
    }

    fn flag(&mut self, f: u64) {
        self.set(0, f, f);
    }

    fn ports(&mut self, src: Option<PortRange>, dst: Option<PortRange>) {
        fn narrow(lo: &mut u16, span: &mut u16, r: PortRange) -> bool {
            let hi = u32::from(*lo) + u32::from(*span);
            let nlo = (*lo).max(r.lo);
            let nhi = hi.min(u32::from(r.hi));
            if u32::from(nlo) > nhi {
                return false; // empty intersection or an inverted range
            }
            *lo = nlo;
            *span = (nhi - u32::from(nlo)) as u16;
            true
        }
        if let Some(r) = src {
            if !narrow(&mut self.r.sport_lo, &mut self.r.sport_span, r) {
                self.impossible = true;
            }
        }
        if let Some(r) = dst {
            if !narrow(&mut self.r.dport_lo, &mut self.r.dport_span, r) {
                self.impossible = true;
            }
        }
    }

    fn finish(mut self) -> CompiledRule {
        if self.impossible {
            // A word no key meets: (w & 0) ^ 1 != 0.
            self.r.mask = [0; WORDS];
            self.r.value = [0; WORDS];
            self.r.value[0] = 1;
        }
        self.r
    }

    fn ip_prefix(&mut self, w: usize, value: u128, len: u8) {
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(len.min(128)))
        };
        self.set(w, (mask >> 64) as u64, (value >> 64) as u64);
        self.set(w + 1, mask as u64, value as u64);
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::Eth(e) => {
                if let Some(m) = &e.dst {
                    self.set(2, mac_word(&m.mask), mac_word(&m.spec));
                }
                if let Some(m) = &e.src {
                    self.set(3, mac_word(&m.mask), mac_word(&m.spec));
                }
                if let Some(t) = e.ether_type {
                    self.field(0, 0, 16, u64::from(t));
                }
            }
            Item::Vlan(v) => {
                self.flag(F_VLAN);
                if let Some(vid) = v.vid {
                    self.field(0, 32, 12, u64::from(vid));
                }
                if let Some(pcp) = v.pcp {
                    self.field(0, 45, 3, u64::from(pcp));
                }
                if let Some(t) = v.inner_type {
                    self.field(0, 0, 16, u64::from(t));
                }
            }
            Item::Ipv4(i) => {
                self.flag(F_IPV4);
                if let Some(p) = &i.src {
                    let m = u64::from(prefix_mask32(p.len)) << 32;
                    self.set(4, m, u64::from(u32::from(p.addr)) << 32);
                }
                if let Some(p) = &i.dst {
                    let m = u64::from(prefix_mask32(p.len)) << 32;
                    self.set(6, m, u64::from(u32::from(p.addr)) << 32);
                }
                self.proto_dscp(i.proto, i.dscp);
            }
            Item::Ipv6(i) => {
                self.flag(F_IPV6);
                if let Some(p) = &i.src {
                    self.ip_prefix(4, u128::from(p.addr), p.len);
                }
                if let Some(p) = &i.dst {
                    self.ip_prefix(6, u128::from(p.addr), p.len);
                }
                self.proto_dscp(i.proto, i.dscp);
            }
            Item::Tcp(p) | Item::Udp(p) => {
                self.flag(F_L4);
                let proto = if matches!(item, Item::Tcp(_)) { 6 } else { 17 };
                self.field(0, 16, 8, proto);
                self.ports(p.src_port, p.dst_port);
            }
            Item::Vxlan(v) => {
                self.field(0, 56, 8, u64::from(TUNNEL_VXLAN));
                if let Some(vni) = v.vni {
                    self.field(1, 0, 32, u64::from(vni));
                }
            }
            Item::GtpU(g) => {
                self.field(0, 56, 8, u64::from(TUNNEL_GTPU));
                if let Some(teid) = g.teid {
                    self.field(1, 0, 32, u64::from(teid));
                }
            }
            Item::Ecpri(e) => {
                self.flag(F_ECPRI);
                if let Some(t) = e.msg_type {
                    self.field(1, 32, 8, u64::from(t));
                }
                if let Some(pc) = e.pc_id {
                    self.field(1, 40, 16, u64::from(pc));
                }
            }
        }
    }

    fn proto_dscp(&mut self, proto: Option<u8>, dscp: Option<u8>) {
        if let Some(p) = proto {
            self.field(0, 16, 8, u64::from(p));
        }
        if let Some(d) = dscp {
            self.field(0, 24, 8, u64::from(d));
        }
    }
}

fn compile_rule(rule: &SteerRule) -> CompiledRule {
    let mut b = Builder::new();
    for item in &rule.pattern {
        b.item(item);
    }
    b.finish()
}

/// Whether a frame of class `c` can satisfy the rule's class-level constraints, read off the
/// compiled word 0 (flags, protocol, tunnel). Sound: it only says no when no key of that class
/// meets the masked word.
fn class_possible(r: &CompiledRule, c: usize) -> bool {
    let vlan = c & 1 != 0;
    let l3 = (c >> 1) & 3;
    let l4 = (c >> 3) & 3;
    let tunnel = (c >> 5) & 3;
    let ecpri = (c >> 7) & 1 != 0;
    if l3 == 3 {
        return false; // no key has this class
    }
    let (m, v) = (r.mask[0], r.value[0]);
    let flag_ok = |f: u64, on: bool| m & f == 0 || (v & f != 0) == on;
    if !(flag_ok(F_VLAN, vlan)
        && flag_ok(F_IPV4, l3 == 1)
        && flag_ok(F_IPV6, l3 == 2)
        && flag_ok(F_L4, l4 != 0)
        && flag_ok(F_ECPRI, ecpri))
    {
        return false;
    }
    let proto_mask = (m >> 16) as u8;
    let proto = (v >> 16) as u8;
    // Only exact protocol constraints are compiled, so the protocol is known or free.
    if proto_mask == 0xFF {
        let ok = match l4 {
            0 => true,
            1 => proto == 6,
            2 => proto == 17,
            _ => proto != 6 && proto != 17,
        };
        if !ok {
            return false;
        }
    }
    let tun_mask = (m >> 56) as u8;
    if tun_mask == 0xFF && tunnel_kind((v >> 56) as u8) != tunnel {
        return false;
    }
    true
}

#[derive(Clone, Copy, Debug)]
enum FateIdx {
    Queue(u16),
    Rss(u32),
    Drop,
    Default,
}

/// The compiled steering rules of one port. Immutable: build a new one to change rules and
/// publish it by swapping a pointer (DESIGN.md).
#[derive(Clone, Debug)]
pub struct SteerMatcher {
    rules: Vec<CompiledRule>,
    fates: Vec<(FateIdx, Option<u32>)>,
    rss: Vec<RssTarget>,
    /// `class_start[c]..class_start[c + 1]` indexes `class_rules`.
    class_start: Vec<u32>,
    class_rules: Vec<u32>,
}

impl SteerMatcher {
    /// Compiles rules in first-match order. Rules are expected to be valid
    /// (`SteerRule::validate`); any rule compiles, an unsatisfiable one never matches.
    pub fn new(rules: &[SteerRule]) -> SteerMatcher {
        let compiled: Vec<CompiledRule> = rules.iter().map(compile_rule).collect();
        let mut rss = Vec::new();
        let fates = rules
            .iter()
            .map(|r| {
                let fate = match r.fate() {
                    Some(Action::Queue(q)) => FateIdx::Queue(*q),
                    Some(Action::Rss(a)) => {
                        rss.push(RssTarget::new(&a.queues, a.hash));
                        FateIdx::Rss((rss.len() - 1) as u32)
                    }
                    Some(Action::Drop) => FateIdx::Drop,
                    Some(Action::Mark(_)) | None => FateIdx::Default,
                };
                (fate, r.mark())
            })
            .collect();
        let mut class_start = Vec::with_capacity(CLASSES + 1);
        let mut class_rules = Vec::new();
        for c in 0..CLASSES {
            class_start.push(class_rules.len() as u32);
            for (i, r) in compiled.iter().enumerate() {
                if class_possible(r, c) {
                    class_rules.push(i as u32);
                }
            }
        }
        class_start.push(class_rules.len() as u32);
        SteerMatcher {
            rules: compiled,
            fates,
            rss,
            class_start,
            class_rules,
        }
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Index of the first rule matching `key`, if any.
    #[inline]
    pub fn first_match(&self, key: &SteerKey) -> Option<u32> {
        let c = class_of(key);
        let (lo, hi) = (
            self.class_start[c] as usize,
            self.class_start[c + 1] as usize,
        );
        let candidates = self.class_rules.get(lo..hi)?;
        if candidates.is_empty() {
            return None;
        }
        let p = pack(key);
        candidates
            .iter()
            .copied()
            .find(|&i| self.rules.get(i as usize).is_some_and(|r| r.matches(&p)))
    }

    /// The steering decision for one frame.
    #[inline]
    pub fn decide(&self, key: &SteerKey) -> SteerDecision<'_> {
        let Some(i) = self.first_match(key) else {
            return SteerDecision::NO_MATCH;
        };
        let Some(&(fate, mark)) = self.fates.get(i as usize) else {
            return SteerDecision::NO_MATCH;
        };
        let fate = match fate {
            FateIdx::Queue(q) => Fate::Queue(q),
            FateIdx::Rss(j) => match self.rss.get(j as usize) {
                Some(t) => Fate::Rss(t),
                None => Fate::Default,
            },
            FateIdx::Drop => Fate::Drop,
            FateIdx::Default => Fate::Default,
        };
        SteerDecision {
            fate,
            mark,
            rule: Some(i),
        }
    }

    /// Pairs `(shadowed, by)`: rule `shadowed` can never be reached because the earlier rule
    /// `by` matches every frame it matches. Single-rule cover only: a rule hidden by the union of
    /// several earlier rules is not reported.
    pub fn shadowed(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (j, rj) in self.rules.iter().enumerate() {
            if let Some(i) = self.rules[..j].iter().position(|ri| ri.covers(rj)) {
                out.push((j, i));
            }
        }
        out
    }

    /// Words the packed key and one rule span; exposed for the benchmark's report.
    pub fn bytes_per_rule() -> usize {
        std::mem::size_of::<CompiledRule>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steering::model::{ip6_u128, Ipv6Item, Ipv6Prefix};

    #[test]
    fn ipv6_prefix_uses_both_words() {
        let rule = SteerRule {
            name: None,
            pattern: vec![Item::Ipv6(Ipv6Item {
                dst: Some(Ipv6Prefix {
                    addr: "2001:db8::"
                        .parse()
                        .unwrap_or(std::net::Ipv6Addr::UNSPECIFIED),
                    len: 96,
                }),
                ..Ipv6Item::default()
            })],
            actions: vec![Action::Queue(3)],
        };
        let m = SteerMatcher::new(std::slice::from_ref(&rule));
        let mut k = SteerKey {
            ip_version: 6,
            dst_ip: [0x2001_0db8, 0, 0, 0x1234_5678],
            ..SteerKey::default()
        };
        assert_eq!(m.first_match(&k), Some(0));
        k.dst_ip[2] = 1;
        assert_eq!(m.first_match(&k), None);
        assert!(!rule.matches(&k));
        assert_eq!(ip6_u128(&[1, 0, 0, 0]), 1u128 << 96);
    }
}
