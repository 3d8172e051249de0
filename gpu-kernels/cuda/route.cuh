/* Stage `route` in CUDA C (pipeline/src/rewrite/route.rs): longest-prefix match of the outer
 * destination (meta->dst_ip) in the tables of flow_rules::route (layout: flow-rules/src/route/
 * lpm.rs): IPv4 DIR-24-8, IPv6 tbl24 + chained tbl8 groups, u32 entries VALID (bit 31) | EXT
 * (bit 30) | value (bits 0-29). A hit writes the next hop's MAC as destination and returns
 * PW_RW_FORWARD with its port; no route (or no IP) PW_RW_DROP_NO_ROUTE, frame unchanged. */
#ifndef PKTWARP_ROUTE_CUH
#define PKTWARP_ROUTE_CUH

#include "rewrite.cuh"

#define PW_LPM_VALID 0x80000000u
#define PW_LPM_EXT 0x40000000u
#define PW_LPM_VALUE 0x3FFFFFFFu

/* flow_rules::route::NextHop (8 bytes). */
typedef struct pw_next_hop {
    uint8_t mac[6];
    uint16_t port;
} pw_next_hop;
PW_STATIC_ASSERT(sizeof(pw_next_hop) == 8, "pw_next_hop size");

/* One family's table: tbl24 has 2^24 entries, or 0 (no routes in the family). */
typedef struct pw_lpm_table {
    const uint32_t *tbl24;
    const uint32_t *tbl8;
    uint64_t tbl8_len; /* entries */
} pw_lpm_table;

typedef struct pw_route_tables {
    pw_lpm_table v4, v6;
    const pw_next_hop *hops;
    uint64_t n_hops;
} pw_route_tables;

/* The next-hop index for a 128-bit address (a[0] most significant word; IPv4 in a[0] alone,
 * `bits` 32) or 0xFFFFFFFF. */
PW_DEVICE uint32_t pw_lpm_lookup(const pw_lpm_table *t, const uint32_t *a, uint32_t bits) {
    if (!t->tbl24) return 0xFFFFFFFFu;
    uint32_t e = t->tbl24[a[0] >> 8];
    /* Bit position (from the most significant, 0-based) of the next byte to use. */
    uint32_t at = 24u;
    while ((e & PW_LPM_EXT) && at < bits) {
        uint32_t byte = (a[at >> 5] >> (24u - (at & 31u))) & 0xFFu;
        uint64_t i = ((uint64_t)(e & PW_LPM_VALUE) << 8) | byte;
        if (i >= t->tbl8_len) return 0xFFFFFFFFu;
        e = t->tbl8[i];
        at += 8u;
    }
    return (e & (PW_LPM_VALID | PW_LPM_EXT)) == PW_LPM_VALID ? (e & PW_LPM_VALUE) : 0xFFFFFFFFu;
}

PW_DEVICE uint32_t pw_route(uint8_t *f, uint32_t len, const pw_packet_meta *m,
                            const pw_route_tables *t, uint16_t *port) {
    uint32_t nh = 0xFFFFFFFFu;
    if (m->ip_version == 4u) nh = pw_lpm_lookup(&t->v4, m->dst_ip, 32u);
    else if (m->ip_version == 6u) nh = pw_lpm_lookup(&t->v6, m->dst_ip, 128u);
    if (nh == 0xFFFFFFFFu || nh >= t->n_hops || len < 14u) return PW_RW_DROP_NO_ROUTE;
    const pw_next_hop *h = &t->hops[nh];
    for (uint32_t i = 0; i < 6u; i++) f[i] = h->mac[i];
    *port = h->port;
    return PW_RW_FORWARD;
}

#endif
