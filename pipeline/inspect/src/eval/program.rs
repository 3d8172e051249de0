//! The compiled form of a rule set: flat arrays of fixed-size records (rule heads, ops,
//! pattern bytes, address and port intervals), the form that is uploaded to the GPU as it is.
//!
//! A rule's ops are grouped by buffer (in [`Buffer`] order), each group in rule order; the
//! evaluator runs one group per buffer. Relative keywords refer to the previous op of their
//! group; an op that a later relative op refers to carries [`F_RETRY`] (Suricata's
//! "relative next"), which lets the evaluator retry it at its next match.

use crate::rules::{
    Action, Buffer, Content, Detect, Direction, FlagMode, NumFormat, Proto, Range, Rule,
};

pub const OP_CONTENT: u8 = 1;
pub const OP_ISDATAAT: u8 = 2;
pub const OP_BYTE_TEST: u8 = 3;
pub const OP_BYTE_JUMP: u8 = 4;
pub const OP_URILEN: u8 = 5;
/// `pcre`: a DFA table walk ([`crate::pcre::table`]).
pub const OP_PCRE: u8 = 6;

pub const F_NEGATED: u16 = 1;
pub const F_NOCASE: u16 = 1 << 1;
pub const F_RELATIVE: u16 = 1 << 2;
pub const F_DISTANCE: u16 = 1 << 3;
pub const F_WITHIN: u16 = 1 << 4;
pub const F_OFFSET: u16 = 1 << 5;
pub const F_DEPTH: u16 = 1 << 6;
/// A later op of the group is relative to this one: retry this content at its next match
/// when the rest of the group fails.
pub const F_RETRY: u16 = 1 << 7;
pub const F_STRING: u16 = 1 << 8;
pub const F_LITTLE: u16 = 1 << 9;
pub const F_ALIGN: u16 = 1 << 10;
pub const F_FROM_BEGINNING: u16 = 1 << 11;
pub const F_BITMASK: u16 = 1 << 12;

/// Most payload ops in one rule (the evaluator's per-rule state is this size).
pub const MAX_OPS: usize = crate::rules::MAX_DETECT;

/// One payload keyword, fixed size.
///
/// Fields by kind: content: `a` offset or distance, `b` offset+depth (the absolute end)
/// or within, `pat_off`/`pat_len` its bytes in [`Program::patterns`]; isdataat: `a` = n;
/// byte_test: `a` offset, `value` the value, `cmp` the [`crate::rules::ByteOp`];
/// byte_jump: `a` offset, `b` post_offset, `value` multiplier; urilen: `cmp` the range
/// mode ([`range_code`]), `a`, `b` its bounds. `mask` is the bitmask (with [`F_BITMASK`]);
/// pcre: `pat_off`/`pat_len` its forward table in [`Program::dfa`] (words), `b` the length of
/// its reverse table right after it (0: none; needed with [`F_RETRY`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Op {
    pub kind: u8,
    pub buffer: u8,
    pub flags: u16,
    pub nbytes: u8,
    pub cmp: u8,
    /// Number base of string byte_test / byte_jump (8, 10, 16).
    pub base: u8,
    pub _pad: u8,
    pub a: i32,
    pub b: i32,
    pub pat_off: u32,
    pub pat_len: u32,
    pub value: u64,
    pub mask: u64,
}

/// A range test, fixed size: `mode` 0 none, 1 `=a`, 2 `<a`, 3 `>a`, 4 `a<x<b`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RangeCode {
    pub mode: u32,
    pub a: u32,
    pub b: u32,
}

/// The code of an optional range.
pub fn range_code(r: Option<Range>) -> RangeCode {
    match r {
        None => RangeCode::default(),
        Some(Range::Eq(a)) => RangeCode { mode: 1, a, b: 0 },
        Some(Range::Lt(a)) => RangeCode { mode: 2, a, b: 0 },
        Some(Range::Gt(a)) => RangeCode { mode: 3, a, b: 0 },
        Some(Range::Between(a, b)) => RangeCode { mode: 4, a, b },
    }
}

