/* pktwarp GPU transport: the persistent queue kernel, the one-burst kernel (modes `launch` and
 * `graph`) and the bulk kernel that runs the pipeline over device-resident frames (stage
 * throughput). It knows the pipeline only as one of two templates (pktwarp-kernels codegen):
 *   - PW_PIPELINE_FUSED: the built-in parse -> acl -> count (any in-order subset, chosen per queue
 *     by PW_PIPE_* flags), with the tuned paths (two-pass grouped lookups, the small-burst kernel);
 *   - PW_PIPELINE_COMPOSED: the generated pw_pipeline_frame (the config's stages through the stage
 *     ABI, cuda/pktwarp_abi.h), one thread per frame.
 * A source that includes this file alone gets the fused template. Receiving is pw_poll_* /
 * pw_run_slot's staging, results leave through pw_store_verdict / pw_publish. */
#if !defined(PW_PIPELINE_FUSED) && !defined(PW_PIPELINE_COMPOSED)
#define PW_PIPELINE_FUSED 1
#endif
#if !defined(PW_PIPELINE_FUSED)
#define PW_PIPELINE_FUSED 0
#endif
#if !defined(PW_PIPELINE_COMPOSED)
#define PW_PIPELINE_COMPOSED 0
#endif
#include "stages.cuh"
#include "chunk_halve.cuh"


__device__ __forceinline__ uint64_t pw_globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Acquire side of the producer handshake: once a relaxed poll saw the new producer index, one
 * acquire load of it orders every later read of the slot after it (and drops stale L1 lines of
 * the slot's previous lap: L1 is not coherent with DMA or host writes). */
__device__ __forceinline__ uint32_t pw_load_acquire(const volatile uint32_t *p) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ pw_acl_sel pw_acl_of_queue(const pw_queue_desc &q) {
    pw_acl_sel a;
    a.tables = q.acl_tables;
    a.rule_hits = q.rule_hits;
    a.n_rules = q.n_rules;
    a.default_action = q.default_action;
    a.stage_params = q.stage_params;
    return a;
}

__device__ __forceinline__ pw_acl_sel pw_acl_of_slot(const pw_queue_desc &q, const pw_slot_hdr *h) {
    pw_acl_sel a = pw_acl_of_queue(q);
    if (h->acl_tables != 0ull) {
        a.tables = h->acl_tables;
        a.rule_hits = h->rule_hits;
        a.n_rules = h->n_rules;
        a.default_action = h->default_action;
    }
    if (h->stage_params != 0ull) a.stage_params = h->stage_params;
    return a;
}


#if PW_PIPELINE_FUSED
/* Stage `acl` on a frame's key words (pw_acl_key_words): the matched rule and its action / mark,
 * or the table's default action when nothing matches. Same as pipeline::stage::acl. */
__device__ __forceinline__ void pw_stage_acl_kw(const pw_acl_sel &a, const uint32_t *kw, uint32_t *rule,
                                                uint8_t *action, uint32_t *mark, uint32_t gl, uint32_t gsize) {
    const pw_acl_tables *t = (const pw_acl_tables *)a.tables;
    uint32_t act[2] = {0u, 0u};
    *rule = gsize > 1u ? pw_acl_classify_group_kw(t, kw, gl, gsize, act) : pw_acl_classify_kw(t, kw);
    if (*rule != PW_ACL_NO_MATCH) {
        uint32_t mk, w;
        if (gsize > 1u) { /* loaded by the lane that matched (pw_acl_group_scan) */
            w = act[0];
            mk = act[1];
        } else {
            w = pw_acl_action(t, *rule, &mk);
        }
        uint32_t code = w & 0xFFu;
        *action = (uint8_t)(code < PW_ACTIONS ? code : PW_ACTION_PASS); /* flow_rules Verdict::from_code */
        *mark = ((w >> 8) & 1u) ? mk : 0u;
    } else {
        *action = a.default_action;
        *mark = 0u;
    }
}

/* Stage `acl` on a parsed frame (its key from the metadata). */
__device__ __forceinline__ void pw_stage_acl_fused(const pw_acl_sel &a, const pw_packet_meta *m, uint16_t port,
                                                   uint32_t *rule, uint8_t *action, uint32_t *mark, uint32_t gl,
                                                   uint32_t gsize) {
    pw_acl_key k;
    pw_acl_key_from_meta(m, port, &k);
    uint32_t kw[11];
    pw_acl_key_words(&k, kw);
    pw_stage_acl_kw(a, kw, rule, action, mark, gl, gsize);
}
#endif

/* Where a burst's verdicts go: pw_verdict_out[] or, when `tag` != 0 (PW_PIPE_TAGGED),
 * pw_verdict_tagged[] stamped with it. */
typedef struct pw_vout {
    void *base;
    uint32_t tag;
    uint32_t seq; /* the burst's sequence number (pw_frame.burst_seq) */
} pw_vout;

/* Verdict i of the burst. Tagged: three 8-byte stores, each word with the tag (strong, so they
 * leave the SM at once: nothing after them orders them). */
__device__ __forceinline__ void pw_store_verdict(const pw_vout &vo, uint32_t i, const pw_verdict &v) {
    if (vo.tag == 0u) {
        pw_verdict_out o;
        o.action = v.action;
        o.drop_reason = v.drop_reason;
        o.out_port = v.out_port;
        o.rule = v.rule;
        o.mark = v.mark;
        ((pw_verdict_out *)vo.base)[i] = o;
        return;
    }
    pw_verdict_tagged *t = (pw_verdict_tagged *)vo.base + i;
    const uint32_t head = (uint32_t)v.action | ((uint32_t)v.drop_reason << 8) | ((uint32_t)v.out_port << 16);
    asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(&t->head), "r"(head), "r"(vo.tag) : "memory");
    asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(&t->rule), "r"(v.rule), "r"(vo.tag) : "memory");
    asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(&t->mark), "r"(v.mark), "r"(vo.tag) : "memory");
}

/* Whether a parsed frame goes through the acl stage: not when parse failed and the pipeline drops
 * malformed frames first. */
__device__ __forceinline__ bool pw_acl_runs(const pw_queue_desc &q, uint32_t parse_ok) {
    return parse_ok || !(q.pipeline & PW_PIPE_DROP_MALFORMED);
}

/* A frame's verdict from its parse and acl results, stored as verdict `vi`, and its counts. Lane
 * 0 of the frame's group. */
