/* Stage `respond` in CUDA C: ARP replies and ICMP / ICMPv6 echo replies for configured
 * addresses, written in place over the request (pipeline/src/rewrite/respond.rs: the rules, what
 * is not answered and why, and the Rust reference; pipeline/tests/respond_cuda_host.rs holds the
 * two equal byte for byte through host/respond_host.cpp). A reply is PW_RW_REPLY: the caller
 * sends it out of the ingress port; its length (no Ethernet padding) may be shorter than the
 * request's. Anything else is PW_RW_SKIPPED, unchanged. Portable C subset (PW_DEVICE). */
#ifndef PKTWARP_RESPOND_CUH
#define PKTWARP_RESPOND_CUH

#include "rewrite.cuh"

#define PW_RESPOND_MAX 8u  /* addresses of each family (pipeline::rewrite::respond::MAX_ADDRS) */
#define PW_RESPOND_TTL 64u /* TTL / hop limit of a reply */

/* Counter slots of the stage (pw_stage_counters.v[k]) and of respond.rs's COUNTER_NAMES + 1. */
#define PW_RESPOND_CTR_ARP 1u
#define PW_RESPOND_CTR_ICMP 2u
#define PW_RESPOND_CTR_ICMPV6 3u

/* pipeline::rewrite::respond::RespondParams (layout pinned by its test). Addresses as the meta
 * holds them: IPv4 one host-order word, IPv6 four big-endian-ordered words. */
typedef struct pw_respond_params {
    uint8_t mac[6];                   /*   0 our MAC: the source of every reply */
    uint16_t n_v4;                    /*   6 */
    uint16_t n_v6;                    /*   8 */
    uint16_t pad;                     /*  10 */
    uint32_t v4[PW_RESPOND_MAX];      /*  12 */
    uint32_t v6[PW_RESPOND_MAX][4];   /*  44 */
} pw_respond_params;
PW_STATIC_ASSERT(sizeof(pw_respond_params) == 172, "pw_respond_params size");

PW_DEVICE uint32_t pw_resp_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

PW_DEVICE int pw_resp_ours4(const pw_respond_params *p, uint32_t a) {
    uint32_t n = p->n_v4 < PW_RESPOND_MAX ? p->n_v4 : PW_RESPOND_MAX;
    for (uint32_t i = 0; i < n; i++)
        if (p->v4[i] == a) return 1;
    return 0;
}

PW_DEVICE int pw_resp_ours6(const pw_respond_params *p, const uint32_t *a) {
    uint32_t n = p->n_v6 < PW_RESPOND_MAX ? p->n_v6 : PW_RESPOND_MAX;
    for (uint32_t i = 0; i < n; i++)
        if (p->v6[i][0] == a[0] && p->v6[i][1] == a[1] && p->v6[i][2] == a[2] && p->v6[i][3] == a[3])
            return 1;
    return 0;
}

PW_DEVICE void pw_resp_swap(uint8_t *a, uint8_t *b, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        uint8_t t = a[i];
        a[i] = b[i];
        b[i] = t;
    }
}

PW_DEVICE void pw_resp_swap_meta_ips(pw_packet_meta *m) {
    for (uint32_t i = 0; i < 4u; i++) {
        uint32_t t = m->src_ip[i];
        m->src_ip[i] = m->dst_ip[i];
        m->dst_ip[i] = t;
    }
}

/* ICMP / ICMPv6 type change with the RFC 1624 checksum update (wire::icmp set_type_update_checksum). */
PW_DEVICE void pw_resp_icmp_type(uint8_t *h, uint32_t t) {
    uint32_t old = pw_rw_be16(h);
    uint32_t nw = (t << 8) | h[1];
    pw_rw_put16(h, nw);
    pw_rw_put16(h + 2, pw_rw_csum_update16(pw_rw_be16(h + 2), old, nw));
}

/* Ones' complement sum of big-endian 16-bit words added to acc (an odd tail byte is a high
 * byte: wire::checksum::sum); pw_resp_sum_ok: whether it folds to 0xFFFF (checksum::verify). */
PW_DEVICE uint64_t pw_resp_sum(uint64_t acc, const uint8_t *p, uint32_t n) {
    uint32_t i = 0;
    for (; i + 1u < n; i += 2u) acc += ((uint32_t)p[i] << 8) | p[i + 1u];
    if (i < n) acc += (uint32_t)p[i] << 8;
    return acc;
}

PW_DEVICE int pw_resp_sum_ok(uint64_t acc) {
    while (acc > 0xFFFFull) acc = (acc & 0xFFFFull) + (acc >> 16);
    return acc == 0xFFFFull;
}

