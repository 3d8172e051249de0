//! Fronthaul decompression throughput on one core: PRBs/s for BFP9 and BFP14, pktwarp's
//! width-specialised decoder (32-bit, and 16-bit straight into the cell as the stage stores:
//! AVX2 where the CPU has it, `portable_i16` without) against a plain scalar (bit-by-bit)
//! decoder in the same run, and
//! the whole stage (frame checks, sequence / timing tracking, slot grid stores) on generated
//! U-plane frames. One 100 MHz 4T4R cell is 273 PRBs x 14 symbols x 2000 slots/s x 4 antennas
//! = 30.576 M PRB/s; divide the PRB rate by that for cells per core.
//!
//! The input: one slot of one antenna (273 x 14 = 3822 PRBs) of random IQ at random block
//! magnitudes, BFP-compressed, decoded into an int16 buffer (saturating, as the slot grid is).
//! The whole stage replays 4 generated slots, each round one radio frame (10 ms) later, frameId
//! and receive times moved on, so every round's slots are new (a closed slot's packets are
//! refused, which a plain replay would time instead).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pipeline::meta::PacketMeta;
use pipeline::verdict::Verdict;
use pktwarp_fronthaul::bfp::{self, Method, PRB_SAMPLES};
use pktwarp_fronthaul::config::{CompConfig, CompHdr, CompMethodName};
use pktwarp_fronthaul::oran_gen::{build_uplane_frames, OranGenOptions};
use pktwarp_fronthaul::{FronthaulConfig, FronthaulStage};

const PRBS: usize = 273 * 14;

fn compressed(width: u8) -> Vec<u8> {
    let o = OranGenOptions {
        iq_width: width,
        ..OranGenOptions::default()
    };
    let pb = bfp::prb_bytes(Method::Bfp, width);
    let mut out = vec![0u8; PRBS * pb];
    for (i, c) in out.chunks_mut(pb).enumerate() {
        let s = o.samples(0, 0, (i / 273) as u8, (i % 273) as u16);
        bfp::compress_prb(&s, Method::Bfp, width, c);
    }
    out
}

type Decoder = fn(&[u8], Method, u8, &mut [i32; PRB_SAMPLES]) -> u8;

fn decode_all(data: &[u8], width: u8, grid: &mut [i16], f: Decoder) {
    let pb = bfp::prb_bytes(Method::Bfp, width);
    let mut iq = [0i32; PRB_SAMPLES];
    for (c, g) in data
        .chunks_exact(pb)
        .zip(grid.chunks_exact_mut(PRB_SAMPLES))
    {
        f(c, Method::Bfp, width, &mut iq);
        for (o, &x) in g.iter_mut().zip(&iq) {
            *o = x.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16;
        }
    }
}

type Decoder16 = fn(&[u8], Method, u8, &mut [i16; PRB_SAMPLES]) -> Option<u8>;

/// As the stage stores a PRB that fits 16 bits: straight into its int16 cell (the 32-bit decode
/// and clamp for the rest).
fn decode_all_i16(data: &[u8], width: u8, grid: &mut [i16], f: Decoder16) {
    let pb = bfp::prb_bytes(Method::Bfp, width);
    let mut iq = [0i32; PRB_SAMPLES];
    for (c, g) in data
        .chunks_exact(pb)
        .zip(grid.chunks_exact_mut(PRB_SAMPLES))
    {
        let Ok(cell) = <&mut [i16; PRB_SAMPLES]>::try_from(g) else {
            continue;
        };
        if f(c, Method::Bfp, width, cell).is_none() {
            bfp::decompress_prb(c, Method::Bfp, width, &mut iq);
            for (o, &x) in cell.iter_mut().zip(&iq) {
                *o = x.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16;
            }
        }
    }
}

fn decompress(c: &mut Criterion) {
    let mut g = c.benchmark_group("fronthaul_decompress");
    g.throughput(Throughput::Elements(PRBS as u64));
    for width in [9u8, 14] {
        let data = compressed(width);
        let mut grid = vec![0i16; PRBS * PRB_SAMPLES];
        // The two decoders agree before they are timed.
        let mut a = grid.clone();
        decode_all(&data, width, &mut a, bfp::decompress_prb);
        decode_all(&data, width, &mut grid, bfp::decompress_prb_scalar);
        assert_eq!(a, grid, "BFP{width}: decoders differ");
        for (name, f) in [
            ("pktwarp_i16", bfp::decompress_prb_i16 as Decoder16),
            (
                "portable_i16",
                bfp::decompress_prb_i16_portable as Decoder16,
            ),
        ] {
            decode_all_i16(&data, width, &mut a, f);
            assert_eq!(
                a, grid,
                "BFP{width}: {name} differs from the scalar decoder"
            );
            g.bench_with_input(
                BenchmarkId::new(name, format!("bfp{width}")),
                &data,
                |b, d| b.iter(|| decode_all_i16(black_box(d), width, &mut a, f)),
            );
        }
        for (name, f) in [
            ("pktwarp", bfp::decompress_prb as Decoder),
            ("scalar", bfp::decompress_prb_scalar as Decoder),
        ] {
            g.bench_with_input(
                BenchmarkId::new(name, format!("bfp{width}")),
                &data,
                |b, d| b.iter(|| decode_all(black_box(d), width, &mut grid, f)),
            );
        }
    }
    g.finish();
}

