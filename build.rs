fn main() { println!("cargo:rerun-if-changed=gpu-kernels"); }
