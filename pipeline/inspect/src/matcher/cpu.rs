//! The CPU prefilter over the `aho-corasick` crate, with the matcher's semantics: two automatons
//! (case-sensitive patterns, `nocase` patterns with ASCII case folding), standard match kind,
//! overlapping search, so every occurrence of every pattern is seen.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

use super::{Match, MatchSet, MatcherError, PatternId, PatternSet};

/// One automaton and the set's ids of its patterns.
struct Half {
    ac: AhoCorasick,
    ids: Vec<PatternId>,
}

/// The `aho-corasick` crate over a [`PatternSet`].
pub struct AcMatcher {
    halves: Vec<Half>,
    n_patterns: usize,
}

impl AcMatcher {
    /// The crate's choice of automaton (for thousands of patterns a contiguous NFA: compact).
    pub fn new(set: &PatternSet) -> Result<AcMatcher, MatcherError> {
        AcMatcher::build(set, false)
    }

    /// `dfa`: the crate's full DFA (faster; for the ET Open fast patterns, tens of MiB).
    pub fn build(set: &PatternSet, dfa: bool) -> Result<AcMatcher, MatcherError> {
        let mut halves = Vec::new();
        for nocase in [false, true] {
            let (ids, pats): (Vec<PatternId>, Vec<&[u8]>) = set
                .patterns()
                .iter()
                .enumerate()
                .filter(|(_, p)| p.nocase == nocase)
                .map(|(i, p)| (i as PatternId, p.bytes.as_slice()))
                .unzip();
            if ids.is_empty() {
                continue;
            }
            let ac = AhoCorasickBuilder::new()
                .match_kind(MatchKind::Standard)
                .ascii_case_insensitive(nocase)
                .kind(dfa.then_some(AhoCorasickKind::DFA))
                .build(pats)
                .map_err(|e| MatcherError::AhoCorasick(e.to_string()))?;
            halves.push(Half { ac, ids });
        }
        Ok(AcMatcher {
            halves,
            n_patterns: set.len(),
        })
    }

    /// Sets the bit of every pattern that occurs in `buf`.
    pub fn match_set_into(&self, buf: &[u8], set: &mut MatchSet) {
        for h in &self.halves {
            for m in h.ac.find_overlapping_iter(buf) {
                set.insert(h.ids[m.pattern().as_usize()]);
            }
        }
    }

    pub fn match_set(&self, buf: &[u8]) -> MatchSet {
        let mut set = MatchSet::new(self.n_patterns);
        self.match_set_into(buf, &mut set);
        set
    }

    /// Every occurrence (unordered across the two automatons).
    pub fn find_all(&self, buf: &[u8], out: &mut Vec<Match>) {
        for h in &self.halves {
            for m in h.ac.find_overlapping_iter(buf) {
                out.push(Match {
                    pattern: h.ids[m.pattern().as_usize()],
                    end: m.end(),
                });
            }
        }
    }
}
