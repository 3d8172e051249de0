/* Stage `parse` in CUDA C: one frame in, one pw_packet_meta out.
 *
 * The same algorithm, step for step, as the Rust reference pipeline/src/stage/parse.rs (read its
 * module documentation for the rules: what is parsed, lengths against the frame, error offsets,
 * payload_offset, inner errors). Written in the C++ subset that compiles for the GPU (nvcc /
 * NVRTC, PW_DEVICE = __device__ __forceinline__) and for the host (PW_DEVICE = static inline), so
 * pipeline/tests/parse_cuda_host.rs and the fuzz target hold it equal to the Rust parser byte for
 * byte without a GPU. Any change here must be made there too.
 *
 * Every read is preceded by a length check against `len` (or a shorter bound: the IP packet, the
 * UDP datagram, the GTP-U message); offsets are uint32_t and never exceed `len`.
 */
#ifndef PKTWARP_PARSE_CUH
#define PKTWARP_PARSE_CUH

#include "pktwarp_abi.h"

#define PW_ET_IPV4 0x0800u
#define PW_ET_ARP 0x0806u
#define PW_ET_VLAN 0x8100u
#define PW_ET_IPV6 0x86DDu
#define PW_ET_MPLS_UC 0x8847u
#define PW_ET_MPLS_MC 0x8848u
#define PW_ET_QINQ 0x88A8u
#define PW_ET_QINQ_OLD 0x9100u
#define PW_ET_ECPRI 0xAEFEu
#define PW_ET_MIN 0x0600u

#define PW_IPPROTO_ICMP 1u
#define PW_IPPROTO_TCP 6u
#define PW_IPPROTO_UDP 17u
#define PW_IPPROTO_ICMPV6 58u
#define PW_IPPROTO_SCTP 132u

#define PW_IP6_HOPOPTS 0u
#define PW_IP6_ROUTING 43u
#define PW_IP6_FRAGMENT 44u
#define PW_IP6_AH 51u
#define PW_IP6_DSTOPTS 60u

/* What the IP layer found (outer or inner); mirrors parse.rs `Ip`. */
typedef struct pw_ip_info {
    uint8_t version, proto, tos, ttl;
    uint32_t src[4], dst[4];
    uint16_t frag_offset;
    uint16_t flags;
    uint32_t frag_id;
    uint32_t hdr_end; /* first byte after the IP header and its extensions */
    uint32_t ip_end;  /* first byte after the IP packet */
} pw_ip_info;

/* What the L4 layer found; mirrors parse.rs `L4`. */
typedef struct pw_l4_info {
    uint32_t present;
    uint16_t src_port, dst_port, tcp_flags;
    uint8_t icmp_type, icmp_code;
    uint32_t hdr_end;
    uint32_t udp_end;
} pw_l4_info;

/* At least n bytes from off within len. */
PW_DEVICE bool pw_has(uint32_t len, uint32_t off, uint32_t n) { return off <= len && len - off >= n; }

PW_DEVICE uint32_t pw_rd16(const uint8_t *p, uint32_t off) { return ((uint32_t)p[off] << 8) | p[off + 1]; }

PW_DEVICE uint32_t pw_rd32(const uint8_t *p, uint32_t off) {
    return ((uint32_t)p[off] << 24) | ((uint32_t)p[off + 1] << 16) | ((uint32_t)p[off + 2] << 8) | p[off + 3];
}

PW_DEVICE bool pw_is_vlan(uint32_t t) { return t == PW_ET_VLAN || t == PW_ET_QINQ || t == PW_ET_QINQ_OLD; }

PW_DEVICE bool pw_is_ip6_ext(uint32_t nh) {
    return nh == PW_IP6_HOPOPTS || nh == PW_IP6_ROUTING || nh == PW_IP6_FRAGMENT || nh == PW_IP6_AH ||
           nh == PW_IP6_DSTOPTS;
}

/* Returns 0 (ok) or a status; *eoff gets the error offset. */
#define PW_FAIL(s, o)                                                                                          \
    do {                                                                                                       \
        *eoff = (o);                                                                                           \
        return (uint16_t)(s);                                                                                  \
    } while (0)

