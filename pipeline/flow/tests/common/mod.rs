//! Helpers shared by the flow table's tests: the parse stage (its CUDA source compiled for the
//! host, held equal to the Rust parser by the pipeline's tests) and the host-compiled flow.cuh.

#![allow(dead_code)]

use std::net::IpAddr;

use pktwarp_core::meta::{PacketMeta, META_SIZE};
use pktwarp_flow::testgen::{self, Ep, Tcp};
use pktwarp_flow::{FlowCounters, FlowEntry, FlowResult, FlowTable};
use pktwarp_kernels::host::ffi;

/// The parse stage's metadata of a frame.
pub fn parse(frame: &[u8]) -> PacketMeta {
    let mut m = PacketMeta::default();
    assert_eq!(std::mem::size_of::<PacketMeta>(), META_SIZE);
    // SAFETY: the frame pointer and length describe a live slice; `m` is a PacketMeta of
    // META_SIZE bytes, the size pw_host_parse writes (pw_packet_meta, pinned by core's tests).
    unsafe {
        ffi::pw_host_parse(
            frame.as_ptr(),
            frame.len() as u32,
            &mut m as *mut _ as *mut u8,
        )
    };
    m
}

/// A copy of a table's entries and counters that the host-compiled CUDA works on.
pub struct CudaTable {
    pub entries: Vec<FlowEntry>,
    pub counters: FlowCounters,
    abi_of: FlowTable,
}

/// The metadata CUDA writes for `results` (pw_flow_meta_store) over copies of `metas`.
pub fn cuda_meta_store(results: &[FlowResult], metas: &[PacketMeta]) -> Vec<PacketMeta> {
    assert_eq!(results.len(), metas.len());
    let mut out = metas.to_vec();
    // SAFETY: both arrays have results.len() records of the layouts flow.cuh declares
    // (pw_flow_result, pw_packet_meta; pinned by the layout tests), alive for the call.
    let n = unsafe {
        ffi::pw_host_flow_meta_store(
            results.as_ptr() as *const u8,
            results.len() as u32,
            out.as_mut_ptr() as *mut u8,
        )
    };
    assert_eq!(n as usize, results.len());
    out
}

impl CudaTable {
    /// A CUDA copy of `t` (its entries, counters and parameters as they are now).
    pub fn of(t: &FlowTable) -> Self {
        CudaTable {
            entries: t.entries().to_vec(),
            counters: t.counters(),
            abi_of: t.clone(),
        }
    }

    /// The table's parameter block with `entries` the address of this copy's entries.
    pub fn abi_of_entries(&mut self) -> pktwarp_flow::table::FlowTableAbi {
        self.abi_of.abi(self.entries.as_mut_ptr() as u64)
    }

    /// One burst through pw_flow_burst_* with `nthreads` emulated threads.
    pub fn burst(
        &mut self,
        metas: &[PacketMeta],
        frames: &[&[u8]],
        now: &[u64],
        nthreads: u32,
    ) -> Vec<FlowResult> {
        let n = metas.len();
        assert!(frames.len() == n && now.len() == n);
        let abi = self.abi_of.abi(self.entries.as_mut_ptr() as u64);
        let ptrs: Vec<*const u8> = frames.iter().map(|f| f.as_ptr()).collect();
        let lens: Vec<u32> = frames.iter().map(|f| f.len() as u32).collect();
        let mut out = vec![FlowResult::default(); n];
        // SAFETY: `abi.entries` points at self.entries (capacity entries, the nbuckets * 8 the
        // block says, alive and exclusively borrowed for the call); every array has n elements
        // of the layout flow.cuh declares (pinned by tests/layout.rs); the frame pointers and
        // lengths describe live slices.
        let rc = unsafe {
            ffi::pw_host_flow_burst(
                &abi as *const _ as *const u8,
                &mut self.counters as *mut _ as *mut u64,
                n as u32,
                metas.as_ptr() as *const u8,
                ptrs.as_ptr(),
                lens.as_ptr(),
                now.as_ptr(),
                out.as_mut_ptr() as *mut u8,
                nthreads,
            )
        };
        assert_eq!(rc, 0);
        out
    }
}

pub fn v4(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub const C: &str = "10.0.0.1";
pub const S: &str = "10.0.0.2";

pub fn ep(a: &str, p: u16) -> Ep {
    (v4(a), p)
}

/// A TCP segment with these flags (names: S, SA, A, F, FA, R, RA, PA, none).
pub fn seg(src: Ep, dst: Ep, flags: &str, seq: u32, ack: u32, len: u16) -> Vec<u8> {
    let f = match flags {
        "S" => 0x02,
        "SA" => 0x12,
        "A" => 0x10,
        "F" => 0x01,
        "FA" => 0x11,
        "R" => 0x04,
        "RA" => 0x14,
        "PA" => 0x18,
        "none" => 0,
        other => panic!("flags {other}"),
    };
    testgen::tcp_frame(
        None,
        src,
        dst,
        Tcp {
            flags: f,
            seq,
            ack,
            win: 1000,
            len,
            wscale: None,
        },
    )
}
