/* The rewrite stages on the stage ABI (pktwarp_abi.h, section "stage ABI"): `l2fwd`, `vlan`,
 * `ttl`, `dscp`, `route` and `respond` as library stages of a composed pipeline, and `tx_time`
 * (which only sets pw_verdict.send_ns and writes no frame). Each calls the
 * stage body of its own header (l2fwd.cuh, vlan.cuh, ttl.cuh, route.cuh, respond.cuh, held equal
 * to pipeline::rewrite function by function) and maps its outcome onto the verdict as the CPU
 * executor does (pipeline/src/stage/run.rs, the rewrite arm, and rewrite::stage::apply_outcome):
 *   - ttl: PW_RW_DROP_TTL_EXPIRED -> drop `ttl_expired`;
 *   - route: PW_RW_FORWARD -> out_port = the next hop's port (already an out_port index: the
 *     host built the next-hop table through RouteState::out_ports), PW_RW_DROP_NO_ROUTE -> drop
 *     `no_route`;
 *   - vlan push without 4 bytes of room (cap) -> drop `too_long`; a push / pop changes len and
 *     wire_len by 4;
 *   - respond: PW_RW_REPLY -> out_port = the ingress port's transmit side (the block's table,
 *     PW_OUT_DEFAULT when the port is not in it), and one count in the reply's counter;
 *   - anything else (done, skipped) leaves the verdict as it is.
 * `pw_stage_acl_rw` is the acl stage of a rule set with rewrite actions (flow_rules::acl::rewrite):
 * the acl stage's verdict, then the matched rule's DSCP (pw_dscp, as `dscp`), destination MAC
 * (pw_l2fwd, as `l2fwd` dst) and out_port, unless the verdict drops.
 * Every one of them but tx_time writes the frame (LIBRARY_STAGES `writes_frame`), so the generated pipeline
 * defines PW_PIPELINE_WRITES and hands the frame in its ring slot with its room after it.
 * pipeline/tests/rewrite_stage_host.rs holds these stages equal to the CPU pipeline through the
 * generated host build. The parameter blocks are built in Rust by pipeline::rewrite::gpu, which
 * pins the same sizes and offsets. */
#ifndef PKTWARP_REWRITE_STAGES_CUH
#define PKTWARP_REWRITE_STAGES_CUH

#include "pktwarp_abi.h"
#include "stages.cuh" /* pw_acl_stage_verdict */
#include "count.cuh" /* PW_ADD64 */
#include "l2fwd.cuh"
#include "respond.cuh"
#include "route.cuh"
#include "ttl.cuh"
#include "vlan.cuh"

