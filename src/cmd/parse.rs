//! `pktwarp parse PCAP`: one JSON line per frame with the fields the `parse` stage extracted and
//! its status, then a summary by status on stderr.

use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use anyhow::Context;
use pipeline::internal::port::pcap::CaptureReader;
use pipeline::internal::stage::parse::parse;
use pipeline::meta::{mf, PacketMeta, ParseStatus, TunnelType};
use pipeline::wire::tcp;
use serde_json::{json, Map, Value};

#[derive(clap::Args)]
pub struct Args {
    /// Capture file (pcap or pcapng, Ethernet link type).
    pub pcap: PathBuf,
    /// Stop after this many frames (counted before --filter-status).
    #[arg(long)]
    pub limit: Option<u64>,
    /// Print only frames with these statuses: status names as in the output (`ok`,
    /// `ipv4_truncated`, `inner_tcp_truncated`, ...), `error` for any failure, `inner` for any
    /// failure inside a tunnel. Comma-separated or repeated.
    #[arg(long, value_delimiter = ',')]
    pub filter_status: Vec<String>,
    /// Include the Ethernet source and destination MAC addresses.
    #[arg(long)]
    pub macs: bool,
}

/// Which statuses to print.
struct StatusFilter(Vec<String>);

impl StatusFilter {
    fn new(names: &[String]) -> anyhow::Result<Self> {
        for n in names {
            let known = n == "error"
                || n == "inner"
                || ParseStatus::ALL.iter().any(|s| {
                    s.name() == n
                        || n.strip_prefix("inner_") == Some(s.name()) && *s != ParseStatus::Ok
                });
            if !known {
                let all: Vec<&str> = ParseStatus::ALL.iter().map(|s| s.name()).collect();
                anyhow::bail!(
                    "--filter-status: unknown status `{n}` (known: error, inner, {}, and inner_<name>)",
                    all.join(", ")
                );
            }
        }
        Ok(StatusFilter(names.to_vec()))
    }

    fn accepts(&self, status: u16) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let name = ParseStatus::describe(status);
        self.0.iter().any(|f| {
            *f == name
                || (f == "error" && status != 0)
                || (f == "inner" && status & ParseStatus::INNER != 0)
        })
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let summary = match run_to(&args, &mut out) {
        Ok(s) => s,
        // `pktwarp parse x.pcap | head`: the reader went away; not an error.
        Err(e) if is_broken_pipe(&e) => return Ok(0),
        Err(e) => return Err(e),
    };
    if let Err(e) = out.flush() {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e).context("writing to stdout");
        }
    }
    errln!("{summary}");
    Ok(0)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

/// Writes the JSON lines to `out`; returns the summary line.
pub fn run_to(args: &Args, out: &mut dyn Write) -> anyhow::Result<String> {
    let filter = StatusFilter::new(&args.filter_status)?;
    let mut reader = CaptureReader::open_ethernet(&args.pcap)?;
    let mut meta = PacketMeta::default();
    let mut frames = 0u64;
    let mut printed = 0u64;
    let mut by_status: std::collections::BTreeMap<String, u64> = Default::default();
    while args.limit.is_none_or(|l| frames < l) {
        let Some(frame) = reader.next_frame()? else {
            break;
        };
        frames += 1;
        parse(frame.data, &mut meta);
        *by_status
            .entry(ParseStatus::describe(meta.status))
            .or_default() += 1;
        if !filter.accepts(meta.status) {
            continue;
        }
        let v = describe(frames, frame.data, frame.orig_len, &meta, args.macs);
        v.write(out).context("writing JSON")?;
        out.write_all(b"\n")?;
        printed += 1;
    }
    let counts: Vec<String> = by_status.iter().map(|(k, v)| format!("{k}={v}")).collect();
    Ok(format!(
        "{}: {frames} frames, {printed} printed; by status: {}",
        args.pcap.display(),
        counts.join(" ")
    ))
}

fn ip_text(version: u8, w: &[u32; 4]) -> String {
    match version {
        4 => Ipv4Addr::from(w[0]).to_string(),
        _ => {
            let mut b = [0u8; 16];
            for (i, x) in w.iter().enumerate() {
                b[4 * i..4 * i + 4].copy_from_slice(&x.to_be_bytes());
            }
            Ipv6Addr::from(b).to_string()
        }
    }
}

fn mac_text(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A JSON object whose keys keep their insertion order (frame, length and status first, then the
/// layers outside in), which serde_json's `Map` does not without a crate-wide feature.
#[derive(Default)]
pub struct Ordered(Vec<(String, Value)>);

impl Ordered {
    fn insert(&mut self, k: String, v: Value) {
        self.0.push((k, v));
    }

    /// Writes the object as one line of JSON (no newline).
    pub fn write(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        out.write_all(b"{")?;
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut *out, k)?;
            out.write_all(b":")?;
            serde_json::to_writer(&mut *out, v)?;
        }
        out.write_all(b"}")?;
        Ok(())
    }
}

