//! The CUDA flow table (gpu-kernels/cuda/flow.cuh, compiled for the host through
//! host/flow_host.cpp) equals the Rust one (pktwarp_flow::FlowTable) frame by frame: ct state,
//! direction and outcome of every frame, the counters, and the table's bytes after every burst;
//! for any emulated GPU thread count (the bucket-owner order equals the sequential order). On
//! generated connection traffic with churn and aging, on adversarial sequences (SYN flood into
//! a small table, table full, RSTs in and out of the window) and on property-generated frames.

mod common;

use common::*;
use pktwarp_core::meta::PacketMeta;
use pktwarp_flow::testgen::{self, GenConfig, Rng, Tcp};
use pktwarp_flow::{ct, outcome, FlowConfig, FlowResult, FlowTable, Timeouts};
use proptest::prelude::*;

fn table(entries: u64, strict: bool, seed: u32, timeouts: Timeouts) -> FlowTable {
    FlowTable::from_config(&FlowConfig {
        entries,
        strict,
        hash_seed: seed,
        timeouts,
    })
    .unwrap()
}

/// Runs `frames` in bursts (sizes from `rng`) through the Rust table and through CUDA copies
/// with each thread count; asserts equality after every burst. Returns the Rust results.
fn differential(
    t: &mut FlowTable,
    frames: &[(Vec<u8>, u64)],
    threads: &[u32],
    rng: &mut Rng,
) -> Vec<FlowResult> {
    let metas: Vec<PacketMeta> = frames.iter().map(|(f, _)| parse(f)).collect();
    let mut cudas: Vec<CudaTable> = threads.iter().map(|_| CudaTable::of(t)).collect();
    let mut all = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        let n = (1 + rng.below(64) as usize).min(frames.len() - i);
        let fr: Vec<&[u8]> = frames[i..i + n].iter().map(|(f, _)| f.as_slice()).collect();
        let now: Vec<u64> = frames[i..i + n].iter().map(|(_, t)| *t).collect();
        let mut out = vec![FlowResult::default(); n];
        t.apply_burst(&metas[i..i + n], &fr, &now, &mut out)
            .unwrap();
        for (c, &nt) in cudas.iter_mut().zip(threads) {
            let got = c.burst(&metas[i..i + n], &fr, &now, nt);
            for k in 0..n {
                assert_eq!(
                    got[k],
                    out[k],
                    "frame {} ({nt} threads): CUDA vs Rust, bytes {:02x?}",
                    i + k,
                    fr[k]
                );
            }
            assert_eq!(
                c.counters,
                t.counters(),
                "counters after frame {} ({nt} threads)",
                i + n
            );
            assert!(
                c.entries == t.entries(),
                "table bytes after frame {} ({nt} threads)",
                i + n
            );
        }
        // The metadata bytes the conntrack stage writes: ct_state and ct_dir, Rust == CUDA.
        let cuda_metas = cuda_meta_store(&out, &metas[i..i + n]);
        for k in 0..n {
            let mut m = metas[i + k];
            out[k].store(&mut m);
            assert_eq!(
                cuda_metas[k],
                m,
                "frame {}: metadata after the store",
                i + k
            );
            let want_dir = if out[k].outcome == outcome::TRACKED {
                1 + out[k].dir
            } else {
                0
            };
            assert_eq!(m.ct_dir, want_dir, "frame {}: ct_dir", i + k);
        }
        all.extend(out);
        i += n;
    }
    all
}

fn gen(c: &GenConfig) -> Vec<(Vec<u8>, u64)> {
    testgen::generate(c)
        .into_iter()
        .map(|g| (g.bytes, g.time_ns))
        .collect()
}

