//! The route file (YAML, serde-saphyr): `routes: [{ prefix, via, port }, ...]`, with errors
//! that name the file, line, column and key. Format: [`crate::route`].

use std::collections::HashMap;
use std::io::Read;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};
use serde_saphyr::Spanned;

use super::{BuildError, Prefix, Route, RouteTable};
use crate::error::{Location, RuleError};

/// Largest route file read (a full Internet table, ~1.2M routes, is ~70 MB of flow-style YAML;
/// the bound keeps a wrong path such as /dev/zero from exhausting memory).
pub const MAX_ROUTE_FILE_BYTES: u64 = 128 << 20;
/// Most routes one file may hold.
pub const MAX_ROUTES: usize = 2 << 20;

fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

type Leaf = Option<Spanned<Option<String>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileY {
    #[serde(default, deserialize_with = "present")]
    routes: Option<Spanned<Option<Vec<Spanned<RouteY>>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteY {
    #[serde(default, deserialize_with = "present")]
    prefix: Leaf,
    #[serde(default, deserialize_with = "present")]
    via: Leaf,
    #[serde(default, deserialize_with = "present")]
    port: Leaf,
}

/// A parsed and validated route file.
#[derive(Clone, Debug)]
pub struct RouteFile {
    pub file: PathBuf,
    /// In file order.
    pub routes: Vec<Route>,
    /// Where each route starts, and where its `port` value is (for errors found later, such
    /// as a port name the pipeline config does not have).
    locations: Vec<(Location, Location)>,
}

impl RouteFile {
    /// Reads (at most [`MAX_ROUTE_FILE_BYTES`]) and validates a route file.
    pub fn load(path: impl AsRef<Path>) -> Result<RouteFile, RuleError> {
        let path = path.as_ref();
        let f = std::fs::File::open(path).map_err(|e| RuleError::io(path, &e))?;
        let mut bytes = Vec::new();
        f.take(MAX_ROUTE_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| RuleError::io(path, &e))?;
        if bytes.len() as u64 > MAX_ROUTE_FILE_BYTES {
            return Err(RuleError::new(
                Location::new(path, 0, 0),
                "",
                format!("route file larger than {MAX_ROUTE_FILE_BYTES} bytes"),
            ));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            let (line, column) = line_col(e.as_bytes(), e.utf8_error().valid_up_to());
            RuleError::new(Location::new(path, line, column), "", "not UTF-8 text")
        })?;
        RouteFile::parse(&text, path)
    }

    /// Parses and validates route-file text; `file` names it in errors.
    pub fn parse(text: &str, file: impl AsRef<Path>) -> Result<RouteFile, RuleError> {
        let file = file.as_ref();
        if text.len() as u64 > MAX_ROUTE_FILE_BYTES {
            return Err(RuleError::new(
                Location::new(file, 0, 0),
                "",
                format!("route file larger than {MAX_ROUTE_FILE_BYTES} bytes"),
            ));
        }
        let doc: Option<FileY> =
            serde_saphyr::from_str(text).map_err(|e| saphyr_error(&e, text, file))?;
        let at = |l: &serde_saphyr::Location| {
            Location::new(file, l.line() as usize, l.column() as usize)
        };
        let list = match doc.and_then(|d| d.routes) {
            None => {
                return Err(RuleError::new(
                    Location::new(file, 1, 1),
                    "routes",
                    "missing: a route file is `routes: [{ prefix, via, port }, ...]`",
                ))
            }
            Some(Spanned { value: None, .. }) => Vec::new(),
            Some(Spanned { value: Some(v), .. }) => v,
        };
        if list.len() > MAX_ROUTES {
            return Err(RuleError::new(
                at(&list[MAX_ROUTES].referenced),
                "routes",
                format!("more than {MAX_ROUTES} routes"),
            ));
        }
        let mut routes = Vec::with_capacity(list.len());
        let mut locations = Vec::with_capacity(list.len());
        let mut seen: HashMap<Prefix, usize> = HashMap::with_capacity(list.len());
        for r in &list {
            let here = at(&r.referenced);
            let leaf = |l: &Leaf, key: &str| -> Result<(String, Location), RuleError> {
                match l {
                    None => Err(RuleError::new(here.clone(), key, "missing")),
                    Some(s) => match s.value.as_deref().map(str::trim) {
                        Some(t) if !t.is_empty() => Ok((t.to_string(), at(&s.referenced))),
                        _ => Err(RuleError::new(at(&s.referenced), key, "needs a value")),
                    },
                }
            };
            let (p, ploc) = leaf(&r.value.prefix, "prefix")?;
            let prefix = parse_prefix(&p).map_err(|m| RuleError::new(ploc.clone(), "prefix", m))?;
            let (v, vloc) = leaf(&r.value.via, "via")?;
            let via = parse_mac(&v).ok_or_else(|| {
                RuleError::new(
                    vloc,
                    "via",
                    format!("bad MAC address `{v}` (expected six hex bytes, aa:bb:cc:dd:ee:ff)"),
                )
            })?;
            let (port, port_loc) = leaf(&r.value.port, "port")?;
            if let Some(first) = seen.insert(prefix, routes.len()) {
                let line = locations
                    .get(first)
                    .map_or(0, |(l, _): &(Location, Location)| l.line);
                return Err(RuleError::new(
                    ploc,
                    "prefix",
                    format!("duplicate prefix {prefix} (first at line {line})"),
                ));
            }
            routes.push(Route { prefix, via, port });
            locations.push((here, port_loc));
        }
        Ok(RouteFile {
            file: file.to_path_buf(),
            routes,
            locations,
        })
    }

    /// Builds the lookup tables.
    pub fn build(&self) -> Result<RouteTable, RuleError> {
        RouteTable::build(&self.routes).map_err(|e: BuildError| {
            RuleError::new(Location::new(&self.file, 0, 0), "routes", e.to_string())
        })
    }

    /// Checks every route's output port against the ports the pipeline has, with an error at
    /// the first unknown one.
    pub fn check_ports(&self, known: &[&str]) -> Result<(), RuleError> {
        for (r, (_, loc)) in self.routes.iter().zip(&self.locations) {
            if !known.contains(&r.port.as_str()) {
                return Err(RuleError::new(
                    loc.clone(),
                    "port",
                    format!("unknown port `{}` (ports: {})", r.port, known.join(", ")),
                ));
            }
        }
        Ok(())
    }

    /// Where route `i` starts in the file.
    pub fn location(&self, i: usize) -> Location {
        self.locations
            .get(i)
            .map_or_else(|| Location::new(&self.file, 0, 0), |l| l.0.clone())
    }
}

