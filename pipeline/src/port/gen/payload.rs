//! Payloads the generator plants (`gen.payload`): chosen byte strings at a fixed or random
//! offset of the L4 payload, and HTTP/1.1 request heads in TCP segments to the HTTP port, in a
//! configured share of the frames; the other payload bytes are zeros or seeded random bytes.
//! For inspection runs: traffic that carries some of the rules' patterns at a known rate.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Deserializer};

use super::frame::{FrameSpec, PROTO_TCP};
use super::MAX_FRAME_SIZE;

/// The longest L4 payload a frame can carry: the largest frame less the FCS and the longest
/// headers (Ethernet, one VLAN tag, IPv6, TCP).
pub const MAX_PAYLOAD: usize = MAX_FRAME_SIZE as usize - 4 - (14 + 4 + 40 + 20);
/// Seeded random bytes that random fill is copied from (at a random start per frame).
const FILL_BLOCK: usize = 64 << 10;
/// Longest HTTP method token (as `pktwarp_inspect::http` accepts).
const MAX_METHOD: usize = 32;
/// TCP flags of a segment that carries an HTTP request: PSH | ACK.
const HTTP_TCP_FLAGS: u8 = 0x18;

/// What fills the payload bytes that carry nothing planted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fill {
    /// Zero bytes (the generator's payload without `payload`).
    #[default]
    Zeros,
    /// Bytes of a seeded random block, a different stretch per frame.
    Random,
}

/// Where planted bytes start in the L4 payload: YAML `random` (default: uniform over the
/// places where they fit in the frame's size) or a byte offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PlantOffset {
    #[default]
    Random,
    At(u16),
}

impl<'de> Deserialize<'de> for PlantOffset {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = PlantOffset;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "`random` or a byte offset 0 ..= {MAX_PAYLOAD}")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<PlantOffset, E> {
                match u16::try_from(v) {
                    Ok(o) if usize::from(o) <= MAX_PAYLOAD => Ok(PlantOffset::At(o)),
                    _ => Err(E::custom(format!(
                        "offset {v} is outside 0 ..= {MAX_PAYLOAD}"
                    ))),
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<PlantOffset, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(format!("offset {v} is negative")))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PlantOffset, E> {
                match v {
                    "random" => Ok(PlantOffset::Random),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

fn default_weight() -> u32 {
    1
}

/// One planted byte string: `text` (UTF-8, as written) or `hex` (`"41 42 ff"`, `"4142ff"`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlantOptions {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub hex: Option<String>,
    /// Relative weight among the plant and http entries. Default 1.
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// This entry's offset; default `gen.payload.offset`.
    #[serde(default)]
    pub offset: Option<PlantOffset>,
}

fn default_method() -> String {
    "GET".into()
}

/// One HTTP/1.1 request: `METHOD URI HTTP/1.1`, `Host`, `User-Agent`, the extra header lines,
/// `Content-Length` when there is a body, the empty line, the body.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpRequestOptions {
    /// Default `GET`.
    #[serde(default = "default_method")]
    pub method: String,
    pub uri: String,
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub user_agent: Option<String>,
    /// Extra header lines, each `Name: value`.
    #[serde(default)]
    pub headers: Vec<String>,
    #[serde(default)]
    pub body: Option<String>,
    /// Relative weight among the plant and http entries. Default 1.
    #[serde(default = "default_weight")]
    pub weight: u32,
}

fn default_ratio() -> f64 {
    0.1
}
fn default_http_port() -> u16 {
    80
}

/// `gen.payload`: what share of the frames carry which planted bytes or HTTP requests.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadOptions {
    /// Byte strings to plant.
    #[serde(default)]
    pub plant: Vec<PlantOptions>,
    /// HTTP requests to send (each alone in one TCP segment to `http_port`).
    #[serde(default)]
    pub http: Vec<HttpRequestOptions>,
    /// Share of frames that carry one entry (chosen by weight), 0.0 ..= 1.0. Default 0.1.
    #[serde(default = "default_ratio")]
    pub ratio: f64,
    /// The other payload bytes: `zeros` (default) or `random`.
    #[serde(default)]
    pub fill: Fill,
    /// Where plants start: `random` (default) or a byte offset.
    #[serde(default)]
    pub offset: PlantOffset,
    /// TCP destination port of the HTTP requests. Default 80.
    #[serde(default = "default_http_port")]
    pub http_port: u16,
}

/// What one frame's L4 payload holds (a field of [`FrameSpec`], so a frame stays `Copy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PayloadSel {
    /// Zeros (the frame as without `payload`).
    #[default]
    Zeros,
    /// Fill alone: random bytes from `fill_at` in the fill block.
    Fill { fill_at: u32 },
    /// Entry `item` of the table at `offset` over the fill.
    Item {
        item: u32,
        offset: u16,
        fill_at: u32,
    },
}