#[test]
fn generated_traffic_with_churn_and_aging() {
    for (seed, entries, strict) in [
        (1, 4096, false),
        (2, 4096, true),
        (3, 64, false),
        (4, 64, true),
    ] {
        let frames = gen(&GenConfig {
            seed,
            frames: 6000,
            ..GenConfig::default()
        });
        let mut t = table(entries, strict, seed as u32 * 7, Timeouts::default());
        let res = differential(&mut t, &frames, &[1, 3, 32, 256], &mut Rng(seed));
        let c = t.counters();
        // The traffic must exercise what it claims to: new flows, aging, untracked and
        // invalid frames, established connections; the small table evicts.
        assert!(c.created > 500, "{c:?}");
        assert!(c.expired > 10, "{c:?}");
        assert!(c.untracked > 10, "{c:?}");
        let est = res.iter().filter(|r| r.ct_state == ct::ESTABLISHED).count();
        let closed = res.iter().filter(|r| r.ct_state == ct::CLOSED).count();
        assert!(
            est > 1000 && closed > 50,
            "established {est}, closed {closed}"
        );
        let related = res.iter().filter(|r| r.ct_state == ct::RELATED).count();
        assert!(related > 5, "related {related}");
        if entries == 64 {
            assert!(c.early_evicted > 0, "{c:?}");
        }
        assert!(t.len() <= t.capacity());
    }
}

#[test]
fn generated_traffic_in_ipv6_and_vlans() {
    let frames = gen(&GenConfig {
        seed: 9,
        frames: 3000,
        ipv6_pct: 80,
        vlan_pct: 60,
        ..GenConfig::default()
    });
    let mut t = table(1024, true, 0, Timeouts::default());
    differential(&mut t, &frames, &[1, 7, 64], &mut Rng(9));
    assert!(t
        .records()
        .any(|r| r.key.ip_version == 6 && r.key.zone != 0));
}

/// A SYN flood from random sources into a small table: established (assured) connections
/// survive and keep their state; the flood's SYNs evict each other, never an assured flow; once
/// a bucket holds only assured flows, a new flow is refused (table_full).
#[test]
fn syn_flood_fills_a_small_table_and_established_flows_survive() {
    let mut t = table(16, false, 0, Timeouts::default());
    let mut frames = Vec::new();
    let mut now = 1_000_000_000u64;
    let s = ep(S, 443);
    // Ten established connections (handshake + one data exchange: assured).
    for i in 0..10u16 {
        let c = ep(C, 1000 + i);
        for f in [
            seg(c, s, "S", 1, 0, 0),
            seg(s, c, "SA", 100, 2, 0),
            seg(c, s, "A", 2, 101, 0),
            seg(c, s, "PA", 2, 101, 10),
        ] {
            now += 1000;
            frames.push((f, now));
        }
    }
    let mut rng = Rng(5);
    for i in 0..2000 {
        let src = (
            std::net::IpAddr::from((0xc000_0000u32 | rng.below(1 << 24) as u32).to_be_bytes()),
            rng.below(65536) as u16,
        );
        // SYNs arrive 16 at a time with one timestamp (eviction ties broken by slot).
        if i % 16 == 0 {
            now += 1000;
        }
        frames.push((seg(src, s, "S", rng.next_u64() as u32, 0, 0), now));
    }
    let res = differential(&mut t, &frames, &[1, 2, 5], &mut Rng(6));
    let est: Vec<_> = t.records().filter(|r| r.assured).collect();
    let c = t.counters();
    // Every connection that got in and was assured is still there.
    let admitted = (0..10)
        .filter(|i| res[i * 4].outcome == outcome::TRACKED)
        .count();
    assert_eq!(est.len(), admitted, "assured flows lost: {c:?}");
    assert!(admitted >= 8, "{admitted}");
    assert!(c.early_evicted > 1000, "{c:?}");
    assert!(t.len() <= 16);
    // Data on every surviving connection still finds it established.
    let mut t2 = t.clone();
    for r in &est {
        let cl = (std::net::IpAddr::from(r.src.0[0].to_be_bytes()), r.src.1);
        let f = seg(cl, s, "PA", 12, 101, 10);
        let out = t2.apply(&parse(&f), &f, now + 1);
        assert_eq!(
            (out.outcome, out.ct_state),
            (outcome::TRACKED, ct::ESTABLISHED)
        );
    }
}

