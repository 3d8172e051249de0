// ring_lat: the transport part of a burst's latency through a ring in mapped pinned host memory,
// for the ways a persistent kernel can learn of a burst and hand its verdicts back. No stages:
// each frame's "verdict" is the XOR of its bytes (checked by the host, so a torn or stale read
// shows up as a mismatch).
//
//   in=plain   the host writes the header's tail, the descriptors and the frames, then the
//              header's first 16 bytes (seq) with one store; thread 0 polls that granule, then
//              the block copies the rest into shared memory: two round trips to host memory
//              (what pw_persistent does with PW_PIPE_SLOT_SEQ).
//   in=tagged  every 8-byte word of the slot holds 4 payload bytes and the burst's tag (seq + 1);
//              every thread polls its own granules until their tags match: one round trip.
//   out=fence  verdicts (12 B), a block barrier, then a release store of the done word (what
//              pw_publish does); the host polls the done word.
//   out=tagged every verdict as two 8-byte words each holding the tag; the host polls them; no
//              fence on the GPU.
//   ctas=K     a cluster of K CTAs: CTA 0 stages the burst, the others read their frames from its
//              shared memory (DSMEM) after a cluster barrier; each publishes its own part.
//   poll=warp0 (tagged in) only warp 0 polls, up to 16 granules a lane in flight; the other warps
//              wait at the barrier (poll=all: every thread polls its granules).
//   spread=S   frames handled by 8-lane groups over all 8 warps (as the ACL groups do), lane 0
//              of a group storing its verdict: S=1 two 8-byte stores per frame by that lane,
//              S=2 a warp's four verdicts gathered into 8 lanes, one store instruction per warp.
//              "store" is thread 0's %globaltimer around the verdict phase (between barriers).
//   STEPS > 0  after staging, every thread walks a chain of STEPS dependent loads through a 4 MiB
//              table in device memory (a stand-in for the ACL lookup); "work" is thread 0's
//              %globaltimer around it (between block barriers): does the way the burst was
//              polled slow the work that follows?
//   groups=Q   (tagged in, RL_GROUPS=1) Q groups of the block each poll the whole slot, paced a
//              round / Q apart; the first to see every tag stages the burst, the others finish
//              the round they have in flight (their register loads cannot be dropped) first.
//   async=K    (tagged in, RL_ASYNC=1) K rounds in flight as cp.async copies into K shared
//              buffers, issued `pace` ns apart, each reissued once checked; a round still in
//              flight when another finds the burst holds nothing up.
//   RL_NT=1    the host writes tagged slots with non-temporal stores (then an sfence).
//   rounds     poll rounds until the burst was seen (median); roundus: the seeing round's issue
//              -> seen (groups > 1 only).
//
// usage: ring_lat [BURSTS] [FRAMES] [FRAME_BYTES] [STEPS]; prints one row per combination (us).
// Build: nvcc -O3 -std=c++17 -arch=sm_90 tools/gpu-probes/ring_lat.cu -o ring_lat
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <immintrin.h>
#include <cuda_runtime.h>
#include "tool_io.cuh" /* CK, launch_cluster, gtimer, cp16 */

static const uint32_t SLOTS = 8, HDR = 48, THREADS = 256, STAGE = 16384;

struct Shape {
    uint32_t frames, fbytes, payload, granules_tagged, slot_bytes, data_off;
};

struct Params {
    uint8_t *ring;          // SLOTS x slot_bytes (mapped host memory)
    uint32_t *done;         // SLOTS x ctas (out=fence)
    uint32_t *verdicts;     // SLOTS x frames x 4 words
    volatile uint32_t *exit_flag;
    Shape s;
    int tagged_in, tagged_out;
    uint32_t ctas;
    int warp0_poll;
    const uint32_t *table; // TABLE_WORDS entries, each < TABLE_WORDS
    uint32_t steps;
    uint32_t *work_ns;     // per burst (seq % WORK_SLOTS)
    int spread;
    uint32_t *store_ns;    // per burst (seq % WORK_SLOTS)
    uint32_t groups;       // tagged in: poll groups (1: the whole block polls as one)
    uint32_t async_k;      // tagged in: K > 0 rounds in flight as cp.async copies into shared memory
    uint32_t pace_ns;      // async: the prologue's spacing of the K rounds
    uint32_t *rounds;      // per burst (seq % WORK_SLOTS): poll rounds of the winning group
    uint32_t *round_ns;    // per burst (seq % WORK_SLOTS): the winning round's issue -> seen
};

