//! Route LPM lookups per second on one core, on tables shaped like DPDK's
//! `lpm_perf_autotest` / `lpm6_perf_autotest` (IPv4: 1,076,806 prefixes with the BGP prefix-length
//! distribution that test uses, uniformly random destinations, so most lookups miss the caches
//! as in that test; IPv6: 20,000 prefixes mostly /48 and /32-/47 with random destinations, and
//! `lpm6 hit`: 1000 prefixes, every destination inside one, as DPDK's IPv6 test looks up).
//!
//! `cargo bench -p flow-rules --bench route` runs the criterion groups. With
//! `PW_LPM_PLAIN=1` it prints one line per measurement instead (`lpm4 single: N lookups/s`),
//! for `scripts/bench-lpm.sh`, which runs DPDK's tests in the same run and prints the ratio.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, Criterion, Throughput};
use flow_rules::route::{Lpm4, Lpm6};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Prefixes per length in DPDK's large route table (test_lpm_perf.c prints the same table).
const V4_COUNTS: [u32; 33] = [
    0, 0, 0, 1, 0, 3, 2, 4, 201, 37, 55, 97, 381, 775, 2104, 3712, 69319, 12983, 23667, 69068,
    62354, 48531, 72355, 85427, 583900, 2654, 5650, 6467, 7127, 12936, 5999, 13, 984,
];

fn v4_table() -> Lpm4 {
    let mut rng = Rng(1);
    let mut seen = std::collections::HashSet::new();
    let mut routes = Vec::new();
    for (len, n) in V4_COUNTS.iter().enumerate() {
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        let mut made = 0;
        // Short lengths have fewer distinct prefixes than asked for: stop trying after a while.
        let mut tries = 0;
        while made < *n && tries < 20 * n {
            tries += 1;
            let a = rng.next() as u32 & mask;
            if seen.insert((a, len)) {
                routes.push((u128::from(a), len as u8, routes.len() as u32 % 256));
                made += 1;
            }
        }
    }
    Lpm4::build(&routes).expect("table")
}

fn v6_table() -> Lpm6 {
    v6_routes(20_000).0
}

/// `n` IPv6 routes (mostly /48 and /32-/47) and, for each, an address inside it.
fn v6_routes(n: u32) -> (Lpm6, Vec<u128>) {
    let mut rng = Rng(2);
    let lens = [
        (48u8, 50u32),
        (32, 15),
        (40, 8),
        (44, 10),
        (29, 5),
        (56, 6),
        (64, 4),
        (128, 2),
    ];
    let total: u32 = lens.iter().map(|l| l.1).sum();
    let mut routes = Vec::new();
    let mut inside = Vec::new();
    for i in 0..n {
        let mut x = i % total;
        let len = lens
            .iter()
            .find(|(_, w)| {
                let hit = x < *w;
                x = x.saturating_sub(*w);
                hit
            })
            .map_or(48, |l| l.0);
        let a = (u128::from(rng.next()) << 64 | u128::from(rng.next())) >> 3 | (1u128 << 125);
        let mask = u128::MAX << (128 - u32::from(len));
        routes.push((a & mask, len, i % 256));
        inside.push((a & mask) | (u128::from(rng.next()) & !mask));
    }
    (Lpm6::build(&routes).expect("table"), inside)
}

fn v4_addrs(n: usize) -> Vec<u32> {
    let mut rng = Rng(3);
    (0..n).map(|_| rng.next() as u32).collect()
}

fn v6_addrs(n: usize) -> Vec<u128> {
    let mut rng = Rng(4);
    // Half inside 2000::/3, where the routes are.
    (0..n)
        .map(|i| {
            let a = u128::from(rng.next()) << 64 | u128::from(rng.next());
            if i % 2 == 0 {
                a >> 3 | (1u128 << 125)
            } else {
                a
            }
        })
        .collect()
}

const BATCH: usize = 1 << 16;

fn bench(c: &mut Criterion) {
    let t4 = v4_table();
    let a4 = v4_addrs(BATCH);
    let mut g = c.benchmark_group("lpm4");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("single", |b| {
        b.iter(|| {
            let mut hits = 0u32;
            for a in &a4 {
                hits += u32::from(t4.lookup_v4(black_box(*a)).is_some());
            }
            hits
        })
    });
    let mut out = vec![0u32; BATCH];
    g.bench_function("bulk", |b| {
        b.iter(|| t4.lookup_v4_bulk(black_box(&a4), &mut out))
    });
    g.finish();
    let t6 = v6_table();
    let a6 = v6_addrs(BATCH);
    let mut g = c.benchmark_group("lpm6");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("single", |b| {
        b.iter(|| {
            let mut hits = 0u32;
            for a in &a6 {
                hits += u32::from(t6.lookup(black_box(*a)).is_some());
            }
            hits
        })
    });
    g.finish();
}

/// Lookups per second over `rounds` passes of the address list (best of 5).
fn rate(rounds: usize, n: usize, mut pass: impl FnMut() -> u32) -> f64 {
    let mut best = 0f64;
    for _ in 0..5 {
        let t = Instant::now();
        let mut s = 0u32;
        for _ in 0..rounds {
            s = s.wrapping_add(pass());
        }
        black_box(s);
        best = best.max((rounds * n) as f64 / t.elapsed().as_secs_f64());
    }
    best
}

fn plain() {
    let t = Instant::now();
    let t4 = v4_table();
    eprintln!(
        "lpm4 table: {} groups, built in {:.2?}",
        t4.groups(),
        t.elapsed()
    );
    let a4 = v4_addrs(BATCH);
    let r = rate(64, BATCH, || {
        a4.iter()
            .map(|a| u32::from(t4.lookup_v4(*a).is_some()))
            .sum()
    });
    println!("lpm4 single: {r:.0} lookups/s");
    let mut out = vec![0u32; BATCH];
    let r = rate(64, BATCH, || {
        t4.lookup_v4_bulk(&a4, &mut out);
        out[0]
    });
    println!("lpm4 bulk: {r:.0} lookups/s");
    let t6 = v6_table();
    let a6 = v6_addrs(BATCH);
    let r = rate(32, BATCH, || {
        a6.iter().map(|a| u32::from(t6.lookup(*a).is_some())).sum()
    });
    println!("lpm6 single: {r:.0} lookups/s");
    // As DPDK's lpm6_perf_autotest: 1000 routes, every lookup a hit.
    let (t6, inside) = v6_routes(1000);
    let a6: Vec<u128> = (0..BATCH)
        .map(|i| inside[(i * 7919) % inside.len()])
        .collect();
    let r = rate(32, BATCH, || {
        a6.iter().map(|a| u32::from(t6.lookup(*a).is_some())).sum()
    });
    println!("lpm6 hit: {r:.0} lookups/s");
}

criterion_group!(benches, bench);

fn main() {
    if std::env::var_os("PW_LPM_PLAIN").is_some() {
        plain();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
