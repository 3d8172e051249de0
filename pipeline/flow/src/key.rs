//! The flow key of a frame and the table's hash (docs/flow-table.md, "Flow key" and "Hash"):
//! what `gpu-kernels/cuda/flow.cuh` computes too (`pw_flow_classify`, `pw_flow_hash`).

use pktwarp_core::meta::{mf, PacketMeta, ParseStatus};

/// IP protocol numbers the table knows.
pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_ICMPV6: u8 = 58;
pub const PROTO_SCTP: u8 = 132;

/// A flow's identity, the same for both directions: endpoint `a` is the smaller (address, port)
/// of the two, `b` the other. 40 bytes, `pw_flow_key` in flow.cuh (layout pinned by the tests).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Addresses of endpoints a and b as the metadata holds them (IPv4: word 0, the rest 0).
    pub addr: [[u32; 4]; 2],
    /// Ports of a and b (TCP, UDP, SCTP); the echo identifier on both for ICMP / ICMPv6 echo;
    /// 0 for other protocols.
    pub port: [u16; 2],
    /// Outer VLAN id (0 without a VLAN tag): the same 5-tuple in two VLANs is two flows.
    pub zone: u16,
    pub proto: u8,
    /// 4 or 6.
    pub ip_version: u8,
}

/// Size of [`FlowKey`] in bytes.
pub const KEY_SIZE: usize = 40;

impl FlowKey {
    /// The key as ten 32-bit words, the input of [`hash`]: the addresses, then
    /// `port[0] | port[1] << 16`, then `zone | proto << 16 | ip_version << 24`.
    pub fn words(&self) -> [u32; 10] {
        let mut w = [0u32; 10];
        w[..4].copy_from_slice(&self.addr[0]);
        w[4..8].copy_from_slice(&self.addr[1]);
        w[8] = self.port[0] as u32 | (self.port[1] as u32) << 16;
        w[9] = self.zone as u32 | (self.proto as u32) << 16 | (self.ip_version as u32) << 24;
        w
    }
}

/// 32-bit hash of a key: [`murmur3_words`] over [`FlowKey::words`], seeded (a per-table seed
/// keeps an attacker from aiming many flows at one bucket). The bucket is `hash % nbuckets`.
pub fn hash(key: &FlowKey, seed: u32) -> u32 {
    murmur3_words(&key.words(), seed)
}

/// MurmurHash3 x86_32 of ten 32-bit words (its block mix and finaliser, length 40 bytes): the
/// hash of the flow table's and the rate-limit table's keys (`pw_murmur3_words` in
/// gpu-kernels/cuda/murmur3.cuh is its CUDA twin).
pub fn murmur3_words(words: &[u32; 10], seed: u32) -> u32 {
    let mut h = seed;
    for w in words {
        let k = w
            .wrapping_mul(0xcc9e_2d51)
            .rotate_left(15)
            .wrapping_mul(0x1b87_3593);
        h = (h ^ k)
            .rotate_left(13)
            .wrapping_mul(5)
            .wrapping_add(0xe654_6b64);
    }
    h ^= 40;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// How the table treats a frame's protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Tcp,
    Udp,
    /// ICMP / ICMPv6 echo; `request` is true for a request.
    Echo {
        request: bool,
    },
    /// An ICMP / ICMPv6 error about the flow of the packet it quotes (the key and direction are
    /// the quoted packet's).
    Related,
    /// Any other IP protocol (SCTP with its ports, the rest with port 0).
    Other,
}

/// What the table needs of one frame: its key and direction and the L4 facts the state
/// machines read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub key: FlowKey,
    /// The frame goes from endpoint a to b.
    pub from_a: bool,
    pub kind: Kind,
    /// The 9 TCP flag bits (0 for other protocols).
    pub tcp_flags: u16,
    /// IP bytes: IPv4 total length, IPv6 40 + payload length.
    pub ip_len: u32,
    /// TCP sequence number, acknowledgement number, window and segment length (payload bytes)
    /// for `strict` window checking; 0 for other protocols.
    pub seq: u32,
    pub ack: u32,
    pub win: u16,
    pub seg_len: u32,
    /// The window-scale option of a SYN (clamped to 14), [`NO_WSCALE`] when absent.
    pub wscale: u8,
}

/// [`Packet::wscale`] of a frame without the option.
pub const NO_WSCALE: u8 = 0xff;

/// The window-scale option (kind 3, length 3) among the TCP options `opts`, clamped to 14. A
/// malformed option list ends the walk.
fn tcp_wscale(opts: &[u8]) -> u8 {
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => break,
            1 => i += 1,
            kind => {
                let Some(&len) = opts.get(i + 1) else { break };
                if len < 2 || i + len as usize > opts.len() {
                    break;
                }
                if kind == 3 && len == 3 {
                    return opts[i + 2].min(14);
                }
                i += len as usize;
            }
        }
    }
    NO_WSCALE
}

