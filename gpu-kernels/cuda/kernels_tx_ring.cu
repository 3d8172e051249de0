/* Part of kernels.cu (included there, at this point of it; not a header of its own): the TX
 * ring a composed pipeline's burst leaves for the host (stable block-wide compaction, per-part
 * counts, frames staged and written back in chunks). Uses kernels.cu's staging helpers. */
#if PW_PIPELINE_COMPOSED
/* The TX ring's per-warp counts of one round and the running count of the block's part. */
__shared__ uint32_t pw_tx_warp[32];
__shared__ uint32_t pw_tx_base;
/* A chunk whose frames cannot be staged as one span (out of order, overlapping, outside the data). */
__shared__ uint32_t pw_chunk_bad;

/* One round of the TX ring's stable block-wide compaction: a thread whose frame is sent
 * (`send`) writes its descriptor after those of the lanes before it in its warp, the warps
 * before its own and the rounds before this one (pw_tx_base). Whole block; descriptors of the
 * block's part start at tx[plo]; in a PW_PIPELINE_TIMED pipeline each one's send time goes to
 * times[] at the same index. */
__device__ __forceinline__ void pw_tx_round(pw_tx_desc *tx, uint64_t *times, uint32_t plo, bool send, uint32_t off,
                                            uint32_t len, uint32_t frame, const pw_verdict &v) {
    const uint32_t lane = threadIdx.x & 31u;
    const uint32_t warp = threadIdx.x >> 5;
    const uint32_t ballot = __ballot_sync(0xFFFFFFFFu, send);
    if (lane == 0u) pw_tx_warp[warp] = __popc(ballot);
    __syncthreads();
    uint32_t at = pw_tx_base;
    for (uint32_t w = 0u; w < warp; w++) at += pw_tx_warp[w];
    if (send) {
        pw_tx_desc t;
        t.offset = off;
        t.len = len;
        t.frame = (uint16_t)frame;
        t.out_port = v.out_port;
        t.action = v.action;
        t.reserved0 = 0u;
        t.reserved1 = 0u;
        const uint32_t k = plo + at + __popc(ballot & ((1u << lane) - 1u));
        tx[k] = t;
        if (PW_PIPELINE_TIMED) times[k] = v.send_ns;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t sum = 0u;
        for (uint32_t w = 0u; w < (blockDim.x + 31u) >> 5; w++) sum += pw_tx_warp[w];
        pw_tx_base += sum;
    }
    __syncthreads();
}

/* Frames [plo, phi) of slot `slot` through the composed pipeline, a thread per frame in rounds
 * of blockDim frames, with the TX ring (pw_tx_round), then this part's tx_counts word. `data`:
 * where staged frames are (pw_stage, or the ring); a frame outside data_bytes reads the ring, as
 * in the other paths. Whole block. */
__device__ __forceinline__ void pw_run_tx(const pw_queue_desc &q, const pw_acl_sel &a, const uint8_t *descs,
                                          bool compact, const uint8_t *data, const uint8_t *gdata, uint32_t db,
                                          uint32_t plo, uint32_t phi, const pw_vout &vo, pw_packet_meta *mout,
                                          pw_count_regs *cr, uint32_t slot, uint32_t part, uint32_t parts) {
    pw_tx_desc *tx = (pw_tx_desc *)q.tx + (uint64_t)slot * q.burst_max;
    uint64_t *times = PW_PIPELINE_TIMED ? PW_TX_TIMES(q) + (uint64_t)slot * q.burst_max : (uint64_t *)0;
    if (threadIdx.x == 0) pw_tx_base = 0u;
    __syncthreads();
    for (uint32_t r = plo; r < phi; r += blockDim.x) {
        const uint32_t i = r + threadIdx.x;
        pw_verdict v;
        uint32_t len = 0u, off = 0u;
        bool send = false;
        PW_PIPELINE_ROUND_BEGIN();
        if (i < phi) {
            const pw_desc d = pw_desc_at(descs, i, compact);
            const uint8_t *fd = (data != gdata && d.offset <= db && d.len <= db - d.offset) ? data : gdata;
            pw_run_composed(q, a, fd, d, vo, i, mout ? mout + i : 0, cr, &v, &len);
            off = d.offset;
            send = v.action != (uint8_t)PW_ACTION_DROP;
        }
        PW_PIPELINE_ROUND_END();
        pw_tx_round(tx, times, plo, send, off, len, i, v);
    }
    if (threadIdx.x == 0) ((volatile uint32_t *)q.tx_counts)[slot * parts + part] = PW_TX_COUNT(plo, pw_tx_base);
}

