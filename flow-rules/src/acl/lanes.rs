//! The CPU matcher's copy of the leaf records, eight records to a block, field-major within the
//! block (`[[u32; 8]; rec_words]`): one leaf scan tests eight records with a few vector compares
//! and one branch, where the record-by-record scan of the image takes a data-dependent branch per
//! field (about five mispredicts a lookup on acl1_10K). Built from the image after compiling; the
//! image itself (what the GPU matcher reads) is unchanged. Each leaf starts a new block; lanes
//! past a leaf's end are padding that matches nothing (source port range empty, index
//! `ACL_NO_MATCH`).
//!
//! The scalar walk of the image ([`super::AclClassifier::classify`]) stays the reference: the
//! batch walk that uses these blocks is tested equal to it.

use super::compile::{key_words, AclClassifier};
use crate::abi::*;

/// Records per block.
pub const LANES: usize = 8;

/// Leaves of more records than this are scanned in blocks; smaller ones record by record from
/// the image (one cache line, where a block spans `rec_words / 2` lines; fw1_10K has thousands
/// of one- and two-record leaves). At 2 rather than 8, acl1_10K's rate per CPU-second was
/// 36.7 against 26.7-29.3 Mpps, ipc1_10K's and fw1_10K's unchanged (AVX2).
pub const BLOCK_LEAF: usize = 2;
/// Leaf reference bit in the CPU copy of the trees: the low 30 bits are a block index (else a
/// record index of the image).
pub const REF_BLOCKS: u32 = 0x4000_0000;
/// With `REF_BLOCKS`: the low 29 bits are the first of the leaf's filtered segments.
pub const REF_FILTERED: u32 = 0x2000_0000;
/// Leaves of more blocks than this get port and protocol filters ([`Segment`]).
pub const FILTER_BLOCKS: usize = 4;
/// Blocks a segment's filter covers (bits of a `u64`).
const SEG_BLOCKS: usize = 64;

/// Up to 64 blocks of a large leaf with, per source-port high byte, destination-port high byte
/// and protocol value, the blocks holding a rule that may match such a key (bit `b` = block
/// `b0 + b`): a key scans only the blocks its three words all name, in order. Firewall-like
/// sets put hundreds of rules wildcard in both addresses in one leaf; their ports and protocol
/// rule most of them out at once.
#[derive(Clone, Debug, Default)]
pub struct Segment {
    b0: u32,
    /// Offset of the `3 * 256` filter words in `FamilyLanes::filters`.
    filt: u32,
    /// The leaf's last segment.
    last: bool,
}

/// Leaf references already converted and pass-through chains already built.
#[derive(Default)]
struct Memo {
    leaves: std::collections::HashMap<usize, u32>,
    chains: std::collections::HashMap<(u32, u32), u32>,
}

/// Levels from `r` down to its deepest leaf in the image.
fn tree_depth(image: &[u32], r: u32) -> u32 {
    if r & ACL_REF_LEAF != 0 {
        return 0;
    }
    let fanout = 1usize << ((image[r as usize] >> 16) & 0xF);
    let children = &image[r as usize + 1..r as usize + 1 + fanout];
    1 + children
        .iter()
        .map(|&c| tree_depth(image, c))
        .max()
        .unwrap_or(0)
}

/// One family's CPU copy of its trees (leaf references rewritten) and its leaf blocks.
#[derive(Clone, Debug, Default)]
pub struct FamilyLanes {
    /// `[root, min_rule]` pairs, then the nodes, as in the image but relative to this vector,
    /// every path of a tree padded to its depth ([`Self::copy`]).
    pub nodes: Vec<u32>,
    pub num_trees: usize,
    /// Per tree, the levels every key walks.
    pub depths: Vec<u32>,
    /// Record words per block lane (`4 * addr_words + 4`), i.e. `[u32; LANES]` columns a block.
    cols: usize,
    blocks: Vec<[u32; LANES]>,
    segs: Vec<Segment>,
    filters: Vec<u64>,
}

