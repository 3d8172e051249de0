//! Suricata's `pcre` keyword as a DFA: the regular subset of PCRE with PCRE's exact meaning.
//!
//! A pattern is parsed with PCRE2's syntax ([`parse`]), lowered into a `regex-syntax` HIR
//! (bytes, no Unicode), compiled by `regex-automata` into a dense DFA, and exported into a
//! flat table of our own ([`table`]) that the CPU evaluator and the CUDA one
//! (`gpu-kernels/cuda/inspect_pcre.cuh`) both walk. The match semantics are PCRE's
//! leftmost-first; the result of a search is whether it matched and the match's end (where
//! Suricata moves the detection pointer). A pattern that has no DFA with PCRE's meaning, or
//! whose DFA passes [`table::MAX_STATES`], is refused with its reason (the rule is skipped).
//!
//! Where PCRE and `regex-syntax` differ, the lowering keeps PCRE's meaning:
//! - PCRE's `$` (without `m` and `E`) and `\Z` match at the end and before a `\n` that ends
//!   the subject. No look-around of `regex-syntax` says that, so the DFA's line terminator is
//!   a byte `v` that the pattern does not tell apart from another byte `w`: `v` is made to
//!   match wherever `\n` does, `$` becomes `(?m:$)` on that terminator, and the walker feeds
//!   a final `\n` as `v` and a real `v` as `w` (`table::Feed`). Such a pattern may not also
//!   use multiline `^` / `$` (it is refused).
//! - PCRE's multiline `^` does not match after a `\n` that ends the subject; `(?m:^)` does,
//!   so a multiline `^` is accepted only where what follows it consumes a byte.
//! - Case folding is ASCII only, `\s` includes VT, `\h` / `\v` are PCRE's 8-bit sets.

pub mod parse;
pub mod table;

use parse::{Anchor, Ast, Flags, Set, Skip};
use regex_automata::dfa::dense;
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::util::look::LookMatcher;
use regex_automata::MatchKind;
use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, Hir, Look, Repetition};

/// Bytes the determinizer may use for one pattern (past it the rule is skipped).
const BUILD_LIMIT: usize = 8 << 20;

/// A compiled `pcre`: its forward table and, when a later keyword is relative to it (so it
/// may be retried from its match start + 1, as Suricata does), the reverse table that finds
/// the match start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    pub forward: Vec<u32>,
    pub reverse: Option<Vec<u32>>,
}

/// The PCRE options of Suricata's flag letters (`i s m x A E G`); the others are Suricata's
/// own (buffers, `R`, `B`, `O`). Returns the flags and whether the pattern is anchored.
pub fn pcre_flags(letters: &str) -> (Flags, bool) {
    let has = |c| letters.contains(c);
    let f = Flags {
        caseless: has('i'),
        multiline: has('m'),
        dotall: has('s'),
        extended: has('x'),
        ungreedy: has('G'),
        dollar_endonly: has('E'),
    };
    (f, has('A'))
}

/// Compiles `pattern` with the flag letters of its `pcre` keyword. `need_start`: also build
/// the reverse table.
pub fn compile(pattern: &[u8], letters: &str, need_start: bool) -> Result<Compiled, Skip> {
    let (flags, anchored) = pcre_flags(letters);
    let ast = parse::parse(pattern, flags)?;
    refuse_empty_iterations(&ast)?;
    let low = lower(&ast)?;
    let fwd = build(&low, false, anchored)?;
    let forward = table::export(&fwd, anchored, low.feed).map_err(Skip)?;
    let reverse = if need_start {
        let rev = build(&low, true, true)?;
        Some(table::export(&rev, true, low.feed).map_err(Skip)?)
    } else {
        None
    };
    Ok(Compiled { forward, reverse })
}

/// PCRE ends a repeat at the first iteration that matches the empty string (`(?:$|\S)+` on
/// "a\n" ends after `a`, at the `$` before the final newline); the DFA's leftmost-first search
/// goes on and ends later. A repeat of more than one iteration whose body can match empty is
/// refused, so every loaded pattern keeps PCRE's match end.
fn refuse_empty_iterations(a: &parse::Ast) -> Result<(), Skip> {
    match a {
        parse::Ast::Empty | parse::Ast::Set(_) | parse::Ast::Look(_) => Ok(()),
        parse::Ast::Concat(v) | parse::Ast::Alt(v) => {
            v.iter().try_for_each(refuse_empty_iterations)
        }
        parse::Ast::Repeat { max, sub, .. } => {
            if max.is_none_or(|m| m > 1) && sub.min_len() == 0 {
                return Err(Skip(
                    "pcre: a repeated group that can match empty (PCRE ends the repeat there)"
                        .into(),
                ));
            }
            refuse_empty_iterations(sub)
        }
    }
}

struct Lowered {
    hir: Hir,
    feed: table::Feed,
}

fn build(low: &Lowered, reverse: bool, anchored: bool) -> Result<dense::DFA<Vec<u32>>, Skip> {
    let mut lm = LookMatcher::new();
    lm.set_line_terminator(low.feed.term);
    let nfa = thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .utf8(false)
                .reverse(reverse)
                .look_matcher(lm)
                .which_captures(WhichCaptures::None)
                .nfa_size_limit(Some(BUILD_LIMIT)),
        )
        .build_from_hir(&low.hir)
        .map_err(|e| Skip(format!("NFA too large ({e})")))?;
    let (kind, start) = if reverse {
        (MatchKind::All, regex_automata::dfa::StartKind::Anchored)
    } else if anchored {
        (
            MatchKind::LeftmostFirst,
            regex_automata::dfa::StartKind::Anchored,
        )
    } else {
        (
            MatchKind::LeftmostFirst,
            regex_automata::dfa::StartKind::Unanchored,
        )
    };
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(kind)
                .start_kind(start)
                .byte_classes(true)
                .unicode_word_boundary(false)
                .determinize_size_limit(Some(BUILD_LIMIT))
                .dfa_size_limit(Some(BUILD_LIMIT)),
        )
        .build_from_nfa(&nfa)
        .map_err(|_| Skip(format!("DFA over {} states", table::MAX_STATES)))
}

