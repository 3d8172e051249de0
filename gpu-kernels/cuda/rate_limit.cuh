/* Rate limits (per-key token buckets) in CUDA C: the same semantics, step for step, as the Rust
 * reference in pipeline/flow/src/rate (crate pktwarp-flow), written once in docs/rate-limit.md.
 * The entries, the table block and the counters are the same bytes on both sides (layouts pinned
 * by pipeline/flow/tests/rate_layout.rs); the host build (host/rate_limit_host.cpp) lets
 * pipeline/flow/tests/rate_cuda_host.rs hold the two equal frame by frame and byte for byte. Any
 * change here must be made there too.
 *
 * Order: as the flow table (flow.cuh), a burst runs in two phases. Phase 1 gives each frame its
 * rule, key and bucket; in phase 2 thread `tid` of `nthreads` walks the burst in order and
 * applies the frames whose bucket % nthreads == tid (frames without a rule: index % nthreads).
 * Threads own disjoint buckets, so one key's frames are applied in arrival order and the table
 * ends as with sequential order, for any thread count. Portable C subset (PW_DEVICE). */
#ifndef PKTWARP_RATE_LIMIT_CUH
#define PKTWARP_RATE_LIMIT_CUH

#include "pktwarp_abi.h"
#include "murmur3.cuh"

#define PW_RL_BUCKET 8u         /* entries per bucket (rate::BUCKET_ENTRIES) */
#define PW_RL_ENTRY_SIZE 64u    /* sizeof(pw_rl_entry) (rate::ENTRY_SIZE) */
#define PW_RL_MAX_RULES 32u     /* rate::MAX_RULES */
#define PW_RL_UNIT 1000000000ull /* token units per frame (rate::UNIT) */
#define PW_RL_NO_RULE 0xffu
#define PW_RL_OCCUPIED 1u
/* Key kinds (rate::kind). */
#define PW_RL_KEY_SRC 0u
#define PW_RL_KEY_DST 1u
#define PW_RL_KEY_FLOW 2u
/* Match flags (rate::mflag). */
#define PW_RL_M_IP 0x01u
#define PW_RL_M_PROTO 0x02u
#define PW_RL_M_SRC_PORT 0x04u
#define PW_RL_M_DST_PORT 0x08u
#define PW_RL_M_TCP_FLAGS 0x10u
/* Outcomes (rate::outcome). */
#define PW_RL_UNMATCHED 0u
#define PW_RL_PASSED 1u
#define PW_RL_LIMITED 2u
#define PW_RL_TABLE_FULL 3u

/* rate::RateKey */
typedef struct pw_rl_key {
    uint32_t addr[2][4]; /*  0 */
    uint16_t port[2];    /* 32 */
    uint8_t rule;        /* 36 */
    uint8_t proto;       /* 37 flow keys only */
    uint8_t ip_version;  /* 38 */
    uint8_t reserved;    /* 39 */
} pw_rl_key;
PW_STATIC_ASSERT(sizeof(pw_rl_key) == 40, "pw_rl_key size");

/* rate::RateEntry */
typedef struct pw_rl_entry {
    pw_rl_key key;    /*  0 */
    uint64_t tokens;  /* 40 units, PW_RL_UNIT per frame */
    uint64_t last_ns; /* 48 */
    uint32_t flags;   /* 56 PW_RL_OCCUPIED; the GPU stage's key epoch above it (pw_rl_apply_at) */
    uint32_t drops;   /* 60 saturating */
} pw_rl_entry;
PW_STATIC_ASSERT(sizeof(pw_rl_entry) == PW_RL_ENTRY_SIZE, "pw_rl_entry size");

/* rate::RuleAbi */
typedef struct pw_rl_rule {
    uint64_t rate_pps;  /*  0 */
    uint64_t cap;       /*  8 burst * PW_RL_UNIT */
    uint64_t full_ns;   /* 16 ceil(cap / rate_pps) */
    uint16_t src_lo, src_hi, dst_lo, dst_hi; /* 24 */
    uint16_t flags_mask, flags_value;        /* 32 */
    uint8_t match_flags; /* 36 PW_RL_M_* */
    uint8_t proto;       /* 37 */
    uint8_t ip_version;  /* 38 */
    uint8_t key_kind;    /* 39 PW_RL_KEY_* */
    uint8_t prefix_v4;   /* 40 */
    uint8_t prefix_v6;   /* 41 */
    uint8_t reserved[6]; /* 42 */
} pw_rl_rule;
PW_STATIC_ASSERT(sizeof(pw_rl_rule) == 48, "pw_rl_rule size");

