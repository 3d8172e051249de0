/* The inspect stage's flowbits / noalert / threshold / detection_filter state on the GPU, with
 * the semantics of the CPU's pktwarp_inspect::eval::state::Stateful (docs/inspect-rules.md,
 * "Flow keywords"): per queue one flow table (a fixed-size bit table of the rule set's flowbit
 * names per flow, both directions one flow) and one tracker table (a counter and its window per
 * rule and tracked address), each holding at most the configured number of entries; when full,
 * stale entries are swept (at most one sweep a second of receive time per table) and what still
 * finds no room is counted (flows_full, trackers_full).
 *
 * The tables are open-addressing hash tables of twice the entries they may hold (linear probing,
 * backward-shift deletion), so what a table holds is decided by the entry count alone, as the
 * CPU's HashMap: the layout never changes an outcome. One thread at a time changes a queue's
 * tables (the stage applies a round's frames that need the state in frame order: flow_order.cuh's
 * second channel), so nothing here is atomic but the counters.
 *
 * The rules' state is a section of the stage's parameter block (Stateful::gpu_section): u32
 * n_rules, then per rule the word offset of its record (0: no state); a record is
 * [class | noalert << 8 | n_bits << 16, n_filters], n_filters x [kind, track, count, seconds]
 * (detection_filter first), then n_bits x [cmd | n_names << 8, names...]. */
#ifndef PKTWARP_INSPECT_STATE_CUH
#define PKTWARP_INSPECT_STATE_CUH

#include "pktwarp_abi.h"

/* Flowbit words per flow entry (512 names; Stateful::GPU_FLOWBIT_WORDS). */
#define PW_INSP_ST_WORDS 8u
/* FlowbitCmd codes (Stateful::gpu_section). */
#define PW_INSP_FB_SET 0u
#define PW_INSP_FB_UNSET 1u
#define PW_INSP_FB_TOGGLE 2u
#define PW_INSP_FB_ISSET 3u
#define PW_INSP_FB_ISNOTSET 4u
/* ThresholdKind and Track codes. */
#define PW_INSP_TH_LIMIT 0u
#define PW_INSP_TH_THRESHOLD 1u
#define PW_INSP_TH_BOTH 2u
#define PW_INSP_TH_DETECTION 3u
#define PW_INSP_TR_SRC 0u
#define PW_INSP_TR_DST 1u
#define PW_INSP_TR_RULE 2u
#define PW_INSP_TR_BOTH 3u
/* Sweeps of a full table are this far apart at least (receive time). */
#define PW_INSP_SWEEP_GAP_NS 1000000000ull

/* A queue's state: this header, then flow_cap flow entries, then trk_cap tracker entries. */
typedef struct pw_insp_qhdr {
    uint32_t gen;       /* the rule set's state generation (pw_insp_params.state_gen); 0: never used */
    uint32_t n_flows, n_trk;
    uint32_t swept_has; /* bit t: swept[t] holds a time */
    uint64_t swept[2];  /* when each full table was last swept */
    uint64_t pad[4];
} pw_insp_qhdr;
PW_STATIC_ASSERT(sizeof(pw_insp_qhdr) == 64, "pw_insp_qhdr size");

typedef struct pw_insp_fent {
    uint32_t used;
    uint8_t proto, v6;
    uint16_t pa, pb, pad0;
    uint32_t pad1;
    uint64_t a[2], b[2];
    uint64_t seen;
    uint64_t bits[PW_INSP_ST_WORDS];
} pw_insp_fent;
PW_STATIC_ASSERT(sizeof(pw_insp_fent) == 120, "pw_insp_fent size");

typedef struct pw_insp_tent {
    uint32_t used, slot, count, v6;
    uint64_t a[2], b[2];
    uint64_t start, window;
} pw_insp_tent;
PW_STATIC_ASSERT(sizeof(pw_insp_tent) == 64, "pw_insp_tent size");

