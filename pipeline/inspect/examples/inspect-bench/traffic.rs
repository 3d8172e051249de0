//! The benchmark's frames: L4 payloads of one size cut from real traffic (the tcpdump
//! captures' payloads and HTTP-like text), a share of them HTTP/1.1 requests to port 80, and a
//! small share carrying one loaded rule's fast pattern in the rule's buffer (a planted hit),
//! deterministic for a seed. HTTP heads are parsed once here, not in the timed loop.

use std::net::{IpAddr, Ipv4Addr};

use pktwarp_inspect::eval::{self, Counters, Frame};
use pktwarp_inspect::http::HttpHead;
use pktwarp_inspect::rules::Buffer;

use super::engine::Rules;

/// One frame, owned.
pub struct Owned {
    pub payload: Vec<u8>,
    pub head: Option<HttpHead>,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
    pub planted: bool,
}

impl Owned {
    pub fn frame(&self) -> Frame<'_> {
        Frame {
            ip_proto: self.proto,
            src: self.src,
            dst: self.dst,
            src_port: self.sport,
            dst_port: self.dport,
            tcp_flags: 0x18,
            icmp_type: 0,
            icmp_code: 0,
            ct_state: 0,
            ct_dir: 0,
            payload: &self.payload,
            http: self.head.as_ref(),
        }
    }
}

/// xorshift64*: a fixed sequence per seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }
}

pub struct Mix {
    pub size: usize,
    pub frames: usize,
    /// Share of frames that are HTTP requests (sizes of at least 256 bytes).
    pub http_share: f64,
    /// Share of frames with a planted fast pattern.
    pub hit_rate: f64,
    pub seed: u64,
}

const METHODS: [&str; 3] = ["GET", "POST", "HEAD"];
const PATHS: [&str; 6] = [
    "/index.html",
    "/wp-login.php",
    "/api/v1/items?id=42",
    "/cgi-bin/test.cgi",
    "/images/logo.png",
    "/search?q=pktwarp&lang=en",
];
const AGENTS: [&str; 4] = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36",
    "curl/7.68.0",
    "Wget/1.20.3",
    "python-requests/2.22",
];
const PORTS: [u16; 9] = [80, 443, 25, 53, 445, 21, 8080, 110, 3306];

/// Printable, no space: can stand in a request line or a header value.
fn head_safe(p: &[u8]) -> bool {
    !p.is_empty() && p.iter().all(|&b| b > b' ' && b < 0x7f)
}

/// Parts of one HTTP request; `pad_to` pads the body so the segment has that many bytes.
struct Req {
    method: String,
    uri: String,
    host: String,
    agent: String,
    header: Option<String>,
}

impl Req {
    fn bytes(&self, pad_to: usize) -> Vec<u8> {
        let mut h = format!(
            "{} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: {}\r\nAccept: */*\r\n",
            self.method, self.uri, self.host, self.agent
        );
        if let Some(x) = &self.header {
            h += &format!("X-Data: {x}\r\n");
        }
        // The body that makes the segment `pad_to` bytes: its length's digits count too.
        let fixed = h.len() + "Content-Length: \r\n\r\n".len();
        let body = (1..=6)
            .filter_map(|d| pad_to.checked_sub(fixed + d))
            .find(|b| b.to_string().len() + fixed + b == pad_to)
            .unwrap_or(0);
        h += &format!("Content-Length: {body}\r\n\r\n");
        let mut v = h.into_bytes();
        v.extend((0..body).map(|i| b'a' + (i % 26) as u8));
        v
    }
}

/// The rules' fast patterns that can be planted: (buffer, bytes).
fn plantable(r: &Rules) -> Vec<(Buffer, Vec<u8>)> {
    let mut out = Vec::new();
    for b in &r.bufs {
        for p in b.set.patterns() {
            out.push((b.buffer, p.bytes.clone()));
        }
    }
    out
}

/// The frames of `mix`, their payloads cut from `stream`.
pub fn frames(r: &Rules, stream: &[u8], mix: &Mix) -> Vec<Owned> {
    let mut rng = Rng(mix.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let plants = plantable(r);
    let mut counters = Counters::default();
    let mut out = Vec::with_capacity(mix.frames);
    for _ in 0..mix.frames {
        let src = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | rng.next() as u32 & 0xff_ffff));
        let dst = IpAddr::V4(Ipv4Addr::from(0xc0a8_0000 | rng.next() as u32 & 0xffff));
        let sport = 1024 + rng.below(60000) as u16;
        let http = mix.size >= 256 && rng.chance(mix.http_share);
        let plant = if rng.chance(mix.hit_rate) && !plants.is_empty() {
            Some(&plants[rng.below(plants.len())])
        } else {
            None
        };
        let mut req = Req {
            method: METHODS[rng.below(METHODS.len())].into(),
            uri: PATHS[rng.below(PATHS.len())].into(),
            host: format!("www.example{}.com", rng.below(100)),
            agent: AGENTS[rng.below(AGENTS.len())].into(),
            header: None,
        };
        // A fast pattern of an HTTP buffer goes into that part of a request (when it can
        // stand there); any other into the payload at a random place.
        let mut in_payload = plant.map(|(_, p)| p.as_slice());
        let mut as_http = http;
        if let Some((b, p)) = plant {
            if *b != Buffer::Payload && mix.size >= 256 && head_safe(p) {
                let s = String::from_utf8_lossy(p).into_owned();
                as_http = true;
                in_payload = None;
                match b {
                    Buffer::HttpUri | Buffer::HttpRawUri => req.uri = format!("/{s}"),
                    Buffer::HttpUserAgent => req.agent = s,
                    Buffer::HttpHost | Buffer::HttpRawHost => req.host = s,
                    Buffer::HttpMethod => req.method = s,
                    _ => req.header = Some(s),
                }
            }
        }
        let (payload, dport, proto) = if as_http {
            (req.bytes(mix.size), 80, 6)
        } else {
            let at = rng.below(stream.len() - mix.size);
            let v = stream[at..at + mix.size].to_vec();
            let proto = if rng.chance(0.8) { 6 } else { 17 };
            (v, PORTS[rng.below(PORTS.len())], proto)
        };
        let mut o = Owned {
            payload,
            head: None,
            src,
            dst,
            sport,
            dport,
            proto,
            planted: plant.is_some(),
        };
        if let Some(p) = in_payload {
            let room = o.payload.len().saturating_sub(p.len());
            if p.len() <= o.payload.len() {
                let at = rng.below(room + 1);
                o.payload[at..at + p.len()].copy_from_slice(p);
            }
        }
        o.head = eval::http_of(o.proto, &o.payload, &mut counters);
        out.push(o);
    }
    out
}