/// `a.b.c.d/len` or `x:y::/len`, host bits 0.
fn parse_prefix(t: &str) -> Result<Prefix, String> {
    let (a, l) = t
        .split_once('/')
        .ok_or_else(|| format!("`{t}`: expected ADDRESS/LENGTH, e.g. 10.0.0.0/8"))?;
    let (a, l) = (a.trim(), l.trim());
    let len: u8 = l
        .parse()
        .map_err(|_| format!("`{t}`: bad prefix length `{l}`"))?;
    if let Ok(addr) = a.parse::<Ipv4Addr>() {
        if len > 32 {
            return Err(format!("`{t}`: an IPv4 prefix length is 0..=32"));
        }
        let bits = u32::from(addr);
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        if bits & !mask != 0 {
            let net = Ipv4Addr::from(bits & mask);
            return Err(format!("`{t}`: host bits set (the network is {net}/{len})"));
        }
        return Ok(Prefix::V4 { addr, len });
    }
    if let Ok(addr) = a.parse::<Ipv6Addr>() {
        if len > 128 {
            return Err(format!("`{t}`: an IPv6 prefix length is 0..=128"));
        }
        let bits = u128::from(addr);
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - len)
        };
        if bits & !mask != 0 {
            let net = Ipv6Addr::from(bits & mask);
            return Err(format!("`{t}`: host bits set (the network is {net}/{len})"));
        }
        return Ok(Prefix::V6 { addr, len });
    }
    Err(format!("`{t}`: bad IPv4 / IPv6 address `{a}`"))
}

