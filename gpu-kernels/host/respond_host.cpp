// Host build of the respond stage (cuda/respond.cuh; PW_DEVICE = static inline), for
// pipeline/tests/respond_cuda_host.rs, which holds it equal to pipeline::rewrite::respond.
#include "respond.cuh"

extern "C" uint32_t pw_host_respond(uint8_t *f, uint32_t *len, pw_packet_meta *m,
                                    const pw_respond_params *p, uint32_t *ctr) {
    return pw_respond(f, len, m, p, ctr);
}
