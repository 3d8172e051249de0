//! Flow table lookups + updates per second on one core: a table of 1M entries (128 MiB) filled
//! to 50% and 90% with UDP flows, then frames of random existing flows applied (found, state
//! and counters updated), 1024 per iteration; and the same on a 4096-entry table (512 KiB, in
//! cache) to separate the work from the memory misses. `cargo bench -p pktwarp-flow -- --quick`.

use std::hint::black_box;
use std::net::IpAddr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pktwarp_core::meta::PacketMeta;
use pktwarp_flow::testgen::{udp_frame, Rng};
use pktwarp_flow::{FlowResult, FlowTable, Timeouts};
use pktwarp_kernels::host::ffi;

const BATCH: usize = 1024;

fn parse(frame: &[u8]) -> PacketMeta {
    let mut m = PacketMeta::default();
    // SAFETY: the frame pointer and length describe a live slice; `m` is the 144-byte
    // pw_packet_meta pw_host_parse writes.
    unsafe {
        ffi::pw_host_parse(
            frame.as_ptr(),
            frame.len() as u32,
            &mut m as *mut _ as *mut u8,
        )
    };
    m
}

/// Flow i's frame (client i -> a server).
fn frame(i: u32) -> Vec<u8> {
    let c: IpAddr = (0x0a00_0000 | (i >> 8)).to_be_bytes().into();
    udp_frame(
        None,
        (c, 1024 + (i & 0xff) as u16),
        ("192.0.2.1".parse().unwrap(), 53),
        18,
    )
}

fn lookups(c: &mut Criterion) {
    let mut g = c.benchmark_group("flow_table");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, entries, load_pct) in [
        ("1M", 1u64 << 20, 50u64),
        ("1M", 1 << 20, 90),
        ("4K", 4096, 50),
    ] {
        let mut t = FlowTable::new(entries, Timeouts::default()).unwrap();
        let flows = (entries * load_pct / 100) as u32;
        for i in 0..flows {
            let f = frame(i);
            t.apply(&parse(&f), &f, 1_000);
        }
        let held = t.len();
        eprintln!(
            "flow_table/{name}_{load_pct}pct: {held} flows held of {flows} offered ({:.1}% of {entries}), {} early evictions",
            100.0 * held as f64 / entries as f64,
            t.counters().early_evicted
        );
        let mut rng = Rng(load_pct);
        let pool: Vec<(Vec<u8>, PacketMeta)> = (0..65536)
            .map(|_| {
                let f = frame(rng.below(flows as u64) as u32);
                let m = parse(&f);
                (f, m)
            })
            .collect();
        let mut now = 2_000u64;
        let mut next = 0usize;
        let mut out = [FlowResult::default(); BATCH];
        g.bench_function(format!("{name}_load_{load_pct}pct"), |b| {
            b.iter(|| {
                for r in out.iter_mut() {
                    let (f, m) = &pool[next];
                    next = (next + 1) & 65535;
                    now += 1;
                    *r = t.apply(black_box(m), black_box(f), now);
                }
                black_box(&out);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, lookups);
criterion_main!(benches);
