// Host build of the rate-limit table (cuda/rate_limit.cuh; PW_DEVICE = static inline), for
// pipeline/flow/tests/rate_cuda_host.rs and apps/tests/syn_guard_budget.rs, which hold it equal
// to the Rust table (pktwarp_flow::rate).
#include <vector>

#include "rate_limit.cuh"

// A burst as the GPU runs it, with `nthreads` threads emulated one after another: phase 1
// (classify) for every thread, then phase 2 (apply) for tid 0, 1, ... Returns 0, or 1 when
// nthreads is 0.
extern "C" uint32_t pw_host_rl_burst(const pw_rl_table *t, pw_rl_counters *c, uint32_t n,
                                     const pw_packet_meta *metas, const uint64_t *now, pw_rl_result *out,
                                     uint32_t nthreads) {
    if (nthreads == 0) return 1;
    std::vector<pw_rl_pkt> pk(n);
    for (uint32_t tid = 0; tid < nthreads; tid++) pw_rl_burst_classify(t, n, metas, pk.data(), tid, nthreads);
    for (uint32_t tid = 0; tid < nthreads; tid++) pw_rl_burst_apply(t, c, n, pk.data(), now, out, tid, nthreads);
    return 0;
}

extern "C" uint32_t pw_host_rl_hash(const pw_rl_key *k, uint32_t seed) { return pw_rl_hash(k, seed); }

extern "C" uint32_t pw_host_rl_sizes(uint32_t *out5) {
    out5[0] = (uint32_t)sizeof(pw_rl_entry);
    out5[1] = (uint32_t)sizeof(pw_rl_table);
    out5[2] = (uint32_t)sizeof(pw_rl_counters);
    out5[3] = (uint32_t)sizeof(pw_rl_result);
    out5[4] = (uint32_t)sizeof(pw_rl_rule);
    return 5u;
}
