//! ClassBench-like IPv4 rule sets and header traces, generated from a seed (no external data),
//! in the ClassBench formats `dpdk-test-acl` reads (rules `@a.b.c.d/len ...`, trace addresses
//! as decimal numbers), so rte_acl's answers can be had for them in a test: the generated
//! counterpart of the shared ClassBench sets (acl1, fw1), which need the external corpus.
//!
//! The shape is [`gen6`](super::gen6)'s with IPv4 addresses: a nested prefix pool (address
//! blocks, sites /16-/24 under them, subnets /24-/28 under sites), the same per-profile port
//! and protocol mixes (ICMP for ICMPv6), headers made from a rule (a point inside all its
//! fields) or misses from [`MISS_BLOCK`] with protocol [`MISS_PROTO`], which no rule can match
//! (no rule has both addresses and the protocol wildcard). Deterministic for a given
//! (profile, rules, seed): the same SplitMix64 as gen6.

use super::gen6::{in_range, ports, GenSpec, Generated, Profile, Rng, ACL_MIX, FW_MIX};
use std::fmt::Write;

/// Addresses of miss headers: 240.0.0.0/8 (reserved; the pool never uses it).
pub const MISS_BLOCK: u8 = 240;
/// Protocol of miss headers (unassigned by IANA; no generated rule names it).
pub const MISS_PROTO: u8 = 253;

