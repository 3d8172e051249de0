//! The compiled software steering: per-field unit tests, decisions (queue, RSS, drop, mark,
//! default), and a property test holding the compiled matcher equal to the reference
//! `SteerRule::matches` first-match scan on random rules and keys.

use std::net::{Ipv4Addr, Ipv6Addr};

use flow_rules::steering::{
    Action, EcpriItem, EthItem, Fate, GtpuItem, Ipv4Item, Ipv4Prefix, Ipv6Item, Ipv6Prefix, Item,
    Masked, PortRange, PortsItem, RssAction, RssHash, SteerDecision, SteerKey, SteerMatcher,
    SteerRule, SteerRuleSet, VlanItem, VxlanItem, TUNNEL_GTPU, TUNNEL_NONE, TUNNEL_VXLAN,
};
use proptest::prelude::*;

fn one(pattern: Vec<Item>) -> (SteerRule, SteerMatcher) {
    let rule = SteerRule {
        name: None,
        pattern,
        actions: vec![Action::Queue(1)],
    };
    let m = SteerMatcher::new(std::slice::from_ref(&rule));
    (rule, m)
}

/// Checks that compiled and reference agree on `key` and returns whether it matched.
#[track_caller]
fn hit(rule: &SteerRule, m: &SteerMatcher, key: &SteerKey) -> bool {
    let compiled = m.first_match(key) == Some(0);
    assert_eq!(
        compiled,
        rule.matches(key),
        "compiled vs reference on {key:?}"
    );
    compiled
}

fn v4(a: [u8; 4]) -> u32 {
    u32::from(Ipv4Addr::from(a))
}

fn v6(s: &str) -> [u32; 4] {
    let x = u128::from(s.parse::<Ipv6Addr>().unwrap_or(Ipv6Addr::UNSPECIFIED));
    [
        (x >> 96) as u32,
        (x >> 64) as u32,
        (x >> 32) as u32,
        x as u32,
    ]
}

fn udp4() -> SteerKey {
    SteerKey {
        ether_type: 0x0800,
        ip_version: 4,
        ip_proto: 17,
        l4: true,
        src_ip: [v4([192, 0, 2, 1]), 0, 0, 0],
        dst_ip: [v4([10, 1, 2, 3]), 0, 0, 0],
        src_port: 40000,
        dst_port: 53,
        ..SteerKey::default()
    }
}

#[test]
fn eth_macs_with_masks_and_ether_type() {
    let (r, m) = one(vec![Item::Eth(EthItem {
        dst: Some(Masked {
            spec: [0x01, 0x00, 0x5e, 0, 0, 0],
            mask: [0xff, 0xff, 0xff, 0x80, 0, 0],
        }),
        src: Some(Masked {
            spec: [0, 0x11, 0x22, 0x33, 0x44, 0x55],
            mask: [0xff; 6],
        }),
        ether_type: Some(0x0800),
    })]);
    let mut k = SteerKey {
        dst_mac: [0x01, 0x00, 0x5e, 0x7f, 0x12, 0x34],
        src_mac: [0, 0x11, 0x22, 0x33, 0x44, 0x55],
        ether_type: 0x0800,
        ..SteerKey::default()
    };
    assert!(hit(&r, &m, &k));
    k.dst_mac[3] = 0x80; // outside the multicast /25
    assert!(!hit(&r, &m, &k));
    k.dst_mac[3] = 0x00;
    k.src_mac[5] = 0x56;
    assert!(!hit(&r, &m, &k));
    k.src_mac[5] = 0x55;
    k.ether_type = 0x86dd;
    assert!(!hit(&r, &m, &k));
}

#[test]
fn vlan_vid_pcp_and_untagged() {
    let (r, m) = one(vec![Item::Vlan(VlanItem {
        vid: Some(100),
        pcp: Some(5),
        inner_type: None,
    })]);
    let mut k = SteerKey {
        vlan_count: 1,
        vlan_tci: 5 << 13 | 1 << 12 | 100, // DEI set: ignored
        ..SteerKey::default()
    };
    assert!(hit(&r, &m, &k));
    k.vlan_tci = 4 << 13 | 100;
    assert!(!hit(&r, &m, &k));
    k.vlan_tci = 5 << 13 | 101;
    assert!(!hit(&r, &m, &k));
    k.vlan_tci = 5 << 13 | 100;
    k.vlan_count = 0; // untagged frames never match a vlan item, whatever the TCI says
    assert!(!hit(&r, &m, &k));
    // An empty vlan item matches any tagged frame.
    let (r, m) = one(vec![Item::Vlan(VlanItem::default())]);
    k.vlan_count = 2;
    assert!(hit(&r, &m, &k));
    k.vlan_count = 0;
    assert!(!hit(&r, &m, &k));
}

