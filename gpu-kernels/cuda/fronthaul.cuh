/* Stage `fronthaul` in CUDA C: O-RAN 7.2x U-plane decode (eCPRI over Ethernet).
 *
 * The same checks, in the same order, with the same reject codes, as the Rust reference
 * fronthaul/src/decode.rs (read its documentation for the rules) and the same PRB
 * decompression as fronthaul/src/bfp.rs: BFP (udCompMeth 1) and none (udCompMeth 0)
 * for widths 1..16, static compression from the parameters or dynamic from each section's
 * udCompHdr (udIqWidth 0 = 16), numPrbu 0 = the whole carrier, startPrbu + numPrbu against the
 * carrier and the PRB bytes against the eCPRI payload size. The whole frame is checked before
 * any PRB is written: a bad section rejects the frame, never a partial decode.
 * Any change here must be made there too; fronthaul/tests/fronthaul_cuda_host.rs holds the two
 * equal on property-generated packets, malformed ones included.
 *
 * Every read is preceded by a length check against `len` (or the eCPRI payload's end, which is
 * checked against `len` first); offsets are uint32_t and never exceed `len`.
 */
#ifndef PKTWARP_FRONTHAUL_CUH
#define PKTWARP_FRONTHAUL_CUH

#include "pktwarp_abi.h"

/* Reject codes: pktwarp_fronthaul::decode::Reject (same numbers, 0 = accepted). */
#define PW_FH_OK 0u
#define PW_FH_ETH_TRUNCATED 1u
#define PW_FH_VLAN_TRUNCATED 2u
#define PW_FH_VLAN_TOO_MANY 3u
#define PW_FH_NOT_ECPRI 4u
#define PW_FH_ECPRI_TRUNCATED 5u
#define PW_FH_ECPRI_BAD_REVISION 6u
#define PW_FH_ECPRI_CONCATENATED 7u
#define PW_FH_ECPRI_LEN_EXCEEDS_FRAME 8u
#define PW_FH_ECPRI_UNSUPPORTED_TYPE 9u
#define PW_FH_RADIO_HEADER_TRUNCATED 10u
#define PW_FH_BAD_PAYLOAD_VERSION 11u
#define PW_FH_BAD_SUBFRAME 12u
#define PW_FH_BAD_SLOT 13u
#define PW_FH_BAD_SYMBOL 14u
#define PW_FH_NO_SECTIONS 15u
#define PW_FH_SECTION_TRUNCATED 16u
#define PW_FH_UNSUPPORTED_COMP_METHOD 17u
#define PW_FH_PRB_OUT_OF_CARRIER 18u
#define PW_FH_PRB_BYTES_EXCEED_PAYLOAD 19u
#define PW_FH_CPLANE_TRUNCATED 20u
#define PW_FH_CPLANE_UNSUPPORTED_SECTION_TYPE 21u
#define PW_FH_CPLANE_BAD_EXT_LEN 22u

#define PW_FH_METH_NONE 0u
#define PW_FH_METH_BFP 1u
#define PW_FH_SYMBOLS 14u
#define PW_FH_MAX_VLAN 2u
#define PW_FH_PRB_SAMPLES 24u

/* Decoder parameters (pktwarp_fronthaul::decode::DecodeParams). */
typedef struct pw_fh_params {
    uint16_t carrier_prbs;
    uint8_t numerology;
    uint8_t dynamic; /* 1: each section's udCompHdr; 0: method / width below */
    uint8_t method;  /* PW_FH_METH_* (static) */
    uint8_t width;   /* 1..16 (static) */
    uint8_t reserved[2];
} pw_fh_params;

/* What the checks found (pktwarp_fronthaul::decode::{Uplane, Cplane}). */
typedef struct pw_fh_info {
    uint16_t eaxc;
    uint16_t seq_raw;  /* the 16 ecpriSeqid bits */
    uint8_t msg_type;  /* 0 U-plane, 2 C-plane */
    uint8_t data_direction, payload_version, filter_index;
    uint8_t frame_id, subframe_id, slot_id, symbol_id;
    uint16_t vlan;     /* outer VLAN id, 0xffff when untagged */
    uint16_t sections; /* U-plane sections, or the C-plane numberOfSections */
    uint32_t prbs;     /* U-plane PRBs */
    uint8_t section_type; /* C-plane */
    uint8_t reserved[3];
    uint32_t body_start, body_end; /* U-plane: first section, end of the eCPRI payload */
} pw_fh_info;

