//! Rate limits: per-key token buckets in a fixed-capacity table owned by one queue, with one
//! semantics in Rust (here) and CUDA (`gpu-kernels/cuda/rate_limit.cuh`), written once in
//! docs/rate-limit.md. The `rate_limit` stage runs it.
//!
//! - [`RateConfig`]: the config keys (rules: match, key, rate, burst), checked as they are read.
//! - [`RateTable`]: the table; [`RateTable::apply`] gives a frame its rule and whether it passes
//!   ([`RateResult`]); tokens are integers ([`UNIT`] per frame) refilled from the receive time.

pub mod config;
pub mod table;

pub use config::{KeySpec, OnFull, PortRange, Proto, RateConfig, RateRule, RuleMatch, TcpFlags};
pub use table::{
    classify, hash, kind, mflag, outcome, params_of, RateCounters, RateEntry, RateKey, RateResult,
    RateTable, RateTableAbi, RuleAbi, RuleCounters, BUCKET_ENTRIES, COUNTERS_BYTES, ENTRY_OCCUPIED,
    ENTRY_SIZE, MAX_BURST, MAX_ENTRIES, MAX_RATE_PPS, MAX_RULES, NO_RULE, TABLE_ABI_BYTES, UNIT,
};
