/* The inspect stage's HTTP/1.x buffers in CUDA C: pktwarp_inspect::http::parse's semantics, byte
 * for byte, for one TCP segment; host/inspect_http_host.cpp and pipeline/inspect/tests/
 * http_cuda_host.rs hold the two equal buffer by buffer. The parse (pw_insp_http_parse) finds the
 * head's parts and the body; each rule buffer is then made on demand (pw_insp_http_buf): a slice
 * of the segment where the CPU's buffer is one (method, raw URI, status code, raw header, a header
 * value that appears once without a folded line, the body), else built in the per-thread scratch
 * (the normalized URI, http_header, the lower-cased host, merged header values, ...), which holds
 * one built buffer at a time (kept for the next rule that reads the same buffer).
 *
 * Bound: a head (start line, headers, empty line) longer than PW_INSP_HTTP_HEAD_MAX bytes is not
 * inspected as HTTP on either executor (http::HEAD_MAX; counted with the split heads), so every
 * built buffer fits the scratch: the largest, http_start, is at most 2 * HEAD_MAX + 4 bytes (a
 * header line of L bytes gives at most L + 2). Work: the parse reads the first line and at most
 * HEAD_MAX + 1 bytes after it; a built buffer costs O(lines * HEAD_MAX) byte steps at most (a
 * repeated name is found by scanning the lines before it; lines <= HEAD_MAX / 2). Portable C
 * subset (PW_DEVICE). */
#ifndef PKTWARP_INSPECT_HTTP_CUH
#define PKTWARP_INSPECT_HTTP_CUH

#include "pktwarp_abi.h"

#define PW_INSP_HTTP_HEAD_MAX 4096u /* http::HEAD_MAX */
#define PW_INSP_HTTP_SCRATCH (2u * PW_INSP_HTTP_HEAD_MAX + 16u)
#define PW_INSP_HTTP_URI_AT (PW_INSP_HTTP_HEAD_MAX + 16u) /* the decoded path while normalizing */
#define PW_INSP_HTTP_MAX_METHOD 32u                       /* http::MAX_METHOD */

#define PW_INSP_HTTP_NOT 0u   /* http::HttpParse::NotHttp */
#define PW_INSP_HTTP_HEAD 1u  /* Head */
#define PW_INSP_HTTP_SPLIT 2u /* Incomplete: counted (heads_split), not inspected as HTTP */

/* rules::Buffer codes */
#define PW_INSP_B_URI 1u
#define PW_INSP_B_RAW_URI 2u
#define PW_INSP_B_METHOD 3u
#define PW_INSP_B_HEADER 4u
#define PW_INSP_B_RAW_HEADER 5u
#define PW_INSP_B_USER_AGENT 6u
#define PW_INSP_B_HOST 7u
#define PW_INSP_B_RAW_HOST 8u
#define PW_INSP_B_COOKIE 9u
#define PW_INSP_B_CLIENT_BODY 10u
#define PW_INSP_B_STAT_CODE 11u
#define PW_INSP_B_STAT_MSG 12u
#define PW_INSP_B_FILE_DATA 13u
#define PW_INSP_B_HEADER_NAMES 14u
#define PW_INSP_B_START 15u
#define PW_INSP_B_PROTOCOL 16u
#define PW_INSP_B_REQUEST_LINE 17u
#define PW_INSP_B_RESPONSE_LINE 18u
#define PW_INSP_B_CONTENT_TYPE 19u
#define PW_INSP_B_CONTENT_LEN 20u
#define PW_INSP_B_ACCEPT 21u
#define PW_INSP_B_ACCEPT_ENC 22u
#define PW_INSP_B_ACCEPT_LANG 23u
#define PW_INSP_B_CONNECTION 24u
#define PW_INSP_B_REFERER 25u
#define PW_INSP_B_SERVER 26u
#define PW_INSP_B_LOCATION 27u