/* One decoded PRB. */
typedef struct pw_fh_prb {
    uint16_t section_id;
    uint8_t symbol;
    uint8_t exponent;
    uint16_t prb;
    uint16_t reserved;
    int32_t iq[24];
} pw_fh_prb;

PW_DEVICE uint32_t pw_fh_be16(const uint8_t *b, uint32_t at) {
    return ((uint32_t)b[at] << 8) | (uint32_t)b[at + 1];
}

PW_DEVICE uint32_t pw_fh_prb_bytes(uint32_t method, uint32_t width) {
    return 3u * width + (method == PW_FH_METH_BFP ? 1u : 0u);
}

/* Decompresses one PRB whose bytes the caller checked (pw_fh_prb_bytes of them); returns the
 * exponent. Sample k's `width` bits start at bit k * width, MSB first; a 3-byte window shifted
 * up to the top of a 32-bit word and shifted back arithmetically sign-extends the mantissa. */
PW_DEVICE uint32_t pw_fh_decompress_prb(const uint8_t *b, uint32_t method, uint32_t width, int32_t *out) {
    uint32_t exp = 0;
    const uint8_t *d = b;
    if (method == PW_FH_METH_BFP) {
        exp = b[0] & 0x0fu;
        d = b + 1;
    }
    const uint32_t n = 3u * width;
    for (uint32_t k = 0; k < PW_FH_PRB_SAMPLES; k++) {
        const uint32_t bit = k * width;
        const uint32_t at = bit >> 3;
        uint32_t win = (uint32_t)d[at] << 24;
        if (at + 1 < n) win |= (uint32_t)d[at + 1] << 16;
        if (at + 2 < n) win |= (uint32_t)d[at + 2] << 8;
        const int32_t m = (int32_t)(win << (bit & 7u)) >> (32u - width);
        out[k] = (int32_t)((uint32_t)m << exp);
    }
    return exp;
}

/* Offset of the eCPRI header after Ethernet and up to two VLAN tags, or a reject code in *code. */
PW_DEVICE uint32_t pw_fh_ecpri_offset(const uint8_t *f, uint32_t len, uint16_t *vlan, uint32_t *code) {
    *vlan = 0xffffu;
    if (len < 14u) {
        *code = PW_FH_ETH_TRUNCATED;
        return 0;
    }
    uint32_t ty = pw_fh_be16(f, 12);
    uint32_t off = 14u;
    uint32_t tags = 0;
    while (ty == 0x8100u || ty == 0x88A8u || ty == 0x9100u) {
        if (tags == PW_FH_MAX_VLAN) {
            *code = PW_FH_VLAN_TOO_MANY;
            return 0;
        }
        if (len < off + 4u) {
            *code = PW_FH_VLAN_TRUNCATED;
            return 0;
        }
        if (*vlan == 0xffffu) *vlan = (uint16_t)(pw_fh_be16(f, off) & 0x0fffu);
        ty = pw_fh_be16(f, off + 2);
        off += 4u;
        tags++;
    }
    if (ty != 0xAEFEu) {
        *code = PW_FH_NOT_ECPRI;
        return 0;
    }
    *code = PW_FH_OK;
    return off;
}

/* End of a C-plane section at `off` (fixed part `sec` bytes, then extensions while ef is set),
 * mirroring wire/oran.rs section_end; 0 with *code set on an error. */
PW_DEVICE uint32_t pw_fh_cplane_section_end(const uint8_t *b, uint32_t end, uint32_t off, uint32_t sec,
                                            uint32_t *code) {
    if (off + sec > end) {
        *code = PW_FH_CPLANE_TRUNCATED;
        return 0;
    }
    uint32_t ef = b[off + 6] & 0x80u;
    uint32_t at = off + sec;
    while (ef) {
        if (at + 2u > end) {
            *code = PW_FH_CPLANE_TRUNCATED;
            return 0;
        }
        ef = b[at] & 0x80u;
        const uint32_t ext_type = b[at] & 0x7fu;
        uint32_t words;
        if (ext_type == 11u) {
            if (at + 3u > end) {
                *code = PW_FH_CPLANE_TRUNCATED;
                return 0;
            }
            words = pw_fh_be16(b, at + 1);
        } else {
            words = b[at + 1];
        }
        if (words == 0) {
            *code = PW_FH_CPLANE_BAD_EXT_LEN;
            return 0;
        }
        at += 4u * words;
        if (at > end) {
            *code = PW_FH_CPLANE_TRUNCATED;
            return 0;
        }
    }
    return at;
}