static const uint32_t TABLE_WORDS = 1u << 20, WORK_SLOTS = 1u << 16;

__device__ __forceinline__ uint4 ld16(const void *p) {
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ void st16(void *p, uint4 v) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

/* Cluster primitives (sm_90), in PTX: this CTA's rank, a cluster-wide barrier (release /
 * acquire), and the generic address of the same shared variable in CTA `rank`. */
__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

template <typename T> __device__ __forceinline__ T *map_rank(T *p, uint32_t rank) {
    uint64_t r;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(r) : "l"((uint64_t)p), "r"(rank));
    return (T *)r;
}

__shared__ __align__(16) uint8_t stage[STAGE];
__shared__ uint32_t cmd;

// Thread 0's view of whether to give up (exit flag every 256 rounds, 10 s bound).
__device__ __forceinline__ bool give_up(const Params &p, uint32_t rounds, uint64_t t0) {
    if ((rounds & 0xFFu) != 0u) return false;
    return *p.exit_flag != 0u || gtimer() - t0 > 10000000000ull;
}

// Up to 16 granules of `slot` in flight at once: v[k] = granule i0 + k * span (those < G).
__device__ __forceinline__ void ld16s(uint4 (&v)[16], const uint8_t *slot, uint32_t i0, uint32_t span, uint32_t G) {
#pragma unroll
    for (uint32_t k = 0; k < 16u; k++) {
        const uint32_t i = i0 + k * span;
        if (i < G) v[k] = ld16(slot + 16u * i);
    }
}

__device__ __forceinline__ void group_bar(uint32_t id, uint32_t n) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}

__device__ __forceinline__ bool group_and(uint32_t id, uint32_t n, bool v) {
    uint32_t r;
    asm volatile("{\n\t.reg .pred p, q;\n\tsetp.ne.u32 p, %1, 0;\n\tbar.red.and.pred q, %2, %3, p;\n\tselp.u32 %0, 1, 0, q;\n\t}"
                 : "=r"(r)
                 : "r"((uint32_t)v), "r"(id), "r"(n)
                 : "memory");
    return r != 0u;
}

__shared__ volatile uint32_t g_winner;        /* 0: none yet, else group + 1 (0xFF: give up) */
__shared__ volatile uint32_t g_won[8];
__shared__ volatile unsigned long long g_issue[8];
__shared__ volatile uint32_t g_period;        /* ns, group 0's last failed round */

/* Tagged in, `groups` > 1 groups of blockDim / groups threads: each group polls the whole slot
 * on its own, paced so that a group's round starts period / groups after the previous group's;
 * the first group whose round sees every tag decodes into `stage`, the others stop after their
 * round in flight. */
__device__ bool stage_grouped(const Params &p, uint32_t seq) {
    const uint8_t *slot = p.ring + (uint64_t)(seq % SLOTS) * p.s.slot_bytes;
    const uint32_t Q = p.groups, gs = blockDim.x / Q, grp = threadIdx.x / gs, gt = threadIdx.x % gs, bid = 1u + grp;
    const uint32_t tag = seq + 1u, G = p.s.granules_tagged;
    const uint64_t t0 = gtimer();
    uint32_t rounds = 0;
    if (threadIdx.x == 0) g_winner = 0u;
    __syncthreads();
    for (;;) {
        uint64_t issued = 0;
        if (gt == 0u) {
            const uint64_t tgt = g_issue[(grp + Q - 1u) % Q] + g_period / Q;
            while (gtimer() < tgt && g_winner == 0u) {
            }
            issued = gtimer();
            g_issue[grp] = issued;
        }
        group_bar(bid, gs);
        if (g_winner) break;
        bool ok = true;
        uint4 v[16];
        ld16s(v, slot, gt, gs, G);
#pragma unroll
        for (uint32_t k = 0; k < 16u; k++) {
            const uint32_t i = gt + k * gs;
            if (i < G) ok = ok && v[k].y == tag && v[k].w == tag;
        }
        rounds++;
        const bool all = group_and(bid, gs, ok);
        if (gt == 0u) {
            const uint64_t now = gtimer();
            if (all) {
                const uint32_t old = atomicCAS((uint32_t *)&g_winner, 0u, bid);
                g_won[grp] = old == 0u;
                if (old == 0u) {
                    p.rounds[seq % WORK_SLOTS] = rounds;
                    p.round_ns[seq % WORK_SLOTS] = (uint32_t)(now - issued);
                }
            } else {
                if (grp == 0u) g_period = (uint32_t)(now - issued);
                g_won[grp] = 0u;
                if (give_up(p, rounds, t0)) g_winner = 0xFFu;
            }
        }
        group_bar(bid, gs);
        if (g_won[grp]) {
#pragma unroll
            for (uint32_t k = 0; k < 16u; k++) {
                const uint32_t i = gt + k * gs;
                if (i < G) ((uint2 *)stage)[i] = make_uint2(v[k].x, v[k].z);
            }
            break;
        }
        if (all || g_winner) break;
    }
    __syncthreads();
    return g_winner != 0xFFu;
}

