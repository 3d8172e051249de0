/* Stage `inspect` on the GPU: the IDS rules of pipeline/inspect, one thread per frame, with the
 * CPU stage's semantics (pipeline::stage::inspect): the inspected packet (the inner one of a
 * VXLAN / GTP-U tunnel whose inner L4 header `parse` found, else the outer IP packet) decoded as
 * pktwarp_inspect::eval::decode does; a TCP segment that starts an HTTP head which does not end
 * in it counted (heads_split, pktwarp_inspect::http::parse's Incomplete); the L4 payload and the
 * HTTP buffers of a head the segment carries (inspect_http.cuh) through the rule set's prefilters
 * (inspect_match.cuh's images), then every candidate rule (the rules of the patterns found and
 * the rules without one) checked in rule order (inspect_eval.cuh) over its buffers. A
 * matching `pass` rule ends inspection; otherwise every matching rule alerts (its hit counter)
 * and a `drop` / `reject` rule drops the frame (PW_DROP_INSPECT); an alerted frame not dropped
 * goes to the host or is mirrored when `alert_to` says so.
 *
 * What runs here is the rule set the host accepts for the GPU (pktwarp_inspect::gpu): rules of
 * the payload and HTTP buffers, at most PW_INSP_GPU_MAX_RULES. Rules with flowbits, noalert,
 * threshold or detection_filter go through the queue's state tables (inspect_state.cuh) as the
 * CPU's Stateful: the candidates' stateless checks run in parallel, a thread per frame; a frame
 * where such a rule matched then waits for the round's earlier such frames (flow_order.cuh's
 * second channel) and resolves its matches against the state, so the state changes in frame order
 * as on the CPU. Counters v[1..5]: inspected, alerts, drops, passes, heads_split
 * (pipeline::stage::inspect::COUNTER_NAMES); the state's flows_full, trackers_full, suppressed
 * after the hit counters' two banks (a bank's four u64). */
#ifndef PKTWARP_INSPECT_STAGE_CUH
#define PKTWARP_INSPECT_STAGE_CUH

#include "pktwarp_abi.h"
#define PW_INSPECT_NO_KERNELS 1
#include "inspect_match.cuh"
#include "inspect_eval.cuh"
#include "inspect_http.cuh"
#include "inspect_state.cuh"
#include "flow_order.cuh"
#include "count.cuh"

#define PW_DROP_INSPECT 13u
#define PW_INSP_GPU_MAX_RULES 16384u
#define PW_INSP_ALERT_NONE 0u
#define PW_INSP_ALERT_HOST 1u
#define PW_INSP_ALERT_MIRROR 2u

#if PW_GPU
#define PW_INSP_HIT(p) atomicAdd((unsigned long long *)(p), 1ull)
#define PW_INSP_CTZ(x) ((uint32_t)__ffs((int)(x)) - 1u)
#define PW_INSP_POPC(x) ((uint32_t)__popc(x))
#else
#define PW_INSP_HIT(p) (*(p) += 1u)
#define PW_INSP_CTZ(x) ((uint32_t)__builtin_ctz(x))
#define PW_INSP_POPC(x) ((uint32_t)__builtin_popcount(x))
#endif

