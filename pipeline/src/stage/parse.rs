//! The `parse` stage: one frame in, one [`PacketMeta`] out.
//!
//! This is the reference implementation; `gpu-kernels/parse.cuh` implements the same rules in
//! CUDA C and a differential test (`pipeline/tests/parse_cuda_host.rs`) holds the two equal byte
//! for byte. Any change here must be made there too.
//!
//! # What is parsed
//! Ethernet II; VLAN tags (0x8100, 0x88A8, 0x9100: the first two recorded, up to
//! [`MAX_VLAN_WALK`] walked); ARP (operation, IPv4 sender/target into `src_ip`/`dst_ip`); MPLS
//! (up to [`MAX_MPLS`] labels, then IPv4/IPv6 guessed from the first nibble after the bottom of
//! stack); IPv4 (options skipped); IPv6 with up to [`MAX_IPV6_EXT`] hop-by-hop / routing /
//! fragment / destination-options / AH headers; TCP, UDP, SCTP, ICMP (protocol 1) and ICMPv6
//! (58), by protocol number whatever the IP version; VXLAN (UDP destination 4789: inner
//! Ethernet, its tags walked, then IPv4/IPv6 and L4) and GTP-U (UDP destination 2152: optional
//! fields, up to [`MAX_GTPU_EXT`] extension headers, then for a T-PDU the inner IPv4/IPv6 by
//! first nibble and L4); the eCPRI common header (EtherType 0xAEFE, also after VLAN tags) with
//! PC_ID and SEQ_ID for message types 0-2. One tunnel level is decoded; a tunnel inside the
//! tunnel is left as inner payload. Tunnels are not decoded inside IP fragments.
//!
//! # Rules
//! - A layer's fields are filled once its own header is intact (it fits; version and header
//!   length are sane). A broken header leaves that layer's fields 0 and sets `status` and
//!   `error_offset`; the layers before it stay filled.
//! - Lengths against the frame: bytes after the outer IP packet (IPv4 total length / IPv6
//!   payload length shorter than what is left) are Ethernet padding or a trailer: fine, flagged
//!   `PADDED`, and L4 is bounded by the IP packet. An IP packet longer than the bytes present
//!   (a snaplen-truncated capture, a lying length) is `*_LEN_EXCEEDS_FRAME`, reported after the
//!   IP fields are filled. IPv6 payload length 0 (jumbogram) runs to the end of the frame.
//!   Inside a tunnel "the frame" is the tunnel payload (UDP length / GTP-U length).
//! - UDP length must be >= 8 and within the IP packet, except in a fragment (where it
//!   legitimately covers the whole datagram). eCPRI payload size must fit the frame.
//! - Fragments: `frag_offset`/`frag_id` from IPv4 or the IPv6 fragment header; a first fragment
//!   still has its L4 header parsed, a later one (`LATER_FRAGMENT`) has no L4.
//! - `error_offset`: the offending field for a bad value (IHL, total length, data offset, UDP
//!   length, GTP-U length, eCPRI payload size), otherwise the start of the header that does not
//!   fit (or, for too many VLAN tags / MPLS labels / extension headers, the first one refused).
//! - `payload_offset`: first byte after the last outer header parsed (L2, ARP, MPLS, IP with
//!   extensions, L4, tunnel header, eCPRI common header). Inner headers do not move it.
//! - Errors in the inner packet: the same code with [`ParseStatus::INNER`] set; the outer
//!   fields and the tunnel fields stay filled.
//! - Not checked: IPv4 header checksum, L4 checksums, TCP options content, IPv6 option content.
//! - No allocation, no panic: every slice is taken with `get`, every view is checked.

use crate::burst::Burst;
use crate::meta::{
    mf, PacketMeta, ParseStatus as S, TunnelType, MAX_GTPU_EXT, MAX_IPV6_EXT, MAX_MPLS, MAX_VLAN,
    MAX_VLAN_WALK, UDP_PORT_GTPU, UDP_PORT_VXLAN,
};
use crate::wire::{
    arp, ecpri, ethernet, ethernet::ether_type as et, gtpu, icmp, ipv4, ipv6, mpls, sctp, tcp, udp,
    vxlan, Error as WErr,
};

/// IP protocol numbers with an L4 view.
pub mod ip_proto {
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ICMPV6: u8 = 58;
    pub const SCTP: u8 = 132;
}

/// (status code, error offset).
type Fail = (u16, usize);
type PResult<T> = Result<T, Fail>;

#[inline(always)]
fn fail(s: S, off: usize) -> Fail {
    (s as u16, off)
}

/// The bytes of `b` from `off` (empty when `off` is past the end, which every view reports as
/// truncated).
#[inline(always)]
fn from(b: &[u8], off: usize) -> &[u8] {
    b.get(off..).unwrap_or(&[])
}

/// The first `end` bytes of `b` (all of `b` when shorter).
#[inline(always)]
fn upto(b: &[u8], end: usize) -> &[u8] {
    b.get(..end).unwrap_or(b)
}

#[inline(always)]
fn ip4_word(a: [u8; 4]) -> u32 {
    u32::from_be_bytes(a)
}

#[inline(always)]
fn ip6_words(a: [u8; 16]) -> [u32; 4] {
    [
        u32::from_be_bytes([a[0], a[1], a[2], a[3]]),
        u32::from_be_bytes([a[4], a[5], a[6], a[7]]),
        u32::from_be_bytes([a[8], a[9], a[10], a[11]]),
        u32::from_be_bytes([a[12], a[13], a[14], a[15]]),
    ]
}

