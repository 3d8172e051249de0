//! The GPU flow-table benchmark's logic (tools/gpu-probes/flow_table_bench.cu: its per-frame
//! steps in gpu-kernels/cuda/flow_bench.cuh over flow.cuh) run on the host through
//! host/flow_bench_host.cpp on small tables: the fill makes exactly the flows asked for
//! resident, the scan maps every entry back to its flow, every lookup finds its flow's slot and
//! every update its flow, uniform and Zipf-like; a table of another hash seed makes every answer
//! wrong and the checks say so; the benchmark's packets are what the Rust classify makes of the
//! equivalent frames (key, direction, bucket); parameters out of range are refused.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::parse;
use pktwarp_flow::key::{self, Kind};
use pktwarp_flow::testgen::{tcp_frame, Tcp};
use pktwarp_kernels::host::ffi;

/// pw_host_flow_bench's counts (host/flow_bench_host.cpp, in its order).
#[derive(Debug, Default)]
struct Run {
    resident: u64,
    candidates: u64,
    created: u64,
    evicted: u64,
    table_full: u64,
    insert_wrong: u64,
    scan_bad: u64,
    lookups: u64,
    lookup_wrong: u64,
    updates: u64,
    update_wrong: u64,
    reply_packets: u64,
    created_after: u64,
}

