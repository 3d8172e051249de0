//! The rule parser: header fields, then each option keyword into the [`Rule`] model.

use super::lex::{content_bytes, split_rule, LexError};
use super::net::{parse_addrs, parse_ports, Variables};
use super::pcre_kw::{compile_pcres, pcre};
use super::{
    Action, Buffer, ByteJump, ByteOp, ByteTest, Content, Detect, Direction, FastPattern, FlagMode,
    Flow, Flowbit, FlowbitCmd, NumFormat, Proto, Range, Rule, TcpFlags, Threshold, ThresholdKind,
    Track,
};

type Res<T> = Result<T, LexError>;

fn err<T>(k: &str, m: impl Into<String>) -> Res<T> {
    Err((k.to_string(), m.into()))
}

/// Parses one rule (the text of its line). The error is (keyword or header field, message);
/// the loader adds the file and line.
pub fn parse_rule(text: &str, vars: &Variables) -> Result<Rule, (String, String)> {
    let raw = split_rule(text)?;
    let h = &raw.header;
    let action = match h[0] {
        "alert" => Action::Alert,
        "drop" => Action::Drop,
        "pass" => Action::Pass,
        "reject" | "rejectsrc" | "rejectdst" | "rejectboth" => Action::Reject,
        a => return err("action", format!("unknown action '{a}'")),
    };
    let proto = match h[1] {
        "tcp" | "tcp-pkt" => Proto::Tcp,
        "udp" => Proto::Udp,
        "icmp" => Proto::Icmp,
        "ip" => Proto::Ip,
        "http" => Proto::Http,
        p if p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') && !p.is_empty() => {
            Proto::AppLayer(p.to_string())
        }
        p => return err("protocol", format!("bad protocol '{p}'")),
    };
    let field = |k: &str, e: String| (k.to_string(), e);
    let src = parse_addrs(h[2], vars).map_err(|e| field("source", e))?;
    let src_ports = parse_ports(h[3], vars).map_err(|e| field("source port", e))?;
    let direction = match h[4] {
        "->" => Direction::To,
        "<>" => Direction::Both,
        d => return err("direction", format!("'{d}' is neither '->' nor '<>'")),
    };
    let dst = parse_addrs(h[5], vars).map_err(|e| field("destination", e))?;
    let dst_ports = parse_ports(h[6], vars).map_err(|e| field("destination port", e))?;
    let mut rule = Rule {
        action,
        proto,
        src,
        src_ports,
        direction,
        dst,
        dst_ports,
        msg: String::new(),
        sid: 0,
        rev: 0,
        gid: 1,
        classtype: None,
        priority: None,
        metadata: Vec::new(),
        references: Vec::new(),
        detect: Vec::new(),
        dsize: None,
        flags: None,
        itype: None,
        icode: None,
        flow: None,
        flowbits: Vec::new(),
        threshold: None,
        detection_filter: None,
        unknown: Vec::new(),
        keywords: Vec::new(),
    };
    let mut st = State::default();
    let mut have_sid = false;
    for &(k, v) in &raw.options {
        if k == "sid" {
            have_sid = true;
        }
        rule.keywords.push(k.to_string());
        if let Err(e) = option(&mut rule, &mut st, k, v) {
            // After a keyword pktwarp does not know (a sticky buffer, say), what follows
            // may be valid for it: the rule is skipped for that keyword, not malformed.
            if rule.unknown.is_empty() {
                return Err(e);
            }
            rule.unknown.push((
                format!("{k} (after an unknown keyword)"),
                v.map(str::to_string),
            ));
            return Ok(rule);
        }
    }
    if !have_sid {
        return err("sid", "the rule has no sid");
    }
    finish(&mut rule)?;
    Ok(rule)
}

/// A msg: quotes removed, and a backslash keeps the character after it (Suricata accepts
/// any escape in msg).
fn unquote_msg(v: &str) -> String {
    let v = v.trim();
    let inner = v
        .strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .unwrap_or(v);
    let mut out = String::with_capacity(inner.len());
    let mut it = inner.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            if let Some(n) = it.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Parser state across options: the sticky buffer and the content modifiers apply to.
#[derive(Default)]
struct State {
    sticky: Option<Buffer>,
    last_content: Option<usize>,
}

fn need<'a>(k: &str, v: Option<&'a str>) -> Res<&'a str> {
    v.filter(|v| !v.is_empty())
        .ok_or_else(|| (k.to_string(), "needs a value".to_string()))
}