/* C-plane message at `body` .. `end` (radio header already read). */
PW_DEVICE uint32_t pw_fh_check_cplane(const uint8_t *f, uint32_t body, uint32_t end, pw_fh_info *info) {
    if (end < body + 6u) return PW_FH_CPLANE_TRUNCATED;
    const uint32_t ty = f[body + 5];
    uint32_t hdr, sec;
    if (ty == 0u) {
        hdr = 12u;
        sec = 8u;
    } else if (ty == 1u || ty == 5u) {
        hdr = 8u;
        sec = 8u;
    } else if (ty == 3u) {
        hdr = 12u;
        sec = 12u;
    } else {
        return PW_FH_CPLANE_UNSUPPORTED_SECTION_TYPE;
    }
    if (end < body + hdr) return PW_FH_CPLANE_TRUNCATED;
    const uint32_t n = f[body + 4];
    uint32_t off = body + hdr;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t code = PW_FH_OK;
        off = pw_fh_cplane_section_end(f, end, off, sec, &code);
        if (code != PW_FH_OK) return code;
    }
    info->section_type = (uint8_t)ty;
    info->sections = (uint16_t)n;
    return PW_FH_OK;
}

/* Cursor over the U-plane sections (decode.rs `Sections`). */
typedef struct pw_fh_cursor {
    uint32_t off, end, symbol;
} pw_fh_cursor;

/* One U-plane section; mirrors decode.rs Sections::next_section. */
typedef struct pw_fh_section {
    uint32_t section_id, symbol, start_prb, num_prb, stride, method, width, data, prb_bytes;
} pw_fh_section;

PW_DEVICE uint32_t pw_fh_next_section(const uint8_t *f, pw_fh_cursor *c, const pw_fh_params *p, pw_fh_section *s) {
    const uint32_t hlen = p->dynamic ? 6u : 4u;
    if (c->end - c->off < hlen) return PW_FH_SECTION_TRUNCATED;
    const uint8_t *h = f + c->off;
    uint32_t method = p->method, width = p->width;
    if (p->dynamic) {
        const uint32_t ch = h[4];
        const uint32_t m = ch & 0x0fu;
        if (m != PW_FH_METH_NONE && m != PW_FH_METH_BFP) return PW_FH_UNSUPPORTED_COMP_METHOD;
        method = m;
        width = (ch >> 4) == 0 ? 16u : (ch >> 4);
    }
    if (h[1] & 0x04u) {
        c->symbol += 1u;
        if (c->symbol >= PW_FH_SYMBOLS) return PW_FH_BAD_SYMBOL;
    }
    const uint32_t start = ((uint32_t)(h[1] & 3u) << 8) | h[2];
    const uint32_t num = h[3] == 0 ? p->carrier_prbs : h[3];
    const uint32_t stride = (h[1] & 0x08u) ? 2u : 1u;
    if (num == 0 || start + stride * (num - 1u) >= p->carrier_prbs) return PW_FH_PRB_OUT_OF_CARRIER;
    const uint32_t pb = pw_fh_prb_bytes(method, width);
    const uint32_t data = c->off + hlen;
    if (num * pb > c->end - data) return PW_FH_PRB_BYTES_EXCEED_PAYLOAD;
    c->off = data + num * pb;
    s->section_id = pw_fh_be16(h, 0) >> 4;
    s->symbol = c->symbol;
    s->start_prb = start;
    s->num_prb = num;
    s->stride = stride;
    s->method = method;
    s->width = width;
    s->data = data;
    s->prb_bytes = pb;
    return PW_FH_OK;
}