/// Parses `frame` into `meta` (overwriting all of it).
pub fn parse(frame: &[u8], meta: &mut PacketMeta) {
    parse_inlined(frame, meta);
}

/// [`parse`] inlined into its caller: the burst-wise stage loop (`stage::burstwise`) parses a
/// whole burst without a call and its register saves per frame.
#[inline(always)]
pub(crate) fn parse_inlined(frame: &[u8], meta: &mut PacketMeta) {
    *meta = PacketMeta::default();
    meta.frame_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
    if let Err((status, off)) = parse_outer(frame, meta) {
        meta.status = status;
        // Offsets are bounded far below 64 KiB by the header walk limits (see the ABI header).
        meta.error_offset = off as u16;
    }
}

/// [`parse`] returning the record.
pub fn parse_frame(frame: &[u8]) -> PacketMeta {
    let mut m = PacketMeta::default();
    parse(frame, &mut m);
    m
}

/// Parses every frame of a burst into `metas` (cleared first; no allocation once it has the
/// capacity).
pub fn parse_burst(burst: &Burst, metas: &mut Vec<PacketMeta>) {
    metas.clear();
    metas.resize(burst.len(), PacketMeta::default());
    for ((_, frame), m) in burst.frames().zip(metas.iter_mut()) {
        parse(frame, m);
    }
}

/// What the L2 walk found.
struct L2 {
    ether_type: u16,
    l3: usize,
}

/// Ethernet header and VLAN tags starting at `start`. With `meta` (outer frame), the tags are
/// recorded as they are walked.
#[inline(always)]
fn walk_l2(b: &[u8], start: usize, mut meta: Option<&mut PacketMeta>) -> PResult<L2> {
    let eth =
        ethernet::Frame::new_checked(from(b, start)).map_err(|_| fail(S::EthTruncated, start))?;
    let mut ether_type = eth.ether_type();
    let mut off = start + ethernet::Frame::HEADER_LEN;
    let mut count = 0usize;
    while et::is_vlan(ether_type) {
        if count == MAX_VLAN_WALK {
            return Err(fail(S::VlanTooMany, off));
        }
        let tag = ethernet::VlanTag::new_checked(from(b, off))
            .map_err(|_| fail(S::VlanTruncated, off))?;
        if let Some(m) = meta.as_deref_mut() {
            if count < MAX_VLAN {
                m.vlan_tci[count] = tag.tci();
            }
            m.vlan_count = (count + 1) as u8;
            m.flags |= if count >= MAX_VLAN {
                mf::VLAN | mf::VLAN_EXTRA
            } else {
                mf::VLAN
            };
        }
        count += 1;
        ether_type = tag.ether_type();
        off += ethernet::VlanTag::LEN;
    }
    Ok(L2 {
        ether_type,
        l3: off,
    })
}

// Inlined into parse_inlined: its calls are then per burst, not per frame (register saves).
#[inline(always)]
fn parse_outer(frame: &[u8], meta: &mut PacketMeta) -> PResult<()> {
    let l2 = walk_l2(frame, 0, Some(meta))?;
    let mut off = l2.l3;
    meta.ether_type = l2.ether_type;
    meta.l3_offset = off as u16;
    meta.payload_offset = off as u16;
    match l2.ether_type {
        et::IPV4 => outer_ip(frame, off, 4, meta),
        et::IPV6 => outer_ip(frame, off, 6, meta),
        et::ARP => {
            meta.flags |= mf::ARP;
            let p = arp::Packet::new_checked(from(frame, off))
                .map_err(|_| fail(S::ArpTruncated, off))?;
            meta.arp_oper = p.oper();
            if let Some((s, t)) = p.ipv4_addrs() {
                meta.src_ip[0] = ip4_word(s);
                meta.dst_ip[0] = ip4_word(t);
            }
            meta.payload_offset = (off + p.total_len()) as u16;
            Ok(())
        }
        et::MPLS_UNICAST | et::MPLS_MULTICAST => {
            meta.flags |= mf::MPLS;
            let mut n = 0usize;
            loop {
                if n == MAX_MPLS {
                    return Err(fail(S::MplsTooDeep, off));
                }
                let lse = mpls::Lse::new_checked(from(frame, off))
                    .map_err(|_| fail(S::MplsTruncated, off))?;
                n += 1;
                meta.mpls_count = n as u8;
                meta.mpls_lse = lse.raw();
                off += mpls::Lse::LEN;
                if lse.bottom_of_stack() {
                    break;
                }
            }
            meta.l3_offset = off as u16;
            meta.payload_offset = off as u16;
            // No IP protocol field after MPLS: guess from the version nibble.
            match frame.get(off).map(|b| b >> 4) {
                Some(4) => outer_ip(frame, off, 4, meta),
                Some(6) => outer_ip(frame, off, 6, meta),
                _ => Ok(()),
            }
        }
        et::ECPRI => {
            let h = ecpri::Header::new_checked(from(frame, off))
                .map_err(|_| fail(S::EcpriTruncated, off))?;
            meta.flags |= mf::ECPRI;
            meta.ecpri_revision = h.revision();
            meta.ecpri_msg_type = h.msg_type();
            meta.ecpri_payload_size = h.payload_size();
            meta.payload_offset = (off + ecpri::Header::HEADER_LEN) as u16;
            let end = off + ecpri::Header::HEADER_LEN + h.payload_size() as usize;
            if end > frame.len() {
                return Err(fail(
                    S::EcpriLenExceedsFrame,
                    off + ecpri::PAYLOAD_SIZE_FIELD,
                ));
            }
            // The ids are part of the payload: read them only within the payload size.
            let h = ecpri::Header::new_checked(&frame[off..end])
                .map_err(|_| fail(S::EcpriTruncated, off))?;
            meta.ecpri_pc_id = h.pc_id().unwrap_or(0);
            meta.ecpri_seq_id = h.seq_id().unwrap_or(0);
            Ok(())
        }
        t => {
            if t < et::MIN_ETHER_TYPE {
                meta.flags |= mf::LLC;
            }
            Ok(())
        }
    }
}

