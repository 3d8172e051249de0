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

/// Largest route file read: [`MAX_ROUTES`] routes of the README's flow style (~66 bytes an IPv4
/// route, ~80 an IPv6 one; a full Internet table, ~1.2M IPv4 routes, is ~80 MB) fit; the
/// bound keeps a wrong path such as /dev/zero from exhausting memory.
pub const MAX_ROUTE_FILE_BYTES: u64 = 256 << 20;
/// Most routes one file may hold (2,097,152): bounds the parsed table's memory (~100 bytes a
/// route while parsing) whatever the file holds.
pub const MAX_ROUTES: usize = 2 << 20;

fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

type Leaf = Option<Spanned<Option<String>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileY<const MAX: usize> {
    #[serde(default, deserialize_with = "present")]
    routes: Option<Spanned<Option<RouteList<MAX>>>>,
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

/// A 1-based line and column (0: unknown); the file is the [`RouteFile`]'s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pos {
    line: u32,
    column: u32,
}

impl Pos {
    fn of(l: &serde_saphyr::Location) -> Pos {
        Pos {
            line: l.line() as u32,
            column: l.column() as u32,
        }
    }

    fn at(self, file: &Path) -> Location {
        Location::new(file, self.line as usize, self.column as usize)
    }
}

/// A bad route: where, which key, what.
type Bad = (Pos, &'static str, String);

/// The `routes:` list of at most `MAX` routes, each route checked as it is read, so a full
/// table never exists as parsed YAML nodes (a few hundred bytes a route), only as [`Route`]s.
#[derive(Default)]
struct RouteList<const MAX: usize> {
    routes: Vec<Route>,
    /// Where each route starts, and where its `port` value is.
    locations: Vec<(Pos, Pos)>,
    /// The first bad route; the routes after it are read but not kept.
    bad: Option<Bad>,
}

/// The start of the message of the error that stops a file at [`MAX_ROUTES`] routes (a
/// serde error, told apart by this text).
const OVER_LIMIT: &str = "the route file has more than ";

/// Refuses the element it is asked for: the list already holds the most routes allowed.
struct OverLimit(usize);

impl<'de> serde::de::DeserializeSeed<'de> for OverLimit {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, _: D) -> Result<(), D::Error> {
        Err(serde::de::Error::custom(format!(
            "{OVER_LIMIT}{} routes, the most a route file may hold",
            self.0
        )))
    }
}

impl<'de, const MAX: usize> Deserialize<'de> for RouteList<MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const MAX: usize>;
        impl<'de, const MAX: usize> serde::de::Visitor<'de> for V<MAX> {
            type Value = RouteList<MAX>;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of routes `{ prefix, via, port }`")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RouteList<MAX>, A::Error> {
                let mut list = RouteList::default();
                let mut seen: HashMap<Prefix, u32> = HashMap::new();
                let mut n = 0usize;
                loop {
                    if n == MAX {
                        // A next element is one too many; its location comes with the error.
                        return match seq.next_element_seed(OverLimit(MAX))? {
                            Some(()) | None => Ok(list),
                        };
                    }
                    if list.bad.is_some() {
                        // Past the first bad route: read to the end, keep nothing (a YAML
                        // syntax error further on is still the error, as when the whole file
                        // was parsed before any route was checked).
                        match seq.next_element::<serde::de::IgnoredAny>()? {
                            Some(_) => {}
                            None => return Ok(list),
                        }
                    } else {
                        match seq.next_element::<Spanned<RouteY>>()? {
                            Some(r) => {
                                if let Err(b) = list.push(&r, &mut seen) {
                                    list.bad = Some(b);
                                }
                            }
                            None => return Ok(list),
                        }
                    }
                    n += 1;
                }
            }
        }
        d.deserialize_seq(V::<MAX>)
    }
}

