//! The YAML ACL rule format.
//!
//! ```yaml
//! rules:
//!   - name: no-telnet          # optional
//!     proto: tcp               # tcp|udp|icmp|icmpv6|sctp|gre|esp|NUMBER|VALUE/MASK
//!     dst_port: 23             # PORT | LO-HI | any
//!     action: drop             # pass | drop | mirror | to-host | {mark: ID} | [verdict, {mark: ID}]
//!   - src: 10.0.0.0/8          # IPv4 or IPv6 prefix (host bits must be zero)
//!     dst: 2001:db8::/32
//!     src_port: 1024-65535
//!     tcp_flags: syn,!ack      # names (fin syn rst psh ack urg ece cwr), `!` = must be clear; or VALUE/MASK
//!     dscp: 46                 # 0..63
//!     vlan: 100                # 0..4095, or `untagged`
//!     port: 0                  # ingress port
//!     ct: [established, related]  # connection state(s) from the `conntrack` stage
//!     action: [mirror, {mark: 7}]
//!   - dst_port: 5060
//!     action: pass
//!     set: { dscp: 46, dst_mac: '02:00:00:00:00:01', port: port1 }   # rewrites (any of the three)
//! ```
//! `set:` rewrites a matching frame whose verdict is not drop (so `action: drop` with `set:` is
//! an error): `dscp` 0..=63 (ECN kept, IPv4 checksum updated), `dst_mac` the destination MAC,
//! `port` the output port by name, one of the config's ports with a transmit side (checked when
//! the `acl` stage is built: [`super::rewrite::resolve_ports`]). See [`super::rewrite`].
//! `ct:` is one connection state or a list (`untracked new established related invalid closing
//! closed`, [`super::ct`]); the pipeline must run a `conntrack` stage before the `acl` stage.
//! Fields left out are wildcards. Unknown keys, bad values, inverted ranges, prefixes with host
//! bits set, mixed address families and conflicting verdicts are errors naming the file, line,
//! column and key.
//!
//! Size: the YAML parser works within a budget of [`YAML_EVENT_BUDGET`] parse events (each
//! scalar, mapping and sequence start and end is one; a one-line rule of three fields takes 8),
//! which bounds the memory and time a hostile file can cost. That is about 100,000 short rules;
//! a larger file is refused with an error that says so. Large rule sets belong in the ClassBench
//! format (`format: classbench`: one rule per line, no such budget), which also loads several
//! times faster.

use super::classbench::parse_prefix;
use super::{AclAction, AclRewrite, AclRule, Family, Masked, PortRange, Verdict};
use crate::abi::VLAN_NONE;
use crate::error::{Location, RuleError};
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct YFile {
    rules: Vec<Spanned<YRule>>,
}

#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum Scalar {
    Int(i64),
    Str(String),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Scalar::Int(i) => i.to_string(),
            Scalar::Str(s) => s.trim().to_string(),
        }
    }
}

#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum YActionItem {
    Word(String),
    Map(BTreeMap<String, i64>),
}

#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum YAction {
    One(YActionItem),
    Many(Vec<YActionItem>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct YRule {
    name: Option<Spanned<String>>,
    src: Option<Spanned<Scalar>>,
    dst: Option<Spanned<Scalar>>,
    src_port: Option<Spanned<Scalar>>,
    dst_port: Option<Spanned<Scalar>>,
    proto: Option<Spanned<Scalar>>,
    dscp: Option<Spanned<Scalar>>,
    tcp_flags: Option<Spanned<Scalar>>,
    vlan: Option<Spanned<Scalar>>,
    port: Option<Spanned<Scalar>>,
    ct: Option<Spanned<YCt>>,
    action: Spanned<YAction>,
    set: Option<Spanned<YSet>>,
}

/// A rule's `ct:`: one state (or `a,b`) or a list of them.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum YCt {
    One(String),
    Many(Vec<String>),
}

/// A rule's `set:` (rewrite actions).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct YSet {
    dscp: Option<Spanned<Scalar>>,
    dst_mac: Option<Spanned<Scalar>>,
    port: Option<Spanned<Scalar>>,
}

fn loc_of<T>(path: &Path, s: &Spanned<T>) -> Location {
    Location::new(
        path,
        s.referenced.line() as usize,
        s.referenced.column() as usize,
    )
}