/// What the IP layer found (outer or inner).
#[derive(Default)]
struct Ip {
    version: u8,
    proto: u8,
    tos: u8,
    ttl: u8,
    src: [u32; 4],
    dst: [u32; 4],
    frag_offset: u16,
    frag_id: u32,
    flags: u16,
    /// First byte after the IP header and its extensions.
    hdr_end: usize,
    /// First byte after the IP packet.
    ip_end: usize,
}

/// IPv4 or IPv6 header (and IPv6 extension chain) at `off`; `b` ends where the IP packet must
/// end at the latest. `ip` is filled as far as the header allows even on error.
#[inline(always)]
fn parse_ip(b: &[u8], off: usize, version: u8, ip: &mut Ip) -> PResult<()> {
    if version == 4 {
        let p = ipv4::Packet::new_checked(from(b, off)).map_err(|e| match e {
            WErr::BadVersion => fail(S::Ipv4BadVersion, off),
            WErr::BadHeaderLen => fail(S::Ipv4BadIhl, off),
            WErr::BadLength => fail(S::Ipv4BadTotalLen, off + ipv4::TOTAL_LEN_FIELD),
            WErr::Truncated => fail(S::Ipv4Truncated, off),
        })?;
        ip.version = 4;
        ip.proto = p.protocol();
        ip.tos = p.tos();
        ip.ttl = p.ttl();
        ip.src[0] = ip4_word(p.src());
        ip.dst[0] = ip4_word(p.dst());
        ip.frag_id = p.ident() as u32;
        ip.frag_offset = p.frag_offset();
        if p.header_len() > ipv4::Packet::MIN_HEADER_LEN {
            ip.flags |= mf::IP_OPTIONS;
        }
        frag_flags(ip, p.frag_offset(), p.more_frags());
        ip.hdr_end = off + p.header_len();
        ip.ip_end = off + p.total_len() as usize;
        if ip.ip_end > b.len() {
            return Err(fail(S::Ipv4LenExceedsFrame, off + ipv4::TOTAL_LEN_FIELD));
        }
    } else {
        let p = ipv6::Packet::new_checked(from(b, off)).map_err(|e| match e {
            WErr::BadVersion => fail(S::Ipv6BadVersion, off),
            _ => fail(S::Ipv6Truncated, off),
        })?;
        ip.version = 6;
        ip.proto = p.next_header();
        ip.tos = p.traffic_class();
        ip.ttl = p.hop_limit();
        ip.src = ip6_words(p.src());
        ip.dst = ip6_words(p.dst());
        ip.hdr_end = off + ipv6::Packet::HEADER_LEN;
        ip.ip_end = match p.payload_len() {
            0 => b.len(),
            n => ip.hdr_end + n as usize,
        };
        if ip.ip_end > b.len() {
            return Err(fail(S::Ipv6LenExceedsFrame, off + ipv6::PAYLOAD_LEN_FIELD));
        }
        let pkt = &b[..ip.ip_end];
        let mut n = 0usize;
        while ipv6::ext::is_walked(ip.proto) {
            let cur = ip.hdr_end;
            if n == MAX_IPV6_EXT {
                return Err(fail(S::Ipv6ExtTooMany, cur));
            }
            ip.flags |= mf::IP_OPTIONS;
            let h = ipv6::ExtHeader::new_checked(from(pkt, cur), ip.proto)
                .map_err(|_| fail(S::Ipv6ExtTruncated, cur))?;
            n += 1;
            ip.proto = h.next_header();
            ip.hdr_end = cur + h.header_len();
            if let Some((fo, more, id)) = h.fragment() {
                ip.frag_offset = fo;
                ip.frag_id = id;
                frag_flags(ip, fo, more);
                if fo != 0 {
                    // A later fragment: what follows is data, not the rest of the chain.
                    break;
                }
            }
        }
    }
    if ip.ip_end < b.len() {
        ip.flags |= mf::PADDED;
    }
    Ok(())
}

#[inline(always)]
fn frag_flags(ip: &mut Ip, offset: u16, more: bool) {
    if more {
        ip.flags |= mf::FRAGMENT | mf::MORE_FRAGMENTS;
    }
    if offset != 0 {
        ip.flags |= mf::FRAGMENT | mf::LATER_FRAGMENT;
    }
}

/// What the L4 layer found.
#[derive(Default)]
struct L4 {
    present: bool,
    src_port: u16,
    dst_port: u16,
    tcp_flags: u16,
    icmp_type: u8,
    icmp_code: u8,
    hdr_end: usize,
    /// End of the UDP datagram (UDP only, and only when its length was checked).
    udp_end: usize,
}

