//! Classification tables (`classification.config`): each rule's `classtype` gives the alert's
//! `category` (the description) and its default `severity` (the priority).

use std::collections::HashMap;
use std::path::Path;

/// The table shipped with the crate: Suricata's standard entries.
pub const DEFAULT_CLASSIFICATION: &str = include_str!("../../data/classification.config");

/// Most entries a table may have (a bound on memory for a file the user names).
pub const MAX_CLASSES: usize = 4096;

/// One classtype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    pub description: String,
    pub priority: u32,
}

/// A classification table, by classtype name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classifications {
    by_name: HashMap<String, Class>,
}

/// A table error: which file, which line, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {msg}")]
pub struct ClassError {
    pub file: String,
    pub line: usize,
    pub msg: String,
}

impl Classifications {
    /// The shipped table.
    pub fn standard() -> Self {
        // The shipped file is checked by a test; an empty table would only lose categories.
        Self::parse("classification.config (built in)", DEFAULT_CLASSIFICATION).unwrap_or_default()
    }

    /// Reads a table from a file.
    pub fn load(path: &Path) -> Result<Self, ClassError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ClassError {
            file: file.clone(),
            line: 0,
            msg: format!("cannot read: {e}"),
        })?;
        Self::parse(&file, &text)
    }

    /// Parses `config classification: name,description,priority` lines; `#` comments and
    /// blank lines are skipped. A later entry for a name replaces an earlier one.
    pub fn parse(file: &str, text: &str) -> Result<Self, ClassError> {
        let mut by_name = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let err = |msg: String| ClassError {
                file: file.to_string(),
                line: i + 1,
                msg,
            };
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let rest = line
                .strip_prefix("config")
                .map(str::trim_start)
                .and_then(|r| r.strip_prefix("classification"))
                .map(str::trim_start)
                .and_then(|r| r.strip_prefix(':'))
                .ok_or_else(|| {
                    err("expected `config classification: name,description,priority`".into())
                })?;
            let mut parts = rest.splitn(3, ',').map(str::trim);
            let (Some(name), Some(desc), Some(prio)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(err(
                    "expected three comma-separated fields: name,description,priority".into(),
                ));
            };
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(err(format!("classtype name {name:?}: must be one word")));
            }
            if desc.is_empty() {
                return Err(err(format!("classtype {name}: empty description")));
            }
            let priority = prio
                .parse::<u32>()
                .ok()
                .filter(|p| *p >= 1)
                .ok_or_else(|| {
                    err(format!(
                        "classtype {name}: priority {prio:?}: must be an integer >= 1"
                    ))
                })?;
            by_name.insert(
                name.to_string(),
                Class {
                    description: desc.to_string(),
                    priority,
                },
            );
            if by_name.len() > MAX_CLASSES {
                return Err(err(format!("more than {MAX_CLASSES} classtypes")));
            }
        }
        Ok(Classifications { by_name })
    }

    pub fn get(&self, classtype: &str) -> Option<&Class> {
        self.by_name.get(classtype)
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}