/* One segment's head, as offsets into seg. */
typedef struct pw_insp_http {
    const uint8_t *seg;
    uint32_t n, kind, is_request, has_fold;
    uint32_t fe, fl;             /* the first line's '\n', its length without CR */
    uint32_t head_end;           /* after the empty line */
    uint32_t p0, p1;             /* request: the method; response: the protocol */
    uint32_t q0, q1;             /* request: the raw URI; response: the status code */
    uint32_t r0, r1;             /* request: the protocol; response: the status message */
    uint32_t body0, body1;       /* the body buffer (empty: none) */
    uint32_t cached, cached_len; /* the buffer built in scratch (0: none) */
    uint8_t scratch[PW_INSP_HTTP_SCRATCH];
} pw_insp_http;

PW_DEVICE uint8_t pw_insp_lower(uint8_t c) { return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c; }
/* u8::is_ascii_whitespace: space, \t, \n, \x0c, \r */
PW_DEVICE int pw_insp_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == 0x0c || c == '\r'; }

PW_DEVICE int pw_insp_eq_ci(const uint8_t *a, uint32_t an, const uint8_t *b, uint32_t bn) {
    if (an != bn) return 0;
    for (uint32_t k = 0; k < an; k++)
        if (pw_insp_lower(a[k]) != pw_insp_lower(b[k])) return 0;
    return 1;
}

PW_DEVICE uint32_t pw_insp_cstr_len(const char *s) {
    uint32_t n = 0;
    while (s[n]) n++;
    return n;
}

PW_DEVICE int pw_insp_starts_http(const uint8_t *s, uint32_t n) {
    return n >= 5u && s[0] == 'H' && s[1] == 'T' && s[2] == 'T' && s[3] == 'P' && s[4] == '/';
}

/* Appends bytes to dst (cap bytes; the bound above keeps every built buffer inside it). */
PW_DEVICE void pw_insp_put(uint8_t *dst, uint32_t cap, uint32_t *len, const uint8_t *src, uint32_t n) {
    for (uint32_t k = 0; k < n && *len < cap; k++) dst[(*len)++] = src[k];
}

PW_DEVICE void pw_insp_put2(uint8_t *dst, uint32_t cap, uint32_t *len, uint8_t a, uint8_t b) {
    uint8_t two[2] = {a, b};
    pw_insp_put(dst, cap, len, two, 2u);
}

/* The header line at pos: [*ls, *le) without its CR, *next after its '\n'; 0 at the empty line. */
PW_DEVICE int pw_insp_http_line(const pw_insp_http *h, uint32_t pos, uint32_t *ls, uint32_t *le, uint32_t *next) {
    if (pos >= h->head_end) return 0;
    uint32_t e = pos;
    while (e < h->n && h->seg[e] != '\n') e++;
    *ls = pos;
    *le = (e > pos && h->seg[e - 1u] == '\r') ? e - 1u : e;
    *next = e + 1u;
    return *le > *ls;
}

/* A "Name: value" line (not folded, with a colon): its trimmed name and value. */
PW_DEVICE int pw_insp_http_field(const pw_insp_http *h, uint32_t ls, uint32_t le, uint32_t *n0, uint32_t *n1,
                                 uint32_t *v0, uint32_t *v1) {
    const uint8_t *s = h->seg;
    if (s[ls] == ' ' || s[ls] == '\t') return 0;
    uint32_t c = ls;
    while (c < le && s[c] != ':') c++;
    if (c == le) return 0;
    *n0 = ls;
    *n1 = c;
    *v0 = c + 1u;
    *v1 = le;
    while (*n0 < *n1 && pw_insp_ws(s[*n0])) (*n0)++;
    while (*n1 > *n0 && pw_insp_ws(s[*n1 - 1u])) (*n1)--;
    while (*v0 < *v1 && pw_insp_ws(s[*v0])) (*v0)++;
    while (*v1 > *v0 && pw_insp_ws(s[*v1 - 1u])) (*v1)--;
    return 1;
}

