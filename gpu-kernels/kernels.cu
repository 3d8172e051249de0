/* pktwarp GPU drivers: the persistent queue kernel, the one-burst kernel (modes `launch` and
 * `graph`) and the bulk kernel that runs the stages over device-resident frames (stage
 * throughput). All three run the same per-frame pipeline: parse -> acl -> verdict -> count.
 *
 * Built by build.rs (nvcc, sm_90) or at start by NVRTC; build.rs / the loader define
 * PW_HAVE_PARSE and PW_HAVE_ACL when the stage headers exist, and the host refuses a pipeline
 * that needs a stage the module lacks (see pw_caps). */
#include "pktwarp_abi.h"
#if defined(PW_HAVE_PARSE)
#include "parse.cuh"
#endif
#if defined(PW_HAVE_ACL)
#include "acl.cuh"
#endif
#include "count.cuh"

#define PW_CAP_PARSE 1u
#define PW_CAP_ACL 2u

/* Which stages this module was built with (read by the host through cuModuleGetGlobal). */
extern "C" __device__ const uint32_t pw_caps = 0u
#if defined(PW_HAVE_PARSE)
                                                | PW_CAP_PARSE
#endif
#if defined(PW_HAVE_ACL)
                                                | PW_CAP_ACL
#endif
    ;

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

/* dst += src for a CTA's counter block (device memory; the host snapshots it with a copy on a
 * side stream). Plain read-modify-write: each block has one writer at a time (its persistent CTA,
 * or the queue's burst kernels, which run in order on the queue's stream). Kept out of mapped
 * host memory on purpose: a read-modify-write there costs a PCIe round trip per field on every
 * burst's critical path. */
__device__ __forceinline__ void pw_counters_add(pw_queue_counters *dst, const pw_queue_counters *src) {
    volatile uint64_t *d = (volatile uint64_t *)dst;
    const uint64_t *s = (const uint64_t *)src;
    for (uint32_t i = 0; i < sizeof(pw_queue_counters) / 8u; i++) {
        if (s[i]) d[i] = d[i] + s[i];
    }
}

/* The ACL table one burst is classified with: the slot header's (table hot swap) or, when the
 * header names none, the queue descriptor's (bulk kernel). */
typedef struct pw_acl_sel {
    uint64_t tables;
    uint64_t rule_hits;
    uint32_t n_rules;
    uint8_t default_action;
} pw_acl_sel;

__device__ __forceinline__ pw_acl_sel pw_acl_of_queue(const pw_queue_desc &q) {
    pw_acl_sel a;
    a.tables = q.acl_tables;
    a.rule_hits = q.rule_hits;
    a.n_rules = q.n_rules;
    a.default_action = q.default_action;
    return a;
}

__device__ __forceinline__ pw_acl_sel pw_acl_of_slot(const pw_queue_desc &q, const pw_slot_hdr *h) {
    if (h->acl_tables == 0ull) return pw_acl_of_queue(q);
    pw_acl_sel a;
    a.tables = h->acl_tables;
    a.rule_hits = h->rule_hits;
    a.n_rules = h->n_rules;
    a.default_action = h->default_action;
    return a;
}

#if defined(PW_HAVE_ACL)
/* Stage `acl` on a parsed frame: the matched rule and its action / mark, or the table's default
 * action when nothing matches. Same as pipeline::stage::acl. */
__device__ __forceinline__ void pw_stage_acl(const pw_acl_sel &a, const pw_packet_meta *m, uint16_t port,
                                             uint32_t *rule, uint8_t *action, uint32_t *mark) {
    pw_acl_key k;
    pw_acl_key_from_meta(m, port, &k);
    const pw_acl_tables *t = (const pw_acl_tables *)a.tables;
    *rule = pw_acl_classify(t, &k);
    if (*rule != PW_ACL_NO_MATCH) {
        uint32_t mk;
        uint32_t w = pw_acl_action(t, *rule, &mk);
        uint32_t code = w & 0xFFu;
        *action = (uint8_t)(code < PW_ACTIONS ? code : PW_ACTION_PASS); /* flow_rules Verdict::from_code */
        *mark = ((w >> 8) & 1u) ? mk : 0u;
    } else {
        *action = a.default_action;
        *mark = 0u;
    }
}
#endif

