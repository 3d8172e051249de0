//! The classifier compiler: rules -> one flat `u32` image (layout in the ACL section of
//! `gpu-kernels/pktwarp_abi.h`, mirrored in [`crate::abi`]), and the CPU matcher that walks it.
//!
//! # Algorithm: a forest of bit-cut decision trees, no rule replication (ByteCuts-style)
//!
//! Each internal node cuts `nbits` (1..=12) consecutive bits of one key field (source/destination
//! address word, source/destination port, protocol), so a child is
//! `(key_word >> shift) & (2^nbits - 1)`: one load, one shift, one mask, no comparisons and no
//! branches that depend on rule data. The window starts either just below the bits already cut on
//! that path or, skipping bits on which all the node's rules agree, at the first bit where they
//! differ (ClassBench prefixes share long runs of leading bits; cutting those separates nothing). A rule goes down a cut only when the
//! cut bits are fixed for every value it matches (its prefix / range / mask covers them). Rules
//! that would straddle the chosen cut are *not* replicated into several children (the source of
//! HiCuts/HyperCuts memory blow-up); they are removed from this tree and spilled to the next tree
//! of the forest, built the same way over the spilled rules only. Every rule is stored exactly
//! once, so memory is O(rules + nodes) and build time O(rules x depth x candidate cuts), which
//! bounds both at 100K rules. Leaves hold up to `BINTH` rules (more only when nothing can split
//! them), sorted by priority, scanned linearly: on a CPU core a node visit (a dependent load,
//! often an L2 miss) costs several record checks (sequential, prefetched), so leaves are kept
//! fairly large and trees shallow; the cut choice minimises the expected leaf size
//! (sum of squared child sizes / rules) plus a charge per spilled rule.
//!
//! Lookup walks every tree in order of the best (lowest) rule index it holds, stopping as soon
//! as that index cannot beat the match found so far, and stops each leaf scan at the first match
//! or at the first rule that cannot beat it. On ClassBench sets the first tree holds most rules
//! and almost all winning matches, so most packets do one short walk (2-5 nodes) and a scan of a
//! few 32-byte records.
//!
//! Why this over the alternatives: a CPU core and a GPU warp both want few dependent memory
//! reads and little data-dependent control flow. Bit cuts give the tree walk a fixed shape (the
//! same code for every node), leaves are contiguous records (one or two cache lines / coalescable
//! sectors), and the tables are a few hundred KB at 10K rules, which stays in L2 on both. RFC and
//! bit-vector schemes need many table reads per packet and memory that grows badly with rules;
//! tuple-space search needs a hash probe per tuple (tens of tuples on ClassBench) and handles port
//! ranges poorly; rte_acl's multibit trie is fast but its build and memory grow steeply with
//! wildcard-heavy rule sets.
//!
//! On the CPU, `classify_batch` walks a copy of the trees (every path padded to its tree's depth)
//! and scans leaves of more than two records as blocks of 8, one AVX2 compare per field, with
//! port / protocol filters on large leaves (`super::lanes`); the image is not changed by that.
//!
//! Address families: one forest per family (IPv4 records use one address word, IPv6 four), plus a
//! third table for keys that are neither (only L2-only rules live there; see `acl` module docs).

use super::lanes::FamilyLanes;
use super::{AclRule, Family};
use crate::abi::*;
use std::time::{Duration, Instant};

/// Leaf size below which a node is not cut further.
const BINTH: usize = 32;
/// Most bits one node cuts (4096 children; a node never has more than 4x its rules).
const MAX_BITS: u32 = 12;
/// Depth bound on a path (each node cuts at least one bit; fields are 8..128 bits).
const MAX_DEPTH: usize = 32;
/// Trees per family; the last one takes every remaining rule (no spilling).
const MAX_TREES: usize = 12;
/// A cut may spill at most this fraction of a node's rules to the next tree.
const MAX_SPILL_FRAC: f64 = 0.5;
/// Cost charged per spilled rule (in units of records scanned).
const SPILL_COST: f64 = 2.0;
/// A node is cut only when the best cut's cost is below this fraction of its rule count.
const MIN_GAIN: f64 = 0.9;
/// A node of more rules than this that no cut helps under the costs above (rules wildcard in
/// both addresses that a port or protocol cut would mostly spill: generated IPv6 fw-like sets
/// left a leaf of 2494 records) is cut with spilling charged `BIG_SPILL_COST` and allowed up to
/// `BIG_SPILL_FRAC`: the spilled rules are sorted into the next tree, a walk there costs far
/// less than scanning them all here. No ClassBench 1K-100K set has such a node (their largest
/// leaves are 31-68 records), so their tables are unchanged by it.
const BIG_LEAF: usize = 8 * BINTH;
const BIG_SPILL_COST: f64 = 0.25;
const BIG_SPILL_FRAC: f64 = 0.9;

