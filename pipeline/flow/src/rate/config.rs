//! The `rate_limit` stage's config keys (docs/rate-limit.md): the table's size and seed, what a
//! full table does, and the rules. Each value is checked while it is read (serde `try_from`), so
//! a bad one is refused at its own line and column of the config; [`RateConfig::validate`]
//! checks what spans rules (count, unique names) and the table's size.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::table::{check_capacity, MAX_BURST, MAX_RATE_PPS, MAX_RULES};
use crate::config::FlowError;

/// What a frame gets when its rule's key has no bucket and none can be had (`on_full`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnFull {
    /// Passes, counted `table_full` (a full table never drops legitimate traffic).
    #[default]
    Pass,
    /// Dropped `rate_limited`, counted `table_full` (an attacker cannot escape the limit by
    /// filling the table).
    Drop,
}

/// `rate_limit: { entries, hash_seed, on_full, rules }`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateConfig {
    /// Buckets per queue: a multiple of 8, at most 2^31; 64 bytes each.
    pub entries: u64,
    #[serde(default)]
    pub hash_seed: u32,
    #[serde(default)]
    pub on_full: OnFull,
    /// The rules in order: a frame takes the first whose `match` it meets. Each with its place
    /// in the config, for errors.
    pub rules: Vec<Spanned<RateRule>>,
}

impl RateConfig {
    /// The checks no single value can make: the table's size, the number of rules, unique rule
    /// names. Errors name the key (`entries`, `rules[2].name`).
    pub fn validate(&self) -> Result<(), FlowError> {
        check_capacity(self.entries)?;
        let bad = |key: String, message: String| Err(FlowError::Config { key, message });
        if self.rules.is_empty() {
            return bad("rules".into(), "at least one rule is needed".into());
        }
        if self.rules.len() > MAX_RULES {
            return bad(
                "rules".into(),
                format!("{} rules, at most {MAX_RULES}", self.rules.len()),
            );
        }
        for (i, r) in self.rules.iter().enumerate() {
            let r = &r.value;
            if let Err((key, message)) = r.check() {
                return bad(
                    format!("rules[{i}].{key}"),
                    format!("rule `{}`: {message}", r.name),
                );
            }
            if let Some(j) = self.rules[..i].iter().position(|o| o.value.name == r.name) {
                return bad(
                    format!("rules[{i}].name"),
                    format!("`{}` is the name of rules[{j}] too: names must be unique (they label the rule's counters)", r.name),
                );
            }
        }
        Ok(())
    }

    /// Whether `other`'s rules key their buckets as these do (same names, keys and order):
    /// then a reload keeps the buckets; otherwise they start afresh.
    pub fn same_keys(&self, other: &RateConfig) -> bool {
        self.rules.len() == other.rules.len()
            && self
                .rules
                .iter()
                .zip(&other.rules)
                .all(|(a, b)| a.value.name == b.value.name && a.value.key == b.value.key)
    }

    /// The rules without their places.
    pub fn rule_values(&self) -> impl Iterator<Item = &RateRule> {
        self.rules.iter().map(|r| &r.value)
    }

    /// Where rule `i` is in the config: (line, column), 1-based; (0, 0) when unknown.
    pub fn rule_location(&self, i: usize) -> (u32, u32) {
        self.rules.get(i).map_or((0, 0), |r| {
            (r.referenced.line() as u32, r.referenced.column() as u32)
        })
    }
}

/// One rule: frames that meet `match` share buckets by `key`, each filled at `rate_pps` up to
/// `burst` frames. Its values are checked by [`RateConfig::validate`] (at the rule's line).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateRule {
    /// Labels the rule's counters: letters, digits and `_`, starting with a letter.
    pub name: String,
    #[serde(default, rename = "match")]
    pub matches: RuleMatch,
    pub key: KeySpec,
    /// Frames per second a bucket refills by (1 ..= [`MAX_RATE_PPS`]).
    pub rate_pps: u64,
    /// The bucket's depth in frames (1 ..= [`MAX_BURST`]); default `rate_pps` (one second).
    #[serde(default)]
    pub burst: Option<u64>,
}

impl RateRule {
    /// The bucket's depth in frames.
    pub fn burst(&self) -> u64 {
        self.burst.unwrap_or(self.rate_pps)
    }

