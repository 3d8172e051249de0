//! Throughput of the compiled software steering against the reference first-match scan
//! (`SteerRule::matches` over every rule), on the same keys in the same run.
//!
//! Ignored by default: it is a measurement, meaningful only in release builds:
//!
//!     cargo test --release -p flow-rules --test steering_bench -- --ignored --nocapture
//!
//! It still asserts that both give the same answer for every key.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Instant;

use flow_rules::steering::{
    Action, GtpuItem, Ipv4Item, Ipv4Prefix, Item, PortRange, PortsItem, RssAction, RssHash,
    SteerKey, SteerMatcher, SteerRule, SteerRuleSet, TUNNEL_GTPU, TUNNEL_NONE,
};

/// A rule set of `n` rules shaped like the shipped mobile-core file: per-TEID GTP-U rules,
/// per-prefix rules, per-port UDP/TCP rules and a catch-all RSS rule at the end.
fn rules(n: usize) -> Vec<SteerRule> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n.saturating_sub(1) {
        let pattern = match i % 4 {
            0 => vec![
                Item::Udp(PortsItem {
                    src_port: None,
                    dst_port: Some(PortRange::single(2152)),
                }),
                Item::GtpU(GtpuItem {
                    teid: Some(0x1000 + i as u32),
                }),
            ],
            1 => vec![Item::Ipv4(Ipv4Item {
                dst: Some(Ipv4Prefix {
                    addr: Ipv4Addr::new(10, (i % 250) as u8, 0, 0),
                    len: 16,
                }),
                ..Ipv4Item::default()
            })],
            2 => vec![Item::Udp(PortsItem {
                src_port: None,
                dst_port: Some(PortRange::single(5000 + i as u16)),
            })],
            _ => vec![Item::Tcp(PortsItem {
                src_port: Some(PortRange {
                    lo: 1024,
                    hi: 65535,
                }),
                dst_port: Some(PortRange {
                    lo: 8000 + i as u16,
                    hi: 8001 + i as u16,
                }),
            })],
        };
        out.push(SteerRule {
            name: None,
            pattern,
            actions: vec![Action::Queue((i % 16) as u16), Action::Mark(i as u32)],
        });
    }
    out.push(SteerRule {
        name: None,
        pattern: vec![Item::Ipv4(Ipv4Item::default())],
        actions: vec![Action::Rss(RssAction {
            queues: (0..16).collect(),
            hash: RssHash::DEFAULT,
        })],
    });
    out
}

/// Traffic: GTP-U (some TEIDs ruled), UDP and TCP to ruled and unruled ports, non-IP frames.
fn keys(count: usize, n_rules: usize) -> Vec<SteerKey> {
    let mut s = 0x1234_5678_9abc_def0u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..count)
        .map(|_| {
            let r = next();
            let pick = r % 10;
            let span = n_rules as u64 + 8;
            let mut k = SteerKey {
                ether_type: 0x0800,
                ip_version: 4,
                ip_proto: 17,
                l4: true,
                src_ip: [0xc000_0200 | (r >> 8) as u32 & 0xff, 0, 0, 0],
                dst_ip: [
                    u32::from(Ipv4Addr::new(
                        if pick < 2 { 10 } else { 172 },
                        ((r >> 16) % 260) as u8,
                        1,
                        2,
                    )),
                    0,
                    0,
                    0,
                ],
                src_port: 1024 + (r >> 24) as u16 % 60000,
                dst_port: 53,
                tunnel: TUNNEL_NONE,
                ..SteerKey::default()
            };
            match pick {
                0..=3 => {
                    k.dst_port = 2152;
                    k.tunnel = TUNNEL_GTPU;
                    k.tunnel_id = 0x1000 + ((r >> 32) % span) as u32;
                }
                4 | 5 => k.dst_port = 5000 + ((r >> 32) % span) as u16,
                6 | 7 => {
                    k.ip_proto = 6;
                    k.dst_port = 8000 + ((r >> 32) % span) as u16;
                }
                8 => {
                    k.ether_type = 0x86dd;
                    k.ip_version = 6;
                }
                _ => {
                    k.ether_type = 0x0806;
                    k.ip_version = 0;
                    k.l4 = false;
                }
            }
            k
        })
        .collect()
}

