//! The compiled matcher: a flat, pointer-free Aho-Corasick DFA over case-folded byte classes,
//! one `Vec<u32>` that this walker and `gpu-kernels/cuda/inspect_match.cuh` read alike.
//!
//! Layout (word offsets; every section follows the one before it):
//! - header, [`HDR_WORDS`] words: `H_*` below.
//! - class map, 256 words: byte -> class (ASCII letters fold to one class; class 0 = a byte no
//!   pattern has).
//! - dense rows, `n_dense * n_classes` words: the full transition row of states `0..n_dense`
//!   (breadth-first order, so the shallow, hot states). Entry: bit 31 = the target state has
//!   outputs, bits 0..30 = the target state.
//! - sparse headers, 3 words per state `n_dense..n_states`: failure state (always a lower
//!   index), first entry, entry count.
//! - sparse entries: bit 31 = the target has outputs, bits 8..30 = target state, bits 0..7 =
//!   class; sorted by class within a state. A class not listed: follow the failure state.
//! - output index, `n_states + 1` words: state `s`'s outputs are `out[idx[s]..idx[s + 1]]`.
//! - outputs: bit 31 = verify the original bytes (a case-sensitive pattern with a letter),
//!   bits 0..30 = pattern id. Each state lists every pattern that is a suffix of its string.
//! - patterns, 2 words each: byte offset into the pattern bytes, `len | nocase << 16`.
//! - pattern bytes, 4 per word, little-endian.

use super::{Match, MatchSet, MatcherError, MAX_PATTERNS, MAX_PATTERN_LEN, MAX_STATES};

/// "PWIM" little-endian.
pub const MAGIC: u32 = 0x4D49_5750;
pub const VERSION: u32 = 1;
pub const HDR_WORDS: usize = 16;
pub const H_MAGIC: usize = 0;
pub const H_VERSION: usize = 1;
pub const H_N_STATES: usize = 2;
pub const H_N_CLASSES: usize = 3;
pub const H_N_DENSE: usize = 4;
pub const H_N_PATTERNS: usize = 5;
pub const H_MAX_LEN: usize = 6;
pub const H_OFF_CLASS: usize = 7;
pub const H_OFF_DENSE: usize = 8;
pub const H_OFF_SPARSE_HDR: usize = 9;
pub const H_OFF_SPARSE: usize = 10;
pub const H_OFF_OUT_IDX: usize = 11;
pub const H_OFF_OUT: usize = 12;
pub const H_OFF_PAT: usize = 13;
pub const H_OFF_BYTES: usize = 14;
pub const H_TOTAL: usize = 15;

/// Bit 31 of a transition: the target state has outputs; of an output: verify the bytes.
pub const FLAG: u32 = 0x8000_0000;

/// A validated image and the section bounds the walker uses.
#[derive(Clone, Debug)]
pub struct Image {
    words: Vec<u32>,
    n_states: usize,
    n_classes: usize,
    n_dense: usize,
    n_patterns: usize,
    max_len: usize,
    off: [usize; 9],
    /// The class map as bytes (classes < 256), so a walk starts without copying it.
    class: [u8; 256],
}

// Indices into `Image::off`: the sections in their order, then the end.
const S_CLASS: usize = 0;
const S_DENSE: usize = 1;
const S_SHDR: usize = 2;
const S_SPARSE: usize = 3;
const S_OIDX: usize = 4;
const S_OUT: usize = 5;
const S_PAT: usize = 6;
const S_BYTES: usize = 7;
const S_END: usize = 8;
const OFF_FIELDS: [(usize, &str); 9] = [
    (H_OFF_CLASS, "off_class"),
    (H_OFF_DENSE, "off_dense"),
    (H_OFF_SPARSE_HDR, "off_sparse_hdr"),
    (H_OFF_SPARSE, "off_sparse"),
    (H_OFF_OUT_IDX, "off_out_idx"),
    (H_OFF_OUT, "off_out"),
    (H_OFF_PAT, "off_pat"),
    (H_OFF_BYTES, "off_bytes"),
    (H_TOTAL, "total"),
];