fn walk<'a>(a: &'a Ast, f: &mut impl FnMut(&'a Ast)) {
    f(a);
    match a {
        Ast::Concat(v) | Ast::Alt(v) => v.iter().for_each(|x| walk(x, f)),
        Ast::Repeat { sub, .. } => walk(sub, f),
        _ => {}
    }
}

/// Every multiline `^` must be followed, in its concatenation, by something that consumes a
/// byte (then PCRE's "not after a final newline" cannot differ from `(?m:^)`).
fn line_starts_ok(a: &Ast, top: bool) -> bool {
    match a {
        Ast::Look(Anchor::LineStart) => !top,
        Ast::Concat(v) => v.iter().enumerate().all(|(k, x)| match x {
            Ast::Look(Anchor::LineStart) => v[k + 1..].iter().map(Ast::min_len).sum::<u64>() >= 1,
            _ => line_starts_ok(x, true),
        }),
        Ast::Alt(v) => v.iter().all(|x| line_starts_ok(x, true)),
        Ast::Repeat { sub, .. } => line_starts_ok(sub, true),
        _ => true,
    }
}

fn lower(ast: &Ast) -> Result<Lowered, Skip> {
    let (mut final_nl, mut multi) = (false, false);
    let mut sets: Vec<&Set> = Vec::new();
    walk(ast, &mut |a| match a {
        Ast::Look(Anchor::EndOrFinalNl) => final_nl = true,
        Ast::Look(Anchor::LineStart | Anchor::LineEnd) => multi = true,
        Ast::Set(s) => sets.push(s),
        _ => {}
    });
    if !line_starts_ok(ast, true) {
        return Err(Skip(
            "multiline ^ that may match after a final newline".into(),
        ));
    }
    if final_nl && multi {
        return Err(Skip("\\Z or $ together with multiline anchors".into()));
    }
    let mut feed = table::Feed {
        term: b'\n',
        vtrick: None,
    };
    if final_nl {
        // Two non-word bytes, not `\n`, that no set of the pattern tells apart.
        let sig = |b: u8| -> Vec<bool> { sets.iter().map(|s| parse::set_has(s, b)).collect() };
        let cands: Vec<u8> = (0x80..=0xffu8)
            .chain(0..0x80)
            .filter(|&b| b != b'\n' && b != b'\r' && !parse::is_word(b))
            .collect();
        let mut pair = None;
        'outer: for (k, &v) in cands.iter().enumerate() {
            let sv = sig(v);
            for &w in &cands[k + 1..] {
                if sig(w) == sv {
                    pair = Some((v, w));
                    break 'outer;
                }
            }
        }
        let Some((v, w)) = pair else {
            return Err(Skip("no spare byte for PCRE's $".into()));
        };
        feed = table::Feed {
            term: v,
            vtrick: Some((v, w)),
        };
    }
    Ok(Lowered {
        hir: to_hir(ast, &feed),
        feed,
    })
}

fn to_hir(a: &Ast, feed: &table::Feed) -> Hir {
    match a {
        Ast::Empty => Hir::empty(),
        Ast::Set(s) => {
            let mut s = *s;
            if let Some((v, _)) = feed.vtrick {
                // `v` stands for the final newline: it matches where `\n` does.
                let nl = parse::set_has(&s, b'\n');
                s[usize::from(v >> 6)] &= !(1 << (v & 63));
                if nl {
                    parse::set_add(&mut s, v);
                }
            }
            let mut ranges = Vec::new();
            let mut b = 0usize;
            while b < 256 {
                if parse::set_has(&s, b as u8) {
                    let lo = b;
                    while b + 1 < 256 && parse::set_has(&s, (b + 1) as u8) {
                        b += 1;
                    }
                    ranges.push(ClassBytesRange::new(lo as u8, b as u8));
                }
                b += 1;
            }
            Hir::class(Class::Bytes(ClassBytes::new(ranges)))
        }
        Ast::Look(k) => Hir::look(match k {
            Anchor::Start => Look::Start,
            Anchor::End => Look::End,
            Anchor::LineStart => Look::StartLF,
            Anchor::LineEnd | Anchor::EndOrFinalNl => Look::EndLF,
            Anchor::Word => Look::WordAscii,
            Anchor::NotWord => Look::WordAsciiNegate,
        }),
        Ast::Concat(v) => Hir::concat(v.iter().map(|x| to_hir(x, feed)).collect()),
        Ast::Alt(v) => Hir::alternation(v.iter().map(|x| to_hir(x, feed)).collect()),
        Ast::Repeat {
            min,
            max,
            greedy,
            sub,
        } => Hir::repetition(Repetition {
            min: *min,
            max: *max,
            greedy: *greedy,
            sub: Box::new(to_hir(sub, feed)),
        }),
    }
}

/// The table view of the words a [`Compiled`] holds (checked).
pub fn view(words: &[u32]) -> Result<table::Table<'_>, String> {
    table::Table::new(words)
}

#[cfg(test)]
mod tests;