/* Whether no field line before the one at `at` has this name (the CPU's first of a name). */
PW_DEVICE int pw_insp_http_first(const pw_insp_http *h, uint32_t at, const uint8_t *name, uint32_t nlen) {
    uint32_t pos = h->fe + 1u, ls, le, next, n0, n1, v0, v1;
    while (pos < at && pw_insp_http_line(h, pos, &ls, &le, &next)) {
        pos = next;
        if (pw_insp_http_field(h, ls, le, &n0, &n1, &v0, &v1) && pw_insp_eq_ci(h->seg + n0, n1 - n0, name, nlen))
            return 0;
    }
    return 1;
}

/* The value of header `name` as the CPU merges it (repeats joined with ", ", a folded line added
 * with " " to the header the last new name started): 0 when absent; else 1 with *out / *len, a
 * slice of the segment when the value is one line's, else built at dst (cap bytes). */
PW_DEVICE int pw_insp_http_value(const pw_insp_http *h, const uint8_t *name, uint32_t nlen, uint8_t *dst, uint32_t cap,
                                 const uint8_t **out, uint32_t *len) {
    const uint8_t *s = h->seg;
    int found = 0, attached = 0, built = 0;
    uint32_t f0 = 0, f1 = 0, ol = 0, pos = h->fe + 1u, ls, le, next, n0, n1, v0, v1;
    while (pw_insp_http_line(h, pos, &ls, &le, &next)) {
        pos = next;
        if (s[ls] == ' ' || s[ls] == '\t') {
            if (!attached) continue;
            uint32_t a = ls, b = le;
            while (a < b && pw_insp_ws(s[a])) a++;
            while (b > a && pw_insp_ws(s[b - 1u])) b--;
            if (!built) pw_insp_put(dst, cap, &ol, s + f0, f1 - f0);
            built = 1;
            pw_insp_put(dst, cap, &ol, (const uint8_t *)" ", 1u);
            pw_insp_put(dst, cap, &ol, s + a, b - a);
            continue;
        }
        if (!pw_insp_http_field(h, ls, le, &n0, &n1, &v0, &v1)) continue;
        if (pw_insp_eq_ci(s + n0, n1 - n0, name, nlen)) {
            if (!found) {
                found = attached = 1;
                f0 = v0;
                f1 = v1;
                continue;
            }
            if (!built) pw_insp_put(dst, cap, &ol, s + f0, f1 - f0);
            built = 1;
            pw_insp_put2(dst, cap, &ol, ',', ' ');
            pw_insp_put(dst, cap, &ol, s + v0, v1 - v0);
        } else if (attached && h->has_fold && pw_insp_http_first(h, ls, s + n0, n1 - n0)) {
            attached = 0; /* another name is now the last one a folded line goes to */
        }
    }
    if (!found) return 0;
    *out = built ? dst : s + f0;
    *len = built ? ol : f1 - f0;
    return 1;
}

/* Every header in first-seen order, into dst: mode 0 http_header (`Name: value\r\n`, without the
 * cookie header), 1 http_start (the start line, every header, then an empty line), 2 the header
 * names (`\r\n`, each name and `\r\n`, then `\r\n`). Returns the length. */
