/* The inspect stage's full check in CUDA C: one IDS rule of the compiled program against one
 * frame's buffers, and the batch kernels over (frame, candidate rules) that write per candidate
 * whether it matched and per frame the verdict. The Rust reference is pipeline/inspect/src/eval
 * (mod.rs: the semantics; image.rs: the image and the batch records, layouts pinned there and
 * asserted here); pipeline/inspect/tests/eval_cuda_host.rs holds the two equal through
 * host/inspect_eval_host.cpp.
 *
 * The image (one 8-aligned block, read-only): pw_insp_header, then packed arrays of
 * pw_insp_op, pw_insp_addr, pw_insp_rule, pw_insp_port, uint32_t KMP failure words (one per
 * pattern byte), the pattern bytes and the pcre DFA tables (uint32_t words, inspect_pcre.cuh), at
 * the header's byte offsets. The host builds and checks
 * it (Program::image / from_image): spans are not checked again here.
 *
 * Work bound: a content search is KMP over its window (the failure words come with the image),
 * so it reads each window byte once plus at most as many fall-backs: <= 2 * buffer length steps.
 * A rule's buffer gets at most PW_INSP_SEARCH_LIMIT searches (then it does not match, as on the
 * CPU), so one (frame, rule) costs at most PW_INSP_SEARCH_LIMIT * 2 * (sum of its buffers'
 * lengths) byte steps plus 64 ops per search for the rest, whatever the payload. Portable C
 * subset (PW_DEVICE): the same code runs on the host for the differential tests. */
#ifndef PKTWARP_INSPECT_EVAL_CUH
#define PKTWARP_INSPECT_EVAL_CUH

#include "pktwarp_abi.h"
#include "inspect_pcre.cuh"

#define PW_INSP_MAGIC 0x45495750u /* "PWIE" little-endian */
#define PW_INSP_VERSION 3u
#define PW_INSP_BUFFERS 28u         /* rules::BUFFER_COUNT; buffer 0 is the L4 payload */
#define PW_INSP_MAX_OPS 64u         /* eval::program::MAX_OPS */
#define PW_INSP_SEARCH_LIMIT 3000u  /* eval::SEARCH_LIMIT */
#define PW_INSP_ABSENT 0xffffffffu  /* a buffer the frame does not have */
#define PW_INSP_NO_RULE 0xffffffffu /* verdict of a frame no candidate matched */
#define PW_INSP_NO_ACTION 0xffu
/* NVRTC has no <stdint.h> limits. */
#define PW_INSP_I64_MAX ((int64_t)0x7fffffffffffffffLL)
#define PW_INSP_I64_MIN (-PW_INSP_I64_MAX - 1)
#define PW_INSP_U64_MAX 0xffffffffffffffffULL

#define PW_INSP_OP_CONTENT 1u
#define PW_INSP_OP_ISDATAAT 2u
#define PW_INSP_OP_BYTE_TEST 3u
#define PW_INSP_OP_BYTE_JUMP 4u
#define PW_INSP_OP_URILEN 5u
#define PW_INSP_OP_PCRE 6u /* pat_off/pat_len: its table in the DFA words; b: its reverse table's length */

#define PW_INSP_F_NEGATED 0x1u
#define PW_INSP_F_NOCASE 0x2u
#define PW_INSP_F_RELATIVE 0x4u
#define PW_INSP_F_DISTANCE 0x8u
#define PW_INSP_F_WITHIN 0x10u
#define PW_INSP_F_OFFSET 0x20u
#define PW_INSP_F_DEPTH 0x40u
#define PW_INSP_F_RETRY 0x80u
#define PW_INSP_F_STRING 0x100u
#define PW_INSP_F_LITTLE 0x200u
#define PW_INSP_F_ALIGN 0x400u
#define PW_INSP_F_FROM_BEGINNING 0x800u
#define PW_INSP_F_BITMASK 0x1000u

#define PW_INSP_ACT_ALERT 0u
#define PW_INSP_ACT_DROP 1u
#define PW_INSP_ACT_PASS 2u
#define PW_INSP_ACT_REJECT 3u

/* eval::program::FL_* (pw_insp_rule.flow) and the ct states the flow test reads */
#define PW_INSP_FL_TO_SERVER 1u
#define PW_INSP_FL_TO_CLIENT 2u
#define PW_INSP_FL_ESTABLISHED 4u
#define PW_INSP_FL_NOT_ESTABLISHED 8u
#define PW_INSP_CT_ESTABLISHED 2u
#define PW_INSP_CT_CLOSING 5u

#define PW_INSP_PROTO_IP 0u
#define PW_INSP_PROTO_ICMP 1u
#define PW_INSP_PROTO_TCP 6u
#define PW_INSP_PROTO_UDP 17u