/* `l2fwd`'s block (pipeline::rewrite::gpu::l2fwd_block). */
typedef struct pw_l2fwd_params {
    uint8_t swap;    /*  0 exchange source and destination first */
    uint8_t has_src; /*  1 then write src */
    uint8_t has_dst; /*  2 then write dst */
    uint8_t pad;     /*  3 */
    uint8_t src[6];  /*  4 */
    uint8_t dst[6];  /* 10 */
} pw_l2fwd_params;
PW_STATIC_ASSERT(sizeof(pw_l2fwd_params) == 16, "pw_l2fwd_params size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_l2fwd_params, src) == 4, "pw_l2fwd_params.src");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_l2fwd_params, dst) == 10, "pw_l2fwd_params.dst");

/* `vlan`'s block is vlan.cuh's pw_vlan_params (pipeline::rewrite::gpu::vlan_block). */
PW_STATIC_ASSERT(sizeof(pw_vlan_params) == 16, "pw_vlan_params size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_vlan_params, tpid) == 4, "pw_vlan_params.tpid");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_vlan_params, tci) == 6, "pw_vlan_params.tci");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_vlan_params, set_vid) == 8, "pw_vlan_params.set_vid");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_vlan_params, set_pcp) == 12, "pw_vlan_params.set_pcp");

/* `dscp`'s block (pipeline::rewrite::gpu::dscp_block). `ttl` has none. */
typedef struct pw_dscp_params {
    uint32_t dscp; /* 0 0..63 */
} pw_dscp_params;
PW_STATIC_ASSERT(sizeof(pw_dscp_params) == 4, "pw_dscp_params size");

/* `route`'s block (pipeline::rewrite::gpu::route_block): this header, then the tables it names,
 * each at a byte offset from the block's start (16-byte aligned), so the whole route table is one
 * parameter block published by epoch. An offset of 0 is "none" (the header sits there): a family
 * without routes has no tbl24 (2^24 entries when present). Entries as flow_rules::route::lpm. */
typedef struct pw_route_params {
    uint64_t v4_tbl24;    /*  0 offset of uint32_t[2^24], or 0 */
    uint64_t v4_tbl8;     /*  8 offset of uint32_t[v4_tbl8_len] */
    uint64_t v4_tbl8_len; /* 16 entries */
    uint64_t v6_tbl24;    /* 24 */
    uint64_t v6_tbl8;     /* 32 */
    uint64_t v6_tbl8_len; /* 40 */
    uint64_t hops;        /* 48 offset of pw_next_hop[n_hops]; .port is the out_port index */
    uint64_t n_hops;      /* 56 */
} pw_route_params;
PW_STATIC_ASSERT(sizeof(pw_route_params) == 64, "pw_route_params size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_route_params, v6_tbl24) == 24, "pw_route_params.v6_tbl24");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_route_params, hops) == 48, "pw_route_params.hops");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_route_params, n_hops) == 56, "pw_route_params.n_hops");

/* `respond`'s block (pipeline::rewrite::gpu::respond_block): the addresses (respond.cuh), then
 * `n_ingress` u16 at PW_RESPOND_INGRESS_AT: by ingress port (pw_frame.port), the out_port of its
 * transmit side (RespondSlot::ingress_out). */
typedef struct pw_respond_stage_params {
    pw_respond_params addrs; /*   0 */
    uint32_t n_ingress;      /* 172 */
} pw_respond_stage_params;
#define PW_RESPOND_INGRESS_AT 176u
PW_STATIC_ASSERT(sizeof(pw_respond_stage_params) == PW_RESPOND_INGRESS_AT, "pw_respond_stage_params size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_respond_stage_params, n_ingress) == 172, "pw_respond_stage_params.n_ingress");

/* `tx_time`'s block (pipeline::rewrite::gpu::tx_time_block). */
typedef struct pw_tx_time_params {
    uint64_t delay_ns; /* 0 send time = receive time + delay_ns (0 ..= 60 s, checked by the host) */
} pw_tx_time_params;
PW_STATIC_ASSERT(sizeof(pw_tx_time_params) == 8, "pw_tx_time_params size");

PW_DEVICE void pw_rw_drop(pw_verdict *v, uint32_t reason) {
    v->action = (uint8_t)PW_ACTION_DROP;
    v->drop_reason = (uint8_t)reason;
}

/* A new captured length, and the wire length changed by as much (the CPU executor's rule:
 * never below the captured length). */
PW_DEVICE void pw_rw_set_len(pw_frame *f, uint32_t len) {
    if (len == f->len) return;
    int64_t w = (int64_t)f->wire_len + (int64_t)len - (int64_t)f->len;
    f->wire_len = w < (int64_t)len ? len : (uint32_t)w;
    f->len = len;
}

/* Stage `l2fwd`. */
PW_DEVICE void pw_stage_l2fwd(pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                              pw_stage_counters *c) {
    (void)meta;
    (void)v;
    (void)c;
    const pw_l2fwd_params *p = (const pw_l2fwd_params *)params;
    pw_l2fwd(f->data, f->len, p->swap, p->has_src ? p->src : 0, p->has_dst ? p->dst : 0);
}

/* Stage `vlan`. */
PW_DEVICE void pw_stage_vlan(pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                             pw_stage_counters *c) {
    (void)c;
    uint32_t len = f->len;
    if (pw_vlan(f->data, &len, f->cap, meta, (const pw_vlan_params *)params) == PW_RW_DROP_NO_ROOM) {
        pw_rw_drop(v, PW_DROP_TOO_LONG);
        return;
    }
    pw_rw_set_len(f, len);
}

/* Stage `ttl` (no parameter block). */
PW_DEVICE void pw_stage_ttl(pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                            pw_stage_counters *c) {
    (void)params;
    (void)c;
    if (pw_ttl(f->data, f->len, meta) == PW_RW_DROP_TTL_EXPIRED) pw_rw_drop(v, PW_DROP_TTL_EXPIRED);
}

/* Stage `dscp`. */
PW_DEVICE void pw_stage_dscp(pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                             pw_stage_counters *c) {
    (void)v;
    (void)c;
    pw_dscp(f->data, f->len, meta, ((const pw_dscp_params *)params)->dscp);
}

/* The tables of a route block, as route.cuh reads them. */
PW_DEVICE void pw_route_tables_of(const pw_route_params *p, pw_route_tables *t) {
    const uint8_t *b = (const uint8_t *)p;
    t->v4.tbl24 = p->v4_tbl24 ? (const uint32_t *)(b + p->v4_tbl24) : (const uint32_t *)0;
    t->v4.tbl8 = (const uint32_t *)(b + p->v4_tbl8);
    t->v4.tbl8_len = p->v4_tbl8_len;
    t->v6.tbl24 = p->v6_tbl24 ? (const uint32_t *)(b + p->v6_tbl24) : (const uint32_t *)0;
    t->v6.tbl8 = (const uint32_t *)(b + p->v6_tbl8);
    t->v6.tbl8_len = p->v6_tbl8_len;
    t->hops = (const pw_next_hop *)(b + p->hops);
    t->n_hops = p->n_hops;
}

/* Stage `route`. */
PW_DEVICE void pw_stage_route(pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                              pw_stage_counters *c) {
    (void)c;
    pw_route_tables t;
    pw_route_tables_of((const pw_route_params *)params, &t);
    uint16_t port = (uint16_t)PW_OUT_DEFAULT;
    const uint32_t r = pw_route(f->data, f->len, meta, &t, &port);
    if (r == PW_RW_FORWARD)
        v->out_port = port;
    else if (r == PW_RW_DROP_NO_ROUTE)
        pw_rw_drop(v, PW_DROP_NO_ROUTE);
}

/* Stage `respond`: counters v[PW_RESPOND_CTR_*] count the replies made (the Rust stage's
 * arp_replies, icmp_echo_replies, icmpv6_echo_replies). */
PW_DEVICE void pw_stage_respond(pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                                pw_stage_counters *c) {
    const pw_respond_stage_params *p = (const pw_respond_stage_params *)params;
    uint32_t ctr = 0u;
    uint32_t len = f->len;
    if (pw_respond(f->data, &len, meta, &p->addrs, &ctr) != PW_RW_REPLY) return;
    pw_rw_set_len(f, len);
    const uint16_t *out = (const uint16_t *)((const uint8_t *)params + PW_RESPOND_INGRESS_AT);
    v->out_port = f->port < p->n_ingress ? out[f->port] : (uint16_t)PW_OUT_DEFAULT;
    if (ctr != 0u && ctr < PW_STAGE_COUNTERS) PW_ADD64(&c->v[ctr], 1);
}

/* Stage `tx_time` (pipeline::rewrite::tx_time): the send time is the receive time plus the delay,
 * saturating; a frame without a receive time (0) keeps 0, send now. The frame is not written. */
PW_DEVICE void pw_stage_tx_time(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                                pw_stage_counters *c) {
    (void)meta;
    (void)c;
    const uint64_t t = f->timestamp_ns;
    const uint64_t s = t + ((const pw_tx_time_params *)params)->delay_ns;
    v->send_ns = t == 0ull ? 0ull : (s < t ? ~0ull : s);
}

/* The matched rule's rewrite (pw_acl_tables.rewrites_off; Rust: pipeline::stage::acl, the
 * AclStage::apply_rewrite): DSCP, then destination MAC, then out_port. */
PW_DEVICE void pw_acl_apply_rewrite(const pw_acl_tables *t, uint32_t rule, pw_frame *f, pw_packet_meta *meta,
                                    pw_verdict *v) {
    const uint32_t off = PW_ACL_LD(&t->rewrites_off);
    if (off == 0u || rule >= PW_ACL_LD(&t->num_rules)) return;
    const uint32_t *w = (const uint32_t *)t + off + PW_ACL_REWRITE_WORDS * rule;
    const uint32_t w0 = PW_ACL_LD(w);
    if (w0 & PW_ACL_RW_DSCP) (void)pw_dscp(f->data, f->len, meta, (w0 >> 8) & 0x3Fu);
    if (w0 & PW_ACL_RW_DST_MAC) {
        const uint32_t m0 = PW_ACL_LD(w + 1), m1 = PW_ACL_LD(w + 2);
        uint8_t mac[6];
        for (uint32_t i = 0; i < 4u; i++) mac[i] = (uint8_t)(m0 >> (8u * i));
        mac[4] = (uint8_t)m1;
        mac[5] = (uint8_t)(m1 >> 8);
        (void)pw_l2fwd(f->data, f->len, 0u, (const uint8_t *)0, mac);
    }
    if (w0 & PW_ACL_RW_PORT) v->out_port = (uint16_t)(w0 >> 16);
}

/* Stage `acl` of a rule set with rewrite actions (writes the frame). */
PW_DEVICE void pw_stage_acl_rw(pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                               pw_stage_counters *c) {
    const uint32_t rule = pw_acl_stage_verdict(f, meta, v, params, c);
    const pw_acl_tables *t = (const pw_acl_tables *)((const pw_acl_sel *)params)->tables;
    if (rule == PW_ACL_NO_MATCH || v->action == PW_ACTION_DROP || !t) return;
    pw_acl_apply_rewrite(t, rule, f, meta, v);
}

#endif /* PKTWARP_REWRITE_STAGES_CUH */