/// Frames per measurement (`STEER_BENCH_FRAMES`, default 20M / rules): lower it to run under
/// callgrind, whose instruction counts do not depend on the load of a shared machine.
fn budget() -> usize {
    std::env::var("STEER_BENCH_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000_000)
}

fn mpps(frames: usize, secs: f64) -> f64 {
    frames as f64 / secs / 1e6
}

/// Separate functions so that callgrind attributes instructions to each side.
#[inline(never)]
fn run_compiled(m: &SteerMatcher, keys: &[SteerKey], rounds: usize) -> u64 {
    let mut acc = 0u64;
    for _ in 0..rounds {
        for k in keys {
            let d = m.decide(black_box(k));
            acc = acc.wrapping_add(u64::from(d.rule.unwrap_or(u32::MAX)));
        }
    }
    acc
}

#[inline(never)]
fn run_reference(rules: &[SteerRule], keys: &[SteerKey], rounds: usize) -> u64 {
    let mut acc = 0u64;
    for _ in 0..rounds {
        for k in keys {
            let i = rules.iter().position(|r| r.matches(black_box(k)));
            acc = acc.wrapping_add(i.map_or(u64::from(u32::MAX), |i| i as u64));
        }
    }
    acc
}

#[test]
#[ignore = "measurement: run in release with --ignored --nocapture"]
fn steering_matcher_throughput() {
    let mut report = Vec::new();
    // `STEER_BENCH_RULES=30` measures one size only (for callgrind).
    let only: Option<usize> = std::env::var("STEER_BENCH_RULES")
        .ok()
        .and_then(|v| v.parse().ok());
    for n in [10usize, 30, 100, 300] {
        if only.is_some_and(|o| o != n) {
            continue;
        }
        let rules = rules(n);
        let m = SteerMatcher::new(&rules);
        let keys = keys(1 << 14, n);
        // Same answers first.
        for k in &keys {
            let want = rules.iter().position(|r| r.matches(k)).map(|i| i as u32);
            assert_eq!(m.decide(k).rule, want, "{k:?}");
        }
        let rounds = (budget() / (n + 10)).max(1 << 14) / keys.len() + 1;
        let frames = rounds * keys.len();

        let t = Instant::now();
        let acc = run_compiled(&m, &keys, rounds);
        let compiled = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let acc2 = run_reference(&rules, &keys, rounds);
        let naive = t.elapsed().as_secs_f64();
        assert_eq!(acc, acc2, "compiled and reference disagree");

        let (c, r) = (mpps(frames, compiled), mpps(frames, naive));
        report.push(format!(
            "{n:>4} rules: compiled {c:8.1} Mpps ({:6.1} ns/frame), reference scan {r:8.1} Mpps, ratio {:5.1}x",
            compiled * 1e9 / frames as f64,
            c / r
        ));
    }
    // The shipped example file too (unless one size was asked for).
    if only.is_some() {
        report.iter().for_each(|l| println!("{l}"));
        return;
    }
    // STEER_BENCH_FILE: where the example file is when the binary runs on another machine.
    let path = std::env::var("STEER_BENCH_FILE").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../configs/rules/mobile-core.steering.yaml"
        )
        .to_string()
    });
    let set = SteerRuleSet::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let m = set.compile();
    let keys = keys(1 << 14, set.rules.len());
    let rounds = budget() / 100_000 + 1;
    let t = Instant::now();
    black_box(run_compiled(&m, &keys, rounds));
    let secs = t.elapsed().as_secs_f64();
    report.push(format!(
        "mobile-core.steering.yaml ({} rules): compiled {:.1} Mpps",
        set.rules.len(),
        mpps(rounds * keys.len(), secs)
    ));
    for line in report {
        println!("{line}");
    }
}