#[derive(Clone, Debug)]
struct Item {
    bytes: Vec<u8>,
    /// None for an HTTP request (at offset 0, alone in its segment).
    offset: Option<PlantOffset>,
}

/// The compiled `gen.payload`: the entries' bytes, their weights, the fill block.
#[derive(Clone, Debug)]
pub struct Payloads {
    items: Vec<Item>,
    cdf: Vec<u64>,
    ratio: f64,
    fill: Fill,
    block: Vec<u8>,
    http_port: u16,
}

fn hex_bytes(s: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if digits.len() % 2 != 0 {
        return Err("an odd number of hex digits".into());
    }
    digits
        .chunks(2)
        .map(|p| {
            let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
            match (digit(p[0]), digit(p[1])) {
                (Some(h), Some(l)) => Ok(h << 4 | l),
                _ => Err(format!(
                    "`{}` is not a hex byte",
                    String::from_utf8_lossy(p).escape_debug()
                )),
            }
        })
        .collect()
}

/// A header value or line: no CR, LF or other control byte but tab.
fn clean_line(s: &str) -> Result<(), String> {
    match s.bytes().find(|&b| b.is_ascii_control() && b != b'\t') {
        Some(b) => Err(format!("holds the control byte 0x{b:02x}")),
        None => Ok(()),
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The request's bytes; errors name the key under `gen.payload.http[i]`.
fn render_http(r: &HttpRequestOptions, key: &str) -> Result<Vec<u8>, String> {
    if !is_token(&r.method) || r.method.len() > MAX_METHOD {
        return Err(format!(
            "{key}.method: `{}` is not a method (1 to {MAX_METHOD} token characters)",
            r.method.escape_debug()
        ));
    }
    if r.uri.is_empty() || r.uri.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!(
            "{key}.uri: `{}` must be non-empty, without spaces or control bytes",
            r.uri.escape_debug()
        ));
    }
    let mut head = format!("{} {} HTTP/1.1\r\n", r.method, r.uri);
    for (name, v) in [("host", &r.host), ("user_agent", &r.user_agent)] {
        if let Some(v) = v {
            clean_line(v).map_err(|e| format!("{key}.{name}: {e}"))?;
        }
    }
    if let Some(h) = &r.host {
        head += &format!("Host: {h}\r\n");
    }
    if let Some(u) = &r.user_agent {
        head += &format!("User-Agent: {u}\r\n");
    }
    for (j, line) in r.headers.iter().enumerate() {
        clean_line(line).map_err(|e| format!("{key}.headers[{j}]: {e}"))?;
        let name = line.split_once(':').map(|(n, _)| n);
        if !name.is_some_and(is_token) {
            return Err(format!(
                "{key}.headers[{j}]: `{}` is not `Name: value`",
                line.escape_debug()
            ));
        }
        head += line;
        head += "\r\n";
    }
    if let Some(b) = &r.body {
        head += &format!("Content-Length: {}\r\n", b.len());
    }
    head += "\r\n";
    let mut bytes = head.into_bytes();
    if let Some(b) = &r.body {
        bytes.extend_from_slice(b.as_bytes());
    }
    if bytes.len() > MAX_PAYLOAD {
        return Err(format!(
            "{key}: the request is {} bytes, over the {MAX_PAYLOAD} a frame can carry",
            bytes.len()
        ));
    }
    Ok(bytes)
}

fn plant_bytes(p: &PlantOptions, key: &str, default_offset: PlantOffset) -> Result<Item, String> {
    let bytes = match (&p.text, &p.hex) {
        (Some(t), None) => t.as_bytes().to_vec(),
        (None, Some(h)) => hex_bytes(h).map_err(|e| format!("{key}.hex: {e}"))?,
        _ => return Err(format!("{key}: give exactly one of `text` and `hex`")),
    };
    if bytes.is_empty() {
        return Err(format!("{key}: empty (plant 1 to {MAX_PAYLOAD} bytes)"));
    }
    let offset = p.offset.unwrap_or(default_offset);
    let at = match offset {
        PlantOffset::At(o) => usize::from(o),
        PlantOffset::Random => 0,
    };
    if at + bytes.len() > MAX_PAYLOAD {
        return Err(format!(
            "{key}: {} bytes at offset {at} pass the {MAX_PAYLOAD} a frame can carry",
            bytes.len()
        ));
    }
    Ok(Item {
        bytes,
        offset: Some(offset),
    })
}

