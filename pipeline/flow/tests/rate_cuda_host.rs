//! The CUDA rate-limit table (gpu-kernels/cuda/rate_limit.cuh, compiled for the host through
//! host/rate_limit_host.cpp) equals the Rust one (pktwarp_flow::rate::RateTable) frame by frame:
//! each frame's rule, outcome and drop, the counters, and the table's bytes after every burst,
//! for any emulated GPU thread count (the bucket-owner order equals the sequential order), on
//! property-generated traffic: a few sources and flows (IPv4 and IPv6), several rules, bursts
//! whose frames share a receive time, gaps that refill buckets, tables small enough to fill;
//! and on arbitrary metadata (any IP version, protocol, flags; times that go backwards).
//! The structs' layouts are pinned here too.

mod common;

use std::mem::{offset_of, size_of};
use std::net::IpAddr;

use common::parse;
use pktwarp_core::meta::PacketMeta;
use pktwarp_flow::rate::{
    outcome, RateConfig, RateCounters, RateEntry, RateKey, RateResult, RateTable, RateTableAbi,
    RuleAbi, ENTRY_SIZE, MAX_RULES, NO_RULE,
};
use pktwarp_flow::testgen::{self, Rng, Tcp};
use pktwarp_kernels::host::ffi;
use proptest::prelude::*;

/// A copy of a table's entries and counters that the host-compiled CUDA works on.
struct CudaRate {
    entries: Vec<RateEntry>,
    counters: RateCounters,
    abi_of: RateTable,
}

impl CudaRate {
    fn of(t: &RateTable) -> Self {
        CudaRate {
            entries: t.entries().to_vec(),
            counters: t.counters(),
            abi_of: t.clone(),
        }
    }

    fn burst(&mut self, metas: &[PacketMeta], now: &[u64], nthreads: u32) -> Vec<RateResult> {
        let n = metas.len();
        assert_eq!(now.len(), n);
        let abi = self.abi_of.abi(self.entries.as_mut_ptr() as u64);
        let mut out = vec![RateResult::default(); n];
        // SAFETY: `abi.entries` points at self.entries (nbuckets * 8 entries, alive and
        // exclusively borrowed for the call); metas, now and out have n elements of the layouts
        // rate_limit.cuh declares (pinned below); the counters are a RateCounters.
        let rc = unsafe {
            ffi::pw_host_rl_burst(
                &abi as *const _ as *const u8,
                &mut self.counters as *mut _ as *mut u64,
                n as u32,
                metas.as_ptr() as *const u8,
                now.as_ptr(),
                out.as_mut_ptr() as *mut u8,
                nthreads,
            )
        };
        assert_eq!(rc, 0);
        out
    }
}

fn config(yaml: &str) -> RateConfig {
    serde_saphyr::from_str(yaml).expect("test config")
}

/// Runs the frames in bursts (sizes from `rng`) through the Rust table and CUDA copies with each
/// thread count; asserts equality after every burst. Returns the Rust results.
fn differential(
    t: &mut RateTable,
    frames: &[(PacketMeta, u64)],
    threads: &[u32],
    rng: &mut Rng,
) -> Vec<RateResult> {
    let mut cudas: Vec<CudaRate> = threads.iter().map(|_| CudaRate::of(t)).collect();
    let mut all = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        let n = (1 + rng.below(64) as usize).min(frames.len() - i);
        let metas: Vec<PacketMeta> = frames[i..i + n].iter().map(|f| f.0).collect();
        let now: Vec<u64> = frames[i..i + n].iter().map(|f| f.1).collect();
        let mut out = vec![RateResult::default(); n];
        t.apply_burst(&metas, &now, &mut out).unwrap();
        for (c, &nt) in cudas.iter_mut().zip(threads) {
            let got = c.burst(&metas, &now, nt);
            assert_eq!(got, out, "burst at frame {i} ({nt} threads): CUDA vs Rust");
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
        all.extend(out);
        i += n;
    }
    all
}

