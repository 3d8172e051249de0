//! The GPU image of a [`Program`] and the batch form of frames, candidates and verdicts that
//! `gpu-kernels/cuda/inspect_eval.cuh` reads and writes.
//!
//! The image is one 8-byte-aligned block: a 64-byte [`ImageHeader`], then the sections of the
//! program (ops, address intervals, rule heads, port intervals, KMP failure words, pattern
//! bytes), each a packed array of the program's `#[repr(C)]` records at an 8-aligned byte
//! offset the header gives. Records are written field by field at their `offset_of!` places,
//! little-endian, so the bytes are the records as both Rust and C lay them out (pinned by the
//! tests here and the `PW_STATIC_ASSERT`s of the header). [`Program::from_image`] reads an
//! image back, checking every span, so the evaluator can run from the very bytes the GPU gets.

use super::program::*;
use super::{rule_matches, Frame};
use crate::rules::{Buffer, BUFFER_COUNT};
use std::mem::{offset_of, size_of};

/// `PWIE` little-endian.
pub const IMAGE_MAGIC: u32 = u32::from_le_bytes(*b"PWIE");
pub const IMAGE_VERSION: u32 = 3;
/// A buffer the frame does not have ([`FrameRec::buf_len`]).
pub const ABSENT: u32 = u32::MAX;
/// [`Verdict::rule`] when no candidate matched.
pub const NO_RULE: u32 = u32::MAX;
/// [`Verdict::action`] when no candidate matched.
pub const NO_ACTION: u8 = 0xff;

/// The image's first 64 bytes: counts, then byte offsets of the sections.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageHeader {
    pub magic: u32,
    pub version: u32,
    pub n_rules: u32,
    pub n_ops: u32,
    pub n_patterns: u32,
    pub n_addrs: u32,
    pub n_ports: u32,
    /// Words of the pcre DFA tables ([`Program::dfa`]; image version 3).
    pub n_dfa: u32,
    pub rules_off: u32,
    pub ops_off: u32,
    pub addrs_off: u32,
    pub ports_off: u32,
    pub patterns_off: u32,
    pub fail_off: u32,
    /// Bytes of the whole image.
    pub total: u32,
    pub dfa_off: u32,
}

/// An image that cannot be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("inspect image: {0}")]
pub struct ImageError(pub String);

fn err<T>(s: impl Into<String>) -> Result<T, ImageError> {
    Err(ImageError(s.into()))
}

/// Little-endian writer of records at their field offsets.
struct Rec<'a> {
    out: &'a mut Vec<u8>,
    base: usize,
}

impl Rec<'_> {
    fn put(&mut self, off: usize, b: &[u8]) {
        self.out[self.base + off..self.base + off + b.len()].copy_from_slice(b);
    }
}

fn rec<T>(out: &mut Vec<u8>) -> Rec<'_> {
    let base = out.len();
    out.resize(base + size_of::<T>(), 0);
    Rec { out, base }
}

fn put_op(out: &mut Vec<u8>, o: &Op) {
    let mut r = rec::<Op>(out);
    r.put(offset_of!(Op, kind), &[o.kind, o.buffer]);
    r.put(offset_of!(Op, flags), &o.flags.to_le_bytes());
    r.put(offset_of!(Op, nbytes), &[o.nbytes, o.cmp, o.base, o._pad]);
    r.put(offset_of!(Op, a), &o.a.to_le_bytes());
    r.put(offset_of!(Op, b), &o.b.to_le_bytes());
    r.put(offset_of!(Op, pat_off), &o.pat_off.to_le_bytes());
    r.put(offset_of!(Op, pat_len), &o.pat_len.to_le_bytes());
    r.put(offset_of!(Op, value), &o.value.to_le_bytes());
    r.put(offset_of!(Op, mask), &o.mask.to_le_bytes());
}