/* Ethernet header and VLAN tags at `start`; records the tags when `m` is not null (outer frame). */
PW_DEVICE uint16_t pw_walk_l2(const uint8_t *f, uint32_t len, uint32_t start, pw_packet_meta *m, uint32_t *et_out,
                              uint32_t *l3_out, uint32_t *eoff) {
    if (!pw_has(len, start, 14u)) PW_FAIL(PW_PARSE_ETH_TRUNCATED, start);
    uint32_t et = pw_rd16(f, start + 12u);
    uint32_t off = start + 14u;
    uint32_t count = 0;
    while (pw_is_vlan(et)) {
        if (count == PW_MAX_VLAN_WALK) PW_FAIL(PW_PARSE_VLAN_TOO_MANY, off);
        if (!pw_has(len, off, 4u)) PW_FAIL(PW_PARSE_VLAN_TRUNCATED, off);
        if (m) {
            if (count < PW_MAX_VLAN) m->vlan_tci[count] = (uint16_t)pw_rd16(f, off);
            m->vlan_count = (uint8_t)(count + 1u);
            m->flags |= (uint16_t)(count >= PW_MAX_VLAN ? (PW_MF_VLAN | PW_MF_VLAN_EXTRA) : PW_MF_VLAN);
        }
        count++;
        et = pw_rd16(f, off + 2u);
        off += 4u;
    }
    *et_out = et;
    *l3_out = off;
    return 0;
}

PW_DEVICE void pw_frag_flags(pw_ip_info *ip, uint32_t offset, bool more) {
    if (more) ip->flags |= (uint16_t)(PW_MF_FRAGMENT | PW_MF_MORE_FRAGMENTS);
    if (offset != 0u) ip->flags |= (uint16_t)(PW_MF_FRAGMENT | PW_MF_LATER_FRAGMENT);
}

/* IPv4 / IPv6 header and IPv6 extension chain at `off`; `len` is where the IP packet must end at
 * the latest. `ip` is filled as far as the header allows even on error. */
PW_DEVICE uint16_t pw_parse_ip(const uint8_t *b, uint32_t len, uint32_t off, uint32_t version, pw_ip_info *ip,
                               uint32_t *eoff) {
    if (version == 4u) {
        if (!pw_has(len, off, 20u)) PW_FAIL(PW_PARSE_IPV4_TRUNCATED, off);
        if ((b[off] >> 4) != 4u) PW_FAIL(PW_PARSE_IPV4_BAD_VERSION, off);
        uint32_t hl = (uint32_t)(b[off] & 0x0Fu) * 4u;
        if (hl < 20u) PW_FAIL(PW_PARSE_IPV4_BAD_IHL, off);
        uint32_t total = pw_rd16(b, off + 2u);
        if (total < hl) PW_FAIL(PW_PARSE_IPV4_BAD_TOTAL_LEN, off + 2u);
        if (!pw_has(len, off, hl)) PW_FAIL(PW_PARSE_IPV4_TRUNCATED, off);
        ip->version = 4;
        ip->proto = b[off + 9u];
        ip->tos = b[off + 1u];
        ip->ttl = b[off + 8u];
        ip->src[0] = pw_rd32(b, off + 12u);
        ip->dst[0] = pw_rd32(b, off + 16u);
        ip->frag_id = pw_rd16(b, off + 4u);
        uint32_t ff = pw_rd16(b, off + 6u);
        ip->frag_offset = (uint16_t)(ff & 0x1FFFu);
        if (hl > 20u) ip->flags |= (uint16_t)PW_MF_IP_OPTIONS;
        pw_frag_flags(ip, ff & 0x1FFFu, (ff & 0x2000u) != 0u);
        ip->hdr_end = off + hl;
        ip->ip_end = off + total;
        if (ip->ip_end > len) PW_FAIL(PW_PARSE_IPV4_LEN_EXCEEDS_FRAME, off + 2u);
    } else {
        if (!pw_has(len, off, 40u)) PW_FAIL(PW_PARSE_IPV6_TRUNCATED, off);
        if ((b[off] >> 4) != 6u) PW_FAIL(PW_PARSE_IPV6_BAD_VERSION, off);
        ip->version = 6;
        ip->proto = b[off + 6u];
        ip->tos = (uint8_t)(pw_rd16(b, off) >> 4);
        ip->ttl = b[off + 7u];
        for (uint32_t i = 0; i < 4u; i++) {
            ip->src[i] = pw_rd32(b, off + 8u + 4u * i);
            ip->dst[i] = pw_rd32(b, off + 24u + 4u * i);
        }
        ip->hdr_end = off + 40u;
        uint32_t plen = pw_rd16(b, off + 4u);
        ip->ip_end = plen == 0u ? len : ip->hdr_end + plen;
        if (ip->ip_end > len) PW_FAIL(PW_PARSE_IPV6_LEN_EXCEEDS_FRAME, off + 4u);
        uint32_t end = ip->ip_end;
        uint32_t n = 0;
        while (pw_is_ip6_ext(ip->proto)) {
            uint32_t cur = ip->hdr_end;
            if (n == PW_MAX_IPV6_EXT) PW_FAIL(PW_PARSE_IPV6_EXT_TOO_MANY, cur);
            ip->flags |= (uint16_t)PW_MF_IP_OPTIONS;
            uint32_t kind = ip->proto;
            if (!pw_has(end, cur, kind == PW_IP6_FRAGMENT ? 8u : 2u)) PW_FAIL(PW_PARSE_IPV6_EXT_TRUNCATED, cur);
            uint32_t hl = kind == PW_IP6_FRAGMENT ? 8u
                          : kind == PW_IP6_AH     ? ((uint32_t)b[cur + 1u] + 2u) * 4u
                                                  : ((uint32_t)b[cur + 1u] + 1u) * 8u;
            if (!pw_has(end, cur, hl)) PW_FAIL(PW_PARSE_IPV6_EXT_TRUNCATED, cur);
            n++;
            ip->proto = b[cur];
            ip->hdr_end = cur + hl;
            if (kind == PW_IP6_FRAGMENT) {
                uint32_t fo = pw_rd16(b, cur + 2u);
                ip->frag_offset = (uint16_t)(fo >> 3);
                ip->frag_id = pw_rd32(b, cur + 4u);
                pw_frag_flags(ip, fo >> 3, (fo & 1u) != 0u);
                if ((fo >> 3) != 0u) break; /* later fragment: the rest is data */
            }
        }
    }
    if (ip->ip_end < len) ip->flags |= (uint16_t)PW_MF_PADDED;
    return 0;
}