/* Bytes [a, b) of `src` to `dst` (both 16-byte aligned at 0), whole block: the 16-byte granules
 * inside with one store each (coalesced across the block), the bytes before and after singly,
 * so nothing outside [a, b) is written. */
__device__ __forceinline__ void pw_write_span(uint8_t *dst, const uint8_t *src, uint32_t a, uint32_t b) {
    const uint32_t a16 = (a + 15u) & ~15u, b16 = b & ~15u;
    if (a16 >= b16) {
        for (uint32_t i = a + threadIdx.x; i < b; i += blockDim.x) dst[i] = src[i];
        return;
    }
    for (uint32_t i = a + threadIdx.x; i < a16; i += blockDim.x) dst[i] = src[i];
    for (uint32_t i = b16 + threadIdx.x; i < b; i += blockDim.x) dst[i] = src[i];
    for (uint32_t g = a16 / 16u + threadIdx.x; g < b16 / 16u; g += blockDim.x)
        ((uint4 *)dst)[g] = ((const uint4 *)src)[g];
}

/* pw_run_tx for a burst too large for pw_stage (or any burst of a rewriting pipeline), in chunks
 * of PW_CHUNK_FRAMES frames: the chunk's descriptors, then the span its frames (with their frame
 * room) cover, staged with coalesced loads; the stages run on the staged copy (a mapped ring's
 * frames would otherwise be read, and rewritten, a few bytes at a time across PCIe) and a
 * rewriting pipeline's span is written back exactly (pw_write_span) before the next chunk. A
 * chunk whose span is more than the stage holds runs in place in the ring, except in a pipeline
 * that reads whole frames (PW_PIPELINE_READS_PAYLOAD), where it is halved (to an even count,
 * pw_chunk_halved) until it fits (two frames larger than the stage run in place); a chunk whose frames are not in order
 * without overlap or lie outside data_bytes runs in place. The caller checked that data_bytes rounded up to
 * 16 lies inside the slot. */