/// Build figures.
#[derive(Clone, Debug, Default)]
pub struct BuildStats {
    pub rules: usize,
    pub build_time: Duration,
    /// Bytes of the flat image (everything the GPU matcher reads).
    pub image_bytes: usize,
    /// Bytes of the CPU batch walk's copy of the leaf records ([`super::lanes`]).
    pub cpu_lanes_bytes: usize,
    /// Per family (IPv4, IPv6, L2): trees, nodes, records, largest leaf, deepest path.
    pub trees: [usize; 3],
    pub nodes: [usize; 3],
    pub records: [usize; 3],
    pub max_leaf: [usize; 3],
    pub max_depth: [usize; 3],
}

impl std::fmt::Display for BuildStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rules, built in {:.3} s, tables {} bytes ({:.1} KiB; CPU leaf blocks {:.1} KiB)",
            self.rules,
            self.build_time.as_secs_f64(),
            self.image_bytes,
            self.image_bytes as f64 / 1024.0,
            self.cpu_lanes_bytes as f64 / 1024.0
        )?;
        for (i, name) in ["ipv4", "ipv6", "l2"].iter().enumerate() {
            if self.records[i] > 0 {
                write!(
                    f,
                    "; {name}: {} trees, {} nodes, {} records, max leaf {}, max depth {}",
                    self.trees[i],
                    self.nodes[i],
                    self.records[i],
                    self.max_leaf[i],
                    self.max_depth[i]
                )?;
            }
        }
        Ok(())
    }
}

/// One cuttable dimension: bits `[base, base + width)` of key word `kw`.
#[derive(Clone, Copy)]
struct Dim {
    kw: u32,
    base: u32,
    width: u32,
}

const MAX_DIMS: usize = 11;

fn dims(addr_words: usize) -> Vec<Dim> {
    let mut v = Vec::new();
    for w in 0..addr_words as u32 {
        v.push(Dim {
            kw: w,
            base: 0,
            width: 32,
        });
        v.push(Dim {
            kw: 4 + w,
            base: 0,
            width: 32,
        });
    }
    v.push(Dim {
        kw: 8,
        base: 0,
        width: 16,
    });
    v.push(Dim {
        kw: 8,
        base: 16,
        width: 16,
    });
    v.push(Dim {
        kw: 9,
        base: 0,
        width: 8,
    });
    v
}

/// A rule as the builder sees it: per dimension, the smallest matching value and how many top
/// bits are fixed for every matching value.
struct BRule {
    idx: u32,
    lo: [u32; MAX_DIMS],
    fixed: [u8; MAX_DIMS],
}

/// The top `len` bits of a `width`-bit value set.
fn prefix_mask(len: u8, width: u32) -> u32 {
    let len = u32::from(len).min(width);
    if len == 0 {
        0
    } else {
        (u32::MAX << (32 - len)) >> (32 - width)
    }
}

fn leading_ones(mask: u32, width: u32) -> u8 {
    let m = mask << (32 - width);
    (m.leading_ones().min(width)) as u8
}

fn common_prefix(lo: u32, hi: u32, width: u32) -> u8 {
    let x = (lo ^ hi) << (32 - width);
    (x.leading_zeros().min(width)) as u8
}