/* L4 header at `off`; `len` ends with the IP packet. check_udp_len is false in fragments. */
PW_DEVICE uint16_t pw_parse_l4(const uint8_t *b, uint32_t len, uint32_t off, uint32_t proto, bool check_udp_len,
                               pw_l4_info *l4, uint32_t *eoff) {
    if (proto == PW_IPPROTO_TCP) {
        if (!pw_has(len, off, 20u)) PW_FAIL(PW_PARSE_TCP_TRUNCATED, off);
        uint32_t hl = (uint32_t)(b[off + 12u] >> 4) * 4u;
        if (hl < 20u) PW_FAIL(PW_PARSE_TCP_BAD_DATA_OFFSET, off + 12u);
        if (!pw_has(len, off, hl)) PW_FAIL(PW_PARSE_TCP_TRUNCATED, off);
        l4->present = 1;
        l4->src_port = (uint16_t)pw_rd16(b, off);
        l4->dst_port = (uint16_t)pw_rd16(b, off + 2u);
        l4->tcp_flags = (uint16_t)((((uint32_t)b[off + 12u] & 1u) << 8) | b[off + 13u]);
        l4->hdr_end = off + hl;
    } else if (proto == PW_IPPROTO_UDP) {
        if (!pw_has(len, off, 8u)) PW_FAIL(PW_PARSE_UDP_TRUNCATED, off);
        l4->present = 1;
        l4->src_port = (uint16_t)pw_rd16(b, off);
        l4->dst_port = (uint16_t)pw_rd16(b, off + 2u);
        l4->hdr_end = off + 8u;
        l4->udp_end = len;
        if (check_udp_len) {
            uint32_t ulen = pw_rd16(b, off + 4u);
            if (ulen < 8u || off + ulen > len) PW_FAIL(PW_PARSE_UDP_BAD_LENGTH, off + 4u);
            l4->udp_end = off + ulen;
        }
    } else if (proto == PW_IPPROTO_ICMP || proto == PW_IPPROTO_ICMPV6) {
        if (!pw_has(len, off, 8u))
            PW_FAIL(proto == PW_IPPROTO_ICMP ? PW_PARSE_ICMP_TRUNCATED : PW_PARSE_ICMPV6_TRUNCATED, off);
        l4->present = 1;
        l4->icmp_type = b[off];
        l4->icmp_code = b[off + 1u];
        l4->hdr_end = off + 8u;
    } else if (proto == PW_IPPROTO_SCTP) {
        if (!pw_has(len, off, 12u)) PW_FAIL(PW_PARSE_SCTP_TRUNCATED, off);
        l4->present = 1;
        l4->src_port = (uint16_t)pw_rd16(b, off);
        l4->dst_port = (uint16_t)pw_rd16(b, off + 2u);
        l4->hdr_end = off + 12u;
    }
    return 0;
}

