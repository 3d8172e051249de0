// Times the ACL lookup of one small burst inside one CTA, the way the persistent kernel runs it:
// every group of `gsize` lanes classifies one frame's key, the CTA waits for the slowest, and
// thread 0 reads the clock before and after. One launch per configuration runs many bursts of
// the trace back to back, so launch overhead is not in the figures. Checks every answer against
// the Rust matcher's (files from `cargo run --release -p flow-rules --example acl_gpu_dump -- RULES TRACE DIR`).
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -I gpu-kernels/cuda tools/gpu-probes/acl_burst_lat.cu -o acl_burst_lat
// Run:   acl_burst_lat DIR [BURSTS]
// Prints, per configuration (threads, frames per burst, lanes per frame, idle gap before each
// burst: thread 0 spinning, as the persistent kernel polls; algo: `group` =
// pw_acl_classify_group (the kernel's), `pairs` = the same over the IPv4 trees rebuilt with one
// load per level, see below; tail, smem and flush: see `bursts`): p50 / p99 / max of a burst's lookup
// time in ns and the mismatches. Then the tree-per-CTA experiment (tree_bursts below): a
// cluster of 1-4 CTAs, CTA c walking tree c of every frame, answers combined in CTA 0; and the
// frame relay (relay_bursts): a cluster of 2 CTAs, CTA 0 handing half the frames' keys to CTA 1
// through distributed shared memory, against one CTA with every frame.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <cuda_runtime.h>
#include "acl.cuh"
#include "tool_io.cuh"


// ---- Experiment: one load per tree level ----
// The image's IPv4 trees rebuilt (here, on the host) with every child stored as a pair [ref,
// header of the node it names] at an 8-byte boundary, and the tree table as [root, root header,
// smallest rule]: a walk then takes one 8-byte load per node level instead of a header load and
// a child load. Records, extras and actions stay where they are. Measures what that layout would
// give before changing the image both matchers walk.
struct PairTrees {
    std::vector<uint32_t> words; // the image, then the rebuilt nodes and tree table
    uint32_t toff, ntrees;
};

static uint32_t pair_node(const uint32_t *img, std::vector<uint32_t> &out, std::vector<std::pair<uint32_t, uint32_t>> &memo,
                          uint32_t ref) {
    if ((ref & PW_ACL_REF_LEAF) || ref == PW_ACL_REF_EMPTY) return ref;
    for (auto &m : memo)
        if (m.first == ref) return m.second;
    const uint32_t h = img[ref], nchild = 1u << ((h >> 16) & 0xFu);
    if (out.size() % 2 == 0) out.push_back(0); /* node at an odd word: its pairs at even ones */
    const uint32_t at = (uint32_t)out.size();
    memo.push_back({ref, at});
    out.push_back(h);
    out.resize(out.size() + 2 * nchild);
    for (uint32_t c = 0; c < nchild; c++) {
        const uint32_t nr = pair_node(img, out, memo, img[ref + 1 + c]);
        out[at + 1 + 2 * c] = nr;
        out[at + 2 + 2 * c] = (nr & PW_ACL_REF_LEAF) || nr == PW_ACL_REF_EMPTY ? 0u : out[nr];
    }
    return at;
}

static PairTrees pair_trees(const std::vector<char> &raw) {
    PairTrees p;
    p.words.assign((const uint32_t *)raw.data(), (const uint32_t *)raw.data() + raw.size() / 4);
    const pw_acl_tables *t = (const pw_acl_tables *)raw.data();
    const pw_acl_family &f = t->fam[PW_ACL_FAM_V4];
    const uint32_t *img = (const uint32_t *)raw.data();
    std::vector<std::pair<uint32_t, uint32_t>> memo;
    std::vector<uint32_t> roots;
    for (uint32_t ti = 0; ti < f.num_trees; ti++) roots.push_back(pair_node(img, p.words, memo, img[f.trees_off + 2 * ti]));
    while (p.words.size() % 4) p.words.push_back(0);
    p.toff = (uint32_t)p.words.size();
    p.ntrees = f.num_trees;
    for (uint32_t ti = 0; ti < f.num_trees; ti++) {
        const uint32_t r = roots[ti];
        p.words.push_back(r);
        p.words.push_back((r & PW_ACL_REF_LEAF) || r == PW_ACL_REF_EMPTY ? 0u : p.words[r]);
        p.words.push_back(img[f.trees_off + 2 * ti + 1]);
    }
    return p;
}