/* Tagged in, K rounds in flight: every thread copies its granules of the slot into raw buffer k
 * with cp.async (no register waits on the copy), K buffers round robin, issued pace_ns apart;
 * a round is checked when its copies land and reissued at once if some tag is missing. The
 * rounds still in flight when one succeeds land in their own buffers (waited for before the
 * next burst's poll). */
static const uint32_t RAW_BYTES = 6144;
__shared__ __align__(16) uint8_t raw[4][RAW_BYTES];

template <uint32_t K> __device__ __forceinline__ void cp_wait_oldest() {
    asm volatile("cp.async.wait_group %0;" ::"n"(K - 1) : "memory");
}

template <uint32_t K> __device__ bool stage_async(const Params &p, uint32_t seq) {
    const uint8_t *slot = p.ring + (uint64_t)(seq % SLOTS) * p.s.slot_bytes;
    const uint32_t tag = seq + 1u, G = p.s.granules_tagged;
    const uint64_t t0 = gtimer();
    uint32_t rounds = 0;
    /* The last burst's rounds still in flight land before the buffers are reused: each thread
     * waits for its own copies, the barrier for everyone's. */
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();
    auto issue = [&](uint32_t k) {
        for (uint32_t i = threadIdx.x; i < G; i += blockDim.x) cp16(raw[k] + 16u * i, slot + 16u * i);
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    for (uint32_t k = 0; k < K; k++) {
        issue(k);
        if (k + 1u < K) {
            const uint64_t t = gtimer();
            while (gtimer() - t < p.pace_ns) {
            }
        }
    }
    for (uint32_t k = 0;; k = (k + 1u) % K) {
        cp_wait_oldest<K>();
        bool ok = true;
        for (uint32_t i = threadIdx.x; i < G; i += blockDim.x) {
            const uint4 v = ((const uint4 *)raw[k])[i];
            ok = ok && v.y == tag && v.w == tag;
        }
        rounds++;
        if (threadIdx.x == 0) cmd = give_up(p, rounds, t0) ? 1u : 0u;
        if (__syncthreads_and(ok)) {
            for (uint32_t i = threadIdx.x; i < G; i += blockDim.x) {
                const uint4 v = ((const uint4 *)raw[k])[i];
                ((uint2 *)stage)[i] = make_uint2(v.x, v.z);
            }
            if (threadIdx.x == 0) p.rounds[seq % WORK_SLOTS] = rounds;
            __syncthreads();
            return true;
        }
        if (cmd) return false;
        issue(k);
    }
}

// Stages burst `seq` into `stage` (payload order: header, descriptors, frames). Whole CTA.
// Returns false on exit.
__device__ bool stage_burst(const Params &p, uint32_t seq) {
    const uint8_t *slot = p.ring + (uint64_t)(seq % SLOTS) * p.s.slot_bytes;
    const uint64_t t0 = gtimer();
    uint32_t rounds = 0;
    if (!p.tagged_in) {
        if (threadIdx.x == 0) {
            cmd = 0u;
            for (;;) {
                const uint4 g = ld16(slot);
                if (g.z == seq) {
                    ((uint4 *)stage)[0] = g;
                    break;
                }
                if (give_up(p, ++rounds, t0)) { cmd = 1u; break; }
            }
        }
        __syncthreads();
        if (cmd) return false;
        // Granules 1.. of the payload in one round of loads (4 in flight per thread).
        const uint32_t g_total = (p.s.payload + 15u) / 16u;
        for (uint32_t i0 = 1u + threadIdx.x; i0 < g_total; i0 += 4u * blockDim.x) {
            uint4 v[4];
#pragma unroll
            for (uint32_t k = 0; k < 4u; k++) {
                const uint32_t i = i0 + k * blockDim.x;
                if (i < g_total) v[k] = ld16(slot + 16u * i);
            }
#pragma unroll
            for (uint32_t k = 0; k < 4u; k++) {
                const uint32_t i = i0 + k * blockDim.x;
                if (i < g_total) ((uint4 *)stage)[i] = v[k];
            }
        }
        __syncthreads();
        return true;
    }
    if (p.async_k == 1u) return stage_async<1>(p, seq);
    if (p.async_k == 2u) return stage_async<2>(p, seq);
    if (p.async_k == 3u) return stage_async<3>(p, seq);
    if (p.async_k == 4u) return stage_async<4>(p, seq);
    if (p.groups > 1u) return stage_grouped(p, seq);
    // Tagged: each granule = two words {4 payload bytes, tag}; thread t owns granules t, t + T, ...
    const uint32_t tag = seq + 1u, G = p.s.granules_tagged;
    const uint32_t span = p.warp0_poll ? 32u : blockDim.x;
    const bool polls = !p.warp0_poll || threadIdx.x < 32u;
    for (;;) {
        bool ok = true;
        for (uint32_t i0 = threadIdx.x; polls && i0 < G; i0 += 16u * span) {
            uint4 v[16];
            ld16s(v, slot, i0, span, G);
#pragma unroll
            for (uint32_t k = 0; k < 16u; k++) {
                const uint32_t i = i0 + k * span;
                if (i < G) {
                    ok = ok && v[k].y == tag && v[k].w == tag;
                    ((uint2 *)stage)[i] = make_uint2(v[k].x, v[k].z);
                }
            }
        }
        if (threadIdx.x == 0) cmd = give_up(p, ++rounds, t0) ? 1u : 0u;
        if (__syncthreads_and(ok)) {
            if (threadIdx.x == 0) p.rounds[seq % WORK_SLOTS] = rounds;
            return true;
        }
        if (cmd) return false;
    }
}

// Frames [lo, hi) of the staged burst at `st` (this CTA's or CTA 0's shared memory).
__device__ __forceinline__ void st8(uint32_t *p, uint32_t a, uint32_t b) {
    asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(a), "r"(b) : "memory");
}