impl RangeCode {
    /// True when there is no test or `x` passes it.
    pub fn test(&self, x: u32) -> bool {
        match self.mode {
            1 => x == self.a,
            2 => x < self.a,
            3 => x > self.a,
            4 => self.a < x && x < self.b,
            _ => true,
        }
    }
}

/// Action codes of [`RuleHead::action`] (reject is kept apart from drop: Suricata's action
/// order ranks them `pass, drop, reject, alert`).
pub const ACT_ALERT: u8 = 0;
pub const ACT_DROP: u8 = 1;
pub const ACT_PASS: u8 = 2;
pub const ACT_REJECT: u8 = 3;

/// The rank of an action code in Suricata's default action order (`pass, drop, reject,
/// alert`): higher decides.
pub fn action_rank(code: u8) -> u8 {
    match code {
        ACT_PASS => 4,
        ACT_DROP => 3,
        ACT_REJECT => 2,
        ACT_ALERT => 1,
        _ => 0,
    }
}

/// An address interval `[lo, hi]` of 128-bit keys ([`crate::rules::net_key`]), each key as two
/// 64-bit words, most significant first (the GPU has no 128-bit integers).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddrRange {
    pub lo: [u64; 2],
    pub hi: [u64; 2],
}

/// A key as two words, most significant first.
pub fn key_words(k: u128) -> [u64; 2] {
    [(k >> 64) as u64, k as u64]
}

impl AddrRange {
    pub fn new(lo: u128, hi: u128) -> Self {
        Self {
            lo: key_words(lo),
            hi: key_words(hi),
        }
    }
    /// Whether `k` (as [`key_words`]) is in the interval; arrays compare word by word.
    pub fn contains(&self, k: [u64; 2]) -> bool {
        self.lo <= k && k <= self.hi
    }
}

/// A port interval `[lo, hi]`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

pub const PROTO_IP: u8 = 0;
pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// A rule's header and frame-level tests, fixed size. Intervals are `[start, start+len)`
/// of [`Program::addrs`] / [`Program::ports`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuleHead {
    pub sid: u32,
    pub gid: u32,
    /// [`ACT_ALERT`], [`ACT_DROP`], [`ACT_PASS`] or [`ACT_REJECT`].
    pub action: u8,
    /// IP protocol number; 0 = any IP.
    pub proto: u8,
    /// The rule needs an HTTP head in the segment (`alert http`).
    pub http: u8,
    /// 0 `->`, 1 `<>`.
    pub both_ways: u8,
    pub src: [u32; 2],
    pub dst: [u32; 2],
    pub sport: [u32; 2],
    pub dport: [u32; 2],
    pub ops: [u32; 2],
    pub dsize: RangeCode,
    pub itype: RangeCode,
    pub icode: RangeCode,
    /// TCP flags test: `has_flags` 0/1, the flags, the [`FlagMode`], the ignored bits.
    pub has_flags: u8,
    pub tcp_flags: u8,
    pub flag_mode: u8,
    pub flag_ignore: u8,
    /// `flow` test: [`FL_TO_SERVER`], [`FL_TO_CLIENT`], [`FL_ESTABLISHED`],
    /// [`FL_NOT_ESTABLISHED`] bits (0: none).
    pub flow: u8,
    /// 1: the rule has flowbits / threshold / detection_filter ([`super::state`]; the GPU
    /// stage reads them from its block's state section).
    pub state: u8,
    pub _pad: [u8; 2],
}

/// [`RuleHead::flow`] bits.
pub const FL_TO_SERVER: u8 = 1;
pub const FL_TO_CLIENT: u8 = 2;
pub const FL_ESTABLISHED: u8 = 4;
pub const FL_NOT_ESTABLISHED: u8 = 8;

