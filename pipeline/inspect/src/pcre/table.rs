//! The flat DFA table both walkers run (this file's `find_end` / `find_start`, and
//! `gpu-kernels/cuda/inspect_pcre.cuh`), and its export from a `regex-automata` dense DFA.
//!
//! A table is `u32` words:
//!
//! | word | |
//! |---|---|
//! | 0 | `n_states` (state 0 is the dead state) |
//! | 1 | `stride`: byte classes + 1 (the last column is the end of input) |
//! | 2 | `final_nl`: the class of a `\n` that ends the subject, or [`NO_CLASS`] |
//! | 3 | `v`: the byte that stands for that final `\n` (a real one is fed as another), or 256 |
//! | 4..10 | start states by what precedes the start: text start, `\n`, `\r`, word byte, other byte, the final `\n` |
//! | 10..74 | the class of each byte, four to a word, little-endian |
//! | 74.. | the match bitmap (one bit a state), then `n_states * stride` transitions |
//!
//! Matches are delayed by one byte, as in `regex-automata`: entering a match state on the
//! byte at `p` (or on the end of input, `p` = length) means a match ended at `p`.
//! `final_nl` is how PCRE's `$` (end, or before a final newline) gets a DFA: the subject's
//! last byte, when it is `\n`, is its own symbol, the only line terminator of the DFA
//! (see `super::lower`).

use super::parse::is_word;
use regex_automata::dfa::{dense, Automaton};
use regex_automata::util::{primitives::StateID, start};
use regex_automata::Anchored;
use std::collections::HashMap;

pub const HEADER: usize = 74;
pub const NO_CLASS: u32 = u32::MAX;
/// Word 3 when the table has no final-newline symbol.
pub const NO_V: u32 = 256;
const CLASSES: usize = 10;

/// Start kinds (words 4..10), as `regex-automata` tells its start states apart.
const K_TEXT: usize = 0;
const K_LF: usize = 1;
const K_CR: usize = 2;
const K_WORD: usize = 3;
const K_OTHER: usize = 4;
const K_TERM: usize = 5;

/// The start kind of a byte the DFA sees before a start (`term`: its line terminator).
fn kind_of(b: u8, term: u8) -> usize {
    if b == term && term != b'\n' {
        K_TERM
    } else if b == b'\n' {
        K_LF
    } else if b == b'\r' {
        K_CR
    } else if is_word(b) {
        K_WORD
    } else {
        K_OTHER
    }
}

/// The most DFA states of one `pcre` (a larger DFA skips its rule): 4,096 states of at most
/// 257 columns is at most 4 MiB, the largest ET Open tables stay far below.
pub const MAX_STATES: usize = 4096;

/// How the walker feeds bytes to the DFA: which byte is the line terminator, and the
/// `final_nl` symbol (the DFA's byte for it, and the byte fed for a real one of that value).
#[derive(Debug, Clone, Copy)]
pub struct Feed {
    pub term: u8,
    /// (v, w): `v` stands for a `\n` that ends the subject; a real `v` is fed as `w`.
    pub vtrick: Option<(u8, u8)>,
}

fn err<T>(s: impl Into<String>) -> Result<T, String> {
    Err(s.into())
}

