/* Stage `l2fwd` in CUDA C: MAC rewrite (pipeline/src/rewrite/l2fwd.rs). `swap` exchanges source
 * and destination, then `src` / `dst` (6 bytes each, or 0) are written. A frame shorter than 14
 * bytes is left alone (PW_RW_SKIPPED). Nothing else changes. */
#ifndef PKTWARP_L2FWD_CUH
#define PKTWARP_L2FWD_CUH

#include "rewrite.cuh"

PW_DEVICE uint32_t pw_l2fwd(uint8_t *f, uint32_t len, uint32_t swap, const uint8_t *src,
                            const uint8_t *dst) {
    if (len < 14u) return PW_RW_SKIPPED;
    if (swap) {
        for (uint32_t i = 0; i < 6u; i++) {
            uint8_t t = f[i];
            f[i] = f[6u + i];
            f[6u + i] = t;
        }
    }
    if (src)
        for (uint32_t i = 0; i < 6u; i++) f[6u + i] = src[i];
    if (dst)
        for (uint32_t i = 0; i < 6u; i++) f[i] = dst[i];
    return PW_RW_DONE;
}

#endif
