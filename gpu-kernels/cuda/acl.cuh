/* Stage `acl`: the ACL matcher over the flat image built by flow_rules::acl::compile (layout in
 * the ACL section of pktwarp_abi.h). The same walk as AclClassifier::classify in Rust; compiled
 * for the GPU (one thread per packet, or a group of lanes per packet when a burst leaves threads
 * spare: pw_acl_classify_group) and for the host (tests hold both equal to the Rust matcher:
 * gpu-kernels/host/host_acl.cpp).
 *
 * GPU notes: the image is read-only for a kernel's lifetime (epoch swap), so loads go through
 * __ldg (read-only cache); a node walk is one dependent load per level, a leaf is a few
 * consecutive 32-byte records. */
#ifndef PKTWARP_ACL_CUH
#define PKTWARP_ACL_CUH

#include "pktwarp_abi.h"

#if PW_GPU
#define PW_ACL_LD(p) __ldg(p)
#else
#define PW_ACL_LD(p) (*(p))
#endif

/* Key as the 11 words the trees index (see the ABI header). */
PW_DEVICE void pw_acl_key_words(const pw_acl_key *k, uint32_t kw[11]) {
    for (int i = 0; i < 4; i++) {
        kw[i] = k->src_ip[i];
        kw[4 + i] = k->dst_ip[i];
    }
    kw[8] = (uint32_t)k->src_port | ((uint32_t)k->dst_port << 16);
    kw[9] = (uint32_t)k->proto | ((uint32_t)k->ip_version << 8) | ((uint32_t)k->dscp << 16) |
            ((uint32_t)k->tcp_flags << 24);
    kw[10] = (uint32_t)k->vlan_id | ((uint32_t)k->port_id << 16);
}

PW_DEVICE int pw_acl_extras_match(const uint32_t *img, uint32_t extras_off, uint32_t rule,
                                  const uint32_t kw[11]) {
    const uint32_t *e = img + extras_off + PW_ACL_EXTRA_WORDS * rule;
    uint32_t e0 = PW_ACL_LD(e), e1 = PW_ACL_LD(e + 1), e2 = PW_ACL_LD(e + 2);
    uint32_t dscp = (kw[9] >> 16) & 0xFFu, flags = kw[9] >> 24;
    uint32_t vlan = kw[10] & 0xFFFFu, port = kw[10] >> 16;
    return (dscp & ((e0 >> 8) & 0xFFu)) == (e0 & 0xFFu) &&
           (flags & (e0 >> 24)) == ((e0 >> 16) & 0xFFu) && (vlan & (e1 >> 16)) == (e1 & 0xFFFFu) &&
           (port & (e2 >> 16)) == (e2 & 0xFFFFu);
}

/* One record against the key; aw = address words (1 or 4). */
PW_DEVICE int pw_acl_rec_match(const uint32_t *rec, uint32_t aw, const uint32_t kw[11],
                               uint32_t ctl) {
    for (uint32_t i = 0; i < aw; i++) {
        if ((kw[i] & PW_ACL_LD(rec + aw + i)) != PW_ACL_LD(rec + i)) return 0;
        if ((kw[4 + i] & PW_ACL_LD(rec + 3 * aw + i)) != PW_ACL_LD(rec + 2 * aw + i)) return 0;
    }
    uint32_t sp = kw[8] & 0xFFFFu, dp = kw[8] >> 16;
    uint32_t s = PW_ACL_LD(rec + 4 * aw), d = PW_ACL_LD(rec + 4 * aw + 1);
    if (sp < (s & 0xFFFFu) || sp > (s >> 16) || dp < (d & 0xFFFFu) || dp > (d >> 16)) return 0;
    return (kw[9] & (ctl >> 8) & 0xFFu) == (ctl & 0xFFu);
}

/* One family's part of the image, as a lookup needs it. */
typedef struct pw_acl_fam_view {
    const uint32_t *img;  /* the image */
    const uint32_t *recs; /* the family's records */
    uint32_t aw, rw;      /* address words, record words */
    uint32_t ntrees, toff, nrec, extras_off;
    uint32_t actions_off;
} pw_acl_fam_view;

