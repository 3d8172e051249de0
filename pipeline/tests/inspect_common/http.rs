//! HTTP traffic and rules over the HTTP buffers, for the tests that hold the GPU stage's HTTP
//! parse (cuda/inspect_http.cuh) equal to the CPU's: requests and responses with escaped and
//! dotted URIs, headers in any case, repeated and folded, cookies, hosts with ports, bodies by
//! Content-Length or chunked, heads cut short (split over segments); rules of every HTTP buffer
//! with content modifiers, negations, urilen.

use super::{eth, ipv4, l4, Rng};
use pipeline::burst::FrameDesc;

/// Words the traffic carries and the rules look for.
const TOKENS: &[&str] = &[
    "admin",
    "Admin",
    "passwd",
    "Mozilla",
    "curl",
    "EvilAgent",
    "sqlmap",
    "SECRET",
    "session",
    "example.com",
    "EXAMPLE",
    "text/html",
    "GET",
    "POST",
    "200",
    "404",
    "php",
    "..",
    "/etc/",
    "%2e",
    "gzip",
    "4f2a",
    "Apache",
    "keep-alive",
    "evil",
    "HTTP/1.1",
    "id=1",
    "Host",
];

fn header_case(g: &mut Rng, name: &str) -> String {
    match g.below(4) {
        0 => name.to_ascii_lowercase(),
        1 => name.to_ascii_uppercase(),
        _ => name.to_string(),
    }
}

fn uri(g: &mut Rng) -> String {
    const PARTS: &[&str] = &[
        "admin",
        "%61dmin",
        "..",
        ".",
        "x.php",
        "%2e%2e",
        "etc",
        "passwd",
        "%70asswd",
        "",
        "a%zz",
        "index.html",
        "%2F",
        "EvilAgent",
    ];
    let mut u = String::new();
    for _ in 0..1 + g.below(5) {
        u.push('/');
        let part = *g.pick(PARTS);
        u.push_str(part);
    }
    if g.chance(40) {
        let query = *g.pick(&["?id=1", "?q=%41dmin&x=..", "?/etc/passwd", "?"]);
        u.push_str(query);
    }
    u
}

/// The header lines of a request or response, before the empty line.
fn headers(g: &mut Rng, request: bool, body_len: usize) -> Vec<String> {
    let mut h: Vec<String> = Vec::new();
    let pool: &[(&str, &[&str])] = if request {
        &[
            (
                "Host",
                &["Example.COM:8080", "example.com", "[::1]:80", "EXAMPLE.com"],
            ),
            (
                "User-Agent",
                &["Mozilla/5.0 (X11)", "curl/7.1", "EvilAgent", "sqlmap/1.0"],
            ),
            ("Cookie", &["session=SECRET", "a=b; session=x"]),
            ("Accept", &["text/html", "*/*"]),
            ("Accept-Encoding", &["gzip", "gzip, deflate"]),
            ("Accept-Language", &["en", "de-DE"]),
            ("Connection", &["keep-alive", "close"]),
            ("Referer", &["http://evil/admin", "http://example.com/"]),
            ("X-Scan-Token", &["4f2a", "0000"]),
            (
                "Content-Type",
                &["text/html", "application/x-www-form-urlencoded"],
            ),
        ]
    } else {
        &[
            ("Server", &["Apache/2.4", "nginx"]),
            ("Set-Cookie", &["session=SECRET", "id=1"]),
            ("Location", &["/admin", "http://example.com/passwd"]),
            ("Content-Type", &["text/html", "application/php"]),
            ("Connection", &["keep-alive", "close"]),
        ]
    };
    for _ in 0..g.below(7) {
        let (name, values) = g.pick(pool);
        let sep = *g.pick(&[": ", ":", " :  "]);
        h.push(format!("{}{sep}{}", header_case(g, name), g.pick(values)));
        if g.chance(10) {
            h.push(format!("{}{}", g.pick(&[" ", "\t"]), g.pick(TOKENS)));
        }
    }
    match g.below(6) {
        0 => h.push(format!("Content-Length: {}", body_len / 2)),
        1 => h.push("Transfer-Encoding: chunked".into()),
        2 | 3 => h.push(format!("content-length: {body_len}")),
        _ => {}
    }
    h
}

