//! Receive-side scaling in software: the Toeplitz hash NICs compute (Microsoft RSS: same key,
//! same input byte order, same result) over the IPv4 / IPv6 2-tuple and TCP / UDP 4-tuple, and
//! the redirection table (RETA) that maps a hash to a queue.
//!
//! The hash is linear over GF(2): the hash of an input is the XOR of the contributions of its
//! bytes, and the contribution of byte value `b` at position `i` depends only on `(i, b)` and
//! the key. [`Toeplitz::new`] precomputes those 256 contributions per position, so hashing
//! 12 bytes (IPv4 4-tuple) is 12 table lookups and XORs instead of 96 bit steps.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::meta::{mf, PacketMeta};

/// The 40-byte key from Microsoft's RSS documentation, the default of most NICs and DPDK's
/// test suite.
pub const RSS_KEY_MS: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// A key whose 16-bit pattern repeats (`6d 5a`): every 32-bit window at bit `p` depends on
/// `p % 16` only, and source and destination (address, port) sit 16·k bits apart, so the hash
/// of a flow's two directions is the same: a symmetric RSS, which connection tracking needs
/// (both directions of a flow on one queue, whose table holds it).
pub const RSS_KEY_SYMMETRIC: [u8; 40] = [
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
];

/// Longest input a 40-byte key can hash: each input bit consumes one key bit and the hash
/// window is 32 bits wide, so 40 - 4 bytes (the IPv6 4-tuple).
pub const MAX_INPUT: usize = 36;

/// Default size of the redirection table (as on Intel 82599 / ixgbe and DPDK's default).
pub const RETA_DEFAULT_SIZE: usize = 128;

/// The bit-by-bit definition (Microsoft's pseudo code): for each input bit, left to right,
/// XOR in the 32 key bits starting at that bit position. The reference the table version is
/// tested against; slow. Input bits beyond `key.len() * 8 - 32` are ignored.
pub fn toeplitz_reference(key: &[u8], input: &[u8]) -> u32 {
    let key_bit = |i: usize| -> u32 {
        key.get(i / 8)
            .map_or(0, |b| u32::from((b >> (7 - i % 8)) & 1))
    };
    let window_at = |pos: usize| -> u32 { (0..32).fold(0u32, |w, k| (w << 1) | key_bit(pos + k)) };
    let usable = (key.len() * 8).saturating_sub(32);
    let mut result = 0u32;
    for (byte_i, byte) in input.iter().enumerate() {
        for bit in 0..8 {
            let pos = byte_i * 8 + bit;
            if pos >= usable {
                return result;
            }
            if (byte >> (7 - bit)) & 1 == 1 {
                result ^= window_at(pos);
            }
        }
    }
    result
}

/// Toeplitz hasher with per-position lookup tables (36 x 256 x 4 bytes = 36 KiB).
#[derive(Clone)]
pub struct Toeplitz {
    table: Box<[[u32; 256]; MAX_INPUT]>,
}

impl std::fmt::Debug for Toeplitz {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Toeplitz { .. }")
    }
}

impl Default for Toeplitz {
    fn default() -> Self {
        Toeplitz::new(&RSS_KEY_MS)
    }
}

impl Toeplitz {
    /// Precomputes the tables for `key`.
    pub fn new(key: &[u8; 40]) -> Self {
        // 64-bit view of the key from any bit offset: the 32-bit window at bit `p` is the top
        // 32 bits of the 64 key bits starting at byte p / 8, shifted by p % 8.
        let window = |pos: usize| -> u32 {
            let byte = pos / 8;
            let mut w = 0u64;
            for k in 0..8 {
                w = (w << 8) | u64::from(*key.get(byte + k).unwrap_or(&0));
            }
            ((w << (pos % 8)) >> 32) as u32
        };
        let mut table = Box::new([[0u32; 256]; MAX_INPUT]);
        for (i, row) in table.iter_mut().enumerate() {
            // The eight single-bit contributions of position i, MSB first.
            let bits: [u32; 8] = std::array::from_fn(|b| window(i * 8 + b));
            for (v, slot) in row.iter_mut().enumerate() {
                *slot = (0..8)
                    .filter(|b| v & (0x80 >> b) != 0)
                    .fold(0, |acc, b| acc ^ bits[b]);
            }
        }
        Toeplitz { table }
    }

