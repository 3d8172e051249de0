//! The multi-protocol capture (`pipeline::testdata::multi_proto_pcap`, generated; the same 23
//! frames as the corpus's `pcaps/multi_proto.pcap`): all described correctly. The truth comes
//! from `tshark -r multi_proto.pcap -V` (Wireshark 4.0).

mod parse_common;

use pipeline::internal::stage::parse::{cuda_host, parse_frame};
use pipeline::meta::{mf, PacketMeta, ParseStatus as S, TunnelType};

fn frames() -> Vec<Vec<u8>> {
    let p = pipeline::internal::testdata::multi_proto_pcap();
    let mut out = Vec::new();
    parse_common::for_each_frame(&p, |f| out.push(f.to_vec()));
    assert_eq!(out.len(), 23, "multi_proto.pcap frame count");
    out
}

fn v4(a: [u8; 4]) -> [u32; 4] {
    [u32::from_be_bytes(a), 0, 0, 0]
}

/// 2001:db8::<last>
fn v6(last: u32) -> [u32; 4] {
    [0x2001_0db8, 0, 0, last]
}

fn ok(m: &PacketMeta) {
    assert_eq!(m.status, 0, "status {}", S::describe(m.status));
}

fn l4(m: &PacketMeta, proto: u8, sp: u16, dp: u16) {
    assert_eq!(m.ip_proto, proto);
    assert_ne!(m.flags & mf::L4, 0, "L4 parsed");
    assert_eq!((m.src_port, m.dst_port), (sp, dp));
}

#[test]
fn all_23_frames() {
    let f = frames();
    let m: Vec<PacketMeta> = f.iter().map(|x| parse_frame(x)).collect();
    plain_frames(&m);
    fragments(&m);
    tunnels_and_labels(&m);
    options_arp_malformed_ecpri(&m);

    // The CUDA parser describes them identically.
    for (i, (fr, r)) in f.iter().zip(&m).enumerate() {
        let mut c = PacketMeta::default();
        cuda_host::parse(fr, &mut c);
        assert_eq!(&c, r, "frame {}", i + 1);
    }
}

/// Frames 1-7: IPv4 UDP / TCP / ICMP, VLAN, QinQ, IPv6, IPv6 extension headers.
fn plain_frames(m: &[PacketMeta]) {
    let syn = 0x002;
    // 1: IPv4 UDP 1234 -> 5678
    ok(&m[0]);
    assert_eq!(
        (m[0].ip_version, m[0].src_ip, m[0].dst_ip),
        (4, v4([10, 0, 0, 1]), v4([10, 0, 0, 2]))
    );
    l4(&m[0], 17, 1234, 5678);
    assert_eq!(
        (m[0].l3_offset, m[0].l4_offset, m[0].payload_offset),
        (14, 34, 42)
    );
    // 2: TCP SYN 1234 -> 80
    ok(&m[1]);
    l4(&m[1], 6, 1234, 80);
    assert_eq!(m[1].tcp_flags, syn);
    assert_eq!(m[1].payload_offset, 54);
    // 3: ICMP echo request
    ok(&m[2]);
    assert_eq!((m[2].ip_proto, m[2].icmp_type, m[2].icmp_code), (1, 8, 0));
    // 4: 802.1Q VLAN 100, UDP 1 -> 2
    ok(&m[3]);
    assert_eq!(
        (m[3].vlan_count, m[3].vlan_tci[0] & 0xfff, m[3].ether_type),
        (1, 100, 0x0800)
    );
    assert_eq!(m[3].src_ip, v4([10, 0, 1, 1]));
    l4(&m[3], 17, 1, 2);
    assert_eq!(m[3].l3_offset, 18);
    // 5: QinQ 802.1ad 200 / 802.1Q 300, TCP SYN 3 -> 4
    ok(&m[4]);
    assert_eq!(m[4].vlan_count, 2);
    assert_eq!(
        (m[4].vlan_tci[0] & 0xfff, m[4].vlan_tci[1] & 0xfff),
        (200, 300)
    );
    assert_eq!((m[4].l3_offset, m[4].dst_ip), (22, v4([10, 0, 2, 2])));
    l4(&m[4], 6, 3, 4);
    assert_eq!(m[4].tcp_flags, syn);
    // 6: IPv6 UDP 53 -> 53 (the DNS payload is not ours to judge)
    ok(&m[5]);
    assert_eq!(
        (m[5].ip_version, m[5].src_ip, m[5].dst_ip),
        (6, v6(1), v6(2))
    );
    l4(&m[5], 17, 53, 53);
    // 7: IPv6 hop-by-hop, destination options, routing, then TCP SYN 5 -> 6
    ok(&m[6]);
    // The header's destination (tshark's summary shows the routing header's final hop, ::3).
    assert_eq!(m[6].dst_ip, v6(2));
    assert_ne!(m[6].flags & mf::IP_OPTIONS, 0);
    l4(&m[6], 6, 5, 6);
    assert!(m[6].l4_offset > 54 + 8, "L4 after the extension headers");
}

