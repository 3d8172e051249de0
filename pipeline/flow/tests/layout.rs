//! The flow table's structs are the bytes flow.cuh reads and writes: sizes and offsets pinned
//! here and asserted by the CUDA header (PW_STATIC_ASSERT) and by the host build's sizeof; the
//! TCP transition table and the hash are the same on both sides.

mod common;

use std::mem::{offset_of, size_of};

use pktwarp_flow::key::{hash, FlowKey, KEY_SIZE};
use pktwarp_flow::testgen::Rng;
use pktwarp_flow::{tcp, FlowCounters, FlowEntry, FlowResult, FlowTableAbi, TcpWindow, ENTRY_SIZE};
use pktwarp_kernels::host::ffi;

#[test]
fn entry_layout_is_pinned() {
    assert_eq!(size_of::<FlowKey>(), KEY_SIZE);
    assert_eq!(size_of::<FlowKey>(), 40);
    assert_eq!(offset_of!(FlowKey, port), 32);
    assert_eq!(offset_of!(FlowKey, zone), 36);
    assert_eq!(offset_of!(FlowKey, proto), 38);
    assert_eq!(offset_of!(FlowKey, ip_version), 39);
    assert_eq!(size_of::<TcpWindow>(), 16);
    assert_eq!(offset_of!(TcpWindow, scale), 12);
    assert_eq!(offset_of!(TcpWindow, flags), 13);
    assert_eq!(size_of::<FlowEntry>(), ENTRY_SIZE);
    assert_eq!(ENTRY_SIZE, 128);
    assert_eq!(offset_of!(FlowEntry, state), 40);
    assert_eq!(offset_of!(FlowEntry, flags), 41);
    assert_eq!(offset_of!(FlowEntry, reserved), 42);
    assert_eq!(offset_of!(FlowEntry, tcp_flags), 44);
    assert_eq!(offset_of!(FlowEntry, last_seen_ns), 48);
    assert_eq!(offset_of!(FlowEntry, first_seen_ns), 56);
    assert_eq!(offset_of!(FlowEntry, packets), 64);
    assert_eq!(offset_of!(FlowEntry, bytes), 80);
    assert_eq!(offset_of!(FlowEntry, window), 96);
    assert_eq!(size_of::<FlowTableAbi>(), 152);
    assert_eq!(offset_of!(FlowTableAbi, nbuckets), 8);
    assert_eq!(offset_of!(FlowTableAbi, seed), 12);
    assert_eq!(offset_of!(FlowTableAbi, strict), 16);
    assert_eq!(offset_of!(FlowTableAbi, timeout_ns), 24);
    assert_eq!(size_of::<FlowCounters>(), 48);
    assert_eq!(size_of::<FlowResult>(), 4);
}

#[test]
fn the_host_build_has_the_same_sizes() {
    let mut s = [0u32; 4];
    // SAFETY: pw_host_flow_sizes writes exactly four u32 into the array.
    unsafe { ffi::pw_host_flow_sizes(s.as_mut_ptr()) };
    assert_eq!(
        s,
        [
            size_of::<FlowEntry>() as u32,
            size_of::<FlowTableAbi>() as u32,
            size_of::<FlowCounters>() as u32,
            size_of::<FlowResult>() as u32
        ]
    );
}

#[test]
fn the_tcp_transition_table_is_the_same_data_in_cuda() {
    let mut t = [0u8; 120];
    // SAFETY: pw_host_flow_tcp_table writes exactly 120 bytes.
    unsafe { ffi::pw_host_flow_tcp_table(t.as_mut_ptr()) };
    assert_eq!(t, tcp::flat_table());
}

#[test]
fn the_hash_is_the_same_in_cuda() {
    let mut rng = Rng(77);
    for i in 0..2000 {
        let mut k = FlowKey::default();
        for w in k.addr.iter_mut().flatten() {
            *w = rng.next_u64() as u32;
        }
        k.port = [rng.next_u64() as u16, rng.next_u64() as u16];
        k.zone = rng.below(4096) as u16;
        k.proto = rng.next_u64() as u8;
        k.ip_version = [4, 6][i % 2];
        let seed = if i % 3 == 0 { 0 } else { rng.next_u64() as u32 };
        // SAFETY: `k` is a FlowKey, the 40-byte pw_flow_key the function reads.
        let c = unsafe { ffi::pw_host_flow_hash(&k as *const FlowKey as *const u8, seed) };
        assert_eq!(c, hash(&k, seed), "{k:?} seed {seed}");
    }
}