fn words(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn range_words(c: &RangeCode) -> Vec<u8> {
    words(&[c.mode, c.a, c.b])
}

fn put_rule(out: &mut Vec<u8>, h: &RuleHead) {
    let mut r = rec::<RuleHead>(out);
    r.put(offset_of!(RuleHead, sid), &words(&[h.sid, h.gid]));
    r.put(
        offset_of!(RuleHead, action),
        &[h.action, h.proto, h.http, h.both_ways],
    );
    r.put(offset_of!(RuleHead, src), &words(&h.src));
    r.put(offset_of!(RuleHead, dst), &words(&h.dst));
    r.put(offset_of!(RuleHead, sport), &words(&h.sport));
    r.put(offset_of!(RuleHead, dport), &words(&h.dport));
    r.put(offset_of!(RuleHead, ops), &words(&h.ops));
    r.put(offset_of!(RuleHead, dsize), &range_words(&h.dsize));
    r.put(offset_of!(RuleHead, itype), &range_words(&h.itype));
    r.put(offset_of!(RuleHead, icode), &range_words(&h.icode));
    r.put(
        offset_of!(RuleHead, has_flags),
        &[h.has_flags, h.tcp_flags, h.flag_mode, h.flag_ignore],
    );
    r.put(offset_of!(RuleHead, flow), &[h.flow, h.state, 0, 0]);
}

fn put_addr(out: &mut Vec<u8>, a: &AddrRange) {
    let mut r = rec::<AddrRange>(out);
    let b: Vec<u8> = [a.lo, a.hi]
        .iter()
        .flatten()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    r.put(offset_of!(AddrRange, lo), &b);
}

fn align8(v: &mut Vec<u8>) -> u32 {
    v.resize(v.len().next_multiple_of(8), 0);
    v.len() as u32
}

impl Program {
    /// The GPU image of the program (see the module docs), as 64-bit words so that it is
    /// 8-byte aligned. Errors when it would pass 4 GiB (offsets are 32-bit).
    /// A rule's state ([`RuleHead::state`]: flowbits, threshold, detection_filter) is not in
    /// the image: the GPU stage reads it from its own section
    /// ([`super::state::Stateful::gpu_section`]).
    pub fn image(&self) -> Result<Vec<u64>, ImageError> {
        let mut b = vec![0u8; size_of::<ImageHeader>()];
        let mut h = ImageHeader {
            magic: IMAGE_MAGIC,
            version: IMAGE_VERSION,
            ..ImageHeader::default()
        };
        let count = |n: usize, what: &str| {
            u32::try_from(n).map_err(|_| ImageError(format!("too many {what}: {n}")))
        };
        h.n_rules = count(self.rules.len(), "rules")?;
        h.n_ops = count(self.ops.len(), "ops")?;
        h.n_patterns = count(self.patterns.len(), "pattern bytes")?;
        h.n_addrs = count(self.addrs.len(), "address intervals")?;
        h.n_ports = count(self.ports.len(), "port intervals")?;
        if self.fail.len() != self.patterns.len() {
            return err("the failure table and the patterns differ in length");
        }
        h.ops_off = align8(&mut b);
        self.ops.iter().for_each(|o| put_op(&mut b, o));
        h.addrs_off = align8(&mut b);
        self.addrs.iter().for_each(|a| put_addr(&mut b, a));
        h.rules_off = align8(&mut b);
        self.rules.iter().for_each(|r| put_rule(&mut b, r));
        h.ports_off = align8(&mut b);
        for p in &self.ports {
            b.extend_from_slice(&p.lo.to_le_bytes());
            b.extend_from_slice(&p.hi.to_le_bytes());
        }
        h.fail_off = align8(&mut b);
        b.extend(words(&self.fail));
        h.patterns_off = align8(&mut b);
        b.extend_from_slice(&self.patterns);
        h.n_dfa = count(self.dfa.len(), "pcre table words")?;
        h.dfa_off = align8(&mut b);
        b.extend(words(&self.dfa));
        align8(&mut b);
        h.total = count(b.len(), "image bytes")?;
        let head = words(&[
            h.magic,
            h.version,
            h.n_rules,
            h.n_ops,
            h.n_patterns,
            h.n_addrs,
            h.n_ports,
            h.n_dfa,
            h.rules_off,
            h.ops_off,
            h.addrs_off,
            h.ports_off,
            h.patterns_off,
            h.fail_off,
            h.total,
            h.dfa_off,
        ]);
        b[..head.len()].copy_from_slice(&head);
        Ok(b.chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect())
    }

    /// Reads an image back (the inverse of [`Program::image`]), checking every count, offset
    /// and span, so the evaluator indexes nothing out of bounds.
    pub fn from_image(img: &[u64]) -> Result<Program, ImageError> {
        let b: Vec<u8> = img.iter().flat_map(|w| w.to_le_bytes()).collect();
        let rd = Reader { b: &b };
        let w = |i: usize| rd.u32(i * 4, "header");
        if w(0)? != IMAGE_MAGIC {
            return err("bad magic (not an inspect image)");
        }
        if w(1)? != IMAGE_VERSION {
            return err(format!(
                "version {} (this reader knows {IMAGE_VERSION})",
                w(1)?
            ));
        }
        if w(14)? as usize > b.len() {
            return err(format!("total {} bytes, {} given", w(14)?, b.len()));
        }
        let sec = |idx: usize, n: usize, sz: usize, what: &str| -> Result<usize, ImageError> {
            let off = w(idx)? as usize;
            match n.checked_mul(sz).and_then(|l| l.checked_add(off)) {
                Some(end) if end <= b.len() => Ok(off),
                _ => err(format!("section {what} ({n} records) is out of the image")),
            }
        };
        let (nr, no, np) = (w(2)? as usize, w(3)? as usize, w(4)? as usize);
        let (na, npt) = (w(5)? as usize, w(6)? as usize);
        let rules_at = sec(8, nr, size_of::<RuleHead>(), "rules")?;
        let ops_at = sec(9, no, size_of::<Op>(), "ops")?;
        let addrs_at = sec(10, na, size_of::<AddrRange>(), "addrs")?;
        let ports_at = sec(11, npt, size_of::<PortRange>(), "ports")?;
        let pats_at = sec(12, np, 1, "patterns")?;
        let fail_at = sec(13, np, 4, "fail")?;
        let nd = w(7)? as usize;
        let dfa_at = sec(15, nd, 4, "pcre tables")?;
        let mut p = Program {
            patterns: b[pats_at..pats_at + np].to_vec(),
            ..Program::default()
        };
        for k in 0..np {
            p.fail.push(rd.u32(fail_at + 4 * k, "fail")?);
        }
        for k in 0..nd {
            p.dfa.push(rd.u32(dfa_at + 4 * k, "pcre tables")?);
        }
        for k in 0..na {
            let at = addrs_at + k * size_of::<AddrRange>();
            let q = |i: usize| rd.u64(at + 8 * i, "addrs");
            p.addrs.push(AddrRange {
                lo: [q(0)?, q(1)?],
                hi: [q(2)?, q(3)?],
            });
        }
        for k in 0..npt {
            let at = ports_at + 4 * k;
            p.ports.push(PortRange {
                lo: rd.u16(at, "ports")?,
                hi: rd.u16(at + 2, "ports")?,
            });
        }
        for k in 0..no {
            p.ops.push(rd.op(ops_at + k * size_of::<Op>())?);
        }
        for k in 0..nr {
            p.rules.push(rd.rule(rules_at + k * size_of::<RuleHead>())?);
        }
        p.check()?;
        Ok(p)
    }

    /// Every span of the program lies in its section (what the evaluators index).
    fn check(&self) -> Result<(), ImageError> {
        let within = |s: [u32; 2], len: usize| {
            (s[0] as usize)
                .checked_add(s[1] as usize)
                .is_some_and(|e| e <= len)
        };
        for (i, r) in self.rules.iter().enumerate() {
            let ok = within(r.src, self.addrs.len())
                && within(r.dst, self.addrs.len())
                && within(r.sport, self.ports.len())
                && within(r.dport, self.ports.len())
                && within(r.ops, self.ops.len())
                && r.ops[1] as usize <= MAX_OPS;
            if !ok {
                return err(format!(
                    "rule {i} (sid {}): a span is out of its section",
                    r.sid
                ));
            }
        }
        for (i, o) in self.ops.iter().enumerate() {
            if o.kind == OP_PCRE {
                self.check_pcre(i, o)?;
                continue;
            }
            if !within([o.pat_off, o.pat_len], self.patterns.len()) {
                return err(format!("op {i}: its pattern is out of the pattern bytes"));
            }
            if o.flags & F_STRING != 0 && !matches!(o.base, 8 | 10 | 16) {
                return err(format!("op {i}: number base {} (8, 10 or 16)", o.base));
            }
            let (s, n) = (o.pat_off as usize, o.pat_len as usize);
            if o.kind == OP_CONTENT
                && self.fail[s..s + n]
                    .iter()
                    .enumerate()
                    .any(|(k, &f)| f as usize > k)
            {
                return err(format!("op {i}: a failure value passes its position"));
            }
        }
        Ok(())
    }
}

impl Program {
    /// A pcre op's tables lie in the DFA words and pass [`crate::pcre::table::Table::new`];
    /// a retried one has its reverse table.
    fn check_pcre(&self, i: usize, o: &Op) -> Result<(), ImageError> {
        let (s, n, r) = (o.pat_off as usize, o.pat_len as usize, o.b);
        let rev = usize::try_from(r)
            .map_err(|_| ImageError(format!("op {i}: pcre reverse length {r}")))?;
        let end = s.checked_add(n).and_then(|e| e.checked_add(rev));
        let Some(end) = end.filter(|&e| e <= self.dfa.len()) else {
            return err(format!("op {i}: its pcre tables are out of the DFA words"));
        };
        crate::pcre::table::Table::new(&self.dfa[s..s + n])
            .map_err(|e| ImageError(format!("op {i}: pcre table: {e}")))?;
        if rev > 0 {
            crate::pcre::table::Table::new(&self.dfa[s + n..end])
                .map_err(|e| ImageError(format!("op {i}: pcre reverse table: {e}")))?;
        } else if o.flags & F_RETRY != 0 {
            return err(format!("op {i}: a retried pcre without its reverse table"));
        }
        Ok(())
    }
}

struct Reader<'a> {
    b: &'a [u8],
}