impl<const MAX: usize> RouteList<MAX> {
    /// Checks one route and keeps it.
    fn push(&mut self, r: &Spanned<RouteY>, seen: &mut HashMap<Prefix, u32>) -> Result<(), Bad> {
        let here = Pos::of(&r.referenced);
        let leaf = |l: &Leaf, key: &'static str| -> Result<(String, Pos), Bad> {
            match l {
                None => Err((here, key, "missing".into())),
                Some(s) => match s.value.as_deref().map(str::trim) {
                    Some(t) if !t.is_empty() => Ok((t.to_string(), Pos::of(&s.referenced))),
                    _ => Err((Pos::of(&s.referenced), key, "needs a value".into())),
                },
            }
        };
        let (p, ploc) = leaf(&r.value.prefix, "prefix")?;
        let prefix = parse_prefix(&p).map_err(|m| (ploc, "prefix", m))?;
        let (v, vloc) = leaf(&r.value.via, "via")?;
        let via = parse_mac(&v).ok_or_else(|| {
            (
                vloc,
                "via",
                format!("bad MAC address `{v}` (expected six hex bytes, aa:bb:cc:dd:ee:ff)"),
            )
        })?;
        let (port, port_loc) = leaf(&r.value.port, "port")?;
        if let Some(first) = seen.insert(prefix, self.routes.len() as u32) {
            let line = self.locations.get(first as usize).map_or(0, |l| l.0.line);
            return Err((
                ploc,
                "prefix",
                format!("duplicate prefix {prefix} (first at line {line})"),
            ));
        }
        self.routes.push(Route { prefix, via, port });
        self.locations.push((here, port_loc));
        Ok(())
    }
}

/// A parsed and validated route file.
#[derive(Clone, Debug)]
pub struct RouteFile {
    pub file: PathBuf,
    /// In file order.
    pub routes: Vec<Route>,
    /// Where each route starts, and where its `port` value is (for errors found later, such
    /// as a port name the pipeline config does not have).
    locations: Vec<(Pos, Pos)>,
}

impl RouteFile {
    /// Reads (at most [`MAX_ROUTE_FILE_BYTES`]) and validates a route file.
    pub fn load(path: impl AsRef<Path>) -> Result<RouteFile, RuleError> {
        let path = path.as_ref();
        let f = std::fs::File::open(path).map_err(|e| RuleError::io(path, &e))?;
        // A regular file too large is refused unread; a device (no length) is read to the bound.
        let len = f.metadata().map_or(0, |m| m.len());
        if len > MAX_ROUTE_FILE_BYTES {
            return Err(too_large(path));
        }
        let mut bytes = Vec::with_capacity(len as usize);
        f.take(MAX_ROUTE_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| RuleError::io(path, &e))?;
        if bytes.len() as u64 > MAX_ROUTE_FILE_BYTES {
            return Err(too_large(path));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            let (line, column) = line_col(e.as_bytes(), e.utf8_error().valid_up_to());
            RuleError::new(Location::new(path, line, column), "", "not UTF-8 text")
        })?;
        RouteFile::parse(&text, path)
    }

    /// Parses and validates route-file text; `file` names it in errors.
    pub fn parse(text: &str, file: impl AsRef<Path>) -> Result<RouteFile, RuleError> {
        parse_within::<MAX_ROUTES>(text, file.as_ref())
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
                    loc.at(&self.file),
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
            .map_or(Pos::default(), |l| l.0)
            .at(&self.file)
    }
}

fn too_large(file: &Path) -> RuleError {
    RuleError::new(
        Location::new(file, 0, 0),
        "",
        format!("route file larger than {MAX_ROUTE_FILE_BYTES} bytes, the most read"),
    )
}

/// YAML nodes (scalars, mappings, sequences) of one route: its mapping, 3 keys, 3 values.
const NODES_PER_ROUTE: usize = 7;

/// The YAML parser's budget for a route file of `len` bytes (at most [`MAX_ROUTE_FILE_BYTES`])
/// and at most `max` routes: the nodes of `max + 1` routes (the one past the limit is reached,
/// to say so), and events and scalar bytes in proportion to the file (comments are events
/// too). So a hostile file costs at most `max` [`Route`]s of memory and the time to read its
/// bytes. serde-saphyr's default of 250,000 nodes stopped a file at 35,713 routes.
fn budget(len: usize, max: usize) -> serde_saphyr::Budget {
    let mut b = serde_saphyr::Budget::default();
    b.max_nodes = max.saturating_add(1).saturating_mul(NODES_PER_ROUTE) + 64;
    b.max_events = b.max_events.max(len.saturating_mul(2) + 64);
    b.max_total_scalar_bytes = b.max_total_scalar_bytes.max(len);
    b.max_reader_input_bytes = Some(MAX_ROUTE_FILE_BYTES as usize);
    b
}