/// One TCP payload: a request or a response (at times cut before the head's end, or not HTTP).
pub fn http_payload(g: &mut Rng) -> Vec<u8> {
    let request = g.chance(65);
    let eol = if g.chance(80) { "\r\n" } else { "\n" };
    let body: String = (0..g.below(4))
        .map(|_| format!("{}&", g.pick(TOKENS)))
        .collect();
    let start = if request {
        let m = *g.pick(&["GET", "POST", "HEAD", "PUT", "M-SEARCH", "get"]);
        let v = *g.pick(&["HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/2"]);
        format!("{m} {} {v}", uri(g))
    } else {
        let code = *g.pick(&["200 OK", "404 Not Found", "302 Found", "500 evil", "20 x"]);
        format!("HTTP/1.1 {code}")
    };
    let mut s = format!("{start}{eol}");
    for h in headers(g, request, body.len()) {
        s.push_str(&h);
        s.push_str(eol);
    }
    let split = g.chance(10);
    if !split {
        s.push_str(eol);
        s.push_str(&body);
    }
    let mut p = s.into_bytes();
    if split && g.chance(50) {
        p.truncate(g.below(p.len() as u64 + 1) as usize);
    }
    p
}

/// `n` TCP frames carrying [`http_payload`]s (IPv4, ports 80 and others) over two queues.
pub fn http_traffic(seed: u64, n: usize) -> Vec<(FrameDesc, Vec<u8>)> {
    let mut g = Rng::new(seed);
    let hosts: [[u8; 4]; 3] = [[10, 0, 0, 1], [192, 168, 1, 7], [8, 8, 8, 8]];
    (0..n)
        .map(|i| {
            let pay = http_payload(&mut g);
            let (sp, dp) = if g.chance(50) {
                (40000 + g.below(4) as u16, *g.pick(&[80, 8080]))
            } else {
                (*g.pick(&[80, 8080]), 40000 + g.below(4) as u16)
            };
            let seg = l4(&mut g, 6, sp, dp, &pay);
            let (src, dst) = (*g.pick(&hosts), *g.pick(&hosts));
            let mut f = eth(0x0800, None);
            f.extend(ipv4(&mut g, 6, &seg, src, dst));
            let d = FrameDesc {
                wire_len: f.len() as u32,
                timestamp_ns: 1_700_000_000_000_000_000 + i as u64 * 1000,
                queue: (i % 2) as u16,
                ..FrameDesc::default()
            };
            (d, f)
        })
        .collect()
}

/// A rule set over the HTTP buffers made from `seed` (sids from 5000).
pub fn http_rules(seed: u64, n: usize) -> String {
    const MODIFIERS: &[&str] = &[
        "http_uri",
        "http_raw_uri",
        "http_method",
        "http_header",
        "http_raw_header",
        "http_user_agent",
        "http_host",
        "http_raw_host",
        "http_cookie",
        "http_client_body",
        "http_stat_code",
        "http_stat_msg",
    ];
    const STICKY: &[&str] = &[
        "file_data",
        "http.header_names",
        "http.start",
        "http.protocol",
        "http.request_line",
        "http.response_line",
        "http.content_type",
        "http.content_len",
        "http.accept",
        "http.accept_enc",
        "http.accept_lang",
        "http.connection",
        "http.referer",
        "http.server",
        "http.location",
        "http.uri",
        "http.cookie",
    ];
    let mut g = Rng::new(seed);
    let mut out = String::new();
    for i in 0..n {
        let action = g.pick(&["alert", "alert", "alert", "drop", "pass"]);
        let proto = g.pick(&["http", "http", "tcp"]);
        let mut opts = String::new();
        if g.chance(15) {
            opts.push_str(&format!(
                "urilen:{}; ",
                g.pick(&[">5", "<12", "3<>30", "10", ">0"])
            ));
        }
        for j in 0..1 + g.below(3) {
            let tok = g.pick(TOKENS);
            let neg = if j > 0 && g.chance(15) { "!" } else { "" };
            let mods = match g.below(6) {
                0 => "nocase; ".to_string(),
                1 => format!("depth:{}; ", 4 + g.below(30)),
                2 => format!("offset:{}; ", g.below(6)),
                3 if j > 0 => format!("distance:0; within:{}; ", 10 + g.below(40)),
                _ => String::new(),
            };
            if g.chance(70) {
                let m = g.pick(MODIFIERS);
                opts.push_str(&format!("content:{neg}\"{tok}\"; {m}; {mods}"));
            } else if g.chance(20) {
                opts.push_str(&format!("uricontent:\"{tok}\"; {mods}"));
            } else {
                let s = g.pick(STICKY);
                opts.push_str(&format!("{s}; content:{neg}\"{tok}\"; {mods}"));
            }
        }
        out.push_str(&format!(
            "{action} {proto} any any -> any any (msg:\"h{i}\"; {opts}sid:{};)\n",
            5000 + i
        ));
    }
    out
}
