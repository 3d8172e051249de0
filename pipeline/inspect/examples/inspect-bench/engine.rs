//! The whole inspection of one frame, as the stage does it: per buffer a multi-pattern
//! prefilter over the fast patterns of the rules that inspect that buffer, the matched patterns'
//! rules (plus the rules without a fast pattern) as candidates, each candidate's full check.
//! The prefilter is pluggable (the image walker, Hyperscan, the aho-corasick crate) so that
//! every engine runs the very same candidate lists and rule checks.

use std::collections::HashMap;

use pktwarp_inspect::eval::image::{verdict, Verdict};
use pktwarp_inspect::eval::program::Program;
use pktwarp_inspect::eval::Frame;
use pktwarp_inspect::matcher::{Image, MatchSet, PatternSet};
use pktwarp_inspect::rules::{Buffer, LoadedRule};

/// The fast patterns of the rules that inspect one buffer.
pub struct BufSet {
    pub buffer: Buffer,
    pub set: PatternSet,
    /// Per pattern id, the rules (indices into the program) whose fast pattern it is.
    pub rules_of: Vec<Vec<u32>>,
    pub image: Image,
}

/// A buffer set being built: its patterns, their rules, the id of each (bytes, nocase).
type Building = (
    Buffer,
    PatternSet,
    Vec<Vec<u32>>,
    HashMap<(Vec<u8>, bool), u32>,
);

/// The loaded rules compiled, with their prefilters by buffer.
pub struct Rules {
    pub program: Program,
    /// Rules without a fast pattern: candidates of every frame.
    pub always: Vec<u32>,
    pub bufs: Vec<BufSet>,
}

impl Rules {
    /// Compiles every loaded rule (a rule the program refuses is left out and counted).
    pub fn new(loaded: &[LoadedRule]) -> Result<(Rules, usize), String> {
        let mut program = Program::new();
        let mut always = Vec::new();
        let mut by_buf: Vec<Building> = Vec::new();
        let mut refused = 0;
        for l in loaded {
            let Ok(idx) = program.add(&l.rule) else {
                refused += 1;
                continue;
            };
            let idx = idx as u32;
            let Some(pf) = l.rule.prefilter() else {
                always.push(idx);
                continue;
            };
            let k = match by_buf.iter().position(|b| b.0 == pf.buffer) {
                Some(k) => k,
                None => {
                    by_buf.push((pf.buffer, PatternSet::new(), Vec::new(), HashMap::new()));
                    by_buf.len() - 1
                }
            };
            let (_, set, rules_of, ids) = &mut by_buf[k];
            let key = (pf.pattern.clone(), pf.nocase);
            let id = match ids.get(&key) {
                Some(&id) => id,
                None => {
                    let id = set
                        .add(&pf.pattern, pf.nocase)
                        .map_err(|e| format!("{}:{}: {e}", l.file, l.line))?;
                    ids.insert(key, id);
                    rules_of.push(Vec::new());
                    id
                }
            };
            rules_of[id as usize].push(idx);
        }
        // Buffers in code order: the dump and the GPU probe take them in this order.
        by_buf.sort_by_key(|b| b.0 as u8);
        let mut bufs = Vec::new();
        for (buffer, set, rules_of, _) in by_buf {
            let image = Image::compile(&set).map_err(|e| format!("{buffer:?}: {e}"))?;
            bufs.push(BufSet {
                buffer,
                set,
                rules_of,
                image,
            });
        }
        Ok((
            Rules {
                program,
                always,
                bufs,
            },
            refused,
        ))
    }

    pub fn n_patterns(&self) -> usize {
        self.bufs.iter().map(|b| b.set.len()).sum()
    }
}

/// A buffer of a frame (the evaluator's own lookup is private to it).
pub fn buffer_of<'a>(f: &Frame<'a>, b: Buffer) -> Option<&'a [u8]> {
    if b == Buffer::Payload {
        return Some(f.payload);
    }
    f.http.and_then(|h| h.buffer(b))
}

