//! The ClassBench / `dpdk-test-acl` rule and trace formats.
//!
//! Rule line: `@SRC/LEN DST/LEN SPLO : SPHI DPLO : DPHI PROTO/MASK [flags...]`, whitespace
//! separated; tokens after the protocol are ignored, as `dpdk-test-acl` does. Addresses are IPv4
//! dotted quads or IPv6 text. As in rte_acl, address bits past the prefix length are ignored.
//! Trace line: `SRC DST SPORT DPORT PROTO [FLAGS [FILTER]]`, addresses as 32-bit decimals
//! (ClassBench), dotted quads or IPv6 text (`dpdk-test-acl --ipv6`); the family is decided per
//! line. This is the one trace reader: `classify`, and the `gen` port that `verify --trace`,
//! the daemon and the benches replay traces through.

use super::{AclAction, AclRule, Family, Masked, PortRange, Prefix};
use crate::abi::{AclKey, VLAN_NONE};
use crate::error::{Location, RuleError};
use std::net::IpAddr;
use std::path::Path;

/// Splits a line into tokens with their 1-based columns.
fn tokens(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                out.push((s + 1, &line[s..i]));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push((s + 1, &line[s..]));
    }
    out
}

/// Parses `ADDR/LEN` (text address). Returns the family, the prefix (bits past LEN cleared).
pub fn parse_prefix(s: &str) -> Result<(Family, Prefix), String> {
    let (a, l) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let ip: IpAddr = a
        .parse()
        .map_err(|_| format!("bad address `{a}` in prefix `{s}`"))?;
    let (family, max, addr) = match ip {
        IpAddr::V4(v4) => (Family::V4, 32u32, [u32::from(v4), 0, 0, 0]),
        IpAddr::V6(v6) => {
            let o = v6.octets();
            let mut w = [0u32; 4];
            for (i, wi) in w.iter_mut().enumerate() {
                *wi = u32::from_be_bytes([o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]]);
            }
            (Family::V6, 128u32, w)
        }
    };
    let len = match l {
        None => max,
        Some(l) => l
            .parse::<u32>()
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| format!("bad prefix length `{l}` in `{s}` (0..={max})"))?,
    };
    let mut p = Prefix {
        addr,
        len: len as u8,
    };
    let m = p.mask(family);
    for (a, m) in p.addr.iter_mut().zip(m) {
        *a &= m;
    }
    Ok((family, p))
}

fn parse_num(s: &str) -> Option<u32> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// Parses a ClassBench rule file (already decompressed).
pub fn parse_rules(path: &Path, text: &str) -> Result<Vec<AclRule>, RuleError> {
    let mut rules = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let ln = ln + 1;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        rules.push(parse_rule_line(path, ln, line)?);
    }
    Ok(rules)
}

