/* The built-in stages through the stage ABI (pktwarp_abi.h, section "stage ABI"), and the
 * pipeline context the generated pw_pipeline_frame passes them.
 *
 * Each stage has the one signature; its semantics are the Rust stage's (pipeline::stage::run,
 * Pipeline::run_frames): parse drops a malformed frame (PW_DROP_PARSE_ERROR), acl sets the rule,
 * mark and action of the first matching rule (or the default) and drops with PW_DROP_ACL, count
 * adds the frame's captured bytes. parse also copies the frame's steering mark into the metadata
 * (steer_mark), as the Rust parse stage does. Compiles for the GPU and for the host (differential tests). */
#ifndef PKTWARP_STAGES_CUH
#define PKTWARP_STAGES_CUH

#include "pktwarp_abi.h"
#include "parse.cuh"
#include "acl.cuh"
#include "count.cuh"

/* The acl stage's parameter block: the ACL image a burst is classified with (the slot header's,
 * table hot swap; or the queue descriptor's), its rule-hit counters and default action. */
typedef struct pw_acl_sel {
    uint64_t tables;
    uint64_t rule_hits;
    uint32_t n_rules;
    uint8_t default_action;
    /* Not the acl stage's: the burst's table of stage parameter blocks (uint64_t[PW_MAX_STAGES],
     * composed template), selected by the same epoch as the ACL image. */
    uint64_t stage_params;
} pw_acl_sel;

/* What pw_pipeline_frame gets beside the frame: each stage's parameter block and the queue's
 * stage counter blocks (PW_MAX_STAGES). */
typedef struct pw_pipeline_ctx {
    const uint64_t *params; /* uint64_t[PW_MAX_STAGES]: each stage's parameter-block address, or 0 */
    const pw_acl_sel *acl;
    pw_stage_counters *counters;
} pw_pipeline_ctx;

/* Stage k's parameter block, read when the stage is called (a copy of the table in the context
 * would hold PW_MAX_STAGES pointers in registers: the persistent kernel spilled). */
PW_DEVICE const void *pw_stage_params(const pw_pipeline_ctx *ctx, uint32_t k) {
    return ctx->params ? (const void *)ctx->params[k] : (const void *)0;
}

PW_DEVICE void pw_verdict_pass(pw_verdict *v) {
    v->action = (uint8_t)PW_ACTION_PASS;
    v->drop_reason = (uint8_t)PW_DROP_NONE;
    v->out_port = (uint16_t)PW_OUT_DEFAULT;
    v->rule = PW_ACL_NO_MATCH;
    v->mark = 0u;
    v->reserved = 0u;
    v->send_ns = 0ull;
}

PW_DEVICE void pw_meta_zero(pw_packet_meta *m) {
    uint32_t *w = (uint32_t *)m;
    for (uint32_t i = 0; i < sizeof(pw_packet_meta) / 4u; i++) w[i] = 0u;
}

/* Stage `parse`. */
PW_DEVICE void pw_stage_parse(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                              pw_stage_counters *c) {
    (void)params;
    pw_parse(f->data, f->len, meta);
    meta->steer_mark = f->mark; /* the steering rule's mark, for the stages after parse */
    if (meta->status != 0u) {
        PW_ADD64(&c->v[PW_PARSE_CTR_ERRORS], 1);
        v->action = (uint8_t)PW_ACTION_DROP;
        v->drop_reason = (uint8_t)PW_DROP_PARSE_ERROR;
        v->rule = PW_ACL_NO_MATCH;
        v->mark = 0u;
    }
}

/* The first rule matching the key (the file's rule number), its action word and mark in *w /
 * *mk (unset on PW_ACL_NO_MATCH). A rule set with `ct:` rules (PW_ACL_CT_MAGIC) is classified by
 * the frame's connection state's classifier, its answer mapped to the file's rule, as
 * flow_rules::acl::ct::CtClassifiers::classify does. */
PW_DEVICE uint32_t pw_acl_lookup(const pw_acl_tables *t, const pw_packet_meta *meta, const pw_acl_key *k,
                                 uint32_t *w, uint32_t *mk) {
    if (!t) return PW_ACL_NO_MATCH;
    if (t->magic == PW_ACL_CT_MAGIC) {
        const uint32_t *img = (const uint32_t *)t;
        const pw_acl_ct_image *ct = (const pw_acl_ct_image *)t;
        const uint32_t s = meta->ct_state < PW_ACL_CT_STATES ? meta->ct_state : 4u;
        const pw_acl_tables *ts = (const pw_acl_tables *)(img + ct->image_off[s]);
        const uint32_t r = pw_acl_classify(ts, k);
        if (r == PW_ACL_NO_MATCH) return r;
        *w = pw_acl_action(ts, r, mk);
        return img[ct->map_off[s] + r];
    }
    const uint32_t r = pw_acl_classify(t, k);
    if (r != PW_ACL_NO_MATCH) *w = pw_acl_action(t, r, mk);
    return r;
}

/* The acl stage's lookup and verdict (rule, mark, action, counters); returns the rule. */
PW_DEVICE uint32_t pw_acl_stage_verdict(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v,
                                        const void *params, pw_stage_counters *c) {
    const pw_acl_sel *a = (const pw_acl_sel *)params;
    pw_acl_key k;
    pw_acl_key_from_meta(meta, f->port, &k);
    uint32_t w = 0u, mk = 0u;
    const uint32_t rule = pw_acl_lookup((const pw_acl_tables *)a->tables, meta, &k, &w, &mk);
    uint8_t action = a->default_action;
    uint32_t mark = 0u;
    if (rule != PW_ACL_NO_MATCH) {
        const uint32_t code = w & 0xFFu;
        action = (uint8_t)(code < PW_ACTIONS ? code : PW_ACTION_PASS); /* flow_rules Verdict::from_code */
        mark = ((w >> 8) & 1u) ? mk : 0u;
        PW_ADD64(&c->v[PW_ACL_CTR_MATCHED], 1);
        if (a->rule_hits && rule < a->n_rules) PW_ADD64(&((uint64_t *)a->rule_hits)[rule], 1);
    } else {
        PW_ADD64(&c->v[PW_ACL_CTR_DEFAULT], 1);
    }
    v->rule = rule;
    v->mark = mark;
    v->action = action;
    if (action == PW_ACTION_DROP) v->drop_reason = (uint8_t)PW_DROP_ACL;
    return rule;
}

/* Stage `acl`: one thread's lookup (the fused template's grouped lookups are kernels.cu's). A rule
 * set with rewrite actions runs as pw_stage_acl_rw (rewrite_stages.cuh) instead. */
PW_DEVICE void pw_stage_acl(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                            pw_stage_counters *c) {
    (void)pw_acl_stage_verdict(f, meta, v, params, c);
}

/* Stage `count`. */
PW_DEVICE void pw_stage_count(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                              pw_stage_counters *c) {
    (void)meta;
    (void)v;
    (void)params;
    PW_ADD64(&c->v[PW_COUNT_CTR_BYTES], f->len);
}

#endif /* PKTWARP_STAGES_CUH */
