/* Part of kernels.cu (included there, at this point of it; not a header of its own): the tagged
 * queue's receive side (PW_PIPE_TAGGED: granules decoded as they land, poll rounds kept in
 * flight with cp.async). Uses kernels.cu's staging helpers. */
/* Tagged granules a burst's image needs, from its first granule's payload (n_frames,
 * desc_format, data_bytes), or ~0 when the header is not one the host writes (too many frames,
 * unknown format, larger than pw_stage or than this block can check). */
__device__ __forceinline__ uint32_t pw_tagged_need(const pw_queue_desc &q, uint32_t w0, uint32_t db) {
    const uint32_t n = w0 & 0xFFFFu, fmt = (w0 >> 16) & 0xFFu;
    if (n > q.burst_max || (fmt != PW_DESC_FULL && fmt != PW_DESC_COMPACT) || db > PW_STAGE_BYTES) return ~0u;
    const uint32_t dsz = fmt == PW_DESC_COMPACT ? (uint32_t)sizeof(pw_desc8) : (uint32_t)sizeof(pw_desc);
    const uint32_t bytes = (uint32_t)sizeof(pw_slot_hdr) + (n * dsz + 15u) / 16u * 16u + (db + 15u) / 16u * 16u;
    const uint32_t g = (bytes + PW_TAG_PAYLOAD - 1u) / PW_TAG_PAYLOAD;
    if (g * PW_TAG_PAYLOAD > PW_STAGE_BYTES || g > 32u * blockDim.x) return ~0u;
    return g;
}

__shared__ uint32_t pw_tag_poll; /* granules each poll round reads (thread 0 sets it) */
__shared__ uint32_t pw_tag_need; /* granules burst seq's image needs (0: its first granule not seen yet) */
__shared__ uint32_t pw_tag_last; /* granules of the block's last burst (a hot poll reads that many) */

/* Granule i's payload (PW_PIPE_TAGGED: {p0, p1, p2, tag}) to its place in the decoded image. */
__device__ __forceinline__ void pw_tag_decode(uint32_t i, const uint4 &v) {
    uint32_t *d = (uint32_t *)(pw_stage + PW_TAG_PAYLOAD * i);
    d[0] = v.x;
    d[1] = v.y;
    d[2] = v.z;
}

/* A poll round's granule i, this thread's kk-th: decoded, and bit kk of *okm set when it carries
 * `tag`. */
__device__ __forceinline__ void pw_tag_take(uint32_t i, uint32_t kk, const uint4 &v, uint32_t tag, uint32_t *okm) {
    if (v.w == tag) *okm |= 1u << kk;
    pw_tag_decode(i, v);
}

/* Rounds of a tagged poll in flight at once (pw_poll_tagged), and the most bytes they may read
 * across PCIe together. A round takes ~1.5 us on the H200 machine from issue to landed for a
 * 32-frame slot (tools/gpu-probes/host_read_rtt.cu), ~1.9 us until the block has checked it, and a burst
 * arrives at any point of a round: one that the host finishes writing just after a round's reads
 * reached host memory waits for the next round. With K rounds spaced a round trip / K apart that
 * wait shrinks K-fold. tools/gpu-probes/ring_lat (32 x 64 B, tagged in and out; docs/perf-log.md,
 * "two poll rounds in flight", 2026-11-30): K = 2 p50 / p99 4.04-4.07 / 4.18-4.29 us against
 * 4.76-4.82 / 4.92-4.98 with one round; K = 3 (14 KB in flight) 3.71-3.78 / 5.28-6.25: past ~10 KB
 * in flight the rounds slow each other. */
#ifndef PW_POLL_ROUNDS_MAX
#define PW_POLL_ROUNDS_MAX 2u
#endif
#ifndef PW_POLL_INFLIGHT_BYTES
#define PW_POLL_INFLIGHT_BYTES 10240u
#endif

__shared__ uint32_t pw_poll_rtt;                        /* ns, a round's issue -> landed (thread 0's) */
__shared__ uint64_t pw_poll_issued[PW_POLL_ROUNDS_MAX]; /* thread 0's issue time of each round in flight */
__shared__ uint4 pw_poll_ctrl[PW_POLL_ROUNDS_MAX];      /* each round's copy of ctrl words 0-3 (exit_flag) */

/* Rounds in flight for rounds of `g` granules: each lands in a raw buffer (16 bytes a granule)
 * at the end of pw_stage, behind the decoded image (PW_TAG_PAYLOAD bytes a granule); 0 when not
 * even one fits (the poll then loads into registers, one round at a time). */
