/* How pw_run_tx_chunked (kernels_tx_ring.cu) shrinks a chunk of frames whose span does not fit
 * the stage (a stage that reads whole frames, PW_PIPELINE_READS_PAYLOAD): to half, rounded up
 * to an even count, and no further than 2. Every chunk then starts at an even frame (the first
 * at its part's first frame, which pw_part_range keeps even; each next one after an even count,
 * or after the part's last frames), so a chunk of 8-byte pw_desc8 descriptors starts on a
 * 16-byte granule, as the 16-byte loads that stage them need: halving to an odd count (down
 * to one frame alone) put the next chunk's first descriptor 8 bytes into a granule.
 * Portable C subset (PW_DEVICE; host-compiled by host/chunk_halve_host.cpp for
 * gpu-kernels/tests/chunk_halve.rs). */
#ifndef PKTWARP_CHUNK_HALVE_CUH
#define PKTWARP_CHUNK_HALVE_CUH

#include "pktwarp_abi.h"

/* The least chunk pw_run_tx_chunked halves to (a pair that does not fit runs in place). */
#define PW_CHUNK_LEAST 2u

/* The next chunk size after `k` frames (k > PW_CHUNK_LEAST) did not fit: even, at least 2. */
PW_DEVICE uint32_t pw_chunk_halved(uint32_t k) {
    return ((k + 1u) / 2u + 1u) & ~1u;
}

#endif