impl FamilyLanes {
    /// Copies one family's trees from `image` (header `fh`) and transposes its larger leaves.
    pub fn build(image: &[u32], fh: &AclFamilyHeader) -> FamilyLanes {
        let rw = fh.rec_words as usize;
        let t0 = fh.trees_off as usize;
        let nt = fh.num_trees as usize;
        let mut fl = FamilyLanes {
            nodes: Vec::new(),
            num_trees: nt,
            depths: Vec::new(),
            cols: rw,
            blocks: Vec::new(),
            segs: Vec::new(),
            filters: Vec::new(),
        };
        if nt == 0 {
            return fl;
        }
        let recs = &image[fh.records_off as usize..][..fh.num_records as usize * rw];
        fl.nodes = vec![0; 2 * nt];
        let mut memo = Memo::default();
        for t in 0..nt {
            let (root, min) = (image[t0 + 2 * t], image[t0 + 2 * t + 1]);
            let d = tree_depth(image, root);
            fl.nodes[2 * t] = fl.copy(image, (recs, rw), root, d, &mut memo);
            fl.nodes[2 * t + 1] = min;
            fl.depths.push(d);
        }
        fl
    }

    /// Copies the subtree `r` of the image whose leaves must all lie `k` levels down: a leaf
    /// reached sooner is put under pass-through nodes (header 0: no bit cut, one child), so the
    /// batch walk takes exactly `depth` steps for every key, level by level, without a branch
    /// on where a key's path ends (and the loads of the batch's keys overlap).
    fn copy(
        &mut self,
        image: &[u32],
        recs: (&[u32], usize),
        r: u32,
        k: u32,
        memo: &mut Memo,
    ) -> u32 {
        if r & ACL_REF_LEAF != 0 {
            let leaf = if r == ACL_REF_EMPTY {
                r
            } else {
                let first = (r & !ACL_REF_LEAF) as usize;
                match memo.leaves.get(&first) {
                    Some(&c) => c,
                    None => {
                        let c = self.leaf_ref(recs.0, recs.1, first).unwrap_or(r);
                        memo.leaves.insert(first, c);
                        c
                    }
                }
            };
            return self.pad(leaf, k, memo);
        }
        let h = image[r as usize];
        let fanout = 1usize << ((h >> 16) & 0xF);
        let at = self.nodes.len();
        self.nodes.push(h);
        self.nodes.resize(at + 1 + fanout, ACL_REF_EMPTY);
        for j in 0..fanout {
            let c = self.copy(
                image,
                recs,
                image[r as usize + 1 + j],
                k.saturating_sub(1),
                memo,
            );
            self.nodes[at + 1 + j] = c;
        }
        at as u32
    }

    /// `leaf` under `k` pass-through nodes (shared between equal chains).
    fn pad(&mut self, leaf: u32, k: u32, memo: &mut Memo) -> u32 {
        if k == 0 {
            return leaf;
        }
        if let Some(&at) = memo.chains.get(&(leaf, k)) {
            return at;
        }
        let inner = self.pad(leaf, k - 1, memo);
        let at = self.nodes.len() as u32;
        self.nodes.extend_from_slice(&[0, inner]);
        memo.chains.insert((leaf, k), at);
        at
    }

    /// The CPU reference of the leaf starting at record `first`: its blocks when it has more
    /// than `BLOCK_LEAF` records (transposed here), else `None` (the image's record index).
    fn leaf_ref(&mut self, recs: &[u32], rw: usize, first: usize) -> Option<u32> {
        let n = recs.len() / rw;
        let mut end = first;
        while end < n && recs[end * rw + rw - 2] & ACL_REC_LAST == 0 {
            end += 1;
        }
        let end = (end + 1).min(n);
        if end - first <= BLOCK_LEAF {
            return None;
        }
        let b0 = self.blocks.len() / rw;
        for b in 0..(end - first).div_ceil(LANES) {
            let at = self.blocks.len();
            self.blocks.resize(at + rw, [0; LANES]);
            let blk = &mut self.blocks[at..];
            for l in 0..LANES {
                let r = first + b * LANES + l;
                if r < end {
                    for (c, col) in blk.iter_mut().enumerate() {
                        col[l] = recs[r * rw + c];
                    }
                } else {
                    // Padding: an empty source-port range (never matches), the last flag.
                    blk[rw - 4][l] = 0xFFFF;
                    blk[rw - 2][l] = ACL_REC_LAST;
                    blk[rw - 1][l] = ACL_NO_MATCH;
                }
            }
        }
        let nb = (end - first).div_ceil(LANES);
        if nb <= FILTER_BLOCKS {
            return Some(ACL_REF_LEAF | REF_BLOCKS | b0 as u32);
        }
        let s0 = self.segs.len();
        for sb in (0..nb).step_by(SEG_BLOCKS) {
            let filt = self.filters.len();
            self.filters.resize(filt + 3 * 256, 0);
            for b in sb..(sb + SEG_BLOCKS).min(nb) {
                let bit = 1u64 << (b - sb);
                for r in first + b * LANES..(first + (b + 1) * LANES).min(end) {
                    let rec = &recs[r * rw..(r + 1) * rw];
                    let f = &mut self.filters[filt..filt + 3 * 256];
                    for (k, w) in [rec[rw - 4], rec[rw - 3]].into_iter().enumerate() {
                        for hb in (w & 0xFFFF) >> 8..=(w >> 16) >> 8 {
                            f[k * 256 + hb as usize] |= bit;
                        }
                    }
                    let (pv, pm) = (rec[rw - 2] & 0xFF, (rec[rw - 2] >> 8) & 0xFF);
                    for p in (0..256u32).filter(|p| p & pm == pv) {
                        f[512 + p as usize] |= bit;
                    }
                }
            }
            self.segs.push(Segment {
                b0: (b0 + sb) as u32,
                filt: filt as u32,
                last: sb + SEG_BLOCKS >= nb,
            });
        }
        Some(ACL_REF_LEAF | REF_BLOCKS | REF_FILTERED | s0 as u32)
    }

