//! Replay pacing shared by the `pcap` and `gen` ports: a rate in frames or bits per second, the
//! capture's own timing, or as fast as possible.

use std::time::Instant;

use serde::Deserialize;

/// How fast a port produces frames.
///
/// YAML: `rate: unlimited` (default), `rate: capture`, `rate: {pps: 1000000}`,
/// `rate: {bps: 10e9}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Rate {
    /// As fast as the consumer takes frames.
    #[default]
    Unlimited,
    /// Frames per second (> 0).
    Pps(f64),
    /// Bits per second of frame bytes (`wire_len * 8`; preamble, inter-frame gap and FCS not
    /// counted) (> 0).
    Bps(f64),
    /// The capture's own inter-frame timing (`pcap` port only).
    Capture,
}

impl Rate {
    /// Checks the value; `what` names the option in the error (e.g. `ports.in.rate`).
    pub fn validate(&self, what: &str) -> Result<(), String> {
        match *self {
            Rate::Pps(v) | Rate::Bps(v) if !(v.is_finite() && v > 0.0) => {
                Err(format!("{what}: rate must be a positive number, got {v}"))
            }
            _ => Ok(()),
        }
    }
}

/// Admits frames at a [`Rate`]. The clock starts at the first call to [`Pacer::now_ns`].
#[derive(Debug)]
pub struct Pacer {
    rate: Rate,
    start: Option<Instant>,
    frames: u64,
    bits: f64,
}

impl Pacer {
    pub fn new(rate: Rate) -> Self {
        Pacer {
            rate,
            start: None,
            frames: 0,
            bits: 0.0,
        }
    }

    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// Nanoseconds since the first call (0 on the first call). Read once per burst.
    pub fn now_ns(&mut self) -> u64 {
        let start = *self.start.get_or_insert_with(Instant::now);
        u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether a frame of `wire_len` bytes, due `due_ns` after the start under capture timing,
    /// may go now (`now_ns` from [`Pacer::now_ns`]); if so it is accounted as sent.
    pub fn admit(&mut self, now_ns: u64, wire_len: u32, due_ns: u64) -> bool {
        let secs = now_ns as f64 * 1e-9;
        let ok = match self.rate {
            Rate::Unlimited => true,
            // The first frame goes at t = 0, frame k at t = k / pps.
            Rate::Pps(pps) => (self.frames as f64) <= secs * pps,
            Rate::Bps(bps) => self.bits <= secs * bps,
            Rate::Capture => due_ns <= now_ns,
        };
        if ok {
            self.frames += 1;
            self.bits += f64::from(wire_len) * 8.0;
        }
        ok
    }
}
