// Host build of the inspect prefilter (cuda/inspect_match.cuh; PW_DEVICE = static inline), for
// pipeline/inspect/tests/matcher_cuda_host.rs, which holds it equal to the Rust walker over the
// same image (pktwarp_inspect::matcher::Image).
#include "inspect_match.cuh"

extern "C" void pw_host_inspect_match_set(const uint32_t *img, const uint8_t *buf, uint32_t len, uint32_t *bitmap) {
    pw_inspect_match_set(img, buf, len, bitmap);
}

extern "C" uint32_t pw_host_inspect_find_all(const uint32_t *img, const uint8_t *buf, uint32_t len, uint32_t *ids,
                                             uint32_t *ends, uint32_t cap) {
    return pw_inspect_find_all(img, buf, len, ids, ends, cap);
}

// pw_inspect_match_warp_kernel's lanes, one after another: each lane's chunk into one bitmap.
extern "C" void pw_host_inspect_match_set_lanes(const uint32_t *img, const uint8_t *buf, uint32_t len,
                                                uint32_t lanes, uint32_t *bitmap) {
    for (uint32_t lane = 0; lane < lanes; lane++) {
        uint32_t lo, hi;
        pw_inspect_chunk(len, lane, lanes, &lo, &hi);
        if (lo < hi) pw_inspect_match_range(img, buf, lo, hi, bitmap, 1);
    }
}

// pw_inspect_match_kernel's threads, one after another.
extern "C" void pw_host_inspect_match_batch(const uint32_t *img, const uint8_t *data, const uint32_t *offsets,
                                            const uint32_t *lengths, uint32_t n, uint32_t *bitmaps) {
    for (uint32_t i = 0; i < n; i++) pw_inspect_match_one(img, data, offsets, lengths, i, bitmaps);
}