/// Why a frame has no flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoFlow {
    /// Not IP, an IP fragment, or an ICMP message other than an echo.
    Untracked,
    /// A malformed IP / L4 header (parse error in the outer packet) or metadata that points past
    /// the frame.
    Invalid,
}

fn rd16(f: &[u8], off: usize) -> Option<u32> {
    Some(u16::from_be_bytes([*f.get(off)?, *f.get(off + 1)?]) as u32)
}

fn rd32(f: &[u8], off: usize) -> Option<u32> {
    Some(rd16(f, off)? << 16 | rd16(f, off + 2)?)
}

/// ICMP destination unreachable, source quench, redirect, time exceeded, parameter problem;
/// ICMPv6 destination unreachable, packet too big, time exceeded, parameter problem.
fn is_icmp_error(ip_version: u8, icmp_type: u8) -> bool {
    if ip_version == 4 {
        matches!(icmp_type, 3 | 4 | 5 | 11 | 12)
    } else {
        matches!(icmp_type, 1..=4)
    }
}

/// The quoted packet of an ICMP error (its IP header at `off`): source, destination, ports (the
/// echo id for an echo) and protocol. Not an IP header of the outer version, or cut before its
/// ports: invalid; a quoted later fragment (no ports) or ICMP message other than echo:
/// untracked. IPv6 extension headers are not walked (the next header is the protocol).
#[allow(clippy::type_complexity)]
fn quoted(f: &[u8], off: usize, v: u8) -> Result<([u32; 4], [u32; 4], u16, u16, u8), NoFlow> {
    let b0 = *f.get(off).ok_or(NoFlow::Invalid)?;
    if b0 >> 4 != v {
        return Err(NoFlow::Invalid);
    }
    let (mut src, mut dst) = ([0u32; 4], [0u32; 4]);
    let (proto, l4) = if v == 4 {
        let ihl = (b0 as usize & 0xf) * 4;
        if ihl < 20 {
            return Err(NoFlow::Invalid);
        }
        if rd16(f, off + 6).ok_or(NoFlow::Invalid)? & 0x1fff != 0 {
            return Err(NoFlow::Untracked);
        }
        src[0] = rd32(f, off + 12).ok_or(NoFlow::Invalid)?;
        dst[0] = rd32(f, off + 16).ok_or(NoFlow::Invalid)?;
        (*f.get(off + 9).ok_or(NoFlow::Invalid)?, off + ihl)
    } else {
        for i in 0..4 {
            src[i] = rd32(f, off + 8 + 4 * i).ok_or(NoFlow::Invalid)?;
            dst[i] = rd32(f, off + 24 + 4 * i).ok_or(NoFlow::Invalid)?;
        }
        (*f.get(off + 6).ok_or(NoFlow::Invalid)?, off + 40)
    };
    let echo_proto = if v == 4 { PROTO_ICMP } else { PROTO_ICMPV6 };
    let (sp, dp) = if proto == PROTO_TCP || proto == PROTO_UDP || proto == PROTO_SCTP {
        let sp = rd16(f, l4).ok_or(NoFlow::Invalid)? as u16;
        (sp, rd16(f, l4 + 2).ok_or(NoFlow::Invalid)? as u16)
    } else if proto == echo_proto {
        let ty = *f.get(l4).ok_or(NoFlow::Invalid)?;
        let echo = if v == 4 {
            ty == 8 || ty == 0
        } else {
            ty == 128 || ty == 129
        };
        if !echo {
            return Err(NoFlow::Untracked);
        }
        let id = rd16(f, l4 + 4).ok_or(NoFlow::Invalid)? as u16;
        (id, id)
    } else {
        (0, 0)
    };
    Ok((src, dst, sp, dp, proto))
}

