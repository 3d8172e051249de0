//! Steering in the NIC: flow-rules' steering rules translated to rte_flow, validated and
//! created on the port. A rule the device refuses (or that cannot be expressed) is steered in
//! software instead, by the RX path, with a warning naming the rule and the PMD's reason.
//!
//! Rule order is kept both ways: in the NIC the rte_flow rules get increasing priorities in
//! rule order (one per rte_flow rule: a steering rule may expand to several, e.g. IPv4 and IPv6,
//! and devices such as net_tap (TC flower) refuse two rules of one priority); in software
//! the whole ordered rule list is matched and a frame whose first matching rule is installed in
//! the NIC keeps the queue the NIC chose, so a software rule never overrides an earlier
//! hardware one. The software set is published by one atomic swap (generation counter + Arc),
//! so rules can be replaced while traffic flows.

use std::net::Ipv6Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use dpdk_sys as sys;
use flow_rules::steering::{
    Action, EcpriItem, EthItem, Fate, Ipv4Item, Ipv6Item, Item, PortRange, RssHash, SteerKey,
    SteerMatcher, SteerRule, VlanItem,
};

use super::{eal, STANDARD_RSS_KEY};

/// Most rte_flow rules one steering rule may expand to (IP version × port-range masks).
pub const MAX_FLOWS_PER_RULE: usize = 64;

/// What happened to one rule on install.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowOutcome {
    /// In the NIC, as this many rte_flow rules.
    Hardware { rule: usize, flows: usize },
    /// Steered in software; `reason` is the PMD's rte_flow_error message (or why it could not
    /// be translated).
    Software { rule: usize, reason: String },
}

/// The software side of a rule set: what the RX path applies to every frame.
#[derive(Debug, Default)]
pub struct SoftwareSteering {
    rules: Vec<SteerRule>,
    in_hw: Vec<bool>,
    matcher: Option<SteerMatcher>,
    /// The port's RSS key is the symmetric one (a rule's `rss:` fate hashes with it).
    symmetric: bool,
}

/// Where software steering sends a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwFate {
    Queue(u16),
    Drop,
}

/// What software steering does to one frame, as the NIC would have: a fate (`None` keeps the
/// queue the NIC chose) and a mark (`None` keeps the mark the NIC set, if any). A dropped frame
/// has no mark; a mark-only rule marks and keeps the default fate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwDecision {
    pub fate: Option<SwFate>,
    pub mark: Option<u32>,
}

impl SoftwareSteering {
    /// True when no rule needs software steering (the RX path then skips parsing).
    pub fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    /// The rules the NIC refused, with their index in the rule list: what the ingest must
    /// steer in software.
    pub fn software_rules(&self) -> impl Iterator<Item = (usize, &SteerRule)> {
        self.rules
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.in_hw.get(*i).copied().unwrap_or(false))
    }

    /// The software fate for a frame's key: `None` keeps the queue the NIC chose (no rule
    /// matched, the first matching rule is in the NIC, or it only marks).
    pub fn steer_key(&self, key: &SteerKey) -> Option<SwFate> {
        self.decide_key(key).fate
    }

    /// The software fate and mark for a frame's key (see [`SwDecision`]): only a rule steered
    /// in software decides; a frame whose first matching rule is in the NIC keeps what the NIC
    /// did to it (queue and mark).
    pub fn decide_key(&self, key: &SteerKey) -> SwDecision {
        let Some(m) = self.matcher.as_ref() else {
            return SwDecision::default();
        };
        let d = m.decide(key);
        let Some(rule) = d.rule.map(|r| r as usize) else {
            return SwDecision::default();
        };
        if self.in_hw.get(rule).copied().unwrap_or(true) {
            return SwDecision::default();
        }
        let fate = match d.fate {
            Fate::Queue(q) => Some(SwFate::Queue(q)),
            // A NIC's DROP delivers nothing, so nothing carries a mark.
            Fate::Drop => {
                return SwDecision {
                    fate: Some(SwFate::Drop),
                    mark: None,
                }
            }
            Fate::Rss(t) => {
                let mut input = [0u8; 36];
                let n = t.hash_input(key, &mut input);
                let rss = if self.symmetric { &RSS_SYMMETRIC } else { &RSS };
                Some(SwFate::Queue(t.queue_for_hash(rss.hash(&input[..n]))))
            }
            Fate::Default => None,
        };
        SwDecision { fate, mark: d.mark }
    }

    /// Parses `frame` and steers it (see [`SoftwareSteering::steer_key`]).
    pub fn steer(&self, frame: &[u8]) -> Option<SwFate> {
        self.decide(frame).fate
    }

    /// Parses `frame` and decides its fate and mark (see [`SoftwareSteering::decide_key`]).
    pub fn decide(&self, frame: &[u8]) -> SwDecision {
        if self.is_empty() {
            return SwDecision::default();
        }
        let meta = crate::stage::parse::parse_frame(frame);
        self.decide_key(&steer_key(frame, &meta))
    }
}