#[test]
fn ipv4_prefixes_proto_dscp() {
    let (r, m) = one(vec![Item::Ipv4(Ipv4Item {
        src: Some(Ipv4Prefix {
            addr: Ipv4Addr::new(192, 0, 2, 0),
            len: 24,
        }),
        dst: Some(Ipv4Prefix {
            addr: Ipv4Addr::new(10, 0, 0, 0),
            len: 8,
        }),
        proto: Some(17),
        dscp: Some(46),
    })]);
    let mut k = SteerKey { dscp: 46, ..udp4() };
    assert!(hit(&r, &m, &k));
    k.src_ip[0] = v4([192, 0, 3, 1]);
    assert!(!hit(&r, &m, &k));
    k.src_ip[0] = v4([192, 0, 2, 255]);
    k.dst_ip[0] = v4([11, 0, 0, 1]);
    assert!(!hit(&r, &m, &k));
    k.dst_ip[0] = v4([10, 255, 255, 255]);
    k.dscp = 0;
    assert!(!hit(&r, &m, &k));
    k.dscp = 46;
    k.ip_proto = 6;
    assert!(!hit(&r, &m, &k));
    k.ip_proto = 17;
    k.ip_version = 6; // the same words as an IPv6 frame: not IPv4
    assert!(!hit(&r, &m, &k));
    // /0 and /32.
    let (r, m) = one(vec![Item::Ipv4(Ipv4Item {
        src: Some(Ipv4Prefix {
            addr: Ipv4Addr::UNSPECIFIED,
            len: 0,
        }),
        dst: Some(Ipv4Prefix {
            addr: Ipv4Addr::new(10, 1, 2, 3),
            len: 32,
        }),
        ..Ipv4Item::default()
    })]);
    assert!(hit(&r, &m, &udp4()));
    let mut k = udp4();
    k.dst_ip[0] += 1;
    assert!(!hit(&r, &m, &k));
}

#[test]
fn ipv6_prefixes() {
    let (r, m) = one(vec![Item::Ipv6(Ipv6Item {
        src: Some(Ipv6Prefix {
            addr: "2001:db8:100::".parse().unwrap_or(Ipv6Addr::UNSPECIFIED),
            len: 40,
        }),
        dst: Some(Ipv6Prefix {
            addr: "2001:db8::1".parse().unwrap_or(Ipv6Addr::UNSPECIFIED),
            len: 128,
        }),
        proto: Some(6),
        dscp: None,
    })]);
    let mut k = SteerKey {
        ether_type: 0x86dd,
        ip_version: 6,
        ip_proto: 6,
        src_ip: v6("2001:db8:1ff:ffff::7"),
        dst_ip: v6("2001:db8::1"),
        ..SteerKey::default()
    };
    assert!(hit(&r, &m, &k));
    k.src_ip = v6("2001:db8:200::7");
    assert!(!hit(&r, &m, &k));
    k.src_ip = v6("2001:db8:100::");
    k.dst_ip = v6("2001:db8::2");
    assert!(!hit(&r, &m, &k));
    k.dst_ip = v6("2001:db8::1");
    k.ip_version = 4;
    assert!(!hit(&r, &m, &k));
}