fn tci(t: u16) -> Value {
    json!({"vid": t & 0x0fff, "pcp": t >> 13, "dei": (t >> 12) & 1})
}

/// The JSON object of one frame. Absent layers are omitted.
pub fn describe(n: u64, frame: &[u8], orig_len: u32, m: &PacketMeta, macs: bool) -> Ordered {
    let mut o = Ordered::default();
    o.insert("frame".into(), json!(n));
    o.insert("len".into(), json!(m.frame_len));
    if orig_len as usize > frame.len() {
        o.insert("wire_len".into(), json!(orig_len));
    }
    o.insert("status".into(), json!(ParseStatus::describe(m.status)));
    if m.status != 0 {
        o.insert("error_offset".into(), json!(m.error_offset));
    }
    if macs && frame.len() >= 12 {
        o.insert("dst_mac".into(), json!(mac_text(&frame[0..6])));
        o.insert("src_mac".into(), json!(mac_text(&frame[6..12])));
    }
    if frame.len() >= 14 {
        o.insert(
            "ether_type".into(),
            json!(format!("0x{:04x}", m.ether_type)),
        );
    }
    if m.vlan_count > 0 {
        let shown = (m.vlan_count as usize).min(2);
        let tags: Vec<Value> = m.vlan_tci[..shown].iter().map(|t| tci(*t)).collect();
        o.insert("vlan".into(), json!(tags));
        if m.vlan_count > 2 {
            o.insert("vlan_count".into(), json!(m.vlan_count));
        }
    }
    if m.mpls_count > 0 {
        let l = m.mpls_lse;
        o.insert(
            "mpls".into(),
            json!({"labels": m.mpls_count, "bottom": {"label": l >> 12, "tc": (l >> 9) & 7,
                   "s": (l >> 8) & 1, "ttl": l & 0xff}}),
        );
    }
    if m.flags & mf::ARP != 0 && m.status == 0 {
        let mut a = Map::new();
        a.insert("oper".into(), json!(m.arp_oper));
        if m.src_ip != [0; 4] || m.dst_ip != [0; 4] {
            a.insert("sender_ip".into(), json!(ip_text(4, &m.src_ip)));
            a.insert("target_ip".into(), json!(ip_text(4, &m.dst_ip)));
        }
        o.insert("arp".into(), Value::Object(a));
    }
    if m.ip_version != 0 {
        o.insert(
            "ip".into(),
            json!({"version": m.ip_version, "src": ip_text(m.ip_version, &m.src_ip),
                   "dst": ip_text(m.ip_version, &m.dst_ip), "proto": m.ip_proto,
                   "tos": m.ip_tos, "ttl": m.ip_ttl}),
        );
    }
    if m.flags & mf::FRAGMENT != 0 {
        o.insert(
            "fragment".into(),
            json!({"offset": u32::from(m.frag_offset) * 8, "id": m.frag_id,
                   "more": m.flags & mf::MORE_FRAGMENTS != 0,
                   "first": m.flags & mf::LATER_FRAGMENT == 0}),
        );
    }
    if m.flags & mf::L4 != 0 {
        let mut l = Map::new();
        match m.ip_proto {
            1 | 58 => {
                l.insert("icmp_type".into(), json!(m.icmp_type));
                l.insert("icmp_code".into(), json!(m.icmp_code));
            }
            p => {
                l.insert("src_port".into(), json!(m.src_port));
                l.insert("dst_port".into(), json!(m.dst_port));
                if p == 6 {
                    l.insert("tcp_flags".into(), json!(tcp::flags::to_text(m.tcp_flags)));
                }
            }
        }
        o.insert("l4".into(), Value::Object(l));
    }
    if m.flags & mf::TUNNEL != 0 {
        let ty = TunnelType::from_code(m.tunnel_type).map_or("unknown", |t| t.name());
        o.insert("tunnel".into(), json!({"type": ty, "id": m.tunnel_id}));
        if m.inner_ip_version != 0 {
            let mut i = Map::new();
            i.insert("version".into(), json!(m.inner_ip_version));
            i.insert(
                "src".into(),
                json!(ip_text(m.inner_ip_version, &m.inner_src_ip)),
            );
            i.insert(
                "dst".into(),
                json!(ip_text(m.inner_ip_version, &m.inner_dst_ip)),
            );
            i.insert("proto".into(), json!(m.inner_ip_proto));
            if m.flags & mf::INNER_FRAGMENT != 0 {
                i.insert("fragment".into(), json!(true));
            }
            if m.flags & mf::INNER_L4 != 0 && matches!(m.inner_ip_proto, 6 | 17 | 132) {
                i.insert("src_port".into(), json!(m.inner_src_port));
                i.insert("dst_port".into(), json!(m.inner_dst_port));
                if m.inner_ip_proto == 6 {
                    i.insert(
                        "tcp_flags".into(),
                        json!(tcp::flags::to_text(m.inner_tcp_flags)),
                    );
                }
            }
            o.insert("inner".into(), Value::Object(i));
        }
    }
    if m.flags & mf::ECPRI != 0 {
        o.insert(
            "ecpri".into(),
            json!({"revision": m.ecpri_revision, "msg_type": m.ecpri_msg_type,
                   "payload_size": m.ecpri_payload_size, "pc_id": m.ecpri_pc_id,
                   "seq_id": m.ecpri_seq_id}),
        );
    }
    let mut off = Map::new();
    for (k, v) in [
        ("l3", m.l3_offset),
        ("l4", m.l4_offset),
        ("payload", m.payload_offset),
        ("inner_l3", m.inner_l3_offset),
        ("inner_l4", m.inner_l4_offset),
    ] {
        if v != 0 {
            off.insert(k.into(), json!(v));
        }
    }
    if !off.is_empty() {
        o.insert("offsets".into(), Value::Object(off));
    }
    let flags: Vec<&str> = mf::names(m.flags).collect();
    if !flags.is_empty() {
        o.insert("flags".into(), json!(flags));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn multi_proto() -> PathBuf {
        pipeline::internal::testdata::multi_proto_pcap()
    }

    fn lines(args: &Args) -> Vec<Value> {
        let mut out = Vec::new();
        run_to(args, &mut out).expect("parse multi_proto.pcap");
        String::from_utf8(out)
            .expect("utf-8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
            .collect()
    }

    fn args(filter: &[&str], limit: Option<u64>) -> Args {
        Args {
            pcap: multi_proto(),
            limit,
            filter_status: filter.iter().map(|s| s.to_string()).collect(),
            macs: true,
        }
    }

    #[test]
    fn multi_proto_as_json_lines() {
        let v = lines(&args(&[], None));
        assert_eq!(v.len(), 23);
        assert_eq!(v[0]["frame"], 1);
        assert_eq!(v[0]["status"], "ok");
        assert_eq!(v[0]["src_mac"], "02:00:00:00:00:01");
        assert_eq!(v[0]["ip"]["src"], "10.0.0.1");
        assert_eq!(v[0]["l4"]["dst_port"], 5678);
        assert_eq!(v[1]["l4"]["tcp_flags"], "SYN");
        assert_eq!(v[2]["l4"]["icmp_type"], 8);
        assert_eq!(v[4]["vlan"][0]["vid"], 200);
        assert_eq!(v[4]["vlan"][1]["vid"], 300);
        assert_eq!(v[5]["ip"]["dst"], "2001:db8::2");
        assert_eq!(v[8]["fragment"]["offset"], 1216);
        assert_eq!(v[8]["fragment"]["first"], false);
        assert!(v[8].get("l4").is_none());
        assert_eq!(v[13]["fragment"]["offset"], 3000);
        assert_eq!(v[14]["tunnel"]["type"], "vxlan");
        assert_eq!(v[14]["tunnel"]["id"], 42);
        assert_eq!(v[14]["inner"]["src"], "172.16.0.1");
        assert_eq!(v[14]["inner"]["tcp_flags"], "SYN");
        assert_eq!(v[15]["tunnel"]["type"], "gtpu");
        assert_eq!(v[15]["inner"]["dst"], "8.8.8.8");
        assert_eq!(v[15]["inner"]["dst_port"], 14);
        assert_eq!(v[16]["mpls"]["labels"], 2);
        assert_eq!(v[16]["mpls"]["bottom"]["label"], 17);
        assert_eq!(v[17]["l4"]["src_port"], 17);
        assert_eq!(v[18]["arp"]["target_ip"], "10.0.0.2");
        assert_eq!(v[19]["status"], "ipv4_truncated");
        assert_eq!(v[19]["error_offset"], 14);
        assert_eq!(v[20]["status"], "ipv4_bad_ihl");
        assert_eq!(v[21]["status"], "ipv4_len_exceeds_frame");
        assert_eq!(v[21]["error_offset"], 16);
        assert_eq!(v[22]["ecpri"]["seq_id"], 128);
    }

    #[test]
    fn filter_and_limit() {
        let v = lines(&args(&["error"], None));
        let names: Vec<&str> = v
            .iter()
            .map(|x| x["status"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            names,
            ["ipv4_truncated", "ipv4_bad_ihl", "ipv4_len_exceeds_frame"]
        );
        let v = lines(&args(&["ipv4_bad_ihl", "ok"], Some(3)));
        assert_eq!(v.len(), 3);
        assert!(StatusFilter::new(&["nonsense".into()]).is_err());
        assert!(StatusFilter::new(&["inner_udp_bad_length".into()]).is_ok());
    }

    #[test]
    fn non_ethernet_capture_is_a_clear_error() {
        // A generated Linux cooked capture.
        let sll = pipeline::internal::testdata::linux_sll_pcap();
        let a = Args {
            pcap: sll,
            limit: None,
            filter_status: vec![],
            macs: false,
        };
        let err = run_to(&a, &mut Vec::new())
            .expect_err("not Ethernet")
            .to_string();
        assert!(err.contains("linux_sll.pcap"), "{err}");
        assert!(err.to_lowercase().contains("link type"), "{err}");
    }
}
