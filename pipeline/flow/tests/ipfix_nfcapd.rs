//! nfdump's collector, nfcapd, as the real receiver: every exported flow arrives with its
//! addresses, ports, protocol, packets and bytes per direction, flags, VLAN and times; and
//! the flows of a capture, exported, add up per conversation to tshark's conversation
//! statistics of that capture.

mod ipfix_common;
use ipfix_common::*;
use pktwarp_flow::ipfix::{EndReason, FlowRecord};
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::process::Command;

fn tools(test: &str) -> bool {
    have_tool("nfcapd", test) && have_tool("nfdump", test)
}

fn by_key(flows: &[NfFlow]) -> HashMap<(IpAddr, IpAddr, u16, u16, String), NfFlow> {
    let mut m = HashMap::new();
    for f in flows {
        let k = (f.sa, f.da, f.sp, f.dp, f.pr.clone());
        assert!(m.insert(k, f.clone()).is_none(), "flow twice: {f:?}");
    }
    m
}

#[test]
fn nfcapd_stores_every_exported_flow() {
    if !tools("nfcapd_stores_every_exported_flow") {
        return;
    }
    let nf = Nfcapd::start("records");
    let flows = sample_flows();
    let stats = export_to(nf.port, &flows, |c| c.observation_domain = 3);
    assert_eq!(
        (stats.records_exported, stats.send_errors),
        (flows.len() as u64, 0)
    );
    let got = by_key(&nf.stop_and_read());
    assert_eq!(got.len(), flows.len());
    for r in &flows {
        let k = (r.src, r.dst, r.src_port, r.dst_port, nf_proto(r.protocol));
        let f = got.get(&k).unwrap_or_else(|| panic!("nfdump lacks {r:?}"));
        let (y, mo, d, h, mi, s) = utc(r.start_ms);
        let want = NfFlow {
            ts: format!("{y}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}"),
            td_ms: r.end_ms - r.start_ms,
            sa: r.src,
            da: r.dst,
            sp: r.src_port,
            dp: r.dst_port,
            pr: nf_proto(r.protocol),
            flg: nf_flags(r.tcp_flags),
            ipkt: r.packets,
            ibyt: r.octets,
            opkt: r.rev_packets,
            obyt: r.rev_octets,
            svln: r.vlan,
        };
        assert_eq!(f, &want);
    }
}

/// Per direction of a conversation: packets, IP octets, and the bytes of the frames (tshark's
/// conversation statistics count whole frames; IPFIX counts IP octets).
#[derive(Clone, Copy, Debug, Default)]
struct Dir {
    packets: u64,
    octets: u64,
    frame_bytes: u64,
}

/// Protocol and the two endpoints, lower first.
type ConvKey = (u8, (IpAddr, u16), (IpAddr, u16));

/// The test's own flow aggregation, keyed by the bidirectional 5-tuple; the initiator is the
/// sender of the conversation's first packet.
#[derive(Default)]
struct Aggregator {
    flows: Vec<(FlowRecord, [Dir; 2])>,
    index: HashMap<ConvKey, usize>,
}

impl Aggregator {
    fn add(&mut self, us: u64, frame: &[u8]) {
        let Ok(p) = etherparse::SlicedPacket::from_ethernet(frame) else {
            return;
        };
        let (src, dst, octets, fragmented) = match &p.net {
            Some(etherparse::NetSlice::Ipv4(s)) => (
                IpAddr::V4(s.header().source_addr()),
                IpAddr::V4(s.header().destination_addr()),
                u64::from(s.header().total_len()),
                s.is_payload_fragmented(),
            ),
            Some(etherparse::NetSlice::Ipv6(s)) => (
                IpAddr::V6(s.header().source_addr()),
                IpAddr::V6(s.header().destination_addr()),
                40 + u64::from(s.header().payload_length()),
                s.is_payload_fragmented(),
            ),
            _ => return,
        };
        use etherparse::TransportSlice as T;
        let (proto, sp, dp, flags) = match &p.transport {
            Some(T::Tcp(t)) => (6, t.source_port(), t.destination_port(), t.slice()[13]),
            Some(T::Udp(u)) => (17, u.source_port(), u.destination_port(), 0),
            Some(T::Icmpv4(_)) => (1, 0, 0, 0),
            Some(T::Icmpv6(_)) => (58, 0, 0, 0),
            _ => return,
        };
        if fragmented {
            return;
        }
        let (a, b) = ((src, sp), (dst, dp));
        let key = (proto, a.min(b), a.max(b));
        let ms = us / 1000;
        let i = *self.index.entry(key).or_insert_with(|| {
            self.flows.push((
                FlowRecord {
                    vlan: 0,
                    src,
                    dst,
                    src_port: sp,
                    dst_port: dp,
                    protocol: proto,
                    packets: 0,
                    octets: 0,
                    rev_packets: 0,
                    rev_octets: 0,
                    start_ms: ms,
                    end_ms: ms,
                    tcp_flags: 0,
                    rev_tcp_flags: 0,
                    end_reason: EndReason::ForcedEnd,
                },
                [Dir::default(); 2],
            ));
            self.flows.len() - 1
        });
        let (r, dirs) = &mut self.flows[i];
        let fwd = (src, sp) == (r.src, r.src_port);
        let d = &mut dirs[usize::from(!fwd)];
        d.packets += 1;
        d.octets += octets;
        d.frame_bytes += frame.len() as u64;
        if fwd {
            r.packets += 1;
            r.octets += octets;
            r.tcp_flags |= flags;
        } else {
            r.rev_packets += 1;
            r.rev_octets += octets;
            r.rev_tcp_flags |= flags;
        }
        r.end_ms = r.end_ms.max(ms);
    }
}