__device__ void run_frames(const Params &p, uint32_t seq, const uint8_t *st, uint32_t lo, uint32_t hi) {
    const uint32_t slot = seq % SLOTS;
    if (p.spread) {
        const uint32_t f = threadIdx.x / 8u, gl = threadIdx.x % 8u, tag = seq + 1u;
        uint32_t x = 0;
        if (f < p.s.frames) {
            const uint32_t *d = (const uint32_t *)(st + p.s.data_off + f * p.s.fbytes);
            for (uint32_t i = 0; i < p.s.fbytes / 4u; i++) x ^= d[i];
        }
        uint32_t *v = p.verdicts + ((uint64_t)slot * p.s.frames + f) * 4u;
        if (!p.tagged_out) {
            if (gl == 0u && f < p.s.frames) {
                v[0] = x;
                v[1] = tag;
                v[2] = f;
            }
        } else if (p.spread == 1) {
            if (gl == 0u && f < p.s.frames) {
                st8(v, x, tag);
                st8(v + 2, f, tag);
            }
        } else {
            const uint32_t lane = threadIdx.x & 31u, fr = (threadIdx.x >> 5) * 4u + (lane & 7u) / 2u;
            const uint32_t xf = __shfl_sync(0xFFFFFFFFu, x, ((lane & 7u) / 2u) * 8u);
            if (lane < 8u && fr < p.s.frames) {
                uint32_t *w = p.verdicts + ((uint64_t)slot * p.s.frames + fr) * 4u + (lane & 1u) * 2u;
                st8(w, (lane & 1u) ? fr : xf, tag);
            }
        }
        return;
    }
    const uint32_t f = lo + threadIdx.x;
    if (f < hi) {
        const uint32_t *d = (const uint32_t *)(st + p.s.data_off + f * p.s.fbytes);
        uint32_t x = 0;
        for (uint32_t i = 0; i < p.s.fbytes / 4u; i++) x ^= d[i];
        uint32_t *v = p.verdicts + ((uint64_t)slot * p.s.frames + f) * 4u;
        if (p.tagged_out) {
            st16(v, make_uint4(x, seq + 1u, f, seq + 1u));
        } else {
            v[0] = x;
            v[1] = seq + 1u;
            v[2] = f;
        }
    }
}

__device__ __forceinline__ void publish(const Params &p, uint32_t seq, uint32_t part) {
    if (p.tagged_out || threadIdx.x != 0) return;
    uint32_t *d = p.done + (seq % SLOTS) * p.ctas + part;
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(d), "r"(seq + 1u) : "memory");
}