/// The steering key of a parsed frame: the same one the executor's software steering uses.
pub use crate::steer::steer_key;

/// The NIC's RSS function under the keys a port programs (tables built once): the standard
/// key, and the symmetric one ([`super::DpdkPortOptions::symmetric_rss`]).
static RSS: std::sync::LazyLock<crate::rss::Toeplitz> =
    std::sync::LazyLock::new(|| crate::rss::Toeplitz::new(&STANDARD_RSS_KEY));
static RSS_SYMMETRIC: std::sync::LazyLock<crate::rss::Toeplitz> =
    std::sync::LazyLock::new(|| crate::rss::Toeplitz::new(&crate::rss::RSS_KEY_SYMMETRIC));

/// A published software set and its generation, read by the RX handles without locking.
#[derive(Default)]
struct Published {
    generation: AtomicU64,
    current: Mutex<Arc<SoftwareSteering>>,
}

/// An RX handle's view of the software set: re-reads it only when the generation moved.
pub struct SoftwareHandle {
    shared: Arc<Published>,
    seen: u64,
    cached: Arc<SoftwareSteering>,
    /// `cached` has no rule (the common case: every rule in the NIC, or none).
    empty: bool,
}

impl SoftwareHandle {
    /// The current set (one acquire load per call unless the set changed).
    #[inline(always)]
    pub fn load(&mut self) -> &Arc<SoftwareSteering> {
        let g = self.shared.generation.load(Ordering::Acquire);
        if g != self.seen {
            self.reload(g);
        }
        &self.cached
    }

    /// The current set when it has rules (`None`, the common case, reads nothing else).
    #[inline(always)]
    pub fn active(&mut self) -> Option<&Arc<SoftwareSteering>> {
        let g = self.shared.generation.load(Ordering::Acquire);
        if g != self.seen {
            self.reload(g);
        }
        (!self.empty).then_some(&self.cached)
    }

    #[cold]
    #[inline(never)]
    fn reload(&mut self, g: u64) {
        if let Ok(cur) = self.shared.current.lock() {
            self.cached = cur.clone();
            self.empty = self.cached.is_empty();
            self.seen = g;
        }
    }
}

struct Installed {
    flows: Vec<*mut sys::rte_flow>,
}

/// The port's rte_flow rules and the matching software set.
#[derive(Default)]
pub(super) struct FlowTable {
    installed: Mutex<Vec<Installed>>,
    published: Arc<Published>,
    hw: AtomicUsize,
    sw: AtomicUsize,
    /// The whole rule set is in the NIC by [`FlowTable::offload`]: the NIC steers every frame
    /// and the ingest keeps its queue and mark.
    nic: AtomicBool,
}

// SAFETY: rte_flow handles are opaque tokens only passed back to rte_flow_destroy, under the
// mutex and the control lock (eal::control); rte_flow calls are thread-safe against each other
// in DPDK (RTE_ETH_DEV_FLOW_OPS_THREAD_SAFE or the ethdev-level lock).
unsafe impl Send for Installed {}

impl FlowTable {
    pub(super) fn software(&self) -> SoftwareHandle {
        let cached = self
            .published
            .current
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default();
        SoftwareHandle {
            shared: self.published.clone(),
            seen: self.published.generation.load(Ordering::Acquire),
            empty: cached.is_empty(),
            cached,
        }
    }

    /// Whether the NIC steers the whole rule set (see [`FlowTable::offload`]).
    pub(super) fn nic_steers(&self) -> bool {
        self.nic.load(Ordering::Acquire)
    }

    pub(super) fn counts(&self) -> (usize, usize) {
        (
            self.hw.load(Ordering::Relaxed),
            self.sw.load(Ordering::Relaxed),
        )
    }

    /// Replaces the rule set. Order of events, so no frame goes unsteered: publish the new
    /// software set with every new rule in software, destroy the old NIC rules, create the new
    /// ones, then publish the final set (the NIC rules that were created move out of software).
    pub(super) fn replace(
        &self,
        port: u16,
        port_name: &str,
        default: DefaultRss,
        rules: &[SteerRule],
    ) -> Vec<FlowOutcome> {
        let queues = default.queues;
        // Lock order: the control lock, then `installed` (as in a port's close).
        let _control = eal::control();
        let Ok(mut installed) = self.installed.lock() else {
            return Vec::new();
        };
        self.nic.store(false, Ordering::Release);
        self.publish(rules, vec![false; rules.len()], default.symmetric);
        for old in installed.drain(..) {
            destroy(port, &old.flows);
        }
        let mut outcomes = Vec::with_capacity(rules.len());
        let mut in_hw = Vec::with_capacity(rules.len());
        let mut priority = 0u32;
        for (i, rule) in rules.iter().enumerate() {
            let label = rule.name.clone().unwrap_or_else(|| format!("#{i}"));
            let result = rule
                .validate(Some(queues))
                .map_err(|e| format!("{}: {}", e.field, e.message))
                .and_then(|()| create_rule(port, &mut priority, rule, default, true));
            match result {
                Ok(flows) => {
                    let n = flows.len();
                    installed.push(Installed { flows });
                    in_hw.push(true);
                    tracing::info!(port = %port_name, rule = %label, flows = n, "dpdk: steering rule installed in the NIC");
                    outcomes.push(FlowOutcome::Hardware { rule: i, flows: n });
                }
                Err(reason) => {
                    installed.push(Installed { flows: Vec::new() });
                    in_hw.push(false);
                    tracing::warn!(
                        port = %port_name, rule = %label, index = i, %reason,
                        "dpdk: the NIC refused steering rule; it is steered in software"
                    );
                    outcomes.push(FlowOutcome::Software { rule: i, reason });
                }
            }
        }
        let hw = in_hw.iter().filter(|b| **b).count();
        self.hw.store(hw, Ordering::Relaxed);
        self.sw.store(rules.len() - hw, Ordering::Relaxed);
        self.publish(rules, in_hw, default.symmetric);
        outcomes
    }

