// Host build of the CUDA stage code in gpu-kernels/ (PW_DEVICE = static inline here), so the
// differential tests and the fuzz target can hold it equal to the Rust stages without a GPU.
// Built by pipeline/build.rs; called through pipeline::stage::parse::cuda_host.
#include "parse.cuh"

extern "C" void pw_host_parse(const uint8_t *frame, uint32_t len, pw_packet_meta *meta) {
    pw_parse(frame, len, meta);
}

extern "C" uint32_t pw_host_meta_size(void) { return (uint32_t)sizeof(pw_packet_meta); }