/* One frame through the pipeline. Writes the verdict (and the metadata when asked) and counts. */
__device__ __forceinline__ void pw_run_frame(const pw_queue_desc &q, const pw_acl_sel &a, const uint8_t *data,
                                             const pw_desc &d, pw_verdict *vout, pw_packet_meta *mout,
                                             pw_queue_counters *acc) {
    uint32_t parse_ok = 1u;
#if defined(PW_HAVE_PARSE)
    pw_packet_meta m;
    if (q.pipeline & PW_PIPE_PARSE) {
        pw_parse(data + d.offset, d.len, &m);
        parse_ok = m.status == 0u;
    }
#endif
    uint32_t rule = PW_ACL_NO_MATCH;
    uint8_t action = (uint8_t)PW_ACTION_PASS;
    uint32_t mark = 0u;
    uint32_t acl_ran = 0u;
#if defined(PW_HAVE_PARSE) && defined(PW_HAVE_ACL)
    if ((q.pipeline & PW_PIPE_ACL) && !(!parse_ok && (q.pipeline & PW_PIPE_DROP_MALFORMED))) {
        pw_stage_acl(a, &m, d.port, &rule, &action, &mark);
        acl_ran = 1u;
    }
#endif
    pw_verdict v = pw_verdict_of(parse_ok, q.pipeline, rule, action, mark);
    *vout = v;
#if defined(PW_HAVE_PARSE)
    if (mout && (q.pipeline & PW_PIPE_PARSE)) *mout = m;
#endif
    if (q.pipeline & PW_PIPE_COUNT)
        pw_count_frame(acc, (uint64_t *)a.rule_hits, a.n_rules, parse_ok, acl_ran, &v, d.wire_len);
}

__device__ __forceinline__ void pw_zero_counters(pw_queue_counters *c) {
    uint64_t *w = (uint64_t *)c;
    for (uint32_t i = threadIdx.x; i < sizeof(pw_queue_counters) / 8u; i += blockDim.x) w[i] = 0;
}

/* Runs the frames of slot `seq % slots` with the whole block; the caller publishes. */
__device__ __forceinline__ void pw_run_slot(const pw_queue_desc &q, uint32_t seq, pw_queue_counters *acc) {
    const uint32_t slot = seq % q.slots;
    const uint8_t *base = (const uint8_t *)(q.ring + (uint64_t)slot * q.slot_bytes);
    const pw_slot_hdr *hdr = (const pw_slot_hdr *)base;
    const pw_desc *descs = (const pw_desc *)(base + sizeof(pw_slot_hdr));
    const uint8_t *data = base + q.data_offset;
    uint32_t n = hdr->n_frames;
    if (n > q.burst_max) n = 0; /* the host never publishes this; pw_persistent flags it */
    const pw_acl_sel a = pw_acl_of_slot(q, hdr);
    pw_verdict *vout = (pw_verdict *)q.verdicts + (uint64_t)slot * q.burst_max;
    pw_packet_meta *mout = (q.pipeline & PW_PIPE_META_OUT) ? (pw_packet_meta *)q.metas + (uint64_t)slot * q.burst_max : 0;
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
        pw_desc d = descs[i];
        pw_run_frame(q, a, data, d, vout + i, mout ? mout + i : 0, acc);
    }
    if (threadIdx.x == 0 && (q.pipeline & PW_PIPE_COUNT)) {
        acc->bursts += 1;
    }
}

/* Publishes the end of burst `seq`: counters merged into this CTA's block, verdicts visible,
 * then done[slot] = seq + 1. Called by thread 0 after a block barrier. */
__device__ __forceinline__ void pw_publish(const pw_queue_desc &q, uint32_t seq, uint32_t lane, pw_queue_counters *acc) {
    volatile pw_queue_ctrl *ctrl = (volatile pw_queue_ctrl *)q.ctrl;
    if (q.pipeline & PW_PIPE_COUNT) pw_counters_add((pw_queue_counters *)q.counters + lane, acc);
    __threadfence_system();
    ((volatile uint32_t *)q.done)[seq % q.slots] = seq + 1u;
    ctrl->consumer = seq + 1u;
    ctrl->heartbeat = ctrl->heartbeat + 1u;
}

/* Mode `persistent`: CTA b serves queue b / ctas, taking bursts (b % ctas), + ctas, ... until the
 * host sets exit_flag, or until idle_timeout_ns pass without a burst (the last resort against a
 * host that died). Several CTAs per queue overlap bursts, hiding the per-frame latency. */