// The stand-in for the stages: every thread walks `steps` dependent loads; thread 0 times it.
__device__ void work(const Params &p, uint32_t seq) {
    if (p.steps == 0u) return;
    __syncthreads();
    const uint64_t t0 = gtimer();
    uint32_t j = (((const uint32_t *)stage)[threadIdx.x % 64u] ^ (threadIdx.x * 2654435761u)) & (TABLE_WORDS - 1u);
    for (uint32_t s = 0; s < p.steps; s++) j = __ldg(p.table + j);
    if (j == 0xFFFFFFFFu) stage[0] = 1; // never: keeps the chain
    __syncthreads();
    if (threadIdx.x == 0) p.work_ns[seq % WORK_SLOTS] = (uint32_t)(gtimer() - t0);
}

__global__ void __launch_bounds__(THREADS) single(Params p) {
    if (threadIdx.x < 8u) g_issue[threadIdx.x] = 0ull;
    if (threadIdx.x == 0) g_period = 0u;
    __syncthreads();
    for (uint32_t seq = 0;; seq++) {
        if (!stage_burst(p, seq)) return;
        work(p, seq);
        __syncthreads();
        const uint64_t t0 = gtimer();
        run_frames(p, seq, stage, 0, p.s.frames);
        __syncthreads();
        if (threadIdx.x == 0) p.store_ns[seq % WORK_SLOTS] = (uint32_t)(gtimer() - t0);
        publish(p, seq, 0);
    }
}

__global__ void __launch_bounds__(THREADS) clustered(Params p) {
    const uint32_t rank = cluster_rank(), k = p.ctas;
    const uint8_t *st0 = map_rank(stage, 0);
    const volatile uint32_t *cmd0 = map_rank(&cmd, 0);
    for (uint32_t seq = 0;; seq++) {
        if (rank == 0 && !stage_burst(p, seq)) {
            if (threadIdx.x == 0) cmd = 1u;
        } else if (rank == 0 && threadIdx.x == 0) {
            cmd = 0u;
        }
        cluster_sync(); // the burst is in CTA 0's shared memory (or exit)
        if (*cmd0) {
            cluster_sync(); // no CTA leaves while another may still read CTA 0's shared memory
            return;
        }
        const uint32_t n = p.s.frames;
        run_frames(p, seq, st0, n * rank / k, n * (rank + 1u) / k);
        __syncthreads();
        publish(p, seq, rank);
        cluster_sync(); // every CTA has read CTA 0's copy before it stages the next burst
    }
}

// ---- host ----

static double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static inline void store16(uint8_t *dst, const uint8_t *src) {
    _mm_store_si128((__m128i *)dst, _mm_loadu_si128((const __m128i *)src));
}

struct Row {
    const char *in, *out, *poll;
    uint32_t ctas;
    double p50, p99, p999, max;
    uint64_t mismatches;
    double work50, work99, store50, store99;
    uint32_t groups;
    double rounds50, round_ns50;
};

static uint32_t *g_rounds_d, *g_round_ns_d, g_groups = 1; /* the row's poll groups */
static uint32_t g_async = 0, g_pace = 500;                  /* the row's async rounds, spacing */
static uint32_t g_gap = 0;                                  /* ns the host waits before each burst */
static const bool g_nt = getenv("RL_NT") != nullptr;        /* tagged in: non-temporal stores */

