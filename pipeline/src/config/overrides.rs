//! `--set KEY=VALUE`: changes to a config given on the command line (`pktwarp run cfg.yaml --set
//! executor.kind=gpu --set ports.0.gen.count=1000000`), applied to the YAML document before it
//! is read, so one shipped config serves many runs without copies edited by hand or by `sed`.
//!
//! KEY is a dotted path: mapping keys by name, sequence entries by index (`pipeline.2.acl.rules`).
//! A missing mapping key is added (with the mappings above it); a sequence index must exist, or be
//! the sequence's length to append. VALUE is YAML (`5`, `true`, `gpu`, `[parse, count]`,
//! `{ sample: 100 }`). The changed document is read exactly as a file would be, so every check
//! applies; its errors carry no line (the text is not the file's) and name the overrides.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// Longest override accepted (key and value), so a command line cannot feed the parser without
/// bound.
const MAX_OVERRIDE_BYTES: usize = 64 << 10;

/// Deepest key path accepted.
const MAX_DEPTH: usize = 32;

/// One `KEY=VALUE` from the command line.
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    path: Vec<String>,
    value: Node,
    raw: String,
}

impl Override {
    /// Parses `KEY=VALUE`; the error says what is wrong with it.
    pub fn parse(s: &str) -> Result<Override, String> {
        if s.len() > MAX_OVERRIDE_BYTES {
            return Err(format!(
                "--set: longer than {MAX_OVERRIDE_BYTES} bytes ({} bytes)",
                s.len()
            ));
        }
        let Some((key, value)) = s.split_once('=') else {
            return Err(format!(
                "--set `{s}`: expected KEY=VALUE (e.g. executor.kind=gpu)"
            ));
        };
        let key = key.trim();
        let path: Vec<String> = key.split('.').map(str::to_string).collect();
        if key.is_empty() || path.iter().any(|p| p.is_empty()) {
            return Err(format!(
                "--set `{s}`: the key `{key}` has an empty part (keys are dotted paths: a.b.0.c)"
            ));
        }
        if path.len() > MAX_DEPTH {
            return Err(format!(
                "--set `{s}`: the key is {} levels deep (at most {MAX_DEPTH})",
                path.len()
            ));
        }
        let value = if value.trim().is_empty() {
            Node::Null
        } else {
            serde_saphyr::from_str::<Node>(value).map_err(|e| {
                format!(
                    "--set `{s}`: the value is not YAML: {}",
                    e.without_snippet().to_string().trim()
                )
            })?
        };
        Ok(Override {
            path,
            value,
            raw: s.to_string(),
        })
    }

    /// The override as written.
    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

impl fmt::Display for Override {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// `text` (a whole config document) with `overrides` applied in order, as YAML text.
pub fn apply(text: &str, overrides: &[Override]) -> Result<String, String> {
    let mut doc: Node = serde_saphyr::from_str(text).map_err(|e| {
        format!(
            "cannot apply --set: the config is not YAML: {}",
            e.without_snippet().to_string().trim()
        )
    })?;
    for o in overrides {
        set(&mut doc, &o.path, o.value.clone()).map_err(|e| format!("--set `{}`: {e}", o.raw))?;
    }
    serde_saphyr::to_string(&doc).map_err(|e| format!("cannot apply --set: {e}"))
}

fn set(mut node: &mut Node, path: &[String], value: Node) -> Result<(), String> {
    for (depth, part) in path.iter().enumerate() {
        let here = path[..depth].join(".");
        let at = if here.is_empty() {
            "the document".to_string()
        } else {
            format!("`{here}`")
        };
        let last = depth + 1 == path.len();
        if matches!(node, Node::Null) {
            *node = Node::Map(Vec::new());
        }
        node = match node {
            Node::Map(entries) => {
                let i = match entries.iter().position(|(k, _)| k == part) {
                    Some(i) => i,
                    None => {
                        entries.push((part.clone(), Node::Null));
                        entries.len() - 1
                    }
                };
                &mut entries[i].1
            }
            Node::Seq(items) => {
                let len = items.len();
                let i: usize = part.parse().map_err(|_| {
                    format!("{at} is a list: `{part}` must be an index (0..={len})")
                })?;
                if i > len {
                    return Err(format!(
                        "{at} has {len} entries: index {i} is past its end (at most {len}, to append)"
                    ));
                }
                if i == len {
                    items.push(Node::Null);
                }
                &mut items[i]
            }
            other => {
                return Err(format!(
                    "{at} is a {} (`{}`), not a mapping or a list: it has no `{part}`",
                    other.kind(),
                    other.short()
                ))
            }
        };
        if last {
            *node = value;
            return Ok(());
        }
    }
    Err("empty key".into())
}

/// A YAML document as a tree that keeps the order of mapping keys (the config's stage list and
/// its maps read back in the order written).
#[derive(Clone, Debug, PartialEq)]
enum Node {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    fn kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "boolean",
            Node::Int(_) | Node::Float(_) => "number",
            Node::Str(_) => "string",
            Node::Seq(_) => "list",
            Node::Map(_) => "mapping",
        }
    }