/* eval::program::Op */
typedef struct pw_insp_op {
    uint8_t kind, buffer;
    uint16_t flags;
    uint8_t nbytes, cmp, base, pad;
    int32_t a, b;
    uint32_t pat_off, pat_len;
    uint64_t value, mask;
} pw_insp_op;
PW_STATIC_ASSERT(sizeof(pw_insp_op) == 40, "pw_insp_op size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_insp_op, value) == 24, "pw_insp_op.value");

/* eval::program::RangeCode: mode 0 none, 1 =a, 2 <a, 3 >a, 4 a<x<b */
typedef struct pw_insp_range {
    uint32_t mode, a, b;
} pw_insp_range;

/* eval::program::RuleHead; spans are [start, count] of the image's sections */
typedef struct pw_insp_rule {
    uint32_t sid, gid;
    uint8_t action, proto, http, both_ways;
    uint32_t src[2], dst[2], sport[2], dport[2], ops[2];
    pw_insp_range dsize, itype, icode;
    uint8_t has_flags, tcp_flags, flag_mode, flag_ignore;
    uint8_t flow, state, pad[2]; /* flow: PW_INSP_FL_* bits; state: 1 for a rule with state (inspect_state.cuh) */
} pw_insp_rule;
PW_STATIC_ASSERT(sizeof(pw_insp_rule) == 96, "pw_insp_rule size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_insp_rule, flow) == 92, "pw_insp_rule.flow");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_insp_rule, ops) == 44, "pw_insp_rule.ops");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_insp_rule, has_flags) == 88, "pw_insp_rule.has_flags");

/* eval::program::AddrRange: 128-bit keys as [most, least] significant words */
typedef struct pw_insp_addr {
    uint64_t lo[2], hi[2];
} pw_insp_addr;
PW_STATIC_ASSERT(sizeof(pw_insp_addr) == 32, "pw_insp_addr size");

typedef struct pw_insp_port {
    uint16_t lo, hi;
} pw_insp_port;

/* eval::image::ImageHeader; offsets in bytes from the image start */
typedef struct pw_insp_header {
    uint32_t magic, version, n_rules, n_ops, n_patterns, n_addrs, n_ports, n_dfa;
    uint32_t rules_off, ops_off, addrs_off, ports_off, patterns_off, fail_off, total, dfa_off;
} pw_insp_header;
PW_STATIC_ASSERT(sizeof(pw_insp_header) == 64, "pw_insp_header size");

/* eval::image::FrameRec: buffer b is arena[data_off + buf_off[b], + buf_len[b]) */
typedef struct pw_insp_frame {
    uint64_t src[2], dst[2];
    uint32_t data_off;
    uint16_t src_port, dst_port;
    uint8_t ip_proto, tcp_flags, icmp_type, icmp_code;
    uint8_t has_http, ct_state, ct_dir, pad; /* ct_*: pw_packet_meta's, 0 without conntrack */
    uint32_t buf_off[PW_INSP_BUFFERS];
    uint32_t buf_len[PW_INSP_BUFFERS];
} pw_insp_frame;
PW_STATIC_ASSERT(sizeof(pw_insp_frame) == 272, "pw_insp_frame size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_insp_frame, buf_len) == 160, "pw_insp_frame.buf_len");

/* eval::image::Verdict */
typedef struct pw_insp_verdict {
    uint32_t rule;
    uint8_t action, pad[3];
} pw_insp_verdict;
PW_STATIC_ASSERT(sizeof(pw_insp_verdict) == 8, "pw_insp_verdict size");

/* The image's sections, resolved once per thread. */
typedef struct pw_insp_prog {
    const pw_insp_rule *rules;
    const pw_insp_op *ops;
    const pw_insp_addr *addrs;
    const pw_insp_port *ports;
    const uint32_t *fail;
    const uint8_t *patterns;
    const uint32_t *dfa;
    uint32_t n_rules;
} pw_insp_prog;

PW_DEVICE pw_insp_prog pw_insp_resolve(const uint8_t *img) {
    const pw_insp_header *h = (const pw_insp_header *)img;
    pw_insp_prog p;
    p.rules = (const pw_insp_rule *)(img + h->rules_off);
    p.ops = (const pw_insp_op *)(img + h->ops_off);
    p.addrs = (const pw_insp_addr *)(img + h->addrs_off);
    p.ports = (const pw_insp_port *)(img + h->ports_off);
    p.fail = (const uint32_t *)(img + h->fail_off);
    p.patterns = img + h->patterns_off;
    p.dfa = (const uint32_t *)(img + h->dfa_off);
    p.n_rules = h->n_rules;
    return p;
}

/* Suricata's default action order (pass, drop, reject, alert): higher decides. */
PW_DEVICE uint32_t pw_insp_action_rank(uint32_t a) {
    switch (a) {
    case PW_INSP_ACT_PASS: return 4;
    case PW_INSP_ACT_DROP: return 3;
    case PW_INSP_ACT_REJECT: return 2;
    case PW_INSP_ACT_ALERT: return 1;
    default: return 0;
    }
}

PW_DEVICE int pw_insp_range_test(uint32_t mode, uint32_t a, uint32_t b, uint32_t x) {
    switch (mode) {
    case 1: return x == a;
    case 2: return x < a;
    case 3: return x > a;
    case 4: return a < x && x < b;
    default: return 1;
    }
}

PW_DEVICE int pw_insp_key_le(const uint64_t *a, const uint64_t *b) {
    return a[0] < b[0] || (a[0] == b[0] && a[1] <= b[1]);
}

PW_DEVICE int pw_insp_in_addrs(const pw_insp_prog *p, const uint32_t *span, const uint64_t *k) {
    for (uint32_t i = 0; i < span[1]; i++) {
        const pw_insp_addr *r = &p->addrs[span[0] + i];
        if (pw_insp_key_le(r->lo, k) && pw_insp_key_le(k, r->hi)) return 1;
    }
    return 0;
}

PW_DEVICE int pw_insp_in_ports(const pw_insp_prog *p, const uint32_t *span, uint16_t port) {
    for (uint32_t i = 0; i < span[1]; i++) {
        const pw_insp_port *r = &p->ports[span[0] + i];
        if (r->lo <= port && port <= r->hi) return 1;
    }
    return 0;
}

PW_DEVICE int pw_insp_one_way(const pw_insp_prog *p, const pw_insp_rule *r, int has_ports,
                              const uint64_t *src, uint16_t sp, const uint64_t *dst, uint16_t dp) {
    return pw_insp_in_addrs(p, r->src, src) && pw_insp_in_addrs(p, r->dst, dst) &&
           (!has_ports || (pw_insp_in_ports(p, r->sport, sp) && pw_insp_in_ports(p, r->dport, dp)));
}

PW_DEVICE int pw_insp_header_matches(const pw_insp_prog *p, const pw_insp_rule *r,
                                     const pw_insp_frame *f) {
    if (r->proto != PW_INSP_PROTO_IP && r->proto != f->ip_proto) return 0;
    if (r->http && !f->has_http) return 0;
    int has_ports = f->ip_proto == PW_INSP_PROTO_TCP || f->ip_proto == PW_INSP_PROTO_UDP;
    return pw_insp_one_way(p, r, has_ports, f->src, f->src_port, f->dst, f->dst_port) ||
           (r->both_ways && pw_insp_one_way(p, r, has_ports, f->dst, f->dst_port, f->src, f->src_port));
}

/* eval::program::flow_ok: every flow option given holds; ct_dir 0 untracked, 1 originator, 2 reply;
 * established = both sides seen (ct established or closing). */
PW_DEVICE int pw_insp_flow_ok(uint32_t flow, uint32_t ct_state, uint32_t ct_dir) {
    if ((flow & PW_INSP_FL_TO_SERVER) && ct_dir != 1u) return 0;
    if ((flow & PW_INSP_FL_TO_CLIENT) && ct_dir != 2u) return 0;
    int est = ct_dir != 0u && (ct_state == PW_INSP_CT_ESTABLISHED || ct_state == PW_INSP_CT_CLOSING);
    if ((flow & PW_INSP_FL_ESTABLISHED) && !est) return 0;
    return !((flow & PW_INSP_FL_NOT_ESTABLISHED) && est);
}

/* flow, dsize, itype / icode, flags (eval::frame_tests). */
PW_DEVICE int pw_insp_frame_tests(const pw_insp_rule *r, const pw_insp_frame *f) {
    if (r->flow && !pw_insp_flow_ok(r->flow, f->ct_state, f->ct_dir)) return 0;
    uint32_t plen = f->buf_len[0] == PW_INSP_ABSENT ? 0 : f->buf_len[0];
    if (r->dsize.mode && !pw_insp_range_test(r->dsize.mode, r->dsize.a, r->dsize.b, plen)) return 0;
    if ((r->itype.mode || r->icode.mode) &&
        (f->ip_proto != PW_INSP_PROTO_ICMP ||
         !pw_insp_range_test(r->itype.mode, r->itype.a, r->itype.b, f->icmp_type) ||
         !pw_insp_range_test(r->icode.mode, r->icode.a, r->icode.b, f->icmp_code)))
        return 0;
    if (!r->has_flags) return 1;
    if (f->ip_proto != PW_INSP_PROTO_TCP) return 0;
    uint32_t want = r->tcp_flags, mode = r->flag_mode; /* 0 exact, 1 all (+), 2 any (*), 3 not (!) */
    /* flags:0 asks for no flag at all (before the ignore mask); !0 for any. */
    if (want == 0 && f->tcp_flags != 0) return mode == 3;
    uint32_t got = (uint32_t)(f->tcp_flags & (uint8_t)~r->flag_ignore);
    switch (mode) {
    case 1: return (got & want) == want;
    case 2: return (got & want) != 0;
    case 3: return (got & want) != want;
    default: return got == want;
    }
}

/* The search window of a content op, [*start, *end) (eval::window). */
PW_DEVICE void pw_insp_window(const pw_insp_op *op, int64_t cursor, int64_t len, int64_t *start,
                              int64_t *end) {
    if (op->flags & (PW_INSP_F_DISTANCE | PW_INSP_F_WITHIN)) {
        int64_t dist = (op->flags & PW_INSP_F_DISTANCE) ? (int64_t)op->a : 0;
        *start = (dist < 0 && -dist > cursor) ? 0 : cursor + dist;
        *end = len;
        if ((op->flags & PW_INSP_F_WITHIN) && cursor + dist + (int64_t)op->b < *end)
            *end = cursor + dist + (int64_t)op->b;
    } else {
        *start = (op->flags & PW_INSP_F_OFFSET) ? (int64_t)op->a : 0;
        *end = len;
        if ((op->flags & PW_INSP_F_DEPTH) && (int64_t)op->b < len) *end = (int64_t)op->b;
    }
}

/* First occurrence of pat (lower case when nocase) within buf[start, end), -1 if none: KMP with
 * the image's failure words, one pass over the window. */
PW_DEVICE int64_t pw_insp_search(const uint8_t *buf, int64_t blen, int64_t start, int64_t end,
                                 const uint8_t *pat, const uint32_t *fail, uint32_t m, int nocase) {
    if (end > blen) end = blen;
    if (start < 0) start = 0;
    if (m == 0 || end - start < (int64_t)m) return -1;
    uint32_t q = 0;
    for (int64_t i = start; i < end; i++) {
        uint8_t c = buf[i];
        if (nocase && c >= 'A' && c <= 'Z') c = (uint8_t)(c + 32);
        while (q > 0 && pat[q] != c) q = fail[q - 1];
        if (pat[q] == c) q++;
        if (q == m) return i - (int64_t)m + 1;
    }
    return -1;
}

/* C's strtoull on s[0, n) in base 8 / 10 / 16 (eval::c_strtoull): 0 when no digit was read or
 * the value overflows, else 1 with *v and *used. */
PW_DEVICE int pw_insp_strtoull(const uint8_t *s, int64_t n, uint32_t base, uint64_t *v, int64_t *used) {
    int64_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == 0x0b ||
                     s[i] == 0x0c))
        i++;
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) {
        neg = s[i] == '-';
        i++;
    }
    if (base == 16 && i + 2 < n && s[i] == '0' && (s[i + 1] | 0x20) == 'x') {
        uint8_t h = s[i + 2];
        if ((h >= '0' && h <= '9') || ((h | 0x20) >= 'a' && (h | 0x20) <= 'f')) i += 2;
    }
    int64_t digits = i;
    uint64_t x = 0;
    while (i < n) {
        uint8_t c = s[i];
        uint32_t d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') d = (uint32_t)((c | 0x20) - 'a') + 10;
        else break;
        if (d >= base) break;
        if (x > PW_INSP_U64_MAX / base) return 0;
        x *= base;
        if (x > PW_INSP_U64_MAX - d) return 0;
        x += d;
        i++;
    }
    if (i == digits) return 0;
    *v = neg ? (uint64_t)0 - x : x;
    *used = i;
    return 1;
}

