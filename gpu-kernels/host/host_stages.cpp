// Host build of the CUDA stage code in gpu-kernels/ (PW_DEVICE = static inline here), so the
// differential tests and the fuzz target can hold it equal to the Rust stages without a GPU.
// Built by the pktwarp-kernels build.rs (feature `host`); called through pipeline::stage::parse::cuda_host.
#include "parse.cuh"

extern "C" void pw_host_parse(const uint8_t *frame, uint32_t len, pw_packet_meta *meta) {
    pw_parse(frame, len, meta);
}

extern "C" uint32_t pw_host_meta_size(void) { return (uint32_t)sizeof(pw_packet_meta); }

// The small-burst kernel's parse fast path (parse.cuh pw_parse_fast_key) and what it must equal:
// the key words of pw_acl_key_from_meta on pw_parse's metadata (acl.cuh).
#include "acl.cuh"

extern "C" uint32_t pw_host_parse_fast_key(const uint8_t *frame, uint32_t len, uint16_t port, uint32_t *kw) {
    return pw_parse_fast_key(frame, len, port, kw);
}

extern "C" void pw_host_acl_key_words_of_meta(const pw_packet_meta *meta, uint16_t port, uint32_t *kw) {
    pw_acl_key k;
    pw_acl_key_from_meta(meta, port, &k);
    pw_acl_key_words(&k, kw);
}
