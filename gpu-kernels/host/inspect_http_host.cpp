// Host build of the inspect stage's HTTP head parse (cuda/inspect_http.cuh; PW_DEVICE = static
// inline), for pipeline/inspect/tests/http_cuda_host.rs, which holds it equal to
// pktwarp_inspect::http::parse buffer by buffer.
#include <stdlib.h>
#include <string.h>

#include "inspect_http.cuh"

// Parses seg once, then reads the buffers `order` names in that order (repeats and any order:
// the scratch keeps one built buffer), each appended to out (cap bytes) with its length in
// lens. Returns the parse's kind (PW_INSP_HTTP_*).
extern "C" uint32_t pw_host_insp_http(const uint8_t *seg, uint32_t n, const uint32_t *order, uint32_t n_order,
                                      uint8_t *out, uint64_t cap, uint32_t *lens) {
    pw_insp_http *h = (pw_insp_http *)malloc(sizeof(pw_insp_http));
    if (h == 0) return 0xffffffffu;
    pw_insp_http_parse(h, seg, n);
    uint64_t at = 0;
    for (uint32_t i = 0; i < n_order; i++) {
        const uint8_t *b = 0;
        uint32_t len = pw_insp_http_buf(h, order[i], &b);
        lens[i] = len;
        if (len > 0u && at + len <= cap) memcpy(out + at, b, len);
        at += len;
    }
    uint32_t kind = h->kind;
    free(h);
    return kind;
}