/// The L4 header at `off`; `b` ends with the IP packet. `check_udp_len` is false in fragments.
#[inline(always)]
fn parse_l4(b: &[u8], off: usize, proto: u8, check_udp_len: bool, l4: &mut L4) -> PResult<()> {
    match proto {
        ip_proto::TCP => {
            let h = tcp::Header::new_checked(from(b, off)).map_err(|e| match e {
                WErr::BadHeaderLen => fail(S::TcpBadDataOffset, off + tcp::DATA_OFFSET_FIELD),
                _ => fail(S::TcpTruncated, off),
            })?;
            l4.present = true;
            l4.src_port = h.src_port();
            l4.dst_port = h.dst_port();
            l4.tcp_flags = h.flags();
            l4.hdr_end = off + h.header_len();
        }
        ip_proto::UDP => {
            let h =
                udp::Header::new_checked(from(b, off)).map_err(|_| fail(S::UdpTruncated, off))?;
            l4.present = true;
            l4.src_port = h.src_port();
            l4.dst_port = h.dst_port();
            l4.hdr_end = off + udp::Header::HEADER_LEN;
            l4.udp_end = b.len();
            if check_udp_len {
                let len = h.length() as usize;
                if len < udp::Header::HEADER_LEN || off + len > b.len() {
                    return Err(fail(S::UdpBadLength, off + udp::LENGTH_FIELD));
                }
                l4.udp_end = off + len;
            }
        }
        ip_proto::ICMP | ip_proto::ICMPV6 => {
            let h = icmp::Header::new_checked(from(b, off)).map_err(|_| {
                if proto == ip_proto::ICMP {
                    fail(S::IcmpTruncated, off)
                } else {
                    fail(S::Icmpv6Truncated, off)
                }
            })?;
            l4.present = true;
            l4.icmp_type = h.msg_type();
            l4.icmp_code = h.code();
            l4.hdr_end = off + icmp::Header::HEADER_LEN;
        }
        ip_proto::SCTP => {
            let h =
                sctp::Header::new_checked(from(b, off)).map_err(|_| fail(S::SctpTruncated, off))?;
            l4.present = true;
            l4.src_port = h.src_port();
            l4.dst_port = h.dst_port();
            l4.hdr_end = off + sctp::Header::HEADER_LEN;
        }
        _ => {}
    }
    Ok(())
}

fn outer_ip(frame: &[u8], off: usize, version: u8, meta: &mut PacketMeta) -> PResult<()> {
    let mut ip = Ip::default();
    let r = parse_ip(frame, off, version, &mut ip);
    meta.ip_version = ip.version;
    meta.ip_proto = ip.proto;
    meta.ip_tos = ip.tos;
    meta.ip_ttl = ip.ttl;
    meta.src_ip = ip.src;
    meta.dst_ip = ip.dst;
    meta.frag_offset = ip.frag_offset;
    meta.frag_id = ip.frag_id;
    meta.flags |= ip.flags;
    if ip.version != 0 {
        meta.payload_offset = ip.hdr_end as u16;
    }
    r?;
    if ip.flags & mf::LATER_FRAGMENT != 0 {
        return Ok(());
    }
    let pkt = &frame[..ip.ip_end];
    let fragment = ip.flags & mf::FRAGMENT != 0;
    let mut l4 = L4::default();
    let r = parse_l4(pkt, ip.hdr_end, ip.proto, !fragment, &mut l4);
    if l4.present {
        meta.flags |= mf::L4;
        meta.l4_offset = ip.hdr_end as u16;
        meta.src_port = l4.src_port;
        meta.dst_port = l4.dst_port;
        meta.tcp_flags = l4.tcp_flags;
        meta.icmp_type = l4.icmp_type;
        meta.icmp_code = l4.icmp_code;
        meta.payload_offset = l4.hdr_end as u16;
    }
    r?;
    if ip.proto != ip_proto::UDP || fragment || !l4.present {
        return Ok(());
    }
    let dgram = &pkt[..l4.udp_end];
    match l4.dst_port {
        UDP_PORT_VXLAN => parse_vxlan(dgram, l4.hdr_end, meta),
        UDP_PORT_GTPU => parse_gtpu(dgram, l4.hdr_end, meta),
        _ => Ok(()),
    }
}

#[inline(always)]
fn inner(f: Fail) -> Fail {
    (f.0 | S::INNER, f.1)
}

fn parse_vxlan(b: &[u8], off: usize, meta: &mut PacketMeta) -> PResult<()> {
    let h = vxlan::Header::new_checked(from(b, off)).map_err(|_| fail(S::VxlanTruncated, off))?;
    meta.flags |= mf::TUNNEL;
    meta.tunnel_type = TunnelType::Vxlan as u8;
    meta.tunnel_id = h.vni();
    let start = off + vxlan::Header::HEADER_LEN;
    meta.payload_offset = start as u16;
    let l2 = walk_l2(b, start, None).map_err(inner)?;
    meta.inner_l3_offset = l2.l3 as u16;
    match l2.ether_type {
        et::IPV4 => inner_ip(b, l2.l3, 4, meta),
        et::IPV6 => inner_ip(b, l2.l3, 6, meta),
        _ => Ok(()),
    }
}

