/* The inspect stage's `pcre`: a walk of the flat DFA table that pipeline/inspect/src/pcre/table.rs
 * exports and walks on the CPU (the same table, the same steps; tests/eval_cuda_host.rs holds the
 * two equal). A table is uint32_t words:
 *   0 n_states (state 0 is dead), 1 stride (byte classes + 1; the last column is the end of input),
 *   2 the class of a '\n' that ends the subject (PW_PCRE_NO_CLASS: none), 3 the byte that stands
 *   for it in the DFA (a real one is fed as another non-word byte; PW_PCRE_NO_V: none),
 *   4..10 start states by what precedes the start (text start, '\n', '\r', word byte, other byte,
 *   the final '\n'), 10..74 the class of each byte (4 a word, little-endian), then the match
 *   bitmap (a bit a state), then n_states * stride transitions.
 * Matches are delayed by one byte: entering a match state on the byte at p (or on the end of
 * input, p = len) means a match ended at p. Work: one table read per subject byte, so a search
 * costs at most the buffer's length in steps. The host checks every table (Program::from_image,
 * pw_insp_image_check); the walk trusts it. */
#ifndef PKTWARP_INSPECT_PCRE_CUH
#define PKTWARP_INSPECT_PCRE_CUH

#include "pktwarp_abi.h"

#define PW_PCRE_HEADER 74u
#define PW_PCRE_CLASSES 10u
#define PW_PCRE_NO_CLASS 0xffffffffu
#define PW_PCRE_NO_V 256u
#define PW_PCRE_K_TEXT 0u
#define PW_PCRE_K_LF 1u
#define PW_PCRE_K_CR 2u
#define PW_PCRE_K_WORD 3u
#define PW_PCRE_K_OTHER 4u
#define PW_PCRE_K_TERM 5u