/// serde-saphyr's default budget of parse events per document (its `Budget::max_events`).
pub const YAML_EVENT_BUDGET: usize = 1_000_000;

/// Parses a YAML rule file.
pub fn parse(path: &Path, text: &str) -> Result<Vec<AclRule>, RuleError> {
    parse_within(path, text, YAML_EVENT_BUDGET)
}

/// [`parse`] with a budget of `max_events` parse events.
fn parse_within(path: &Path, text: &str, max_events: usize) -> Result<Vec<AclRule>, RuleError> {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_events = max_events;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    let f: YFile = serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        if e.to_string().contains("budget") {
            return RuleError::new(
                Location::new(path, 0, 0),
                "",
                format!(
                    "the file is larger than the YAML parser's budget of {max_events} parse \
                     events (about {} short rules; {e}): write a rule set this large in the \
                     ClassBench format (`format: classbench`, one rule per line)",
                    max_events / 8
                ),
            );
        }
        let (line, col) = e
            .location()
            .map_or((0, 0), |l| (l.line() as usize, l.column() as usize));
        let msg = e.to_string();
        // serde names the offending key between backticks ("unknown field `foo`").
        let field = msg
            .split('`')
            .nth(1)
            .filter(|_| msg.contains("field"))
            .unwrap_or("")
            .to_string();
        // Drop serde-saphyr's own "error: line L column C: " prefix: the location is ours.
        let first = msg.lines().next().unwrap_or("");
        let first = match (first.strip_prefix("error: line "), first.find(": ")) {
            (Some(rest), Some(_)) if rest.contains(" column ") => {
                rest.split_once(": ").map_or(first, |(_, m)| m).to_string()
            }
            _ => first.to_string(),
        };
        RuleError::new(Location::new(path, line, col), field, first)
    })?;
    f.rules.iter().map(|r| convert(path, r)).collect()
}

fn convert(path: &Path, sr: &Spanned<YRule>) -> Result<AclRule, RuleError> {
    let y = &sr.value;
    let mut r = AclRule {
        loc: loc_of(path, sr),
        ..AclRule::any()
    };
    let err =
        |s: &Spanned<Scalar>, field: &str, msg: String| RuleError::new(loc_of(path, s), field, msg);
    r.name = y.name.as_ref().map(|n| n.value.clone());
    let mut fam = Family::Any;
    for (field, v) in [("src", &y.src), ("dst", &y.dst)] {
        let Some(v) = v else { continue };
        let t = v.value.text();
        if t == "any" {
            continue;
        }
        let (f, p) = parse_prefix(&t).map_err(|m| err(v, field, m))?;
        if !t.contains('/') && t.parse::<std::net::IpAddr>().is_err() {
            return Err(err(v, field, format!("bad prefix `{t}`")));
        }
        // Host bits set means the author meant something else: refuse rather than guess.
        let raw = parse_prefix(&format!(
            "{}/{}",
            t.split('/').next().unwrap_or(""),
            if f == Family::V4 { 32 } else { 128 }
        ))
        .map_err(|m| err(v, field, m))?
        .1;
        if raw.addr != p.addr {
            return Err(err(
                v,
                field,
                format!("prefix `{t}` has bits set past its length"),
            ));
        }
        if fam != Family::Any && fam != f {
            return Err(err(
                v,
                field,
                "src and dst are of different address families".into(),
            ));
        }
        fam = f;
        if field == "src" {
            r.src = p;
        } else {
            r.dst = p;
        }
    }
    r.family = fam;
    for (field, v, slot) in [
        ("src_port", &y.src_port, &mut r.src_port),
        ("dst_port", &y.dst_port, &mut r.dst_port),
    ] {
        let Some(v) = v else { continue };
        *slot = parse_range(&v.value.text()).map_err(|m| err(v, field, m))?;
    }
    if let Some(v) = &y.proto {
        r.proto = parse_proto(&v.value.text()).map_err(|m| err(v, "proto", m))?;
    }
    if let Some(v) = &y.dscp {
        let t = v.value.text();
        let d = parse_uint(&t)
            .filter(|&d| d <= 63)
            .ok_or_else(|| err(v, "dscp", format!("bad DSCP `{t}` (0..=63)")))?;
        r.dscp = Masked::<u8>::new(d as u8, 0x3F);
    }
    if let Some(v) = &y.tcp_flags {
        r.tcp_flags = parse_tcp_flags(&v.value.text()).map_err(|m| err(v, "tcp_flags", m))?;
        if r.proto.is_any() {
            r.proto = Masked::<u8>::exact(6);
        } else if r.proto != Masked::<u8>::exact(6) {
            return Err(err(v, "tcp_flags", "tcp_flags needs proto tcp".into()));
        }
    }
    if let Some(v) = &y.vlan {
        let t = v.value.text();
        r.vlan = if t == "untagged" || t == "none" {
            Masked::<u16>::exact(VLAN_NONE)
        } else {
            let id = parse_uint(&t).filter(|&d| d <= 4095).ok_or_else(|| {
                err(
                    v,
                    "vlan",
                    format!("bad VLAN id `{t}` (0..=4095 or untagged)"),
                )
            })?;
            Masked::<u16>::exact(id as u16)
        };
    }
    if let Some(v) = &y.port {
        let t = v.value.text();
        let p = parse_uint(&t)
            .filter(|&d| d < 0xFFFF)
            .ok_or_else(|| err(v, "port", format!("bad ingress port `{t}`")))?;
        r.port_id = Masked::<u16>::exact(p as u16);
    }
    if let Some(c) = &y.ct {
        let names: Vec<&str> = match &c.value {
            YCt::One(n) => vec![n.as_str()],
            YCt::Many(v) => v.iter().map(String::as_str).collect(),
        };
        r.ct =
            super::ct::parse_states(names).map_err(|m| RuleError::new(loc_of(path, c), "ct", m))?;
    }
    r.action = parse_action(&y.action.value)
        .map_err(|m| RuleError::new(loc_of(path, &y.action), "action", m))?;
    if let Some(set) = &y.set {
        r.set = Some(parse_set(path, set)?);
        if r.action.verdict == Verdict::Drop {
            return Err(RuleError::new(
                loc_of(path, set),
                "set",
                "a rule with `action: drop` rewrites nothing (a dropped frame is not sent)",
            ));
        }
    }
    Ok(r)
}

