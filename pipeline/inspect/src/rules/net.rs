//! Addresses, ports and the variables (`$HOME_NET`, `$HTTP_PORTS`) of a rule header.
//!
//! Both are parsed into sorted, disjoint, inclusive intervals (IPv4 as IPv4-mapped IPv6, so
//! one 128-bit space holds both): a flat form the GPU can take as it is. A list is the union
//! of its positive items minus the union of its negated ones (all addresses when it has only
//! negated ones), as Suricata defines it.

use std::collections::HashMap;
use std::net::IpAddr;

/// A set of IP addresses as sorted, disjoint, inclusive intervals of IPv6 (IPv4 mapped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrSet(pub Vec<(u128, u128)>);

/// A set of ports as sorted, disjoint, inclusive intervals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSet(pub Vec<(u16, u16)>);

/// The 128-bit key of an address: IPv4 as `::ffff:a.b.c.d`.
pub fn addr_key(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

impl AddrSet {
    pub fn any() -> Self {
        AddrSet(vec![(0, u128::MAX)])
    }
    pub fn contains(&self, a: IpAddr) -> bool {
        let k = addr_key(a);
        self.0.iter().any(|&(lo, hi)| lo <= k && k <= hi)
    }
}

impl PortSet {
    pub fn any() -> Self {
        PortSet(vec![(0, u16::MAX)])
    }
    pub fn contains(&self, p: u16) -> bool {
        self.0.iter().any(|&(lo, hi)| lo <= p && p <= hi)
    }
}

/// Rule variables: name (without `$`) -> value as written in a header (`[10.0.0.0/8,...]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variables(pub HashMap<String, String>);

impl Default for Variables {
    /// Suricata's default `suricata.yaml` values.
    fn default() -> Self {
        let mut m = HashMap::new();
        let home = "[192.168.0.0/16,10.0.0.0/8,172.16.0.0/12]";
        m.insert("HOME_NET".into(), home.into());
        m.insert("EXTERNAL_NET".into(), "!$HOME_NET".into());
        for s in [
            "HTTP_SERVERS",
            "SMTP_SERVERS",
            "SQL_SERVERS",
            "DNS_SERVERS",
            "TELNET_SERVERS",
            "AIM_SERVERS",
            "DC_SERVERS",
            "DNP3_SERVER",
            "DNP3_CLIENT",
            "MODBUS_CLIENT",
            "MODBUS_SERVER",
            "ENIP_CLIENT",
            "ENIP_SERVER",
        ] {
            m.insert(s.into(), "$HOME_NET".into());
        }
        for (k, v) in [
            ("HTTP_PORTS", "80"),
            ("SHELLCODE_PORTS", "!80"),
            ("ORACLE_PORTS", "1521"),
            ("SSH_PORTS", "22"),
            ("DNP3_PORTS", "20000"),
            ("MODBUS_PORTS", "502"),
            ("FILE_DATA_PORTS", "[$HTTP_PORTS,110,143]"),
            ("FTP_PORTS", "21"),
        ] {
            m.insert(k.into(), v.into());
        }
        Variables(m)
    }
}

impl Variables {
    /// The defaults with `overrides` replacing or adding names.
    pub fn with(overrides: &[(&str, &str)]) -> Self {
        let mut v = Variables::default();
        for (k, val) in overrides {
            v.0.insert(k.trim_start_matches('$').to_string(), val.to_string());
        }
        v
    }
}

/// Bounds the nesting of lists, negations and variables (variables may refer to variables:
/// this also catches cycles), so hostile input cannot exhaust the stack.
const MAX_NEST: usize = 32;

/// Sorted, merged union of inclusive intervals.
fn normalize<T: Ord + Copy + Step>(mut v: Vec<(T, T)>) -> Vec<(T, T)> {
    v.sort();
    let mut out: Vec<(T, T)> = Vec::with_capacity(v.len());
    for (lo, hi) in v {
        if let Some(last) = out.last_mut() {
            if last.1 >= lo || last.1.next() == Some(lo) {
                last.1 = last.1.max(hi);
                continue;
            }
        }
        out.push((lo, hi));
    }
    out
}

/// Complement within [MIN, MAX] of a normalized set.
fn complement<T: Ord + Copy + Step>(v: &[(T, T)]) -> Vec<(T, T)> {
    let mut out = Vec::new();
    let mut next = Some(T::MIN);
    for &(lo, hi) in v {
        if let Some(n) = next {
            if n < lo {
                out.push((n, lo.prev().unwrap_or(lo)));
            }
        }
        next = hi.next();
    }
    if let Some(n) = next {
        out.push((n, T::MAX));
    }
    out
}

fn minus<T: Ord + Copy + Step>(a: &[(T, T)], b: &[(T, T)]) -> Vec<(T, T)> {
    // a \ b = a ∩ ¬b.
    intersect(a, &complement(b))
}

fn intersect<T: Ord + Copy + Step>(a: &[(T, T)], b: &[(T, T)]) -> Vec<(T, T)> {
    let mut out = Vec::new();
    for &(alo, ahi) in a {
        for &(blo, bhi) in b {
            let lo = alo.max(blo);
            let hi = ahi.min(bhi);
            if lo <= hi {
                out.push((lo, hi));
            }
        }
    }
    normalize(out)
}

trait Step: Sized {
    const MIN: Self;
    const MAX: Self;
    fn next(self) -> Option<Self>;
    fn prev(self) -> Option<Self>;
}

impl Step for u128 {
    const MIN: Self = 0;
    const MAX: Self = u128::MAX;
    fn next(self) -> Option<Self> {
        self.checked_add(1)
    }
    fn prev(self) -> Option<Self> {
        self.checked_sub(1)
    }
}

impl Step for u16 {
    const MIN: Self = 0;
    const MAX: Self = u16::MAX;
    fn next(self) -> Option<Self> {
        self.checked_add(1)
    }
    fn prev(self) -> Option<Self> {
        self.checked_sub(1)
    }
}

/// Parses one address (CIDR) or port (range) into an interval.
type Atom<T> = dyn Fn(&str) -> Result<(T, T), String>;

/// One parsed header field: a grammar shared by addresses and ports, with `atom` parsing
/// a single address (CIDR) or port (range).
fn parse_set<T: Ord + Copy + Step>(
    s: &str,
    vars: &Variables,
    depth: usize,
    atom: &Atom<T>,
) -> Result<Vec<(T, T)>, String> {
    let s = s.trim();
    if depth > MAX_NEST {
        return Err(format!(
            "lists, negations and variables nest deeper than {MAX_NEST} (a variable cycle?)"
        ));
    }
    if s.is_empty() {
        return Err("empty".into());
    }
    if let Some(rest) = s.strip_prefix('!') {
        return Ok(complement(&parse_set(rest, vars, depth + 1, atom)?));
    }
    if let Some(name) = s.strip_prefix('$') {
        let v = vars
            .0
            .get(name)
            .ok_or_else(|| format!("undefined variable ${name}"))?;
        return parse_set(v, vars, depth + 1, atom);
    }
    if s == "any" {
        return Ok(vec![(T::MIN, T::MAX)]);
    }
    if let Some(inner) = s.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| format!("list '{s}' does not end with ']'"))?;
        let (mut pos, mut neg) = (Vec::new(), Vec::new());
        let mut any_pos = false;
        for item in split_list(inner)? {
            let item = item.trim();
            if let Some(n) = item.strip_prefix('!') {
                neg.extend(parse_set(n, vars, depth + 1, atom)?);
            } else {
                any_pos = true;
                pos.extend(parse_set(item, vars, depth + 1, atom)?);
            }
        }
        let base = if any_pos {
            normalize(pos)
        } else {
            vec![(T::MIN, T::MAX)]
        };
        return Ok(minus(&base, &normalize(neg)));
    }
    Ok(vec![atom(s)?])
}

