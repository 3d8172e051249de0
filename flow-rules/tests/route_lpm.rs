//! The route LPM tables against plain reference LPMs: a 500K-prefix IPv4 table with the prefix-
//! length mix of a real BGP table (mostly /24, a large share /16-/23, few /25-/32: the shares
//! DPDK's lpm_perf_autotest uses), IPv6 tables with a realistic mix, and property tests on
//! small nested tables against a linear scan. Everything is generated from fixed seeds.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::{Ipv4Addr, Ipv6Addr};

use flow_rules::route::{Lpm4, Lpm6, Prefix, Route, RouteTable};
use proptest::prelude::*;

/// splitmix64: a seeded generator (no dependency, same sequence everywhere).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A length drawn with these weights (index = prefix length).
    fn weighted(&mut self, w: &[u64]) -> u8 {
        let total: u64 = w.iter().sum();
        let mut x = self.below(total);
        for (i, wi) in w.iter().enumerate() {
            if x < *wi {
                return i as u8;
            }
            x -= wi;
        }
        unreachable!()
    }
}

/// Prefix-length shares of a real IPv4 BGP table (per 1,076,806 routes: the distribution
/// DPDK's test_lpm_perf.c generates its table from).
const V4_MIX: [u64; 33] = [
    0, 0, 0, 1, 0, 3, 2, 4, 201, 37, 55, 97, 381, 775, 2104, 3712, 69319, 12983, 23667, 69068,
    62354, 48531, 72355, 85427, 583900, 2654, 5650, 6467, 7127, 12936, 5999, 13, 984,
];

/// A plausible IPv6 table mix: /48 most common, then /32-/47, /29, /56, /64, a few /128 and
/// short aggregates.
fn v6_mix() -> [u64; 129] {
    let mut w = [0u64; 129];
    for (len, share) in [
        (16, 2),
        (19, 4),
        (20, 10),
        (24, 30),
        (28, 40),
        (29, 400),
        (32, 1500),
        (33, 100),
        (36, 300),
        (40, 500),
        (44, 800),
        (46, 300),
        (47, 200),
        (48, 5000),
        (52, 100),
        (56, 400),
        (60, 50),
        (64, 300),
        (96, 10),
        (112, 10),
        (126, 20),
        (127, 5),
        (128, 50),
    ] {
        w[len] = share;
    }
    w
}

/// Multiply-shift hashing for the reference maps: fast in a debug build, and these keys are
/// random anyway.
#[derive(Default)]
struct Mix(u64);

impl Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01B3);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0 ^ u64::from(v)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u128(&mut self, v: u128) {
        self.0 = ((self.0 ^ v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (v >> 64) as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Map<K> = HashMap<K, u32, BuildHasherDefault<Mix>>;

fn mask4(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len)
    }
}

fn mask6(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    }
}

/// Reference IPv4 LPM: one exact-match map per prefix length, longest length first.
struct Ref4(Vec<Map<u32>>);

impl Ref4 {
    fn new(routes: &[(u32, u8, u32)]) -> Self {
        let mut m: Vec<Map<u32>> = (0..=32).map(|_| Map::default()).collect();
        for &(a, l, nh) in routes {
            m[l as usize].insert(a & mask4(l), nh);
        }
        Ref4(m)
    }
    fn lookup(&self, a: u32) -> Option<u32> {
        (0..=32u8)
            .rev()
            .find_map(|l| self.0[l as usize].get(&(a & mask4(l))).copied())
    }
}

/// Reference IPv6 LPM: the same, over the lengths present only (longest first).
struct Ref6(Vec<Map<u128>>, Vec<u8>);

impl Ref6 {
    fn new(routes: &[(u128, u8, u32)]) -> Self {
        let mut m: Vec<Map<u128>> = (0..=128).map(|_| Map::default()).collect();
        for &(a, l, nh) in routes {
            m[l as usize].insert(a & mask6(l), nh);
        }
        let lens = (0..=128u8)
            .rev()
            .filter(|l| !m[*l as usize].is_empty())
            .collect();
        Ref6(m, lens)
    }
    fn lookup(&self, a: u128) -> Option<u32> {
        self.1
            .iter()
            .find_map(|&l| self.0[l as usize].get(&(a & mask6(l))).copied())
    }
}

/// `n` distinct IPv4 prefixes with the BGP mix, each with its own next hop (its index).
fn v4_table(n: usize, seed: u64) -> Vec<(u32, u8, u32)> {
    let mut rng = Rng(seed);
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let len = rng.weighted(&V4_MIX);
        let a = rng.next() as u32 & mask4(len);
        if seen.insert((a, len)) {
            out.push((a, len, out.len() as u32));
        }
    }
    out
}

