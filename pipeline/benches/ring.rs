//! SPSC ring throughput: one thread (push then pop, single and batched) and two threads
//! (producer -> consumer hand-off of 1M items), against the standard library's bounded channel
//! (`std::sync::mpsc::sync_channel`) measured in the same run.

use std::hint::black_box;
use std::sync::mpsc::sync_channel;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pipeline::internal::ring::ring;

/// Waiting on a full or empty ring: spin briefly, then give the core away (on a machine with
/// fewer free cores than threads, pure spinning starves the other side).
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

const ITEMS: u64 = 1 << 20;
const CAP: usize = 1024;

fn single_thread(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring_1thread");
    g.throughput(Throughput::Elements(CAP as u64));
    let (mut p, mut q) = ring::<u64>(CAP);
    g.bench_function("push_pop", |b| {
        b.iter(|| {
            for i in 0..CAP as u64 {
                let _ = p.push(black_box(i));
            }
            while let Some(v) = q.pop() {
                black_box(v);
            }
        })
    });
    let mut items = Vec::with_capacity(32);
    let mut out = Vec::with_capacity(32);
    g.bench_function("batch32", |b| {
        b.iter(|| {
            for k in 0..(CAP / 32) as u64 {
                items.extend((0..32).map(|i| k * 32 + i));
                p.push_batch(&mut items);
            }
            while q.pop_batch(&mut out, 32) > 0 {
                black_box(&out);
                out.clear();
            }
        })
    });
    g.finish();
}

fn two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("spsc_2threads");
    g.throughput(Throughput::Elements(ITEMS));
    g.sample_size(10);
    g.bench_function("pktwarp_ring_batch32", |b| {
        b.iter(|| {
            let (mut p, mut q) = ring::<u64>(CAP);
            let t = std::thread::spawn(move || {
                let mut batch = Vec::with_capacity(32);
                let mut next = 0;
                while next < ITEMS {
                    if batch.is_empty() {
                        batch.extend(next..(next + 32).min(ITEMS));
                        next += batch.len() as u64;
                    }
                    let mut spins = 0;
                    while !batch.is_empty() {
                        if p.push_batch(&mut batch) == 0 {
                            backoff(&mut spins);
                        }
                    }
                }
            });
            let mut out = Vec::with_capacity(32);
            let mut sum = 0u64;
            let mut got = 0;
            let mut spins = 0;
            while got < ITEMS {
                out.clear();
                let n = q.pop_batch(&mut out, 32);
                got += n as u64;
                sum = sum.wrapping_add(out.iter().sum::<u64>());
                if n == 0 {
                    backoff(&mut spins);
                } else {
                    spins = 0;
                }
            }
            t.join().unwrap();
            black_box(sum)
        })
    });
    g.bench_function("pktwarp_ring_single", |b| {
        b.iter(|| {
            let (mut p, mut q) = ring::<u64>(CAP);
            let t = std::thread::spawn(move || {
                for i in 0..ITEMS {
                    let mut v = i;
                    let mut spins = 0;
                    while let Err(back) = p.push(v) {
                        v = back;
                        backoff(&mut spins);
                    }
                }
            });
            let mut sum = 0u64;
            let mut got = 0;
            let mut spins = 0;
            while got < ITEMS {
                match q.pop() {
                    Some(v) => {
                        sum = sum.wrapping_add(v);
                        got += 1;
                        spins = 0;
                    }
                    None => backoff(&mut spins),
                }
            }
            t.join().unwrap();
            black_box(sum)
        })
    });
    g.bench_function("std_sync_channel", |b| {
        b.iter(|| {
            let (tx, rx) = sync_channel::<u64>(CAP);
            let t = std::thread::spawn(move || {
                for i in 0..ITEMS {
                    if tx.send(i).is_err() {
                        break;
                    }
                }
            });
            let sum = rx.iter().fold(0u64, |s, v| s.wrapping_add(v));
            t.join().unwrap();
            black_box(sum)
        })
    });
    g.finish();
}

criterion_group!(benches, single_thread, two_threads);
criterion_main!(benches);