/// The `ct_state` values the flow test reads (`pktwarp_flow::ct`).
pub const CT_ESTABLISHED: u8 = 2;
pub const CT_CLOSING: u8 = 5;

/// Whether a frame with connection state `ct_state` and direction `ct_dir` (the metadata's
/// bytes: 0 untracked, 1 from the originator, 2 reply) passes the `flow` bits, as Suricata's
/// flow keyword: every option given must hold. Without a tracked flow, neither direction
/// holds, `established` does not and `not_established` does. Established is the
/// connection's state after both sides were seen (`ct` established or closing).
pub fn flow_ok(flow: u8, ct_state: u8, ct_dir: u8) -> bool {
    if flow & FL_TO_SERVER != 0 && ct_dir != 1 {
        return false;
    }
    if flow & FL_TO_CLIENT != 0 && ct_dir != 2 {
        return false;
    }
    let est = ct_dir != 0 && (ct_state == CT_ESTABLISHED || ct_state == CT_CLOSING);
    if flow & FL_ESTABLISHED != 0 && !est {
        return false;
    }
    !(flow & FL_NOT_ESTABLISHED != 0 && est)
}

/// A compiled rule set. Every section is an array of `#[repr(C)]` records without pointers:
/// [`Program::image`] lays them out one after the other for the GPU, as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Program {
    pub rules: Vec<RuleHead>,
    pub ops: Vec<Op>,
    pub patterns: Vec<u8>,
    /// Per pattern byte, its KMP failure value within its pattern (the longest proper prefix
    /// of `pattern[..=k]` that is also its suffix): the GPU's linear-time search.
    pub fail: Vec<u32>,
    pub addrs: Vec<AddrRange>,
    pub ports: Vec<PortRange>,
    /// The pcre DFA tables ([`crate::pcre::table`]), one after the other.
    pub dfa: Vec<u32>,
}

impl Program {
    pub fn new() -> Self {
        Self::default()
    }

    /// Compiles `rule` and appends it; returns its index. Errors (the rule cannot be
    /// compiled as it is) leave the program unchanged.
    pub fn add(&mut self, rule: &Rule) -> Result<usize, String> {
        let ops = compile_ops(rule)?;
        let mut head = RuleHead {
            sid: rule.sid,
            gid: rule.gid,
            action: match rule.action {
                Action::Alert => ACT_ALERT,
                Action::Drop => ACT_DROP,
                Action::Reject => ACT_REJECT,
                Action::Pass => ACT_PASS,
            },
            proto: match &rule.proto {
                Proto::Tcp | Proto::Http => PROTO_TCP,
                Proto::Udp => PROTO_UDP,
                Proto::Icmp => PROTO_ICMP,
                Proto::Ip => PROTO_IP,
                Proto::AppLayer(p) => return Err(format!("app-layer protocol {p}")),
            },
            http: u8::from(rule.proto == Proto::Http),
            both_ways: u8::from(rule.direction == Direction::Both),
            dsize: range_code(rule.dsize),
            itype: range_code(rule.itype),
            icode: range_code(rule.icode),
            ..RuleHead::default()
        };
        if let Some(f) = rule.flow {
            if f.only_stream {
                return Err("flow:only_stream needs stream reassembly".into());
            }
            let bit = |on: bool, b: u8| if on { b } else { 0 };
            head.flow = bit(f.to_server, FL_TO_SERVER)
                | bit(f.to_client, FL_TO_CLIENT)
                | bit(f.established, FL_ESTABLISHED)
                | bit(f.not_established, FL_NOT_ESTABLISHED);
        }
        head.state = u8::from(rule.needs_cpu_state());
        if let Some(f) = rule.flags {
            head.has_flags = 1;
            head.tcp_flags = f.flags;
            head.flag_mode = f.mode as u8;
            head.flag_ignore = f.ignore;
        }
        let span = |start: usize, len: usize| [start as u32, len as u32];
        let addr = |&(lo, hi): &(u128, u128)| AddrRange::new(lo, hi);
        let port = |&(lo, hi): &(u16, u16)| PortRange { lo, hi };
        head.src = span(self.addrs.len(), rule.src.0.len());
        self.addrs.extend(rule.src.0.iter().map(addr));
        head.dst = span(self.addrs.len(), rule.dst.0.len());
        self.addrs.extend(rule.dst.0.iter().map(addr));
        head.sport = span(self.ports.len(), rule.src_ports.0.len());
        self.ports.extend(rule.src_ports.0.iter().map(port));
        head.dport = span(self.ports.len(), rule.dst_ports.0.len());
        self.ports.extend(rule.dst_ports.0.iter().map(port));
        head.ops = span(self.ops.len(), ops.len());
        for (mut op, pat) in ops {
            match pat {
                Some(Payload::Bytes(p)) => {
                    op.pat_off = self.patterns.len() as u32;
                    op.pat_len = p.len() as u32;
                    self.patterns.extend_from_slice(&p);
                    self.fail.extend(kmp_failure(&p));
                }
                Some(Payload::Dfa(c)) => {
                    op.pat_off =
                        u32::try_from(self.dfa.len()).map_err(|_| "pcre tables past 4 G")?;
                    op.pat_len = c.forward.len() as u32;
                    self.dfa.extend_from_slice(&c.forward);
                    if let Some(r) = &c.reverse {
                        self.dfa.extend_from_slice(r);
                    }
                }
                None => {}
            }
            self.ops.push(op);
        }
        self.rules.push(head);
        Ok(self.rules.len() - 1)
    }
}