/* The number op reads at pos (eval::extract): 0 when it cannot be read. */
PW_DEVICE int pw_insp_extract(const pw_insp_op *op, const uint8_t *buf, int64_t blen, int64_t pos,
                              uint64_t *v, int64_t *used) {
    int64_t n = op->nbytes;
    if (pos < 0 || pos + n > blen) return 0;
    const uint8_t *b = buf + pos;
    if (op->flags & PW_INSP_F_STRING) {
        if (!pw_insp_strtoull(b, n, op->base, v, used)) return 0;
    } else {
        uint64_t x = 0;
        for (int64_t k = 0; k < n; k++)
            x = (x << 8) | ((op->flags & PW_INSP_F_LITTLE) ? b[n - 1 - k] : b[k]);
        *v = x;
        *used = n;
    }
    if (op->flags & PW_INSP_F_BITMASK) {
        *v &= op->mask;
        if (*v) {
            uint64_t m = op->mask;
            while (!(m & 1)) { /* the mask is non-zero here since *v is */
                m >>= 1;
                *v >>= 1;
            }
        }
    }
    return 1;
}

PW_DEVICE int pw_insp_byte_test(const pw_insp_op *op, const uint8_t *buf, int64_t blen, int64_t cursor) {
    int64_t base = (op->flags & PW_INSP_F_RELATIVE) ? cursor : 0, used;
    uint64_t v, x = op->value;
    if (!pw_insp_extract(op, buf, blen, base + op->a, &v, &used)) return 0;
    int r;
    switch (op->cmp) {
    case 0: r = v < x; break;
    case 1: r = v > x; break;
    case 2: r = v == x; break;
    case 3: r = v <= x; break;
    case 4: r = v >= x; break;
    case 5: r = (v & x) != 0; break;
    case 6: r = (v ^ x) != 0; break;
    default: r = 0; break; /* an unknown comparison is false, then negated like the others */
    }
    return r != ((op->flags & PW_INSP_F_NEGATED) != 0);
}