PW_DEVICE int pw_pcre_is_word(uint32_t b) {
    return (b >= '0' && b <= '9') || (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || b == '_';
}

/* The class of the subject's byte at p (the final '\n' is its own symbol where the table has one). */
PW_DEVICE uint32_t pw_pcre_class(const uint32_t *t, const uint8_t *buf, int64_t len, int64_t p) {
    uint32_t b = buf[p];
    if (b == '\n' && p + 1 == len && t[2] != PW_PCRE_NO_CLASS) return t[2];
    return (t[PW_PCRE_CLASSES + b / 4] >> (8 * (b % 4))) & 0xffu;
}

/* The start kind of the byte at p, or the text edge when p is outside [lo, len). */
PW_DEVICE uint32_t pw_pcre_kind(const uint32_t *t, const uint8_t *buf, int64_t len, int64_t lo, int64_t p) {
    if (p < lo || p >= len) return PW_PCRE_K_TEXT;
    uint32_t b = buf[p];
    if (t[3] != PW_PCRE_NO_V) {
        if (b == '\n' && p + 1 == len) return PW_PCRE_K_TERM;
        if (b == t[3]) return PW_PCRE_K_OTHER;
    }
    if (b == '\n') return PW_PCRE_K_LF;
    if (b == '\r') return PW_PCRE_K_CR;
    return pw_pcre_is_word(b) ? PW_PCRE_K_WORD : PW_PCRE_K_OTHER;
}

PW_DEVICE int pw_pcre_is_match(const uint32_t *t, uint32_t s) {
    return (t[PW_PCRE_HEADER + s / 32] >> (s % 32)) & 1u;
}

/* The end of the leftmost-first match in the subject buf[sub, len) searching from `from`
 * (table.rs find_end), -1 when none. */
PW_DEVICE_CALL int64_t pw_pcre_find_end(const uint32_t *t, const uint8_t *buf, int64_t len, int64_t sub,
                                   int64_t from) {
    uint32_t stride = t[1];
    const uint32_t *trans = t + PW_PCRE_HEADER + (t[0] + 31) / 32;
    uint32_t s = t[4 + pw_pcre_kind(t, buf, len, sub, from - 1)];
    int64_t last = -1;
    for (int64_t p = from; p < len; p++) {
        if (s == 0) return last;
        s = trans[(uint64_t)s * stride + pw_pcre_class(t, buf, len, p)];
        if (pw_pcre_is_match(t, s)) last = p;
    }
    if (s != 0 && pw_pcre_is_match(t, trans[(uint64_t)s * stride + stride - 1])) last = len;
    return last;
}

/* With a pattern's reverse table: the start of the match a search from `from` found ending at
 * `end` (table.rs find_start), -1 when none. */
PW_DEVICE_CALL int64_t pw_pcre_find_start(const uint32_t *t, const uint8_t *buf, int64_t len, int64_t sub,
                                     int64_t from, int64_t end) {
    uint32_t stride = t[1];
    const uint32_t *trans = t + PW_PCRE_HEADER + (t[0] + 31) / 32;
    uint32_t s = t[4 + pw_pcre_kind(t, buf, len, sub, end)];
    int64_t last = -1;
    for (int64_t p = end; p > from;) {
        if (s == 0) return last;
        p--;
        s = trans[(uint64_t)s * stride + pw_pcre_class(t, buf, len, p)];
        if (pw_pcre_is_match(t, s)) last = p + 1;
    }
    if (s == 0) return last;
    uint32_t edge = from > sub ? pw_pcre_class(t, buf, len, from - 1) : stride - 1;
    if (pw_pcre_is_match(t, trans[(uint64_t)s * stride + edge])) last = from;
    return last;
}

#if !defined(__CUDACC_RTC__)
/* Host side (pw_insp_image_check): whether the `words` words at t are a table every walk above
 * stays inside (table.rs Table::new). 1 if so; else 0 and the problem in why. */
#include <stdio.h>

static inline int pw_pcre_table_check(const uint32_t *t, uint64_t words, char *why, size_t cap) {
    if (words < PW_PCRE_HEADER) {
        snprintf(why, cap, "shorter than its header");
        return 0;
    }
    uint64_t n = t[0], stride = t[1];
    if (n == 0 || n > 4096 || stride < 2 || stride > 257) {
        snprintf(why, cap, "%llu states of stride %llu", (unsigned long long)n, (unsigned long long)stride);
        return 0;
    }
    uint64_t trans = PW_PCRE_HEADER + (n + 31) / 32;
    if (words != trans + n * stride) {
        snprintf(why, cap, "%llu words, its header says %llu", (unsigned long long)words,
                 (unsigned long long)(trans + n * stride));
        return 0;
    }
    uint32_t nc = (uint32_t)stride - 1;
    if ((t[2] != PW_PCRE_NO_CLASS && t[2] >= nc) || t[3] > PW_PCRE_NO_V ||
        ((t[3] == PW_PCRE_NO_V) != (t[2] == PW_PCRE_NO_CLASS))) {
        snprintf(why, cap, "final newline class or byte out of range");
        return 0;
    }
    for (uint32_t k = 4; k < PW_PCRE_CLASSES; k++)
        if (t[k] >= n) {
            snprintf(why, cap, "a start state out of range");
            return 0;
        }
    for (uint32_t b = 0; b < 256; b++)
        if (((t[PW_PCRE_CLASSES + b / 4] >> (8 * (b % 4))) & 0xffu) >= nc) {
            snprintf(why, cap, "a byte class out of range");
            return 0;
        }
    for (uint64_t k = trans; k < words; k++)
        if (t[k] >= n || (k < trans + stride && t[k] != 0)) {
            snprintf(why, cap, "a transition out of range (or state 0 is not dead)");
            return 0;
        }
    if (t[PW_PCRE_HEADER] & 1u) {
        snprintf(why, cap, "state 0 is not the dead state");
        return 0;
    }
    return 1;
}
#endif

#endif