PW_DEVICE_CALL uint32_t pw_insp_http_list(const pw_insp_http *h, uint32_t mode, uint8_t *dst, uint32_t cap) {
    const uint8_t *s = h->seg;
    const uint8_t *cookie = (const uint8_t *)(h->is_request ? "cookie" : "set-cookie");
    uint32_t clen = h->is_request ? 6u : 10u;
    uint32_t ol = 0, pos = h->fe + 1u, ls, le, next, n0, n1, v0, v1;
    if (mode == 1u) pw_insp_put(dst, cap, &ol, s, h->fl);
    if (mode != 0u) pw_insp_put2(dst, cap, &ol, '\r', '\n');
    while (pw_insp_http_line(h, pos, &ls, &le, &next)) {
        pos = next;
        if (!pw_insp_http_field(h, ls, le, &n0, &n1, &v0, &v1)) continue;
        if (!pw_insp_http_first(h, ls, s + n0, n1 - n0)) continue;
        if (mode == 0u && pw_insp_eq_ci(s + n0, n1 - n0, cookie, clen)) continue;
        pw_insp_put(dst, cap, &ol, s + n0, n1 - n0);
        if (mode != 2u) {
            pw_insp_put2(dst, cap, &ol, ':', ' ');
            const uint8_t *v = 0;
            uint32_t vl = 0;
            if (ol <= cap && pw_insp_http_value(h, s + n0, n1 - n0, dst + ol, cap - ol, &v, &vl)) {
                if (v == dst + ol) ol += vl;
                else pw_insp_put(dst, cap, &ol, v, vl);
            }
        }
        pw_insp_put2(dst, cap, &ol, '\r', '\n');
    }
    if (mode != 0u) pw_insp_put2(dst, cap, &ol, '\r', '\n');
    return ol;
}

PW_DEVICE int pw_insp_hex(uint8_t c, uint32_t *v) {
    if (c >= '0' && c <= '9') *v = c - '0';
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') *v = (uint32_t)((c | 0x20) - 'a') + 10u;
    else return 0;
    return 1;
}

/* http::normalize_uri of the raw URI into the scratch: %XX decoded in the path, `.` and `..`
 * segments removed, the query as sent. Returns the length. */
PW_DEVICE_CALL uint32_t pw_insp_http_uri(pw_insp_http *h) {
    const uint8_t *u = h->seg + h->q0;
    uint32_t ulen = h->q1 - h->q0, q = 0, dl = 0, ol = 0, cnt = 0, a = 0;
    while (q < ulen && u[q] != '?') q++;
    uint8_t *d = h->scratch + PW_INSP_HTTP_URI_AT, *o = h->scratch;
    const uint32_t dcap = PW_INSP_HTTP_SCRATCH - PW_INSP_HTTP_URI_AT, ocap = PW_INSP_HTTP_URI_AT;
    for (uint32_t i = 0; i < q && dl < dcap;) {
        uint32_t hi, lo;
        if (u[i] == '%' && i + 2u < q && pw_insp_hex(u[i + 1u], &hi) && pw_insp_hex(u[i + 2u], &lo)) {
            d[dl++] = (uint8_t)(hi * 16u + lo);
            i += 3u;
        } else {
            d[dl++] = u[i++];
        }
    }
    uint32_t absolute = dl > 0u && d[0] == '/';
    for (;;) {
        uint32_t b = a;
        while (b < dl && d[b] != '/') b++;
        int last = b >= dl, dot = b - a == 1u && d[a] == '.';
        int dotdot = b - a == 2u && d[a] == '.' && d[a + 1u] == '.';
        if (dotdot && cnt > absolute) { /* pop the last segment */
            if (cnt == 1u) ol = 0;
            else {
                while (ol > 0u && o[ol - 1u] != '/') ol--;
                if (ol > 0u) ol--;
            }
            cnt--;
        }
        if (!(dot || dotdot) || last) { /* push this segment, or "" after a last `.` / `..` */
            if (cnt > 0u) pw_insp_put(o, ocap, &ol, (const uint8_t *)"/", 1u);
            if (!(dot || dotdot)) pw_insp_put(o, ocap, &ol, d + a, b - a);
            cnt++;
        }
        if (last) break;
        a = b + 1u;
    }
    if (absolute && (ol == 0u || o[0] != '/') && ol < ocap) {
        for (uint32_t k = ol; k > 0u; k--) o[k] = o[k - 1u];
        o[0] = '/';
        ol++;
    }
    pw_insp_put(o, ocap, &ol, u + q, ulen - q);
    return ol;
}