/// Top-level commas of a list body (nested `[...]` kept whole).
fn split_list(s: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err("unbalanced ']'".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced '['".into());
    }
    out.push(&s[start..]);
    if out.iter().any(|i| i.trim().is_empty()) {
        return Err("empty list item".into());
    }
    Ok(out)
}

fn addr_atom(s: &str) -> Result<(u128, u128), String> {
    let (ip, bits) = match s.split_once('/') {
        Some((ip, b)) => (ip, Some(b)),
        None => (s, None),
    };
    let ip: IpAddr = ip.parse().map_err(|_| format!("bad address '{s}'"))?;
    let (key, max_bits, base_bits) = match ip {
        IpAddr::V4(_) => (addr_key(ip), 32u32, 96u32),
        IpAddr::V6(v6) => (u128::from(v6), 128, 0),
    };
    let bits = match bits {
        None => max_bits,
        Some(b) => b
            .parse::<u32>()
            .ok()
            .filter(|&b| b <= max_bits)
            .ok_or_else(|| format!("bad prefix length in '{s}'"))?,
    };
    let host_bits = max_bits - bits;
    let total = base_bits + bits;
    let mask: u128 = if total == 0 {
        0
    } else {
        u128::MAX << (128 - total)
    };
    let lo = key & mask;
    let hi = if host_bits == 0 { lo } else { lo | !mask };
    Ok((lo, hi))
}

