// Host build of gpu-kernels/acl.cuh (PW_DEVICE = static inline off-GPU), exported for the Rust
// differential tests: the CUDA matcher must equal the Rust matcher on every key.
#include "acl.cuh"

extern "C" uint32_t pw_host_acl_classify(const uint32_t *image, const pw_acl_key *key) {
    return pw_acl_classify((const pw_acl_tables *)image, key);
}

extern "C" void pw_host_acl_key_from_meta(const pw_packet_meta *meta, uint16_t port_id,
                                          pw_acl_key *key) {
    pw_acl_key_from_meta(meta, port_id, key);
}

extern "C" uint32_t pw_host_acl_classify_lanes(const uint32_t *image, const pw_acl_key *key,
                                               uint32_t gsize) {
    return pw_acl_classify_lanes((const pw_acl_tables *)image, key, gsize);
}
