//! Per-flow state for pktwarp's stages: a fixed-capacity flow table owned by one queue, with one
//! semantics in Rust (here) and CUDA (`gpu-kernels/cuda/flow.cuh`), and the stateful stages on
//! it. The semantics are written once in docs/flow-table.md.
//!
//! - [`FlowTable`]: the table. [`FlowTable::apply`] / [`FlowTable::apply_burst`] run frames
//!   (parse metadata, bytes, receive time) through it and give each a [`FlowResult`]: the
//!   connection state ([`ct`]), the direction and the [`outcome`]; [`FlowTable::sweep`] removes
//!   expired flows and hands their [`FlowRecord`]s to flow export.
//! - [`key`]: the flow key of a frame and the bucket hash; [`tcp`]: Linux's TCP conntrack
//!   transition table as data; [`window`]: `strict` sequence-window checking.
//! - [`FlowConfig`] / [`Timeouts`]: config keys; [`testgen`]: connection traffic for tests and
//!   benches.
//! - [`rate`]: rate limits, per-key token buckets in a table of their own (the `rate_limit`
//!   stage; docs/rate-limit.md).
//! - [`ipfix`]: flow export to an IPFIX collector (RFC 7011), run by the control thread.

pub mod config;
pub mod ipfix;
pub mod key;
pub mod rate;
pub mod ring;
pub mod table;
pub mod tcp;
pub mod testgen;
pub mod window;

pub use config::{FlowConfig, FlowError, Timeouts};
pub use key::FlowKey;
pub use table::{
    bytes_needed, ct, ef, outcome, table_bytes, Ended, FlowCounters, FlowEntry, FlowRecord,
    FlowResult, FlowTable, FlowTableAbi, TcpWindow, BUCKET_ENTRIES, ENDED_CAP, ENTRY_SIZE,
    MAX_ENTRIES,
};