/// Buckets full of assured flows refuse new flows (table_full, counted), and never evict them.
#[test]
fn a_full_table_refuses_new_flows() {
    let mut t = table(8, false, 0, Timeouts::default());
    let s = ep(S, 53);
    let mut frames = Vec::new();
    // Eight UDP flows with request, reply, request: assured.
    for i in 0..8u16 {
        let c = ep(C, 2000 + i);
        for (k, f) in [
            testgen::udp_frame(None, c, s, 10),
            testgen::udp_frame(None, s, c, 10),
            testgen::udp_frame(None, c, s, 10),
        ]
        .into_iter()
        .enumerate()
        {
            frames.push((f, 1_000 + i as u64 * 10 + k as u64));
        }
    }
    for i in 0..5u16 {
        frames.push((
            testgen::udp_frame(None, ep(C, 3000 + i), s, 10),
            2_000 + i as u64,
        ));
    }
    let res = differential(&mut t, &frames, &[1, 4], &mut Rng(1));
    assert!(res[24..]
        .iter()
        .all(|r| r.outcome == outcome::TABLE_FULL && r.ct_state == ct::UNTRACKED));
    assert_eq!(t.counters().table_full, 5);
    assert_eq!(t.counters().early_evicted, 0);
    assert_eq!(t.len(), 8);
    // After the UDP timeout they age out and room is made again.
    let late = 1_000 + 121_000_000_000;
    let f = testgen::udp_frame(None, ep(C, 4000), s, 10);
    let r = t.apply(&parse(&f), &f, late);
    assert_eq!(r.outcome, outcome::TRACKED);
    assert_eq!(t.counters().expired, 8);
}

/// strict: RSTs and data inside the window pass, outside it are invalid and change nothing.
#[test]
fn strict_window_rst_in_and_out_of_window() {
    let (c, s) = (ep(C, 5555), ep(S, 80));
    let tcp = |src, dst, flags: u16, seq: u32, ack: u32, len: u16| {
        testgen::tcp_frame(
            None,
            src,
            dst,
            Tcp {
                flags,
                seq,
                ack,
                win: 1000,
                len,
                wscale: None,
            },
        )
    };
    let hs = [
        tcp(c, s, 0x02, 1000, 0, 0),
        tcp(s, c, 0x12, 5000, 1001, 0),
        tcp(c, s, 0x10, 1001, 5001, 0),
        tcp(c, s, 0x18, 1001, 5001, 100),
    ];
    let cases: [(&str, Vec<u8>, u8); 6] = [
        (
            "rst far out of window",
            tcp(s, c, 0x04, 5001 + 1_000_000, 0, 0),
            outcome::INVALID,
        ),
        (
            "data far ahead",
            tcp(c, s, 0x18, 1101 + 500_000, 5001, 10),
            outcome::INVALID,
        ),
        (
            "ack of unsent data",
            tcp(s, c, 0x10, 5001, 1101 + 100_000, 0),
            outcome::INVALID,
        ),
        (
            "old duplicate data",
            tcp(c, s, 0x18, 1001u32.wrapping_sub(200_000), 5001, 10),
            outcome::INVALID,
        ),
        (
            "in-window data",
            tcp(c, s, 0x18, 1101, 5001, 10),
            outcome::TRACKED,
        ),
        (
            "in-window rst",
            tcp(s, c, 0x14, 5001, 1101, 0),
            outcome::TRACKED,
        ),
    ];
    for (name, f, want) in cases {
        for strict in [true, false] {
            let mut t = table(64, strict, 0, Timeouts::default());
            let mut frames: Vec<(Vec<u8>, u64)> = hs.iter().cloned().zip(1u64..).collect();
            frames.push((f.clone(), 10));
            let res = differential(&mut t, &frames, &[1, 2], &mut Rng(3));
            let got = res[4].outcome;
            let want = if strict { want } else { outcome::TRACKED };
            assert_eq!(got, want, "{name}, strict {strict}: {:?}", res[4]);
            let state = t.records().next().unwrap().tcp_state;
            if got == outcome::INVALID {
                assert_eq!(state, pktwarp_flow::tcp::st::ESTABLISHED, "{name}");
            }
        }
    }
}

