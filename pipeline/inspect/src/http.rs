//! HTTP/1.x head parsing into the rule buffers (`http_uri`, `http_header`, ...), for one
//! TCP segment that carries a whole request or response head.
//!
//! A head that does not end in the segment (no empty line) is [`HttpParse::Incomplete`]: it
//! is not inspected, and the caller counts it (reassembly is the flow table's job). The
//! body buffers hold the bytes of the body in this segment (at most Content-Length); a
//! chunked body is not de-chunked and a compressed one is not decompressed.
//!
//! Normalization (what Suricata gets from libhtp, the part pktwarp does): the `http_uri`
//! buffer is the request target with `%XX` decoded in the path and `.`/`..` segments
//! removed (the query as sent); `http_header` is `Name: value\r\n` per header (repeated
//! headers merged with `, `, trailing whitespace trimmed, Cookie / Set-Cookie left out);
//! `http_host` is the Host value lower-cased without its port.
//!
//! A head longer than [`HEAD_MAX`] bytes is not inspected as HTTP either (it is counted with
//! the split ones): the bound the GPU stage's per-thread buffers are sized by
//! (gpu-kernels/cuda/inspect_http.cuh, the same semantics in CUDA).

use crate::rules::{Buffer, BUFFER_COUNT};
use std::collections::HashMap;

/// The buffers of one HTTP head (and the body bytes after it in the segment).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpHead {
    pub is_request: bool,
    bufs: [Option<Vec<u8>>; BUFFER_COUNT],
}

impl HttpHead {
    /// The buffer's bytes, or None when this head has no such part (a response has no URI;
    /// a request without a User-Agent has no user-agent buffer).
    pub fn buffer(&self, b: Buffer) -> Option<&[u8]> {
        self.bufs[b as usize].as_deref()
    }

    fn set(&mut self, b: Buffer, v: Vec<u8>) {
        self.bufs[b as usize] = Some(v);
    }
}

/// What a segment holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpParse {
    Head(Box<HttpHead>),
    /// It starts like HTTP but the head does not end in this segment.
    Incomplete,
    NotHttp,
}

/// Longest method token accepted (a guard against treating binary data as a request).
const MAX_METHOD: usize = 32;

/// Longest head (start line, headers and the empty line) inspected as HTTP
/// (`PW_INSP_HTTP_HEAD_MAX`); a longer one is [`HttpParse::Incomplete`].
pub const HEAD_MAX: usize = 4096;