    /// Bytes of the tree copy, the blocks and the filters.
    pub fn bytes(&self) -> usize {
        self.nodes.len() * 4
            + self.blocks.len() * 4 * LANES
            + self.segs.len() * std::mem::size_of::<Segment>()
            + self.filters.len() * 8
    }

    /// Block `b`'s columns.
    #[inline(always)]
    pub fn block(&self, b: usize) -> &[[u32; LANES]] {
        &self.blocks[b * self.cols..(b + 1) * self.cols]
    }
}

impl AclClassifier {
    /// Classifies `keys` into `out` (same length), the same answers as [`Self::classify`] key by
    /// key. Keys are taken `BATCH` at a time and each tree is walked for the whole batch before
    /// the next: the walks of different keys are independent, so the core overlaps their memory
    /// loads instead of waiting on one dependent chain at a time (what rte_acl gets from SIMD
    /// over several flows). A batch of IPv4 or of IPv6 keys goes this way; one that mixes
    /// families goes key by key.
    pub fn classify_batch(&self, keys: &[AclKey], out: &mut [u32]) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above), the only requirement of a
            // `target_feature(enable = "avx2")` function.
            unsafe { self.classify_batch_avx2(keys, out) };
            return;
        }
        self.classify_batch_portable(keys, out);
    }

    /// [`Self::classify_batch`] without SIMD: what runs on a CPU without AVX2 (public so that
    /// tests compare it with the AVX2 walk on machines that have both).
    pub fn classify_batch_portable(&self, keys: &[AclKey], out: &mut [u32]) {
        self.classify_batch_with(keys, out, block_mask::<1>, block_mask::<4>);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn classify_batch_avx2(&self, keys: &[AclKey], out: &mut [u32]) {
        use super::lanes::avx2;
        self.classify_batch_with(
            keys,
            out,
            |b, kw| avx2::block_mask::<1>(b, kw),
            |b, kw| avx2::block_mask::<4>(b, kw),
        );
    }

    /// [`Self::classify_batch`] with the block tests `m4` (IPv4 blocks) and `m6` (IPv6).
    #[inline(always)]
    fn classify_batch_with(
        &self,
        keys: &[AclKey],
        out: &mut [u32],
        m4: impl Fn(&[[u32; LANES]], &[u32; 11]) -> u32,
        m6: impl Fn(&[[u32; LANES]], &[u32; 11]) -> u32,
    ) {
        const BATCH: usize = 8;
        for (kc, oc) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            let v = kc[0].ip_version;
            let same = kc.len() == BATCH && kc.iter().all(|k| k.ip_version == v);
            if same && (v == 4 || v == 6) {
                let mut kw = [[0u32; 11]; BATCH];
                for (w, k) in kw.iter_mut().zip(kc) {
                    *w = key_words(k);
                }
                let best = if v == 4 {
                    self.walk_batch::<1, BATCH>(ACL_FAM_V4, &kw, &m4)
                } else {
                    self.walk_batch::<4, BATCH>(ACL_FAM_V6, &kw, &m6)
                };
                oc.copy_from_slice(&best);
            } else {
                for (o, k) in oc.iter_mut().zip(kc) {
                    *o = self.classify(k);
                }
            }
        }
    }

    #[inline(always)]
    fn walk_batch<const AW: usize, const B: usize>(
        &self,
        fam: usize,
        kw: &[[u32; 11]; B],
        mask: &impl Fn(&[[u32; LANES]], &[u32; 11]) -> u32,
    ) -> [u32; B] {
        let fl = &self.lanes[fam];
        let img = &fl.nodes[..];
        let rec_words = 4 * AW + 4;
        let recs = &self.image[self.hdr.fam[fam].records_off as usize..];
        let mut best = [ACL_NO_MATCH; B];
        for (t, &depth) in img[..2 * fl.num_trees].chunks_exact(2).zip(&fl.depths) {
            let min = t[1];
            if best.iter().all(|&b| b <= min) {
                break;
            }
            // Level by level: the batch's loads of one level are independent.
            let mut refs = [t[0]; B];
            for _ in 0..depth {
                for (r, k) in refs.iter_mut().zip(kw) {
                    let h = img[*r as usize];
                    let child = (k[(h & 0xF) as usize] >> ((h >> 8) & 0x1F))
                        & ((1u32 << ((h >> 16) & 0xF)) - 1);
                    *r = img[*r as usize + 1 + child as usize];
                }
            }
            for j in 0..B {
                let r = refs[j];
                if r == ACL_REF_EMPTY || min >= best[j] {
                    continue;
                }
                if r & REF_BLOCKS != 0 {
                    let b = (r & !(ACL_REF_LEAF | REF_BLOCKS | REF_FILTERED)) as usize;
                    best[j] = if r & REF_FILTERED != 0 {
                        self.scan_filtered::<AW>(fl, b, &kw[j], best[j], mask)
                    } else {
                        self.scan_blocks::<AW>(fl, b, &kw[j], best[j], mask)
                    };
                    continue;
                }
                let o = (r & !ACL_REF_LEAF) as usize * rec_words;
                for rec in recs[o..].chunks_exact(rec_words) {
                    let idx = rec[4 * AW + 3];
                    if idx >= best[j] {
                        break;
                    }
                    let ctl = rec[4 * AW + 2];
                    if self.rec_matches::<AW>(rec, &kw[j], ctl, idx) {
                        best[j] = idx;
                        break;
                    }
                    if ctl & ACL_REC_LAST != 0 {
                        break;
                    }
                }
            }
        }
        best
    }

    /// The filtered leaf whose first segment is `s0`: per segment, the blocks its filters
    /// leave for `kw`, in order.
    #[inline(always)]
    fn scan_filtered<const AW: usize>(
        &self,
        fl: &FamilyLanes,
        s0: usize,
        kw: &[u32; 11],
        best: u32,
        mask: &impl Fn(&[[u32; LANES]], &[u32; 11]) -> u32,
    ) -> u32 {
        let (sp, dp, pr) = ((kw[8] & 0xFFFF) >> 8, kw[8] >> 24, kw[9] & 0xFF);
        for seg in &fl.segs[s0..] {
            let f = &fl.filters[seg.filt as usize..seg.filt as usize + 3 * 256];
            let mut cand = f[sp as usize] & f[256 + dp as usize] & f[512 + pr as usize];
            while cand != 0 {
                let blk = fl.block(seg.b0 as usize + cand.trailing_zeros() as usize);
                let idx = &blk[4 * AW + 3];
                if idx[0] >= best {
                    return best;
                }
                let mut m = mask(blk, kw) & 0xFF;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    let i = idx[l];
                    if i >= best {
                        return best;
                    }
                    if blk[4 * AW + 2][l] & ACL_REC_EXTRA == 0 || self.extras_match(kw, i) {
                        return i;
                    }
                    m &= m - 1;
                }
                cand &= cand - 1;
            }
            if seg.last {
                break;
            }
        }
        best
    }

    /// The leaf whose first block is `b0`, block by block: its first rule that matches `kw`
    /// and beats `best`, else `best`.
    #[inline(always)]
    fn scan_blocks<const AW: usize>(
        &self,
        fl: &FamilyLanes,
        b0: usize,
        kw: &[u32; 11],
        best: u32,
        mask: &impl Fn(&[[u32; LANES]], &[u32; 11]) -> u32,
    ) -> u32 {
        let mut b = b0;
        loop {
            let blk = fl.block(b);
            let idx = &blk[4 * AW + 3];
            // Records are in priority order: nothing from here on can beat `best`.
            if idx[0] >= best {
                return best;
            }
            let mm = mask(blk, kw);
            let mut m = mm & 0xFF;
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                let i = idx[l];
                if i >= best {
                    return best;
                }
                if blk[4 * AW + 2][l] & ACL_REC_EXTRA == 0 || self.extras_match(kw, i) {
                    return i;
                }
                m &= m - 1;
            }
            if mm & 0x100 != 0 {
                return best;
            }
            b += 1;
        }
    }
}

