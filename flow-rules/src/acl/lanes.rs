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

/// One family's CPU copy of its trees (leaf references rewritten) and its leaf blocks.
#[derive(Clone, Debug, Default)]
pub struct FamilyLanes {
    /// `[root, min_rule]` pairs, then the nodes, as in the image but relative to this vector.
    pub nodes: Vec<u32>,
    pub num_trees: usize,
    /// Record words per block lane (`4 * addr_words + 4`), i.e. `[u32; LANES]` columns a block.
    cols: usize,
    blocks: Vec<[u32; LANES]>,
}

impl FamilyLanes {
    /// Copies one family's trees from `image` (header `fh`) and transposes its larger leaves.
    pub fn build(image: &[u32], fh: &AclFamilyHeader) -> FamilyLanes {
        let rw = fh.rec_words as usize;
        let t0 = fh.trees_off as usize;
        let nt = fh.num_trees as usize;
        let mut fl = FamilyLanes {
            nodes: image[t0..fh.records_off as usize].to_vec(),
            num_trees: nt,
            cols: rw,
            blocks: Vec::new(),
        };
        if nt == 0 {
            return fl;
        }
        let recs = &image[fh.records_off as usize..][..fh.num_records as usize * rw];
        let mut seen = std::collections::HashMap::new();
        let mut conv = |fl: &mut FamilyLanes, r: u32| -> u32 {
            if r == ACL_REF_EMPTY {
                r
            } else if r & ACL_REF_LEAF == 0 {
                r - t0 as u32
            } else {
                let first = (r & !ACL_REF_LEAF) as usize;
                *seen
                    .entry(first)
                    .or_insert_with(|| fl.leaf_ref(recs, rw, first).unwrap_or(r))
            }
        };
        for t in 0..nt {
            let r = fl.nodes[2 * t];
            fl.nodes[2 * t] = conv(&mut fl, r);
        }
        // Nodes follow the tree pairs, each a header then 2^nbits child refs; the image pads
        // to a record boundary after them with zero words (never a node: nbits >= 1).
        let mut i = 2 * nt;
        let mut left = fh.num_nodes as usize;
        while left > 0 && i < fl.nodes.len() {
            let fanout = 1usize << ((fl.nodes[i] >> 16) & 0xF);
            for j in 0..fanout {
                let r = fl.nodes[i + 1 + j];
                fl.nodes[i + 1 + j] = conv(&mut fl, r);
            }
            i += 1 + fanout;
            left -= 1;
        }
        fl
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
        Some(ACL_REF_LEAF | REF_BLOCKS | b0 as u32)
    }

    /// Bytes of the tree copy and the blocks.
    pub fn bytes(&self) -> usize {
        self.nodes.len() * 4 + self.blocks.len() * 4 * LANES
    }

    /// Block `b`'s columns.
    #[inline(always)]
    pub fn block(&self, b: usize) -> &[[u32; LANES]] {
        &self.blocks[b * self.cols..(b + 1) * self.cols]
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
