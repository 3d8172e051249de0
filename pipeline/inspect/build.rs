//! Links libhs (Hyperscan) only with feature `hyperscan`: the default build needs no Hyperscan.
//! `PKTWARP_HS_STATIC=1` links Debian's `libhs.a` (and the C++ runtime it needs) instead of
//! `libhs.so`, so the benchmark binary runs on a machine without libhyperscan installed
//! (`scripts/gpu-inspect-bench.sh`).
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKTWARP_HS_STATIC");
    if std::env::var_os("CARGO_FEATURE_HYPERSCAN").is_some() {
        if std::env::var("PKTWARP_HS_STATIC").is_ok_and(|v| v == "1") {
            // rustc looks for static libraries only in the -L folders: libhs's own.
            let dir = std::process::Command::new("pkg-config")
                .args(["--variable=libdir", "libhs"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "/usr/lib/x86_64-linux-gnu".into());
            println!("cargo:rustc-link-search=native={dir}");
            println!("cargo:rustc-link-lib=static=hs");
            println!("cargo:rustc-link-lib=dylib=stdc++");
            println!("cargo:rustc-link-lib=dylib=m");
        } else {
            println!("cargo:rustc-link-lib=hs");
        }
    }
}
