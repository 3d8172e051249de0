//! The flow table's operations one at a time on one core, shaped like DPDK's hash_perf_autotest
//! (`dpdk-test`) so that scripts/bench-flow.sh can print the two side by side: a table of 2^19
//! entries (rte_hash's MAX_ENTRIES), filled to 75% with keys chosen so that every one fits its
//! bucket (as the autotest's "all elements in primary location"), keys in hand (our key is 40
//! bytes, one of the autotest's key sizes), then:
//! - `add`: every key applied to an empty table (a UDP flow created);
//! - `lookup_hit`: [`FlowTable::lookup`] of the added keys in random order, 5 passes;
//! - `lookup_miss`: the same with keys not in the table;
//! - `update`: [`FlowTable::apply_packet`] of the added keys in random order (the flow found,
//!   state and counters written), 5 passes;
//! - `update_burst`: the same through [`FlowTable::apply_packets`], 32 packets a call.
//!
//! Each line: `op <name> <ns per op> <M ops/s>`; ROUNDS (env, default 3) rounds, the median.
//! `cargo bench -p pktwarp-flow --bench flow_ops`.

use std::hint::black_box;
use std::time::Instant;

use pktwarp_flow::key::{Kind, Packet, NO_WSCALE};
use pktwarp_flow::testgen::Rng;
use pktwarp_flow::{FlowKey, FlowResult, FlowTable, Timeouts, BUCKET_ENTRIES};

const ENTRIES: u64 = 1 << 19;
const LOAD_PCT: u64 = 75;
const PASSES: usize = 5;
const BURST: usize = 32;

/// A UDP packet of flow `i` (client 10.x.y.z:port -> 192.0.2.1:53), or of a flow of another
/// server when `miss` (never added).
fn packet(i: u32, miss: bool) -> Packet {
    let server = if miss { 0xc000_0202 } else { 0xc000_0201 };
    let key = FlowKey {
        addr: [[0x0a00_0000 | (i >> 8), 0, 0, 0], [server, 0, 0, 0]],
        port: [1024 + (i & 0xff) as u16, 53],
        proto: 17,
        ip_version: 4,
        ..FlowKey::default()
    };
    Packet {
        key,
        from_a: true,
        kind: Kind::Udp,
        tcp_flags: 0,
        ip_len: 60,
        seq: 0,
        ack: 0,
        win: 0,
        seg_len: 0,
        wscale: NO_WSCALE,
    }
}

fn new_table() -> FlowTable {
    FlowTable::new(ENTRIES, Timeouts::default()).expect("table")
}

/// The keys to add: in order, skipping a key whose bucket is already full (no evictions).
fn keys_that_fit() -> Vec<Packet> {
    let t = new_table();
    let want = (ENTRIES * LOAD_PCT / 100) as usize;
    let mut fill = vec![0u8; ENTRIES as usize / BUCKET_ENTRIES];
    let mut out = Vec::with_capacity(want);
    let mut i = 0u32;
    while out.len() < want {
        let p = packet(i, false);
        i += 1;
        let b = t.bucket_of(&p.key) as usize;
        if (fill[b] as usize) < BUCKET_ENTRIES {
            fill[b] += 1;
            out.push(p);
        }
    }
    out
}

fn shuffle(v: &mut [Packet], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i as u64 + 1) as usize);
    }
}

/// Nanoseconds per operation of `f` run over `n` operations.
fn time(n: usize, f: impl FnOnce()) -> f64 {
    let t0 = Instant::now();
    f();
    t0.elapsed().as_nanos() as f64 / n as f64
}

fn round(adds: &[Packet], hits: &[Packet], misses: &[Packet]) -> [(&'static str, f64); 5] {
    let mut t = new_table();
    let add = time(adds.len(), || {
        for p in adds {
            black_box(t.apply_packet(black_box(p), 1_000));
        }
    });
    assert_eq!(t.counters().created as usize, adds.len(), "every key fits");
    let n = hits.len() * PASSES;
    let lookup_hit = time(n, || {
        let mut found = 0usize;
        for _ in 0..PASSES {
            for p in hits {
                found += t.lookup(black_box(&p.key), 2_000).is_some() as usize;
            }
        }
        assert_eq!(found, n, "every added key is found");
    });
    let lookup_miss = time(n, || {
        let mut found = 0usize;
        for _ in 0..PASSES {
            for p in misses {
                found += t.lookup(black_box(&p.key), 2_000).is_some() as usize;
            }
        }
        assert_eq!(found, 0, "no missing key is found");
    });
    let mut now = 3_000;
    let update = time(n, || {
        for _ in 0..PASSES {
            for p in hits {
                now += 1;
                black_box(t.apply_packet(black_box(p), now));
            }
        }
    });
    let mut out = [FlowResult::default(); BURST];
    let update_burst = time(n, || {
        for _ in 0..PASSES {
            for c in hits.chunks_exact(BURST) {
                now += 1;
                t.apply_packets(black_box(c), now, &mut out[..c.len()])
                    .expect("lengths");
                black_box(&out);
            }
        }
    });
    assert_eq!(
        t.counters().created as usize,
        adds.len(),
        "updates create nothing"
    );
    [
        ("add", add),
        ("lookup_hit", lookup_hit),
        ("lookup_miss", lookup_miss),
        ("update", update),
        ("update_burst", update_burst),
    ]
}

fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let adds = keys_that_fit();
    let mut rng = Rng(7);
    let mut hits = adds.clone();
    shuffle(&mut hits, &mut rng);
    let misses: Vec<Packet> = (0..adds.len() as u32).map(|i| packet(i, true)).collect();
    eprintln!(
        "flow_ops: {} entries, {} keys ({LOAD_PCT}%), key {} bytes, {rounds} rounds",
        ENTRIES,
        adds.len(),
        std::mem::size_of::<FlowKey>()
    );
    let all: Vec<_> = (0..rounds).map(|_| round(&adds, &hits, &misses)).collect();
    for k in 0..all[0].len() {
        let mut v: Vec<f64> = all.iter().map(|r| r[k].1).collect();
        v.sort_by(f64::total_cmp);
        let ns = v[v.len() / 2];
        println!("op {} {:.1} {:.3}", all[0][k].0, ns, 1e3 / ns);
    }
}