/* The family's view for key words `kw` (pw_acl_key_words). */
PW_DEVICE void pw_acl_view(const pw_acl_tables *t, const uint32_t *kw, pw_acl_fam_view *v) {
    const uint32_t ipv = (kw[9] >> 8) & 0xFFu;
    const uint32_t fam = ipv == 4u ? PW_ACL_FAM_V4 : ipv == 6u ? PW_ACL_FAM_V6 : PW_ACL_FAM_L2;
    const pw_acl_family *fh = &t->fam[fam];
    v->img = (const uint32_t *)t;
#if PW_GPU
    /* Three vector loads issued together (word loads were split by the tree loop's bound check:
     * two round trips). The header is 16-byte aligned when the image is (device allocations). */
    if ((((unsigned long long)t) & 15ull) == 0ull) {
        const uint4 f0 = __ldg((const uint4 *)fh), f1 = __ldg((const uint4 *)fh + 1);
        const uint2 h = __ldg((const uint2 *)&t->extras_off);
        v->aw = f0.x;
        v->rw = f0.y;
        v->ntrees = f0.z;
        v->toff = f0.w;
        v->recs = v->img + f1.x;
        v->nrec = f1.y;
        v->extras_off = h.x;
        v->actions_off = h.y;
        return;
    }
#endif
    v->aw = PW_ACL_LD(&fh->addr_words);
    v->rw = PW_ACL_LD(&fh->rec_words);
    v->ntrees = PW_ACL_LD(&fh->num_trees);
    v->toff = PW_ACL_LD(&fh->trees_off);
    v->nrec = PW_ACL_LD(&fh->num_records);
    v->recs = v->img + PW_ACL_LD(&fh->records_off);
    v->extras_off = PW_ACL_LD(&t->extras_off);
    v->actions_off = PW_ACL_LD(&t->actions_off);
}

/* The leaf for the key below ref `r` (a tree's root): PW_ACL_REF_EMPTY, or PW_ACL_REF_LEAF |
 * first record. */
PW_DEVICE uint32_t pw_acl_tree_leaf(const pw_acl_fam_view *v, uint32_t r, const uint32_t kw[11]) {
    while ((r & PW_ACL_REF_LEAF) == 0) {
        uint32_t h = PW_ACL_LD(v->img + r);
        uint32_t child = (kw[h & 0xFu] >> ((h >> 8) & 0x1Fu)) & ((1u << ((h >> 16) & 0xFu)) - 1u);
        r = PW_ACL_LD(v->img + (r + 1u + child)); /* one 32-bit add, then the address */
    }
    return r;
}

/* Tree `ti`'s root ref (*root) and smallest rule index (returned; trees are sorted by it). On the
 * GPU one 8-byte load (the compiler puts the pairs at an even word offset). */
PW_DEVICE uint32_t pw_acl_tree(const pw_acl_fam_view *v, uint32_t ti, uint32_t *root) {
    const uint32_t *p = v->img + v->toff + 2 * ti;
#if PW_GPU
    if ((((unsigned long long)p) & 7ull) == 0ull) {
        const uint2 t = __ldg((const uint2 *)p);
        *root = t.x;
        return t.y;
    }
#endif
    *root = PW_ACL_LD(p);
    return PW_ACL_LD(p + 1);
}

#define PW_ACL_LANE_MATCH 1u /* the record matches with a rule index below best */
#define PW_ACL_LANE_END 2u   /* the one-thread scan stops at this record */

/* One record of a leaf against the key: PW_ACL_LANE_MATCH when it matches with a rule index below
 * `best`, PW_ACL_LANE_END when the one-thread scan stops here (last record of its leaf, or rule
 * index >= best: records are sorted); the rule index in *idx. On the GPU an IPv4 record (8 words,
 * 16-byte aligned) is two 16-byte loads and a branch-free test. With short-circuit tests the
 * compiler issued the second load only after the first had returned and passed the rule-index
 * test, and each key word's shared-memory load only after the test before it (sm_90 SASS); now
 * all of them are in flight at once (stages of a 32-frame burst 2.78 vs 2.91-2.94 us;
 * docs/perf-log.md, "a lookup with fewer dependent steps", 2026-11-30). */