    /// Checks the values; the error is (key under the rule, message).
    fn check(&self) -> Result<(), (&'static str, String)> {
        check_name(&self.name).map_err(|m| ("name", m))?;
        if self.rate_pps == 0 || self.rate_pps > MAX_RATE_PPS {
            return Err((
                "rate_pps",
                format!("{} is out of range 1 ..= {MAX_RATE_PPS}", self.rate_pps),
            ));
        }
        let burst = self.burst();
        if burst == 0 || burst > MAX_BURST {
            return Err((
                "burst",
                format!("{burst} is out of range 1 ..= {MAX_BURST}"),
            ));
        }
        let m = &self.matches;
        let l4 = matches!(m.proto, Some(Proto(6 | 17 | 132)));
        if m.src_port.is_some() && !l4 {
            return Err((
                "match.src_port",
                "needs `proto: tcp`, `udp` or `sctp`".into(),
            ));
        }
        if m.dst_port.is_some() && !l4 {
            return Err((
                "match.dst_port",
                "needs `proto: tcp`, `udp` or `sctp`".into(),
            ));
        }
        if m.tcp_flags.is_some() && m.proto != Some(Proto(6)) {
            return Err(("match.tcp_flags", "needs `proto: tcp`".into()));
        }
        Ok(())
    }
}

