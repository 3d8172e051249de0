// host_read_rtt: how long a poll round of the tagged ring takes (cp.async copies of 16 bytes a
// thread from mapped pinned host memory into shared memory, issue -> every copy landed), by the
// bytes a CTA reads and by how many CTAs (SMs) read at the same time. The tagged poll keeps two
// rounds in flight a round trip / 2 apart, so a burst waits up to half a round for the next one:
// if a round's time grows with the bytes one SM reads, a slot polled in parts by several CTAs
// would be seen sooner.
//
// Rows: `split` = C CTAs each reading 1/C of N bytes (disjoint parts); `dup` = C CTAs each reading
// all N bytes. Each CTA times its own rounds (thread 0's %globaltimer); rounds start together at
// 4 us ticks of the global timer, 2000 rounds. The memory is not written while it is read.
//
// usage: host_read_rtt [ROUNDS]
// Build: nvcc -O3 -std=c++17 -arch=sm_90 tools/gpu-probes/host_read_rtt.cu -o host_read_rtt
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include "tool_io.cuh" /* CK, gtimer, cp16 */

static const uint32_t THREADS = 512, MAX_BYTES = 16384, TICK_NS = 4000;

__global__ void rounds(const uint4 *src, uint32_t granules, bool split, uint32_t nrounds, uint32_t *ns) {
    __shared__ uint4 buf[MAX_BYTES / 16];
    const uint32_t c = blockIdx.x, C = gridDim.x;
    const uint32_t lo = split ? granules * c / C : 0u, hi = split ? granules * (c + 1u) / C : granules;
    for (uint32_t r = 0; r < nrounds; r++) {
        if (threadIdx.x == 0) {
            const uint64_t next = (gtimer() / TICK_NS + 1u) * TICK_NS;
            while (gtimer() < next) {
            }
        }
        __syncthreads();
        uint64_t t0 = 0;
        if (threadIdx.x == 0) t0 = gtimer();
        for (uint32_t i = lo + threadIdx.x; i < hi; i += blockDim.x) cp16(&buf[i - lo], src + i);
        asm volatile("cp.async.commit_group;\n\tcp.async.wait_all;" ::: "memory");
        __syncthreads();
        if (threadIdx.x == 0) ns[c * nrounds + r] = (uint32_t)(gtimer() - t0);
    }
}

int main(int argc, char **argv) {
    const uint32_t nrounds = argc > 1 ? (uint32_t)strtoul(argv[1], nullptr, 10) : 2000;
    uint4 *h, *d;
    CK(cudaHostAlloc(&h, 4 * MAX_BYTES, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&d, h, 0));
    for (uint32_t i = 0; i < 4 * MAX_BYTES / 16; i++) h[i] = make_uint4(i, i, i, i);
    uint32_t *ns;
    CK(cudaMallocManaged(&ns, 4 * nrounds * sizeof(uint32_t)));
    printf("bytes  ctas  mode   bytes/cta  p50_ns  p99_ns  (the slowest CTA of each round)\n");
    const uint32_t sizes[] = {16, 512, 1024, 2048, 3136, 4096, 6272, 12544};
    for (uint32_t bytes : sizes) {
        for (uint32_t ctas : {1u, 2u, 4u}) {
            for (int split = 1; split >= 0; split--) {
                if (ctas == 1 && !split) continue;
                const uint32_t g = bytes / 16;
                if (ctas > g) continue;
                rounds<<<ctas, THREADS>>>(d, g, split != 0, nrounds, ns);
                CK(cudaGetLastError());
                CK(cudaDeviceSynchronize());
                std::vector<uint32_t> worst(nrounds, 0);
                for (uint32_t c = 0; c < ctas; c++)
                    for (uint32_t r = 0; r < nrounds; r++) worst[r] = std::max(worst[r], ns[c * nrounds + r]);
                worst.erase(worst.begin(), worst.begin() + nrounds / 20); // warm-up
                std::sort(worst.begin(), worst.end());
                printf("%5u  %4u  %-5s  %9u  %6u  %6u\n", bytes, ctas, split ? "split" : "dup",
                       split ? bytes / ctas : bytes, worst[worst.size() / 2], worst[worst.size() * 99 / 100]);
            }
        }
    }
    CK(cudaFreeHost(h));
    CK(cudaFree(ns));
    return 0;
}