#[test]
fn a_thread_count_of_zero_is_refused_by_the_host_build() {
    let t = table(8, false, 0, Timeouts::default());
    let mut c = CudaTable::of(&t);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.burst(&[], &[], &[], 0)));
    assert!(r.is_err(), "nthreads 0 must not run");
}

/// One frame of the property test: a small space of endpoints so that frames meet flows.
fn frame_strategy() -> impl Strategy<Value = (Vec<u8>, u64)> {
    (
        0u8..8,
        0u8..4,
        0u8..4,
        any::<u16>(),
        0u32..4,
        0u32..4,
        0u16..3,
        0u64..20_000_000_000,
        any::<u8>(),
        any::<u16>(),
    )
        .prop_map(|(kind, a, b, flags, seq, ack, len, gap, cut, noise)| {
            let ea = ep(
                ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"][a as usize],
                1000 + a as u16,
            );
            let eb = ep(
                ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"][b as usize],
                1000 + b as u16,
            );
            let mut f = match kind {
                0..=2 => testgen::tcp_frame(
                    None,
                    ea,
                    eb,
                    Tcp {
                        flags: [0x02, 0x12, 0x10, 0x11, 0x04, 0x14, 0x18, flags & 0x1ff]
                            [(flags >> 13) as usize],
                        seq: seq * 100,
                        ack: ack * 100,
                        win: 200,
                        len: len * 50,
                        wscale: if noise & 1 == 0 {
                            Some((noise >> 8) as u8)
                        } else {
                            None
                        },
                    },
                ),
                3 => testgen::udp_frame(if noise & 2 == 0 { None } else { Some(7) }, ea, eb, 10),
                4 => testgen::echo_frame(None, ea.0, eb.0, noise & 4 == 0, noise >> 12, 1),
                5 => testgen::fragment_frame(ea, eb, noise & 8 == 0),
                // An ICMP error about a UDP datagram or a TCP segment between the two.
                _ => {
                    let about = if noise & 16 == 0 {
                        testgen::udp_frame(None, eb, ea, 10)
                    } else {
                        testgen::tcp_frame(
                            None,
                            eb,
                            ea,
                            Tcp {
                                flags: 0x10,
                                ..Tcp::default()
                            },
                        )
                    };
                    testgen::icmp_error_frame(ea.0, eb.0, &about)
                }
            };
            // Sometimes a damaged frame: cut short or a byte changed.
            if cut < 16 {
                f.truncate(14 + cut as usize * 4);
            } else if cut < 32 {
                let i = noise as usize % f.len();
                f[i] ^= cut;
            }
            // A third of the frames arrive at the same time as the one before (ties in age).
            (f, if gap < 7_000_000_000 { 0 } else { gap })
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn property_frames_rust_equals_cuda(
        frames in proptest::collection::vec(frame_strategy(), 1..120),
        strict in any::<bool>(),
        small in any::<bool>(),
        seed in any::<u32>(),
    ) {
        let mut now = 0u64;
        let frames: Vec<(Vec<u8>, u64)> = frames.into_iter().map(|(f, gap)| { now += gap; (f, now) }).collect();
        let to = Timeouts { tcp_syn_sent: 5, udp_unreplied: 3, icmp: 2, tcp_close: 1, ..Timeouts::default() };
        let mut t = table(if small { 8 } else { 64 }, strict, seed, to);
        differential(&mut t, &frames, &[1, 2, 3], &mut Rng(seed as u64));
    }
}
