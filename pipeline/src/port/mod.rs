//! Ports: sources and sinks of frames. Backends: `pcap` (file replay and record), `gen`
//! (built-in traffic generator); `dpdk` and `doca` arrive behind cargo features.

use crate::burst::Burst;

#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod gen;
pub mod pace;
pub mod pcap;

/// What an RX call produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxStatus {
    /// `n` frames were appended to the burst.
    Frames(usize),
    /// Nothing now (rate limit, live source); call again.
    Idle,
    /// The source is exhausted (end of file after the last loop, generator count reached).
    End,
}

/// Errors of a port: they name the file and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Format { path: String, reason: String },
    #[error("{0}")]
    Config(String),
}

/// A receive side: appends up to `max` frames to `burst` (without clearing it).
pub trait RxPort: Send {
    fn rx_burst(&mut self, burst: &mut Burst, max: usize) -> Result<RxStatus, PortError>;
    /// Human-readable name for logs and the summary (e.g. `pcap:in.pcap`).
    fn name(&self) -> &str;
    /// Total frames this port will produce when known (for a progress bar).
    fn expected_frames(&self) -> Option<u64> {
        None
    }
    /// The backend's own counters as (name, value) pairs, for the summary and metrics (a DPDK
    /// port: ethdev stats, xstats and its drop counters); empty when it keeps none.
    fn port_counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

/// A transmit side: takes frames, returns how many it accepted.
pub trait TxPort: Send {
    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError>;
    /// Flushes buffered output (pcap writer).
    fn flush(&mut self) -> Result<(), PortError>;
    fn name(&self) -> &str;
}
