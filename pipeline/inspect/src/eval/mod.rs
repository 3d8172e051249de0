//! Evaluation of compiled rules on a frame's buffers: the CPU reference of the full check,
//! written over the flat [`Program`] with fixed-size state so the CUDA can copy it.
//!
//! Semantics (Suricata's): each buffer's ops run in rule order over that buffer with a cursor
//! (the end of the last content match, or where a byte_jump landed). A content is searched
//! in a window: `[offset, offset+depth)` from the buffer's start, or from `cursor+distance`
//! to `cursor+distance+within` when relative. When a later op fails, the evaluator retries
//! the nearest earlier content that a later op is relative to ([`program::F_RETRY`]) at its
//! next occurrence (from its last match's start + 1) and runs the ops after it again, as
//! Suricata's content inspection does; it stops at once when a content that is not relative
//! is absent, or a negated one that nothing is relative to is present, since no retry can
//! change that. A `pcre` ([`program::OP_PCRE`], [`crate::pcre`]) is searched like a content:
//! its subject is the buffer (from the cursor with `R`), a match moves the cursor to its end,
//! and it is retried from its match start + 1. The number of searches per buffer is bounded ([`SEARCH_LIMIT`],
//! Suricata's default inspection recursion limit); past it the buffer does not match. Each
//! search takes time linear in its window (memmem here, KMP on the GPU), so one rule costs at
//! most `SEARCH_LIMIT` times its buffers' lengths, whatever the payload.

pub mod decode;
pub mod image;
pub mod program;
pub mod state;

use crate::http::{self, HttpHead, HttpParse};
use crate::pcre::table::Table;
use crate::rules::{Buffer, FlagMode};
use program::*;
use std::net::IpAddr;

/// Content searches per buffer before giving up (no match), like Suricata's
/// `detect.inspection-recursion-limit` default.
pub const SEARCH_LIMIT: u32 = 3000;

/// What the evaluator needs of a frame. `payload` is the L4 payload (after the TCP / UDP
/// header; for ICMP after its 8-byte header).
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// IP protocol number.
    pub ip_proto: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub tcp_flags: u8,
    pub icmp_type: u8,
    pub icmp_code: u8,
    /// The connection state and direction the `conntrack` stage wrote (`PacketMeta::ct_state`,
    /// `ct_dir`; 0 and 0 without one): what `flow:` tests.
    pub ct_state: u8,
    pub ct_dir: u8,
    pub payload: &'a [u8],
    /// The HTTP head this TCP segment carries, if any ([`http::parse`]).
    pub http: Option<&'a HttpHead>,
}

impl Frame<'_> {
    fn buffer(&self, b: u8) -> Option<&[u8]> {
        if b == Buffer::Payload as u8 {
            return Some(self.payload);
        }
        let buf = Buffer::from_code(b)?;
        self.http.and_then(|h| h.buffer(buf))
    }
}

/// Counts of what could not be inspected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// TCP segments that start an HTTP head that does not end in them (not inspected as HTTP).
    pub http_split: u64,
}

/// The HTTP head of a TCP payload for [`Frame::http`], counting split heads.
pub fn http_of(ip_proto: u8, payload: &[u8], c: &mut Counters) -> Option<HttpHead> {
    if ip_proto != PROTO_TCP {
        return None;
    }
    match http::parse(payload) {
        HttpParse::Head(h) => Some(*h),
        HttpParse::Incomplete => {
            c.http_split += 1;
            None
        }
        HttpParse::NotHttp => None,
    }
}

/// Indices of the rules of `p` that match `f`, in rule order.
pub fn matching(p: &Program, f: &Frame) -> Vec<usize> {
    (0..p.rules.len())
        .filter(|&i| rule_matches(p, i, f))
        .collect()
}

/// Whether rule `i` of `p` matches `f`.
pub fn rule_matches(p: &Program, i: usize, f: &Frame) -> bool {
    let Some(r) = p.rules.get(i) else {
        return false;
    };
    header_matches(p, r, f) && frame_tests(r, f) && payload_matches(p, r, f)
}

fn in_addrs(p: &Program, span: [u32; 2], a: IpAddr) -> bool {
    let k = key_words(crate::rules::net_key(a));
    let (s, n) = (span[0] as usize, span[1] as usize);
    p.addrs[s..s + n].iter().any(|r| r.contains(k))
}

fn in_ports(p: &Program, span: [u32; 2], port: u16) -> bool {
    let (s, n) = (span[0] as usize, span[1] as usize);
    p.ports[s..s + n]
        .iter()
        .any(|r| r.lo <= port && port <= r.hi)
}