impl BRule {
    fn new(idx: u32, r: &AclRule, fam_idx: usize, dims: &[Dim]) -> BRule {
        let mut lo = [0u32; MAX_DIMS];
        let mut fixed = [0u8; MAX_DIMS];
        let (sm, dm) = if r.family == Family::Any || fam_idx == ACL_FAM_L2 {
            ([0u32; 4], [0u32; 4])
        } else {
            (r.src.mask(r.family), r.dst.mask(r.family))
        };
        for (d, dim) in dims.iter().enumerate() {
            let (l, f) = match (dim.kw, dim.base) {
                (w @ 0..=3, _) => (
                    r.src.addr[w as usize] & sm[w as usize],
                    leading_ones(sm[w as usize], 32),
                ),
                (w @ 4..=7, _) => {
                    let w = (w - 4) as usize;
                    (r.dst.addr[w] & dm[w], leading_ones(dm[w], 32))
                }
                (8, 0) => (
                    u32::from(r.src_port.lo),
                    common_prefix(r.src_port.lo.into(), r.src_port.hi.into(), 16),
                ),
                (8, _) => (
                    u32::from(r.dst_port.lo),
                    common_prefix(r.dst_port.lo.into(), r.dst_port.hi.into(), 16),
                ),
                _ => (
                    u32::from(r.proto.value),
                    leading_ones(r.proto.mask.into(), 8),
                ),
            };
            lo[d] = l;
            fixed[d] = f;
        }
        BRule { idx, lo, fixed }
    }
}

/// Builds one family's forest into relative node words and leaf record lists.
struct FamilyBuilder<'a> {
    dims: Vec<Dim>,
    brules: Vec<BRule>,
    rules: &'a [AclRule],
    addr_words: usize,
    /// Node words; node refs are offsets in here until relocated.
    nodes: Vec<u32>,
    num_nodes: usize,
    /// Record words.
    records: Vec<u32>,
    max_leaf: usize,
    max_depth: usize,
    hist: Vec<u32>,
}

struct Cut {
    d: usize,
    /// First cut bit, counted from the top of the dimension.
    pos: u8,
    nb: u32,
    cost: f64,
}

impl<'a> FamilyBuilder<'a> {
    fn rec_words(&self) -> usize {
        4 * self.addr_words + 4
    }

    fn leaf(&mut self, set: &[u32], depth: usize) -> u32 {
        if set.is_empty() {
            return ACL_REF_EMPTY;
        }
        self.max_leaf = self.max_leaf.max(set.len());
        self.max_depth = self.max_depth.max(depth);
        let first = (self.records.len() / self.rec_words()) as u32;
        for (k, &b) in set.iter().enumerate() {
            let idx = self.brules[b as usize].idx;
            let r = &self.rules[idx as usize];
            let aw = self.addr_words;
            let (sm, dm) = if r.family == Family::Any {
                ([0u32; 4], [0u32; 4])
            } else {
                (r.src.mask(r.family), r.dst.mask(r.family))
            };
            for (a, m) in r.src.addr.iter().zip(sm).take(aw) {
                self.records.push(a & m);
            }
            for m in sm.iter().take(aw) {
                self.records.push(*m);
            }
            for (a, m) in r.dst.addr.iter().zip(dm).take(aw) {
                self.records.push(a & m);
            }
            for m in dm.iter().take(aw) {
                self.records.push(*m);
            }
            self.records
                .push(u32::from(r.src_port.lo) | u32::from(r.src_port.hi) << 16);
            self.records
                .push(u32::from(r.dst_port.lo) | u32::from(r.dst_port.hi) << 16);
            let mut ctl = u32::from(r.proto.value) | u32::from(r.proto.mask) << 8;
            if k + 1 == set.len() {
                ctl |= ACL_REC_LAST;
            }
            if r.has_extras() {
                ctl |= ACL_REC_EXTRA;
            }
            self.records.push(ctl);
            self.records.push(idx);
        }
        ACL_REF_LEAF | first
    }

