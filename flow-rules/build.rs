//! Compiles the host build of the CUDA ACL matcher (csrc/host_acl.cpp, which includes
//! gpu-kernels/acl.cuh) with the system C++ compiler, so tests hold the CUDA source equal to the
//! Rust matcher on machines without a GPU.

fn main() {
    for f in [
        "csrc/host_acl.cpp",
        "../gpu-kernels/pktwarp_abi.h",
        "../gpu-kernels/acl.cuh",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    cc::Build::new()
        .cpp(true)
        .file("csrc/host_acl.cpp")
        .include("../gpu-kernels")
        .flag_if_supported("-std=c++14")
        .flag_if_supported("-Wno-comment")
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true)
        .compile("pw_host_acl");
}
