// GPU check of the parse stage (run by tools/gpu-probes/parse-gpu-check.sh on a machine with a
// GPU and nvcc): runs gpu-kernels/cuda/parse.cuh on the GPU over frames.bin and writes the metas
// for comparison with the Rust parser, then times pw_parse over a device-resident IMIX-like mix
// (mix.bin, the criterion bench's frames, replicated 8192 times and packed back to back).
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include "parse.cuh"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void parse_kernel(const uint8_t *data, const uint32_t *offs, const uint32_t *lens, pw_packet_meta *out, uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) pw_parse(data + offs[i], lens[i], &out[i]);
}

static void load(const char *path, std::vector<uint8_t> &data, std::vector<uint32_t> &offs, std::vector<uint32_t> &lens) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    uint32_t n; if (fread(&n, 4, 1, f) != 1) exit(1);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len; if (fread(&len, 4, 1, f) != 1) exit(1);
        offs.push_back((uint32_t)data.size()); lens.push_back(len);
        size_t at = data.size(); data.resize(at + len);
        if (len && fread(&data[at], 1, len, f) != len) exit(1);
    }
    fclose(f);
}

int main(int argc, char **argv) {
    const char *dir = argv[1], *out = argv[2];
    char p[512];
    // 1. Correctness: every frame of frames.bin.
    std::vector<uint8_t> data; std::vector<uint32_t> offs, lens;
    snprintf(p, sizeof p, "%s/frames.bin", dir); load(p, data, offs, lens);
    uint32_t n = (uint32_t)offs.size();
    uint8_t *d_data; uint32_t *d_offs, *d_lens; pw_packet_meta *d_meta;
    CK(cudaMalloc(&d_data, data.size() + 1)); CK(cudaMalloc(&d_offs, 4 * n)); CK(cudaMalloc(&d_lens, 4 * n));
    CK(cudaMalloc(&d_meta, sizeof(pw_packet_meta) * n));
    CK(cudaMemcpy(d_data, data.data(), data.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_offs, offs.data(), 4 * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_lens, lens.data(), 4 * n, cudaMemcpyHostToDevice));
    parse_kernel<<<(n + 255) / 256, 256>>>(d_data, d_offs, d_lens, d_meta, n);
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    std::vector<pw_packet_meta> metas(n);
    CK(cudaMemcpy(metas.data(), d_meta, sizeof(pw_packet_meta) * n, cudaMemcpyDeviceToHost));
    snprintf(p, sizeof p, "%s/gpu_metas.bin", out);
    FILE *f = fopen(p, "wb"); fwrite(metas.data(), sizeof(pw_packet_meta), n, f); fclose(f);
    printf("correctness: %u frames parsed on the GPU\n", n);
    CK(cudaFree(d_data)); CK(cudaFree(d_offs)); CK(cudaFree(d_lens)); CK(cudaFree(d_meta));

    // 2. Throughput: the 1024-frame mix replicated to N frames packed back to back in device memory.
    std::vector<uint8_t> md; std::vector<uint32_t> mo, ml;
    snprintf(p, sizeof p, "%s/mix.bin", dir); load(p, md, mo, ml);
    const uint32_t reps = 8192, m = (uint32_t)mo.size(), N = m * reps;
    std::vector<uint32_t> ho(N), hl(N);
    for (uint32_t r = 0; r < reps; r++)
        for (uint32_t i = 0; i < m; i++) { ho[r * m + i] = (uint32_t)(r * md.size()) + mo[i]; hl[r * m + i] = ml[i]; }
    size_t bytes = md.size() * (size_t)reps;
    uint8_t *dd; CK(cudaMalloc(&dd, bytes));
    for (uint32_t r = 0; r < reps; r++) CK(cudaMemcpy(dd + r * md.size(), md.data(), md.size(), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&d_offs, 4ull * N)); CK(cudaMalloc(&d_lens, 4ull * N)); CK(cudaMalloc(&d_meta, sizeof(pw_packet_meta) * (size_t)N));
    CK(cudaMemcpy(d_offs, ho.data(), 4ull * N, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_lens, hl.data(), 4ull * N, cudaMemcpyHostToDevice));
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    for (int bs : {128, 256, 512}) {
        parse_kernel<<<(N + bs - 1) / bs, bs>>>(dd, d_offs, d_lens, d_meta, N);  // warm-up
        CK(cudaDeviceSynchronize());
        const int iters = 20;
        CK(cudaEventRecord(a));
        for (int it = 0; it < iters; it++) parse_kernel<<<(N + bs - 1) / bs, bs>>>(dd, d_offs, d_lens, d_meta, N);
        CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
        float ms; CK(cudaEventElapsedTime(&ms, a, b));
        double s = ms / 1e3 / iters;
        printf("throughput: block %d, %u frames (%.0f MB of frames), %.3f ms per pass: %.1f Mpps (%.2f ns/frame)\n",
               bs, N, bytes / 1e6, s * 1e3, N / s / 1e6, s / N * 1e9);
    }
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0)); printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    return 0;
}
