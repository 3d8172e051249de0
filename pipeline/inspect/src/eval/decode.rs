//! A frame's fields for the evaluator, read from its bytes (Ethernet, up to two VLAN tags,
//! IPv4 / IPv6 with extension headers, TCP / UDP / ICMP) with the checked views of
//! pktwarp-wire. The L4 payload is cut to the IP length (Ethernet padding is not payload).
//! A fragment other than the first has no L4 header: its payload is empty and its ports
//! 0 (the rules see what Suricata sees without defragmentation).

use super::Frame;
use pktwarp_wire::{ethernet, icmp, ipv4, ipv6, tcp, udp};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Most IPv6 extension headers walked before giving up on the L4 header.
const MAX_EXT: usize = 8;

/// The fields of an IP frame; None when it is not IPv4 / IPv6 over Ethernet or its IP header
/// is cut.
pub fn decode(bytes: &[u8]) -> Option<Frame<'_>> {
    let eth = ethernet::Frame::new_checked(bytes).ok()?;
    let mut et = eth.ether_type();
    let mut rest = eth.payload();
    for _ in 0..2 {
        if !ethernet::ether_type::is_vlan(et) {
            break;
        }
        let tag = ethernet::VlanTag::new_checked(rest).ok()?;
        et = tag.ether_type();
        rest = rest.get(4..)?;
    }
    from_ip(et, rest)
}

/// The fields of an IP packet that starts at `bytes[0]` (no link layer: what a GTP-U tunnel
/// carries, or the inner packet of VXLAN at its inner L3 offset), by its version nibble.
pub fn decode_ip(bytes: &[u8]) -> Option<Frame<'_>> {
    match bytes.first()? >> 4 {
        4 => from_ip(ethernet::ether_type::IPV4, bytes),
        6 => from_ip(ethernet::ether_type::IPV6, bytes),
        _ => None,
    }
}