/* The state a frame is resolved against. */
typedef struct pw_insp_st {
    const uint32_t *sec;     /* the rules' state section */
    pw_insp_qhdr *h;         /* the queue's tables */
    pw_insp_fent *flows;
    pw_insp_tent *trk;
    uint32_t flow_cap, trk_cap, max_flows, max_trk;
    uint64_t idle_ns;
    uint64_t *ctr;           /* flows_full, trackers_full, suppressed */
    uint64_t now;
    /* The frame: addresses and ports, protocol, IPv6, the conntrack direction. */
    uint64_t src[2], dst[2];
    uint16_t sport, dport;
    uint8_t proto, v6, ct_dir, pad;
} pw_insp_st;

#if PW_GPU
#define PW_INSP_ST_ADD(p, n) atomicAdd((unsigned long long *)(p), (unsigned long long)(n))
#else
#define PW_INSP_ST_ADD(p, n) (*(p) += (n))
#endif

PW_DEVICE uint64_t pw_insp_st_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 29);
}

/* The record of rule r (0: it keeps no state). */
PW_DEVICE const uint32_t *pw_insp_st_rec(const uint32_t *sec, uint32_t r) {
    if (sec == 0 || r >= sec[0] || sec[1u + r] == 0u) return 0;
    return sec + sec[1u + r];
}

PW_DEVICE uint32_t pw_insp_st_class(const uint32_t *rec) { return rec ? (rec[0] & 0xffu) : 2u; }

PW_DEVICE int pw_insp_st_may_sweep(pw_insp_qhdr *h, uint32_t t, uint64_t now) {
    if ((h->swept_has >> t) & 1u) {
        uint64_t l = h->swept[t];
        if ((now > l ? now - l : 0ull) < PW_INSP_SWEEP_GAP_NS) return 0;
    }
    h->swept_has |= 1u << t;
    h->swept[t] = now;
    return 1;
}

/* ---- flows ---- */

/* The frame's flow key, the same both ways: the lower (address, port) end first. */
PW_DEVICE void pw_insp_st_flow_key(const pw_insp_st *s, pw_insp_fent *k) {
    int swap = s->src[0] != s->dst[0] ? s->src[0] > s->dst[0]
             : s->src[1] != s->dst[1] ? s->src[1] > s->dst[1]
                                      : s->sport > s->dport;
    k->proto = s->proto;
    k->v6 = s->v6;
    for (int w = 0; w < 2; w++) {
        k->a[w] = swap ? s->dst[w] : s->src[w];
        k->b[w] = swap ? s->src[w] : s->dst[w];
    }
    k->pa = swap ? s->dport : s->sport;
    k->pb = swap ? s->sport : s->dport;
}

PW_DEVICE uint32_t pw_insp_st_flow_home(const pw_insp_fent *k, uint32_t cap) {
    uint64_t h = pw_insp_st_mix(0, ((uint64_t)k->proto << 40) | ((uint64_t)k->v6 << 32) | ((uint64_t)k->pa << 16) | k->pb);
    h = pw_insp_st_mix(h, k->a[0]);
    h = pw_insp_st_mix(h, k->a[1]);
    h = pw_insp_st_mix(h, k->b[0]);
    h = pw_insp_st_mix(h, k->b[1]);
    return (uint32_t)h & (cap - 1u);
}

PW_DEVICE int pw_insp_st_flow_eq(const pw_insp_fent *e, const pw_insp_fent *k) {
    return e->proto == k->proto && e->v6 == k->v6 && e->pa == k->pa && e->pb == k->pb && e->a[0] == k->a[0] &&
           e->a[1] == k->a[1] && e->b[0] == k->b[0] && e->b[1] == k->b[1];
}