/* The I/G bit: a multicast or broadcast Ethernet address. */
PW_DEVICE int pw_resp_group_mac(const uint8_t *a) { return a[0] & 1u; }

/* 255.255.255.255 or 224/4: no host's source (0.0.0.0 is checked apart: an ARP probe's sender). */
PW_DEVICE int pw_resp_bcast_mcast4(uint32_t a) { return a == 0xFFFFFFFFu || (a >> 28) == 0xEu; }

/* Whether the IPv6 packet at ip ends its journey here: the extension headers walk exactly to
 * the ICMPv6 header at l4 (offset from ip), no Routing header among them with segments left
 * (respond.rs final_destination; lengths as wire::ipv6::ExtHeader). */
PW_DEVICE int pw_resp_final6(const uint8_t *ip, uint32_t l4) {
    uint32_t next = ip[6], at = 40u;
    while (at < l4) {
        if (next != 0u && next != 43u && next != 44u && next != 51u && next != 60u) return 0;
        uint32_t room = l4 - at;
        if (room < (next == 44u ? 8u : 2u)) return 0;
        const uint8_t *h = ip + at;
        uint32_t hl = next == 44u ? 8u : next == 51u ? ((uint32_t)h[1] + 2u) * 4u : ((uint32_t)h[1] + 1u) * 8u;
        if (room < hl) return 0;
        if (next == 43u && h[3] != 0u) return 0;
        next = h[0];
        at += hl;
    }
    return at == l4 && next == 58u;
}

/* ARP request for one of ours -> reply; returns the counter slot or 0, *end: where the reply
 * ends, *to: its Ethernet destination (the request's sender hardware address). */
PW_DEVICE uint32_t pw_resp_arp(uint8_t *f, uint32_t len, pw_packet_meta *m,
                               const pw_respond_params *p, uint32_t *end, uint8_t *to) {
    uint32_t l3 = m->l3_offset;
    if (l3 > len || len - l3 < 8u) return 0;
    uint8_t *a = f + l3;
    uint32_t total = 8u + 2u * a[4] + 2u * a[5];
    if (len - l3 < total) return 0;
    if (pw_rw_be16(a) != 1u || a[4] != 6u || pw_rw_be16(a + 2) != 0x0800u || a[5] != 4u) return 0;
    uint32_t ours = pw_resp_be32(a + 24), sender = pw_resp_be32(a + 14);
    if (pw_rw_be16(a + 6) != 1u || !pw_resp_ours4(p, ours)) return 0;
    /* Sender 0.0.0.0 (a probe) is answered; sender = target is an announcement. */
    if (pw_resp_group_mac(a + 8) || pw_resp_bcast_mcast4(sender) || sender == ours) return 0;
    uint8_t sha[6], spa[4], tpa[4];
    for (uint32_t i = 0; i < 6u; i++) sha[i] = a[8u + i];
    for (uint32_t i = 0; i < 4u; i++) {
        spa[i] = a[14u + i];
        tpa[i] = a[24u + i];
    }
    pw_rw_put16(a + 6, 2u);
    for (uint32_t i = 0; i < 6u; i++) {
        a[8u + i] = p->mac[i];
        a[18u + i] = sha[i];
        to[i] = sha[i];
    }
    for (uint32_t i = 0; i < 4u; i++) {
        a[14u + i] = tpa[i];
        a[24u + i] = spa[i];
    }
    m->arp_oper = 2u;
    *end = l3 + 28u;
    uint32_t t = m->src_ip[0];
    m->src_ip[0] = m->dst_ip[0];
    m->dst_ip[0] = t;
    return PW_RESPOND_CTR_ARP;
}

/* ICMPv4 echo request to one of ours -> echo reply; returns the counter slot or 0, *end:
 * where the reply (the IP packet) ends. */