/// Lanes of block `b` whose 5-tuple fields (addresses, ports, protocol) match the key words `kw`,
/// as a bit mask (bit `l` = lane `l`), and bit 8 set when the block ends its leaf (a lane has
/// `ACL_REC_LAST`). IPv6 blocks test ports and protocol first and skip the eight address words
/// when no lane is left (rules wildcard in both addresses fill the large leaves of
/// firewall-like sets; their ports separate them). The portable form; [`avx2::block_mask`]
/// computes the same with eight lanes to a vector.
// Lane `l` of several columns at once: an index reads more plainly than zipped iterators.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
pub fn block_mask<const AW: usize>(b: &[[u32; LANES]], kw: &[u32; 11]) -> u32 {
    let sp = kw[8] & 0xFFFF;
    let dp = kw[8] >> 16;
    let pr = kw[9] & 0xFF;
    let (spc, dpc, ctl) = (&b[4 * AW], &b[4 * AW + 1], &b[4 * AW + 2]);
    let mut m = 0u32;
    let mut last = 0u32;
    for l in 0..LANES {
        let (s, d, c) = (spc[l], dpc[l], ctl[l]);
        let ok = (sp >= s & 0xFFFF)
            & (sp <= s >> 16)
            & (dp >= d & 0xFFFF)
            & (dp <= d >> 16)
            & ((pr & (c >> 8) & 0xFF) == (c & 0xFF));
        m |= u32::from(ok) << l;
        last |= c;
    }
    let last = u32::from(last & ACL_REC_LAST != 0) << 8;
    if AW > 1 && m == 0 {
        return last;
    }
    for l in 0..LANES {
        let mut ok = true;
        for i in 0..AW {
            ok &= (kw[i] & b[AW + i][l]) == b[i][l];
            ok &= (kw[4 + i] & b[3 * AW + i][l]) == b[2 * AW + i][l];
        }
        m &= !(u32::from(!ok) << l);
    }
    m | last
}