PW_DEVICE int64_t pw_insp_sat_add(int64_t a, int64_t b) {
    if (b > 0 && a > PW_INSP_I64_MAX - b) return PW_INSP_I64_MAX;
    if (b < 0 && a < PW_INSP_I64_MIN - b) return PW_INSP_I64_MIN;
    return a + b;
}

/* The cursor after a byte_jump, -1 when it lands outside the buffer (eval::byte_jump: saturating
 * arithmetic, landing on the end is outside). */
PW_DEVICE int64_t pw_insp_byte_jump(const pw_insp_op *op, const uint8_t *buf, int64_t blen, int64_t cursor) {
    int64_t base = (op->flags & PW_INSP_F_RELATIVE) ? cursor : 0, used;
    int64_t pos = base + op->a;
    uint64_t raw;
    if (!pw_insp_extract(op, buf, blen, pos, &raw, &used)) return -1;
    int64_t v = raw > (uint64_t)PW_INSP_I64_MAX ? PW_INSP_I64_MAX : (int64_t)raw;
    int64_t mul = op->value > (uint64_t)PW_INSP_I64_MAX ? PW_INSP_I64_MAX : (int64_t)op->value;
    v = (v != 0 && mul > PW_INSP_I64_MAX / v) ? PW_INSP_I64_MAX : v * mul;
    if ((op->flags & PW_INSP_F_ALIGN) && v % 4 != 0) v = pw_insp_sat_add(v, 4 - v % 4);
    v = pw_insp_sat_add(v, op->b);
    int64_t target = (op->flags & PW_INSP_F_FROM_BEGINNING) ? v : pw_insp_sat_add(v, pos + used);
    if (target < 0 || target >= blen) return -1;
    return target;
}