/* pw_acl_classify_group over the rebuilt IPv4 trees (IPv4 keys only). */
__device__ uint32_t pair_classify_group(const pw_acl_tables *t, const pw_acl_key *k, uint32_t gl, uint32_t gsize,
                                        uint32_t toff, uint32_t ntrees) {
    const uint32_t *img = (const uint32_t *)t;
    uint32_t kw[11];
    pw_acl_fam_view v;
    pw_acl_key_words(k, kw);
    pw_acl_view(t, kw, &v);
    uint32_t best = PW_ACL_NO_MATCH;
    for (uint32_t ti = 0; ti < ntrees; ti++) {
        const uint32_t *te = img + toff + 3 * ti;
        if (__ldg(te + 2) >= best) break;
        uint32_t r = __ldg(te), h = __ldg(te + 1);
        while ((r & PW_ACL_REF_LEAF) == 0) {
            const uint32_t child = (kw[h & 0xFu] >> ((h >> 8) & 0x1Fu)) & ((1u << ((h >> 16) & 0xFu)) - 1u);
            const uint2 p = __ldg((const uint2 *)(img + r + 1 + 2 * child));
            r = p.x;
            h = p.y;
        }
        if (r == PW_ACL_REF_EMPTY) continue;
        uint32_t act[2];
        best = pw_acl_group_scan(&v, r & ~PW_ACL_REF_LEAF, kw, best, gl, gsize, act);
    }
    return best;
}

// Bursts b = 0..nb-1 of `frames` keys each (keys b*frames ...); ns[b] = the burst's lookup time.
// SMEM: bytes of static shared memory the kernel holds (the persistent kernel's ~28 KB), so the
// driver's shared / L1 split is the kernel's. tail: after its lookup, lane 0 of a group does what
// the kernel does with the answer: loads the rule's action, stores a tagged verdict (3 x 8-byte
// volatile stores) to mapped host memory `vh`, and adds to the rule's 64-bit hit counter.
// flush: thread 0 drops the SM's L1 lines before each burst.
template <uint32_t SMEM>
__global__ void bursts(const pw_acl_tables *t, const pw_acl_key *keys, uint32_t nkeys, uint32_t frames,
                       uint32_t gsize, uint32_t gap_ns, uint32_t toff, uint32_t ntrees, uint32_t nb,
                       uint32_t *out, uint32_t *ns, bool tail, uint2 *vh, unsigned long long *hits, bool flush) {
    __shared__ uint4 held[SMEM / 16 + 1];
    if constexpr (SMEM > 0u) {
        for (uint32_t i = threadIdx.x; i < SMEM / 16; i += blockDim.x) held[i] = make_uint4(i, 0u, 0u, 0u);
        __syncthreads();
    }
    const uint32_t f = threadIdx.x / gsize, gl = threadIdx.x & (gsize - 1u);
    for (uint32_t b = 0; b < nb; b++) {
        const uint32_t k = (b * frames + f) % nkeys;
        pw_acl_key key = keys[f < frames ? k : 0];
        /* An idle gap before the burst, as the persistent kernel waits for the next one: thread
         * 0 spins on the clock, the other warps wait at the barrier. */
        if (flush && threadIdx.x == 0) {
            /* An acquire at GPU scope: drops the SM's L1 lines, as a fence in the kernel would. */
            uint32_t v;
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(ns) : "memory");
        }
        if (gap_ns && threadIdx.x == 0) {
            const uint64_t t = gtimer();
            while (gtimer() - t < gap_ns) {
            }
        }
        __syncthreads();
        uint64_t t0 = 0;
        if (threadIdx.x == 0) t0 = gtimer();
        if (f < frames) {
            const uint32_t r = toff && key.ip_version == 4 ? pair_classify_group(t, &key, gl, gsize, toff, ntrees)
                               : gsize > 1u                  ? pw_acl_classify_group(t, &key, gl, gsize)
                                                             : pw_acl_classify(t, &key);
            if (gl == 0u) {
                out[k] = r;
                if (tail) {
                    uint32_t mark = 0u, w = 0u;
                    if (r != PW_ACL_NO_MATCH) {
                        w = pw_acl_action(t, r, &mark);
                        atomicAdd(hits + r, 1ull);
                    }
                    uint2 *v = vh + 3u * f;
                    asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(v), "r"(w), "r"(b + 1u) : "memory");
                    asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(v + 1), "r"(r), "r"(b + 1u) : "memory");
                    asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(v + 2), "r"(mark), "r"(b + 1u) : "memory");
                }
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) ns[b] = (uint32_t)(gtimer() - t0);
    }
    if constexpr (SMEM > 0u) {
        if (threadIdx.x == 0) out[0] ^= held[gap_ns % (SMEM / 16)].x & 0x80000000u; /* keeps `held` */
    }
}


