/* Stage `ttl` in CUDA C (pipeline/src/rewrite/ttl.rs): decrement the outer IPv4 TTL (header
 * checksum updated incrementally, RFC 1624) or IPv6 hop limit; a frame arriving with 0 or 1 is
 * PW_RW_DROP_TTL_EXPIRED, unchanged. Not under MPLS, not without IP: PW_RW_SKIPPED. Also the
 * `dscp` rewrite (pipeline/src/rewrite/dscp.rs), which selects the same header. */
#ifndef PKTWARP_TTL_CUH
#define PKTWARP_TTL_CUH

#include "rewrite.cuh"

PW_DEVICE uint32_t pw_ttl(uint8_t *f, uint32_t len, pw_packet_meta *m) {
    if (m->flags & PW_MF_MPLS) return PW_RW_SKIPPED;
    if (m->ip_version == 4u) {
        uint8_t *ip = pw_rw_ipv4(f, len, m);
        if (!ip) return PW_RW_SKIPPED;
        if (ip[8] <= 1u) return PW_RW_DROP_TTL_EXPIRED;
        uint32_t old = pw_rw_be16(ip + 8);
        ip[8] = (uint8_t)(ip[8] - 1u);
        pw_rw_put16(ip + 10, pw_rw_csum_update16(pw_rw_be16(ip + 10), old, pw_rw_be16(ip + 8)));
        m->ip_ttl = ip[8];
        return PW_RW_DONE;
    }
    if (m->ip_version == 6u) {
        uint8_t *ip = pw_rw_ipv6(f, len, m);
        if (!ip) return PW_RW_SKIPPED;
        if (ip[7] <= 1u) return PW_RW_DROP_TTL_EXPIRED;
        ip[7] = (uint8_t)(ip[7] - 1u);
        m->ip_ttl = ip[7];
        return PW_RW_DONE;
    }
    return PW_RW_SKIPPED;
}

/* DSCP (0..63) into the TOS / traffic class, ECN bits kept; IPv4 checksum updated. */
PW_DEVICE uint32_t pw_dscp(uint8_t *f, uint32_t len, pw_packet_meta *m, uint32_t dscp) {
    if (m->flags & PW_MF_MPLS) return PW_RW_SKIPPED;
    if (m->ip_version == 4u) {
        uint8_t *ip = pw_rw_ipv4(f, len, m);
        if (!ip) return PW_RW_SKIPPED;
        uint32_t old = pw_rw_be16(ip);
        ip[1] = (uint8_t)(((dscp & 0x3Fu) << 2) | (ip[1] & 3u));
        pw_rw_put16(ip + 10, pw_rw_csum_update16(pw_rw_be16(ip + 10), old, pw_rw_be16(ip)));
        m->ip_tos = ip[1];
        return PW_RW_DONE;
    }
    if (m->ip_version == 6u) {
        uint8_t *ip = pw_rw_ipv6(f, len, m);
        if (!ip) return PW_RW_SKIPPED;
        uint32_t tc = (((uint32_t)ip[0] & 0x0Fu) << 4) | (ip[1] >> 4);
        tc = ((dscp & 0x3Fu) << 2) | (tc & 3u);
        ip[0] = (uint8_t)(0x60u | (tc >> 4));
        ip[1] = (uint8_t)(((tc & 0x0Fu) << 4) | (ip[1] & 0x0Fu));
        m->ip_tos = (uint8_t)tc;
        return PW_RW_DONE;
    }
    return PW_RW_SKIPPED;
}

#endif
