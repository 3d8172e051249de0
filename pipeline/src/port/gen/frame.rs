//! Building one Ethernet frame from a 5-tuple: Ethernet II (optionally one 802.1Q tag) /
//! IPv4 or IPv6 / TCP, UDP, ICMP, ICMPv6 or a bare payload, zero-padded to the frame size, with
//! correct length fields and checksums (IPv4 header, TCP, UDP, ICMP, ICMPv6). Optionally
//! malformed on purpose, for robustness runs.

use std::net::IpAddr;

use super::payload::{PayloadSel, Payloads};
use crate::wire::ethernet::{self, ether_type as et};
use crate::wire::{checksum, icmp, ipv4, ipv6, tcp, udp};

/// Source MAC of generated frames (locally administered).
pub const GEN_SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// Destination MAC of generated frames (locally administered).
pub const GEN_DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_ICMPV6: u8 = 58;

/// A deliberate defect, for robustness runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformation {
    /// The frame is cut inside the L3/L4 headers (the captured length is short; the wire
    /// length still says the full size).
    Truncated,
    /// IPv4 IHL below 5 (IPv6: version field 4 in an IPv6 EtherType frame).
    BadIhl,
    /// IPv4 total length (IPv6 payload length) larger than the bytes in the frame.
    BadLength,
}

/// Everything that decides one generated frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    /// Source and destination address; both IPv4 or both IPv6 (a mix is mapped to IPv6 with
    /// the IPv4 address as `::ffff:a.b.c.d`).
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    /// Ports for TCP / UDP; ICMP echo identifier / sequence number for ICMP and ICMPv6.
    pub src_port: u16,
    pub dst_port: u16,
    /// IP protocol: 6 TCP, 17 UDP, 1 ICMP (58 under IPv6), 58 ICMPv6; any other value gets an
    /// IP header with that protocol number and a zero payload.
    pub proto: u8,
    /// TCP flags byte (TCP only).
    pub tcp_flags: u8,
    /// One 802.1Q tag with this TCI (VLAN id in the low 12 bits) when set.
    pub vlan: Option<u16>,
    /// Frame size in bytes as on the wire, including the 4-byte FCS (the IMIX convention:
    /// 64 is the minimum Ethernet frame). The buffer holds `size - 4` bytes (no FCS). Sizes
    /// below the headers' length grow to fit them.
    pub size: u16,
    /// IPv4 identification / IPv6 flow label (low 16 bits).
    pub ip_id: u16,
    pub malformed: Option<Malformation>,
    /// What the L4 payload holds (`gen.payload`); zeros by default.
    pub payload: PayloadSel,
}

impl FrameSpec {
    /// A TCP (ACK) frame of `size` bytes, no VLAN, well formed.
    pub fn tcp(src_ip: IpAddr, dst_ip: IpAddr, src_port: u16, dst_port: u16, size: u16) -> Self {
        FrameSpec {
            src_ip,
            dst_ip,
            src_port,
            dst_port,
            proto: PROTO_TCP,
            tcp_flags: 0x10,
            vlan: None,
            size,
            ip_id: 0,
            malformed: None,
            payload: PayloadSel::Zeros,
        }
    }
}

/// Length of the L4 header written for `proto` (0 for a bare payload).
fn l4_header_len(proto: u8) -> usize {
    match proto {
        PROTO_TCP => 20,
        PROTO_UDP | PROTO_ICMP | PROTO_ICMPV6 => 8,
        _ => 0,
    }
}

/// Frame length (without FCS) that [`write_frame`] produces for `spec`, before any
/// truncation.
pub fn frame_len(spec: &FrameSpec) -> usize {
    let v6 = spec.src_ip.is_ipv6() || spec.dst_ip.is_ipv6();
    let hdr = 14
        + if spec.vlan.is_some() { 4 } else { 0 }
        + if v6 { 40 } else { 20 }
        + l4_header_len(spec.proto);
    usize::from(spec.size).saturating_sub(4).max(hdr)
}

