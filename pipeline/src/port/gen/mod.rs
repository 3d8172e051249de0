//! The `gen` port: a built-in traffic generator. Headers come from a ClassBench trace file or
//! from configured distributions (address ranges, port ranges, protocol mix, IPv6 share);
//! frame sizes are fixed, IMIX or a custom weighted list; a count, a duration and a rate
//! bound the output. A seeded RNG makes the frame sequence reproducible: the same options give
//! the same frames, whatever the rate or burst sizes.

mod frame;
pub mod mode;
pub mod payload;
mod pool;
mod split;
mod trace;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Deserializer};

pub use frame::{
    build_frame, frame_len, write_frame, write_frame_with, FrameSpec, Malformation, GEN_DST_MAC,
    GEN_SRC_MAC, PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP,
};
pub use payload::{
    Fill, HttpRequestOptions, PayloadOptions, PayloadSel, Payloads, PlantOffset, PlantOptions,
};
pub use trace::{read_trace, TraceHeader};

use crate::burst::{Burst, FrameDesc};
use crate::port::pace::{Pacer, Rate};
use crate::port::{PortError, RxPort, RxStatus};

/// Smallest and largest configurable frame size (bytes on the wire, FCS included).
pub const MIN_FRAME_SIZE: u16 = 64;
pub const MAX_FRAME_SIZE: u16 = 9216;

/// One entry of a custom size distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizeWeight {
    /// Frame size in bytes, FCS included (64 ..= 9216).
    pub size: u16,
    /// Relative weight (> 0 in total).
    pub weight: u32,
}

/// Frame sizes: YAML `size: 64` (fixed), `size: imix` (classic IMIX: 64, 576 and 1518 bytes in
/// the ratio 7:4:1) or `size: [{size: 64, weight: 3}, {size: 1518, weight: 1}]`. Sizes count
/// the 4-byte FCS, as IMIX does; the frame buffer holds `size - 4` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameSize {
    Fixed(u16),
    Imix,
    Custom(Vec<SizeWeight>),
}

impl Default for FrameSize {
    fn default() -> Self {
        FrameSize::Fixed(64)
    }
}

impl<'de> Deserialize<'de> for FrameSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = FrameSize;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a frame size in bytes, `imix`, or a list of {size, weight}")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<FrameSize, E> {
                u16::try_from(v).map(FrameSize::Fixed).map_err(|_| {
                    E::custom(format!(
                        "frame size {v} is outside {MIN_FRAME_SIZE} ..= {MAX_FRAME_SIZE}"
                    ))
                })
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<FrameSize, E> {
                u64::try_from(v)
                    .map_err(|_| {
                        E::custom(format!(
                            "frame size {v} is outside {MIN_FRAME_SIZE} ..= {MAX_FRAME_SIZE}"
                        ))
                    })
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FrameSize, E> {
                match v {
                    "imix" => Ok(FrameSize::Imix),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<FrameSize, A::Error> {
                let list = Vec::<SizeWeight>::deserialize(
                    serde::de::value::SeqAccessDeserializer::new(seq),
                )?;
                Ok(FrameSize::Custom(list))
            }
        }
        d.deserialize_any(V)
    }
}

/// An inclusive port range: YAML `80` or `"1024-65535"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl<'de> Deserialize<'de> for PortRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = PortRange;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a port (0..=65535) or a range `lo-hi`")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<PortRange, E> {
                let p = u16::try_from(v).map_err(|_| E::custom(format!("port {v} > 65535")))?;
                Ok(PortRange { lo: p, hi: p })
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<PortRange, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(format!("port {v} is negative")))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PortRange, E> {
                let bad = || E::invalid_value(serde::de::Unexpected::Str(v), &self);
                let (a, b) = v.split_once('-').unwrap_or((v, v));
                let lo: u16 = a.trim().parse().map_err(|_| bad())?;
                let hi: u16 = b.trim().parse().map_err(|_| bad())?;
                if lo > hi {
                    return Err(E::custom(format!(
                        "port range `{v}`: low end above high end"
                    )));
                }
                Ok(PortRange { lo, hi })
            }
        }
        d.deserialize_any(V)
    }
}