PW_DEVICE void pw_ip_info_zero(pw_ip_info *ip) {
    ip->version = ip->proto = ip->tos = ip->ttl = 0;
    for (uint32_t i = 0; i < 4u; i++) ip->src[i] = ip->dst[i] = 0;
    ip->frag_offset = 0;
    ip->flags = 0;
    ip->frag_id = 0;
    ip->hdr_end = ip->ip_end = 0;
}

PW_DEVICE void pw_l4_info_zero(pw_l4_info *l4) {
    l4->present = 0;
    l4->src_port = l4->dst_port = l4->tcp_flags = 0;
    l4->icmp_type = l4->icmp_code = 0;
    l4->hdr_end = l4->udp_end = 0;
}

PW_DEVICE uint16_t pw_inner(uint16_t s) { return s ? (uint16_t)(s | PW_PARSE_INNER) : (uint16_t)0; }

/* Inner IPv4/IPv6 + L4 of a tunnel; `len` ends with the tunnel payload. */
PW_DEVICE_CALL uint16_t pw_inner_ip(const uint8_t *b, uint32_t len, uint32_t off, uint32_t version, pw_packet_meta *m,
                               uint32_t *eoff) {
    m->inner_l3_offset = (uint16_t)off;
    pw_ip_info ip;
    pw_ip_info_zero(&ip);
    uint16_t r = pw_parse_ip(b, len, off, version, &ip, eoff);
    m->inner_ip_version = ip.version;
    m->inner_ip_proto = ip.proto;
    for (uint32_t i = 0; i < 4u; i++) {
        m->inner_src_ip[i] = ip.src[i];
        m->inner_dst_ip[i] = ip.dst[i];
    }
    bool fragment = (ip.flags & PW_MF_FRAGMENT) != 0u;
    if (fragment) m->flags |= (uint16_t)PW_MF_INNER_FRAGMENT;
    if (r) return pw_inner(r);
    if (ip.flags & PW_MF_LATER_FRAGMENT) return 0;
    pw_l4_info l4;
    pw_l4_info_zero(&l4);
    r = pw_parse_l4(b, ip.ip_end <= len ? ip.ip_end : len, ip.hdr_end, ip.proto, !fragment, &l4, eoff);
    if (l4.present) {
        m->flags |= (uint16_t)PW_MF_INNER_L4;
        m->inner_l4_offset = (uint16_t)ip.hdr_end;
        m->inner_src_port = l4.src_port;
        m->inner_dst_port = l4.dst_port;
        m->inner_tcp_flags = l4.tcp_flags;
    }
    return pw_inner(r);
}

PW_DEVICE_CALL uint16_t pw_parse_vxlan(const uint8_t *b, uint32_t len, uint32_t off, pw_packet_meta *m, uint32_t *eoff) {
    if (!pw_has(len, off, 8u)) PW_FAIL(PW_PARSE_VXLAN_TRUNCATED, off);
    m->flags |= (uint16_t)PW_MF_TUNNEL;
    m->tunnel_type = (uint8_t)PW_TUNNEL_VXLAN;
    m->tunnel_id = pw_rd32(b, off + 4u) >> 8;
    uint32_t start = off + 8u;
    m->payload_offset = (uint16_t)start;
    uint32_t et = 0, l3 = 0;
    uint16_t r = pw_walk_l2(b, len, start, (pw_packet_meta *)0, &et, &l3, eoff);
    if (r) return pw_inner(r);
    m->inner_l3_offset = (uint16_t)l3;
    if (et == PW_ET_IPV4) return pw_inner_ip(b, len, l3, 4u, m, eoff);
    if (et == PW_ET_IPV6) return pw_inner_ip(b, len, l3, 6u, m, eoff);
    return 0;
}