fn num<T: std::str::FromStr>(k: &str, v: &str) -> Res<T> {
    v.trim()
        .parse()
        .map_err(|_| (k.to_string(), format!("'{v}' is not a valid number")))
}

/// Legacy content modifiers that move the previous content into a buffer.
fn legacy_buffer(k: &str) -> Option<Buffer> {
    Some(match k {
        "http_uri" => Buffer::HttpUri,
        "http_raw_uri" => Buffer::HttpRawUri,
        "http_method" => Buffer::HttpMethod,
        "http_header" => Buffer::HttpHeader,
        "http_raw_header" => Buffer::HttpRawHeader,
        "http_user_agent" => Buffer::HttpUserAgent,
        "http_host" => Buffer::HttpHost,
        "http_raw_host" => Buffer::HttpRawHost,
        "http_cookie" => Buffer::HttpCookie,
        "http_client_body" => Buffer::HttpClientBody,
        "http_stat_code" => Buffer::HttpStatCode,
        "http_stat_msg" => Buffer::HttpStatMsg,
        _ => return None,
    })
}

/// Sticky buffer keywords: every payload keyword after them inspects that buffer.
fn sticky_buffer(k: &str) -> Option<Buffer> {
    Some(match k {
        "pkt_data" => Buffer::Payload,
        "http.uri" => Buffer::HttpUri,
        "http.uri.raw" => Buffer::HttpRawUri,
        "http.method" => Buffer::HttpMethod,
        "http.header" => Buffer::HttpHeader,
        "http.header.raw" => Buffer::HttpRawHeader,
        "http.user_agent" => Buffer::HttpUserAgent,
        "http.host" => Buffer::HttpHost,
        "http.host.raw" => Buffer::HttpRawHost,
        "http.cookie" => Buffer::HttpCookie,
        "http.request_body" => Buffer::HttpClientBody,
        "http.stat_code" => Buffer::HttpStatCode,
        "http.stat_msg" => Buffer::HttpStatMsg,
        "file_data" | "file.data" | "http.response_body" => Buffer::FileData,
        "http_header_names" | "http.header_names" => Buffer::HttpHeaderNames,
        "http_start" | "http.start" => Buffer::HttpStart,
        "http_protocol" | "http.protocol" => Buffer::HttpProtocol,
        "http_request_line" | "http.request_line" => Buffer::HttpRequestLine,
        "http_response_line" | "http.response_line" => Buffer::HttpResponseLine,
        "http_content_type" | "http.content_type" => Buffer::HttpContentType,
        "http_content_len" | "http.content_len" => Buffer::HttpContentLen,
        "http_accept" | "http.accept" => Buffer::HttpAccept,
        "http_accept_enc" | "http.accept_enc" => Buffer::HttpAcceptEnc,
        "http_accept_lang" | "http.accept_lang" => Buffer::HttpAcceptLang,
        "http_connection" | "http.connection" => Buffer::HttpConnection,
        "http_referer" | "http.referer" => Buffer::HttpReferer,
        "http.server" => Buffer::HttpServer,
        "http.location" => Buffer::HttpLocation,
        _ => return None,
    })
}