static Row run(Shape s, bool tin, bool tout, uint32_t ctas, bool warp0, int spread, uint32_t steps,
               const uint32_t *table_d, uint32_t *work_d, uint32_t *store_d, uint32_t bursts, uint8_t *ring_h, uint32_t *done_h, uint32_t *verd_h,
               volatile uint32_t *exit_h, uint8_t *ring_d, uint32_t *done_d, uint32_t *verd_d, uint32_t *exit_d) {
    memset(ring_h, 0xFF, (size_t)SLOTS * s.slot_bytes); // seq / tags that never match
    memset(done_h, 0, SLOTS * 8 * 4);
    memset(verd_h, 0, (size_t)SLOTS * s.frames * 16);
    *exit_h = 0;
    Params p{ring_d, done_d, verd_d, exit_d, s, tin, tout, ctas, warp0, table_d, ctas == 1 ? steps : 0u, work_d,
             spread, store_d, tin ? g_groups : 1u, tin ? g_async : 0u, g_pace, g_rounds_d, g_round_ns_d};
    CK(cudaMemset(g_round_ns_d, 0, WORK_SLOTS * 4));
    cudaStream_t stm;
    CK(cudaStreamCreateWithFlags(&stm, cudaStreamNonBlocking));
    if (ctas == 1) {
        single<<<1, THREADS, 0, stm>>>(p);
    } else {
        launch_cluster(clustered, ctas, THREADS, stm, p);
    }
    CK(cudaGetLastError());
    // 64 distinct bursts of random frames; the payload of each (header, compact descriptors,
    // frames) and each frame's XOR.
    std::vector<std::vector<uint8_t>> pay(64);
    std::vector<std::vector<uint32_t>> want(64);
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    for (uint32_t b = 0; b < 64; b++) {
        pay[b].assign(s.payload + 16, 0);
        uint8_t *pl = pay[b].data();
        *(uint16_t *)pl = (uint16_t)s.frames;
        *(uint32_t *)(pl + 4) = s.frames * s.fbytes;
        for (uint32_t f = 0; f < s.frames; f++) {
            *(uint32_t *)(pl + HDR + 8 * f) = f * s.fbytes;
            *(uint16_t *)(pl + HDR + 8 * f + 4) = (uint16_t)s.fbytes;
        }
        want[b].resize(s.frames);
        for (uint32_t f = 0; f < s.frames; f++) {
            uint32_t x = 0;
            for (uint32_t i = 0; i < s.fbytes / 4; i++) {
                rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
                const uint32_t w = (uint32_t)rng;
                *(uint32_t *)(pl + s.data_off + f * s.fbytes + 4 * i) = w;
                x ^= w;
            }
            want[b][f] = x;
        }
    }
    std::vector<double> lat;
    uint64_t bad = 0;
    const uint32_t warm = 200;
    std::vector<uint8_t> g0(16);
    for (uint32_t seq = 0; seq < warm + bursts; seq++) {
        const uint32_t b = seq % 64, slot = seq % SLOTS, tag = seq + 1;
        uint8_t *sl = ring_h + (size_t)slot * s.slot_bytes;
        const uint8_t *pl = pay[b].data();
        if (g_gap) { /* the host's own work between a burst's verdicts and the next burst */
            const double tg = now_us();
            while (now_us() - tg < g_gap * 1e-3) {
            }
        }
        const double t0 = now_us();
        if (!tin) {
            memcpy(sl + 16, pl + 16, s.payload - 16);
            memcpy(g0.data(), pl, 16);
            *(uint32_t *)(g0.data() + 8) = seq;
            std::atomic_thread_fence(std::memory_order_release);
            store16(sl, g0.data());
        } else {
            // Two words per 16-byte store (atomic on CPUs with AVX); the GPU checks both tags.
            for (uint32_t g = 0; g < s.granules_tagged; g++) {
                const uint32_t *w = (const uint32_t *)(pl + 8 * g);
                __m128i v = _mm_set_epi32((int)tag, (int)w[1], (int)tag, (int)w[0]);
                if (g_nt)
                    _mm_stream_si128((__m128i *)(sl + 16 * g), v);
                else
                    _mm_store_si128((__m128i *)(sl + 16 * g), v);
            }
            if (g_nt) _mm_sfence();
        }
        // Wait for the verdicts.
        const uint32_t *vv = verd_h + (size_t)slot * s.frames * 4;
        const double deadline = t0 + 2e6;
        for (;;) {
            bool fin = true;
            if (tout) {
                for (uint32_t f = 0; f < s.frames && fin; f++) {
                    const uint64_t a = *(volatile const uint64_t *)(vv + 4 * f);
                    const uint64_t c = *(volatile const uint64_t *)(vv + 4 * f + 2);
                    fin = (uint32_t)(a >> 32) == tag && (uint32_t)(c >> 32) == tag;
                }
            } else {
                for (uint32_t k = 0; k < ctas && fin; k++) fin = ((volatile uint32_t *)done_h)[slot * ctas + k] == tag;
            }
            if (fin) break;
            if (now_us() > deadline) {
                fprintf(stderr, "burst %u not done after 2 s (in=%d out=%d ctas=%u)\n", seq, tin, tout, ctas);
                *exit_h = 1;
                exit(1);
            }
        }
        std::atomic_thread_fence(std::memory_order_acquire);
        const double t1 = now_us();
        for (uint32_t f = 0; f < s.frames; f++)
            if (vv[4 * f] != want[b][f] || vv[4 * f + 2] != f) bad++;
        if (seq >= warm) lat.push_back(t1 - t0);
    }
    *exit_h = 1;
    CK(cudaStreamSynchronize(stm));
    CK(cudaStreamDestroy(stm));
    std::sort(lat.begin(), lat.end());
    auto pc = [&](std::vector<double> &v, double q) { return v[std::min(v.size() - 1, (size_t)(q * (v.size() - 1) + 0.5))]; };
    auto col = [&](const uint32_t *dev) {
        std::vector<uint32_t> wn(WORK_SLOTS);
        CK(cudaMemcpy(wn.data(), dev, WORK_SLOTS * 4, cudaMemcpyDeviceToHost));
        std::vector<double> w;
        for (uint32_t q = warm; q < warm + bursts && q < WORK_SLOTS; q++) w.push_back(wn[q] / 1e3);
        std::sort(w.begin(), w.end());
        return w;
    };
    std::vector<double> w = p.steps ? col(work_d) : std::vector<double>();
    std::vector<double> sw = ctas == 1 ? col(store_d) : std::vector<double>();
    std::vector<double> rw = tin && ctas == 1 ? col(g_rounds_d) : std::vector<double>();
    std::vector<double> rn = tin && ctas == 1 ? col(g_round_ns_d) : std::vector<double>();
    return Row{tin ? "tagged" : "plain", tout ? "tagged" : "fence", !tin ? "-" : warp0 ? "warp0" : "all", ctas,
               pc(lat, 0.5), pc(lat, 0.99), pc(lat, 0.999), lat.back(), bad, w.empty() ? 0 : pc(w, 0.5),
               w.empty() ? 0 : pc(w, 0.99), sw.empty() ? 0 : pc(sw, 0.5), sw.empty() ? 0 : pc(sw, 0.99), p.groups,
               rw.empty() ? 0 : pc(rw, 0.5) * 1e3, rn.empty() ? 0 : pc(rn, 0.5)};
}