fn parse_gtpu(b: &[u8], off: usize, meta: &mut PacketMeta) -> PResult<()> {
    let h = gtpu::Header::new_checked(from(b, off)).map_err(|e| match e {
        WErr::BadVersion => fail(S::GtpuBadHeader, off),
        _ => fail(S::GtpuTruncated, off),
    })?;
    meta.flags |= mf::TUNNEL;
    meta.tunnel_type = TunnelType::Gtpu as u8;
    meta.tunnel_id = h.teid();
    let end = off + gtpu::Header::MIN_HEADER_LEN + h.length() as usize;
    if end > b.len() || off + h.header_len() > end {
        return Err(fail(S::GtpuBadLength, off + gtpu::LENGTH_FIELD));
    }
    let msg = &b[..end];
    let mut cur = off + h.header_len();
    let mut next = h.next_ext_type();
    let mut n = 0usize;
    while next != 0 {
        if n == MAX_GTPU_EXT {
            return Err(fail(S::GtpuBadExt, cur));
        }
        let e = gtpu::ExtHeader::new_checked(from(msg, cur)).map_err(|e| match e {
            WErr::BadLength => fail(S::GtpuBadExt, cur),
            _ => fail(S::GtpuTruncated, cur),
        })?;
        n += 1;
        next = e.next_ext_type();
        cur += e.header_len();
    }
    meta.payload_offset = cur as u16;
    if h.msg_type() != gtpu::MSG_T_PDU {
        return Ok(());
    }
    match msg.get(cur).map(|b| b >> 4) {
        Some(4) => inner_ip(msg, cur, 4, meta),
        Some(6) => inner_ip(msg, cur, 6, meta),
        _ => Ok(()),
    }
}

fn inner_ip(b: &[u8], off: usize, version: u8, meta: &mut PacketMeta) -> PResult<()> {
    meta.inner_l3_offset = off as u16;
    let mut ip = Ip::default();
    let r = parse_ip(b, off, version, &mut ip);
    meta.inner_ip_version = ip.version;
    meta.inner_ip_proto = ip.proto;
    meta.inner_src_ip = ip.src;
    meta.inner_dst_ip = ip.dst;
    let fragment = ip.flags & mf::FRAGMENT != 0;
    if fragment {
        meta.flags |= mf::INNER_FRAGMENT;
    }
    r.map_err(inner)?;
    if ip.flags & mf::LATER_FRAGMENT != 0 {
        return Ok(());
    }
    let mut l4 = L4::default();
    let r = parse_l4(upto(b, ip.ip_end), ip.hdr_end, ip.proto, !fragment, &mut l4);
    if l4.present {
        meta.flags |= mf::INNER_L4;
        meta.inner_l4_offset = ip.hdr_end as u16;
        meta.inner_src_port = l4.src_port;
        meta.inner_dst_port = l4.dst_port;
        meta.inner_tcp_flags = l4.tcp_flags;
    }
    r.map_err(inner)
}

/// The CUDA implementation (`parse.cuh` of pktwarp-kernels) compiled for the host (its `host` feature): the
/// same source the GPU runs, callable here so tests and the fuzz target compare it with [`parse`].
pub mod cuda_host {
    use crate::meta::{PacketMeta, META_SIZE};

    use pktwarp_kernels::host::ffi::{
        pw_host_acl_key_words_of_meta, pw_host_meta_size, pw_host_parse, pw_host_parse_fast_key,
    };

    /// Runs `pw_parse` from parse.cuh on `frame` (at most `u32::MAX` bytes are given, as the
    /// Rust parser records).
    pub fn parse(frame: &[u8], meta: &mut PacketMeta) {
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        // SAFETY: `frame` is valid for reads of `len` bytes (len <= frame.len()); pw_parse reads
        // only within them (every read is length-checked) and writes exactly one
        // pw_packet_meta, whose layout PacketMeta mirrors (pinned by meta.rs tests and
        // `meta_size` below). Nothing is retained after the call.
        unsafe { pw_host_parse(frame.as_ptr(), len, (meta as *mut PacketMeta).cast()) }
    }

    /// Runs `pw_parse_fast_key` from parse.cuh: the ACL key words (acl.cuh `pw_acl_key_words`)
    /// of a frame the small-burst kernel's fast path covers, or `None` when it leaves the frame
    /// to `pw_parse`.
    pub fn parse_fast_key(frame: &[u8], port: u16) -> Option<[u32; 11]> {
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let mut kw = [0u32; 11];
        // SAFETY: `frame` is valid for reads of `len` bytes and pw_parse_fast_key reads only
        // bytes 12 .. 51 after checking len >= 52; it writes at most the 11 words of `kw`.
        let ok = unsafe { pw_host_parse_fast_key(frame.as_ptr(), len, port, kw.as_mut_ptr()) };
        (ok != 0).then_some(kw)
    }

    /// The ACL key words acl.cuh derives from parsed metadata (`pw_acl_key_from_meta`, then
    /// `pw_acl_key_words`): what `parse_fast_key` must return.
    pub fn acl_key_words(meta: &PacketMeta, port: u16) -> [u32; 11] {
        let mut kw = [0u32; 11];
        // SAFETY: `meta` is a valid pw_packet_meta (PacketMeta mirrors its layout) and the call
        // writes exactly the 11 words of `kw`.
        unsafe {
            pw_host_acl_key_words_of_meta((meta as *const PacketMeta).cast(), port, kw.as_mut_ptr())
        };
        kw
    }

    /// `sizeof(pw_packet_meta)` as the C++ compiler sees it.
    pub fn meta_size() -> usize {
        // SAFETY: a pure function with no arguments.
        let n = unsafe { pw_host_meta_size() };
        debug_assert_eq!(n as usize, META_SIZE);
        n as usize
    }
}