/// [`block_mask`] with AVX2: a column is one 256-bit vector. Callers check
/// `is_x86_feature_detected!("avx2")` (see `AclClassifier::classify_batch`).
#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use super::LANES;
    use crate::abi::ACL_REC_LAST;
    use core::arch::x86_64::*;

    /// A column as a vector (the compiler folds the eight element reads into one load).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn col(c: &[u32; LANES]) -> __m256i {
        let c = c.map(|x| x as i32);
        _mm256_setr_epi32(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7])
    }

    /// Lanes where `v` is within `[r & 0xFFFF, r >> 16]` (16-bit values: signed compares).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn in_range(r: __m256i, v: __m256i) -> __m256i {
        let lo = _mm256_and_si256(r, _mm256_set1_epi32(0xFFFF));
        let hi = _mm256_srli_epi32::<16>(r);
        let out = _mm256_or_si256(_mm256_cmpgt_epi32(lo, v), _mm256_cmpgt_epi32(v, hi));
        _mm256_andnot_si256(out, _mm256_set1_epi32(-1))
    }

    /// Lanes where `key & mask == value` for the columns `value`, `mask`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn masked_eq(key: u32, value: &[u32; LANES], mask: &[u32; LANES]) -> __m256i {
        let k = _mm256_set1_epi32(key as i32);
        _mm256_cmpeq_epi32(_mm256_and_si256(k, col(mask)), col(value))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn lanes(v: __m256i) -> u32 {
        _mm256_movemask_ps(_mm256_castsi256_ps(v)) as u32
    }

    /// The same result as [`super::block_mask`].
    ///
    /// # Safety
    /// The CPU must have AVX2 (callers without the feature enabled check it at run time).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub fn block_mask<const AW: usize>(b: &[[u32; LANES]], kw: &[u32; 11]) -> u32 {
        let sp = _mm256_set1_epi32((kw[8] & 0xFFFF) as i32);
        let dp = _mm256_set1_epi32((kw[8] >> 16) as i32);
        let pr = _mm256_set1_epi32((kw[9] & 0xFF) as i32);
        let c = col(&b[4 * AW + 2]);
        let pv = _mm256_and_si256(c, _mm256_set1_epi32(0xFF));
        let pm = _mm256_and_si256(_mm256_srli_epi32::<8>(c), _mm256_set1_epi32(0xFF));
        let mut ok = _mm256_and_si256(
            _mm256_and_si256(
                in_range(col(&b[4 * AW]), sp),
                in_range(col(&b[4 * AW + 1]), dp),
            ),
            _mm256_cmpeq_epi32(_mm256_and_si256(pr, pm), pv),
        );
        let last_flag = _mm256_set1_epi32(ACL_REC_LAST as i32);
        let last = u32::from(_mm256_testz_si256(c, last_flag) == 0) << 8;
        if AW > 1 && _mm256_testz_si256(ok, ok) != 0 {
            return last;
        }
        for i in 0..AW {
            ok = _mm256_and_si256(ok, masked_eq(kw[i], &b[i], &b[AW + i]));
            ok = _mm256_and_si256(ok, masked_eq(kw[4 + i], &b[2 * AW + i], &b[3 * AW + i]));
        }
        lanes(ok) | last
    }
}