PW_DEVICE uint32_t pw_acl_rec_eval(const pw_acl_fam_view *v, const uint32_t *rec, const uint32_t kw[11],
                                   uint32_t best, uint32_t *idx) {
#if PW_GPU
    if (v->aw == 1u && v->rw == 8u && (((unsigned long long)rec) & 15ull) == 0ull) {
        const uint4 a = __ldg((const uint4 *)rec), b = __ldg((const uint4 *)rec + 1);
        const uint32_t src = kw[0], dst = kw[4], ports = kw[8], ctl = kw[9];
        *idx = b.w;
        const uint32_t sp = ports & 0xFFFFu, dp = ports >> 16;
        /* Bitwise & (not &&): every term is computed, nothing waits on an earlier one. */
        const bool below = b.w < best;
        const bool m = below & ((src & a.y) == a.x) & ((dst & a.w) == a.z) & (sp >= (b.x & 0xFFFFu)) &
                       (sp <= (b.x >> 16)) & (dp >= (b.y & 0xFFFFu)) & (dp <= (b.y >> 16)) &
                       ((ctl & (b.z >> 8) & 0xFFu) == (b.z & 0xFFu));
        const uint32_t out = (!below || (b.z & PW_ACL_REC_LAST)) ? PW_ACL_LANE_END : 0u;
        if (m && ((b.z & PW_ACL_REC_EXTRA) == 0u || pw_acl_extras_match(v->img, v->extras_off, b.w, kw)))
            return out | PW_ACL_LANE_MATCH;
        return out;
    }
#endif
    uint32_t i = PW_ACL_LD(rec + 4 * v->aw + 3);
    *idx = i;
    if (i >= best) return PW_ACL_LANE_END;
    uint32_t ctl = PW_ACL_LD(rec + 4 * v->aw + 2);
    uint32_t out = (ctl & PW_ACL_REC_LAST) ? PW_ACL_LANE_END : 0u;
    if (pw_acl_rec_match(rec, v->aw, kw, ctl) &&
        ((ctl & PW_ACL_REC_EXTRA) == 0 || pw_acl_extras_match(v->img, v->extras_off, i, kw)))
        out |= PW_ACL_LANE_MATCH;
    return out;
}

/* The forest walk every lookup shares: the key's family, its trees in order of their smallest
 * rule, stopping when that is >= the best match so far. `scan(v, first_record, kw, best)` scans
 * one leaf and returns the new best. `kw`: the key's words (pw_acl_key_words), wherever they are
 * (the small-burst kernel keeps them in shared memory: its tree steps index them there). */
template <typename Scan>
PW_DEVICE uint32_t pw_acl_forest_kw(const pw_acl_tables *t, const uint32_t *kw, Scan scan) {
    pw_acl_fam_view v;
    pw_acl_view(t, kw, &v);
    uint32_t best = PW_ACL_NO_MATCH;
    for (uint32_t ti = 0; ti < v.ntrees; ti++) {
        uint32_t r;
        if (pw_acl_tree(&v, ti, &r) >= best) break;
        r = pw_acl_tree_leaf(&v, r, kw);
        if (r == PW_ACL_REF_EMPTY) continue;
        best = scan(&v, r & ~PW_ACL_REF_LEAF, kw, best);
    }
    return best;
}

template <typename Scan>
PW_DEVICE uint32_t pw_acl_forest(const pw_acl_tables *t, const pw_acl_key *k, Scan scan) {
    uint32_t kw[11];
    pw_acl_key_words(k, kw);
    return pw_acl_forest_kw(t, kw, scan);
}

/* Index of the first rule (file order) matching key words `kw`, or PW_ACL_NO_MATCH. `t` is the
 * start of the image. One thread. */
PW_DEVICE uint32_t pw_acl_classify_kw(const pw_acl_tables *t, const uint32_t *kw) {
    return pw_acl_forest_kw(t, kw, [](const pw_acl_fam_view *v, uint32_t first, const uint32_t *w, uint32_t best) {
        for (const uint32_t *rec = v->recs + first * v->rw;; rec += v->rw) {
            uint32_t idx;
            const uint32_t f = pw_acl_rec_eval(v, rec, w, best, &idx);
            if (f & PW_ACL_LANE_MATCH) return idx;
            if (f) return best;
        }
    });
}

/* The same for a key. */
PW_DEVICE uint32_t pw_acl_classify(const pw_acl_tables *t, const pw_acl_key *k) {
    uint32_t kw[11];
    pw_acl_key_words(k, kw);
    return pw_acl_classify_kw(t, kw);
}