    /// Installs the whole rule set in the NIC or none of it, so the NIC and software never
    /// split one set (the daemon's choice; [`FlowTable::replace`] is the per-rule library
    /// call). Every rte_flow rule of every steering rule is validated first, then all are
    /// created; a refusal at either step destroys what was created and returns the rule's
    /// label and the PMD's reason. The port then steers nothing in software either way: on
    /// success the NIC steers every frame, on refusal the caller steers in software.
    pub(super) fn offload(
        &self,
        port: u16,
        default: DefaultRss,
        rules: &[SteerRule],
    ) -> Result<usize, String> {
        let queues = default.queues;
        let _control = eal::control();
        let Ok(mut installed) = self.installed.lock() else {
            return Err("the port's rule table is poisoned".into());
        };
        self.nic.store(false, Ordering::Release);
        for old in installed.drain(..) {
            destroy(port, &old.flows);
        }
        self.hw.store(0, Ordering::Relaxed);
        self.sw.store(0, Ordering::Relaxed);
        self.publish(&[], Vec::new(), default.symmetric);
        let label = |i: usize, r: &SteerRule| r.name.clone().unwrap_or_else(|| format!("#{i}"));
        // Validate all first: a PMD that refuses rule 5 is found before rule 0 steers anything.
        let mut priority = 0u32;
        for (i, rule) in rules.iter().enumerate() {
            rule.validate(Some(queues))
                .map_err(|e| format!("{}: {}", e.field, e.message))
                .and_then(|()| create_rule(port, &mut priority, rule, default, false))
                .map_err(|why| format!("rule {}: {why}", label(i, rule)))?;
        }
        let mut priority = 0u32;
        let mut flows = 0;
        for (i, rule) in rules.iter().enumerate() {
            match create_rule(port, &mut priority, rule, default, true) {
                Ok(f) => {
                    flows += f.len();
                    installed.push(Installed { flows: f });
                }
                Err(why) => {
                    // Validation passed but creation did not (a PMD that checks against the
                    // rules already in place only on create): none of the set stays.
                    for old in installed.drain(..) {
                        destroy(port, &old.flows);
                    }
                    return Err(format!("rule {}: {why}", label(i, rule)));
                }
            }
        }
        self.hw.store(rules.len(), Ordering::Relaxed);
        self.publish(rules, vec![true; rules.len()], default.symmetric);
        self.nic.store(true, Ordering::Release);
        Ok(flows)
    }

    fn publish(&self, rules: &[SteerRule], in_hw: Vec<bool>, symmetric: bool) {
        let any_sw = in_hw.iter().any(|b| !b);
        let set = SoftwareSteering {
            rules: rules.to_vec(),
            matcher: any_sw.then(|| SteerMatcher::new(rules)),
            in_hw,
            symmetric,
        };
        if let Ok(mut cur) = self.published.current.lock() {
            *cur = Arc::new(set);
            self.published.generation.fetch_add(1, Ordering::Release);
        }
    }

    pub(super) fn destroy_all(&self, port: u16) {
        let _control = eal::control(); // a no-op under a port's close, which holds it already
        self.nic.store(false, Ordering::Release);
        if let Ok(mut installed) = self.installed.lock() {
            for old in installed.drain(..) {
                destroy(port, &old.flows);
            }
        }
    }
}

fn destroy(port: u16, flows: &[*mut sys::rte_flow]) {
    for &f in flows {
        let mut err = sys::rte_flow_error::default();
        // SAFETY: f was returned by rte_flow_create on this port and not destroyed yet.
        let rc = unsafe { sys::rte_flow_destroy(port, f, &mut err) };
        if rc != 0 {
            tracing::warn!(port, "dpdk: rte_flow_destroy: {}", flow_error(rc, &err));
        }
    }
}