/// IPv6 prefixes inside 2000::/3 (as the global unicast table), with the IPv6 mix; some
/// nested under others by reusing an earlier prefix's top bits.
fn v6_table(n: usize, seed: u64) -> Vec<(u128, u8, u32)> {
    let mut rng = Rng(seed);
    let w = v6_mix();
    let mut seen = HashSet::with_capacity(n);
    let mut out: Vec<(u128, u8, u32)> = Vec::with_capacity(n);
    while out.len() < n {
        let len = rng.weighted(&w);
        let mut a = (u128::from(rng.next()) << 64 | u128::from(rng.next())) >> 3 | (1u128 << 125);
        if !out.is_empty() && rng.below(4) == 0 {
            // Nest: keep an earlier (shorter) prefix's bits.
            let (pa, pl, _) = out[rng.below(out.len() as u64) as usize];
            if pl < len {
                a = pa | (a & !mask6(pl));
            }
        }
        let a = a & mask6(len);
        if seen.insert((a, len)) {
            out.push((a, len, out.len() as u32));
        }
    }
    out
}

fn as_u128<T: Copy>(r: &[(T, u8, u32)], f: impl Fn(T) -> u128) -> Vec<(u128, u8, u32)> {
    r.iter().map(|&(a, l, n)| (f(a), l, n)).collect()
}

#[test]
fn ipv4_500k_bgp_mix_equals_the_reference() {
    let routes = v4_table(500_000, 0x5eed_0001);
    let count = |lo: u8, hi: u8| routes.iter().filter(|r| (lo..=hi).contains(&r.1)).count();
    let (l24, l16_23, l25_32) = (count(24, 24), count(16, 23), count(25, 32));
    assert!(l24 > 250_000 && l16_23 > 150_000 && (10_000..40_000).contains(&l25_32));
    let t = Lpm4::build(&as_u128(&routes, u128::from)).unwrap();
    let r = Ref4::new(&routes);
    let mut rng = Rng(7);
    let (mut hits, mut misses) = (0usize, 0usize);
    let mut check = |a: u32| {
        let want = r.lookup(a);
        assert_eq!(t.lookup_v4(a), want, "address {}", Ipv4Addr::from(a));
        if want.is_some() {
            hits += 1;
        } else {
            misses += 1;
        }
    };
    // Inside every third prefix (a debug-build reference lookup is slow): its first address,
    // its last, or a random one.
    for &(a, l, _) in routes.iter().step_by(3) {
        let host = !mask4(l);
        match rng.below(3) {
            0 => check(a),
            1 => check(a | host),
            _ => check(a | (rng.next() as u32 & host)),
        }
    }
    for _ in 0..50_000 {
        check(rng.next() as u32);
    }
    check(0);
    check(u32::MAX);
    assert!(
        hits > 160_000 && misses > 2_000,
        "{hits} hits, {misses} misses"
    );
    // The generic multi-level walk (the CUDA matcher's loop) agrees with the two-load one.
    for _ in 0..20_000 {
        let a = rng.next() as u32;
        assert_eq!(t.lookup(u128::from(a)), t.lookup_v4(a));
    }
    // tbl8 groups are made only for /24s holding longer prefixes.
    let groups: HashSet<u32> = routes
        .iter()
        .filter(|r| r.1 > 24)
        .map(|r| r.0 >> 8)
        .collect();
    assert_eq!(t.groups(), groups.len());
}

#[test]
fn ipv4_with_default_route_never_misses() {
    let mut routes = v4_table(20_000, 99);
    routes.push((0, 0, 777_777));
    let t = Lpm4::build(&as_u128(&routes, u128::from)).unwrap();
    let r = Ref4::new(&routes);
    let mut rng = Rng(3);
    for _ in 0..30_000 {
        let a = rng.next() as u32;
        assert!(t.lookup_v4(a).is_some());
        assert_eq!(t.lookup_v4(a), r.lookup(a));
    }
}

#[test]
fn ipv6_tables_equal_the_reference() {
    for (n, seed, default) in [(50_000usize, 0x6_0001u64, false), (10_000, 0x6_0002, true)] {
        let mut routes = v6_table(n, seed);
        if default {
            routes.push((0, 0, 999_999));
        }
        let t = Lpm6::build(&routes).unwrap();
        let r = Ref6::new(&routes);
        let mut rng = Rng(seed ^ 0xff);
        let (mut hits, mut misses) = (0usize, 0usize);
        let mut check = |a: u128| {
            let want = r.lookup(a);
            assert_eq!(t.lookup(a), want, "address {}", Ipv6Addr::from(a));
            if want.is_some() {
                hits += 1;
            } else {
                misses += 1;
            }
        };
        for &(a, l, _) in &routes {
            let host = !mask6(l);
            let rnd = u128::from(rng.next()) << 64 | u128::from(rng.next());
            match rng.below(3) {
                0 => check(a),
                1 => check(a | host),
                _ => check(a | (rnd & host)),
            }
        }
        for _ in 0..20_000 {
            // Inside 2000::/3 (hits and misses) and anywhere (mostly misses).
            let rnd = u128::from(rng.next()) << 64 | u128::from(rng.next());
            check(rnd >> 3 | (1u128 << 125));
            check(rnd);
        }
        assert!(hits >= n, "{hits} hits");
        assert!(default || misses > 15_000, "{misses} misses");
        assert!(!default || misses == 0);
    }
}