/* http::looks_http on a segment without a line end. */
PW_DEVICE int pw_insp_looks_http(const uint8_t *s, uint32_t n) {
    if (pw_insp_starts_http(s, n)) return 1;
    if (n < 3u) return 0;
    uint32_t i = 0, space = 0;
    for (; i < n && s[i] != ' '; i++)
        if (!(s[i] >= 'A' && s[i] <= 'Z')) return 0;
    for (; i < n; i++) space |= s[i] == ' ';
    return space != 0u;
}

/* The start line (http::parse's first part): 1 when it is a status or request line. */
PW_DEVICE int pw_insp_http_start(pw_insp_http *h) {
    const uint8_t *s = h->seg;
    uint32_t fl = h->fl;
    if (pw_insp_starts_http(s, fl)) {
        /* rest.splitn(3, ' '): the version, the code (3 digits), the message */
        uint32_t i = 5;
        while (i < fl && s[i] != ' ') i++;
        if (i >= fl) return 0;
        h->p0 = 0;
        h->p1 = i;
        uint32_t c = ++i;
        while (i < fl && s[i] != ' ') i++;
        if (i - c != 3u) return 0;
        for (uint32_t k = c; k < i; k++)
            if (s[k] < '0' || s[k] > '9') return 0;
        h->q0 = c;
        h->q1 = i;
        h->r0 = i < fl ? i + 1u : fl;
        h->r1 = fl;
        h->is_request = 0;
        return 1;
    }
    /* the first three non-empty space-separated parts: a method of upper case, '-', '_' (at most
     * 32), a target, a version starting HTTP/ */
    uint32_t i = 0, at[6];
    for (uint32_t part = 0; part < 3u; part++) {
        while (i < fl && s[i] == ' ') i++;
        if (i >= fl) return 0;
        at[2u * part] = i;
        while (i < fl && s[i] != ' ') i++;
        at[2u * part + 1u] = i;
    }
    if (at[1] - at[0] > PW_INSP_HTTP_MAX_METHOD) return 0;
    for (uint32_t k = at[0]; k < at[1]; k++)
        if (!((s[k] >= 'A' && s[k] <= 'Z') || s[k] == '-' || s[k] == '_')) return 0;
    if (!pw_insp_starts_http(s + at[4], at[5] - at[4])) return 0;
    h->p0 = at[0];
    h->p1 = at[1];
    h->q0 = at[2];
    h->q1 = at[3];
    h->r0 = at[4];
    h->r1 = at[5];
    h->is_request = 1;
    return 1;
}

/* Content-Length as http::content_length reads it: an optional '+', then decimal digits only,
 * without overflow. */
PW_DEVICE int pw_insp_http_clen(const uint8_t *v, uint32_t n, uint64_t *out) {
    uint32_t i = (n > 0u && v[0] == '+') ? 1u : 0u;
    if (i >= n) return 0;
    uint64_t x = 0;
    for (; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return 0;
        uint64_t d = (uint64_t)(v[i] - '0');
        if (x > (0xffffffffffffffffULL - d) / 10u) return 0;
        x = x * 10u + d;
    }
    *out = x;
    return 1;
}

/* The body buffer: the bytes after the head up to Content-Length (a request without one has
 * none; a response's runs to the segment end); none when chunked. */