impl Reader<'_> {
    fn bytes<const N: usize>(&self, at: usize, what: &str) -> Result<[u8; N], ImageError> {
        self.b
            .get(at..at + N)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| ImageError(format!("{what}: byte {at} is past the end")))
    }
    fn u16(&self, at: usize, what: &str) -> Result<u16, ImageError> {
        self.bytes(at, what).map(u16::from_le_bytes)
    }
    fn u32(&self, at: usize, what: &str) -> Result<u32, ImageError> {
        self.bytes(at, what).map(u32::from_le_bytes)
    }
    fn u64(&self, at: usize, what: &str) -> Result<u64, ImageError> {
        self.bytes(at, what).map(u64::from_le_bytes)
    }
    fn op(&self, at: usize) -> Result<Op, ImageError> {
        let b: [u8; 8] = self.bytes(at, "ops")?;
        let f = |o: usize| at + o;
        Ok(Op {
            kind: b[0],
            buffer: b[1],
            flags: u16::from_le_bytes([b[2], b[3]]),
            nbytes: b[4],
            cmp: b[5],
            base: b[6],
            _pad: b[7],
            a: self.u32(f(offset_of!(Op, a)), "ops")? as i32,
            b: self.u32(f(offset_of!(Op, b)), "ops")? as i32,
            pat_off: self.u32(f(offset_of!(Op, pat_off)), "ops")?,
            pat_len: self.u32(f(offset_of!(Op, pat_len)), "ops")?,
            value: self.u64(f(offset_of!(Op, value)), "ops")?,
            mask: self.u64(f(offset_of!(Op, mask)), "ops")?,
        })
    }
    fn pair(&self, at: usize) -> Result<[u32; 2], ImageError> {
        Ok([self.u32(at, "rules")?, self.u32(at + 4, "rules")?])
    }
    fn range(&self, at: usize) -> Result<RangeCode, ImageError> {
        Ok(RangeCode {
            mode: self.u32(at, "rules")?,
            a: self.u32(at + 4, "rules")?,
            b: self.u32(at + 8, "rules")?,
        })
    }
    fn rule(&self, at: usize) -> Result<RuleHead, ImageError> {
        let a: [u8; 4] = self.bytes(at + offset_of!(RuleHead, action), "rules")?;
        let g: [u8; 4] = self.bytes(at + offset_of!(RuleHead, has_flags), "rules")?;
        let fl: [u8; 4] = self.bytes(at + offset_of!(RuleHead, flow), "rules")?;
        let f = |o: usize| at + o;
        Ok(RuleHead {
            sid: self.u32(at, "rules")?,
            gid: self.u32(f(offset_of!(RuleHead, gid)), "rules")?,
            action: a[0],
            proto: a[1],
            http: a[2],
            both_ways: a[3],
            src: self.pair(f(offset_of!(RuleHead, src)))?,
            dst: self.pair(f(offset_of!(RuleHead, dst)))?,
            sport: self.pair(f(offset_of!(RuleHead, sport)))?,
            dport: self.pair(f(offset_of!(RuleHead, dport)))?,
            ops: self.pair(f(offset_of!(RuleHead, ops)))?,
            dsize: self.range(f(offset_of!(RuleHead, dsize)))?,
            itype: self.range(f(offset_of!(RuleHead, itype)))?,
            icode: self.range(f(offset_of!(RuleHead, icode)))?,
            has_flags: g[0],
            tcp_flags: g[1],
            flag_mode: g[2],
            flag_ignore: g[3],
            flow: fl[0],
            state: fl[1],
            _pad: [fl[2], fl[3]],
        })
    }
}