// ---- Experiment: one CTA per tree ----
// A cluster of `ctas` CTAs classifies each burst: CTA c walks only tree c (the key family's) for
// every frame, with `gsize` lanes a frame, no early stop across trees; each CTA writes its best
// into CTA 0's shared memory (distributed shared memory), a cluster barrier, then CTA 0's group
// lane 0 takes the smallest. The answer equals pw_acl_classify's (the forest's best is the
// smallest of every tree's first match). Each SM's L1 then holds one tree's records, and a
// frame's chain is one tree long. ns[b]: CTA 0's clock from before the lookups to the minimum.
__shared__ unsigned long long tree_best[8][64]; /* CTA 0's: {best, burst + 1} from CTA c for frame f */
__shared__ uint32_t tree_go;                      /* every CTA's: burst + 1 that CTA 0 started */

/* No cluster barrier per burst (its acquire drops the SM's L1: measured as cold as a flush):
 * CTA 0 starts burst b by storing b + 1 into every CTA's tree_go (remote, relaxed), and every
 * CTA hands its answers back as 8-byte words carrying b + 1, which CTA 0 polls in its own
 * shared memory. */
__device__ __forceinline__ void st_remote_u32(uint32_t *local, uint32_t rank, uint32_t v) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(local), r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("st.volatile.shared::cluster.u32 [%0], %1;" ::"r"(r), "r"(v) : "memory");
}

__device__ __forceinline__ void st_remote_u64(unsigned long long *local, uint32_t rank, unsigned long long v) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(local), r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("st.volatile.shared::cluster.u64 [%0], %1;" ::"r"(r), "l"(v) : "memory");
}

