//! The alert log's configuration (`eve:`) and its checks: every error names its key.

use super::classify::{ClassError, Classifications};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Most alerts the queue may hold.
pub const MAX_QUEUE: usize = 1 << 20;
/// Most payload bytes an alert line may carry.
pub const MAX_PAYLOAD: usize = 65_535;
/// Most payload bytes the queue may hold (`queue` x `payload_max` with `payload` on).
pub const MAX_QUEUED_PAYLOAD: usize = 256 << 20;

/// `eve:` in the pipeline configuration (docs/inspect-alerts.md).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EveConfig {
    /// The log file, appended to (created with mode 0640 when absent).
    pub path: PathBuf,
    /// Alerts that may wait for the writer; more are dropped and counted.
    #[serde(default = "default_queue")]
    pub queue: usize,
    /// Add `payload` (base64) and `payload_printable` to each line.
    #[serde(default)]
    pub payload: bool,
    /// Payload bytes kept per alert (Suricata's `payload-buffer-size` default, 4 KiB).
    #[serde(default = "default_payload_max")]
    pub payload_max: usize,
    /// A `classification.config` to use instead of the built-in table.
    #[serde(default)]
    pub classification: Option<PathBuf>,
}

fn default_queue() -> usize {
    65_536
}

fn default_payload_max() -> usize {
    4096
}

/// A configuration error: the key (`eve.<key>`) and what is wrong with its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("eve.{key}: {msg}")]
pub struct EveConfigError {
    pub key: &'static str,
    pub msg: String,
}

fn bad(key: &'static str, msg: String) -> EveConfigError {
    EveConfigError { key, msg }
}

impl EveConfig {
    /// The defaults for everything but the path.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        EveConfig {
            path: path.into(),
            queue: default_queue(),
            payload: false,
            payload_max: default_payload_max(),
            classification: None,
        }
    }

    /// Checks the values: ranges, and a path whose folder exists and that is not a folder.
    pub fn check(&self) -> Result<(), EveConfigError> {
        if self.queue == 0 || self.queue > MAX_QUEUE {
            return Err(bad(
                "queue",
                format!("{}: must be 1 to {MAX_QUEUE} alerts", self.queue),
            ));
        }
        if self.payload_max == 0 || self.payload_max > MAX_PAYLOAD {
            return Err(bad(
                "payload_max",
                format!("{}: must be 1 to {MAX_PAYLOAD} bytes", self.payload_max),
            ));
        }
        if self.payload && self.queue.saturating_mul(self.payload_max) > MAX_QUEUED_PAYLOAD {
            return Err(bad(
                "queue",
                format!(
                    "{} alerts of up to {} payload bytes (eve.payload_max) may hold {} MiB: \
                     at most {} MiB; lower eve.queue or eve.payload_max",
                    self.queue,
                    self.payload_max,
                    self.queue.saturating_mul(self.payload_max) >> 20,
                    MAX_QUEUED_PAYLOAD >> 20
                ),
            ));
        }
        check_path(&self.path)?;
        if let Some(c) = &self.classification {
            if !c.is_file() {
                return Err(bad(
                    "classification",
                    format!("{}: not a readable file", c.display()),
                ));
            }
        }
        Ok(())
    }
}

impl EveConfig {
    /// The classification table: `eve.classification` when set, else the built-in one.
    pub fn classifications(&self) -> Result<Classifications, ClassError> {
        match &self.classification {
            Some(p) => Classifications::load(p),
            None => Ok(Classifications::standard()),
        }
    }
}

fn check_path(p: &Path) -> Result<(), EveConfigError> {
    let shown = p.display();
    if p.as_os_str().is_empty() {
        return Err(bad("path", "empty: name the log file".into()));
    }
    if p.is_dir() {
        return Err(bad("path", format!("{shown}: is a folder, not a file")));
    }
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(bad(
            "path",
            format!("{shown}: folder {} does not exist", parent.display()),
        ));
    }
    Ok(())
}