/* One pcre op of pw_insp_group (eval::group_matches' OP_PCRE and pcre_search); the walks it makes
 * are called, not inlined (they cost the composed IDS kernels fewer spills): the subject is the buffer,
 * or from the cursor with R; a retry (resume >= 0) searches it again from the last match start + 1.
 * Returns the new cursor (the match end; the cursor itself for a negated pcre that holds) when the
 * op holds, PW_INSP_PCRE_FAIL when it fails (the group may retry an earlier op), PW_INSP_PCRE_STOP
 * when no retry can change that. A retried pcre's match start goes to *found. */
#define PW_INSP_PCRE_FAIL (-1)
#define PW_INSP_PCRE_STOP (-2)
PW_DEVICE int64_t pw_insp_pcre_op(const uint32_t *dfa, const pw_insp_op *op, const uint8_t *buf,
                                       int64_t len, int64_t cursor, int64_t resume, int64_t *found) {
    int relative = (op->flags & PW_INSP_F_RELATIVE) != 0;
    int64_t sub = relative ? (cursor < 0 ? 0 : (cursor > len ? len : cursor)) : 0;
    int64_t from = resume >= 0 ? (resume > sub ? resume : sub) : sub;
    const uint32_t *t = dfa + op->pat_off;
    int64_t hit = from > len ? -1 : pw_pcre_find_end(t, buf, len, sub, from);
    if (op->flags & PW_INSP_F_NEGATED) {
        if (hit < 0) return cursor;
        return (!relative && !(op->flags & PW_INSP_F_RETRY)) ? PW_INSP_PCRE_STOP : PW_INSP_PCRE_FAIL;
    }
    if (hit < 0) return relative ? PW_INSP_PCRE_FAIL : PW_INSP_PCRE_STOP;
    if (op->flags & PW_INSP_F_RETRY) {
        int64_t st = pw_pcre_find_start(t + op->pat_len, buf, len, sub, from, hit);
        *found = st >= 0 ? st : from;
    }
    return hit;
}

