//! The exporter's configuration and its checks: every error names its key.

use super::encode::MIN_MESSAGE_LEN;
use serde::Deserialize;
use std::net::{SocketAddr, ToSocketAddrs};

/// IPFIX exporter configuration (docs/ipfix.md).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct IpfixConfig {
    /// The collector, `host:port` (UDP); an IPv6 address as `[addr]:port`.
    pub collector: String,
    /// Observation domain id of every message.
    #[serde(default)]
    pub observation_domain: u32,
    /// Seconds between template resends.
    #[serde(default = "default_template_refresh_s")]
    pub template_refresh_s: u64,
    /// Messages between template resends.
    #[serde(default = "default_template_refresh_messages")]
    pub template_refresh_messages: u32,
    /// MTU of the path to the collector, bytes: a message and its IP and UDP headers fit in it.
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// Records that may wait for export; more are dropped and counted.
    #[serde(default = "default_queue")]
    pub queue: usize,
}

fn default_template_refresh_s() -> u64 {
    600
}
fn default_template_refresh_messages() -> u32 {
    256
}
fn default_mtu() -> u32 {
    1400
}
fn default_queue() -> usize {
    65536
}

/// The most records the queue may hold (its memory is allocated up front, about 100 bytes a
/// record).
pub const MAX_QUEUE: usize = 1 << 22;

impl IpfixConfig {
    /// A configuration with the defaults for everything but the collector.
    pub fn new(collector: impl Into<String>) -> Self {
        IpfixConfig {
            collector: collector.into(),
            observation_domain: 0,
            template_refresh_s: default_template_refresh_s(),
            template_refresh_messages: default_template_refresh_messages(),
            mtu: default_mtu(),
            queue: default_queue(),
        }
    }

    /// Checks the values and resolves the collector: its address and the longest message the
    /// MTU allows.
    pub fn resolve(&self) -> Result<(SocketAddr, usize), IpfixError> {
        let addr = resolve_collector(&self.collector)?;
        if self.template_refresh_s == 0 {
            return Err(bad(
                "template_refresh_s",
                "0: must be at least 1 second".into(),
            ));
        }
        if self.template_refresh_messages == 0 {
            return Err(bad(
                "template_refresh_messages",
                "0: must be at least 1".into(),
            ));
        }
        if self.queue == 0 || self.queue > MAX_QUEUE {
            return Err(bad(
                "queue",
                format!("{}: must be 1 to {MAX_QUEUE} records", self.queue),
            ));
        }
        // IP and UDP headers of the datagram to the collector.
        let overhead = if addr.is_ipv4() { 20 + 8 } else { 40 + 8 };
        let min = MIN_MESSAGE_LEN + overhead;
        let mtu = self.mtu as usize;
        if mtu < min || mtu > 65535 {
            return Err(bad(
                "mtu",
                format!(
                    "{}: must be {min} to 65535 bytes (an IPFIX message of at least \
                     {MIN_MESSAGE_LEN} bytes, to hold the templates or one IPv6 record, plus \
                     {overhead} bytes of IP and UDP headers)",
                    self.mtu
                ),
            ));
        }
        Ok((addr, mtu - overhead))
    }
}

fn bad(key: &'static str, msg: String) -> IpfixError {
    IpfixError::Config { key, msg }
}

/// `host:port` to a socket address: a literal address, else the first address the resolver
/// gives.
fn resolve_collector(s: &str) -> Result<SocketAddr, IpfixError> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        if a.port() == 0 {
            return Err(bad(
                "collector",
                format!("{s:?}: port 0 is not a port to send to"),
            ));
        }
        return Ok(a);
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(bad("collector", format!("{s:?}: expected host:port")));
    };
    if host.is_empty() {
        return Err(bad("collector", format!("{s:?}: the host is empty")));
    }
    if host.contains(':') && !host.starts_with('[') {
        return Err(bad(
            "collector",
            format!("{s:?}: write an IPv6 address in brackets, [addr]:port"),
        ));
    }
    let port: u16 = match port.parse() {
        Ok(p) if p != 0 => p,
        _ => {
            return Err(bad(
                "collector",
                format!("{s:?}: bad port {port:?}: expected 1 to 65535"),
            ))
        }
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let mut addrs = (host, port)
        .to_socket_addrs()
        .map_err(|e| bad("collector", format!("{s:?}: cannot resolve {host:?}: {e}")))?;
    addrs
        .next()
        .ok_or_else(|| bad("collector", format!("{s:?}: {host:?} has no address")))
}

/// Errors of the IPFIX exporter's setup.
#[derive(Debug, thiserror::Error)]
pub enum IpfixError {
    /// A configuration value is wrong: the key and why.
    #[error("ipfix.{key}: {msg}")]
    Config {
        /// The configuration key.
        key: &'static str,
        /// What is wrong with its value.
        msg: String,
    },
    /// The exporter's UDP socket could not be opened.
    #[error("ipfix.collector: cannot open a UDP socket to {addr}: {source}")]
    Socket {
        /// The collector's address.
        addr: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
}