__device__ __forceinline__ uint32_t pw_poll_rounds(uint32_t g) {
    if (g * (16u + PW_TAG_PAYLOAD) > PW_STAGE_BYTES) return 0u;
    uint32_t k = (PW_STAGE_BYTES - g * PW_TAG_PAYLOAD) / (g * 16u);
    const uint32_t budget = PW_POLL_INFLIGHT_BYTES / (g * 16u);
    if (k > budget) k = budget > 0u ? budget : 1u;
    return k < PW_POLL_ROUNDS_MAX ? k : PW_POLL_ROUNDS_MAX;
}

/* 16 bytes global -> shared without a register destination: a round still in flight when an
 * earlier one finds the burst holds up nothing (a register load would: the first instruction
 * reusing its registers waits for it). .cg reads L2 / host memory, never a stale L1 line. */
__device__ __forceinline__ void pw_cp_async16(void *dst, const void *src) {
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}

/* Every round this block still has in flight has landed: each thread waits for its own copies,
 * then the barrier for everyone's. Only then may the shared memory under them be reused (a
 * thread past its own wait could otherwise write where another thread's copy is still to land:
 * measured, docs/perf-log.md, "two poll rounds in flight", 2026-11-30). */
__device__ __forceinline__ void pw_cp_async_drain() {
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();
}

/* This thread's oldest round of `k` in flight has landed. */
__device__ __forceinline__ void pw_cp_async_wait_oldest(uint32_t k) {
    if (k >= 3u)
        asm volatile("cp.async.wait_group 2;" ::: "memory");
    else if (k == 2u)
        asm volatile("cp.async.wait_group 1;" ::: "memory");
    else
        asm volatile("cp.async.wait_group 0;" ::: "memory");
}

/* After a poll round of `g` granules, each decoded into pw_stage by the thread that read it:
 * whether every granule the image needs carries the tag (`okm` bit k: this thread's k-th
 * granule did). Thread 0, which decoded granule 0 itself, first sets pw_tag_need from it. Whole
 * block. */
__device__ __forceinline__ bool pw_tag_complete(const pw_queue_desc &q, uint32_t g, uint32_t okm) {
    if (threadIdx.x == 0) {
        const uint32_t *h = (const uint32_t *)pw_stage;
        pw_tag_need = (okm & 1u) ? pw_tagged_need(q, h[0], h[1]) : 0u;
    }
    __syncthreads();
    const uint32_t need = pw_tag_need;
    bool ok = need != 0u;
    if (ok && need != ~0u) {
        /* This thread's granules below need must all carry the tag, and were all read. */
        const uint32_t m = need < g ? need : g;
        const uint32_t cnt = threadIdx.x < m ? (m - 1u - threadIdx.x) / blockDim.x + 1u : 0u;
        const uint32_t mask = cnt >= 32u ? ~0u : (1u << cnt) - 1u;
        ok = need <= g && (okm & mask) == mask;
    }
    return __syncthreads_and(ok);
}

/* Thread 0, after pw_tag_complete (`done`) of a round of `g` granules: the burst's end (bad slot,
 * or staged: its size for the next poll, the trace's seen), else the next round's size and the
 * idle step. Sets pw_cmd (1: stop). */
__device__ __forceinline__ void pw_tag_after(const pw_queue_desc &q, bool done, uint32_t g, uint32_t lane,
                                             uint32_t part, uint32_t parts, uint32_t *spins, uint64_t idle_since,
                                             uint32_t exit_flag, uint64_t *ts) {
    const uint32_t need = pw_tag_need;
    if (done) {
        if (need == ~0u) {
            ((volatile pw_queue_ctrl *)q.ctrl)->status = PW_QSTATE_BAD_SLOT;
            pw_cmd = 1u;
        } else {
            pw_tag_last = need;
            if (q.trace) ts[0] = pw_globaltimer();
        }
    } else if (need != 0u && need != ~0u && need > g) {
        pw_tag_poll = need; /* granule 0 asks for more than this round read */
    } else {
        if (g > 1u && (*spins & 0xFu) == 0u && pw_globaltimer() - idle_since > PW_HOT_POLL_NS) pw_tag_poll = 1u;
        pw_cmd = pw_idle_step(q, lane, part, parts, spins, idle_since, exit_flag);
    }
}

/* The end of a poll round of `g` granules (`okm`: pw_tag_take's bits): whether the burst is
 * complete (pw_tag_complete), thread 0's pw_tag_after, then a barrier that publishes what it set
 * (pw_cmd, pw_tag_poll). Whole block. */
__device__ __forceinline__ bool pw_tag_round_end(const pw_queue_desc &q, uint32_t g, uint32_t okm, uint32_t lane,
                                                 uint32_t part, uint32_t parts, uint32_t *spins, uint64_t idle_since,
                                                 uint32_t exit_flag, uint64_t *ts) {
    const bool done = pw_tag_complete(q, g, okm);
    if (threadIdx.x == 0) pw_tag_after(q, done, g, lane, part, parts, spins, idle_since, exit_flag, ts);
    __syncthreads();
    return done;
}