/* Checks the whole frame (decode.rs `check`); fills *info; returns PW_FH_OK or the reject code. */
PW_DEVICE uint32_t pw_fh_check(const uint8_t *f, uint32_t len, const pw_fh_params *p, pw_fh_info *info) {
    uint32_t code = PW_FH_OK;
    const uint32_t off = pw_fh_ecpri_offset(f, len, &info->vlan, &code);
    if (code != PW_FH_OK) return code;
    if (len - off < 4u) return PW_FH_ECPRI_TRUNCATED;
    const uint32_t rev_c = f[off];
    if ((rev_c >> 4) != 1u) return PW_FH_ECPRI_BAD_REVISION;
    if (rev_c & 1u) return PW_FH_ECPRI_CONCATENATED;
    const uint32_t size = pw_fh_be16(f, off + 2);
    if (4u + size > len - off) return PW_FH_ECPRI_LEN_EXCEEDS_FRAME;
    const uint32_t mt = f[off + 1];
    if (mt != 0u && mt != 2u) return PW_FH_ECPRI_UNSUPPORTED_TYPE;
    if (size < 4u) return PW_FH_ECPRI_TRUNCATED;
    const uint32_t end = off + 4u + size;
    info->msg_type = (uint8_t)mt;
    info->eaxc = (uint16_t)pw_fh_be16(f, off + 4);
    info->seq_raw = (uint16_t)pw_fh_be16(f, off + 6);
    const uint32_t body = off + 8u;
    if (end - body < 4u) return PW_FH_RADIO_HEADER_TRUNCATED;
    const uint8_t *r = f + body;
    info->data_direction = (uint8_t)(r[0] >> 7);
    info->payload_version = (uint8_t)((r[0] >> 4) & 7u);
    info->filter_index = (uint8_t)(r[0] & 0x0fu);
    info->frame_id = r[1];
    info->subframe_id = (uint8_t)(r[2] >> 4);
    info->slot_id = (uint8_t)(((r[2] & 0x0fu) << 2) | (r[3] >> 6));
    info->symbol_id = (uint8_t)(r[3] & 0x3fu);
    if (info->payload_version != 1u) return PW_FH_BAD_PAYLOAD_VERSION;
    if (info->subframe_id > 9u) return PW_FH_BAD_SUBFRAME;
    if ((uint32_t)info->slot_id >= (1u << (p->numerology > 6 ? 6 : p->numerology))) return PW_FH_BAD_SLOT;
    if (info->symbol_id >= PW_FH_SYMBOLS) return PW_FH_BAD_SYMBOL;
    if (mt == 2u) return pw_fh_check_cplane(f, body, end, info);
    info->body_start = body + 4u;
    info->body_end = end;
    pw_fh_cursor c;
    c.off = body + 4u;
    c.end = end;
    c.symbol = info->symbol_id;
    uint32_t sections = 0, prbs = 0;
    while (c.off < c.end) {
        pw_fh_section s;
        code = pw_fh_next_section(f, &c, p, &s);
        if (code != PW_FH_OK) return code;
        sections++;
        prbs += s.num_prb;
    }
    if (sections == 0) return PW_FH_NO_SECTIONS;
    info->sections = (uint16_t)sections;
    info->prbs = prbs;
    return PW_FH_OK;
}

/* Checks the frame, then writes up to `max_out` PRBs in frame order (none when rejected).
 * Returns PW_FH_OK or the reject code. */
PW_DEVICE uint32_t pw_fh_decode(const uint8_t *f, uint32_t len, const pw_fh_params *p, pw_fh_info *info,
                                pw_fh_prb *out, uint32_t max_out) {
    const uint32_t code = pw_fh_check(f, len, p, info);
    if (code != PW_FH_OK || info->msg_type != 0u) return code;
    pw_fh_cursor c;
    c.off = info->body_start;
    c.end = info->body_end;
    c.symbol = info->symbol_id;
    uint32_t n = 0;
    while (c.off < c.end) {
        pw_fh_section s;
        if (pw_fh_next_section(f, &c, p, &s) != PW_FH_OK) break; /* cannot happen: checked */
        for (uint32_t k = 0; k < s.num_prb && n < max_out; k++, n++) {
            pw_fh_prb *o = &out[n];
            o->section_id = (uint16_t)s.section_id;
            o->symbol = (uint8_t)s.symbol;
            o->prb = (uint16_t)(s.start_prb + k * s.stride);
            o->reserved = 0;
            o->exponent = (uint8_t)pw_fh_decompress_prb(f + s.data + k * s.prb_bytes, s.method, s.width, o->iq);
        }
    }
    return code;
}

#endif /* PKTWARP_FRONTHAUL_CUH */
