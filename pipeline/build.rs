//! Compiles the host build of the CUDA stage code (pipeline/csrc/host_stages.cpp, which includes
//! gpu-kernels/parse.cuh and acl.cuh) into a static library with the system C++ compiler, so tests hold the
//! CUDA source equal to the Rust stages on machines without a GPU or CUDA toolkit.

fn main() {
    for f in [
        "csrc/host_stages.cpp",
        "../gpu-kernels/pktwarp_abi.h",
        "../gpu-kernels/parse.cuh",
        "../gpu-kernels/acl.cuh",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    cc::Build::new()
        .cpp(true)
        .file("csrc/host_stages.cpp")
        .include("../gpu-kernels")
        .flag_if_supported("-std=c++14")
        .warnings(true)
        .extra_warnings(true)
        .compile("pw_host_stages");
}