    /// Hash of `input` (bytes beyond [`MAX_INPUT`] are ignored, as the key has run out).
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        input
            .iter()
            .zip(self.table.iter())
            .fold(0, |h, (&b, row)| h ^ row[usize::from(b)])
    }

    /// IPv4 hash: 2-tuple (source, destination address) or, with `ports`, the 4-tuple
    /// (addresses, then source and destination port), in network byte order.
    pub fn hash_ipv4(&self, src: Ipv4Addr, dst: Ipv4Addr, ports: Option<(u16, u16)>) -> u32 {
        let mut buf = [0u8; 12];
        buf[0..4].copy_from_slice(&src.octets());
        buf[4..8].copy_from_slice(&dst.octets());
        match ports {
            Some((s, d)) => {
                buf[8..10].copy_from_slice(&s.to_be_bytes());
                buf[10..12].copy_from_slice(&d.to_be_bytes());
                self.hash(&buf)
            }
            None => self.hash(&buf[..8]),
        }
    }

    /// IPv6 hash: 2-tuple or 4-tuple, as [`Toeplitz::hash_ipv4`].
    pub fn hash_ipv6(&self, src: Ipv6Addr, dst: Ipv6Addr, ports: Option<(u16, u16)>) -> u32 {
        let mut buf = [0u8; 36];
        buf[0..16].copy_from_slice(&src.octets());
        buf[16..32].copy_from_slice(&dst.octets());
        match ports {
            Some((s, d)) => {
                buf[32..34].copy_from_slice(&s.to_be_bytes());
                buf[34..36].copy_from_slice(&d.to_be_bytes());
                self.hash(&buf)
            }
            None => self.hash(&buf[..32]),
        }
    }

    /// Hash of a parsed frame: the 4-tuple for an unfragmented TCP or UDP packet whose L4
    /// header parsed (`ip_proto` after the IPv6 extension chain), else the 2-tuple for IPv4 /
    /// IPv6, else 0 (not IP). The outer header is used for tunnels.
    pub fn hash_meta(&self, m: &PacketMeta) -> u32 {
        let ports =
            (matches!(m.ip_proto, 6 | 17) && m.flags & mf::L4 != 0 && m.flags & mf::FRAGMENT == 0)
                .then_some((m.src_port, m.dst_port));
        match m.ip_version {
            4 => self.hash_ipv4(
                Ipv4Addr::from(m.src_ip[0]),
                Ipv4Addr::from(m.dst_ip[0]),
                ports,
            ),
            6 => {
                let addr = |w: &[u32; 4]| {
                    let mut o = [0u8; 16];
                    for (chunk, word) in o.chunks_exact_mut(4).zip(w) {
                        chunk.copy_from_slice(&word.to_be_bytes());
                    }
                    Ipv6Addr::from(o)
                };
                self.hash_ipv6(addr(&m.src_ip), addr(&m.dst_ip), ports)
            }
            _ => 0,
        }
    }

    /// Hash of a raw Ethernet frame with the same rules as [`Toeplitz::hash_meta`], from a
    /// minimal bounded walk (up to two VLAN tags, the IPv4 header, the IPv6 extension chain up
    /// to 8 headers). A frame it cannot read far enough hashes as much as it could read: the
    /// 2-tuple once the IP addresses are present, else 0. Never panics.
    pub fn hash_frame(&self, f: &[u8]) -> u32 {
        let be16 = |at: usize| f.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
        let mut at = 12;
        let mut etype = match be16(at) {
            Some(t) => t,
            None => return 0,
        };
        for _ in 0..2 {
            if matches!(etype, 0x8100 | 0x88A8 | 0x9100) {
                at += 4;
                etype = match be16(at) {
                    Some(t) => t,
                    None => return 0,
                };
            }
        }
        let l3 = at + 2;
        match etype {
            0x0800 => {
                let Some(h) = f.get(l3..l3 + 20) else {
                    return 0;
                };
                if h[0] >> 4 != 4 || h[0] & 0x0F < 5 {
                    return 0;
                }
                let src = Ipv4Addr::new(h[12], h[13], h[14], h[15]);
                let dst = Ipv4Addr::new(h[16], h[17], h[18], h[19]);
                let frag = u16::from_be_bytes([h[6], h[7]]) & 0x3FFF != 0;
                let l4 = l3 + usize::from(h[0] & 0x0F) * 4;
                let ports = if !frag && matches!(h[9], 6 | 17) {
                    be16(l4).zip(be16(l4 + 2))
                } else {
                    None
                };
                self.hash_ipv4(src, dst, ports)
            }
            0x86DD => {
                let Some(h) = f.get(l3..l3 + 40) else {
                    return 0;
                };
                if h[0] >> 4 != 6 {
                    return 0;
                }
                let mut src = [0u8; 16];
                let mut dst = [0u8; 16];
                src.copy_from_slice(&h[8..24]);
                dst.copy_from_slice(&h[24..40]);
                let (src, dst) = (Ipv6Addr::from(src), Ipv6Addr::from(dst));
                let mut next = h[6];
                let mut pos = l3 + 40;
                let mut frag = false;
                for _ in 0..8 {
                    let len = match next {
                        0 | 43 | 60 => f.get(pos + 1).map(|l| (usize::from(*l) + 1) * 8),
                        44 => {
                            frag = true;
                            Some(8)
                        }
                        51 => f.get(pos + 1).map(|l| (usize::from(*l) + 2) * 4),
                        _ => break,
                    };
                    let (Some(len), Some(n)) = (len, f.get(pos)) else {
                        return self.hash_ipv6(src, dst, None);
                    };
                    next = *n;
                    pos += len;
                }
                let ports = if !frag && matches!(next, 6 | 17) {
                    be16(pos).zip(be16(pos + 2))
                } else {
                    None
                };
                self.hash_ipv6(src, dst, ports)
            }
            _ => 0,
        }
    }
}