__device__ __forceinline__ void pw_emit_verdict(const pw_queue_desc &q, const pw_acl_sel &a, uint32_t parse_ok,
                                                uint32_t rule, uint8_t action, uint32_t mark, uint32_t acl_ran,
                                                uint32_t wire_len, const pw_vout &vo, uint32_t vi,
                                                pw_count_regs *cr) {
    pw_verdict v = pw_verdict_of(parse_ok, q.pipeline, rule, action, mark);
    pw_store_verdict(vo, vi, v);
    if (q.pipeline & PW_PIPE_COUNT)
        pw_count_frame(cr, (uint64_t *)a.rule_hits, a.n_rules, parse_ok, acl_ran, &v, wire_len);
}

/* A stage that works on a round of frames together after each thread ran its frame (the
 * fronthaul stage's PRBs spread over warps, fronthaul_stage.cuh) defines these two: every path
 * that runs composed frames then runs them in rounds the whole block enters, BEGIN before and
 * END after each round, while the round's frames are still where they ran. */
#if !defined(PW_PIPELINE_ROUND_BEGIN)
#define PW_PIPELINE_ROUND_BEGIN() ((void)0)
#define PW_PIPELINE_ROUND_END() ((void)0)
#endif

#if PW_PIPELINE_COMPOSED
#if !defined(PW_PIPELINE_WRITES)
#define PW_PIPELINE_WRITES 0
#endif
#if !defined(PW_PIPELINE_TIMED)
#define PW_PIPELINE_TIMED 0
#endif
/* A stage reads the whole frame (codegen READS_PAYLOAD: fronthaul): pw_run_tx_chunked then
 * stages a chunk of large frames a few at a time instead of running them in place. */
#if !defined(PW_PIPELINE_READS_PAYLOAD)
#define PW_PIPELINE_READS_PAYLOAD 0
#endif
/* One frame through the generated pw_pipeline_frame: verdict `vi` stored (and the metadata when
 * asked), counted; its verdict and its length after the stages in `*vout` / `*len_out`. In a
 * PW_PIPELINE_WRITES pipeline `data` is the ring slot's data area itself and the frame may grow
 * into the queue's frame_room. */
__device__ __forceinline__ void pw_run_composed(const pw_queue_desc &q, const pw_acl_sel &a, const uint8_t *data,
                                                const pw_desc &d, const pw_vout &vo, uint32_t vi,
                                                pw_packet_meta *mout, pw_count_regs *cr, pw_verdict *vout,
                                                uint32_t *len_out) {
    pw_frame f;
    f.data = (uint8_t *)data + d.offset; /* written only in a PW_PIPELINE_WRITES pipeline (the ring) */
    f.len = d.len;
    f.wire_len = d.wire_len;
    f.cap = PW_PIPELINE_WRITES ? d.len + q.frame_room : d.len;
    f.port = d.port;
    f.queue = q.queue_id;
    f.timestamp_ns = d.timestamp_ns;
    f.mark = d.mark;
    f.burst_seq = vo.seq;
    f.burst_index = vi;
    pw_pipeline_ctx ctx;
    ctx.params = (const uint64_t *)a.stage_params;
    ctx.acl = &a;
    ctx.counters = (pw_stage_counters *)q.stage_counters;
    pw_packet_meta m;
    pw_meta_zero(&m);
    pw_verdict v;
    pw_verdict_pass(&v);
    pw_pipeline_frame(&f, &m, &v, &ctx);
    pw_store_verdict(vo, vi, v);
    /* The stages counted parse errors, ACL matches and rule hits in their own blocks. */
    if (q.pipeline & PW_PIPE_COUNT) pw_count_frame(cr, 0, 0u, 1u, 0u, &v, d.wire_len);
    if (mout) *mout = m;
    *vout = v;
    *len_out = f.len <= f.cap ? f.len : f.cap;
}
#endif

/* One frame through the pipeline. Writes verdict `vi` (and the metadata when asked) and counts.
 * Fused: run by a group of `gsize` lanes (lane `gl` of it; gsize 1: one thread per frame): every
 * lane parses the frame (same bytes, same path), the group shares the ACL lookup, lane 0 writes.
 * Composed: one thread per frame (gsize 1) through the generated pw_pipeline_frame. */
__device__ __forceinline__ void pw_run_frame(const pw_queue_desc &q, const pw_acl_sel &a, const uint8_t *data,
                                             const pw_desc &d, const pw_vout &vo, uint32_t vi,
                                             pw_packet_meta *mout, pw_count_regs *cr, uint32_t gl,
                                             uint32_t gsize) {
#if PW_PIPELINE_COMPOSED
    (void)gl;
    (void)gsize;
    pw_verdict v;
    uint32_t len;
    pw_run_composed(q, a, data, d, vo, vi, mout, cr, &v, &len);
#else
    uint32_t parse_ok = 1u;
    pw_packet_meta m;
    if (q.pipeline & PW_PIPE_PARSE) {
        pw_parse(data + d.offset, d.len, &m);
        parse_ok = m.status == 0u;
    }
    uint32_t rule = PW_ACL_NO_MATCH;
    uint8_t action = (uint8_t)PW_ACTION_PASS;
    uint32_t mark = 0u;
    uint32_t acl_ran = 0u;
    if ((q.pipeline & PW_PIPE_ACL) && pw_acl_runs(q, parse_ok)) {
        pw_stage_acl_fused(a, &m, d.port, &rule, &action, &mark, gl, gsize);
        acl_ran = 1u;
    }
    if (gl != 0u) return;
    pw_emit_verdict(q, a, parse_ok, rule, action, mark, acl_ran, d.wire_len, vo, vi, cr);
    if (mout && (q.pipeline & PW_PIPE_PARSE)) {
        m.steer_mark = d.mark; /* as the parse stage's */
        *mout = m;
    }
#endif
}

__device__ __forceinline__ void pw_zero_counters(pw_queue_counters *c) {
    uint64_t *w = (uint64_t *)c;
    for (uint32_t i = threadIdx.x; i < sizeof(pw_queue_counters) / 8u; i += blockDim.x) w[i] = 0;
}

/* Release side of the completion handshake: every write before it (this thread's, and those of
 * the threads that passed a barrier with it) is visible system-wide before the word. */
__device__ __forceinline__ void pw_store_release(uint64_t addr, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" : : "l"(addr), "r"(v) : "memory");
}

/* Lanes per frame for a burst of n frames on this block: with parse + acl, spare threads join
 * a frame's ACL lookup (pw_acl_classify_group), up to a warp; a power of two, so groups never
 * straddle warps. 1 when the burst fills the block. */
