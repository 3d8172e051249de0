//! ClassBench-like IPv6 rule sets and header traces, generated from a seed (no external data),
//! in the `dpdk-test-acl --ipv6` formats, so rte_acl's answers can be had for them.
//!
//! ClassBench's seeds and generator are IPv4-only; this keeps its shape for IPv6: addresses
//! come from a nested prefix pool (a few registry blocks, sites under them, subnets under
//! sites), so rules overlap the way real ACLs do; prefix lengths, port classes (wildcard,
//! 0-1023, 1024-65535, exact, arbitrary range) and protocols follow a per-profile mix in the
//! spirit of ClassBench's acl (specific destinations, exact service ports) and fw (more
//! wildcards, ranges) seeds. A trace header is either made from a rule (a point inside all its
//! fields, as ClassBench does; it may still match an earlier rule first) or a *miss*: addresses
//! from `MISS_BLOCK`, which no rule prefix of non-zero length lies in, and protocol
//! `MISS_PROTO`, which no rule names, and no rule has both addresses and the protocol wildcard;
//! so a miss matches nothing (the tests check it against the linear reference).
//!
//! Output is deterministic for a given (profile, rules, seed): the generator carries its own
//! PRNG (SplitMix64) so it does not change with a dependency's version.

use std::fmt::Write;

/// Addresses of miss headers: 3fff:ffff::/32 (inside the documentation block 3fff::/20; the
/// pool never uses it).
pub const MISS_BLOCK: u32 = 0x3fff_ffff;
/// Protocol of miss headers (unassigned by IANA; no generated rule names it).
pub const MISS_PROTO: u8 = 253;

/// Which ClassBench seed's shape to follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// acl1-like: specific destinations, exact destination ports, few wildcards.
    Acl,
    /// fw1-like: many wildcard addresses and port ranges.
    Fw,
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "acl" => Ok(Profile::Acl),
            "fw" => Ok(Profile::Fw),
            _ => Err(format!("unknown profile `{s}` (acl or fw)")),
        }
    }
}

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct GenSpec {
    pub profile: Profile,
    pub rules: usize,
    /// Trace headers (ClassBench's default is 10 per rule).
    pub headers: usize,
    /// Fraction of trace headers that match no rule (0..=1).
    pub miss_frac: f64,
    pub seed: u64,
}

/// The generated files' text.
pub struct Generated {
    /// Rule lines (`@src/len dst/len splo : sphi dplo : dphi proto/mask`).
    pub rules: String,
    /// Trace lines (`src dst sport dport proto 0 filter`; filter = the 0-based rule a header was
    /// made from, 4294967295 for a miss).
    pub trace: String,
    /// How many trace headers are misses.
    pub misses: usize,
}

/// SplitMix64 (Steele, Lea, Flood 2014): small, fast, and fixed for all time.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        // Multiply-shift: unbiased enough for test data and free of division.
        ((u128::from(self.next()) * u128::from(n.max(1))) >> 64) as u64
    }
    pub(super) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Index into `weights` drawn with probability proportional to each weight.
    pub(super) fn pick(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut x = self.below(total);
        for (i, &w) in weights.iter().enumerate() {
            if x < u64::from(w) {
                return i;
            }
            x -= u64::from(w);
        }
        weights.len() - 1
    }
}

/// A 128-bit prefix (address as u128, bits past `len` zero).
#[derive(Clone, Copy)]
struct P6 {
    addr: u128,
    len: u8,
}