/// Redirection table: queue = `entries[hash % len]` (the low bits of the hash, `len` a power of
/// two).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reta {
    entries: Vec<u16>,
    mask: usize,
}

impl Reta {
    /// [`RETA_DEFAULT_SIZE`] entries spreading `queues` round robin (entry i -> i % queues).
    pub fn new(queues: u16) -> Result<Self, String> {
        Self::with_size(queues, RETA_DEFAULT_SIZE)
    }

    /// `size` entries (a power of two, 1 ..= 65536), round robin over `queues` (>= 1).
    pub fn with_size(queues: u16, size: usize) -> Result<Self, String> {
        if queues == 0 {
            return Err("RSS needs at least one queue".into());
        }
        Self::from_entries(
            (0..size)
                .map(|i| (i % usize::from(queues)) as u16)
                .collect(),
        )
    }

    /// An explicit table (length a power of two, 1 ..= 65536).
    pub fn from_entries(entries: Vec<u16>) -> Result<Self, String> {
        let n = entries.len();
        if !n.is_power_of_two() || n > 65536 {
            return Err(format!(
                "RSS redirection table size must be a power of two in 1 ..= 65536, got {n}"
            ));
        }
        Ok(Reta {
            entries,
            mask: n - 1,
        })
    }

    /// The queue for `hash`.
    #[inline]
    pub fn queue(&self, hash: u32) -> u16 {
        self.entries[hash as usize & self.mask]
    }

    pub fn entries(&self) -> &[u16] {
        &self.entries
    }

    /// Number of distinct queues the table can select (max entry + 1).
    pub fn queues(&self) -> usize {
        self.entries
            .iter()
            .map(|&q| usize::from(q) + 1)
            .max()
            .unwrap_or(0)
    }
}

/// A hasher and a redirection table together: what a port's software steering applies.
#[derive(Clone, Debug)]
pub struct Rss {
    pub toeplitz: Toeplitz,
    pub reta: Reta,
}

impl Rss {
    /// The standard key and a default-size table over `queues` queues.
    pub fn new(queues: u16) -> Result<Self, String> {
        Ok(Rss {
            toeplitz: Toeplitz::default(),
            reta: Reta::new(queues)?,
        })
    }

    /// [`Rss::new`] with [`RSS_KEY_SYMMETRIC`]: both directions of a flow hash alike.
    pub fn symmetric(queues: u16) -> Result<Self, String> {
        Ok(Rss {
            toeplitz: Toeplitz::new(&RSS_KEY_SYMMETRIC),
            reta: Reta::new(queues)?,
        })
    }

    /// `(hash, queue)` of a parsed frame (non-IP: hash 0, queue `reta.queue(0)`).
    #[inline]
    pub fn steer_meta(&self, m: &PacketMeta) -> (u32, u16) {
        let h = self.toeplitz.hash_meta(m);
        (h, self.reta.queue(h))
    }

    /// `(hash, queue)` of a raw Ethernet frame (see [`Toeplitz::hash_frame`]).
    #[inline]
    pub fn steer_frame(&self, frame: &[u8]) -> (u32, u16) {
        let h = self.toeplitz.hash_frame(frame);
        (h, self.reta.queue(h))
    }
}