/// Protocol mix: relative weights (need not sum to 1; at least one > 0).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolMix {
    /// Weight of TCP (ACK frames; flags from `tcp_flags`). Default 0.7.
    #[serde(default)]
    pub tcp: f64,
    /// Weight of UDP. Default 0.25.
    #[serde(default)]
    pub udp: f64,
    /// Weight of ICMP echo requests (ICMPv6 under IPv6). Default 0.05.
    #[serde(default)]
    pub icmp: f64,
}

impl Default for ProtocolMix {
    fn default() -> Self {
        ProtocolMix {
            tcp: 0.7,
            udp: 0.25,
            icmp: 0.05,
        }
    }
}

fn default_src() -> String {
    "10.0.0.0/8".into()
}
fn default_dst() -> String {
    "192.168.0.0/16".into()
}
fn default_src6() -> String {
    "2001:db8:1::/64".into()
}
fn default_dst6() -> String {
    "2001:db8:2::/64".into()
}
fn default_src_ports() -> PortRange {
    PortRange {
        lo: 1024,
        hi: 65535,
    }
}
fn default_dst_ports() -> PortRange {
    PortRange { lo: 1, hi: 1023 }
}

/// Random headers from distributions (used when no `trace` is given).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowOptions {
    /// IPv4 source addresses: a prefix `10.0.0.0/8`, a range `10.0.0.1-10.0.0.99` or one
    /// address. Default `10.0.0.0/8`.
    #[serde(default = "default_src")]
    pub src: String,
    /// IPv4 destination addresses, same forms. Default `192.168.0.0/16`.
    #[serde(default = "default_dst")]
    pub dst: String,
    /// IPv6 source addresses (prefix, range or address). Default `2001:db8:1::/64`.
    #[serde(default = "default_src6")]
    pub src6: String,
    /// IPv6 destination addresses. Default `2001:db8:2::/64`.
    #[serde(default = "default_dst6")]
    pub dst6: String,
    /// Source ports (TCP/UDP; ICMP echo id). Default `1024-65535`.
    #[serde(default = "default_src_ports")]
    pub src_ports: PortRange,
    /// Destination ports (TCP/UDP; ICMP echo sequence). Default `1-1023`.
    #[serde(default = "default_dst_ports")]
    pub dst_ports: PortRange,
    /// Protocol weights. Default tcp 0.7, udp 0.25, icmp 0.05.
    #[serde(default)]
    pub protocols: ProtocolMix,
    /// Share of IPv6 frames, 0.0 ..= 1.0. Default 0.
    #[serde(default)]
    pub ipv6_share: f64,
    /// Number of distinct flows (5-tuples) drawn once and then repeated in random order; unset
    /// (default) draws a fresh header for every frame.
    #[serde(default)]
    pub flow_count: Option<u32>,
}

impl Default for FlowOptions {
    fn default() -> Self {
        FlowOptions {
            src: default_src(),
            dst: default_dst(),
            src6: default_src6(),
            dst6: default_dst6(),
            src_ports: default_src_ports(),
            dst_ports: default_dst_ports(),
            protocols: ProtocolMix::default(),
            ipv6_share: 0.0,
            flow_count: None,
        }
    }
}

fn default_seed() -> u64 {
    1
}
fn default_tcp_flags() -> u8 {
    0x10
}

/// Options of the `gen` port.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenOptions {
    /// ClassBench header trace (`src dst sport dport proto [flags [filter]]` lines, IPv4 or
    /// IPv6 per line, as `pktwarp classify` reads them; `.gz` accepted). Headers are used in
    /// file order, cycling. Exclusive with `flows`.
    #[serde(default)]
    pub trace: Option<PathBuf>,
    /// Random headers from distributions; the default when no `trace` is given.
    #[serde(default)]
    pub flows: Option<FlowOptions>,
    /// Frame sizes: a number, `imix` or a weighted list. Default 64.
    #[serde(default)]
    pub size: FrameSize,
    /// Stop after this many frames. Without `count` and `duration_s`, a trace is played once
    /// and random flows go on forever.
    #[serde(default)]
    pub count: Option<u64>,
    /// Stop after this many seconds (> 0).
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Pace: `unlimited` (default), `{pps: N}` or `{bps: N}` (`capture` is for `pcap` only).
    #[serde(default)]
    pub rate: Rate,
    /// RNG seed: the same seed and options give the same frames. Default 1.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Share of deliberately malformed frames (truncated, bad IHL, bad length, chosen at
    /// random), 0.0 ..= 1.0. Default 0.
    #[serde(default)]
    pub malformed_ratio: f64,
    /// Tag every frame with this 802.1Q VLAN id (0 ..= 4095). Default: untagged.
    #[serde(default)]
    pub vlan: Option<u16>,
    /// TCP flags byte of TCP frames. Default 0x10 (ACK).
    #[serde(default = "default_tcp_flags")]
    pub tcp_flags: u8,
    /// A registered generator mode's frames instead of IP frames (`gen: { KEY: {...} }`; see
    /// [`mode`]): read from its key by [`mode::gen_section`].
    #[serde(skip)]
    pub mode: Option<mode::GenModeConfig>,
    /// Planted payloads and HTTP requests in a share of the frames; see [`payload`].
    #[serde(default)]
    pub payload: Option<PayloadOptions>,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            trace: None,
            flows: None,
            size: FrameSize::default(),
            count: None,
            duration_s: None,
            rate: Rate::default(),
            seed: default_seed(),
            malformed_ratio: 0.0,
            vlan: None,
            tcp_flags: default_tcp_flags(),
            mode: None,
            payload: None,
        }
    }
}