fn v6_octets(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// Appends the frame described by `spec` to `out` and returns `(captured_len, wire_len)`:
/// the bytes appended and the frame's length on the wire (they differ only for
/// [`Malformation::Truncated`]). Reuses `out`'s capacity: no allocation once it is large
/// enough. The headers are written with the wire `Repr::emit`s; the payload is zeros (whatever
/// `spec.payload` says: [`write_frame_with`] writes it), so the L4 checksums are summed over
/// the L4 header alone.
pub fn write_frame(out: &mut Vec<u8>, spec: &FrameSpec) -> (usize, usize) {
    write_frame_with(out, spec, None)
}

/// [`write_frame`] with the L4 payload `spec.payload` selects from `payloads` (zeros without
/// them), the L4 checksum summed over the payload too.
pub fn write_frame_with(
    out: &mut Vec<u8>,
    spec: &FrameSpec,
    payloads: Option<&Payloads>,
) -> (usize, usize) {
    let len = frame_len(spec);
    let start = out.len();
    out.resize(start + len, 0);
    let f = &mut out[start..];
    let v6 = spec.src_ip.is_ipv6() || spec.dst_ip.is_ipv6();
    // Under IPv6, ICMP means ICMPv6.
    let proto = if v6 && spec.proto == PROTO_ICMP {
        PROTO_ICMPV6
    } else {
        spec.proto
    };
    let ip_type = if v6 { et::IPV6 } else { et::IPV4 };
    // `frame_len` makes room for every header, so the emits below cannot fail.
    let l3 = write_eth(f, spec, ip_type);
    let ip_hlen = if v6 {
        ipv6::HEADER_LEN
    } else {
        ipv4::MIN_HEADER_LEN
    };
    let l4 = l3 + ip_hlen;
    let l4_len = len - l4; // L4 header + payload
    let pseudo = write_ip(f, spec, v6, proto, l3, l4_len);
    // Zeros add nothing to a checksum: only a written payload is summed.
    let mut summed = l4_header_len(proto);
    if let (Some(p), false) = (payloads, spec.payload == PayloadSel::Zeros) {
        p.write(spec.payload, &mut f[l4 + summed..]);
        summed = l4_len;
    }
    write_l4(f, spec, proto, l4, (l4_len, summed), pseudo);
    match malform(f, spec.malformed, v6, proto, l3, len) {
        Some(cut) => {
            out.truncate(start + cut);
            (cut, len)
        }
        None => (len, len),
    }
}

/// The Ethernet header (and the VLAN tag): returns where the IP header starts.
fn write_eth(f: &mut [u8], spec: &FrameSpec, ip_type: u16) -> usize {
    let mut l3 = ethernet::HEADER_LEN;
    let eth = |ether_type| ethernet::Repr {
        dst: GEN_DST_MAC,
        src: GEN_SRC_MAC,
        ether_type,
    };
    if let Some(tci) = spec.vlan {
        let _ = eth(et::VLAN).emit(f);
        let tag = ethernet::VlanRepr {
            tci,
            ether_type: ip_type,
        };
        let _ = tag.emit(&mut f[l3..]);
        l3 += ethernet::VlanRepr::LEN;
    } else {
        let _ = eth(ip_type).emit(f);
    }
    l3
}

/// The IPv4 or IPv6 header at `l3`, over `l4_len` bytes of L4 header and payload: returns the
/// L4 checksum's pseudo-header sum.
fn write_ip(f: &mut [u8], spec: &FrameSpec, v6: bool, proto: u8, l3: usize, l4_len: usize) -> u64 {
    if v6 {
        let (src, dst) = (v6_octets(spec.src_ip), v6_octets(spec.dst_ip));
        let r = ipv6::Repr {
            src,
            dst,
            next_header: proto,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: u32::from(spec.ip_id),
            payload_len: l4_len as u16,
        };
        let _ = r.emit(&mut f[l3..]);
        checksum::pseudo_v6(src, dst, proto, l4_len as u32)
    } else {
        let v4 = |a: IpAddr| match a {
            IpAddr::V4(a) => a.octets(),
            IpAddr::V6(_) => [0; 4], // unreachable: v6 handled above
        };
        let (src, dst) = (v4(spec.src_ip), v4(spec.dst_ip));
        let r = ipv4::Repr {
            src,
            dst,
            protocol: proto,
            ttl: 64,
            tos: 0,
            ident: spec.ip_id,
            more_frags: false,
            frag_offset: 0,
            payload_len: l4_len as u16,
        };
        let _ = r.emit(&mut f[l3..]);
        checksum::pseudo_v4(src, dst, proto, l4_len as u16)
    }
}

/// The TCP, UDP or ICMP header at `l4` with its checksum over the first `summed` bytes of
/// the L4 header and payload (the rest are zeros).
fn write_l4(
    f: &mut [u8],
    spec: &FrameSpec,
    proto: u8,
    l4: usize,
    (l4_len, summed): (usize, usize),
    pseudo: u64,
) {
    let l4_csum = |f: &[u8], base: u64, hl: usize| {
        checksum::finish(checksum::sum(base, &f[l4..l4 + hl.max(summed)]))
    };
    match proto {
        PROTO_TCP => {
            let r = tcp::Repr {
                src_port: spec.src_port,
                dst_port: spec.dst_port,
                seq: 0,
                ack: 0,
                flags: u16::from(spec.tcp_flags),
                window: 65535,
            };
            let _ = r.emit(&mut f[l4..]);
            let c = l4_csum(f, pseudo, tcp::MIN_HEADER_LEN);
            put16(f, l4 + 16, c);
        }
        PROTO_UDP => {
            let r = udp::Repr {
                src_port: spec.src_port,
                dst_port: spec.dst_port,
                length: l4_len as u16,
            };
            let _ = r.emit(&mut f[l4..]);
            let c = checksum::udp_wire(l4_csum(f, pseudo, udp::HEADER_LEN));
            put16(f, l4 + 6, c);
        }
        PROTO_ICMP | PROTO_ICMPV6 => {
            let r = icmp::Repr {
                msg_type: if proto == PROTO_ICMP {
                    icmp::msg_type::ECHO_REQUEST
                } else {
                    icmp::msg_type::V6_ECHO_REQUEST
                },
                code: 0,
                rest: (u32::from(spec.src_port) << 16) | u32::from(spec.dst_port),
            };
            let _ = r.emit(&mut f[l4..]);
            // ICMPv4's checksum has no pseudo header; ICMPv6's does.
            let base = if proto == PROTO_ICMP { 0 } else { pseudo };
            let c = l4_csum(f, base, icmp::HEADER_LEN);
            put16(f, l4 + 2, c);
        }
        _ => {}
    }
}

/// Writes `defect` over the well-formed frame; returns the captured length when the frame is
/// cut.
fn malform(
    f: &mut [u8],
    defect: Option<Malformation>,
    v6: bool,
    proto: u8,
    l3: usize,
    len: usize,
) -> Option<usize> {
    let ip_hlen = if v6 {
        ipv6::HEADER_LEN
    } else {
        ipv4::MIN_HEADER_LEN
    };
    let l4 = l3 + ip_hlen;
    // Defects are written over the well-formed frame. The IPv4 header checksum is then as the
    // hand-built generator left it (whose bytes these are, test `emit_equals_hand_built`):
    // recomputed over a wrong length, 0 under a bad IHL or in a cut frame.
    let v4_csum = |f: &mut [u8], c: u16| {
        if !v6 {
            put16(f, l3 + 10, c);
        }
    };
    match defect {
        None => {}
        Some(Malformation::BadIhl) => {
            if v6 {
                f[l3] = 0x40; // IPv4 version inside an IPv6 EtherType
            } else {
                f[l3] = 0x43; // IHL 3 < 5
                v4_csum(f, 0);
            }
        }
        Some(Malformation::BadLength) => {
            let at = if v6 { l3 + 4 } else { l3 + 2 };
            let claimed = (len - l3 + 100).min(0xFFFF) as u16;
            put16(f, at, claimed);
            if !v6 {
                put16(f, l3 + 10, 0);
                let c = checksum::checksum(&f[l3..l3 + ipv4::MIN_HEADER_LEN]);
                v4_csum(f, c);
            }
        }
        Some(Malformation::Truncated) => {
            // Cut in the middle of the L4 header (or of the IP header without one).
            let cut = if l4_header_len(proto) > 0 {
                l4 + l4_header_len(proto) / 2
            } else {
                l3 + ip_hlen / 2
            };
            v4_csum(f, 0);
            return Some(cut);
        }
    }
    None
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// [`write_frame`] into a new buffer (for tests and one-off use).
pub fn build_frame(spec: &FrameSpec) -> Vec<u8> {
    let mut v = Vec::with_capacity(frame_len(spec));
    write_frame(&mut v, spec);
    v
}

#[cfg(test)]
mod tests {
    //! The generator before it used `Repr::emit` (hand-built headers), kept as the reference the
    //! emit-based [`write_frame`] must equal byte for byte.
    use super::*;
    use proptest::prelude::*;

    /// Ones' complement sum of big-endian 16-bit words (odd trailing byte padded with zero).
    fn sum16(mut acc: u32, bytes: &[u8]) -> u32 {
        let mut chunks = bytes.chunks_exact(2);
        for c in &mut chunks {
            acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        if let [b] = chunks.remainder() {
            acc += u32::from(*b) << 8;
        }
        acc
    }

    fn fold(mut acc: u32) -> u16 {
        while acc > 0xFFFF {
            acc = (acc & 0xFFFF) + (acc >> 16);
        }
        !(acc as u16)
    }

    fn put16(b: &mut [u8], at: usize, v: u16) {
        b[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    /// Appends the frame described by `spec` to `out` and returns `(captured_len, wire_len)`:
    /// the bytes appended and the frame's length on the wire (they differ only for
    /// [`Malformation::Truncated`]). Reuses `out`'s capacity: no allocation once it is large
    /// enough.
    pub fn write_frame_by_hand(out: &mut Vec<u8>, spec: &FrameSpec) -> (usize, usize) {
        let len = frame_len(spec);
        let start = out.len();
        out.resize(start + len, 0);
        let f = &mut out[start..];
        let v6 = spec.src_ip.is_ipv6() || spec.dst_ip.is_ipv6();
        // Under IPv6, ICMP means ICMPv6.
        let proto = if v6 && spec.proto == PROTO_ICMP {
            PROTO_ICMPV6
        } else {
            spec.proto
        };

        f[0..6].copy_from_slice(&GEN_DST_MAC);
        f[6..12].copy_from_slice(&GEN_SRC_MAC);
        let mut l3 = 12;
        if let Some(tci) = spec.vlan {
            put16(f, 12, 0x8100);
            put16(f, 14, tci);
            l3 = 16;
        }
        put16(f, l3, if v6 { 0x86DD } else { 0x0800 });
        l3 += 2;

        let ip_hlen = if v6 { 40 } else { 20 };
        let l4 = l3 + ip_hlen;
        let l4_len = len - l4; // L4 header + payload
                               // Pseudo-header sum for the L4 checksum.
        let mut pseudo;
        if v6 {
            let (s, d) = (v6_octets(spec.src_ip), v6_octets(spec.dst_ip));
            f[l3] = 0x60;
            put16(f, l3 + 2, spec.ip_id); // low 16 bits of the flow label
            put16(f, l3 + 4, l4_len as u16);
            f[l3 + 6] = proto;
            f[l3 + 7] = 64;
            f[l3 + 8..l3 + 24].copy_from_slice(&s);
            f[l3 + 24..l3 + 40].copy_from_slice(&d);
            pseudo = sum16(sum16(0, &s), &d);
            pseudo += l4_len as u32 + u32::from(proto);
        } else {
            let s = match spec.src_ip {
                IpAddr::V4(a) => a.octets(),
                IpAddr::V6(_) => [0; 4], // unreachable: v6 handled above
            };
            let d = match spec.dst_ip {
                IpAddr::V4(a) => a.octets(),
                IpAddr::V6(_) => [0; 4],
            };
            f[l3] = 0x45;
            put16(f, l3 + 2, (len - l3) as u16);
            put16(f, l3 + 4, spec.ip_id);
            f[l3 + 8] = 64;
            f[l3 + 9] = proto;
            f[l3 + 12..l3 + 16].copy_from_slice(&s);
            f[l3 + 16..l3 + 20].copy_from_slice(&d);
            pseudo = sum16(sum16(0, &s), &d);
            pseudo += l4_len as u32 + u32::from(proto);
        }

        // The payload is all zeros, so only the L4 header contributes to its checksum.
        match proto {
            PROTO_TCP => {
                put16(f, l4, spec.src_port);
                put16(f, l4 + 2, spec.dst_port);
                f[l4 + 12] = 5 << 4;
                f[l4 + 13] = spec.tcp_flags;
                put16(f, l4 + 14, 65535);
                let c = fold(sum16(pseudo, &f[l4..l4 + 20]));
                put16(f, l4 + 16, c);
            }
            PROTO_UDP => {
                put16(f, l4, spec.src_port);
                put16(f, l4 + 2, spec.dst_port);
                put16(f, l4 + 4, l4_len as u16);
                let c = match fold(sum16(pseudo, &f[l4..l4 + 8])) {
                    0 => 0xFFFF, // 0 means "no checksum" in UDP
                    c => c,
                };
                put16(f, l4 + 6, c);
            }
            PROTO_ICMP | PROTO_ICMPV6 => {
                f[l4] = if proto == PROTO_ICMP { 8 } else { 128 }; // echo request
                put16(f, l4 + 4, spec.src_port);
                put16(f, l4 + 6, spec.dst_port);
                // ICMPv4's checksum has no pseudo header; ICMPv6's does.
                let base = if proto == PROTO_ICMP { 0 } else { pseudo };
                let c = fold(sum16(base, &f[l4..l4 + 8]));
                put16(f, l4 + 2, c);
            }
            _ => {}
        }

        match spec.malformed {
            None => {}
            Some(Malformation::BadIhl) => {
                if v6 {
                    f[l3] = 0x40; // IPv4 version inside an IPv6 EtherType
                } else {
                    f[l3] = 0x43; // IHL 3 < 5
                }
            }
            Some(Malformation::BadLength) => {
                let at = if v6 { l3 + 4 } else { l3 + 2 };
                let claimed = (len - l3 + 100).min(0xFFFF) as u16;
                put16(f, at, claimed);
            }
            Some(Malformation::Truncated) => {
                // Cut in the middle of the L4 header (or of the IP header without one).
                let cut = if l4_header_len(proto) > 0 {
                    l4 + l4_header_len(proto) / 2
                } else {
                    l3 + ip_hlen / 2
                };
                out.truncate(start + cut);
                return (cut, len);
            }
        }
        if !v6 && spec.malformed != Some(Malformation::BadIhl) {
            let c = fold(sum16(0, &f[l3..l3 + 20]));
            put16(f, l3 + 10, c);
        }
        (len, len)
    }

    fn ip(v6: bool, x: u128) -> IpAddr {
        if v6 {
            IpAddr::V6(std::net::Ipv6Addr::from(x))
        } else {
            IpAddr::V4(std::net::Ipv4Addr::from(x as u32))
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn emit_equals_hand_built(
            sv6 in any::<bool>(), dv6 in any::<bool>(), s in any::<u128>(), d in any::<u128>(),
            src_port in any::<u16>(), dst_port in any::<u16>(),
            proto in prop_oneof![Just(6u8), Just(17), Just(1), Just(58), Just(47), any::<u8>()],
            tcp_flags in any::<u8>(), vlan in proptest::option::of(any::<u16>()),
            size in prop_oneof![0u16..100, 0u16..2000, Just(65535)], ip_id in any::<u16>(),
            malformed in proptest::option::of(prop_oneof![
                Just(Malformation::Truncated), Just(Malformation::BadIhl), Just(Malformation::BadLength)
            ]),
        ) {
            let spec = FrameSpec {
                src_ip: ip(sv6, s), dst_ip: ip(dv6, d), src_port, dst_port, proto, tcp_flags,
                vlan, size, ip_id, malformed, payload: PayloadSel::Zeros,
            };
            let (mut a, mut b) = (vec![7u8; 3], vec![7u8; 3]);
            let ra = write_frame(&mut a, &spec);
            let rb = write_frame_by_hand(&mut b, &spec);
            prop_assert_eq!(ra, rb);
            prop_assert_eq!(a, b);
        }
    }
}
