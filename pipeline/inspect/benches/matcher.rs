//! The prefilter's match sets on one core: the aho-corasick crate (its own choice of automaton,
//! and its DFA), the image walker (the CUDA walker's reference) and, with feature `hyperscan`,
//! Hyperscan block mode (set-only database), over the same patterns (ET Open fast patterns, one per active rule) and the same payloads
//! (tcpdump's L4 payloads and HTTP-like text, cut into 1460-byte and 64-byte payloads).
//!
//! `cargo bench -p pktwarp-inspect --features hyperscan --bench matcher` (docs/inspect.md).

#[path = "../tests/common/corpus.rs"]
mod corpus;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use flow_rules::input::require_data;
use pktwarp_inspect::matcher::cpu::AcMatcher;
use pktwarp_inspect::matcher::{CompileOptions, Image, MatchSet, PatternSet};

/// The benchmark thread's CPU time (CLOCK_THREAD_CPUTIME_ID), in ns: on a shared, loaded
/// machine wall time counts the other processes' turns on the core too; on an idle one the two
/// agree. Shown with criterion's wall-time units.
struct ThreadCpu(WallTime);

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the one timespec it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Measurement for ThreadCpu {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }

    fn end(&self, t0: u64) -> u64 {
        thread_cpu_ns().saturating_sub(t0)
    }

    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }

    fn zero(&self) -> u64 {
        0
    }

    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        self.0.formatter()
    }
}

fn inputs() -> (PatternSet, Vec<u8>) {
    let pats = corpus::etopen_fast_patterns(&require_data("ids/etopen-2019"));
    let mut set = PatternSet::new();
    for (b, nc) in &pats {
        set.add(b, *nc).expect("fast patterns are 1..=255 bytes");
    }
    let mut stream: Vec<u8> = corpus::tcpdump_payloads(&require_data("pcaps"), 1 << 20).concat();
    stream.extend(corpus::http_like(2000, 7).concat());
    (set, stream)
}

fn bench(c: &mut Criterion<ThreadCpu>) {
    let (set, stream) = inputs();
    let img = Image::compile(&set).expect("compile");
    let ac = AcMatcher::new(&set).expect("aho-corasick");
    let ac_dfa = AcMatcher::build(&set, true).expect("aho-corasick DFA");
    eprintln!(
        "matcher: {} patterns, {} states ({} dense), {} classes, image {:.1} MiB, stream {} bytes",
        set.len(),
        img.n_states(),
        img.n_dense(),
        img.n_classes(),
        img.size_bytes() as f64 / (1 << 20) as f64,
        stream.len()
    );
    #[cfg(feature = "hyperscan")]
    let mut hs =
        pktwarp_inspect::matcher::hyperscan::Hyperscan::new(&set, true).expect("hyperscan");
    for size in [1460usize, 64] {
        let payloads: Vec<&[u8]> = stream.chunks_exact(size).take((2 << 20) / size).collect();
        let bytes: usize = payloads.iter().map(|p| p.len()).sum();
        let mut g = c.benchmark_group(format!("matcher/{size}B"));
        g.throughput(Throughput::Bytes(bytes as u64));
        g.sample_size(20);
        let mut ms = MatchSet::new(set.len());
        g.bench_function("aho-corasick", |b| {
            b.iter(|| {
                let mut n = 0;
                for p in &payloads {
                    ms.clear();
                    ac.match_set_into(p, &mut ms);
                    n += ms.count();
                }
                n
            })
        });
        g.bench_function("aho-corasick-dfa", |b| {
            b.iter(|| {
                let mut n = 0;
                for p in &payloads {
                    ms.clear();
                    ac_dfa.match_set_into(p, &mut ms);
                    n += ms.count();
                }
                n
            })
        });
        g.bench_function("image", |b| {
            b.iter(|| {
                let mut n = 0;
                for p in &payloads {
                    ms.clear();
                    img.match_set_into(p, &mut ms);
                    n += ms.count();
                }
                n
            })
        });
        #[cfg(feature = "hyperscan")]
        g.bench_function("hyperscan", |b| {
            b.iter(|| {
                let mut n = 0;
                for p in &payloads {
                    ms.clear();
                    hs.match_set_into(p, &mut ms).expect("hs_scan");
                    n += ms.count();
                }
                n
            })
        });
        g.finish();
    }
}

/// The image walker by the budget of full rows (the rest sparse, through failure links), on
/// the 1460-byte payloads: what `CompileOptions::dense_budget_bytes`' default rests on.
fn dense_budget(c: &mut Criterion<ThreadCpu>) {
    let (set, stream) = inputs();
    let payloads: Vec<&[u8]> = stream.chunks_exact(1460).collect();
    let bytes: usize = payloads.iter().map(|p| p.len()).sum();
    let mut g = c.benchmark_group("matcher/dense-budget/1460B");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.sample_size(20);
    let mut ms = MatchSet::new(set.len());
    for kib in [0usize, 512, 2048, 8192, 32768] {
        let opts = CompileOptions {
            dense_budget_bytes: kib << 10,
        };
        let img = Image::compile_with(&set, &opts).expect("compile");
        g.bench_function(format!("{kib}KiB-{}-dense", img.n_dense()), |b| {
            b.iter(|| {
                let mut n = 0;
                for p in &payloads {
                    ms.clear();
                    img.match_set_into(p, &mut ms);
                    n += ms.count();
                }
                n
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpu(WallTime));
    targets = bench, dense_budget
}
criterion_main!(benches);
