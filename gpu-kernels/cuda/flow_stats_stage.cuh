/* Stage `flow_stats` on the GPU, over a `conntrack` stage's tables (docs/flow-export-gpu.md):
 * the flow statistics are conntrack's table entries (packets, IP octets and TCP flags per
 * direction, first and last packet's receive time), and the flows that end inside a frame's
 * visit go to the queue's ended-flow ring there (conntrack_stage.cuh, flow.cuh pw_flow_ring).
 * The host side drains the rings, sweeps the tables and exports the records, so the stage has
 * nothing to do per frame: it passes every frame, touching nothing. Its counters (records by end
 * reason) are counted by the host side (pipeline::stage::flow_stats), not here. A pipeline with
 * flow_stats and no conntrack is refused by the GPU executor. */
#ifndef PKTWARP_FLOW_STATS_STAGE_CUH
#define PKTWARP_FLOW_STATS_STAGE_CUH

#include "pktwarp_abi.h"

/* Stage `flow_stats`. */
PW_DEVICE void pw_stage_flow_stats(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                                   pw_stage_counters *c) {
    (void)f;
    (void)meta;
    (void)v;
    (void)params;
    (void)c;
}

#endif /* PKTWARP_FLOW_STATS_STAGE_CUH */
