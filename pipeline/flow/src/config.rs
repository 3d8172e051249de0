//! The flow table's options: its size, timeouts and strictness, as config keys (YAML through
//! serde, unknown keys refused), and its errors.

use serde::Deserialize;

use crate::tcp::st;

/// Idle timeouts in seconds, per protocol and state (docs/flow-table.md, "Aging"): an entry
/// whose last frame is this old is expired. Linux's nf_conntrack defaults, but 1 hour instead
/// of 5 days for an established TCP connection (a table of fixed size cannot keep dead
/// connections for days).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    pub tcp_syn_sent: u64,
    pub tcp_syn_recv: u64,
    pub tcp_established: u64,
    pub tcp_fin_wait: u64,
    pub tcp_close_wait: u64,
    pub tcp_last_ack: u64,
    pub tcp_time_wait: u64,
    pub tcp_close: u64,
    pub tcp_syn_sent2: u64,
    /// UDP before a reply was seen.
    pub udp_unreplied: u64,
    /// UDP once a reply was seen.
    pub udp_replied: u64,
    /// ICMP / ICMPv6 echo.
    pub icmp: u64,
    /// Any other IP protocol.
    pub other: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            tcp_syn_sent: 120,
            tcp_syn_recv: 60,
            tcp_established: 3600,
            tcp_fin_wait: 120,
            tcp_close_wait: 60,
            tcp_last_ack: 30,
            tcp_time_wait: 120,
            tcp_close: 10,
            tcp_syn_sent2: 120,
            udp_unreplied: 30,
            udp_replied: 120,
            icmp: 30,
            other: 600,
        }
    }
}

/// Timeout classes: the index of an entry's timeout in [`Timeouts::to_ns_array`]. TCP uses its
/// state (1..=9).
pub mod tclass {
    pub const UDP_UNREPLIED: usize = 10;
    pub const UDP_REPLIED: usize = 11;
    pub const ICMP: usize = 12;
    pub const OTHER: usize = 13;
    /// Length of the array.
    pub const COUNT: usize = 16;
}

impl Timeouts {
    /// (config key, seconds) of every timeout, in class order.
    pub fn named(&self) -> [(&'static str, u64); 13] {
        [
            ("tcp_syn_sent", self.tcp_syn_sent),
            ("tcp_syn_recv", self.tcp_syn_recv),
            ("tcp_established", self.tcp_established),
            ("tcp_fin_wait", self.tcp_fin_wait),
            ("tcp_close_wait", self.tcp_close_wait),
            ("tcp_last_ack", self.tcp_last_ack),
            ("tcp_time_wait", self.tcp_time_wait),
            ("tcp_close", self.tcp_close),
            ("tcp_syn_sent2", self.tcp_syn_sent2),
            ("udp_unreplied", self.udp_unreplied),
            ("udp_replied", self.udp_replied),
            ("icmp", self.icmp),
            ("other", self.other),
        ]
    }

    /// A zero timeout, or one too long for nanoseconds in a u64 (over 100 years), is an error
    /// that names the key.
    pub fn validate(&self) -> Result<(), FlowError> {
        for (key, v) in self.named() {
            if v == 0 {
                return Err(FlowError::Config {
                    key: format!("timeouts.{key}"),
                    message: "a timeout must be at least 1 second".into(),
                });
            }
            if v > MAX_TIMEOUT_S {
                return Err(FlowError::Config {
                    key: format!("timeouts.{key}"),
                    message: format!("{v} s is more than the limit of {MAX_TIMEOUT_S} s"),
                });
            }
        }
        Ok(())
    }

    /// The timeouts in ns by class (`pw_flow_table.timeout_ns`): TCP state s at s, then
    /// [`tclass`]; unused slots 0.
    pub fn to_ns_array(&self) -> [u64; tclass::COUNT] {
        let mut a = [0u64; tclass::COUNT];
        for (i, (_, v)) in self.named().iter().enumerate() {
            a[st::SYN_SENT as usize + i] = v.saturating_mul(1_000_000_000);
        }
        a
    }
}

/// The longest timeout: 100 years.
pub const MAX_TIMEOUT_S: u64 = 100 * 365 * 24 * 3600;

/// A flow table's config keys (`conntrack: { entries, strict, hash_seed, timeouts }`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    /// Entries per queue: a multiple of [`crate::BUCKET_ENTRIES`], at most
    /// [`crate::MAX_ENTRIES`].
    pub entries: u64,
    /// Sequence-window checking of TCP (docs/flow-table.md, "Strict").
    #[serde(default)]
    pub strict: bool,
    /// Seed of the bucket hash (0: a fixed table layout, for reproducible runs).
    #[serde(default)]
    pub hash_seed: u32,
    #[serde(default)]
    pub timeouts: Timeouts,
}

impl FlowConfig {
    /// Checks every value (the table's size included); errors name the key.
    pub fn validate(&self) -> Result<(), FlowError> {
        crate::table::check_capacity(self.entries)?;
        self.timeouts.validate()
    }
}

/// A flow table that cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// A bad config value: the key (`entries`, `timeouts.tcp_close`) and what is wrong.
    #[error("key `{key}`: {message}")]
    Config { key: String, message: String },
    /// The table's memory could not be had.
    #[error("a flow table of {entries} entries needs {bytes} bytes: {reason}")]
    Memory {
        entries: u64,
        bytes: u64,
        reason: String,
    },
    /// `apply_burst`'s slices differ in length.
    #[error("burst slices differ in length: {metas} metas, {frames} frames, {times} times, {out} results")]
    BurstLengths {
        metas: usize,
        frames: usize,
        times: usize,
        out: usize,
    },
}