/// The benchmark with 256 threads a round; Err(return code) when refused.
fn bench(
    flows: u32,
    queues: u32,
    entries_per_queue: u32,
    rounds: u32,
    zipf: f64,
    seed_xor: u32,
) -> Result<Run, u32> {
    let mut o = [0u64; 13];
    // SAFETY: `o` has the 13 counts the function writes; the rest are plain values.
    let rc = unsafe {
        ffi::pw_host_flow_bench(
            flows,
            queues,
            entries_per_queue,
            256,
            rounds,
            zipf,
            seed_xor,
            o.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(rc);
    }
    Ok(Run {
        resident: o[0],
        candidates: o[1],
        created: o[2],
        evicted: o[3],
        table_full: o[4],
        insert_wrong: o[5],
        scan_bad: o[6],
        lookups: o[7],
        lookup_wrong: o[8],
        updates: o[9],
        update_wrong: o[10],
        reply_packets: o[11],
        created_after: o[12],
    })
}

/// Entries a queue by the config's rule: 25% above its flows, a multiple of 8.
fn sized(flows: u32, queues: u32) -> u32 {
    let most = flows.div_ceil(queues);
    (most * 125 / 100).div_ceil(8) * 8
}

#[test]
fn the_fill_makes_the_flows_resident_and_every_lookup_and_update_finds_its_flow() {
    let (flows, queues) = (40_000u32, 4u32);
    let epq = sized(flows, queues);
    for zipf in [0.0, 0.99] {
        let r = bench(flows, queues, epq, 8, zipf, 0).unwrap();
        assert_eq!(r.resident, flows as u64, "{r:?}");
        assert_eq!(r.created - r.evicted, flows as u64, "{r:?}");
        // At 80% load some buckets overflow: more candidates than flows, each eviction one.
        assert!(r.evicted > 0, "{r:?}");
        assert_eq!(r.candidates, r.created + r.table_full, "{r:?}");
        assert_eq!(
            (r.insert_wrong, r.scan_bad, r.lookup_wrong, r.update_wrong),
            (0, 0, 0, 0),
            "{r:?}"
        );
        assert_eq!(r.lookups, queues as u64 * 8 * 256);
        assert_eq!(r.updates, r.lookups);
        assert_eq!(r.reply_packets, r.updates, "every update counted on a flow");
        assert_eq!(r.created_after, r.created, "no update made a flow");
    }
}

/// The checks can fail: lookups and updates in a table hashed with another seed visit other
/// buckets, and every one of them is counted wrong (the updates then make new flows).
#[test]
fn a_table_of_another_hash_seed_makes_every_answer_wrong() {
    let (flows, queues) = (8_000u32, 2u32);
    let r = bench(flows, queues, sized(flows, queues), 2, 0.0, 0x1234).unwrap();
    assert_eq!(r.resident, flows as u64);
    assert_eq!(r.scan_bad, 0);
    // A few keys may land in their own bucket by chance (1 in 625 here).
    assert!(r.lookup_wrong * 100 >= r.lookups * 99, "{r:?}");
    assert!(r.update_wrong * 100 >= r.updates * 99, "{r:?}");
    assert!(r.created_after > r.created, "{r:?}");
}

/// The request streams: uniform spreads over the flows, Zipf-like (0.99) piles onto a few hot
/// ones; both stay inside the list; a Zipf run also checks out end to end.
#[test]
fn zipf_requests_are_skewed_and_uniform_ones_are_not() {
    let n = 10_000u32;
    let picks = 200_000u64;
    let spread = |zipf: f64| {
        let mut hits = vec![0u32; n as usize];
        for j in 0..picks {
            // SAFETY: plain values in and out.
            let p = unsafe { ffi::pw_host_flow_bench_pick(7, 3, j, n, zipf) };
            assert!(p < n, "position {p} of {n}");
            hits[p as usize] += 1;
        }
        let top = *hits.iter().max().unwrap() as f64 / picks as f64;
        let distinct = hits.iter().filter(|&&h| h > 0).count();
        (top, distinct)
    };
    let (u_top, u_distinct) = spread(0.0);
    let (z_top, z_distinct) = spread(0.99);
    assert!(u_top < 0.001, "uniform: the hottest flow took {u_top}");
    assert!(u_distinct > 9_900, "uniform reached {u_distinct} flows");
    // Zipf 0.99 over 10K ranks: the first takes about 1 / H(10K) = 10%.
    assert!(z_top > 0.05, "zipf: the hottest flow took {z_top}");
    assert!(
        z_distinct < u_distinct * 9 / 10,
        "zipf reached {z_distinct} flows"
    );
    let r = bench(20_000, 1, sized(20_000, 1), 16, 0.99, 0).unwrap();
    assert_eq!((r.lookup_wrong, r.update_wrong, r.scan_bad), (0, 0, 0));
    assert_eq!(r.reply_packets, r.updates);
}

#[test]
fn the_benchmark_packets_are_what_classify_makes_of_their_frames() {
    let (seed, nbuckets) = (0x5eedu32, 1526u32);
    for f in [0u32, 1, 77, 0xff_ffff, 0x100_0000, 0x2abc_def0, 0xffff_fffd] {
        for reply in [0u32, 1] {
            let mut k = [0u8; 40];
            let mut o = [0u32; 4];
            // SAFETY: 40 and 4 writable values, as the function writes.
            let rc = unsafe {
                ffi::pw_host_flow_bench_pkt(
                    f,
                    reply,
                    seed,
                    nbuckets,
                    k.as_mut_ptr(),
                    o.as_mut_ptr(),
                )
            };
            assert_eq!(rc, 0);
            let client = (
                IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (f & 0xff_ffff))),
                (1024 + (f >> 24)) as u16,
            );
            let server = (IpAddr::V4(Ipv4Addr::new(192, 168, 0, 1)), 443);
            let (src, dst) = if reply == 1 {
                (server, client)
            } else {
                (client, server)
            };
            let t = Tcp {
                flags: 0x10,
                seq: 1,
                ack: 2,
                win: 65535,
                len: 0,
                wscale: None,
            };
            let frame = tcp_frame(None, src, dst, t);
            let p = key::classify(&parse(&frame), &frame).expect("a TCP flow");
            assert_eq!(p.kind, Kind::Tcp);
            let want: Vec<u8> = p
                .key
                .words()
                .iter()
                .take(8)
                .flat_map(|w| w.to_ne_bytes())
                .collect();
            assert_eq!(&k[..32], &want[..], "flow {f} reply {reply}: addresses");
            let ports = u16::from_ne_bytes([k[32], k[33]]) as u32
                | (u16::from_ne_bytes([k[34], k[35]]) as u32) << 16;
            assert_eq!(ports, p.key.words()[8], "flow {f} reply {reply}: ports");
            assert_eq!(
                (k[36], k[37], k[38], k[39]),
                (0, 0, 6, 4),
                "flow {f}: zone, proto, ip_version"
            );
            assert_eq!(
                o,
                [
                    key::hash(&p.key, seed) % nbuckets,
                    p.ip_len,
                    p.tcp_flags as u32,
                    p.from_a as u32
                ],
                "flow {f} reply {reply}: bucket, IP length, flags, direction"
            );
        }
    }
}

#[test]
fn parameters_out_of_range_are_refused() {
    let ok = sized(1000, 2);
    for (flows, queues, epq, zipf) in [
        (1000, 0, ok, 0.0),           // no queue
        (1, 2, ok, 0.0),              // a queue without flows
        (1000, 2, ok + 4, 0.0),       // not whole buckets
        (1000, 2, 0, 0.0),            // no entries
        (1000, 2, 496, 0.0),          // more flows than entries
        (1000, 2, ok, 1.0),           // Zipf exponent 1 (the inverse divides by 1 - s)
        (1 << 21, 1 << 19, 256, 0.0), // 2^27 entries: over the host table's limit
    ] {
        assert_eq!(
            bench(flows, queues, epq, 1, zipf, 0).unwrap_err(),
            1,
            "{flows} flows, {queues} queues, {epq} entries, zipf {zipf}"
        );
    }
}
