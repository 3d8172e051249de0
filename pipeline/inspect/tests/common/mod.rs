//! Shared by the inspect tests: the matcher's brute-force reference of the semantics and
//! generators of pattern sets and payloads; the corpus tests' pcap reader.
#![allow(dead_code)]

pub mod corpus;
pub mod pcre2;

use std::path::Path;

use pktwarp_inspect::matcher::{Match, PatternSet};
use proptest::prelude::*;

/// Every (pattern, end) by comparing every pattern at every end offset: the semantics, written
/// out without an automaton.
pub fn brute_force(set: &PatternSet, buf: &[u8]) -> Vec<Match> {
    let mut out = Vec::new();
    for end in 1..=buf.len() {
        for (id, p) in set.patterns().iter().enumerate() {
            let Some(start) = end.checked_sub(p.bytes.len()) else {
                continue;
            };
            let hay = &buf[start..end];
            let eq = if p.nocase {
                hay.eq_ignore_ascii_case(&p.bytes)
            } else {
                hay == p.bytes.as_slice()
            };
            if eq {
                out.push(Match {
                    pattern: id as u32,
                    end,
                });
            }
        }
    }
    out
}

pub fn sorted(mut v: Vec<Match>) -> Vec<Match> {
    v.sort();
    v
}

/// A small alphabet (letters in both cases, a digit, 0x00, 0xff, a non-ASCII letter-like byte)
/// so patterns overlap, repeat and differ only in case.
pub const ALPHABET: &[u8] = b"aAbBz0\x00\xff\xc1";

pub fn byte() -> impl Strategy<Value = u8> {
    prop::sample::select(ALPHABET)
}

/// (bytes, nocase) pairs: 1..=8 bytes, some of them duplicated by chance.
pub fn patterns(max: usize) -> impl Strategy<Value = Vec<(Vec<u8>, bool)>> {
    prop::collection::vec(
        (prop::collection::vec(byte(), 1..=8), any::<bool>()),
        0..=max,
    )
}

pub fn payload(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(byte(), 0..=max)
}

pub fn set_of_pairs(pats: &[(Vec<u8>, bool)]) -> PatternSet {
    let mut set = PatternSet::new();
    for (b, nc) in pats {
        set.add(b, *nc).expect("generated patterns are 1..=8 bytes");
    }
    set
}

/// Payload with copies of some patterns planted (in a random case), at the start and the end.
pub fn planted(pats: &[(Vec<u8>, bool)], filler: &[u8], flips: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    for (i, (p, _)) in pats.iter().enumerate() {
        let mut p = p.clone();
        if flips >> (i % 64) & 1 == 1 {
            p.iter_mut().for_each(|b| *b = b.to_ascii_uppercase());
        }
        buf.extend_from_slice(&p);
        buf.extend_from_slice(&filler[..filler.len().min(i % 5)]);
    }
    buf
}

/// A deterministic pseudo-random generator (xorshift) for large inputs.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn bytes(&mut self, n: usize, alphabet: &[u8]) -> Vec<u8> {
        (0..n)
            .map(|_| alphabet[(self.next() % alphabet.len() as u64) as usize])
            .collect()
    }
}

/// The frames of a classic pcap file with Ethernet link type; None for anything else
/// (pcapng, other link types). Records that claim more than the file holds end the list.
pub fn ethernet_frames(path: &Path) -> Option<Vec<Vec<u8>>> {
    let b = std::fs::read(path).ok()?;
    let magic = b.get(..4)?;
    let le = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => return None,
    };
    let u32_at = |at: usize| -> Option<u32> {
        let w: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(if le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        })
    };
    if u32_at(20)? != 1 {
        return None;
    }
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let incl = u32_at(at + 8)? as usize;
        let Some(data) = b.get(at + 16..at + 16 + incl) else {
            break;
        };
        out.push(data.to_vec());
        at += 16 + incl;
    }
    Some(out)
}

/// The ET Open 2019 rules loaded (every address both home and external, so the payload keywords
/// decide) and compiled, and the tcpdump captures in name order; None (recorded as not run, a
/// failure under CI) without the corpus.
pub fn etopen_program_and_captures() -> Option<(
    pktwarp_inspect::eval::program::Program,
    Vec<std::path::PathBuf>,
)> {
    use pktwarp_inspect::rules::{load_dir, LoadOptions, Variables};
    let rules = flow_rules::input::require_corpus("ids/etopen-2019")?;
    let pcaps = flow_rules::input::require_corpus("pcaps/tcpdump")?;
    let opts = LoadOptions {
        vars: Variables::with(&[("HOME_NET", "any"), ("EXTERNAL_NET", "any")]),
        strict: false,
        flow_table: true,
    };
    let rep = load_dir(&rules, &opts).expect("load");
    let mut p = pktwarp_inspect::eval::program::Program::new();
    // What a GPU image holds: every loaded rule but those keeping CPU state.
    for l in rep.loaded.iter().filter(|l| !l.rule.needs_cpu_state()) {
        p.add(&l.rule).expect("compile");
    }
    let mut files: Vec<_> = std::fs::read_dir(&pcaps)
        .expect("read pcaps")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    Some((p, files))
}

/// xorshift64*: a fixed sequence, so a failure reproduces (the rule and payload generators of
/// the evaluator tests).
pub struct Rng64(pub u64);

impl Rng64 {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}