/// One frame of a GPU batch (`pw_insp_frame`): the header fields and, per [`Buffer`], its
/// bytes as `[buf_off, buf_off + buf_len)` from `data_off` in the batch's byte arena
/// (`buf_len` [`ABSENT`] when the frame has no such buffer). Buffer 0, the L4 payload, is
/// always there; the HTTP buffers are the normalized ones of [`crate::http`] (not slices of
/// the frame), so the host parses the head and appends them to the arena.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRec {
    /// Address keys ([`key_words`] of [`crate::rules::net_key`]).
    pub src: [u64; 2],
    pub dst: [u64; 2],
    pub data_off: u32,
    pub src_port: u16,
    pub dst_port: u16,
    pub ip_proto: u8,
    pub tcp_flags: u8,
    pub icmp_type: u8,
    pub icmp_code: u8,
    pub has_http: u8,
    /// [`Frame::ct_state`], [`Frame::ct_dir`].
    pub ct_state: u8,
    pub ct_dir: u8,
    pub _pad: u8,
    pub buf_off: [u32; BUFFER_COUNT],
    pub buf_len: [u32; BUFFER_COUNT],
}

/// The frame's record, its buffers appended to `arena`. Errors when the arena would pass
/// 4 GiB (offsets are 32-bit).
pub fn frame_record(f: &Frame, arena: &mut Vec<u8>) -> Result<FrameRec, ImageError> {
    let too_big = |n: usize| ImageError(format!("batch arena past 4 GiB ({n} bytes)"));
    let data_off = u32::try_from(arena.len()).map_err(|_| too_big(arena.len()))?;
    let mut r = FrameRec {
        src: key_words(crate::rules::net_key(f.src)),
        dst: key_words(crate::rules::net_key(f.dst)),
        data_off,
        src_port: f.src_port,
        dst_port: f.dst_port,
        ip_proto: f.ip_proto,
        tcp_flags: f.tcp_flags,
        icmp_type: f.icmp_type,
        icmp_code: f.icmp_code,
        has_http: u8::from(f.http.is_some()),
        ct_state: f.ct_state,
        ct_dir: f.ct_dir,
        _pad: 0,
        buf_off: [0; BUFFER_COUNT],
        buf_len: [ABSENT; BUFFER_COUNT],
    };
    for b in Buffer::ALL {
        let Some(bytes) = f.buffer(b as u8) else {
            continue;
        };
        let off = arena.len() - data_off as usize;
        arena.extend_from_slice(bytes);
        if arena.len() > u32::MAX as usize {
            return Err(too_big(arena.len()));
        }
        r.buf_off[b as usize] = off as u32;
        r.buf_len[b as usize] = bytes.len() as u32;
    }
    Ok(r)
}

