// The flow-table benchmark (tools/gpu-probes/flow_table_bench.cu) run on the host with its own
// per-frame steps (cuda/flow_bench.cuh over flow.cuh): the same fill, scan, lookups and
// updates, each queue's "threads" one after another in arrival order (what flow_order.cuh gives
// the GPU), on a small table; pipeline/flow/tests/flow_bench_cuda_host.rs checks the results.
#include <vector>

#include "flow_bench.cuh"

namespace {

// Fields of pw_host_flow_bench's `out`.
enum {
    FB_RESIDENT,
    FB_CANDIDATES,
    FB_CREATED,
    FB_EVICTED,
    FB_TABLE_FULL,
    FB_INSERT_WRONG,
    FB_SCAN_BAD,
    FB_LOOKUPS,
    FB_LOOKUP_WRONG,
    FB_UPDATES,
    FB_UPDATE_WRONG,
    FB_REPLY_PACKETS,
    FB_CREATED_AFTER,
    FB_FIELDS
};

// Queue q's flows resident: `target` of them, candidates tried in order, rounds of `threads`
// (as the GPU's block takes them); false when the candidates run out first.
bool fill_queue(const pw_flow_table *t, pw_flow_counters *c, uint32_t q, uint32_t queues, uint64_t target,
                uint32_t threads, uint64_t max_candidates, uint64_t *candidates, uint64_t *wrong) {
    uint64_t tried = 0;
    for (;;) {
        const uint64_t resident = c->created - c->early_evicted;
        if (resident >= target) break;
        uint64_t n = target - resident;
        if (n > threads) n = threads;
        if (tried + n > max_candidates) return false;
        for (uint64_t k = 0; k < n; k++) {
            const uint32_t f = pw_fb_candidate(q, queues, tried + k);
            if (f == PW_FB_NONE) return false;
            pw_flow_pkt p;
            pw_fb_pkt(t, f, 0u, PW_FB_ACK, &p);
            *wrong += pw_fb_insert(t, c, &p, f);
        }
        tried += n;
    }
    *candidates += tried;
    return true;
}

}  // namespace

// The benchmark's logic on the host: `flows` made resident in `queues` tables of
// `entries_per_queue` entries (rounds of `threads` inserts), every table scanned back to its
// flows, then `rounds * threads` lookups and as many updates a queue (uniform when zipf <= 0,
// else Zipf-like). `lookup_seed_xor` != 0 looks up and updates in a table of another hash seed
// (every answer then wrong: the check must see it). Fills out[FB_FIELDS] (above). Returns 0,
// 1 for parameters out of range, 2 when the flows could not be made resident.
extern "C" uint32_t pw_host_flow_bench(uint32_t flows, uint32_t queues, uint32_t entries_per_queue, uint32_t threads,
                                       uint32_t rounds, double zipf, uint32_t lookup_seed_xor, uint64_t *out) {
    for (uint32_t i = 0; i < FB_FIELDS; i++) out[i] = 0;
    if (queues == 0 || flows < queues || threads == 0 || threads > 256u || entries_per_queue == 0 ||
        entries_per_queue % PW_FLOW_BUCKET != 0 || (uint64_t)entries_per_queue * queues > (1ull << 26) ||
        (flows + queues - 1u) / queues > entries_per_queue || zipf == 1.0)
        return 1;
    std::vector<pw_flow_entry> entries((size_t)entries_per_queue * queues);
    for (auto &e : entries) pw_flow_entry_zero(&e);
    std::vector<pw_flow_counters> ctr(queues, pw_flow_counters{0, 0, 0, 0, 0, 0});
    std::vector<pw_fb_res> res((size_t)entries_per_queue * queues);
    std::vector<uint32_t> nres(queues, 0);
    pw_flow_table all;
    all.entries = entries.data();
    all.nbuckets = entries_per_queue / PW_FLOW_BUCKET;
    all.seed = 0x5eedu;
    all.strict = 0;
    all.reserved = 0;
    for (uint32_t i = 0; i < PW_FLOW_TCLASSES; i++) all.timeout_ns[i] = 3600ull * 1000000000ull;
    for (uint32_t q = 0; q < queues; q++) {
        const pw_flow_table t = pw_fb_queue_table(&all, q);
        const uint64_t target = flows / queues + (q < flows % queues ? 1u : 0u);
        if (!fill_queue(&t, &ctr[q], q, queues, target, threads, 8ull * entries_per_queue, &out[FB_CANDIDATES],
                        &out[FB_INSERT_WRONG]))
            return 2;
        out[FB_CREATED] += ctr[q].created;
        out[FB_EVICTED] += ctr[q].early_evicted;
        out[FB_TABLE_FULL] += ctr[q].table_full;
        for (uint32_t s = 0; s < entries_per_queue; s++) {
            const uint32_t f = pw_fb_scan_entry(&t, q, queues, s);
            if (f == PW_FB_BAD) {
                out[FB_SCAN_BAD]++;
            } else if (f != PW_FB_NONE) {
                res[(size_t)q * entries_per_queue + nres[q]++] = pw_fb_res{s, f};
            }
        }
        out[FB_RESIDENT] += nres[q];
    }
    all.seed ^= lookup_seed_xor;
    const uint64_t per_queue = (uint64_t)rounds * threads;
    for (uint32_t q = 0; q < queues; q++) {
        const pw_flow_table t = pw_fb_queue_table(&all, q);
        const pw_fb_res *r = &res[(size_t)q * entries_per_queue];
        if (nres[q] == 0) continue;
        for (uint64_t j = 0; j < per_queue; j++) out[FB_LOOKUP_WRONG] += pw_fb_lookup(&t, r, nres[q], q, j, 1u, zipf);
        out[FB_LOOKUPS] += per_queue;
        for (uint64_t j = 0; j < per_queue; j++) {
            pw_flow_pkt p;
            pw_fb_update_pkt(&t, r, nres[q], q, j, 2u, zipf, &p);
            out[FB_UPDATE_WRONG] += pw_fb_update_apply(&t, &ctr[q], &p);
        }
        out[FB_UPDATES] += per_queue;
        out[FB_CREATED_AFTER] += ctr[q].created;
    }
    for (const auto &e : entries) out[FB_REPLY_PACKETS] += e.packets[1];
    return 0;
}

// pw_fb_pkt of flow f (reply 0: the client's ACK, 1: the server's) in a table of `nbuckets`
// buckets and hash `seed`: the key's 40 bytes, then out4 = bucket, IP length, TCP flags, from_a.
extern "C" uint32_t pw_host_flow_bench_pkt(uint32_t f, uint32_t reply, uint32_t seed, uint32_t nbuckets,
                                           uint8_t *key40, uint32_t *out4) {
    if (nbuckets == 0) return 1;
    pw_flow_table t;
    t.entries = 0;
    t.nbuckets = nbuckets;
    t.seed = seed;
    pw_flow_pkt p;
    pw_fb_pkt(&t, f, reply, PW_FB_ACK, &p);
    const uint8_t *k = (const uint8_t *)&p.key;
    for (uint32_t i = 0; i < sizeof(pw_flow_key); i++) key40[i] = k[i];
    out4[0] = p.bucket;
    out4[1] = p.ip_len;
    out4[2] = p.tcp_flags;
    out4[3] = p.from_a;
    return 0;
}

// pw_fb_pick: request j's position among n resident flows of queue q (n > 0).
extern "C" uint32_t pw_host_flow_bench_pick(uint64_t seed, uint32_t q, uint64_t j, uint32_t n, double zipf) {
    return n == 0 ? 0u : pw_fb_pick(seed, q, j, n, zipf);
}