fn from_ip(et: u16, rest: &[u8]) -> Option<Frame<'_>> {
    let (src, dst, proto, l4, first) = match et {
        ethernet::ether_type::IPV4 => {
            let p = ipv4::Packet::new_checked(rest).ok()?;
            let end = usize::from(p.total_len()).min(rest.len());
            let l4 = rest.get(p.header_len()..end).unwrap_or_default();
            let (s, d) = (Ipv4Addr::from(p.src()), Ipv4Addr::from(p.dst()));
            (
                IpAddr::V4(s),
                IpAddr::V4(d),
                p.protocol(),
                l4,
                p.frag_offset() == 0,
            )
        }
        ethernet::ether_type::IPV6 => {
            let p = ipv6::Packet::new_checked(rest).ok()?;
            let end = (ipv6::HEADER_LEN + usize::from(p.payload_len())).min(rest.len());
            let mut l4 = rest.get(ipv6::HEADER_LEN..end).unwrap_or_default();
            let mut nh = p.next_header();
            let mut first = true;
            for _ in 0..MAX_EXT {
                if !ipv6::ext::is_walked(nh) {
                    break;
                }
                let h = ipv6::ExtHeader::new_checked(l4, nh).ok()?;
                if let Some((off, _, _)) = h.fragment() {
                    first = off == 0;
                }
                nh = h.next_header();
                l4 = l4.get(h.header_len()..).unwrap_or_default();
            }
            let (s, d) = (Ipv6Addr::from(p.src()), Ipv6Addr::from(p.dst()));
            (IpAddr::V6(s), IpAddr::V6(d), nh, l4, first)
        }
        _ => return None,
    };
    let mut f = Frame {
        ip_proto: proto,
        src,
        dst,
        src_port: 0,
        dst_port: 0,
        tcp_flags: 0,
        icmp_type: 0,
        icmp_code: 0,
        ct_state: 0,
        ct_dir: 0,
        payload: &[],
        http: None,
    };
    if !first {
        return Some(f);
    }
    match proto {
        6 => {
            if let Ok(h) = tcp::Header::new_checked(l4) {
                f.src_port = h.src_port();
                f.dst_port = h.dst_port();
                f.tcp_flags = (h.flags() & 0xff) as u8;
                f.payload = l4.get(h.header_len()..).unwrap_or_default();
            }
        }
        17 => {
            if let Ok(h) = udp::Header::new_checked(l4) {
                f.src_port = h.src_port();
                f.dst_port = h.dst_port();
                f.payload = l4.get(8..).unwrap_or_default();
            }
        }
        1 => {
            if let Ok(h) = icmp::Header::new_checked(l4) {
                f.icmp_type = h.msg_type();
                f.icmp_code = h.code();
                f.payload = l4.get(8..).unwrap_or_default();
            }
        }
        _ => f.payload = l4,
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth(et: u16, body: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; 12];
        v.extend_from_slice(&et.to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    fn ipv4(proto: u8, l4: &[u8], frag: u16) -> Vec<u8> {
        let total = (20 + l4.len()) as u16;
        let mut v = vec![0x45, 0];
        v.extend_from_slice(&total.to_be_bytes());
        v.extend_from_slice(&[0, 0]);
        v.extend_from_slice(&frag.to_be_bytes());
        v.extend_from_slice(&[64, proto, 0, 0, 10, 0, 0, 1, 8, 8, 8, 8]);
        v.extend_from_slice(l4);
        v
    }

    #[test]
    fn tcp_over_vlan_ipv4_with_padding() {
        let mut tcp = vec![
            0x9c, 0x40, 0, 80, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x18, 0, 0, 0, 0, 0, 0,
        ];
        tcp.extend_from_slice(b"GET");
        let mut vlan = vec![0, 5, 0x08, 0x00];
        vlan.extend(ipv4(6, &tcp, 0));
        let mut frame = eth(0x8100, &vlan);
        frame.extend_from_slice(&[0; 6]); // Ethernet padding
        let f = decode(&frame).unwrap();
        assert_eq!(
            (f.ip_proto, f.src_port, f.dst_port, f.tcp_flags),
            (6, 40000, 80, 0x18)
        );
        assert_eq!(f.payload, b"GET");
        assert_eq!(f.dst, "8.8.8.8".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn icmp_udp_fragments_and_ipv6() {
        let b1 = eth(0x0800, &ipv4(1, &[8, 0, 0, 0, 0, 0, 0, 0, b'x'], 0));
        let f = decode(&b1).unwrap();
        assert_eq!((f.icmp_type, f.icmp_code, f.payload), (8, 0, &b"x"[..]));
        let udp = [0, 53, 0, 54, 0, 9, 0, 0, b'q'];
        let b2 = eth(0x0800, &ipv4(17, &udp, 0));
        let f = decode(&b2).unwrap();
        assert_eq!((f.src_port, f.dst_port, f.payload), (53, 54, &b"q"[..]));
        let b3 = eth(0x0800, &ipv4(17, &udp, 0x0010));
        let f = decode(&b3).unwrap();
        assert_eq!((f.src_port, f.payload.len()), (0, 0));
        // IPv6, a hop-by-hop header, then UDP.
        let mut v6 = vec![0x60, 0, 0, 0, 0, 17, 0, 64];
        v6.extend_from_slice(&[0u8; 32]);
        v6.extend_from_slice(&[17, 0, 0, 0, 0, 0, 0, 0]);
        v6.extend_from_slice(&udp);
        let b4 = eth(0x86dd, &v6);
        let f = decode(&b4).unwrap();
        assert_eq!((f.ip_proto, f.dst_port, f.payload), (17, 54, &b"q"[..]));
    }

    #[test]
    fn not_ip_or_cut_is_none() {
        assert!(decode(&[]).is_none());
        assert!(decode(&eth(0x0806, &[0; 28])).is_none());
        assert!(decode(&eth(0x0800, &[0x45, 0, 0])).is_none());
        assert!(decode(&eth(0x8100, &[0, 1])).is_none());
        // A cut TCP header leaves the payload empty rather than failing the frame.
        let b5 = eth(0x0800, &ipv4(6, &[0, 1, 0, 2], 0));
        let f = decode(&b5).unwrap();
        assert_eq!((f.ip_proto, f.payload.len()), (6, 0));
    }
}
