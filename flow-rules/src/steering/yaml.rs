//! The steering rule file (YAML, serde-saphyr): parsing, validation with errors that name the
//! file, line, column and key, and shadowed-rule warnings. Format: docs/steering.md.

use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};
use serde_saphyr::Spanned;

use super::key::RssHash;
use super::matcher::SteerMatcher;
use super::model::{
    Action, EcpriItem, EthItem, GtpuItem, Ipv4Item, Ipv4Prefix, Ipv6Item, Ipv6Prefix, Item, Masked,
    PortRange, PortsItem, RssAction, RuleIssue, SteerRule, VlanItem, VxlanItem,
};
use crate::error::{Location, RuleError, RuleWarning};

/// Deserializes a present key (even `key:` with no value) as `Some`, so that an empty value is
/// reported instead of read as "absent".
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A scalar kept as text with its place; parsed by this module so errors name the key.
type Leaf = Option<Spanned<Option<String>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileY {
    #[serde(default, deserialize_with = "present")]
    queues: Leaf,
    #[serde(default)]
    rules: Vec<Spanned<RuleY>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleY {
    #[serde(default, deserialize_with = "present")]
    name: Leaf,
    #[serde(rename = "match", default, deserialize_with = "present")]
    pattern: Option<Spanned<Option<MatchY>>>,
    actions: Spanned<Vec<Spanned<ActionY>>>,
}

type ItemY<T> = Option<Spanned<Option<T>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MatchY {
    #[serde(default, deserialize_with = "present")]
    eth: ItemY<EthY>,
    #[serde(default, deserialize_with = "present")]
    vlan: ItemY<VlanY>,
    #[serde(default, deserialize_with = "present")]
    ipv4: ItemY<IpY>,
    #[serde(default, deserialize_with = "present")]
    ipv6: ItemY<IpY>,
    #[serde(default, deserialize_with = "present")]
    tcp: ItemY<PortsY>,
    #[serde(default, deserialize_with = "present")]
    udp: ItemY<PortsY>,
    #[serde(default, deserialize_with = "present")]
    vxlan: ItemY<VxlanY>,
    #[serde(
        default,
        deserialize_with = "present",
        alias = "gtp-u",
        alias = "gtp_u"
    )]
    gtpu: ItemY<GtpuY>,
    #[serde(default, deserialize_with = "present")]
    ecpri: ItemY<EcpriY>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EthY {
    #[serde(default, deserialize_with = "present")]
    dst: Leaf,
    #[serde(default, deserialize_with = "present")]
    src: Leaf,
    #[serde(default, deserialize_with = "present")]
    ether_type: Leaf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VlanY {
    #[serde(default, deserialize_with = "present")]
    vid: Leaf,
    #[serde(default, deserialize_with = "present")]
    pcp: Leaf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IpY {
    #[serde(default, deserialize_with = "present")]
    src: Leaf,
    #[serde(default, deserialize_with = "present")]
    dst: Leaf,
    #[serde(default, deserialize_with = "present")]
    proto: Leaf,
    #[serde(default, deserialize_with = "present")]
    dscp: Leaf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PortsY {
    #[serde(default, deserialize_with = "present")]
    src_port: Leaf,
    #[serde(default, deserialize_with = "present")]
    dst_port: Leaf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VxlanY {
    #[serde(default, deserialize_with = "present")]
    vni: Leaf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GtpuY {
    #[serde(default, deserialize_with = "present")]
    teid: Leaf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EcpriY {
    #[serde(default, deserialize_with = "present")]
    msg_type: Leaf,
    #[serde(default, deserialize_with = "present", alias = "eaxc_id")]
    pc_id: Leaf,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ActionY {
    Drop,
    Queue(Spanned<Option<String>>),
    Mark(Spanned<Option<String>>),
    Rss(RssY),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RssY {
    queues: Spanned<Vec<Spanned<Option<String>>>>,
    #[serde(default, deserialize_with = "present")]
    hash: Option<Spanned<Vec<Spanned<Option<String>>>>>,
}

/// Where each part of a rule is in its file, for errors found after parsing.
#[derive(Clone, Debug, Default)]
struct RuleSource {
    rule: Location,
    /// `"ipv4.dst"`, `"ipv4"`, `"actions"`, ... -> place.
    fields: Vec<(String, Location)>,
    actions: Vec<Location>,
    /// Per action: the places of its RSS queues (empty for other actions).
    rss_queues: Vec<Vec<Location>>,
}

impl RuleSource {
    fn field(&self, name: &str) -> Option<&Location> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, l)| l)
    }

    /// The best place for an issue: the field itself, else its item, else the rule.
    fn locate(&self, issue: &RuleIssue) -> Location {
        if let Some(i) = issue.action {
            if let (Some(q), Some(locs)) = (issue.index, self.rss_queues.get(i)) {
                if let Some(l) = locs.get(q) {
                    return l.clone();
                }
            }
            if let Some(l) = self.field(&format!("actions[{i}].{}", issue.field)) {
                return l.clone();
            }
            if let Some(l) = self.actions.get(i) {
                return l.clone();
            }
        }
        if let Some(l) = self.field(&issue.field) {
            return l.clone();
        }
        let item = issue.field.split('.').next().unwrap_or("");
        self.field(item)
            .cloned()
            .unwrap_or_else(|| self.rule.clone())
    }
}

/// A parsed and validated steering rule file.
#[derive(Clone, Debug)]
pub struct SteerRuleSet {
    pub file: PathBuf,
    /// The file's `queues:` (number of RX queues), when given.
    pub queues: Option<u16>,
    /// In file order (= first-match order and rte_flow priority).
    pub rules: Vec<SteerRule>,
    /// Shadowed rules, never reached.
    pub warnings: Vec<RuleWarning>,
    sources: Vec<RuleSource>,
}

impl SteerRuleSet {
    /// Reads and validates a rule file.
    pub fn load(path: impl AsRef<Path>) -> Result<SteerRuleSet, RuleError> {
        let path = path.as_ref();
        let text = crate::input::read_text_bounded(
            path,
            crate::input::MAX_TEXT_INPUT_BYTES,
            "steering rule file",
        )
        .map_err(|e| RuleError::io(path, &e))?;
        SteerRuleSet::parse(&text, path)
    }

    /// Parses and validates rule-file text; `file` names it in errors.
    pub fn parse(text: &str, file: impl AsRef<Path>) -> Result<SteerRuleSet, RuleError> {
        let file = file.as_ref();
        let doc: Option<FileY> =
            serde_saphyr::from_str(text).map_err(|e| saphyr_error(&e, text, file))?;
        let doc = doc.unwrap_or(FileY {
            queues: None,
            rules: Vec::new(),
        });
        let p = Parser { file };
        let queues = match &doc.queues {
            None => None,
            Some(leaf) => {
                let n = p.num(leaf, "queues", u64::from(u16::MAX))?;
                if n == 0 {
                    return Err(p.err(leaf, "queues", "a port has at least one queue".into()));
                }
                Some(n as u16)
            }
        };
        let mut rules = Vec::with_capacity(doc.rules.len());
        let mut sources = Vec::with_capacity(doc.rules.len());
        let mut names: HashSet<String> = HashSet::new();
        for r in &doc.rules {
            let mut src = RuleSource {
                rule: p.loc(&r.referenced),
                ..RuleSource::default()
            };
            let rule = p.rule(&r.value, &mut src)?;
            if let Some(name) = &rule.name {
                if !names.insert(name.clone()) {
                    let loc = src
                        .field("name")
                        .cloned()
                        .unwrap_or_else(|| src.rule.clone());
                    return Err(RuleError::new(
                        loc,
                        "name",
                        format!("duplicate rule name `{name}`"),
                    ));
                }
            }
            rule.validate(queues)
                .map_err(|issue| issue_error(&src, issue))?;
            rules.push(rule);
            sources.push(src);
        }
        let mut set = SteerRuleSet {
            file: file.to_path_buf(),
            queues,
            rules,
            warnings: Vec::new(),
            sources,
        };
        set.warnings = set.shadow_warnings();
        Ok(set)
    }

    /// Checks queue indices against the port's number of queues (from the port config), with
    /// errors at the offending queue in the file.
    pub fn check_queues(&self, queues: u16) -> Result<(), RuleError> {
        for (rule, src) in self.rules.iter().zip(&self.sources) {
            rule.validate(Some(queues))
                .map_err(|issue| issue_error(src, issue))?;
        }
        Ok(())
    }

    /// Where rule `index` starts in the file (for log lines about one rule).
    pub fn location(&self, index: usize) -> Location {
        self.sources
            .get(index)
            .map(|s| s.rule.clone())
            .unwrap_or_else(|| Location::new(&self.file, 0, 0))
    }

    /// A display name for rule `index`: "3 `name`", or "3" when it has no name.
    pub fn rule_label(&self, index: usize) -> String {
        match self.rules.get(index).and_then(|r| r.name.as_ref()) {
            Some(n) => format!("{index} `{n}`"),
            None => format!("{index}"),
        }
    }

    /// The software matcher for these rules.
    pub fn compile(&self) -> SteerMatcher {
        SteerMatcher::new(&self.rules)
    }

    fn shadow_warnings(&self) -> Vec<RuleWarning> {
        self.compile()
            .shadowed()
            .into_iter()
            .map(|(j, i)| {
                let by = self.location(i);
                RuleWarning {
                    loc: self.location(j),
                    field: "match".into(),
                    message: format!(
                        "rule {} is never reached: rule {} (line {}) matches every frame it matches",
                        self.rule_label(j),
                        self.rule_label(i),
                        by.line
                    ),
                }
            })
            .collect()
    }
}

/// A model issue placed in the file.
fn issue_error(src: &RuleSource, issue: RuleIssue) -> RuleError {
    let loc = src.locate(&issue);
    RuleError::new(loc, issue.field, issue.message)
}

/// Turns a serde-saphyr error into a [`RuleError`]: its place, and the key it is about (from the
/// error where serde names it, else the key written on that line).
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
        E::SerdeUnknownVariant { .. } => "actions".to_string(),
        _ => key_on_line(text, line),
    };
    let mut message = inner.to_string();
    if let Some(at) = message.rfind(" at line ") {
        message.truncate(at);
    }
    // Say it in the file's terms rather than the parser's.
    match inner {
        E::SerdeUnknownVariant { .. } => message = format!("unknown action: {message}"),
        E::DuplicateMappingKey { key: Some(k), .. } => message = format!("duplicate key `{k}`"),
        _ if message == "expected sequence start" => message = "expected a list here".into(),
        _ if message == "expected mapping start" => {
            message = "expected a mapping (`key: value` lines) here".into()
        }
        _ => {}
    }
    RuleError::new(Location::new(file, line, column), field, message)
}

/// The key an error serde reports without naming one (a wrong type under a key) is about: the
/// last `key:` written on the error's 1-based line, else the key of the nearest less-indented
/// line above (the parent of a list item or of a value on its own line).
fn key_on_line(text: &str, line: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let Some(idx) = line.checked_sub(1).filter(|i| *i < lines.len()) else {
        return String::new();
    };
    let here = last_key(lines[idx]);
    if !here.is_empty() {
        return here;
    }
    let indent = |l: &str| l.len() - l.trim_start().len();
    let cur = indent(lines[idx]);
    for l in lines[..idx].iter().rev() {
        let t = l.trim_start();
        if t.is_empty() || t.starts_with('#') || indent(l) >= cur {
            continue;
        }
        let k = last_key(l);
        if !k.is_empty() {
            return k;
        }
    }
    String::new()
}

/// The identifier before the last `: ` (or a `:` ending the line) of one line.
fn last_key(l: &str) -> String {
    crate::error::last_key(l, |c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

struct Parser<'a> {
    file: &'a Path,
}

impl Parser<'_> {
    fn loc(&self, l: &serde_saphyr::Location) -> Location {
        Location::new(self.file, l.line() as usize, l.column() as usize)
    }

    fn err<T>(&self, s: &Spanned<T>, field: &str, message: String) -> RuleError {
        RuleError::new(self.loc(&s.referenced), field, message)
    }

    /// The text of a leaf, refusing an empty value.
    fn text<'s>(
        &self,
        leaf: &'s Spanned<Option<String>>,
        field: &str,
    ) -> Result<&'s str, RuleError> {
        match leaf.value.as_deref().map(str::trim) {
            Some(t) if !t.is_empty() => Ok(t),
            _ => Err(self.err(leaf, field, "needs a value".into())),
        }
    }

    /// An unsigned number (decimal, 0x hex, 0b binary, `_` separators) no larger than `max`.
    fn num(&self, leaf: &Spanned<Option<String>>, field: &str, max: u64) -> Result<u64, RuleError> {
        let t = self.text(leaf, field)?;
        let v = parse_uint(t)
            .ok_or_else(|| self.err(leaf, field, format!("expected a number, got `{t}`")))?;
        if v > max {
            return Err(self.err(leaf, field, format!("{t} is out of range 0..={max}")));
        }
        Ok(v)
    }

    fn opt_num(&self, leaf: &Leaf, field: &str, max: u64) -> Result<Option<u64>, RuleError> {
        leaf.as_ref().map(|l| self.num(l, field, max)).transpose()
    }

    fn mac(&self, leaf: &Leaf, field: &str) -> Result<Option<Masked<[u8; 6]>>, RuleError> {
        let Some(leaf) = leaf else { return Ok(None) };
        let t = self.text(leaf, field)?;
        let (addr, mask) = match t.split_once('/') {
            Some((a, m)) => (a.trim(), Some(m.trim())),
            None => (t, None),
        };
        let spec = parse_mac(addr).ok_or_else(|| {
            self.err(
                leaf,
                field,
                format!("bad MAC address `{addr}` (expected six hex bytes, aa:bb:cc:dd:ee:ff)"),
            )
        })?;
        let mask = match mask {
            None => [0xFF; 6],
            Some(m) if m.contains([':', '-']) => {
                parse_mac(m).ok_or_else(|| self.err(leaf, field, format!("bad MAC mask `{m}`")))?
            }
            Some(m) => {
                let len = m.parse::<u8>().ok().filter(|l| *l <= 48).ok_or_else(|| {
                    self.err(
                        leaf,
                        field,
                        format!("bad MAC mask `{m}` (a MAC-style mask or a length 0..=48)"),
                    )
                })?;
                let bits = if len == 0 {
                    0u64
                } else {
                    (u64::MAX << (64 - u32::from(len))) >> 16
                };
                let b = bits.to_be_bytes();
                [b[2], b[3], b[4], b[5], b[6], b[7]]
            }
        };
        Ok(Some(Masked { spec, mask }))
    }

    fn prefix4(&self, leaf: &Leaf, field: &str) -> Result<Option<Ipv4Prefix>, RuleError> {
        let Some(leaf) = leaf else { return Ok(None) };
        let t = self.text(leaf, field)?;
        let (a, len) = self.split_prefix(leaf, field, t, 32)?;
        let addr: Ipv4Addr = a
            .parse()
            .map_err(|_| self.err(leaf, field, format!("bad IPv4 address `{a}`")))?;
        Ok(Some(Ipv4Prefix { addr, len }))
    }

    fn prefix6(&self, leaf: &Leaf, field: &str) -> Result<Option<Ipv6Prefix>, RuleError> {
        let Some(leaf) = leaf else { return Ok(None) };
        let t = self.text(leaf, field)?;
        let (a, len) = self.split_prefix(leaf, field, t, 128)?;
        let addr: Ipv6Addr = a
            .parse()
            .map_err(|_| self.err(leaf, field, format!("bad IPv6 address `{a}`")))?;
        Ok(Some(Ipv6Prefix { addr, len }))
    }

    fn split_prefix<'t>(
        &self,
        leaf: &Spanned<Option<String>>,
        field: &str,
        t: &'t str,
        full: u8,
    ) -> Result<(&'t str, u8), RuleError> {
        match t.split_once('/') {
            None => Ok((t, full)),
            Some((a, l)) => {
                let len = l.trim().parse::<u8>().map_err(|_| {
                    self.err(leaf, field, format!("bad prefix length `/{l}` in `{t}`"))
                })?;
                Ok((a.trim(), len))
            }
        }
    }

    fn ports(&self, leaf: &Leaf, field: &str) -> Result<Option<PortRange>, RuleError> {
        let Some(leaf) = leaf else { return Ok(None) };
        let t = self.text(leaf, field)?;
        let bad = || {
            self.err(
                leaf,
                field,
                format!("bad port `{t}` (a port 0..=65535 or a range lo-hi)"),
            )
        };
        let one = |s: &str| -> Result<u16, RuleError> {
            parse_uint(s.trim())
                .and_then(|v| u16::try_from(v).ok())
                .ok_or_else(bad)
        };
        match t.split_once('-') {
            None => Ok(Some(PortRange::single(one(t)?))),
            Some((lo, hi)) => Ok(Some(PortRange {
                lo: one(lo)?,
                hi: one(hi)?,
            })),
        }
    }

    fn note<T>(&self, src: &mut RuleSource, name: &str, s: &Spanned<T>) {
        src.fields.push((name.to_string(), self.loc(&s.referenced)));
    }

    fn note_leaf(&self, src: &mut RuleSource, name: &str, leaf: &Leaf) {
        if let Some(l) = leaf {
            self.note(src, name, l);
        }
    }

    fn rule(&self, r: &RuleY, src: &mut RuleSource) -> Result<SteerRule, RuleError> {
        let name = match &r.name {
            None => None,
            Some(leaf) => {
                self.note(src, "name", leaf);
                Some(self.text(leaf, "name")?.to_string())
            }
        };
        let mut pattern = Vec::new();
        if let Some(m) = r.pattern.as_ref().and_then(|m| m.value.as_ref()) {
            self.pattern(m, src, &mut pattern)?;
        }
        self.note(src, "actions", &r.actions);
        let mut actions = Vec::with_capacity(r.actions.value.len());
        for (i, a) in r.actions.value.iter().enumerate() {
            src.actions.push(self.loc(&a.referenced));
            let mut rss_locs = Vec::new();
            actions.push(match &a.value {
                ActionY::Drop => Action::Drop,
                ActionY::Queue(q) => {
                    src.fields
                        .push((format!("actions[{i}].queue"), self.loc(&q.referenced)));
                    Action::Queue(self.num(q, "queue", u64::from(u16::MAX))? as u16)
                }
                ActionY::Mark(m) => Action::Mark(self.num(m, "mark", u64::from(u32::MAX))? as u32),
                ActionY::Rss(rss) => {
                    src.fields.push((
                        format!("actions[{i}].rss.queues"),
                        self.loc(&rss.queues.referenced),
                    ));
                    let mut queues = Vec::with_capacity(rss.queues.value.len());
                    for q in &rss.queues.value {
                        rss_locs.push(self.loc(&q.referenced));
                        queues.push(self.num(q, "rss.queues", u64::from(u16::MAX))? as u16);
                    }
                    let hash = match &rss.hash {
                        None => RssHash::DEFAULT,
                        Some(list) => {
                            src.fields.push((
                                format!("actions[{i}].rss.hash"),
                                self.loc(&list.referenced),
                            ));
                            let mut h = RssHash(0);
                            for f in &list.value {
                                let t = self.text(f, "rss.hash")?;
                                let bit = RssHash::from_name(t).ok_or_else(|| {
                                    let names: Vec<_> =
                                        RssHash::NAMES.iter().map(|(n, _)| *n).collect();
                                    self.err(
                                        f,
                                        "rss.hash",
                                        format!(
                                            "unknown hash field `{t}` (one of {})",
                                            names.join(", ")
                                        ),
                                    )
                                })?;
                                h = h.union(bit);
                            }
                            h
                        }
                    };
                    Action::Rss(RssAction { queues, hash })
                }
            });
            src.rss_queues.push(rss_locs);
        }
        Ok(SteerRule {
            name,
            pattern,
            actions,
        })
    }

    fn pattern(
        &self,
        m: &MatchY,
        src: &mut RuleSource,
        out: &mut Vec<Item>,
    ) -> Result<(), RuleError> {
        if let Some(s) = &m.eth {
            self.note(src, "eth", s);
            let mut item = EthItem::default();
            if let Some(e) = &s.value {
                self.note_leaf(src, "eth.dst", &e.dst);
                self.note_leaf(src, "eth.src", &e.src);
                self.note_leaf(src, "eth.ether_type", &e.ether_type);
                item.dst = self.mac(&e.dst, "eth.dst")?;
                item.src = self.mac(&e.src, "eth.src")?;
                item.ether_type = self
                    .opt_num(&e.ether_type, "eth.ether_type", 0xFFFF)?
                    .map(|v| v as u16);
            }
            out.push(Item::Eth(item));
        }
        if let Some(s) = &m.vlan {
            self.note(src, "vlan", s);
            let mut item = VlanItem::default();
            if let Some(v) = &s.value {
                self.note_leaf(src, "vlan.vid", &v.vid);
                self.note_leaf(src, "vlan.pcp", &v.pcp);
                item.vid = self.opt_num(&v.vid, "vlan.vid", 4095)?.map(|v| v as u16);
                item.pcp = self.opt_num(&v.pcp, "vlan.pcp", 7)?.map(|v| v as u8);
            }
            out.push(Item::Vlan(item));
        }
        for (name, ip) in [("ipv4", &m.ipv4), ("ipv6", &m.ipv6)] {
            let Some(s) = ip else { continue };
            self.note(src, name, s);
            let f = |k: &str| format!("{name}.{k}");
            let (mut proto, mut dscp) = (None, None);
            let (mut s4, mut d4, mut s6, mut d6) = (None, None, None, None);
            if let Some(i) = &s.value {
                self.note_leaf(src, &f("src"), &i.src);
                self.note_leaf(src, &f("dst"), &i.dst);
                self.note_leaf(src, &f("proto"), &i.proto);
                self.note_leaf(src, &f("dscp"), &i.dscp);
                if name == "ipv4" {
                    s4 = self.prefix4(&i.src, &f("src"))?;
                    d4 = self.prefix4(&i.dst, &f("dst"))?;
                } else {
                    s6 = self.prefix6(&i.src, &f("src"))?;
                    d6 = self.prefix6(&i.dst, &f("dst"))?;
                }
                proto = self.opt_num(&i.proto, &f("proto"), 255)?.map(|v| v as u8);
                dscp = self.opt_num(&i.dscp, &f("dscp"), 63)?.map(|v| v as u8);
            }
            out.push(if name == "ipv4" {
                Item::Ipv4(Ipv4Item {
                    src: s4,
                    dst: d4,
                    proto,
                    dscp,
                })
            } else {
                Item::Ipv6(Ipv6Item {
                    src: s6,
                    dst: d6,
                    proto,
                    dscp,
                })
            });
        }
        for (name, l4) in [("tcp", &m.tcp), ("udp", &m.udp)] {
            let Some(s) = l4 else { continue };
            self.note(src, name, s);
            let mut item = PortsItem::default();
            if let Some(p) = &s.value {
                let (fs, fd) = (format!("{name}.src_port"), format!("{name}.dst_port"));
                self.note_leaf(src, &fs, &p.src_port);
                self.note_leaf(src, &fd, &p.dst_port);
                item.src_port = self.ports(&p.src_port, &fs)?;
                item.dst_port = self.ports(&p.dst_port, &fd)?;
            }
            out.push(if name == "tcp" {
                Item::Tcp(item)
            } else {
                Item::Udp(item)
            });
        }
        if let Some(s) = &m.vxlan {
            self.note(src, "vxlan", s);
            let mut item = VxlanItem::default();
            if let Some(v) = &s.value {
                self.note_leaf(src, "vxlan.vni", &v.vni);
                item.vni = self
                    .opt_num(&v.vni, "vxlan.vni", 0x00FF_FFFF)?
                    .map(|v| v as u32);
            }
            out.push(Item::Vxlan(item));
        }
        if let Some(s) = &m.gtpu {
            self.note(src, "gtpu", s);
            let mut item = GtpuItem::default();
            if let Some(g) = &s.value {
                self.note_leaf(src, "gtpu.teid", &g.teid);
                item.teid = self
                    .opt_num(&g.teid, "gtpu.teid", u64::from(u32::MAX))?
                    .map(|v| v as u32);
            }
            out.push(Item::GtpU(item));
        }
        if let Some(s) = &m.ecpri {
            self.note(src, "ecpri", s);
            let mut item = EcpriItem::default();
            if let Some(e) = &s.value {
                self.note_leaf(src, "ecpri.msg_type", &e.msg_type);
                self.note_leaf(src, "ecpri.pc_id", &e.pc_id);
                item.msg_type = self
                    .opt_num(&e.msg_type, "ecpri.msg_type", 255)?
                    .map(|v| v as u8);
                item.pc_id = self
                    .opt_num(&e.pc_id, "ecpri.pc_id", 0xFFFF)?
                    .map(|v| v as u16);
            }
            out.push(Item::Ecpri(item));
        }
        Ok(())
    }
}