PW_DEVICE void pw_insp_http_body(pw_insp_http *h) {
    const uint8_t *v;
    uint32_t vl;
    h->body0 = h->body1 = h->head_end;
    if (pw_insp_http_value(h, (const uint8_t *)"transfer-encoding", 17u, h->scratch, PW_INSP_HTTP_SCRATCH, &v, &vl)) {
        const char *ch = "chunked";
        for (uint32_t k = 0; k + 7u <= vl; k++) {
            uint32_t m = 0;
            while (m < 7u && pw_insp_lower(v[k + m]) == (uint8_t)ch[m]) m++;
            if (m == 7u) return;
        }
    }
    uint64_t rest = h->n - h->head_end, len = h->is_request ? 0u : rest;
    if (pw_insp_http_value(h, (const uint8_t *)"content-length", 14u, h->scratch, PW_INSP_HTTP_SCRATCH, &v, &vl)) {
        uint64_t cl;
        if (pw_insp_http_clen(v, vl, &cl)) len = cl;
    }
    h->body1 = h->head_end + (uint32_t)(len < rest ? len : rest);
}

/* http::parse: sets h->kind and, for a head, its parts. */
PW_DEVICE_CALL void pw_insp_http_parse(pw_insp_http *h, const uint8_t *s, uint32_t n) {
    h->seg = s;
    h->n = n;
    h->kind = PW_INSP_HTTP_NOT;
    h->is_request = h->has_fold = h->cached = h->cached_len = 0;
    h->p0 = h->p1 = h->q0 = h->q1 = h->r0 = h->r1 = h->body0 = h->body1 = h->head_end = 0;
    uint32_t fe = 0;
    while (fe < n && s[fe] != '\n') fe++;
    if (fe == n) {
        if (pw_insp_looks_http(s, n)) h->kind = PW_INSP_HTTP_SPLIT;
        return;
    }
    h->fe = fe;
    h->fl = fe > 0u && s[fe - 1u] == '\r' ? fe - 1u : fe;
    if (!pw_insp_http_start(h)) return;
    /* header lines up to the empty one; a head that does not end within HEAD_MAX bytes is split */
    uint32_t pos = fe + 1u;
    for (;;) {
        uint32_t e = pos;
        while (e < n && e <= PW_INSP_HTTP_HEAD_MAX && s[e] != '\n') e++;
        if (e >= n || e > PW_INSP_HTTP_HEAD_MAX) {
            h->kind = PW_INSP_HTTP_SPLIT;
            return;
        }
        uint32_t le = (e > pos && s[e - 1u] == '\r') ? e - 1u : e;
        if (le == pos) {
            h->head_end = e + 1u;
            break;
        }
        if (s[pos] == ' ' || s[pos] == '\t') h->has_fold = 1;
        pos = e + 1u;
    }
    if (h->head_end > PW_INSP_HTTP_HEAD_MAX) {
        h->kind = PW_INSP_HTTP_SPLIT;
        return;
    }
    h->kind = PW_INSP_HTTP_HEAD;
    pw_insp_http_body(h);
}

/* The header name of a by-name buffer for this head ("" for none). */
PW_DEVICE const char *pw_insp_http_name(uint32_t b, uint32_t req) {
    switch (b) {
    case PW_INSP_B_CONTENT_TYPE: return "content-type";
    case PW_INSP_B_CONTENT_LEN: return "content-length";
    case PW_INSP_B_COOKIE: return req ? "cookie" : "set-cookie";
    case PW_INSP_B_USER_AGENT: return req ? "user-agent" : "";
    case PW_INSP_B_RAW_HOST: return req ? "host" : "";
    case PW_INSP_B_ACCEPT: return req ? "accept" : "";
    case PW_INSP_B_ACCEPT_ENC: return req ? "accept-encoding" : "";
    case PW_INSP_B_ACCEPT_LANG: return req ? "accept-language" : "";
    case PW_INSP_B_CONNECTION: return req ? "connection" : "";
    case PW_INSP_B_REFERER: return req ? "referer" : "";
    case PW_INSP_B_SERVER: return req ? "" : "server";
    case PW_INSP_B_LOCATION: return req ? "" : "location";
    default: return "";
    }
}