/* One buffer's ops with retries of earlier contents (eval::group_matches). */
PW_DEVICE_CALL int pw_insp_group(const pw_insp_prog *p, const pw_insp_op *ops, uint32_t n,
                                 const uint8_t *buf, int64_t len) {
    if (len == 0 || n > PW_INSP_MAX_OPS) return 0;
    int64_t entry[PW_INSP_MAX_OPS], found[PW_INSP_MAX_OPS];
    uint8_t stack[PW_INSP_MAX_OPS];
    uint32_t sp = 0, searches = 0, i = 0;
    int have_resume = 0;
    int64_t resume = 0, cursor = 0;
    while (i < n) {
        const pw_insp_op *op = &ops[i];
        int ok = 0;
        if (op->kind == PW_INSP_OP_CONTENT) {
            if (++searches > PW_INSP_SEARCH_LIMIT) return 0;
            int retry = have_resume;
            have_resume = 0;
            if (retry) cursor = entry[i];
            else entry[i] = cursor;
            int64_t start, end;
            pw_insp_window(op, cursor, len, &start, &end);
            if (retry) start = resume;
            int64_t hit = pw_insp_search(buf, len, start, end, p->patterns + op->pat_off,
                                         p->fail + op->pat_off, op->pat_len,
                                         (op->flags & PW_INSP_F_NOCASE) != 0);
            int relative = (op->flags & (PW_INSP_F_DISTANCE | PW_INSP_F_WITHIN)) != 0;
            if (op->flags & PW_INSP_F_NEGATED) {
                /* A negated content nothing is relative to, present: no retry can change it. */
                if (hit >= 0 && !relative && !(op->flags & PW_INSP_F_RETRY)) return 0;
                ok = hit < 0;
            } else if (hit < 0) {
                if (!relative) return 0;
            } else {
                found[i] = hit;
                cursor = hit + (int64_t)op->pat_len;
                if (op->flags & PW_INSP_F_RETRY) stack[sp++] = (uint8_t)i;
                ok = 1;
            }
        } else if (op->kind == PW_INSP_OP_PCRE) {
            if (++searches > PW_INSP_SEARCH_LIMIT) return 0;
            int retry = have_resume;
            have_resume = 0;
            if (retry) cursor = entry[i];
            else entry[i] = cursor;
            int64_t r = pw_insp_pcre_op(p->dfa, op, buf, len, cursor, retry ? resume : -1, &found[i]);
            if (r == PW_INSP_PCRE_STOP) return 0;
            if (r >= 0) {
                if ((op->flags & PW_INSP_F_RETRY) && !(op->flags & PW_INSP_F_NEGATED)) stack[sp++] = (uint8_t)i;
                if (!(op->flags & PW_INSP_F_NEGATED)) cursor = r;
                ok = 1;
            }
        } else if (op->kind == PW_INSP_OP_ISDATAAT) {
            int64_t k = op->a;
            int has = (op->flags & PW_INSP_F_RELATIVE) ? cursor + k <= len : k < len;
            ok = has != ((op->flags & PW_INSP_F_NEGATED) != 0);
        } else if (op->kind == PW_INSP_OP_BYTE_TEST) {
            ok = pw_insp_byte_test(op, buf, len, cursor);
        } else if (op->kind == PW_INSP_OP_BYTE_JUMP) {
            int64_t c = pw_insp_byte_jump(op, buf, len, cursor);
            if (c >= 0) {
                cursor = c;
                ok = 1;
            }
        } else if (op->kind == PW_INSP_OP_URILEN) {
            ok = pw_insp_range_test(op->cmp, (uint32_t)op->a, (uint32_t)op->b, (uint32_t)len);
        }
        if (ok) {
            i++;
            continue;
        }
        if (sp == 0) return 0;
        uint32_t j = stack[--sp];
        resume = found[j] + 1;
        have_resume = 1;
        i = j;
    }
    return 1;
}

/* Whether rule `rule` of the program matches frame f, whose bytes are at arena + data_off. */
PW_DEVICE int pw_insp_rule_matches(const pw_insp_prog *p, uint32_t rule, const pw_insp_frame *f,
                                   const uint8_t *arena) {
    if (rule >= p->n_rules) return 0;
    const pw_insp_rule *r = &p->rules[rule];
    if (!pw_insp_header_matches(p, r, f) || !pw_insp_frame_tests(r, f)) return 0;
    const pw_insp_op *ops = p->ops + r->ops[0];
    uint32_t n = r->ops[1], g = 0;
    while (g < n) {
        uint32_t b = ops[g].buffer, end = g;
        while (end < n && ops[end].buffer == b) end++;
        if (b >= PW_INSP_BUFFERS || (b != 0 && !f->has_http) || f->buf_len[b] == PW_INSP_ABSENT)
            return 0;
        const uint8_t *buf = arena + f->data_off + f->buf_off[b];
        if (!pw_insp_group(p, ops + g, end - g, buf, f->buf_len[b])) return 0;
        g = end;
    }
    return 1;
}

/* Candidate j of a batch: cand_off[i]..cand_off[i + 1] are frame i's entries of cand_rules. */
PW_DEVICE uint32_t pw_insp_frame_of(const uint32_t *cand_off, uint32_t n_frames, uint32_t j) {
    uint32_t lo = 0, hi = n_frames; /* the last i with cand_off[i] <= j */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (cand_off[mid] <= j) lo = mid;
        else hi = mid;
    }
    return lo;
}