#[test]
fn tcp_udp_ports_ranges_and_fragments() {
    let (r, m) = one(vec![Item::Udp(PortsItem {
        src_port: Some(PortRange {
            lo: 1024,
            hi: 65535,
        }),
        dst_port: Some(PortRange { lo: 53, hi: 53 }),
    })]);
    let mut k = udp4();
    assert!(hit(&r, &m, &k));
    k.src_port = 1023;
    assert!(!hit(&r, &m, &k));
    k.src_port = 1024;
    assert!(hit(&r, &m, &k));
    k.src_port = 65535;
    assert!(hit(&r, &m, &k));
    k.dst_port = 54;
    assert!(!hit(&r, &m, &k));
    k.dst_port = 53;
    k.ip_proto = 6;
    assert!(!hit(&r, &m, &k));
    k.ip_proto = 17;
    k.l4 = false; // later fragment: no ports
    assert!(!hit(&r, &m, &k));
    // An item with no ports still needs the protocol and an L4 header; IPv6 is fine.
    let (r, m) = one(vec![Item::Tcp(PortsItem::default())]);
    let k = SteerKey {
        ip_version: 6,
        ip_proto: 6,
        l4: true,
        ..SteerKey::default()
    };
    assert!(hit(&r, &m, &k));
    assert!(!hit(&r, &m, &SteerKey { l4: false, ..k }));
    assert!(!hit(&r, &m, &SteerKey { ip_proto: 17, ..k }));
    // A non-aligned range.
    let (r, m) = one(vec![Item::Tcp(PortsItem {
        src_port: None,
        dst_port: Some(PortRange { lo: 1000, hi: 2000 }),
    })]);
    for (p, want) in [
        (999, false),
        (1000, true),
        (1500, true),
        (2000, true),
        (2001, false),
    ] {
        let k = SteerKey {
            ip_version: 4,
            ip_proto: 6,
            l4: true,
            dst_port: p,
            ..SteerKey::default()
        };
        assert_eq!(hit(&r, &m, &k), want, "port {p}");
    }
}

#[test]
fn tunnels_vxlan_and_gtpu() {
    let (r, m) = one(vec![Item::Vxlan(VxlanItem { vni: Some(5001) })]);
    let mut k = SteerKey {
        tunnel: TUNNEL_VXLAN,
        tunnel_id: 5001,
        ..udp4()
    };
    assert!(hit(&r, &m, &k));
    k.tunnel_id = 5002;
    assert!(!hit(&r, &m, &k));
    k.tunnel_id = 5001;
    k.tunnel = TUNNEL_GTPU; // the same id in a GTP-U tunnel is not this VNI
    assert!(!hit(&r, &m, &k));
    let (r, m) = one(vec![Item::GtpU(GtpuItem {
        teid: Some(0xdead_beef),
    })]);
    k.tunnel_id = 0xdead_beef;
    assert!(hit(&r, &m, &k));
    k.tunnel = TUNNEL_NONE;
    assert!(!hit(&r, &m, &k));
    let (r, m) = one(vec![Item::GtpU(GtpuItem::default())]);
    k.tunnel = TUNNEL_GTPU;
    k.tunnel_id = 7;
    assert!(hit(&r, &m, &k));
}

#[test]
fn ecpri_msg_type_and_pc_id() {
    let (r, m) = one(vec![Item::Ecpri(EcpriItem {
        msg_type: Some(0),
        pc_id: Some(0x0102),
    })]);
    let mut k = SteerKey {
        ether_type: 0xaefe,
        ecpri: true,
        ecpri_msg_type: 0,
        ecpri_pc_id: 0x0102,
        ..SteerKey::default()
    };
    assert!(hit(&r, &m, &k));
    k.ecpri_pc_id = 0x0103;
    assert!(!hit(&r, &m, &k));
    k.ecpri_pc_id = 0x0102;
    k.ecpri_msg_type = 2;
    assert!(!hit(&r, &m, &k));
    k.ecpri_msg_type = 0;
    k.ecpri = false; // truncated eCPRI header: not parsed
    assert!(!hit(&r, &m, &k));
}