fn option(rule: &mut Rule, st: &mut State, k: &str, v: Option<&str>) -> Res<()> {
    match k {
        "msg" => rule.msg = unquote_msg(need(k, v)?),
        "sid" => rule.sid = num(k, need(k, v)?)?,
        "rev" => rule.rev = num(k, need(k, v)?)?,
        "gid" => rule.gid = num(k, need(k, v)?)?,
        "classtype" => rule.classtype = Some(need(k, v)?.to_string()),
        "priority" => rule.priority = Some(num(k, need(k, v)?)?),
        "metadata" => rule.metadata.push(need(k, v)?.to_string()),
        "reference" => rule.references.push(need(k, v)?.to_string()),
        "content" | "uricontent" => {
            let (negated, pattern) = content_bytes(k, need(k, v)?)?;
            let buf = if k == "uricontent" {
                Buffer::HttpUri
            } else {
                st.sticky.unwrap_or(Buffer::Payload)
            };
            let c = Content {
                pattern,
                negated,
                ..Content::default()
            };
            rule.detect.push((buf, Detect::Content(c)));
            st.last_content = Some(rule.detect.len() - 1);
        }
        "nocase" | "offset" | "depth" | "distance" | "within" | "fast_pattern" | "rawbytes" => {
            content_modifier(rule, st, k, v)?
        }
        "isdataat" | "byte_test" | "byte_jump" | "pcre" => {
            let d = match k {
                "isdataat" => isdataat(k, need(k, v)?),
                "byte_test" => byte_test(k, need(k, v)?),
                "byte_jump" => byte_jump(k, need(k, v)?),
                _ => pcre(k, need(k, v)?).map(|(_, d)| d),
            };
            let d = match d? {
                Some(d) => d,
                None => {
                    rule.unknown
                        .push((format!("{k} with a variable"), v.map(str::to_string)));
                    return Ok(());
                }
            };
            let buf = detect_buffer(rule, st, k, v, &d);
            rule.detect.push((buf, d));
        }
        "urilen" => {
            let s = need(k, v)?;
            let (r, raw) = match s.split_once(',') {
                Some((r, "raw")) => (r, true),
                Some((r, "norm")) => (r, false),
                Some((_, m)) => return err(k, format!("unknown urilen mode '{m}'")),
                None => (s, false),
            };
            let buf = if raw {
                Buffer::HttpRawUri
            } else {
                Buffer::HttpUri
            };
            rule.detect.push((buf, Detect::UriLen(range(k, r)?)));
        }
        "dsize" => rule.dsize = Some(range(k, need(k, v)?)?),
        "itype" => rule.itype = Some(range(k, need(k, v)?)?),
        "icode" => rule.icode = Some(range(k, need(k, v)?)?),
        "flags" => rule.flags = Some(tcp_flags(k, need(k, v)?)?),
        "flow" => rule.flow = Some(flow(k, need(k, v)?)?),
        "flowbits" => rule.flowbits.push(flowbit(k, need(k, v)?)?),
        "threshold" | "detection_filter" => {
            let t = threshold(k, need(k, v)?)?;
            let slot = if k == "threshold" {
                &mut rule.threshold
            } else {
                &mut rule.detection_filter
            };
            if slot.is_some() {
                return err(k, "given twice");
            }
            *slot = Some(t);
        }
        _ => {
            if let Some(b) = legacy_buffer(k) {
                let i = st
                    .last_content
                    .ok_or_else(|| (k.to_string(), "no content before it".to_string()))?;
                if rule.detect[i].0 != Buffer::Payload {
                    return err(
                        k,
                        "the content already has a buffer (a second modifier or a sticky buffer)",
                    );
                }
                rule.detect[i].0 = b;
            } else if let Some(b) = sticky_buffer(k) {
                if v.is_some() {
                    return err(k, "a sticky buffer takes no value");
                }
                st.sticky = Some(b);
            } else {
                rule.unknown.push((k.to_string(), v.map(str::to_string)));
            }
        }
    }
    Ok(())
}

/// The buffer of isdataat / byte_* / pcre: a relative one with no sticky buffer follows the
/// previous content (or pcre) of the rule, as Suricata places it; else the sticky buffer.
fn detect_buffer(rule: &Rule, st: &State, k: &str, v: Option<&str>, d: &Detect) -> Buffer {
    if k == "pcre" {
        if let Ok((Some(b), _)) = pcre(k, v.unwrap_or_default()) {
            return b;
        }
    }
    if let Some(b) = st.sticky {
        return b;
    }
    if d.is_relative() {
        if let Some((b, _)) = rule
            .detect
            .iter()
            .rev()
            .find(|(_, d)| matches!(d, Detect::Content(_) | Detect::Pcre { .. }))
        {
            return *b;
        }
    }
    Buffer::Payload
}