/// A frame's verdict (`pw_insp_verdict`): the deciding rule's index and action code, or
/// [`NO_RULE`] / [`NO_ACTION`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub rule: u32,
    pub action: u8,
    pub _pad: [u8; 3],
}

impl Default for Verdict {
    fn default() -> Self {
        Verdict {
            rule: NO_RULE,
            action: NO_ACTION,
            _pad: [0; 3],
        }
    }
}

/// Evaluates the candidate rules `cands` (indices into `p`) on `f`: `matched[j]` is 1 when
/// `cands[j]` matches, else 0; the verdict is the matching candidate whose action ranks first
/// in Suricata's default action order (`pass, drop, reject, alert`: [`action_rank`]), the
/// earliest in `cands` among equals.
pub fn verdict(p: &Program, f: &Frame, cands: &[u32], matched: &mut [u8]) -> Verdict {
    let mut v = Verdict::default();
    for (j, &c) in cands.iter().enumerate() {
        let m = rule_matches(p, c as usize, f);
        if let Some(slot) = matched.get_mut(j) {
            *slot = u8::from(m);
        }
        if !m {
            continue;
        }
        let a = p.rules[c as usize].action;
        if v.rule == NO_RULE || action_rank(a) > action_rank(v.action) {
            v = Verdict {
                rule: c,
                action: a,
                _pad: [0; 3],
            };
        }
    }
    v
}

#[cfg(test)]
#[path = "image_tests.rs"]
mod tests;
