/* Stage `inspect` on the GPU: the IDS rules of pipeline/inspect, one thread per frame, with the
 * CPU stage's semantics (pipeline::stage::inspect): the inspected packet (the inner one of a
 * VXLAN / GTP-U tunnel whose inner L4 header `parse` found, else the outer IP packet) decoded as
 * pktwarp_inspect::eval::decode does; a TCP segment that starts an HTTP head which does not end
 * in it counted (heads_split, pktwarp_inspect::http::parse's Incomplete); the L4 payload through
 * the rule set's prefilter (inspect_match.cuh's image), then every candidate rule (the rules of
 * the patterns found and the rules without one) checked in rule order (inspect_eval.cuh). A
 * matching `pass` rule ends inspection; otherwise every matching rule alerts (its hit counter)
 * and a `drop` / `reject` rule drops the frame (PW_DROP_INSPECT); an alerted frame not dropped
 * goes to the host or is mirrored when `alert_to` says so.
 *
 * What runs here is the rule set the host accepts for the GPU (pktwarp_inspect::gpu): rules of
 * the payload buffer, without flowbits / threshold / detection_filter / noalert, at most
 * PW_INSP_GPU_MAX_RULES. Counters v[1..5]: inspected, alerts, drops, passes, heads_split
 * (pipeline::stage::inspect::COUNTER_NAMES). */
#ifndef PKTWARP_INSPECT_STAGE_CUH
#define PKTWARP_INSPECT_STAGE_CUH

#include "pktwarp_abi.h"
#define PW_INSPECT_NO_KERNELS 1
#include "inspect_match.cuh"
#include "inspect_eval.cuh"
#include "count.cuh"

#define PW_DROP_INSPECT 13u
#define PW_INSP_GPU_MAX_RULES 16384u
#define PW_INSP_ALERT_NONE 0u
#define PW_INSP_ALERT_HOST 1u
#define PW_INSP_ALERT_MIRROR 2u

#if PW_GPU
#define PW_INSP_HIT(p) atomicAdd((unsigned long long *)(p), 1ull)
#define PW_INSP_CTZ(x) ((uint32_t)__ffs((int)(x)) - 1u)
#else
#define PW_INSP_HIT(p) (*(p) += 1u)
#define PW_INSP_CTZ(x) ((uint32_t)__builtin_ctz(x))
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
    uint32_t reserved;    /* 52 */
} pw_insp_params;
PW_STATIC_ASSERT(sizeof(pw_insp_params) == 56, "pw_insp_params size");
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

PW_DEVICE int pw_insp_is_upper(uint8_t c) { return c >= 'A' && c <= 'Z'; }

/* Whether a segment starts an HTTP head that does not end in it (http::parse's Incomplete): the
 * first line is a request or status line and no empty line follows; or there is no line end and
 * the bytes look like HTTP. */
PW_DEVICE int pw_insp_http_split(const uint8_t *s, uint32_t n) {
    uint32_t fe = 0;
    while (fe < n && s[fe] != '\n') fe++;
    if (fe == n) {
        if (n >= 5 && s[0] == 'H' && s[1] == 'T' && s[2] == 'T' && s[3] == 'P' && s[4] == '/') return 1;
        if (n < 3) return 0;
        uint32_t i = 0, space = 0;
        for (; i < n && s[i] != ' '; i++)
            if (!pw_insp_is_upper(s[i])) return 0;
        for (; i < n; i++) space |= s[i] == ' ';
        return space;
    }
    uint32_t fl = fe > 0 && s[fe - 1] == '\r' ? fe - 1 : fe; /* the first line, without CR */
    if (fl >= 5 && s[0] == 'H' && s[1] == 'T' && s[2] == 'T' && s[3] == 'P' && s[4] == '/') {
        /* rest.splitn(3, ' '): the version, then the code (3 digits) */
        uint32_t i = 5;
        while (i < fl && s[i] != ' ') i++;
        if (i >= fl) return 0;
        uint32_t c = ++i;
        while (i < fl && s[i] != ' ') i++;
        if (i - c != 3u) return 0;
        for (uint32_t k = c; k < i; k++)
            if (s[k] < '0' || s[k] > '9') return 0;
    } else {
        /* three non-empty space-separated parts: a method of upper case, '-', '_' (at most 32),
         * a target, a version starting HTTP/ */
        uint32_t i = 0, part = 0;
        while (part < 3u) {
            while (i < fl && s[i] == ' ') i++;
            if (i >= fl) return 0;
            uint32_t a = i;
            while (i < fl && s[i] != ' ') i++;
            if (part == 0u) {
                if (i - a > 32u) return 0;
                for (uint32_t k = a; k < i; k++)
                    if (!pw_insp_is_upper(s[k]) && s[k] != '-' && s[k] != '_') return 0;
            } else if (part == 2u) {
                if (i - a < 5u || s[a] != 'H' || s[a + 1] != 'T' || s[a + 2] != 'T' || s[a + 3] != 'P' ||
                    s[a + 4] != '/')
                    return 0;
            }
            part++;
        }
    }
    /* header lines up to an empty one; none: incomplete */
    uint32_t pos = fe + 1;
    for (;;) {
        uint32_t e = pos;
        while (e < n && s[e] != '\n') e++;
        if (e >= n) return 1;
        uint32_t len = e - pos;
        if (len == 0u || (len == 1u && s[pos] == '\r')) return 0;
        pos = e + 1;
    }
}

