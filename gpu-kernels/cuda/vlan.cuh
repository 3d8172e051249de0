/* Stage `vlan` in CUDA C (pipeline/src/rewrite/vlan.rs): push a tag after the MACs, pop the
 * outermost tag, or set its VID / PCP. The frame is `*len` bytes in a buffer of `cap` (push needs
 * 4 spare bytes; without them PW_RW_DROP_NO_ROOM, frame unchanged, as Vlan::apply_in). After a
 * push or pop the meta is parsed again (pw_parse), as the reference does. */
#ifndef PKTWARP_VLAN_CUH
#define PKTWARP_VLAN_CUH

#include "parse.cuh"
#include "rewrite.cuh"

#define PW_VLAN_PUSH 0u
#define PW_VLAN_POP 1u
#define PW_VLAN_SET 2u

typedef struct pw_vlan_params {
    uint32_t op;      /* PW_VLAN_* */
    uint16_t tpid;    /* push: 0x8100 / 0x88a8 */
    uint16_t tci;     /* push: PCP << 13 | VID */
    int32_t set_vid;  /* set: -1 keep, else 0..4095 */
    int32_t set_pcp;  /* set: -1 keep, else 0..7 */
} pw_vlan_params;

PW_DEVICE uint32_t pw_vlan_is_tpid(uint32_t t) {
    return t == PW_ET_VLAN || t == PW_ET_QINQ || t == PW_ET_QINQ_OLD;
}

PW_DEVICE uint32_t pw_vlan(uint8_t *f, uint32_t *len, uint32_t cap, pw_packet_meta *m,
                           const pw_vlan_params *p) {
    uint32_t n = *len;
    if (n < 14u) return PW_RW_SKIPPED;
    uint32_t tagged = pw_vlan_is_tpid(pw_rw_be16(f + 12)) && n >= 18u;
    if (p->op == PW_VLAN_PUSH) {
        if (cap < 4u || n > cap - 4u) return PW_RW_DROP_NO_ROOM; /* as Vlan::apply_in */
        for (uint32_t i = n; i > 12u; i--) f[i + 3u] = f[i - 1u];
        pw_rw_put16(f + 12, p->tpid);
        pw_rw_put16(f + 14, p->tci);
        *len = n + 4u;
    } else if (p->op == PW_VLAN_POP) {
        if (!tagged) return PW_RW_SKIPPED;
        for (uint32_t i = 12u; i + 4u < n; i++) f[i] = f[i + 4u];
        *len = n - 4u;
    } else {
        if (!tagged) return PW_RW_SKIPPED;
        uint32_t tci = pw_rw_be16(f + 14);
        if (p->set_vid >= 0) tci = (tci & 0xF000u) | ((uint32_t)p->set_vid & 0x0FFFu);
        if (p->set_pcp >= 0) tci = (tci & 0x1FFFu) | (((uint32_t)p->set_pcp & 7u) << 13);
        pw_rw_put16(f + 14, tci);
        if (m->vlan_count > 0u) m->vlan_tci[0] = (uint16_t)tci;
        return PW_RW_DONE;
    }
    pw_parse(f, *len, m);
    return PW_RW_DONE;
}

#endif
