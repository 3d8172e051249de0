//! The steering rule model: one rule = a pattern (a list of header items, each with
//! spec/mask-style fields) and a list of actions, in the shape of an rte_flow rule so that each
//! item and action translates to one `rte_flow_item` / `rte_flow_action` (docs/steering.md).
//!
//! [`SteerRule::matches`] is the reference semantics, field by field; the compiled matcher
//! (`super::matcher`) must agree with it on every key.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::key::{RssHash, SteerKey, TUNNEL_GTPU, TUNNEL_VXLAN};

/// EtherTypes the items imply.
pub const ETHER_TYPE_IPV4: u16 = 0x0800;
pub const ETHER_TYPE_IPV6: u16 = 0x86DD;
pub const ETHER_TYPE_ECPRI: u16 = 0xAEFE;
/// IP protocol numbers the items imply.
pub const IP_PROTO_TCP: u8 = 6;
pub const IP_PROTO_UDP: u8 = 17;

/// A value under a mask: a bit of the field matches when it is clear in `mask` or equal to the
/// same bit of `spec`. `spec` has no bits outside `mask` (validation refuses those).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Masked<T> {
    pub spec: T,
    pub mask: T,
}

/// An IPv4 prefix; `addr` has no bits set beyond `len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Prefix {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Ipv4Prefix {
    /// The prefix as a netmask (rte_flow spec = `addr`, mask = this).
    pub fn mask(&self) -> u32 {
        prefix_mask32(self.len)
    }

    fn contains(&self, word: u32) -> bool {
        word & self.mask() == u32::from(self.addr)
    }
}

/// An IPv6 prefix; `addr` has no bits set beyond `len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6Prefix {
    pub addr: Ipv6Addr,
    pub len: u8,
}

impl Ipv6Prefix {
    pub fn mask(&self) -> u128 {
        if self.len == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(self.len.min(128)))
        }
    }

    fn contains(&self, words: &[u32; 4]) -> bool {
        ip6_u128(words) & self.mask() == u128::from(self.addr)
    }
}

pub(crate) fn prefix_mask32(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    }
}

/// The 128-bit value of an IPv6 address in the `pw_packet_meta` word encoding.
pub(crate) fn ip6_u128(w: &[u32; 4]) -> u128 {
    (u128::from(w[0]) << 96)
        | (u128::from(w[1]) << 64)
        | (u128::from(w[2]) << 32)
        | u128::from(w[3])
}

/// An inclusive port range, `lo <= hi` (a single port has `lo == hi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    pub const ANY: PortRange = PortRange { lo: 0, hi: 65535 };

    pub fn single(port: u16) -> PortRange {
        PortRange { lo: port, hi: port }
    }

    pub fn contains(&self, port: u16) -> bool {
        self.lo <= port && port <= self.hi
    }

    /// The range as value/mask pairs whose union is exactly the range (the classic
    /// range-to-prefix split, at most 30 pairs): for PMDs that take no `last` in a range item,
    /// one rte_flow rule per pair.
    pub fn to_masks(&self) -> Vec<Masked<u16>> {
        let mut out = Vec::new();
        if self.lo > self.hi {
            return out;
        }
        let mut lo = u32::from(self.lo);
        let hi = u32::from(self.hi);
        while lo <= hi {
            // Largest aligned block starting at lo that stays within hi.
            let mut size = if lo == 0 {
                1u32 << 16
            } else {
                1u32 << lo.trailing_zeros()
            };
            while lo + size - 1 > hi {
                size >>= 1;
            }
            out.push(Masked {
                spec: lo as u16,
                mask: (!(size - 1) & 0xFFFF) as u16,
            });
            lo += size;
        }
        out
    }
}

/// `eth` item (`rte_flow_item_eth`). `ether_type` is the EtherType after any VLAN tags, as the
/// parser reports it; with a `vlan` item it becomes the VLAN item's `inner_type` in rte_flow.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct EthItem {
    pub dst: Option<Masked<[u8; 6]>>,
    pub src: Option<Masked<[u8; 6]>>,
    pub ether_type: Option<u16>,
}

