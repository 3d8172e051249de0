//! One alert as one line of Suricata's EVE JSON (`event_type":"alert"`), fields in the order
//! Suricata writes them.

use super::{Alert, RuleInfo, Tuple, L4};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use std::net::IpAddr;

/// `flow_id` is kept below 2^51 so tools that read JSON numbers as doubles (jq, JavaScript)
/// keep every digit, as Suricata's ids are.
const FLOW_ID_MASK: u64 = (1 << 51) - 1;

#[derive(Serialize)]
struct Line<'a> {
    timestamp: String,
    flow_id: u64,
    event_type: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    vlan: Vec<u16>,
    src_ip: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    src_port: Option<u16>,
    dest_ip: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    dest_port: Option<u16>,
    proto: String,
    ip_v: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    icmp_type: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    icmp_code: Option<u8>,
    pkt_src: &'static str,
    alert: AlertObj<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_printable: Option<String>,
}

#[derive(Serialize)]
struct AlertObj<'a> {
    action: &'static str,
    gid: u32,
    signature_id: u32,
    rev: u32,
    signature: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    category: Option<&'a str>,
    severity: u32,
    #[serde(skip_serializing_if = "Metadata::is_empty")]
    metadata: Metadata<'a>,
}

/// Rule metadata as a JSON object of arrays, keys in rule order.
struct Metadata<'a>(&'a [(String, Vec<String>)]);

impl Metadata<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Metadata<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Appends the EVE line of `a` (its rule described by `rule`) and a `\n` to `out`. `payload`
/// adds `payload` (base64) and `payload_printable` when the alert carries payload bytes.
/// False (nothing appended) if serializing failed.
pub fn encode(a: &Alert, rule: &RuleInfo, payload: bool, out: &mut Vec<u8>) -> bool {
    let (src_port, dest_port, icmp_type, icmp_code) = match a.tuple.l4 {
        L4::Ports { src, dst } => (Some(src), Some(dst), None, None),
        L4::Icmp { kind, code } => (None, None, Some(kind), Some(code)),
        L4::None => (None, None, None, None),
    };
    let bytes = a.payload.as_deref().filter(|_| payload);
    let line = Line {
        timestamp: timestamp(a.ts_ns),
        flow_id: flow_id(&a.tuple),
        event_type: "alert",
        vlan: a.tuple.vlan.iter().flatten().copied().collect(),
        src_ip: a.tuple.src.to_string(),
        src_port,
        dest_ip: a.tuple.dst.to_string(),
        dest_port,
        proto: proto_name(a.tuple.proto),
        ip_v: if a.tuple.src.is_ipv6() { 6 } else { 4 },
        icmp_type,
        icmp_code,
        // Every alerted frame was received from a port (Suricata's name for such packets).
        pkt_src: "wire/pcap",
        alert: AlertObj {
            action: a.action.as_str(),
            gid: rule.gid,
            signature_id: rule.sid,
            rev: rule.rev,
            signature: &rule.signature,
            category: rule.category.as_deref(),
            severity: rule.severity,
            metadata: Metadata(&rule.metadata),
        },
        payload: bytes.map(base64),
        payload_printable: bytes.map(printable),
    };
    let start = out.len();
    if serde_json::to_writer(&mut *out, &line).is_err() {
        out.truncate(start);
        return false;
    }
    out.push(b'\n');
    true
}

/// Suricata's timestamp: `YYYY-MM-DDTHH:MM:SS.uuuuuu+0000` (microseconds, UTC offset).
pub fn timestamp(ts_ns: u64) -> String {
    let secs = ts_ns / 1_000_000_000;
    let micros = (ts_ns % 1_000_000_000) / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}+0000",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Gregorian (year, month, day) of a day count since 1970-01-01 (proleptic calendar, eras of
/// 400 years = 146097 days).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// EVE's `proto`: the protocol's name (as `/etc/protocols` spells it, by number only), or its
/// number for one without a name here.
pub fn proto_name(proto: u8) -> String {
    match proto {
        1 => "ICMP",
        2 => "IGMP",
        6 => "TCP",
        17 => "UDP",
        47 => "GRE",
        50 => "ESP",
        51 => "AH",
        58 => "IPv6-ICMP",
        132 => "SCTP",
        _ => return proto.to_string(),
    }
    .to_string()
}

/// A flow's id: the same for both directions of a flow (the endpoints are ordered first),
/// stable across runs and builds (FNV-1a over a fixed byte layout).
pub fn flow_id(t: &Tuple) -> u64 {
    let (sp, dp) = match t.l4 {
        L4::Ports { src, dst } => (src, dst),
        // ICMP messages of one exchange share a flow whatever their type.
        L4::Icmp { .. } | L4::None => (0, 0),
    };
    let a = (addr_bytes(t.src), sp);
    let b = (addr_bytes(t.dst), dp);
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &x in bytes {
            h ^= u64::from(x);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(&lo.0);
    eat(&lo.1.to_be_bytes());
    eat(&hi.0);
    eat(&hi.1.to_be_bytes());
    eat(&[t.proto]);
    for v in t.vlan {
        eat(&v.map_or([0xff, 0xff], |v| v.to_be_bytes()));
    }
    h & FLOW_ID_MASK
}

fn addr_bytes(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// Standard base64 (RFC 4648, with padding), as EVE's `payload`.
pub fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// EVE's `payload_printable`: printable ASCII, `\r` and `\n` kept, every other byte `.`.
pub fn printable(data: &[u8]) -> String {
    data.iter()
        .map(|&b| {
            if b == b'\r' || b == b'\n' || (0x20..0x7f).contains(&b) {
                char::from(b)
            } else {
                '.'
            }
        })
        .collect()
}