fn port_atom(s: &str) -> Result<(u16, u16), String> {
    let num = |t: &str| {
        t.trim()
            .parse::<u16>()
            .map_err(|_| format!("bad port '{s}'"))
    };
    let (lo, hi) = match s.split_once(':') {
        Some((a, b)) if a.trim().is_empty() && b.trim().is_empty() => {
            return Err(format!("port range '{s}' has no bounds"));
        }
        Some((a, b)) => (
            if a.trim().is_empty() { 0 } else { num(a)? },
            if b.trim().is_empty() {
                u16::MAX
            } else {
                num(b)?
            },
        ),
        None => (num(s)?, num(s)?),
    };
    if lo > hi {
        return Err(format!("port range '{s}' is empty (low > high)"));
    }
    Ok((lo, hi))
}

/// Parses an address field (`any`, CIDR, `[list]`, `!`, `$VAR`).
pub fn parse_addrs(s: &str, vars: &Variables) -> Result<AddrSet, String> {
    let set = parse_set(s, vars, 0, &addr_atom)?;
    if set.is_empty() {
        return Err(format!("'{s}' matches no address"));
    }
    Ok(AddrSet(set))
}

/// Parses a port field (`any`, `80`, `1024:`, `:1023`, `[list]`, `!`, `$VAR`).
pub fn parse_ports(s: &str, vars: &Variables) -> Result<PortSet, String> {
    let set = parse_set(s, vars, 0, &port_atom)?;
    if set.is_empty() {
        return Err(format!("'{s}' matches no port"));
    }
    Ok(PortSet(set))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_lists_negation_and_variables() {
        let v = Variables::default();
        let home = parse_addrs("$HOME_NET", &v).unwrap();
        assert!(home.contains(ip("10.1.2.3")) && home.contains(ip("192.168.9.9")));
        assert!(!home.contains(ip("8.8.8.8")));
        let ext = parse_addrs("$EXTERNAL_NET", &v).unwrap();
        assert!(ext.contains(ip("8.8.8.8")) && !ext.contains(ip("10.0.0.1")));
        assert!(ext.contains(ip("2001:db8::1")));
        let l = parse_addrs("[10.0.0.0/8, !10.1.0.0/16, [!10.1.2.3, 1.1.1.1]]", &v).unwrap();
        assert!(l.contains(ip("10.2.0.1")));
        assert!(!l.contains(ip("10.1.0.1")));
        // A nested list with only a negation means "all but 10.1.2.3", so 1.1.1.1 is in.
        assert!(l.contains(ip("1.1.1.1")));
        let n = parse_addrs("![1.2.3.4,5.6.7.0/24]", &v).unwrap();
        assert!(!n.contains(ip("5.6.7.200")) && n.contains(ip("5.6.8.1")));
        let v6 = parse_addrs("2001:db8::/32", &v).unwrap();
        assert!(v6.contains(ip("2001:db8:ffff::1")) && !v6.contains(ip("2001:db9::1")));
        assert!(!v6.contains(ip("32.1.13.184")));
        assert!(parse_addrs("0.0.0.0/0", &v)
            .unwrap()
            .contains(ip("255.1.1.1")));
    }

    #[test]
    fn ports() {
        let v = Variables::default();
        let p = parse_ports("[1024:,!8080,:21]", &v).unwrap();
        assert!(p.contains(2000) && p.contains(21) && p.contains(0));
        assert!(!p.contains(8080) && !p.contains(80));
        assert!(parse_ports("$HTTP_PORTS", &v).unwrap().contains(80));
        assert!(!parse_ports("$SHELLCODE_PORTS", &v).unwrap().contains(80));
        assert!(parse_ports("!$HTTP_PORTS", &v).unwrap().contains(81));
    }

    #[test]
    fn bad_fields_are_errors() {
        let mut v = Variables::default();
        v.0.insert("LOOP".into(), "[$LOOP]".into());
        for bad in [
            "1.2.3.4/33",
            "1.2.3",
            "[1.2.3.4",
            "$NOPE",
            "$LOOP",
            "",
            "[1.1.1.1,,2.2.2.2]",
            "!any",
        ] {
            assert!(parse_addrs(bad, &v).is_err(), "{bad}");
        }
        for bad in ["70000", "90:80", "x", "[80", "!any", "$NOPE", ":"] {
            assert!(parse_ports(bad, &v).is_err(), "{bad}");
        }
        // Deep nesting is an error, not a stack overflow.
        let deep = format!("{}1.1.1.1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_addrs(&deep, &v).unwrap_err().contains("nest deeper"));
        assert!(parse_ports(&format!("{}80", "!".repeat(100_000)), &v).is_err());
        assert!(parse_addrs(&format!("{}1.1.1.1{}", "[".repeat(20), "]".repeat(20)), &v).is_ok());
    }
}