fn content_modifier(rule: &mut Rule, st: &mut State, k: &str, v: Option<&str>) -> Res<()> {
    let i = st
        .last_content
        .ok_or_else(|| (k.to_string(), "no content before it".to_string()))?;
    let Detect::Content(c) = &mut rule.detect[i].1 else {
        return err(k, "no content before it");
    };
    let twice = || (k.to_string(), "given twice for one content".to_string());
    let var = |v: &str| {
        !v.trim()
            .starts_with(|c: char| c == '-' || c.is_ascii_digit())
    };
    match k {
        "nocase" => {
            if c.nocase {
                return Err(twice());
            }
            c.nocase = true;
        }
        "rawbytes" => c.rawbytes = true,
        "offset" | "depth" | "distance" | "within" => {
            let s = need(k, v)?;
            if var(s) {
                rule.unknown
                    .push((format!("{k} with a variable"), Some(s.to_string())));
                return Ok(());
            }
            let n: i32 = num(k, s)?;
            let slot = match k {
                "offset" => (c.offset.is_some(), n >= 0),
                "depth" => (c.depth.is_some(), n > 0),
                "distance" => (c.distance.is_some(), true),
                _ => (c.within.is_some(), n > 0),
            };
            if slot.0 {
                return Err(twice());
            }
            if !slot.1 {
                return err(k, format!("{n} is out of range"));
            }
            match k {
                "offset" => c.offset = Some(n as u32),
                "depth" => c.depth = Some(n as u32),
                "distance" => c.distance = Some(n),
                _ => c.within = Some(n),
            }
        }
        _ => {
            if c.fast_pattern != FastPattern::No {
                return Err(twice());
            }
            c.fast_pattern = match v.map(str::trim) {
                None => FastPattern::Yes,
                Some("only") => FastPattern::Only,
                Some(s) => {
                    let (o, l) = s
                        .split_once(',')
                        .ok_or_else(|| (k.to_string(), format!("bad value '{s}'")))?;
                    FastPattern::Part {
                        offset: num(k, o)?,
                        len: num(k, l)?,
                    }
                }
            };
        }
    }
    Ok(())
}

/// Checks Suricata makes once the whole rule is read.
fn finish(rule: &mut Rule) -> Res<()> {
    // Nothing may be relative to a fast_pattern:only content (it is not inspected, so
    // there is no match position).
    for (i, (buf, d)) in rule.detect.iter().enumerate() {
        if !d.is_relative() {
            continue;
        }
        let anchor = rule.detect[..i]
            .iter()
            .rev()
            .filter(|(b, _)| b == buf)
            .find_map(|(_, d)| match d {
                Detect::Content(c) => Some(c),
                _ => None,
            });
        if anchor.is_some_and(|c| c.fast_pattern == FastPattern::Only) {
            return err(
                "fast_pattern",
                "a relative keyword after a fast_pattern:only content",
            );
        }
    }
    for (buf, d) in &rule.detect {
        let Detect::Content(c) = d else { continue };
        let len = c.pattern.len() as i64;
        if (c.offset.is_some() || c.depth.is_some()) && c.is_relative() {
            return err(
                "content",
                "distance/within and offset/depth on one content (Suricata rejects the mix)",
            );
        }
        if c.depth.is_some_and(|d| i64::from(d) < len) {
            return err("depth", "depth is less than the content's length");
        }
        if c.within.is_some_and(|w| i64::from(w) < len) {
            return err("within", "within is less than the content's length");
        }
        match c.fast_pattern {
            FastPattern::Only
                if c.is_relative() || c.negated || c.offset.is_some() || c.depth.is_some() =>
            {
                return err(
                    "fast_pattern",
                    "fast_pattern:only on a relative, negated or offset/depth content",
                );
            }
            FastPattern::Part { offset, len: l }
                if usize::from(offset) + usize::from(l) > c.pattern.len() =>
            {
                return err("fast_pattern", "offset,length go past the content");
            }
            _ => {}
        }
        if *buf == Buffer::HttpHost && !c.nocase && c.pattern.iter().any(u8::is_ascii_uppercase) {
            return err(
                "http_host",
                "uppercase in a pattern for the (lowercased) host buffer",
            );
        }
    }
    if !matches!(rule.proto, Proto::Tcp | Proto::Http | Proto::AppLayer(_)) {
        if let Some((b, _)) = rule.detect.iter().find(|(b, _)| b.is_http()) {
            return err("protocol", format!("HTTP buffer {b:?} on a non-TCP rule"));
        }
    }
    compile_pcres(rule);
    Ok(())
}