#[test]
fn route_table_end_to_end() {
    let prefixes = v4_table(5_000, 11);
    let routes: Vec<Route> = prefixes
        .iter()
        .map(|&(a, len, i)| Route {
            prefix: Prefix::V4 {
                addr: Ipv4Addr::from(a),
                len,
            },
            via: [2, 0, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8],
            port: format!("p{}", i % 3),
        })
        .collect();
    let t = RouteTable::build(&routes).unwrap();
    assert_eq!((t.ports.len(), t.next_hops.len()), (3, 5_000));
    let r = Ref4::new(&prefixes);
    let mut rng = Rng(5);
    for _ in 0..20_000 {
        let a = rng.next() as u32;
        let got = t
            .lookup_v4(a)
            .map(|h| (h.mac, t.ports[h.port as usize].clone()));
        let want = r.lookup(a).map(|i| {
            let route = &routes[i as usize];
            (route.via, route.port.clone())
        });
        assert_eq!(got, want);
    }
    assert!(t.lookup_v6(1).is_none(), "no IPv6 routes: no IPv6 table");
    assert!(t.v6.tbl24().is_empty());
}

/// Linear-scan reference over `(addr, len, nh)` with unique prefixes.
fn scan(routes: &[(u128, u8, u32)], a: u128, w: u32) -> Option<u32> {
    let mask = |l: u8| {
        if l == 0 {
            0
        } else {
            (u128::MAX << (128 - u32::from(l))) >> (128 - w)
        }
    };
    routes
        .iter()
        .filter(|(p, l, _)| (a & mask(*l)) == (p & mask(*l)))
        .max_by_key(|r| r.1)
        .map(|r| r.2)
}

/// Unique prefixes near a few bases (so they nest and share groups), with their next hops.
fn dedup(raw: Vec<(u128, u8)>, w: u32) -> Vec<(u128, u8, u32)> {
    let mut seen = HashSet::new();
    raw.into_iter()
        .filter_map(|(a, l)| {
            let m = if l == 0 {
                0
            } else {
                (u128::MAX << (128 - u32::from(l))) >> (128 - w)
            };
            seen.insert((a & m, l)).then_some((a & m, l))
        })
        .enumerate()
        .map(|(i, (a, l))| (a, l, i as u32))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    #[test]
    fn ipv4_small_tables_equal_a_linear_scan(
        base in any::<u32>(),
        // Lengths mostly 16-32 (the region is a /16): shorter ones fill up to 2^24 slots,
        // slow in a debug build, and cover the region the same way.
        raw in proptest::collection::vec(
            (any::<u16>(), prop_oneof![1 => Just(0u8), 3 => 1u8..16, 300 => 16u8..=32]),
            0..120,
        ),
        probes in proptest::collection::vec(any::<u16>(), 1..64),
    ) {
        // Addresses within a /16 around `base` so that prefixes nest.
        let near = |x: u16| u128::from((base & 0xFFFF_0000) | u32::from(x));
        let routes = dedup(raw.into_iter().map(|(x, l)| (near(x), l)).collect(), 32);
        let t = Lpm4::build(&routes).unwrap();
        for p in probes {
            let a = near(p);
            prop_assert_eq!(t.lookup_v4(a as u32), scan(&routes, a, 32));
            prop_assert_eq!(t.lookup(a), scan(&routes, a, 32));
        }
    }

    #[test]
    fn ipv6_small_tables_equal_a_linear_scan(
        base in any::<u128>(),
        raw in proptest::collection::vec(
            (any::<u32>(), any::<u8>(), prop_oneof![1 => 0u8..=24, 30 => 25u8..=128]),
            0..80,
        ),
        probes in proptest::collection::vec((any::<u32>(), any::<u8>()), 1..64),
    ) {
        // Vary bits 0-31 and 56-63 of a fixed base: deep nesting through many tbl8 levels.
        let near = |x: u32, y: u8| (base & !0xFF00_0000_FFFF_FFFF) | u128::from(x) | (u128::from(y) << 56);
        let routes = dedup(raw.into_iter().map(|(x, y, l)| (near(x, y), l)).collect(), 128);
        let t = Lpm6::build(&routes).unwrap();
        for (x, y) in probes {
            let a = near(x, y);
            prop_assert_eq!(t.lookup(a), scan(&routes, a, 128));
        }
    }
}
