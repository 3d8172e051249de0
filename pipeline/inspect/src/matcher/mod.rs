//! The multi-pattern prefilter: which of a set of byte-string patterns (the rules' fast
//! patterns) occur in a payload.
//!
//! Semantics (one, shared by every implementation here and by
//! `gpu-kernels/cuda/inspect_match.cuh`):
//! every occurrence of every pattern is reported as (pattern id, end offset), overlapping ones
//! included, compared case-sensitively unless the pattern is `nocase` (ASCII case folding).
//! [`MatchSet`] is the prefilter's answer: one bit per pattern that occurs at least once.
//!
//! - [`PatternSet`]: the patterns; ids are their positions in the set.
//! - [`Image`]: the set compiled into a flat, pointer-free automaton (`Vec<u32>`) that the Rust
//!   walker here and the CUDA walker both read (layout in [`image`] and docs/inspect.md).
//! - [`cpu::AcMatcher`]: the CPU prefilter over the `aho-corasick` crate.
//! - `hyperscan` (feature `hyperscan`): Hyperscan as peer and oracle.

mod compile;
pub mod cpu;
#[cfg(feature = "hyperscan")]
pub mod hyperscan;
pub mod image;

pub use compile::CompileOptions;
pub use image::Image;

/// The longest pattern, in bytes.
pub const MAX_PATTERN_LEN: usize = 255;
/// The most patterns in one set.
pub const MAX_PATTERNS: usize = 1 << 20;
/// The most automaton states of one image (sparse transitions keep a state index in 23 bits).
pub const MAX_STATES: usize = 1 << 23;
/// The largest image, in 32-bit words (256 MiB): output lists grow as patterns that end in
/// other patterns do (duplicates above all), and the image goes to GPU memory whole.
pub const MAX_IMAGE_WORDS: usize = 1 << 26;

/// A pattern's id: its position in its [`PatternSet`].
pub type PatternId = u32;

/// One pattern: 1..=255 bytes, matched case-sensitively unless `nocase`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    pub bytes: Vec<u8>,
    pub nocase: bool,
}

/// The patterns of one prefilter, in id order.
#[derive(Clone, Debug, Default)]
pub struct PatternSet {
    patterns: Vec<Pattern>,
}

impl PatternSet {
    pub fn new() -> PatternSet {
        PatternSet::default()
    }

    /// Adds a pattern and returns its id; refuses an empty one, one over [`MAX_PATTERN_LEN`]
    /// bytes and a set over [`MAX_PATTERNS`].
    pub fn add(&mut self, bytes: &[u8], nocase: bool) -> Result<PatternId, MatcherError> {
        let index = self.patterns.len();
        if bytes.is_empty() {
            return Err(MatcherError::EmptyPattern { index });
        }
        if bytes.len() > MAX_PATTERN_LEN {
            return Err(MatcherError::PatternTooLong {
                index,
                len: bytes.len(),
            });
        }
        if index >= MAX_PATTERNS {
            return Err(MatcherError::TooManyPatterns);
        }
        self.patterns.push(Pattern {
            bytes: bytes.to_vec(),
            nocase,
        });
        Ok(index as PatternId)
    }

    pub fn len(&self) -> usize {
        self.patterns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    pub fn get(&self, id: PatternId) -> Option<&Pattern> {
        self.patterns.get(id as usize)
    }

    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }

    /// The longest pattern's length (0 for an empty set).
    pub fn max_len(&self) -> usize {
        self.patterns
            .iter()
            .map(|p| p.bytes.len())
            .max()
            .unwrap_or(0)
    }
}

/// One occurrence: the pattern and the offset just past its last byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Match {
    pub pattern: PatternId,
    pub end: usize,
}

/// A bitmap of pattern ids: bit `id % 32` of word `id / 32` (the layout the CUDA kernel writes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatchSet {
    words: Vec<u32>,
    n_patterns: usize,
}

impl MatchSet {
    /// An empty set for `n_patterns` patterns.
    pub fn new(n_patterns: usize) -> MatchSet {
        MatchSet {
            words: vec![0; bitmap_words(n_patterns)],
            n_patterns,
        }
    }

    /// Wraps a bitmap as the kernel writes it; bits past `n_patterns` are refused.
    pub fn from_words(words: Vec<u32>, n_patterns: usize) -> Result<MatchSet, MatcherError> {
        if words.len() != bitmap_words(n_patterns) {
            return Err(MatcherError::BadBitmap {
                why: format!(
                    "{} words for {n_patterns} patterns, expected {}",
                    words.len(),
                    bitmap_words(n_patterns)
                ),
            });
        }
        let set = MatchSet { words, n_patterns };
        if let Some(id) = set.iter().find(|&id| id as usize >= n_patterns) {
            return Err(MatcherError::BadBitmap {
                why: format!("bit {id} set, past the last pattern ({n_patterns} patterns)"),
            });
        }
        Ok(set)
    }

    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }

    pub fn insert(&mut self, id: PatternId) {
        if (id as usize) < self.n_patterns {
            self.words[id as usize / 32] |= 1 << (id % 32);
        }
    }

    pub fn contains(&self, id: PatternId) -> bool {
        (id as usize) < self.n_patterns && self.words[id as usize / 32] & (1 << (id % 32)) != 0
    }

    /// The ids in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = PatternId> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            (0..32u32)
                .filter(move |b| w & (1 << b) != 0)
                .map(move |b| i as u32 * 32 + b)
        })
    }

    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn words(&self) -> &[u32] {
        &self.words
    }

    pub fn n_patterns(&self) -> usize {
        self.n_patterns
    }
}

/// Words of a bitmap over `n_patterns` patterns.
pub fn bitmap_words(n_patterns: usize) -> usize {
    n_patterns.div_ceil(32)
}

/// The set of the ids in `matches` (the reference for `match_set` from `find_all`).
pub fn set_of(matches: &[Match], n_patterns: usize) -> MatchSet {
    let mut s = MatchSet::new(n_patterns);
    for m in matches {
        s.insert(m.pattern);
    }
    s
}

/// What went wrong building or loading a matcher; each names the pattern or image field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MatcherError {
    #[error("pattern {index}: empty (a pattern has 1 to {MAX_PATTERN_LEN} bytes)")]
    EmptyPattern { index: usize },
    #[error("pattern {index}: {len} bytes, over the limit of {MAX_PATTERN_LEN}")]
    PatternTooLong { index: usize, len: usize },
    #[error("pattern set: over the limit of {MAX_PATTERNS} patterns")]
    TooManyPatterns,
    #[error("pattern set: the automaton needs over {MAX_STATES} states")]
    TooManyStates,
    #[error("pattern set: the image needs {words} words, over the limit of {MAX_IMAGE_WORDS}")]
    ImageTooLarge { words: u64 },
    #[error("matcher image: word {word} ({field}): {why}")]
    BadImage {
        word: usize,
        field: &'static str,
        why: String,
    },
    #[error("match bitmap: {why}")]
    BadBitmap { why: String },
    #[error("aho-corasick: {0}")]
    AhoCorasick(String),
    #[error("hyperscan: {0}")]
    Hyperscan(String),
}
