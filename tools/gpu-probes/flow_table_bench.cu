/* Flow lookups, updates and inserts per second on the GPU with FLOWS flows resident in device
 * memory, through the conntrack stage's own code (cuda/flow.cuh, the per-frame steps of
 * cuda/flow_bench.cuh, the stage's per-flow order of cuda/flow_order.cuh); docs/flow-table.md,
 * "GPU benchmark". QUEUES tables (a CTA each, as the executor runs a queue), each sized by the
 * config's rule (25% above its flows: ENTRIES_PCT), filled until exactly FLOWS flows are
 * resident (inserts timed), scanned back to their flows (every entry must be the flow its time
 * names), then timed: lookups (a read-only bucket visit) and lookup+update (pw_flow_apply_pkt
 * of an existing flow's ACK, in the stage's flow order), uniform over the resident flows and
 * Zipf-like. Every answer is checked: a lookup that finds another slot than its flow's, an
 * update that does not find its flow, an insert that does not make one, or a table that does
 * not hold what was counted fails the run (exit 1).
 *
 * Build (scripts/gpu-carry.sh does, with the pinned nvcc):
 *   nvcc -O3 -std=c++17 -arch=sm_90 -I gpu-kernels/cuda tools/gpu-probes/flow_table_bench.cu -o flow_table_bench
 * Run: flow_table_bench [FLOWS=10000000] [QUEUES=1024] [ENTRIES_PCT=125] [REPS=5] [ZIPF=0.99] [PHASE_S=60]
 * Each phase (fill, scan, lookups, updates, check) prints a line as it starts and as it ends,
 * flushed, so a run cut short shows how far it got; a phase whose kernels have not finished in
 * PHASE_S seconds ends the run (exit 3, naming the phase), a failed launch or CUDA call too
 * (exit 2, naming the kernel or call).
 * Last line: the summary (lookups/s, updates/s, inserts/s, the GPU's name). */
#define PW_PIPELINE_COMPOSED 1
#include "flow_bench.cuh"
#include "flow_order.cuh"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <vector>

/* A line on stdout, flushed at once (stdout is a pipe under the suite: fully buffered). */
static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* Ends the run at once: a kernel may still run, and exit() would wait for the CUDA runtime's
 * teardown behind it; the driver frees the context when the process ends. */
static void quit(int code) {
    fflush(stdout);
    fflush(stderr);
    _exit(code);
}

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "flow-table-bench: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
            quit(2);                                                                               \
        }                                                                                          \
    } while (0)

/* Right after a launch: a launch the device refused (grid, resources) names its kernel. */
#define CK_LAUNCH(kernel, grid, block)                                                             \
    do {                                                                                           \
        cudaError_t e_ = cudaGetLastError();                                                       \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "flow-table-bench: launch of %s (%llu blocks of %u threads): %s\n", kernel, \
                    (unsigned long long)(grid), (unsigned)(block), cudaGetErrorString(e_));         \
            quit(2);                                                                               \
        }                                                                                          \
    } while (0)

/* Seconds a phase may take (PHASE_S). */
static double g_phase_limit_s = 60.0;

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* Waits for `done` (recorded after the phase's kernels) at most the phase's limit from `t0`:
 * a kernel that faults is named with the phase, one that does not finish ends the run. */
static void wait_phase(const char *phase, cudaEvent_t done, double t0) {
    for (;;) {
        const cudaError_t e = cudaEventQuery(done);
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady) {
            fprintf(stderr, "flow-table-bench: %s: %s\n", phase, cudaGetErrorString(e));
            quit(2);
        }
        if (now_s() - t0 > g_phase_limit_s) {
            say("flow-table-bench: %s did not finish in %.0f s (PHASE_S): a kernel hangs or the size is too "
                "large for the limit\n",
                phase, g_phase_limit_s);
            quit(3);
        }
        usleep(1000);
    }
}

static const uint32_t THREADS = 256; /* a composed kernel's round (PW_ORDER_MAX) */
static const uint32_t ROUNDS = 64;   /* lookups / updates a thread a launch */
static const uint32_t LOOKUP_SPLIT = 4; /* lookup blocks a queue */

__device__ unsigned long long g_wrong; /* wrong answers of any kernel */

__device__ uint64_t atomic_read(uint64_t *p) { return atomicAdd((unsigned long long *)p, 0ull); }