__device__ __forceinline__ uint32_t pw_group_size(const pw_queue_desc &q, uint32_t n) {
    uint32_t g = 1u;
#if PW_PIPELINE_FUSED
    /* The g = 2^k (k <= 5) the loop "while (g < 32 && n * g * 2 <= blockDim) g *= 2" ends with,
     * from independent compares: with the division below it was ~0.15 us of every small burst's
     * latency path, where one warp's dependent instructions take ~5 cycles each (docs/perf-log.md,
     * "where the parse pass's time goes", 2026-11-30). */
    if (q.pipeline & PW_PIPE_ACL) {
#pragma unroll
        for (uint32_t k = 1u; k <= 5u; k++)
            if ((n << k) <= blockDim.x) g = 1u << k;
    }
#endif
    return g;
}

#include "kernels_staging.cu"

/* Thread 0's timestamps of the running burst (seen, staged, ran, parsed: see pw_burst_trace) when
 * the queue traces (in shared memory: registers are the persistent kernel's scarcest resource). */
__shared__ uint64_t pw_ts[4];

#if PW_PIPELINE_FUSED
/* A frame between the two passes of pw_run_split: its ACL key words (read in place by the
 * group's tree steps) and what its verdict and counters need. */
typedef struct pw_split_frame {
    uint32_t kw[11];
    uint32_t wire_len;
    uint32_t parse_ok;
} pw_split_frame;
__shared__ pw_split_frame pw_split[PW_SPLIT_MAX];

/* Frames [lo, hi) of a burst shared by groups of `gsize` > 1 lanes (hi - lo <= PW_SPLIT_MAX), in
 * two passes: a thread per frame parses and keeps the frame's key in shared memory, then each
 * frame's group shares its lookup. pw_run_frame would have every lane of a group parse the same
 * frame: eight or sixteen times the parse work on the SM's schedulers, on the burst's latency
 * path. A frame pw_parse_fast_key covers skips pw_parse (unless the queue writes metadata out).
 * Same results as pw_run_frame. `fd` rules as pw_run_slot's. */
__device__ __forceinline__ void pw_run_split(const pw_queue_desc &q, const pw_acl_sel &a, const uint8_t *descs,
                                             bool compact, const uint8_t *data, const uint8_t *gdata, bool staged,
                                             uint32_t db, uint32_t lo, uint32_t hi, const pw_vout &vo,
                                             pw_packet_meta *mout, pw_count_regs *cr, uint32_t gsize,
                                             bool acquire_ring = false) {
    for (uint32_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const pw_desc d = pw_desc_at(descs, i, compact);
        /* A frame reaching past data_bytes reads the ring itself, exactly as unstaged;
         * `acquire_ring` (pw_persistent_small, which skips pw_run_slot's block-wide check):
         * this thread's acquire first drops L1 lines of the slot's previous lap. */
        const bool in_stage = staged && d.offset <= db && d.len <= db - d.offset;
        const uint8_t *fd = in_stage ? data : gdata;
        if (acquire_ring && !in_stage) (void)pw_load_acquire((const volatile uint32_t *)gdata);
        pw_split_frame *f = &pw_split[i - lo];
        f->wire_len = d.wire_len;
        if (!mout && pw_parse_fast_key(fd + d.offset, d.len, d.port, f->kw)) {
            f->parse_ok = 1u;
            continue;
        }
        pw_packet_meta m;
        pw_parse(fd + d.offset, d.len, &m);
        f->parse_ok = m.status == 0u;
        pw_acl_key k;
        pw_acl_key_from_meta(&m, d.port, &k);
        pw_acl_key_words(&k, f->kw);
        if (mout) {
            m.steer_mark = d.mark; /* as the parse stage's (metadata goes back to the host) */
            mout[i] = m;
        }
    }
    __syncthreads();
    if (q.trace && threadIdx.x == 0) pw_ts[3] = pw_globaltimer();
    const uint32_t gl = threadIdx.x & (gsize - 1u);
    /* gsize is a power of two: shifts, not a division on the path (~25 dependent instructions). */
    const uint32_t gshift = (uint32_t)__ffs((int)gsize) - 1u;
    for (uint32_t i = lo + (threadIdx.x >> gshift); i < hi; i += blockDim.x >> gshift) {
        const pw_split_frame *f = &pw_split[i - lo];
        const uint32_t parse_ok = f->parse_ok;
        uint32_t rule = PW_ACL_NO_MATCH;
        uint8_t action = (uint8_t)PW_ACTION_PASS;
        uint32_t mark = 0u, acl_ran = 0u;
        if (pw_acl_runs(q, parse_ok)) {
            pw_stage_acl_kw(a, f->kw, &rule, &action, &mark, gl, gsize);
            acl_ran = 1u;
        }
        if (gl == 0u) pw_emit_verdict(q, a, parse_ok, rule, action, mark, acl_ran, f->wire_len, vo, i, cr);
    }
}
#endif

/* Thread 0's heartbeat and empty-poll counts, written to the queue's ctrl (never read back from
 * it: a read of host memory is a PCIe round trip the CTA would wait for before its next poll). */
__shared__ uint32_t pw_beats;
__shared__ uint64_t pw_polls;

/* The ACL image the persistent block's last burst named (~0: none yet; see pw_run_slot). */
__shared__ uint64_t pw_img_tables;
__shared__ uint32_t pw_img_gen;
/* The stage parameter table (composed template) the persistent block's last burst named: a
 * reload publishes a new set at new addresses, and a retired set's memory returns to the
 * stream-ordered pool, so a later set (its blocks written by DMA) can sit where the SM's L1
 * still holds lines of an older one. A stage that walks its block (inspect's rule image) would
 * then read a mix of both sets: wrong verdicts, or a walk that never ends. */
__shared__ uint64_t pw_img_params;

/* Runs about frames [n * part / parts, n * (part + 1) / parts) of slot `slot` (= seq % slots: the
 * persistent kernel computes it before the burst is there, off its latency path) with the whole
 * block (parts > 1: the burst's CTA group shares it, see pw_persistent), their counts into `cr`;
 * the caller publishes, then adds `cr` to the counters (pw_count_after_done).
 * `hdr_granules`: how many of the header's 3 16-byte granules pw_stage already holds (0: burst
 * kernels; 3: the persistent poller read the header; 1: it polled the first granule, PW_PIPE_SLOT_SEQ,
 * and the other two are staged here with the descriptors and frames, in the same round trip;
 * PW_STAGED_ALL: pw_poll_tagged staged the whole image, PW_PIPE_TAGGED).
 * `persistent`: the block serves the queue for the kernel's life (keeps pw_img_* between
 * bursts, see below). ts[1] (thread 0, when the queue traces) = when the slot was
 * staged. */
#define PW_STAGED_ALL 4u

