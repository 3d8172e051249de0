/* MurmurHash3 x86_32 of ten 32-bit words (its block mix and finaliser, length 40 bytes): the hash
 * of the flow table's keys (flow.cuh) and the rate-limit table's keys (rate_limit.cuh). Its Rust
 * twin is pktwarp_flow::key::murmur3_words; the tables' host-compiled tests hold the two equal.
 * Portable C subset (PW_DEVICE). */
#ifndef PKTWARP_MURMUR3_CUH
#define PKTWARP_MURMUR3_CUH

#include "pktwarp_abi.h"

PW_DEVICE uint32_t pw_murmur3_rotl(uint32_t x, uint32_t r) { return (x << r) | (x >> (32u - r)); }

PW_DEVICE uint32_t pw_murmur3_words(const uint32_t w[10], uint32_t seed) {
    uint32_t h = seed;
    for (uint32_t i = 0; i < 10u; i++) {
        uint32_t x = w[i] * 0xcc9e2d51u;
        x = pw_murmur3_rotl(x, 15) * 0x1b873593u;
        h = pw_murmur3_rotl(h ^ x, 13) * 5u + 0xe6546b64u;
    }
    h ^= 40u;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    return h ^ (h >> 16);
}

#endif /* PKTWARP_MURMUR3_CUH */