/// A rule name: it labels metrics, so letters, digits and `_`, starting with a letter, at most
/// 64 bytes.
fn check_name(n: &str) -> Result<(), String> {
    let ok = !n.is_empty()
        && n.len() <= 64
        && n.starts_with(|c: char| c.is_ascii_alphabetic())
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{n}` is not a name (letters, digits and `_`, starting with a letter, at most 64)"
        ))
    }
}

/// `match: { ip, proto, src_port, dst_port, tcp_flags }`: every key given must hold; none
/// given matches every IPv4 / IPv6 frame.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleMatch {
    /// 4 or 6.
    #[serde(default)]
    pub ip: Option<IpVersion>,
    #[serde(default)]
    pub proto: Option<Proto>,
    #[serde(default)]
    pub src_port: Option<PortRange>,
    #[serde(default)]
    pub dst_port: Option<PortRange>,
    #[serde(default)]
    pub tcp_flags: Option<TcpFlags>,
}

/// `ip: 4` or `ip: 6`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "u64")]
pub struct IpVersion(pub u8);

impl TryFrom<u64> for IpVersion {
    type Error = String;
    fn try_from(v: u64) -> Result<Self, String> {
        match v {
            4 | 6 => Ok(IpVersion(v as u8)),
            _ => Err(format!("`ip` is 4 or 6, got {v}")),
        }
    }
}

/// A YAML scalar that is a number or a word.
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Num(u64),
    Text(String),
}

/// `proto: tcp | udp | icmp | icmpv6 | sctp | 0..=255`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Scalar")]
pub struct Proto(pub u8);

impl TryFrom<Scalar> for Proto {
    type Error = String;
    fn try_from(s: Scalar) -> Result<Self, String> {
        match s {
            Scalar::Num(n) => u8::try_from(n)
                .map(Proto)
                .map_err(|_| format!("`proto` {n} is not an IP protocol number (0 ..= 255)")),
            Scalar::Text(t) => match t.as_str() {
                "tcp" => Ok(Proto(6)),
                "udp" => Ok(Proto(17)),
                "icmp" => Ok(Proto(1)),
                "icmpv6" => Ok(Proto(58)),
                "sctp" => Ok(Proto(132)),
                other => Err(format!(
                    "`proto` `{other}`: tcp, udp, icmp, icmpv6, sctp or a number 0 ..= 255"
                )),
            },
        }
    }
}

/// `80` or `"1024-65535"`: a range of ports, both ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Scalar")]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl TryFrom<Scalar> for PortRange {
    type Error = String;
    fn try_from(s: Scalar) -> Result<Self, String> {
        let port = |t: &str| {
            t.trim()
                .parse::<u16>()
                .map_err(|_| format!("port `{t}` is not a number 0 ..= 65535"))
        };
        match s {
            Scalar::Num(n) => u16::try_from(n)
                .map(|p| PortRange { lo: p, hi: p })
                .map_err(|_| format!("port {n} is out of range 0 ..= 65535")),
            Scalar::Text(t) => {
                let (lo, hi) = match t.split_once('-') {
                    Some((a, b)) => (port(a)?, port(b)?),
                    None => (port(&t)?, port(&t)?),
                };
                if lo > hi {
                    return Err(format!("port range `{t}`: {lo} is above {hi}"));
                }
                Ok(PortRange { lo, hi })
            }
        }
    }
}

/// `tcp_flags: "syn !ack"`: the named flags set, the `!`-named ones clear, the others either.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct TcpFlags {
    /// The flags tested.
    pub mask: u16,
    /// Their required values.
    pub value: u16,
}

/// TCP flag names and bits (`PacketMeta::tcp_flags`).
const FLAG_NAMES: [(&str, u16); 9] = [
    ("fin", 0x001),
    ("syn", 0x002),
    ("rst", 0x004),
    ("psh", 0x008),
    ("ack", 0x010),
    ("urg", 0x020),
    ("ece", 0x040),
    ("cwr", 0x080),
    ("ns", 0x100),
];

impl TryFrom<String> for TcpFlags {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let mut f = TcpFlags { mask: 0, value: 0 };
        for w in s.split([' ', ',']).filter(|w| !w.is_empty()) {
            let (clear, name) = match w.strip_prefix('!') {
                Some(n) => (true, n),
                None => (false, w),
            };
            let Some(&(_, bit)) = FLAG_NAMES.iter().find(|(n, _)| *n == name) else {
                return Err(format!(
                    "`tcp_flags`: `{name}` is not a flag (fin, syn, rst, psh, ack, urg, ece, cwr, ns; `!` before a name: clear)"
                ));
            };
            if f.mask & bit != 0 {
                return Err(format!("`tcp_flags`: `{name}` is named twice"));
            }
            f.mask |= bit;
            if !clear {
                f.value |= bit;
            }
        }
        if f.mask == 0 {
            return Err("`tcp_flags` names no flag (e.g. \"syn !ack\")".into());
        }
        Ok(f)
    }
}

/// `key:` what a rule's frames share buckets by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum KeySpec {
    /// `src` (whole address), `src_prefix/V4` (IPv6: /64) or `src_prefix/V4/V6`.
    Src { v4: u8, v6: u8 },
    /// `dst`, `dst_prefix/V4[/V6]`: the same by destination (one victim's budget).
    Dst { v4: u8, v6: u8 },
    /// `flow`: the protocol and both endpoints (address, port), both directions one flow.
    Flow,
}

/// The IPv6 prefix of `src_prefix/V4` written without one.
pub const DEFAULT_V6_PREFIX: u8 = 64;

impl TryFrom<String> for KeySpec {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let usage = "`key` is src, dst, flow, src_prefix/V4, src_prefix/V4/V6, dst_prefix/V4 or dst_prefix/V4/V6 (prefix lengths: IPv4 0 ..= 32, IPv6 0 ..= 128; IPv6 default 64)";
        match s.as_str() {
            "src" => return Ok(KeySpec::Src { v4: 32, v6: 128 }),
            "dst" => return Ok(KeySpec::Dst { v4: 32, v6: 128 }),
            "flow" => return Ok(KeySpec::Flow),
            _ => {}
        }
        let mut parts = s.split('/');
        let head = parts.next().unwrap_or("");
        let lens: Vec<&str> = parts.collect();
        if !(head == "src_prefix" || head == "dst_prefix") || lens.is_empty() || lens.len() > 2 {
            return Err(format!("`{s}`: {usage}"));
        }
        let len = |t: &str, max: u8| match t.parse::<u8>() {
            Ok(n) if n <= max => Ok(n),
            _ => Err(format!(
                "`{s}`: prefix length `{t}` is not 0 ..= {max}; {usage}"
            )),
        };
        let v4 = len(lens[0], 32)?;
        let v6 = match lens.get(1) {
            Some(t) => len(t, 128)?,
            None => DEFAULT_V6_PREFIX,
        };
        Ok(if head == "src_prefix" {
            KeySpec::Src { v4, v6 }
        } else {
            KeySpec::Dst { v4, v6 }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(yaml: &str) -> Result<RateRule, String> {
        let c = format!("entries: 8\nrules:\n  - {yaml}\n");
        let c = serde_saphyr::from_str::<RateConfig>(&c).map_err(|e| e.to_string())?;
        c.validate()
            .map_err(|e| format!("{e} at {:?}", c.rule_location(0)))?;
        Ok(c.rules[0].value.clone())
    }

    #[test]
    fn keys_parse() {
        let k = |s: &str| KeySpec::try_from(s.to_string());
        assert_eq!(k("src"), Ok(KeySpec::Src { v4: 32, v6: 128 }));
        assert_eq!(k("src_prefix/24"), Ok(KeySpec::Src { v4: 24, v6: 64 }));
        assert_eq!(k("dst_prefix/16/48"), Ok(KeySpec::Dst { v4: 16, v6: 48 }));
        assert_eq!(k("flow"), Ok(KeySpec::Flow));
        for bad in [
            "",
            "src/24",
            "src_prefix",
            "src_prefix/33",
            "src_prefix/24/129",
            "src_prefix/a",
            "src_prefix/1/2/3",
            "flows",
        ] {
            assert!(k(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flags_and_ports_parse() {
        let f = TcpFlags::try_from("syn !ack".to_string()).unwrap();
        assert_eq!((f.mask, f.value), (0x12, 0x02));
        assert!(TcpFlags::try_from("syn syn".to_string()).is_err());
        assert!(TcpFlags::try_from("sin".to_string()).is_err());
        assert!(TcpFlags::try_from("".to_string()).is_err());
        let p: PortRange = serde_saphyr::from_str("\"1024-2048\"").unwrap();
        assert_eq!((p.lo, p.hi), (1024, 2048));
        let p: PortRange = serde_saphyr::from_str("80").unwrap();
        assert_eq!((p.lo, p.hi), (80, 80));
        assert!(serde_saphyr::from_str::<PortRange>("\"9-1\"").is_err());
        assert!(serde_saphyr::from_str::<PortRange>("70000").is_err());
    }

    #[test]
    fn a_rule_reads_and_defaults_its_burst() {
        let r = rule(
            "{ name: syn, match: { proto: tcp, tcp_flags: \"syn !ack\" }, key: src, rate_pps: 10 }",
        )
        .unwrap();
        assert_eq!(r.burst(), 10);
        assert_eq!(r.matches.proto, Some(Proto(6)));
    }

    #[test]
    fn bad_rules_are_errors_naming_the_key() {
        for (yaml, want) in [
            ("{ name: a, key: src, rate_pps: 0 }", "rate_pps"),
            ("{ name: a, key: src, rate_pps: 5, burst: 0 }", "burst"),
            ("{ name: a, key: src, rate_pps: 2000000000 }", "rate_pps"),
            ("{ name: 1a, key: src, rate_pps: 5 }", "name"),
            (
                "{ name: a, key: src, rate_pps: 5, match: { dst_port: 80 } }",
                "dst_port",
            ),
            (
                "{ name: a, key: src, rate_pps: 5, match: { proto: udp, tcp_flags: syn } }",
                "tcp_flags",
            ),
            (
                "{ name: a, key: src, rate_pps: 5, match: { proto: tcpp } }",
                "proto",
            ),
            ("{ name: a, key: src, rate_pps: 5, match: { ip: 5 } }", "ip"),
            ("{ name: a, key: src, rate_pps: 5, colour: red }", "colour"),
            ("{ name: a, key: nowhere, rate_pps: 5 }", "key"),
            ("{ name: a, rate_pps: 5 }", "key"),
        ] {
            let e = rule(yaml).expect_err(yaml);
            assert!(e.contains(want), "{yaml}: {e}");
            // At the rule's line (3) or the value's own.
            assert!(
                e.contains("(3, 5)") || e.contains("line 3"),
                "{yaml}: no location in {e}"
            );
        }
    }

    #[test]
    fn the_config_checks_names_and_sizes() {
        let c = |y: &str| serde_saphyr::from_str::<RateConfig>(y).unwrap().validate();
        let two = "entries: 64\nrules:\n  - { name: a, key: src, rate_pps: 5 }\n  - { name: a, key: flow, rate_pps: 5 }\n";
        let e = c(two).unwrap_err().to_string();
        assert!(e.contains("rules[1].name"), "{e}");
        let e = c("entries: 12\nrules:\n  - { name: a, key: src, rate_pps: 5 }\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("entries"), "{e}");
        let e = c("entries: 64\nrules: []\n").unwrap_err().to_string();
        assert!(e.contains("rules"), "{e}");
        let many: String = (0..=MAX_RULES)
            .map(|i| format!("  - {{ name: r{i}, key: src, rate_pps: 5 }}\n"))
            .collect();
        let e = c(&format!("entries: 64\nrules:\n{many}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most"), "{e}");
        assert!(
            c("entries: 64\non_full: drop\nrules:\n  - { name: a, key: src, rate_pps: 5 }\n")
                .is_ok()
        );
    }
}