fn header_matches(p: &Program, r: &RuleHead, f: &Frame) -> bool {
    if r.proto != PROTO_IP && r.proto != f.ip_proto {
        return false;
    }
    if r.http != 0 && f.http.is_none() {
        return false;
    }
    let has_ports = f.ip_proto == PROTO_TCP || f.ip_proto == PROTO_UDP;
    let one_way = |src: IpAddr, sp: u16, dst: IpAddr, dp: u16| {
        in_addrs(p, r.src, src)
            && in_addrs(p, r.dst, dst)
            && (!has_ports || (in_ports(p, r.sport, sp) && in_ports(p, r.dport, dp)))
    };
    one_way(f.src, f.src_port, f.dst, f.dst_port)
        || (r.both_ways != 0 && one_way(f.dst, f.dst_port, f.src, f.src_port))
}

fn frame_tests(r: &RuleHead, f: &Frame) -> bool {
    if r.flow != 0 && !flow_ok(r.flow, f.ct_state, f.ct_dir) {
        return false;
    }
    if r.dsize.mode != 0 && !r.dsize.test(f.payload.len() as u32) {
        return false;
    }
    if (r.itype.mode != 0 || r.icode.mode != 0)
        && (f.ip_proto != PROTO_ICMP
            || !r.itype.test(u32::from(f.icmp_type))
            || !r.icode.test(u32::from(f.icmp_code)))
    {
        return false;
    }
    if r.has_flags != 0 {
        if f.ip_proto != PROTO_TCP {
            return false;
        }
        let want = r.tcp_flags;
        let mode = flag_mode(r.flag_mode);
        // `flags:0` asks for no flag at all (before the ignore mask); `!0` for any.
        if want == 0 && f.tcp_flags != 0 {
            return mode == FlagMode::Not;
        }
        let got = f.tcp_flags & !r.flag_ignore;
        let ok = match mode {
            FlagMode::Exact => got == want,
            FlagMode::All => got & want == want,
            FlagMode::Any => got & want != 0,
            // Suricata's `!`: not all of these are set.
            FlagMode::Not => got & want != want,
        };
        if !ok {
            return false;
        }
    }
    true
}

fn payload_matches(p: &Program, r: &RuleHead, f: &Frame) -> bool {
    let (s, n) = (r.ops[0] as usize, r.ops[1] as usize);
    let ops = &p.ops[s..s + n];
    let mut g = 0;
    while g < ops.len() {
        let b = ops[g].buffer;
        let end = g + ops[g..].iter().take_while(|o| o.buffer == b).count();
        let Some(buf) = f.buffer(b) else {
            return false;
        };
        if !group_matches(&ops[g..end], p, buf) {
            return false;
        }
        g = end;
    }
    true
}

/// The search window of a content op: `[start, end)` in the buffer, or None when empty.
fn window(op: &Op, cursor: i64, len: i64) -> (i64, i64) {
    if op.flags & (F_DISTANCE | F_WITHIN) != 0 {
        let dist = if op.flags & F_DISTANCE != 0 {
            i64::from(op.a)
        } else {
            0
        };
        let start = if dist < 0 && -dist > cursor {
            0
        } else {
            cursor + dist
        };
        let mut end = len;
        if op.flags & F_WITHIN != 0 {
            end = end.min(cursor + dist + i64::from(op.b));
        }
        (start, end)
    } else {
        let start = if op.flags & F_OFFSET != 0 {
            i64::from(op.a)
        } else {
            0
        };
        let end = if op.flags & F_DEPTH != 0 {
            i64::from(op.b).min(len)
        } else {
            len
        };
        (start, end)
    }
}

/// First occurrence of `pat` within `buf[start..end)`, in time linear in the window (memchr's
/// memmem). A nocase `pat` is lower case and is searched in `lower`, the buffer lower-cased
/// once per buffer on first use.
fn search(
    buf: &[u8],
    lower: &mut Option<Vec<u8>>,
    (start, end): (i64, i64),
    pat: &[u8],
    nocase: bool,
) -> Option<usize> {
    let end = end.min(buf.len() as i64);
    let start = start.max(0);
    let n = pat.len() as i64;
    if n == 0 || end - start < n {
        return None;
    }
    let hay: &[u8] = if nocase {
        lower.get_or_insert_with(|| buf.to_ascii_lowercase())
    } else {
        buf
    };
    let (start, end) = (start as usize, end as usize);
    memchr::memmem::find(&hay[start..end], pat).map(|i| i + start)
}