/// What an op carries besides its record: a content's bytes (nocase ones lower-cased) or a
/// pcre's tables.
enum Payload {
    Bytes(Vec<u8>),
    Dfa(std::sync::Arc<crate::pcre::Compiled>),
}

/// An op and what it carries.
type OpAndPattern = (Op, Option<Payload>);

fn compile_ops(rule: &Rule) -> Result<Vec<OpAndPattern>, String> {
    let mut order: Vec<usize> = (0..rule.detect.len()).collect();
    // Stable: rule order within each buffer.
    order.sort_by_key(|&i| rule.detect[i].0);
    if order.len() > MAX_OPS {
        return Err(format!("more than {MAX_OPS} payload keywords"));
    }
    let mut out: Vec<OpAndPattern> = Vec::with_capacity(order.len());
    for &i in &order {
        let (buf, d) = &rule.detect[i];
        let (mut op, pat) = compile_one(*buf, d)?;
        op.buffer = *buf as u8;
        // A relative op refers to the last match of its buffer: mark the content before it
        // (byte_test and isdataat do not move the cursor; byte_jump has no next match).
        if op.flags & F_RELATIVE != 0 {
            let prev = out
                .iter_mut()
                .rev()
                .take_while(|(p, _)| p.buffer == op.buffer)
                .find(|(p, _)| matches!(p.kind, OP_CONTENT | OP_BYTE_JUMP | OP_PCRE));
            if let Some((p, _)) = prev.filter(|(p, _)| p.kind != OP_BYTE_JUMP) {
                if p.kind == OP_PCRE && p.b == 0 {
                    return Err("pcre: retried without its reverse table".into());
                }
                p.flags |= F_RETRY;
            }
        }
        out.push((op, pat));
    }
    Ok(out)
}

