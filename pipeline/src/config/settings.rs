//! The `metrics:` and `control:` sections of the config.
//!
//! ```yaml
//! metrics:
//!   listen: 127.0.0.1:9108   # where /metrics is served; loopback by default
//!   enabled: true            # false: no HTTP endpoint at all
//!   rule_series_cap: 64      # rules 0..cap get their own `rule` series, the rest `rule="other"`
//!   max_connections: 64      # open at once; one more closes the connection idle the longest
//!   idle_timeout_ms: 30000   # a connection with no byte moved either way this long is closed
//!   header_timeout_ms: 5000  # a request's header must be complete this long after it starts
//! control:
//!   watch_rules: false       # also reload when the ACL rule file's mtime changes
//!   watch_interval_ms: 1000  # how often the rule file is looked at
//!   on_stall: restart        # restart | exit: what the watchdog does with a stalled GPU queue
//!   stall_after_ms: 2000     # heartbeat unchanged this long with work queued = stalled
//!   drain_timeout_ms: 10000  # SIGTERM/SIGINT: longest wait for in-flight bursts, then exit 3
//!   linger: false            # after the input ends, keep serving /metrics until SIGTERM/SIGINT
//!   allow_rule_shrink: false # let a reload publish 0 rules / routes, or < half of those in force
//! ```

use std::net::SocketAddr;

use serde::Deserialize;

/// `metrics:` — the Prometheus endpoint.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Serve `/metrics` at all. Default true.
    pub enabled: bool,
    /// `host:port` to listen on. Default `127.0.0.1:9108` (loopback: exposing it is a choice).
    pub listen: String,
    /// ACL rules with their own `rule` label value (rule index < cap); hits of the others are
    /// summed under `rule="other"`, so a 100K-rule set cannot explode the series count.
    /// Default 64.
    pub rule_series_cap: usize,
    /// Connections served at once (1 ..= 4096); one more closes the connection idle the longest,
    /// so a fresh scrape always gets through. Default 64.
    pub max_connections: usize,
    /// A connection that moves no byte either way this long is closed (100 ..= 3600000):
    /// idle sockets, and clients that send requests without reading the answers, are let go.
    /// Default 30000.
    pub idle_timeout_ms: u64,
    /// A request's header must be complete this long after it starts (100 ..= 600000).
    /// Default 5000.
    pub header_timeout_ms: u64,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            enabled: true,
            listen: "127.0.0.1:9108".into(),
            rule_series_cap: 64,
            max_connections: 64,
            idle_timeout_ms: 30_000,
            header_timeout_ms: 5_000,
        }
    }
}

impl MetricsConfig {
    /// The parsed listen address, or a message saying what is wrong with it.
    pub fn listen_addr(&self) -> Result<SocketAddr, String> {
        self.listen
            .parse()
            .map_err(|e| format!("`{}` is not a host:port address: {e}", self.listen))
    }
}

/// What the watchdog does with a GPU queue whose kernel stopped advancing its heartbeat while
/// work is queued.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OnStall {
    /// Restart the queue's kernel (counted in `pktwarp_gpu_kernel_restarts_total`).
    #[default]
    Restart,
    /// Exit non-zero (status 4) so the supervisor (systemd, Kubernetes) restarts the daemon.
    Exit,
}

/// `control:` — reload, watchdog and shutdown behaviour.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlConfig {
    /// Reload when the ACL rule file's modification time changes (SIGHUP always reloads).
    /// Default false.
    pub watch_rules: bool,
    /// Rule-file poll period in milliseconds (>= 50). Default 1000.
    pub watch_interval_ms: u64,
    /// Watchdog action. Default `restart`.
    pub on_stall: OnStall,
    /// A heartbeat unchanged for this long while work is queued is a stall (>= 10). Default 2000.
    pub stall_after_ms: u64,
    /// After SIGTERM / SIGINT, the longest wait for in-flight bursts before exiting with status 3
    /// (>= 1). Default 10000.
    pub drain_timeout_ms: u64,
    /// When every receiving port has ended (a finite pcap or gen input), keep running, serving
    /// `/metrics` and handling signals, until SIGTERM / SIGINT; then print the summary. Lets
    /// Prometheus scrape the final totals. Default false (exit when the input ends).
    pub linger: bool,
    /// Let a reload publish an empty table, or one with fewer than half the entries in force:
    /// the ACL rule set, and each `route` stage's routes (a half-written or truncated rule or
    /// route file looks like that). Without it such a reload is refused with a warning naming
    /// the file and both counts, counted as a failed reload, and everything in force stays.
    /// Default false.
    pub allow_rule_shrink: bool,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            watch_rules: false,
            watch_interval_ms: 1000,
            on_stall: OnStall::Restart,
            stall_after_ms: 2000,
            drain_timeout_ms: 10_000,
            linger: false,
            allow_rule_shrink: false,
        }
    }
}

/// Checks both sections; `Err((key, message))` names the offending key.
pub fn validate(m: &MetricsConfig, c: &ControlConfig) -> Result<(), (&'static str, String)> {
    if m.enabled {
        m.listen_addr().map_err(|e| ("metrics.listen", e))?;
    }
    range("metrics.max_connections", m.max_connections as u64, 1, 4096)?;
    range("metrics.idle_timeout_ms", m.idle_timeout_ms, 100, 3_600_000)?;
    range(
        "metrics.header_timeout_ms",
        m.header_timeout_ms,
        100,
        600_000,
    )?;
    // Upper bounds keep `Instant + Duration` from overflowing (a panic) and name a sane range.
    range(
        "control.watch_interval_ms",
        c.watch_interval_ms,
        50,
        86_400_000,
    )?;
    range("control.stall_after_ms", c.stall_after_ms, 10, 86_400_000)?;
    range(
        "control.drain_timeout_ms",
        c.drain_timeout_ms,
        1,
        86_400_000,
    )?;
    Ok(())
}

fn range(key: &'static str, v: u64, lo: u64, hi: u64) -> Result<(), (&'static str, String)> {
    if v < lo || v > hi {
        return Err((key, format!("must be {lo} ..= {hi}, got {v}")));
    }
    Ok(())
}
