/* Stage `acl`: the ACL matcher over the flat image built by flow_rules::acl::compile (layout in
 * the ACL section of pktwarp_abi.h). The same walk as AclClassifier::classify in Rust; compiled
 * for the GPU (one thread per packet inside the persistent kernel) and for the host (tests hold
 * it equal to the Rust matcher: flow-rules/csrc/host_acl.cpp).
 *
 * GPU notes: the image is read-only for a kernel's lifetime (epoch swap), so loads go through
 * __ldg (read-only cache); a node walk is one dependent load per level, a leaf is a few
 * consecutive 32-byte records. */
#ifndef PKTWARP_ACL_CUH
#define PKTWARP_ACL_CUH

#include "pktwarp_abi.h"

#if PW_GPU
#define PW_ACL_LD(p) __ldg(p)
#else
#define PW_ACL_LD(p) (*(p))
#endif

/* Key as the 11 words the trees index (see the ABI header). */
PW_DEVICE void pw_acl_key_words(const pw_acl_key *k, uint32_t kw[11]) {
    for (int i = 0; i < 4; i++) {
        kw[i] = k->src_ip[i];
        kw[4 + i] = k->dst_ip[i];
    }
    kw[8] = (uint32_t)k->src_port | ((uint32_t)k->dst_port << 16);
    kw[9] = (uint32_t)k->proto | ((uint32_t)k->ip_version << 8) | ((uint32_t)k->dscp << 16) |
            ((uint32_t)k->tcp_flags << 24);
    kw[10] = (uint32_t)k->vlan_id | ((uint32_t)k->port_id << 16);
}

PW_DEVICE int pw_acl_extras_match(const uint32_t *img, uint32_t extras_off, uint32_t rule,
                                  const uint32_t kw[11]) {
    const uint32_t *e = img + extras_off + PW_ACL_EXTRA_WORDS * rule;
    uint32_t e0 = PW_ACL_LD(e), e1 = PW_ACL_LD(e + 1), e2 = PW_ACL_LD(e + 2);
    uint32_t dscp = (kw[9] >> 16) & 0xFFu, flags = kw[9] >> 24;
    uint32_t vlan = kw[10] & 0xFFFFu, port = kw[10] >> 16;
    return (dscp & ((e0 >> 8) & 0xFFu)) == (e0 & 0xFFu) &&
           (flags & (e0 >> 24)) == ((e0 >> 16) & 0xFFu) && (vlan & (e1 >> 16)) == (e1 & 0xFFFFu) &&
           (port & (e2 >> 16)) == (e2 & 0xFFFFu);
}

/* One record against the key; aw = address words (1 or 4). */
PW_DEVICE int pw_acl_rec_match(const uint32_t *rec, uint32_t aw, const uint32_t kw[11],
                               uint32_t ctl) {
    for (uint32_t i = 0; i < aw; i++) {
        if ((kw[i] & PW_ACL_LD(rec + aw + i)) != PW_ACL_LD(rec + i)) return 0;
        if ((kw[4 + i] & PW_ACL_LD(rec + 3 * aw + i)) != PW_ACL_LD(rec + 2 * aw + i)) return 0;
    }
    uint32_t sp = kw[8] & 0xFFFFu, dp = kw[8] >> 16;
    uint32_t s = PW_ACL_LD(rec + 4 * aw), d = PW_ACL_LD(rec + 4 * aw + 1);
    if (sp < (s & 0xFFFFu) || sp > (s >> 16) || dp < (d & 0xFFFFu) || dp > (d >> 16)) return 0;
    return (kw[9] & (ctl >> 8) & 0xFFu) == (ctl & 0xFFu);
}

/* Index of the first rule (file order) matching the key, or PW_ACL_NO_MATCH. `t` is the start of
 * the image. */