/// One conversation of tshark's `-z conv,tcp` / `-z conv,udp`: the two endpoints as printed
/// (A, B), then frames and bytes B -> A ("<-") and A -> B ("->").
#[derive(Debug, PartialEq, Eq)]
struct Conv {
    proto: u8,
    a: String,
    b: String,
    frames_ba: u64,
    bytes_ba: u64,
    frames_ab: u64,
    bytes_ab: u64,
}

fn tshark_convs(pcap: &Path) -> Vec<Conv> {
    let out = run(Command::new("tshark")
        .args(["-q", "-z", "conv,tcp", "-z", "conv,udp", "-r"])
        .arg(pcap));
    let mut proto = 0;
    let mut convs = vec![];
    for l in out.lines() {
        if l.starts_with("TCP Conversations") {
            proto = 6;
        } else if l.starts_with("UDP Conversations") {
            proto = 17;
        }
        let t: Vec<&str> = l.split_whitespace().collect();
        if t.len() < 4 || t[1] != "<->" {
            continue;
        }
        // A <-> B frames bytes unit frames bytes unit frames bytes unit start duration
        assert_eq!(
            (t[5], t[8]),
            ("bytes", "bytes"),
            "exact byte counts (under 10 kB): {l}"
        );
        convs.push(Conv {
            proto,
            a: t[0].to_string(),
            b: t[2].to_string(),
            frames_ba: t[3].parse().unwrap(),
            bytes_ba: t[4].parse().unwrap(),
            frames_ab: t[6].parse().unwrap(),
            bytes_ab: t[7].parse().unwrap(),
        });
    }
    convs
}

/// tshark's way of writing an endpoint: `addr:port`, no brackets around IPv6.
fn endpoint(a: IpAddr, p: u16) -> String {
    format!("{a}:{p}")
}

/// Aggregates the capture, exports the flows to nfcapd, and holds nfdump's per-conversation
/// packets and bytes equal to tshark's (frames; bytes less the link-layer bytes that IPFIX does
/// not count). Returns how many conversations were compared.
fn capture_matches_tshark(pcap: &Path, name: &str) -> usize {
    let mut agg = Aggregator::default();
    for (us, f) in read_pcap(pcap) {
        agg.add(us, &f);
    }
    let nf = Nfcapd::start(name);
    let records: Vec<FlowRecord> = agg.flows.iter().map(|(r, _)| r.clone()).collect();
    let stats = export_to(nf.port, &records, |_| {});
    assert_eq!(stats.records_exported, records.len() as u64);
    let got = by_key(&nf.stop_and_read());
    assert_eq!(got.len(), records.len(), "nfdump has every flow");
    let convs = tshark_convs(pcap);
    assert!(!convs.is_empty());
    let mut compared = 0;
    for (r, dirs) in &agg.flows {
        let f = &got[&(r.src, r.dst, r.src_port, r.dst_port, nf_proto(r.protocol))];
        assert_eq!(
            (f.ipkt, f.ibyt, f.opkt, f.obyt),
            (r.packets, r.octets, r.rev_packets, r.rev_octets)
        );
        if r.protocol != 6 && r.protocol != 17 {
            continue; // tshark's tcp and udp tables only
        }
        let (i, j) = (endpoint(r.src, r.src_port), endpoint(r.dst, r.dst_port));
        let c = convs
            .iter()
            .find(|c| c.proto == r.protocol && ((c.a == i && c.b == j) || (c.a == j && c.b == i)))
            .unwrap_or_else(|| panic!("tshark lacks {i} <-> {j}: {convs:?}"));
        // nfdump's bytes (IP octets) plus the link-layer bytes of the same frames.
        let fwd = (f.ipkt, f.ibyt + dirs[0].frame_bytes - dirs[0].octets);
        let rev = (f.opkt, f.obyt + dirs[1].frame_bytes - dirs[1].octets);
        let (ab, ba) = if c.a == i { (fwd, rev) } else { (rev, fwd) };
        assert_eq!(
            ((c.frames_ab, c.bytes_ab), (c.frames_ba, c.bytes_ba)),
            (ab, ba),
            "{c:?}"
        );
        compared += 1;
    }
    assert_eq!(compared, convs.len(), "every tshark conversation is a flow");
    compared
}

