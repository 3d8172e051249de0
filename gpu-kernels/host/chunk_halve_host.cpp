// Host build of cuda/chunk_halve.cuh (PW_DEVICE = static inline), for
// gpu-kernels/tests/chunk_halve.rs: how pw_run_tx_chunked shrinks a chunk that does not fit.
#include "chunk_halve.cuh"

extern "C" uint32_t pw_host_chunk_halved(uint32_t k) {
    return pw_chunk_halved(k);
}

extern "C" uint32_t pw_host_chunk_least(void) {
    return PW_CHUNK_LEAST;
}
