/* The inspect stage's multi-pattern prefilter in CUDA C: walks a payload through the flat
 * Aho-Corasick image that pktwarp_inspect::matcher::Image compiles (the layout is documented
 * there and in docs/inspect.md) and sets one bit per pattern that occurs; case-sensitive patterns
 * are verified against the payload's bytes (the automaton is case-folded). The Rust walker over
 * the same image is the reference; pipeline/inspect/tests/matcher_cuda_host.rs holds the two
 * equal through host/inspect_match_host.cpp. The image must have passed Image::from_words (the
 * walker trusts its bounds). Portable C subset (PW_DEVICE); the kernels only for the GPU. */
#ifndef PKTWARP_INSPECT_MATCH_CUH
#define PKTWARP_INSPECT_MATCH_CUH

#include "pktwarp_abi.h"

/* Header words (matcher::image::H_*). */
#define PW_IM_MAGIC 0x4D495750u
#define PW_IM_VERSION 1u
#define PW_IM_N_STATES 2
#define PW_IM_N_CLASSES 3
#define PW_IM_N_DENSE 4
#define PW_IM_N_PATTERNS 5
#define PW_IM_MAX_LEN 6
#define PW_IM_OFF_CLASS 7
#define PW_IM_OFF_DENSE 8
#define PW_IM_OFF_SPARSE_HDR 9
#define PW_IM_OFF_SPARSE 10
#define PW_IM_OFF_OUT_IDX 11
#define PW_IM_OFF_OUT 12
#define PW_IM_OFF_PAT 13
#define PW_IM_OFF_BYTES 14
#define PW_IM_FLAG 0x80000000u

/* The image's sections, read once per walk. */
typedef struct pw_im_view {
    const uint32_t *cls, *dense, *shdr, *sparse, *oidx, *out, *pat, *bytes;
    uint32_t n_dense, n_classes, n_patterns, max_len;
} pw_im_view;

PW_DEVICE pw_im_view pw_im_open(const uint32_t *img) {
    pw_im_view v;
    v.cls = img + img[PW_IM_OFF_CLASS];
    v.dense = img + img[PW_IM_OFF_DENSE];
    v.shdr = img + img[PW_IM_OFF_SPARSE_HDR];
    v.sparse = img + img[PW_IM_OFF_SPARSE];
    v.oidx = img + img[PW_IM_OFF_OUT_IDX];
    v.out = img + img[PW_IM_OFF_OUT];
    v.pat = img + img[PW_IM_OFF_PAT];
    v.bytes = img + img[PW_IM_OFF_BYTES];
    v.n_dense = img[PW_IM_N_DENSE];
    v.n_classes = img[PW_IM_N_CLASSES];
    v.n_patterns = img[PW_IM_N_PATTERNS];
    v.max_len = img[PW_IM_MAX_LEN];
    return v;
}

/* Words of one buffer's bitmap. */
PW_DEVICE uint32_t pw_im_bitmap_words(const uint32_t *img) { return (img[PW_IM_N_PATTERNS] + 31u) / 32u; }

/* State s on class c -> (has-outputs flag | next state). Ends: failure states are lower indices
 * and the dense states (the root among them) have full rows. */
PW_DEVICE uint32_t pw_im_step(const pw_im_view *v, uint32_t s, uint32_t c) {
    for (;;) {
        if (s < v->n_dense) return v->dense[s * v->n_classes + c];
        const uint32_t *h = v->shdr + 3u * (s - v->n_dense);
        const uint32_t *e = v->sparse + h[1];
        for (uint32_t k = 0; k < h[2]; k++)
            if ((e[k] & 0xffu) == c) return (e[k] & PW_IM_FLAG) | ((e[k] >> 8) & 0x7fffffu);
        s = h[0];
    }
}

/* Whether pattern p's original bytes end at `end` of buf. */
PW_DEVICE int pw_im_verify(const pw_im_view *v, uint32_t p, const uint8_t *buf, uint32_t end) {
    uint32_t off = v->pat[2u * p], len = v->pat[2u * p + 1u] & 0xffffu;
    if (end < len) return 0;
    const uint8_t *at = buf + (end - len);
    for (uint32_t k = 0; k < len; k++) {
        uint32_t o = off + k;
        if (((v->bytes[o >> 2] >> ((o & 3u) * 8u)) & 0xffu) != at[k]) return 0;
    }
    return 1;
}

/* Sets the bit of pattern p; `shared` bitmaps (several lanes on one buffer) take an atomic OR. */
PW_DEVICE void pw_im_set_bit(uint32_t *bitmap, uint32_t p, int shared) {
    uint32_t m = 1u << (p & 31u);
#if PW_GPU
    if (shared) {
        atomicOr(&bitmap[p >> 5], m);
        return;
    }
#else
    (void)shared;
#endif
    bitmap[p >> 5] |= m;
}

/* Walks buf[from..hi) from the root and sets the bit of every pattern that ends in [lo, hi).
 * from = max(lo - (max_len - 1), 0) makes the state at every end in [lo, hi) the whole-buffer
 * state as far as outputs go: a pattern ending there starts at or after `from`. */