fn stage(c: &mut Criterion) {
    let mut g = c.benchmark_group("fronthaul_stage");
    for width in [9u8, 14] {
        let o = OranGenOptions {
            iq_width: width,
            // 2 packets a symbol: 273 BFP14 PRBs do not fit one 9216-byte frame.
            prbs_per_packet: 137,
            slots: 4,
            ..OranGenOptions::default()
        };
        o.validate().expect("generator options");
        let mut frames: Vec<_> = build_uplane_frames(&o).collect();
        // The radio header's frameId: after Ethernet (no VLAN tag here) and the eCPRI common
        // header, PC_ID and SEQ_ID (8 bytes), its second byte.
        assert!(o.vlan.is_none());
        const FRAME_ID: usize = 14 + 8 + 1;
        let mut round = 0u64;
        let cfg = FronthaulConfig {
            comp: CompConfig {
                method: CompMethodName::Bfp,
                iq_width: width,
                hdr: CompHdr::Static,
            },
            eaxcs: vec![0],
            ..FronthaulConfig::default()
        };
        let st = FronthaulStage::from_config(&cfg).expect("stage");
        let meta = PacketMeta::default();
        g.throughput(Throughput::Elements(o.slots * 14 * 273));
        g.bench_function(BenchmarkId::new("stage", format!("bfp{width}")), |b| {
            b.iter(|| {
                round += 1;
                for f in &mut frames {
                    f.data[FRAME_ID] = f.data[FRAME_ID].wrapping_add(1);
                    f.timestamp_ns += 10_000_000;
                    let mut v = Verdict::PASS;
                    st.process_at(black_box(&f.data), f.timestamp_ns, &meta, &mut v);
                }
            })
        });
        let c = st.counters();
        assert_eq!(c.errors_total(), 0);
        assert_eq!(c.slot_closed(), 0, "a round's slots were refused");
        assert!(
            c.prbs >= round * o.slots * 14 * 273,
            "the stage decoded {} PRBs in {round} rounds",
            c.prbs
        );
    }
    g.finish();
}

/// The `gen` port's O-RAN mode for configs/fronthaul.yaml's carrier (273 PRBs, 2 eAxCs, BFP9,
/// 50 PRBs and 2 sections a packet, VLAN): frames/s through `rx_burst` in bursts of 32, every
/// slot encoded afresh (`iq_slots` unset) and from a pool of 20 slots' frames (`iq_slots: 20`,
/// the shipped config's). Radio rate: 2000 slots/s x 14 symbols x 2 eAxCs x 6 packets =
/// 336,000 frames/s.
fn oran_gen(c: &mut Criterion) {
    use pipeline::burst::Burst;
    use pipeline::port::RxPort;
    use pktwarp_fronthaul::oran_gen::OranRx;
    let mut g = c.benchmark_group("oran_gen");
    g.throughput(Throughput::Elements(32));
    for iq_slots in [None, Some(20)] {
        let o = OranGenOptions {
            carrier_prbs: 273,
            eaxcs: vec![0, 1],
            prbs_per_packet: 50,
            sections_per_packet: 2,
            vlan: Some(100),
            slots: 1 << 30,
            iq_slots,
            ..OranGenOptions::default()
        };
        let mut rx = OranRx::new(&o, pipeline::internal::port::pace::Rate::Unlimited, 0).unwrap();
        let mut b = Burst::with_capacity(32, 32 * 2048);
        let name = iq_slots.map_or("every_slot_encoded".to_string(), |n| {
            format!("pool_of_{n}_slots")
        });
        g.bench_function(name, |bench| {
            bench.iter(|| {
                b.clear();
                black_box(rx.rx_burst(&mut b, 32).unwrap());
            })
        });
    }
    g.finish();
}

criterion_group!(benches, decompress, stage, oran_gen);
criterion_main!(benches);