/// One buffer's ops, with retries of earlier contents (see the module docs).
fn group_matches(ops: &[Op], p: &Program, buf: &[u8]) -> bool {
    let patterns = &p.patterns;
    if buf.is_empty() || ops.len() > MAX_OPS {
        return false;
    }
    let len = buf.len() as i64;
    // Per op: the cursor when it was entered, and where its last match started.
    let mut entry = [0i64; MAX_OPS];
    let mut found = [0i64; MAX_OPS];
    // Contents that can be retried, innermost last.
    let mut stack = [0u8; MAX_OPS];
    let mut sp = 0usize;
    let mut resume: Option<i64> = None;
    let mut cursor = 0i64;
    let mut searches = 0u32;
    let mut lower: Option<Vec<u8>> = None;
    let mut i = 0usize;
    while i < ops.len() {
        let op = &ops[i];
        let ok = match op.kind {
            OP_CONTENT => {
                searches += 1;
                if searches > SEARCH_LIMIT {
                    return false;
                }
                let retry_at = resume.take();
                match retry_at {
                    Some(_) => cursor = entry[i],
                    None => entry[i] = cursor,
                }
                let (mut start, end) = window(op, cursor, len);
                if let Some(r) = retry_at {
                    start = r;
                }
                let (po, pl) = (op.pat_off as usize, op.pat_len as usize);
                let pat = &patterns[po..po + pl];
                let nocase = op.flags & F_NOCASE != 0;
                let hit = search(buf, &mut lower, (start, end), pat, nocase);
                let relative = op.flags & (F_DISTANCE | F_WITHIN) != 0;
                match (hit, op.flags & F_NEGATED != 0) {
                    (Some(at), false) => {
                        found[i] = at as i64;
                        cursor = (at + pl) as i64;
                        if op.flags & F_RETRY != 0 {
                            stack[sp] = i as u8;
                            sp += 1;
                        }
                        true
                    }
                    (h, negated) => {
                        match unmatched(h.is_some(), negated, relative, op.flags & F_RETRY != 0) {
                            Some(ok) => ok,
                            None => return false,
                        }
                    }
                }
            }
            OP_PCRE => {
                searches += 1;
                if searches > SEARCH_LIMIT {
                    return false;
                }
                let retry_at = resume.take();
                match retry_at {
                    Some(_) => cursor = entry[i],
                    None => entry[i] = cursor,
                }
                let relative = op.flags & F_RELATIVE != 0;
                let (sub, from, hit) = pcre_search(op, &p.dfa, buf, cursor, retry_at);
                match (hit, op.flags & F_NEGATED != 0) {
                    (Some(e), false) => {
                        if op.flags & F_RETRY != 0 {
                            let (o, n) = (op.pat_off as usize, op.pat_len as usize);
                            let rev = Table::trusted(&p.dfa[o + n..o + n + op.b as usize]);
                            found[i] = rev.find_start(buf, sub, from, e).unwrap_or(from) as i64;
                            stack[sp] = i as u8;
                            sp += 1;
                        }
                        cursor = e as i64;
                        true
                    }
                    (h, negated) => {
                        match unmatched(h.is_some(), negated, relative, op.flags & F_RETRY != 0) {
                            Some(ok) => ok,
                            None => return false,
                        }
                    }
                }
            }
            OP_ISDATAAT => {
                let n = i64::from(op.a);
                let has = if op.flags & F_RELATIVE != 0 {
                    cursor + n <= len
                } else {
                    n < len
                };
                has != (op.flags & F_NEGATED != 0)
            }
            OP_BYTE_TEST => byte_test(op, buf, cursor),
            OP_BYTE_JUMP => match byte_jump(op, buf, cursor) {
                Some(c) => {
                    cursor = c;
                    true
                }
                None => false,
            },
            OP_URILEN => RangeCode {
                mode: u32::from(op.cmp),
                a: op.a as u32,
                b: op.b as u32,
            }
            .test(buf.len() as u32),
            _ => false,
        };
        if ok {
            i += 1;
            continue;
        }
        if sp == 0 {
            return false;
        }
        sp -= 1;
        let j = usize::from(stack[sp]);
        resume = Some(found[j] + 1);
        i = j;
    }
    true
}

/// A pcre op's search: its subject start (the buffer's, or the cursor with `R`), its search
/// start (a retry searches the subject again from the last match start + 1) and the end of
/// the match found.
/// A content or pcre search that did not end as a plain match (`found`: it matched, `negated`:
/// the keyword is negated; `retry`: it can be retried): `Some(true)` the keyword holds (a negated one that found nothing),
/// `Some(false)` it fails and the rule backtracks to its last retryable keyword, `None` the rule
/// fails outright (an absolute keyword cannot match elsewhere; a negated hit cannot be undone
/// unless it is relative or retried).
fn unmatched(found: bool, negated: bool, relative: bool, retry: bool) -> Option<bool> {
    match (found, negated) {
        (false, true) => Some(true),
        (true, true) if !relative && !retry => None,
        (false, false) if !relative => None,
        _ => Some(false),
    }
}