fn parse_set(path: &Path, set: &Spanned<YSet>) -> Result<AclRewrite, RuleError> {
    let y = &set.value;
    let err = |s: &Spanned<Scalar>, key: &str, msg: String| {
        RuleError::new(loc_of(path, s), format!("set.{key}"), msg)
    };
    let mut rw = AclRewrite::default();
    if let Some(v) = &y.dscp {
        let t = v.value.text();
        let d = parse_uint(&t)
            .filter(|&d| d <= 63)
            .ok_or_else(|| err(v, "dscp", format!("bad DSCP `{t}` (0..=63)")))?;
        rw.dscp = Some(d as u8);
    }
    if let Some(v) = &y.dst_mac {
        let t = v.value.text();
        let m = crate::route::file::parse_mac(&t).ok_or_else(|| {
            err(
                v,
                "dst_mac",
                format!("bad MAC address `{t}` (six hex bytes, e.g. 02:00:00:00:00:01)"),
            )
        })?;
        rw.dst_mac = Some(m);
    }
    if let Some(v) = &y.port {
        let t = v.value.text();
        if t.is_empty() {
            return Err(err(v, "port", "empty port name".into()));
        }
        rw.port = Some((t, loc_of(path, v)));
    }
    if rw == AclRewrite::default() {
        return Err(RuleError::new(
            loc_of(path, set),
            "set",
            "nothing to set: give `dscp`, `dst_mac` or `port`",
        ));
    }
    Ok(rw)
}

fn parse_uint(t: &str) -> Option<u32> {
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else {
        t.parse().ok()
    }
}

fn parse_range(t: &str) -> Result<PortRange, String> {
    if t == "any" {
        return Ok(PortRange::ANY);
    }
    let (a, b) = t.split_once('-').unwrap_or((t, t));
    let p = |s: &str| {
        parse_uint(s.trim())
            .filter(|&v| v <= 65535)
            .ok_or_else(|| format!("bad port `{}` (0..=65535)", s.trim()))
    };
    let (lo, hi) = (p(a)?, p(b)?);
    if lo > hi {
        return Err(format!("inverted port range {lo}-{hi}"));
    }
    Ok(PortRange {
        lo: lo as u16,
        hi: hi as u16,
    })
}