/// `vlan` item (`rte_flow_item_vlan`): the outer tag. Its presence requires a tagged frame.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct VlanItem {
    /// VLAN id, 0..=4095.
    pub vid: Option<u16>,
    /// Priority code point, 0..=7.
    pub pcp: Option<u8>,
    /// EtherType after the tag(s). Set only in [`SteerRule::flow_patterns`] output, where it
    /// carries `eth.ether_type` as rte_flow expects; always `None` in a parsed rule.
    pub inner_type: Option<u16>,
}

/// `ipv4` item (`rte_flow_item_ipv4`). Its presence requires an IPv4 frame.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ipv4Item {
    pub src: Option<Ipv4Prefix>,
    pub dst: Option<Ipv4Prefix>,
    pub proto: Option<u8>,
    /// 0..=63.
    pub dscp: Option<u8>,
}

/// `ipv6` item (`rte_flow_item_ipv6`). Its presence requires an IPv6 frame. `proto` is the
/// protocol after the extension-header chain.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ipv6Item {
    pub src: Option<Ipv6Prefix>,
    pub dst: Option<Ipv6Prefix>,
    pub proto: Option<u8>,
    pub dscp: Option<u8>,
}

/// `tcp` / `udp` item ports. The item requires the protocol and a parsed L4 header (so later
/// fragments never match it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PortsItem {
    pub src_port: Option<PortRange>,
    pub dst_port: Option<PortRange>,
}

/// `vxlan` item (`rte_flow_item_vxlan`): requires a parsed VXLAN header.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct VxlanItem {
    /// 24-bit VNI.
    pub vni: Option<u32>,
}

/// `gtpu` item (`rte_flow_item_gtp`, type GTPU): requires a parsed GTP-U header.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GtpuItem {
    pub teid: Option<u32>,
}

/// `ecpri` item (`rte_flow_item_ecpri`): requires an eCPRI common header (EtherType 0xAEFE).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct EcpriItem {
    pub msg_type: Option<u8>,
    /// PC_ID (types 0, 1) / RTC_ID (type 2): the eAxC id in O-RAN fronthaul.
    pub pc_id: Option<u16>,
}

/// One pattern item. In a [`SteerRule`] the items are in header order and each kind appears at
/// most once.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Item {
    Eth(EthItem),
    Vlan(VlanItem),
    Ipv4(Ipv4Item),
    Ipv6(Ipv6Item),
    Tcp(PortsItem),
    Udp(PortsItem),
    Vxlan(VxlanItem),
    GtpU(GtpuItem),
    Ecpri(EcpriItem),
}

