/* Stage `count`: per-queue and per-rule counters, and the verdict rule shared by every executor.
 *
 * Same semantics as the Rust side (pipeline::executor::gpu::verdict_of / QueueCounters::add):
 *   - frames with a parse status != ok are counted in parse_errors; with PW_PIPE_DROP_MALFORMED
 *     they are dropped (PW_DROP_PARSE_ERROR) before the ACL;
 *   - otherwise the ACL's action (the matched rule's or the table default) decides, drop -> PW_DROP_ACL.
 * Compiles for the GPU (atomics on shared or global memory) and for the host (plain adds). */
#ifndef PKTWARP_COUNT_CUH
#define PKTWARP_COUNT_CUH

#include "pktwarp_abi.h"

#if PW_GPU
/* *p += v, `p` in global memory: a reduction the thread does not wait for. atomicAdd through a
 * pointer the compiler cannot place compiles (sm_90 SASS) to a generic ATOM whose address-space
 * predicate the thread waits for, then a shared-memory fallback loop; a frame's rule hit sat on
 * the burst's path that way (stages of a 32-frame burst 2.72 vs 2.78 us; docs/perf-log.md, "a
 * lookup with fewer dependent steps", 2026-11-30). */
__device__ __forceinline__ void pw_red_add_global(void *p, unsigned long long v) {
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(__cvta_generic_to_global(p)), "l"(v) : "memory");
}
/* Every PW_ADD64 target is in global memory (rule hit counters, the queue's counter blocks). */
#define PW_ADD64(p, v) pw_red_add_global((p), (unsigned long long)(v))
#else
#define PW_ADD64(p, v) (*(p) += (uint64_t)(v))
#endif

/* The verdict of one frame from the parse status and the ACL's answer (rule, action, mark; with
 * no acl stage: PW_ACL_NO_MATCH, pass, 0). Same as pipeline::stage::run (CPU executor). */
PW_DEVICE pw_verdict pw_verdict_of(uint32_t parse_ok, uint32_t pipeline, uint32_t rule, uint8_t action,
                                   uint32_t mark) {
    pw_verdict v;
    v.out_port = (uint16_t)PW_OUT_DEFAULT;
    v.reserved = 0u;
    v.send_ns = 0ull;
    if (!parse_ok && (pipeline & PW_PIPE_DROP_MALFORMED)) {
        v.action = (uint8_t)PW_ACTION_DROP;
        v.drop_reason = (uint8_t)PW_DROP_PARSE_ERROR;
        v.rule = PW_ACL_NO_MATCH;
        v.mark = 0;
        return v;
    }
    v.action = action;
    v.drop_reason = (uint8_t)(action == PW_ACTION_DROP ? PW_DROP_ACL : PW_DROP_NONE);
    v.rule = rule;
    v.mark = mark;
    return v;
}

/* One thread's share of a burst's counters, kept in registers while it runs its frames and summed
 * over each warp once per burst (pw_count_flush). Adding every frame straight into the block's
 * shared counters made the frames of a burst take turns on the same words (64-bit shared-memory
 * atomics): about 4 us of a 32-frame burst. */
typedef struct pw_count_regs {
    uint64_t bytes;
    uint32_t packets, parse_errors, acl_matched, acl_no_match;
    uint32_t action[PW_ACTIONS];
    uint32_t drop_reason[PW_DROP_REASONS];
} pw_count_regs;

PW_DEVICE void pw_count_regs_zero(pw_count_regs *r) {
    r->bytes = 0;
    r->packets = r->parse_errors = r->acl_matched = r->acl_no_match = 0;
    for (uint32_t k = 0; k < PW_ACTIONS; k++) r->action[k] = 0;
    for (uint32_t k = 0; k < PW_DROP_REASONS; k++) r->drop_reason[k] = 0;
}

/* Adds one frame to this thread's counters `r`, and to its rule's hit counter (global memory)
 * when `rule_hits` is given. Indices stay compile-time constants (registers, not local memory). */