fn pcre_search(
    op: &Op,
    dfa: &[u32],
    buf: &[u8],
    cursor: i64,
    retry_at: Option<i64>,
) -> (usize, usize, Option<usize>) {
    let len = buf.len() as i64;
    let sub = if op.flags & F_RELATIVE != 0 {
        cursor.clamp(0, len)
    } else {
        0
    };
    let from = retry_at.map_or(sub, |r| r.max(sub));
    if from > len {
        return (sub as usize, from as usize, None);
    }
    let (o, n) = (op.pat_off as usize, op.pat_len as usize);
    let hit = Table::trusted(&dfa[o..o + n]).find_end(buf, sub as usize, from as usize);
    (sub as usize, from as usize, hit)
}

/// The number `op` reads at `pos`: (value, bytes consumed), None when it cannot be read.
fn extract(op: &Op, buf: &[u8], pos: i64) -> Option<(u64, i64)> {
    let n = i64::from(op.nbytes);
    if pos < 0 || pos + n > buf.len() as i64 {
        return None;
    }
    let bytes = &buf[pos as usize..(pos + n) as usize];
    let (mut v, used) = if op.flags & F_STRING != 0 {
        c_strtoull(bytes, u32::from(op.base))?
    } else {
        let mut v = 0u64;
        for k in 0..bytes.len() {
            let b = if op.flags & F_LITTLE != 0 {
                bytes[bytes.len() - 1 - k]
            } else {
                bytes[k]
            };
            v = (v << 8) | u64::from(b);
        }
        (v, n)
    };
    if op.flags & F_BITMASK != 0 {
        v &= op.mask;
        if v != 0 {
            v >>= op.mask.trailing_zeros();
        }
    }
    Some((v, used))
}

/// C's strtoull on the bytes (leading space, sign, `0x` for base 16); None when no digit
/// was read or the value overflows. Returns (value, bytes consumed).
fn c_strtoull(s: &[u8], base: u32) -> Option<(u64, i64)> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    if base == 16
        && i + 1 < s.len()
        && s[i] == b'0'
        && (s[i + 1] | 0x20) == b'x'
        && s.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        i += 2;
    }
    let digits_start = i;
    let mut v = 0u64;
    while i < s.len() {
        let Some(d) = (s[i] as char).to_digit(base) else {
            break;
        };
        v = v.checked_mul(u64::from(base))?.checked_add(u64::from(d))?;
        i += 1;
    }
    if i == digits_start {
        return None;
    }
    Some((if neg { v.wrapping_neg() } else { v }, i as i64))
}

fn byte_test(op: &Op, buf: &[u8], cursor: i64) -> bool {
    let base = if op.flags & F_RELATIVE != 0 {
        cursor
    } else {
        0
    };
    let Some((v, _)) = extract(op, buf, base + i64::from(op.a)) else {
        return false;
    };
    let x = op.value;
    let r = match op.cmp {
        0 => v < x,
        1 => v > x,
        2 => v == x,
        3 => v <= x,
        4 => v >= x,
        5 => v & x != 0,
        6 => v ^ x != 0,
        _ => false,
    };
    r != (op.flags & F_NEGATED != 0)
}

/// The cursor after a byte_jump, None when it lands outside the buffer.
fn byte_jump(op: &Op, buf: &[u8], cursor: i64) -> Option<i64> {
    let base = if op.flags & F_RELATIVE != 0 {
        cursor
    } else {
        0
    };
    let pos = base + i64::from(op.a);
    let (v, used) = extract(op, buf, pos)?;
    // Saturating 64-bit arithmetic: any value that would overflow lands past the buffer
    // end either way, so the result is the exact one without 128-bit numbers.
    let mut v = i64::try_from(v).unwrap_or(i64::MAX);
    v = v.saturating_mul(op.value.min(i64::MAX as u64) as i64);
    if op.flags & F_ALIGN != 0 && v % 4 != 0 {
        v = v.saturating_add(4 - v % 4);
    }
    v = v.saturating_add(i64::from(op.b));
    let target = if op.flags & F_FROM_BEGINNING != 0 {
        v
    } else {
        v.saturating_add(pos + used)
    };
    // Landing on the end of the buffer is outside it, as in Suricata.
    if target < 0 || target >= buf.len() as i64 {
        return None;
    }
    Some(target)
}

#[cfg(test)]
mod tests;
