//! The ended-flow ring of the CUDA flow table (cuda/flow.cuh `pw_flow_ring`, compiled for the
//! host through host/flow_host.cpp, drained by `pktwarp_flow::ring`) holds the flows the Rust
//! table reports ended (`FlowTable::take_ended`): the same records with the same causes (aged
//! out on a bucket visit, evicted, reopened by a SYN), burst by burst; in the same order with
//! one emulated GPU thread, as the same multiset with several (threads end flows of different
//! buckets in their own order); a full ring keeps what fits and counts the rest `lost`, as the
//! CPU list does at its cap. The GPU executor's flow export drains this ring
//! (docs/flow-export-gpu.md).

mod common;

use common::*;
use pktwarp_core::meta::PacketMeta;
use pktwarp_flow::ring::{self, header};
use pktwarp_flow::testgen::{self, GenConfig};
use pktwarp_flow::{Ended, FlowConfig, FlowRecord, FlowResult, FlowTable, Timeouts};
use pktwarp_kernels::host::ffi;

type Rec = (FlowRecord, Ended);

/// A CUDA copy of a table with a ring of `cap` slots.
struct CudaRinged {
    table: CudaTable,
    ring: Vec<u8>,
}

impl CudaRinged {
    fn burst(&mut self, metas: &[PacketMeta], frames: &[&[u8]], now: &[u64], nt: u32) {
        let n = metas.len();
        let t = &mut self.table;
        let abi = t.abi_of_entries();
        let ptrs: Vec<*const u8> = frames.iter().map(|f| f.as_ptr()).collect();
        let lens: Vec<u32> = frames.iter().map(|f| f.len() as u32).collect();
        let mut out = vec![FlowResult::default(); n];
        // SAFETY: `abi.entries` points at the copy's entries (alive, exclusively borrowed);
        // every array has n elements of flow.cuh's layouts (pinned by tests/layout.rs); the
        // ring is ring_bytes(cap) bytes with its cap in the header, as pw_flow_ring reads it.
        let rc = unsafe {
            ffi::pw_host_flow_burst_ring(
                &abi as *const _ as *const u8,
                &mut t.counters as *mut _ as *mut u64,
                n as u32,
                metas.as_ptr() as *const u8,
                ptrs.as_ptr(),
                lens.as_ptr(),
                now.as_ptr(),
                out.as_mut_ptr() as *mut u8,
                nt,
                self.ring.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0);
    }

    fn drain(&mut self) -> Vec<Rec> {
        let mut out = Vec::new();
        ring::drain(&mut self.ring, &mut out).expect("drain");
        out
    }
}

fn key(r: &Rec) -> String {
    format!("{r:?}")
}

/// Generated connection traffic with churn (idles that age flows out) into a table small enough
/// to evict, plus a closed connection reopened by a SYN.
fn traffic() -> Vec<(Vec<u8>, u64)> {
    let mut frames: Vec<(Vec<u8>, u64)> = testgen::generate(&GenConfig {
        seed: 4,
        frames: 6000,
        concurrent: 96,
        idle_pct: 2,
        ..GenConfig::default()
    })
    .into_iter()
    .map(|f| (f.bytes, f.time_ns))
    .collect();
    let t = frames.last().map_or(0, |f| f.1);
    let (c, s) = (ep("10.9.0.9", 40000), ep("10.9.0.1", 80));
    let close = [
        seg(c, s, "S", 1, 0, 0),
        seg(s, c, "SA", 1, 2, 0),
        seg(c, s, "A", 2, 2, 0),
        seg(c, s, "R", 2, 2, 0),
        seg(c, s, "S", 100, 0, 0),
    ];
    for (k, f) in close.into_iter().enumerate() {
        frames.push((f, t + 1000 * (k as u64 + 1)));
    }
    frames
}

fn table() -> FlowTable {
    let mut t = FlowTable::from_config(&FlowConfig {
        entries: 64,
        strict: false,
        hash_seed: 7,
        timeouts: Timeouts::default(),
    })
    .unwrap();
    t.report_ended(true);
    t
}

#[test]
fn the_ring_holds_the_flows_the_rust_table_reports_ended() {
    let frames = traffic();
    let metas: Vec<PacketMeta> = frames.iter().map(|(f, _)| parse(f)).collect();
    for nt in [1u32, 3, 32] {
        let mut t = table();
        let mut cuda = CudaRinged {
            table: CudaTable::of(&t),
            ring: ring::new_ring(4096),
        };
        let mut seen = [0usize; 3];
        let mut rng = testgen::Rng(u64::from(nt));
        let mut i = 0;
        while i < frames.len() {
            let n = (1 + rng.below(64) as usize).min(frames.len() - i);
            let fr: Vec<&[u8]> = frames[i..i + n].iter().map(|(f, _)| f.as_slice()).collect();
            let now: Vec<u64> = frames[i..i + n].iter().map(|(_, t)| *t).collect();
            let mut out = vec![FlowResult::default(); n];
            t.apply_burst(&metas[i..i + n], &fr, &now, &mut out)
                .unwrap();
            cuda.burst(&metas[i..i + n], &fr, &now, nt);
            let mut want = Vec::new();
            t.take_ended(&mut want);
            let mut got = cuda.drain();
            if nt > 1 {
                want.sort_by_key(key);
                got.sort_by_key(key);
            }
            assert_eq!(
                got, want,
                "{nt} threads: ended flows of the burst at frame {i}"
            );
            for (_, why) in &want {
                seen[*why as usize] += 1;
            }
            assert!(
                cuda.table.entries == t.entries(),
                "{nt} threads: table bytes"
            );
            i += n;
        }
        // Every cause happened.
        assert!(seen.iter().all(|&n| n > 0), "{nt} threads: {seen:?}");
        let h = header(&cuda.ring).unwrap();
        assert_eq!((h.lost, h.head, h.tail), (0, h.tail, h.head));
    }
}

#[test]
fn a_full_ring_keeps_what_fits_and_counts_the_rest() {
    let frames = traffic();
    let metas: Vec<PacketMeta> = frames.iter().map(|(f, _)| parse(f)).collect();
    let mut t = table();
    let mut cuda = CudaRinged {
        table: CudaTable::of(&t),
        ring: ring::new_ring(8),
    };
    let fr: Vec<&[u8]> = frames.iter().map(|(f, _)| f.as_slice()).collect();
    let now: Vec<u64> = frames.iter().map(|(_, t)| *t).collect();
    let mut out = vec![FlowResult::default(); frames.len()];
    t.apply_burst(&metas, &fr, &now, &mut out).unwrap();
    for (k, chunk) in metas.chunks(256).enumerate() {
        let at = k * 256;
        cuda.burst(
            chunk,
            &fr[at..at + chunk.len()],
            &now[at..at + chunk.len()],
            1,
        );
    }
    let mut want = Vec::new();
    t.take_ended(&mut want);
    assert!(want.len() > 8, "{}", want.len());
    let h = header(&cuda.ring).unwrap();
    assert_eq!((h.head, h.lost), (8, want.len() as u64 - 8));
    // The first eight, in order; then room again.
    assert_eq!(cuda.drain(), want[..8]);
    assert_eq!(header(&cuda.ring).map(|h| h.tail), Some(8));
}
