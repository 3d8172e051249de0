//! PatternSet -> Image: the Aho-Corasick trie over case-folded classes, failure links, states
//! renumbered breadth-first, full rows for the first states within a memory budget, sparse rows
//! beyond it (layout: `image.rs`).

use std::collections::{HashMap, VecDeque};

use super::image::{self, Image, FLAG, HDR_WORDS};
use super::{MatcherError, PatternSet, MAX_IMAGE_WORDS, MAX_STATES};

/// How to lay the automaton out.
#[derive(Clone, Copy, Debug)]
pub struct CompileOptions {
    /// Bytes of full transition rows at most (at least the root's row is full).
    pub dense_budget_bytes: usize,
}

impl Default for CompileOptions {
    fn default() -> Self {
        // The shallow states, where a walk spends most of its bytes, get full rows: 8 MiB is
        // ~9.5k of the ET Open fast-pattern set's 83k states at 220 classes, and keeps that
        // image within a GPU's L2. More is faster on the CPU (docs/inspect.md, the benchmark's
        // dense-budget group).
        CompileOptions {
            dense_budget_bytes: 8 << 20,
        }
    }
}

fn fold(b: u8) -> u8 {
    b.to_ascii_lowercase()
}

/// The trie in insertion numbering.
struct Trie {
    goto: HashMap<(u32, u32), u32>,
    children: Vec<Vec<(u32, u32)>>,
    own: Vec<Vec<u32>>,
}

impl Trie {
    fn build(set: &PatternSet, class: &[u32; 256]) -> Result<Trie, MatcherError> {
        let mut t = Trie {
            goto: HashMap::new(),
            children: vec![Vec::new()],
            own: vec![Vec::new()],
        };
        for (id, p) in set.patterns().iter().enumerate() {
            let mut s = 0u32;
            for &b in &p.bytes {
                let c = class[b as usize];
                s = match t.goto.get(&(s, c)) {
                    Some(&n) => n,
                    None => {
                        let n = t.children.len() as u32;
                        if n as usize >= MAX_STATES {
                            return Err(MatcherError::TooManyStates);
                        }
                        t.goto.insert((s, c), n);
                        t.children[s as usize].push((c, n));
                        t.children.push(Vec::new());
                        t.own.push(Vec::new());
                        n
                    }
                };
            }
            t.own[s as usize].push(id as u32);
        }
        Ok(t)
    }
}

/// Breadth-first order (old -> new index) and failure links (new numbering).
fn bfs(t: &Trie) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let n = t.children.len();
    let mut order = Vec::with_capacity(n);
    let mut fail_old = vec![0u32; n];
    let mut q = VecDeque::from([0u32]);
    while let Some(s) = q.pop_front() {
        order.push(s);
        let mut kids = t.children[s as usize].clone();
        kids.sort_unstable();
        for (c, k) in kids {
            fail_old[k as usize] = if s == 0 {
                0
            } else {
                let mut f = fail_old[s as usize];
                loop {
                    if let Some(&g) = t.goto.get(&(f, c)) {
                        break g;
                    }
                    if f == 0 {
                        break 0;
                    }
                    f = fail_old[f as usize];
                }
            };
            q.push_back(k);
        }
    }
    let mut new_of = vec![0u32; n];
    for (i, &s) in order.iter().enumerate() {
        new_of[s as usize] = i as u32;
    }
    let fail = order
        .iter()
        .map(|&s| new_of[fail_old[s as usize] as usize])
        .collect();
    (order, new_of, fail)
}

/// The class map: one class per folded byte some pattern has, in byte order; 0 for the rest.
fn classes(set: &PatternSet) -> ([u32; 256], usize) {
    let mut used = [false; 256];
    for p in set.patterns() {
        for &b in &p.bytes {
            used[fold(b) as usize] = true;
        }
    }
    let mut of_folded = [0u32; 256];
    let mut n = 1u32;
    for (b, u) in used.iter().enumerate() {
        if *u {
            of_folded[b] = n;
            n += 1;
        }
    }
    let mut class = [0u32; 256];
    for b in 0..256 {
        class[b] = of_folded[fold(b as u8) as usize];
    }
    (class, n as usize)
}

impl Image {
    /// Compiles `set` with the default layout.
    pub fn compile(set: &PatternSet) -> Result<Image, MatcherError> {
        Image::compile_with(set, &CompileOptions::default())
    }