    fn short(&self) -> String {
        let s = match self {
            Node::Null => "null".to_string(),
            Node::Bool(b) => b.to_string(),
            Node::Int(i) => i.to_string(),
            Node::Float(f) => f.to_string(),
            Node::Str(s) => s.clone(),
            Node::Seq(_) | Node::Map(_) => String::new(),
        };
        s.chars().take(40).collect()
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Null => s.serialize_unit(),
            Node::Bool(b) => s.serialize_bool(*b),
            Node::Int(i) => s.serialize_i128(*i),
            Node::Float(f) => s.serialize_f64(*f),
            Node::Str(v) => s.serialize_str(v),
            Node::Seq(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Map(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Node, E> {
        Ok(Node::Int(v))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
        i128::try_from(v)
            .map(Node::Int)
            .map_err(|_| E::custom(format!("integer {v} is too large")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = a.next_element()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
        let mut entries: Vec<(String, Node)> = Vec::new();
        while let Some((k, v)) = a.next_entry::<KeyText, Node>()? {
            entries.push((k.0, v));
        }
        Ok(Node::Map(entries))
    }
}

/// A mapping key as text (`80: x` and `true: x` keep their spelling as keys).
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<KeyText, D::Error> {
        match Node::deserialize(d)? {
            Node::Str(s) => Ok(KeyText(s)),
            Node::Int(i) => Ok(KeyText(i.to_string())),
            Node::Bool(b) => Ok(KeyText(b.to_string())),
            Node::Float(f) => Ok(KeyText(f.to_string())),
            Node::Null => Ok(KeyText("~".into())),
            other => Err(de::Error::custom(format!(
                "a {} as a mapping key is not supported by --set",
                other.kind()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(s: &str) -> Override {
        Override::parse(s).unwrap()
    }

    const DOC: &str = "a:\n  b: 1\n  c: [x, y]\nlist:\n  - { k: 1 }\n  - { k: 2 }\nz: keep\n";

    #[test]
    fn sets_existing_keys_and_list_entries_and_keeps_order() {
        let out = apply(DOC, &[o("a.b=5"), o("list.1.k=9"), o("a.c.0=q")]).unwrap();
        let back: Node = serde_saphyr::from_str(&out).unwrap();
        let want: Node = serde_saphyr::from_str(
            "a:\n  b: 5\n  c: [q, y]\nlist:\n  - { k: 1 }\n  - { k: 9 }\nz: keep\n",
        )
        .unwrap();
        assert_eq!(back, want, "{out}");
    }

    #[test]
    fn adds_missing_keys_and_appends() {
        let out = apply(DOC, &[o("new.deep.x=true"), o("list.2={ k: 3 }")]).unwrap();
        let back: Node = serde_saphyr::from_str(&out).unwrap();
        let Node::Map(top) = back else { panic!() };
        assert_eq!(top.last().unwrap().0, "new", "new keys go last: {out}");
        assert!(out.contains("k: 3"), "{out}");
    }

    #[test]
    fn values_are_yaml() {
        let out = apply("a: 1\n", &[o("a=[parse, count]"), o("b='0800'"), o("c=")]).unwrap();
        let back: Node = serde_saphyr::from_str(&out).unwrap();
        assert_eq!(
            back,
            Node::Map(vec![
                (
                    "a".into(),
                    Node::Seq(vec![Node::Str("parse".into()), Node::Str("count".into())])
                ),
                ("b".into(), Node::Str("0800".into())),
                ("c".into(), Node::Null),
            ])
        );
    }

    #[test]
    fn bad_overrides_say_what_is_wrong() {
        for (s, want) in [
            ("novalue", "expected KEY=VALUE"),
            ("a..b=1", "empty part"),
            ("=1", "empty part"),
            ("a=[1, 2", "not YAML"),
        ] {
            let e = Override::parse(s).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
        let long = format!("a={}", "x".repeat(MAX_OVERRIDE_BYTES));
        assert!(Override::parse(&long).unwrap_err().contains("longer than"));
        let deep = format!("{}=1", vec!["k"; MAX_DEPTH + 1].join("."));
        assert!(Override::parse(&deep).unwrap_err().contains("levels deep"));
        for (s, want) in [
            ("list.x=1", "`list` is a list: `x` must be an index"),
            ("list.5=1", "`list` has 2 entries: index 5 is past its end"),
            ("z.y=1", "`z` is a string (`keep`), not a mapping or a list"),
            ("a.b.c=1", "`a.b` is a number"),
        ] {
            let e = apply(DOC, &[o(s)]).unwrap_err();
            assert!(e.contains(want) && e.contains(s), "{s}: {e}");
        }
        assert!(apply("a: [1\n", &[o("a=1")])
            .unwrap_err()
            .contains("not YAML"));
    }
}
