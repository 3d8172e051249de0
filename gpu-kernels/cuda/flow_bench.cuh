/* The flow-table benchmark's per-frame steps (tools/gpu-probes/flow_table_bench.cu on the GPU,
 * host/flow_bench_host.cpp for the host, where pipeline/flow/tests/flow_bench_cuda_host.rs checks
 * the logic): flows made, found and updated by the functions of flow.cuh the conntrack stage runs
 * (pw_flow_hash, pw_flow_apply_pkt), never a copy of them. docs/flow-table.md, "GPU benchmark".
 *
 * The traffic: flow f is TCP over IPv4 from client 10.(f & 0xffffff):(1024 + (f >> 24)) to
 * server 192.168.0.1:443; queue q's table holds the flows f with f % queues == q (the steering
 * a queue's flows by their hash would give). A flow is made by its client's ACK (picked up
 * ESTABLISHED, Linux's tcp_loose) at time T0 + f, so its entry's first-seen time names it: a
 * scan of the table maps every entry back to its flow, independently of the hash path. The
 * packets are built as pw_flow_classify leaves them (key, bucket, length, flags): the frame's
 * parse and classify are not part of what is timed. Portable C subset (PW_DEVICE). */
#ifndef PKTWARP_FLOW_BENCH_CUH
#define PKTWARP_FLOW_BENCH_CUH

#include "flow.cuh"
#if !PW_GPU
#include <math.h>
#endif

/* First-seen time of flow 0 (ns); flow f is made at PW_FB_T0 + f. */
#define PW_FB_T0 1000000000ull
/* The time of lookups and updates: after every insert, long before any timeout. */
#define PW_FB_NOW (PW_FB_T0 + (1ull << 33))
/* No slot / no flow. */
#define PW_FB_NONE 0xffffffffu
/* An entry that is not the flow its time names (wrong key, bucket or queue). */
#define PW_FB_BAD 0xfffffffeu
#define PW_FB_ACK 0x10u

/* A resident flow and its slot in its queue's table (the scan's list, what lookups draw from). */
typedef struct pw_fb_res {
    uint32_t slot;
    uint32_t flow;
} pw_fb_res;

/* splitmix64's finalizer: the request stream, a pure function of (seed, queue, request). */
PW_DEVICE uint64_t pw_fb_mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Queue q's table: `all` describes one queue's table (nbuckets, seed, timeouts) at queue 0. */
PW_DEVICE pw_flow_table pw_fb_queue_table(const pw_flow_table *all, uint32_t q) {
    pw_flow_table t = *all;
    t.entries = all->entries + (uint64_t)q * all->nbuckets * PW_FLOW_BUCKET;
    return t;
}

/* Flow f's TCP segment with `flags`, from the client (reply 0) or the server (reply 1), as
 * pw_flow_classify makes it of such a frame: the canonical key, its bucket in `t`. */
PW_DEVICE void pw_fb_pkt(const pw_flow_table *t, uint32_t f, uint32_t reply, uint32_t flags, pw_flow_pkt *p) {
    const uint32_t client[4] = {0x0a000000u | (f & 0xffffffu), 0u, 0u, 0u};
    const uint32_t server[4] = {0xc0a80001u, 0u, 0u, 0u};
    const uint16_t cport = (uint16_t)(1024u + (f >> 24)), sport = 443u;
    const uint32_t *src = reply ? server : client, *dst = reply ? client : server;
    const uint16_t sp = reply ? sport : cport, dp = reply ? cport : sport;
    const bool from_a = pw_flow_ep_le(src, sp, dst, dp);
    for (uint32_t i = 0; i < 4u; i++) {
        p->key.addr[0][i] = from_a ? src[i] : dst[i];
        p->key.addr[1][i] = from_a ? dst[i] : src[i];
    }
    p->key.port[0] = from_a ? sp : dp;
    p->key.port[1] = from_a ? dp : sp;
    p->key.zone = 0;
    p->key.proto = 6u;
    p->key.ip_version = 4u;
    p->bucket = pw_flow_hash(&p->key, t->seed) % t->nbuckets;
    p->ip_len = 40u;
    p->seq = f * 7u + reply;
    p->ack = f * 13u;
    p->seg_len = 0;
    p->tcp_flags = (uint16_t)flags;
    p->win = 65535u;
    p->from_a = from_a ? 1u : 0u;
    p->kind = PW_FLOW_K_TCP;
    p->wscale = (uint8_t)PW_FLOW_NO_WSCALE;
    p->none = 0;
}

/* Candidate c of queue q (flows are tried in this order until enough are resident), or
 * PW_FB_NONE past the flow numbers the traffic has. */
PW_DEVICE uint32_t pw_fb_candidate(uint32_t q, uint32_t queues, uint64_t c) {
    const uint64_t f = (uint64_t)q + c * queues;
    return f < (uint64_t)PW_FB_BAD ? (uint32_t)f : PW_FB_NONE;
}

/* Inserts flow f (its client's ACK: a new ESTABLISHED flow, or an eviction of an unassured one
 * in a full bucket) through the stage's own apply; 1 when the outcome is not a tracked new flow. */