impl Item {
    /// The YAML key of the item.
    pub fn name(&self) -> &'static str {
        match self {
            Item::Eth(_) => "eth",
            Item::Vlan(_) => "vlan",
            Item::Ipv4(_) => "ipv4",
            Item::Ipv6(_) => "ipv6",
            Item::Tcp(_) => "tcp",
            Item::Udp(_) => "udp",
            Item::Vxlan(_) => "vxlan",
            Item::GtpU(_) => "gtpu",
            Item::Ecpri(_) => "ecpri",
        }
    }

    /// The `enum rte_flow_item_type` the item becomes.
    pub fn rte_flow_type(&self) -> &'static str {
        match self {
            Item::Eth(_) => "RTE_FLOW_ITEM_TYPE_ETH",
            Item::Vlan(_) => "RTE_FLOW_ITEM_TYPE_VLAN",
            Item::Ipv4(_) => "RTE_FLOW_ITEM_TYPE_IPV4",
            Item::Ipv6(_) => "RTE_FLOW_ITEM_TYPE_IPV6",
            Item::Tcp(_) => "RTE_FLOW_ITEM_TYPE_TCP",
            Item::Udp(_) => "RTE_FLOW_ITEM_TYPE_UDP",
            Item::Vxlan(_) => "RTE_FLOW_ITEM_TYPE_VXLAN",
            Item::GtpU(_) => "RTE_FLOW_ITEM_TYPE_GTPU",
            Item::Ecpri(_) => "RTE_FLOW_ITEM_TYPE_ECPRI",
        }
    }

    /// Header order: eth, vlan, ipv4/ipv6, tcp/udp, vxlan/gtpu, ecpri.
    pub fn layer(&self) -> u8 {
        match self {
            Item::Eth(_) => 0,
            Item::Vlan(_) => 1,
            Item::Ipv4(_) | Item::Ipv6(_) => 2,
            Item::Tcp(_) | Item::Udp(_) => 3,
            Item::Vxlan(_) | Item::GtpU(_) => 4,
            Item::Ecpri(_) => 5,
        }
    }

    /// The reference semantics of one item.
    pub fn matches(&self, k: &SteerKey) -> bool {
        fn opt<T>(o: &Option<T>, f: impl FnOnce(&T) -> bool) -> bool {
            o.as_ref().is_none_or(f)
        }
        fn mac(m: &Option<Masked<[u8; 6]>>, v: &[u8; 6]) -> bool {
            opt(m, |m| (0..6).all(|i| v[i] & m.mask[i] == m.spec[i]))
        }
        match self {
            Item::Eth(e) => {
                mac(&e.dst, &k.dst_mac)
                    && mac(&e.src, &k.src_mac)
                    && opt(&e.ether_type, |t| *t == k.ether_type)
            }
            Item::Vlan(v) => {
                k.vlan_count > 0
                    && opt(&v.vid, |vid| k.vlan_tci & 0x0FFF == *vid)
                    && opt(&v.pcp, |pcp| k.vlan_tci >> 13 == u16::from(*pcp))
                    && opt(&v.inner_type, |t| *t == k.ether_type)
            }
            Item::Ipv4(i) => {
                k.ip_version == 4
                    && opt(&i.src, |p| p.contains(k.src_ip[0]))
                    && opt(&i.dst, |p| p.contains(k.dst_ip[0]))
                    && opt(&i.proto, |p| *p == k.ip_proto)
                    && opt(&i.dscp, |d| *d == k.dscp)
            }
            Item::Ipv6(i) => {
                k.ip_version == 6
                    && opt(&i.src, |p| p.contains(&k.src_ip))
                    && opt(&i.dst, |p| p.contains(&k.dst_ip))
                    && opt(&i.proto, |p| *p == k.ip_proto)
                    && opt(&i.dscp, |d| *d == k.dscp)
            }
            Item::Tcp(p) | Item::Udp(p) => {
                let proto = if matches!(self, Item::Tcp(_)) {
                    IP_PROTO_TCP
                } else {
                    IP_PROTO_UDP
                };
                k.l4 && k.ip_proto == proto
                    && opt(&p.src_port, |r| r.contains(k.src_port))
                    && opt(&p.dst_port, |r| r.contains(k.dst_port))
            }
            Item::Vxlan(v) => k.tunnel == TUNNEL_VXLAN && opt(&v.vni, |x| *x == k.tunnel_id),
            Item::GtpU(g) => k.tunnel == TUNNEL_GTPU && opt(&g.teid, |x| *x == k.tunnel_id),
            Item::Ecpri(e) => {
                k.ecpri
                    && opt(&e.msg_type, |t| *t == k.ecpri_msg_type)
                    && opt(&e.pc_id, |p| *p == k.ecpri_pc_id)
            }
        }
    }
}

/// RSS over a set of queues (`rte_flow_action_rss`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RssAction {
    pub queues: Vec<u16>,
    pub hash: RssHash,
}

/// One action. A rule has at most one fate (queue, rss, drop) and at most one mark; a rule with
/// only a mark keeps the port's default fate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Queue(u16),
    Rss(RssAction),
    Drop,
    Mark(u32),
}

impl Action {
    pub fn name(&self) -> &'static str {
        match self {
            Action::Queue(_) => "queue",
            Action::Rss(_) => "rss",
            Action::Drop => "drop",
            Action::Mark(_) => "mark",
        }
    }

    pub fn rte_flow_type(&self) -> &'static str {
        match self {
            Action::Queue(_) => "RTE_FLOW_ACTION_TYPE_QUEUE",
            Action::Rss(_) => "RTE_FLOW_ACTION_TYPE_RSS",
            Action::Drop => "RTE_FLOW_ACTION_TYPE_DROP",
            Action::Mark(_) => "RTE_FLOW_ACTION_TYPE_MARK",
        }
    }

    fn is_fate(&self) -> bool {
        !matches!(self, Action::Mark(_))
    }
}

/// One steering rule. Rules are tried in file order; the first that matches decides. In rte_flow
/// every rule goes to group 0 with priority = its index (lower = first), so the NIC keeps the order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SteerRule {
    pub name: Option<String>,
    /// Header order, each kind at most once; empty = every frame.
    pub pattern: Vec<Item>,
    /// In file order.
    pub actions: Vec<Action>,
}