extern "C" __global__ void __launch_bounds__(256) pw_persistent(const pw_queue_desc *queues, uint32_t ctas) {
    const uint32_t lane = blockIdx.x % ctas;
    const pw_queue_desc q = queues[blockIdx.x / ctas];
    volatile pw_queue_ctrl *ctrl = (volatile pw_queue_ctrl *)q.ctrl;
    const volatile uint32_t *prod = (const volatile uint32_t *)q.producer;
    __shared__ pw_queue_counters acc;
    __shared__ uint32_t cmd; /* 0 run a burst, 1 exit */
    uint32_t seq = lane;
    if (threadIdx.x == 0) ctrl->status = PW_QSTATE_RUNNING;
    for (;;) {
        pw_zero_counters(&acc);
        if (threadIdx.x == 0) {
            uint64_t idle_since = pw_globaltimer();
            uint32_t spins = 0;
            for (;;) {
                if ((int32_t)(*prod - seq) > 0) {
                    (void)pw_load_acquire(prod);
                    const pw_slot_hdr *hdr = (const pw_slot_hdr *)(q.ring + (uint64_t)(seq % q.slots) * q.slot_bytes);
                    if (hdr->n_frames > q.burst_max) {
                        ctrl->status = PW_QSTATE_BAD_SLOT;
                        cmd = 1u;
                    } else {
                        cmd = 0u;
                    }
                    break;
                }
                if ((++spins & 0xFFu) == 0u && ctrl->exit_flag) {
                    /* Checked every 256 polls only: each check is a read of host memory across
                     * PCIe, which competes with the ingest DMA when many CTAs poll. */
                    ctrl->status = PW_QSTATE_EXIT_FLAG;
                    cmd = 1u;
                    break;
                }
                if ((spins & 0x3FFu) == 0u) {
                    if (lane == 0) {
                        ctrl->polls = ctrl->polls + 0x400u;
                        if ((spins & 0xFFFFu) == 0u) ctrl->heartbeat = ctrl->heartbeat + 1u;
                    }
                    if (pw_globaltimer() - idle_since > q.idle_timeout_ns) {
                        ctrl->status = PW_QSTATE_EXIT_TIMEOUT;
                        cmd = 1u;
                        break;
                    }
                }
            }
        }
        __syncthreads();
        if (cmd) break;
        pw_run_slot(q, seq, &acc);
        __syncthreads();
        if (threadIdx.x == 0) pw_publish(q, seq, lane, &acc);
        seq += ctas;
        __syncthreads();
    }
    if (threadIdx.x == 0) __threadfence_system();
}

/* Modes `launch` and `graph`: one block runs burst `seq` of queue `queue` and publishes it. */
extern "C" __global__ void __launch_bounds__(256) pw_burst(const pw_queue_desc *queues, uint32_t queue, uint32_t seq) {
    const pw_queue_desc q = queues[queue];
    __shared__ pw_queue_counters acc;
    pw_zero_counters(&acc);
    __syncthreads();
    pw_run_slot(q, seq, &acc);
    __syncthreads();
    if (threadIdx.x == 0) pw_publish(q, seq, 0u, &acc);
}

/* Graph mode: the graph's kernel nodes read the burst number from the slot header, so one graph
 * instance serves every lap of its window of slots. */
extern "C" __global__ void __launch_bounds__(256) pw_burst_slot(const pw_queue_desc *queues, uint32_t queue, uint32_t slot) {
    const pw_queue_desc q = queues[queue];
    const pw_slot_hdr *hdr = (const pw_slot_hdr *)(q.ring + (uint64_t)slot * q.slot_bytes);
    __shared__ pw_queue_counters acc;
    __shared__ uint32_t seq;
    pw_zero_counters(&acc);
    if (threadIdx.x == 0) seq = hdr->seq;
    __syncthreads();
    pw_run_slot(q, seq, &acc);
    __syncthreads();
    if (threadIdx.x == 0) pw_publish(q, seq, 0u, &acc);
}

/* Stage throughput: thread per frame over `n` device-resident frames (descriptor offsets relative
 * to `data`), verdicts to device memory, counters aggregated per block. `q` supplies the pipeline,
 * tables and counters (ring fields unused). */
extern "C" __global__ void __launch_bounds__(256) pw_bulk(const pw_queue_desc *qd, const uint8_t *data, const pw_desc *descs,
                                                         uint32_t n, pw_verdict *verdicts) {
    const pw_queue_desc q = *qd;
    const pw_acl_sel a = pw_acl_of_queue(q);
    __shared__ pw_queue_counters acc;
    pw_zero_counters(&acc);
    __syncthreads();
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        pw_desc d = descs[i];
        pw_run_frame(q, a, data, d, verdicts + i, 0, &acc);
    }
    __syncthreads();
    if (threadIdx.x == 0 && (q.pipeline & PW_PIPE_COUNT)) pw_count_merge((pw_queue_counters *)q.counters, &acc);
}