PW_DEVICE_CALL uint16_t pw_parse_gtpu(const uint8_t *b, uint32_t len, uint32_t off, pw_packet_meta *m, uint32_t *eoff) {
    if (!pw_has(len, off, 8u)) PW_FAIL(PW_PARSE_GTPU_TRUNCATED, off);
    uint32_t flags = b[off];
    if ((flags >> 5) != 1u || (flags & 0x10u) == 0u) PW_FAIL(PW_PARSE_GTPU_BAD_HEADER, off);
    uint32_t hl = (flags & 0x07u) ? 12u : 8u;
    if (!pw_has(len, off, hl)) PW_FAIL(PW_PARSE_GTPU_TRUNCATED, off);
    m->flags |= (uint16_t)PW_MF_TUNNEL;
    m->tunnel_type = (uint8_t)PW_TUNNEL_GTPU;
    m->tunnel_id = pw_rd32(b, off + 4u);
    uint32_t end = off + 8u + pw_rd16(b, off + 2u);
    if (end > len || off + hl > end) PW_FAIL(PW_PARSE_GTPU_BAD_LENGTH, off + 2u);
    uint32_t cur = off + hl;
    uint32_t next = (flags & 0x04u) ? b[off + 11u] : 0u;
    uint32_t n = 0;
    while (next != 0u) {
        if (n == PW_MAX_GTPU_EXT) PW_FAIL(PW_PARSE_GTPU_BAD_EXT, cur);
        if (!pw_has(end, cur, 1u)) PW_FAIL(PW_PARSE_GTPU_TRUNCATED, cur);
        uint32_t elen = (uint32_t)b[cur] * 4u;
        if (elen == 0u) PW_FAIL(PW_PARSE_GTPU_BAD_EXT, cur);
        if (!pw_has(end, cur, elen)) PW_FAIL(PW_PARSE_GTPU_TRUNCATED, cur);
        n++;
        next = b[cur + elen - 1u];
        cur += elen;
    }
    m->payload_offset = (uint16_t)cur;
    if (b[off + 1u] != 0xFFu) return 0; /* only a T-PDU carries an IP packet */
    if (cur < end) {
        uint32_t nib = b[cur] >> 4;
        if (nib == 4u) return pw_inner_ip(b, end, cur, 4u, m, eoff);
        if (nib == 6u) return pw_inner_ip(b, end, cur, 6u, m, eoff);
    }
    return 0;
}

PW_DEVICE uint16_t pw_outer_ip(const uint8_t *f, uint32_t len, uint32_t off, uint32_t version, pw_packet_meta *m,
                               uint32_t *eoff) {
    pw_ip_info ip;
    pw_ip_info_zero(&ip);
    uint16_t r = pw_parse_ip(f, len, off, version, &ip, eoff);
    m->ip_version = ip.version;
    m->ip_proto = ip.proto;
    m->ip_tos = ip.tos;
    m->ip_ttl = ip.ttl;
    for (uint32_t i = 0; i < 4u; i++) {
        m->src_ip[i] = ip.src[i];
        m->dst_ip[i] = ip.dst[i];
    }
    m->frag_offset = ip.frag_offset;
    m->frag_id = ip.frag_id;
    m->flags |= ip.flags;
    if (ip.version != 0u) m->payload_offset = (uint16_t)ip.hdr_end;
    if (r) return r;
    if (ip.flags & PW_MF_LATER_FRAGMENT) return 0;
    uint32_t pkt = ip.ip_end;
    bool fragment = (ip.flags & PW_MF_FRAGMENT) != 0u;
    pw_l4_info l4;
    pw_l4_info_zero(&l4);
    r = pw_parse_l4(f, pkt, ip.hdr_end, ip.proto, !fragment, &l4, eoff);
    if (l4.present) {
        m->flags |= (uint16_t)PW_MF_L4;
        m->l4_offset = (uint16_t)ip.hdr_end;
        m->src_port = l4.src_port;
        m->dst_port = l4.dst_port;
        m->tcp_flags = l4.tcp_flags;
        m->icmp_type = l4.icmp_type;
        m->icmp_code = l4.icmp_code;
        m->payload_offset = (uint16_t)l4.hdr_end;
    }
    if (r) return r;
    if (ip.proto != PW_IPPROTO_UDP || fragment || !l4.present) return 0;
    if (l4.dst_port == PW_UDP_PORT_VXLAN) return pw_parse_vxlan(f, l4.udp_end, l4.hdr_end, m, eoff);
    if (l4.dst_port == PW_UDP_PORT_GTPU) return pw_parse_gtpu(f, l4.udp_end, l4.hdr_end, m, eoff);
    return 0;
}

