//! Shared helpers of the `parse_*` integration tests: the capture corpus and the comparison of
//! our metadata with etherparse's slices.
#![allow(dead_code)]

pub mod mix;

use std::path::PathBuf;

use etherparse::{LinkExtSlice, NetSlice, SlicedPacket, TransportSlice};
use pipeline::internal::port::pcap::{CaptureReader, LINKTYPE_ETHERNET};
use pipeline::meta::{mf, PacketMeta, ParseStatus};

/// The corpus folder (`flow_rules::input::data_dir`); None (the test does not run) without the
/// corpus outside CI, a failure naming the path in CI (`require_corpus`).
pub fn data_dir() -> Option<PathBuf> {
    flow_rules::input::require_corpus("pcaps/INDEX.tsv")?;
    Some(flow_rules::input::data_dir())
}

/// Every Ethernet capture of the tcpdump corpus (INDEX.tsv link type `ether`), plus
/// multi_proto.pcap and the O-RAN captures; None without the corpus ([`data_dir`]).
pub fn ethernet_captures() -> Option<Vec<PathBuf>> {
    let d = data_dir()?;
    let index = std::fs::read_to_string(d.join("pcaps/INDEX.tsv")).expect("read INDEX.tsv");
    let mut out: Vec<PathBuf> = index
        .lines()
        .filter_map(|l| {
            let mut cols = l.split('\t');
            let file = cols.next()?;
            let _size = cols.next()?;
            let link = cols.next()?;
            (link.split_whitespace().next() == Some("ether")).then(|| d.join("pcaps").join(file))
        })
        .collect();
    assert!(
        out.len() > 400,
        "INDEX.tsv lists only {} Ethernet captures",
        out.len()
    );
    out.push(d.join("pcaps/multi_proto.pcap"));
    for e in std::fs::read_dir(d.join("oran")).expect("read oran/") {
        let p = e.expect("dir entry").path();
        if p.extension().is_some_and(|x| x == "pcap") {
            out.push(p);
        }
    }
    Some(out)
}

/// Calls `f(frame)` for every Ethernet frame of `path`. A capture that is itself corrupt (some
/// fuzzer-made files are) ends at its first bad record: the frames before it are still used.
/// Returns the number of frames.
pub fn for_each_frame(path: &std::path::Path, mut f: impl FnMut(&[u8])) -> usize {
    let mut r = match CaptureReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("skipping unreadable capture: {e}");
            return 0;
        }
    };
    let mut n = 0;
    while let Ok(Some(fr)) = r.next_frame() {
        if fr.link_type == LINKTYPE_ETHERNET {
            f(fr.data);
            n += 1;
        }
    }
    n
}

/// All Ethernet frames of the corpus; None without it ([`data_dir`]).
pub fn corpus_frames() -> Option<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    for p in ethernet_captures()? {
        let name = p
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut i = 0;
        for_each_frame(&p, |fr| {
            i += 1;
            out.push((format!("{name}#{i}"), fr.to_vec()));
        });
    }
    Some(out)
}

fn ipv4_words(a: [u8; 4]) -> [u32; 4] {
    [u32::from_be_bytes(a), 0, 0, 0]
}

fn ipv6_words(a: [u8; 16]) -> [u32; 4] {
    let mut w = [0u32; 4];
    for (i, c) in a.chunks_exact(4).enumerate() {
        w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
    }
    w
}

/// Whether our outer layers (L2..L4) parsed: OK, or the error is in a tunnel or beyond it.
fn outer_ok(m: &PacketMeta) -> bool {
    if m.status & ParseStatus::INNER != 0 {
        return true;
    }
    matches!(
        m.parse_status(),
        Some(
            ParseStatus::Ok
                | ParseStatus::VxlanTruncated
                | ParseStatus::GtpuTruncated
                | ParseStatus::GtpuBadHeader
                | ParseStatus::GtpuBadLength
                | ParseStatus::GtpuBadExt
        )
    )
}

/// What was compared (for coverage statistics).
#[derive(Default, Debug)]
pub struct Compared {
    pub both_ok: usize,
    pub vlans: usize,
    pub ip: usize,
    pub ports: usize,
}