/// Parses the head at the start of `seg`.
pub fn parse(seg: &[u8]) -> HttpParse {
    let Some(first_end) = find(seg, b"\n") else {
        return if looks_http(seg) {
            HttpParse::Incomplete
        } else {
            HttpParse::NotHttp
        };
    };
    let first = trim_cr(&seg[..first_end]);
    let mut head = HttpHead::default();
    if let Some(rest) = first.strip_prefix(b"HTTP/") {
        head.is_request = false;
        let mut parts = rest.splitn(3, |&c| c == b' ');
        parts.next();
        let code = parts.next().unwrap_or_default();
        if code.len() != 3 || !code.iter().all(u8::is_ascii_digit) {
            return HttpParse::NotHttp;
        }
        head.set(Buffer::HttpStatCode, code.to_vec());
        head.set(
            Buffer::HttpProtocol,
            first[..first.len().min(5 + version_len(rest))].to_vec(),
        );
        head.set(Buffer::HttpResponseLine, first.to_vec());
        head.set(
            Buffer::HttpStatMsg,
            parts.next().unwrap_or_default().to_vec(),
        );
    } else {
        let mut parts = first.split(|&c| c == b' ').filter(|p| !p.is_empty());
        let (Some(m), Some(uri), Some(v)) = (parts.next(), parts.next(), parts.next()) else {
            return HttpParse::NotHttp;
        };
        if m.len() > MAX_METHOD
            || !m
                .iter()
                .all(|c| c.is_ascii_uppercase() || *c == b'-' || *c == b'_')
            || !v.starts_with(b"HTTP/")
        {
            return HttpParse::NotHttp;
        }
        head.is_request = true;
        head.set(Buffer::HttpProtocol, v.to_vec());
        head.set(Buffer::HttpRequestLine, first.to_vec());
        head.set(Buffer::HttpMethod, m.to_vec());
        head.set(Buffer::HttpRawUri, uri.to_vec());
        head.set(Buffer::HttpUri, normalize_uri(uri));
    }
    // Headers: lines up to the first empty one.
    let mut pos = first_end + 1;
    let mut headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    // Lower-cased name -> index in `headers`, so merging repeats stays linear.
    let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
    let head_end = loop {
        let Some(e) = find(&seg[pos..], b"\n") else {
            return HttpParse::Incomplete;
        };
        let line = trim_cr(&seg[pos..pos + e]);
        let next = pos + e + 1;
        // The head ends at or after `next`: past HEAD_MAX, it is not inspected.
        if next > HEAD_MAX {
            return HttpParse::Incomplete;
        }
        if line.is_empty() {
            break next;
        }
        if line[0] == b' ' || line[0] == b'\t' {
            // A folded continuation of the previous header's value.
            if let Some(last) = headers.last_mut() {
                last.1.push(b' ');
                last.1.extend_from_slice(trim(line));
            }
        } else if let Some(c) = line.iter().position(|&c| c == b':') {
            let name = trim(&line[..c]).to_vec();
            let value = trim(&line[c + 1..]).to_vec();
            let key = name.to_ascii_lowercase();
            match index.get(&key) {
                Some(&i) => {
                    headers[i].1.extend_from_slice(b", ");
                    headers[i].1.extend_from_slice(&value);
                }
                None => {
                    index.insert(key, headers.len());
                    headers.push((name, value));
                }
            }
        }
        pos = next;
    };
    head.set(Buffer::HttpRawHeader, seg[first_end + 1..head_end].to_vec());
    fill_headers(&mut head, &headers);
    let mut start = first.to_vec();
    start.extend_from_slice(b"\r\n");
    for (n, v) in &headers {
        start.extend_from_slice(n);
        start.extend_from_slice(b": ");
        start.extend_from_slice(v);
        start.extend_from_slice(b"\r\n");
    }
    start.extend_from_slice(b"\r\n");
    head.set(Buffer::HttpStart, start);
    let body = &seg[head_end..];
    let len = header(&headers, b"content-length").and_then(content_length);
    let chunked = header(&headers, b"transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().windows(7).any(|w| w == b"chunked"));
    // A request without Content-Length has no body; a response's runs to the close.
    let len = if head.is_request {
        len.or(Some(0))
    } else {
        len
    };
    if !chunked {
        let body = &body[..len.unwrap_or(body.len()).min(body.len())];
        if !body.is_empty() {
            let b = if head.is_request {
                Buffer::HttpClientBody
            } else {
                Buffer::FileData
            };
            head.set(b, body.to_vec());
        }
    }
    HttpParse::Head(Box::new(head))
}

fn fill_headers(head: &mut HttpHead, headers: &[(Vec<u8>, Vec<u8>)]) {
    let cookie: &[u8] = if head.is_request {
        b"cookie"
    } else {
        b"set-cookie"
    };
    let mut hb = Vec::new();
    for (n, v) in headers {
        if n.eq_ignore_ascii_case(cookie) {
            continue;
        }
        hb.extend_from_slice(n);
        hb.extend_from_slice(b": ");
        hb.extend_from_slice(v);
        hb.extend_from_slice(b"\r\n");
    }
    head.set(Buffer::HttpHeader, hb);
    let mut names = b"\r\n".to_vec();
    for (n, _) in headers {
        names.extend_from_slice(n);
        names.extend_from_slice(b"\r\n");
    }
    names.extend_from_slice(b"\r\n");
    head.set(Buffer::HttpHeaderNames, names);
    let mut by_name: Vec<(Buffer, &[u8])> = vec![
        (Buffer::HttpContentType, b"content-type"),
        (Buffer::HttpContentLen, b"content-length"),
    ];
    if head.is_request {
        by_name.extend([
            (Buffer::HttpAccept, &b"accept"[..]),
            (Buffer::HttpAcceptEnc, b"accept-encoding"),
            (Buffer::HttpAcceptLang, b"accept-language"),
            (Buffer::HttpConnection, b"connection"),
            (Buffer::HttpReferer, b"referer"),
        ]);
    } else {
        by_name.extend([
            (Buffer::HttpServer, &b"server"[..]),
            (Buffer::HttpLocation, b"location"),
        ]);
    }
    for (b, name) in by_name {
        if let Some(v) = header(headers, name) {
            head.set(b, v.to_vec());
        }
    }
    if let Some(c) = header(headers, cookie) {
        head.set(Buffer::HttpCookie, c.to_vec());
    }
    if head.is_request {
        if let Some(ua) = header(headers, b"user-agent") {
            head.set(Buffer::HttpUserAgent, ua.to_vec());
        }
        if let Some(h) = header(headers, b"host") {
            head.set(Buffer::HttpRawHost, h.to_vec());
            let host = match h.iter().rposition(|&c| c == b':') {
                // Strip a port, but not the colons of a bracketed IPv6 literal.
                Some(i) if !h[i..].contains(&b']') => &h[..i],
                _ => h,
            };
            head.set(Buffer::HttpHost, host.to_ascii_lowercase());
        }
    }
}

/// A Content-Length value (already trimmed): an optional `+`, then decimal digits only, without
/// overflow (ASCII only, as the GPU reads it).
fn content_length(v: &[u8]) -> Option<usize> {
    let digits = v.strip_prefix(b"+").unwrap_or(v);
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0usize, |n, &c| {
        if !c.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(usize::from(c - b'0'))
    })
}

