// Host build of the flow table (cuda/flow.cuh; PW_DEVICE = static inline), for
// pipeline/flow/tests/flow_cuda_host.rs, which holds it equal to the Rust crate pktwarp-flow.
#include <vector>

#include "flow.cuh"

// A burst as the GPU runs it, with `nthreads` threads emulated one after another: phase 1
// (classify) for every thread, then phase 2 (apply) for tid 0, 1, ... Returns 0, or 1 when
// nthreads is 0.
extern "C" uint32_t pw_host_flow_burst(const pw_flow_table *t, pw_flow_counters *c, uint32_t n,
                                       const pw_packet_meta *metas, const uint8_t *const *frames,
                                       const uint32_t *lens, const uint64_t *now, pw_flow_result *out,
                                       uint32_t nthreads) {
    if (nthreads == 0) return 1;
    std::vector<pw_flow_pkt> pk(n);
    for (uint32_t tid = 0; tid < nthreads; tid++)
        pw_flow_burst_classify(t, n, metas, frames, lens, pk.data(), tid, nthreads);
    for (uint32_t tid = 0; tid < nthreads; tid++) pw_flow_burst_apply(t, c, n, pk.data(), now, out, tid, nthreads);
    return 0;
}

// pw_host_flow_burst with the flows that end written into `ring` (pw_flow_ring, its stamps
// and records after it).
extern "C" uint32_t pw_host_flow_burst_ring(const pw_flow_table *t, pw_flow_counters *c, uint32_t n,
                                            const pw_packet_meta *metas, const uint8_t *const *frames,
                                            const uint32_t *lens, const uint64_t *now, pw_flow_result *out,
                                            uint32_t nthreads, pw_flow_ring *ring) {
    if (nthreads == 0) return 1;
    std::vector<pw_flow_pkt> pk(n);
    for (uint32_t tid = 0; tid < nthreads; tid++)
        pw_flow_burst_classify(t, n, metas, frames, lens, pk.data(), tid, nthreads);
    for (uint32_t tid = 0; tid < nthreads; tid++)
        pw_flow_burst_apply_ring(t, c, n, pk.data(), now, out, tid, nthreads, ring);
    return 0;
}

// pw_flow_meta_store on n results into n metadata records.
extern "C" uint32_t pw_host_flow_meta_store(const pw_flow_result *r, uint32_t n, pw_packet_meta *metas) {
    for (uint32_t i = 0; i < n; i++) pw_flow_meta_store(&metas[i], r[i]);
    return n;
}

extern "C" uint32_t pw_host_flow_hash(const pw_flow_key *k, uint32_t seed) { return pw_flow_hash(k, seed); }

extern "C" uint32_t pw_host_flow_tcp_table(uint8_t *out120) {
    for (uint32_t i = 0; i < 120u; i++) out120[i] = pw_flow_tcp_table[i];
    return 120u;
}

extern "C" uint32_t pw_host_flow_sizes(uint32_t *out4) {
    out4[0] = (uint32_t)sizeof(pw_flow_entry);
    out4[1] = (uint32_t)sizeof(pw_flow_table);
    out4[2] = (uint32_t)sizeof(pw_flow_counters);
    out4[3] = (uint32_t)sizeof(pw_flow_result);
    return 4u;
}
