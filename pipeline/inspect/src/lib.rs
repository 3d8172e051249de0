//! Payload inspection: IDS rules in Suricata syntax, loaded with exactly their semantics or
//! skipped with a reason, matched by a multi-pattern prefilter and each candidate rule's full
//! check, with one semantics in Rust (here) and CUDA (`gpu-kernels/cuda/inspect*.cuh`).

pub mod alert;
pub mod engine;
pub mod eval;
pub mod gpu;
pub mod http;
pub mod matcher;
pub mod pcre;
pub mod rules;