#[test]
fn decisions_first_match_mark_rss_drop_default() {
    let text = "\
queues: 8
rules:
  - name: dns
    match: {udp: {dst_port: 53}}
    actions: [{queue: 2}, {mark: 53}]
  - name: udp-rss
    match: {udp: {}}
    actions: [{rss: {queues: [4, 5, 6], hash: [ipv4, udp]}}]
  - name: telnet
    match: {tcp: {dst_port: 23}}
    actions: [drop]
  - name: tag-only
    match: {ipv4: {dst: 10.0.0.0/8}}
    actions: [{mark: 10}]
";
    let set = match SteerRuleSet::parse(text, "d.steering.yaml") {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    let m = set.compile();
    assert_eq!(m.len(), 4);
    let d = m.decide(&udp4());
    assert_eq!(
        d,
        SteerDecision {
            fate: Fate::Queue(2),
            mark: Some(53),
            rule: Some(0)
        }
    );
    let k = SteerKey {
        dst_port: 4789,
        ..udp4()
    };
    let d = m.decide(&k);
    assert_eq!((d.mark, d.rule), (None, Some(1)));
    let Fate::Rss(t) = d.fate else {
        panic!("expected RSS, got {d:?}")
    };
    assert_eq!(t.queues(), &[4, 5, 6]);
    assert_eq!(t.hash(), RssHash::IPV4.union(RssHash::UDP));
    let mut buf = [0u8; 36];
    assert_eq!(t.hash_input(&k, &mut buf), 12);
    assert_eq!(t.queue_for_hash(0), 4);
    assert_eq!(t.queue_for_hash(4), 5);
    let tcp = SteerKey {
        ip_proto: 6,
        dst_port: 23,
        ..udp4()
    };
    assert_eq!(m.decide(&tcp).fate, Fate::Drop);
    let other = SteerKey {
        dst_port: 24,
        ..tcp
    };
    assert_eq!(
        m.decide(&other),
        SteerDecision {
            fate: Fate::Default,
            mark: Some(10),
            rule: Some(3)
        }
    );
    let arp = SteerKey {
        ether_type: 0x0806,
        ..SteerKey::default()
    };
    assert_eq!(m.decide(&arp), SteerDecision::NO_MATCH);
    assert!(SteerMatcher::new(&[]).is_empty());
    assert_eq!(SteerMatcher::new(&[]).decide(&arp), SteerDecision::NO_MATCH);
}

// ---- property test: compiled == reference ------------------------------------------------

/// A small deterministic generator, so one seed reproduces a whole case.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

// Small value pools so random rules and keys meet often.
const MACS: [[u8; 6]; 3] = [
    [0, 0x11, 0x22, 0x33, 0x44, 0x55],
    [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01],
    [0x02, 0, 0, 0, 0, 0x02],
];
const ETHER_TYPES: [u16; 5] = [0x0800, 0x86dd, 0xaefe, 0x88f7, 0x0806];
const PORTS: [u16; 8] = [0, 53, 80, 443, 1024, 2152, 4789, 65535];
const V4: [u32; 3] = [0x0a00_0000, 0xc000_0200, 0x0a01_0203];
const V6: [[u32; 4]; 2] = [[0x2001_0db8, 0, 0, 1], [0x2001_0db8, 0x0100_0000, 0, 0]];

fn gen_port(g: &mut Gen) -> u16 {
    if g.chance(70) {
        g.pick(&PORTS)
    } else {
        g.below(65536) as u16
    }
}

fn gen_range(g: &mut Gen) -> PortRange {
    let a = gen_port(g);
    if g.chance(50) {
        return PortRange::single(a);
    }
    let b = gen_port(g);
    // Mostly ordered; sometimes inverted (never matches, in both matchers).
    if g.chance(95) {
        PortRange {
            lo: a.min(b),
            hi: a.max(b),
        }
    } else {
        PortRange { lo: a, hi: b }
    }
}

fn gen_mac(g: &mut Gen) -> Masked<[u8; 6]> {
    let spec = g.pick(&MACS);
    let mask = match g.below(3) {
        0 => [0xff; 6],
        1 => [0xff, 0xff, 0xff, 0, 0, 0],
        _ => [g.below(256) as u8, 0, 0, 0, 0, g.below(256) as u8],
    };
    let mut s = spec;
    // Usually clean; sometimes with bits outside the mask (a rule that never matches).
    if g.chance(95) {
        for i in 0..6 {
            s[i] &= mask[i];
        }
    }
    Masked { spec: s, mask }
}

fn gen_v4_prefix(g: &mut Gen) -> Ipv4Prefix {
    let len = g.pick(&[0u8, 8, 16, 24, 25, 32]);
    let mut a = g.pick(&V4);
    if g.chance(95) {
        a &= if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len))
        };
    }
    Ipv4Prefix {
        addr: Ipv4Addr::from(a),
        len,
    }
}