    /// First bit position (from the top of dimension `d`, at or below `from`) where two rules of
    /// `set` that fix that bit disagree. Bits above it are the same for every rule that fixes them,
    /// so cutting them separates nothing: the cut window skips straight to it.
    fn first_split_bit(&self, set: &[u32], d: usize, from: u8, width: u32) -> u8 {
        // Against the rule fixing the most bits: two rules that both fix bit q and disagree
        // there cannot both agree with it at q, and every bit one of them fixes it fixes too.
        let Some(rv) = set
            .iter()
            .map(|&b| &self.brules[b as usize])
            .max_by_key(|br| br.fixed[d])
            .map(|br| br.lo[d])
        else {
            return from;
        };
        let mut diff = 0u32;
        for &b in set {
            let br = &self.brules[b as usize];
            if br.fixed[d] > from {
                diff |= (br.lo[d] ^ rv) & prefix_mask(br.fixed[d], width);
            }
        }
        let top = diff << (32 - width);
        (top.leading_zeros().min(width) as u8).max(from)
    }

    fn best_cut(
        &mut self,
        set: &[u32],
        consumed: &[u8; MAX_DIMS],
        allow_spill: bool,
        (spill_cost, max_spill_frac): (f64, f64),
    ) -> Option<Cut> {
        let n = set.len();
        let mut best: Option<Cut> = None;
        for (d, &from) in consumed.iter().enumerate().take(self.dims.len()) {
            let dim = self.dims[d];
            let skip = self.first_split_bit(set, d, from, dim.width);
            let starts = [from, skip];
            let nstarts = if skip > from { 2 } else { 1 };
            for &pos in &starts[..nstarts] {
                let avail = dim.width - u32::from(pos);
                for nb in 1..=avail.min(MAX_BITS) {
                    let fanout = 1usize << nb;
                    if fanout > 4 * n {
                        break;
                    }
                    let shift = avail - nb;
                    let need = u32::from(pos) + nb;
                    let mask = (fanout - 1) as u32;
                    self.hist[..fanout].iter_mut().for_each(|h| *h = 0);
                    let mut fit = 0usize;
                    for &b in set {
                        let br = &self.brules[b as usize];
                        if u32::from(br.fixed[d]) >= need {
                            self.hist[((br.lo[d] >> shift) & mask) as usize] += 1;
                            fit += 1;
                        }
                    }
                    let spill = n - fit;
                    if spill > 0 && (!allow_spill || spill as f64 > n as f64 * max_spill_frac) {
                        continue;
                    }
                    let sumsq: f64 = self.hist[..fanout]
                        .iter()
                        .map(|&c| f64::from(c) * f64::from(c))
                        .sum();
                    // Expected leaf-side work for a rule-weighted lookup, plus a charge for each
                    // spilled rule (it costs a walk of another tree) and for node memory.
                    let cost = sumsq / n as f64
                        + spill_cost * spill as f64
                        + fanout as f64 / (8.0 * n as f64);
                    if best.as_ref().is_none_or(|b| cost < b.cost) {
                        best = Some(Cut { d, pos, nb, cost });
                    }
                }
            }
        }
        best
    }

    fn build(
        &mut self,
        set: Vec<u32>,
        consumed: [u8; MAX_DIMS],
        depth: usize,
        allow_spill: bool,
        spill: &mut Vec<u32>,
    ) -> u32 {
        if set.len() <= BINTH || depth >= MAX_DEPTH {
            return self.leaf(&set, depth);
        }
        let gain = MIN_GAIN * set.len() as f64;
        let cut = match self.best_cut(&set, &consumed, allow_spill, (SPILL_COST, MAX_SPILL_FRAC)) {
            Some(c) if c.cost < gain => c,
            _ if allow_spill && set.len() > BIG_LEAF => {
                match self.best_cut(&set, &consumed, true, (BIG_SPILL_COST, BIG_SPILL_FRAC)) {
                    Some(c) if c.cost < gain => c,
                    _ => return self.leaf(&set, depth),
                }
            }
            _ => return self.leaf(&set, depth),
        };
        let dim = self.dims[cut.d];
        let avail = dim.width - u32::from(cut.pos);
        let shift = avail - cut.nb;
        let need = u32::from(cut.pos) + cut.nb;
        let fanout = 1usize << cut.nb;
        let mut children: Vec<Vec<u32>> = vec![Vec::new(); fanout];
        for &b in &set {
            let br = &self.brules[b as usize];
            if u32::from(br.fixed[cut.d]) >= need {
                children[((br.lo[cut.d] >> shift) & (fanout as u32 - 1)) as usize].push(b);
            } else {
                spill.push(b);
            }
        }
        drop(set);
        let at = self.nodes.len();
        self.num_nodes += 1;
        self.nodes
            .push(dim.kw | (dim.base + shift) << 8 | cut.nb << 16);
        self.nodes.resize(at + 1 + fanout, ACL_REF_EMPTY);
        let mut consumed2 = consumed;
        consumed2[cut.d] = cut.pos + cut.nb as u8;
        for (i, c) in children.into_iter().enumerate() {
            let r = self.build(c, consumed2, depth + 1, allow_spill, spill);
            self.nodes[at + 1 + i] = r;
        }
        at as u32
    }
}