fn parse_rule_line(path: &Path, ln: usize, line: &str) -> Result<AclRule, RuleError> {
    let err = |col: usize, field: &str, msg: String| {
        RuleError::new(Location::new(path, ln, col), field, msg)
    };
    // Normalise "lo:hi" and "lo : hi" into the same token stream.
    let toks: Vec<(usize, &str)> = tokens(line)
        .into_iter()
        .flat_map(|(c, t)| split_colon_range(c, t))
        .collect();
    let get = |i: usize, field: &str| -> Result<(usize, &str), RuleError> {
        toks.get(i).copied().ok_or_else(|| {
            err(
                line.len() + 1,
                field,
                format!("missing field `{field}` (expected 9 tokens: @src dst splo : sphi dplo : dphi proto/mask)"),
            )
        })
    };
    let (c0, src) = get(0, "src")?;
    let src = src
        .strip_prefix('@')
        .ok_or_else(|| err(c0, "src", "rule line must start with '@'".into()))?;
    let (sf, sp) = parse_prefix(src).map_err(|m| err(c0 + 1, "src", m))?;
    let (c1, dst) = get(1, "dst")?;
    let (df, dp) = parse_prefix(dst).map_err(|m| err(c1, "dst", m))?;
    if sf != df {
        return Err(err(
            c1,
            "dst",
            "source and destination address families differ".into(),
        ));
    }
    let mut ports = [PortRange::ANY; 2];
    for (k, name) in ["src_port", "dst_port"].iter().enumerate() {
        let (cl, lo) = get(2 + 3 * k, name)?;
        let (cc, colon) = get(3 + 3 * k, name)?;
        let (ch, hi) = get(4 + 3 * k, name)?;
        if colon != ":" {
            return Err(err(
                cc,
                name,
                format!("expected ':' in port range, found `{colon}`"),
            ));
        }
        let lo_v = parse_num(lo)
            .filter(|&v| v <= 65535)
            .ok_or_else(|| err(cl, name, format!("bad port `{lo}`")))?;
        let hi_v = parse_num(hi)
            .filter(|&v| v <= 65535)
            .ok_or_else(|| err(ch, name, format!("bad port `{hi}`")))?;
        if lo_v > hi_v {
            return Err(err(
                cl,
                name,
                format!("inverted port range {lo_v} : {hi_v}"),
            ));
        }
        ports[k] = PortRange {
            lo: lo_v as u16,
            hi: hi_v as u16,
        };
    }
    let (cp, proto) = get(8, "proto")?;
    let (pv, pm) = proto
        .split_once('/')
        .ok_or_else(|| err(cp, "proto", format!("expected VALUE/MASK, found `{proto}`")))?;
    let pv = parse_num(pv)
        .filter(|&v| v <= 255)
        .ok_or_else(|| err(cp, "proto", format!("bad protocol value `{pv}`")))?;
    let pm = parse_num(pm)
        .filter(|&v| v <= 255)
        .ok_or_else(|| err(cp, "proto", format!("bad protocol mask `{pm}`")))?;
    Ok(AclRule {
        family: sf,
        src: sp,
        dst: dp,
        src_port: ports[0],
        dst_port: ports[1],
        proto: Masked::<u8>::new(pv as u8, pm as u8),
        action: AclAction::default(),
        loc: Location::new(path, ln, 1),
        ..AclRule::any()
    })
}

/// "1024:2000" -> "1024", ":", "2000" (columns kept); other tokens unchanged.
fn split_colon_range(col: usize, t: &str) -> Vec<(usize, &str)> {
    if t != ":" && !t.contains('.') && t.matches(':').count() == 1 && !t.contains('/') {
        let i = t.find(':').unwrap_or(0);
        let mut v = Vec::new();
        if i > 0 {
            v.push((col, &t[..i]));
        }
        v.push((col + i, ":"));
        if i + 1 < t.len() {
            v.push((col + i + 1, &t[i + 1..]));
        }
        v
    } else {
        vec![(col, t)]
    }
}

/// One trace line: the key, and the filter index the generator made it from (if given).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    pub key: AclKey,
    pub filter: Option<u32>,
}

fn parse_addr(s: &str) -> Option<(u8, [u32; 4])> {
    if let Ok(v) = s.parse::<u32>() {
        return Some((4, [v, 0, 0, 0]));
    }
    match s.parse::<IpAddr>().ok()? {
        IpAddr::V4(a) => Some((4, [u32::from(a), 0, 0, 0])),
        IpAddr::V6(a) => {
            let o = a.octets();
            let mut w = [0u32; 4];
            for (i, wi) in w.iter_mut().enumerate() {
                *wi = u32::from_be_bytes([o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]]);
            }
            Some((6, w))
        }
    }
}