/// A problem with one rule, before it is tied to a place in a file: `field` is the item key and
/// field (`"ipv4.dst"`, `"udp.dst_port"`), or `"actions"`; `action` the index of the action
/// concerned, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleIssue {
    pub field: String,
    pub action: Option<usize>,
    /// Index within the action's list (the RSS queue concerned), if any.
    pub index: Option<usize>,
    pub message: String,
}

impl RuleIssue {
    fn field(field: &str, message: String) -> RuleIssue {
        RuleIssue {
            field: field.into(),
            action: None,
            index: None,
            message,
        }
    }

    fn action(i: usize, field: &str, message: String) -> RuleIssue {
        RuleIssue {
            field: field.into(),
            action: Some(i),
            index: None,
            message,
        }
    }
}

impl SteerRule {
    pub fn item(&self, layer_name: &str) -> Option<&Item> {
        self.pattern.iter().find(|i| i.name() == layer_name)
    }

    /// The reference semantics: every item matches.
    pub fn matches(&self, key: &SteerKey) -> bool {
        self.pattern.iter().all(|i| i.matches(key))
    }

    /// The rule's fate action, if any (the first one; validation refuses a second).
    pub fn fate(&self) -> Option<&Action> {
        self.actions.iter().find(|a| a.is_fate())
    }

    /// The rule's mark id, if any.
    pub fn mark(&self) -> Option<u32> {
        self.actions.iter().find_map(|a| match a {
            Action::Mark(m) => Some(*m),
            _ => None,
        })
    }

    /// Checks what the types do not: value ranges, prefixes and masks, items that contradict
    /// each other, conflicting actions, and queue indices against `queues` when the number of
    /// queues is known.
    pub fn validate(&self, queues: Option<u16>) -> Result<(), RuleIssue> {
        self.validate_pattern()?;
        self.validate_actions(queues)
    }

    fn validate_pattern(&self) -> Result<(), RuleIssue> {
        check_item_order(&self.pattern)?;
        let mut l3 = None;
        let mut l4 = None;
        let mut tunnel = None;
        let mut ether_type = None;
        let mut ip_proto: Option<(u8, String)> = None;
        for item in &self.pattern {
            match item {
                Item::Eth(e) => {
                    if let Some(t) = check_eth(e)? {
                        ether_type = Some(t);
                    }
                }
                Item::Vlan(v) => check_vlan(v)?,
                Item::Ipv4(i) => {
                    l3 = Some(("ipv4", ETHER_TYPE_IPV4));
                    for (name, p) in [("ipv4.src", &i.src), ("ipv4.dst", &i.dst)] {
                        if let Some(p) = p {
                            check_prefix4(name, p)?;
                        }
                    }
                    check_dscp("ipv4.dscp", i.dscp)?;
                    if let Some(p) = i.proto {
                        ip_proto = Some((p, "ipv4.proto".into()));
                    }
                }
                Item::Ipv6(i) => {
                    l3 = Some(("ipv6", ETHER_TYPE_IPV6));
                    for (name, p) in [("ipv6.src", &i.src), ("ipv6.dst", &i.dst)] {
                        if let Some(p) = p {
                            check_prefix6(name, p)?;
                        }
                    }
                    check_dscp("ipv6.dscp", i.dscp)?;
                    if let Some(p) = i.proto {
                        ip_proto = Some((p, "ipv6.proto".into()));
                    }
                }
                Item::Tcp(p) | Item::Udp(p) => l4 = Some(check_ports(item.name(), p, &ip_proto)?),
                Item::Vxlan(v) => {
                    check_vxlan(v)?;
                    tunnel = Some("vxlan");
                }
                Item::GtpU(_) => tunnel = Some("gtpu"),
                Item::Ecpri(_) => check_ecpri(l3.map(|l| l.0).or(l4).or(tunnel), ether_type)?,
            }
            if let (Some((name, et)), Some(t)) = (l3, ether_type) {
                if t != et {
                    return Err(RuleIssue::field(
                        "eth.ether_type",
                        format!("{t:#06x} contradicts the `{name}` item (EtherType {et:#06x})"),
                    ));
                }
            }
        }
        check_tunnel(tunnel, l4, ip_proto)
    }