PW_DEVICE uint32_t pw_fb_insert(const pw_flow_table *t, pw_flow_counters *c, const pw_flow_pkt *p, uint32_t f) {
    const pw_flow_result r = pw_flow_apply_pkt(t, c, p, PW_FB_T0 + f);
    return r.outcome != PW_FLOW_TRACKED || r.dir != 0u || r.ct_state != PW_CT_NEW;
}

/* Slot `slot` of queue q's table: PW_FB_NONE when free, else the flow its first-seen time names,
 * or PW_FB_BAD when the entry is not that flow's (key, bucket, queue). */
PW_DEVICE uint32_t pw_fb_scan_entry(const pw_flow_table *t, uint32_t q, uint32_t queues, uint32_t slot) {
    const pw_flow_entry *e = &t->entries[slot];
    if (!(e->flags & PW_FLOW_EF_OCCUPIED)) return PW_FB_NONE;
    if (e->first_seen_ns < PW_FB_T0 || e->first_seen_ns - PW_FB_T0 >= (uint64_t)PW_FB_BAD) return PW_FB_BAD;
    const uint32_t f = (uint32_t)(e->first_seen_ns - PW_FB_T0);
    if (f % queues != q) return PW_FB_BAD;
    pw_flow_pkt p;
    pw_fb_pkt(t, f, 0u, PW_FB_ACK, &p);
    if (!pw_flow_key_eq(&e->key, &p.key) || p.bucket != slot / PW_FLOW_BUCKET) return PW_FB_BAD;
    return f;
}

/* A lookup: the visit of pw_flow_apply_pkt_ring (every entry's flags first, then the live entry
 * with the key) without its changes; the slot found, or PW_FB_NONE. */
PW_DEVICE uint32_t pw_fb_find(const pw_flow_table *t, const pw_flow_pkt *p, uint64_t now) {
    const pw_flow_entry *b = t->entries + (uint64_t)p->bucket * PW_FLOW_BUCKET;
    uint8_t fl[PW_FLOW_BUCKET];
    for (uint32_t i = 0; i < PW_FLOW_BUCKET; i++) fl[i] = b[i].flags;
    for (uint32_t i = 0; i < PW_FLOW_BUCKET; i++) {
        if ((fl[i] & PW_FLOW_EF_OCCUPIED) && !pw_flow_expired(t, &b[i], now) && pw_flow_key_eq(&b[i].key, &p->key))
            return p->bucket * PW_FLOW_BUCKET + i;
    }
    return PW_FB_NONE;
}

/* Request j of queue q: a position in its list of n resident flows. Uniform (zipf <= 0), or
 * Zipf-like with exponent `zipf` (not 1): rank k drawn with weight ~ 1 / k^zipf by the inverse
 * of the continuous distribution, then scattered over the list by a hash, so that the hot
 * flows lie in random buckets. */
PW_DEVICE uint32_t pw_fb_pick(uint64_t seed, uint32_t q, uint64_t j, uint32_t n, double zipf) {
    const uint64_t u = pw_fb_mix(seed ^ pw_fb_mix(((uint64_t)q << 40) ^ j));
    if (zipf <= 0.0) return (uint32_t)(((u >> 32) * (uint64_t)n) >> 32);
    const double x = (double)(u >> 11) * (1.0 / 9007199254740992.0);
    const double a = 1.0 - zipf;
    double r = pow(x * (pow((double)n, a) - 1.0) + 1.0, 1.0 / a);
    uint32_t rank = r >= (double)n ? n - 1u : (r < 1.0 ? 0u : (uint32_t)r - 1u);
    return (uint32_t)(pw_fb_mix((uint64_t)rank ^ ((uint64_t)q << 32) ^ seed) % n);
}

/* Lookup j of queue q (`res`: its n resident flows): 1 when the slot found is not the flow's. */
PW_DEVICE uint32_t pw_fb_lookup(const pw_flow_table *t, const pw_fb_res *res, uint32_t n, uint32_t q, uint64_t j,
                                uint64_t seed, double zipf) {
    const pw_fb_res r = res[pw_fb_pick(seed, q, j, n, zipf)];
    pw_flow_pkt p;
    pw_fb_pkt(t, r.flow, (uint32_t)(j & 1u), PW_FB_ACK, &p);
    return pw_fb_find(t, &p, PW_FB_NOW) != r.slot;
}

/* Update j of queue q: the server's ACK of a resident flow, for pw_fb_update_apply. */
PW_DEVICE void pw_fb_update_pkt(const pw_flow_table *t, const pw_fb_res *res, uint32_t n, uint32_t q, uint64_t j,
                                uint64_t seed, double zipf, pw_flow_pkt *p) {
    const pw_fb_res r = res[pw_fb_pick(seed, q, j, n, zipf)];
    pw_fb_pkt(t, r.flow, 1u, PW_FB_ACK, p);
}

/* The conntrack path of a frame of an existing flow (pw_flow_apply_pkt); 1 when it did not find
 * the flow (a miss would make a new one: ct new, direction original). */
PW_DEVICE uint32_t pw_fb_update_apply(const pw_flow_table *t, pw_flow_counters *c, const pw_flow_pkt *p) {
    const pw_flow_result r = pw_flow_apply_pkt(t, c, p, PW_FB_NOW);
    return r.outcome != PW_FLOW_TRACKED || r.dir != 1u || r.ct_state != PW_CT_ESTABLISHED;
}

#endif /* PKTWARP_FLOW_BENCH_CUH */