/* Frames [lo, hi) of a burst of n that CTA `part` of its group of `parts` runs: [n * part /
 * parts, n * (part + 1) / parts), split at even frame numbers (a chunk's compact descriptors then
 * start on a 16-byte granule, pw_run_chunked). A shift for groups of 2, 4 or 8: the 64-bit division
 * it was took ~0.2 us of a 32-frame burst's stages with 4 CTAs (docs/perf-log.md, "Kept: ded7616,
 * `pw_part_range`"). n <= 65535 and parts <= 8, so n * parts fits 32 bits. */
__device__ __forceinline__ void pw_part_range(uint32_t n, uint32_t part, uint32_t parts, uint32_t *lo, uint32_t *hi) {
    if (parts == 1u) {
        *lo = 0u;
        *hi = n;
        return;
    }
    const bool pow2 = (parts & (parts - 1u)) == 0u;
    const uint32_t sh = 31u - (uint32_t)__clz((int)parts);
    *lo = (pow2 ? (n * part) >> sh : n * part / parts) & ~1u;
    *hi = part + 1u == parts ? n : (pow2 ? (n * (part + 1u)) >> sh : n * (part + 1u) / parts) & ~1u;
}
#include "kernels_tx_ring.cu"
#include "kernels_owned.cu"

/* Thread 0 of a persistent block, before a burst's walk: one acquire (dropping the SM's L1
 * lines) when the burst names another ACL image or stage parameter table than the last one (see
 * pw_run_slot). The parameter table too: a composed pipeline without an ACL names no image and
 * generation 0 in every burst, so a reload moves only stage_params. */
__device__ __forceinline__ void pw_note_images(const pw_queue_desc &q, const pw_slot_hdr *hdr) {
    if (hdr->acl_tables == pw_img_tables && hdr->generation == pw_img_gen && hdr->stage_params == pw_img_params)
        return;
    (void)pw_load_acquire((const volatile uint32_t *)q.producer);
    pw_img_tables = hdr->acl_tables;
    pw_img_gen = hdr->generation;
    pw_img_params = hdr->stage_params;
}

template <bool SMALL = false>
__device__ __forceinline__ void pw_run_slot(const pw_queue_desc &q, uint32_t seq, uint32_t slot, pw_count_regs *cr,
                                            uint32_t hdr_granules, uint64_t *ts, bool persistent, uint32_t part,
                                            uint32_t parts) {
    const uint8_t *base = (const uint8_t *)(q.ring + (uint64_t)slot * q.slot_bytes);
    if (hdr_granules == 0u) {
        if (threadIdx.x == 0) pw_stage_hdr(base);
        __syncthreads();
    } /* else the poller's barrier is behind the staged header */
    const uint32_t hs = hdr_granules == 1u ? 1u : 3u; /* first header granule staged below */
    const pw_slot_hdr *hdr = (const pw_slot_hdr *)pw_stage;
    uint32_t n = hdr->n_frames;
    if (n > q.burst_max) n = 0; /* the host never publishes this; pw_persistent flags it */
    uint32_t db = hdr->data_bytes;
    /* Whether frame bytes are staged (else only descriptors): any composed stage may read them,
     * but a rewriting one runs on the ring itself (what it leaves there is what is sent). */
#if PW_PIPELINE_COMPOSED
    const bool parse = !PW_PIPELINE_WRITES;
#else
    const bool parse = (q.pipeline & PW_PIPE_PARSE) != 0u;
#endif
    const bool compact = hdr->desc_format == PW_DESC_COMPACT;
    /* Descriptors in whole 16-byte granules (compact ones may end mid-granule). */
    const uint32_t nd16 = (n * (compact ? (uint32_t)sizeof(pw_desc8) : (uint32_t)sizeof(pw_desc)) + 15u) / 16u;
    const uint32_t head = (uint32_t)sizeof(pw_slot_hdr) + nd16 * 16u;
    const uint32_t room = q.slot_bytes > q.data_offset ? q.slot_bytes - q.data_offset : 0u;
    const uint32_t dbr = db <= room ? ((db + 15u) & ~15u) : 0xFFFFFFFFu;
    const bool all_staged = SMALL || hdr_granules == PW_STAGED_ALL; /* checked to fit by pw_poll_tagged */
    /* Without parse no stage reads frame bytes: only the descriptors are staged. */
    const bool staged = all_staged || (head <= PW_STAGE_BYTES && (!parse || (dbr <= room && dbr <= PW_STAGE_BYTES - head)));
    const uint8_t *descs = base + sizeof(pw_slot_hdr);
    const uint8_t *gdata = base + q.data_offset;
    const uint8_t *data = gdata;
    if (!SMALL && all_staged && threadIdx.x == 0) pw_ring_reads = 0u; /* SMALL never reads it */
    if (!all_staged && (staged || hs < 3u)) {
        /* The header's missing granules, then descriptors, then data (when staged), 16 B per
         * load, PW_STAGE_UNROLL independent loads per thread. Granule i of the slot goes to
         * granule i of pw_stage up to the descriptors' end; data follows them. */
        const uint32_t nh = 3u - hs;
        const uint32_t nd = staged ? nd16 : 0u;
        const uint32_t total = nh + nd + (staged && parse ? dbr / 16u : 0u);
        const uint4 *sh = (const uint4 *)base + hs;
        const uint4 *sb = (const uint4 *)gdata;
        uint4 *dd = (uint4 *)pw_stage + hs;
        if (threadIdx.x == 0) pw_ring_reads = 0u;
        /* One pass over both sources (not two copies): every load in flight at once, one round trip. */
        pw_load_granules(total, [&](uint32_t i) { return i < nh + nd ? sh + i : sb + (i - nh - nd); },
                         [&](uint32_t i, uint32_t, const uint4 &v) { dd[i] = v; });
        __syncthreads();
    }
    /* The image a burst names is fixed while its address is live, but a freed image's address
     * can come back with a new one: when the header names another image than the last burst,
     * one acquire drops the SM's L1 lines (stale ones included) before the walk. */
    if (persistent && SMALL) {
        /* Latency: no barrier unless the image changed. Every thread reads the same words
         * (thread 0 wrote them before the barriers that ended the last burst), so all of them
         * take the branch or none. */
        if (hdr->acl_tables != pw_img_tables || hdr->generation != pw_img_gen) {
            __syncthreads();
            if (threadIdx.x == 0) {
                (void)pw_load_acquire((const volatile uint32_t *)q.producer);
                pw_img_tables = hdr->acl_tables;
                pw_img_gen = hdr->generation;
            }
            __syncthreads();
        }
    } else if (persistent) {
        if (threadIdx.x == 0) pw_note_images(q, hdr);
        __syncthreads();
    }
    const pw_acl_sel a = pw_acl_of_slot(q, hdr);
    const bool refs = !SMALL && parse && (hdr->flags & PW_SLOT_REFS) != 0u; /* by reference: no frame in the slot */
    if (staged) {
        descs = pw_stage + sizeof(pw_slot_hdr);
        data = pw_stage + head;
        if (parse && !SMALL && !refs) { /* SMALL: pw_run_split's parse pass acquires for such a frame */
            for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
                const pw_desc d = pw_desc_at(descs, i, compact);
                if (!(d.offset <= db && d.len <= db - d.offset)) pw_ring_reads = 1u;
            }
            __syncthreads();
        }
    }
    if (refs) pw_refs_frames(staged, descs, compact, head, 0u, n, &gdata, &data, &db); /* where they are, staged */
    if (!SMALL && (!staged || pw_ring_reads || (refs && db == 0u) || (PW_PIPELINE_COMPOSED && !parse))) {
        /* Something is read from the ring itself with plain loads: drop the SM's L1 lines
         * (the persistent poll does not acquire; they may hold the slot's previous lap). By
         * reference and too wide to stage, the frames are read where they are with plain loads:
         * a DPDK pinned RX pool reuses its buffers, so L1 may hold a buffer's previous frame. */
        if (threadIdx.x == 0) (void)pw_load_acquire((const volatile uint32_t *)base);
        __syncthreads();
    }
    if (q.trace && threadIdx.x == 0) {
        ts[1] = pw_globaltimer();
        ts[3] = 0ull; /* set by pw_run_split's parse pass, if this burst takes it */
    }
    pw_vout vo;
    vo.tag = (q.pipeline & PW_PIPE_TAGGED) ? seq + 1u : 0u;
    vo.seq = seq;
    vo.base = vo.tag ? (void *)((pw_verdict_tagged *)q.verdicts + (uint64_t)slot * q.burst_max)
                     : (void *)((pw_verdict_out *)q.verdicts + (uint64_t)slot * q.burst_max);
    pw_packet_meta *mout = (q.pipeline & PW_PIPE_META_OUT) ? (pw_packet_meta *)q.metas + (uint64_t)slot * q.burst_max : 0;
    PW_RUN_OWNED(parts, q, a, descs, compact, data, gdata, staged && parse, db, n, vo, mout, cr, slot, part, parts);
    /* This block's share of the frames (the burst's CTA group: part `part` of `parts`). */
    uint32_t lo, hi;
    pw_part_range(n, part, parts, &lo, &hi);
    const uint32_t gsize = pw_group_size(q, hi - lo);
    const uint32_t gl = threadIdx.x & (gsize - 1u);