__global__ void tree_bursts(const pw_acl_tables *t, const pw_acl_key *keys, uint32_t nkeys, uint32_t frames,
                            uint32_t gsize, uint32_t nb, uint32_t *out, uint32_t *ns) {
    uint32_t rank, ctas;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(ctas));
    const uint32_t f = threadIdx.x / gsize, gl = threadIdx.x & (gsize - 1u);
    if (threadIdx.x == 0) tree_go = 0u;
    for (uint32_t i = threadIdx.x; i < 8u * 64u; i += blockDim.x) tree_best[i / 64u][i % 64u] = 0ull;
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    for (uint32_t b = 0; b < nb; b++) {
        const uint32_t k = (b * frames + f) % nkeys;
        pw_acl_key key = keys[f < frames ? k : 0];
        uint64_t t0 = 0;
        if (rank == 0u) {
            __syncthreads(); /* the last burst's answers read */
            if (threadIdx.x == 0) {
                t0 = gtimer();
                for (uint32_t c = 1; c < ctas; c++) st_remote_u32(&tree_go, c, b + 1u);
            }
        } else {
            while (*(volatile uint32_t *)&tree_go != b + 1u) {
            }
        }
        uint32_t best = PW_ACL_NO_MATCH;
        if (f < frames) {
            uint32_t kw[11], act[2];
            pw_acl_key_words(&key, kw);
            pw_acl_fam_view v;
            pw_acl_view(t, kw, &v);
            if (rank < v.ntrees) {
                uint32_t r;
                (void)pw_acl_tree(&v, rank, &r);
                r = pw_acl_tree_leaf(&v, r, kw);
                if (r != PW_ACL_REF_EMPTY) best = pw_acl_group_scan(&v, r & ~PW_ACL_REF_LEAF, kw, best, gl, gsize, act);
            }
            /* A family with more trees than CTAs: this CTA also takes trees rank + ctas, ... */
            for (uint32_t ti = rank + ctas; ti < v.ntrees; ti += ctas) {
                uint32_t r;
                if (pw_acl_tree(&v, ti, &r) >= best) break;
                r = pw_acl_tree_leaf(&v, r, kw);
                if (r != PW_ACL_REF_EMPTY) best = pw_acl_group_scan(&v, r & ~PW_ACL_REF_LEAF, kw, best, gl, gsize, act);
            }
            if (gl == 0u && rank != 0u) st_remote_u64(&tree_best[rank][f], 0u, ((unsigned long long)(b + 1u) << 32) | best);
        }
        if (rank == 0u) {
            if (f < frames && gl == 0u) {
                for (uint32_t c = 1; c < ctas; c++) {
                    unsigned long long w;
                    do {
                        w = *(volatile unsigned long long *)&tree_best[c][f];
                    } while ((uint32_t)(w >> 32) != b + 1u);
                    best = min(best, (uint32_t)w);
                }
                out[k] = best;
            }
            __syncthreads();
            if (threadIdx.x == 0) ns[b] = (uint32_t)(gtimer() - t0);
        }
    }
    /* No CTA leaves while another may still store into its shared memory. */
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ---- Experiment: a burst's frames shared by a cluster of 2 CTAs (frame relay) ----
// CTA 0 takes every frame's key (the persistent kernel's parse pass would), keeps frames
// [0, frames / 2) and hands frames [frames / 2, frames) to CTA 1 as tagged 8-byte words in CTA
// 1's shared memory ({key word, burst + 1}; relaxed remote stores, no fence and no cluster
// barrier: their acquire drops the SM's L1); CTA 1's groups poll their frame's words, then both
// CTAs look up their half, `gsize` lanes a frame. ns[b]: from CTA 0's clock before the keys to
// the later of the two CTAs' ends (%globaltimer is one clock for the whole GPU). CTA 1 reports
// its end to CTA 0, which starts the next burst only then.
__shared__ unsigned long long relay_kw[32][11]; /* CTA 1's: frame f's key words from CTA 0 */
__shared__ unsigned long long relay_end;        /* CTA 0's: {CTA 1's end time} of the last burst */
__shared__ uint32_t relay_done;                 /* CTA 0's: burst + 1 that CTA 1 finished */
__shared__ uint32_t relay_local[32][11];        /* CTA 0's: key words of its own frames */