/// The table of `dfa`, with anchored or unanchored starts. Errors name what the table
/// cannot hold (too many states, a start state that is not one per kind).
pub fn export(dfa: &dense::DFA<Vec<u32>>, anchored: bool, feed: Feed) -> Result<Vec<u32>, String> {
    let mode = if anchored {
        Anchored::Yes
    } else {
        Anchored::No
    };
    let start_of = |lb: Option<u8>| {
        dfa.start_state(&start::Config::new().anchored(mode).look_behind(lb))
            .map_err(|e| format!("start state: {e}"))
    };
    let other = (0u8..=255)
        .find(|&b| kind_of(b, feed.term) == K_OTHER)
        .unwrap_or(0);
    let starts = [
        start_of(None)?,
        start_of(Some(b'\n'))?,
        start_of(Some(b'\r'))?,
        start_of(Some(b'a'))?,
        start_of(Some(other))?,
        start_of(Some(feed.term))?,
    ];
    for b in 0u8..=255 {
        if start_of(Some(b))? != starts[kind_of(b, feed.term)] {
            return err(format!("start state after byte {b:#04x} is not its kind's"));
        }
    }
    // Number the states reachable from the starts, the dead state (always the dense DFA's
    // first) as 0.
    let dead = StateID::ZERO;
    if !dfa.is_dead_state(dead) {
        return err("the DFA's first state is not its dead state");
    }
    let mut ids: HashMap<StateID, u32> = HashMap::new();
    let mut order: Vec<StateID> = Vec::new();
    let add = |s: StateID, ids: &mut HashMap<StateID, u32>, order: &mut Vec<StateID>| {
        *ids.entry(s).or_insert_with(|| {
            order.push(s);
            order.len() as u32 - 1
        })
    };
    add(dead, &mut ids, &mut order);
    let start_ids: Vec<u32> = starts
        .iter()
        .map(|&s| add(s, &mut ids, &mut order))
        .collect();
    let mut rows: Vec<Vec<StateID>> = Vec::new();
    let mut k = 0;
    while k < order.len() {
        if order.len() > MAX_STATES {
            return err(format!("DFA over {MAX_STATES} states"));
        }
        let s = order[k];
        if dfa.is_quit_state(s) {
            return err("a quit state");
        }
        let mut row: Vec<StateID> = (0u8..=255).map(|b| dfa.next_state(s, b)).collect();
        row.push(dfa.next_eoi_state(s));
        for &t in &row {
            add(t, &mut ids, &mut order);
        }
        rows.push(row);
        k += 1;
    }
    let n = order.len();
    // Byte classes: bytes whose columns are equal over every state.
    let mut class_of_col: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut col_class = [0u32; 256];
    let mut reps: Vec<u8> = Vec::new();
    for b in 0..256usize {
        let col: Vec<u32> = rows.iter().map(|r| ids[&r[b]]).collect();
        let next = class_of_col.len() as u32;
        col_class[b] = *class_of_col.entry(col).or_insert_with(|| {
            reps.push(b as u8);
            next
        });
    }
    let nc = reps.len();
    let stride = nc + 1;
    let mut byte_class = col_class;
    let mut final_nl = NO_CLASS;
    if let Some((v, w)) = feed.vtrick {
        final_nl = col_class[usize::from(v)];
        byte_class[usize::from(v)] = col_class[usize::from(w)];
    }
    let mut out = vec![0u32; HEADER];
    out[0] = n as u32;
    out[1] = stride as u32;
    out[2] = final_nl;
    out[3] = feed.vtrick.map_or(NO_V, |(v, _)| u32::from(v));
    out[4..CLASSES].copy_from_slice(&start_ids);
    for (b, &c) in byte_class.iter().enumerate() {
        out[CLASSES + b / 4] |= c << (8 * (b % 4));
    }
    let mut bits = vec![0u32; n.div_ceil(32)];
    for (i, &s) in order.iter().enumerate() {
        if dfa.is_match_state(s) {
            bits[i / 32] |= 1 << (i % 32);
        }
    }
    out.extend(bits);
    for row in &rows {
        for &rb in &reps {
            out.push(ids[&row[usize::from(rb)]]);
        }
        out.push(ids[&row[256]]);
    }
    Ok(out)
}

/// A checked view of a table.
#[derive(Debug, Clone, Copy)]
pub struct Table<'a> {
    w: &'a [u32],
    n: usize,
    stride: usize,
    trans: usize,
}