/// A 32-bit prefix (bits past `len` zero).
#[derive(Clone, Copy)]
struct P4 {
    addr: u32,
    len: u8,
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

/// `p` extended to `len` bits with random bits below its own.
fn extend(r: &mut Rng, p: P4, len: u8) -> P4 {
    let len = len.max(p.len);
    let free = mask(len) & !mask(p.len);
    P4 {
        addr: p.addr | (r.next() as u32 & free),
        len,
    }
}

struct Pool {
    sites: Vec<P4>,
    subnets: Vec<P4>,
}

fn pool(r: &mut Rng, rules: usize) -> Pool {
    // 10/8, 172.16/12, 192.168/16 and 64/2 (public-like), none overlapping MISS_BLOCK.
    let blocks = [
        (0x0a00_0000u32, 8u8),
        (0xac10_0000, 12),
        (0xc0a8_0000, 16),
        (0x4000_0000, 2),
    ];
    let nsites = (rules as f64).sqrt() as usize / 2 + 4;
    let sites: Vec<P4> = (0..nsites)
        .map(|_| {
            let (a, l) = blocks[r.below(blocks.len() as u64) as usize];
            let len = [16u8, 16, 20, 22, 24][r.below(5) as usize];
            extend(r, P4 { addr: a, len: l }, len)
        })
        .collect();
    let subnets = (0..nsites * 8)
        .map(|_| {
            let s = sites[r.below(sites.len() as u64) as usize];
            let len = [24u8, 26, 28, 28][r.below(4) as usize];
            extend(r, s, len)
        })
        .collect();
    Pool { sites, subnets }
}

/// One address field of a rule: wildcard, a site, a subnet, a host (/32) or a short range
/// (/27-/31).
fn address(r: &mut Rng, pool: &Pool, weights: &[u32; 5]) -> P4 {
    let pick = |r: &mut Rng, v: &[P4]| v[r.below(v.len() as u64) as usize];
    match r.pick(weights) {
        0 => P4 { addr: 0, len: 0 },
        1 => pick(r, &pool.sites),
        2 => pick(r, &pool.subnets),
        3 => {
            let s = pick(r, &pool.subnets);
            extend(r, s, 32)
        }
        _ => {
            let s = pick(r, &pool.subnets);
            let len = [27u8, 29, 30, 31][r.below(4) as usize];
            extend(r, s, len)
        }
    }
}

struct Rule4 {
    src: P4,
    dst: P4,
    sp: (u16, u16),
    dp: (u16, u16),
    /// (value, mask)
    proto: (u8, u8),
}

fn rule(r: &mut Rng, pool: &Pool, profile: Profile) -> Rule4 {
    let mix = match profile {
        Profile::Acl => ACL_MIX,
        Profile::Fw => FW_MIX,
    };
    let mut src = address(r, pool, &mix.src);
    let dst = address(r, pool, &mix.dst);
    let proto = match r.pick(&mix.proto) {
        0 => (6, 0xFF),
        1 => (17, 0xFF),
        2 => (1, 0xFF),
        _ => (0, 0),
    };
    // A rule with both addresses and the protocol wildcard would match the miss headers.
    if src.len == 0 && dst.len == 0 && proto.1 == 0 {
        src = pool.sites[r.below(pool.sites.len() as u64) as usize];
    }
    let (sp, dp) = if proto.0 == 1 {
        ((0, 65535), (0, 65535))
    } else {
        (ports(r, &mix.sport), ports(r, &mix.dport))
    };
    Rule4 {
        src,
        dst,
        sp,
        dp,
        proto,
    }
}

/// Generates a rule set and trace (see the module docs). Trace lines are
/// `src dst sport dport proto 0 filter` with decimal addresses; filter is the 0-based rule a
/// header was made from, 4294967295 for a miss.
pub fn generate(spec: &GenSpec) -> Generated {
    // "pwarp4": not the IPv6 sets' stream for the same seed.
    let mut r = Rng(spec.seed ^ 0x7077_6172_7034);
    if spec.profile == Profile::Fw {
        r.0 = r.0.rotate_left(17);
    }
    let pool = pool(&mut r, spec.rules);
    let rules: Vec<Rule4> = (0..spec.rules)
        .map(|_| rule(&mut r, &pool, spec.profile))
        .collect();
    let mut text = String::with_capacity(spec.rules * 64);
    for x in &rules {
        let _ = writeln!(
            text,
            "@{}/{}\t{}/{}\t{} : {}\t{} : {}\t0x{:02x}/0x{:02x}",
            std::net::Ipv4Addr::from(x.src.addr),
            x.src.len,
            std::net::Ipv4Addr::from(x.dst.addr),
            x.dst.len,
            x.sp.0,
            x.sp.1,
            x.dp.0,
            x.dp.1,
            x.proto.0,
            x.proto.1
        );
    }
    let mut trace = String::with_capacity(spec.headers * 40);
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
            let miss = P4 {
                addr: u32::from(MISS_BLOCK) << 24,
                len: 8,
            };
            let (s, d) = (extend(&mut r, miss, 32), extend(&mut r, miss, 32));
            format!(
                "{}\t{}\t{}\t{}\t{MISS_PROTO}\t0\t4294967295\n",
                s.addr,
                d.addr,
                r.below(65536),
                r.below(65536),
            )
        } else {
            let i = r.below(rules.len() as u64) as usize;
            let x = &rules[i];
            let (s, d) = (extend(&mut r, x.src, 32), extend(&mut r, x.dst, 32));
            let proto = if x.proto.1 == 0 {
                [6u8, 17, 1, 132][r.below(4) as usize]
            } else {
                x.proto.0
            };
            let (sp, dp) = (in_range(&mut r, x.sp), in_range(&mut r, x.dp));
            format!("{}\t{}\t{sp}\t{dp}\t{proto}\t0\t{i}\n", s.addr, d.addr)
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
        assert_eq!((&a.rules, &a.trace), (&b.rules, &b.trace));
        assert_ne!(a.rules, c.rules);
        assert_ne!(a.rules, f.rules);
    }

    #[test]
    fn parses_as_ipv4_and_misses_match_nothing() {
        for p in [Profile::Acl, Profile::Fw] {
            let g = generate(&spec(p, 7));
            let rules = parse_rules(Path::new("gen"), &g.rules).unwrap();
            assert_eq!(rules.len(), 300);
            assert!(rules.iter().all(|r| r.family == Family::V4));
            let trace = parse_trace(Path::new("gen"), &g.trace).unwrap();
            assert_eq!(trace.len(), 3000);
            let set = AclRuleSet {
                rules,
                warnings: Vec::new(),
            };
            let (mut miss_lines, mut hits_own) = (0, 0);
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
            assert!((150..=500).contains(&miss_lines), "{miss_lines} misses");
            // Rules overlap: some headers first match an earlier rule than their own.
            assert!(hits_own < 2700, "{p:?}: {hits_own} of 2700 own");
        }
    }
}