/* ---- Cooperative lookup: a group of `gsize` lanes classifies one key ----
 * Latency: one thread checks a leaf's records one after another, each a dependent round trip to
 * L2 (acl1_10K has leaves of up to 31 records in 3 trees: ~90 such trips per frame). A group of
 * gsize lanes (a power of two <= 32, aligned in its warp, every lane with the same key) walks each
 * tree together (the same loads: one broadcast transaction) and checks gsize records of a leaf at
 * once, lane j taking record base + j. The answer equals pw_acl_classify's: of one chunk the first
 * lane that either matches (rule index < best) or ends the leaf (PW_ACL_REC_LAST, index >= best,
 * past the family's records) decides, exactly where the one-thread loop would stop. */
/* One lane's record `recno` of a leaf chunk (past the family's records: the end). Used by the
 * host mirror, pw_acl_classify_lanes; pw_acl_group_scan steps a record pointer instead. */
PW_DEVICE uint32_t pw_acl_lane_eval(const pw_acl_fam_view *v, uint32_t recno, const uint32_t kw[11],
                                    uint32_t best, uint32_t *idx) {
    *idx = PW_ACL_NO_MATCH;
    if (recno >= v->nrec) return PW_ACL_LANE_END;
    return pw_acl_rec_eval(v, v->recs + recno * v->rw, kw, best, idx);
}

/* A chunk's outcome from its lanes' flags (bit j of `match` / `end` = lane j's): 1 = lane *lane
 * matched (the new best), 0 = the leaf ends without a match, 2 = no lane decides (next chunk).
 * The host mirror's; pw_acl_group_scan reaches the same decision with one min-reduction. */
PW_DEVICE uint32_t pw_acl_chunk_decide(uint32_t match, uint32_t end, uint32_t *lane) {
    uint32_t any = match | end;
    if (any == 0u) return 2u;
#if PW_GPU
    *lane = (uint32_t)__ffs((int)any) - 1u;
#else
    *lane = (uint32_t)__builtin_ctz(any);
#endif
    return (match >> *lane) & 1u;
}

#if PW_GPU
/* The group's scan of the leaf whose first record is `first`: the new best, and when it is new
 * its rule's action words in act[0..1] (pw_acl_action's). `gl` = this lane's index in its group
 * of `gsize`. Latency (a lookup is one warp's chain of dependent instructions and loads): a lane
 * that matches loads its rule's action at once, so the load runs beside the group's decision and
 * the rest of the walk instead of after the whole lookup; the decision is one reduction (below);
 * a lane's record pointer steps by a chunk. Against two ballots, a find-first-set and a multiply
 * per chunk: stages of a 32-frame burst 2.56-2.59 vs 2.72-2.75 us (docs/perf-log.md, "a lookup with
 * fewer dependent steps", 2026-11-30). */
__device__ __forceinline__ uint32_t pw_acl_group_scan(const pw_acl_fam_view *v, uint32_t first, const uint32_t *kw,
                                                      uint32_t best, uint32_t gl, uint32_t gsize, uint32_t act[2]) {
    const uint32_t gbase = (threadIdx.x & 31u) & ~(gsize - 1u);
    const uint32_t gmask = (gsize >= 32u ? 0xFFFFFFFFu : (1u << gsize) - 1u) << gbase;
    /* The lane's record and its number, stepped a chunk at a time (no multiply on the chain). */
    uint32_t recno = first + gl;
    const uint32_t *rec = v->recs + (uint64_t)recno * v->rw;
    const uint32_t step = gsize * v->rw;
    for (;; recno += gsize, rec += step) {
        uint32_t idx = PW_ACL_NO_MATCH;
        const uint32_t f = recno < v->nrec ? pw_acl_rec_eval(v, rec, kw, best, &idx) : PW_ACL_LANE_END;
        uint32_t a0 = 0u, a1 = 0u;
        if (f & PW_ACL_LANE_MATCH) {
            const uint32_t *aw = v->img + v->actions_off + PW_ACL_ACTION_WORDS * idx;
            a0 = __ldg(aw);
            a1 = __ldg(aw + 1);
        }
        /* The deciding lane (pw_acl_chunk_decide's): the group's first lane that matches or
         * ends the leaf, found with one min-reduction over (lane << 1 | ends without a match). */
        const uint32_t key = f == 0u ? 0xFFFFFFFFu : (gl << 1) | ((f & PW_ACL_LANE_MATCH) ? 0u : 1u);
        const uint32_t k = __reduce_min_sync(gmask, key);
        if (k == 0xFFFFFFFFu) continue;
        if (k & 1u) return best;
        const uint32_t lane = gbase + (k >> 1);
        act[0] = __shfl_sync(gmask, a0, lane);
        act[1] = __shfl_sync(gmask, a1, lane);
        return __shfl_sync(gmask, idx, lane);
    }
}

