// Times the ACL lookup of one small burst inside one CTA, the way the persistent kernel runs it:
// every group of `gsize` lanes classifies one frame's key (pw_acl_classify_group), the CTA waits
// for the slowest, and thread 0 reads the clock before and after. One launch per configuration
// runs many bursts of the trace back to back, so launch overhead is not in the figures. Checks
// every answer against the Rust matcher's (files from `cargo run --example acl_gpu_dump`).
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -I gpu-kernels flow-rules/csrc/acl_burst_lat.cu -o acl_burst_lat
// Run:   acl_burst_lat DIR [BURSTS]
// Prints, per configuration (threads, frames per burst, lanes per frame, idle gap before each
// burst: thread 0 spinning, as the persistent kernel polls): p50 / p99 of a burst's lookup time
// in ns and the mismatches. (It showed that a warp per frame on fewer frames per SM is what
// shortens a small burst's lookups: see GpuOptions::burst_ctas and BENCHMARKS.md.)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <cuda_runtime.h>
#include "acl.cuh"
#include "tool_io.cuh"


__device__ __forceinline__ uint64_t gtimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Bursts b = 0..nb-1 of `frames` keys each (keys b*frames ...); ns[b] = the burst's lookup time.
__global__ void bursts(const pw_acl_tables *t, const pw_acl_key *keys, uint32_t nkeys, uint32_t frames,
                       uint32_t gsize, uint32_t gap_ns, uint32_t nb, uint32_t *out, uint32_t *ns) {
    const uint32_t f = threadIdx.x / gsize, gl = threadIdx.x & (gsize - 1u);
    for (uint32_t b = 0; b < nb; b++) {
        const uint32_t k = (b * frames + f) % nkeys;
        pw_acl_key key;
        if (f < frames) key = keys[k];
        /* An idle gap before the burst, as the persistent kernel waits for the next one: thread
         * 0 spins on the clock, the other warps wait at the barrier. */
        if (gap_ns && threadIdx.x == 0) {
            const uint64_t t = gtimer();
            while (gtimer() - t < gap_ns) {
            }
        }
        __syncthreads();
        uint64_t t0 = 0;
        if (threadIdx.x == 0) t0 = gtimer();
        if (f < frames) {
            const uint32_t r = gsize > 1u ? pw_acl_classify_group(t, &key, gl, gsize) : pw_acl_classify(t, &key);
            if (gl == 0u) out[k] = r;
        }
        __syncthreads();
        if (threadIdx.x == 0) ns[b] = (uint32_t)(gtimer() - t0);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s DIR [BURSTS]\n", argv[0]); return 2; }
    std::string d = argv[1];
    uint32_t nb = argc > 2 ? (uint32_t)atoi(argv[2]) : 3000;
    auto img = slurp(d + "/image.bin"), keys = slurp(d + "/keys.bin"), exp = slurp(d + "/expect.bin");
    uint32_t n = (uint32_t)(keys.size() / sizeof(pw_acl_key));
    void *dimg, *dkeys;
    uint32_t *dout, *dns;
    CK(cudaMalloc(&dimg, img.size()));
    CK(cudaMalloc(&dkeys, keys.size()));
    CK(cudaMalloc(&dout, n * 4));
    CK(cudaMalloc(&dns, nb * 4));
    CK(cudaMemcpy(dimg, img.data(), img.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dkeys, keys.data(), keys.size(), cudaMemcpyHostToDevice));
    struct C { uint32_t threads, frames, gsize, gap_ns; } cs[] = {
        {256, 32, 8, 0},  {256, 32, 8, 10000}, {256, 32, 4, 0},   {256, 32, 1, 0}, {1024, 32, 32, 0},
        {512, 32, 16, 0}, {256, 16, 16, 0},    {256, 8, 32, 0},   {256, 8, 32, 10000},
        {256, 8, 32, 50000}, {128, 4, 32, 0},
    };
    printf("%s: %u keys, image %zu B, %u bursts per configuration\n", d.c_str(), n, img.size(), nb);
    printf("threads frames lanes gap_ns   p50_ns   p99_ns  max_ns mismatches\n");
    const uint32_t *want = (const uint32_t *)exp.data();
    for (const C &c : cs) {
        CK(cudaMemset(dout, 0xFF, n * 4));
        for (int rep = 0; rep < 2; rep++) /* the first pass warms L2 */
            bursts<<<1, c.threads>>>((const pw_acl_tables *)dimg, (const pw_acl_key *)dkeys, n, c.frames, c.gsize,
                                     c.gap_ns, nb, dout, dns);
        CK(cudaDeviceSynchronize());
        std::vector<uint32_t> got(n), ns(nb);
        CK(cudaMemcpy(got.data(), dout, n * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(ns.data(), dns, nb * 4, cudaMemcpyDeviceToHost));
        uint32_t bad = 0, checked = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (got[i] == 0xFFFFFFFFu && want[i] != 0xFFFFFFFFu) continue; /* not in any burst */
            checked++;
            if (got[i] != want[i]) bad++;
        }
        std::sort(ns.begin(), ns.end());
        printf("%7u %6u %5u %6u %8u %8u %7u %u of %u\n", c.threads, c.frames, c.gsize, c.gap_ns,
               ns[nb / 2], ns[(size_t)nb * 99 / 100], ns[nb - 1], bad, checked);
    }
    return 0;
}