/* Block q fills queue q's table until `target` of its flows are resident (created minus
 * evicted), a round of at most THREADS candidates at a time in the stage's flow order. */
__global__ void fb_fill(pw_flow_table all, pw_flow_counters *ctr, uint32_t queues, uint32_t flows,
                        uint64_t max_candidates, unsigned long long *candidates) {
    const uint32_t q = blockIdx.x, tid = threadIdx.x;
    const pw_flow_table t = pw_fb_queue_table(&all, q);
    pw_flow_counters *c = &ctr[q];
    const uint64_t target = flows / queues + (q < flows % queues ? 1u : 0u);
    __shared__ uint64_t s_tried;
    __shared__ uint32_t s_n;
    if (tid == 0) s_tried = 0;
    uint32_t wrong = 0;
    for (;;) {
        __syncthreads();
        if (tid == 0) {
            const uint64_t resident = atomic_read(&c->created) - atomic_read(&c->early_evicted);
            uint64_t n = resident >= target ? 0 : target - resident;
            if (n > THREADS) n = THREADS;
            if (s_tried + n > max_candidates) {
                wrong++; /* the flows cannot be made resident: the table is too small */
                n = 0;
            }
            s_n = (uint32_t)n;
        }
        __syncthreads();
        const uint32_t n = s_n;
        if (n == 0) break;
        pw_order_round_begin();
        if (tid < n) {
            const uint32_t f = pw_fb_candidate(q, queues, s_tried + tid);
            pw_flow_pkt p;
            pw_fb_pkt(&t, f, 0u, PW_FB_ACK, &p);
            pw_order_publish(p.bucket);
            pw_order_wait(p.bucket);
            wrong += f == PW_FB_NONE ? 1u : pw_fb_insert(&t, c, &p, f);
            pw_order_done();
        } else {
            pw_order_skip();
        }
        __syncthreads();
        if (tid == 0) s_tried += n;
    }
    if (tid == 0) atomicAdd(candidates, (unsigned long long)s_tried);
    if (wrong) atomicAdd(&g_wrong, (unsigned long long)wrong);
}

/* Every entry back to its flow: queue q's resident list (res, nres[q]); a wrong entry counts. */
__global__ void fb_scan(pw_flow_table all, uint32_t queues, pw_fb_res *res, uint32_t *nres) {
    const uint64_t per_queue = (uint64_t)all.nbuckets * PW_FLOW_BUCKET, total = per_queue * queues;
    uint32_t wrong = 0;
    for (uint64_t g = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; g < total; g += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t q = (uint32_t)(g / per_queue), slot = (uint32_t)(g % per_queue);
        const pw_flow_table t = pw_fb_queue_table(&all, q);
        const uint32_t f = pw_fb_scan_entry(&t, q, queues, slot);
        if (f == PW_FB_BAD) {
            wrong++;
        } else if (f != PW_FB_NONE) {
            res[q * per_queue + atomicAdd(&nres[q], 1u)] = pw_fb_res{slot, f};
        }
    }
    if (wrong) atomicAdd(&g_wrong, (unsigned long long)wrong);
}

/* Block b: ROUNDS lookups a thread in queue b % queues's table. Lookups change nothing, so
 * LOOKUP_SPLIT blocks share a queue (more waves of blocks, a shorter tail than one a queue). */
__global__ void fb_lookup(pw_flow_table all, uint32_t queues, const pw_fb_res *res, const uint32_t *nres, uint64_t seed,
                          double zipf) {
    const uint32_t q = blockIdx.x % queues, part = blockIdx.x / queues;
    const pw_flow_table t = pw_fb_queue_table(&all, q);
    const pw_fb_res *r = res + (uint64_t)q * all.nbuckets * PW_FLOW_BUCKET;
    const uint32_t n = nres[q];
    uint32_t wrong = 0;
    for (uint32_t k = 0; k < ROUNDS; k++)
        wrong += pw_fb_lookup(&t, r, n, q, ((uint64_t)part * ROUNDS + k) * blockDim.x + threadIdx.x, seed, zipf);
    if (wrong) atomicAdd(&g_wrong, (unsigned long long)wrong);
}

/* Block q: ROUNDS rounds of THREADS updates in queue q's table, in the stage's flow order (a hot
 * flow's frames of one round one after another, as the conntrack stage applies them). */