/// The frame's flow facts, from the parse metadata and the frame (docs/flow-table.md, "Flow
/// key"): non-IP frames and IP fragments are untracked; an outer IP or L4 parse error is
/// invalid.
pub fn classify(meta: &PacketMeta, frame: &[u8]) -> Result<Packet, NoFlow> {
    if meta.ip_version != 4 && meta.ip_version != 6 {
        return Err(NoFlow::Untracked);
    }
    if meta.flags & mf::FRAGMENT != 0 {
        return Err(NoFlow::Untracked);
    }
    let s = meta.status;
    if s & ParseStatus::INNER == 0
        && s >= ParseStatus::Ipv4Truncated as u16
        && s <= ParseStatus::SctpTruncated as u16
    {
        return Err(NoFlow::Invalid);
    }
    let proto = meta.ip_proto;
    let l3 = meta.l3_offset as usize;
    let l4 = meta.l4_offset as usize;
    let has_l4 = meta.flags & mf::L4 != 0;
    let ip_len = if meta.ip_version == 4 {
        rd16(frame, l3 + 2)
    } else {
        rd16(frame, l3 + 4).map(|p| p + 40)
    }
    .ok_or(NoFlow::Invalid)?;
    let mut p = Packet {
        key: FlowKey::default(),
        from_a: true,
        kind: Kind::Other,
        tcp_flags: 0,
        ip_len,
        seq: 0,
        ack: 0,
        win: 0,
        seg_len: 0,
        wscale: NO_WSCALE,
    };
    let (mut sport, mut dport) = (0u16, 0u16);
    let (mut src_ip, mut dst_ip, mut kproto) = (meta.src_ip, meta.dst_ip, proto);
    let echo = (proto == PROTO_ICMP && meta.ip_version == 4)
        || (proto == PROTO_ICMPV6 && meta.ip_version == 6);
    if (proto == PROTO_TCP || proto == PROTO_UDP || proto == PROTO_SCTP || echo) && !has_l4 {
        return Err(NoFlow::Invalid);
    }
    if proto == PROTO_TCP {
        p.kind = Kind::Tcp;
        p.tcp_flags = meta.tcp_flags & 0x1ff;
        p.seq = rd32(frame, l4 + 4).ok_or(NoFlow::Invalid)?;
        p.ack = rd32(frame, l4 + 8).ok_or(NoFlow::Invalid)?;
        let doff = (*frame.get(l4 + 12).ok_or(NoFlow::Invalid)? as u32 >> 4) * 4;
        p.win = rd16(frame, l4 + 14).ok_or(NoFlow::Invalid)? as u16;
        p.seg_len = ip_len.saturating_sub((l4 - l3.min(l4)) as u32 + doff);
        if p.tcp_flags & 0x02 != 0 && doff > 20 {
            let opts = frame
                .get(l4 + 20..l4 + doff as usize)
                .ok_or(NoFlow::Invalid)?;
            p.wscale = tcp_wscale(opts);
        }
        (sport, dport) = (meta.src_port, meta.dst_port);
    } else if proto == PROTO_UDP {
        p.kind = Kind::Udp;
        (sport, dport) = (meta.src_port, meta.dst_port);
    } else if proto == PROTO_SCTP {
        (sport, dport) = (meta.src_port, meta.dst_port);
    } else if echo {
        let (req, rep) = if meta.ip_version == 4 {
            (8, 0)
        } else {
            (128, 129)
        };
        if is_icmp_error(meta.ip_version, meta.icmp_type) {
            p.kind = Kind::Related;
            let q = quoted(frame, l4 + 8, meta.ip_version)?;
            (src_ip, dst_ip, sport, dport, kproto) = q;
        } else if meta.icmp_type != req && meta.icmp_type != rep {
            return Err(NoFlow::Untracked);
        } else {
            p.kind = Kind::Echo {
                request: meta.icmp_type == req,
            };
            let id = rd16(frame, l4 + 4).ok_or(NoFlow::Invalid)? as u16;
            (sport, dport) = (id, id);
        }
    }
    let src = (src_ip, sport);
    let dst = (dst_ip, dport);
    p.from_a = src <= dst;
    let (a, b) = if p.from_a { (src, dst) } else { (dst, src) };
    p.key = FlowKey {
        addr: [a.0, b.0],
        port: [a.1, b.1],
        zone: if meta.flags & mf::VLAN != 0 {
            meta.vlan_tci[0] & 0xfff
        } else {
            0
        },
        proto: kproto,
        ip_version: meta.ip_version,
    };
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_murmur3_of_the_key_words() {
        // The same key, a different seed or word, gives another hash; a fixed value pins the
        // function (flow.cuh must give it too: the differential tests compare table bytes).
        let k = FlowKey {
            addr: [[0x0a00_0001, 0, 0, 0], [0x0a00_0002, 0, 0, 0]],
            port: [1234, 80],
            zone: 0,
            proto: 6,
            ip_version: 4,
        };
        assert_ne!(hash(&k, 0), hash(&k, 1));
        let mut k2 = k;
        k2.zone = 1;
        assert_ne!(hash(&k, 0), hash(&k2, 0));
        assert_eq!(hash(&k, 0), hash(&k, 0));
        // MurmurHash3_x86_32 of 40 zero bytes, seed 0.
        assert_eq!(hash(&FlowKey::default(), 0), 0xc206_7ae9);
    }
}