impl Payloads {
    /// Checks and compiles the options; errors start with the key (`gen.payload.plant[0].hex:`).
    /// The fill block comes from `seed`, so the same options and seed give the same frames.
    pub fn new(o: &PayloadOptions, seed: u64) -> Result<Payloads, String> {
        if !(0.0..=1.0).contains(&o.ratio) {
            return Err(format!(
                "gen.payload.ratio: must be 0.0 ..= 1.0, got {}",
                o.ratio
            ));
        }
        let mut items = Vec::new();
        let mut cdf = Vec::new();
        let mut acc = 0u64;
        for (i, p) in o.plant.iter().enumerate() {
            items.push(plant_bytes(
                p,
                &format!("gen.payload.plant[{i}]"),
                o.offset,
            )?);
            acc += u64::from(p.weight);
            cdf.push(acc);
        }
        for (i, r) in o.http.iter().enumerate() {
            let bytes = render_http(r, &format!("gen.payload.http[{i}]"))?;
            items.push(Item {
                bytes,
                offset: None,
            });
            acc += u64::from(r.weight);
            cdf.push(acc);
        }
        if o.ratio > 0.0 && acc == 0 {
            return Err(if items.is_empty() {
                "gen.payload: ratio > 0 but neither `plant` nor `http` lists an entry".into()
            } else {
                "gen.payload: the weights of `plant` and `http` sum to 0".into()
            });
        }
        let mut block = vec![
            0u8;
            if o.fill == Fill::Random {
                FILL_BLOCK
            } else {
                0
            }
        ];
        // Its own stream: the fill does not shift the header and size draws.
        StdRng::seed_from_u64(seed ^ 0x5eed_f111).fill(&mut block[..]);
        Ok(Payloads {
            items,
            cdf,
            ratio: o.ratio,
            fill: o.fill,
            block,
            http_port: o.http_port,
        })
    }

    /// Whether frames without an entry are zeros (then the frame pool may hold them).
    pub fn zero_fill(&self) -> bool {
        self.fill == Fill::Zeros
    }

    /// Draws what `spec`'s payload holds and adjusts it: an HTTP request makes it a TCP
    /// PSH-ACK segment to the HTTP port exactly as long as the request; a plant that does not
    /// fit the drawn size grows the frame.
    pub fn choose(&self, spec: &mut FrameSpec, rng: &mut StdRng) {
        let hdr = super::frame::frame_len(&FrameSpec { size: 0, ..*spec });
        let fill_at = |rng: &mut StdRng, room: usize| -> u32 {
            if self.block.is_empty() {
                return 0;
            }
            rng.random_range(0..=(FILL_BLOCK - room.min(FILL_BLOCK))) as u32
        };
        let carries = self.ratio > 0.0 && rng.random::<f64>() < self.ratio;
        if !carries {
            if !self.zero_fill() {
                let room = super::frame::frame_len(spec) - hdr;
                spec.payload = PayloadSel::Fill {
                    fill_at: fill_at(rng, room),
                };
            }
            return;
        }
        let total = self.cdf[self.cdf.len() - 1];
        let x = rng.random_range(0..total);
        let i = self
            .cdf
            .partition_point(|&c| c <= x)
            .min(self.items.len() - 1);
        let item = &self.items[i];
        let len = item.bytes.len();
        let offset = match item.offset {
            None => {
                spec.proto = PROTO_TCP;
                spec.dst_port = self.http_port;
                spec.tcp_flags = HTTP_TCP_FLAGS;
                let tcp_hdr = super::frame::frame_len(&FrameSpec { size: 0, ..*spec });
                spec.size = (tcp_hdr + len + 4) as u16;
                0
            }
            Some(o) => {
                let room = super::frame::frame_len(spec) - hdr;
                let at = match o {
                    PlantOffset::At(a) => usize::from(a),
                    PlantOffset::Random if room > len => rng.random_range(0..=room - len),
                    PlantOffset::Random => 0,
                };
                if at + len > room {
                    spec.size = (hdr + at + len + 4) as u16;
                }
                at
            }
        };
        let room = super::frame::frame_len(spec)
            - super::frame::frame_len(&FrameSpec { size: 0, ..*spec });
        spec.malformed = None;
        spec.payload = PayloadSel::Item {
            item: i as u32,
            offset: offset as u16,
            fill_at: fill_at(rng, room),
        };
    }

    /// Writes the payload `sel` into `p` (the whole L4 payload, zeros on entry).
    pub fn write(&self, sel: PayloadSel, p: &mut [u8]) {
        let fill = |p: &mut [u8], at: u32| {
            if let Some(src) = self.block.get(at as usize..at as usize + p.len()) {
                p.copy_from_slice(src);
            }
        };
        match sel {
            PayloadSel::Zeros => {}
            PayloadSel::Fill { fill_at } => fill(p, fill_at),
            PayloadSel::Item {
                item,
                offset,
                fill_at,
            } => {
                fill(p, fill_at);
                if let Some(it) = self.items.get(item as usize) {
                    let o = usize::from(offset);
                    if let Some(dst) = p.get_mut(o..o + it.bytes.len()) {
                        dst.copy_from_slice(&it.bytes);
                    }
                }
            }
        }
    }

    /// The bytes of entry `i` (plants in `plant` order, then the HTTP requests).
    pub fn item_bytes(&self, i: usize) -> Option<&[u8]> {
        self.items.get(i).map(|it| it.bytes.as_slice())
    }
}