fn flow_error(rc: i32, err: &sys::rte_flow_error) -> String {
    let msg = if err.message.is_null() {
        String::new()
    } else {
        // SAFETY: rte_flow sets message to a NUL-terminated static string.
        unsafe { std::ffi::CStr::from_ptr(err.message) }
            .to_string_lossy()
            .into_owned()
    };
    let code = eal::strerror(rc);
    if msg.is_empty() || msg == code {
        format!("{code} (rte_flow error type {})", err.type_)
    } else {
        format!("{msg} ({code}, rte_flow error type {})", err.type_)
    }
}

/// Spec/mask storage for one item; kept alive (boxed) until rte_flow_create returns.
enum ItemBuf {
    Eth(Box<[sys::rte_flow_item_eth; 2]>),
    Vlan(Box<[sys::rte_flow_item_vlan; 2]>),
    Ipv4(Box<[sys::rte_flow_item_ipv4; 2]>),
    Ipv6(Box<[sys::rte_flow_item_ipv6; 2]>),
    Tcp(Box<[sys::rte_flow_item_tcp; 2]>),
    Udp(Box<[sys::rte_flow_item_udp; 2]>),
    Vxlan(Box<[sys::rte_flow_item_vxlan; 2]>),
    Gtp(Box<[sys::rte_flow_item_gtp; 2]>),
    Ecpri(Box<[sys::rte_flow_item_ecpri; 2]>),
}

impl ItemBuf {
    fn item(&self) -> sys::rte_flow_item {
        fn pair<T>(ty: sys::rte_flow_item_type, b: &[T; 2]) -> sys::rte_flow_item {
            sys::rte_flow_item {
                type_: ty,
                spec: (&b[0] as *const T).cast(),
                last: std::ptr::null(),
                mask: (&b[1] as *const T).cast(),
            }
        }
        match self {
            ItemBuf::Eth(b) => pair(sys::RTE_FLOW_ITEM_TYPE_ETH, b),
            ItemBuf::Vlan(b) => pair(sys::RTE_FLOW_ITEM_TYPE_VLAN, b),
            ItemBuf::Ipv4(b) => pair(sys::RTE_FLOW_ITEM_TYPE_IPV4, b),
            ItemBuf::Ipv6(b) => pair(sys::RTE_FLOW_ITEM_TYPE_IPV6, b),
            ItemBuf::Tcp(b) => pair(sys::RTE_FLOW_ITEM_TYPE_TCP, b),
            ItemBuf::Udp(b) => pair(sys::RTE_FLOW_ITEM_TYPE_UDP, b),
            ItemBuf::Vxlan(b) => pair(sys::RTE_FLOW_ITEM_TYPE_VXLAN, b),
            ItemBuf::Gtp(b) => pair(sys::RTE_FLOW_ITEM_TYPE_GTPU, b),
            ItemBuf::Ecpri(b) => pair(sys::RTE_FLOW_ITEM_TYPE_ECPRI, b),
        }
    }
}

/// One port-range mask choice per L4 item: (src, dst) as (value, mask) pairs.
type PortMask = Option<(u16, u16)>;

fn range_masks(r: &Option<PortRange>) -> Vec<PortMask> {
    match r {
        None => vec![None],
        Some(r) if *r == PortRange::ANY => vec![None],
        Some(r) => r
            .to_masks()
            .into_iter()
            .map(|m| Some((m.spec, m.mask)))
            .collect(),
    }
}

/// Writes an L4 item's (src, dst) port choices into its spec / mask pair (the TCP and UDP
/// headers of DPDK are different types with the same port fields).
macro_rules! set_ports {
    ($b:ident, $ports:expr) => {
        if let Some((v, m)) = $ports.0 {
            $b[0].hdr.src_port = v.to_be();
            $b[1].hdr.src_port = m.to_be();
        }
        if let Some((v, m)) = $ports.1 {
            $b[0].hdr.dst_port = v.to_be();
            $b[1].hdr.dst_port = m.to_be();
        }
    };
}

/// Builds the spec/mask pair of one item. `ports` is the (src, dst) mask choice for L4 items.
fn item_buf(item: &Item, ports: (PortMask, PortMask)) -> Result<ItemBuf, String> {
    Ok(match item {
        Item::Eth(e) => eth_buf(e),
        Item::Vlan(v) => vlan_buf(v),
        Item::Ipv4(i) => ipv4_buf(i),
        Item::Ipv6(i) => ipv6_buf(i),
        Item::Tcp(_) => {
            let mut b: Box<[sys::rte_flow_item_tcp; 2]> = Box::default();
            set_ports!(b, ports);
            ItemBuf::Tcp(b)
        }
        Item::Udp(_) => {
            let mut b: Box<[sys::rte_flow_item_udp; 2]> = Box::default();
            set_ports!(b, ports);
            ItemBuf::Udp(b)
        }
        Item::Vxlan(v) => {
            let mut b: Box<[sys::rte_flow_item_vxlan; 2]> = Box::default();
            if let Some(vni) = v.vni {
                let s = vni.to_be_bytes();
                b[0].__bindgen_anon_1.__bindgen_anon_1.vni = [s[1], s[2], s[3]];
                b[1].__bindgen_anon_1.__bindgen_anon_1.vni = [0xff; 3];
            }
            ItemBuf::Vxlan(b)
        }
        Item::GtpU(g) => {
            let mut b: Box<[sys::rte_flow_item_gtp; 2]> = Box::default();
            if let Some(teid) = g.teid {
                b[0].teid = teid.to_be();
                b[1].teid = u32::MAX;
            }
            ItemBuf::Gtp(b)
        }
        Item::Ecpri(e) => ecpri_buf(e),
    })
}

