//! Without the `bindings` feature this crate is empty and this script does nothing, so the
//! default workspace build needs no DPDK. With it: find libdpdk with pkg-config, generate the
//! bindings from the installed headers with bindgen (allowlisted), and compile the C shim that
//! gives DPDK's `static inline` fast-path functions a symbol.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Set when the installed DPDK lets the Rust mirrors of rte_eth_rx_burst / rte_eth_tx_burst
    // (src/lib.rs) stand for the C inline functions; see bindings::fast_path_mirror_ok.
    println!("cargo::rustc-check-cfg=cfg(pw_fp_mirror)");
    #[cfg(feature = "bindings")]
    bindings::generate();
}

#[cfg(feature = "bindings")]
mod bindings {
    use std::path::PathBuf;

    /// DPDK 22.11 is the LTS release the shim and the port backend are written against.
    const MIN_VERSION: &str = "22.11";

    /// The Rust mirrors of `rte_eth_rx_burst` / `rte_eth_tx_burst` do what DPDK 22.11's inline
    /// functions do in a release build of DPDK: the `rte_eth_fp_ops` lookup, the PMD call and
    /// the RX/TX callbacks. They leave out the fast-path trace point and the ethdev debug
    /// checks, so they are used only when the installed DPDK has neither (bindgen emits these
    /// macros only when they are defined).
    fn fast_path_mirror_ok(bindings: &str) -> bool {
        [
            "RTE_ENABLE_TRACE_FP",
            "RTE_ETHDEV_DEBUG_RX",
            "RTE_ETHDEV_DEBUG_TX",
        ]
        .iter()
        .all(|m| !bindings.contains(&format!("const {m}:")))
    }

    pub fn generate() {
        println!("cargo:rerun-if-changed=src/shim.h");
        println!("cargo:rerun-if-changed=src/shim.c");
        println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

        let lib = match pkg_config::Config::new()
            .atleast_version(MIN_VERSION)
            .probe("libdpdk")
        {
            Ok(lib) => lib,
            Err(e) => {
                // A build script has no other way to fail than a panic; say what to install.
                panic!(
                    "dpdk-sys: libdpdk >= {MIN_VERSION} not found by pkg-config ({e}). \
                     Install DPDK's development files (Debian/Ubuntu: `apt-get install \
                     libdpdk-dev dpdk-dev`) or set PKG_CONFIG_PATH to the directory holding \
                     libdpdk.pc; or build without the `dpdk` feature."
                );
            }
        };

        // pkg-config's cflags carry `-include rte_config.h` and `-march=...`: both the shim and
        // bindgen must see the same configuration the library was built with.
        let cflags = pkg_config::get_variable("libdpdk", "cflags").ok();
        let mut clang_args: Vec<String> = lib
            .include_paths
            .iter()
            .map(|p| format!("-I{}", p.display()))
            .collect();
        let extra = std::process::Command::new("pkg-config")
            .args(["--cflags-only-other", "libdpdk"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .or(cflags)
            .unwrap_or_default();
        let mut others = extra.split_whitespace();
        while let Some(flag) = others.next() {
            if flag == "-include" {
                if let Some(file) = others.next() {
                    clang_args.push("-include".into());
                    clang_args.push(file.into());
                }
            } else {
                clang_args.push(flag.into());
            }
        }

        let mut shim = cc::Build::new();
        shim.file("src/shim.c").opt_level(3).warnings(true);
        for arg in &clang_args {
            shim.flag(arg);
        }
        shim.compile("pktwarp_dpdk_shim");

        let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
        let bindings = bindgen::Builder::default()
            .header("src/shim.h")
            .clang_args(&clang_args)
            .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
            .allowlist_function("pw_.*")
            .allowlist_function("rte_eal_.*")
            .allowlist_function("rte_eth_.*")
            .allowlist_function("rte_pktmbuf_.*")
            .allowlist_function("rte_mempool_.*")
            .allowlist_function("rte_flow_.*")
            .allowlist_function("rte_extmem_.*")
            .allowlist_function("rte_dev_dma_map")
            .allowlist_function("rte_dev_dma_unmap")
            .allowlist_function("rte_dev_probe")
            .allowlist_function("rte_dev_remove")
            .allowlist_function("rte_ring_create")
            .allowlist_function("rte_ring_free")
            .allowlist_function("rte_ring_lookup")
            .allowlist_function("rte_socket_id")
            .allowlist_function("rte_thread_register")
            .allowlist_function("rte_thread_unregister")
            .allowlist_function("rte_strerror")
            .allowlist_function("rte_version")
            .allowlist_function("rte_get_tsc_hz")
            .allowlist_function("rte_mbuf_dyn_tx_timestamp_register")
            .allowlist_type("rte_mbuf")
            .allowlist_type("rte_flow_.*")
            .allowlist_type("rte_eth_.*")
            .allowlist_var("RTE_ETH_.*")
            .allowlist_var("rte_eth_fp_ops")
            .allowlist_var("RTE_ENABLE_TRACE_FP")
            .allowlist_var("RTE_ETHDEV_DEBUG_RX")
            .allowlist_var("RTE_ETHDEV_DEBUG_TX")
            .allowlist_var("RTE_MBUF_.*")
            .allowlist_var("RTE_PKTMBUF_.*")
            .allowlist_var("RTE_MAX_ETHPORTS")
            .allowlist_var("RTE_ETHDEV_QUEUE_STAT_CNTRS")
            .allowlist_var("RTE_MEMPOOL_.*")
            .allowlist_var("RING_F_.*")
            .allowlist_var("SOCKET_ID_ANY")
            .allowlist_var("LCORE_ID_ANY")
            .allowlist_var("RTE_DEV_NAME_MAX_LEN")
            .allowlist_var("RTE_ETH_NAME_MAX_LEN")
            // rte_mbuf and friends hold packed/aligned unions bindgen cannot derive Debug for.
            .derive_debug(false)
            .derive_default(true)
            .prepend_enum_name(false)
            .layout_tests(true)
            .generate()
            .unwrap_or_else(|e| panic!("dpdk-sys: bindgen failed on the DPDK headers: {e}"));
        let text = bindings.to_string();
        if fast_path_mirror_ok(&text) {
            println!("cargo:rustc-cfg=pw_fp_mirror");
        } else {
            println!(
                "cargo:warning=dpdk-sys: this DPDK has fast-path tracing or ethdev debug checks \
                 compiled in; rx/tx bursts go through the C shim (an out-of-line call each)"
            );
        }
        std::fs::write(out.join("bindings.rs"), text)
            .unwrap_or_else(|e| panic!("dpdk-sys: cannot write {}: {e}", out.display()));
    }
}
