//! Per-flow state for pktwarp's stages: a fixed-capacity flow table owned by one queue, with one
//! semantics in Rust (here) and CUDA (`gpu-kernels/cuda/flow*.cuh`), and the stateful stages on
//! it.
pub mod ipfix;
