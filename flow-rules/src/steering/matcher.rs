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
    // Two loads and a byte swap rather than six byte moves.
    u64::from(u32::from_be_bytes([m[0], m[1], m[2], m[3]])) << 16
        | u64::from(u16::from_be_bytes([m[4], m[5]]))
}

#[inline]
fn ip_words(ip: &[u32; 4]) -> (u64, u64) {
    (
        (u64::from(ip[0]) << 32) | u64::from(ip[1]),
        (u64::from(ip[2]) << 32) | u64::from(ip[3]),
    )
}

/// Packs the words some rule uses (`used`: bit w = word w; the others stay 0, which no rule
/// looks at). The field tests are branch-free: the key's fields are data, and a mispredicted
/// branch costs more than the arithmetic; the `used` tests depend on the matcher only.
#[inline]
fn pack(k: &SteerKey, used: u8) -> Packed {
    let flags = (u64::from(k.vlan_count > 0) * F_VLAN)
        | (u64::from(k.l4) * F_L4)
        | (u64::from(k.ecpri) * F_ECPRI)
        | (u64::from(k.ip_version == 4) * F_IPV4)
        | (u64::from(k.ip_version == 6) * F_IPV6);
    let mut w = [0u64; WORDS];
    w[0] = u64::from(k.ether_type)
        | u64::from(k.ip_proto) << 16
        | u64::from(k.dscp) << 24
        | u64::from(k.vlan_tci) << 32
        | flags
        | u64::from(k.tunnel) << 56;
    if used & 0b10 != 0 {
        w[1] = u64::from(k.tunnel_id)
            | u64::from(k.ecpri_msg_type) << 32
            | u64::from(k.ecpri_pc_id) << 40;
    }
    if used & 0b1100 != 0 {
        w[2] = mac_word(&k.dst_mac);
        w[3] = mac_word(&k.src_mac);
    }
    if used & 0b11_0000 != 0 {
        (w[4], w[5]) = ip_words(&k.src_ip);
    }
    if used & 0b1100_0000 != 0 {
        (w[6], w[7]) = ip_words(&k.dst_ip);
    }
    Packed {
        w,
        src_port: k.src_port,
        dst_port: k.dst_port,
    }
}

/// A frame's class, read off packed word 0: the five flags (VLAN, L4, eCPRI, IPv4, IPv6), the
/// protocol kind (TCP 1, UDP 2, other 0) and the tunnel kind (none 0, VXLAN 1, GTP-U 2, other 3).
#[inline]
fn class_of(w0: u64) -> usize {
    let flags = ((w0 >> 48) & 0x1F) as usize;
    let proto = (w0 >> 16) as u8;
    let kind = usize::from(proto == 6) | usize::from(proto == 17) << 1;
    // TUNNEL_VXLAN = 1, TUNNEL_GTPU = 2, anything above: 3.
    let tunnel = usize::from(((w0 >> 56) as u8).min(3));
    flags | kind << 5 | tunnel << 7
}

