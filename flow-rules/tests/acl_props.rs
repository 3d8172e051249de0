//! Property tests: on random rule sets (overlapping prefixes, wildcards, IPv4/IPv6/any family,
//! port ranges, single addresses, protocol masks, DSCP, TCP flags, VLAN, ingress port) and random
//! keys, the compiled classifier, the linear first-match reference and the CUDA matcher compiled
//! for the host (gpu-kernels/acl.cuh) all give the same rule index.

use flow_rules::abi::{AclKey, ACL_NO_MATCH, VLAN_NONE};
use flow_rules::acl::{
    cuda_host, AclClassifier, AclRule, AclRuleSet, Family, Masked, PortRange, Prefix,
};
use proptest::prelude::*;

/// A few address bases so that prefixes nest and overlap.
const BASES4: [u32; 4] = [0x0A00_0000, 0x0A01_0200, 0xC0A8_0101, 0x0A01_0000];
const BASES6: [[u32; 4]; 3] = [
    [0x2001_0db8, 0, 0, 1],
    [0x2001_0db8, 0x0001_0000, 0, 0],
    [0xfe80_0000, 0, 0, 0x1234],
];

fn prefix(fam: Family, base: usize, len: u8) -> Prefix {
    let (addr, len) = match fam {
        Family::V4 => ([BASES4[base % 4], 0, 0, 0], len % 33),
        _ => (BASES6[base % 3], len.wrapping_mul(4) % 129),
    };
    let mut p = Prefix { addr, len };
    let m = p.mask(fam);
    for (a, m) in p.addr.iter_mut().zip(m) {
        *a &= m;
    }
    p
}

fn port_range() -> impl Strategy<Value = PortRange> {
    prop_oneof![
        Just(PortRange::ANY),
        (0u16..100).prop_map(|p| PortRange { lo: p, hi: p }),
        (0u16..200, 0u16..200).prop_map(|(a, b)| PortRange {
            lo: a.min(b),
            hi: a.max(b)
        }),
        (0u16..4).prop_map(|k| PortRange {
            lo: 1024 * k,
            hi: 65535
        }),
    ]
}

fn masked8(vals: &'static [u8]) -> impl Strategy<Value = Masked<u8>> {
    prop_oneof![
        3 => Just(Masked::<u8>::ANY),
        2 => proptest::sample::select(vals).prop_map(Masked::<u8>::exact),
        1 => (proptest::sample::select(vals), any::<u8>()).prop_map(|(v, m)| Masked::<u8>::new(v, m)),
    ]
}

fn rule() -> impl Strategy<Value = AclRule> {
    (
        prop_oneof![3 => Just(Family::V4), 1 => Just(Family::V6), 1 => Just(Family::Any)],
        (0usize..4, any::<u8>(), 0usize..4, any::<u8>()),
        port_range(),
        port_range(),
        masked8(&[6, 17, 1, 58]),
        (masked8(&[0, 46, 10]), masked8(&[0x02, 0x12, 0x10])),
        prop_oneof![4 => Just(Masked::<u16>::ANY), 1 => prop_oneof![Just(10u16), Just(20), Just(VLAN_NONE)].prop_map(Masked::<u16>::exact)],
        prop_oneof![4 => Just(Masked::<u16>::ANY), 1 => (0u16..3).prop_map(Masked::<u16>::exact)],
    )
        .prop_map(|(family, (sb, sl, db, dl), sp, dp, proto, (dscp, flags), vlan, port)| {
            let (src, dst) = if family == Family::Any {
                (Prefix::ANY, Prefix::ANY)
            } else {
                (prefix(family, sb, sl), prefix(family, db, dl))
            };
            AclRule {
                family,
                src,
                dst,
                src_port: sp,
                dst_port: dp,
                proto,
                dscp: Masked::<u8>::new(dscp.value & 0x3F, dscp.mask & 0x3F),
                tcp_flags: flags,
                vlan,
                port_id: port,
                ..AclRule::any()
            }
        })
}

