//! Errors and warnings for rule files, shared by the ACL and steering parsers: every problem names
//! the file, the 1-based line and column (0 when unknown) and the field it is about.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where in a rule file something is. `line`/`column` are 1-based; 0 means unknown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
}

impl Location {
    pub fn new(file: impl AsRef<Path>, line: usize, column: usize) -> Self {
        Location {
            file: file.as_ref().to_path_buf(),
            line,
            column,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}", self.line)?;
            if self.column > 0 {
                write!(f, ":{}", self.column)?;
            }
        }
        Ok(())
    }
}

/// A bad rule file: where, which field (key), and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{loc}: {}{message}", field_prefix(.field))]
pub struct RuleError {
    pub loc: Location,
    /// The key / field the problem is about (`"dst_port"`, `"actions"`); empty when none applies.
    pub field: String,
    pub message: String,
}

fn field_prefix(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("field `{field}`: ")
    }
}

impl RuleError {
    pub fn new(loc: Location, field: impl Into<String>, message: impl Into<String>) -> Self {
        RuleError {
            loc,
            field: field.into(),
            message: message.into(),
        }
    }

    /// An I/O problem with the file as a whole (no line).
    pub fn io(file: impl AsRef<Path>, err: &std::io::Error) -> Self {
        RuleError::new(Location::new(file, 0, 0), "", err.to_string())
    }
}

/// A non-fatal finding (e.g. a shadowed rule), with the same addressing as [`RuleError`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleWarning {
    pub loc: Location,
    pub field: String,
    pub message: String,
}

impl fmt::Display for RuleWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: warning: {}{}",
            self.loc,
            field_prefix(&self.field),
            self.message
        )
    }
}

/// The key before the last `: ` (or a `:` ending the line) of one line of YAML, for an error
/// the parser reports without naming its key: the chars just before that colon for which
/// `key_char` holds ("" when none). Safe on any text: the key starts after the last char that
/// cannot be in a key, which may be several bytes long (user text is not ASCII: a byte offset
/// `+ 1` there would slice inside it).
pub fn last_key(line: &str, key_char: fn(char) -> bool) -> String {
    let mut best = String::new();
    let bytes = line.as_bytes();
    for (i, _) in line.match_indices(':') {
        if bytes.get(i + 1).is_some_and(|b| *b != b' ') {
            continue;
        }
        let start = line[..i]
            .char_indices()
            .rfind(|&(_, c)| !key_char(c))
            .map_or(0, |(s, c)| s + c.len_utf8());
        if start < i {
            best = line[start..i].to_string();
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_file_line_column_and_field() {
        let e = RuleError::new(
            Location::new("r.yaml", 3, 7),
            "dst_port",
            "inverted range 90-80",
        );
        assert_eq!(
            e.to_string(),
            "r.yaml:3:7: field `dst_port`: inverted range 90-80"
        );
        let w = RuleWarning {
            loc: Location::new("r.yaml", 9, 0),
            field: String::new(),
            message: "rule 4 is shadowed by rule 1".into(),
        };
        assert_eq!(
            w.to_string(),
            "r.yaml:9: warning: rule 4 is shadowed by rule 1"
        );
    }

    #[test]
    fn last_key_after_multi_byte_chars() {
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        assert_eq!(last_key("  port: a", ident), "port");
        assert_eq!(last_key("  - { prefix: 10.0.0.0/8, via: x }", ident), "via");
        assert_eq!(last_key("  -בame: ptp", ident), "ame");
        assert_eq!(last_key("ב:", ident), "");
        assert_eq!(last_key("日本語キー: 1", ident), "");
        assert_eq!(last_key("x日: 1 😀y: 2", ident), "y");
        assert_eq!(last_key("no colon here", ident), "");
        assert_eq!(last_key("url: http://x", ident), "url");
    }
}