#if PW_PIPELINE_FUSED
    /* SMALL (pw_persistent_small): the host guarantees parse + acl and room for groups of 2+ lanes
     * per frame, so every burst takes pw_run_split, the only path compiled in. */
    if (SMALL) {
        pw_run_split(q, a, descs, compact, data, gdata, staged, db, lo, hi, vo, mout, cr, gsize, true);
        return;
    }
#endif
#if PW_PIPELINE_COMPOSED
    if (q.tx) {
        if (staged && parse)
            pw_run_tx(q, a, descs, compact, data, gdata, db, lo, hi, vo, mout, cr, slot, part, parts);
        else if (dbr <= room)
            pw_run_tx_chunked(q, a, base, lo, hi, db, compact, vo, mout, cr, slot, part, parts);
        else
            pw_run_tx(q, a, descs, compact, gdata, gdata, db, lo, hi, vo, mout, cr, slot, part, parts);
        return;
    }
#endif
    if (!staged && parse && !refs && gsize == 1u && dbr <= room) {
        pw_run_chunked(q, a, base, lo, hi, db, compact, vo, mout, cr);
#if PW_PIPELINE_FUSED
    } else if (gsize > 1u && hi - lo <= PW_SPLIT_MAX) {
        pw_run_split(q, a, descs, compact, data, gdata, staged, db, lo, hi, vo, mout, cr, gsize);
#endif
    } else {
        /* Rounds of blockDim / gsize frames the whole block enters (composed: gsize 1 and the
         * round hooks run block-wide). */
        for (uint32_t r = lo; r < hi; r += blockDim.x / gsize) {
            const uint32_t i = r + threadIdx.x / gsize;
            PW_PIPELINE_ROUND_BEGIN();
            if (i < hi) {
                pw_desc d = pw_desc_at(descs, i, compact);
                /* A frame reaching past data_bytes reads the ring itself, exactly as unstaged. */
                const uint8_t *fd = (staged && parse && d.offset <= db && d.len <= db - d.offset) ? data : gdata;
                pw_run_frame(q, a, fd, d, vo, i, mout ? mout + i : 0, cr, gl, gsize);
            }
            PW_PIPELINE_ROUND_END();
        }
    }
}

/* Publishes the end of burst `seq` in slot `slot` (= seq % slots, the caller's: a division is
 * ~20 instructions) (this block's part `part` of `parts`): its verdicts visible,
 * then done[slot * parts + part] = seq + 1 (the host waits for every part's). PW_PIPE_TAGGED: the
 * tagged verdicts say it already; done is written only for a burst of no frames (`n`) or with
 * metadata out, and the trace record's seq only later (pw_trace_seq). Called by the
 * whole block after a block barrier; thread 0 writes done with a release store (cumulative over
 * the barrier: every thread's verdict writes before it): the handshake needs only those writes
 * ordered, not the full two-way fence of __threadfence_system() (measured: ~0.5 us less inside
 * the kernel per burst, though the done word then takes longer to reach the host). The queue
 * counters are added afterwards (pw_count_after_done), off the latency path. ts: thread 0's
 * timestamps of this burst (seen, staged, ran), written to the trace record when the queue has
 * one. */
__device__ __forceinline__ void pw_publish(const pw_queue_desc &q, uint32_t seq, uint32_t slot, uint64_t *ts,
                                           uint32_t part, uint32_t parts, uint32_t n) {
    if (threadIdx.x != 0) return;
    volatile pw_queue_ctrl *ctrl = (volatile pw_queue_ctrl *)q.ctrl;
    const bool tagged = (q.pipeline & PW_PIPE_TAGGED) != 0u;
    if (q.trace && part == 0u) {
        /* Ordered before done by its release store. */
        volatile pw_burst_trace *tr = (volatile pw_burst_trace *)q.trace + slot;
        tr->seen = ts[0];
        tr->staged = ts[1];
        tr->ran = ts[2];
        tr->parsed = ts[3];
        tr->fenced = pw_globaltimer();
        if (!tagged) tr->seq = (uint64_t)seq + 1u;
    }
    if (!tagged || n == 0u || (q.pipeline & PW_PIPE_META_OUT))
        pw_store_release(q.done + 4ull * (slot * parts + part), seq + 1u);
    ctrl->consumer = seq + 1u;
    ctrl->heartbeat = ++pw_beats;
}

