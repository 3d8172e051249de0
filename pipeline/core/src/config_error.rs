//! The error of a bad config or a bad stage option: the file, line, column and key, and what is
//! wrong. Every layer that parses its part of a config returns it.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_saphyr::Spanned;

/// A bad config: where and what.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based; 0 when unknown.
    pub line: u32,
    pub column: u32,
    /// The key the problem is about (`ports[1].pcap.rx.loops`, `output.port`); empty when none.
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if !self.key.is_empty() {
            write!(f, ": key `{}`", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl ConfigError {
    /// At the place `span` points to.
    pub fn at<T>(
        file: &Path,
        span: &Spanned<T>,
        key: impl Into<String>,
        msg: impl Into<String>,
    ) -> Self {
        ConfigError {
            file: file.to_path_buf(),
            line: span.referenced.line() as u32,
            column: span.referenced.column() as u32,
            key: key.into(),
            message: msg.into(),
        }
    }

    /// About the whole file (no line known).
    pub fn whole(file: &Path, key: impl Into<String>, msg: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_path_buf(),
            line: 0,
            column: 0,
            key: key.into(),
            message: msg.into(),
        }
    }
}