PW_DEVICE void pw_count_frame(pw_count_regs *r, uint64_t *rule_hits, uint32_t n_rules, uint32_t parse_ok,
                              uint32_t acl_ran, const pw_verdict *v, uint32_t wire_len) {
    r->packets += 1u;
    r->bytes += wire_len;
    r->parse_errors += parse_ok ? 0u : 1u;
    if (acl_ran) {
        if (v->rule != PW_ACL_NO_MATCH) {
            r->acl_matched += 1u;
            if (rule_hits && v->rule < n_rules) PW_ADD64(&rule_hits[v->rule], 1);
        } else {
            r->acl_no_match += 1u;
        }
    }
    for (uint32_t k = 0; k < PW_ACTIONS; k++) r->action[k] += v->action == k ? 1u : 0u;
    if (v->action == PW_ACTION_DROP)
        for (uint32_t k = 0; k < PW_DROP_REASONS; k++) r->drop_reason[k] += v->drop_reason == k ? 1u : 0u;
}

#if PW_GPU
/* *dst += v: GLOBAL, a reduction in global memory (pw_red_add_global); else an atomic in shared
 * memory. */
template <bool GLOBAL>
__device__ __forceinline__ void pw_count_add(uint64_t *dst, uint64_t v) {
    if (GLOBAL)
        pw_red_add_global(dst, (unsigned long long)v);
    else
        atomicAdd((unsigned long long *)dst, (unsigned long long)v);
}

template <bool GLOBAL>
__device__ __forceinline__ void pw_count_add_warp(uint64_t *dst, uint32_t x, bool lead) {
    const uint32_t s = __reduce_add_sync(0xFFFFFFFFu, x);
    if (lead && s) pw_count_add<GLOBAL>(dst, s);
}

/* Adds every thread's `r` into the counters `acc` (GLOBAL: a counter block in device memory;
 * else the block's in shared memory): one sum per warp and field, then one atomic per warp and
 * field (in device memory a reduction the warp does not wait for). Every thread of the block
 * calls it (full warps). */
template <bool GLOBAL>
__device__ __forceinline__ void pw_count_flush(pw_queue_counters *acc, const pw_count_regs *r) {
    __syncwarp();
    const bool lead = (threadIdx.x & 31u) == 0u;
    uint64_t b = r->bytes;
    for (uint32_t o = 16; o > 0; o >>= 1) b += __shfl_xor_sync(0xFFFFFFFFu, b, o);
    if (lead && b) pw_count_add<GLOBAL>(&acc->bytes, b);
    pw_count_add_warp<GLOBAL>(&acc->packets, r->packets, lead);
    pw_count_add_warp<GLOBAL>(&acc->parse_errors, r->parse_errors, lead);
    pw_count_add_warp<GLOBAL>(&acc->acl_matched, r->acl_matched, lead);
    pw_count_add_warp<GLOBAL>(&acc->acl_no_match, r->acl_no_match, lead);
    for (uint32_t k = 0; k < PW_ACTIONS; k++) pw_count_add_warp<GLOBAL>(&acc->action[k], r->action[k], lead);
    for (uint32_t k = 0; k < PW_DROP_REASONS; k++) pw_count_add_warp<GLOBAL>(&acc->drop_reason[k], r->drop_reason[k], lead);
}
#endif

/* dst += src, field by field (a block's shared-memory counters into the queue's counters). */
PW_DEVICE void pw_count_merge(pw_queue_counters *dst, const pw_queue_counters *src) {
    const uint64_t *s = (const uint64_t *)src;
    uint64_t *d = (uint64_t *)dst;
    for (uint32_t i = 0; i < sizeof(pw_queue_counters) / 8u; i++) {
        if (s[i]) PW_ADD64(&d[i], s[i]);
    }
}

#endif /* PKTWARP_COUNT_CUH */