fn eth_buf(e: &EthItem) -> ItemBuf {
    let mut b: Box<[sys::rte_flow_item_eth; 2]> = Box::default();
    // SAFETY: writes plain-data fields of a union whose every variant is plain data.
    unsafe {
        let [spec, mask] = &mut *b;
        let (spec, mask) = (
            &mut spec.__bindgen_anon_1.__bindgen_anon_1,
            &mut mask.__bindgen_anon_1.__bindgen_anon_1,
        );
        if let Some(d) = &e.dst {
            spec.dst.addr_bytes = d.spec;
            mask.dst.addr_bytes = d.mask;
        }
        if let Some(s) = &e.src {
            spec.src.addr_bytes = s.spec;
            mask.src.addr_bytes = s.mask;
        }
        if let Some(t) = e.ether_type {
            spec.type_ = t.to_be();
            mask.type_ = 0xffff;
        }
    }
    ItemBuf::Eth(b)
}

fn vlan_buf(v: &VlanItem) -> ItemBuf {
    let mut b: Box<[sys::rte_flow_item_vlan; 2]> = Box::default();
    // SAFETY: plain-data union fields.
    unsafe {
        let [spec, mask] = &mut *b;
        let (spec, mask) = (
            &mut spec.__bindgen_anon_1.__bindgen_anon_1,
            &mut mask.__bindgen_anon_1.__bindgen_anon_1,
        );
        let (mut tci, mut tmask) = (0u16, 0u16);
        if let Some(vid) = v.vid {
            tci |= vid & 0x0fff;
            tmask |= 0x0fff;
        }
        if let Some(pcp) = v.pcp {
            tci |= u16::from(pcp & 7) << 13;
            tmask |= 0xe000;
        }
        spec.tci = tci.to_be();
        mask.tci = tmask.to_be();
        if let Some(t) = v.inner_type {
            spec.inner_type = t.to_be();
            mask.inner_type = 0xffff;
        }
    }
    ItemBuf::Vlan(b)
}

fn ipv4_buf(i: &Ipv4Item) -> ItemBuf {
    let mut b: Box<[sys::rte_flow_item_ipv4; 2]> = Box::default();
    if let Some(p) = &i.src {
        b[0].hdr.src_addr = u32::from(p.addr).to_be();
        b[1].hdr.src_addr = p.mask().to_be();
    }
    if let Some(p) = &i.dst {
        b[0].hdr.dst_addr = u32::from(p.addr).to_be();
        b[1].hdr.dst_addr = p.mask().to_be();
    }
    if let Some(p) = i.proto {
        b[0].hdr.next_proto_id = p;
        b[1].hdr.next_proto_id = 0xff;
    }
    if let Some(d) = i.dscp {
        b[0].hdr.type_of_service = d << 2;
        b[1].hdr.type_of_service = 0xfc;
    }
    ItemBuf::Ipv4(b)
}

fn ipv6_buf(i: &Ipv6Item) -> ItemBuf {
    let mut b: Box<[sys::rte_flow_item_ipv6; 2]> = Box::default();
    if let Some(p) = &i.src {
        b[0].hdr.src_addr = p.addr.octets();
        b[1].hdr.src_addr = Ipv6Addr::from(p.mask()).octets();
    }
    if let Some(p) = &i.dst {
        b[0].hdr.dst_addr = p.addr.octets();
        b[1].hdr.dst_addr = Ipv6Addr::from(p.mask()).octets();
    }
    if let Some(p) = i.proto {
        b[0].hdr.proto = p;
        b[1].hdr.proto = 0xff;
    }
    if let Some(d) = i.dscp {
        // vtc_flow: version (4) | traffic class (8) | flow label (20); DSCP = TC >> 2.
        b[0].hdr.vtc_flow = (u32::from(d) << 22).to_be();
        b[1].hdr.vtc_flow = (0x3fu32 << 22).to_be();
    }
    ItemBuf::Ipv6(b)
}