PW_DEVICE void pw_inspect_match_range(const uint32_t *img, const uint8_t *buf, uint32_t lo, uint32_t hi,
                                      uint32_t *bitmap, int shared) {
    pw_im_view v = pw_im_open(img);
    uint32_t back = v.max_len > 0u ? v.max_len - 1u : 0u;
    uint32_t from = lo > back ? lo - back : 0u;
    uint32_t s = 0;
    for (uint32_t i = from; i < hi; i++) {
        uint32_t t = pw_im_step(&v, s, v.cls[buf[i]]);
        s = t & ~PW_IM_FLAG;
        if (!(t & PW_IM_FLAG) || i < lo) continue;
        for (uint32_t k = v.oidx[s]; k < v.oidx[s + 1u]; k++) {
            uint32_t e = v.out[k], p = e & ~PW_IM_FLAG;
            if (bitmap[p >> 5] & (1u << (p & 31u))) continue;
            if ((e & PW_IM_FLAG) && !pw_im_verify(&v, p, buf, i + 1u)) continue;
            pw_im_set_bit(bitmap, p, shared);
        }
    }
}

/* The set of patterns in buf[0..len) ORed into bitmap (one thread). */
PW_DEVICE void pw_inspect_match_set(const uint32_t *img, const uint8_t *buf, uint32_t len, uint32_t *bitmap) {
    pw_inspect_match_range(img, buf, 0u, len, bitmap, 0);
}

/* Every occurrence: the first `cap` as (pattern id, end offset); returns how many there were. */
PW_DEVICE uint32_t pw_inspect_find_all(const uint32_t *img, const uint8_t *buf, uint32_t len, uint32_t *ids,
                                       uint32_t *ends, uint32_t cap) {
    pw_im_view v = pw_im_open(img);
    uint32_t s = 0, n = 0;
    for (uint32_t i = 0; i < len; i++) {
        uint32_t t = pw_im_step(&v, s, v.cls[buf[i]]);
        s = t & ~PW_IM_FLAG;
        if (!(t & PW_IM_FLAG)) continue;
        for (uint32_t k = v.oidx[s]; k < v.oidx[s + 1u]; k++) {
            uint32_t e = v.out[k], p = e & ~PW_IM_FLAG;
            if ((e & PW_IM_FLAG) && !pw_im_verify(&v, p, buf, i + 1u)) continue;
            if (n < cap) {
                ids[n] = p;
                ends[n] = i + 1u;
            }
            n++;
        }
    }
    return n;
}

/* Lane `lane` of `lanes`' share [*lo, *hi) of a len-byte buffer (equal chunks, the last short). */
PW_DEVICE void pw_inspect_chunk(uint32_t len, uint32_t lane, uint32_t lanes, uint32_t *lo, uint32_t *hi) {
    uint32_t chunk = (len + lanes - 1u) / lanes;
    uint32_t a = lane * chunk, b = a + chunk;
    *lo = a < len ? a : len;
    *hi = b < len ? b : len;
}

/* Buffer i of a batch (bytes data[offsets[i] .. + lengths[i]]) into its bitmap row, zeroed
 * first: the body of one thread of pw_inspect_match_kernel. */
PW_DEVICE void pw_inspect_match_one(const uint32_t *img, const uint8_t *data, const uint32_t *offsets,
                                    const uint32_t *lengths, uint32_t i, uint32_t *bitmaps) {
    uint32_t words = pw_im_bitmap_words(img);
    uint32_t *row = bitmaps + (uint64_t)i * words;
    for (uint32_t w = 0; w < words; w++) row[w] = 0u;
    pw_inspect_match_set(img, data + offsets[i], lengths[i], row);
}

#if PW_GPU && !defined(PW_INSPECT_NO_KERNELS)
/* One thread per buffer: n buffers, bitmaps = n rows of pw_im_bitmap_words(image) words. */
extern "C" __global__ void __launch_bounds__(256) pw_inspect_match_kernel(const uint32_t *image, const uint8_t *data,
                                                                          const uint32_t *offsets, const uint32_t *lengths,
                                                                          uint32_t n, uint32_t *bitmaps) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) pw_inspect_match_one(image, data, offsets, lengths, i, bitmaps);
}

/* One warp per buffer (long payloads): each lane walks a 1/32 chunk starting max_len - 1 bytes
 * early and sets only the patterns ending in its chunk, so every end offset is one lane's. */
extern "C" __global__ void __launch_bounds__(256) pw_inspect_match_warp_kernel(const uint32_t *image, const uint8_t *data,
                                                                               const uint32_t *offsets, const uint32_t *lengths,
                                                                               uint32_t n, uint32_t *bitmaps) {
    uint32_t i = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31u;
    if (i >= n) return;
    uint32_t words = pw_im_bitmap_words(image);
    uint32_t *row = bitmaps + (uint64_t)i * words;
    for (uint32_t w = lane; w < words; w += 32u) row[w] = 0u;
    __syncwarp();
    uint32_t lo, hi;
    pw_inspect_chunk(lengths[i], lane, 32u, &lo, &hi);
    if (lo < hi) pw_inspect_match_range(image, data + offsets[i], lo, hi, row, 1);
}
#endif

#endif