/* PW_PIPE_TAGGED with a trace: thread 0 of part 0 writes the record's seq with a release store,
 * so the host never takes a record whose other fields (thread 0's stores) are still on their way
 * (no done word's release orders them). After the burst's verdicts, off its latency path. Not a
 * fence: __threadfence_system() is a sequentially consistent fence, which also drops the SM's L1
 * (MEMBAR.SC.SYS + CCTL.IVALL in the SASS), so every traced burst started its ACL walk with a
 * cold L1 and traced tagged bursts measured ~1.2 us slower in the stages than untraced ones. */
__device__ __forceinline__ void pw_trace_seq(const pw_queue_desc &q, uint32_t seq, uint32_t slot, uint32_t part) {
    if (threadIdx.x != 0 || !q.trace || part != 0u || !(q.pipeline & PW_PIPE_TAGGED)) return;
    const unsigned long long v = (unsigned long long)seq + 1ull;
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(&((pw_burst_trace *)q.trace + slot)->seq),
                 "l"(v)
                 : "memory");
}

/* Thread 0: adds `n` bursts whose counts this block reduced (each before a
 * block barrier thread 0 passed) to `bursts`, behind a fence that makes those counts visible
 * first (cumulative over the barriers). */
__device__ __forceinline__ void pw_mark_bursts(const pw_queue_desc &q, uint32_t block, uint32_t n) {
    if (n == 0u || !(q.pipeline & PW_PIPE_COUNT)) return;
    __threadfence();
    pw_red_add_global(&((pw_queue_counters *)q.counters + block)->bursts, (unsigned long long)n);
}

/* After done: the block's counts of the burst in slot `slot` (`cr`, per thread) into this CTA's counter block
 * (`block` of the queue's, device memory): per warp and field one sum, added by the warp's lane 0
 * with a global atomic whose result is unused (a fire-and-forget reduction: no round trip to
 * wait for), then a block barrier. `bursts` counts only bursts whose every count is visible:
 * once every burst the host handed over is done, it waits for `bursts` to reach them before it
 * trusts a snapshot (GpuExecutor::counters). Adding a burst there needs a fence after those
 * reductions, a round trip that also waits for the block's writes to host memory (~3 us
 * measured): `mark` does it here (burst kernels, which end anyway); the persistent kernel leaves
 * it to pw_mark_bursts when the queue goes idle, since a fence here delays the next burst of a
 * back-to-back stream. (Measured: counts merged before done through shared-memory atomics and a
 * read-modify-write of every word cost ~1.9 us of a 32-frame burst.) Whole block; off the
 * latency path (done is out). */
__device__ __forceinline__ void pw_count_after_done(const pw_queue_desc &q, uint32_t slot, uint32_t block,
                                                    bool trace, bool mark, const pw_count_regs *cr) {
    if (!(q.pipeline & PW_PIPE_COUNT)) return;
    pw_queue_counters *c = (pw_queue_counters *)q.counters + block;
    pw_count_flush<true>(c, cr);
    __syncthreads();
    if (threadIdx.x == 0) {
        if (mark) pw_mark_bursts(q, block, 1u);
        if (q.trace && trace) {
            /* Ordered by this CTA's next release store; the host reads the record only after it. */
            volatile pw_burst_trace *tr = (volatile pw_burst_trace *)q.trace + slot;
            tr->merged = pw_globaltimer();
        }
    }
}

/* Idle time after which the persistent kernel marks its counted bursts (pw_mark_bursts), and
 * the most bursts it leaves unmarked under a steady stream. */
#define PW_MARK_IDLE_NS 20000ull
#define PW_MARK_MAX 4096u
/* PW_PIPE_TAGGED: idle time after which the block stops reading the whole slot each poll round
 * and reads its first granule only (one more round trip for the next burst, but an idle queue
 * no longer reads ~5 KB across PCIe per microsecond). */
#define PW_HOT_POLL_NS 100000ull

/* Frames of the burst staged in pw_stage (clipped as pw_run_slot clips them). */
__device__ __forceinline__ uint32_t pw_staged_frames(const pw_queue_desc &q) {
    const uint32_t n = ((const pw_slot_hdr *)pw_stage)->n_frames;
    return n > q.burst_max ? 0u : n;
}

/* Thread 0's count of bursts whose counts this block added but `bursts` does not hold yet
 * (shared memory, like the timestamps: registers are scarce here). */
__shared__ uint32_t pw_unmarked;
__shared__ uint32_t pw_cmd; /* 0 run a burst, 1 exit */
__shared__ uint32_t pw_first_seq; /* pw_queue_ctrl.first_seq, read once at start */
__shared__ uint32_t pw_stall_at;  /* pw_queue_ctrl.stall_at, read once at start */

/* Thread 0, before a poll's loads: the exit flag's value when this poll is one that checks it
 * (every 256th; each check is a read of host memory across PCIe, which competes with the
 * ingest DMA when many CTAs poll), else 0. Loaded beside the poll's own loads, so it costs no
 * round trip of its own (a burst arriving meanwhile would wait for it). */
__device__ __forceinline__ uint32_t pw_exit_flag_load(const pw_queue_desc &q, uint32_t spins) {
    return ((spins + 1u) & 0xFFu) == 0u ? ((volatile pw_queue_ctrl *)q.ctrl)->exit_flag : 0u;
}

/* Thread 0, once per poll while no burst is there (`spins` polls so far, idle since
 * `idle_since`, `exit_flag` from pw_exit_flag_load before the poll): marks counted bursts when
 * idle, acts on the exit flag and the bounded wait, counts polls. 1: stop (status set), 0: go
 * on. */
__device__ __forceinline__ uint32_t pw_idle_step(const pw_queue_desc &q, uint32_t lane, uint32_t part,
                                                 uint32_t parts, uint32_t *spins, uint64_t idle_since,
                                                 uint32_t exit_flag) {
    volatile pw_queue_ctrl *ctrl = (volatile pw_queue_ctrl *)q.ctrl;
    const uint32_t unmarked = pw_unmarked;
    if (unmarked && ((*spins & 0xFu) == 0u || unmarked >= PW_MARK_MAX) &&
        (unmarked >= PW_MARK_MAX || pw_globaltimer() - idle_since > PW_MARK_IDLE_NS)) {
        pw_mark_bursts(q, lane * parts + part, unmarked);
        pw_unmarked = 0u;
    }
    if ((++*spins & 0xFFu) == 0u && exit_flag) {
        ctrl->status = PW_QSTATE_EXIT_FLAG;
        return 1u;
    }
    if ((*spins & 0x3FFu) == 0u) {
        if (lane == 0 && part == 0) {
            pw_polls += 0x400u;
            ctrl->polls = pw_polls;
            if ((*spins & 0xFFFFu) == 0u) ctrl->heartbeat = ++pw_beats;
        }
        if (pw_globaltimer() - idle_since > q.idle_timeout_ns) {
            ctrl->status = PW_QSTATE_EXIT_TIMEOUT;
            return 1u;
        }
    }
    return 0u;
}