/* `gl` = this lane's index in its group of `gsize`; every lane of the group calls it with the same
 * key words (so the group takes one path through the trees). act: the matched rule's action
 * words (pw_acl_action's; unset on PW_ACL_NO_MATCH). */
__device__ __forceinline__ uint32_t pw_acl_classify_group_kw(const pw_acl_tables *t, const uint32_t *kw, uint32_t gl,
                                                             uint32_t gsize, uint32_t act[2]) {
    return pw_acl_forest_kw(t, kw, [&](const pw_acl_fam_view *v, uint32_t first, const uint32_t *w, uint32_t best) {
        return pw_acl_group_scan(v, first, w, best, gl, gsize, act);
    });
}

__device__ __forceinline__ uint32_t pw_acl_classify_group(const pw_acl_tables *t, const pw_acl_key *k,
                                                          uint32_t gl, uint32_t gsize) {
    uint32_t kw[11], act[2];
    pw_acl_key_words(k, kw);
    return pw_acl_classify_group_kw(t, kw, gl, gsize, act);
}
#endif

/* The group lookup with its `gsize` lanes played one after another on one thread (host tests hold
 * it equal to pw_acl_classify for every group size). */
PW_DEVICE uint32_t pw_acl_classify_lanes(const pw_acl_tables *t, const pw_acl_key *k, uint32_t gsize) {
    return pw_acl_forest(t, k, [&](const pw_acl_fam_view *v, uint32_t first, const uint32_t *kw, uint32_t best) {
        for (uint32_t base = first;; base += gsize) {
            uint32_t m = 0, e = 0, idxs[32];
            for (uint32_t j = 0; j < gsize; j++) {
                uint32_t f = pw_acl_lane_eval(v, base + j, kw, best, &idxs[j]);
                if (f & PW_ACL_LANE_MATCH) m |= 1u << j;
                if (f & PW_ACL_LANE_END) e |= 1u << j;
            }
            uint32_t lane = 0;
            uint32_t d = pw_acl_chunk_decide(m, e, &lane);
            if (d == 2u) continue;
            return d == 1u ? idxs[lane] : best;
        }
    });
}

/* Verdict word of rule `rule` (verdict | has_mark << 8); mark id in *mark. */
PW_DEVICE uint32_t pw_acl_action(const pw_acl_tables *t, uint32_t rule, uint32_t *mark) {
    const uint32_t *a = (const uint32_t *)t + PW_ACL_LD(&t->actions_off) + PW_ACL_ACTION_WORDS * rule;
    *mark = PW_ACL_LD(a + 1);
    return PW_ACL_LD(a);
}

/* The key of a parsed frame: outer addresses / protocol / ports, DSCP = TOS >> 2, low 8 TCP flag
 * bits, outer VID (PW_VLAN_NONE when untagged), ingress port from the frame descriptor. Non-IP
 * frames (ip_version not 4 or 6) get a key with every L3/L4 field zero and ip_version 0: they
 * match only rules without any L3/L4 condition. Same as flow_rules::acl::key_from_fields. */
PW_DEVICE void pw_acl_key_from_meta(const pw_packet_meta *m, uint16_t port_id, pw_acl_key *k) {
    int ip = m->ip_version == 4 || m->ip_version == 6;
    for (int i = 0; i < 4; i++) {
        k->src_ip[i] = ip ? m->src_ip[i] : 0u;
        k->dst_ip[i] = ip ? m->dst_ip[i] : 0u;
    }
    k->src_port = ip ? m->src_port : (uint16_t)0;
    k->dst_port = ip ? m->dst_port : (uint16_t)0;
    k->proto = ip ? m->ip_proto : (uint8_t)0;
    k->ip_version = ip ? m->ip_version : (uint8_t)0;
    k->dscp = ip ? (uint8_t)(m->ip_tos >> 2) : (uint8_t)0;
    k->tcp_flags = ip ? (uint8_t)(m->tcp_flags & 0xFFu) : (uint8_t)0;
    k->vlan_id = m->vlan_count > 0 ? (uint16_t)(m->vlan_tci[0] & 0x0FFFu) : (uint16_t)PW_VLAN_NONE;
    k->port_id = port_id;
}

#endif /* PKTWARP_ACL_CUH */