fn compile_one(buf: Buffer, d: &Detect) -> Result<OpAndPattern, String> {
    let mut op = Op::default();
    let rel = |r: bool| if r { F_RELATIVE } else { 0 };
    match d {
        Detect::Content(c) => return Ok(compile_content(c)),
        Detect::IsDataAt {
            n,
            negated,
            relative,
        } => {
            op.kind = OP_ISDATAAT;
            op.a = i32::try_from(*n).map_err(|_| "isdataat too large")?;
            op.flags = rel(*relative) | if *negated { F_NEGATED } else { 0 };
        }
        Detect::ByteTest(t) => {
            op.kind = OP_BYTE_TEST;
            op.nbytes = t.nbytes;
            op.cmp = t.op as u8;
            op.a = t.offset;
            op.value = t.value;
            op.flags = rel(t.relative) | if t.negated { F_NEGATED } else { 0 };
            num_format(&mut op, t.format, t.bitmask);
        }
        Detect::ByteJump(j) => {
            op.kind = OP_BYTE_JUMP;
            op.nbytes = j.nbytes;
            op.a = j.offset;
            op.b = j.post_offset;
            op.value = u64::from(j.multiplier);
            op.flags = rel(j.relative)
                | if j.align { F_ALIGN } else { 0 }
                | if j.from_beginning {
                    F_FROM_BEGINNING
                } else {
                    0
                };
            num_format(&mut op, j.format, j.bitmask);
        }
        Detect::UriLen(r) => {
            let c = range_code(Some(*r));
            op.kind = OP_URILEN;
            op.cmp = c.mode as u8;
            op.a = c.a as i32;
            op.b = c.b as i32;
        }
        Detect::Pcre(p) => {
            let c = p
                .compiled
                .as_ref()
                .map_err(|why| format!("pcre in {buf:?}: {why}"))?;
            op.kind = OP_PCRE;
            op.flags = rel(p.relative) | if p.negated { F_NEGATED } else { 0 };
            // The reverse table, when there is one, follows the forward one.
            op.b = c.reverse.as_ref().map_or(0, |r| r.len() as i32);
            return Ok((op, Some(Payload::Dfa(c.clone()))));
        }
    }
    Ok((op, None))
}

fn num_format(op: &mut Op, f: NumFormat, mask: Option<u64>) {
    match f {
        NumFormat::BigEndian => {}
        NumFormat::LittleEndian => op.flags |= F_LITTLE,
        NumFormat::String(b) => {
            op.flags |= F_STRING;
            op.base = b;
        }
    }
    if let Some(m) = mask {
        op.flags |= F_BITMASK;
        op.mask = m;
    }
}

fn compile_content(c: &Content) -> OpAndPattern {
    let mut op = Op {
        kind: OP_CONTENT,
        ..Op::default()
    };
    let mut f = 0;
    if c.negated {
        f |= F_NEGATED;
    }
    if c.nocase {
        f |= F_NOCASE;
    }
    if let Some(d) = c.distance {
        f |= F_DISTANCE | F_RELATIVE;
        op.a = d;
    }
    if let Some(w) = c.within {
        f |= F_WITHIN | F_RELATIVE;
        op.b = w;
    }
    if let Some(o) = c.offset {
        f |= F_OFFSET;
        op.a = o as i32;
    }
    if let Some(d) = c.depth {
        // Depth counts from the offset: store the absolute end.
        f |= F_DEPTH;
        op.b = (c.offset.unwrap_or(0) as i64 + d as i64).min(i32::MAX as i64) as i32;
    }
    op.flags = f;
    let pat = if c.nocase {
        c.pattern.to_ascii_lowercase()
    } else {
        c.pattern.clone()
    };
    (op, Some(Payload::Bytes(pat)))
}

/// The KMP failure function of `pat`: `f[k]` is the length of the longest proper prefix of
/// `pat[..=k]` that is also its suffix.
pub fn kmp_failure(pat: &[u8]) -> Vec<u32> {
    let mut f = vec![0u32; pat.len()];
    let mut q = 0usize;
    for k in 1..pat.len() {
        while q > 0 && pat[q] != pat[k] {
            q = f[q - 1] as usize;
        }
        if pat[q] == pat[k] {
            q += 1;
        }
        f[k] = q as u32;
    }
    f
}

/// The [`FlagMode`] of a compiled flag test.
pub fn flag_mode(code: u8) -> FlagMode {
    match code {
        1 => FlagMode::All,
        2 => FlagMode::Any,
        3 => FlagMode::Not,
        _ => FlagMode::Exact,
    }
}