__global__ void relay_bursts(const pw_acl_tables *t, const pw_acl_key *keys, uint32_t nkeys, uint32_t frames,
                             uint32_t gsize, uint32_t nb, uint32_t *out, uint32_t *ns) {
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    const uint32_t half = frames / 2u, f = threadIdx.x / gsize, gl = threadIdx.x & (gsize - 1u);
    for (uint32_t i = threadIdx.x; i < 32u * 11u; i += blockDim.x) relay_kw[i / 11u][i % 11u] = 0ull;
    if (threadIdx.x == 0) relay_done = 0u;
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    for (uint32_t b = 0; b < nb; b++) {
        const uint32_t tag = b + 1u;
        uint64_t t0 = 0;
        if (rank == 0u) {
            /* Frame `threadIdx.x`'s key, loaded before the clock (the kernel has it in shared
             * memory by then). */
            pw_acl_key key = keys[(b * frames + (threadIdx.x < frames ? threadIdx.x : 0u)) % nkeys];
            if (threadIdx.x == 0) {
                while (*(volatile uint32_t *)&relay_done != b) {
                }
            }
            __syncthreads();
            if (threadIdx.x == 0) t0 = gtimer();
            if (threadIdx.x < frames) {
                uint32_t kw[11];
                pw_acl_key_words(&key, kw);
                if (threadIdx.x < half) {
                    for (uint32_t j = 0; j < 11u; j++) relay_local[threadIdx.x][j] = kw[j];
                } else {
                    for (uint32_t j = 0; j < 11u; j++)
                        st_remote_u64(&relay_kw[threadIdx.x - half][j], 1u,
                                      ((unsigned long long)tag << 32) | kw[j]);
                }
            }
            __syncthreads();
        }
        uint32_t kw[11];
        const bool mine = f < half;
        const uint32_t fr = rank == 0u ? f : half + f; /* the frame this group looks up */
        if (mine) {
            if (rank == 0u) {
                for (uint32_t j = 0; j < 11u; j++) kw[j] = relay_local[f][j];
            } else {
                for (uint32_t j = 0; j < 11u; j++) {
                    unsigned long long w;
                    do {
                        w = *(volatile unsigned long long *)&relay_kw[f][j];
                    } while ((uint32_t)(w >> 32) != tag);
                    kw[j] = (uint32_t)w;
                }
            }
            uint32_t act[2];
            const uint32_t r = pw_acl_classify_group_kw(t, kw, gl, gsize, act);
            if (gl == 0u) out[(b * frames + fr) % nkeys] = r;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            const uint64_t end = gtimer();
            if (rank == 1u) {
                st_remote_u64(&relay_end, 0u, end);
                st_remote_u32(&relay_done, 0u, tag);
            } else {
                while (*(volatile uint32_t *)&relay_done != tag) {
                }
                const uint64_t e1 = *(volatile unsigned long long *)&relay_end;
                ns[b] = (uint32_t)((e1 > end ? e1 : end) - t0);
            }
        }
    }
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ---- Diagnostic: where one lookup's dependent loads are served ----
// One thread walks each key the sequential way (pw_acl_classify's order: view, then per tree
// its table entry, node header and child loads, a leaf's records one by one, the action of a
// match), timing every dependent load with clock64 (issue -> first use). Keys as the bursts
// above take them (32 frames a burst), after one warm-up pass. Per step kind: loads per
// lookup, mean cycles, and how many fell in < 100 (L1), 100-399 (L2), >= 400 cycles.
enum { ST_VIEW, ST_TREE, ST_HDR, ST_CHILD, ST_REC, ST_ACT, ST_N };
struct StepStats {
    unsigned long long n[ST_N], cyc[ST_N], b[ST_N][3];
};

/* clock64, then the load, its value stored to shared memory (the store waits for it), then
 * clock64: all asm volatile with a memory clobber, so neither the compiler nor ptxas hoists the
 * load above the first clock (the way pointer-chasing microbenchmarks time a load). */
__shared__ volatile uint32_t probe_sink;

__device__ __forceinline__ long long probe_clock() {
    long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
    return t;
}

__device__ __forceinline__ void probe_note(uint32_t kind, long long c, StepStats *st) {
    st->n[kind]++;
    st->cyc[kind] += (unsigned long long)c;
    st->b[kind][c < 100 ? 0 : c < 400 ? 1 : 2]++;
}

__device__ __forceinline__ uint32_t probe_ld(const uint32_t *p, uint32_t kind, StepStats *st) {
    const long long t0 = probe_clock();
    uint32_t v;
    asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    probe_sink = v;
    const long long c = probe_clock() - t0;
    probe_note(kind, c, st);
    return v;
}

__global__ void chain_probe(const pw_acl_tables *t, const pw_acl_key *keys, uint32_t nkeys, uint32_t nlook,
                            uint32_t *out, StepStats *res) {
    if (threadIdx.x != 0) return;
    StepStats st = {};
    const uint32_t *img = (const uint32_t *)t;
    for (uint32_t pass = 0; pass < 2; pass++) {
        if (pass == 1) st = StepStats{};
        for (uint32_t i = 0; i < nlook; i++) {
            const uint32_t k = i % nkeys;
            uint32_t kw[11];
            pw_acl_key_words(&keys[k], kw);
            /* The view: independent loads, timed as one step. */
            const long long t0 = probe_clock();
            pw_acl_fam_view v;
            pw_acl_view(t, kw, &v);
            probe_sink = v.ntrees + v.rw + v.aw + v.toff + v.nrec + v.extras_off + v.actions_off;
            probe_note(ST_VIEW, probe_clock() - t0, &st);
            uint32_t best = PW_ACL_NO_MATCH;
            for (uint32_t ti = 0; ti < v.ntrees; ti++) {
                const uint32_t *te = img + v.toff + 2 * ti;
                uint32_t r = probe_ld(te, ST_TREE, &st);
                if (__ldg(te + 1) >= best) break;
                while ((r & PW_ACL_REF_LEAF) == 0) {
                    const uint32_t h = probe_ld(img + r, ST_HDR, &st);
                    const uint32_t child = (kw[h & 0xFu] >> ((h >> 8) & 0x1Fu)) & ((1u << ((h >> 16) & 0xFu)) - 1u);
                    r = probe_ld(img + r + 1 + child, ST_CHILD, &st);
                }
                if (r == PW_ACL_REF_EMPTY) continue;
                for (uint32_t recno = r & ~PW_ACL_REF_LEAF; recno < v.nrec; recno++) {
                    const uint32_t *rec = v.recs + recno * v.rw;
                    (void)probe_ld(rec, ST_REC, &st);
                    uint32_t idx;
                    const uint32_t f = pw_acl_rec_eval(&v, rec, kw, best, &idx);
                    if (f & PW_ACL_LANE_MATCH) {
                        best = idx;
                        (void)probe_ld(img + v.actions_off + PW_ACL_ACTION_WORDS * idx, ST_ACT, &st);
                        break;
                    }
                    if (f) break;
                }
            }
            if (pass == 1) out[k] = best;
        }
    }
    *res = st;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s DIR [BURSTS]\n", argv[0]); return 2; }
    std::string d = argv[1];
    uint32_t nb = argc > 2 ? (uint32_t)atoi(argv[2]) : 3000;
    auto img = slurp(d + "/image.bin"), keys = slurp(d + "/keys.bin"), exp = slurp(d + "/expect.bin");
    uint32_t n = (uint32_t)(keys.size() / sizeof(pw_acl_key));
    const PairTrees pt = pair_trees(img);
    void *dimg, *dkeys;
    uint32_t *dout, *dns;
    CK(cudaMalloc(&dimg, pt.words.size() * 4));
    CK(cudaMalloc(&dkeys, keys.size()));
    CK(cudaMalloc(&dout, n * 4));
    CK(cudaMalloc(&dns, nb * 4));
    CK(cudaMemcpy(dimg, pt.words.data(), pt.words.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dkeys, keys.data(), keys.size(), cudaMemcpyHostToDevice));
    /* algo: 0 = pw_acl_classify_group (1 lane: pw_acl_classify), 1 = the same over the pair
     * trees. */
    /* smem: 0 = none; 1, 2, 3 = 28 KB held with the carveout hint default / max L1 / max shared. */
    struct C { uint32_t threads, frames, gsize, gap_ns, algo, tail, smem, flush; } cs[] = {
        {256, 32, 8, 0, 0, 0, 0},  {256, 32, 8, 10000, 0, 0, 0}, {256, 32, 8, 0, 0, 1, 0},
        {256, 32, 8, 0, 0, 0, 1},  {256, 32, 8, 0, 0, 0, 2},     {256, 32, 8, 0, 0, 0, 3},
        {256, 32, 8, 0, 0, 1, 1},  {256, 32, 8, 0, 0, 1, 2},     {256, 32, 4, 0, 0, 0, 0},
        {256, 32, 1, 0, 0, 0, 0},  {512, 32, 16, 0, 0, 0, 0},    {256, 16, 16, 0, 0, 0, 0},
        {256, 16, 16, 0, 0, 1, 1}, {256, 8, 32, 0, 0, 0, 0},     {128, 4, 32, 0, 0, 0, 0},
        {256, 32, 8, 0, 1, 0, 0},  {256, 8, 32, 0, 1, 0, 0},     {256, 32, 8, 0, 0, 0, 0, 1},
        {256, 32, 8, 0, 0, 1, 2, 1}, {256, 16, 16, 0, 0, 0, 0, 1}, {256, 8, 32, 0, 0, 0, 0, 1},
        /* One frame a burst: the chain of one lookup alone, by 1, 8, 16 or 32 lanes. */
        {32, 1, 1, 0, 0, 0, 0},    {32, 1, 8, 0, 0, 0, 0},       {32, 1, 16, 0, 0, 0, 0},
        {32, 1, 32, 0, 0, 0, 0},
        /* 32 frames with a warp each (1024 threads) against two frames a warp (512). */
        {512, 32, 16, 0, 0, 1, 0},  {1024, 32, 32, 0, 0, 1, 0},   {512, 16, 32, 0, 0, 1, 0},
    };
    uint2 *vh;
    unsigned long long *dhits;
    CK(cudaHostAlloc((void **)&vh, 3 * 64 * sizeof(uint2), cudaHostAllocMapped));
    CK(cudaMalloc(&dhits, (size_t)n * 8 + 8));
    printf("%s: %u keys, image %zu B, %u bursts per configuration\n", d.c_str(), n, img.size(), nb);
    printf("(pairs: the same lookups over IPv4 trees rebuilt with one 8-byte load per level: %zu more bytes)\n",
           pt.words.size() * 4 - img.size());
    printf("threads frames lanes gap_ns algo  tail smem flush   p50_ns   p99_ns  max_ns mismatches\n");
    const uint32_t *want = (const uint32_t *)exp.data();
    /* After a configuration's launches: its answers against the Rust matcher's (keys no burst
     * took are skipped) and its burst times, sorted. */
    auto collect = [&](uint32_t *bad, uint32_t *checked, std::vector<uint32_t> *ns) {
        std::vector<uint32_t> got(n);
        ns->resize(nb);
        CK(cudaMemcpy(got.data(), dout, n * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(ns->data(), dns, nb * 4, cudaMemcpyDeviceToHost));
        *bad = *checked = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (got[i] == 0xFFFFFFFFu && want[i] != 0xFFFFFFFFu) continue; /* not in any burst */
            ++*checked;
            if (got[i] != want[i]) ++*bad;
        }
        std::sort(ns->begin(), ns->end());
    };
    /* After a cluster experiment's launches: its row (threads, frames, lanes, CTAs, times). */
    auto report_row = [&](uint32_t threads, uint32_t frames, uint32_t gsize, uint32_t ctas) {
        CK(cudaDeviceSynchronize());
        uint32_t bad, checked;
        std::vector<uint32_t> ns;
        collect(&bad, &checked, &ns);
        printf("              %7u %6u %5u %4u %8u %8u %7u %u of %u\n", threads, frames, gsize, ctas, ns[nb / 2],
               ns[(size_t)nb * 99 / 100], ns[nb - 1], bad, checked);
    };
    for (const C &c : cs) {
        CK(cudaMemset(dout, 0xFF, n * 4));
        if (c.smem)
            CK(cudaFuncSetAttribute(bursts<28672>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    c.smem == 1u ? -1 : c.smem == 2u ? 0 : 100));
        for (int rep = 0; rep < 2; rep++) { /* the first pass warms L2 */
            const pw_acl_tables *ti = (const pw_acl_tables *)dimg;
            const uint32_t toff = c.algo == 1u ? pt.toff : 0u;
            if (c.smem)
                bursts<28672><<<1, c.threads>>>(ti, (const pw_acl_key *)dkeys, n, c.frames, c.gsize, c.gap_ns, toff,
                                                pt.ntrees, nb, dout, dns, c.tail, vh, dhits, c.flush);
            else
                bursts<0><<<1, c.threads>>>(ti, (const pw_acl_key *)dkeys, n, c.frames, c.gsize, c.gap_ns, toff,
                                            pt.ntrees, nb, dout, dns, c.tail, vh, dhits, c.flush);
            CK(cudaGetLastError());
        }
        CK(cudaDeviceSynchronize());
        uint32_t bad, checked;
        std::vector<uint32_t> ns;
        collect(&bad, &checked, &ns);
        printf("%7u %6u %5u %6u %5s %4u %4u %5u %8u %8u %7u %u of %u\n", c.threads, c.frames, c.gsize, c.gap_ns,
               c.algo == 0u ? "group" : "pairs", c.tail, c.smem, c.flush,
               ns[nb / 2], ns[(size_t)nb * 99 / 100], ns[nb - 1], bad, checked);
    }
    /* One CTA per tree (cluster of 3 = acl1's IPv4 trees; 2 and 4 for comparison), and the
     * kernel's own configuration in the same run. */
    struct T { uint32_t threads, frames, gsize, ctas; } ts[] = {
        {512, 32, 16, 1}, {512, 32, 16, 3}, {512, 32, 16, 2}, {512, 32, 16, 4}, {256, 32, 8, 3}, {512, 32, 16, 1}, {512, 32, 16, 3}};
    printf("tree per CTA: threads frames lanes ctas   p50_ns   p99_ns  max_ns mismatches\n");
    for (const T &c : ts) {
        CK(cudaMemset(dout, 0xFF, n * 4));
        for (int rep = 0; rep < 2; rep++) {
            launch_cluster(tree_bursts, c.ctas, c.threads, 0, (const pw_acl_tables *)dimg, (const pw_acl_key *)dkeys, n,
                           c.frames, c.gsize, nb, dout, dns);
            CK(cudaGetLastError());
        }
        report_row(c.threads, c.frames, c.gsize, c.ctas);
    }
    /* Frame relay (a cluster of 2 CTAs, half the frames each), and one CTA of the same threads
     * with all the frames, interleaved. */
    const T rs[] = {{512, 32, 32, 2}, {512, 32, 16, 1}, {256, 32, 16, 2},
                    {512, 32, 32, 2}, {512, 32, 16, 1}, {256, 32, 16, 2}};
    printf("frame relay: threads frames lanes ctas   p50_ns   p99_ns  max_ns mismatches\n");
    for (const T &c : rs) {
        /* relay_bursts holds at most 32 frames a CTA (relay_kw, relay_local). */
        if (c.ctas > 1u && c.frames > 64u) { fprintf(stderr, "frame relay: %u frames > 64\n", c.frames); exit(2); }
        CK(cudaMemset(dout, 0xFF, n * 4));
        for (int rep = 0; rep < 2; rep++) {
            if (c.ctas == 1u) {
                bursts<28672><<<1, c.threads>>>((const pw_acl_tables *)dimg, (const pw_acl_key *)dkeys, n, c.frames,
                                                c.gsize, 0u, 0u, pt.ntrees, nb, dout, dns, false, vh, dhits, false);
            } else {
                launch_cluster(relay_bursts, 2u, c.threads, 0, (const pw_acl_tables *)dimg, (const pw_acl_key *)dkeys, n,
                               c.frames, c.gsize, nb, dout, dns);
            }
            CK(cudaGetLastError());
        }
        report_row(c.threads, c.frames, c.gsize, c.ctas);
    }
    {
        StepStats *dst;
        CK(cudaMalloc(&dst, sizeof(StepStats)));
        CK(cudaMemset(dout, 0xFF, n * 4));
        const uint32_t nlook = std::min(n, 96000u);
        chain_probe<<<1, 32>>>((const pw_acl_tables *)dimg, (const pw_acl_key *)dkeys, n, nlook, dout, dst);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        StepStats st;
        CK(cudaMemcpy(&st, dst, sizeof st, cudaMemcpyDeviceToHost));
        std::vector<uint32_t> got(n);
        CK(cudaMemcpy(got.data(), dout, n * 4, cudaMemcpyDeviceToHost));
        uint32_t bad = 0;
        for (uint32_t i = 0; i < nlook; i++) bad += got[i] != want[i];
        const char *names[ST_N] = {"view", "tree", "node hdr", "node child", "record", "action"};
        printf("chain probe (one thread, %u lookups after a warm-up pass, %u mismatches): step, loads per lookup, "
               "mean cycles, < 100 / 100-399 / >= 400 cycles\n", nlook, bad);
        for (int k = 0; k < ST_N; k++)
            printf("  %-10s %6.2f %8.1f %10llu %10llu %10llu\n", names[k], (double)st.n[k] / nlook,
                   st.n[k] ? (double)st.cyc[k] / st.n[k] : 0.0, st.b[k][0], st.b[k][1], st.b[k][2]);
    }
    return 0;
}