/// Frames 8-14: IPv6 and IPv4 fragments.
fn fragments(m: &[PacketMeta]) {
    // 8-10: IPv6 fragments of one UDP datagram (id 0x0521c6bf): first has the UDP header.
    for (i, off, more) in [(7, 0u16, true), (8, 152, true), (9, 304, false)] {
        let x = &m[i];
        ok(x);
        assert_eq!(
            (x.ip_version, x.ip_proto, x.frag_id, x.frag_offset),
            (6, 17, 0x0521_c6bf, off),
            "frame {}",
            i + 1
        );
        assert_ne!(x.flags & mf::FRAGMENT, 0);
        assert_eq!(x.flags & mf::MORE_FRAGMENTS != 0, more);
        assert_eq!(x.flags & mf::LATER_FRAGMENT != 0, off != 0);
        assert_eq!(
            x.l4_offset != 0,
            off == 0,
            "frame {}: L4 only in the first fragment",
            i + 1
        );
    }
    assert_eq!((m[7].src_port, m[7].dst_port), (7, 8));
    // 11-14: IPv4 fragments (id 1) at 0, 1000, 2000, 3000 bytes; UDP 9 -> 10 in the first.
    for (i, off) in [(10, 0u16), (11, 125), (12, 250), (13, 375)] {
        let x = &m[i];
        ok(x);
        assert_eq!(
            (x.ip_proto, x.frag_id, x.frag_offset),
            (17, 1, off),
            "frame {}",
            i + 1
        );
        assert_ne!(x.flags & mf::FRAGMENT, 0);
        assert_eq!(x.flags & mf::MORE_FRAGMENTS != 0, i != 13);
        assert_eq!(x.l4_offset != 0, off == 0);
    }
    assert_eq!((m[10].src_port, m[10].dst_port), (9, 10));
}

