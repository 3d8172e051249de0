// The inspect prefilter's kernels (gpu-kernels/cuda/inspect_match.cuh) on the GPU against the
// Rust image walker, every payload's match bitmap, then their throughput. Inputs (any machine):
//   PKTWARP_MATCH_DUMP=DIR cargo test --release -p pktwarp-inspect --test matcher_gpu_dump -- --ignored
// writes DIR/{1460,64,mixed}/{image,data,offsets,lengths,expect}.bin (u32 little-endian but
// data); then `inspect_match_check DIR/1460 [REPS=50]`: mismatching rows per kernel (must be 0)
// and Gbit/s of payload per kernel.
#include <cstring>
#include "inspect_match.cuh"
#include "tool_io.cuh"

static std::vector<uint32_t> words(const std::string &p) {
    std::vector<char> b = slurp(p);
    std::vector<uint32_t> w(b.size() / 4);
    if (!w.empty()) memcpy(w.data(), b.data(), w.size() * 4);
    return w;
}

typedef void (*match_kernel)(const uint32_t *, const uint8_t *, const uint32_t *, const uint32_t *, uint32_t, uint32_t *);

struct batch {
    uint32_t *img, *off, *len, *bm;
    uint8_t *data;
    uint32_t n, words;
};

static void launch(match_kernel k, const batch &b, uint32_t per_payload) {
    uint64_t threads = (uint64_t)b.n * per_payload;
    uint32_t blocks = (uint32_t)((threads + 255) / 256);
    if (blocks) k<<<blocks, 256>>>(b.img, b.data, b.off, b.len, b.n, b.bm);
    CK(cudaGetLastError());
}

static void check(const char *name, match_kernel k, uint32_t per_payload, const batch &b,
                  const std::vector<uint32_t> &expect, uint64_t bytes, int reps) {
    CK(cudaMemset(b.bm, 0xff, (size_t)b.n * b.words * 4));
    launch(k, b, per_payload);
    CK(cudaDeviceSynchronize());
    std::vector<uint32_t> got((size_t)b.n * b.words);
    if (!got.empty()) CK(cudaMemcpy(got.data(), b.bm, got.size() * 4, cudaMemcpyDeviceToHost));
    uint32_t bad = 0;
    for (uint32_t i = 0; i < b.n; i++) {
        for (uint32_t w = 0; w < b.words; w++) {
            if (got[(size_t)i * b.words + w] != expect[(size_t)i * b.words + w]) {
                if (bad < 5) fprintf(stderr, "%s: payload %u word %u: gpu %08x rust %08x\n", name, i, w,
                                     got[(size_t)i * b.words + w], expect[(size_t)i * b.words + w]);
                bad++;
                break;
            }
        }
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0));
    for (int r = 0; r < reps; r++) launch(k, b, per_payload);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    double gbit = ms > 0 ? (double)bytes * 8 * reps / (ms * 1e6) : 0;
    printf("%-6s mismatching payloads %u of %u   %.3f ms a batch   %.1f Gbit/s\n", name, bad, b.n, ms / reps, gbit);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [REPS=50]\n", argv[0]);
        return 2;
    }
    std::string d = argv[1];
    int reps = argc > 2 ? atoi(argv[2]) : 50;
    std::vector<uint32_t> img = words(d + "/image.bin"), off = words(d + "/offsets.bin"),
                          len = words(d + "/lengths.bin"), expect = words(d + "/expect.bin");
    std::vector<char> data = slurp(d + "/data.bin");
    if (img.size() < 16 || img[0] != PW_IM_MAGIC || off.size() != len.size()) {
        fprintf(stderr, "%s: not a matcher dump\n", d.c_str());
        return 2;
    }
    batch b;
    b.n = (uint32_t)len.size();
    b.words = (img[PW_IM_N_PATTERNS] + 31) / 32;
    if (expect.size() != (size_t)b.n * b.words) {
        fprintf(stderr, "%s: expect.bin has %zu words, want %zu\n", d.c_str(), expect.size(), (size_t)b.n * b.words);
        return 2;
    }
    uint64_t bytes = 0;
    for (uint32_t l : len) bytes += l;
    CK(cudaMalloc(&b.img, img.size() * 4));
    CK(cudaMalloc(&b.off, off.size() * 4 + 4));
    CK(cudaMalloc(&b.len, len.size() * 4 + 4));
    CK(cudaMalloc(&b.data, data.size() + 1));
    CK(cudaMalloc(&b.bm, expect.size() * 4 + 4));
    CK(cudaMemcpy(b.img, img.data(), img.size() * 4, cudaMemcpyHostToDevice));
    if (b.n) {
        CK(cudaMemcpy(b.off, off.data(), off.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(b.len, len.data(), len.size() * 4, cudaMemcpyHostToDevice));
    }
    if (!data.empty()) CK(cudaMemcpy(b.data, data.data(), data.size(), cudaMemcpyHostToDevice));
    printf("%s: %u payloads, %llu bytes, %u patterns, %u states (%u dense), image %zu KiB\n", d.c_str(), b.n,
           (unsigned long long)bytes, img[PW_IM_N_PATTERNS], img[PW_IM_N_STATES], img[PW_IM_N_DENSE], img.size() * 4 / 1024);
    check("thread", pw_inspect_match_kernel, 1, b, expect, bytes, reps);
    check("warp", pw_inspect_match_warp_kernel, 32, b, expect, bytes, reps);
    return 0;
}