    fn validate_actions(&self, queues: Option<u16>) -> Result<(), RuleIssue> {
        if self.actions.is_empty() {
            return Err(RuleIssue::field(
                "actions",
                "a rule needs at least one action (queue, rss, drop or mark)".into(),
            ));
        }
        let mut fate: Option<(usize, &Action)> = None;
        let mut mark: Option<usize> = None;
        for (i, a) in self.actions.iter().enumerate() {
            if a.is_fate() {
                if let Some((_, first)) = fate {
                    return Err(RuleIssue::action(
                        i,
                        "actions",
                        format!(
                            "conflicting fate actions: `{}` and `{}` (a rule has one of queue, \
                             rss, drop)",
                            first.name(),
                            a.name()
                        ),
                    ));
                }
                fate = Some((i, a));
            } else {
                if mark.is_some() {
                    return Err(RuleIssue::action(
                        i,
                        "actions",
                        "conflicting actions: more than one `mark`".into(),
                    ));
                }
                mark = Some(i);
            }
            match a {
                Action::Queue(q) => check_queue(i, "queue", *q, queues)?,
                Action::Rss(r) => {
                    if r.queues.is_empty() {
                        return Err(RuleIssue::action(
                            i,
                            "rss.queues",
                            "RSS needs at least one queue".into(),
                        ));
                    }
                    for (j, q) in r.queues.iter().enumerate() {
                        let at = |mut e: RuleIssue| {
                            e.index = Some(j);
                            e
                        };
                        check_queue(i, "rss.queues", *q, queues).map_err(at)?;
                        if r.queues[..j].contains(q) {
                            return Err(at(RuleIssue::action(
                                i,
                                "rss.queues",
                                format!("queue {q} is listed twice"),
                            )));
                        }
                    }
                    check_rss_hash(i, r.hash)?;
                }
                Action::Drop | Action::Mark(_) => {}
            }
        }
        if let (Some((_, Action::Drop)), Some(m)) = (fate, mark) {
            return Err(RuleIssue::action(
                m,
                "actions",
                "conflicting actions: `mark` on a dropped frame has no effect".into(),
            ));
        }
        Ok(())
    }

    /// The rule as explicit rte_flow item stacks, one rte_flow rule each: `eth` first (empty
    /// when the rule has none), `eth.ether_type` moved to the VLAN item's `inner_type` when there
    /// is a `vlan` item, the IP and UDP layers that a deeper item implies added empty (an
    /// unknown IP version gives two stacks, IPv4 and IPv6), `tcp`/`udp` kept. Empty items
    /// translate to a NULL spec and mask (`RTE_FLOW_ITEM_TYPE_END` terminates each stack).
    pub fn flow_patterns(&self) -> Vec<Vec<Item>> {
        let mut eth = EthItem::default();
        let mut vlan = None;
        let mut l3 = None;
        let mut l4 = None;
        let mut upper = Vec::new();
        for item in &self.pattern {
            match item {
                Item::Eth(e) => eth = e.clone(),
                Item::Vlan(v) => vlan = Some(v.clone()),
                Item::Ipv4(_) | Item::Ipv6(_) => l3 = Some(item.clone()),
                Item::Tcp(_) | Item::Udp(_) => l4 = Some(item.clone()),
                Item::Vxlan(_) | Item::GtpU(_) | Item::Ecpri(_) => upper.push(item.clone()),
            }
        }
        if let Some(v) = vlan.as_mut() {
            v.inner_type = eth.ether_type.take();
        }
        let tunnel = upper
            .iter()
            .any(|i| matches!(i, Item::Vxlan(_) | Item::GtpU(_)));
        if tunnel && l4.is_none() {
            l4 = Some(Item::Udp(PortsItem::default()));
        }
        let l3s = match l3 {
            Some(i) => vec![Some(i)],
            None if l4.is_some() => {
                vec![
                    Some(Item::Ipv4(Ipv4Item::default())),
                    Some(Item::Ipv6(Ipv6Item::default())),
                ]
            }
            None => vec![None],
        };
        l3s.into_iter()
            .map(|l3| {
                let mut stack = vec![Item::Eth(eth.clone())];
                stack.extend(vlan.clone().map(Item::Vlan));
                stack.extend(l3);
                stack.extend(l4.clone());
                stack.extend(upper.iter().cloned());
                stack
            })
            .collect()
    }
}