/// A prefilter: sets the bits of the patterns of buffer set `k` that occur in `buf`.
pub trait Prefilter {
    fn match_set(&mut self, k: usize, buf: &[u8], out: &mut MatchSet);
}

/// The image walker (the CUDA walker's reference).
pub struct Walker<'a>(pub &'a Rules);

impl Prefilter for Walker<'_> {
    fn match_set(&mut self, k: usize, buf: &[u8], out: &mut MatchSet) {
        self.0.bufs[k].image.match_set_into(buf, out);
    }
}

/// The aho-corasick crate (a third opinion on the candidate sets).
pub struct Ac(pub Vec<pktwarp_inspect::matcher::cpu::AcMatcher>);

impl Ac {
    pub fn new(r: &Rules) -> Result<Ac, String> {
        r.bufs
            .iter()
            .map(|b| pktwarp_inspect::matcher::cpu::AcMatcher::build(&b.set, true))
            .collect::<Result<Vec<_>, _>>()
            .map(Ac)
            .map_err(|e| e.to_string())
    }
}

impl Prefilter for Ac {
    fn match_set(&mut self, k: usize, buf: &[u8], out: &mut MatchSet) {
        self.0[k].match_set_into(buf, out);
    }
}

/// Hyperscan block mode, set-only databases, one scratch per scanner (per thread).
#[cfg(feature = "hyperscan")]
pub struct Hs(pub Vec<pktwarp_inspect::matcher::hyperscan::Hyperscan>);

#[cfg(feature = "hyperscan")]
impl Hs {
    pub fn new(r: &Rules) -> Result<Hs, String> {
        r.bufs
            .iter()
            .map(|b| pktwarp_inspect::matcher::hyperscan::Hyperscan::new(&b.set, true))
            .collect::<Result<Vec<_>, _>>()
            .map(Hs)
            .map_err(|e| e.to_string())
    }

    pub fn try_clone(&self) -> Result<Hs, String> {
        self.0
            .iter()
            .map(|h| h.try_clone())
            .collect::<Result<Vec<_>, _>>()
            .map(Hs)
            .map_err(|e| e.to_string())
    }
}

#[cfg(feature = "hyperscan")]
impl Prefilter for Hs {
    fn match_set(&mut self, k: usize, buf: &[u8], out: &mut MatchSet) {
        // A scan error (none is expected of a compiled literal database) leaves the set as it
        // is; the candidate check before timing would show it.
        let _ = self.0[k].match_set_into(buf, out);
    }
}

/// One thread's working state: a match set per buffer set, the candidate list, the flags.
pub struct Scratch {
    sets: Vec<MatchSet>,
    pub cands: Vec<u32>,
    matched: Vec<u8>,
}

impl Scratch {
    pub fn new(r: &Rules) -> Scratch {
        Scratch {
            sets: r.bufs.iter().map(|b| MatchSet::new(b.set.len())).collect(),
            cands: Vec::new(),
            matched: Vec::new(),
        }
    }
}

/// The candidates of `f` into `s.cands`, in the order the GPU probe builds them: the rules
/// without a fast pattern, then per buffer set (code order) per matched pattern id (ascending)
/// its rules in rule order.
pub fn candidates(r: &Rules, pf: &mut dyn Prefilter, f: &Frame, s: &mut Scratch) {
    s.cands.clear();
    s.cands.extend_from_slice(&r.always);
    for (k, b) in r.bufs.iter().enumerate() {
        let Some(buf) = buffer_of(f, b.buffer) else {
            continue;
        };
        let ms = &mut s.sets[k];
        ms.clear();
        pf.match_set(k, buf, ms);
        for (w, &word) in ms.words().iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let id = w * 32 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                s.cands.extend_from_slice(&b.rules_of[id]);
            }
        }
    }
}

/// The whole inspection of `f`: candidates, then each one's full check; the verdict.
pub fn inspect(r: &Rules, pf: &mut dyn Prefilter, f: &Frame, s: &mut Scratch) -> Verdict {
    candidates(r, pf, f, s);
    s.matched.clear();
    s.matched.resize(s.cands.len(), 0);
    verdict(&r.program, f, &s.cands, &mut s.matched)
}
