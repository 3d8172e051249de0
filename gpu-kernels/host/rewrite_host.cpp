// Host build of the rewrite stages (cuda/{l2fwd,ttl,vlan,route}.cuh; PW_DEVICE = static inline),
// for pipeline/tests/rewrite_cuda_host.rs, which holds them equal to pipeline::rewrite byte for byte.
#include "l2fwd.cuh"
#include "route.cuh"
#include "ttl.cuh"
#include "vlan.cuh"

extern "C" uint32_t pw_host_l2fwd(uint8_t *f, uint32_t len, uint32_t swap, const uint8_t *src,
                                  const uint8_t *dst) {
    return pw_l2fwd(f, len, swap, src, dst);
}

extern "C" uint32_t pw_host_ttl(uint8_t *f, uint32_t len, pw_packet_meta *m) { return pw_ttl(f, len, m); }

extern "C" uint32_t pw_host_dscp(uint8_t *f, uint32_t len, pw_packet_meta *m, uint32_t dscp) {
    return pw_dscp(f, len, m, dscp);
}

extern "C" uint32_t pw_host_vlan(uint8_t *f, uint32_t *len, uint32_t cap, pw_packet_meta *m,
                                 const pw_vlan_params *p) {
    return pw_vlan(f, len, cap, m, p);
}

extern "C" uint32_t pw_host_route(uint8_t *f, uint32_t len, const pw_packet_meta *m,
                                  const pw_route_tables *t, uint16_t *port) {
    return pw_route(f, len, m, t, port);
}
