//! Connection traffic for tests and benches: frame builders (Ethernet, optional VLAN, IPv4 /
//! IPv6, TCP / UDP / ICMP echo) and [`generate`], interleaved conversations with handshakes,
//! data both ways, FIN and RST teardowns, abandoned connections, UDP request / response and
//! ICMP echo, with receive times that advance so that some flows age out. Checksums are left 0
//! (nothing on the flow path reads them). Deterministic for a seed.

use std::net::IpAddr;

/// One generated frame and its receive time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenFrame {
    pub bytes: Vec<u8>,
    pub time_ns: u64,
}

/// An endpoint: address and port.
pub type Ep = (IpAddr, u16);

/// TCP header fields of [`tcp_frame`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Tcp {
    pub flags: u16,
    pub seq: u32,
    pub ack: u32,
    pub win: u16,
    /// Payload bytes (zeros).
    pub len: u16,
    /// A window-scale option (sent as NOP + option + padding).
    pub wscale: Option<u8>,
}

fn eth(vlan: Option<u16>, v6: bool) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02];
    if let Some(vid) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&(vid & 0xfff).to_be_bytes());
    }
    f.extend_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
    f
}

/// An IP packet of protocol `proto` around `l4`; `frag` = (offset in 8-byte units, more
/// fragments) for IPv4.
fn ip(
    vlan: Option<u16>,
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    l4: &[u8],
    frag: (u16, bool),
) -> Vec<u8> {
    let mut f;
    match (src, dst) {
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f = eth(vlan, true);
            f.extend_from_slice(&[0x60, 0, 0, 0]);
            f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            f.extend_from_slice(&[proto, 64]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        (s, d) => {
            let v4 = |a: IpAddr| match a {
                IpAddr::V4(a) => a.octets(),
                IpAddr::V6(_) => [0; 4],
            };
            f = eth(vlan, false);
            f.extend_from_slice(&[0x45, 0]);
            f.extend_from_slice(&(20 + l4.len() as u16).to_be_bytes());
            f.extend_from_slice(&[0x12, 0x34]);
            f.extend_from_slice(&(frag.0 | if frag.1 { 0x2000 } else { 0 }).to_be_bytes());
            f.extend_from_slice(&[64, proto, 0, 0]);
            f.extend_from_slice(&v4(s));
            f.extend_from_slice(&v4(d));
        }
    }
    f.extend_from_slice(l4);
    while f.len() < 60 {
        f.push(0);
    }
    f
}

/// A TCP segment from `src` to `dst`.
pub fn tcp_frame(vlan: Option<u16>, src: Ep, dst: Ep, t: Tcp) -> Vec<u8> {
    let opt_len = if t.wscale.is_some() { 4 } else { 0 };
    let mut l4 = Vec::with_capacity(20 + opt_len + t.len as usize);
    l4.extend_from_slice(&src.1.to_be_bytes());
    l4.extend_from_slice(&dst.1.to_be_bytes());
    l4.extend_from_slice(&t.seq.to_be_bytes());
    l4.extend_from_slice(&t.ack.to_be_bytes());
    l4.push((((20 + opt_len) / 4) as u8) << 4 | (t.flags >> 8) as u8 & 1);
    l4.push(t.flags as u8);
    l4.extend_from_slice(&t.win.to_be_bytes());
    l4.extend_from_slice(&[0, 0, 0, 0]);
    if let Some(s) = t.wscale {
        l4.extend_from_slice(&[1, 3, 3, s]);
    }
    l4.resize(l4.len() + t.len as usize, 0);
    ip(vlan, src.0, dst.0, 6, &l4, (0, false))
}

/// A UDP datagram of `len` payload bytes.
pub fn udp_frame(vlan: Option<u16>, src: Ep, dst: Ep, len: u16) -> Vec<u8> {
    let mut l4 = Vec::new();
    l4.extend_from_slice(&src.1.to_be_bytes());
    l4.extend_from_slice(&dst.1.to_be_bytes());
    l4.extend_from_slice(&(8 + len).to_be_bytes());
    l4.extend_from_slice(&[0, 0]);
    l4.resize(8 + len as usize, 0);
    ip(vlan, src.0, dst.0, 17, &l4, (0, false))
}

/// An ICMP (IPv4) or ICMPv6 (IPv6) echo request or reply.
pub fn echo_frame(
    vlan: Option<u16>,
    src: IpAddr,
    dst: IpAddr,
    request: bool,
    id: u16,
    seq: u16,
) -> Vec<u8> {
    let v6 = src.is_ipv6();
    let ty = match (v6, request) {
        (false, true) => 8,
        (false, false) => 0,
        (true, true) => 128,
        (true, false) => 129,
    };
    let mut l4 = vec![ty, 0, 0, 0];
    l4.extend_from_slice(&id.to_be_bytes());
    l4.extend_from_slice(&seq.to_be_bytes());
    l4.extend_from_slice(&[0xab; 16]);
    ip(vlan, src, dst, if v6 { 58 } else { 1 }, &l4, (0, false))
}

/// An ICMP destination unreachable (IPv4, type 3 code 3) or ICMPv6 one (type 1 code 4) from
/// `from` to `to`, quoting the IP packet of the Ethernet frame `about` (IP header and the first
/// 8 bytes after it, or all of it).
pub fn icmp_error_frame(from: IpAddr, to: IpAddr, about: &[u8]) -> Vec<u8> {
    let v6 = from.is_ipv6();
    let ip_start = if about.get(12..14) == Some(&[0x81, 0x00]) {
        18
    } else {
        14
    };
    let hl = if v6 {
        40
    } else {
        (about.get(ip_start).map_or(5, |b| b & 0xf) as usize) * 4
    };
    let end = (ip_start + hl + 8).min(about.len());
    let mut l4 = if v6 {
        vec![1, 4, 0, 0, 0, 0, 0, 0]
    } else {
        vec![3, 3, 0, 0, 0, 0, 0, 0]
    };
    l4.extend_from_slice(about.get(ip_start..end).unwrap_or(&[]));
    ip(None, from, to, if v6 { 58 } else { 1 }, &l4, (0, false))
}

/// An IPv4 UDP fragment: the first (with the UDP header) or a later one.
pub fn fragment_frame(src: Ep, dst: Ep, first: bool) -> Vec<u8> {
    let l4 = udp_frame(None, src, dst, 32)[34..].to_vec();
    ip(
        None,
        src.0,
        dst.0,
        17,
        &l4,
        if first { (0, true) } else { (64, false) },
    )
}

/// An ARP request (not IP: untracked).
pub fn arp_frame() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x03, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.resize(60, 0);
    f
}