fn parse_proto(t: &str) -> Result<Masked<u8>, String> {
    let named = match t.to_ascii_lowercase().as_str() {
        "any" => return Ok(Masked::<u8>::ANY),
        "icmp" => Some(1),
        "tcp" => Some(6),
        "udp" => Some(17),
        "gre" => Some(47),
        "esp" => Some(50),
        "icmpv6" => Some(58),
        "sctp" => Some(132),
        _ => None,
    };
    if let Some(n) = named {
        return Ok(Masked::<u8>::exact(n));
    }
    let (v, m) = t.split_once('/').unwrap_or((t, "0xff"));
    let v = parse_uint(v).filter(|&x| x <= 255);
    let m = parse_uint(m).filter(|&x| x <= 255);
    match (v, m) {
        (Some(v), Some(m)) if v & !m == 0 => Ok(Masked::<u8>::new(v as u8, m as u8)),
        (Some(_), Some(_)) => Err(format!("protocol `{t}` has value bits outside its mask")),
        _ => Err(format!("bad protocol `{t}` (name, 0..=255 or VALUE/MASK)")),
    }
}

fn parse_tcp_flags(t: &str) -> Result<Masked<u8>, String> {
    if let Some((v, m)) = t.split_once('/') {
        let v = parse_uint(v).filter(|&x| x <= 255);
        let m = parse_uint(m).filter(|&x| x <= 255);
        return match (v, m) {
            (Some(v), Some(m)) if v & !m == 0 => Ok(Masked::<u8>::new(v as u8, m as u8)),
            _ => Err(format!(
                "bad TCP flags `{t}` (VALUE/MASK with value inside mask)"
            )),
        };
    }
    let mut out = Masked::<u8>::ANY;
    for part in t.split([',', '|', ' ']).filter(|p| !p.is_empty()) {
        let (neg, name) = match part.strip_prefix('!') {
            Some(n) => (true, n),
            None => (false, part),
        };
        let bit: u8 = match name.to_ascii_lowercase().as_str() {
            "fin" => 0x01,
            "syn" => 0x02,
            "rst" => 0x04,
            "psh" => 0x08,
            "ack" => 0x10,
            "urg" => 0x20,
            "ece" => 0x40,
            "cwr" => 0x80,
            _ => {
                return Err(format!(
                    "unknown TCP flag `{name}` (fin syn rst psh ack urg ece cwr)"
                ))
            }
        };
        if out.mask & bit != 0 {
            return Err(format!("TCP flag `{name}` given twice"));
        }
        out.mask |= bit;
        if !neg {
            out.value |= bit;
        }
    }
    Ok(out)
}