__global__ void fb_update(pw_flow_table all, pw_flow_counters *ctr, const pw_fb_res *res, const uint32_t *nres,
                          uint64_t seed, double zipf) {
    const uint32_t q = blockIdx.x;
    const pw_flow_table t = pw_fb_queue_table(&all, q);
    const pw_fb_res *r = res + (uint64_t)q * all.nbuckets * PW_FLOW_BUCKET;
    const uint32_t n = nres[q];
    uint32_t wrong = 0;
    for (uint32_t k = 0; k < ROUNDS; k++) {
        pw_flow_pkt p;
        pw_fb_update_pkt(&t, r, n, q, (uint64_t)k * blockDim.x + threadIdx.x, seed, zipf, &p);
        pw_order_round_begin();
        pw_order_publish(p.bucket);
        pw_order_wait(p.bucket);
        wrong += pw_fb_update_apply(&t, &ctr[q], &p);
        pw_order_done();
        __syncthreads();
    }
    if (wrong) atomicAdd(&g_wrong, (unsigned long long)wrong);
}

/* Sum of every entry's reply packets (each update adds one to its flow's). */
__global__ void fb_reply_packets(pw_flow_table all, uint64_t total, unsigned long long *sum) {
    unsigned long long s = 0;
    for (uint64_t g = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; g < total; g += (uint64_t)gridDim.x * blockDim.x)
        s += all.entries[g].packets[1];
    atomicAdd(sum, s);
}