int main(int argc, char **argv) {
    const uint32_t bursts = argc > 1 ? (uint32_t)atoi(argv[1]) : 5000;
    Shape s{};
    s.frames = argc > 2 ? (uint32_t)atoi(argv[2]) : 32;
    s.fbytes = argc > 3 ? (uint32_t)atoi(argv[3]) : 64;
    const uint32_t steps = argc > 4 ? (uint32_t)atoi(argv[4]) : 0;
    if (s.frames == 0 || s.frames > THREADS || s.fbytes % 16 || s.fbytes == 0) {
        fprintf(stderr, "FRAMES 1..%u, FRAME_BYTES a multiple of 16\n", THREADS);
        return 2;
    }
    s.data_off = (HDR + 8 * s.frames + 15) / 16 * 16;
    s.payload = s.data_off + s.frames * s.fbytes;
    s.granules_tagged = (s.payload + 7) / 8;
    s.slot_bytes = (std::max(s.payload, 2 * s.granules_tagged * 8) + 4095) / 4096 * 4096;
    if (s.payload > STAGE) { fprintf(stderr, "burst does not fit %u B of shared memory\n", STAGE); return 2; }
    uint8_t *ring_h;
    uint32_t *done_h, *verd_h, *exit_h;
    CK(cudaHostAlloc(&ring_h, (size_t)SLOTS * s.slot_bytes, cudaHostAllocMapped));
    CK(cudaHostAlloc(&done_h, SLOTS * 8 * 4, cudaHostAllocMapped));
    CK(cudaHostAlloc(&verd_h, (size_t)SLOTS * s.frames * 16, cudaHostAllocMapped));
    CK(cudaHostAlloc(&exit_h, 64, cudaHostAllocMapped));
    uint8_t *ring_d;
    uint32_t *done_d, *verd_d, *exit_d;
    CK(cudaHostGetDevicePointer(&ring_d, ring_h, 0));
    CK(cudaHostGetDevicePointer(&done_d, done_h, 0));
    CK(cudaHostGetDevicePointer(&verd_d, verd_h, 0));
    CK(cudaHostGetDevicePointer(&exit_d, exit_h, 0));
    // The chain's table: a random permutation cycle, so every walk keeps missing L1.
    std::vector<uint32_t> perm(TABLE_WORDS), table(TABLE_WORDS);
    for (uint32_t i = 0; i < TABLE_WORDS; i++) perm[i] = i;
    uint64_t r = 88172645463325252ull;
    for (uint32_t i = TABLE_WORDS - 1; i > 0; i--) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        std::swap(perm[i], perm[r % (i + 1)]);
    }
    for (uint32_t i = 0; i < TABLE_WORDS; i++) table[perm[i]] = perm[(i + 1) % TABLE_WORDS];
    CK(cudaMalloc(&g_rounds_d, WORK_SLOTS * 4));
    CK(cudaMalloc(&g_round_ns_d, WORK_SLOTS * 4));
    uint32_t *table_d, *work_d, *store_d;
    CK(cudaMalloc(&table_d, TABLE_WORDS * 4));
    CK(cudaMalloc(&work_d, WORK_SLOTS * 4));
    CK(cudaMalloc(&store_d, WORK_SLOTS * 4));
    CK(cudaMemcpy(table_d, table.data(), TABLE_WORDS * 4, cudaMemcpyHostToDevice));
    printf("ring_lat: %u bursts of %u x %u B frames (payload %u B, tagged %u B), %u dependent loads of work, us\n",
           bursts, s.frames, s.fbytes, s.payload, s.granules_tagged * 16, steps);
    struct V { int tin, tout; bool warp0; uint32_t ctas; int spread; uint32_t groups, async_k, pace, gap = 0; };
    std::vector<V> vs = {{0, 0, false, 1, 0, 1}, {0, 1, false, 1, 0, 1}, {1, 0, false, 1, 0, 1}, {1, 1, false, 1, 0, 1},
                         {1, 0, true, 1, 0, 1},  {1, 1, true, 1, 0, 1},  {0, 0, false, 4, 0, 1}, {1, 1, false, 4, 0, 1},
                         {1, 0, false, 1, 1, 1}, {1, 1, false, 1, 1, 1}, {1, 1, false, 1, 2, 1}};
    // RL_GROUPS=1: only tagged in / out with 1, 2, 4, 8 poll groups, three interleaved rounds.
    if (getenv("RL_GROUPS")) {
        vs.clear();
        for (int r = 0; r < 3; r++)
            for (uint32_t g : {1u, 2u, 4u, 8u}) vs.push_back({1, 1, false, 1, 0, g, 0, 0});
    }
    // RL_ASYNC=1: tagged in / out, the register poll against K = 1..4 cp.async rounds in flight
    // (spacing 2000 / K ns and 1000 / K ns), three interleaved rounds.
    if (getenv("RL_ASYNC")) {
        vs.clear();
        for (int r = 0; r < 3; r++) {
            vs.push_back({1, 1, false, 1, 0, 1, 0, 0});
            for (uint32_t k : {1u, 2u, 3u, 4u}) vs.push_back({1, 1, false, 1, 0, 1, k, 2000u / k});
            for (uint32_t k : {2u, 4u}) vs.push_back({1, 1, false, 1, 0, 1, k, 1000u / k});
        }
    }
    // RL_GAPS=1: tagged in / out, one round against two in flight, the host waiting 0-2000 ns
    // between seeing a burst's verdicts and writing the next (a closed loop's own work).
    if (getenv("RL_GAPS")) {
        vs.clear();
        for (uint32_t gap = 0; gap <= 2000u; gap += 250u) {
            vs.push_back({1, 1, false, 1, 0, 1, 0, 0, gap});
            vs.push_back({1, 1, false, 1, 0, 1, 2, 1000, gap});
        }
    }
    printf("%-7s %-7s %-6s %4s %6s %6s %5s %5s %8s %8s %8s %8s %10s %8s %8s %8s %8s %8s %8s %6s\n", "in", "out", "poll", "ctas",
           "spread", "groups", "async", "pace", "p50", "p99", "p99.9", "max", "mismatch", "work50", "work99", "store50", "store99",
           "rounds", "roundus", "gap_ns");
    for (const V &v : vs) {
        if (v.groups > 1u && s.granules_tagged > 16u * (THREADS / v.groups)) continue; /* stage_grouped's v[16] */
        g_groups = v.groups;
        g_async = v.async_k;
        g_pace = v.pace;
        g_gap = v.gap;
        if (v.async_k && s.granules_tagged * 16u > RAW_BYTES) continue; /* raw buffers */
        const Row r = run(s, v.tin, v.tout, v.ctas, v.warp0, v.spread, steps, table_d, work_d, store_d, bursts, ring_h,
                          done_h, verd_h, exit_h, ring_d, done_d, verd_d, exit_d);
        printf("%-7s %-7s %-6s %4u %6d %6u %5u %5u %8.2f %8.2f %8.2f %8.2f %10llu %8.2f %8.2f %8.2f %8.2f %8.0f %8.2f %6u\n", r.in,
               r.out, r.poll, r.ctas, v.spread, r.groups, v.async_k, v.pace, r.p50, r.p99, r.p999, r.max, (unsigned long long)r.mismatches,
               r.work50, r.work99, r.store50, r.store99, r.rounds50, r.round_ns50, v.gap);
        fflush(stdout);
    }
    return 0;
}
