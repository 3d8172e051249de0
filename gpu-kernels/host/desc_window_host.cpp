// Host build of cuda/desc_window.cuh (PW_DEVICE = static inline), for
// gpu-kernels/tests/desc_window.rs: the descriptor window pw_run_tx_chunked stages a chunk from.
#include "desc_window.cuh"

extern "C" void pw_host_desc_window(uint32_t at, uint32_t c0, uint32_t k, uint32_t dsz, uint32_t *out) {
    const pw_desc_window w = pw_desc_window_of(at, c0, k, dsz);
    out[0] = w.first;
    out[1] = w.granules;
    out[2] = w.skew;
}