/* rate::RateTableAbi */
typedef struct pw_rl_table {
    pw_rl_entry *entries;  /*  0 */
    uint32_t nbuckets;     /*  8 */
    uint32_t seed;         /* 12 */
    uint32_t nrules;       /* 16 */
    uint32_t on_full_drop; /* 20 */
    pw_rl_rule rules[PW_RL_MAX_RULES]; /* 24 */
} pw_rl_table;
PW_STATIC_ASSERT(sizeof(pw_rl_table) == 24 + 48 * PW_RL_MAX_RULES, "pw_rl_table size");

/* rate::RuleCounters, rate::RateCounters */
typedef struct pw_rl_rule_counters {
    uint64_t matched, limited, table_full;
} pw_rl_rule_counters;
typedef struct pw_rl_counters {
    uint64_t created, reused;
    pw_rl_rule_counters rules[PW_RL_MAX_RULES];
} pw_rl_counters;

/* rate::RateResult */
typedef struct pw_rl_result {
    uint8_t rule, outcome, drop, reserved;
} pw_rl_result;

/* Phase 1's result for one frame: its key and bucket, or none (rule PW_RL_NO_RULE). */
typedef struct pw_rl_pkt {
    pw_rl_key key;
    uint32_t bucket;
} pw_rl_pkt;

#if PW_GPU
#define PW_RL_ADD(p, v) atomicAdd((unsigned long long *)(p), (unsigned long long)(v))
#else
#define PW_RL_ADD(p, v) (*(p) += (v))
#endif

/* rate::hash: MurmurHash3 x86_32 over the key's ten words. */
PW_DEVICE uint32_t pw_rl_hash(const pw_rl_key *k, uint32_t seed) {
    uint32_t w[10];
    for (uint32_t i = 0; i < 4u; i++) {
        w[i] = k->addr[0][i];
        w[4u + i] = k->addr[1][i];
    }
    w[8] = (uint32_t)k->port[0] | ((uint32_t)k->port[1] << 16);
    w[9] = (uint32_t)k->rule | ((uint32_t)k->proto << 8) | ((uint32_t)k->ip_version << 16);
    return pw_murmur3_words(w, seed);
}

/* table::mask_word: the top bits of address word i a prefix keeps. */
PW_DEVICE uint32_t pw_rl_mask(uint32_t prefix, uint32_t i) {
    int32_t bits = (int32_t)prefix - 32 * (int32_t)i;
    if (bits <= 0) return 0u;
    if (bits >= 32) return 0xffffffffu;
    return 0xffffffffu << (32 - bits);
}

/* table::rule_matches */
PW_DEVICE bool pw_rl_rule_matches(const pw_rl_rule *r, const pw_packet_meta *m) {
    uint32_t f = r->match_flags;
    bool l4 = (m->flags & PW_MF_L4) != 0u;
    if ((f & PW_RL_M_IP) && m->ip_version != r->ip_version) return false;
    if ((f & PW_RL_M_PROTO) && m->ip_proto != r->proto) return false;
    if ((f & PW_RL_M_SRC_PORT) && !(l4 && m->src_port >= r->src_lo && m->src_port <= r->src_hi)) return false;
    if ((f & PW_RL_M_DST_PORT) && !(l4 && m->dst_port >= r->dst_lo && m->dst_port <= r->dst_hi)) return false;
    if ((f & PW_RL_M_TCP_FLAGS) && !(l4 && (m->tcp_flags & r->flags_mask) == r->flags_value)) return false;
    return true;
}

/* (addr, port) <= (addr, port), addresses word by word. */
PW_DEVICE bool pw_rl_ep_le(const uint32_t *a, uint16_t ap, const uint32_t *b, uint16_t bp) {
    for (uint32_t i = 0; i < 4u; i++)
        if (a[i] != b[i]) return a[i] < b[i];
    return ap <= bp;
}