/// Items in header order, one per header.
fn check_item_order(pattern: &[Item]) -> Result<(), RuleIssue> {
    for w in pattern.windows(2) {
        if w[0].layer() >= w[1].layer() {
            let what = if w[0].layer() == w[1].layer() {
                format!(
                    "`{}` and `{}` cannot both match the same header",
                    w[0].name(),
                    w[1].name()
                )
            } else {
                format!("`{}` must come before `{}`", w[1].name(), w[0].name())
            };
            return Err(RuleIssue::field(w[1].name(), what));
        }
    }
    Ok(())
}

/// MAC addresses within their masks; an EtherType that is not a VLAN tag type. Returns the
/// EtherType matched, if any.
fn check_eth(e: &EthItem) -> Result<Option<u16>, RuleIssue> {
    for (name, m) in [("eth.dst", &e.dst), ("eth.src", &e.src)] {
        if let Some(m) = m {
            if (0..6).any(|i| m.spec[i] & !m.mask[i] != 0) {
                return Err(RuleIssue::field(
                    name,
                    "address has bits set outside its mask".into(),
                ));
            }
        }
    }
    if let Some(t) = e.ether_type {
        if matches!(t, 0x8100 | 0x88A8 | 0x9100) {
            return Err(RuleIssue::field(
                "eth.ether_type",
                format!(
                    "{t:#06x} is a VLAN tag type; ether_type is the EtherType \
                     after the tags: match tags with the `vlan` item"
                ),
            ));
        }
        return Ok(Some(t));
    }
    Ok(None)
}

fn check_vlan(v: &VlanItem) -> Result<(), RuleIssue> {
    if let Some(vid) = v.vid.filter(|v| *v > 4095) {
        return Err(RuleIssue::field(
            "vlan.vid",
            format!("VLAN id {vid} is out of range 0..=4095"),
        ));
    }
    if let Some(pcp) = v.pcp.filter(|p| *p > 7) {
        return Err(RuleIssue::field(
            "vlan.pcp",
            format!("PCP {pcp} is out of range 0..=7"),
        ));
    }
    Ok(())
}

/// A `tcp` / `udp` item: agrees with the IP protocol matched before it; port ranges not
/// inverted. Returns the item's name.
fn check_ports(
    name: &'static str,
    p: &PortsItem,
    ip_proto: &Option<(u8, String)>,
) -> Result<&'static str, RuleIssue> {
    let proto = if name == "tcp" {
        IP_PROTO_TCP
    } else {
        IP_PROTO_UDP
    };
    if let Some((given, field)) = ip_proto {
        if *given != proto {
            return Err(RuleIssue::field(
                field,
                format!("protocol {given} contradicts the `{name}` item (protocol {proto})"),
            ));
        }
    }
    for (field, r) in [("src_port", &p.src_port), ("dst_port", &p.dst_port)] {
        if let Some(r) = r.filter(|r| r.lo > r.hi) {
            return Err(RuleIssue::field(
                &format!("{name}.{field}"),
                format!(
                    "inverted range {}-{}: the low end is above the high end",
                    r.lo, r.hi
                ),
            ));
        }
    }
    Ok(name)
}

fn check_vxlan(v: &VxlanItem) -> Result<(), RuleIssue> {
    if let Some(vni) = v.vni.filter(|v| *v > 0x00FF_FFFF) {
        return Err(RuleIssue::field(
            "vxlan.vni",
            format!("VNI {vni} does not fit in 24 bits (max 16777215)"),
        ));
    }
    Ok(())
}

/// eCPRI is matched over Ethernet: after no L3 / L4 / tunnel item (`after`), with no other
/// EtherType.
fn check_ecpri(after: Option<&str>, ether_type: Option<u16>) -> Result<(), RuleIssue> {
    if let Some(other) = after {
        return Err(RuleIssue::field(
            "ecpri",
            format!(
                "eCPRI is matched over Ethernet (EtherType 0xAEFE) and cannot \
                 follow `{other}`"
            ),
        ));
    }
    if let Some(t) = ether_type.filter(|t| *t != ETHER_TYPE_ECPRI) {
        return Err(RuleIssue::field(
            "eth.ether_type",
            format!("{t:#06x} contradicts the `ecpri` item (EtherType 0xaefe)"),
        ));
    }
    Ok(())
}