fn gen_v6_prefix(g: &mut Gen) -> Ipv6Prefix {
    let len = g.pick(&[0u8, 32, 40, 64, 96, 127, 128]);
    let w = g.pick(&V6);
    let mut a = (u128::from(w[0]) << 96)
        | (u128::from(w[1]) << 64)
        | (u128::from(w[2]) << 32)
        | u128::from(w[3]);
    if g.chance(95) {
        a &= if len == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(len))
        };
    }
    Ipv6Prefix {
        addr: Ipv6Addr::from(a),
        len,
    }
}

fn maybe<T>(g: &mut Gen, pct: u64, f: impl FnOnce(&mut Gen) -> T) -> Option<T> {
    if g.chance(pct) {
        Some(f(g))
    } else {
        None
    }
}

fn gen_rule(g: &mut Gen) -> SteerRule {
    let mut pattern = Vec::new();
    if g.chance(30) {
        pattern.push(Item::Eth(EthItem {
            dst: maybe(g, 50, gen_mac),
            src: maybe(g, 30, gen_mac),
            ether_type: maybe(g, 40, |g| g.pick(&ETHER_TYPES)),
        }));
    }
    if g.chance(25) {
        pattern.push(Item::Vlan(VlanItem {
            vid: maybe(g, 60, |g| g.pick(&[0u16, 1, 100, 4095])),
            pcp: maybe(g, 30, |g| g.below(8) as u8),
            inner_type: maybe(g, 10, |g| g.pick(&ETHER_TYPES)),
        }));
    }
    match g.below(5) {
        0 | 1 => pattern.push(Item::Ipv4(Ipv4Item {
            src: maybe(g, 40, gen_v4_prefix),
            dst: maybe(g, 50, gen_v4_prefix),
            proto: maybe(g, 20, |g| g.pick(&[1u8, 6, 17, 132])),
            dscp: maybe(g, 15, |g| g.pick(&[0u8, 46, 63])),
        })),
        2 => pattern.push(Item::Ipv6(Ipv6Item {
            src: maybe(g, 40, gen_v6_prefix),
            dst: maybe(g, 50, gen_v6_prefix),
            proto: maybe(g, 20, |g| g.pick(&[6u8, 17, 58])),
            dscp: maybe(g, 15, |g| g.pick(&[0u8, 46])),
        })),
        _ => {}
    }
    let ports = |g: &mut Gen| PortsItem {
        src_port: maybe(g, 40, gen_range),
        dst_port: maybe(g, 60, gen_range),
    };
    match g.below(4) {
        0 => pattern.push(Item::Tcp(ports(g))),
        1 => pattern.push(Item::Udp(ports(g))),
        _ => {}
    }
    match g.below(8) {
        0 => pattern.push(Item::Vxlan(VxlanItem {
            vni: maybe(g, 70, |g| g.pick(&[1u32, 5001, 0xff_ffff])),
        })),
        1 => pattern.push(Item::GtpU(GtpuItem {
            teid: maybe(g, 70, |g| g.pick(&[1u32, 0xdead_beef])),
        })),
        2 => pattern.push(Item::Ecpri(EcpriItem {
            msg_type: maybe(g, 60, |g| g.pick(&[0u8, 2, 5])),
            pc_id: maybe(g, 60, |g| g.pick(&[0u16, 1, 0x0102])),
        })),
        _ => {}
    }
    let fate = match g.below(4) {
        0 => Some(Action::Queue(g.below(8) as u16)),
        1 => Some(Action::Rss(RssAction {
            queues: vec![1, 2, 3],
            hash: RssHash::DEFAULT,
        })),
        2 => Some(Action::Drop),
        _ => None,
    };
    let mut actions: Vec<Action> = fate.into_iter().collect();
    if actions.is_empty() || g.chance(30) {
        actions.push(Action::Mark(g.below(1000) as u32));
    }
    SteerRule {
        name: None,
        pattern,
        actions,
    }
}