/// Most distinct flows `flows.flow_count` may ask for (they are drawn and held in memory).
pub const MAX_FLOW_COUNT: u32 = 1 << 24;

impl GenOptions {
    /// Every check [`GenRx::new`] makes without reading the trace file, for `pktwarp validate`
    /// and config loading: the error starts with the key (`gen.rate: ...`) and gives the
    /// allowed range.
    pub fn check(&self) -> Result<(), String> {
        if let Some(m) = &self.mode {
            return self.check_mode(m);
        }
        if self.rate == Rate::Capture {
            return Err(
                "gen.rate: `capture` needs a capture file (pcap port); use pps or bps".into(),
            );
        }
        self.rate.validate("gen.rate")?;
        if !(0.0..=1.0).contains(&self.malformed_ratio) {
            return Err(format!(
                "gen.malformed_ratio: must be 0.0 ..= 1.0, got {}",
                self.malformed_ratio
            ));
        }
        if let Some(v) = self.vlan {
            if v > 4095 {
                return Err(format!("gen.vlan: must be 0 ..= 4095, got {v}"));
            }
        }
        if let Some(d) = self.duration_s {
            // Below ~584 years, so the nanosecond count fits.
            if !(d.is_finite() && d > 0.0 && d < 1.8e10) {
                return Err(format!("gen.duration_s: must be > 0 (seconds), got {d}"));
            }
        }
        Sizes::new(&self.size)?;
        if self.trace.is_some() && self.flows.is_some() {
            return Err("gen.trace: `trace` and `flows` are exclusive; give one".into());
        }
        if let Some(f) = &self.flows {
            check_flows(f)?;
        }
        if let Some(p) = &self.payload {
            Payloads::new(p, self.seed)?;
        }
        Ok(())
    }

    /// A mode's frames, their number and their VLAN are the mode's; the IP frame keys would be
    /// silently ignored, so they are refused. `rate: capture` plays the frames at their own
    /// timestamps.
    fn check_mode(&self, m: &mode::GenModeConfig) -> Result<(), String> {
        let ip_only = [
            ("trace", self.trace.is_some()),
            ("flows", self.flows.is_some()),
            ("count", self.count.is_some()),
            ("duration_s", self.duration_s.is_some()),
            ("malformed_ratio", self.malformed_ratio != 0.0),
            ("vlan", self.vlan.is_some()),
            ("size", self.size != FrameSize::default()),
            ("payload", self.payload.is_some()),
        ];
        if let Some((key, _)) = ip_only.iter().find(|(_, set)| *set) {
            return Err(format!(
                "gen.{key}: not used with `{mode}` (its frames come from gen.{mode})",
                mode = m.mode.key()
            ));
        }
        if self.rate != Rate::Capture {
            self.rate.validate("gen.rate")?;
        }
        m.mode.check(m.parsed()?)
    }
}

fn check_flows(o: &FlowOptions) -> Result<(), String> {
    AddrRange::parse(&o.src, false, "src")?;
    AddrRange::parse(&o.dst, false, "dst")?;
    AddrRange::parse(&o.src6, true, "src6")?;
    AddrRange::parse(&o.dst6, true, "dst6")?;
    if let Some(n) = o.flow_count {
        if n == 0 || n > MAX_FLOW_COUNT {
            return Err(format!(
                "gen.flows.flow_count: must be 1 ..= {MAX_FLOW_COUNT}, got {n}"
            ));
        }
    }
    // The weights and the IPv6 share: FlowGen::new checks them before drawing anything.
    let mut probe = o.clone();
    probe.flow_count = None;
    FlowGen::new(&probe, &mut StdRng::seed_from_u64(0)).map(|_| ())
}