pub(crate) fn parse_mac(t: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut n = 0;
    for part in t.split([':', '-']) {
        if n == 6 || part.is_empty() || part.len() > 2 {
            return None;
        }
        out[n] = u8::from_str_radix(part, 16).ok()?;
        n += 1;
    }
    (n == 6).then_some(out)
}

/// 1-based line and column of byte `at`.
fn line_col(b: &[u8], at: usize) -> (usize, usize) {
    let before = &b[..at.min(b.len())];
    let line = before.iter().filter(|c| **c == b'\n').count() + 1;
    let col = before.iter().rev().take_while(|c| **c != b'\n').count() + 1;
    (line, col)
}

/// A serde-saphyr error as a [`RuleError`]: its place, and the key (from the error where it
/// names one, else the last `key:` on that line).
fn saphyr_error(e: &serde_saphyr::Error, text: &str, file: &Path) -> RuleError {
    use serde_saphyr::Error as E;
    let inner = e.without_snippet();
    let (line, column) = inner
        .location()
        .map(|l| (l.line() as usize, l.column() as usize))
        .unwrap_or((0, 0));
    let field = match inner {
        E::SerdeUnknownField { field, .. } => field.clone(),
        E::SerdeMissingField { field, .. } => (*field).to_string(),
        E::DuplicateMappingKey { key: Some(k), .. } => k.clone(),
        _ => text
            .lines()
            .nth(line.saturating_sub(1))
            .map(key_of_line)
            .unwrap_or_default(),
    };
    let mut message = inner.to_string();
    if let Some(at) = message.rfind(" at line ") {
        message.truncate(at);
    }
    RuleError::new(Location::new(file, line, column), field, message)
}

/// The identifier before the last `key:` of one line ("" when none).
fn key_of_line(l: &str) -> String {
    crate::error::last_key(l, |c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert_eq!(
            parse_prefix("10.0.0.0/8"),
            Ok(Prefix::V4 {
                addr: Ipv4Addr::new(10, 0, 0, 0),
                len: 8
            })
        );
        assert!(parse_prefix("0.0.0.0/0").is_ok());
        assert!(parse_prefix("::/0").is_ok());
        assert!(parse_prefix("2001:db8::/32").is_ok());
        assert!(parse_prefix("10.0.0.1/8")
            .unwrap_err()
            .contains("10.0.0.0/8"));
        assert!(parse_prefix("2001:db8::1/64")
            .unwrap_err()
            .contains("2001:db8::/64"));
        for bad in [
            "10.0.0.0",
            "10.0.0.0/33",
            "::/129",
            "10.0.0/8",
            "x/8",
            "10.0.0.0/-1",
            "10.0.0.0/8/9",
        ] {
            assert!(parse_prefix(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_mac("02:00:00:00:00:0a"), Some([2, 0, 0, 0, 0, 10]));
        assert_eq!(parse_mac("02:00:00:00:00"), None);
        assert_eq!(line_col(b"ab\ncd", 4), (2, 2));
    }

    /// The twin of the steering and config parsers' bug: the key of an error was sliced at a
    /// byte offset `+ 1` past the last non-key char, inside a multi-byte one (a panic).
    #[test]
    fn an_error_line_with_multi_byte_chars_names_its_key_without_panicking() {
        assert_eq!(key_of_line("  -בame: ptp"), "ame");
        assert_eq!(key_of_line("  é: x"), "");
        for text in [
            "routes:\n  - { prefix: 10.0.0.0/8, port: a }\n  -בprefix: [1]\n",
            "routes:\n  - prefix: 10.0.0.0/8\n    בport: [a, b]\n",
            "routes:\n  - prefix: 10.0.0.0/8\n    port: 日本: [1]\n",
            "routes: ב: [x]\n",
            "routes:\n  - prefix: [ב]\n",
        ] {
            let e = RouteFile::parse(text, "r.yaml").expect_err(text);
            assert!(e.to_string().starts_with("r.yaml:"), "{e}");
        }
    }
}