/// A key near `rule` (built to satisfy most of its items), or a random one.
fn gen_key(g: &mut Gen, near: Option<&SteerRule>) -> SteerKey {
    let mut k = SteerKey {
        dst_mac: g.pick(&MACS),
        src_mac: g.pick(&MACS),
        ether_type: g.pick(&ETHER_TYPES),
        vlan_count: g.pick(&[0u8, 0, 1, 2]),
        vlan_tci: (g.below(8) as u16) << 13 | g.pick(&[0u16, 1, 100, 4095]),
        ip_version: g.pick(&[0u8, 4, 4, 6, 6, 5]),
        ip_proto: g.pick(&[1u8, 6, 17, 17, 58, 132]),
        dscp: g.pick(&[0u8, 46, 63]),
        src_ip: [0; 4],
        dst_ip: [0; 4],
        l4: g.chance(80),
        src_port: gen_port(g),
        dst_port: gen_port(g),
        tunnel: g.pick(&[TUNNEL_NONE, TUNNEL_NONE, TUNNEL_VXLAN, TUNNEL_GTPU, 7]),
        tunnel_id: g.pick(&[1u32, 5001, 0xff_ffff, 0xdead_beef, 0x0100_0001]),
        ecpri: g.chance(20),
        ecpri_msg_type: g.pick(&[0u8, 2, 5]),
        ecpri_pc_id: g.pick(&[0u16, 1, 0x0102, 0xffff]),
    };
    let ip4 = |g: &mut Gen| {
        let a = g.pick(&V4);
        if g.chance(50) {
            a | (g.below(256) as u32)
        } else {
            a
        }
    };
    if k.ip_version == 4 {
        k.src_ip[0] = ip4(g);
        k.dst_ip[0] = ip4(g);
    } else if k.ip_version == 6 {
        k.src_ip = g.pick(&V6);
        k.dst_ip = g.pick(&V6);
        k.src_ip[3] ^= g.below(4) as u32;
        k.dst_ip[3] ^= g.below(4) as u32;
    }
    let Some(rule) = near else { return k };
    // Steer the key toward the rule's items (each with high probability).
    for item in &rule.pattern {
        if g.chance(10) {
            continue;
        }
        match item {
            Item::Eth(e) => {
                if let Some(m) = e.dst {
                    k.dst_mac = m.spec;
                }
                if let Some(m) = e.src {
                    k.src_mac = m.spec;
                }
                if let Some(t) = e.ether_type {
                    k.ether_type = t;
                }
            }
            Item::Vlan(v) => {
                k.vlan_count = 1;
                if let Some(vid) = v.vid {
                    k.vlan_tci = k.vlan_tci & 0xf000 | vid;
                }
                if let Some(p) = v.pcp {
                    k.vlan_tci = k.vlan_tci & 0x1fff | u16::from(p) << 13;
                }
            }
            Item::Ipv4(i) => {
                k.ip_version = 4;
                if let Some(p) = i.src {
                    k.src_ip = [u32::from(p.addr) | (g.below(2) as u32), 0, 0, 0];
                }
                if let Some(p) = i.dst {
                    k.dst_ip = [u32::from(p.addr), 0, 0, 0];
                }
                if let Some(p) = i.proto {
                    k.ip_proto = p;
                }
                if let Some(d) = i.dscp {
                    k.dscp = d;
                }
            }
            Item::Ipv6(i) => {
                k.ip_version = 6;
                let words = |a: Ipv6Addr| {
                    let x = u128::from(a);
                    [
                        (x >> 96) as u32,
                        (x >> 64) as u32,
                        (x >> 32) as u32,
                        x as u32,
                    ]
                };
                if let Some(p) = i.src {
                    k.src_ip = words(p.addr);
                }
                if let Some(p) = i.dst {
                    k.dst_ip = words(p.addr);
                    k.dst_ip[3] |= g.below(2) as u32;
                }
                if let Some(p) = i.proto {
                    k.ip_proto = p;
                }
                if let Some(d) = i.dscp {
                    k.dscp = d;
                }
            }
            Item::Tcp(p) | Item::Udp(p) => {
                k.l4 = true;
                k.ip_proto = if matches!(item, Item::Tcp(_)) { 6 } else { 17 };
                if let Some(r) = p.src_port {
                    k.src_port = g.pick(&[r.lo, r.hi, r.lo.wrapping_sub(1), r.hi.wrapping_add(1)]);
                }
                if let Some(r) = p.dst_port {
                    k.dst_port = g.pick(&[r.lo, r.hi, r.lo.wrapping_add(1)]);
                }
            }
            Item::Vxlan(v) => {
                k.tunnel = TUNNEL_VXLAN;
                if let Some(x) = v.vni {
                    k.tunnel_id = x;
                }
            }
            Item::GtpU(t) => {
                k.tunnel = TUNNEL_GTPU;
                if let Some(x) = t.teid {
                    k.tunnel_id = x;
                }
            }
            Item::Ecpri(e) => {
                k.ecpri = true;
                if let Some(t) = e.msg_type {
                    k.ecpri_msg_type = t;
                }
                if let Some(p) = e.pc_id {
                    k.ecpri_pc_id = p;
                }
            }
        }
    }
    k
}