/* The slot holding k, or the empty slot where it would go (*found says which). */
PW_DEVICE uint32_t pw_insp_st_flow_find(const pw_insp_st *s, const pw_insp_fent *k, int *found) {
    uint32_t i = pw_insp_st_flow_home(k, s->flow_cap);
    for (;;) {
        const pw_insp_fent *e = &s->flows[i];
        if (!e->used) {
            *found = 0;
            return i;
        }
        if (pw_insp_st_flow_eq(e, k)) {
            *found = 1;
            return i;
        }
        i = (i + 1u) & (s->flow_cap - 1u);
    }
}

/* Empties slot i, shifting the entries after it back to where their probe can find them. */
PW_DEVICE void pw_insp_st_flow_del(pw_insp_st *s, uint32_t i) {
    const uint32_t m = s->flow_cap - 1u;
    uint32_t j = i;
    for (;;) {
        j = (j + 1u) & m;
        if (!s->flows[j].used) break;
        uint32_t k = pw_insp_st_flow_home(&s->flows[j], s->flow_cap);
        /* The entry at j may move to i when its home is not cyclically within (i, j]. */
        int stay = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stay) continue;
        s->flows[i] = s->flows[j];
        i = j;
    }
    s->flows[i].used = 0u;
    s->h->n_flows--;
}

/* Drops the flows idle for longer than idle_ns. */
PW_DEVICE void pw_insp_st_flow_sweep(pw_insp_st *s) {
    for (uint32_t i = 0; i < s->flow_cap;) {
        const pw_insp_fent *e = &s->flows[i];
        if (e->used && (s->now > e->seen ? s->now - e->seen : 0ull) > s->idle_ns) {
            pw_insp_st_flow_del(s, i); /* slot i may hold a shifted entry now: look again */
            continue;
        }
        i++;
    }
}

/* The flow's entry, made when there is room (idle flows are dropped to make it); 0 when full. */
PW_DEVICE pw_insp_fent *pw_insp_st_flow_entry(pw_insp_st *s, const pw_insp_fent *k) {
    int found;
    uint32_t i = pw_insp_st_flow_find(s, k, &found);
    if (!found) {
        if (s->h->n_flows >= s->max_flows) {
            if (pw_insp_st_may_sweep(s->h, 0u, s->now)) pw_insp_st_flow_sweep(s);
            if (s->h->n_flows >= s->max_flows) return 0;
            i = pw_insp_st_flow_find(s, k, &found);
        }
        pw_insp_fent *e = &s->flows[i];
        *e = *k;
        for (uint32_t w = 0; w < PW_INSP_ST_WORDS; w++) e->bits[w] = 0ull;
        e->used = 1u;
        s->h->n_flows++;
    }
    s->flows[i].seen = s->now;
    return &s->flows[i];
}

PW_DEVICE int pw_insp_st_bit(const uint64_t *b, uint32_t n) { return b ? (int)((b[n >> 6] >> (n & 63u)) & 1ull) : 0; }

