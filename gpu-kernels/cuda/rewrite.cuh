/* What the rewrite stages (l2fwd.cuh, ttl.cuh, vlan.cuh, route.cuh) share: their outcome codes
 * and the RFC 1624 checksum update. The Rust reference is pipeline/src/rewrite/ (module docs:
 * the rules); pipeline/tests/rewrite_cuda_host.rs holds the two equal byte for byte through
 * host/rewrite_host.cpp. Portable C subset (PW_DEVICE), as parse.cuh. */
#ifndef PKTWARP_REWRITE_CUH
#define PKTWARP_REWRITE_CUH

#include "pktwarp_abi.h"

/* pipeline::rewrite::Outcome */
#define PW_RW_DONE 0u
#define PW_RW_SKIPPED 1u
#define PW_RW_FORWARD 2u
#define PW_RW_DROP_TTL_EXPIRED 3u /* proposed drop reason `ttl_expired` */
#define PW_RW_DROP_NO_ROUTE 4u    /* proposed drop reason `no_route` */
#define PW_RW_DROP_NO_ROOM 5u     /* vlan push without 4 bytes of room (counted as `too_long`) */
#define PW_RW_REPLY 6u            /* respond: the frame is the reply, out of the ingress port */

PW_DEVICE uint32_t pw_rw_be16(const uint8_t *p) { return ((uint32_t)p[0] << 8) | p[1]; }

PW_DEVICE void pw_rw_put16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') for one changed 16-bit word (wire::checksum::update16). */
PW_DEVICE uint32_t pw_rw_csum_update16(uint32_t hc, uint32_t old, uint32_t nw) {
    uint32_t s = (~hc & 0xFFFFu) + (~old & 0xFFFFu) + (nw & 0xFFFFu);
    while (s > 0xFFFFu) s = (s & 0xFFFFu) + (s >> 16);
    return ~s & 0xFFFFu;
}

/* The outer IPv4 header at meta->l3_offset, checked as wire::ipv4::Packet::new_checked does
 * (version 4, IHL >= 5, total length >= IHL * 4, options present); 0 when it is not one. */
PW_DEVICE uint8_t *pw_rw_ipv4(uint8_t *f, uint32_t len, const pw_packet_meta *m) {
    uint32_t l3 = m->l3_offset;
    if (l3 > len || len - l3 < 20u) return 0;
    uint8_t *ip = f + l3;
    uint32_t hl = (uint32_t)(ip[0] & 0x0Fu) * 4u;
    if ((ip[0] >> 4) != 4u || hl < 20u || pw_rw_be16(ip + 2) < hl || len - l3 < hl) return 0;
    return ip;
}

/* The outer IPv6 header (wire::ipv6::Packet::new_checked: 40 bytes, version 6), or 0. */
PW_DEVICE uint8_t *pw_rw_ipv6(uint8_t *f, uint32_t len, const pw_packet_meta *m) {
    uint32_t l3 = m->l3_offset;
    if (l3 > len || len - l3 < 40u) return 0;
    uint8_t *ip = f + l3;
    return (ip[0] >> 4) == 6u ? ip : 0;
}

#endif
