// What the GPU check and timing tools in this folder share: reading the files that
// `cargo run --example acl_gpu_dump` writes, and stopping on a CUDA runtime error.
#ifndef PKTWARP_TOOL_IO_CUH
#define PKTWARP_TOOL_IO_CUH

#include <cstdio>
#include <cstdlib>
#include <string>
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

#endif
