/* Stage `flow_stats` on the GPU (docs/flow-export-gpu.md), in one of two forms the executor picks
 * by the pipeline:
 *
 * - pw_stage_flow_stats, over a `conntrack` stage's tables: the flow statistics are conntrack's
 *   table entries (packets, IP octets and TCP flags per direction, first and last packet's
 *   receive time), and the flows that end inside a frame's visit go to the queue's ended-flow
 *   ring there (conntrack_stage.cuh, flow.cuh pw_flow_ring). The stage has nothing to do per
 *   frame: it passes every frame, touching nothing.
 * - pw_stage_flow_stats_own, with a flow table of its own (no `conntrack` in the pipeline): the
 *   CPU stage applies every frame reaching it to its queue's table (FlowTable::apply with
 *   strict off) and exports what ends, which is conntrack's device apply without its metadata
 *   store. So this form is conntrack's machinery in a track-only mode: the same parameter block
 *   (pw_ct_params: per-queue table then ended-flow ring, strict 0), the same frame order per
 *   flow (flow_order.cuh: it is an ORDERED stage of codegen), the metadata and verdict untouched.
 *   The table's counters (pw_flow_counters: created, expired, early_evicted, table_full,
 *   untracked, invalid) are the stage's v[1..6]; the CPU stage does not publish its own table's
 *   counters, and the host side folds none of them (its named counters, records by end reason,
 *   are counted by the host side's emission, pipeline::stage::flow_stats).
 *
 * In both forms the host side drains the rings, sweeps the tables and exports the records. */
#ifndef PKTWARP_FLOW_STATS_STAGE_CUH
#define PKTWARP_FLOW_STATS_STAGE_CUH

#include "pktwarp_abi.h"
#include "conntrack_stage.cuh"

/* Stage `flow_stats` over conntrack's tables. */
PW_DEVICE void pw_stage_flow_stats(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                                   pw_stage_counters *c) {
    (void)f;
    (void)meta;
    (void)v;
    (void)params;
    (void)c;
}

/* Stage `flow_stats` with a table of its own: the frame updates its flow, nothing else. */
PW_DEVICE void pw_stage_flow_stats_own(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                                       pw_stage_counters *c) {
    (void)v;
    pw_ct_frame((const pw_ct_params *)params, f, meta, (pw_flow_counters *)&c->v[1], 0u, PW_ORDER_CH_FLOW_STATS_OWN);
}

/* The frame's order key for the owned layout: its flow's bucket, as conntrack's. */
PW_DEVICE uint32_t pw_flow_stats_order_key(const pw_frame *f, const pw_packet_meta *meta, const void *params) {
    return pw_conntrack_order_key(f, meta, params);
}

#endif /* PKTWARP_FLOW_STATS_STAGE_CUH */
