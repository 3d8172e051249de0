/* The flow table and TCP connection tracking in CUDA C: the same semantics, step for step, as
 * the Rust reference in pipeline/flow (crate pktwarp-flow: key.rs, tcp.rs, table.rs, window.rs),
 * written once in docs/flow-table.md. The entries, the table block and the counters are the
 * same bytes on both sides (layouts pinned by pipeline/flow/tests/layout.rs); the host build
 * (host/flow_host.cpp) lets pipeline/flow/tests/flow_cuda_host.rs hold the two equal frame by
 * frame and byte for byte. Any change here must be made there too.
 *
 * Order: pw_flow_burst_thread applies a burst so that frames of one bucket (hence of one flow)
 * are applied in arrival order by one thread and buckets in parallel: thread `tid` of
 * `nthreads` applies the frames whose bucket % nthreads == tid (frames without a bucket:
 * index % nthreads), walking the burst in order. Buckets are disjoint between threads, so the
 * result equals the sequential order for any thread count. Portable C subset (PW_DEVICE). */
#ifndef PKTWARP_FLOW_CUH
#define PKTWARP_FLOW_CUH

#include "pktwarp_abi.h"
#include "murmur3.cuh"

#define PW_FLOW_BUCKET 8u         /* entries per bucket (pktwarp_flow::BUCKET_ENTRIES) */
#define PW_FLOW_ENTRY_SIZE 128u   /* sizeof(pw_flow_entry) (pktwarp_flow::ENTRY_SIZE) */
#define PW_FLOW_TCLASSES 16u      /* timeout classes (config::tclass::COUNT) */
#define PW_FLOW_NO_WSCALE 0xffu

/* Entry flags (table::ef). */
#define PW_FLOW_EF_OCCUPIED 0x01u
#define PW_FLOW_EF_ORIG_FROM_A 0x02u
#define PW_FLOW_EF_SEEN_REPLY 0x04u
#define PW_FLOW_EF_ASSURED 0x08u
/* Window flags (window::WF_*). */
#define PW_FLOW_WF_SCALE 0x01u
#define PW_FLOW_WF_LIBERAL 0x02u
/* ct states (table::ct). */
#define PW_CT_UNTRACKED 0u
#define PW_CT_NEW 1u
#define PW_CT_ESTABLISHED 2u
#define PW_CT_RELATED 3u
#define PW_CT_INVALID 4u
#define PW_CT_CLOSING 5u
#define PW_CT_CLOSED 6u
/* Outcomes (table::outcome). */
#define PW_FLOW_TRACKED 0u
#define PW_FLOW_UNTRACKED 1u
#define PW_FLOW_TABLE_FULL 2u
#define PW_FLOW_INVALID 3u
/* TCP states (tcp::st) and table values. */
#define PW_TCP_NONE 0u
#define PW_TCP_SYN_SENT 1u
#define PW_TCP_SYN_RECV 2u
#define PW_TCP_ESTABLISHED 3u
#define PW_TCP_FIN_WAIT 4u
#define PW_TCP_CLOSE_WAIT 5u
#define PW_TCP_LAST_ACK 6u
#define PW_TCP_TIME_WAIT 7u
#define PW_TCP_CLOSE 8u
#define PW_TCP_SYN_SENT2 9u
#define PW_TCP_IV 10u
#define PW_TCP_IG 11u
/* Timeout classes of other protocols (config::tclass). */
#define PW_FLOW_TC_UDP_UNREPLIED 10u
#define PW_FLOW_TC_UDP_REPLIED 11u
#define PW_FLOW_TC_ICMP 12u
#define PW_FLOW_TC_OTHER 13u
/* Frame kinds (key::Kind). */
#define PW_FLOW_K_TCP 0u
#define PW_FLOW_K_UDP 1u
#define PW_FLOW_K_ECHO_REQ 2u
#define PW_FLOW_K_ECHO_REP 3u
#define PW_FLOW_K_OTHER 4u
#define PW_FLOW_K_RELATED 5u

/* key::FlowKey: endpoint a = the smaller (address, port). */
typedef struct pw_flow_key {
    uint32_t addr[2][4]; /*  0 */
    uint16_t port[2];    /* 32 */
    uint16_t zone;       /* 36 outer VLAN id, 0 without a tag */
    uint8_t proto;       /* 38 */
    uint8_t ip_version;  /* 39 */
} pw_flow_key;
PW_STATIC_ASSERT(sizeof(pw_flow_key) == 40, "pw_flow_key size");

/* table::TcpWindow */
typedef struct pw_flow_window {
    uint32_t end, maxend, maxwin;
    uint8_t scale, flags;
    uint16_t reserved;
} pw_flow_window;
PW_STATIC_ASSERT(sizeof(pw_flow_window) == 16, "pw_flow_window size");

/* table::FlowEntry: what a bucket visit reads (key, state, flags, last seen) is in the first 64
 * bytes, one cache line. */
