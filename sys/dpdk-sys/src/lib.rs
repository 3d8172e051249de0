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