/// `N`, `<N`, `>N`, `N<>M`.
fn range(k: &str, s: &str) -> Res<Range> {
    let s = s.trim();
    let r = if let Some((a, b)) = s.split_once("<>") {
        let (a, b) = (num(k, a)?, num(k, b)?);
        if a >= b {
            return err(k, format!("empty range '{s}'"));
        }
        Range::Between(a, b)
    } else if let Some(a) = s.strip_prefix('<') {
        Range::Lt(num(k, a)?)
    } else if let Some(a) = s.strip_prefix('>') {
        Range::Gt(num(k, a)?)
    } else {
        Range::Eq(num(k, s)?)
    };
    Ok(r)
}

fn isdataat(k: &str, s: &str) -> Res<Option<Detect>> {
    let mut parts = s.split(',').map(str::trim);
    let first = parts.next().unwrap_or_default();
    let negated = first.starts_with('!');
    let n = first.trim_start_matches('!').trim();
    if !n.starts_with(|c: char| c.is_ascii_digit()) {
        return Ok(None);
    }
    let n = num(k, n)?;
    let mut relative = false;
    for p in parts {
        match p {
            "relative" => relative = true,
            "rawbytes" => {}
            _ => return err(k, format!("unknown option '{p}'")),
        }
    }
    Ok(Some(Detect::IsDataAt {
        n,
        negated,
        relative,
    }))
}

/// strtoull with base 0: `0x` hex, leading `0` octal, else decimal.
fn c_number(k: &str, s: &str) -> Res<u64> {
    let s = s.trim();
    let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8)
    } else {
        s.parse()
    };
    r.map_err(|_| (k.to_string(), format!("'{s}' is not a valid number")))
}

/// The options byte_test and byte_jump share, after their positional fields.
struct ByteOpts {
    relative: bool,
    format: NumFormat,
    bitmask: Option<u64>,
}