PW_DEVICE uint16_t pw_parse_outer(const uint8_t *f, uint32_t len, pw_packet_meta *m, uint32_t *eoff) {
    uint32_t et = 0, off = 0;
    uint16_t r = pw_walk_l2(f, len, 0u, m, &et, &off, eoff);
    if (r) return r;
    m->ether_type = (uint16_t)et;
    m->l3_offset = (uint16_t)off;
    m->payload_offset = (uint16_t)off;
    if (et == PW_ET_IPV4) return pw_outer_ip(f, len, off, 4u, m, eoff);
    if (et == PW_ET_IPV6) return pw_outer_ip(f, len, off, 6u, m, eoff);
    if (et == PW_ET_ARP) {
        m->flags |= (uint16_t)PW_MF_ARP;
        if (!pw_has(len, off, 8u)) PW_FAIL(PW_PARSE_ARP_TRUNCATED, off);
        uint32_t hlen = f[off + 4u], plen = f[off + 5u];
        uint32_t total = 8u + 2u * (hlen + plen);
        if (!pw_has(len, off, total)) PW_FAIL(PW_PARSE_ARP_TRUNCATED, off);
        m->arp_oper = (uint16_t)pw_rd16(f, off + 6u);
        if (pw_rd16(f, off + 2u) == PW_ET_IPV4 && plen == 4u) {
            m->src_ip[0] = pw_rd32(f, off + 8u + hlen);
            m->dst_ip[0] = pw_rd32(f, off + 8u + 2u * hlen + plen);
        }
        m->payload_offset = (uint16_t)(off + total);
        return 0;
    }
    if (et == PW_ET_MPLS_UC || et == PW_ET_MPLS_MC) {
        m->flags |= (uint16_t)PW_MF_MPLS;
        uint32_t n = 0;
        for (;;) {
            if (n == PW_MAX_MPLS) PW_FAIL(PW_PARSE_MPLS_TOO_DEEP, off);
            if (!pw_has(len, off, 4u)) PW_FAIL(PW_PARSE_MPLS_TRUNCATED, off);
            uint32_t lse = pw_rd32(f, off);
            n++;
            m->mpls_count = (uint8_t)n;
            m->mpls_lse = lse;
            off += 4u;
            if (lse & 0x100u) break;
        }
        m->l3_offset = (uint16_t)off;
        m->payload_offset = (uint16_t)off;
        if (off < len) {
            uint32_t nib = f[off] >> 4;
            if (nib == 4u) return pw_outer_ip(f, len, off, 4u, m, eoff);
            if (nib == 6u) return pw_outer_ip(f, len, off, 6u, m, eoff);
        }
        return 0;
    }
    if (et == PW_ET_ECPRI) {
        if (!pw_has(len, off, 4u)) PW_FAIL(PW_PARSE_ECPRI_TRUNCATED, off);
        m->flags |= (uint16_t)PW_MF_ECPRI;
        m->ecpri_revision = (uint8_t)(f[off] >> 4);
        uint32_t msg = f[off + 1u];
        uint32_t size = pw_rd16(f, off + 2u);
        m->ecpri_msg_type = (uint8_t)msg;
        m->ecpri_payload_size = (uint16_t)size;
        m->payload_offset = (uint16_t)(off + 4u);
        uint32_t end = off + 4u + size;
        if (end > len) PW_FAIL(PW_PARSE_ECPRI_LEN_EXCEEDS_FRAME, off + 2u);
        if (msg <= 2u) { /* IQ data, bit sequence, real-time control: PC_ID / RTC_ID, SEQ_ID */
            if (pw_has(end, off, 6u)) m->ecpri_pc_id = (uint16_t)pw_rd16(f, off + 4u);
            if (pw_has(end, off, 8u)) m->ecpri_seq_id = (uint16_t)pw_rd16(f, off + 6u);
        }
        return 0;
    }
    if (et < PW_ET_MIN) m->flags |= (uint16_t)PW_MF_LLC;
    return 0;
}

