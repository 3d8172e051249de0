/* Arrival order per flow for a stage that keeps per-queue state (conntrack, rate_limit;
 * docs/stages.md, "Per-queue stage state"), in the composed kernel, where a block runs a round of
 * frames at once, a thread per frame (the round's frames in arrival order by thread index).
 *
 * The stage names each frame's order key (a table bucket: frames of one flow share it, and
 * frames with different keys touch disjoint state) with pw_order_publish, waits with
 * pw_order_wait for its predecessor (the nearest earlier frame of the round with the same key) to
 * be done, applies the frame, then says pw_order_done. A frame that a stage before drops never
 * reaches the ordered stage: the generated pw_pipeline_frame says pw_order_skip for it. Rounds are
 * taken in order by the whole block (PW_PIPELINE_ROUND_BEGIN / _END below, both block barriers),
 * so the result equals applying the frames one after another in arrival order, as the CPU
 * executor does; frames of different flows run in parallel.
 *
 * The wait walks back from the frame's own index: each earlier slot is first waited for until
 * published (its key written before its state, behind the publisher's fence), and the first one
 * with the same key is the predecessor; its being done implies every earlier frame of the key is
 * done (it waited for its own predecessor before applying), so the walk stops there. A frame
 * without a key (PW_ORDER_NONE: no flow; it changes only counters, with atomics) waits for no one.
 * Deadlock freedom: a frame waits only for lower thread indices of its own block (no cycle), each
 * of which publishes before it waits (publish needs nothing of anyone), and independent thread
 * scheduling (sm_70 on) lets a lane wait for another lane of its warp. Memory: the waiting and the
 * waited-for frames run on one SM, so __threadfence_block orders the predecessor's table writes
 * (global memory) before the waiter's reads.
 *
 * Every store a later frame spins on (publish's state 1, done's and skip's 2) is followed by a
 * block fence: without it ptxas may sink the store below the WARPSYNC.ALL it puts before the
 * round's barrier (seen in tools/gpu-probes/flow_table_bench.cu's fb_update with nvcc 13.0:
 * done's STS after the WARPSYNC.ALL). A lane that then waits for a lower lane of its own warp
 * never reaches the WARPSYNC, and the lower lane waits there before its store: the warp hangs.
 * The convergence points around the spin loops (BSSY / BSYNC, with YIELD in the loops) do not
 * block that way; a WARPSYNC does. scripts/check-kernels.sh checks the probe's code for it.
 *
 * Bursts of a queue are taken in order by the CTA that applies them. With one CTA per burst
 * (burst_ctas 1) that CTA applies every frame. With several (burst_ctas k, the owned layout of
 * kernels_owned.cu) every CTA of the group computes every frame's key (pw_pipeline_order_key)
 * and runs only the frames whose key % k is its part number (keyless frames: index % k): a key is
 * always applied by the same CTA, so the table's buckets are partitioned between the group's
 * CTAs, no two SMs touch one bucket, and no CTA ever waits for another. The table's shared parts
 * are counters, changed with atomics. The host build (one frame at a time, in order) needs none
 * of it: there the functions are empty. */
#ifndef PKTWARP_FLOW_ORDER_CUH
#define PKTWARP_FLOW_ORDER_CUH

#include "pktwarp_abi.h"

/* A frame without a key (no flow: nothing of the state is touched except counters). */
#define PW_ORDER_NONE 0xFFFFFFFFu

#if PW_GPU && PW_PIPELINE_COMPOSED
/* Frames of a round: blockDim.x <= 256 in every composed kernel (pw_bulk's bound, and setup.rs
 * COMPOSED_MAX_THREADS). */
#define PW_ORDER_MAX 256u
/* Per thread of the round: its frame's key, and 0 (not there yet), 1 (keyed), 2 (done). */
__shared__ volatile uint32_t pw_order_key[PW_ORDER_MAX];
__shared__ volatile uint32_t pw_order_state[PW_ORDER_MAX];

PW_DEVICE void pw_order_publish(uint32_t key) {
    pw_order_key[threadIdx.x] = key;
    __threadfence_block();
    pw_order_state[threadIdx.x] = 1u;
    __threadfence_block(); /* the store stays above any warp-wide sync (see above) */
}

PW_DEVICE void pw_order_wait(uint32_t key) {
    if (key == PW_ORDER_NONE) return;
    for (uint32_t t = threadIdx.x; t-- > 0u;) {
        while (pw_order_state[t] == 0u) {
        }
        /* Its key (written before its state, behind the publisher's fence) after its state. */
        __threadfence_block();
        if (pw_order_key[t] == key) {
            while (pw_order_state[t] != 2u) {
            }
            break;
        }
    }
    /* The earlier frames' state writes (global memory, this SM) before this frame's reads. */
    __threadfence_block();
}

PW_DEVICE void pw_order_done(void) {
    __threadfence_block();
    pw_order_state[threadIdx.x] = 2u;
    __threadfence_block(); /* the store stays above any warp-wide sync (see above) */
}

PW_DEVICE void pw_order_skip(void) {
    pw_order_key[threadIdx.x] = PW_ORDER_NONE;
    __threadfence_block();
    pw_order_state[threadIdx.x] = 2u;
    __threadfence_block();
}

