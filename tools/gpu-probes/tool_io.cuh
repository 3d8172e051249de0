// What the GPU probes of this folder share: reading the files that `cargo run --example
// acl_gpu_dump` writes, stopping on a CUDA runtime error, launching one thread-block cluster,
// the GPU-wide clock, and a 16-byte asynchronous copy.
#ifndef PKTWARP_TOOL_IO_CUH
#define PKTWARP_TOOL_IO_CUH

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>
#include <cuda_runtime.h>

static std::vector<char> slurp(const std::string &p) {
    std::vector<char> v;
    FILE *f = fopen(p.c_str(), "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", p.c_str()); exit(2); }
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) v.insert(v.end(), buf, buf + n);
    fclose(f);
    return v;
}

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(2); } } while (0)

/* One launch of `kernel` on `stream` as a single cluster of `ctas` CTAs of `threads` threads. */
template <typename... P, typename... A>
static void launch_cluster(void (*kernel)(P...), uint32_t ctas, uint32_t threads, cudaStream_t stream, A &&...args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(ctas);
    cfg.blockDim = dim3(threads);
    cfg.stream = stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = ctas;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...));
}

/* %globaltimer: ns, one clock for every SM of the GPU. */
__device__ __forceinline__ uint64_t gtimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* 16 bytes global -> shared with cp.async (.cg: L2 or host memory, never a stale L1 line). */
__device__ __forceinline__ void cp16(void *dst, const void *src) {
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}

#endif
