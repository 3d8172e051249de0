//! The `metrics:` and `control:` sections of the config.
//!
//! ```yaml
//! metrics:
//!   listen: 127.0.0.1:9108   # where /metrics is served; loopback by default
//!   enabled: true            # false: no HTTP endpoint at all
//!   rule_series_cap: 64      # rules 0..cap get their own `rule` series, the rest `rule="other"`
//! control:
//!   watch_rules: false       # also reload when the ACL rule file's mtime changes
//!   watch_interval_ms: 1000  # how often the rule file is looked at
//!   on_stall: restart        # restart | exit: what the watchdog does with a stalled GPU queue
//!   stall_after_ms: 2000     # heartbeat unchanged this long with work queued = stalled
//!   drain_timeout_ms: 10000  # SIGTERM/SIGINT: longest wait for in-flight bursts, then exit 3
//!   linger: false            # after the input ends, keep serving /metrics until SIGTERM/SIGINT
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
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            enabled: true,
            listen: "127.0.0.1:9108".into(),
            rule_series_cap: 64,
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
        }
    }
}

/// Checks both sections; `Err((key, message))` names the offending key.
pub fn validate(m: &MetricsConfig, c: &ControlConfig) -> Result<(), (&'static str, String)> {
    if m.enabled {
        m.listen_addr().map_err(|e| ("metrics.listen", e))?;
    }
    if c.watch_interval_ms < 50 {
        return Err((
            "control.watch_interval_ms",
            format!("must be >= 50, got {}", c.watch_interval_ms),
        ));
    }
    if c.stall_after_ms < 10 {
        return Err((
            "control.stall_after_ms",
            format!("must be >= 10, got {}", c.stall_after_ms),
        ));
    }
    if c.drain_timeout_ms == 0 {
        return Err(("control.drain_timeout_ms", "must be >= 1".into()));
    }
    Ok(())
}
