/* Part of kernels.cu (included there, after kernels_tx_ring.cu; not a header of its own): the
 * owned layout of a pipeline with an ordered stage (flow_order.cuh) whose key the generated
 * pw_pipeline_order_key names (PW_PIPELINE_ORDER_KEY: codegen::pipeline_order_key).
 *
 * Every CTA of a burst's group (burst_ctas k > 1) takes every burst of its queue in order and
 * computes every frame's key (the stages before the ordered one, parse, into scratch counters it
 * never reads; then the ordered stage's key function, which reads nothing of the table), then
 * runs through the whole pipeline only the frames it owns: key % k == part (keyless frames and
 * frames parse drops: index % k == part), in arrival order, a thread per frame, with the ordered
 * stage's in-block ordering. A key is always owned by the same CTA, so every bucket of the table
 * is applied by one CTA, in arrival order across rounds and bursts, and the result equals the
 * CPU executor's frame by frame; no CTA waits for another (no cross-SM wait cycle can form), and
 * no two SMs touch one bucket (their L1 lines never go stale: each SM reads only what it wrote).
 * A frame's verdict, metadata and counts are written by its owner alone. The TX ring: the
 * owner of frame i writes its sent frames, compacted in arrival order, from the index that
 * counts the burst's frames owned by lower parts (a region no other part writes, as large as the
 * frames it owns); the host merges the parts' lists by frame index (tx.rs). The region needs the
 * burst's whole ownership at once: the executor keeps such bursts to one round (burst_size <=
 * block threads); a larger burst here (never published) runs round after round without TX. */
#if PW_PIPELINE_COMPOSED && defined(PW_PIPELINE_ORDER_KEY)
/* The stages' counters of the key pass (never read: the owner counts the frame in its run). In
 * global memory: PW_ADD64 is a global-memory reduction (count.cuh). */
__device__ pw_stage_counters pw_key_scratch[PW_PIPELINE_N_STAGES];
/* The round's owned frames, in arrival order, and per warp how many it owns / lower parts own. */
__shared__ uint16_t pw_owned[PW_ORDER_MAX];
__shared__ uint32_t pw_owned_warp[32];
__shared__ uint32_t pw_lower_warp[32];

/* Frame `vi`'s order key (pw_run_composed's frame and context; the key pass's counters). */
__device__ __forceinline__ uint32_t pw_order_key_of(const pw_queue_desc &q, const pw_acl_sel &a, const uint8_t *data,
                                                     const pw_desc &d, const pw_vout &vo, uint32_t vi) {
    pw_frame f;
    f.data = (uint8_t *)data + d.offset; /* not written: the pipeline has no writing stage */
    f.len = d.len;
    f.wire_len = d.wire_len;
    f.cap = d.len;
    f.port = d.port;
    f.queue = q.queue_id;
    f.timestamp_ns = d.timestamp_ns;
    f.mark = d.mark;
    f.burst_seq = vo.seq;
    f.burst_index = vi;
    pw_pipeline_ctx ctx;
    ctx.params = (const uint64_t *)a.stage_params;
    ctx.acl = &a;
    ctx.counters = pw_key_scratch;
    pw_packet_meta m;
    pw_meta_zero(&m);
    pw_verdict v;
    pw_verdict_pass(&v);
    return pw_pipeline_order_key(&f, &m, &v, &ctx);
}

/* The burst's n frames, this CTA's (part `part` of `parts`) through the pipeline. `stg`: frames
 * inside data_bytes are staged at `data`, others read from the ring (`gdata`). Whole block. */
__device__ __forceinline__ void pw_run_owned(const pw_queue_desc &q, const pw_acl_sel &a, const uint8_t *descs,
                                             bool compact, const uint8_t *data, const uint8_t *gdata, bool stg,
                                             uint32_t db, uint32_t n, const pw_vout &vo, pw_packet_meta *mout,
                                             pw_count_regs *cr, uint32_t slot, uint32_t part, uint32_t parts) {
    const bool tx_on = q.tx != 0ull && n <= blockDim.x; /* uniform */
    pw_tx_desc *tx = (pw_tx_desc *)q.tx + (uint64_t)slot * q.burst_max;
    uint64_t *times = PW_PIPELINE_TIMED ? PW_TX_TIMES(q) + (uint64_t)slot * q.burst_max : (uint64_t *)0;
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = (blockDim.x + 31u) >> 5;
    if (threadIdx.x == 0) pw_tx_base = 0u;
    uint32_t plo = 0u;
    for (uint32_t c0 = 0u; c0 < n; c0 += blockDim.x) {
        /* The key pass: every frame of the round, its owner. */
        const uint32_t i = c0 + threadIdx.x;
        uint32_t owner = parts;
        if (i < n) {
            const pw_desc d = pw_desc_at(descs, i, compact);
            const uint8_t *fd = (stg && d.offset <= db && d.len <= db - d.offset) ? data : gdata;
            const uint32_t key = pw_order_key_of(q, a, fd, d, vo, i);
            owner = (key == PW_ORDER_NONE ? i : key) % parts;
        }
        const uint32_t mine = __ballot_sync(0xFFFFFFFFu, owner == part);
        const uint32_t lower = __ballot_sync(0xFFFFFFFFu, owner < part);
        if (lane == 0u) {
            pw_owned_warp[warp] = __popc(mine);
            pw_lower_warp[warp] = __popc(lower);
        }
        __syncthreads();
        uint32_t at = 0u, total = 0u, below = 0u;
        for (uint32_t w = 0u; w < warps; w++) {
            if (w < warp) at += pw_owned_warp[w];
            total += pw_owned_warp[w];
            below += pw_lower_warp[w];
        }
        if (owner == part) pw_owned[at + __popc(mine & ((1u << lane) - 1u))] = (uint16_t)i;
        if (c0 == 0u) plo = below;
        __syncthreads();
        /* The owned frames, in arrival order, one round (the ordered stage's hooks block-wide). */
        pw_verdict v;
        uint32_t len = 0u, off = 0u, j = 0u;
        bool send = false;
        PW_PIPELINE_ROUND_BEGIN();
        if (threadIdx.x < total) {
            j = pw_owned[threadIdx.x];
            const pw_desc d = pw_desc_at(descs, j, compact);
            const uint8_t *fd = (stg && d.offset <= db && d.len <= db - d.offset) ? data : gdata;
            pw_run_composed(q, a, fd, d, vo, j, mout ? mout + j : 0, cr, &v, &len);
            off = d.offset;
            send = v.action != (uint8_t)PW_ACTION_DROP;
        }
        PW_PIPELINE_ROUND_END();
        if (tx_on) pw_tx_round(tx, times, plo, send, off, len, j, v);
        __syncthreads(); /* pw_owned and the warp counts are the next round's */
    }
    if (q.tx != 0ull && threadIdx.x == 0)
        ((volatile uint32_t *)q.tx_counts)[slot * parts + part] = tx_on ? PW_TX_COUNT(plo, pw_tx_base) : PW_TX_COUNT(0u, 0u);
}
/* pw_run_slot's dispatch: with several CTAs a burst (`parts`), the frames split by key, not by
 * index; the arguments are pw_run_owned's. */
#define PW_RUN_OWNED(parts, ...) \
    if ((parts) > 1u) return pw_run_owned(__VA_ARGS__)
#else
#define PW_RUN_OWNED(parts, ...) ((void)(parts))
#endif
