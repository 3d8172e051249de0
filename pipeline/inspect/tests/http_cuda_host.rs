//! The CUDA HTTP head parse (gpu-kernels/cuda/inspect_http.cuh, compiled for the host through
//! host/inspect_http_host.cpp) equals pktwarp_inspect::http::parse: the outcome (a head, split,
//! not HTTP) and every buffer's bytes, read in any order and repeated (the CUDA keeps one built
//! buffer in its scratch). Cases: property-generated requests and responses (methods, URIs with
//! escapes and dot segments, headers in different cases, repeated and folded, cookies, hosts
//! with ports and IPv6 literals, Content-Length and chunked bodies, truncated heads, bytes that
//! are not HTTP) and heads at the HEAD_MAX bound.

use pktwarp_inspect::http::{self, HttpParse, HEAD_MAX};
use pktwarp_inspect::rules::{Buffer, BUFFER_COUNT};
use pktwarp_kernels::host::ffi;
use proptest::prelude::*;

/// The CUDA parse of `seg`: its kind and the bytes of each buffer of `order`, in turn.
fn cuda(seg: &[u8], order: &[u32]) -> (u32, Vec<Vec<u8>>) {
    let cap = order.len() * (2 * HEAD_MAX + 16) + seg.len() * order.len() + 1;
    let mut out = vec![0u8; cap];
    let mut lens = vec![0u32; order.len()];
    // SAFETY: `seg` has seg.len() bytes, `order` order.len() codes, `lens` one slot per code;
    // `out` holds `cap` bytes, more than the buffers can take (each at most the scratch or the
    // segment), and the callee writes only within `cap`.
    let kind = unsafe {
        ffi::pw_host_insp_http(
            seg.as_ptr(),
            seg.len() as u32,
            order.as_ptr(),
            order.len() as u32,
            out.as_mut_ptr(),
            cap as u64,
            lens.as_mut_ptr(),
        )
    };
    let mut at = 0;
    let bufs = lens
        .iter()
        .map(|&l| {
            let b = out[at..at + l as usize].to_vec();
            at += l as usize;
            b
        })
        .collect();
    (kind, bufs)
}

/// CPU and CUDA agree on `seg`, reading the buffers in `order` then all of them.
fn same(seg: &[u8], order: &[u32]) -> Result<u32, TestCaseError> {
    let mut all: Vec<u32> = order.to_vec();
    all.extend(1..BUFFER_COUNT as u32);
    let (kind, bufs) = cuda(seg, &all);
    let cpu = http::parse(seg);
    let want = match &cpu {
        HttpParse::NotHttp => 0,
        HttpParse::Head(_) => 1,
        HttpParse::Incomplete => 2,
    };
    prop_assert_eq!(kind, want, "kind of {:?}", String::from_utf8_lossy(seg));
    if let HttpParse::Head(h) = cpu {
        for (b, got) in all.iter().zip(&bufs) {
            let buf = Buffer::from_code(*b as u8).expect("a code");
            let cpu = h.buffer(buf).unwrap_or_default();
            prop_assert_eq!(
                got.as_slice(),
                cpu,
                "buffer {:?} of {:?}",
                buf,
                String::from_utf8_lossy(seg)
            );
        }
    }
    Ok(kind)
}

const METHODS: &[&str] = &[
    "GET", "POST", "M-SEARCH", "PUT_X", "get", "G3T", "OPTIONS", "",
];
const URI_PARTS: &[&str] = &[
    "/", "a", "b", ".", "..", "%41", "%2f", "%2E", "%", "%4", "%zz", "?", "q=%41&r", "//", "http:",
    "*", "%2e%2e", "\t", "x.y",
];
const VERSIONS: &[&str] = &[
    "HTTP/1.1",
    "HTTP/1.0",
    "HTTP/",
    "FTP/1.0",
    "http/1.1",
    "HTTP/2 extra",
];
const NAMES: &[&str] = &[
    "Host",
    "host",
    "HOST",
    "User-Agent",
    "user-agent",
    "Cookie",
    "Set-Cookie",
    "Content-Length",
    "content-length",
    "Transfer-Encoding",
    "Content-Type",
    "Accept",
    "Accept-Encoding",
    "Accept-Language",
    "Connection",
    "Referer",
    "Server",
    "Location",
    "X-A",
    "",
    " Host ",
];
const VALUES: &[&str] = &[
    "Example.COM:8080",
    "[::1]:80",
    "[::1]",
    "a:b:c",
    " 12 ",
    "3",
    "+5",
    "-1",
    "99999999999999999999999",
    "chunked",
    "gzip, Chunked",
    "",
    "a\tb",
    "\x0b7",
    "Mozilla/5.0 (X11)",
    "k=v; s=t",
    "text/html",
];

/// One header line (or a folded line, or a line without a colon), without its line end.
fn header_line() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0..NAMES.len(), 0..3usize, 0..VALUES.len()).prop_map(|(n, sep, v)| {
            format!("{}{}{}", NAMES[n], [":", ": ", " :  "][sep], VALUES[v])
        }),
        1 => (0..VALUES.len(), any::<bool>()).prop_map(|(v, tab)| {
            format!("{}{}", if tab { "\t" } else { " " }, VALUES[v])
        }),
        1 => Just("no colon here".to_string()),
    ]
}

