// Checks and times gpu-kernels/acl.cuh on a GPU: loads an image, keys and the Rust matcher's
// answers written by `cargo run --example acl_gpu_dump`, classifies every key on the device
// (one thread per key), counts mismatches, then times repeated passes.
// Build: nvcc -O3 -arch=sm_90 -I gpu-kernels flow-rules/csrc/acl_gpu_check.cu -o acl_gpu_check
// Run:   acl_gpu_check DIR [ITER]
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <string>
#include <cuda_runtime.h>
#include "acl.cuh"
#include "tool_io.cuh"


__global__ void classify_all(const pw_acl_tables *t, const pw_acl_key *keys, uint32_t *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = pw_acl_classify(t, &keys[i]);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s DIR [ITER]\n", argv[0]); return 2; }
    std::string d = argv[1];
    int iter = argc > 2 ? atoi(argv[2]) : 100;
    auto img = slurp(d + "/image.bin"), keys = slurp(d + "/keys.bin"), exp = slurp(d + "/expect.bin");
    int n = (int)(keys.size() / sizeof(pw_acl_key));
    void *dimg, *dkeys; uint32_t *dout;
    CK(cudaMalloc(&dimg, img.size()));
    CK(cudaMalloc(&dkeys, keys.size()));
    CK(cudaMalloc(&dout, n * 4));
    CK(cudaMemcpy(dimg, img.data(), img.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dkeys, keys.data(), keys.size(), cudaMemcpyHostToDevice));
    int bs = 256, gs = (n + bs - 1) / bs;
    classify_all<<<gs, bs>>>((const pw_acl_tables *)dimg, (const pw_acl_key *)dkeys, dout, n);
    CK(cudaDeviceSynchronize());
    std::vector<uint32_t> got(n);
    CK(cudaMemcpy(got.data(), dout, n * 4, cudaMemcpyDeviceToHost));
    const uint32_t *want = (const uint32_t *)exp.data();
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            if (bad < 5) fprintf(stderr, "key %d: gpu %u, rust %u\n", i, got[i], want[i]);
            bad++;
        }
    }
    cudaEvent_t a, b;
    cudaEventCreate(&a); cudaEventCreate(&b);
    cudaEventRecord(a);
    for (int k = 0; k < iter; k++)
        classify_all<<<gs, bs>>>((const pw_acl_tables *)dimg, (const pw_acl_key *)dkeys, dout, n);
    cudaEventRecord(b);
    CK(cudaEventSynchronize(b));
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    printf("%s: %d keys, %d mismatches vs Rust; %d passes in %.3f ms: %.1f Mpps (%.0f B tables)\n",
           d.c_str(), n, bad, iter, ms, (double)n * iter / (ms * 1e3), (double)img.size());
    return bad ? 1 : 0;
}