#[cfg(test)]
mod tests {
    use crate::abi::{AclKey, ACL_NO_MATCH};
    use crate::acl::{AclClassifier, AclRule, Family, Masked, PortRange, Prefix};

    /// A leaf no cut splits (hundreds of rules wildcard in both addresses, in one family; some
    /// with DSCP): blocks, filters over several segments, the portable and the AVX2 walk all
    /// give the first matching rule, IPv4 and IPv6.
    #[test]
    fn filtered_leaves_equal_linear() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move |n: u32| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % u64::from(n)) as u32
        };
        for fam in [Family::V4, Family::V6] {
            let mut rules = Vec::new();
            for i in 0..1200u32 {
                let mut r = AclRule::any();
                r.family = fam;
                let lo = rnd(65536) as u16;
                let span = [0u16, 0, 7, 1023, 20000][rnd(5) as usize];
                r.dst_port = PortRange {
                    lo,
                    hi: lo.saturating_add(span),
                };
                if rnd(3) == 0 {
                    let lo = rnd(65536) as u16;
                    r.src_port = PortRange {
                        lo,
                        hi: lo.saturating_add(rnd(4096) as u16),
                    };
                }
                // Every rule names a protocol: keys of protocol 47 match nothing.
                r.proto = Masked::<u8>::exact([6u8, 17, 1][rnd(3) as usize]);
                if i % 17 == 0 {
                    r.dscp = Masked::<u8>::exact(rnd(64) as u8);
                }
                if i % 50 == 0 {
                    r.src = Prefix {
                        addr: [rnd(4) << 30, 0, 0, 0],
                        len: 2,
                    };
                }
                rules.push(r);
            }
            let set = crate::acl::AclRuleSet {
                rules,
                warnings: Vec::new(),
            };
            let cls = AclClassifier::build(&set.rules);
            let keys: Vec<AclKey> = (0..4000)
                .map(|_| AclKey {
                    src_ip: [rnd(u32::MAX), rnd(7), 0, 1],
                    dst_ip: [rnd(u32::MAX), 0, rnd(3), 0],
                    src_port: rnd(65536) as u16,
                    dst_port: rnd(65536) as u16,
                    proto: [6u8, 17, 1, 47][rnd(4) as usize],
                    ip_version: if fam == Family::V4 { 4 } else { 6 },
                    dscp: rnd(64) as u8,
                    ..AclKey::default()
                })
                .collect();
            let (mut a, mut p) = (vec![0u32; keys.len()], vec![0u32; keys.len()]);
            cls.classify_batch(&keys, &mut a);
            cls.classify_batch_portable(&keys, &mut p);
            let lanes = &cls.lanes[usize::from(fam == Family::V6)];
            assert!(
                lanes.segs.len() > 1,
                "{fam:?}: no filtered leaf spans segments"
            );
            let mut hits = 0;
            for (i, k) in keys.iter().enumerate() {
                let want = set.classify_linear(k).map_or(ACL_NO_MATCH, |r| r as u32);
                hits += usize::from(want != ACL_NO_MATCH);
                assert_eq!(a[i], want, "{fam:?} batch, key {k:?}");
                assert_eq!(p[i], want, "{fam:?} portable batch, key {k:?}");
                assert_eq!(cls.classify(k), want, "{fam:?} single, key {k:?}");
            }
            assert!(
                hits > 100 && hits < keys.len(),
                "{fam:?}: {hits} keys matched"
            );
        }
    }
}