/* PW_PIPE_TAGGED: the whole block polls slot `slot` (= seq % slots), each thread its granules (i = thread,
 * thread + blockDim, ...), decoding their payload into pw_stage, until every granule the image
 * needs carries tag seq + 1 in the same round: the poll's round trip also brings the burst. A
 * round reads as many granules as the last burst needed (more when granule 0 asks for more),
 * only granule 0 once the queue has idled PW_HOT_POLL_NS. Up to pw_poll_rounds(g) rounds are in
 * flight at once, spaced a round trip / K apart, each into its own raw buffer (cp.async); rounds
 * too large for that load into registers one at a time. Tags never change under a burst until
 * the host reaps it, so a granule seen tagged stays right. Sets pw_cmd (0: staged, 1: stop);
 * thread 0 sets ts[0] when seen. */
__device__ void pw_poll_tagged(const pw_queue_desc &q, uint32_t seq, uint32_t slot, uint32_t lane, uint32_t part,
                               uint32_t parts, uint64_t *ts) {
    const uint4 *sb = (const uint4 *)(q.ring + (uint64_t)slot * q.slot_bytes);
    const uint32_t tag = seq + 1u;
    uint64_t idle_since = 0;
    uint32_t spins = 0;
    if (threadIdx.x == 0) {
        idle_since = pw_globaltimer();
        pw_tag_poll = pw_tag_last;
        pw_cmd = 0u;
    }
    /* The last poll's rounds still in flight land in pw_stage's tail before it is reused (and
     * the barrier publishes thread 0's words above). */
    pw_cp_async_drain();
    for (;;) {
        const uint32_t g = pw_tag_poll, k = pw_poll_rounds(g);
        if (k == 0u) {
            uint32_t okm = 0u; /* bit k: this thread's k-th granule carries the tag */
            const uint32_t exit_flag = threadIdx.x == 0 ? pw_exit_flag_load(q, spins) : 0u;
            pw_load_granules(g, [&](uint32_t i) { return sb + i; },
                             [&](uint32_t i, uint32_t kk, const uint4 &v) { pw_tag_take(i, kk, v, tag, &okm); });
            if (pw_tag_round_end(q, g, okm, lane, part, parts, &spins, idle_since, exit_flag, ts) || pw_cmd) return;
            continue;
        }
        /* Raw buffer r of k at the end of pw_stage (the decoded image keeps its first g * 12 bytes). */
        uint4 *raw = (uint4 *)(pw_stage + PW_STAGE_BYTES - k * g * 16u);
        auto issue = [&](uint32_t r) {
            for (uint32_t i = threadIdx.x; i < g; i += blockDim.x) pw_cp_async16(raw + r * g + i, sb + i);
            /* The exit flag rides along: its own load would cost a round trip of waiting. */
            if (threadIdx.x == 0) pw_cp_async16(&pw_poll_ctrl[r], (const void *)q.ctrl);
            asm volatile("cp.async.commit_group;" ::: "memory");
            if (threadIdx.x == 0) pw_poll_issued[r] = pw_globaltimer();
        };
        {
            const uint32_t pace = pw_poll_rtt / k;
            const uint64_t t0 = pw_globaltimer();
            for (uint32_t r = 0; r < k; r++) {
                while (pw_globaltimer() - t0 < (uint64_t)r * pace) {
                }
                issue(r);
            }
        }
        for (uint32_t r = 0;; r = r + 1u == k ? 0u : r + 1u) {
            pw_cp_async_wait_oldest(k);
            const uint32_t exit_flag = threadIdx.x == 0 ? pw_poll_ctrl[r].y : 0u; /* pw_queue_ctrl.exit_flag */
            uint32_t okm = 0u;
            const uint4 *rb = raw + r * g;
            /* Decoded every round (the round that completes the image leaves it in pw_stage). */
            for (uint32_t i = threadIdx.x, kk = 0; i < g; i += blockDim.x, kk++) pw_tag_take(i, kk, rb[i], tag, &okm);
            if (threadIdx.x == 0) {
                /* A round trip measured (clamped: a stalled round must not space rounds for ms). */
                uint64_t rtt = pw_globaltimer() - pw_poll_issued[r];
                rtt = rtt < 200u ? 200u : rtt > 8000u ? 8000u : rtt;
                pw_poll_rtt = (uint32_t)((7u * (uint64_t)pw_poll_rtt + rtt) / 8u);
            }
            if (pw_tag_round_end(q, g, okm, lane, part, parts, &spins, idle_since, exit_flag, ts)) return;
            if (pw_cmd || pw_tag_poll != g) {
                pw_cp_async_drain();
                if (pw_cmd) return;
                break; /* rounds of another size */
            }
            issue(r);
        }
    }
}