/// A compiled classifier: the flat image plus the rules' actions.
#[derive(Clone, Debug)]
pub struct AclClassifier {
    pub(super) image: Vec<u32>,
    pub(super) hdr: AclTablesHeader,
    stats: BuildStats,
    /// The CPU batch walk's copy of the IPv4 and IPv6 leaf records (not part of the image).
    pub(super) lanes: [FamilyLanes; 2],
    /// A rule's `set:` changes frame bytes (`dscp`, `dst_mac`), not only the output port.
    writes_frames: bool,
}

impl AclClassifier {
    /// Compiles `rules` (priority = position).
    pub fn build(rules: &[AclRule]) -> AclClassifier {
        let t0 = Instant::now();
        let mut stats = BuildStats {
            rules: rules.len(),
            ..BuildStats::default()
        };
        let any_extras = rules.iter().any(AclRule::has_extras);
        let mut hdr = AclTablesHeader {
            magic: ACL_MAGIC,
            version: ACL_VERSION,
            num_rules: rules.len() as u32,
            ..Default::default()
        };
        let mut image: Vec<u32> = vec![0; ACL_HEADER_WORDS];
        for fam_idx in [ACL_FAM_V4, ACL_FAM_V6, ACL_FAM_L2] {
            let addr_words = if fam_idx == ACL_FAM_V6 { 4 } else { 1 };
            let dims = if fam_idx == ACL_FAM_L2 {
                Vec::new()
            } else {
                dims(addr_words)
            };
            let brules: Vec<BRule> = rules
                .iter()
                .enumerate()
                .filter(|(_, r)| match fam_idx {
                    ACL_FAM_V4 => matches!(r.family, Family::V4 | Family::Any),
                    ACL_FAM_V6 => matches!(r.family, Family::V6 | Family::Any),
                    _ => r.is_l2_only(),
                })
                .map(|(i, r)| BRule::new(i as u32, r, fam_idx, &dims))
                .collect();
            let mut fb = FamilyBuilder {
                dims,
                rules,
                addr_words,
                nodes: Vec::new(),
                num_nodes: 0,
                records: Vec::new(),
                max_leaf: 0,
                max_depth: 0,
                hist: vec![0; 1 << MAX_BITS],
                brules,
            };
            let mut trees: Vec<(u32, u32)> = Vec::new();
            let mut remaining: Vec<u32> = (0..fb.brules.len() as u32).collect();
            while !remaining.is_empty() {
                let last = trees.len() + 1 >= MAX_TREES;
                let min_rule = fb.brules[remaining[0] as usize].idx;
                let mut spill = Vec::new();
                let root = fb.build(remaining, [0; MAX_DIMS], 0, !last, &mut spill);
                trees.push((root, min_rule));
                // Spilled rules come back in tree order; priority order keeps leaves sorted.
                spill.sort_unstable();
                remaining = spill;
            }
            trees.sort_by_key(|t| t.1);
            let fh = &mut hdr.fam[fam_idx];
            fh.addr_words = addr_words as u32;
            fh.rec_words = fb.rec_words() as u32;
            fh.num_trees = trees.len() as u32;
            // Trees are [root, min] pairs read as one 8-byte load on the GPU: even word offset.
            if image.len() % 2 != 0 {
                image.push(0);
            }
            fh.trees_off = image.len() as u32;
            let nodes_off = (image.len() + 2 * trees.len()) as u32;
            let reloc = |r: u32| {
                if r == ACL_REF_EMPTY || r & ACL_REF_LEAF != 0 {
                    r
                } else {
                    r + nodes_off
                }
            };
            for &(root, min) in &trees {
                image.push(reloc(root));
                image.push(min);
            }
            // Node words: relocate child refs (the word after each node header up to its fanout).
            let mut i = 0;
            while i < fb.nodes.len() {
                let h = fb.nodes[i];
                let fanout = 1usize << ((h >> 16) & 0xF);
                image.push(h);
                for j in 0..fanout {
                    image.push(reloc(fb.nodes[i + 1 + j]));
                }
                i += 1 + fanout;
            }
            // Records start on a 16-byte boundary: the GPU reads an IPv4 record (8 words) as
            // two 16-byte loads. The padding words are never referenced.
            while image.len() % 4 != 0 {
                image.push(0);
            }
            fh.records_off = image.len() as u32;
            fh.num_records = (fb.records.len() / fb.rec_words()) as u32;
            fh.num_nodes = fb.num_nodes as u32;
            image.extend_from_slice(&fb.records);
            stats.trees[fam_idx] = trees.len();
            stats.nodes[fam_idx] = fb.num_nodes;
            stats.records[fam_idx] = fh.num_records as usize;
            stats.max_leaf[fam_idx] = fb.max_leaf;
            stats.max_depth[fam_idx] = fb.max_depth;
        }
        if any_extras {
            hdr.extras_off = image.len() as u32;
            for r in rules {
                image.push(
                    u32::from(r.dscp.value)
                        | u32::from(r.dscp.mask) << 8
                        | u32::from(r.tcp_flags.value) << 16
                        | u32::from(r.tcp_flags.mask) << 24,
                );
                image.push(u32::from(r.vlan.value) | u32::from(r.vlan.mask) << 16);
                image.push(u32::from(r.port_id.value) | u32::from(r.port_id.mask) << 16);
            }
        }
        hdr.actions_off = image.len() as u32;
        for r in rules {
            image.push(r.action.verdict as u32 | u32::from(r.action.mark.is_some()) << 8);
            image.push(r.action.mark.unwrap_or(0));
        }
        // Only a rule set with rewrites has the array: the image of one without is unchanged.
        if rules.iter().any(|r| r.set.is_some()) {
            hdr.rewrites_off = image.len() as u32;
            for r in rules {
                let rec = r.set.as_ref().map(super::AclRewrite::record);
                image.extend_from_slice(&rec.unwrap_or_default().encode());
            }
        }
        hdr.total_words = image.len() as u32;
        write_header(&mut image, &hdr);
        stats.image_bytes = image.len() * 4;
        let lanes = [ACL_FAM_V4, ACL_FAM_V6].map(|f| FamilyLanes::build(&image, &hdr.fam[f]));
        stats.cpu_lanes_bytes = lanes.iter().map(FamilyLanes::bytes).sum();
        stats.build_time = t0.elapsed();
        let writes_frames = rules
            .iter()
            .filter_map(|r| r.set.as_ref())
            .any(|w| w.dscp.is_some() || w.dst_mac.is_some());
        AclClassifier {
            image,
            hdr,
            stats,
            lanes,
            writes_frames,
        }
    }