fn check_case(seed: u64, n_rules: usize, n_keys: usize) -> Result<usize, TestCaseError> {
    let mut g = Gen(seed);
    let rules: Vec<SteerRule> = (0..n_rules).map(|_| gen_rule(&mut g)).collect();
    let m = SteerMatcher::new(&rules);
    prop_assert_eq!(m.stats().rules, n_rules);
    let shadowed = m.shadowed();
    let mut hits = 0;
    for _ in 0..n_keys {
        let near = if rules.is_empty() || g.chance(20) {
            None
        } else {
            Some(&rules[g.below(rules.len() as u64) as usize])
        };
        let key = gen_key(&mut g, near);
        let want = rules.iter().position(|r| r.matches(&key)).map(|i| i as u32);
        prop_assert_eq!(m.first_match(&key), want, "seed {} key {:?}", seed, key);
        let d = m.decide(&key);
        prop_assert_eq!(d.rule, want);
        if let Some(i) = want {
            hits += 1;
            let r = &rules[i as usize];
            prop_assert_eq!(d.mark, r.mark());
            let fate_ok = match (r.fate(), d.fate) {
                (Some(Action::Queue(q)), Fate::Queue(got)) => *q == got,
                (Some(Action::Rss(a)), Fate::Rss(t)) => t.queues() == &a.queues[..],
                (Some(Action::Drop), Fate::Drop) => true,
                (None, Fate::Default) => true,
                _ => false,
            };
            prop_assert!(fate_ok, "rule {:?} decision {:?}", r, d);
        }
        // A rule reported shadowed really is covered by the earlier one.
        for &(j, i) in &shadowed {
            if rules[j].matches(&key) {
                prop_assert!(
                    rules[i].matches(&key),
                    "seed {}: rule {} not covered by {}",
                    seed,
                    j,
                    i
                );
            }
        }
    }
    Ok(hits)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn compiled_equals_reference_tens_of_rules(seed in any::<u64>(), n in 0usize..80) {
        check_case(seed, n, 300)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn compiled_equals_reference_hundreds_of_rules(seed in any::<u64>(), n in 100usize..400) {
        check_case(seed, n, 500)?;
    }
}

/// The generator must produce matches often enough for the property to mean something, and
/// rule sets on which the matcher builds hash indexes as well as linear lists.
#[test]
fn generated_cases_exercise_the_matcher() {
    let mut hits = 0;
    for seed in 0..20 {
        hits += check_case(seed, 20, 200).unwrap_or(0);
    }
    assert!(
        hits > 20 * 200 / 4,
        "only {hits} of 4000 keys matched a rule"
    );
    let mut with_index = 0;
    for seed in 0..20 {
        let mut g = Gen(seed);
        let rules: Vec<SteerRule> = (0..80).map(|_| gen_rule(&mut g)).collect();
        let st = SteerMatcher::new(&rules).stats();
        assert!(st.plans >= 1 && st.max_linear <= 80, "{st:?}");
        if st.indexes > 0 {
            with_index += 1;
        }
    }
    assert!(
        with_index >= 15,
        "only {with_index} of 20 rule sets got an index"
    );
}

#[test]
fn many_rules_pinning_one_field_are_indexed() {
    // 200 GTP-U tunnels by TEID then a catch-all: a frame tests its tunnel's rule and the
    // catch-all, not 200 rules.
    let mut rules: Vec<SteerRule> = (0..200u32)
        .map(|t| SteerRule {
            name: None,
            pattern: vec![Item::GtpU(GtpuItem { teid: Some(t * 7) })],
            actions: vec![Action::Queue((t % 8) as u16)],
        })
        .collect();
    rules.push(SteerRule {
        name: None,
        pattern: vec![],
        actions: vec![Action::Drop],
    });
    let m = SteerMatcher::new(&rules);
    let st = m.stats();
    assert!(st.indexes >= 1 && st.max_linear <= 1, "{st:?}");
    for t in 0..1400u32 {
        let k = SteerKey {
            tunnel: TUNNEL_GTPU,
            tunnel_id: t,
            ..udp4()
        };
        let want = if t % 7 == 0 { t / 7 } else { 200 };
        assert_eq!(m.first_match(&k), Some(want), "teid {t}");
    }
    assert_eq!(m.first_match(&udp4()), Some(200));
}

/// The shipped example files steer what their comments say.
#[test]
fn shipped_examples_steer_as_documented() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/rules");
    let load =
        |name: &str| SteerRuleSet::load(format!("{dir}/{name}")).unwrap_or_else(|e| panic!("{e}"));
    let fh = load("fronthaul.steering.yaml").compile();
    let ptp = SteerKey {
        ether_type: 0x88f7,
        ..SteerKey::default()
    };
    assert_eq!(fh.decide(&ptp).fate, Fate::Queue(0));
    let uplane = SteerKey {
        dst_mac: [0x00, 0x11, 0x22, 0x33, 0x44, 0x55],
        ether_type: 0xaefe,
        vlan_count: 1,
        vlan_tci: 100,
        ecpri: true,
        ecpri_msg_type: 0,
        ecpri_pc_id: 1,
        ..SteerKey::default()
    };
    let d = fh.decide(&uplane);
    assert_eq!((d.fate, d.mark), (Fate::Queue(2), Some(1)));
    // Real-time control (type 2) of the same eAxC: "other eCPRI", queue 3, no mark.
    let d = fh.decide(&SteerKey {
        ecpri_msg_type: 2,
        ..uplane
    });
    assert_eq!((d.fate, d.mark), (Fate::Queue(3), None));
    let lldp = SteerKey {
        dst_mac: [0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e],
        ether_type: 0x88cc,
        ..SteerKey::default()
    };
    assert_eq!(fh.decide(&lldp).fate, Fate::Drop);

    let mc = load("mobile-core.steering.yaml").compile();
    let gtpu = SteerKey {
        dst_ip: [u32::from(Ipv4Addr::new(10, 20, 1, 1)), 0, 0, 0],
        dst_port: 2152,
        tunnel: TUNNEL_GTPU,
        tunnel_id: 0x1234,
        ..udp4()
    };
    let d = mc.decide(&gtpu);
    assert_eq!((d.fate, d.mark), (Fate::Queue(15), Some(0x1234)));
    let other_tunnel = SteerKey {
        tunnel_id: 0x99,
        ..gtpu
    };
    match mc.decide(&other_tunnel).fate {
        Fate::Rss(t) => {
            assert_eq!(t.queues(), &[0, 1, 2, 3, 4, 5, 6, 7]);
            let mut buf = [0u8; 36];
            // Outer addresses only: 8 bytes, the ports are not hashed.
            assert_eq!(t.hash_input(&other_tunnel, &mut buf), 8);
        }
        other => panic!("expected RSS, got {other:?}"),
    }
    // NTP reflection: source port 123 to a high port is dropped; a client query is not.
    let ntp = SteerKey {
        src_port: 123,
        dst_port: 40000,
        ..udp4()
    };
    assert_eq!(mc.decide(&ntp).fate, Fate::Drop);
    let query = SteerKey {
        src_port: 40000,
        dst_port: 123,
        ..udp4()
    };
    assert_eq!(mc.decide(&query), SteerDecision::NO_MATCH);
    // VLAN 300 frames are only marked: default fate.
    let tagged = SteerKey {
        vlan_count: 1,
        vlan_tci: 300,
        dst_port: 9999,
        ..udp4()
    };
    let d = mc.decide(&tagged);
    assert_eq!((d.fate, d.mark), (Fate::Default, Some(300)));
}