static unsigned long long wrong_now() {
    unsigned long long w = 0;
    CK(cudaMemcpyFromSymbol(&w, g_wrong, sizeof w));
    return w;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* Lookups and lookup+updates, uniform then Zipf (`rate[zipf?][update?]`: the median of REPS
 * launches after a warm-up one), each kind a phase bounded by PHASE_S. Returns the updates made. */
static uint64_t timed_runs(const pw_flow_table &all, pw_flow_counters *ctr, const pw_fb_res *res, const uint32_t *nres,
                           uint32_t queues, uint32_t reps, double zipf, cudaEvent_t e0, cudaEvent_t e1,
                           double rate[2][2]) {
    const uint64_t per_update_launch = (uint64_t)queues * THREADS * ROUNDS;
    const uint64_t per_lookup_launch = per_update_launch * LOOKUP_SPLIT;
    uint64_t updates = 0;
    for (int z = 0; z < 2; z++) {
        const double s = z ? zipf : 0.0;
        for (int kind = 0; kind < 2; kind++) {
            const uint64_t per_launch = kind ? per_update_launch : per_lookup_launch;
            std::vector<double> r;
            char phase[64];
            snprintf(phase, sizeof phase, "%s %s", kind ? "lookup+update" : "lookup", z ? "zipf" : "uniform");
            say("%s: %u launches of %llu ...\n", phase, reps + 1u, (unsigned long long)per_launch);
            const double t0 = now_s();
            for (uint32_t i = 0; i <= reps; i++) { /* launch 0 warms up, not counted */
                CK(cudaEventRecord(e0));
                if (kind == 0) {
                    fb_lookup<<<queues * LOOKUP_SPLIT, THREADS>>>(all, queues, res, nres, 1000u + i, s);
                    CK_LAUNCH("fb_lookup", (uint64_t)queues * LOOKUP_SPLIT, THREADS);
                } else {
                    fb_update<<<queues, THREADS>>>(all, ctr, res, nres, 2000u + i, s);
                    CK_LAUNCH("fb_update", queues, THREADS);
                }
                CK(cudaEventRecord(e1));
                wait_phase(phase, e1, t0);
                float ms = 0;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                if (i) r.push_back(per_launch / (ms / 1e3));
                if (kind == 1) updates += per_launch;
            }
            rate[z][kind] = median(r);
            say("%s: %llu a launch, median of %u: %.3f G/s (%.2f ns each), %llu wrong so far\n", phase,
                (unsigned long long)per_launch, reps, rate[z][kind] / 1e9, 1e9 / rate[z][kind], wrong_now());
        }
    }
    return updates;
}

int main(int argc, char **argv) {
    const uint32_t flows = argc > 1 ? (uint32_t)strtoul(argv[1], 0, 10) : 10000000u;
    const uint32_t queues = argc > 2 ? (uint32_t)strtoul(argv[2], 0, 10) : 1024u;
    const uint32_t pct = argc > 3 ? (uint32_t)strtoul(argv[3], 0, 10) : 125u;
    const uint32_t reps = argc > 4 ? (uint32_t)strtoul(argv[4], 0, 10) : 5u;
    const double zipf = argc > 5 ? strtod(argv[5], 0) : 0.99;
    g_phase_limit_s = argc > 6 ? strtod(argv[6], 0) : 60.0;
    if (queues == 0 || queues > (1u << 20) || flows < queues || pct < 100 || pct > 1000 || reps == 0 || reps > 1000 ||
        zipf <= 0.0 || zipf == 1.0 || flows >= PW_FB_BAD || !(g_phase_limit_s > 0.0)) {
        fprintf(stderr, "usage: flow_table_bench [FLOWS>=QUEUES] [QUEUES 1..1048576] [ENTRIES_PCT 100..1000] [REPS 1..1000] "
                        "[ZIPF>0, !=1] [PHASE_S>0]\n");
        return 2;
    }
    say("flow-table-bench: %u flows, %u queues, entries %u%%, %u reps, zipf %.2f, %.0f s a phase at most\n", flows,
        queues, pct, reps, zipf, g_phase_limit_s);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const uint64_t most = (flows + queues - 1u) / queues;
    const uint64_t epq = (most * pct / 100 + PW_FLOW_BUCKET - 1) / PW_FLOW_BUCKET * PW_FLOW_BUCKET;
    const uint64_t total = epq * queues, bytes = total * PW_FLOW_ENTRY_SIZE;
    say("flow-table-bench: %s (%d SMs), %u flows in %u tables of %llu entries (%.2f GB), zipf %.2f\n", prop.name,
        prop.multiProcessorCount, flows, queues, (unsigned long long)epq, bytes / 1e9, zipf);
    size_t free_b = 0, total_b = 0;
    CK(cudaMemGetInfo(&free_b, &total_b));
    const uint64_t need = bytes + total * sizeof(pw_fb_res) + queues * (sizeof(pw_flow_counters) + sizeof(uint32_t));
    if (need > free_b) {
        say("flow-table-bench: needs %.2f GB of device memory, %.2f GB free\n", need / 1e9, free_b / 1e9);
        quit(2);
    }
    pw_flow_table all;
    CK(cudaMalloc(&all.entries, bytes));
    CK(cudaMemset(all.entries, 0, bytes));
    all.nbuckets = (uint32_t)(epq / PW_FLOW_BUCKET);
    all.seed = 0x5eedu;
    all.strict = 0;
    all.reserved = 0;
    for (uint32_t i = 0; i < PW_FLOW_TCLASSES; i++) all.timeout_ns[i] = 3600ull * 1000000000ull;
    pw_flow_counters *ctr;
    pw_fb_res *res;
    uint32_t *nres;
    unsigned long long *dsum;
    CK(cudaMalloc(&ctr, queues * sizeof(pw_flow_counters)));
    CK(cudaMemset(ctr, 0, queues * sizeof(pw_flow_counters)));
    CK(cudaMalloc(&res, total * sizeof(pw_fb_res)));
    CK(cudaMalloc(&nres, queues * sizeof(uint32_t)));
    CK(cudaMemset(nres, 0, queues * sizeof(uint32_t)));
    CK(cudaMalloc(&dsum, sizeof(unsigned long long)));
    CK(cudaMemset(dsum, 0, sizeof(unsigned long long)));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float ms = 0;
    bool ok = true;

    /* Inserts: the fill. A queue whose table cannot take its flows stops after 8 x its entries
     * of candidates (counted wrong), so the fill ends whatever the table's state. */
    say("fill: %u flows into %u tables ...\n", flows, queues);
    double t0 = now_s();
    CK(cudaEventRecord(e0));
    fb_fill<<<queues, THREADS>>>(all, ctr, queues, flows, 8 * epq, dsum);
    CK_LAUNCH("fb_fill", queues, THREADS);
    CK(cudaEventRecord(e1));
    wait_phase("fill", e1, t0);
    CK(cudaEventElapsedTime(&ms, e0, e1));
    unsigned long long candidates = 0;
    CK(cudaMemcpy(&candidates, dsum, sizeof candidates, cudaMemcpyDeviceToHost));
    std::vector<pw_flow_counters> hc(queues);
    CK(cudaMemcpy(hc.data(), ctr, queues * sizeof(pw_flow_counters), cudaMemcpyDeviceToHost));
    uint64_t created = 0, evicted = 0, full = 0;
    for (const auto &c : hc) created += c.created, evicted += c.early_evicted, full += c.table_full;
    const double insert_rate = candidates / (ms / 1e3);
    say("fill: %llu inserts (%llu created, %llu early evictions, %llu table full) in %.1f ms: %.1f M inserts/s\n",
        candidates, (unsigned long long)created, (unsigned long long)evicted, (unsigned long long)full, ms,
        insert_rate / 1e6);
    if (wrong_now() != 0)
        say("fill: %llu wrong inserts or queues out of candidates (a table too small for its flows)\n",
            wrong_now());

    /* Every entry back to its flow; exactly `flows` resident. */
    say("scan: %llu entries ...\n", (unsigned long long)total);
    t0 = now_s();
    fb_scan<<<prop.multiProcessorCount * 8, 256>>>(all, queues, res, nres);
    CK_LAUNCH("fb_scan", prop.multiProcessorCount * 8, 256);
    CK(cudaEventRecord(e1));
    wait_phase("scan", e1, t0);
    std::vector<uint32_t> hn(queues);
    CK(cudaMemcpy(hn.data(), nres, queues * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    uint64_t resident = 0;
    for (uint32_t q = 0; q < queues; q++) {
        resident += hn[q];
        if (hn[q] != hc[q].created - hc[q].early_evicted) ok = false;
    }
    say("scan: %llu flows resident (%.1f%% of the entries), %llu wrong so far, %.1f s\n", (unsigned long long)resident,
        100.0 * resident / total, wrong_now(), now_s() - t0);
    if (resident != flows || created - evicted != flows) ok = false;
    /* Lookups and updates draw from each queue's resident flows: a queue without one has none. */
    for (uint32_t q = 0; q < queues; q++) {
        if (hn[q] == 0) {
            say("flow-table-bench: queue %u holds no flow after the fill: WRONG RESULTS\n", q);
            quit(1);
        }
    }

    /* Lookups and updates, uniform then Zipf: the median of REPS launches each. */
    double rate[2][2];
    const uint64_t updates = timed_runs(all, ctr, res, nres, queues, reps, zipf, e0, e1, rate);
    /* Each update found its flow: no flow was made, and the flows' reply packets are the updates. */
    say("check: %llu entries ...\n", (unsigned long long)total);
    t0 = now_s();
    CK(cudaMemset(dsum, 0, sizeof(unsigned long long)));
    fb_reply_packets<<<prop.multiProcessorCount * 8, 256>>>(all, total, dsum);
    CK_LAUNCH("fb_reply_packets", prop.multiProcessorCount * 8, 256);
    CK(cudaEventRecord(e1));
    wait_phase("check", e1, t0);
    unsigned long long replies = 0;
    CK(cudaMemcpy(&replies, dsum, sizeof replies, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hc.data(), ctr, queues * sizeof(pw_flow_counters), cudaMemcpyDeviceToHost));
    uint64_t created_after = 0;
    for (const auto &c : hc) created_after += c.created;
    const unsigned long long wrong = wrong_now();
    say("check: %llu wrong answers, %llu reply packets for %llu updates, %llu flows made by updates\n", wrong,
        replies, (unsigned long long)updates, (unsigned long long)(created_after - created));
    if (wrong != 0 || replies != updates || created_after != created) ok = false;
    say("flow-table-bench: %s: %llu flows resident (%.2f GB): lookups %.2f G/s uniform, %.2f G/s zipf %.2f; "
           "lookup+update %.2f / %.2f G/s; inserts %.0f M/s; %s; goal >= 1 G lookups/s %s\n",
           prop.name, (unsigned long long)resident, bytes / 1e9, rate[0][0] / 1e9, rate[1][0] / 1e9, zipf,
           rate[0][1] / 1e9, rate[1][1] / 1e9, insert_rate / 1e6, ok ? "every answer checked, 0 wrong" : "WRONG RESULTS",
           std::min(rate[0][0], rate[1][0]) >= 1e9 ? "met" : "NOT met");
    quit(ok ? 0 : 1);
}