impl<'a> Table<'a> {
    /// Checks every field a walker indexes by: a table that passes cannot make one read
    /// outside it.
    pub fn new(w: &'a [u32]) -> Result<Table<'a>, String> {
        if w.len() < HEADER {
            return err("shorter than its header");
        }
        let (n, stride) = (w[0] as usize, w[1] as usize);
        if n == 0 || n > MAX_STATES || !(2..=257).contains(&stride) {
            return err(format!("{n} states of stride {stride}"));
        }
        let trans = HEADER + n.div_ceil(32);
        if w.len() != trans + n * stride {
            return err(format!(
                "{} words, its header says {}",
                w.len(),
                trans + n * stride
            ));
        }
        let nc = (stride - 1) as u32;
        if w[2] != NO_CLASS && w[2] >= nc {
            return err("final newline class out of range");
        }
        if w[3] > NO_V || (w[3] == NO_V) != (w[2] == NO_CLASS) {
            return err("the final newline byte and class disagree");
        }
        if w[4..CLASSES].iter().any(|&s| s as usize >= n) {
            return err("a start state out of range");
        }
        if (0..256).any(|b| (w[CLASSES + b / 4] >> (8 * (b % 4))) & 0xff >= nc) {
            return err("a byte class out of range");
        }
        if w[trans..].iter().any(|&s| s as usize >= n) {
            return err("a transition out of range");
        }
        if w[trans..trans + stride].iter().any(|&s| s != 0) || w[HEADER] & 1 != 0 {
            return err("state 0 is not the dead state");
        }
        Ok(Table {
            w,
            n,
            stride,
            trans,
        })
    }

    /// A view of a table that [`Table::new`] accepted before (the evaluators' tables are
    /// checked when the program is built or read back from its image).
    pub fn trusted(w: &'a [u32]) -> Table<'a> {
        let (n, stride) = (w[0] as usize, w[1] as usize);
        Table {
            w,
            n,
            stride,
            trans: HEADER + n.div_ceil(32),
        }
    }

    pub fn states(&self) -> usize {
        self.n
    }

    /// A shortest subject (from the text start) in which this forward table finds a match, or
    /// None when it matches nothing: the tests' positive cases, built from the DFA itself.
    pub fn witness(&self) -> Option<Vec<u8>> {
        let nc = self.stride - 1;
        let mut rep: Vec<Option<u8>> = vec![None; nc];
        for b in (0..=255u8).rev() {
            rep[self.class(&[b, 0], 0) as usize] = Some(b);
        }
        let start = self.w[4 + K_TEXT];
        let mut prev: Vec<Option<(u32, u8)>> = vec![None; self.n];
        let mut seen = vec![false; self.n];
        let mut queue = std::collections::VecDeque::from([start]);
        seen[start as usize] = true;
        let path = |mut s: u32, prev: &[Option<(u32, u8)>]| {
            let mut out = Vec::new();
            while let Some((p, b)) = prev[s as usize] {
                out.push(b);
                s = p;
            }
            out.reverse();
            out
        };
        while let Some(s) = queue.pop_front() {
            if s == 0 {
                continue;
            }
            if self.is_match(self.next(s, nc as u32)) {
                return Some(path(s, &prev));
            }
            for (c, b) in rep.iter().enumerate() {
                let Some(b) = *b else { continue };
                let t = self.next(s, c as u32);
                if self.is_match(t) {
                    let mut p = path(s, &prev);
                    p.push(b);
                    return Some(p);
                }
                if !seen[t as usize] {
                    seen[t as usize] = true;
                    prev[t as usize] = Some((s, b));
                    queue.push_back(t);
                }
            }
        }
        None
    }

    fn is_match(&self, s: u32) -> bool {
        self.w[HEADER + s as usize / 32] >> (s % 32) & 1 != 0
    }

    fn next(&self, s: u32, class: u32) -> u32 {
        self.w[self.trans + s as usize * self.stride + class as usize]
    }

    fn class(&self, buf: &[u8], p: usize) -> u32 {
        let b = buf[p];
        if b == b'\n' && p + 1 == buf.len() && self.w[2] != NO_CLASS {
            return self.w[2];
        }
        (self.w[CLASSES + usize::from(b) / 4] >> (8 * (b % 4))) & 0xff
    }

    /// The start kind for the byte at `p` (what precedes a forward start, or follows a
    /// reverse one), or the text edge when `p` is outside `[lo, buf.len())`.
    fn kind(&self, buf: &[u8], lo: usize, p: Option<usize>) -> usize {
        let Some(p) = p.filter(|&p| p >= lo && p < buf.len()) else {
            return K_TEXT;
        };
        let b = buf[p];
        if self.w[3] != NO_V {
            if b == b'\n' && p + 1 == buf.len() {
                return K_TERM;
            }
            if u32::from(b) == self.w[3] {
                // Fed as its stand-in, a non-word byte that is neither `\n` nor `\r`.
                return K_OTHER;
            }
        }
        kind_of(b, b'\n')
    }

    /// The end of the leftmost-first match in the subject `buf[sub..]`, searching from
    /// `from` (`sub <= from <= buf.len()`; what precedes `from` in the subject is its
    /// look-behind), or None.
    pub fn find_end(&self, buf: &[u8], sub: usize, from: usize) -> Option<usize> {
        let mut s = self.w[4 + self.kind(buf, sub, from.checked_sub(1))];
        let mut last = None;
        let mut p = from;
        while p < buf.len() {
            if s == 0 {
                return last;
            }
            s = self.next(s, self.class(buf, p));
            if self.is_match(s) {
                last = Some(p);
            }
            p += 1;
        }
        if s != 0 && self.is_match(self.next(s, (self.stride - 1) as u32)) {
            last = Some(buf.len());
        }
        last
    }

    /// With the reverse table of a pattern: the start of the match that a search of the
    /// subject `buf[sub..]` from `from` found ending at `end` (the leftmost start at or after
    /// `from` of a match ending there), or None.
    pub fn find_start(&self, buf: &[u8], sub: usize, from: usize, end: usize) -> Option<usize> {
        let mut s = self.w[4 + self.kind(buf, sub, Some(end))];
        let mut last = None;
        let mut p = end;
        while p > from {
            if s == 0 {
                return last;
            }
            p -= 1;
            s = self.next(s, self.class(buf, p));
            if self.is_match(s) {
                last = Some(p + 1);
            }
        }
        if s == 0 {
            return last;
        }
        // What precedes the search start is its context: the subject's byte, or its start.
        let edge = if from > sub {
            self.class(buf, from - 1)
        } else {
            (self.stride - 1) as u32
        };
        if self.is_match(self.next(s, edge)) {
            last = Some(from);
        }
        last
    }
}