fn mask128(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

/// `p` extended to `len` bits with random bits below its own.
fn extend(r: &mut Rng, p: P6, len: u8) -> P6 {
    let len = len.max(p.len);
    let rnd = (u128::from(r.next()) << 64) | u128::from(r.next());
    let free = mask128(len) & !mask128(p.len);
    P6 {
        addr: p.addr | (rnd & free),
        len,
    }
}

/// The nested pool rules draw addresses from: sites (/32-/48) under registry blocks, subnets
/// (/56-/64) under sites.
struct Pool {
    sites: Vec<P6>,
    subnets: Vec<P6>,
}

fn pool(r: &mut Rng, rules: usize) -> Pool {
    // Registry-like blocks (2001::/16, 2400::/12, 2600::/12, 2a00::/12, 2c00::/12).
    let blocks = [
        (0x2001u128 << 112, 16u8),
        (0x2400u128 << 112, 12),
        (0x2600u128 << 112, 12),
        (0x2a00u128 << 112, 12),
        (0x2c00u128 << 112, 12),
    ];
    let nsites = (rules as f64).sqrt() as usize / 2 + 4;
    let sites: Vec<P6> = (0..nsites)
        .map(|_| {
            let (a, l) = blocks[r.below(blocks.len() as u64) as usize];
            let len = [32u8, 32, 40, 44, 48][r.below(5) as usize];
            extend(r, P6 { addr: a, len: l }, len)
        })
        .collect();
    let subnets = (0..nsites * 8)
        .map(|_| {
            let s = sites[r.below(sites.len() as u64) as usize];
            let len = [56u8, 60, 64, 64][r.below(4) as usize];
            extend(r, s, len)
        })
        .collect();
    Pool { sites, subnets }
}

/// One address field of a rule: wildcard, a site, a subnet, or a host (/128 or /127-/120).
fn address(r: &mut Rng, pool: &Pool, weights: &[u32; 5]) -> P6 {
    let pick = |r: &mut Rng, v: &[P6]| v[r.below(v.len() as u64) as usize];
    match r.pick(weights) {
        0 => P6 { addr: 0, len: 0 },
        1 => pick(r, &pool.sites),
        2 => pick(r, &pool.subnets),
        3 => {
            let s = pick(r, &pool.subnets);
            extend(r, s, 128)
        }
        _ => {
            let s = pick(r, &pool.subnets);
            let len = [120u8, 124, 126, 127][r.below(4) as usize];
            extend(r, s, len)
        }
    }
}

/// Port class: wildcard, 0-1023, 1024-65535, exact, arbitrary range.
pub(super) fn ports(r: &mut Rng, weights: &[u32; 5]) -> (u16, u16) {
    const COMMON: [u16; 12] = [22, 25, 53, 80, 110, 123, 143, 443, 993, 1521, 3306, 8080];
    match r.pick(weights) {
        0 => (0, 65535),
        1 => (0, 1023),
        2 => (1024, 65535),
        3 => {
            let p = if r.below(3) < 2 {
                COMMON[r.below(COMMON.len() as u64) as usize]
            } else {
                r.below(65536) as u16
            };
            (p, p)
        }
        _ => {
            let a = r.below(65536) as u16;
            let w = 1 + r.below(4096) as u16;
            (a, a.saturating_add(w))
        }
    }
}

struct Rule6 {
    src: P6,
    dst: P6,
    sp: (u16, u16),
    dp: (u16, u16),
    /// (value, mask)
    proto: (u8, u8),
}

/// A profile's weights: address [wildcard, site, subnet, host, short host range] for source
/// and destination; ports [wildcard, low, high, exact, range] for source and destination;
/// protocols [tcp, udp, icmpv6, wildcard].
pub(super) struct Mix {
    pub(super) src: [u32; 5],
    pub(super) dst: [u32; 5],
    pub(super) sport: [u32; 5],
    pub(super) dport: [u32; 5],
    pub(super) proto: [u32; 4],
}

pub(super) const ACL_MIX: Mix = Mix {
    src: [10, 15, 25, 45, 5],
    dst: [3, 12, 30, 50, 5],
    sport: [85, 2, 8, 5, 0],
    dport: [20, 3, 7, 60, 10],
    proto: [60, 25, 5, 10],
};

pub(super) const FW_MIX: Mix = Mix {
    src: [40, 20, 20, 15, 5],
    dst: [25, 20, 25, 25, 5],
    sport: [60, 5, 15, 10, 10],
    dport: [30, 10, 10, 30, 20],
    proto: [45, 30, 5, 20],
};

fn rule(r: &mut Rng, pool: &Pool, profile: Profile) -> Rule6 {
    let Mix {
        src: sw,
        dst: dw,
        sport: spw,
        dport: dpw,
        proto: pw,
    } = match profile {
        Profile::Acl => ACL_MIX,
        Profile::Fw => FW_MIX,
    };
    let mut src = address(r, pool, &sw);
    let dst = address(r, pool, &dw);
    let proto = match r.pick(&pw) {
        0 => (6, 0xFF),
        1 => (17, 0xFF),
        2 => (58, 0xFF),
        _ => (0, 0),
    };
    // A rule with both addresses and the protocol wildcard would match the miss headers.
    if src.len == 0 && dst.len == 0 && proto.1 == 0 {
        src = pool.sites[r.below(pool.sites.len() as u64) as usize];
    }
    let (sp, dp) = if proto.0 == 58 {
        ((0, 65535), (0, 65535))
    } else {
        (ports(r, &spw), ports(r, &dpw))
    };
    Rule6 {
        src,
        dst,
        sp,
        dp,
        proto,
    }
}

/// Full 8-group form (`2001:0db8:0000:...`): every `dpdk-test-acl` version parses it.
fn addr_text(a: u128) -> String {
    let mut s = String::with_capacity(39);
    for g in 0..8 {
        if g > 0 {
            s.push(':');
        }
        let _ = write!(s, "{:04x}", (a >> (112 - 16 * g)) & 0xFFFF);
    }
    s
}

pub(super) fn in_range(r: &mut Rng, (lo, hi): (u16, u16)) -> u16 {
    lo + r.below(u64::from(hi - lo) + 1) as u16
}

/// Generates a rule set and trace (see the module docs).
pub fn generate(spec: &GenSpec) -> Generated {
    let mut r = Rng(spec.seed ^ 0x7077_6172_7036); // "pwarp6": different sets per profile seed
    if spec.profile == Profile::Fw {
        r.0 = r.0.rotate_left(17);
    }
    let pool = pool(&mut r, spec.rules);
    let rules: Vec<Rule6> = (0..spec.rules)
        .map(|_| rule(&mut r, &pool, spec.profile))
        .collect();
    let mut text = String::with_capacity(spec.rules * 110);
    for x in &rules {
        let _ = writeln!(
            text,
            "@{}/{}\t{}/{}\t{} : {}\t{} : {}\t0x{:02x}/0x{:02x}",
            addr_text(x.src.addr),
            x.src.len,
            addr_text(x.dst.addr),
            x.dst.len,
            x.sp.0,
            x.sp.1,
            x.dp.0,
            x.dp.1,
            x.proto.0,
            x.proto.1
        );
    }
    let mut trace = String::with_capacity(spec.headers * 100);
    let mut misses = 0;
    let mut last: Option<String> = None;
    for _ in 0..spec.headers {
        // Locality: a header often repeats the one before (ClassBench's Pareto repeats).
        if let Some(l) = last.as_ref().filter(|_| r.below(5) == 0) {
            if l.ends_with("\t4294967295\n") {
                misses += 1;
            }
            trace.push_str(&l.clone());
            continue;
        }
        let line = if rules.is_empty() || r.unit() < spec.miss_frac {
            misses += 1;
            let miss = P6 {
                addr: u128::from(MISS_BLOCK) << 96,
                len: 32,
            };
            let (s, d) = (extend(&mut r, miss, 128), extend(&mut r, miss, 128));
            format!(
                "{}\t{}\t{}\t{}\t{}\t0\t4294967295\n",
                addr_text(s.addr),
                addr_text(d.addr),
                r.below(65536),
                r.below(65536),
                MISS_PROTO
            )
        } else {
            let i = r.below(rules.len() as u64) as usize;
            let x = &rules[i];
            let (s, d) = (extend(&mut r, x.src, 128), extend(&mut r, x.dst, 128));
            let proto = if x.proto.1 == 0 {
                [6u8, 17, 58, 132][r.below(4) as usize]
            } else {
                x.proto.0
            };
            let (sp, dp) = (in_range(&mut r, x.sp), in_range(&mut r, x.dp));
            format!(
                "{}\t{}\t{sp}\t{dp}\t{proto}\t0\t{i}\n",
                addr_text(s.addr),
                addr_text(d.addr)
            )
        };
        trace.push_str(&line);
        last = Some(line);
    }
    Generated {
        rules: text,
        trace,
        misses,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::classbench::{parse_rules, parse_trace};
    use crate::acl::{AclRuleSet, Family};
    use std::path::Path;

    fn spec(profile: Profile, seed: u64) -> GenSpec {
        GenSpec {
            profile,
            rules: 300,
            headers: 3000,
            miss_frac: 0.1,
            seed,
        }
    }

    #[test]
    fn deterministic_and_seed_dependent() {
        let a = generate(&spec(Profile::Acl, 1));
        let b = generate(&spec(Profile::Acl, 1));
        let c = generate(&spec(Profile::Acl, 2));
        let f = generate(&spec(Profile::Fw, 1));
        assert_eq!(a.rules, b.rules);
        assert_eq!(a.trace, b.trace);
        assert_ne!(a.rules, c.rules);
        assert_ne!(a.rules, f.rules);
    }

    #[test]
    fn parses_and_misses_match_nothing() {
        for p in [Profile::Acl, Profile::Fw] {
            let g = generate(&spec(p, 7));
            let rules = parse_rules(Path::new("gen"), &g.rules).unwrap();
            assert_eq!(rules.len(), 300);
            assert!(rules.iter().all(|r| r.family == Family::V6));
            let trace = parse_trace(Path::new("gen"), &g.trace).unwrap();
            assert_eq!(trace.len(), 3000);
            let set = AclRuleSet {
                rules,
                warnings: Vec::new(),
            };
            let mut miss_lines = 0;
            let mut hits_own = 0;
            for t in &trace {
                let m = set.classify_linear(&t.key);
                if t.filter == Some(u32::MAX) {
                    miss_lines += 1;
                    assert_eq!(m, None, "a miss header matched {:?}", t.key);
                } else {
                    let f = t.filter.unwrap() as usize;
                    // Made from rule f: it matches f or an earlier rule.
                    let m = m.expect("a header made from a rule matches");
                    assert!(m <= f);
                    hits_own += usize::from(m == f);
                }
            }
            assert_eq!(miss_lines, g.misses);
            // About 10% misses (plus repeats of them).
            assert!((150..=500).contains(&miss_lines), "{miss_lines} misses");
            // Rules overlap: some headers first match an earlier rule than their own.
            assert!(
                hits_own < 2700,
                "{p:?}: {hits_own} of 2700 matched their own rule"
            );
        }
    }

    #[test]
    fn address_text_is_full_form() {
        assert_eq!(
            addr_text(0x2001_0db8u128 << 96 | 1),
            "2001:0db8:0000:0000:0000:0000:0000:0001"
        );
        assert_eq!("acl".parse::<Profile>(), Ok(Profile::Acl));
        assert!("x".parse::<Profile>().is_err());
    }
}
