/* Stage `conntrack` on the GPU: the flow table of cuda/flow.cuh (the Rust crate pktwarp-flow's
 * twin), one table per queue in device memory (the executor's per-queue stage state: queue q's
 * entries at table.entries + q * queue_bytes, zeroed at start), each frame applied in arrival
 * order per flow (flow_order.cuh) and its connection state written into the metadata
 * (pw_packet_meta.ct_state) for the acl stage's `ct:` rules; with flow export on (ring_cap),
 * the flows that end go into the queue's ended-flow ring (flow.cuh pw_flow_ring). Drops
 * nothing. Its counters are the
 * table's (pw_flow_counters) in the stage's counter block, v[1..6]: created, expired,
 * early_evicted, table_full, untracked, invalid (pipeline::stage::conntrack::COUNTER_NAMES). */
#ifndef PKTWARP_CONNTRACK_STAGE_CUH
#define PKTWARP_CONNTRACK_STAGE_CUH

#include "pktwarp_abi.h"
#include "flow.cuh"
#include "flow_order.cuh"

/* The parameter block (pipeline::stage::conntrack::gpu_block). */
typedef struct pw_ct_params {
    uint64_t state;       /*   0: queue 0's table (the per-queue state, written by the executor) */
    uint32_t queues;      /*   8: queues with a table (written by the executor) */
    uint32_t ring_cap;    /*  12: slots of the ended-flow ring after each queue's table (0: none) */
    uint64_t queue_bytes; /*  16: bytes of one queue's state (entries * 128, then the ring) */
    pw_flow_table table;  /*  24: the table's parameters; its entry address is the queue's */
} pw_ct_params;
PW_STATIC_ASSERT(sizeof(pw_ct_params) == 176, "pw_ct_params size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_ct_params, table) == 24, "pw_ct_params.table");
PW_STATIC_ASSERT(sizeof(pw_flow_counters) == 48, "pw_flow_counters size");

/* One frame through its queue's table, in flow order; with `store`, its connection state and
 * direction go into `meta` (conntrack), without it the frame only updates its flow (flow_stats with
 * a table of its own, flow_stats_stage.cuh: the metadata and verdict are left as they were).
 * Called, not inlined (PW_DEVICE_CALL): the flow table's code inlined into the persistent kernel
 * pushed it past 255 registers (spills). `ch`: the flow_order.cuh channel it orders frames on
 * (PW_ORDER_CH_CONNTRACK / _FLOW_STATS_OWN: 1 when it is the pipeline's second ordered stage). */
PW_DEVICE_CALL void pw_ct_frame(const pw_ct_params *p, const pw_frame *f, pw_packet_meta *meta,
                                pw_flow_counters *fc, uint32_t store, uint32_t ch) {
    pw_flow_pkt pk;
    pw_flow_table t;
    const bool have = p != 0 && p->state != 0ull && f->queue < p->queues;
    if (have) {
        t = p->table;
        t.entries = (pw_flow_entry *)(p->state + (uint64_t)f->queue * p->queue_bytes);
        pw_flow_classify(&t, meta, f->data, f->len, &pk);
    }
    const uint32_t key = have && !pk.none ? pk.bucket : PW_ORDER_NONE;
    pw_order_publish_on(ch, key);
    pw_order_wait_on(ch, key);
    if (have) {
        /* Flow export (a flow_stats stage): the flows that end go to the queue's ring, after its
         * table; the zeroed state has no cap yet, every writer stores the same one. */
        pw_flow_ring *ring = 0;
        if (p->ring_cap != 0u) {
            ring = (pw_flow_ring *)((uint8_t *)t.entries + (uint64_t)t.nbuckets * PW_FLOW_BUCKET * PW_FLOW_ENTRY_SIZE);
            if (ring->cap != p->ring_cap) ring->cap = p->ring_cap;
        }
        const pw_flow_result r = pw_flow_apply_pkt_ring(&t, fc, &pk, f->timestamp_ns, ring);
        if (store) pw_flow_meta_store(meta, r);
    } else {
        /* No table for this queue (the executor sizes it for every queue: not reached). */
        if (store) {
            meta->ct_state = (uint8_t)PW_CT_UNTRACKED;
            meta->ct_dir = 0;
        }
        PW_FLOW_ADD(&fc->untracked, 1u);
    }
    pw_order_done_on(ch);
}

/* The frame's order key, as pw_ct_frame names it (its flow's bucket, or PW_ORDER_NONE): the
 * owned layout's CTAs split a burst's frames by it (flow_order.cuh). Reads nothing of the table. */
PW_DEVICE uint32_t pw_conntrack_order_key(const pw_frame *f, const pw_packet_meta *meta, const void *params) {
    const pw_ct_params *p = (const pw_ct_params *)params;
    if (p == 0 || p->state == 0ull || f->queue >= p->queues) return PW_ORDER_NONE;
    pw_flow_pkt pk;
    pw_flow_classify(&p->table, meta, f->data, f->len, &pk);
    return pk.none ? PW_ORDER_NONE : pk.bucket;
}

/* Stage `conntrack`. */
PW_DEVICE void pw_stage_conntrack(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                                  pw_stage_counters *c) {
    (void)v;
    /* The table's counters are the stage's v[1..6], in pw_flow_counters' order. */
    pw_ct_frame((const pw_ct_params *)params, f, meta, (pw_flow_counters *)&c->v[1], 1u, PW_ORDER_CH_CONNTRACK);
}

#endif /* PKTWARP_CONNTRACK_STAGE_CUH */