PW_DEVICE uint8_t pw_insp_eval_cand(const uint8_t *img, const pw_insp_frame *frames, uint32_t n_frames,
                                    const uint8_t *arena, const uint32_t *cand_off,
                                    const uint32_t *cand_rules, uint32_t j) {
    pw_insp_prog p = pw_insp_resolve(img);
    uint32_t i = pw_insp_frame_of(cand_off, n_frames, j);
    return (uint8_t)pw_insp_rule_matches(&p, cand_rules[j], &frames[i], arena);
}

/* Frame i's verdict from its candidates' match flags (eval::image::verdict): the highest action
 * rank, the earliest candidate among equals. */
PW_DEVICE pw_insp_verdict pw_insp_verdict_of(const uint8_t *img, const uint32_t *cand_off,
                                             const uint32_t *cand_rules, const uint8_t *matched,
                                             uint32_t i) {
    pw_insp_prog p = pw_insp_resolve(img);
    pw_insp_verdict v;
    v.rule = PW_INSP_NO_RULE;
    v.action = PW_INSP_NO_ACTION;
    v.pad[0] = v.pad[1] = v.pad[2] = 0;
    for (uint32_t j = cand_off[i]; j < cand_off[i + 1]; j++) {
        if (!matched[j]) continue;
        uint32_t a = p.rules[cand_rules[j]].action;
        if (v.rule == PW_INSP_NO_RULE || pw_insp_action_rank(a) > pw_insp_action_rank(v.action)) {
            v.rule = cand_rules[j];
            v.action = (uint8_t)a;
        }
    }
    return v;
}

#if (defined(__CUDACC__) || defined(__CUDACC_RTC__)) && !defined(PW_INSPECT_NO_KERNELS)
/* One thread per candidate entry: matched[j] = whether cand_rules[j] matches its frame. */
extern "C" __global__ void pw_insp_eval_kernel(const uint8_t *img, const pw_insp_frame *frames,
                                               uint32_t n_frames, const uint8_t *arena,
                                               const uint32_t *cand_off, const uint32_t *cand_rules,
                                               uint8_t *matched) {
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (n_frames == 0 || j >= cand_off[n_frames]) return;
    matched[j] = pw_insp_eval_cand(img, frames, n_frames, arena, cand_off, cand_rules, j);
}

/* One thread per frame, after pw_insp_eval_kernel on the same stream. */
extern "C" __global__ void pw_insp_verdict_kernel(const uint8_t *img, uint32_t n_frames,
                                                  const uint32_t *cand_off, const uint32_t *cand_rules,
                                                  const uint8_t *matched, pw_insp_verdict *verdicts) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_frames) return;
    verdicts[i] = pw_insp_verdict_of(img, cand_off, cand_rules, matched, i);
}
#endif

#if !defined(__CUDACC_RTC__)
/* Host side, before an image is uploaded: the kernels trust it (see the top), so an image of
 * another layout (an older or newer writer than this header: a version skew) reads spans from
 * the wrong bytes and walks out of the image. Whether the len bytes at img are an image this
 * header reads: magic, version, every section inside `total` at an aligned offset, every rule's
 * spans in their sections and at most PW_INSP_MAX_OPS ops, every op's pattern in the pattern
 * bytes, its number base, its failure words (the checks of eval::image::Program::from_image).
 * 1 if so; else 0 and the first problem in why (cap bytes). img needs no alignment. */
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

/* A pcre op's tables in the DFA words, each one pw_pcre_table_check accepts (copied out: the
 * image bytes need no alignment here); a retried one has its reverse table. */
static inline int pw_insp_pcre_check(const uint8_t *img, const pw_insp_header *h, uint32_t i,
                                     const pw_insp_op *o, char *why, size_t cap) {
    uint64_t rev = o->b < 0 ? 0 : (uint64_t)o->b;
    if (o->b < 0 || (uint64_t)o->pat_off + o->pat_len + rev > h->n_dfa) {
        snprintf(why, cap, "op %u: its pcre tables are out of the %u DFA words", i, h->n_dfa);
        return 0;
    }
    if (rev == 0 && (o->flags & PW_INSP_F_RETRY)) {
        snprintf(why, cap, "op %u: a retried pcre without its reverse table", i);
        return 0;
    }
    uint64_t total = o->pat_len + rev;
    uint32_t *t = (uint32_t *)malloc(total * 4 + 4);
    if (!t) {
        snprintf(why, cap, "op %u: out of memory checking its pcre tables", i);
        return 0;
    }
    memcpy(t, img + h->dfa_off + 4 * (uint64_t)o->pat_off, total * 4);
    char sub[160];
    int ok = pw_pcre_table_check(t, o->pat_len, sub, sizeof sub) &&
             (rev == 0 || pw_pcre_table_check(t + o->pat_len, rev, sub, sizeof sub));
    free(t);
    if (!ok) snprintf(why, cap, "op %u: pcre table: %s", i, sub);
    return ok;
}