#include "kernels_rx_tagged.cu"

/* Receiving: waits for burst `seq` in ring slot `slot` (= seq % slots) of queue `q` and stages its
 * header (tagged queues and the small-burst kernel: the whole slot) into pw_stage, for the whole
 * block; returns false when the queue is told to stop, idles out or names a bad slot. This is the
 * transport's only receive step: the stages never see it, and a different source of bursts (a
 * DOCA GPUNetIO receive queue, `doca_gpu_dev_eth_rxq_recv`) would replace this function alone. */
template <bool SMALL>
__device__ __forceinline__ bool pw_rx_burst(const pw_queue_desc &q, uint32_t seq, uint32_t slot, uint32_t lane,
                                            uint32_t part, uint32_t parts, uint64_t *ts, bool slot_seq) {
    if (SMALL || (q.pipeline & PW_PIPE_TAGGED)) {
        pw_poll_tagged(q, seq, slot, lane, part, parts, ts);
    } else if (threadIdx.x == 0) {
        volatile pw_queue_ctrl *ctrl = (volatile pw_queue_ctrl *)q.ctrl;
        const volatile uint32_t *prod = (const volatile uint32_t *)q.producer;
        const uint64_t idle_since = pw_globaltimer();
        uint32_t spins = 0;
        const uint8_t *sb = (const uint8_t *)(q.ring + (uint64_t)slot * q.slot_bytes);
        for (;;) {
            /* No acquire here: the slot is read with strong loads (pw_ld_slot16), so the SM's
             * L1 keeps the ACL image between bursts (pw_run_slot acquires when it changes). */
            bool ready;
            const uint32_t exit_flag = pw_exit_flag_load(q, spins);
            if (slot_seq) {
                const uint4 h0 = pw_ld_slot16(sb);
                ready = h0.z == seq; /* pw_slot_hdr.seq */
                if (ready) ((uint4 *)pw_stage)[0] = h0;
            } else {
                ready = (int32_t)(*prod - seq) > 0;
                if (ready) pw_stage_hdr(sb);
            }
            if (ready) {
                if (q.trace) ts[0] = pw_globaltimer();
                const pw_slot_hdr *h = (const pw_slot_hdr *)pw_stage;
                if (h->n_frames > q.burst_max) {
                    ctrl->status = PW_QSTATE_BAD_SLOT;
                    pw_cmd = 1u;
                } else {
                    pw_cmd = 0u;
                }
                break;
            }
            if (pw_idle_step(q, lane, part, parts, &spins, idle_since, exit_flag)) {
                pw_cmd = 1u;
                break;
            }
        }
    }
    /* Thread 0's poll above needs this barrier; pw_poll_tagged ends with one (the small-burst
     * kernel skips this second one). */
    if (!SMALL) __syncthreads();
    return pw_cmd == 0u;
}

/* Mode `persistent`: each queue is served by `ctas` groups of `parts` CTAs; group `lane` takes
 * bursts lane, lane + ctas, ... and CTA `part` of the group runs frames [n * part / parts,
 * n * (part + 1) / parts), rounded down to even frame numbers (every CTA of the group
 * polls the slot itself). Until the host
 * sets exit_flag, or until idle_timeout_ns pass without a burst (the last resort against a host
 * that died). Several groups per queue overlap bursts (throughput); several CTAs per burst put
 * a small burst's frames on several SMs, a warp per frame: a lookup is a chain of dependent
 * steps, and lookups that share a warp or an SM's schedulers wait for each other (latency). */
/* Up to 512 threads, and two CTAs of 256 per SM at least (<= 128 registers a thread):
 * configurations with many queues x CTAs per queue need more persistent CTAs than the chip has
 * SMs. */
template <bool SMALL>
__device__ __forceinline__ void pw_persistent_body(const pw_queue_desc *queues, uint32_t ctas, uint32_t parts) {
    const uint32_t lane = (blockIdx.x % (ctas * parts)) / parts, part = blockIdx.x % parts;
    const pw_queue_desc q = queues[blockIdx.x / (ctas * parts)];
    uint64_t *ts = pw_ts;
    /* This CTA's counter block: lane * parts + part. */
    if (threadIdx.x == 0) {
        volatile pw_queue_ctrl *ctrl = (volatile pw_queue_ctrl *)q.ctrl;
        pw_first_seq = ctrl->first_seq; /* 0 at start; a restarted kernel resumes after the lost burst */
        pw_stall_at = ctrl->stall_at;
        pw_unmarked = 0u;
        pw_img_tables = ~0ull; /* no image named yet (pw_run_slot) */
        pw_img_gen = 0u;
        pw_img_params = ~0ull;
        pw_tag_last = 1u; /* the first poll reads granule 0 */
        pw_poll_rtt = 2000u; /* ns, until rounds measure it */
        pw_beats = 0u;
        pw_polls = 0ull;
        ctrl->status = PW_QSTATE_RUNNING;
    }
    __syncthreads();
    uint32_t seq = pw_first_seq + lane;
    for (;;) {
        const bool slot_seq = (q.pipeline & PW_PIPE_SLOT_SEQ) != 0u;
        const uint32_t slot = seq % q.slots; /* before the burst: a division is ~20 dependent instructions */
        if (!pw_rx_burst<SMALL>(q, seq, slot, lane, part, parts, ts, slot_seq)) break;
        if (pw_stall_at != 0u && seq + 1u == pw_stall_at) {
            /* The watchdog's test: hold the burst, beat no more, until the host gives up on it
             * (on_stall: restart sets exit_flag, then relaunches the queue after it). One compare
             * per burst otherwise (every thread reads the same shared word). */
            if (threadIdx.x == 0) {
                volatile pw_queue_ctrl *ctrl = (volatile pw_queue_ctrl *)q.ctrl;
                while (ctrl->exit_flag == 0u) __nanosleep(1000);
                ctrl->status = PW_QSTATE_EXIT_FLAG;
            }
            __syncthreads();
            break;
        }
        pw_count_regs cr;
        pw_count_regs_zero(&cr);
        pw_run_slot<SMALL>(q, seq, slot, &cr, (SMALL || (q.pipeline & PW_PIPE_TAGGED)) ? PW_STAGED_ALL : slot_seq ? 1u : 3u,
                           ts, true, part, parts);
        __syncthreads();
        if (q.trace && threadIdx.x == 0) ts[2] = pw_globaltimer();
        pw_publish(q, seq, slot, ts, part, parts, pw_staged_frames(q));
        pw_count_after_done(q, slot, lane * parts + part, part == 0u, false, &cr);
        pw_trace_seq(q, seq, slot, part);
        if (threadIdx.x == 0) pw_unmarked++;
        seq += ctas;
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        pw_mark_bursts(q, lane * parts + part, pw_unmarked);
        __threadfence_system();
        /* After every write of this CTA: the host relaunches a queue only once all have left. */
        atomicAdd((unsigned int *)&((pw_queue_ctrl *)q.ctrl)->exited, 1u);
    }
}