fn start_line() -> impl Strategy<Value = String> {
    prop_oneof![
        (
            0..METHODS.len(),
            proptest::collection::vec(0..URI_PARTS.len(), 0..8),
            0..VERSIONS.len(),
            0..3usize,
            any::<bool>()
        )
            .prop_map(|(m, uri, v, spaces, lead)| {
                let sp = " ".repeat(spaces + 1);
                let uri: String = uri.iter().map(|&i| URI_PARTS[i]).collect();
                let uri = if uri.is_empty() { "/".to_string() } else { uri };
                format!(
                    "{}{}{sp}{uri}{sp}{}",
                    if lead { "  " } else { "" },
                    METHODS[m],
                    VERSIONS[v]
                )
            }),
        (0..6usize, 0..4usize).prop_map(|(c, m)| {
            format!(
                "HTTP/1.1{}{}",
                [" 200", " 404", " 2000", " 20x", "", "  200"][c],
                [" OK", " Not Found", "", " a b "][m]
            )
        }),
    ]
}

/// A segment: a start line, headers, maybe the empty line, a body; maybe cut short.
fn segment() -> impl Strategy<Value = Vec<u8>> {
    (
        start_line(),
        proptest::collection::vec(header_line(), 0..10),
        any::<bool>(),
        any::<bool>(),
        proptest::collection::vec(any::<u8>(), 0..40),
        prop_oneof![3 => Just(None), 1 => any::<prop::sample::Index>().prop_map(Some)],
    )
        .prop_map(|(start, headers, crlf, end, body, cut)| {
            let eol = if crlf { "\r\n" } else { "\n" };
            let mut s = format!("{start}{eol}");
            for h in headers {
                s.push_str(&h);
                s.push_str(eol);
            }
            if end {
                s.push_str(eol);
            }
            let mut seg = s.into_bytes();
            seg.extend_from_slice(&body);
            if let Some(i) = cut {
                seg.truncate(i.index(seg.len() + 1));
            }
            seg
        })
}

fn order() -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::vec(1..BUFFER_COUNT as u32, 0..12)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn generated_heads_give_the_cpus_buffers(seg in segment(), order in order()) {
        same(&seg, &order)?;
    }

    #[test]
    fn arbitrary_bytes_give_the_cpus_outcome(seg in proptest::collection::vec(any::<u8>(), 0..64), order in order()) {
        same(&seg, &order)?;
    }
}

/// The generator reaches every outcome and buffers that are built (not slices), so the
/// property above is not vacuous.
#[test]
fn the_generated_heads_reach_every_outcome() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut kinds = [0usize; 3];
    let mut built = 0;
    for _ in 0..2000 {
        let seg = segment().new_tree(&mut runner).unwrap().current();
        let k = same(&seg, &[]).unwrap_or_else(|e| panic!("{e}"));
        kinds[k as usize] += 1;
        if let HttpParse::Head(h) = http::parse(&seg) {
            let uri = h.buffer(Buffer::HttpUri).unwrap_or_default();
            built += usize::from(Some(uri) != h.buffer(Buffer::HttpRawUri));
        }
    }
    assert!(kinds.iter().all(|&n| n > 50), "{kinds:?}");
    assert!(
        built > 20,
        "{built} normalized URIs differ from the raw ones"
    );
}

/// Heads at the bound: the largest built buffers (many short distinct, repeated and folded
/// lines, so http_start and http_header reach about 1.4 times the head) still equal the CPU's,
/// and a head pushed past HEAD_MAX makes both refuse it.
#[test]
fn heads_at_head_max_equal_the_cpu() {
    let kinds: [fn(usize) -> String; 5] = [
        |i| format!("{i:x}:\n"),
        |_| "a:\n".into(),
        |i| {
            if i % 2 == 0 {
                format!("{i:x}:v\n")
            } else {
                " f\n".into()
            }
        },
        |_| "Cookie:\n".into(),
        |i| format!("B:{}\n", i % 10),
    ];
    for (k, line) in kinds.iter().enumerate() {
        let mut seg = b"GET /%41/./b/../c HTTP/1.1\n".to_vec();
        let mut i = 0;
        while seg.len() + line(i).len() < HEAD_MAX {
            seg.extend_from_slice(line(i).as_bytes());
            i += 1;
        }
        seg.push(b'\n');
        assert_eq!(same(&seg, &[4, 15, 14, 1, 9]).unwrap(), 1, "kind {k}");
        if k == 0 {
            let HttpParse::Head(h) = http::parse(&seg) else {
                unreachable!()
            };
            let start = h.buffer(Buffer::HttpStart).unwrap().len();
            assert!(start > HEAD_MAX * 5 / 4, "{start}");
        }
        let pad = HEAD_MAX + 1 - seg.len();
        seg.splice(5..5, std::iter::repeat_n(b'a', pad));
        assert_eq!(same(&seg, &[4]).unwrap(), 2, "kind {k} past the bound");
    }
}