typedef struct pw_flow_entry {
    pw_flow_key key;           /*   0 */
    uint8_t state;             /*  40 TCP state */
    uint8_t flags;             /*  41 PW_FLOW_EF_* */
    uint16_t reserved;         /*  42 */
    uint16_t tcp_flags[2];     /*  44 OR of the flags seen */
    uint64_t last_seen_ns;     /*  48 */
    uint64_t first_seen_ns;    /*  56 */
    uint64_t packets[2];       /*  64 [original, reply] */
    uint64_t bytes[2];         /*  80 IP bytes */
    pw_flow_window window[2];  /*  96 strict */
} pw_flow_entry;
PW_STATIC_ASSERT(sizeof(pw_flow_entry) == PW_FLOW_ENTRY_SIZE, "pw_flow_entry size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_flow_entry, last_seen_ns) == 48, "pw_flow_entry.last_seen_ns");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_flow_entry, window) == 96, "pw_flow_entry.window");

/* table::FlowTableAbi */
typedef struct pw_flow_table {
    pw_flow_entry *entries;                 /*   0 */
    uint32_t nbuckets;                      /*   8 */
    uint32_t seed;                          /*  12 */
    uint32_t strict;                        /*  16 */
    uint32_t reserved;                      /*  20 */
    uint64_t timeout_ns[PW_FLOW_TCLASSES];  /*  24 */
} pw_flow_table;
PW_STATIC_ASSERT(sizeof(pw_flow_table) == 152, "pw_flow_table size");

/* table::FlowCounters */
typedef struct pw_flow_counters {
    uint64_t created, expired, early_evicted, table_full, untracked, invalid;
} pw_flow_counters;

/* table::FlowResult */
typedef struct pw_flow_result {
    uint8_t ct_state, dir, outcome, reserved;
} pw_flow_result;

/* key::Packet, plus the bucket; `none` is 0, or PW_FLOW_UNTRACKED / PW_FLOW_INVALID when the
 * frame has no flow. */
typedef struct pw_flow_pkt {
    pw_flow_key key;
    uint32_t bucket;
    uint32_t ip_len, seq, ack, seg_len;
    uint16_t tcp_flags, win;
    uint8_t from_a, kind, wscale, none;
} pw_flow_pkt;

/* Flows that ended inside a frame's apply (aged out in its bucket, evicted, reopened by a SYN),
 * for flow export (docs/flow-export-gpu.md; pktwarp_flow::ring is the host's reader): a ring
 * per queue that the host drains. The header (64 bytes), then `cap` stamps (slot i's holds its
 * record's sequence number + 1 once the record is written), then `cap` records: the entry as it
 * was, its `reserved` the cause (PW_FLOW_END_*). A record that finds the ring full (head - tail
 * == cap) is counted in `lost`, not written. */
typedef struct pw_flow_ring {
    uint64_t head;     /*  0: records reserved so far (the next one's sequence number) */
    uint64_t tail;     /*  8: records the host has taken (written by the host) */
    uint64_t lost;     /* 16: records not kept */
    uint32_t cap;      /* 24: slots; 0: no ring */
    uint32_t reserved; /* 28 */
    uint64_t pad[4];   /* 32 */
} pw_flow_ring;
PW_STATIC_ASSERT(sizeof(pw_flow_ring) == 64, "pw_flow_ring size");

#define PW_FLOW_END_EXPIRED 1u
#define PW_FLOW_END_EVICTED 2u
#define PW_FLOW_END_REOPENED 3u

/* tcp::TRANSITIONS flattened: [(dir * 6 + class) * 10 + state]. */
#if PW_GPU
__device__ __constant__ const uint8_t pw_flow_tcp_table[120] = {
#else
static const uint8_t pw_flow_tcp_table[120] = {
#endif
    /* original: syn, synack, fin, ack, rst, none */
    1, 1, 11, 11, 11, 11, 11, 1, 1, 9,
    10, 10, 2, 10, 10, 10, 10, 10, 10, 2,
    10, 10, 4, 4, 6, 6, 6, 7, 8, 10,
    3, 10, 3, 3, 5, 5, 7, 7, 8, 10,
    10, 8, 8, 8, 8, 8, 8, 8, 8, 8,
    10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
    /* reply */
    10, 9, 10, 10, 10, 10, 10, 1, 10, 9,
    10, 2, 11, 11, 11, 11, 11, 11, 11, 2,
    10, 10, 4, 4, 6, 6, 6, 7, 8, 10,
    10, 11, 2, 3, 5, 5, 7, 7, 8, 11,
    10, 8, 8, 8, 8, 8, 8, 8, 8, 8,
    10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
};

#if PW_GPU
#define PW_FLOW_ADD(p, v) atomicAdd((unsigned long long *)(p), (unsigned long long)(v))
#else
#define PW_FLOW_ADD(p, v) (*(p) += (v))
#endif

/* key::hash: MurmurHash3 x86_32 over the key's ten words. */
PW_DEVICE uint32_t pw_flow_hash(const pw_flow_key *k, uint32_t seed) {
    uint32_t w[10];
    for (uint32_t i = 0; i < 4u; i++) {
        w[i] = k->addr[0][i];
        w[4u + i] = k->addr[1][i];
    }
    w[8] = (uint32_t)k->port[0] | ((uint32_t)k->port[1] << 16);
    w[9] = (uint32_t)k->zone | ((uint32_t)k->proto << 16) | ((uint32_t)k->ip_version << 24);
    return pw_murmur3_words(w, seed);
}

PW_DEVICE bool pw_flow_rd16(const uint8_t *f, uint32_t len, uint32_t off, uint32_t *v) {
    if (off > len || len - off < 2u) return false;
    *v = ((uint32_t)f[off] << 8) | f[off + 1u];
    return true;
}

PW_DEVICE bool pw_flow_rd32(const uint8_t *f, uint32_t len, uint32_t off, uint32_t *v) {
    uint32_t hi, lo;
    if (!pw_flow_rd16(f, len, off, &hi) || !pw_flow_rd16(f, len, off + 2u, &lo)) return false;
    *v = (hi << 16) | lo;
    return true;
}

/* key::tcp_wscale over the options at [off, end). */
PW_DEVICE uint8_t pw_flow_wscale(const uint8_t *f, uint32_t off, uint32_t end) {
    uint32_t i = off;
    while (i < end) {
        uint32_t kind = f[i];
        if (kind == 0u) break;
        if (kind == 1u) {
            i++;
            continue;
        }
        if (i + 1u >= end) break;
        uint32_t l = f[i + 1u];
        if (l < 2u || i + l > end) break;
        if (kind == 3u && l == 3u) return (uint8_t)(f[i + 2u] < 14u ? f[i + 2u] : 14u);
        i += l;
    }
    return (uint8_t)PW_FLOW_NO_WSCALE;
}

/* (addr, port) <= (addr, port), addresses word by word. */
PW_DEVICE bool pw_flow_ep_le(const uint32_t *a, uint16_t ap, const uint32_t *b, uint16_t bp) {
    for (uint32_t i = 0; i < 4u; i++)
        if (a[i] != b[i]) return a[i] < b[i];
    return ap <= bp;
}

/* key::is_icmp_error */
PW_DEVICE bool pw_flow_icmp_error(uint32_t v, uint32_t ty) {
    if (v == 4u) return ty == 3u || ty == 4u || ty == 5u || ty == 11u || ty == 12u;
    return ty >= 1u && ty <= 4u;
}

/* key::quoted: the packet an ICMP error quotes (IP header at `off`); returns 0, or
 * PW_FLOW_INVALID / PW_FLOW_UNTRACKED. */
PW_DEVICE uint8_t pw_flow_quoted(const uint8_t *f, uint32_t len, uint32_t off, uint32_t v, uint32_t *src,
                                 uint32_t *dst, uint16_t *sp, uint16_t *dp, uint32_t *proto) {
    if (off >= len) return PW_FLOW_INVALID;
    uint32_t b0 = f[off], l4 = 0, x = 0;
    if ((b0 >> 4) != v) return PW_FLOW_INVALID;
    for (uint32_t i = 0; i < 4u; i++) src[i] = dst[i] = 0;
    if (v == 4u) {
        uint32_t ihl = (b0 & 0xfu) * 4u;
        if (ihl < 20u) return PW_FLOW_INVALID;
        if (!pw_flow_rd16(f, len, off + 6u, &x)) return PW_FLOW_INVALID;
        if (x & 0x1fffu) return PW_FLOW_UNTRACKED;
        if (!pw_flow_rd32(f, len, off + 12u, &src[0]) || !pw_flow_rd32(f, len, off + 16u, &dst[0]))
            return PW_FLOW_INVALID;
        if (off + 9u >= len) return PW_FLOW_INVALID;
        *proto = f[off + 9u];
        l4 = off + ihl;
    } else {
        for (uint32_t i = 0; i < 4u; i++)
            if (!pw_flow_rd32(f, len, off + 8u + 4u * i, &src[i]) || !pw_flow_rd32(f, len, off + 24u + 4u * i, &dst[i]))
                return PW_FLOW_INVALID;
        if (off + 6u >= len) return PW_FLOW_INVALID;
        *proto = f[off + 6u];
        l4 = off + 40u;
    }
    uint32_t echo_proto = v == 4u ? 1u : 58u, a = 0, b = 0;
    if (*proto == 6u || *proto == 17u || *proto == 132u) {
        if (!pw_flow_rd16(f, len, l4, &a) || !pw_flow_rd16(f, len, l4 + 2u, &b)) return PW_FLOW_INVALID;
    } else if (*proto == echo_proto) {
        if (l4 >= len) return PW_FLOW_INVALID;
        uint32_t ty = f[l4];
        bool echo = v == 4u ? (ty == 8u || ty == 0u) : (ty == 128u || ty == 129u);
        if (!echo) return PW_FLOW_UNTRACKED;
        if (!pw_flow_rd16(f, len, l4 + 4u, &a)) return PW_FLOW_INVALID;
        b = a;
    }
    *sp = (uint16_t)a;
    *dp = (uint16_t)b;
    return 0;
}

/* key::classify, plus the bucket. */
PW_DEVICE void pw_flow_classify(const pw_flow_table *t, const pw_packet_meta *m, const uint8_t *f, uint32_t len,
                                pw_flow_pkt *p) {
    for (uint32_t i = 0; i < 4u; i++) p->key.addr[0][i] = p->key.addr[1][i] = 0;
    p->key.port[0] = p->key.port[1] = 0;
    p->key.zone = 0;
    p->key.proto = p->key.ip_version = 0;
    p->bucket = p->ip_len = p->seq = p->ack = p->seg_len = 0;
    p->tcp_flags = p->win = 0;
    p->from_a = 1;
    p->kind = PW_FLOW_K_OTHER;
    p->wscale = (uint8_t)PW_FLOW_NO_WSCALE;
    p->none = 0;
    if (m->ip_version != 4u && m->ip_version != 6u) { p->none = PW_FLOW_UNTRACKED; return; }
    if (m->flags & PW_MF_FRAGMENT) { p->none = PW_FLOW_UNTRACKED; return; }
    uint32_t s = m->status;
    if ((s & PW_PARSE_INNER) == 0u && s >= 7u && s <= 23u) { p->none = PW_FLOW_INVALID; return; }
    uint32_t proto = m->ip_proto, l3 = m->l3_offset, l4 = m->l4_offset, v = 0;
    bool ok = m->ip_version == 4u ? pw_flow_rd16(f, len, l3 + 2u, &v) : pw_flow_rd16(f, len, l3 + 4u, &v);
    if (!ok) { p->none = PW_FLOW_INVALID; return; }
    p->ip_len = m->ip_version == 4u ? v : v + 40u;
    bool echo = (proto == 1u && m->ip_version == 4u) || (proto == 58u && m->ip_version == 6u);
    bool has_l4 = (m->flags & PW_MF_L4) != 0u;
    if ((proto == 6u || proto == 17u || proto == 132u || echo) && !has_l4) { p->none = PW_FLOW_INVALID; return; }
    uint16_t sport = 0, dport = 0;
    uint32_t src[4], dst[4];
    for (uint32_t i = 0; i < 4u; i++) {
        src[i] = m->src_ip[i];
        dst[i] = m->dst_ip[i];
    }
    if (proto == 6u) {
        uint32_t w = 0;
        p->kind = PW_FLOW_K_TCP;
        p->tcp_flags = (uint16_t)(m->tcp_flags & 0x1ffu);
        if (!pw_flow_rd32(f, len, l4 + 4u, &p->seq) || !pw_flow_rd32(f, len, l4 + 8u, &p->ack) ||
            !pw_flow_rd16(f, len, l4 + 14u, &w) || l4 + 12u >= len) {
            p->none = PW_FLOW_INVALID;
            return;
        }
        uint32_t doff = (uint32_t)(f[l4 + 12u] >> 4) * 4u;
        p->win = (uint16_t)w;
        uint32_t hdr = (l4 >= l3 ? l4 - l3 : 0u) + doff;
        p->seg_len = p->ip_len > hdr ? p->ip_len - hdr : 0u;
        if ((p->tcp_flags & 0x02u) && doff > 20u) {
            if (l4 + doff > len) { p->none = PW_FLOW_INVALID; return; }
            p->wscale = pw_flow_wscale(f, l4 + 20u, l4 + doff);
        }
        sport = m->src_port;
        dport = m->dst_port;
    } else if (proto == 17u) {
        p->kind = PW_FLOW_K_UDP;
        sport = m->src_port;
        dport = m->dst_port;
    } else if (proto == 132u) {
        sport = m->src_port;
        dport = m->dst_port;
    } else if (echo) {
        uint32_t req = m->ip_version == 4u ? 8u : 128u, rep = m->ip_version == 4u ? 0u : 129u, id = 0;
        if (pw_flow_icmp_error(m->ip_version, m->icmp_type)) {
            p->kind = PW_FLOW_K_RELATED;
            p->none = pw_flow_quoted(f, len, l4 + 8u, m->ip_version, src, dst, &sport, &dport, &proto);
            if (p->none) return;
        } else if (m->icmp_type != req && m->icmp_type != rep) {
            p->none = PW_FLOW_UNTRACKED;
            return;
        } else {
            p->kind = m->icmp_type == req ? PW_FLOW_K_ECHO_REQ : PW_FLOW_K_ECHO_REP;
            if (!pw_flow_rd16(f, len, l4 + 4u, &id)) { p->none = PW_FLOW_INVALID; return; }
            sport = dport = (uint16_t)id;
        }
    }
    bool from_a = pw_flow_ep_le(src, sport, dst, dport);
    p->from_a = from_a ? 1u : 0u;
    for (uint32_t i = 0; i < 4u; i++) {
        p->key.addr[0][i] = from_a ? src[i] : dst[i];
        p->key.addr[1][i] = from_a ? dst[i] : src[i];
    }
    p->key.port[0] = from_a ? sport : dport;
    p->key.port[1] = from_a ? dport : sport;
    p->key.zone = (m->flags & PW_MF_VLAN) ? (uint16_t)(m->vlan_tci[0] & 0xfffu) : (uint16_t)0;
    p->key.proto = (uint8_t)proto;
    p->key.ip_version = m->ip_version;
    p->bucket = pw_flow_hash(&p->key, t->seed) % t->nbuckets;
}

PW_DEVICE bool pw_flow_key_eq(const pw_flow_key *a, const pw_flow_key *b) {
    for (uint32_t i = 0; i < 4u; i++)
        if (a->addr[0][i] != b->addr[0][i] || a->addr[1][i] != b->addr[1][i]) return false;
    return a->port[0] == b->port[0] && a->port[1] == b->port[1] && a->zone == b->zone && a->proto == b->proto &&
           a->ip_version == b->ip_version;
}

/* table::timeout_class */
PW_DEVICE uint32_t pw_flow_tclass(const pw_flow_entry *e) {
    uint32_t proto = e->key.proto;
    if (proto == 6u) return e->state;
    if (proto == 17u) return (e->flags & PW_FLOW_EF_SEEN_REPLY) ? PW_FLOW_TC_UDP_REPLIED : PW_FLOW_TC_UDP_UNREPLIED;
    if ((proto == 1u && e->key.ip_version == 4u) || (proto == 58u && e->key.ip_version == 6u)) return PW_FLOW_TC_ICMP;
    return PW_FLOW_TC_OTHER;
}

PW_DEVICE bool pw_flow_expired(const pw_flow_table *t, const pw_flow_entry *e, uint64_t now) {
    uint64_t to = t->timeout_ns[pw_flow_tclass(e) & (PW_FLOW_TCLASSES - 1u)];
    uint64_t end = e->last_seen_ns + to;
    if (end < e->last_seen_ns) end = ~(uint64_t)0; /* saturating */
    return end <= now;
}

PW_DEVICE void pw_flow_entry_zero(pw_flow_entry *e) {
    uint64_t *w = (uint64_t *)e;
    for (uint32_t i = 0; i < PW_FLOW_ENTRY_SIZE / 8u; i++) w[i] = 0;
}

/* table::ct_state_of */
PW_DEVICE uint8_t pw_flow_ct_state(const pw_flow_entry *e) {
    if (e->key.proto == 6u) {
        uint32_t s = e->state;
        if (s == PW_TCP_FIN_WAIT || s == PW_TCP_CLOSE_WAIT || s == PW_TCP_LAST_ACK) return PW_CT_CLOSING;
        if (s == PW_TCP_TIME_WAIT || s == PW_TCP_CLOSE) return PW_CT_CLOSED;
    }
    return (e->flags & PW_FLOW_EF_SEEN_REPLY) ? PW_CT_ESTABLISHED : PW_CT_NEW;
}

/* tcp::packet_class */
PW_DEVICE uint32_t pw_flow_tcp_class(uint32_t fl) {
    if (fl & 0x04u) return 4u;
    if (fl & 0x02u) return (fl & 0x10u) ? 1u : 0u;
    if (fl & 0x01u) return 2u;
    if (fl & 0x10u) return 3u;
    return 5u;
}

PW_DEVICE uint32_t pw_flow_tcp_next(uint32_t reply, uint32_t fl, uint32_t state) {
    if (state > 9u) state = 9u;
    return pw_flow_tcp_table[(reply * 6u + pw_flow_tcp_class(fl)) * 10u + state];
}

/* ---- strict: window.rs (a reduced tcp_in_window) ---- */
PW_DEVICE bool pw_flow_before(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }
PW_DEVICE bool pw_flow_after(uint32_t a, uint32_t b) { return pw_flow_before(b, a); }

PW_DEVICE uint32_t pw_flow_seg_end(const pw_flow_pkt *p) {
    return p->seq + p->seg_len + ((p->tcp_flags & 0x02u) ? 1u : 0u) + ((p->tcp_flags & 0x01u) ? 1u : 0u);
}

PW_DEVICE void pw_flow_from_syn(pw_flow_window *w, const pw_flow_pkt *p) {
    uint32_t end = pw_flow_seg_end(p);
    w->end = w->maxend = end;
    w->maxwin = p->win ? p->win : 1u;
    if (p->wscale == PW_FLOW_NO_WSCALE) {
        w->scale = 0;
        w->flags = (uint8_t)(w->flags & ~PW_FLOW_WF_SCALE);
    } else {
        w->scale = p->wscale;
        w->flags = (uint8_t)(w->flags | PW_FLOW_WF_SCALE);
    }
}

PW_DEVICE void pw_flow_window_init(pw_flow_entry *e, const pw_flow_pkt *p) {
    pw_flow_window *w = e->window;
    w[0].end = w[0].maxend = w[0].maxwin = w[1].end = w[1].maxend = w[1].maxwin = 0;
    w[0].scale = w[0].flags = w[1].scale = w[1].flags = 0;
    w[0].reserved = w[1].reserved = 0;
    if (e->state == PW_TCP_SYN_SENT) {
        pw_flow_from_syn(&w[0], p);
    } else {
        w[0].end = pw_flow_seg_end(p);
        w[0].maxwin = p->win ? p->win : 1u;
        w[0].maxend = w[0].end + w[0].maxwin;
        w[0].flags = w[1].flags = PW_FLOW_WF_LIBERAL;
    }
}

PW_DEVICE bool pw_flow_window_check(pw_flow_entry *e, uint32_t dir, const pw_flow_pkt *p, uint32_t old) {
    if (e->window[dir].flags & PW_FLOW_WF_LIBERAL) return true;
    pw_flow_window w[2];
    w[0] = e->window[0];
    w[1] = e->window[1];
    uint32_t s = dir, r = 1u - dir;
    uint32_t end = pw_flow_seg_end(p);
    bool syn = (p->tcp_flags & 0x02u) != 0u, has_ack = (p->tcp_flags & 0x10u) != 0u;
    if (w[s].maxwin == 0u) {
        if (syn) {
            pw_flow_from_syn(&w[s], p);
            if ((w[s].flags & w[r].flags & PW_FLOW_WF_SCALE) == 0u) w[s].scale = w[r].scale = 0;
            if (!has_ack) {
                e->window[0] = w[0];
                e->window[1] = w[1];
                return true;
            }
        } else {
            w[s].end = end;
            uint32_t swin = (uint32_t)p->win << w[s].scale;
            w[s].maxwin = swin ? swin : 1u;
            w[s].maxend = end + w[s].maxwin;
            if (w[r].maxwin == 0u) w[r].end = w[r].maxend = p->ack;
        }
    } else if (((old == PW_TCP_SYN_SENT && dir == 0u) || (old == PW_TCP_SYN_RECV && dir == 1u)) &&
               pw_flow_after(end, w[s].end)) {
        pw_flow_from_syn(&w[s], p);
    }
    uint32_t ack = has_ack ? p->ack : w[r].end;
    uint32_t max_ack_win = w[s].maxwin > 66000u ? w[s].maxwin : 66000u;
    bool ok = pw_flow_before(p->seq, w[s].maxend + 1u) && pw_flow_after(end, w[s].end - w[r].maxwin - 1u) &&
              pw_flow_before(ack, w[r].end + 1u) && pw_flow_after(ack, w[r].end - max_ack_win - 1u);
    if (!ok) return false;
    uint32_t win = syn ? (uint32_t)p->win : (uint32_t)p->win << w[s].scale;
    if (w[s].maxwin < win) w[s].maxwin = win;
    if (pw_flow_after(end, w[s].end)) w[s].end = end;
    if (w[r].maxwin != 0u && pw_flow_after(end, w[s].maxend)) w[r].maxwin += end - w[s].maxend;
    if (pw_flow_after(ack + win, w[r].maxend - 1u)) w[r].maxend = ack + (win ? win : 1u);
    e->window[0] = w[0];
    e->window[1] = w[1];
    return true;
}

PW_DEVICE void pw_flow_account(pw_flow_entry *e, uint32_t dir, const pw_flow_pkt *p, uint64_t now) {
    e->packets[dir] += 1u;
    e->bytes[dir] += p->ip_len;
    e->tcp_flags[dir] = (uint16_t)(e->tcp_flags[dir] | p->tcp_flags);
    if (now > e->last_seen_ns) e->last_seen_ns = now;
}

PW_DEVICE pw_flow_result pw_flow_res(uint32_t ct, uint32_t dir, uint32_t outcome) {
    pw_flow_result r;
    r.ct_state = (uint8_t)ct;
    r.dir = (uint8_t)dir;
    r.outcome = (uint8_t)outcome;
    r.reserved = 0;
    return r;
}

PW_DEVICE pw_flow_result pw_flow_invalid(pw_flow_counters *c) {
    PW_FLOW_ADD(&c->invalid, 1u);
    return pw_flow_res(PW_CT_INVALID, 0u, PW_FLOW_INVALID);
}

/* table::FlowTable::note_ended: entry `e` leaves the table for `cause`; into the ring, if any. */
PW_DEVICE void pw_flow_note_ended(pw_flow_ring *r, const pw_flow_entry *e, uint32_t cause) {
    if (r == 0 || r->cap == 0u) return;
    uint64_t *stamps = (uint64_t *)(r + 1);
    pw_flow_entry *recs = (pw_flow_entry *)(stamps + r->cap);
    uint64_t seq;
#if PW_GPU
    /* Threads of a round end flows of different buckets at once: a slot each, in CAS order. */
    for (;;) {
        seq = *(volatile uint64_t *)&r->head;
        if (seq - *(volatile uint64_t *)&r->tail >= (uint64_t)r->cap) {
            atomicAdd((unsigned long long *)&r->lost, 1ull);
            return;
        }
        if (atomicCAS((unsigned long long *)&r->head, (unsigned long long)seq, (unsigned long long)(seq + 1u)) == seq)
            break;
    }
#else
    seq = r->head;
    if (seq - r->tail >= (uint64_t)r->cap) {
        r->lost++;
        return;
    }
    r->head = seq + 1u;
#endif
    pw_flow_entry rec = *e;
    rec.reserved = (uint16_t)cause;
    recs[seq % r->cap] = rec;
#if PW_GPU
    /* The record before its stamp, for a host that reads the ring while the kernel runs. */
    __threadfence_system();
    *(volatile uint64_t *)&stamps[seq % r->cap] = seq + 1u;
#else
    stamps[seq % r->cap] = seq + 1u;
#endif
}

/* table::FlowTable::create */
PW_DEVICE pw_flow_result pw_flow_create(const pw_flow_table *t, pw_flow_counters *c, pw_flow_entry *e,
                                        const pw_flow_pkt *p, uint32_t state, uint64_t now) {
    pw_flow_entry_zero(e);
    e->key = p->key;
    e->first_seen_ns = e->last_seen_ns = now;
    e->state = (uint8_t)state;
    e->flags = (uint8_t)(PW_FLOW_EF_OCCUPIED | (p->from_a ? PW_FLOW_EF_ORIG_FROM_A : 0u));
    if (t->strict && p->kind == PW_FLOW_K_TCP) pw_flow_window_init(e, p);
    pw_flow_account(e, 0u, p, now);
    PW_FLOW_ADD(&c->created, 1u);
    return pw_flow_res(pw_flow_ct_state(e), 0u, PW_FLOW_TRACKED);
}

/* table::FlowTable::update */
PW_DEVICE pw_flow_result pw_flow_update(const pw_flow_table *t, pw_flow_counters *c, pw_flow_entry *slot,
                                        const pw_flow_pkt *p, uint64_t now, pw_flow_ring *ring) {
    pw_flow_entry e = *slot;
    uint32_t orig_from_a = (e.flags & PW_FLOW_EF_ORIG_FROM_A) ? 1u : 0u;
    uint32_t dir = (uint32_t)p->from_a != orig_from_a ? 1u : 0u;
    bool replied_before = (e.flags & PW_FLOW_EF_SEEN_REPLY) != 0u;
    if (p->kind == PW_FLOW_K_TCP) {
        uint32_t old = e.state, nw = pw_flow_tcp_next(dir, p->tcp_flags, old);
        if (nw == PW_TCP_IV) return pw_flow_invalid(c);
        if (nw == PW_TCP_IG) nw = old;
        if (nw == PW_TCP_SYN_SENT && (old == PW_TCP_TIME_WAIT || old == PW_TCP_CLOSE)) {
            pw_flow_note_ended(ring, slot, PW_FLOW_END_REOPENED);
            return pw_flow_create(t, c, slot, p, PW_TCP_SYN_SENT, now);
        }
        if (t->strict && !pw_flow_window_check(&e, dir, p, old)) return pw_flow_invalid(c);
        e.state = (uint8_t)nw;
        if (dir == 1u) e.flags |= PW_FLOW_EF_SEEN_REPLY;
        if (nw == PW_TCP_ESTABLISHED && (old == PW_TCP_SYN_RECV || old == PW_TCP_ESTABLISHED) &&
            (e.flags & PW_FLOW_EF_SEEN_REPLY))
            e.flags |= PW_FLOW_EF_ASSURED;
    } else if (p->kind == PW_FLOW_K_UDP) {
        if (replied_before) e.flags |= PW_FLOW_EF_ASSURED;
        if (dir == 1u) e.flags |= PW_FLOW_EF_SEEN_REPLY;
    } else if (dir == 1u) {
        e.flags |= PW_FLOW_EF_SEEN_REPLY;
    }
    pw_flow_account(&e, dir, p, now);
    *slot = e;
    return pw_flow_res(pw_flow_ct_state(&e), dir, PW_FLOW_TRACKED);
}

/* table::FlowTable::apply_packet: visit the bucket (reclaim expired entries), find the flow or
 * make room for it; the flows that end meanwhile go to `ring` (0: none). */
PW_DEVICE pw_flow_result pw_flow_apply_pkt_ring(const pw_flow_table *t, pw_flow_counters *c, const pw_flow_pkt *p,
                                                uint64_t now, pw_flow_ring *ring) {
    if (p->none == PW_FLOW_UNTRACKED) {
        PW_FLOW_ADD(&c->untracked, 1u);
        return pw_flow_res(PW_CT_UNTRACKED, 0u, PW_FLOW_UNTRACKED);
    }
    if (p->none) return pw_flow_invalid(c);
    pw_flow_entry *b = t->entries + (uint64_t)p->bucket * PW_FLOW_BUCKET;
    /* Every entry's flags first: eight independent loads in flight at once (one trip to memory,
     * not one per entry behind the last one's branch), which leave the entries' lines in cache
     * for the reads below. Zeroing an entry changes no other entry's flags. */
    uint8_t fl[PW_FLOW_BUCKET];
    for (uint32_t i = 0; i < PW_FLOW_BUCKET; i++) fl[i] = b[i].flags;
    int32_t found = -1;
    for (uint32_t i = 0; i < PW_FLOW_BUCKET; i++) {
        if (!(fl[i] & PW_FLOW_EF_OCCUPIED)) continue;
        if (pw_flow_expired(t, &b[i], now)) {
            pw_flow_note_ended(ring, &b[i], PW_FLOW_END_EXPIRED);
            pw_flow_entry_zero(&b[i]);
            PW_FLOW_ADD(&c->expired, 1u);
        } else if (pw_flow_key_eq(&b[i].key, &p->key)) {
            found = (int32_t)i;
        }
    }
    if (p->kind == PW_FLOW_K_RELATED) {
        /* An ICMP error about a flow: related, the other way than the quoted packet; no change. */
        if (found < 0) return pw_flow_invalid(c);
        uint32_t orig_from_a = (b[found].flags & PW_FLOW_EF_ORIG_FROM_A) ? 1u : 0u;
        return pw_flow_res(PW_CT_RELATED, (uint32_t)p->from_a == orig_from_a ? 1u : 0u, PW_FLOW_TRACKED);
    }
    if (found >= 0) return pw_flow_update(t, c, &b[found], p, now, ring);
    uint32_t state = 0;
    if (p->kind == PW_FLOW_K_TCP) {
        state = pw_flow_tcp_next(0u, p->tcp_flags, PW_TCP_NONE);
        if (state >= PW_TCP_IV) return pw_flow_invalid(c);
    } else if (p->kind == PW_FLOW_K_ECHO_REP) {
        return pw_flow_invalid(c);
    }
    /* A free slot, else the unassured entry ranked lowest by (replied, last seen, slot). */
    int32_t slot = -1, victim = -1;
    for (uint32_t i = 0; i < PW_FLOW_BUCKET; i++) {
        if (!(b[i].flags & PW_FLOW_EF_OCCUPIED)) {
            slot = (int32_t)i;
            break;
        }
        if (b[i].flags & PW_FLOW_EF_ASSURED) continue;
        if (victim < 0) {
            victim = (int32_t)i;
            continue;
        }
        uint32_t rv = b[victim].flags & PW_FLOW_EF_SEEN_REPLY, ri = b[i].flags & PW_FLOW_EF_SEEN_REPLY;
        if (ri < rv || (ri == rv && b[i].last_seen_ns < b[victim].last_seen_ns)) victim = (int32_t)i;
    }
    if (slot < 0) {
        if (victim < 0) {
            PW_FLOW_ADD(&c->table_full, 1u);
            return pw_flow_res(PW_CT_UNTRACKED, 0u, PW_FLOW_TABLE_FULL);
        }
        PW_FLOW_ADD(&c->early_evicted, 1u);
        slot = victim;
        pw_flow_note_ended(ring, &b[slot], PW_FLOW_END_EVICTED);
    }
    return pw_flow_create(t, c, &b[slot], p, state, now);
}

/* pw_flow_apply_pkt_ring without a ring (conntrack without flow export). */
PW_DEVICE pw_flow_result pw_flow_apply_pkt(const pw_flow_table *t, pw_flow_counters *c, const pw_flow_pkt *p,
                                           uint64_t now) {
    return pw_flow_apply_pkt_ring(t, c, p, now, 0);
}

/* Phase 1 of a burst: frame i's key and bucket into pk[i], for i = tid, tid + nthreads, ... */
PW_DEVICE void pw_flow_burst_classify(const pw_flow_table *t, uint32_t n, const pw_packet_meta *metas,
                                      const uint8_t *const *frames, const uint32_t *lens, pw_flow_pkt *pk,
                                      uint32_t tid, uint32_t nthreads) {
    for (uint32_t i = tid; i < n; i += nthreads) pw_flow_classify(t, &metas[i], frames[i], lens[i], &pk[i]);
}

/* Phase 2 (after every thread's phase 1): thread tid applies, in burst order, the frames whose
 * bucket % nthreads == tid (frames without a flow: index % nthreads == tid). */
PW_DEVICE void pw_flow_burst_apply_ring(const pw_flow_table *t, pw_flow_counters *c, uint32_t n,
                                        const pw_flow_pkt *pk, const uint64_t *now, pw_flow_result *out,
                                        uint32_t tid, uint32_t nthreads, pw_flow_ring *ring) {
    for (uint32_t i = 0; i < n; i++) {
        uint32_t owner = pk[i].none ? i % nthreads : pk[i].bucket % nthreads;
        if (owner == tid) out[i] = pw_flow_apply_pkt_ring(t, c, &pk[i], now[i], ring);
    }
}

PW_DEVICE void pw_flow_burst_apply(const pw_flow_table *t, pw_flow_counters *c, uint32_t n, const pw_flow_pkt *pk,
                                   const uint64_t *now, pw_flow_result *out, uint32_t tid, uint32_t nthreads) {
    pw_flow_burst_apply_ring(t, c, n, pk, now, out, tid, nthreads, 0);
}

/* table::FlowResult::store: the result's bytes in the frame's metadata; ct_dir 1 from the
 * flow's originator, 2 reply, 0 when the frame was not tracked. */
PW_DEVICE void pw_flow_meta_store(pw_packet_meta *m, pw_flow_result r) {
    m->ct_state = r.ct_state;
    m->ct_dir = r.outcome == PW_FLOW_TRACKED ? (uint8_t)(r.dir + 1u) : (uint8_t)0u;
}

#endif /* PKTWARP_FLOW_CUH */