/* Threads a block of pw_persistent: the composed template runs a thread per frame, and 256 leaves
 * its generated stages 255 registers (at 512 the persistent kernel spilled). The host limits its
 * block to this (COMPOSED_MAX_THREADS in the executor). */
#if PW_PIPELINE_COMPOSED
#define PW_PERSISTENT_MAX_THREADS 256
#else
#define PW_PERSISTENT_MAX_THREADS 512
#endif
extern "C" __global__ void __launch_bounds__(PW_PERSISTENT_MAX_THREADS, 1) pw_persistent(const pw_queue_desc *queues, uint32_t ctas,
                                                                   uint32_t parts) {
    pw_persistent_body<false>(queues, ctas, parts);
}

#if PW_PIPELINE_FUSED
/* pw_persistent for small bursts of tagged queues (the latency case), chosen by the host when
 * every queue is tagged, the pipeline is parse + acl, bursts have at most PW_SPLIT_MAX frames and
 * the block has at least two threads per frame: only the tagged poll and pw_run_split are
 * compiled in. The general kernel's other paths (untagged polls, staging copies, large-burst
 * paths) sit beside this one in its code, and a burst's path through a kernel measured sensitive to
 * the code around it (instruction cache; docs/perf-log.md, "where the small burst's ACL time goes;
 * L1 carveout", 2026-11-29/30). */
extern "C" __global__ void __launch_bounds__(512, 1) pw_persistent_small(const pw_queue_desc *queues,
                                                                         uint32_t ctas, uint32_t parts) {
    pw_persistent_body<true>(queues, ctas, parts);
}
#endif

/* Modes `launch` and `graph`: one block runs burst `seq` of queue `queue` and publishes it. One
 * block per launch, so the whole register file is there to use (with ptxas's default target of
 * two blocks per SM these kernels spilled registers). */
extern "C" __global__ void __launch_bounds__(256, 1) pw_burst(const pw_queue_desc *queues, uint32_t queue, uint32_t seq) {
    const pw_queue_desc q = queues[queue];
    uint64_t *ts = pw_ts;
    if (q.trace && threadIdx.x == 0) ts[0] = pw_globaltimer();
    if (threadIdx.x == 0) pw_beats = seq; /* the heartbeat a burst kernel writes: seq + 1 */
    pw_count_regs cr;
    pw_count_regs_zero(&cr);
    const uint32_t slot = seq % q.slots;
    pw_run_slot(q, seq, slot, &cr, 0u, ts, false, 0u, 1u);
    __syncthreads();
    if (q.trace && threadIdx.x == 0) ts[2] = pw_globaltimer();
    pw_publish(q, seq, slot, ts, 0u, 1u, pw_staged_frames(q));
    pw_count_after_done(q, slot, 0u, true, true, &cr);
}

/* Graph mode: the graph's kernel nodes read the burst number from the slot header, so one graph
 * instance serves every lap of its window of slots. */
extern "C" __global__ void __launch_bounds__(256, 1) pw_burst_slot(const pw_queue_desc *queues, uint32_t queue, uint32_t slot) {
    const pw_queue_desc q = queues[queue];
    const pw_slot_hdr *hdr = (const pw_slot_hdr *)(q.ring + (uint64_t)slot * q.slot_bytes);
    __shared__ uint32_t seq;
    uint64_t *ts = pw_ts;
    if (q.trace && threadIdx.x == 0) ts[0] = pw_globaltimer();
    if (threadIdx.x == 0) {
        seq = hdr->seq;
        pw_beats = seq; /* the heartbeat a burst kernel writes: seq + 1 */
    }
    __syncthreads();
    pw_count_regs cr;
    pw_count_regs_zero(&cr);
    pw_run_slot(q, seq, slot, &cr, 0u, ts, false, 0u, 1u);
    __syncthreads();
    if (q.trace && threadIdx.x == 0) ts[2] = pw_globaltimer();
    pw_publish(q, seq, slot, ts, 0u, 1u, pw_staged_frames(q));
    pw_count_after_done(q, slot, 0u, true, true, &cr);
}

/* Stage throughput: thread per frame over `n` device-resident frames (descriptor offsets relative
 * to `data`), verdicts to device memory, counters aggregated per block. `q` supplies the pipeline,
 * tables and counters (ring fields unused). */
#if defined(PW_PIPELINE_ORDERED) && PW_PIPELINE_ORDERED
/* A stage with per-queue state (rate_limit's buckets) made ptxas spill at its default register
 * budget: one block a multiprocessor is the floor it may plan for, as for pw_burst. */
#define PW_BULK_BOUNDS __launch_bounds__(256, 1)
#else
#define PW_BULK_BOUNDS __launch_bounds__(256)
#endif
extern "C" __global__ void PW_BULK_BOUNDS pw_bulk(const pw_queue_desc *qd, const uint8_t *data, const pw_desc *descs,
                                                         uint32_t n, pw_verdict_out *verdicts) {
    const pw_queue_desc q = *qd;
    const pw_acl_sel a = pw_acl_of_queue(q);
    const pw_vout vo = {verdicts, 0u, 0u}; /* untagged; every frame of burst 0 */
    __shared__ pw_queue_counters acc;
    pw_zero_counters(&acc);
    __syncthreads();
    pw_count_regs cr;
    pw_count_regs_zero(&cr);
    for (uint32_t r = blockIdx.x * blockDim.x; r < n; r += gridDim.x * blockDim.x) {
        const uint32_t i = r + threadIdx.x;
        PW_PIPELINE_ROUND_BEGIN();
        if (i < n) pw_run_frame(q, a, data, descs[i], vo, i, 0, &cr, 0u, 1u);
        PW_PIPELINE_ROUND_END();
    }
    if (q.pipeline & PW_PIPE_COUNT) pw_count_flush<false>(&acc, &cr);
    __syncthreads();
    if (threadIdx.x == 0 && (q.pipeline & PW_PIPE_COUNT)) pw_count_merge((pw_queue_counters *)q.counters, &acc);
}