__device__ __forceinline__ void pw_run_tx_chunked(const pw_queue_desc &q, const pw_acl_sel &a, const uint8_t *base,
                                                  uint32_t plo, uint32_t phi, uint32_t db, bool compact,
                                                  const pw_vout &vo, pw_packet_meta *mout, pw_count_regs *cr,
                                                  uint32_t slot, uint32_t part, uint32_t parts) {
    const uint8_t *gdata = base + q.data_offset;
    const uint32_t dsz = compact ? (uint32_t)sizeof(pw_desc8) : (uint32_t)sizeof(pw_desc);
    uint8_t *sdesc = pw_stage + sizeof(pw_slot_hdr);
    uint8_t *sdata = sdesc + PW_CHUNK_FRAMES * dsz;
    const uint32_t dcap = PW_STAGE_BYTES - (uint32_t)sizeof(pw_slot_hdr) - PW_CHUNK_FRAMES * dsz;
    const uint32_t room = PW_PIPELINE_WRITES ? q.frame_room : 0u;
    pw_tx_desc *tx = (pw_tx_desc *)q.tx + (uint64_t)slot * q.burst_max;
    uint64_t *times = PW_PIPELINE_TIMED ? PW_TX_TIMES(q) + (uint64_t)slot * q.burst_max : (uint64_t *)0;
    if (threadIdx.x == 0) pw_tx_base = 0u;
    uint32_t k = 0u;
    for (uint32_t c0 = plo; c0 < phi; c0 += k) {
        k = phi - c0 < PW_CHUNK_FRAMES ? phi - c0 : PW_CHUNK_FRAMES;
        __syncthreads(); /* the last chunk's frames are done with sdesc / sdata */
        pw_stage_copy((uint4 *)sdesc, (const uint4 *)(base + sizeof(pw_slot_hdr) + c0 * dsz), (k * dsz + 15u) / 16u);
        /* The chunk's span; while it is in order but larger than the stage and a stage reads
         * whole frames (PW_PIPELINE_READS_PAYLOAD), half the frames: fronthaul U-plane frames
         * of a few KB never fit 256 at a time, and every frame then ran in place, its PRBs read
         * across PCIe a few bytes at a time by one thread; the chunk shrinks to the frames that
         * fit and they run from shared memory. Header-only pipelines keep running in place. */
        uint32_t lo, hi, glo;
        bool fits;
        for (;;) {
            __syncthreads(); /* every thread has read the last pass's span */
            if (threadIdx.x == 0) {
                pw_chunk_lo = 0xFFFFFFFFu;
                pw_chunk_hi = 0u;
                pw_chunk_bad = 0u;
            }
            __syncthreads();
            for (uint32_t i = threadIdx.x; i < k; i += blockDim.x) {
                const pw_desc d = pw_desc_at(sdesc, i, compact);
                const uint64_t end = (uint64_t)d.offset + d.len + room;
                bool ok = end <= db;
                if (ok && i + 1u < k) ok = pw_desc_at(sdesc, i + 1u, compact).offset >= end;
                if (ok) {
                    atomicMin(&pw_chunk_lo, d.offset);
                    atomicMax(&pw_chunk_hi, (uint32_t)end);
                } else {
                    pw_chunk_bad = 1u;
                }
            }
            __syncthreads();
            lo = pw_chunk_lo;
            hi = pw_chunk_hi;
            glo = lo & ~15u;
            fits = !pw_chunk_bad && lo != 0xFFFFFFFFu && hi - glo <= dcap;
            /* Uniform: every thread read the same shared words after the barrier. */
            /* Halved to an even count: every chunk starts at an even frame, so its first
             * pw_desc8 lies on a 16-byte granule for pw_stage_copy (pw_chunk_halved). */
            if (fits || pw_chunk_bad || k <= PW_CHUNK_LEAST || !PW_PIPELINE_READS_PAYLOAD) break;
            k = pw_chunk_halved(k);
        }
        if (fits) pw_stage_copy((uint4 *)sdata, (const uint4 *)(gdata + glo), (hi - glo + 15u) / 16u);
        __syncthreads();
        for (uint32_t r = 0u; r < k; r += blockDim.x) {
            const uint32_t i = r + threadIdx.x;
            pw_verdict v;
            uint32_t len = 0u, off = 0u;
            bool send = false;
            PW_PIPELINE_ROUND_BEGIN();
            if (i < k) {
                pw_desc d = pw_desc_at(sdesc, i, compact);
                off = d.offset;
                const uint8_t *fd = gdata;
                if (fits) {
                    d.offset -= glo;
                    fd = sdata;
                }
                pw_run_composed(q, a, fd, d, vo, c0 + i, mout ? mout + c0 + i : 0, cr, &v, &len);
                send = v.action != (uint8_t)PW_ACTION_DROP;
            }
            PW_PIPELINE_ROUND_END();
            pw_tx_round(tx, times, plo, send, off, len, c0 + i, v);
        }
        if (PW_PIPELINE_WRITES && fits) pw_write_span((uint8_t *)gdata + glo, sdata, lo - glo, hi - glo);
    }
    __syncthreads();
    if (threadIdx.x == 0) ((volatile uint32_t *)q.tx_counts)[slot * parts + part] = PW_TX_COUNT(plo, pw_tx_base);
}
#endif