PW_DEVICE uint32_t pw_resp_echo4(uint8_t *f, uint32_t len, pw_packet_meta *m,
                                 const pw_respond_params *p, uint32_t *end) {
    if (!pw_resp_ours4(p, m->dst_ip[0])) return 0;
    uint32_t l3 = m->l3_offset, l4 = m->l4_offset;
    uint8_t *ip = pw_rw_ipv4(f, len, m);
    if (!ip) return 0;
    uint32_t hl = (uint32_t)(ip[0] & 0x0Fu) * 4u, total = pw_rw_be16(ip + 2);
    uint32_t src = pw_resp_be32(ip + 12);
    if (l4 != l3 + hl || total < hl + 8u || total > len - l3) return 0;
    if (!pw_resp_sum_ok(pw_resp_sum(0, ip, hl)) || src == 0u || pw_resp_bcast_mcast4(src)) return 0;
    if (!pw_resp_sum_ok(pw_resp_sum(0, f + l4, l3 + total - l4))) return 0;
    pw_resp_icmp_type(f + l4, 0u);
    /* Swapping the addresses leaves the header's sum as it was. */
    pw_resp_swap(ip + 12, ip + 16, 4u);
    uint32_t old = pw_rw_be16(ip + 8);
    uint32_t nw = (PW_RESPOND_TTL << 8) | ip[9];
    pw_rw_put16(ip + 8, nw);
    pw_rw_put16(ip + 10, pw_rw_csum_update16(pw_rw_be16(ip + 10), old, nw));
    m->icmp_type = 0u;
    m->ip_ttl = (uint8_t)PW_RESPOND_TTL;
    pw_resp_swap_meta_ips(m);
    *end = l3 + total;
    return PW_RESPOND_CTR_ICMP;
}

/* ICMPv6 echo request to one of ours -> echo reply; returns the counter slot or 0, *end:
 * where the reply (the IP packet) ends. */
PW_DEVICE uint32_t pw_resp_echo6(uint8_t *f, uint32_t len, pw_packet_meta *m,
                                 const pw_respond_params *p, uint32_t *end) {
    if (!pw_resp_ours6(p, m->dst_ip)) return 0;
    uint32_t l3 = m->l3_offset, l4 = m->l4_offset;
    uint8_t *ip = pw_rw_ipv6(f, len, m);
    if (!ip) return 0;
    uint32_t stop = l3 + 40u + pw_rw_be16(ip + 4);
    if (l4 < l3 + 40u || l4 + 8u > stop || stop > len) return 0;
    int unspecified = 1;
    for (uint32_t i = 0; i < 16u; i++)
        if (ip[8u + i] != 0u) unspecified = 0;
    if (unspecified || ip[8] == 0xFFu || !pw_resp_final6(ip, l4 - l3)) return 0;
    /* Pseudo header (RFC 8200 8.1): addresses, upper-layer length, next header 58. */
    uint64_t acc = pw_resp_sum(0, ip + 8, 32u) + (stop - l4) + 58u;
    if (!pw_resp_sum_ok(pw_resp_sum(acc, f + l4, stop - l4))) return 0;
    /* The pseudo header's sum does not change when the addresses swap. */
    pw_resp_icmp_type(f + l4, 129u);
    pw_resp_swap(ip + 8, ip + 24, 16u);
    ip[7] = (uint8_t)PW_RESPOND_TTL;
    m->icmp_type = 129u;
    m->ip_ttl = (uint8_t)PW_RESPOND_TTL;
    pw_resp_swap_meta_ips(m);
    *end = stop;
    return PW_RESPOND_CTR_ICMPV6;
}

/* The stage on one frame f[0 .. *len) (the caller skips frames already dropped). Returns
 * PW_RW_REPLY or PW_RW_SKIPPED; on a reply *len is the reply's length (never more); *ctr: the
 * counter slot of the reply (0 when none). */
PW_DEVICE uint32_t pw_respond(uint8_t *f, uint32_t *len, pw_packet_meta *m,
                              const pw_respond_params *p, uint32_t *ctr) {
    *ctr = 0u;
    const uint32_t n = *len;
    if (n < 14u || (m->flags & PW_MF_MPLS) || pw_resp_group_mac(f + 6)) return PW_RW_SKIPPED;
    uint32_t k = 0, end = 0;
    uint8_t to[6];
    for (uint32_t i = 0; i < 6u; i++) to[i] = f[6u + i];
    if (m->flags & PW_MF_ARP)
        k = pw_resp_arp(f, n, m, p, &end, to);
    else if (m->flags & PW_MF_FRAGMENT)
        k = 0;
    else if (m->ip_version == 4u && m->ip_proto == 1u && m->icmp_type == 8u)
        k = pw_resp_echo4(f, n, m, p, &end);
    else if (m->ip_version == 6u && m->ip_proto == 58u && m->icmp_type == 128u)
        k = pw_resp_echo6(f, n, m, p, &end);
    if (k == 0) return PW_RW_SKIPPED;
    for (uint32_t i = 0; i < 6u; i++) {
        f[i] = to[i];
        f[6u + i] = p->mac[i];
    }
    *len = end;
    m->frame_len = end;
    m->flags &= (uint16_t)~PW_MF_PADDED; /* nothing follows the packet now */
    *ctr = k;
    return PW_RW_REPLY;
}

#endif