/// An inclusive address range as integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AddrRange {
    lo: u128,
    hi: u128,
    v6: bool,
}

impl AddrRange {
    fn parse(s: &str, v6: bool, field: &str) -> Result<AddrRange, String> {
        let bad = |why: &str| format!("gen.flows.{field}: `{s}`: {why}");
        let addr = |t: &str| -> Result<u128, String> {
            let t = t.trim();
            if v6 {
                t.parse::<Ipv6Addr>()
                    .map(u128::from)
                    .map_err(|_| bad("not an IPv6 address"))
            } else {
                t.parse::<Ipv4Addr>()
                    .map(|a| u128::from(u32::from(a)))
                    .map_err(|_| bad("not an IPv4 address"))
            }
        };
        let bits = if v6 { 128 } else { 32 };
        let (lo, hi) = if let Some((a, len)) = s.split_once('/') {
            let len: u32 = len
                .trim()
                .parse()
                .ok()
                .filter(|l| *l <= bits)
                .ok_or_else(|| bad(&format!("prefix length must be 0 ..= {bits}")))?;
            let base = addr(a)?;
            let host_bits = bits - len;
            let mask = if host_bits == 128 {
                u128::MAX
            } else {
                (1u128 << host_bits) - 1
            };
            (base & !mask, (base & !mask) | mask)
        } else if let Some((a, b)) = s.split_once('-') {
            (addr(a)?, addr(b)?)
        } else {
            let a = addr(s)?;
            (a, a)
        };
        if lo > hi {
            return Err(bad("low end above high end"));
        }
        Ok(AddrRange { lo, hi, v6 })
    }