/* A second channel, for a second stage that keeps per-queue state of its own in frame order
 * (a second ordered stage, e.g. rate_limit beside conntrack, through the _on forms below; or
 * inspect's flowbits and thresholds, inspect_state.cuh): the same protocol on its
 * own slots, so its waits never read the first channel's. Every frame of the round publishes on
 * it (or is marked skipped: the generated pw_pipeline_frame does so for a frame dropped before
 * that stage). It runs only in an ordered pipeline (whose round hooks clear its slots) whose
 * generated source asks for it (PW_PIPELINE_ORDERED2: codegen's ORDERED_SECOND stages); elsewhere
 * it is empty, and its slots take no shared memory (2 KiB where it is on). */
#if defined(PW_PIPELINE_ORDERED) && defined(PW_PIPELINE_ORDERED2)
#define PW_ORDER2_ON 1
__shared__ volatile uint32_t pw_order2_key[PW_ORDER_MAX];
__shared__ volatile uint32_t pw_order2_state[PW_ORDER_MAX];

PW_DEVICE void pw_order2_publish(uint32_t key) {
    pw_order2_key[threadIdx.x] = key;
    __threadfence_block();
    pw_order2_state[threadIdx.x] = 1u;
    __threadfence_block();
}

PW_DEVICE void pw_order2_wait(uint32_t key) {
    if (key == PW_ORDER_NONE) return;
    for (uint32_t t = threadIdx.x; t-- > 0u;) {
        while (pw_order2_state[t] == 0u) {
        }
        __threadfence_block();
        if (pw_order2_key[t] == key) {
            while (pw_order2_state[t] != 2u) {
            }
            break;
        }
    }
    __threadfence_block();
}

PW_DEVICE void pw_order2_done(void) {
    __threadfence_block();
    pw_order2_state[threadIdx.x] = 2u;
    __threadfence_block();
}

PW_DEVICE void pw_order2_skip(void) {
    pw_order2_key[threadIdx.x] = PW_ORDER_NONE;
    __threadfence_block();
    pw_order2_state[threadIdx.x] = 2u;
    __threadfence_block();
}
#else
PW_DEVICE void pw_order2_publish(uint32_t key) { (void)key; }
PW_DEVICE void pw_order2_wait(uint32_t key) { (void)key; }
PW_DEVICE void pw_order2_done(void) {}
PW_DEVICE void pw_order2_skip(void) {}
#endif

/* The channel-numbered forms, for an ordered stage that the generated source may put on either
 * channel (its header reads PW_ORDER_CH_<STAGE>: 1u when it is the pipeline's second ordered
 * stage, codegen::order_channels). Each ordered stage of a frame publishes, waits and is done on
 * its own channel, one stage after the other inside the frame's thread, so stage B sees stage
 * A's verdict for the frame, and B's predecessor (the nearest earlier frame with B's key) is
 * done with B, which it reaches only after A: B's state changes per key in arrival order, as on
 * the CPU, where every stage of a frame runs before the next frame's. The two stages' states
 * are disjoint (their own tables), so A never needs B's order. Deadlock freedom as above: a
 * frame waits on either channel only for lower thread indices, each of which publishes on each
 * channel before it waits there. */
PW_DEVICE void pw_order_publish_on(uint32_t ch, uint32_t key) {
    if (ch != 0u) pw_order2_publish(key);
    else pw_order_publish(key);
}

PW_DEVICE void pw_order_wait_on(uint32_t ch, uint32_t key) {
    if (ch != 0u) pw_order2_wait(key);
    else pw_order_wait(key);
}

PW_DEVICE void pw_order_done_on(uint32_t ch) {
    if (ch != 0u) pw_order2_done();
    else pw_order_done();
}

/* Whole block, before a round's frames run: every thread's slots cleared, seen by all. */
__device__ __forceinline__ void pw_order_round_begin() {
    pw_order_state[threadIdx.x] = 0u;
#if defined(PW_ORDER2_ON)
    pw_order2_state[threadIdx.x] = 0u;
#endif
    __syncthreads();
}

#if defined(PW_PIPELINE_ORDERED) && !defined(PW_PIPELINE_ROUND_BEGIN)
#define PW_PIPELINE_ROUND_BEGIN() pw_order_round_begin()
/* No thread clears its slot for the next round while a later frame may still wait on it. */
#define PW_PIPELINE_ROUND_END() __syncthreads()
#endif
#else
PW_DEVICE void pw_order_publish(uint32_t key) { (void)key; }
PW_DEVICE void pw_order_wait(uint32_t key) { (void)key; }
PW_DEVICE void pw_order_done(void) {}
PW_DEVICE void pw_order_skip(void) {}
PW_DEVICE void pw_order2_publish(uint32_t key) { (void)key; }
PW_DEVICE void pw_order2_wait(uint32_t key) { (void)key; }
PW_DEVICE void pw_order2_done(void) {}
PW_DEVICE void pw_order2_skip(void) {}
PW_DEVICE void pw_order_publish_on(uint32_t ch, uint32_t key) { (void)ch; (void)key; }
PW_DEVICE void pw_order_wait_on(uint32_t ch, uint32_t key) { (void)ch; (void)key; }
PW_DEVICE void pw_order_done_on(uint32_t ch) { (void)ch; }
#endif

/* The channel of each ordered stage: 0 unless the generated source says 1 (see above). */
#ifndef PW_ORDER_CH_CONNTRACK
#define PW_ORDER_CH_CONNTRACK 0u
#endif
#ifndef PW_ORDER_CH_RATE_LIMIT
#define PW_ORDER_CH_RATE_LIMIT 0u
#endif
#ifndef PW_ORDER_CH_FLOW_STATS_OWN
#define PW_ORDER_CH_FLOW_STATS_OWN 0u
#endif

#endif /* PKTWARP_FLOW_ORDER_CUH */
