//! Links libhs (Hyperscan) only with feature `hyperscan`: the default build needs no Hyperscan.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_HYPERSCAN").is_some() {
        println!("cargo:rustc-link-lib=hs");
    }
}