fn byte_common(k: &str, p: &str, o: &mut ByteOpts, string: &mut bool) -> Res<bool> {
    match p {
        "relative" => o.relative = true,
        "big" => o.format = NumFormat::BigEndian,
        "little" => o.format = NumFormat::LittleEndian,
        "string" => *string = true,
        "hex" => o.format = NumFormat::String(16),
        "dec" => o.format = NumFormat::String(10),
        "oct" => o.format = NumFormat::String(8),
        _ if p.starts_with("bitmask") => {
            o.bitmask = Some(c_number(k, p.trim_start_matches("bitmask"))?).filter(|&m| m != 0);
            if o.bitmask.is_none() {
                return err(k, "bitmask 0");
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn byte_finish(k: &str, nbytes: u8, o: &mut ByteOpts, string: bool) -> Res<()> {
    match (string, o.format) {
        (true, NumFormat::String(_)) => {}
        (true, _) => o.format = NumFormat::String(10),
        (false, NumFormat::String(_)) => return err(k, "hex/dec/oct without string"),
        _ => {}
    }
    let max = if string { 23 } else { 8 };
    if nbytes == 0 || nbytes > max {
        return err(k, format!("{nbytes} bytes (1..{max} allowed)"));
    }
    Ok(())
}

fn byte_test(k: &str, s: &str) -> Res<Option<Detect>> {
    let p: Vec<&str> = s.split(',').map(str::trim).collect();
    if p.len() < 4 {
        return err(k, "needs bytes, operator, value, offset");
    }
    let nbytes: u8 = num(k, p[0])?;
    let (negated, op) = match p[1].strip_prefix('!') {
        Some(o) => (true, if o.is_empty() { "=" } else { o }),
        None => (false, p[1]),
    };
    let op = match op {
        "<" => ByteOp::Lt,
        ">" => ByteOp::Gt,
        "=" => ByteOp::Eq,
        "<=" => ByteOp::Le,
        ">=" => ByteOp::Ge,
        "&" => ByteOp::And,
        "^" => ByteOp::Xor,
        o => return err(k, format!("unknown operator '{o}'")),
    };
    let is_num = |t: &str| t.starts_with(|c: char| c == '-' || c.is_ascii_digit());
    if !is_num(p[2]) || !is_num(p[3]) {
        return Ok(None);
    }
    let value = c_number(k, p[2])?;
    let offset = num(k, p[3])?;
    let mut o = ByteOpts {
        relative: false,
        format: NumFormat::BigEndian,
        bitmask: None,
    };
    let mut string = false;
    for q in &p[4..] {
        if !byte_common(k, q, &mut o, &mut string)? {
            return err(k, format!("unsupported option '{q}'"));
        }
    }
    byte_finish(k, nbytes, &mut o, string)?;
    Ok(Some(Detect::ByteTest(ByteTest {
        nbytes,
        negated,
        op,
        value,
        offset,
        relative: o.relative,
        format: o.format,
        bitmask: o.bitmask,
    })))
}

fn byte_jump(k: &str, s: &str) -> Res<Option<Detect>> {
    let p: Vec<&str> = s.split(',').map(str::trim).collect();
    if p.len() < 2 {
        return err(k, "needs bytes, offset");
    }
    let nbytes: u8 = num(k, p[0])?;
    if !p[1].starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
        return Ok(None);
    }
    let offset = num(k, p[1])?;
    let mut o = ByteOpts {
        relative: false,
        format: NumFormat::BigEndian,
        bitmask: None,
    };
    let (mut string, mut multiplier, mut align, mut from_beginning, mut post_offset) =
        (false, 1u32, false, false, 0i32);
    for q in &p[2..] {
        if byte_common(k, q, &mut o, &mut string)? {
            continue;
        }
        match *q {
            "align" => align = true,
            "from_beginning" => from_beginning = true,
            _ if q.starts_with("multiplier") => {
                multiplier = num(k, q.trim_start_matches("multiplier"))?;
                if multiplier == 0 {
                    return err(k, "multiplier 0");
                }
            }
            _ if q.starts_with("post_offset") => {
                post_offset = num(k, q.trim_start_matches("post_offset"))?
            }
            _ => return err(k, format!("unsupported option '{q}'")),
        }
    }
    byte_finish(k, nbytes, &mut o, string)?;
    Ok(Some(Detect::ByteJump(ByteJump {
        nbytes,
        offset,
        relative: o.relative,
        format: o.format,
        multiplier,
        align,
        from_beginning,
        post_offset,
        bitmask: o.bitmask,
    })))
}

fn tcp_flags(k: &str, s: &str) -> Res<TcpFlags> {
    let (set, ignore) = match s.split_once(',') {
        Some((a, b)) => (a.trim(), Some(b.trim())),
        None => (s.trim(), None),
    };
    let bit = |c: char| -> Res<u8> {
        Ok(match c {
            'F' => 0x01,
            'S' => 0x02,
            'R' => 0x04,
            'P' => 0x08,
            'A' => 0x10,
            'U' => 0x20,
            'E' | '2' => 0x40,
            'C' | '1' => 0x80,
            '0' => 0,
            _ => return err(k, format!("unknown flag '{c}'")),
        })
    };
    let mut mode = FlagMode::Exact;
    let mut flags = 0u8;
    for c in set.chars() {
        match c {
            '+' => mode = FlagMode::All,
            '*' => mode = FlagMode::Any,
            '!' => mode = FlagMode::Not,
            c => flags |= bit(c.to_ascii_uppercase())?,
        }
    }
    let mut ign = 0u8;
    for c in ignore.unwrap_or_default().chars() {
        ign |= bit(c.to_ascii_uppercase())?;
    }
    if set.is_empty() {
        return err(k, "no flags");
    }
    Ok(TcpFlags {
        flags,
        mode,
        ignore: ign,
    })
}

fn flow(k: &str, s: &str) -> Res<Flow> {
    let mut f = Flow::default();
    for p in s.split(',').map(str::trim) {
        match p {
            "to_server" | "from_client" => f.to_server = true,
            "to_client" | "from_server" => f.to_client = true,
            "established" => f.established = true,
            "not_established" => f.not_established = true,
            "stateless" => f.stateless = true,
            "only_stream" => f.only_stream = true,
            "no_stream" => f.no_stream = true,
            _ => return err(k, format!("unknown flow option '{p}'")),
        }
    }
    if f.to_server && f.to_client {
        return err(k, "both to_server and to_client");
    }
    Ok(f)
}

/// `flowbits:cmd[,name[|name...]]` (Suricata's flowbits keyword).
fn flowbit(k: &str, s: &str) -> Res<Flowbit> {
    let (cmd, names) = match s.split_once(',') {
        Some((c, n)) => (c.trim(), Some(n.trim())),
        None => (s.trim(), None),
    };
    let cmd = match cmd {
        "set" => FlowbitCmd::Set,
        "unset" => FlowbitCmd::Unset,
        "toggle" => FlowbitCmd::Toggle,
        "isset" => FlowbitCmd::IsSet,
        "isnotset" => FlowbitCmd::IsNotSet,
        "noalert" => FlowbitCmd::NoAlert,
        c => return err(k, format!("unknown flowbits command '{c}'")),
    };
    let names: Vec<String> = match (cmd, names) {
        (FlowbitCmd::NoAlert, None) => Vec::new(),
        (FlowbitCmd::NoAlert, Some(_)) => return err(k, "noalert takes no name"),
        (_, None) => return err(k, "needs a name after the command"),
        (_, Some(n)) => n.split('|').map(|x| x.trim().to_string()).collect(),
    };
    if let Some(bad) = names
        .iter()
        .find(|n| n.is_empty() || n.contains(|c: char| c.is_whitespace() || c == ','))
    {
        return err(k, format!("bad flowbit name '{bad}'"));
    }
    if names.len() > 1 && !matches!(cmd, FlowbitCmd::IsSet | FlowbitCmd::IsNotSet) {
        return err(k, "'|' (an OR of names) only with isset and isnotset");
    }
    Ok(Flowbit { cmd, names })
}

/// `threshold: type T, track B, count N, seconds S` and `detection_filter: track B, count
/// N, seconds S`, in any order, each once.
fn threshold(k: &str, s: &str) -> Res<Threshold> {
    let (mut kind, mut track, mut count, mut seconds) = (None, None, None, None);
    if k == "detection_filter" {
        kind = Some(ThresholdKind::Detection);
    }
    for part in s.split(',').map(str::trim) {
        let (name, val) = part
            .split_once(char::is_whitespace)
            .map(|(a, b)| (a, b.trim()))
            .ok_or_else(|| (k.to_string(), format!("'{part}' is not 'name value'")))?;
        let twice = || (k.to_string(), format!("'{name}' given twice"));
        match name {
            "type" if k == "threshold" => {
                if kind.is_some() {
                    return Err(twice());
                }
                kind = Some(match val {
                    "limit" => ThresholdKind::Limit,
                    "threshold" => ThresholdKind::Threshold,
                    "both" => ThresholdKind::Both,
                    _ => return err(k, format!("unknown type '{val}'")),
                });
            }
            "track" => {
                if track.is_some() {
                    return Err(twice());
                }
                track = Some(match val {
                    "by_src" => Track::BySrc,
                    "by_dst" => Track::ByDst,
                    "by_rule" => Track::ByRule,
                    "by_both" => Track::ByBoth,
                    _ => return err(k, format!("unsupported track '{val}'")),
                });
            }
            "count" | "seconds" => {
                let slot = if name == "count" {
                    &mut count
                } else {
                    &mut seconds
                };
                if slot.is_some() {
                    return Err(twice());
                }
                *slot = Some(num::<u32>(k, val)?);
            }
            _ => return err(k, format!("unknown option '{name}'")),
        }
    }
    let missing = |what: &str| (k.to_string(), format!("no '{what}'"));
    let t = Threshold {
        kind: kind.ok_or_else(|| missing("type"))?,
        track: track.ok_or_else(|| missing("track"))?,
        count: count.ok_or_else(|| missing("count"))?,
        seconds: seconds.ok_or_else(|| missing("seconds"))?,
    };
    if t.count == 0 && t.kind != ThresholdKind::Detection {
        return err(k, "count 0");
    }
    if t.seconds == 0 {
        return err(k, "seconds 0");
    }
    Ok(t)
}