/// The `parse` stage, described (the stage descriptor, `stage::descriptor`).
pub const DESCRIPTOR: crate::stage::descriptor::StageDescriptor =
    crate::stage::descriptor::StageDescriptor {
        name: "parse",
        usage: "`parse`",
        summary: "fills the packet metadata; malformed frames are dropped as `parse_error`",
        needs: crate::stage::descriptor::StageNeeds::NONE,
        drop_reasons: &[crate::verdict::DropReason::ParseError],
        counters: &[],
        gpu: crate::stage::descriptor::GpuImpl::Fused,
        reloads: false,
    };

#[cfg(test)]
mod tests {
    use super::*;

    /// The Rust parser, checked against the host build of the CUDA parser on every test frame.
    fn p(frame: &[u8]) -> PacketMeta {
        let r = parse_frame(frame);
        let mut c = PacketMeta::default();
        cuda_host::parse(frame, &mut c);
        assert_eq!(r, c, "Rust and CUDA parsers differ");
        r
    }

    fn eth(ether_type: u16) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        f.extend_from_slice(&ether_type.to_be_bytes());
        f
    }

    fn ipv4_udp(payload: &[u8], sport: u16, dport: u16) -> Vec<u8> {
        let udp_len = 8 + payload.len() as u16;
        let r = ipv4::Repr {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            protocol: 17,
            ttl: 64,
            tos: 0,
            ident: 1,
            more_frags: false,
            frag_offset: 0,
            payload_len: udp_len,
        };
        let mut v = r.to_bytes().to_vec();
        v.extend_from_slice(&sport.to_be_bytes());
        v.extend_from_slice(&dport.to_be_bytes());
        v.extend_from_slice(&udp_len.to_be_bytes());
        v.extend_from_slice(&[0, 0]);
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn short_frames_are_eth_truncated() {
        for n in 0..14 {
            let m = p(&vec![0u8; n]);
            assert_eq!(m.status, S::EthTruncated as u16);
            assert_eq!(m.frame_len, n as u32);
            assert_eq!(m.error_offset, 0);
        }
    }

    #[test]
    fn ipv4_udp_with_padding() {
        let mut f = eth(0x0800);
        f.extend(ipv4_udp(&[1, 2], 5, 6));
        f.extend_from_slice(&[0; 6]); // Ethernet padding
        let m = p(&f);
        assert_eq!(m.status, 0);
        assert_eq!(m.ip_version, 4);
        assert_eq!(m.src_ip, [0x0a00_0001, 0, 0, 0]);
        assert_eq!((m.src_port, m.dst_port), (5, 6));
        assert_eq!((m.l3_offset, m.l4_offset, m.payload_offset), (14, 34, 42));
        assert_ne!(m.flags & mf::PADDED, 0);
        assert_ne!(m.flags & mf::L4, 0);
    }

    #[test]
    fn ipv4_total_length_past_frame_keeps_addresses() {
        let mut f = eth(0x0800);
        f.extend(ipv4_udp(&[1, 2, 3, 4], 5, 6));
        f.truncate(f.len() - 1);
        let m = p(&f);
        assert_eq!(m.status, S::Ipv4LenExceedsFrame as u16);
        assert_eq!(m.error_offset, 16);
        assert_eq!(m.dst_ip[0], 0x0a00_0002);
        assert_eq!(m.l4_offset, 0);
    }

    #[test]
    fn udp_length_checks() {
        let mut f = eth(0x0800);
        f.extend(ipv4_udp(&[1, 2, 3, 4], 5, 6));
        f[14 + 20 + 5] = 7; // UDP length 7
        let m = p(&f);
        assert_eq!(m.status, S::UdpBadLength as u16);
        assert_eq!(m.error_offset, 38);
        assert_eq!(m.src_port, 5); // header intact: ports kept
    }

    #[test]
    fn vxlan_inner_ipv4_udp_and_inner_error() {
        let mut inner = eth(0x0800);
        inner.extend(ipv4_udp(&[9; 4], 7, 8));
        let mut vx = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
        vx.extend(&inner);
        let mut f = eth(0x0800);
        f.extend(ipv4_udp(&vx, 49152, 4789));
        let m = p(&f);
        assert_eq!(m.status, 0, "{}", S::describe(m.status));
        assert_eq!(m.tunnel_type, TunnelType::Vxlan as u8);
        assert_eq!(m.tunnel_id, 42);
        assert_eq!(m.payload_offset, 50);
        assert_eq!(m.inner_l3_offset, 64);
        assert_eq!(m.inner_l4_offset, 84);
        assert_eq!((m.inner_src_port, m.inner_dst_port), (7, 8));
        assert_eq!(m.inner_ip_proto, 17);
        // Cut the inner IPv4 header: an inner error, outer fields kept.
        let cut = 64 + 10;
        let mut g = f[..cut].to_vec();
        // Fix the outer lengths so the outer layers are consistent.
        let outer_udp = (cut - 34) as u16;
        g[38..40].copy_from_slice(&outer_udp.to_be_bytes());
        g[16..18].copy_from_slice(&((cut - 14) as u16).to_be_bytes());
        let m = p(&g);
        assert_eq!(m.status, S::Ipv4Truncated.code(true));
        assert_eq!(m.error_offset, 64);
        assert_eq!(m.tunnel_id, 42);
        assert_eq!(m.dst_port, 4789);
    }

    #[test]
    fn gtpu_extension_walk() {
        let mut inner = ipv4_udp(&[0; 4], 13, 14);
        inner[9] = 17;
        // E flag, one PDU session container extension (4 bytes).
        let mut g = vec![
            0x34, 0xff, 0, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 0x85, 1, 0x10, 0x01, 0,
        ];
        g.extend(&inner);
        let glen = (g.len() - 8) as u16;
        g[2..4].copy_from_slice(&glen.to_be_bytes());
        let mut f = eth(0x0800);
        f.extend(ipv4_udp(&g, 2152, 2152));
        let m = p(&f);
        assert_eq!(m.status, 0, "{}", S::describe(m.status));
        assert_eq!(m.tunnel_type, TunnelType::Gtpu as u8);
        assert_eq!(m.tunnel_id, 0x1234);
        assert_eq!(m.payload_offset, 42 + 16);
        assert_eq!(m.inner_l3_offset, 58);
        assert_eq!((m.inner_src_port, m.inner_dst_port), (13, 14));
        // Extension length 0.
        let mut f2 = f.clone();
        f2[42 + 12] = 0;
        let m = p(&f2);
        assert_eq!(m.status, S::GtpuBadExt as u16);
        assert_eq!(m.error_offset, 54);
        // GTP length past the datagram.
        let mut f3 = f.clone();
        f3[44] = 0xff;
        let m = p(&f3);
        assert_eq!(m.status, S::GtpuBadLength as u16);
        assert_eq!(m.error_offset, 44);
    }

    #[test]
    fn vlan_walk_limits() {
        let mut f = eth(0x8100);
        for i in 0..MAX_VLAN_WALK {
            f.extend_from_slice(&(i as u16 + 1).to_be_bytes());
            f.extend_from_slice(&0x8100u16.to_be_bytes());
        }
        f.extend_from_slice(&[0, 9]);
        let m = p(&f);
        assert_eq!(m.status, S::VlanTooMany as u16);
        assert_eq!(m.vlan_count as usize, MAX_VLAN_WALK);
        assert_eq!(m.vlan_tci, [1, 2]);
        assert_eq!(m.error_offset as usize, 14 + 4 * MAX_VLAN_WALK);
        assert_ne!(m.flags & mf::VLAN_EXTRA, 0);
        let m = p(&f[..16]);
        assert_eq!(m.status, S::VlanTruncated as u16);
        assert_eq!(m.error_offset, 14);
    }

    #[test]
    fn mpls_too_deep_and_guess() {
        let mut f = eth(0x8847);
        for _ in 0..MAX_MPLS {
            f.extend_from_slice(&[0, 0x10, 0x00, 64]);
        }
        let m = p(&f);
        assert_eq!(m.status, S::MplsTooDeep as u16);
        assert_eq!(m.mpls_count as usize, MAX_MPLS);
        let mut g = eth(0x8847);
        g.extend_from_slice(&[0, 0x10, 0x01, 64]);
        g.extend(ipv4_udp(&[], 1, 2));
        let m = p(&g);
        assert_eq!(m.status, 0);
        assert_eq!((m.ether_type, m.ip_version, m.l3_offset), (0x8847, 4, 18));
        assert_eq!(m.mpls_lse >> 12, 0x100);
    }

    #[test]
    fn ecpri_length() {
        let mut f = eth(0xAEFE);
        f.extend_from_slice(&[0x10, 0, 0, 8, 0x12, 0x34, 0x00, 0x80, 0, 0, 0, 0]);
        let m = p(&f);
        assert_eq!(m.status, 0);
        assert_eq!(
            (
                m.ecpri_revision,
                m.ecpri_payload_size,
                m.ecpri_pc_id,
                m.ecpri_seq_id
            ),
            (1, 8, 0x1234, 0x80)
        );
        f[17] = 9;
        let m = p(&f);
        assert_eq!(m.status, S::EcpriLenExceedsFrame as u16);
        assert_eq!(m.error_offset, 16);
    }

    fn ipv6_hdr(next: u8, plen: u16) -> Vec<u8> {
        let mut h = vec![0x60, 0, 0, 0];
        h.extend_from_slice(&plen.to_be_bytes());
        h.extend_from_slice(&[next, 64]);
        h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        h
    }

    #[test]
    fn ecpri_after_vlan() {
        let mut f = eth(0x8100);
        f.extend_from_slice(&[0x20, 0x05, 0xAE, 0xFE]); // PCP 1, VID 5
        f.extend_from_slice(&[0x10, 2, 0, 4, 0xab, 0xcd, 0x01, 0x80]);
        let m = p(&f);
        assert_eq!(m.status, 0);
        assert_eq!(
            (m.vlan_count, m.vlan_tci[0], m.ether_type),
            (1, 0x2005, 0xAEFE)
        );
        assert_eq!(
            (m.ecpri_msg_type, m.ecpri_pc_id, m.ecpri_seq_id),
            (2, 0xabcd, 0x0180)
        );
        assert_eq!((m.l3_offset, m.payload_offset), (18, 22));
    }

    #[test]
    fn gtpu_inner_ipv6_tcp() {
        let mut inner = ipv6_hdr(6, 20);
        let mut tcp = vec![0, 80, 0x1f, 0x90, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x12, 0, 0];
        tcp.extend_from_slice(&[0, 0, 0, 0]);
        inner.extend(tcp);
        let mut g = vec![0x30, 0xff];
        g.extend_from_slice(&(inner.len() as u16).to_be_bytes());
        g.extend_from_slice(&7u32.to_be_bytes());
        g.extend(inner);
        let mut f = eth(0x0800);
        f.extend(ipv4_udp(&g, 2152, 2152));
        let m = p(&f);
        assert_eq!(m.status, 0, "{}", S::describe(m.status));
        assert_eq!(
            (m.tunnel_id, m.inner_ip_version, m.inner_ip_proto),
            (7, 6, 6)
        );
        assert_eq!(m.inner_dst_ip, [0x2001_0db8, 0, 0, 2]);
        assert_eq!(
            (m.inner_src_port, m.inner_dst_port, m.inner_tcp_flags),
            (80, 8080, 0x12)
        );
        assert_eq!((m.inner_l3_offset, m.inner_l4_offset), (50, 90));
        // Inner TCP data offset 4: an inner error at the data-offset field.
        let mut bad = f.clone();
        bad[90 + 12] = 0x40;
        let m = p(&bad);
        assert_eq!(m.status, S::TcpBadDataOffset.code(true));
        assert_eq!(m.error_offset, 102);
        assert_eq!(m.inner_ip_version, 6);
    }

    #[test]
    fn vxlan_inner_vlan_is_walked() {
        let mut inner = eth(0x8100);
        inner.extend_from_slice(&[0, 7, 0x08, 0x00]);
        inner.extend(ipv4_udp(&[], 1, 2));
        let mut vx = vec![0x08, 0, 0, 0, 0, 0, 1, 0];
        vx.extend(inner);
        let mut f = eth(0x0800);
        f.extend(ipv4_udp(&vx, 5, 4789));
        let m = p(&f);
        assert_eq!(m.status, 0);
        assert_eq!(m.vlan_count, 0, "inner tags are not the outer VLANs");
        assert_eq!((m.inner_l3_offset, m.inner_src_port), (68, 1));
    }

    #[test]
    fn ipv4_later_fragment_has_no_l4() {
        let mut f = eth(0x0800);
        let mut ip = ipv4_udp(&[1, 2, 3, 4], 9, 10);
        ip[6] = 0x00;
        ip[7] = 0x10; // offset 16 * 8 bytes, MF clear
        f.extend(ip);
        let m = p(&f);
        assert_eq!(m.status, 0);
        assert_eq!((m.frag_offset, m.l4_offset, m.src_port), (16, 0, 0));
        assert_eq!(
            m.flags & (mf::FRAGMENT | mf::LATER_FRAGMENT | mf::MORE_FRAGMENTS),
            mf::FRAGMENT | mf::LATER_FRAGMENT
        );
        assert_eq!(m.payload_offset, 34);
    }

    #[test]
    fn ipv6_jumbo_length_zero_runs_to_frame_end_and_ext_errors() {
        let mut f = eth(0x86dd);
        f.extend(ipv6_hdr(17, 0));
        f.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]);
        let m = p(&f);
        assert_eq!(m.status, 0);
        assert_eq!((m.ip_version, m.dst_port, m.flags & mf::PADDED), (6, 2, 0));
        // A destination-options header that claims 16 bytes of an 8-byte payload.
        let mut g = eth(0x86dd);
        g.extend(ipv6_hdr(60, 8));
        g.extend_from_slice(&[17, 1, 0, 0, 0, 0, 0, 0]);
        let m = p(&g);
        assert_eq!((m.status, m.error_offset), (S::Ipv6ExtTruncated as u16, 54));
        // Nine hop-by-hop headers: one more than walked.
        let mut h = eth(0x86dd);
        h.extend(ipv6_hdr(0, 8 * 9));
        for i in 0..9 {
            h.extend_from_slice(&[if i == 8 { 59 } else { 0 }, 0, 1, 4, 0, 0, 0, 0]);
        }
        let m = p(&h);
        assert_eq!(
            (m.status, m.error_offset),
            (S::Ipv6ExtTooMany as u16, 54 + 64)
        );
    }

    #[test]
    fn llc_arp_and_unknown_ether_types() {
        let mut f = eth(0x0026); // 802.3 length
        f.extend_from_slice(&[0x42, 0x42, 0x03]);
        let m = p(&f);
        assert_eq!(
            (m.status, m.flags, m.ether_type, m.payload_offset),
            (0, mf::LLC, 0x26, 14)
        );
        let mut a = eth(0x0806);
        a.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1, 1, 2, 3]);
        let m = p(&a);
        assert_eq!((m.status, m.error_offset), (S::ArpTruncated as u16, 14));
        let m = p(&eth(0x88cc)); // LLDP: not ours, fine
        assert_eq!((m.status, m.l3_offset, m.ip_version), (0, 14, 0));
    }

    #[test]
    fn burst_parse() {
        let mut b = Burst::default();
        b.push(&[0u8; 3], Default::default());
        let mut f = eth(0x0806);
        f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
        f.extend_from_slice(&[0; 20]);
        b.push(&f, Default::default());
        let mut metas = Vec::new();
        parse_burst(&b, &mut metas);
        assert_eq!(metas.len(), 2);
        assert_eq!(metas[0].status, S::EthTruncated as u16);
        assert_eq!(metas[1].arp_oper, 2);
        assert_ne!(metas[1].flags & mf::ARP, 0);
    }
}