fn ecpri_buf(e: &EcpriItem) -> ItemBuf {
    let mut b: Box<[sys::rte_flow_item_ecpri; 2]> = Box::default();
    // The common header as one big-endian word: revision (4) | reserved (3) | c (1) |
    // message type (8) | payload size (16); the 16-bit PC_ID / RTC_ID / eAxC id is the
    // first half of the word after it (what SteerKey::ecpri_pc_id holds).
    if let Some(t) = e.msg_type {
        b[0].hdr.common.__bindgen_anon_1.u32_ = (u32::from(t) << 16).to_be();
        b[1].hdr.common.__bindgen_anon_1.u32_ = 0x00ff_0000u32.to_be();
    }
    if let Some(id) = e.pc_id {
        b[0].hdr.__bindgen_anon_1.dummy = [(u32::from(id) << 16).to_be(), 0, 0];
        b[1].hdr.__bindgen_anon_1.dummy = [0xffff_0000u32.to_be(), 0, 0];
    }
    ItemBuf::Ecpri(b)
}

/// RTE_ETH_RSS_* types for a rule's hash selection.
fn rss_types(h: RssHash) -> u64 {
    // SAFETY: constant getter; indices documented in shim.h.
    let f = |i: u32| unsafe { sys::pw_eth_rss_flag(i) };
    let mut t = 0u64;
    let (tcp, udp) = (h.contains(RssHash::TCP), h.contains(RssHash::UDP));
    if h.contains(RssHash::IPV4) {
        t |= f(0) | f(1) | f(4);
        t |= if tcp { f(2) } else { 0 } | if udp { f(3) } else { 0 };
    }
    if h.contains(RssHash::IPV6) {
        t |= f(5) | f(6) | f(9);
        t |= if tcp { f(7) } else { 0 } | if udp { f(8) } else { 0 };
    }
    for (bit, idx) in [
        (RssHash::L3_SRC_ONLY, 10),
        (RssHash::L3_DST_ONLY, 11),
        (RssHash::L4_SRC_ONLY, 12),
        (RssHash::L4_DST_ONLY, 13),
    ] {
        if h.contains(bit) {
            t |= f(idx);
        }
    }
    t
}

/// The port's default RSS, which a rule without a fate keeps: its RX queues and hash types
/// (`PortSetup::rss_hf`; 0 lets the PMD pick, a port without RSS).
#[derive(Clone, Copy, Debug)]
pub(super) struct DefaultRss {
    pub queues: u16,
    pub types: u64,
    /// The port's key is the symmetric one: every RSS action carries it too.
    pub symmetric: bool,
}

/// The rte_flow actions of one steering rule, with the configurations they point to.
struct RuleActions {
    queue_conf: sys::rte_flow_action_queue,
    mark_conf: sys::rte_flow_action_mark,
    rss_queues: Vec<u16>,
    rss_conf: sys::rte_flow_action_rss,
    /// Each action's type and which configuration it takes (0 queue, 1 rss, 2 none, 3 mark).
    kinds: Vec<(sys::rte_flow_action_type, u8)>,
}

/// The actions of `rule`. A rule with only `mark` gets MARK then RSS with the port's default
/// configuration (`default`): the frame keeps the fate it would have without the rule, and
/// the rule stays terminating, as first-match is (PASSTHRU would hand the frame on to later
/// rules, whose fate would then apply; and many PMDs refuse a lone MARK).
fn rule_actions(rule: &SteerRule, default: DefaultRss) -> RuleActions {
    let mut a = RuleActions {
        queue_conf: sys::rte_flow_action_queue::default(),
        mark_conf: sys::rte_flow_action_mark::default(),
        rss_queues: Vec::new(),
        rss_conf: sys::rte_flow_action_rss::default(),
        kinds: Vec::new(),
    };
    for act in &rule.actions {
        match act {
            Action::Queue(q) => {
                a.queue_conf.index = *q;
                a.kinds.push((sys::RTE_FLOW_ACTION_TYPE_QUEUE, 0));
            }
            Action::Rss(r) => {
                a.rss_queues = r.queues.clone();
                a.rss_conf.types = rss_types(r.hash);
                a.kinds.push((sys::RTE_FLOW_ACTION_TYPE_RSS, 1));
            }
            Action::Drop => a.kinds.push((sys::RTE_FLOW_ACTION_TYPE_DROP, 2)),
            Action::Mark(m) => {
                a.mark_conf.id = *m;
                a.kinds.push((sys::RTE_FLOW_ACTION_TYPE_MARK, 3));
            }
        }
    }
    if rule.fate().is_none() {
        a.rss_queues = (0..default.queues.max(1)).collect();
        a.rss_conf.types = default.types;
        a.kinds.push((sys::RTE_FLOW_ACTION_TYPE_RSS, 1));
    }
    a.rss_conf.func = sys::RTE_ETH_HASH_FUNCTION_TOEPLITZ;
    a.rss_conf.level = 0;
    // The port's key (static, so the pointer outlives the action), as the software hashes.
    let key: &'static [u8; 40] = if default.symmetric {
        &crate::rss::RSS_KEY_SYMMETRIC
    } else {
        &STANDARD_RSS_KEY
    };
    a.rss_conf.key_len = key.len() as u32;
    a.rss_conf.key = key.as_ptr();
    a
}

