//! Links libhs (Hyperscan) only with feature `hyperscan`: the default build needs no Hyperscan.
//! `PKTWARP_HS_STATIC=1` links Debian's `libhs.a` (and the C++ runtime it needs) instead of
//! `libhs.so`, so the benchmark binary runs on a machine without libhyperscan installed
//! (`scripts/gpu-inspect-bench.sh`).
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKTWARP_HS_STATIC");
    if std::env::var_os("CARGO_FEATURE_HYPERSCAN").is_some() {
        if std::env::var("PKTWARP_HS_STATIC").is_ok_and(|v| v == "1") {
            println!("cargo:rustc-link-lib=static=hs");
            println!("cargo:rustc-link-lib=dylib=stdc++");
            println!("cargo:rustc-link-lib=dylib=m");
        } else {
            println!("cargo:rustc-link-lib=hs");
        }
    }
}