/// A tunnel item is carried over UDP: not after `tcp`, nor with another IP protocol.
fn check_tunnel(
    tunnel: Option<&str>,
    l4: Option<&str>,
    ip_proto: Option<(u8, String)>,
) -> Result<(), RuleIssue> {
    if let Some(t) = tunnel {
        if l4 == Some("tcp") {
            return Err(RuleIssue::field(
                t,
                format!("`{t}` is carried over UDP and cannot follow `tcp`"),
            ));
        }
        if let Some((given, field)) = ip_proto.filter(|(p, _)| *p != IP_PROTO_UDP) {
            return Err(RuleIssue::field(
                &field,
                format!("protocol {given} contradicts the `{t}` item (carried over UDP, 17)"),
            ));
        }
    }
    Ok(())
}

fn check_prefix4(name: &str, p: &Ipv4Prefix) -> Result<(), RuleIssue> {
    if p.len > 32 {
        return Err(RuleIssue::field(
            name,
            format!("prefix length /{} is longer than 32", p.len),
        ));
    }
    if u32::from(p.addr) & !p.mask() != 0 {
        let net = Ipv4Addr::from(u32::from(p.addr) & p.mask());
        return Err(RuleIssue::field(
            name,
            format!(
                "{}/{} has bits set beyond the prefix length (did you mean {net}/{}?)",
                p.addr, p.len, p.len
            ),
        ));
    }
    Ok(())
}

fn check_prefix6(name: &str, p: &Ipv6Prefix) -> Result<(), RuleIssue> {
    if p.len > 128 {
        return Err(RuleIssue::field(
            name,
            format!("prefix length /{} is longer than 128", p.len),
        ));
    }
    if u128::from(p.addr) & !p.mask() != 0 {
        let net = Ipv6Addr::from(u128::from(p.addr) & p.mask());
        return Err(RuleIssue::field(
            name,
            format!(
                "{}/{} has bits set beyond the prefix length (did you mean {net}/{}?)",
                p.addr, p.len, p.len
            ),
        ));
    }
    Ok(())
}

fn check_dscp(name: &str, dscp: Option<u8>) -> Result<(), RuleIssue> {
    match dscp {
        Some(d) if d > 63 => Err(RuleIssue::field(
            name,
            format!("DSCP {d} is out of range 0..=63"),
        )),
        _ => Ok(()),
    }
}

fn check_queue(i: usize, field: &str, q: u16, queues: Option<u16>) -> Result<(), RuleIssue> {
    match queues {
        Some(n) if q >= n => Err(RuleIssue::action(
            i,
            field,
            format!(
                "queue {q} does not exist: the port has {n} queues (0..={})",
                n.saturating_sub(1)
            ),
        )),
        _ => Ok(()),
    }
}