/* The parameter block (pktwarp_inspect::gpu::GpuBlock): offsets in bytes from its start. */
typedef struct pw_insp_params {
    uint64_t hits;        /*  0: u64 per rule, by rule index (a stage buffer: the executor writes it) */
    uint32_t n_rules;     /*  8 */
    uint32_t alert_to;    /* 12: PW_INSP_ALERT_* */
    uint32_t prog_off;    /* 16: the eval image (pw_insp_header ...), 8-aligned */
    uint32_t image_off;   /* 20: the payload prefilter image (u32 words); 0: no pattern */
    uint32_t rules_of_off;/* 24: u32 [n_patterns + 1] starts, then the rule indices */
    uint32_t always_off;  /* 28: u32 rule indices of the rules without a pattern */
    uint32_t n_always;    /* 32 */
    uint32_t alert_cap;   /* 36: entries of the alert ring, a power of two; 0: no ring */
    uint64_t alerts;      /* 40: the alert ring (a stage buffer: the executor writes it) */
    uint32_t bank;        /* 48: the hit counters' bank (the rule set's generation & 1): a reload's
                           * set counts apart from the bursts of the set before it still running */
    uint32_t http_off;    /* 52: the HTTP buffers' prefilters: u32 n, then n x [buffer, image_off,
                           * rules_of_off] (each as image_off / rules_of_off above); 0: none */
    uint32_t state_off;   /* 56: the rules' state section (inspect_state.cuh); 0: no rule keeps state */
    uint32_t state_gen;   /* 60: the set's state generation (never 0): other tables start empty */
    uint64_t state;       /* 64: queue 0's state tables (the per-queue state, written by the executor) */
    uint32_t queues;      /* 72: queues with tables (written by the executor) */
    uint32_t flow_cap;    /* 76: flow slots a queue (a power of two, twice max_flows or more) */
    uint64_t queue_bytes; /* 80: bytes of one queue's state */
    uint32_t max_flows;   /* 88 */
    uint32_t max_trk;     /* 92 */
    uint32_t trk_cap;     /* 96: tracker slots a queue (a power of two) */
    uint32_t pad;
    uint64_t idle_ns;     /* 104: a flow's bits may be dropped after this long idle */
} pw_insp_params;
PW_STATIC_ASSERT(sizeof(pw_insp_params) == 112, "pw_insp_params size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_insp_params, state) == 64, "pw_insp_params.state");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_insp_params, idle_ns) == 104, "pw_insp_params.idle_ns");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_insp_params, alerts) == 40, "pw_insp_params.alerts");

/* One alert for the host's EVE log (pktwarp_inspect::gpu::AlertRec): the ring is a 64-byte
 * header (u64: entries taken) then alert_cap entries; entry i of the log sits at i % alert_cap
 * and carries tag = i + 1, stored after the rest (a fence between), so the host tells a written
 * entry from an older lap's or one being written. */
typedef struct pw_insp_alert {
    uint64_t tag;
    uint64_t ts;              /*  8: receive time (pw_frame.timestamp_ns) */
    uint64_t src[2], dst[2];  /* 16: address keys */
    uint32_t rule;            /* 48: rule index */
    uint16_t src_port, dst_port;
    uint8_t ip_proto, icmp_type, icmp_code, v6; /* 56; v6: bit 0 IPv6, bit 1 the hit bank */
    uint16_t vlan[2];         /* 60: VLAN id + 1 of the outer, inner tag; 0 none */
} pw_insp_alert;
PW_STATIC_ASSERT(sizeof(pw_insp_alert) == 64, "pw_insp_alert size");

/* Logs rule `rule`'s alert on the frame into the ring. */
PW_DEVICE void pw_insp_log(const pw_insp_params *p, const pw_frame *f, const pw_packet_meta *meta,
                           const pw_insp_frame *fr, uint32_t rule, uint32_t v6) {
    if (p->alerts == 0ull || p->alert_cap == 0u) return;
    uint8_t *ring = (uint8_t *)p->alerts;
#if PW_GPU
    uint64_t i = atomicAdd((unsigned long long *)ring, 1ull);
#else
    uint64_t i = (*(uint64_t *)ring)++;
#endif
    pw_insp_alert *e = (pw_insp_alert *)(ring + 64u + (i & (uint64_t)(p->alert_cap - 1u)) * 64u);
    e->ts = f->timestamp_ns;
    e->src[0] = fr->src[0];
    e->src[1] = fr->src[1];
    e->dst[0] = fr->dst[0];
    e->dst[1] = fr->dst[1];
    e->rule = rule;
    e->src_port = fr->src_port;
    e->dst_port = fr->dst_port;
    e->ip_proto = fr->ip_proto;
    e->icmp_type = fr->icmp_type;
    e->icmp_code = fr->icmp_code;
    e->v6 = (uint8_t)(v6 | ((p->bank & 1u) << 1));
    for (uint32_t k = 0; k < 2u; k++)
        e->vlan[k] = k < meta->vlan_count ? (uint16_t)((meta->vlan_tci[k] & 0x0fffu) + 1u) : (uint16_t)0u;
#if PW_GPU
    __threadfence_system();
    *(volatile uint64_t *)&e->tag = i + 1ull;
#else
    e->tag = i + 1u;
#endif
}

PW_DEVICE uint16_t pw_insp_be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
PW_DEVICE uint32_t pw_insp_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* The frame's fields and payload (eval::decode::decode_ip on bytes[0, n)): 0 when it is not an
 * IPv4 / IPv6 packet whose header is whole. */
PW_DEVICE int pw_insp_decode(const uint8_t *b, uint32_t n, pw_insp_frame *f, const uint8_t **payload,
                             uint32_t *plen) {
    if (n == 0) return 0;
    const uint8_t *l4;
    uint32_t l4len, first = 1, proto;
    f->src[0] = f->src[1] = f->dst[0] = f->dst[1] = 0;
    if ((b[0] >> 4) == 4) {
        uint32_t hl = (uint32_t)(b[0] & 0x0f) * 4u;
        if (n < 20u || hl < 20u) return 0;
        uint32_t total = pw_insp_be16(b + 2);
        if (total < hl || n < hl) return 0;
        uint32_t end = total < n ? total : n;
        l4 = b + hl;
        l4len = end > hl ? end - hl : 0u;
        f->src[1] = 0x0000ffff00000000ull | pw_insp_be32(b + 12);
        f->dst[1] = 0x0000ffff00000000ull | pw_insp_be32(b + 16);
        proto = b[9];
        first = (pw_insp_be16(b + 6) & 0x1fffu) == 0u;
    } else if ((b[0] >> 4) == 6) {
        if (n < 40u) return 0;
        uint32_t end = 40u + pw_insp_be16(b + 4);
        if (end > n) end = n;
        l4 = b + 40;
        l4len = end - 40u;
        for (int w = 0; w < 2; w++) {
            f->src[w] = ((uint64_t)pw_insp_be32(b + 8 + 8 * w) << 32) | pw_insp_be32(b + 12 + 8 * w);
            f->dst[w] = ((uint64_t)pw_insp_be32(b + 24 + 8 * w) << 32) | pw_insp_be32(b + 28 + 8 * w);
        }
        proto = b[6];
        for (uint32_t k = 0; k < 8u; k++) {
            if (!(proto == 0u || proto == 43u || proto == 44u || proto == 51u || proto == 60u)) break;
            uint32_t min = proto == 44u ? 8u : 2u;
            if (l4len < min) return 0;
            uint32_t hl = proto == 44u ? 8u : proto == 51u ? ((uint32_t)l4[1] + 2u) * 4u : ((uint32_t)l4[1] + 1u) * 8u;
            if (l4len < hl) return 0;
            if (proto == 44u) first = (pw_insp_be16(l4 + 2) >> 3) == 0u;
            proto = l4[0];
            l4 += hl;
            l4len -= hl;
        }
    } else {
        return 0;
    }
    f->ip_proto = (uint8_t)proto;
    f->src_port = f->dst_port = 0;
    f->tcp_flags = f->icmp_type = f->icmp_code = 0;
    *payload = l4;
    *plen = 0;
    if (!first) return 1;
    if (proto == PW_INSP_PROTO_TCP) {
        if (l4len >= 20u) {
            uint32_t hl = (uint32_t)(l4[12] >> 4) * 4u;
            if (hl >= 20u && l4len >= hl) {
                f->src_port = pw_insp_be16(l4);
                f->dst_port = pw_insp_be16(l4 + 2);
                f->tcp_flags = l4[13];
                *payload = l4 + hl;
                *plen = l4len - hl;
            }
        }
    } else if (proto == PW_INSP_PROTO_UDP) {
        if (l4len >= 8u) {
            f->src_port = pw_insp_be16(l4);
            f->dst_port = pw_insp_be16(l4 + 2);
            *payload = l4 + 8;
            *plen = l4len - 8u;
        }
    } else if (proto == PW_INSP_PROTO_ICMP) {
        if (l4len >= 8u) {
            f->icmp_type = l4[0];
            f->icmp_code = l4[1];
            *payload = l4 + 8;
            *plen = l4len - 8u;
        }
    } else {
        *plen = l4len;
    }
    return 1;
}

/* A prefilter over buf: the bit of every rule of every pattern found is set in cand. A rule has
 * one pattern, so a pattern's list is set once (its first rule's bit says so). */
PW_DEVICE void pw_insp_prefilter_at(const uint8_t *blk, uint32_t image_off, uint32_t rules_of_off, const uint8_t *buf,
                                    uint32_t len, uint32_t *cand) {
    const uint32_t *img = (const uint32_t *)(blk + image_off);
    const uint32_t *starts = (const uint32_t *)(blk + rules_of_off);
    pw_im_view v = pw_im_open(img);
    const uint32_t *rules = starts + v.n_patterns + 1u;
    uint32_t s = 0;
    for (uint32_t i = 0; i < len; i++) {
        uint32_t t = pw_im_step(&v, s, v.cls[buf[i]]);
        s = t & ~PW_IM_FLAG;
        if (!(t & PW_IM_FLAG)) continue;
        for (uint32_t k = v.oidx[s]; k < v.oidx[s + 1u]; k++) {
            uint32_t e = v.out[k], pat = e & ~PW_IM_FLAG;
            uint32_t a = starts[pat], b = starts[pat + 1u];
            if (a == b || (cand[rules[a] >> 5] & (1u << (rules[a] & 31u)))) continue;
            if ((e & PW_IM_FLAG) && !pw_im_verify(&v, pat, buf, i + 1u)) continue;
            for (uint32_t j = a; j < b; j++) cand[rules[j] >> 5] |= 1u << (rules[j] & 31u);
        }
    }
}

/* The prefilter over the payload. */
PW_DEVICE void pw_insp_prefilter(const uint8_t *blk, const pw_insp_params *p, const uint8_t *buf, uint32_t len,
                                 uint32_t *cand) {
    if (p->image_off == 0u) return;
    pw_insp_prefilter_at(blk, p->image_off, p->rules_of_off, buf, len, cand);
}

/* The prefilters of the HTTP buffers the head has (engine::RuleSet::inspect_gated's). */
PW_DEVICE void pw_insp_prefilter_http(const uint8_t *blk, const pw_insp_params *p, pw_insp_http *h, uint32_t *cand) {
    if (p->http_off == 0u || h->kind != PW_INSP_HTTP_HEAD) return;
    const uint32_t *t = (const uint32_t *)(blk + p->http_off);
    for (uint32_t k = 0; k < t[0]; k++) {
        const uint32_t *e = t + 1u + 3u * k;
        const uint8_t *buf;
        uint32_t len = pw_insp_http_buf(h, e[0], &buf);
        if (len) pw_insp_prefilter_at(blk, e[1], e[2], buf, len, cand);
    }
}

/* Whether rule r matches: header, frame tests and each buffer's ops (eval::payload_matches), the
 * HTTP buffers from the head (none without one). */
PW_DEVICE int pw_insp_buf_rule(const pw_insp_prog *p, uint32_t r, const pw_insp_frame *f, pw_insp_http *h,
                               const uint8_t *pay, uint32_t plen) {
    const pw_insp_rule *hd = &p->rules[r];
    if (!pw_insp_header_matches(p, hd, f) || !pw_insp_frame_tests(hd, f)) return 0;
    const pw_insp_op *ops = p->ops + hd->ops[0];
    uint32_t n = hd->ops[1], g = 0;
    while (g < n) {
        uint32_t b = ops[g].buffer, end = g;
        while (end < n && ops[end].buffer == b) end++;
        const uint8_t *buf = pay;
        uint32_t len = b == 0u ? plen : pw_insp_http_buf(h, b, &buf);
        if (!pw_insp_group(p, ops + g, end - g, buf, len)) return 0;
        g = end;
    }
    return 1;
}

/* The frame's queue's state tables (0 when the executor gave none: not reached, the host sizes
 * them for every queue whenever rules may keep state). */
PW_DEVICE int pw_insp_st_open(const uint8_t *blk, const pw_insp_params *p, const pw_frame *f,
                              const pw_insp_frame *fr, uint32_t v6, uint64_t *ctr, pw_insp_st *s) {
    if (p->state == 0ull || p->state_off == 0u || f->queue >= p->queues) return 0;
    uint8_t *q = (uint8_t *)(p->state + (uint64_t)f->queue * p->queue_bytes);
    s->sec = (const uint32_t *)(blk + p->state_off);
    s->h = (pw_insp_qhdr *)q;
    s->flows = (pw_insp_fent *)(q + sizeof(pw_insp_qhdr));
    s->trk = (pw_insp_tent *)(q + sizeof(pw_insp_qhdr) + (uint64_t)p->flow_cap * sizeof(pw_insp_fent));
    s->flow_cap = p->flow_cap;
    s->trk_cap = p->trk_cap;
    s->max_flows = p->max_flows;
    s->max_trk = p->max_trk;
    s->idle_ns = p->idle_ns;
    s->ctr = ctr;
    s->now = f->timestamp_ns;
    for (int w = 0; w < 2; w++) {
        s->src[w] = fr->src[w];
        s->dst[w] = fr->dst[w];
    }
    s->sport = fr->src_port;
    s->dport = fr->dst_port;
    s->proto = fr->ip_proto;
    s->v6 = (uint8_t)v6;
    s->ct_dir = fr->ct_dir;
    pw_insp_st_begin(s, p->state_gen);
    return 1;
}

/* The matched rules `m` (rule order) through the state, as the CPU stage does
 * (pipeline::stage::inspect, Stateful::apply_actions): each matching `pass` rule in rule order
 * ends inspection when its state lets it act (a pass rule without state always does), else it is
 * passed over; then the other rules, setters before readers (the record's class), each kept in
 * `m` when it alerts. Returns 1 for a pass; *drop: a drop / reject rule's action applies. */
PW_DEVICE_CALL int pw_insp_resolve_state(const pw_insp_prog *prog, const uint32_t *sec, pw_insp_st *s, int have,
                                    uint32_t *m, uint32_t words, uint32_t *drop) {
    for (uint32_t w = 0; w < words; w++)
        for (uint32_t bits = m[w]; bits; bits &= bits - 1u) {
            uint32_t b = PW_INSP_CTZ(bits), r = w * 32u + b;
            if (prog->rules[r].action != PW_INSP_ACT_PASS) continue;
            const uint32_t *rec = pw_insp_st_rec(sec, r);
            int fire, act;
            if (rec == 0 || (have && pw_insp_st_rule(s, r, rec, &fire, &act) && act)) return 1;
            m[w] &= ~(1u << b);
        }
    for (uint32_t c = 0; c < 3u; c++)
        for (uint32_t w = 0; w < words; w++)
            for (uint32_t bits = m[w]; bits; bits &= bits - 1u) {
                uint32_t b = PW_INSP_CTZ(bits), r = w * 32u + b;
                const uint32_t *rec = pw_insp_st_rec(sec, r);
                if (pw_insp_st_class(rec) != c) continue;
                int fire = 1, act = 1;
                if (rec != 0 && !(have && pw_insp_st_rule(s, r, rec, &fire, &act))) fire = act = 0;
                uint32_t a = prog->rules[r].action;
                if (act && (a == PW_INSP_ACT_DROP || a == PW_INSP_ACT_REJECT)) *drop = 1u;
                if (!fire) m[w] &= ~(1u << b);
            }
    return 0;
}

/* The frame's matches (`cand`, rule order) decided (pw_insp_frame_body's second half, called so
 * that its registers are its own: the composed IDS kernels sit at the register ceiling): a rule
 * keeping state among them (`stateful`) resolves against the queue's state in frame order (the
 * round's earlier such frames first); then the alerts, hits, log lines and the verdict. */
PW_DEVICE_CALL void pw_insp_decide(const uint8_t *blk, const pw_frame *f, const pw_packet_meta *meta, pw_verdict *v,
                                   pw_stage_counters *c, const pw_insp_frame *fr, const pw_insp_prog *prog,
                                   uint32_t *cand, uint32_t words, uint32_t n_matched, uint32_t drop,
                                   uint32_t stateful, uint32_t l3) {
    const pw_insp_params *p = (const pw_insp_params *)blk;
    const uint32_t *sec = p->state_off ? (const uint32_t *)(blk + p->state_off) : 0;
    uint32_t v6 = (f->data[l3] >> 4) == 6u;
    uint64_t *hits = p->hits ? (uint64_t *)p->hits + (uint64_t)(p->bank & 1u) * PW_INSP_GPU_MAX_RULES : 0;
    uint64_t spare[4] = {0, 0, 0, 0};
    uint64_t *ctr = p->hits ? (uint64_t *)p->hits + 2u * PW_INSP_GPU_MAX_RULES + 4u * (p->bank & 1u) : spare;
    pw_order2_publish(stateful ? 0u : PW_ORDER_NONE);
    if (stateful) {
        pw_order2_wait(0u);
        pw_insp_st st;
        int have = pw_insp_st_open(blk, p, f, fr, v6, ctr, &st);
        drop = 0u;
        int pass = pw_insp_resolve_state(prog, sec, &st, have, cand, words, &drop);
        pw_order2_done();
        if (pass) {
            PW_ADD64(&c->v[4], 1u);
            return;
        }
        n_matched = 0;
        for (uint32_t w = 0; w < words; w++) n_matched += PW_INSP_POPC(cand[w]);
    } else {
        pw_order2_done();
    }
    if (n_matched == 0u && !drop) return;
    if (n_matched) PW_ADD64(&c->v[2], n_matched);
    for (uint32_t w = 0; w < words; w++)
        for (uint32_t bits = cand[w]; bits; bits &= bits - 1u) {
            uint32_t r = w * 32u + PW_INSP_CTZ(bits);
            if (hits != 0) PW_INSP_HIT(&hits[r]);
            pw_insp_log(p, f, meta, fr, r, v6);
        }
    if (drop) {
        PW_ADD64(&c->v[3], 1u);
        v->action = (uint8_t)PW_ACTION_DROP;
        v->drop_reason = (uint8_t)PW_DROP_INSPECT;
    } else if (p->alert_to == PW_INSP_ALERT_HOST) {
        v->action = (uint8_t)PW_ACTION_TO_HOST;
    } else if (p->alert_to == PW_INSP_ALERT_MIRROR && v->action == PW_ACTION_PASS) {
        v->action = (uint8_t)PW_ACTION_MIRROR;
    }
}

/* One frame (pw_insp_frame_run): 1 when it took its place on the state's order channel (it
 * reached pw_insp_decide), 0 when it is not inspected or a pass ended it before. */
PW_DEVICE int pw_insp_frame_body(const uint8_t *blk, const pw_frame *f, const pw_packet_meta *meta, pw_verdict *v,
                                 pw_stage_counters *c) {
    const pw_insp_params *p = (const pw_insp_params *)blk;
    uint32_t l3;
    if ((meta->flags & (PW_MF_TUNNEL | PW_MF_INNER_L4)) == (PW_MF_TUNNEL | PW_MF_INNER_L4)) l3 = meta->inner_l3_offset;
    else if (meta->ip_version == 4u || meta->ip_version == 6u) l3 = meta->l3_offset;
    else return 0;
    if (l3 > f->len) return 0;
    pw_insp_frame fr;
    const uint8_t *pay;
    uint32_t plen;
    if (!pw_insp_decode(f->data + l3, f->len - l3, &fr, &pay, &plen)) return 0;
    fr.ct_state = meta->ct_state;
    fr.ct_dir = meta->ct_dir;
    pw_insp_http hh;
    hh.kind = PW_INSP_HTTP_NOT;
    if (fr.ip_proto == PW_INSP_PROTO_TCP) pw_insp_http_parse(&hh, pay, plen);
    fr.has_http = hh.kind == PW_INSP_HTTP_HEAD;
    fr.buf_len[0] = plen;
    PW_ADD64(&c->v[1], 1u);
    if (hh.kind == PW_INSP_HTTP_SPLIT) PW_ADD64(&c->v[5], 1u);
    uint32_t cand[PW_INSP_GPU_MAX_RULES / 32u];
    uint32_t words = (p->n_rules + 31u) / 32u;
    if (words > PW_INSP_GPU_MAX_RULES / 32u) return 0; /* refused by the host */
    for (uint32_t w = 0; w < words; w++) cand[w] = 0u;
    pw_insp_prefilter(blk, p, pay, plen, cand);
    pw_insp_prefilter_http(blk, p, &hh, cand);
    const uint32_t *always = (const uint32_t *)(blk + p->always_off);
    for (uint32_t k = 0; k < p->n_always; k++) cand[always[k] >> 5] |= 1u << (always[k] & 31u);
    pw_insp_prog prog = pw_insp_resolve(blk + p->prog_off);
    /* Candidates in rule order (in parallel, no state): the bitmap keeps those that match, up to
     * the first matching `pass` rule without state, where inspection ends whatever follows (the
     * words after its word are left out; with no rule keeping state before it, it passes). */
    uint32_t n_matched = 0, drop = 0, stateful = 0;
    for (uint32_t w = 0; w < words; w++) {
        uint32_t bits = cand[w], keep = 0;
        while (bits) {
            uint32_t b = PW_INSP_CTZ(bits);
            bits &= bits - 1u;
            uint32_t r = w * 32u + b;
            if (!pw_insp_buf_rule(&prog, r, &fr, &hh, pay, plen)) continue;
            keep |= 1u << b;
            n_matched++;
            uint32_t a = prog.rules[r].action;
            if (prog.rules[r].state) stateful = 1u;
            else if (a == PW_INSP_ACT_PASS) {
                if (!stateful) {
                    PW_ADD64(&c->v[4], 1u);
                    return 0;
                }
                words = w + 1u;
                break;
            } else if (a == PW_INSP_ACT_DROP || a == PW_INSP_ACT_REJECT) drop = 1u;
        }
        cand[w] = keep;
    }
    pw_insp_decide(blk, f, meta, v, c, &fr, &prog, cand, words, n_matched, drop, stateful, l3);
    return 1;
}

/* One frame: inspected (counted) when it is an IP frame; every frame takes its place on the
 * state's order channel (flow_order.cuh), so later frames of the round never wait for it. */
PW_DEVICE_CALL void pw_insp_frame_run(const uint8_t *blk, const pw_frame *f, const pw_packet_meta *meta,
                                      pw_verdict *v, pw_stage_counters *c) {
    if (!pw_insp_frame_body(blk, f, meta, v, c)) pw_order2_skip();
}

/* Stage `inspect`. */
PW_DEVICE void pw_stage_inspect(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                                pw_stage_counters *c) {
    if (params == 0) {
        pw_order2_skip();
        return;
    }
    pw_insp_frame_run((const uint8_t *)params, f, meta, v, c);
}

#endif /* PKTWARP_INSPECT_STAGE_CUH */