fn bad(word: usize, field: &'static str, why: impl Into<String>) -> MatcherError {
    MatcherError::BadImage {
        word,
        field,
        why: why.into(),
    }
}

/// `v` as a count in `lo..=hi`, else an error naming the header field.
fn field(
    w: &[u32],
    at: usize,
    name: &'static str,
    lo: usize,
    hi: usize,
) -> Result<usize, MatcherError> {
    let v = w[at] as usize;
    if v < lo || v > hi {
        return Err(bad(at, name, format!("{v}, not in {lo}..={hi}")));
    }
    Ok(v)
}

impl Image {
    /// Checks every field and entry of `words` (so the walkers, Rust and CUDA, cannot read out
    /// of bounds or loop) and wraps it.
    pub fn from_words(words: Vec<u32>) -> Result<Image, MatcherError> {
        if words.len() < HDR_WORDS {
            return Err(bad(
                words.len(),
                "header",
                format!("{} words, need {HDR_WORDS}", words.len()),
            ));
        }
        if words[H_MAGIC] != MAGIC {
            return Err(bad(
                H_MAGIC,
                "magic",
                format!("{:#010x}, not {MAGIC:#010x}", words[H_MAGIC]),
            ));
        }
        if words[H_VERSION] != VERSION {
            return Err(bad(
                H_VERSION,
                "version",
                format!("{}, not {VERSION}", words[H_VERSION]),
            ));
        }
        let n_states = field(&words, H_N_STATES, "n_states", 1, MAX_STATES)?;
        let n_classes = field(&words, H_N_CLASSES, "n_classes", 1, 256)?;
        let n_dense = field(&words, H_N_DENSE, "n_dense", 1, n_states)?;
        let n_patterns = field(&words, H_N_PATTERNS, "n_patterns", 0, MAX_PATTERNS)?;
        let max_len = field(&words, H_MAX_LEN, "max_len", 0, MAX_PATTERN_LEN)?;
        let mut off = [0usize; 9];
        let mut prev = HDR_WORDS;
        for (i, &(at, name)) in OFF_FIELDS.iter().enumerate() {
            let v = words[at] as usize;
            if v < prev || v > words.len() {
                return Err(bad(
                    at,
                    name,
                    format!("{v}, not in {prev}..={}", words.len()),
                ));
            }
            off[i] = v;
            prev = v;
        }
        let mut img = Image {
            words,
            n_states,
            n_classes,
            n_dense,
            n_patterns,
            max_len,
            off,
            class: [0; 256],
        };
        img.check_sizes()?;
        img.check_transitions()?;
        img.check_outputs()?;
        for b in 0..256 {
            img.class[b] = img.words[img.off[S_CLASS] + b] as u8;
        }
        Ok(img)
    }

    /// Sections whose size the header fixes.
    fn check_sizes(&self) -> Result<(), MatcherError> {
        let n_sparse = self.n_states - self.n_dense;
        let want = [
            (S_CLASS, 256, H_OFF_DENSE, "off_dense"),
            (
                S_DENSE,
                self.n_dense * self.n_classes,
                H_OFF_SPARSE_HDR,
                "off_sparse_hdr",
            ),
            (S_SHDR, 3 * n_sparse, H_OFF_SPARSE, "off_sparse"),
            (S_OIDX, self.n_states + 1, H_OFF_OUT, "off_out"),
            (S_PAT, 2 * self.n_patterns, H_OFF_BYTES, "off_bytes"),
        ];
        for (s, len, at, name) in want {
            if self.off[s + 1] - self.off[s] != len {
                return Err(bad(
                    at,
                    name,
                    format!(
                        "section of {} words, expected {len}",
                        self.off[s + 1] - self.off[s]
                    ),
                ));
            }
        }
        if self.off[S_END] != self.words.len() {
            return Err(bad(
                H_TOTAL,
                "total",
                format!(
                    "{}, the image has {} words",
                    self.off[S_END],
                    self.words.len()
                ),
            ));
        }
        Ok(())
    }