/* Rule rec's flowbits on the frame's flow: 0 when a read fails (nothing written). */
PW_DEVICE int pw_insp_st_flowbits(pw_insp_st *s, const uint32_t *rec) {
    if (s->ct_dir == 0u) return 0;
    pw_insp_fent k;
    pw_insp_st_flow_key(s, &k);
    int found;
    uint32_t at = pw_insp_st_flow_find(s, &k, &found);
    const uint64_t *cur = found ? s->flows[at].bits : 0;
    const uint32_t nb = (rec[0] >> 16) & 0xffffu, nf = rec[1];
    const uint32_t *bits = rec + 2u + 4u * nf;
    int writes = 0;
    const uint32_t *b = bits;
    for (uint32_t j = 0; j < nb; j++) {
        uint32_t cmd = b[0] & 0xffu, n = b[0] >> 8;
        if (cmd == PW_INSP_FB_ISSET || cmd == PW_INSP_FB_ISNOTSET) {
            int ok = 0;
            for (uint32_t q = 0; q < n; q++) ok |= pw_insp_st_bit(cur, b[1u + q]) == (cmd == PW_INSP_FB_ISSET);
            if (!ok) return 0;
        } else if (cmd <= PW_INSP_FB_TOGGLE) {
            writes |= n != 0u;
        }
        b += 1u + n;
    }
    if (!writes) return 1;
    pw_insp_fent *e = pw_insp_st_flow_entry(s, &k);
    if (e == 0) {
        PW_INSP_ST_ADD(&s->ctr[0], 1u);
        return 1;
    }
    b = bits;
    for (uint32_t j = 0; j < nb; j++) {
        uint32_t cmd = b[0] & 0xffu, n = b[0] >> 8;
        for (uint32_t q = 0; cmd <= PW_INSP_FB_TOGGLE && q < n; q++) {
            uint32_t x = b[1u + q];
            uint64_t m = 1ull << (x & 63u);
            uint64_t *w = &e->bits[x >> 6];
            if (cmd == PW_INSP_FB_SET) *w |= m;
            else if (cmd == PW_INSP_FB_UNSET) *w &= ~m;
            else *w ^= m;
        }
        b += 1u + n;
    }
    return 1;
}

/* ---- trackers ---- */

PW_DEVICE uint32_t pw_insp_st_trk_home(const pw_insp_tent *k, uint32_t cap) {
    uint64_t h = pw_insp_st_mix(0, ((uint64_t)k->slot << 1) | k->v6);
    h = pw_insp_st_mix(h, k->a[0]);
    h = pw_insp_st_mix(h, k->a[1]);
    h = pw_insp_st_mix(h, k->b[0]);
    h = pw_insp_st_mix(h, k->b[1]);
    return (uint32_t)h & (cap - 1u);
}

PW_DEVICE uint32_t pw_insp_st_trk_find(const pw_insp_st *s, const pw_insp_tent *k, int *found) {
    uint32_t i = pw_insp_st_trk_home(k, s->trk_cap);
    for (;;) {
        const pw_insp_tent *e = &s->trk[i];
        if (!e->used) {
            *found = 0;
            return i;
        }
        if (e->slot == k->slot && e->v6 == k->v6 && e->a[0] == k->a[0] && e->a[1] == k->a[1] && e->b[0] == k->b[0] &&
            e->b[1] == k->b[1]) {
            *found = 1;
            return i;
        }
        i = (i + 1u) & (s->trk_cap - 1u);
    }
}

PW_DEVICE void pw_insp_st_trk_del(pw_insp_st *s, uint32_t i) {
    const uint32_t m = s->trk_cap - 1u;
    uint32_t j = i;
    for (;;) {
        j = (j + 1u) & m;
        if (!s->trk[j].used) break;
        uint32_t k = pw_insp_st_trk_home(&s->trk[j], s->trk_cap);
        int stay = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stay) continue;
        s->trk[i] = s->trk[j];
        i = j;
    }
    s->trk[i].used = 0u;
    s->h->n_trk--;
}

/* Whether the first match of a window fires. */
PW_DEVICE int pw_insp_st_first_fires(uint32_t kind, uint32_t count) {
    if (kind == PW_INSP_TH_LIMIT) return 1;
    if (kind == PW_INSP_TH_DETECTION) return count == 0u;
    return count == 1u;
}

/* One match of rule r under filter th = [kind, track, count, seconds]: *fire, *act as the
 * CPU's Stateful::threshold says. */