/// Frames 15-17: VXLAN, GTP-U, MPLS.
fn tunnels_and_labels(m: &[PacketMeta]) {
    let syn = 0x002;
    // 15: VXLAN VNI 42: inner Ethernet / IPv4 172.16.0.1 -> 172.16.0.2 / TCP SYN 11 -> 12
    let x = &m[14];
    ok(x);
    assert_eq!(
        (x.src_ip, x.dst_ip),
        (v4([192, 168, 0, 1]), v4([192, 168, 0, 2]))
    );
    l4(x, 17, 49152, 4789);
    assert_eq!((x.tunnel_type, x.tunnel_id), (TunnelType::Vxlan as u8, 42));
    assert_ne!(x.flags & mf::TUNNEL, 0);
    assert_eq!(
        x.payload_offset, 50,
        "inner Ethernet starts after the VXLAN header"
    );
    assert_eq!((x.inner_l3_offset, x.inner_l4_offset), (64, 84));
    assert_eq!((x.inner_ip_version, x.inner_ip_proto), (4, 6));
    assert_eq!(
        (x.inner_src_ip, x.inner_dst_ip),
        (v4([172, 16, 0, 1]), v4([172, 16, 0, 2]))
    );
    assert_eq!(
        (x.inner_src_port, x.inner_dst_port, x.inner_tcp_flags),
        (11, 12, syn)
    );
    assert_ne!(x.flags & mf::INNER_L4, 0);
    // 16: GTP-U TEID 0x1234: inner IPv4 100.64.0.1 -> 8.8.8.8 / UDP 13 -> 14
    let x = &m[15];
    ok(x);
    l4(x, 17, 2152, 2152);
    assert_eq!(
        (x.tunnel_type, x.tunnel_id),
        (TunnelType::Gtpu as u8, 0x1234)
    );
    assert_eq!(
        (x.payload_offset, x.inner_l3_offset, x.inner_l4_offset),
        (50, 50, 70)
    );
    assert_eq!(
        (x.inner_src_ip, x.inner_dst_ip),
        (v4([100, 64, 0, 1]), v4([8, 8, 8, 8]))
    );
    assert_eq!(
        (x.inner_ip_proto, x.inner_src_port, x.inner_dst_port),
        (17, 13, 14)
    );
    // 17: MPLS labels 16, 17 (bottom of stack) then IPv4 UDP 15 -> 16
    let x = &m[16];
    ok(x);
    assert_eq!(
        (x.ether_type, x.mpls_count, x.mpls_lse >> 12),
        (0x8847, 2, 17)
    );
    assert_ne!(x.mpls_lse & 0x100, 0);
    assert_eq!(
        (x.l3_offset, x.ip_version, x.src_ip),
        (22, 4, v4([10, 0, 4, 1]))
    );
    l4(x, 17, 15, 16);
}

/// Frames 18-23: IPv4 options with SCTP, ARP, three malformed IPv4 frames, eCPRI.
fn options_arp_malformed_ecpri(m: &[PacketMeta]) {
    // 18: IPv4 with a record-route option (IHL 6), SCTP 17 -> 18
    let x = &m[17];
    ok(x);
    assert_ne!(x.flags & mf::IP_OPTIONS, 0);
    assert_eq!(x.l4_offset, 38);
    l4(x, 132, 17, 18);
    // 19: ARP request, who has 10.0.0.2 tell 10.0.0.1
    let x = &m[18];
    ok(x);
    assert_eq!((x.ether_type, x.arp_oper, x.ip_version), (0x0806, 1, 0));
    assert_ne!(x.flags & mf::ARP, 0);
    assert_eq!((x.src_ip, x.dst_ip), (v4([10, 0, 0, 1]), v4([10, 0, 0, 2])));
    // 20: a 20-byte frame: only 6 bytes of IPv4 header
    assert_eq!(
        (m[19].status, m[19].error_offset),
        (S::Ipv4Truncated as u16, 14)
    );
    assert_eq!(m[19].ip_version, 0);
    // 21: IHL 3 (12 bytes, must be at least 20)
    assert_eq!(
        (m[20].status, m[20].error_offset),
        (S::Ipv4BadIhl as u16, 14)
    );
    // 22: total length 9000 in a 106-byte frame: addresses kept, no L4
    assert_eq!(
        (m[21].status, m[21].error_offset),
        (S::Ipv4LenExceedsFrame as u16, 16)
    );
    assert_eq!(
        (m[21].src_ip, m[21].dst_ip),
        (v4([10, 0, 6, 1]), v4([10, 0, 6, 2]))
    );
    assert_eq!(m[21].l4_offset, 0);
    // 23: eCPRI revision 1, IQ data, payload size 8, PC_ID 0, SEQ_ID 0x0080 (E bit)
    let x = &m[22];
    ok(x);
    assert_eq!(x.ether_type, 0xaefe);
    assert_ne!(x.flags & mf::ECPRI, 0);
    assert_eq!(
        (x.ecpri_revision, x.ecpri_msg_type, x.ecpri_payload_size),
        (1, 0, 8)
    );
    assert_eq!(
        (x.ecpri_pc_id, x.ecpri_seq_id, x.payload_offset),
        (0, 0x0080, 18)
    );
}