fn proto_kind(p: u8) -> usize {
    match p {
        6 => 1,
        17 => 2,
        _ => 0,
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

const CLASSES: usize = 512;

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
    /// All 8 words (the loop unrolls and vectorizes) and the ports; `&` rather than `&&`: one
    /// predictable branch per rule instead of three.
    #[inline]
    fn matches(&self, p: &Packed) -> bool {
        let mut diff = 0u64;
        for i in 0..WORDS {
            diff |= (p.w[i] & self.mask[i]) ^ self.value[i];
        }
        (diff == 0)
            & (p.src_port.wrapping_sub(self.sport_lo) <= self.sport_span)
            & (p.dst_port.wrapping_sub(self.dport_lo) <= self.dport_span)
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
    let flags = ((c & 0x1F) as u64) << 48;
    let kind = (c >> 5) & 3;
    let tunnel = (c >> 7) & 3;
    if flags & F_IPV4 != 0 && flags & F_IPV6 != 0 || kind == 3 {
        return false; // no key has this class
    }
    let (m, v) = (r.mask[0], r.value[0]);
    let all_flags = F_VLAN | F_L4 | F_ECPRI | F_IPV4 | F_IPV6;
    if (flags ^ v) & m & all_flags != 0 {
        return false;
    }
    // Only exact protocol and tunnel constraints are compiled: each is pinned or free.
    if (m >> 16) as u8 == 0xFF && proto_kind((v >> 16) as u8) != kind {
        return false;
    }
    if (m >> 56) as u8 == 0xFF && tunnel_kind((v >> 56) as u8) != tunnel {
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

/// A field a rule can pin exactly, used to index rules by value: bits of a packed word, or a
/// single port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Disc {
    Word(usize, u64),
    SrcPort,
    DstPort,
}

/// Fields worth indexing on: the ones steering rules typically pin to one value per rule
/// (EtherType, VID, tunnel id, eAxC id, MACs, ports, address prefixes of common lengths).
const DISCS: [Disc; 18] = [
    Disc::Word(0, 0xFFFF),
    Disc::Word(0, 0x0FFF << 32),
    Disc::Word(1, 0xFFFF_FFFF),
    Disc::Word(1, 0xFFFF << 40),
    Disc::Word(2, 0xFFFF_FFFF_FFFF),
    Disc::Word(3, 0xFFFF_FFFF_FFFF),
    Disc::DstPort,
    Disc::SrcPort,
    Disc::Word(6, 0xFFFF_FFFF << 32),
    Disc::Word(6, 0xFFFF_FF00 << 32),
    Disc::Word(6, 0xFFFF_0000 << 32),
    Disc::Word(6, 0xFF00_0000 << 32),
    Disc::Word(6, u64::MAX),
    Disc::Word(4, 0xFFFF_FFFF << 32),
    Disc::Word(4, 0xFFFF_FF00 << 32),
    Disc::Word(4, 0xFFFF_0000 << 32),
    Disc::Word(4, 0xFF00_0000 << 32),
    Disc::Word(4, u64::MAX),
];

impl Disc {
    /// The value a rule pins this field to, if it pins all of it.
    fn of_rule(self, r: &CompiledRule) -> Option<u64> {
        match self {
            Disc::Word(w, m) => (r.mask[w] & m == m).then_some(r.value[w] & m),
            Disc::SrcPort => (r.sport_span == 0).then_some(u64::from(r.sport_lo)),
            Disc::DstPort => (r.dport_span == 0).then_some(u64::from(r.dport_lo)),
        }
    }

    #[inline]
    fn of_key(self, p: &Packed) -> u64 {
        match self {
            Disc::Word(w, m) => p.w[w & (WORDS - 1)] & m,
            Disc::SrcPort => u64::from(p.src_port),
            Disc::DstPort => u64::from(p.dst_port),
        }
    }
}

/// Fewest rules an index must take out of a linear list to pay for its hash probe.
const MIN_INDEXED: usize = 4;

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    value: u64,
    /// Range in `SteerMatcher::lists`; `len == 0` marks an empty slot.
    start: u32,
    len: u32,
}

/// Rules of one class that pin `disc`, by value: open addressing, power-of-two size.
#[derive(Clone, Debug)]
struct Index {
    disc: Disc,
    shift: u32,
    slots: Vec<Slot>,
}

impl Index {
    #[inline]
    fn slot_of(&self, v: u64) -> usize {
        (v.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The list range for `v` (empty when no rule pins that value).
    #[inline]
    fn find(&self, v: u64) -> (usize, usize) {
        let mask = self.slots.len() - 1;
        let mut i = self.slot_of(v) & mask;
        loop {
            let Some(s) = self.slots.get(i) else {
                return (0, 0);
            };
            if s.len == 0 {
                return (0, 0);
            }
            if s.value == v {
                return (s.start as usize, (s.start + s.len) as usize);
            }
            i = (i + 1) & mask;
        }
    }
}

/// How to find the candidates of one frame class: a few indexes (each giving the rules that pin
/// its field to the frame's value) and the remaining rules, all lists in rule order.
#[derive(Clone, Debug, Default)]
struct Plan {
    indexes: Vec<Index>,
    /// Range in `SteerMatcher::lists`.
    rest: (u32, u32),
}

/// The compiled steering rules of one port. Immutable: build a new one to change rules and
/// publish it by swapping a pointer (DESIGN.md).
#[derive(Clone, Debug)]
pub struct SteerMatcher {
    rules: Vec<CompiledRule>,
    fates: Vec<(FateIdx, Option<u32>)>,
    rss: Vec<RssTarget>,
    /// Per frame class, the plan to use (classes with the same candidate rules share one).
    class_plan: Vec<u16>,
    plans: Vec<Plan>,
    /// Rule-index lists the plans point into, each ascending.
    lists: Vec<u32>,
    /// Bit w: some rule tests packed word w.
    used: u8,
}

/// Figures about a compiled matcher, for reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SteerMatcherStats {
    pub rules: usize,
    /// Distinct candidate sets over the 256 frame classes.
    pub plans: usize,
    /// Hash indexes over all plans.
    pub indexes: usize,
    /// Largest number of rules a frame can have to test linearly (the biggest `rest` list).
    pub max_linear: usize,
    /// Bytes of tables.
    pub bytes: usize,
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
        let mut m = SteerMatcher {
            rules: compiled,
            fates,
            rss,
            class_plan: Vec::with_capacity(CLASSES),
            plans: Vec::new(),
            lists: Vec::new(),
            used: 1,
        };
        for r in &m.rules {
            for w in 0..WORDS {
                if r.mask[w] != 0 {
                    m.used |= 1 << w;
                }
            }
        }
        let mut seen: std::collections::HashMap<Vec<u32>, u16> = std::collections::HashMap::new();
        for c in 0..CLASSES {
            let cand: Vec<u32> = (0..m.rules.len() as u32)
                .filter(|&i| class_possible(&m.rules[i as usize], c))
                .collect();
            let id = match seen.get(&cand) {
                Some(id) => *id,
                None => {
                    let plan = m.plan(&cand);
                    m.plans.push(plan);
                    let id = (m.plans.len() - 1) as u16;
                    seen.insert(cand, id);
                    id
                }
            };
            m.class_plan.push(id);
        }
        m
    }

    /// Splits one class's candidates: repeatedly index on the field the most remaining rules
    /// pin, while that is at least `MIN_INDEXED` rules; the rest are tested in order.
    fn plan(&mut self, cand: &[u32]) -> Plan {
        let mut rest: Vec<u32> = cand.to_vec();
        let mut indexes = Vec::new();
        loop {
            // Gain of indexing on a field: the rules it takes out of the linear list, less the
            // largest bucket (what a frame may still test). A field every rule pins to the
            // same value gains nothing.
            let best = DISCS
                .iter()
                .map(|&d| {
                    let mut values: Vec<u64> = rest
                        .iter()
                        .filter_map(|&i| d.of_rule(&self.rules[i as usize]))
                        .collect();
                    values.sort_unstable();
                    let pinned = values.len();
                    let largest = values
                        .chunk_by(|a, b| a == b)
                        .map(<[u64]>::len)
                        .max()
                        .unwrap_or(0);
                    (pinned - largest, pinned, d)
                })
                .max_by_key(|(gain, _, _)| *gain);
            let Some((_, n, disc)) = best.filter(|(gain, _, _)| *gain >= MIN_INDEXED) else {
                break;
            };
            let mut groups: Vec<(u64, Vec<u32>)> = Vec::new();
            let mut left = Vec::with_capacity(rest.len() - n);
            for &i in &rest {
                match disc.of_rule(&self.rules[i as usize]) {
                    Some(v) => match groups.iter_mut().find(|(gv, _)| *gv == v) {
                        Some((_, g)) => g.push(i),
                        None => groups.push((v, vec![i])),
                    },
                    None => left.push(i),
                }
            }
            let size = (groups.len() * 2).next_power_of_two().max(2);
            let mut index = Index {
                disc,
                shift: 64 - size.trailing_zeros(),
                slots: vec![Slot::default(); size],
            };
            for (v, g) in groups {
                let start = self.lists.len() as u32;
                self.lists.extend_from_slice(&g);
                let mut at = index.slot_of(v) & (size - 1);
                while index.slots[at].len != 0 {
                    at = (at + 1) & (size - 1);
                }
                index.slots[at] = Slot {
                    value: v,
                    start,
                    len: g.len() as u32,
                };
            }
            indexes.push(index);
            rest = left;
        }
        let start = self.lists.len() as u32;
        self.lists.extend_from_slice(&rest);
        Plan {
            indexes,
            rest: (start, self.lists.len() as u32),
        }
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn stats(&self) -> SteerMatcherStats {
        let max_linear = self
            .plans
            .iter()
            .map(|p| (p.rest.1 - p.rest.0) as usize)
            .max()
            .unwrap_or(0);
        let indexes: Vec<&Index> = self.plans.iter().flat_map(|p| &p.indexes).collect();
        let bytes = self.rules.len() * std::mem::size_of::<CompiledRule>()
            + self.lists.len() * 4
            + indexes
                .iter()
                .map(|i| i.slots.len() * std::mem::size_of::<Slot>())
                .sum::<usize>()
            + self.class_plan.len() * 2;
        SteerMatcherStats {
            rules: self.rules.len(),
            plans: self.plans.len(),
            indexes: indexes.len(),
            max_linear,
            bytes,
        }
    }

    /// The first rule of `list` (ascending) below `best` that matches.
    #[inline]
    fn scan(&self, list: &[u32], p: &Packed, best: u32) -> u32 {
        for &i in list {
            if i >= best {
                break;
            }
            if self.rules.get(i as usize).is_some_and(|r| r.matches(p)) {
                return i;
            }
        }
        best
    }

    /// Index of the first rule matching `key`, if any.
    #[inline]
    pub fn first_match(&self, key: &SteerKey) -> Option<u32> {
        let p = pack(key, self.used);
        let plan_id = *self.class_plan.get(class_of(p.w[0]))?;
        let plan = self.plans.get(usize::from(plan_id))?;
        // Every list is in rule order, so each list's first match is its earliest; the answer
        // is the earliest over the lists.
        let mut best = u32::MAX;
        for index in &plan.indexes {
            let (lo, hi) = index.find(index.disc.of_key(&p));
            if let Some(list) = self.lists.get(lo..hi) {
                best = self.scan(list, &p, best);
            }
        }
        if let Some(list) = self.lists.get(plan.rest.0 as usize..plan.rest.1 as usize) {
            best = self.scan(list, &p, best);
        }
        (best != u32::MAX).then_some(best)
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