fn parse_uint(t: &str) -> Option<u64> {
    let t = t.replace('_', "");
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, h)
    } else if let Some(b) = t.strip_prefix("0b").or_else(|| t.strip_prefix("0B")) {
        (2, b)
    } else {
        (10, t.as_str())
    };
    if digits.is_empty() || digits.starts_with('+') {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

fn parse_mac(t: &str) -> Option<[u8; 6]> {
    let sep = if t.contains(':') { ':' } else { '-' };
    let mut out = [0u8; 6];
    let mut n = 0;
    for part in t.split(sep) {
        if n == 6 || part.len() != 2 {
            return None;
        }
        out[n] = u8::from_str_radix(part, 16).ok()?;
        n += 1;
    }
    (n == 6).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_key_is_found_after_a_multibyte_char() {
        // fuzz-smoke's rules target: `  -בame: ptp` sliced inside 'ב'.
        assert_eq!(last_key("  -בame: ptp"), "ame");
        assert_eq!(last_key("  - name: ptp"), "name");
    }

    #[test]
    fn numbers_and_macs() {
        assert_eq!(parse_uint("0x0800"), Some(0x800));
        assert_eq!(parse_uint("4_789"), Some(4789));
        assert_eq!(parse_uint("0b101"), Some(5));
        assert_eq!(parse_uint("-1"), None);
        assert_eq!(parse_uint("+1"), None);
        assert_eq!(parse_uint("0x"), None);
        assert_eq!(
            parse_mac("00:1b:21:aa:bb:cc"),
            Some([0, 0x1b, 0x21, 0xaa, 0xbb, 0xcc])
        );
        assert_eq!(
            parse_mac("00-1B-21-AA-BB-CC"),
            Some([0, 0x1b, 0x21, 0xaa, 0xbb, 0xcc])
        );
        assert_eq!(parse_mac("00:1b:21:aa:bb"), None);
        assert_eq!(parse_mac("00:1b:21:aa:bb:cc:dd"), None);
        assert_eq!(parse_mac("0:1b:21:aa:bb:cc"), None);
        assert_eq!(parse_mac("zz:1b:21:aa:bb:cc"), None);
    }

    #[test]
    fn key_on_line_finds_the_key() {
        let text = "rules:\n  - match:\n      ipv4: {dst: [1]}\n";
        assert_eq!(key_on_line(text, 3), "dst");
        assert_eq!(key_on_line(text, 2), "match");
        assert_eq!(key_on_line(text, 9), "");
        let text = "rules:\n  # a comment\n  - drop\n";
        assert_eq!(key_on_line(text, 3), "rules");
    }
}