    fn pick(&self, rng: &mut StdRng) -> IpAddr {
        // 128-bit range sampling is several times slower; IPv4 and most IPv6 ranges fit 64 bits.
        let span = self.hi - self.lo;
        let v = match u64::try_from(span) {
            Ok(s) => self.lo + u128::from(rng.random_range(0..=s)),
            Err(_) => rng.random_range(self.lo..=self.hi),
        };
        if self.v6 {
            IpAddr::V6(Ipv6Addr::from(v))
        } else {
            IpAddr::V4(Ipv4Addr::from(v as u32))
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Tuple {
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    proto: u8,
}

#[derive(Clone, Debug)]
struct FlowGen {
    src: AddrRange,
    dst: AddrRange,
    src6: AddrRange,
    dst6: AddrRange,
    sports: PortRange,
    dports: PortRange,
    /// Cumulative protocol weights: tcp, tcp+udp, total.
    proto_cdf: [f64; 3],
    ipv6_share: f64,
    /// Shared by the queues of a port split by queue.
    fixed: Arc<Vec<Tuple>>,
}

impl FlowGen {
    fn new(o: &FlowOptions, rng: &mut StdRng) -> Result<FlowGen, String> {
        let p = o.protocols;
        for (name, w) in [("tcp", p.tcp), ("udp", p.udp), ("icmp", p.icmp)] {
            if !(w.is_finite() && w >= 0.0) {
                return Err(format!(
                    "gen.flows.protocols.{name}: weight must be >= 0, got {w}"
                ));
            }
        }
        let total = p.tcp + p.udp + p.icmp;
        if total <= 0.0 {
            return Err("gen.flows.protocols: at least one weight must be > 0".into());
        }
        if !(0.0..=1.0).contains(&o.ipv6_share) {
            return Err(format!(
                "gen.flows.ipv6_share: must be 0.0 ..= 1.0, got {}",
                o.ipv6_share
            ));
        }
        let mut g = FlowGen {
            src: AddrRange::parse(&o.src, false, "src")?,
            dst: AddrRange::parse(&o.dst, false, "dst")?,
            src6: AddrRange::parse(&o.src6, true, "src6")?,
            dst6: AddrRange::parse(&o.dst6, true, "dst6")?,
            sports: o.src_ports,
            dports: o.dst_ports,
            proto_cdf: [p.tcp, p.tcp + p.udp, total],
            ipv6_share: o.ipv6_share,
            fixed: Arc::new(Vec::new()),
        };
        if let Some(n) = o.flow_count {
            if n == 0 {
                return Err("gen.flows.flow_count: must be >= 1".into());
            }
            g.fixed = Arc::new((0..n).map(|_| g.draw(rng)).collect());
        }
        Ok(g)
    }

    fn draw(&self, rng: &mut StdRng) -> Tuple {
        let v6 = self.ipv6_share > 0.0 && rng.random::<f64>() < self.ipv6_share;
        let (src, dst) = if v6 {
            (self.src6.pick(rng), self.dst6.pick(rng))
        } else {
            (self.src.pick(rng), self.dst.pick(rng))
        };
        let x = rng.random::<f64>() * self.proto_cdf[2];
        let proto = if x < self.proto_cdf[0] {
            PROTO_TCP
        } else if x < self.proto_cdf[1] {
            PROTO_UDP
        } else {
            PROTO_ICMP
        };
        Tuple {
            src,
            dst,
            sport: rng.random_range(self.sports.lo..=self.sports.hi),
            dport: rng.random_range(self.dports.lo..=self.dports.hi),
            proto,
        }
    }

    /// The next header and, from a fixed flow set, its index (the pool's key).
    fn next(&self, rng: &mut StdRng) -> (Tuple, Option<usize>) {
        if self.fixed.is_empty() {
            (self.draw(rng), None)
        } else {
            let i = rng.random_range(0..self.fixed.len());
            (self.fixed[i], Some(i))
        }
    }
}

#[derive(Clone, Debug)]
enum Headers {
    Trace {
        headers: Arc<Vec<TraceHeader>>,
        next: usize,
    },
    Flows(Box<FlowGen>),
}

/// Weighted frame sizes, sampled by cumulative weight.
#[derive(Clone, Debug)]
struct Sizes {
    sizes: Vec<u16>,
    cdf: Vec<u64>,
}

impl Sizes {
    fn new(s: &FrameSize) -> Result<Sizes, String> {
        let list: Vec<SizeWeight> = match s {
            FrameSize::Fixed(size) => vec![SizeWeight {
                size: *size,
                weight: 1,
            }],
            FrameSize::Imix => [(64, 7), (576, 4), (1518, 1)]
                .iter()
                .map(|&(size, weight)| SizeWeight { size, weight })
                .collect(),
            FrameSize::Custom(l) => l.clone(),
        };
        let mut cdf = Vec::with_capacity(list.len());
        let mut acc = 0u64;
        for (i, sw) in list.iter().enumerate() {
            if !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&sw.size) {
                return Err(format!(
                    "gen.size[{i}]: frame size {} is outside {MIN_FRAME_SIZE} ..= {MAX_FRAME_SIZE} (sizes count the 4-byte FCS)",
                    sw.size
                ));
            }
            acc += u64::from(sw.weight);
            cdf.push(acc);
        }
        if acc == 0 {
            return Err("gen.size: the weights sum to 0".into());
        }
        Ok(Sizes {
            sizes: list.iter().map(|s| s.size).collect(),
            cdf,
        })
    }

    /// The index of the next size.
    fn pick(&self, rng: &mut StdRng) -> usize {
        if self.sizes.len() == 1 {
            return 0;
        }
        let total = self.cdf[self.cdf.len() - 1];
        let x = rng.random_range(0..total);
        let i = self.cdf.partition_point(|&c| c <= x);
        i.min(self.sizes.len() - 1)
    }
}

/// RX side of the `gen` port.
#[derive(Debug)]
pub struct GenRx {
    name: String,
    port: u16,
    rng: StdRng,
    headers: Headers,
    sizes: Sizes,
    vlan: Option<u16>,
    tcp_flags: u8,
    malformed_ratio: f64,
    count: Option<u64>,
    duration_ns: Option<u64>,
    pacer: Pacer,
    produced: u64,
    /// A frame drawn but refused by the pacer (with its pool key); it goes first next time,
    /// so the sequence does not depend on timing.
    pending: Option<(FrameSpec, Option<usize>)>,
    /// The distinct frames built once (a fixed flow set or a trace; see [`pool`]).
    pool: Option<pool::FramePool>,
    wall_start_ns: u64,
    /// A generator mode's frames (`gen: { KEY: ... }`, [`mode`]), then the end.
    source: Option<Box<dyn mode::GenSource>>,
    /// Planted payloads (`gen.payload`).
    payloads: Option<Box<Payloads>>,
}

impl GenRx {
    /// Builds a generator from its options (errors name the option). `port` is the ingress
    /// port index written into every [`FrameDesc`].
    pub fn new(opts: &GenOptions, port: u16) -> Result<Self, PortError> {
        let cfg = PortError::Config;
        // One set of checks for run and validate.
        opts.check().map_err(cfg)?;
        if let Some(m) = &opts.mode {
            let rx = m.mode.open(m.parsed().map_err(cfg)?, opts.rate, port)?;
            return Ok(GenRx {
                name: rx.name().to_string(),
                port,
                rng: StdRng::seed_from_u64(opts.seed),
                headers: Headers::Trace {
                    headers: Arc::new(Vec::new()),
                    next: 0,
                },
                sizes: Sizes::new(&opts.size).map_err(cfg)?,
                vlan: None,
                tcp_flags: opts.tcp_flags,
                malformed_ratio: 0.0,
                count: rx.expected_frames(),
                duration_ns: None,
                pacer: Pacer::new(Rate::Unlimited),
                produced: 0,
                pending: None,
                pool: None,
                wall_start_ns: 0,
                source: Some(rx),
                payloads: None,
            });
        }
        let duration_ns = opts.duration_s.map(|d| (d * 1e9) as u64);
        let mut rng = StdRng::seed_from_u64(opts.seed);
        let sizes = Sizes::new(&opts.size).map_err(cfg)?;
        let mut count = opts.count;
        let (headers, name) = match (&opts.trace, &opts.flows) {
            (Some(_), Some(_)) => {
                return Err(cfg(
                    "gen: `trace` and `flows` are exclusive; give one".into()
                ))
            }
            (Some(path), None) => {
                let headers = read_trace(path)?;
                if count.is_none() && duration_ns.is_none() {
                    count = Some(headers.len() as u64);
                }
                (
                    Headers::Trace {
                        headers: Arc::new(headers),
                        next: 0,
                    },
                    format!("gen:{}", path.display()),
                )
            }
            (None, flows) => {
                let f = flows.clone().unwrap_or_default();
                (
                    Headers::Flows(Box::new(FlowGen::new(&f, &mut rng).map_err(cfg)?)),
                    "gen:flows".to_string(),
                )
            }
        };
        // A fixed set of headers: each (header, size) frame is built once.
        let headers_n = match &headers {
            Headers::Trace { headers, .. } => headers.len(),
            Headers::Flows(g) => g.fixed.len(),
        };
        let pool = pool::FramePool::new(headers_n.saturating_mul(sizes.sizes.len()));
        let payloads = match &opts.payload {
            Some(p) => Some(Box::new(Payloads::new(p, opts.seed).map_err(cfg)?)),
            None => None,
        };
        Ok(GenRx {
            payloads,
            pool,
            name,
            port,
            rng,
            headers,
            sizes,
            vlan: opts.vlan,
            tcp_flags: opts.tcp_flags,
            malformed_ratio: opts.malformed_ratio,
            count,
            duration_ns,
            pacer: Pacer::new(opts.rate),
            produced: 0,
            pending: None,
            wall_start_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
                .unwrap_or(0),
            source: None,
        })
    }

    /// Draws the next frame's description (advances the RNG and the trace position).
    pub fn next_spec(&mut self) -> FrameSpec {
        self.next_keyed().0
    }

    /// [`GenRx::next_spec`] and the frame's pool key (`header * sizes + size`) when it is one
    /// of a fixed set of distinct frames (not a fresh random header, not malformed).
    fn next_keyed(&mut self) -> (FrameSpec, Option<usize>) {
        let (t, header) = match &mut self.headers {
            Headers::Trace { headers, next } => {
                let i = *next % headers.len();
                let h = headers[i];
                *next = (*next + 1) % headers.len();
                let t = Tuple {
                    src: h.src_ip,
                    dst: h.dst_ip,
                    sport: h.src_port,
                    dport: h.dst_port,
                    proto: h.proto,
                };
                (t, Some(i))
            }
            Headers::Flows(g) => g.next(&mut self.rng),
        };
        let size_idx = self.sizes.pick(&mut self.rng);
        let size = self.sizes.sizes[size_idx];
        let malformed =
            if self.malformed_ratio > 0.0 && self.rng.random::<f64>() < self.malformed_ratio {
                Some(match self.rng.random_range(0..3u8) {
                    0 => Malformation::Truncated,
                    1 => Malformation::BadIhl,
                    _ => Malformation::BadLength,
                })
            } else {
                None
            };
        let mut key = match (header, malformed) {
            (Some(h), None) => Some(h * self.sizes.sizes.len() + size_idx),
            _ => None,
        };
        let mut spec = FrameSpec {
            src_ip: t.src,
            dst_ip: t.dst,
            src_port: t.sport,
            dst_port: t.dport,
            proto: t.proto,
            tcp_flags: self.tcp_flags,
            vlan: self.vlan,
            size,
            ip_id: self.produced as u16,
            malformed,
            payload: PayloadSel::Zeros,
        };
        if let Some(p) = &self.payloads {
            p.choose(&mut spec, &mut self.rng);
            // The pool holds zero-payload frames only.
            if spec.payload != PayloadSel::Zeros {
                key = None;
            }
        }
        (spec, key)
    }

    /// The frame of pool key (`header`, `size_idx`) with identification 0, as
    /// [`GenRx::next_keyed`] draws it; `None` when `header` is no header of the set.
    fn spec_of_key(&self, header: usize, size_idx: usize) -> Option<FrameSpec> {
        let t = match &self.headers {
            Headers::Trace { headers, .. } => {
                let h = headers.get(header)?;
                Tuple {
                    src: h.src_ip,
                    dst: h.dst_ip,
                    sport: h.src_port,
                    dport: h.dst_port,
                    proto: h.proto,
                }
            }
            Headers::Flows(g) => *g.fixed.get(header)?,
        };
        Some(FrameSpec {
            src_ip: t.src,
            dst_ip: t.dst,
            src_port: t.sport,
            dst_port: t.dport,
            proto: t.proto,
            tcp_flags: self.tcp_flags,
            vlan: self.vlan,
            size: *self.sizes.sizes.get(size_idx)?,
            ip_id: 0,
            malformed: None,
            payload: PayloadSel::Zeros,
        })
    }

    /// Frames produced so far.
    pub fn produced(&self) -> u64 {
        self.produced
    }
}

impl RxPort for GenRx {
    fn rx_burst(&mut self, burst: &mut Burst, max: usize) -> Result<RxStatus, PortError> {
        if let Some(o) = &mut self.source {
            let r = o.rx_burst(burst, max)?;
            if let RxStatus::Frames(n) = r {
                self.produced += n as u64;
            }
            return Ok(r);
        }
        let now = self.pacer.now_ns();
        let timed_out = self.duration_ns.is_some_and(|d| now >= d);
        let mut n = 0;
        while n < max && !timed_out {
            if self.count.is_some_and(|c| self.produced >= c) {
                break;
            }
            let (spec, key) = match self.pending.take() {
                Some(s) => s,
                None => self.next_keyed(),
            };
            let wire = frame_len(&spec) as u32;
            if !self.pacer.admit(now, wire, 0) {
                self.pending = Some((spec, key));
                break;
            }
            let desc = FrameDesc {
                port: self.port,
                timestamp_ns: self.wall_start_ns.saturating_add(now),
                ..FrameDesc::default()
            };
            let pooled = match (key, self.pool.as_mut()) {
                (Some(k), Some(p)) => p.push(k, &spec, burst, desc),
                _ => false,
            };
            if !pooled {
                let offset = burst.data.len();
                let (cap, wire) =
                    write_frame_with(&mut burst.data, &spec, self.payloads.as_deref());
                burst.descs.push(FrameDesc {
                    offset: offset as u32,
                    len: cap as u32,
                    wire_len: wire as u32,
                    ..desc
                });
            }
            self.produced += 1;
            n += 1;
        }
        if n > 0 {
            Ok(RxStatus::Frames(n))
        } else if timed_out || self.count.is_some_and(|c| self.produced >= c) {
            Ok(RxStatus::End)
        } else {
            Ok(RxStatus::Idle)
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn expected_frames(&self) -> Option<u64> {
        self.count
    }

    fn split_by_queue(
        &mut self,
        steering: &Arc<crate::steer::Steering>,
        queues: usize,
    ) -> Result<Vec<Box<dyn crate::port::QueueRx>>, String> {
        Ok(split::split(self, steering, queues)?
            .into_iter()
            .map(|q| Box::new(q) as Box<dyn crate::port::QueueRx>)
            .collect())
    }
}