/// splitmix64: a small deterministic generator (no dependency for tests and benches).
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

/// What [`generate`] makes.
#[derive(Clone, Copy, Debug)]
pub struct GenConfig {
    pub seed: u64,
    /// Frames to make (about: the last conversations are cut).
    pub frames: usize,
    /// Conversations open at once.
    pub concurrent: usize,
    /// Distinct client addresses (servers: 16).
    pub clients: u32,
    /// Mean gap between frames, ns.
    pub gap_ns: u64,
    /// Percent of gaps that are long idles (`idle_ns`): flows age out.
    pub idle_pct: u64,
    pub idle_ns: u64,
    pub ipv6_pct: u64,
    pub vlan_pct: u64,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            seed: 1,
            frames: 5000,
            concurrent: 32,
            clients: 200,
            gap_ns: 1_000_000,
            idle_pct: 1,
            idle_ns: 40_000_000_000,
            ipv6_pct: 25,
            vlan_pct: 20,
        }
    }
}

fn addr(v6: bool, host: u32, server: bool) -> IpAddr {
    let net: u32 = if server { 0x0a64_0000 } else { 0x0a00_0000 };
    if v6 {
        let mut o = [0u8; 16];
        o[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        o[4] = server as u8;
        o[12..].copy_from_slice(&host.to_be_bytes());
        IpAddr::from(o)
    } else {
        IpAddr::from((net | (host & 0xffff)).to_be_bytes())
    }
}

/// One conversation's frames, in order.
fn conversation(rng: &mut Rng, c: &GenConfig) -> Vec<Vec<u8>> {
    let v6 = rng.chance(c.ipv6_pct);
    let vlan = if rng.chance(c.vlan_pct) {
        Some(1 + rng.below(4) as u16)
    } else {
        None
    };
    let cl: Ep = (
        addr(v6, rng.below(c.clients as u64) as u32 + 1, false),
        1024 + rng.below(60000) as u16,
    );
    let sv: Ep = (
        addr(v6, rng.below(16) as u32 + 1, true),
        [80, 443, 53, 22][rng.below(4) as usize],
    );
    match rng.below(10) {
        0..=5 => tcp_conversation(rng, vlan, cl, sv),
        6..=7 if vlan.is_none() && rng.chance(20) => {
            // The server's port is closed: an ICMP error about the request (related).
            let req = udp_frame(None, cl, sv, 40);
            let err = icmp_error_frame(sv.0, cl.0, &req);
            vec![req, err]
        }
        6..=7 => {
            let mut v = vec![udp_frame(vlan, cl, sv, 40)];
            for _ in 0..rng.below(4) {
                v.push(udp_frame(vlan, sv, cl, 100));
                v.push(udp_frame(vlan, cl, sv, 40));
            }
            v
        }
        8 => {
            let id = rng.below(65536) as u16;
            (0..1 + rng.below(4) as u16)
                .flat_map(|s| {
                    [
                        echo_frame(vlan, cl.0, sv.0, true, id, s),
                        echo_frame(vlan, sv.0, cl.0, false, id, s),
                    ]
                })
                .collect()
        }
        _ => match rng.below(3) {
            0 => vec![arp_frame()],
            1 if !v6 => vec![fragment_frame(cl, sv, true), fragment_frame(cl, sv, false)],
            // Data on a connection whose handshake was not seen (picked up mid-stream).
            _ => vec![tcp_frame(
                vlan,
                cl,
                sv,
                Tcp {
                    flags: 0x18,
                    seq: 5000,
                    ack: 9000,
                    win: 1000,
                    len: 100,
                    wscale: None,
                },
            )],
        },
    }
}

/// A TCP connection: handshake, data both ways with consistent sequence numbers, then a FIN
/// teardown, an RST, or nothing (abandoned).
fn tcp_conversation(rng: &mut Rng, vlan: Option<u16>, cl: Ep, sv: Ep) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let (mut cs, mut ss) = (rng.next_u64() as u32, rng.next_u64() as u32);
    let ws = if rng.chance(50) { Some(7) } else { None };
    let f = |src: Ep, dst: Ep, flags: u16, seq: u32, ack: u32, len: u16| {
        tcp_frame(
            vlan,
            src,
            dst,
            Tcp {
                flags,
                seq,
                ack,
                win: 8192,
                len,
                wscale: None,
            },
        )
    };
    v.push(tcp_frame(
        vlan,
        cl,
        sv,
        Tcp {
            flags: 0x02,
            seq: cs,
            ack: 0,
            win: 64240,
            len: 0,
            wscale: ws,
        },
    ));
    if rng.chance(10) {
        return v; // a SYN with no answer
    }
    cs = cs.wrapping_add(1);
    v.push(tcp_frame(
        vlan,
        sv,
        cl,
        Tcp {
            flags: 0x12,
            seq: ss,
            ack: cs,
            win: 65160,
            len: 0,
            wscale: ws,
        },
    ));
    ss = ss.wrapping_add(1);
    v.push(f(cl, sv, 0x10, cs, ss, 0));
    for _ in 0..rng.below(6) {
        let n = 1 + rng.below(1400) as u16;
        if rng.chance(50) {
            v.push(f(cl, sv, 0x18, cs, ss, n));
            cs = cs.wrapping_add(n as u32);
            v.push(f(sv, cl, 0x10, ss, cs, 0));
        } else {
            v.push(f(sv, cl, 0x18, ss, cs, n));
            ss = ss.wrapping_add(n as u32);
            v.push(f(cl, sv, 0x10, cs, ss, 0));
        }
    }
    match rng.below(5) {
        0 => v.push(f(cl, sv, 0x04, cs, 0, 0)),
        1 => v.push(f(sv, cl, 0x14, ss, cs, 0)),
        2 => {}
        _ => {
            v.push(f(cl, sv, 0x11, cs, ss, 0));
            cs = cs.wrapping_add(1);
            v.push(f(sv, cl, 0x10, ss, cs, 0));
            v.push(f(sv, cl, 0x11, ss, cs, 0));
            ss = ss.wrapping_add(1);
            v.push(f(cl, sv, 0x10, cs, ss, 0));
        }
    }
    v
}

/// Interleaved conversations (see the module doc).
pub fn generate(c: &GenConfig) -> Vec<GenFrame> {
    let mut rng = Rng(c.seed);
    let mut open: Vec<std::collections::VecDeque<Vec<u8>>> = Vec::new();
    let mut out = Vec::with_capacity(c.frames);
    let mut t: u64 = 1_000_000_000;
    while out.len() < c.frames {
        while open.len() < c.concurrent.max(1) {
            open.push(conversation(&mut rng, c).into());
        }
        let i = rng.below(open.len() as u64) as usize;
        if let Some(bytes) = open[i].pop_front() {
            t += if rng.chance(c.idle_pct) {
                c.idle_ns
            } else {
                rng.below(2 * c.gap_ns.max(1))
            };
            out.push(GenFrame { bytes, time_ns: t });
        }
        if open[i].is_empty() {
            open.swap_remove(i);
        }
    }
    out
}
