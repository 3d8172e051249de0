/* The 16-byte granules a chunk of a slot's descriptors is staged from (kernels_tx_ring.cu,
 * pw_run_tx_chunked): a chunk of pw_desc8 (8 bytes) may start at an odd frame (a chunk halved
 * to fit the stage, down to one frame, moves the next chunk's start by an odd count), so its
 * first descriptor can lie 8 bytes into a granule; a 16-byte load from there would be
 * misaligned. The window starts at the granule that holds the first descriptor and the
 * descriptors are read `skew` bytes into it. Portable C subset (PW_DEVICE; host-compiled by
 * host/desc_window_host.cpp for gpu-kernels/tests/desc_window.rs). */
#ifndef PKTWARP_DESC_WINDOW_CUH
#define PKTWARP_DESC_WINDOW_CUH

#include "pktwarp_abi.h"

typedef struct pw_desc_window {
    uint32_t first;    /* byte offset of the first granule (a multiple of 16 when `at` is) */
    uint32_t granules; /* 16-byte granules to load */
    uint32_t skew;     /* where descriptor c0 lies in the window (0, or 8 for pw_desc8) */
} pw_desc_window;

/* Descriptors [c0, c0 + k) of `dsz` bytes each, in an array that starts at byte `at`. */
PW_DEVICE pw_desc_window pw_desc_window_of(uint32_t at, uint32_t c0, uint32_t k, uint32_t dsz) {
    const uint32_t start = at + c0 * dsz;
    pw_desc_window w;
    w.skew = start & 15u;
    w.first = start - w.skew;
    w.granules = (w.skew + k * dsz + 15u) / 16u;
    return w;
}

#endif