    fn check_transitions(&self) -> Result<(), MatcherError> {
        let w = &self.words;
        for (i, v) in self.entries(S_CLASS) {
            if v as usize >= self.n_classes {
                return Err(bad(
                    i,
                    "class map",
                    format!("class {} of {}", v, self.n_classes),
                ));
            }
        }
        for (i, v) in self.entries(S_DENSE) {
            if (v & !FLAG) as usize >= self.n_states {
                return Err(bad(
                    i,
                    "dense row",
                    format!("state {} of {}", v & !FLAG, self.n_states),
                ));
            }
        }
        let n_entries = self.off[S_OIDX] - self.off[S_SPARSE];
        for s in self.n_dense..self.n_states {
            let h = self.off[S_SHDR] + 3 * (s - self.n_dense);
            if w[h] as usize >= s {
                return Err(bad(
                    h,
                    "sparse failure",
                    format!("state {s} fails to {}, not a lower state", w[h]),
                ));
            }
            let (start, count) = (w[h + 1] as usize, w[h + 2] as usize);
            if start + count > n_entries {
                return Err(bad(
                    h + 1,
                    "sparse entries",
                    format!("{start}+{count} past {n_entries} entries"),
                ));
            }
        }
        for (i, v) in self.entries(S_SPARSE) {
            let (c, t) = ((v & 0xff) as usize, ((v >> 8) & 0x7f_ffff) as usize);
            if c >= self.n_classes || t >= self.n_states {
                return Err(bad(i, "sparse entry", format!("class {c} / state {t}")));
            }
        }
        Ok(())
    }