    /// Compiles `set`; refuses sets over the state, pattern or image-size limits.
    pub fn compile_with(set: &PatternSet, opts: &CompileOptions) -> Result<Image, MatcherError> {
        let (class, n_classes) = classes(set);
        let trie = Trie::build(set, &class)?;
        let (order, new_of, fail) = bfs(&trie);
        let n_states = order.len();
        // Each state's outputs: its own patterns, then its failure state's (computed first).
        let mut out_len = vec![0u64; n_states];
        for s in 1..n_states {
            out_len[s] = trie.own[order[s] as usize].len() as u64 + out_len[fail[s] as usize];
        }
        let n_out: u64 = out_len.iter().sum();
        let n_dense = (opts.dense_budget_bytes / 4 / n_classes).clamp(1, n_states);
        let n_sparse = n_states - n_dense;
        let n_entries: u64 = order[n_dense..]
            .iter()
            .map(|&s| trie.children[s as usize].len() as u64)
            .sum();
        let n_bytes: u64 = set.patterns().iter().map(|p| p.bytes.len() as u64).sum();
        let total = HDR_WORDS as u64
            + 256
            + (n_dense * n_classes) as u64
            + 3 * n_sparse as u64
            + n_entries
            + n_states as u64
            + 1
            + n_out
            + 2 * set.len() as u64
            + n_bytes.div_ceil(4);
        if total > MAX_IMAGE_WORDS as u64 {
            return Err(MatcherError::ImageTooLarge { words: total });
        }
        let lay = Layout {
            set,
            trie: &trie,
            order: &order,
            new_of: &new_of,
            fail: &fail,
            n_dense,
        };
        let words = lay.emit(&class, n_classes, total as usize);
        Image::from_words(words)
    }
}

struct Layout<'a> {
    set: &'a PatternSet,
    trie: &'a Trie,
    order: &'a [u32],
    new_of: &'a [u32],
    fail: &'a [u32],
    n_dense: usize,
}

impl Layout<'_> {
    /// The outputs of every state (new numbering), each with its verify flag.
    fn outputs(&self) -> Vec<Vec<u32>> {
        let pats = self.set.patterns();
        let entry = |id: u32| {
            let p = &pats[id as usize];
            let verify = !p.nocase && p.bytes.iter().any(|b| b.is_ascii_alphabetic());
            id | if verify { FLAG } else { 0 }
        };
        let mut out: Vec<Vec<u32>> = vec![Vec::new(); self.order.len()];
        for s in 1..self.order.len() {
            let mut v: Vec<u32> = self.trie.own[self.order[s] as usize]
                .iter()
                .map(|&id| entry(id))
                .collect();
            v.extend_from_slice(&out[self.fail[s] as usize]);
            out[s] = v;
        }
        out
    }

    fn emit(&self, class: &[u32; 256], n_classes: usize, total: usize) -> Vec<u32> {
        let n_states = self.order.len();
        let outs = self.outputs();
        let flagged = |t: u32| t | if outs[t as usize].is_empty() { 0 } else { FLAG };
        let mut w = vec![0u32; HDR_WORDS];
        w.reserve(total);
        w[image::H_MAGIC] = image::MAGIC;
        w[image::H_VERSION] = image::VERSION;
        w[image::H_N_STATES] = n_states as u32;
        w[image::H_N_CLASSES] = n_classes as u32;
        w[image::H_N_DENSE] = self.n_dense as u32;
        w[image::H_N_PATTERNS] = self.set.len() as u32;
        w[image::H_MAX_LEN] = self.set.max_len() as u32;
        w[image::H_OFF_CLASS] = w.len() as u32;
        w.extend_from_slice(class);
        w[image::H_OFF_DENSE] = w.len() as u32;
        let base = w.len();
        for s in 0..self.n_dense {
            let old = self.order[s];
            for c in 0..n_classes as u32 {
                let t = match self.trie.goto.get(&(old, c)) {
                    Some(&k) => flagged(self.new_of[k as usize]),
                    None if s == 0 => flagged(0),
                    // The failure state is a lower index, so its row is already written.
                    None => w[base + self.fail[s] as usize * n_classes + c as usize],
                };
                w.push(t);
            }
        }
        w[image::H_OFF_SPARSE_HDR] = w.len() as u32;
        let mut entries = Vec::new();
        for s in self.n_dense..n_states {
            let mut kids = self.trie.children[self.order[s] as usize].clone();
            kids.sort_unstable();
            w.extend_from_slice(&[self.fail[s], entries.len() as u32, kids.len() as u32]);
            for (c, k) in kids {
                let t = flagged(self.new_of[k as usize]);
                entries.push((t & FLAG) | ((t & !FLAG) << 8) | c);
            }
        }
        w[image::H_OFF_SPARSE] = w.len() as u32;
        w.extend_from_slice(&entries);
        w[image::H_OFF_OUT_IDX] = w.len() as u32;
        let mut at = 0u32;
        for o in &outs {
            w.push(at);
            at += o.len() as u32;
        }
        w.push(at);
        w[image::H_OFF_OUT] = w.len() as u32;
        for o in &outs {
            w.extend_from_slice(o);
        }
        w[image::H_OFF_PAT] = w.len() as u32;
        let mut bytes = Vec::new();
        for p in self.set.patterns() {
            w.push(bytes.len() as u32);
            w.push(p.bytes.len() as u32 | (p.nocase as u32) << 16);
            bytes.extend_from_slice(&p.bytes);
        }
        w[image::H_OFF_BYTES] = w.len() as u32;
        for ch in bytes.chunks(4) {
            let mut q = [0u8; 4];
            q[..ch.len()].copy_from_slice(ch);
            w.push(u32::from_le_bytes(q));
        }
        w[image::H_TOTAL] = w.len() as u32;
        w
    }
}