/// [`RouteFile::parse`] with a limit of `MAX` routes.
fn parse_within<const MAX: usize>(text: &str, file: &Path) -> Result<RouteFile, RuleError> {
    if text.len() as u64 > MAX_ROUTE_FILE_BYTES {
        return Err(too_large(file));
    }
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget(text.len(), MAX));
    let doc: Option<FileY<MAX>> = serde_saphyr::from_str_with_options(text, options)
        .map_err(|e| saphyr_error(&e, text, file, MAX))?;
    let list = match doc.and_then(|d| d.routes) {
        None => {
            return Err(RuleError::new(
                Location::new(file, 1, 1),
                "routes",
                "missing: a route file is `routes: [{ prefix, via, port }, ...]`",
            ))
        }
        Some(Spanned { value: None, .. }) => RouteList::default(),
        Some(Spanned { value: Some(v), .. }) => v,
    };
    if let Some((pos, key, message)) = list.bad {
        return Err(RuleError::new(pos.at(file), key, message));
    }
    Ok(RouteFile {
        file: file.to_path_buf(),
        routes: list.routes,
        locations: list.locations,
    })
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
/// The route limit and the parser's budget are the file's size limits, so their errors name
/// the limit (key `routes`), not the key on the line where the parser stopped.
fn saphyr_error(e: &serde_saphyr::Error, text: &str, file: &Path, max: usize) -> RuleError {
    use serde_saphyr::Error as E;
    let inner = e.without_snippet();
    let (line, column) = inner
        .location()
        .map(|l| (l.line() as usize, l.column() as usize))
        .unwrap_or((0, 0));
    let here = Location::new(file, line, column);
    match inner {
        E::Message { msg, .. } if msg.starts_with(OVER_LIMIT) => {
            return RuleError::new(here, "routes", msg.clone());
        }
        E::Budget { breach, .. } => {
            return RuleError::new(
                here,
                "routes",
                format!(
                    "more YAML than {max} routes (the most a route file may hold) take: the \
                     parser's budget for them ran out ({breach:?} in {} bytes)",
                    text.len()
                ),
            );
        }
        _ => {}
    }
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
    RuleError::new(here, field, message)
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

    fn routes(n: usize) -> String {
        let mut t = String::from("routes:\n");
        for i in 0..n {
            t += &format!(
                "  - {{ prefix: 10.{}.{}.0/24, via: '02:00:00:00:00:01', port: a }}\n",
                i / 256,
                i % 256
            );
        }
        t
    }

    /// The route limit, at a limit of 1000: 1000 routes load, the 1001st is refused at its
    /// line with the key `routes` and the limit named; YAML past what 1001 routes take (a bad
    /// route's successor holding a long list) runs out the parser's budget, an error that
    /// names the limit too, not the key on the line where the parser stopped.
    #[test]
    fn the_route_limit_and_the_parsers_budget_name_the_limit() {
        let f = parse_within::<1000>(&routes(1000), Path::new("r.yaml")).unwrap();
        assert_eq!(f.routes.len(), 1000);
        let e = parse_within::<1000>(&routes(1001), Path::new("r.yaml")).unwrap_err();
        assert_eq!((e.loc.line, e.field.as_str()), (1002, "routes"), "{e}");
        assert!(e.loc.column > 0, "{e}");
        assert!(
            e.to_string().starts_with("r.yaml:1002:")
                && e.message
                    .contains("more than 1000 routes, the most a route file may hold"),
            "{e}"
        );
        // The one past the limit is refused whatever it holds.
        let e =
            parse_within::<1000>(&(routes(1000) + "  - [x]\n"), Path::new("r.yaml")).unwrap_err();
        assert_eq!((e.loc.line, e.field.as_str()), (1002, "routes"), "{e}");
        let list: Vec<String> = (0..8000).map(|i| i.to_string()).collect();
        let text = format!(
            "routes:\n  - {{ prefix: 10.0.0.1/8, via: '02:00:00:00:00:01', port: a }}\n  - \
             {{ prefix: 11.0.0.0/8, via: '02:00:00:00:00:01', port: [{}] }}\n",
            list.join(", ")
        );
        let e = parse_within::<1000>(&text, Path::new("r.yaml")).unwrap_err();
        assert_eq!(e.field, "routes", "{e}");
        assert!(
            e.message
                .contains("1000 routes (the most a route file may hold)")
                && e.message.contains("budget"),
            "{e}"
        );
        // Under the default limit, that file's first error is its first bad route.
        let e = RouteFile::parse(&text, "r.yaml").unwrap_err();
        assert_eq!((e.loc.line, e.field.as_str()), (2, "prefix"), "{e}");
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