/* Parses `len` bytes at `frame` into *meta (every byte of it written). */
PW_DEVICE void pw_parse(const uint8_t *frame, uint32_t len, pw_packet_meta *meta) {
    uint32_t *w = (uint32_t *)meta;
    for (uint32_t i = 0; i < PW_META_SIZE / 4u; i++) w[i] = 0u;
    meta->frame_len = len;
    uint32_t eoff = 0;
    uint16_t r = pw_parse_outer(frame, len, meta, &eoff);
    if (r) {
        meta->status = r;
        meta->error_offset = (uint16_t)eoff;
    }
}

#undef PW_FAIL

/* ---- Fast path: the common frame's ACL key, without its pw_packet_meta ----
 * Latency: pw_parse is one thread's long chain of branches and single-byte loads into a 144-byte
 * pw_packet_meta (kept in local memory), and a burst's parse pass waits for its slowest thread.
 * pw_parse_fast_key handles Ethernet with at most one VLAN tag, IPv4 without options and not a
 * fragment, then TCP, UDP (not to the VXLAN or GTP-U port), ICMP, ICMPv6, SCTP or a protocol
 * without an L4 view, in a frame of at least 52 bytes: its loads sit at fixed offsets and issue
 * together. It returns 1 only when pw_parse would return status 0, and then writes the
 * key words (acl.cuh pw_acl_key_words) of pw_acl_key_from_meta(that metadata, port):
 * pipeline/tests/parse_fast_key.rs holds both on the corpus, its truncations, frames around every
 * boundary checked here and random ones. On 0 the caller runs pw_parse. */
PW_DEVICE uint32_t pw_parse_fast_key(const uint8_t *f, uint32_t len, uint16_t port, uint32_t kw[11]) {
    /* Every read below lies in bytes 12 .. 51; each group of them is read before any decision
     * on it, so the loads issue together (two dependent rounds: the tag, then l3 + 0 .. 33). */
    if (len < 52u) return 0u;
    const uint32_t et0 = pw_rd16(f, 12u), tci = pw_rd16(f, 14u), et1 = pw_rd16(f, 16u);
    const bool tagged = pw_is_vlan(et0);
    const uint32_t et = tagged ? et1 : et0, l3 = tagged ? 18u : 14u;
    const uint8_t *p = f + l3;
    const uint32_t vihl = p[0], tos = p[1], total = pw_rd16(p, 2u), ff = pw_rd16(p, 6u), proto = p[9];
    const uint32_t src = pw_rd32(p, 12u), dst = pw_rd32(p, 16u);
    const uint32_t ports = pw_rd16(p, 20u) | (pw_rd16(p, 22u) << 16), ulen = pw_rd16(p, 24u);
    const uint32_t doff = p[32], tflags = p[33];
    /* pw_parse walks a second tag: not here. IHL 5, the packet within the frame and not shorter
     * than its header, no fragment bits. */
    if (et != PW_ET_IPV4 || vihl != 0x45u || total < 20u || total > len - l3 || (ff & 0x3FFFu) != 0u) return 0u;
    const uint32_t room = total - 20u, dport = ports >> 16;
    uint32_t key_ports = 0u, flags = 0u;
    if (proto == PW_IPPROTO_TCP) {
        if (room < 20u || (doff >> 4) < 5u || (doff >> 4) * 4u > room) return 0u;
        key_ports = ports;
        flags = tflags; /* the key keeps the low 8 flag bits */
    } else if (proto == PW_IPPROTO_UDP) {
        if (room < 8u || ulen < 8u || ulen > room || dport == PW_UDP_PORT_VXLAN || dport == PW_UDP_PORT_GTPU)
            return 0u;
        key_ports = ports;
    } else if (proto == PW_IPPROTO_ICMP || proto == PW_IPPROTO_ICMPV6) {
        if (room < 8u) return 0u;
    } else if (proto == PW_IPPROTO_SCTP) {
        if (room < 12u) return 0u;
        key_ports = ports;
    }
    kw[0] = src;
    kw[4] = dst;
    kw[1] = kw[2] = kw[3] = kw[5] = kw[6] = kw[7] = 0u;
    kw[8] = key_ports;
    kw[9] = proto | (4u << 8) | ((tos >> 2) << 16) | (flags << 24);
    kw[10] = (tagged ? (tci & 0x0FFFu) : PW_VLAN_NONE) | ((uint32_t)port << 16);
    return 1u;
}

#endif /* PKTWARP_PARSE_CUH */
