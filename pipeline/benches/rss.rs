//! RSS and generator hot paths against named peers measured in the same run:
//! - Toeplitz over the IPv4 4-tuple: per-position tables vs the bit-by-bit definition;
//! - building one 64-byte Ethernet/IPv4/TCP frame: `gen::write_frame` vs etherparse's
//!   `PacketBuilder` (both compute the IPv4 and TCP checksums);
//! - `GenRx` bursts of 32 frames (random flows, IMIX).

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use etherparse::PacketBuilder;
use pipeline::burst::Burst;
use pipeline::internal::port::gen::{
    build_frame, write_frame, FrameSize, FrameSpec, GenOptions, GenRx,
};
use pipeline::internal::rss::{toeplitz_reference, Toeplitz, RSS_KEY_MS};
use pipeline::port::RxPort;

fn toeplitz(c: &mut Criterion) {
    let t = Toeplitz::default();
    let mut g = c.benchmark_group("toeplitz_ipv4_4tuple");
    g.throughput(Throughput::Elements(1));
    let (s, d) = (
        Ipv4Addr::new(66, 9, 149, 187),
        Ipv4Addr::new(161, 142, 100, 80),
    );
    g.bench_function("table", |b| {
        b.iter(|| t.hash_ipv4(black_box(s), black_box(d), black_box(Some((2794, 1766)))))
    });
    let mut input = [0u8; 12];
    input[..4].copy_from_slice(&s.octets());
    input[4..8].copy_from_slice(&d.octets());
    input[8..10].copy_from_slice(&2794u16.to_be_bytes());
    input[10..].copy_from_slice(&1766u16.to_be_bytes());
    g.bench_function("bitwise_reference", |b| {
        b.iter(|| toeplitz_reference(black_box(&RSS_KEY_MS), black_box(&input)))
    });
    let frame = build_frame(&FrameSpec::tcp(s.into(), d.into(), 2794, 1766, 64));
    g.bench_function("hash_frame", |b| b.iter(|| t.hash_frame(black_box(&frame))));
    g.finish();
}

fn frame_build(c: &mut Criterion) {
    let mut g = c.benchmark_group("build_64B_ipv4_tcp");
    g.throughput(Throughput::Elements(1));
    let spec = FrameSpec::tcp(
        Ipv4Addr::new(10, 0, 0, 1).into(),
        Ipv4Addr::new(192, 168, 0, 1).into(),
        1234,
        80,
        64,
    );
    let mut buf = Vec::with_capacity(2048);
    g.bench_function("gen_write_frame", |b| {
        b.iter(|| {
            buf.clear();
            write_frame(&mut buf, black_box(&spec));
            black_box(&buf);
        })
    });
    let payload = [0u8; 6]; // 14 + 20 + 20 + 6 = 60 bytes, the same frame size
    g.bench_function("etherparse_packet_builder", |b| {
        b.iter(|| {
            buf.clear();
            PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
                .ipv4(black_box([10, 0, 0, 1]), [192, 168, 0, 1], 64)
                .tcp(black_box(1234), 80, 0, 65535)
                .ack(0)
                .write(&mut buf, &payload)
                .unwrap();
            black_box(&buf);
        })
    });
    g.finish();
}

fn gen_bursts(c: &mut Criterion) {
    let mut g = c.benchmark_group("gen_rx_burst32");
    g.throughput(Throughput::Elements(32));
    let opts = GenOptions {
        size: FrameSize::Imix,
        ..GenOptions::default()
    };
    let mut rx = GenRx::new(&opts, 0).unwrap();
    let mut burst = Burst::with_capacity(32, 32 * 1600);
    g.bench_function("imix_random_flows", |b| {
        b.iter(|| {
            burst.clear();
            rx.rx_burst(&mut burst, 32).unwrap();
            black_box(&burst);
        })
    });
    g.finish();
}

criterion_group!(benches, toeplitz, frame_build, gen_bursts);
criterion_main!(benches);