    pub fn stats(&self) -> &BuildStats {
        &self.stats
    }

    pub fn header(&self) -> &AclTablesHeader {
        &self.hdr
    }

    /// The whole table as one contiguous `u32` image (header first): copy it to device memory
    /// as-is and pass its address as `const pw_acl_tables *`.
    pub fn image(&self) -> &[u32] {
        &self.image
    }

    /// The image as little-endian bytes.
    pub fn image_bytes(&self) -> Vec<u8> {
        self.image.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// The action of rule `idx` as stored in the image.
    pub fn action(&self, idx: u32) -> super::AclAction {
        let o = self.hdr.actions_off as usize + ACL_ACTION_WORDS * idx as usize;
        match self.image.get(o..o + 2) {
            Some(&[a, m]) => super::AclAction {
                verdict: super::Verdict::from_code(a & 0xFF),
                mark: (a >> 8 & 1 == 1).then_some(m),
            },
            _ => super::AclAction::default(),
        }
    }

    /// Whether the image has a rewrite array (a rule with `set:`).
    pub fn has_rewrites(&self) -> bool {
        self.hdr.rewrites_off != 0
    }

    /// Whether a rule's `set:` changes the frame's bytes (`dscp`, `dst_mac`); a rule set whose
    /// `set:` names only `port` routes frames without writing them.
    pub fn writes_frames(&self) -> bool {
        self.writes_frames
    }

    /// The rewrite of rule `idx` as stored in the image; `None` when it rewrites nothing.
    #[inline]
    pub fn rewrite(&self, idx: u32) -> Option<super::RewriteRecord> {
        if self.hdr.rewrites_off == 0 {
            return None;
        }
        let o = self.hdr.rewrites_off as usize + super::rewrite::ACL_REWRITE_WORDS * idx as usize;
        super::RewriteRecord::decode(self.image.get(o..)?)
    }

    /// Index of the first rule matching `key`, or [`ACL_NO_MATCH`].
    #[inline]
    pub fn classify(&self, key: &AclKey) -> u32 {
        let kw = key_words(key);
        match key.ip_version {
            4 => self.walk::<1>(ACL_FAM_V4, &kw),
            6 => self.walk::<4>(ACL_FAM_V6, &kw),
            _ => self.walk::<1>(ACL_FAM_L2, &kw),
        }
    }

    #[inline(always)]
    fn walk<const AW: usize>(&self, fam: usize, kw: &[u32; 11]) -> u32 {
        let img = &self.image[..];
        let fh = &self.hdr.fam[fam];
        let rec_words = 4 * AW + 4;
        let recs = &img[fh.records_off as usize..];
        let mut best = ACL_NO_MATCH;
        let trees = &img[fh.trees_off as usize..fh.trees_off as usize + 2 * fh.num_trees as usize];
        for t in trees.chunks_exact(2) {
            if t[1] >= best {
                break;
            }
            let mut r = t[0];
            while r & ACL_REF_LEAF == 0 {
                let h = img[r as usize];
                let child = (kw[(h & 0xF) as usize] >> ((h >> 8) & 0x1F))
                    & ((1u32 << ((h >> 16) & 0xF)) - 1);
                r = img[r as usize + 1 + child as usize];
            }
            if r == ACL_REF_EMPTY {
                continue;
            }
            let o = (r & !ACL_REF_LEAF) as usize * rec_words;
            for rec in recs[o..].chunks_exact(rec_words) {
                let idx = rec[4 * AW + 3];
                if idx >= best {
                    break;
                }
                let ctl = rec[4 * AW + 2];
                if self.rec_matches::<AW>(rec, kw, ctl, idx) {
                    best = idx;
                    break;
                }
                if ctl & ACL_REC_LAST != 0 {
                    break;
                }
            }
        }
        best
    }

    #[inline(always)]
    pub(super) fn rec_matches<const AW: usize>(
        &self,
        rec: &[u32],
        kw: &[u32; 11],
        ctl: u32,
        idx: u32,
    ) -> bool {
        for i in 0..AW {
            if kw[i] & rec[AW + i] != rec[i] || kw[4 + i] & rec[3 * AW + i] != rec[2 * AW + i] {
                return false;
            }
        }
        let sp = kw[8] & 0xFFFF;
        let dp = kw[8] >> 16;
        let s = rec[4 * AW];
        let d = rec[4 * AW + 1];
        if sp < (s & 0xFFFF) || sp > (s >> 16) || dp < (d & 0xFFFF) || dp > (d >> 16) {
            return false;
        }
        if (kw[9] & (ctl >> 8) & 0xFF) != (ctl & 0xFF) {
            return false;
        }
        ctl & ACL_REC_EXTRA == 0 || self.extras_match(kw, idx)
    }

    pub(super) fn extras_match(&self, kw: &[u32; 11], idx: u32) -> bool {
        let o = self.hdr.extras_off as usize + ACL_EXTRA_WORDS * idx as usize;
        let e = &self.image[o..o + ACL_EXTRA_WORDS];
        let dscp = (kw[9] >> 16) & 0xFF;
        let flags = kw[9] >> 24;
        let vlan = kw[10] & 0xFFFF;
        let port = kw[10] >> 16;
        dscp & ((e[0] >> 8) & 0xFF) == e[0] & 0xFF
            && flags & (e[0] >> 24) == (e[0] >> 16) & 0xFF
            && vlan & (e[1] >> 16) == e[1] & 0xFFFF
            && port & (e[2] >> 16) == e[2] & 0xFFFF
    }
}

/// The key as the 11 words the tree nodes index (`pw_acl_key` read as words on a little-endian
/// machine; built field by field so it is the same on any host).
#[inline(always)]
pub fn key_words(k: &AclKey) -> [u32; 11] {
    [
        k.src_ip[0],
        k.src_ip[1],
        k.src_ip[2],
        k.src_ip[3],
        k.dst_ip[0],
        k.dst_ip[1],
        k.dst_ip[2],
        k.dst_ip[3],
        u32::from(k.src_port) | u32::from(k.dst_port) << 16,
        u32::from(k.proto)
            | u32::from(k.ip_version) << 8
            | u32::from(k.dscp) << 16
            | u32::from(k.tcp_flags) << 24,
        u32::from(k.vlan_id) | u32::from(k.port_id) << 16,
    ]
}

fn write_header(image: &mut [u32], h: &AclTablesHeader) {
    let mut w = vec![
        h.magic,
        h.version,
        h.num_rules,
        h.total_words,
        h.extras_off,
        h.actions_off,
        h.rewrites_off,
        0,
    ];
    for f in &h.fam {
        w.extend_from_slice(&[
            f.addr_words,
            f.rec_words,
            f.num_trees,
            f.trees_off,
            f.records_off,
            f.num_records,
            f.num_nodes,
            0,
        ]);
    }
    image[..ACL_HEADER_WORDS].copy_from_slice(&w);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rule set without rewrites compiles to the image it always had (no rewrite array,
    /// `rewrites_off` 0); with rewrites, the same trees, records and actions, the array after
    /// them, and each rule's record readable back.
    #[test]
    fn rewrites_append_an_array_and_change_nothing_else() {
        use crate::acl::{AclRewrite, RewriteRecord};
        let text = "rules:\n  - { proto: tcp, dst_port: 80, action: pass }\n  - { src: 10.0.0.0/8, action: mirror }\n  - { proto: udp, action: drop }\n";
        let plain = crate::acl::yaml::parse(std::path::Path::new("r.yaml"), text).unwrap();
        let a = AclClassifier::build(&plain);
        assert_eq!(a.header().rewrites_off, 0);
        assert!(!a.has_rewrites() && a.rewrite(0).is_none());
        let mut rw = plain.clone();
        rw[1].set = Some(AclRewrite {
            dscp: Some(10),
            dst_mac: Some([2, 0, 0, 0, 0, 9]),
            port: Some(("x".into(), Default::default())),
            out_port: Some(2),
        });
        let b = AclClassifier::build(&rw);
        assert!(b.has_rewrites());
        let (ia, ib) = (a.image(), b.image());
        assert_eq!(b.header().rewrites_off as usize, ia.len());
        assert_eq!(
            ib.len(),
            ia.len() + 3 * crate::acl::rewrite::ACL_REWRITE_WORDS
        );
        // Header words other than total_words (3) and rewrites_off (6), and the whole body.
        for (i, (x, y)) in ia.iter().zip(ib).enumerate() {
            if i != 3 && i != 6 {
                assert_eq!(x, y, "word {i}");
            }
        }
        assert_eq!(b.rewrite(0), None);
        assert_eq!(
            b.rewrite(1),
            Some(RewriteRecord {
                dscp: Some(10),
                dst_mac: Some([2, 0, 0, 0, 0, 9]),
                out_port: Some(2)
            })
        );
        assert_eq!(b.rewrite(2), None);
        assert_eq!(b.rewrite(99), None);
    }
}
