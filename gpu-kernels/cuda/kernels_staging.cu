/* Part of kernels.cu (included there, at this point of it; not a header of its own): a burst's
 * slot staged from the ring into shared memory (header, descriptors, data granules), and the
 * chunked run of a burst too large to stage whole. */
/* A burst's slot staged in shared memory: header, its n descriptors, then its data bytes (16-byte
 * granules). Latency: with a ring in mapped host memory every load of a frame byte is a PCIe round
 * trip, and parse's loads depend on each other (ethertype -> IP header -> L4); one coalesced copy
 * of the slot pays that round trip once. Bursts that do not fit are read from the ring itself. */
__shared__ __align__(16) uint8_t pw_stage[PW_STAGE_BYTES];
__shared__ uint32_t pw_ring_reads; /* a staged burst has a frame past data_bytes (read from the ring) */

/* 16 bytes of a ring slot, a strong (volatile = relaxed.sys) load: it reads the point of coherence
 * (host memory across PCIe, or L2), never an L1 line of the slot's previous lap, and needs no L1
 * invalidation (an acquire would also drop the ACL image's L1 lines every burst). Issued by threads
 * that passed a barrier after the producer index was seen, so after the host's stores. */
__device__ __forceinline__ uint4 pw_ld_slot16(const void *p) {
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* The slot header into pw_stage (3 x 16 B, issued back to back). One thread calls it, after it
 * saw the producer index. */
__device__ __forceinline__ void pw_stage_hdr(const uint8_t *base) {
    const uint4 *src = (const uint4 *)base;
    uint4 *dst = (uint4 *)pw_stage;
    const uint4 h0 = pw_ld_slot16(src), h1 = pw_ld_slot16(src + 1), h2 = pw_ld_slot16(src + 2);
    dst[0] = h0;
    dst[1] = h1;
    dst[2] = h2;
}

/* 16-byte granules per thread in flight while staging: each thread issues this many loads before
 * its first store, so a slot costs one round trip to host memory, not one per granule row. */
#define PW_STAGE_UNROLL 4u

/* Granules 0 .. n - 1 (16 bytes each, at `at(i)`) read by the whole block with strong loads,
 * PW_STAGE_UNROLL in flight per thread before the first is used, handed to `use(i, k, v)` (k:
 * the granule's index among this thread's); the caller synchronises. */
template <typename At, typename Use>
__device__ __forceinline__ void pw_load_granules(uint32_t n, At at, Use use) {
    for (uint32_t k0 = 0, i0 = threadIdx.x; i0 < n; k0 += PW_STAGE_UNROLL, i0 += PW_STAGE_UNROLL * blockDim.x) {
        uint4 v[PW_STAGE_UNROLL];
#pragma unroll
        for (uint32_t k = 0; k < PW_STAGE_UNROLL; k++) {
            const uint32_t i = i0 + k * blockDim.x;
            if (i < n) v[k] = pw_ld_slot16(at(i));
        }
#pragma unroll
        for (uint32_t k = 0; k < PW_STAGE_UNROLL; k++) {
            const uint32_t i = i0 + k * blockDim.x;
            if (i < n) use(i, k0 + k, v[k]);
        }
    }
}

/* `granules` 16-byte granules from the ring to shared memory, by the whole block; the caller
 * synchronises. */
__device__ __forceinline__ void pw_stage_copy(uint4 *dst, const uint4 *src, uint32_t granules) {
    pw_load_granules(granules, [&](uint32_t i) { return src + i; },
                     [&](uint32_t i, uint32_t, const uint4 &v) { dst[i] = v; });
}

/* Descriptor i of a slot's descriptor array at `dbase` (ring or pw_stage), in the slot's format. */
__device__ __forceinline__ pw_desc pw_desc_at(const uint8_t *dbase, uint32_t i, bool compact) {
    if (!compact) return ((const pw_desc *)dbase)[i];
    /* pw_desc8 as one 8-byte load (its fields would load one by one): offset, then len | port << 16
     * (descriptor arrays start 16-byte aligned). */
    const uint2 c = ((const uint2 *)dbase)[i];
    pw_desc d;
    d.offset = c.x;
    d.len = c.y & 0xFFFFu;
    d.wire_len = d.len;
    d.port = (uint16_t)((c.y >> 16) & 0xFFu);
    d.queue = 0;
    d.rss_hash = 0;
    d.mark = 0;
    d.timestamp_ns = 0;
    return d;
}

/* Frames [lo, hi) of a burst too large for pw_stage, in chunks of PW_CHUNK_FRAMES frames: the chunk's descriptors,
 * then the bytes its frames span, are copied with coalesced 16-byte loads and parsed from shared
 * memory. Throughput: parsing a frame in a mapped ring directly costs a few small PCIe reads per
 * frame (a warp's load touches 32 frames), which use the link far worse than 512-byte runs. */
#define PW_CHUNK_FRAMES 256u
__shared__ uint32_t pw_chunk_lo, pw_chunk_hi;

__device__ __forceinline__ void pw_run_chunked(const pw_queue_desc &q, const pw_acl_sel &a, const uint8_t *base,
                                               uint32_t lo, uint32_t hi, uint32_t db, bool compact, const pw_vout &vo,
                                               pw_packet_meta *mout, pw_count_regs *cr) {
    const uint8_t *gdata = base + q.data_offset;
    const uint32_t dsz = compact ? (uint32_t)sizeof(pw_desc8) : (uint32_t)sizeof(pw_desc);
    uint8_t *sdesc = pw_stage + sizeof(pw_slot_hdr);
    uint8_t *sdata = sdesc + PW_CHUNK_FRAMES * dsz;
    const uint32_t dcap = PW_STAGE_BYTES - (uint32_t)sizeof(pw_slot_hdr) - PW_CHUNK_FRAMES * dsz;
    for (uint32_t c0 = lo; c0 < hi; c0 += PW_CHUNK_FRAMES) {
        const uint32_t k = hi - c0 < PW_CHUNK_FRAMES ? hi - c0 : PW_CHUNK_FRAMES;
        /* c0 * dsz is a multiple of 16; the last granule may run past the array (still in the
         * slot's descriptor area, which reaches data_offset). */
        pw_stage_copy((uint4 *)sdesc, (const uint4 *)(base + sizeof(pw_slot_hdr) + c0 * dsz), (k * dsz + 15u) / 16u);
        if (threadIdx.x == 0) {
            pw_chunk_lo = 0xFFFFFFFFu;
            pw_chunk_hi = 0u;
        }
        __syncthreads();
        for (uint32_t i = threadIdx.x; i < k; i += blockDim.x) {
            const pw_desc d = pw_desc_at(sdesc, i, compact);
            if (d.offset <= db && d.len <= db - d.offset) {
                atomicMin(&pw_chunk_lo, d.offset);
                atomicMax(&pw_chunk_hi, d.offset + d.len);
            }
        }
        __syncthreads();
        const uint32_t lo = pw_chunk_lo & ~15u, hi = pw_chunk_hi;
        /* hi <= db, and db rounded up to 16 lies inside the slot (checked by the caller). */
        const bool fits = pw_chunk_lo != 0xFFFFFFFFu && hi - lo <= dcap;
        if (fits) pw_stage_copy((uint4 *)sdata, (const uint4 *)(gdata + lo), (hi - lo + 15u) / 16u);
        __syncthreads();
        /* Rounds of blockDim frames the whole block enters (a composed pipeline's round hooks
         * run block-wide; elsewhere they are empty and a spare thread just skips its last round). */
        for (uint32_t r = 0u; r < k; r += blockDim.x) {
            const uint32_t i = r + threadIdx.x;
            PW_PIPELINE_ROUND_BEGIN();
            if (i < k) {
                pw_desc d = pw_desc_at(sdesc, i, compact);
                const uint8_t *fd = gdata; /* a frame outside data_bytes reads the ring, as unstaged */
                if (fits && d.offset <= db && d.len <= db - d.offset) {
                    d.offset -= lo;
                    fd = sdata;
                }
                pw_run_frame(q, a, fd, d, vo, c0 + i, mout ? mout + c0 + i : 0, cr, 0u, 1u);
            }
            PW_PIPELINE_ROUND_END();
        }
        __syncthreads();
    }
}

/* A by-reference burst (PW_SLOT_REFS) whose descriptors are staged at `descs` (in pw_stage, the
 * header `head` bytes, then the 16-byte granule with the frames' base address): frames [lo, hi),
 * which lie at fbase + offset (pinned host memory), copied into pw_stage after that granule,
 * `span` granules a frame (the widest frame's 16-byte granules; every frame's start keeps its
 * place in its granule), and their descriptors' offsets rewritten to where they are now, so the
 * block's frames cost one round trip of coalesced 16-byte loads (PW_STAGE_UNROLL in flight per
 * thread) instead of a few dependent small reads across PCIe each. Returns the bytes staged
 * (from pw_stage + head + 16), or 0 when they do not fit (nothing changed: read them in place).
 * Whole block; every thread gets the same answer. A granule past a frame's end is never read
 * (the frame's last one is read again instead), so no load leaves the frames' memory (the host
 * pads it to a whole granule: GpuExecutor::pinned_copy). */
__device__ __forceinline__ uint32_t pw_stage_refs(const uint8_t *descs, bool compact, uint32_t head,
                                                  const uint8_t *fbase, uint32_t lo, uint32_t hi) {
    if (threadIdx.x == 0) pw_chunk_hi = 1u;
    __syncthreads();
    for (uint32_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const pw_desc d = pw_desc_at(descs, i, compact);
        atomicMax(&pw_chunk_hi, ((d.offset & 15u) + d.len + 15u) >> 4);
    }
    __syncthreads();
    const uint32_t span = pw_chunk_hi;
    uint8_t *sdata = pw_stage + head + 16u; /* the staged base address granule ends there */
    const uint32_t room = head + 16u <= PW_STAGE_BYTES ? (PW_STAGE_BYTES - head - 16u) / 16u : 0u;
    if ((uint64_t)(hi - lo) * span > room) return 0u;
    pw_load_granules(
        (hi - lo) * span,
        [&](uint32_t k) {
            const uint32_t f = k / span, j = k - f * span;
            const pw_desc d = pw_desc_at(descs, lo + f, compact);
            const uint32_t g = ((d.offset & 15u) + d.len + 15u) >> 4;
            return (const uint4 *)(fbase + (d.offset & ~15u)) + (j < g ? j : (g > 0u ? g - 1u : 0u));
        },
        [&](uint32_t k, uint32_t, const uint4 &v) { ((uint4 *)sdata)[k] = v; });
    __syncthreads();
    const uint32_t dsz = compact ? (uint32_t)sizeof(pw_desc8) : (uint32_t)sizeof(pw_desc);
    for (uint32_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        /* The offset is the first word of both descriptor formats. */
        uint32_t *o = (uint32_t *)(pw_stage + (descs - pw_stage) + (uint64_t)i * dsz);
        *o = (i - lo) * span * 16u + (*o & 15u);
    }
    __syncthreads();
    return (hi - lo) * span * 16u;
}

/* A by-reference burst's frames (PW_SLOT_REFS): `*gdata` (the slot's data area) becomes their
 * base address, staged with the descriptors (`staged`: it follows them in pw_stage) or read from
 * there; then, staged, the block's frames are gathered into pw_stage (pw_stage_refs): `*data`
 * and `*db` say where and how many bytes, as for a staged slot. Otherwise `*db` is 0, so every
 * frame is read where it is. The memory they are in never changes while a burst names it, so
 * reading it needs no acquire. Whole block. */
__device__ __forceinline__ void pw_refs_frames(bool staged, const uint8_t *descs, bool compact, uint32_t head,
                                               uint32_t lo, uint32_t hi, const uint8_t **gdata,
                                               const uint8_t **data, uint32_t *db) {
    uint64_t at;
    if (staged) {
        at = *(const uint64_t *)(pw_stage + head);
    } else {
        const uint4 v = pw_ld_slot16(*gdata);
        at = (uint64_t)v.x | ((uint64_t)v.y << 32);
    }
    *gdata = (const uint8_t *)at;
    const uint32_t n = staged ? pw_stage_refs(descs, compact, head, *gdata, lo, hi) : 0u;
    *data = pw_stage + head + 16u;
    *db = n;
}