impl RuleActions {
    /// The action list, END-terminated; it points into `self` (keep both in place).
    fn list(&mut self) -> Vec<sys::rte_flow_action> {
        self.rss_conf.queue_num = self.rss_queues.len() as u32;
        self.rss_conf.queue = self.rss_queues.as_ptr();
        let mut actions: Vec<sys::rte_flow_action> = self
            .kinds
            .iter()
            .map(|&(ty, which)| {
                let conf: *const std::ffi::c_void = match which {
                    0 => (&self.queue_conf as *const sys::rte_flow_action_queue).cast(),
                    1 => (&self.rss_conf as *const sys::rte_flow_action_rss).cast(),
                    3 => (&self.mark_conf as *const sys::rte_flow_action_mark).cast(),
                    _ => std::ptr::null(),
                };
                sys::rte_flow_action { type_: ty, conf }
            })
            .collect();
        actions.push(sys::rte_flow_action {
            type_: sys::RTE_FLOW_ACTION_TYPE_END,
            conf: std::ptr::null(),
        });
        actions
    }
}

/// Validates and (with `create`) creates every rte_flow rule of one steering rule; on any
/// refusal destroys the ones already created and returns the PMD's reason. Without `create`
/// nothing is created (the result is empty) but `priority` moves on as if it were.
fn create_rule(
    port: u16,
    priority: &mut u32,
    rule: &SteerRule,
    default: DefaultRss,
    create: bool,
) -> Result<Vec<*mut sys::rte_flow>, String> {
    let mut ra = rule_actions(rule, default);
    let actions = ra.list();

    // Expand each stack over the port-range masks.
    let mut plans: Vec<Vec<ItemBuf>> = Vec::new();
    for stack in rule.flow_patterns() {
        let l4 = stack.iter().find_map(|i| match i {
            Item::Tcp(p) | Item::Udp(p) => Some(p.clone()),
            _ => None,
        });
        let (srcs, dsts) = match &l4 {
            Some(p) => (range_masks(&p.src_port), range_masks(&p.dst_port)),
            None => (vec![None], vec![None]),
        };
        for s in &srcs {
            for d in &dsts {
                if plans.len() >= MAX_FLOWS_PER_RULE {
                    return Err(format!(
                        "the rule needs more than {MAX_FLOWS_PER_RULE} rte_flow rules (port ranges)"
                    ));
                }
                plans.push(
                    stack
                        .iter()
                        .map(|i| item_buf(i, (*s, *d)))
                        .collect::<Result<_, _>>()?,
                );
            }
        }
    }

    let mut created = Vec::with_capacity(plans.len());
    for plan in &plans {
        let mut attr = sys::rte_flow_attr {
            group: 0,
            priority: *priority,
            ..Default::default()
        };
        attr.set_ingress(1);
        let mut pattern: Vec<sys::rte_flow_item> = plan.iter().map(ItemBuf::item).collect();
        pattern.push(sys::rte_flow_item {
            type_: sys::RTE_FLOW_ITEM_TYPE_END,
            spec: std::ptr::null(),
            last: std::ptr::null(),
            mask: std::ptr::null(),
        });
        let mut err = sys::rte_flow_error::default();
        // SAFETY: attr, pattern and actions (with the confs and item buffers they point to)
        // are live locals for the duration of the calls; rte_flow copies what it keeps.
        let rc = unsafe {
            sys::rte_flow_validate(port, &attr, pattern.as_ptr(), actions.as_ptr(), &mut err)
        };
        if rc != 0 {
            destroy(port, &created);
            return Err(flow_error(rc, &err));
        }
        if !create {
            *priority += 1;
            continue;
        }
        // SAFETY: as above.
        let f = unsafe {
            sys::rte_flow_create(port, &attr, pattern.as_ptr(), actions.as_ptr(), &mut err)
        };
        if f.is_null() {
            destroy(port, &created);
            // SAFETY: reads this thread's rte_errno.
            return Err(flow_error(-unsafe { sys::pw_rte_errno() }, &err));
        }
        created.push(f);
        *priority += 1;
    }
    Ok(created)
}