fn parse_action(a: &YAction) -> Result<AclAction, String> {
    let items: Vec<YActionItem> = match a {
        YAction::One(i) => vec![i.clone()],
        YAction::Many(v) => v.clone(),
    };
    let mut verdict: Option<Verdict> = None;
    let mut mark: Option<u32> = None;
    for it in &items {
        match it {
            YActionItem::Word(w) => {
                let v = match w.as_str() {
                    "pass" => Verdict::Pass,
                    "drop" => Verdict::Drop,
                    "mirror" => Verdict::Mirror,
                    "to-host" => Verdict::ToHost,
                    "mark" => return Err("`mark` needs an id: {mark: ID}".into()),
                    _ => {
                        return Err(format!(
                            "unknown action `{w}` (pass, drop, mirror, to-host, {{mark: ID}})"
                        ))
                    }
                };
                if let Some(old) = verdict {
                    return Err(format!(
                        "conflicting actions `{}` and `{}`",
                        old.name(),
                        v.name()
                    ));
                }
                verdict = Some(v);
            }
            YActionItem::Map(m) => {
                for (k, v) in m {
                    if k != "mark" {
                        return Err(format!(
                            "unknown action `{k}` (pass, drop, mirror, to-host, {{mark: ID}})"
                        ));
                    }
                    if mark.is_some() {
                        return Err("`mark` given twice".into());
                    }
                    mark = Some(
                        u32::try_from(*v)
                            .map_err(|_| format!("bad mark id {v} (0..=4294967295)"))?,
                    );
                }
            }
        }
    }
    if verdict.is_none() && mark.is_none() {
        return Err("empty action".into());
    }
    if verdict == Some(Verdict::Drop) && mark.is_some() {
        return Err(
            "conflicting actions `drop` and `mark` (a dropped packet carries no mark)".into(),
        );
    }
    Ok(AclAction {
        verdict: verdict.unwrap_or(Verdict::Pass),
        mark,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_file_over_the_yaml_budget_says_to_use_classbench() {
        // 8 events a rule: 120 rules fit a budget of 1000, 130 do not.
        let rules = |n: usize| {
            let mut text = String::from("rules:\n");
            for i in 0..n {
                text.push_str(&format!(
                    "  - {{ proto: tcp, dst_port: {i}, action: drop }}\n"
                ));
            }
            text
        };
        let p = std::path::Path::new("big.yaml");
        assert_eq!(
            super::parse_within(p, &rules(120), 1000).unwrap().len(),
            120
        );
        let e = super::parse_within(p, &rules(130), 1000).unwrap_err();
        assert!(e.message.contains("ClassBench"), "{e}");
        assert!(e.message.contains("budget of 1000"), "{e}");
    }

    use super::*;

    fn p(s: &str) -> Result<Vec<AclRule>, RuleError> {
        parse(Path::new("r.yaml"), s)
    }

    #[test]
    fn parses_all_fields() {
        let r = p("rules:\n  - name: a\n    src: 10.0.0.0/8\n    dst: 192.168.1.1\n    src_port: 1024-65535\n    dst_port: 80\n    proto: tcp\n    tcp_flags: syn,!ack\n    dscp: 46\n    vlan: 100\n    port: 2\n    action: [mirror, {mark: 7}]\n  - dst: 2001:db8::/32\n    action: drop\n").unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].family, Family::V4);
        assert_eq!(r[0].src.len, 8);
        assert_eq!(r[0].dst.len, 32);
        assert_eq!(
            r[0].src_port,
            PortRange {
                lo: 1024,
                hi: 65535
            }
        );
        assert_eq!(
            r[0].tcp_flags,
            Masked {
                value: 0x02,
                mask: 0x12
            }
        );
        assert_eq!(
            r[0].dscp,
            Masked {
                value: 46,
                mask: 0x3F
            }
        );
        assert_eq!(r[0].vlan, Masked::<u16>::exact(100));
        assert_eq!(r[0].port_id, Masked::<u16>::exact(2));
        assert_eq!(
            r[0].action,
            AclAction {
                verdict: Verdict::Mirror,
                mark: Some(7)
            }
        );
        assert_eq!(r[0].loc.line, 2);
        assert_eq!(r[1].family, Family::V6);
        assert_eq!(r[1].action.verdict, Verdict::Drop);
    }

    #[test]
    fn errors_name_line_column_and_key() {
        let e = p("rules:\n  - dst_port: 80\n    bogus: 1\n    action: drop\n").unwrap_err();
        assert_eq!(e.field, "bogus", "{e}");
        assert!(e.message.starts_with("unknown field `bogus`"), "{e}");
        assert_eq!(e.loc.line, 3, "{e}");
        assert!(e.loc.column > 0, "{e}");
        let e = p("rules:\n  - dst_port: 90-80\n    action: drop\n").unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.loc.line, e.loc.column),
            ("dst_port", 2, 15),
            "{e}"
        );
        assert!(e.message.contains("inverted"));
        let e = p("rules:\n  - src: 10.0.0.1/8\n    action: drop\n").unwrap_err();
        assert_eq!((e.field.as_str(), e.loc.line), ("src", 2), "{e}");
        let e = p("rules:\n  - src: 10.0.0.0/33\n    action: drop\n").unwrap_err();
        assert_eq!(e.field, "src", "{e}");
        let e = p("rules:\n  - src: 10.0.0.0/8\n    dst: ::/0\n    action: drop\n").unwrap_err();
        assert_eq!(e.field, "dst", "{e}");
        let e = p("rules:\n  - action: [pass, drop]\n").unwrap_err();
        assert_eq!((e.field.as_str(), e.loc.line), ("action", 2), "{e}");
        assert!(e.message.contains("conflicting"), "{e}");
        let e = p("rules:\n  - proto: tcpx\n    action: drop\n").unwrap_err();
        assert_eq!(e.field, "proto", "{e}");
        let e = p("rules:\n  - vlan: 5000\n    action: drop\n").unwrap_err();
        assert_eq!(e.field, "vlan", "{e}");
        assert!(e.to_string().starts_with("r.yaml:2:"), "{e}");
    }

    #[test]
    fn ct_parses_one_state_or_a_list() {
        let r = p("rules:\n  - ct: new\n    action: pass\n  - ct: [established, related]\n    action: pass\n  - ct: invalid,closed\n    action: drop\n  - action: drop\n").unwrap();
        assert_eq!(r[0].ct, 1 << 1);
        assert_eq!(r[1].ct, (1 << 2) | (1 << 3));
        assert_eq!(r[2].ct, (1 << 4) | (1 << 6));
        assert_eq!(r[3].ct, 0, "no `ct:`: any state");
    }

    #[test]
    fn bad_ct_names_file_line_and_key() {
        let e =
            p("rules:\n  - action: pass\n  - ct: [new, estab]\n    action: pass\n").unwrap_err();
        let m = e.to_string();
        assert!(m.contains("r.yaml:3"), "{m}");
        assert!(m.contains("ct") && m.contains("`estab`"), "{m}");
        let e = p("rules:\n  - ct: []\n    action: pass\n").unwrap_err();
        assert!(e.to_string().contains("names no state"), "{e}");
        let e = p("rules:\n  - ct: {a: 1}\n    action: pass\n").unwrap_err();
        assert!(e.to_string().contains(":2"), "{e}");
    }

    #[test]
    fn set_parses_dscp_mac_and_port() {
        let r = p("rules:\n  - dst_port: 5060\n    action: [pass, {mark: 3}]\n    set: { dscp: 46, dst_mac: '02:00:00:00:00:0a', port: out1 }\n  - action: mirror\n    set:\n      port: out2\n").unwrap();
        let s = r[0].set.as_ref().unwrap();
        assert_eq!(s.dscp, Some(46));
        assert_eq!(s.dst_mac, Some([2, 0, 0, 0, 0, 0x0a]));
        let (name, loc) = s.port.as_ref().unwrap();
        assert_eq!((name.as_str(), loc.line), ("out1", 4));
        assert_eq!(r[0].action.mark, Some(3));
        let s = r[1].set.as_ref().unwrap();
        assert_eq!((s.dscp, s.dst_mac), (None, None));
        assert_eq!(s.port.as_ref().unwrap().1.line, 7);
    }

    #[test]
    fn set_errors_name_line_and_key() {
        let cases = [
            (
                "rules:\n  - action: pass\n    set: { dscp: 64 }\n",
                "set.dscp",
                3,
            ),
            (
                "rules:\n  - action: pass\n    set: { dst_mac: '02:00:00:00:00' }\n",
                "set.dst_mac",
                3,
            ),
            (
                "rules:\n  - action: pass\n    set:\n      dst_mac: zz\n",
                "set.dst_mac",
                4,
            ),
            ("rules:\n  - action: pass\n    set: { ttl: 3 }\n", "ttl", 3),
            ("rules:\n  - action: pass\n    set: {}\n", "set", 3),
            ("rules:\n  - action: drop\n    set: { dscp: 1 }\n", "set", 3),
            (
                "rules:\n  - action: pass\n    set: { port: '' }\n",
                "set.port",
                3,
            ),
        ];
        for (text, key, line) in cases {
            let e = p(text).unwrap_err();
            assert_eq!((e.field.as_str(), e.loc.line), (key, line), "{text}: {e}");
            assert!(e.to_string().starts_with("r.yaml:"), "{e}");
        }
    }

    #[test]
    fn unknown_set_port_names_file_line_and_key() {
        let mut set = super::super::AclRuleSet {
            rules: p("rules:\n  - action: pass\n  - action: pass\n    set: { port: nope }\n")
                .unwrap(),
            warnings: Vec::new(),
        };
        let tx = vec!["a".to_string(), "b".to_string()];
        let e = set.resolve_ports(Some(&tx)).unwrap_err();
        assert_eq!((e.field.as_str(), e.loc.line), ("set.port", 4), "{e}");
        assert!(
            e.to_string().contains("r.yaml:4") && e.to_string().contains("nope"),
            "{e}"
        );
        assert!(e.message.contains("a, b"), "{e}");
        set.rules[1].set.as_mut().unwrap().port.as_mut().unwrap().0 = "b".into();
        set.resolve_ports(Some(&tx)).unwrap();
        assert_eq!(set.rules[1].set.as_ref().unwrap().out_port, Some(1));
    }
}