/// Length of the version after `HTTP/` (up to the first space).
fn version_len(rest: &[u8]) -> usize {
    rest.iter().position(|&c| c == b' ').unwrap_or(rest.len())
}

fn header<'a>(headers: &'a [(Vec<u8>, Vec<u8>)], name: &[u8]) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_slice())
}

fn looks_http(seg: &[u8]) -> bool {
    seg.starts_with(b"HTTP/")
        || (seg.len() >= 3
            && seg
                .iter()
                .take_while(|&&c| c != b' ')
                .all(u8::is_ascii_uppercase)
            && seg.contains(&b' '))
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn trim_cr(l: &[u8]) -> &[u8] {
    l.strip_suffix(b"\r").unwrap_or(l)
}

fn trim(l: &[u8]) -> &[u8] {
    let s = l
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(l.len());
    let e = l
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(s, |e| e + 1);
    &l[s..e]
}

/// `%XX` decoded in the path, `.` and `..` segments removed; the query kept as sent.
fn normalize_uri(uri: &[u8]) -> Vec<u8> {
    let (path, query) = match uri.iter().position(|&c| c == b'?') {
        Some(q) => (&uri[..q], &uri[q..]),
        None => (uri, &[][..]),
    };
    let mut dec = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if path[i] == b'%' && i + 2 < path.len() {
            if let (Some(h), Some(l)) = (hex(path[i + 1]), hex(path[i + 2])) {
                dec.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        dec.push(path[i]);
        i += 1;
    }
    let mut out: Vec<&[u8]> = Vec::new();
    let segs: Vec<&[u8]> = dec.split(|&c| c == b'/').collect();
    let absolute = dec.first() == Some(&b'/');
    for (n, s) in segs.iter().enumerate() {
        match *s {
            b"." => {
                if n + 1 == segs.len() {
                    out.push(b"");
                }
            }
            b".." => {
                if out.len() > usize::from(absolute) {
                    out.pop();
                }
                if n + 1 == segs.len() {
                    out.push(b"");
                }
            }
            _ => out.push(s),
        }
    }
    let mut r = out.join(&b'/');
    if absolute && r.first() != Some(&b'/') {
        r.insert(0, b'/');
    }
    r.extend_from_slice(query);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(s: &[u8]) -> HttpHead {
        match parse(s) {
            HttpParse::Head(h) => *h,
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn request_buffers() {
        let h = head(
            b"POST /a/./b/../c%41?x=%41 HTTP/1.1\r\nHost: Example.COM:8080\r\nUser-Agent: Foo\r\n\
              Cookie: k=v\r\nX-A: 1  \r\nX-A: 2\r\nContent-Length: 3\r\n\r\nabcdef",
        );
        assert!(h.is_request);
        assert_eq!(h.buffer(Buffer::HttpMethod), Some(&b"POST"[..]));
        assert_eq!(
            h.buffer(Buffer::HttpRawUri),
            Some(&b"/a/./b/../c%41?x=%41"[..])
        );
        assert_eq!(h.buffer(Buffer::HttpUri), Some(&b"/a/cA?x=%41"[..]));
        assert_eq!(h.buffer(Buffer::HttpHost), Some(&b"example.com"[..]));
        assert_eq!(
            h.buffer(Buffer::HttpRawHost),
            Some(&b"Example.COM:8080"[..])
        );
        assert_eq!(h.buffer(Buffer::HttpUserAgent), Some(&b"Foo"[..]));
        assert_eq!(h.buffer(Buffer::HttpCookie), Some(&b"k=v"[..]));
        assert_eq!(
            h.buffer(Buffer::HttpHeader),
            Some(
                &b"Host: Example.COM:8080\r\nUser-Agent: Foo\r\nX-A: 1, 2\r\nContent-Length: 3\r\n"
                    [..]
            )
        );
        assert_eq!(h.buffer(Buffer::HttpClientBody), Some(&b"abc"[..]));
        assert_eq!(h.buffer(Buffer::HttpStatCode), None);
    }

    #[test]
    fn response_buffers() {
        let h = head(b"HTTP/1.1 404 Not Found\nSet-Cookie: a\nServer: x\n\nbody");
        assert!(!h.is_request);
        assert_eq!(h.buffer(Buffer::HttpStatCode), Some(&b"404"[..]));
        assert_eq!(h.buffer(Buffer::HttpStatMsg), Some(&b"Not Found"[..]));
        assert_eq!(h.buffer(Buffer::HttpHeader), Some(&b"Server: x\r\n"[..]));
        assert_eq!(h.buffer(Buffer::HttpCookie), Some(&b"a"[..]));
        assert_eq!(h.buffer(Buffer::FileData), Some(&b"body"[..]));
    }

    #[test]
    fn header_field_buffers() {
        let h = head(
            b"GET / HTTP/1.0\r\nAccept: a/b\r\nReferer: r\r\nContent-Type: t\r\nConnection: c\r\n\r\n",
        );
        assert_eq!(h.buffer(Buffer::HttpProtocol), Some(&b"HTTP/1.0"[..]));
        assert_eq!(
            h.buffer(Buffer::HttpRequestLine),
            Some(&b"GET / HTTP/1.0"[..])
        );
        assert_eq!(h.buffer(Buffer::HttpAccept), Some(&b"a/b"[..]));
        assert_eq!(h.buffer(Buffer::HttpReferer), Some(&b"r"[..]));
        assert_eq!(h.buffer(Buffer::HttpContentType), Some(&b"t"[..]));
        assert_eq!(h.buffer(Buffer::HttpConnection), Some(&b"c"[..]));
        assert_eq!(h.buffer(Buffer::HttpAcceptLang), None);
        assert_eq!(
            h.buffer(Buffer::HttpHeaderNames),
            Some(&b"\r\nAccept\r\nReferer\r\nContent-Type\r\nConnection\r\n\r\n"[..])
        );
        assert!(h
            .buffer(Buffer::HttpStart)
            .unwrap()
            .starts_with(b"GET / HTTP/1.0\r\nAccept: a/b\r\n"));
        assert!(h
            .buffer(Buffer::HttpStart)
            .unwrap()
            .ends_with(b"Connection: c\r\n\r\n"));
        let r = head(b"HTTP/1.1 302 Found\r\nLocation: /x\r\nServer: s\r\n\r\n");
        assert_eq!(r.buffer(Buffer::HttpProtocol), Some(&b"HTTP/1.1"[..]));
        assert_eq!(
            r.buffer(Buffer::HttpResponseLine),
            Some(&b"HTTP/1.1 302 Found"[..])
        );
        assert_eq!(r.buffer(Buffer::HttpLocation), Some(&b"/x"[..]));
        assert_eq!(r.buffer(Buffer::HttpServer), Some(&b"s"[..]));
        for (i, b) in Buffer::ALL.iter().enumerate() {
            assert_eq!(*b as usize, i);
            assert_eq!(Buffer::from_code(i as u8), Some(*b));
        }
        assert_eq!(Buffer::from_code(BUFFER_COUNT as u8), None);
    }

    #[test]
    fn split_head_and_non_http() {
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nHost: a\r\n"),
            HttpParse::Incomplete
        );
        assert_eq!(parse(b"GET /very-long"), HttpParse::Incomplete);
        assert_eq!(parse(b"\x16\x03\x01\x00\x05hello\n"), HttpParse::NotHttp);
        assert_eq!(parse(b"HTTP/1.1 2000 x\r\n\r\n"), HttpParse::NotHttp);
        assert_eq!(parse(b""), HttpParse::NotHttp);
    }

    #[test]
    fn a_head_past_head_max_is_not_inspected() {
        // 20000 headers: refused at HEAD_MAX, without reading on.
        let mut seg = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..20_000 {
            seg.extend_from_slice(format!("h{i}: v\r\nRepeat: x\r\n").as_bytes());
        }
        seg.extend_from_slice(b"\r\n");
        let t = std::time::Instant::now();
        assert_eq!(parse(&seg), HttpParse::Incomplete);
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        // A head of exactly HEAD_MAX bytes is one; a byte more is not.
        let mut seg = b"GET / HTTP/1.1\r\nX: ".to_vec();
        seg.resize(HEAD_MAX - 4, b'a');
        seg.extend_from_slice(b"\r\n\r\nbody");
        let h = head(&seg);
        assert_eq!(
            h.buffer(Buffer::HttpRawHeader).unwrap().len(),
            HEAD_MAX - 16
        );
        seg.insert(20, b'a');
        assert_eq!(parse(&seg), HttpParse::Incomplete);
    }

    #[test]
    fn content_length_is_plus_and_digits() {
        assert_eq!(content_length(b"12"), Some(12));
        assert_eq!(content_length(b"+7"), Some(7));
        for bad in [
            &b""[..],
            b"+",
            b"-1",
            b"1 2",
            b"\x0b3",
            b"99999999999999999999",
            b"3, 3",
        ] {
            assert_eq!(content_length(bad), None, "{bad:?}");
        }
        let h = head(b"POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\nabc");
        assert_eq!(h.buffer(Buffer::HttpClientBody), Some(&b"ab"[..]));
    }

    #[test]
    fn uri_normalization_edges() {
        assert_eq!(normalize_uri(b"/%"), b"/%");
        assert_eq!(normalize_uri(b"/%4"), b"/%4");
        assert_eq!(normalize_uri(b"/%zz/.."), b"/");
        assert_eq!(normalize_uri(b"/../../a"), b"/a");
        assert_eq!(normalize_uri(b"/a/b/."), b"/a/b/");
    }
}