/// Parses a ClassBench trace (already decompressed). Keys get no VLAN and ingress port 0.
pub fn parse_trace(path: &Path, text: &str) -> Result<Vec<TraceEntry>, RuleError> {
    let mut out = Vec::with_capacity(text.len() / 40);
    for (ln, line) in text.lines().enumerate() {
        let ln = ln + 1;
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let t = tokens(line);
        let err = |i: usize, field: &str, msg: &str| {
            let col = t.get(i).map_or(line.len() + 1, |x| x.0);
            RuleError::new(Location::new(path, ln, col), field, msg)
        };
        let tok = |i: usize, field: &str| -> Result<&str, RuleError> {
            t.get(i)
                .map(|x| x.1)
                .ok_or_else(|| err(i, field, "missing field"))
        };
        let addr = |i: usize, f: &str| -> Result<(u8, [u32; 4]), RuleError> {
            let s = tok(i, f)?;
            parse_addr(s).ok_or_else(|| {
                let why = format!(
                    "`{s}` is neither an IPv4 address (32-bit decimal or dotted quad) nor an \
                     IPv6 address"
                );
                err(i, f, &why)
            })
        };
        let (sv, src) = addr(0, "src")?;
        let (dv, dst) = addr(1, "dst")?;
        if sv != dv {
            let why = format!("IPv{dv} address after an IPv{sv} `src`: a line is of one family");
            return Err(err(1, "dst", &why));
        }
        let port = |i: usize, f: &str| -> Result<u16, RuleError> {
            tok(i, f)?
                .parse::<u16>()
                .map_err(|_| err(i, f, "bad port (0..=65535)"))
        };
        let sport = port(2, "src_port")?;
        let dport = port(3, "dst_port")?;
        let proto = parse_num(tok(4, "proto")?)
            .filter(|&v| v <= 255)
            .ok_or_else(|| err(4, "proto", "bad protocol (0..=255)"))?;
        let filter = t.get(6).and_then(|x| x.1.parse::<u32>().ok());
        out.push(TraceEntry {
            key: AclKey {
                src_ip: src,
                dst_ip: dst,
                src_port: sport,
                dst_port: dport,
                proto: proto as u8,
                ip_version: sv,
                dscp: 0,
                tcp_flags: 0,
                vlan_id: VLAN_NONE,
                port_id: 0,
            },
            filter,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_dpdk_rule_line() {
        let r = parse_rules(
            Path::new("x"),
            "@186.11.101.36/32\t20.69.109.0/24\t0 : 65535\t1521 : 1521\t0x06/0xFF\t0x1000/0x1000\t\n",
        )
        .unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].family, Family::V4);
        assert_eq!(r[0].dst.len, 24);
        assert_eq!(r[0].dst_port, PortRange { lo: 1521, hi: 1521 });
        assert_eq!(r[0].proto, Masked::<u8>::exact(6));
    }

    #[test]
    fn errors_name_line_column_field() {
        let e = parse_rules(
            Path::new("r.txt"),
            "@1.2.3.4/32 5.6.7.8/33 0 : 1 2 : 3 0x06/0xFF\n",
        )
        .unwrap_err();
        assert_eq!(e.loc.line, 1);
        assert_eq!(e.loc.column, 13);
        assert_eq!(e.field, "dst");
        let e = parse_rules(
            Path::new("r.txt"),
            "\n@1.2.3.4/32 5.6.7.8/32 9 : 1 2 : 3 0x06/0xFF\n",
        )
        .unwrap_err();
        assert_eq!((e.loc.line, e.field.as_str()), (2, "src_port"));
        assert!(e.message.contains("inverted"));
    }

    #[test]
    fn parses_trace_and_ipv6_rules() {
        let t = parse_trace(
            Path::new("t"),
            "2324631747\t1269011456\t65535\t1433\t6\t0\t6523\n",
        )
        .unwrap();
        assert_eq!(t[0].key.src_ip[0], 2324631747);
        assert_eq!(t[0].key.dst_port, 1433);
        assert_eq!(t[0].filter, Some(6523));
        let r = parse_rules(Path::new("x"), "@2001:db8::/32 ::/0 0:65535 80:80 6/0xff\n").unwrap();
        assert_eq!(r[0].family, Family::V6);
        assert_eq!(r[0].src.addr[0], 0x2001_0db8);
    }
}