/* A slice buffer of the head: 1 with [*a, *b) when b is one for this head. */
PW_DEVICE int pw_insp_http_slice(const pw_insp_http *h, uint32_t b, uint32_t *a, uint32_t *e) {
    uint32_t req = h->is_request;
    switch (b) {
    case PW_INSP_B_METHOD: *a = h->p0; *e = req ? h->p1 : h->p0; return 1;
    case PW_INSP_B_RAW_URI: *a = h->q0; *e = req ? h->q1 : h->q0; return 1;
    case PW_INSP_B_STAT_CODE: *a = h->q0; *e = req ? h->q0 : h->q1; return 1;
    case PW_INSP_B_STAT_MSG: *a = h->r0; *e = req ? h->r0 : h->r1; return 1;
    case PW_INSP_B_PROTOCOL: *a = req ? h->r0 : h->p0; *e = req ? h->r1 : h->p1; return 1;
    case PW_INSP_B_REQUEST_LINE: *a = 0; *e = req ? h->fl : 0u; return 1;
    case PW_INSP_B_RESPONSE_LINE: *a = 0; *e = req ? 0u : h->fl; return 1;
    case PW_INSP_B_RAW_HEADER: *a = h->fe + 1u; *e = h->head_end; return 1;
    case PW_INSP_B_CLIENT_BODY: *a = h->body0; *e = req ? h->body1 : h->body0; return 1;
    case PW_INSP_B_FILE_DATA: *a = h->body0; *e = req ? h->body0 : h->body1; return 1;
    default: return 0;
    }
}

/* Buffer b (1..27) of the head: its length (0: absent or empty, alike for every rule test) with
 * *out its bytes: in the segment or in the scratch. */
PW_DEVICE_CALL uint32_t pw_insp_http_buf(pw_insp_http *h, uint32_t b, const uint8_t **out) {
    if (h->kind != PW_INSP_HTTP_HEAD) return 0;
    uint32_t a, e;
    if (pw_insp_http_slice(h, b, &a, &e)) {
        *out = h->seg + a;
        return e - a;
    }
    if (h->cached == b) {
        *out = h->scratch;
        return h->cached_len;
    }
    uint32_t len = 0;
    const char *name = pw_insp_http_name(b, h->is_request);
    if (name[0] != 0) {
        const uint8_t *v;
        if (!pw_insp_http_value(h, (const uint8_t *)name, pw_insp_cstr_len(name), h->scratch, PW_INSP_HTTP_SCRATCH,
                                &v, &len))
            return 0;
        *out = v;
        if (v != h->scratch) return len; /* a slice: the scratch still holds the cached buffer */
    } else if (b == PW_INSP_B_URI && h->is_request) {
        len = pw_insp_http_uri(h);
    } else if (b == PW_INSP_B_HEADER || b == PW_INSP_B_START || b == PW_INSP_B_HEADER_NAMES) {
        uint32_t mode = b == PW_INSP_B_HEADER ? 0u : b == PW_INSP_B_START ? 1u : 2u;
        len = pw_insp_http_list(h, mode, h->scratch, PW_INSP_HTTP_SCRATCH);
    } else if (b == PW_INSP_B_HOST && h->is_request) {
        const uint8_t *v;
        if (!pw_insp_http_value(h, (const uint8_t *)"host", 4u, h->scratch, PW_INSP_HTTP_SCRATCH, &v, &len)) return 0;
        /* the port off (not the colons of a bracketed IPv6 literal), lower-cased */
        uint32_t c = len;
        while (c > 0u && v[c - 1u] != ':') c--;
        if (c > 0u) {
            int bracket = 0;
            for (uint32_t k = c - 1u; k < len; k++) bracket |= v[k] == ']';
            if (!bracket) len = c - 1u;
        }
        for (uint32_t k = 0; k < len; k++) h->scratch[k] = pw_insp_lower(v[k]);
    } else {
        return 0;
    }
    h->cached = b;
    h->cached_len = len;
    *out = h->scratch;
    return len;
}

#endif /* PKTWARP_INSPECT_HTTP_CUH */
