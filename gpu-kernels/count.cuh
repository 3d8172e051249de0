/* Stage `count`: per-queue and per-rule counters, and the verdict rule shared by every executor.
 *
 * Same semantics as the Rust side (pipeline::executor::gpu::verdict_of / QueueCounters::add):
 *   - frames with a parse status != ok are counted in parse_errors; with PW_PIPE_DROP_MALFORMED
 *     they are dropped (PW_DROP_PARSE_ERROR) before the ACL;
 *   - otherwise the ACL's action (the matched rule's or the table default) decides, drop -> PW_DROP_ACL.
 * Compiles for the GPU (atomics on shared or global memory) and for the host (plain adds). */
#ifndef PKTWARP_COUNT_CUH
#define PKTWARP_COUNT_CUH

#include "pktwarp_abi.h"

#if PW_GPU
#define PW_ADD64(p, v) atomicAdd((unsigned long long *)(p), (unsigned long long)(v))
#else
#define PW_ADD64(p, v) (*(p) += (uint64_t)(v))
#endif

/* The verdict of one frame from the parse status and the ACL's answer (rule, action, mark; with
 * no acl stage: PW_ACL_NO_MATCH, pass, 0). Same as pipeline::stage::run (CPU executor). */
PW_DEVICE pw_verdict pw_verdict_of(uint32_t parse_ok, uint32_t pipeline, uint32_t rule, uint8_t action,
                                   uint32_t mark) {
    pw_verdict v;
    v.reserved = 0;
    if (!parse_ok && (pipeline & PW_PIPE_DROP_MALFORMED)) {
        v.action = (uint8_t)PW_ACTION_DROP;
        v.drop_reason = (uint8_t)PW_DROP_PARSE_ERROR;
        v.rule = PW_ACL_NO_MATCH;
        v.mark = 0;
        return v;
    }
    v.action = action;
    v.drop_reason = (uint8_t)(action == PW_ACTION_DROP ? PW_DROP_ACL : PW_DROP_NONE);
    v.rule = rule;
    v.mark = mark;
    return v;
}

/* Adds one frame to the counters `c` (shared or global memory on the GPU) and its rule's hit
 * counter when `rule_hits` is given. */
PW_DEVICE void pw_count_frame(pw_queue_counters *c, uint64_t *rule_hits, uint32_t n_rules, uint32_t parse_ok,
                              uint32_t acl_ran, const pw_verdict *v, uint32_t wire_len) {
    PW_ADD64(&c->packets, 1);
    PW_ADD64(&c->bytes, wire_len);
    if (!parse_ok) PW_ADD64(&c->parse_errors, 1);
    if (acl_ran) {
        if (v->rule != PW_ACL_NO_MATCH) {
            PW_ADD64(&c->acl_matched, 1);
            if (rule_hits && v->rule < n_rules) PW_ADD64(&rule_hits[v->rule], 1);
        } else {
            PW_ADD64(&c->acl_no_match, 1);
        }
    }
    if (v->action < PW_ACTIONS) PW_ADD64(&c->action[v->action], 1);
    if (v->drop_reason < PW_DROP_REASONS && v->action == PW_ACTION_DROP) PW_ADD64(&c->drop_reason[v->drop_reason], 1);
}

/* dst += src, field by field (a block's shared-memory counters into the queue's counters). */
PW_DEVICE void pw_count_merge(pw_queue_counters *dst, const pw_queue_counters *src) {
    const uint64_t *s = (const uint64_t *)src;
    uint64_t *d = (uint64_t *)dst;
    for (uint32_t i = 0; i < sizeof(pw_queue_counters) / 8u; i++) {
        if (s[i]) PW_ADD64(&d[i], s[i]);
    }
}

#endif /* PKTWARP_COUNT_CUH */