    fn check_outputs(&self) -> Result<(), MatcherError> {
        let w = &self.words;
        let n_out = self.off[S_PAT] - self.off[S_OUT];
        let mut prev = 0;
        for (i, v) in self.entries(S_OIDX) {
            if (v as usize) < prev || v as usize > n_out {
                return Err(bad(
                    i,
                    "output index",
                    format!("{}, not in {prev}..={n_out}", v),
                ));
            }
            prev = v as usize;
        }
        for (i, v) in self.entries(S_OUT) {
            if (v & !FLAG) as usize >= self.n_patterns {
                return Err(bad(
                    i,
                    "output",
                    format!("pattern {} of {}", v & !FLAG, self.n_patterns),
                ));
            }
        }
        let n_bytes = 4 * (self.off[S_END] - self.off[S_BYTES]);
        for p in 0..self.n_patterns {
            let i = self.off[S_PAT] + 2 * p;
            let (start, len) = (w[i] as usize, (w[i + 1] & 0xffff) as usize);
            if len == 0 || len > self.max_len || start + len > n_bytes || w[i + 1] >> 17 != 0 {
                return Err(bad(
                    i,
                    "pattern",
                    format!(
                        "bytes {start}+{len} (max_len {}, {n_bytes} bytes)",
                        self.max_len
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Section `s`'s words with their indices in the image.
    fn entries(&self, s: usize) -> impl Iterator<Item = (usize, u32)> + '_ {
        let r = self.off[s]..self.off[s + 1];
        r.clone().zip(self.words[r].iter().copied())
    }

    /// The image's words (what the CUDA walker reads).
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    pub fn into_words(self) -> Vec<u32> {
        self.words
    }

    pub fn n_states(&self) -> usize {
        self.n_states
    }

    pub fn n_dense(&self) -> usize {
        self.n_dense
    }

    pub fn n_classes(&self) -> usize {
        self.n_classes
    }

    pub fn n_patterns(&self) -> usize {
        self.n_patterns
    }

    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Bytes of the image.
    pub fn size_bytes(&self) -> usize {
        4 * self.words.len()
    }

    /// Sets the bit of every pattern that occurs in `buf` (bits already set stay).
    pub fn match_set_into(&self, buf: &[u8], set: &mut MatchSet) {
        let w = Walker::new(self);
        let mut s = 0u32;
        for (i, &b) in buf.iter().enumerate() {
            let t = w.step(s, w.class[b as usize] as u32);
            s = t & !FLAG;
            if t & FLAG != 0 {
                for &e in w.outputs(s) {
                    let p = e & !FLAG;
                    if !set.contains(p) && (e & FLAG == 0 || w.verify(p, buf, i + 1)) {
                        set.insert(p);
                    }
                }
            }
        }
    }

    /// The set of patterns that occur in `buf`: the prefilter's answer.
    pub fn match_set(&self, buf: &[u8]) -> MatchSet {
        let mut set = MatchSet::new(self.n_patterns);
        self.match_set_into(buf, &mut set);
        set
    }

    /// Every occurrence, in end-offset order (at one end: the state's output order).
    pub fn find_all(&self, buf: &[u8], out: &mut Vec<Match>) {
        let w = Walker::new(self);
        let mut s = 0u32;
        for (i, &b) in buf.iter().enumerate() {
            let t = w.step(s, w.class[b as usize] as u32);
            s = t & !FLAG;
            if t & FLAG != 0 {
                for &e in w.outputs(s) {
                    let p = e & !FLAG;
                    if e & FLAG == 0 || w.verify(p, buf, i + 1) {
                        out.push(Match {
                            pattern: p,
                            end: i + 1,
                        });
                    }
                }
            }
        }
    }
}

/// The sections of a validated image as slices (bounds checked once, here).
struct Walker<'a> {
    class: &'a [u8; 256],
    dense: &'a [u32],
    shdr: &'a [u32],
    sparse: &'a [u32],
    oidx: &'a [u32],
    out: &'a [u32],
    pat: &'a [u32],
    bytes: &'a [u32],
    n_dense: u32,
    n_classes: u32,
}

impl<'a> Walker<'a> {
    fn new(img: &'a Image) -> Walker<'a> {
        let sec = |s: usize| &img.words[img.off[s]..img.off[s + 1]];
        Walker {
            class: &img.class,
            dense: sec(S_DENSE),
            shdr: sec(S_SHDR),
            sparse: sec(S_SPARSE),
            oidx: sec(S_OIDX),
            out: sec(S_OUT),
            pat: sec(S_PAT),
            bytes: sec(S_BYTES),
            n_dense: img.n_dense as u32,
            n_classes: img.n_classes as u32,
        }
    }

    /// The transition of state `s` on class `c` (flag | target). Terminates: every failure
    /// state is a lower index and every dense state has a full row.
    #[inline(always)]
    fn step(&self, mut s: u32, c: u32) -> u32 {
        loop {
            if s < self.n_dense {
                return self.dense[(s * self.n_classes + c) as usize];
            }
            let h = 3 * (s - self.n_dense) as usize;
            let (start, count) = (self.shdr[h + 1] as usize, self.shdr[h + 2] as usize);
            for &e in &self.sparse[start..start + count] {
                if e & 0xff == c {
                    return (e & FLAG) | ((e >> 8) & 0x7f_ffff);
                }
            }
            s = self.shdr[h];
        }
    }

    fn outputs(&self, s: u32) -> &'a [u32] {
        let (a, b) = (
            self.oidx[s as usize] as usize,
            self.oidx[s as usize + 1] as usize,
        );
        &self.out[a..b]
    }

    /// Whether pattern `p`'s original bytes end at `end` in `buf`.
    fn verify(&self, p: u32, buf: &[u8], end: usize) -> bool {
        let start = self.pat[2 * p as usize] as usize;
        let len = (self.pat[2 * p as usize + 1] & 0xffff) as usize;
        let Some(at) = end.checked_sub(len) else {
            return false;
        };
        (0..len).all(|k| {
            let o = start + k;
            (self.bytes[o / 4] >> (8 * (o % 4))) as u8 == buf[at + k]
        })
    }
}