/// Compares our metadata with etherparse's view of the same frame wherever both parsed.
pub fn compare_with_etherparse(
    frame: &[u8],
    m: &PacketMeta,
    c: &mut Compared,
) -> Result<(), String> {
    let Ok(sp) = SlicedPacket::from_ethernet(frame) else {
        return Ok(());
    };
    if !outer_ok(m) {
        return Ok(());
    }
    c.both_ok += 1;
    // VLAN tags, up to etherparse's cap of 3; MACsec is not ours to parse.
    let mut tags = Vec::new();
    for e in &sp.link_exts {
        match e {
            LinkExtSlice::Vlan(v) => tags.push(u16::from_be_bytes([v.slice()[0], v.slice()[1]])),
            LinkExtSlice::Macsec(_) => return Ok(()),
        }
    }
    let walked_all = tags.len() < SlicedPacket::LINK_EXTS_CAP;
    if walked_all && m.vlan_count as usize != tags.len() {
        return Err(format!(
            "vlan_count {} vs etherparse {}",
            m.vlan_count,
            tags.len()
        ));
    }
    if (m.vlan_count as usize) < tags.len() {
        return Err(format!(
            "vlan_count {} < etherparse {}",
            m.vlan_count,
            tags.len()
        ));
    }
    for (i, t) in tags.iter().take(2).enumerate() {
        if m.vlan_tci[i] != *t {
            return Err(format!(
                "vlan_tci[{i}] {:#06x} vs {:#06x}",
                m.vlan_tci[i], t
            ));
        }
    }
    if !tags.is_empty() {
        c.vlans += 1;
    }
    match &sp.net {
        Some(NetSlice::Ipv4(ip)) => {
            let h = ip.header();
            let want = (
                4u8,
                ipv4_words(h.source()),
                ipv4_words(h.destination()),
                ip.payload().ip_number.0,
            );
            let got = (m.ip_version, m.src_ip, m.dst_ip, m.ip_proto);
            if want != got {
                return Err(format!("ipv4 {got:?} vs etherparse {want:?}"));
            }
            c.ip += 1;
        }
        Some(NetSlice::Ipv6(ip)) => {
            let h = ip.header();
            let want = (
                6u8,
                ipv6_words(h.source()),
                ipv6_words(h.destination()),
                ip.payload().ip_number.0,
            );
            let got = (m.ip_version, m.src_ip, m.dst_ip, m.ip_proto);
            if want != got {
                return Err(format!("ipv6 {got:?} vs etherparse {want:?}"));
            }
            c.ip += 1;
        }
        Some(NetSlice::Arp(a)) => {
            let s = a.slice();
            let oper = u16::from_be_bytes([s[6], s[7]]);
            if m.flags & mf::ARP == 0 || m.arp_oper != oper {
                return Err(format!("arp oper {} vs etherparse {oper}", m.arp_oper));
            }
        }
        None => {}
    }
    let ports = match &sp.transport {
        Some(TransportSlice::Tcp(t)) => {
            let flags = (t.ns() as u16) << 8
                | (t.cwr() as u16) << 7
                | (t.ece() as u16) << 6
                | (t.urg() as u16) << 5
                | (t.ack() as u16) << 4
                | (t.psh() as u16) << 3
                | (t.rst() as u16) << 2
                | (t.syn() as u16) << 1
                | t.fin() as u16;
            if m.tcp_flags != flags {
                return Err(format!(
                    "tcp flags {:#x} vs etherparse {flags:#x}",
                    m.tcp_flags
                ));
            }
            Some((t.source_port(), t.destination_port()))
        }
        Some(TransportSlice::Udp(u)) => Some((u.source_port(), u.destination_port())),
        Some(TransportSlice::Icmpv4(i)) => {
            if (m.icmp_type, m.icmp_code) != (i.type_u8(), i.code_u8()) {
                return Err("icmp type/code differ".into());
            }
            None
        }
        Some(TransportSlice::Icmpv6(i)) => {
            if (m.icmp_type, m.icmp_code) != (i.type_u8(), i.code_u8()) {
                return Err("icmpv6 type/code differ".into());
            }
            None
        }
        Some(TransportSlice::Igmp(_)) | None => None,
    };
    if let Some(p) = ports {
        if m.flags & mf::L4 == 0 || (m.src_port, m.dst_port) != p {
            return Err(format!(
                "ports {:?} vs etherparse {p:?}",
                (m.src_port, m.dst_port)
            ));
        }
        c.ports += 1;
    }
    Ok(())
}

/// Hex dump for failure messages.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
