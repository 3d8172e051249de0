/* Stage `rate_limit` on the GPU: the token-bucket table of cuda/rate_limit.cuh (the Rust crate
 * pktwarp-flow's rate::RateTable twin), one table per queue in device memory (the executor's
 * per-queue stage state, zeroed at start: queue q's bytes at state + q * queue_bytes, its
 * entries first, then its counters, a pw_rl_counters), each frame applied in arrival order per
 * bucket (flow_order.cuh), as the CPU executor applies them one after another. A frame that
 * finds its bucket empty (or, with `on_full: drop`, finds no bucket) is dropped with reason
 * PW_DROP_RATE_LIMITED. The rules are the parameter block's (pipeline::stage::rate_limit::
 * gpu_block; a reload publishes a new one, and one that changed the keys a new keys_epoch, which
 * makes every bucket of the old keys a free slot); the per-rule counters live beside each queue's table, where the host reads them
 * (pipeline::stage::rate_limit::RateLimitStage::add_gpu_counters). */
#ifndef PKTWARP_RATE_LIMIT_STAGE_CUH
#define PKTWARP_RATE_LIMIT_STAGE_CUH

#include "pktwarp_abi.h"
#include "rate_limit.cuh"
#include "flow_order.cuh"

/* pipeline::verdict::DropReason::RateLimited: past the PW_DROP_REASONS counter slots (the
 * per-reason counters of count.cuh do not count it). */
#define PW_DROP_RATE_LIMITED 12u

/* The parameter block (pipeline::stage::rate_limit::gpu_block). */
typedef struct pw_rl_params {
    uint64_t state;       /*  0: queue 0's table (the per-queue state, written by the executor) */
    uint32_t queues;      /*  8: queues with a table (written by the executor) */
    uint32_t keys_epoch;  /* 12: reloads that changed the rules' keys (pw_rl_apply_at's epoch) */
    uint64_t queue_bytes; /* 16: bytes of one queue's state: entries * 64, then pw_rl_counters */
    pw_rl_table table;    /* 24: the rules; its entry address is the queue's */
} pw_rl_params;
PW_STATIC_ASSERT(sizeof(pw_rl_params) == 24 + sizeof(pw_rl_table), "pw_rl_params size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_rl_params, table) == 24, "pw_rl_params.table");
PW_STATIC_ASSERT(sizeof(pw_rl_counters) == 16 + 24 * PW_RL_MAX_RULES, "pw_rl_counters size");

/* One frame through its queue's table, in bucket order on flow_order.cuh channel `ch`
 * (PW_ORDER_CH_RATE_LIMIT: 1 when it is the pipeline's second ordered stage). Called, not inlined
 * (PW_DEVICE_CALL): the rule table walk would otherwise grow the persistent kernel's registers. */
PW_DEVICE_CALL void pw_rl_frame(const pw_rl_params *p, const pw_frame *f, const pw_packet_meta *meta,
                                pw_verdict *v, uint32_t ch) {
    pw_rl_pkt pk;
    const bool have = p != 0 && p->state != 0ull && f->queue < p->queues && p->table.nbuckets != 0u;
    uint64_t base = 0ull;
    if (have) {
        base = p->state + (uint64_t)f->queue * p->queue_bytes;
        pw_rl_classify(&p->table, meta, &pk);
    }
    const uint32_t key = have && pk.key.rule != PW_RL_NO_RULE ? pk.bucket : PW_ORDER_NONE;
    pw_order_publish_on(ch, key);
    pw_order_wait_on(ch, key);
    if (key != PW_ORDER_NONE) {
        /* The rules read in place: a copy of the table (1560 bytes) would go to local memory. */
        const uint64_t entries = (uint64_t)p->table.nbuckets * PW_RL_BUCKET * PW_RL_ENTRY_SIZE;
        pw_rl_counters *c = (pw_rl_counters *)(base + entries);
        pw_rl_result r = pw_rl_apply_at(&p->table, (pw_rl_entry *)base, c, &pk, f->timestamp_ns,
                                         p->keys_epoch);
        if (r.drop) {
            v->action = (uint8_t)PW_ACTION_DROP;
            v->drop_reason = (uint8_t)PW_DROP_RATE_LIMITED;
        }
    }
    pw_order_done_on(ch);
}

/* The frame's order key, as pw_rl_frame names it (its bucket, or PW_ORDER_NONE): the owned
 * layout's CTAs split a burst's frames by it (flow_order.cuh). Reads nothing of the table. */
PW_DEVICE uint32_t pw_rate_limit_order_key(const pw_frame *f, const pw_packet_meta *meta, const void *params) {
    const pw_rl_params *p = (const pw_rl_params *)params;
    if (p == 0 || p->state == 0ull || f->queue >= p->queues || p->table.nbuckets == 0u) return PW_ORDER_NONE;
    pw_rl_pkt pk;
    pw_rl_classify(&p->table, meta, &pk);
    return pk.key.rule != PW_RL_NO_RULE ? pk.bucket : PW_ORDER_NONE;
}

/* Stage `rate_limit`. */
PW_DEVICE void pw_stage_rate_limit(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                                   pw_stage_counters *c) {
    (void)c;
    pw_rl_frame((const pw_rl_params *)params, f, meta, v, PW_ORDER_CH_RATE_LIMIT);
}

#endif /* PKTWARP_RATE_LIMIT_STAGE_CUH */