PW_DEVICE void pw_insp_st_threshold(pw_insp_st *s, uint32_t r, const uint32_t *th, int *fire, int *act) {
    const uint32_t kind = th[0], track = th[1], count = th[2];
    pw_insp_tent k;
    k.slot = r * 2u + (kind != PW_INSP_TH_DETECTION ? 1u : 0u);
    k.v6 = track == PW_INSP_TR_RULE ? 0u : s->v6;
    for (int w = 0; w < 2; w++) {
        k.a[w] = track == PW_INSP_TR_DST ? s->dst[w] : track == PW_INSP_TR_RULE ? 0ull : s->src[w];
        k.b[w] = track == PW_INSP_TR_BOTH ? s->dst[w] : 0ull;
    }
    const uint64_t window = (uint64_t)th[3] * 1000000000ull;
    const int first = pw_insp_st_first_fires(kind, count);
    int found;
    uint32_t i = pw_insp_st_trk_find(s, &k, &found);
    if (found) {
        pw_insp_tent *e = &s->trk[i];
        if ((s->now > e->start ? s->now - e->start : 0ull) <= window) {
            if (e->count != 0xFFFFFFFFu) e->count++;
            uint32_t c = e->count;
            if (kind == PW_INSP_TH_LIMIT) {
                *fire = c <= count;
                *act = 1;
            } else if (kind == PW_INSP_TH_THRESHOLD) {
                int hit = c >= count;
                if (hit) e->count = 0u;
                *fire = *act = hit;
            } else if (kind == PW_INSP_TH_BOTH) {
                *fire = c == count;
                *act = c >= count;
            } else {
                *fire = *act = c > count;
            }
            return;
        }
        /* The window has passed: this match opens a new one. */
        e->start = s->now;
        e->window = window;
        e->count = 1u;
    } else {
        if (s->h->n_trk >= s->max_trk && pw_insp_st_may_sweep(s->h, 1u, s->now)) {
            for (uint32_t j = 0; j < s->trk_cap;) {
                const pw_insp_tent *t = &s->trk[j];
                if (t->used && (s->now > t->start ? s->now - t->start : 0ull) > t->window) {
                    pw_insp_st_trk_del(s, j);
                    continue;
                }
                j++;
            }
            i = pw_insp_st_trk_find(s, &k, &found);
        }
        if (s->h->n_trk < s->max_trk) {
            pw_insp_tent *e = &s->trk[i];
            k.used = 1u;
            k.start = s->now;
            k.window = window;
            k.count = 1u;
            *e = k;
            s->h->n_trk++;
        } else {
            PW_INSP_ST_ADD(&s->ctr[1], 1u);
        }
    }
    *fire = first;
    *act = first || kind == PW_INSP_TH_LIMIT;
}

/* ---- a rule, a frame ---- */

/* Rule r (record rec, not 0) matched the frame: 0 when its flowbits conditions fail (the match is
 * dropped), else 1 with *fire (it alerts) and *act (its action applies); counts suppressed. */
PW_DEVICE int pw_insp_st_rule(pw_insp_st *s, uint32_t r, const uint32_t *rec, int *fire, int *act) {
    if (((rec[0] >> 16) & 0xffffu) != 0u && !pw_insp_st_flowbits(s, rec)) return 0;
    int f = !((rec[0] >> 8) & 1u), a = 1;
    for (uint32_t j = 0; j < rec[1]; j++) {
        int fi, ac;
        pw_insp_st_threshold(s, r, rec + 2u + 4u * j, &fi, &ac);
        f &= fi;
        a &= ac;
    }
    if (!f) PW_INSP_ST_ADD(&s->ctr[2], 1u);
    *fire = f;
    *act = a;
    return 1;
}

/* A new rule set's state (another generation than the queue's tables hold) starts empty. */
PW_DEVICE void pw_insp_st_begin(pw_insp_st *s, uint32_t gen) {
    pw_insp_qhdr *h = s->h;
    if (h->gen == gen) return;
    if (h->gen != 0u) {
        for (uint32_t i = 0; i < s->flow_cap; i++) s->flows[i].used = 0u;
        for (uint32_t i = 0; i < s->trk_cap; i++) s->trk[i].used = 0u;
    }
    h->n_flows = h->n_trk = 0u;
    h->swept_has = 0u;
    h->gen = gen;
}

#endif /* PKTWARP_INSPECT_STATE_CUH */