/* The prefilter over the payload: the bit of every rule of every pattern found is set in cand.
 * A rule has one pattern, so a pattern's list is set once (its first rule's bit says so). */
PW_DEVICE void pw_insp_prefilter(const uint8_t *blk, const pw_insp_params *p, const uint8_t *buf, uint32_t len,
                                 uint32_t *cand) {
    if (p->image_off == 0u) return;
    const uint32_t *img = (const uint32_t *)(blk + p->image_off);
    const uint32_t *starts = (const uint32_t *)(blk + p->rules_of_off);
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

/* Whether rule r matches: header, frame tests and the payload's ops (every op of a rule the GPU
 * takes is of buffer 0). */
PW_DEVICE int pw_insp_payload_rule(const pw_insp_prog *p, uint32_t r, const pw_insp_frame *f, const uint8_t *buf,
                                   uint32_t len) {
    const pw_insp_rule *h = &p->rules[r];
    if (!pw_insp_header_matches(p, h, f) || !pw_insp_frame_tests(h, f)) return 0;
    if (h->ops[1] == 0u) return 1;
    return pw_insp_group(p, p->ops + h->ops[0], h->ops[1], buf, len);
}

/* One frame: 1 inspected (counted), 0 not an IP frame. */
PW_DEVICE_CALL void pw_insp_frame_run(const uint8_t *blk, const pw_frame *f, const pw_packet_meta *meta,
                                      pw_verdict *v, pw_stage_counters *c) {
    const pw_insp_params *p = (const pw_insp_params *)blk;
    uint32_t l3;
    if ((meta->flags & (PW_MF_TUNNEL | PW_MF_INNER_L4)) == (PW_MF_TUNNEL | PW_MF_INNER_L4)) l3 = meta->inner_l3_offset;
    else if (meta->ip_version == 4u || meta->ip_version == 6u) l3 = meta->l3_offset;
    else return;
    if (l3 > f->len) return;
    pw_insp_frame fr;
    const uint8_t *pay;
    uint32_t plen;
    if (!pw_insp_decode(f->data + l3, f->len - l3, &fr, &pay, &plen)) return;
    fr.ct_state = meta->ct_state;
    fr.ct_dir = meta->ct_dir;
    fr.has_http = 0;
    fr.buf_len[0] = plen;
    PW_ADD64(&c->v[1], 1u);
    if (fr.ip_proto == PW_INSP_PROTO_TCP && pw_insp_http_split(pay, plen)) PW_ADD64(&c->v[5], 1u);
    uint32_t cand[PW_INSP_GPU_MAX_RULES / 32u];
    uint32_t words = (p->n_rules + 31u) / 32u;
    if (words > PW_INSP_GPU_MAX_RULES / 32u) return; /* refused by the host */
    for (uint32_t w = 0; w < words; w++) cand[w] = 0u;
    pw_insp_prefilter(blk, p, pay, plen, cand);
    const uint32_t *always = (const uint32_t *)(blk + p->always_off);
    for (uint32_t k = 0; k < p->n_always; k++) cand[always[k] >> 5] |= 1u << (always[k] & 31u);
    pw_insp_prog prog = pw_insp_resolve(blk + p->prog_off);
    /* Candidates in rule order; the bitmap keeps those that match. */
    uint32_t n_matched = 0, drop = 0;
    for (uint32_t w = 0; w < words; w++) {
        uint32_t bits = cand[w], keep = 0;
        while (bits) {
            uint32_t b = PW_INSP_CTZ(bits);
            bits &= bits - 1u;
            uint32_t r = w * 32u + b;
            if (!pw_insp_payload_rule(&prog, r, &fr, pay, plen)) continue;
            uint32_t a = prog.rules[r].action;
            if (a == PW_INSP_ACT_PASS) {
                PW_ADD64(&c->v[4], 1u);
                return;
            }
            if (a == PW_INSP_ACT_DROP || a == PW_INSP_ACT_REJECT) drop = 1;
            keep |= 1u << b;
            n_matched++;
        }
        cand[w] = keep;
    }
    if (n_matched == 0u) return;
    PW_ADD64(&c->v[2], n_matched);
    uint64_t *hits = p->hits ? (uint64_t *)p->hits + (uint64_t)(p->bank & 1u) * PW_INSP_GPU_MAX_RULES : 0;
    uint32_t v6 = (f->data[l3] >> 4) == 6u;
    for (uint32_t w = 0; w < words; w++)
        for (uint32_t bits = cand[w]; bits; bits &= bits - 1u) {
            uint32_t r = w * 32u + PW_INSP_CTZ(bits);
            if (hits != 0) PW_INSP_HIT(&hits[r]);
            pw_insp_log(p, f, meta, &fr, r, v6);
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

/* Stage `inspect`. */
PW_DEVICE void pw_stage_inspect(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                                pw_stage_counters *c) {
    if (params == 0) return;
    pw_insp_frame_run((const uint8_t *)params, f, meta, v, c);
}

#endif /* PKTWARP_INSPECT_STAGE_CUH */
