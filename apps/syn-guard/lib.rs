//! syn-guard: a SYN-flood scrubber written on the pktwarp library, in the spirit of DPDK's
//! examples. Its one stage, `syn_guard` ([`stage`]), is registered with both implementations
//! (Rust and CUDA), and `syn-guard` runs every pktwarp subcommand with it:
//!
//! ```text
//! syn-guard run apps/syn-guard/syn-guard.yaml
//! syn-guard validate apps/syn-guard/syn-guard.yaml
//! ```
//!
//! With a per-source SYN budget (the built-in `rate_limit` stage after `syn_guard`):
//! `syn-guard run apps/syn-guard/syn-guard-budget.yaml`.

pub mod stage;

pub use stage::{registry, SynGuardFactory, SynGuardOptions};