static inline int pw_insp_image_check(const uint8_t *img, uint64_t len, char *why, size_t cap) {
    pw_insp_header h;
    if (len < sizeof h) {
        snprintf(why, cap, "%llu bytes, shorter than the %u-byte header", (unsigned long long)len,
                 (unsigned)sizeof h);
        return 0;
    }
    memcpy(&h, img, sizeof h);
    if (h.magic != PW_INSP_MAGIC) {
        snprintf(why, cap, "bad magic 0x%08x (not an inspect image)", h.magic);
        return 0;
    }
    if (h.version != PW_INSP_VERSION) {
        snprintf(why, cap,
                 "image version %u, this code reads version %u (the image's writer and "
                 "inspect_eval.cuh are of different commits)",
                 h.version, PW_INSP_VERSION);
        return 0;
    }
    if (h.total > len) {
        snprintf(why, cap, "header total %u bytes, %llu given", h.total, (unsigned long long)len);
        return 0;
    }
    const struct {
        const char *name;
        uint32_t off, n, size, align;
    } sec[7] = {{"rules", h.rules_off, h.n_rules, (uint32_t)sizeof(pw_insp_rule), 4},
                {"ops", h.ops_off, h.n_ops, (uint32_t)sizeof(pw_insp_op), 8},
                {"addrs", h.addrs_off, h.n_addrs, (uint32_t)sizeof(pw_insp_addr), 8},
                {"ports", h.ports_off, h.n_ports, (uint32_t)sizeof(pw_insp_port), 2},
                {"patterns", h.patterns_off, h.n_patterns, 1, 1},
                {"fail", h.fail_off, h.n_patterns, 4, 4},
                {"pcre tables", h.dfa_off, h.n_dfa, 4, 4}};
    for (int s = 0; s < 7; s++) {
        if (sec[s].off % sec[s].align != 0 ||
            (uint64_t)sec[s].off + (uint64_t)sec[s].n * sec[s].size > h.total) {
            snprintf(why, cap, "section %s (%u records of %u bytes at %u) is out of the %u-byte image",
                     sec[s].name, sec[s].n, sec[s].size, sec[s].off, h.total);
            return 0;
        }
    }
    for (uint32_t i = 0; i < h.n_rules; i++) {
        pw_insp_rule r;
        memcpy(&r, img + h.rules_off + (uint64_t)i * sizeof r, sizeof r);
        const struct {
            const char *name;
            const uint32_t *span;
            uint32_t n;
        } sp[5] = {{"src", r.src, h.n_addrs},
                   {"dst", r.dst, h.n_addrs},
                   {"sport", r.sport, h.n_ports},
                   {"dport", r.dport, h.n_ports},
                   {"ops", r.ops, h.n_ops}};
        for (int k = 0; k < 5; k++) {
            if ((uint64_t)sp[k].span[0] + sp[k].span[1] > sp[k].n) {
                snprintf(why, cap, "rule %u (sid %u): %s span [%u, +%u) is out of its %u records", i,
                         r.sid, sp[k].name, sp[k].span[0], sp[k].span[1], sp[k].n);
                return 0;
            }
        }
        if (r.ops[1] > PW_INSP_MAX_OPS) {
            snprintf(why, cap, "rule %u (sid %u): %u ops (at most %u)", i, r.sid, r.ops[1],
                     PW_INSP_MAX_OPS);
            return 0;
        }
    }
    for (uint32_t i = 0; i < h.n_ops; i++) {
        pw_insp_op o;
        memcpy(&o, img + h.ops_off + (uint64_t)i * sizeof o, sizeof o);
        if (o.kind == PW_INSP_OP_PCRE) {
            if (!pw_insp_pcre_check(img, &h, i, &o, why, cap)) return 0;
            continue;
        }
        if ((uint64_t)o.pat_off + o.pat_len > h.n_patterns) {
            snprintf(why, cap, "op %u: its pattern [%u, +%u) is out of the %u pattern bytes", i,
                     o.pat_off, o.pat_len, h.n_patterns);
            return 0;
        }
        if ((o.flags & PW_INSP_F_STRING) && o.base != 8 && o.base != 10 && o.base != 16) {
            snprintf(why, cap, "op %u: number base %u (8, 10 or 16)", i, o.base);
            return 0;
        }
        for (uint32_t k = 0; o.kind == PW_INSP_OP_CONTENT && k < o.pat_len; k++) {
            uint32_t f;
            memcpy(&f, img + h.fail_off + 4 * ((uint64_t)o.pat_off + k), 4);
            if (f > k) {
                snprintf(why, cap, "op %u: failure word %u of its pattern is %u (past its position)",
                         i, k, f);
                return 0;
            }
        }
    }
    return 1;
}
#endif

#endif