/* table::classify, plus the bucket: p->key.rule is PW_RL_NO_RULE when no rule applies. */
PW_DEVICE void pw_rl_classify(const pw_rl_table *t, const pw_packet_meta *m, pw_rl_pkt *p) {
    pw_rl_key *k = &p->key;
    for (uint32_t i = 0; i < 4u; i++) k->addr[0][i] = k->addr[1][i] = 0u;
    k->port[0] = k->port[1] = 0;
    k->rule = (uint8_t)PW_RL_NO_RULE;
    k->proto = k->ip_version = k->reserved = 0;
    p->bucket = 0;
    if (m->ip_version != 4u && m->ip_version != 6u) return;
    uint32_t n = t->nrules < PW_RL_MAX_RULES ? t->nrules : PW_RL_MAX_RULES, ri = n;
    for (uint32_t i = 0; i < n; i++) {
        if (pw_rl_rule_matches(&t->rules[i], m)) {
            ri = i;
            break;
        }
    }
    if (ri == n) return;
    const pw_rl_rule *r = &t->rules[ri];
    k->rule = (uint8_t)ri;
    k->ip_version = m->ip_version;
    uint32_t prefix = m->ip_version == 4u ? r->prefix_v4 : r->prefix_v6;
    if (r->key_kind == PW_RL_KEY_SRC || r->key_kind == PW_RL_KEY_DST) {
        const uint32_t *a = r->key_kind == PW_RL_KEY_SRC ? m->src_ip : m->dst_ip;
        for (uint32_t i = 0; i < 4u; i++) k->addr[0][i] = a[i] & pw_rl_mask(prefix, i);
    } else {
        uint32_t pr = m->ip_proto;
        bool ports = (m->flags & PW_MF_L4) != 0u && (pr == 6u || pr == 17u || pr == 132u);
        uint16_t sp = ports ? m->src_port : (uint16_t)0, dp = ports ? m->dst_port : (uint16_t)0;
        bool a_first = pw_rl_ep_le(m->src_ip, sp, m->dst_ip, dp);
        for (uint32_t i = 0; i < 4u; i++) {
            k->addr[0][i] = a_first ? m->src_ip[i] : m->dst_ip[i];
            k->addr[1][i] = a_first ? m->dst_ip[i] : m->src_ip[i];
        }
        k->port[0] = a_first ? sp : dp;
        k->port[1] = a_first ? dp : sp;
        k->proto = m->ip_proto;
    }
    p->bucket = pw_rl_hash(k, t->seed) % t->nbuckets;
}

PW_DEVICE bool pw_rl_key_eq(const pw_rl_key *a, const pw_rl_key *b) {
    for (uint32_t i = 0; i < 4u; i++)
        if (a->addr[0][i] != b->addr[0][i] || a->addr[1][i] != b->addr[1][i]) return false;
    return a->port[0] == b->port[0] && a->port[1] == b->port[1] && a->rule == b->rule && a->proto == b->proto &&
           a->ip_version == b->ip_version && a->reserved == b->reserved;
}

/* table::RateTable::idle: full again at `now` (or of a rule that no longer exists). */
PW_DEVICE bool pw_rl_idle(const pw_rl_table *t, const pw_rl_entry *e, uint64_t now) {
    uint32_t n = t->nrules < PW_RL_MAX_RULES ? t->nrules : PW_RL_MAX_RULES;
    if (e->key.rule >= n) return true;
    uint64_t dt = now > e->last_ns ? now - e->last_ns : 0u;
    return dt >= t->rules[e->key.rule].full_ns;
}

PW_DEVICE pw_rl_result pw_rl_res(uint32_t rule, uint32_t outcome, uint32_t drop) {
    pw_rl_result r;
    r.rule = (uint8_t)rule;
    r.outcome = (uint8_t)outcome;
    r.drop = (uint8_t)drop;
    r.reserved = 0;
    return r;
}

/* Whether slot `e` holds a bucket of key epoch `epoch` (see pw_rl_apply_at). */
PW_DEVICE bool pw_rl_live(const pw_rl_entry *e, uint32_t epoch) {
    return (e->flags & PW_RL_OCCUPIED) != 0u && (e->flags >> 8) == (epoch & 0xffffffu);
}

/* table::RateTable::apply_key over the entries at `entries` (t->entries unread: the GPU stage's
 * table per queue shares one parameter block, which is not copied): find the key's bucket (or
 * make one in a free or idle slot), refill it to `now`, take a token. `epoch` (low 24 bits): the
 * rules' key generation, kept in each bucket's flags above PW_RL_OCCUPIED; a bucket of another
 * epoch is a free slot (a reload that changed the keys starts every bucket afresh, as the Rust
 * table's set_rules clears it). The Rust table is epoch 0 (flags == PW_RL_OCCUPIED). */