const RULES: &str = "\
rules:
  - { name: syn, match: { proto: tcp, tcp_flags: \"syn !ack\" }, key: src, rate_pps: 50, burst: 3 }
  - { name: dns, match: { proto: udp, dst_port: 53 }, key: src_prefix/24/48, rate_pps: 1000, burst: 2 }
  - { name: v6, match: { ip: 6 }, key: dst, rate_pps: 7, burst: 1 }
  - { name: flows, key: flow, rate_pps: 3, burst: 4 }
";

/// One frame: one of a few endpoints (IPv4 and IPv6) so that keys meet; a TCP segment (SYN,
/// SYN+ACK, ACK, ...), a UDP datagram (to 53 or not), an echo, a fragment or ARP.
fn frame_strategy() -> impl Strategy<Value = (Vec<u8>, u64)> {
    (
        0u8..6,
        0u8..6,
        0u8..6,
        0u8..8,
        any::<bool>(),
        0u64..200_000_000,
    )
        .prop_map(|(kind, a, b, flags, port53, gap)| {
            let addr = |i: u8| -> IpAddr {
                [
                    "10.0.0.1",
                    "10.0.0.2",
                    "10.0.1.9",
                    "192.0.2.7",
                    "2001:db8::1",
                    "2001:db8:0:1::5",
                ][i as usize]
                    .parse()
                    .unwrap()
            };
            // Both endpoints of one family.
            let (ia, ib) = if (a >= 4) == (b >= 4) {
                (a, b)
            } else {
                (a, (a + 1) % 6)
            };
            let ea = (addr(ia), 1000 + u16::from(a));
            let eb = (addr(ib), if port53 { 53 } else { 2000 + u16::from(b) });
            let f = match kind {
                0..=2 => testgen::tcp_frame(
                    None,
                    ea,
                    eb,
                    Tcp {
                        flags: [0x02, 0x12, 0x10, 0x11, 0x04, 0x18, 0x03, 0x00][flags as usize],
                        seq: 1,
                        ack: 0,
                        win: 100,
                        len: 0,
                        wscale: None,
                    },
                ),
                3 => testgen::udp_frame(None, ea, eb, 10),
                4 => testgen::echo_frame(None, ea.0, eb.0, true, 7, 1),
                _ if flags & 1 == 0 => testgen::fragment_frame(ea, eb, flags & 2 == 0),
                _ => testgen::arp_frame(),
            };
            // A third of the frames share the receive time of the one before.
            (f, if gap < 70_000_000 { 0 } else { gap })
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn property_frames_rust_equals_cuda(
        frames in proptest::collection::vec(frame_strategy(), 1..160),
        small in any::<bool>(),
        drop_full in any::<bool>(),
        seed in any::<u32>(),
    ) {
        let mut now = 1_000_000_000u64;
        let frames: Vec<(PacketMeta, u64)> = frames
            .into_iter()
            .map(|(f, gap)| {
                now += gap;
                (parse(&f), now)
            })
            .collect();
        let on_full = if drop_full { "drop" } else { "pass" };
        let c = config(&format!(
            "entries: {}\nhash_seed: {seed}\non_full: {on_full}\n{RULES}",
            if small { 8 } else { 64 }
        ));
        let mut t = RateTable::from_config(&c).unwrap();
        differential(&mut t, &frames, &[1, 2, 3, 32], &mut Rng(u64::from(seed)));
    }
}

/// Metadata no parser made: any IP version byte, protocol, flags, ports and a few addresses, and
/// times that go backwards. The two implementations agree and neither fails.
fn meta_strategy() -> impl Strategy<Value = (PacketMeta, u64)> {
    (
        prop_oneof![Just(4u8), Just(6u8), any::<u8>()],
        prop_oneof![Just(6u8), Just(17u8), any::<u8>()],
        any::<u16>(),
        any::<u16>(),
        prop_oneof![Just(53u16), any::<u16>()],
        (0u32..4, 0u32..4, any::<u32>()),
        any::<u64>(),
    )
        .prop_map(|(v, proto, flags, tcp_flags, dport, (s, d, w3), t)| {
            let m = PacketMeta {
                ip_version: v,
                ip_proto: proto,
                flags,
                tcp_flags,
                src_port: 1000,
                dst_port: dport,
                src_ip: [0x0a00_0000 | s, 0, 0, w3 & 3],
                dst_ip: [0x0a00_0000 | d, 1, 0, 0],
                ..PacketMeta::default()
            };
            (m, t % 4_000_000_000)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn property_arbitrary_metadata_rust_equals_cuda(
        frames in proptest::collection::vec(meta_strategy(), 1..200),
        small in any::<bool>(),
    ) {
        let c = config(&format!("entries: {}\n{RULES}", if small { 8 } else { 64 }));
        let mut t = RateTable::from_config(&c).unwrap();
        differential(&mut t, &frames, &[1, 5], &mut Rng(frames.len() as u64));
    }
}

/// A SYN flood from one source among clients: the flooder is limited at exactly the frame its
/// burst runs out, refills at its rate, and the clients pass; CUDA agrees with any thread count.
#[test]
fn a_syn_flood_is_limited_at_the_right_frame() {
    let c = config(&format!("entries: 64\n{RULES}"));
    let mut t = RateTable::from_config(&c).unwrap();
    let server = ("10.0.0.2".parse().unwrap(), 80);
    let syn = |src: &str, port: u16| {
        let f = testgen::tcp_frame(
            None,
            (src.parse().unwrap(), port),
            server,
            Tcp {
                flags: 0x02,
                ..Tcp::default()
            },
        );
        parse(&f)
    };
    let mut frames = Vec::new();
    // 100 SYNs from the flooder 1 ms apart (rate 50/s: a token per 20 ms), one from each of 20
    // clients in between.
    for i in 0..100u64 {
        frames.push((
            syn("198.51.100.66", 1000 + i as u16),
            1_000_000_000 + i * 1_000_000,
        ));
        if i % 5 == 0 {
            let client = format!("10.1.0.{}", i / 5 + 1);
            frames.push((syn(&client, 40000), 1_000_000_000 + i * 1_000_000));
        }
    }
    let res = differential(&mut t, &frames, &[1, 4, 32], &mut Rng(3));
    let flood: Vec<u8> = res
        .iter()
        .zip(&frames)
        .filter(|(_, (m, _))| m.src_ip[0] == 0xc633_6442)
        .map(|(r, _)| r.outcome)
        .collect();
    // Burst 3 passes, then a token every 20 ms: frames 20, 40, 60, 80 of the 1 ms spacing.
    let passed: Vec<usize> = flood
        .iter()
        .enumerate()
        .filter(|(_, o)| **o == outcome::PASSED)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(passed, [0, 1, 2, 20, 40, 60, 80]);
    let clients = res.len() - flood.len();
    assert_eq!(clients, 20);
    assert!(res
        .iter()
        .zip(&frames)
        .filter(|(_, (m, _))| m.src_ip[0] != 0xc633_6442)
        .all(|(r, _)| r.outcome == outcome::PASSED && r.rule == 0));
    let k = t.counters();
    assert_eq!((k.rules[0].matched, k.rules[0].limited), (120, 93));
}

/// Keys over the table's capacity: once every bucket of a key's slot is busy (not yet refilled)
/// the frame is table_full, and `on_full` decides; CUDA agrees.
#[test]
fn a_full_table_is_counted_and_on_full_decides() {
    for on_full in ["pass", "drop"] {
        let c = config(&format!("entries: 8\non_full: {on_full}\n{RULES}"));
        let mut t = RateTable::from_config(&c).unwrap();
        let mut frames = Vec::new();
        for i in 0..40u32 {
            let f = testgen::tcp_frame(
                None,
                (IpAddr::from((0x0a00_0000 + i).to_be_bytes()), 1000),
                ("10.0.0.2".parse().unwrap(), 80),
                Tcp {
                    flags: 0x02,
                    ..Tcp::default()
                },
            );
            frames.push((parse(&f), 5));
        }
        let res = differential(&mut t, &frames, &[1, 3], &mut Rng(1));
        let full: Vec<&RateResult> = res
            .iter()
            .filter(|r| r.outcome == outcome::TABLE_FULL)
            .collect();
        assert_eq!(full.len(), 32, "{on_full}");
        assert!(full.iter().all(|r| r.drop == u8::from(on_full == "drop")));
        assert_eq!(t.counters().rules[0].table_full, 32);
        assert_eq!(t.len(), 8);
    }
}

#[test]
fn frames_without_a_rule_are_untouched() {
    let c = config("entries: 8\nrules:\n  - { name: dns, match: { proto: udp, dst_port: 53 }, key: src, rate_pps: 1 }\n");
    let mut t = RateTable::from_config(&c).unwrap();
    let frames: Vec<(PacketMeta, u64)> = [
        testgen::arp_frame(),
        testgen::echo_frame(
            None,
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            true,
            1,
            1,
        ),
    ]
    .iter()
    .map(|f| (parse(f), 1))
    .collect();
    let res = differential(&mut t, &frames, &[1, 2], &mut Rng(2));
    assert!(res
        .iter()
        .all(|r| r.rule == NO_RULE && r.outcome == outcome::UNMATCHED && r.drop == 0));
    assert!(t.is_empty());
}

#[test]
fn layouts_are_pinned_and_the_host_build_agrees() {
    assert_eq!(size_of::<RateKey>(), 40);
    assert_eq!(offset_of!(RateKey, port), 32);
    assert_eq!(offset_of!(RateKey, rule), 36);
    assert_eq!(offset_of!(RateKey, ip_version), 38);
    assert_eq!(size_of::<RateEntry>(), ENTRY_SIZE);
    assert_eq!(offset_of!(RateEntry, tokens), 40);
    assert_eq!(offset_of!(RateEntry, last_ns), 48);
    assert_eq!(offset_of!(RateEntry, flags), 56);
    assert_eq!(offset_of!(RateEntry, drops), 60);
    assert_eq!(size_of::<RuleAbi>(), 48);
    assert_eq!(offset_of!(RuleAbi, src_lo), 24);
    assert_eq!(offset_of!(RuleAbi, flags_mask), 32);
    assert_eq!(offset_of!(RuleAbi, match_flags), 36);
    assert_eq!(offset_of!(RuleAbi, prefix_v6), 41);
    assert_eq!(offset_of!(RateTableAbi, nrules), 16);
    assert_eq!(offset_of!(RateTableAbi, rules), 24);
    assert_eq!(size_of::<RateTableAbi>(), 24 + 48 * MAX_RULES);
    assert_eq!(size_of::<RateCounters>(), 16 + 24 * MAX_RULES);
    assert_eq!(size_of::<RateResult>(), 4);
    let mut s = [0u32; 5];
    // SAFETY: pw_host_rl_sizes writes exactly five u32 into the array.
    unsafe { ffi::pw_host_rl_sizes(s.as_mut_ptr()) };
    assert_eq!(
        s,
        [
            size_of::<RateEntry>() as u32,
            size_of::<RateTableAbi>() as u32,
            size_of::<RateCounters>() as u32,
            size_of::<RateResult>() as u32,
            size_of::<RuleAbi>() as u32,
        ]
    );
    let mut rng = Rng(9);
    for _ in 0..200 {
        let k = RateKey {
            addr: [[rng.next_u64() as u32; 4], [rng.next_u64() as u32, 0, 1, 2]],
            port: [rng.next_u64() as u16, 7],
            rule: rng.below(32) as u8,
            proto: 6,
            ip_version: 4,
            reserved: 0,
        };
        let seed = rng.next_u64() as u32;
        // SAFETY: the key is a RateKey (pw_rl_key, 40 bytes, layout pinned above).
        let c = unsafe { ffi::pw_host_rl_hash(&k as *const _ as *const u8, seed) };
        assert_eq!(c, pktwarp_flow::rate::hash(&k, seed));
    }
}

#[test]
fn a_thread_count_of_zero_is_refused_by_the_host_build() {
    let c = config(&format!("entries: 8\n{RULES}"));
    let t = RateTable::from_config(&c).unwrap();
    let mut cuda = CudaRate::of(&t);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cuda.burst(&[], &[], 0)));
    assert!(r.is_err(), "nthreads 0 must not run");
}

/// The GPU stage's parameter block embeds the table block as `RateTableAbi::to_bytes` writes it:
/// the same bytes as the struct the host build reads; the device counters read back with
/// `RateCounters::from_bytes` are the struct's fields, and a slice of another length is refused.
#[test]
fn the_table_block_and_counters_round_trip_as_bytes() {
    let c = config(&format!("entries: 64\n{RULES}"));
    let t = RateTable::from_config(&c).unwrap();
    let abi = t.abi(0x1234_5678_9abc);
    // SAFETY: RateTableAbi is repr(C) integers without padding (its size is the sum of its
    // fields', pinned in layouts_are_pinned_and_the_host_build_agrees); the slice borrows it.
    let raw = unsafe {
        std::slice::from_raw_parts(&abi as *const _ as *const u8, size_of::<RateTableAbi>())
    };
    assert_eq!(abi.to_bytes(), raw);
    assert_eq!(raw.len(), pktwarp_flow::rate::TABLE_ABI_BYTES);
    assert!(
        abi.nrules > 1 && abi.rules[1].cap != 0,
        "the rules are in the block"
    );
    let mut counters = RateCounters {
        created: 7,
        reused: 3,
        ..RateCounters::default()
    };
    counters.rules[1].limited = 11;
    counters.rules[MAX_RULES - 1].table_full = 5;
    // SAFETY: as above, RateCounters is repr(C) u64s.
    let raw = unsafe {
        std::slice::from_raw_parts(
            &counters as *const _ as *const u8,
            size_of::<RateCounters>(),
        )
    };
    assert_eq!(RateCounters::from_bytes(raw), Some(counters));
    assert_eq!(RateCounters::from_bytes(&raw[1..]), None);
    assert_eq!(RateCounters::from_bytes(&[]), None);
}
