//! Bindings to DPDK 22.11+ (libdpdk), generated at build time by bindgen from the installed
//! headers (see `build.rs` for the allowlist), plus `pw_*` wrappers from a small C shim for
//! DPDK's `static inline` fast-path functions (`rte_eth_rx_burst`, `rte_eth_tx_burst`,
//! `rte_pktmbuf_alloc`, ...), which have no symbol to bind.
//!
//! Everything is behind the `bindings` feature (enabled by pipeline's `dpdk` feature): without
//! it the crate is empty and needs no DPDK, so `cargo build --workspace` works anywhere.
//!
//! Poll-mode drivers: Debian's DPDK is linked shared and EAL loads every PMD from its plugin
//! directory (`/usr/lib/<triplet>/dpdk/pmds-<abi>`, compiled into librte_eal as
//! `RTE_EAL_PMD_PATH`) at `rte_eal_init`, so net_pcap, net_null, net_ring, memif, af_xdp, tap,
//! mlx5, ... need no whole-archive linking here. A DPDK built elsewhere can be pointed at its
//! drivers with the EAL argument `-d DIR_OR_LIB`.

#![cfg_attr(
    feature = "bindings",
    allow(
        non_upper_case_globals,
        non_camel_case_types,
        non_snake_case,
        dead_code,
        clippy::all,
        clippy::pedantic,
        rustdoc::all,
        unnecessary_transmutes
    )
)]

#[cfg(feature = "bindings")]
include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

/// `rte_eth_rx_burst`: receives up to `nb_pkts` mbufs from an RX queue.
///
/// Where the installed DPDK allows (build.rs sets `pw_fp_mirror`), this is a Rust mirror of
/// DPDK 22.11's `static inline rte_eth_rx_burst` (rte_ethdev.h): the `rte_eth_fp_ops[port_id]`
/// lookup, the PMD's `rx_pkt_burst`, then the queue's RX callbacks (`rte_eth_call_rx_callbacks`)
/// when any is installed. Inlined into the caller, it saves the out-of-line call into the C shim
/// (`pw_rte_eth_rx_burst`, used otherwise), which measured ~9% of zero-copy forwarding on
/// net_ring.
///
/// # Safety
/// As `rte_eth_rx_burst`: a started port, a configured queue, room for `nb_pkts` pointers.
#[cfg(feature = "bindings")]
#[inline(always)]
pub unsafe fn eth_rx_burst(
    port_id: u16,
    queue_id: u16,
    rx_pkts: *mut *mut rte_mbuf,
    nb_pkts: u16,
) -> u16 {
    #[cfg(pw_fp_mirror)]
    // SAFETY: the caller's contract is rte_eth_rx_burst's: port_id < RTE_MAX_ETHPORTS with its
    // fast-path ops published (started port), queue_id a configured queue, so data[queue_id]
    // and clbk[queue_id] are valid slots; the PMD function is set for every port (a dummy
    // when stopped).
    unsafe {
        let p = std::ptr::addr_of!(rte_eth_fp_ops)
            .cast::<rte_eth_fp_ops>()
            .add(usize::from(port_id));
        let qd = *(*p).rxq.data.add(usize::from(queue_id));
        let Some(burst) = (*p).rx_pkt_burst else {
            return 0;
        };
        let mut nb_rx = burst(qd, rx_pkts, nb_pkts);
        // Relaxed, as in DPDK: the callback list is published with a release store.
        let cb = std::sync::atomic::AtomicPtr::from_ptr((*p).rxq.clbk.add(usize::from(queue_id)))
            .load(std::sync::atomic::Ordering::Relaxed);
        if !cb.is_null() {
            nb_rx = rte_eth_call_rx_callbacks(port_id, queue_id, rx_pkts, nb_rx, nb_pkts, cb);
        }
        nb_rx
    }
    #[cfg(not(pw_fp_mirror))]
    // SAFETY: as above; the shim calls DPDK's own inline function.
    unsafe {
        pw_rte_eth_rx_burst(port_id, queue_id, rx_pkts, nb_pkts)
    }
}

/// `rte_eth_tx_burst`: hands up to `nb_pkts` mbufs to a TX queue; returns how many the device
/// took (those are the device's now). A Rust mirror of DPDK 22.11's inline function where the
/// installed DPDK allows (see [`eth_rx_burst`]): TX callbacks first, then the PMD's
/// `tx_pkt_burst`.
///
/// # Safety
/// As `rte_eth_tx_burst`: a started port, a configured queue, `nb_pkts` valid owned mbufs.
#[cfg(feature = "bindings")]
#[inline(always)]
pub unsafe fn eth_tx_burst(
    port_id: u16,
    queue_id: u16,
    tx_pkts: *mut *mut rte_mbuf,
    nb_pkts: u16,
) -> u16 {
    #[cfg(pw_fp_mirror)]
    // SAFETY: as in eth_rx_burst, for the TX side of rte_eth_fp_ops.
    unsafe {
        let p = std::ptr::addr_of!(rte_eth_fp_ops)
            .cast::<rte_eth_fp_ops>()
            .add(usize::from(port_id));
        let qd = *(*p).txq.data.add(usize::from(queue_id));
        let mut nb = nb_pkts;
        let cb = std::sync::atomic::AtomicPtr::from_ptr((*p).txq.clbk.add(usize::from(queue_id)))
            .load(std::sync::atomic::Ordering::Relaxed);
        if !cb.is_null() {
            nb = rte_eth_call_tx_callbacks(port_id, queue_id, tx_pkts, nb, cb);
        }
        let Some(burst) = (*p).tx_pkt_burst else {
            return 0;
        };
        burst(qd, tx_pkts, nb)
    }
    #[cfg(not(pw_fp_mirror))]
    // SAFETY: as above; the shim calls DPDK's own inline function.
    unsafe {
        pw_rte_eth_tx_burst(port_id, queue_id, tx_pkts, nb_pkts)
    }
}
