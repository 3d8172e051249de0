//! Requests for the `respond` stage's tests, hostile ones included, built byte by byte (own
//! checksum arithmetic, not `wire::checksum`) so a test can state what it sends: ARP requests
//! and ICMP / ICMPv6 echo requests with a chosen Ethernet source, IP source, IPv6 extension
//! headers (hop-by-hop, a segment routing header with a chosen segments-left) and Ethernet
//! padding. Corruptions (a bad checksum, a total length past the frame) are made by the test on
//! the bytes, at the offsets [`Echo::l3`] gives.

use std::net::{IpAddr, Ipv6Addr};

use super::{fold, sum16};

/// A unicast Ethernet address for requesters.
pub const REQUESTER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x07];

/// An ICMP (IPv4) or ICMPv6 (IPv6) echo request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Echo {
    pub eth_dst: [u8; 6],
    pub eth_src: [u8; 6],
    /// One 802.1Q tag with this TCI.
    pub vlan: Option<u16>,
    /// Both of one family.
    pub src: IpAddr,
    pub dst: IpAddr,
    pub ident: u16,
    pub seq: u16,
    pub data: Vec<u8>,
    /// IPv6: an 8-byte hop-by-hop header (PadN) first.
    pub hop_by_hop: bool,
    /// IPv6: a segment routing header (RFC 8754, type 4) with two segments and this
    /// segments-left. Segment 0 (the final destination, which the ICMPv6 pseudo header holds) is
    /// `dst` when segments-left is 0, else [`Echo::FINAL`]; segment 1 is `dst`.
    pub routing: Option<u8>,
    /// Bytes after the IP packet (Ethernet padding), of value 0xA5 so a test sees them.
    pub padding: usize,
}

impl Echo {
    /// The final destination of a request routed on past `dst` (segments left > 0).
    pub const FINAL: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0xbe, 0xef);

    /// An echo request from a unicast requester to `dst` with 32 bytes of data, no padding.
    pub fn new(src: &str, dst: &str) -> Self {
        Echo {
            eth_dst: [0x02, 0, 0, 0, 0, 0x99],
            eth_src: REQUESTER_MAC,
            vlan: None,
            src: src.parse().expect("source address"),
            dst: dst.parse().expect("destination address"),
            ident: 0x1234,
            seq: 1,
            data: (0..32u8).collect(),
            hop_by_hop: false,
            routing: None,
            padding: 0,
        }
    }

    /// Offset of the IP header.
    pub fn l3(&self) -> usize {
        if self.vlan.is_some() {
            18
        } else {
            14
        }
    }

    /// The frame.
    pub fn build(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(128);
        f.extend_from_slice(&self.eth_dst);
        f.extend_from_slice(&self.eth_src);
        if let Some(tci) = self.vlan {
            f.extend_from_slice(&[0x81, 0]);
            f.extend_from_slice(&tci.to_be_bytes());
        }
        let mut icmp = vec![0, 0, 0, 0];
        icmp.extend_from_slice(&self.ident.to_be_bytes());
        icmp.extend_from_slice(&self.seq.to_be_bytes());
        icmp.extend_from_slice(&self.data);
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                f.extend_from_slice(&[8, 0]);
                icmp[0] = 8;
                let c = fold(sum16(0, &icmp));
                icmp[2..4].copy_from_slice(&c.to_be_bytes());
                f.extend(super::ipv4(s.octets(), d.octets(), 1, icmp.len(), 7, 0));
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                f.extend_from_slice(&[0x86, 0xdd]);
                icmp[0] = 128;
                let (ext, fin) = self.ext6(d);
                let pseudo = sum16(sum16(0, &s.octets()), &fin.octets()) + 58 + icmp.len() as u32;
                let c = fold(sum16(pseudo, &icmp));
                icmp[2..4].copy_from_slice(&c.to_be_bytes());
                let first = if self.hop_by_hop {
                    0
                } else if self.routing.is_some() {
                    43
                } else {
                    58
                };
                f.extend_from_slice(&[0x60, 0, 0, 0]);
                f.extend_from_slice(&((ext.len() + icmp.len()) as u16).to_be_bytes());
                f.extend_from_slice(&[first, 64]);
                f.extend_from_slice(&s.octets());
                f.extend_from_slice(&d.octets());
                f.extend(ext);
            }
            _ => panic!("source and destination of one family"),
        }
        f.extend(icmp);
        f.resize(f.len() + self.padding, 0xA5);
        f
    }

    /// The IPv6 extension headers and the final destination.
    fn ext6(&self, dst: Ipv6Addr) -> (Vec<u8>, Ipv6Addr) {
        let mut ext = Vec::new();
        if self.hop_by_hop {
            let next = if self.routing.is_some() { 43 } else { 58 };
            // PadN of 4 bytes fills the 8.
            ext.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
        }
        let Some(left) = self.routing else {
            return (ext, dst);
        };
        let fin = if left == 0 { dst } else { Echo::FINAL };
        // Next header, length (2 segments: 4 units of 8 bytes), type 4, segments left, last
        // entry 1, flags, tag.
        ext.extend_from_slice(&[58, 4, 4, left, 1, 0, 0, 0]);
        ext.extend_from_slice(&fin.octets());
        ext.extend_from_slice(&dst.octets());
        (ext, fin)
    }
}

/// An Ethernet / IPv4 ARP packet (28 bytes) in a frame of at least 60 bytes (zero padding).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arp {
    pub eth_dst: [u8; 6],
    pub eth_src: [u8; 6],
    pub oper: u16,
    pub sender_hw: [u8; 6],
    pub sender_ip: [u8; 4],
    pub target_ip: [u8; 4],
}

impl Arp {
    /// A broadcast request from [`REQUESTER_MAC`] / `sender_ip` for `target_ip`.
    pub fn request(sender_ip: [u8; 4], target_ip: [u8; 4]) -> Self {
        Arp {
            eth_dst: [0xff; 6],
            eth_src: REQUESTER_MAC,
            oper: 1,
            sender_hw: REQUESTER_MAC,
            sender_ip,
            target_ip,
        }
    }

    pub fn build(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(60);
        f.extend_from_slice(&self.eth_dst);
        f.extend_from_slice(&self.eth_src);
        f.extend_from_slice(&[8, 6, 0, 1, 8, 0, 6, 4]);
        f.extend_from_slice(&self.oper.to_be_bytes());
        f.extend_from_slice(&self.sender_hw);
        f.extend_from_slice(&self.sender_ip);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&self.target_ip);
        f.resize(60, 0);
        f
    }
}