#[cfg(test)]
#[path = "flow_rss_tests.rs"]
mod rss_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use flow_rules::steering::{EcpriItem, Ipv4Item, Ipv4Prefix, PortsItem};

    fn bytes<T>(v: &T) -> &[u8] {
        // SAFETY: reading the bytes of a plain-data bindgen struct.
        unsafe {
            std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
        }
    }

    #[test]
    fn ecpri_item_puts_type_and_pc_id_in_network_order() {
        let item = Item::Ecpri(EcpriItem {
            msg_type: Some(0),
            pc_id: Some(0x1234),
        });
        let ItemBuf::Ecpri(b) = item_buf(&item, (None, None)).expect("translates") else {
            panic!("wrong item kind");
        };
        assert_eq!(&bytes(&b[0])[..8], &[0, 0, 0, 0, 0x12, 0x34, 0, 0]);
        assert_eq!(&bytes(&b[1])[..8], &[0, 0xff, 0, 0, 0xff, 0xff, 0, 0]);
        let t2 = Item::Ecpri(EcpriItem {
            msg_type: Some(2),
            pc_id: None,
        });
        let ItemBuf::Ecpri(b) = item_buf(&t2, (None, None)).expect("translates") else {
            panic!("wrong item kind");
        };
        assert_eq!(&bytes(&b[0])[..4], &[0, 2, 0, 0]);
    }

    #[test]
    fn ipv4_and_port_masks_are_big_endian() {
        let item = Item::Ipv4(Ipv4Item {
            dst: Some(Ipv4Prefix {
                addr: "10.1.0.0".parse().expect("addr"),
                len: 16,
            }),
            proto: Some(17),
            ..Ipv4Item::default()
        });
        let ItemBuf::Ipv4(b) = item_buf(&item, (None, None)).expect("translates") else {
            panic!("wrong item kind");
        };
        assert_eq!(b[0].hdr.dst_addr.to_ne_bytes(), [10, 1, 0, 0]);
        assert_eq!(b[1].hdr.dst_addr.to_ne_bytes(), [255, 255, 0, 0]);
        assert_eq!((b[0].hdr.next_proto_id, b[1].hdr.next_proto_id), (17, 0xff));
        let udp = Item::Udp(PortsItem::default());
        let ItemBuf::Udp(b) = item_buf(&udp, (None, Some((2152, 0xffff)))).expect("translates")
        else {
            panic!("wrong item kind");
        };
        assert_eq!(b[0].hdr.dst_port.to_ne_bytes(), 2152u16.to_be_bytes());
        let (mask_dst, mask_src) = (b[1].hdr.dst_port, b[1].hdr.src_port);
        assert_eq!((mask_dst, mask_src), (0xffff, 0));
    }

    #[test]
    fn port_ranges_expand_to_masks() {
        assert_eq!(range_masks(&None), vec![None]);
        assert_eq!(range_masks(&Some(PortRange::ANY)), vec![None]);
        // 1024..=2047 is one prefix: value 1024, mask 0xfc00.
        assert_eq!(
            range_masks(&Some(PortRange { lo: 1024, hi: 2047 })),
            vec![Some((1024, 0xfc00))]
        );
        assert!(range_masks(&Some(PortRange { lo: 1, hi: 65534 })).len() > 2);
    }

    /// A mark-only rule keeps the port's default fate and stays terminating: MARK then RSS
    /// over every RX queue with the port's hash types, never PASSTHRU (which would let a later
    /// rule's fate apply, unlike first-match); a rule with a fate takes no extra RSS.
    #[test]
    fn a_mark_only_rule_is_mark_then_the_default_rss() {
        let rule = |actions| SteerRule {
            name: None,
            pattern: Vec::new(),
            actions,
        };
        let default = DefaultRss {
            queues: 4,
            types: 0x3c,
            symmetric: false,
        };
        let mut a = rule_actions(&rule(vec![Action::Mark(7)]), default);
        let list = a.list();
        let types: Vec<_> = list.iter().map(|x| x.type_).collect();
        assert_eq!(
            types,
            [
                sys::RTE_FLOW_ACTION_TYPE_MARK,
                sys::RTE_FLOW_ACTION_TYPE_RSS,
                sys::RTE_FLOW_ACTION_TYPE_END
            ]
        );
        assert_eq!(a.mark_conf.id, 7);
        assert_eq!(a.rss_queues, [0, 1, 2, 3]);
        assert_eq!((a.rss_conf.types, a.rss_conf.queue_num), (0x3c, 4));
        assert_eq!(
            list[1].conf,
            (&a.rss_conf as *const sys::rte_flow_action_rss).cast()
        );
        // With a fate: that fate and the mark, nothing added.
        let mut q = rule_actions(&rule(vec![Action::Queue(2), Action::Mark(9)]), default);
        let types: Vec<_> = q.list().iter().map(|x| x.type_).collect();
        assert_eq!(
            types,
            [
                sys::RTE_FLOW_ACTION_TYPE_QUEUE,
                sys::RTE_FLOW_ACTION_TYPE_MARK,
                sys::RTE_FLOW_ACTION_TYPE_END
            ]
        );
        // A port with one queue: RSS over that queue.
        let one = DefaultRss {
            queues: 1,
            types: 0,
            symmetric: false,
        };
        let a = rule_actions(&rule(vec![Action::Mark(1)]), one);
        assert_eq!(a.rss_queues, [0]);
        assert!(!a
            .kinds
            .iter()
            .any(|(t, _)| *t == sys::RTE_FLOW_ACTION_TYPE_PASSTHRU));
    }
}