PW_DEVICE uint32_t pw_acl_classify(const pw_acl_tables *t, const pw_acl_key *k) {
    const uint32_t *img = (const uint32_t *)t;
    uint32_t kw[11];
    pw_acl_key_words(k, kw);
    uint32_t fam = k->ip_version == 4 ? PW_ACL_FAM_V4
                   : k->ip_version == 6 ? PW_ACL_FAM_V6
                                        : PW_ACL_FAM_L2;
    const pw_acl_family *fh = &t->fam[fam];
    uint32_t aw = PW_ACL_LD(&fh->addr_words), rw = PW_ACL_LD(&fh->rec_words);
    uint32_t ntrees = PW_ACL_LD(&fh->num_trees), toff = PW_ACL_LD(&fh->trees_off);
    const uint32_t *recs = img + PW_ACL_LD(&fh->records_off);
    uint32_t extras_off = PW_ACL_LD(&t->extras_off);
    uint32_t best = PW_ACL_NO_MATCH;
    for (uint32_t ti = 0; ti < ntrees; ti++) {
        if (PW_ACL_LD(img + toff + 2 * ti + 1) >= best) break;
        uint32_t r = PW_ACL_LD(img + toff + 2 * ti);
        while ((r & PW_ACL_REF_LEAF) == 0) {
            uint32_t h = PW_ACL_LD(img + r);
            uint32_t child = (kw[h & 0xFu] >> ((h >> 8) & 0x1Fu)) & ((1u << ((h >> 16) & 0xFu)) - 1u);
            r = PW_ACL_LD(img + r + 1 + child);
        }
        if (r == PW_ACL_REF_EMPTY) continue;
        const uint32_t *rec = recs + (r & ~PW_ACL_REF_LEAF) * rw;
        for (;;) {
            uint32_t idx = PW_ACL_LD(rec + 4 * aw + 3);
            if (idx >= best) break;
            uint32_t ctl = PW_ACL_LD(rec + 4 * aw + 2);
            if (pw_acl_rec_match(rec, aw, kw, ctl) &&
                ((ctl & PW_ACL_REC_EXTRA) == 0 || pw_acl_extras_match(img, extras_off, idx, kw))) {
                best = idx;
                break;
            }
            if (ctl & PW_ACL_REC_LAST) break;
            rec += rw;
        }
    }
    return best;
}

/* Verdict word of rule `rule` (verdict | has_mark << 8); mark id in *mark. */
PW_DEVICE uint32_t pw_acl_action(const pw_acl_tables *t, uint32_t rule, uint32_t *mark) {
    const uint32_t *a = (const uint32_t *)t + PW_ACL_LD(&t->actions_off) + PW_ACL_ACTION_WORDS * rule;
    *mark = PW_ACL_LD(a + 1);
    return PW_ACL_LD(a);
}

/* The key of a parsed frame: outer addresses / protocol / ports, DSCP = TOS >> 2, low 8 TCP flag
 * bits, outer VID (PW_VLAN_NONE when untagged), ingress port from the frame descriptor. Non-IP
 * frames (ip_version not 4 or 6) get a key with every L3/L4 field zero and ip_version 0: they
 * match only rules without any L3/L4 condition. Same as flow_rules::acl::key_from_fields. */
PW_DEVICE void pw_acl_key_from_meta(const pw_packet_meta *m, uint16_t port_id, pw_acl_key *k) {
    int ip = m->ip_version == 4 || m->ip_version == 6;
    for (int i = 0; i < 4; i++) {
        k->src_ip[i] = ip ? m->src_ip[i] : 0u;
        k->dst_ip[i] = ip ? m->dst_ip[i] : 0u;
    }
    k->src_port = ip ? m->src_port : (uint16_t)0;
    k->dst_port = ip ? m->dst_port : (uint16_t)0;
    k->proto = ip ? m->ip_proto : (uint8_t)0;
    k->ip_version = ip ? m->ip_version : (uint8_t)0;
    k->dscp = ip ? (uint8_t)(m->ip_tos >> 2) : (uint8_t)0;
    k->tcp_flags = ip ? (uint8_t)(m->tcp_flags & 0xFFu) : (uint8_t)0;
    k->vlan_id = m->vlan_count > 0 ? (uint16_t)(m->vlan_tci[0] & 0x0FFFu) : (uint16_t)PW_VLAN_NONE;
    k->port_id = port_id;
}

#endif /* PKTWARP_ACL_CUH */