fn check_rss_hash(i: usize, h: RssHash) -> Result<(), RuleIssue> {
    let both = |a: RssHash, b: RssHash| h.contains(a) && h.contains(b);
    let msg = if both(RssHash::L3_SRC_ONLY, RssHash::L3_DST_ONLY) {
        "`l3-src-only` and `l3-dst-only` exclude each other"
    } else if both(RssHash::L4_SRC_ONLY, RssHash::L4_DST_ONLY) {
        "`l4-src-only` and `l4-dst-only` exclude each other"
    } else if !h.contains(RssHash::IPV4) && !h.contains(RssHash::IPV6) {
        "the hash selection needs `ipv4` and/or `ipv6`"
    } else if (h.contains(RssHash::L4_SRC_ONLY) || h.contains(RssHash::L4_DST_ONLY))
        && !h.contains(RssHash::TCP)
        && !h.contains(RssHash::UDP)
    {
        "`l4-src-only` / `l4-dst-only` need `tcp` or `udp`"
    } else {
        return Ok(());
    };
    Err(RuleIssue::action(i, "rss.hash", msg.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_to_masks_covers_exactly() {
        for (lo, hi) in [
            (0u16, 65535u16),
            (80, 80),
            (1024, 65535),
            (1000, 2000),
            (1, 2),
            (0, 0),
            (65535, 65535),
            (3, 17),
        ] {
            let masks = PortRange { lo, hi }.to_masks();
            assert!(masks.len() <= 30, "{lo}-{hi}: {} pairs", masks.len());
            for p in 0..=65535u16 {
                let inside = masks.iter().any(|m| p & m.mask == m.spec);
                assert_eq!(inside, (lo..=hi).contains(&p), "{lo}-{hi} port {p}");
            }
        }
        assert_eq!(PortRange::ANY.to_masks(), vec![Masked { spec: 0, mask: 0 }]);
        assert!(PortRange { lo: 5, hi: 4 }.to_masks().is_empty());
    }

    /// Checks only programmatic rules can fail (the YAML parser refuses these values first).
    #[test]
    fn model_validation_of_programmatic_rules() {
        let with = |pattern: Vec<Item>| SteerRule {
            name: None,
            pattern,
            actions: vec![Action::Drop],
        };
        let field_of = |r: SteerRule| r.validate(None).map_err(|e| (e.field, e.message));
        let vlan = |vid, pcp| {
            Item::Vlan(VlanItem {
                vid,
                pcp,
                inner_type: None,
            })
        };
        let e = field_of(with(vec![vlan(Some(5000), None)]));
        assert!(
            matches!(&e, Err((f, m)) if f == "vlan.vid" && m.contains("0..=4095")),
            "{e:?}"
        );
        let e = field_of(with(vec![vlan(None, Some(8))]));
        assert!(matches!(&e, Err((f, _)) if f == "vlan.pcp"), "{e:?}");
        let e = field_of(with(vec![Item::Ipv6(Ipv6Item {
            dscp: Some(64),
            ..Ipv6Item::default()
        })]));
        assert!(matches!(&e, Err((f, _)) if f == "ipv6.dscp"), "{e:?}");
        let e = field_of(with(vec![Item::Vxlan(VxlanItem { vni: Some(1 << 24) })]));
        assert!(matches!(&e, Err((f, _)) if f == "vxlan.vni"), "{e:?}");
        // Items out of header order.
        let e = field_of(with(vec![
            Item::Udp(PortsItem::default()),
            Item::Ipv4(Ipv4Item::default()),
        ]));
        assert!(
            matches!(&e, Err((f, m)) if f == "ipv4" && m.contains("must come before")),
            "{e:?}"
        );
        assert!(with(vec![vlan(Some(4095), Some(7))])
            .validate(Some(1))
            .is_ok());
        // The queue count is checked only when known.
        let q = SteerRule {
            name: None,
            pattern: vec![],
            actions: vec![Action::Queue(9)],
        };
        assert!(q.validate(None).is_ok());
        assert!(q.validate(Some(10)).is_ok());
        assert!(q.validate(Some(9)).is_err());
    }

    #[test]
    fn flow_patterns_fill_implied_layers() {
        let rule = SteerRule {
            name: None,
            pattern: vec![
                Item::Eth(EthItem {
                    ether_type: Some(ETHER_TYPE_IPV4),
                    ..EthItem::default()
                }),
                Item::Vlan(VlanItem {
                    vid: Some(10),
                    ..VlanItem::default()
                }),
                Item::Vxlan(VxlanItem { vni: Some(7) }),
            ],
            actions: vec![Action::Drop],
        };
        let stacks = rule.flow_patterns();
        assert_eq!(stacks.len(), 2);
        let names: Vec<_> = stacks[0].iter().map(Item::name).collect();
        assert_eq!(names, ["eth", "vlan", "ipv4", "udp", "vxlan"]);
        let names: Vec<_> = stacks[1].iter().map(Item::name).collect();
        assert_eq!(names, ["eth", "vlan", "ipv6", "udp", "vxlan"]);
        match (&stacks[0][0], &stacks[0][1]) {
            (Item::Eth(e), Item::Vlan(v)) => {
                assert_eq!(e.ether_type, None);
                assert_eq!(v.inner_type, Some(ETHER_TYPE_IPV4));
            }
            other => panic!("unexpected {other:?}"),
        }
        let plain = SteerRule {
            name: None,
            pattern: vec![],
            actions: vec![Action::Queue(1)],
        };
        assert_eq!(
            plain.flow_patterns(),
            vec![vec![Item::Eth(EthItem::default())]]
        );
    }
}