/// A capture of TCP and UDP conversations over IPv4 and IPv6 (one-way ones too) and ICMP echo.
fn generated_capture(path: &Path) {
    use etherparse::PacketBuilder as B;
    let mac = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let v4 = |s: [u8; 4], d: [u8; 4]| B::ethernet2(mac.0, mac.1).ipv4(s, d, 64);
    let v6 = |s: u16, d: u16| {
        let a = |x: u16| {
            let mut o = [0u8; 16];
            o[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
            o[14..].copy_from_slice(&x.to_be_bytes());
            o
        };
        B::ethernet2(mac.0, mac.1).ipv6(a(s), a(d), 64)
    };
    let mut frames: Vec<Vec<u8>> = vec![];
    // TCP: handshake, data both ways, FIN both ways; `c` / `s` the endpoints, flags per segment.
    let tcp_conv =
        |frames: &mut Vec<Vec<u8>>, six: bool, cp: u16, sp: u16, sizes: &[(bool, usize, u8)]| {
            for (k, &(from_client, len, flags)) in sizes.iter().enumerate() {
                let (src, dst, ps, pd) = if from_client {
                    (1, 2, cp, sp)
                } else {
                    (2, 1, sp, cp)
                };
                let seq = 1000 + k as u32;
                let payload = vec![0x41u8; len];
                let mut v = vec![];
                macro_rules! emit {
                    ($b:expr) => {{
                        let mut b = $b.tcp(ps, pd, seq, 64240);
                        if flags & 0x02 != 0 {
                            b = b.syn();
                        }
                        if flags & 0x10 != 0 {
                            b = b.ack(seq);
                        }
                        if flags & 0x01 != 0 {
                            b = b.fin();
                        }
                        if flags & 0x08 != 0 {
                            b = b.psh();
                        }
                        b.write(&mut v, &payload).unwrap();
                    }};
                }
                if six {
                    emit!(v6(src, dst));
                } else {
                    emit!(v4([10, 0, 0, src as u8], [10, 0, 0, dst as u8]));
                }
                frames.push(v);
            }
        };
    let conv = [
        (true, 0, 0x02),
        (false, 0, 0x12),
        (true, 0, 0x10),
        (true, 100, 0x18),
        (true, 200, 0x18),
        (false, 1400, 0x18),
        (false, 1000, 0x18),
        (true, 300, 0x18),
        (true, 0, 0x11),
        (false, 0, 0x11),
        (true, 0, 0x10),
    ];
    tcp_conv(&mut frames, false, 33000, 80, &conv);
    tcp_conv(&mut frames, true, 44000, 443, &conv[..7]);
    for k in 0..9usize {
        let q = k % 2 == 0;
        let mut v = vec![];
        let (s, d, ps, pd) = if q {
            ([10, 0, 0, 3], [10, 0, 0, 4], 5353, 53)
        } else {
            ([10, 0, 0, 4], [10, 0, 0, 3], 53, 5353)
        };
        v4(s, d)
            .udp(ps, pd)
            .write(&mut v, &vec![7u8; if q { 40 + k } else { 200 + k }])
            .unwrap();
        frames.push(v);
        let mut v = vec![];
        v6(7, 8)
            .udp(6000, 7000)
            .write(&mut v, &vec![1u8; 10 * k])
            .unwrap();
        frames.push(v);
    }
    for k in 0..4u16 {
        let mut v = vec![];
        if k % 2 == 0 {
            v4([10, 0, 0, 5], [10, 0, 0, 6])
                .icmpv4_echo_request(1, k)
                .write(&mut v, &[0; 56])
                .unwrap();
        } else {
            v4([10, 0, 0, 6], [10, 0, 0, 5])
                .icmpv4_echo_reply(1, k)
                .write(&mut v, &[0; 56])
                .unwrap();
        }
        frames.push(v);
    }
    let base = 1_700_000_000_000_000u64;
    let timed: Vec<_> = frames
        .into_iter()
        .enumerate()
        .map(|(i, f)| (base + i as u64 * 1500, f))
        .collect();
    write_pcap(path, &timed);
}

#[test]
fn generated_capture_flows_at_nfcapd_equal_tshark_conversations() {
    let test = "generated_capture_flows_at_nfcapd_equal_tshark_conversations";
    if !tools(test) || !have_tool("tshark", test) {
        return;
    }
    let dir = temp_dir("conv-gen");
    let pcap = dir.join("gen.pcap");
    generated_capture(&pcap);
    // TCP v4 and v6, UDP v4 and one-way v6.
    assert_eq!(capture_matches_tshark(&pcap, "conv-gen-nf"), 4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn corpus_capture_flows_at_nfcapd_equal_tshark_conversations() {
    let test = "corpus_capture_flows_at_nfcapd_equal_tshark_conversations";
    if !tools(test) || !have_tool("tshark", test) {
        return;
    }
    // Plain TCP (BGP sessions) and UDP (DNS) captures of tcpdump's tests: no fragments, tunnels
    // or VLANs, so the test's aggregation and tshark see the same conversations.
    for (rel, n) in [
        ("pcaps/tcpdump/bgp-4byte-asn.pcap", 6),
        ("pcaps/tcpdump/edns-opts.pcap", 1),
    ] {
        let Some(pcap) = flow_rules::input::require_corpus(rel) else {
            return;
        };
        assert_eq!(capture_matches_tshark(&pcap, "conv-corpus"), n, "{rel}");
    }
}