/// Keys near the rules' values (so rules match often), plus random ones and non-IP ones.
fn key() -> impl Strategy<Value = AclKey> {
    (
        prop_oneof![4 => Just(4u8), 2 => Just(6u8), 1 => Just(0u8)],
        (0usize..4, any::<u32>(), any::<u8>()),
        (0usize..4, any::<u32>(), any::<u8>()),
        (
            prop_oneof![0u16..210, any::<u16>()],
            prop_oneof![0u16..210, any::<u16>()],
        ),
        prop_oneof![Just(6u8), Just(17), Just(1), Just(58), any::<u8>()],
        (
            0u8..64,
            any::<u8>(),
            prop_oneof![Just(10u16), Just(20), Just(VLAN_NONE), 0u16..4096],
            0u16..4,
        ),
    )
        .prop_map(
            |(v, (sb, sr, sbits), (db, dr, dbits), (sp, dport), proto, (dscp, fl, vlan, port))| {
                let addr = |b: usize, r: u32, bits: u8| -> [u32; 4] {
                    // Keep the top bits of a base and randomise the low `bits % 40` bits.
                    let n = u32::from(bits % 40);
                    let noise = if n == 0 { 0 } else { r >> (32 - n.min(32)) };
                    match v {
                        4 => [BASES4[b % 4] ^ noise, 0, 0, 0],
                        6 => {
                            let mut a = BASES6[b % 3];
                            a[(b + n as usize) % 4] ^= noise;
                            a
                        }
                        _ => [0; 4],
                    }
                };
                if v == 0 {
                    // What the acl stage builds for a non-IP frame.
                    return AclKey {
                        vlan_id: vlan,
                        port_id: port,
                        ..AclKey::default()
                    };
                }
                AclKey {
                    src_ip: addr(sb, sr, sbits),
                    dst_ip: addr(db, dr, dbits),
                    src_port: sp,
                    dst_port: dport,
                    proto,
                    ip_version: v,
                    dscp,
                    tcp_flags: fl,
                    vlan_id: vlan,
                    port_id: port,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn compiled_equals_linear_equals_cuda(rules in proptest::collection::vec(rule(), 1..160),
                                          keys in proptest::collection::vec(key(), 1..200)) {
        let set = AclRuleSet { rules, warnings: Vec::new() };
        let cls = AclClassifier::build(&set.rules);
        let mut batch = vec![0u32; keys.len()];
        cls.classify_batch(&keys, &mut batch);
        let mut portable = vec![0u32; keys.len()];
        cls.classify_batch_portable(&keys, &mut portable);
        for ((k, b), p) in keys.iter().zip(&batch).zip(&portable) {
            prop_assert_eq!(cls.classify(k), *b, "batch vs single, key {:?}", k);
            prop_assert_eq!(*p, *b, "portable batch vs batch, key {:?}", k);
        }
        for k in &keys {
            let want = set.classify_linear(k).map_or(ACL_NO_MATCH, |i| i as u32);
            prop_assert_eq!(cls.classify(k), want, "compiled vs linear, key {:?}", k);
            prop_assert_eq!(cuda_host::classify(&cls, k), want, "CUDA (host) vs linear, key {:?}", k);
            for g in [1u32, 2, 4, 8, 16, 32] {
                prop_assert_eq!(cuda_host::classify_lanes(&cls, k, g), want, "CUDA group of {} vs linear, key {:?}", g, k);
            }
        }
        // Every rule's own low corner: a key that rule matches, so first-match order is tested.
        for r in &set.rules {
            let k = AclKey {
                src_ip: r.src.addr,
                dst_ip: r.dst.addr,
                src_port: r.src_port.lo,
                dst_port: r.dst_port.hi,
                proto: r.proto.value,
                ip_version: if r.family == Family::V6 { 6 } else { 4 },
                dscp: r.dscp.value,
                tcp_flags: r.tcp_flags.value,
                vlan_id: r.vlan.value,
                port_id: r.port_id.value,
            };
            let want = set.classify_linear(&k).map_or(ACL_NO_MATCH, |i| i as u32);
            prop_assert!(want != ACL_NO_MATCH);
            prop_assert_eq!(cls.classify(&k), want, "compiled vs linear, corner {:?}", k);
            prop_assert_eq!(cuda_host::classify(&cls, &k), want, "CUDA (host) vs linear, corner {:?}", k);
            for g in [1u32, 4, 32] {
                prop_assert_eq!(cuda_host::classify_lanes(&cls, &k, g), want, "CUDA group of {} vs linear, corner {:?}", g, k);
            }
        }
    }

    #[test]
    fn batch_equals_linear_on_ipv4(rules in proptest::collection::vec(rule(), 1..200),
                                   keys in proptest::collection::vec(key(), 8..120)) {
        let set = AclRuleSet { rules, warnings: Vec::new() };
        let cls = AclClassifier::build(&set.rules);
        let keys: Vec<AclKey> = keys.into_iter().filter(|k| k.ip_version == 4).collect();
        let mut out = vec![0u32; keys.len()];
        cls.classify_batch(&keys, &mut out);
        let mut portable = vec![0u32; keys.len()];
        cls.classify_batch_portable(&keys, &mut portable);
        for ((k, o), p) in keys.iter().zip(&out).zip(&portable) {
            let want = set.classify_linear(k).map_or(ACL_NO_MATCH, |i| i as u32);
            prop_assert_eq!(*o, want, "batch vs linear, key {:?}", k);
            prop_assert_eq!(*p, want, "portable batch vs linear, key {:?}", k);
        }
    }

    #[test]
    fn shadow_warnings_are_true(rules in proptest::collection::vec(rule(), 1..80)) {
        let mut set = AclRuleSet { rules, warnings: Vec::new() };
        set.compile();
        for w in &set.warnings {
            // "rule J ... is shadowed by rule I"
            let nums: Vec<usize> = w.message.split(' ').filter_map(|t| t.parse().ok()).collect();
            prop_assert!(nums.len() >= 2, "{}", w);
            prop_assert!(nums[1] < nums[0] && set.rules[nums[1]].covers(&set.rules[nums[0]]), "{}", w);
        }
    }
}

#[test]
fn duplicate_rule_is_reported_shadowed() {
    let mut a = AclRule::any();
    a.family = Family::V4;
    a.src = prefix(Family::V4, 0, 8);
    a.dst_port = PortRange { lo: 80, hi: 80 };
    let mut b = a.clone();
    b.src = prefix(Family::V4, 1, 24);
    let mut set = AclRuleSet {
        rules: vec![
            a,
            AclRule {
                dst_port: PortRange { lo: 1, hi: 2 },
                ..AclRule::any()
            },
            b,
        ],
        warnings: Vec::new(),
    };
    set.compile();
    assert_eq!(set.warnings.len(), 1, "{:?}", set.warnings);
    assert!(
        set.warnings[0]
            .message
            .contains("rule 2 is shadowed by rule 0"),
        "{}",
        set.warnings[0]
    );
}

#[test]
fn large_random_sets_build_deep_trees() {
    // Enough rules that the compiler makes internal nodes and several trees.
    let mut rules = Vec::new();
    for i in 0..3000u32 {
        let mut r = AclRule::any();
        r.family = Family::V4;
        r.src = Prefix {
            addr: [(i.wrapping_mul(2654435761)) & 0xFFFF_FF00, 0, 0, 0],
            len: 24,
        };
        r.dst = Prefix {
            addr: [(i % 97) << 24, 0, 0, 0],
            len: if i % 5 == 0 { 0 } else { 8 },
        };
        if r.dst.len == 0 {
            r.dst.addr = [0; 4];
        }
        r.dst_port = PortRange {
            lo: (i % 1000) as u16,
            hi: (i % 1000 + i % 7) as u16,
        };
        r.proto = Masked::<u8>::exact(if i % 3 == 0 { 17 } else { 6 });
        rules.push(r);
    }
    let set = AclRuleSet {
        rules,
        warnings: Vec::new(),
    };
    let cls = AclClassifier::build(&set.rules);
    assert!(
        cls.stats().nodes[0] >= 1 && cls.stats().max_leaf[0] < 64,
        "{}",
        cls.stats()
    );
    let mut x = 12345u32;
    for _ in 0..3000 {
        x = x.wrapping_mul(1103515245).wrapping_add(12345);
        let r = &set.rules[(x >> 8) as usize % set.rules.len()];
        let k = AclKey {
            src_ip: [r.src.addr[0] | (x & 0xFF), 0, 0, 0],
            dst_ip: [r.dst.addr[0] | (x >> 12), 0, 0, 0],
            src_port: x as u16,
            dst_port: r.dst_port.lo + (x % 3) as u16,
            proto: r.proto.value,
            ip_version: 4,
            ..AclKey::default()
        };
        let want = set.classify_linear(&k).map_or(ACL_NO_MATCH, |i| i as u32);
        assert_eq!(cls.classify(&k), want);
        assert_eq!(cuda_host::classify(&cls, &k), want);
        for g in [2u32, 8, 32] {
            assert_eq!(cuda_host::classify_lanes(&cls, &k, g), want, "group of {g}");
        }
    }
}
