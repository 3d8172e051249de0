// Host build of gpu-kernels/cuda/fronthaul.cuh (PW_DEVICE = static inline here), so
// fronthaul/tests/fronthaul_cuda_host.rs holds it equal to the Rust decoder without a GPU.
#include "fronthaul.cuh"

extern "C" uint32_t pw_host_fh_decode(const uint8_t *frame, uint32_t len, const pw_fh_params *p, pw_fh_info *info,
                                      pw_fh_prb *out, uint32_t max_out) {
    return pw_fh_decode(frame, len, p, info, out, max_out);
}

extern "C" uint32_t pw_host_fh_decompress_prb(const uint8_t *b, uint32_t method, uint32_t width, int32_t *out) {
    return pw_fh_decompress_prb(b, method, width, out);
}

// Sizes of the structs that cross the boundary, for the Rust layout checks.
extern "C" uint32_t pw_host_fh_sizes(uint32_t *params, uint32_t *info, uint32_t *prb) {
    *params = (uint32_t)sizeof(pw_fh_params);
    *info = (uint32_t)sizeof(pw_fh_info);
    *prb = (uint32_t)sizeof(pw_fh_prb);
    return 1;
}