PW_DEVICE pw_rl_result pw_rl_apply_at(const pw_rl_table *t, pw_rl_entry *entries, pw_rl_counters *c,
                                      const pw_rl_pkt *p, uint64_t now, uint32_t epoch) {
    if (p->key.rule == PW_RL_NO_RULE) return pw_rl_res(PW_RL_NO_RULE, PW_RL_UNMATCHED, 0u);
    uint32_t ri = p->key.rule;
    const pw_rl_rule *r = &t->rules[ri];
    PW_RL_ADD(&c->rules[ri].matched, 1u);
    pw_rl_entry *b = entries + (uint64_t)p->bucket * PW_RL_BUCKET;
    int32_t found = -1, fre = -1, idle = -1;
    for (uint32_t i = 0; i < PW_RL_BUCKET; i++) {
        if (!pw_rl_live(&b[i], epoch)) {
            if (fre < 0) fre = (int32_t)i;
        } else if (pw_rl_key_eq(&b[i].key, &p->key)) {
            found = (int32_t)i;
            break;
        } else if (idle < 0 && pw_rl_idle(t, &b[i], now)) {
            idle = (int32_t)i;
        }
    }
    pw_rl_entry *e;
    if (found >= 0) {
        e = &b[found];
        uint64_t dt = now > e->last_ns ? now - e->last_ns : 0u;
        if (dt >= r->full_ns) {
            e->tokens = r->cap;
        } else {
            uint64_t v = e->tokens + dt * r->rate_pps;
            e->tokens = v < r->cap ? v : r->cap;
        }
        if (now > e->last_ns) e->last_ns = now;
    } else {
        int32_t slot = fre >= 0 ? fre : idle;
        if (slot < 0) {
            PW_RL_ADD(&c->rules[ri].table_full, 1u);
            return pw_rl_res(ri, PW_RL_TABLE_FULL, t->on_full_drop ? 1u : 0u);
        }
        if (fre < 0) PW_RL_ADD(&c->reused, 1u);
        PW_RL_ADD(&c->created, 1u);
        e = &b[slot];
        e->key = p->key;
        e->tokens = r->cap;
        e->last_ns = now;
        e->flags = PW_RL_OCCUPIED | ((epoch & 0xffffffu) << 8);
        e->drops = 0u;
    }
    if (e->tokens >= PW_RL_UNIT) {
        e->tokens -= PW_RL_UNIT;
        return pw_rl_res(ri, PW_RL_PASSED, 0u);
    }
    if (e->drops != 0xffffffffu) e->drops++;
    PW_RL_ADD(&c->rules[ri].limited, 1u);
    return pw_rl_res(ri, PW_RL_LIMITED, 1u);
}

/* table::RateTable::apply_key on the table's own entries. */
PW_DEVICE pw_rl_result pw_rl_apply_pkt(const pw_rl_table *t, pw_rl_counters *c, const pw_rl_pkt *p, uint64_t now) {
    return pw_rl_apply_at(t, t->entries, c, p, now, 0u);
}

/* Phase 1 of a burst: frame i's rule, key and bucket into pk[i], for i = tid, tid + nthreads, ... */
PW_DEVICE void pw_rl_burst_classify(const pw_rl_table *t, uint32_t n, const pw_packet_meta *metas, pw_rl_pkt *pk,
                                    uint32_t tid, uint32_t nthreads) {
    for (uint32_t i = tid; i < n; i += nthreads) pw_rl_classify(t, &metas[i], &pk[i]);
}

/* Phase 2 (after every thread's phase 1): thread tid applies, in burst order, the frames whose
 * bucket % nthreads == tid (frames without a rule: index % nthreads == tid). */
PW_DEVICE void pw_rl_burst_apply(const pw_rl_table *t, pw_rl_counters *c, uint32_t n, const pw_rl_pkt *pk,
                                 const uint64_t *now, pw_rl_result *out, uint32_t tid, uint32_t nthreads) {
    for (uint32_t i = 0; i < n; i++) {
        uint32_t owner = pk[i].key.rule == PW_RL_NO_RULE ? i % nthreads : pk[i].bucket % nthreads;
        if (owner == tid) out[i] = pw_rl_apply_pkt(t, c, &pk[i], now[i]);
    }
}

#endif /* PKTWARP_RATE_LIMIT_CUH */
