//! ARP (RFC 826).

use super::{be16, emit_buf, put16, Error, Result};

mod field {
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const FIXED_LEN: usize = 8;
}

/// ARP operations.
pub mod oper {
    pub const REQUEST: u16 = 1;
    pub const REPLY: u16 = 2;
}

/// Length of an Ethernet / IPv4 ARP packet.
pub const ETH_IPV4_LEN: usize = field::FIXED_LEN + 2 * (6 + 4);

/// An ARP packet; `new_checked` requires the fixed part and all four addresses.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl Packet<&'static [u8]> {
    pub const FIXED_LEN: usize = field::FIXED_LEN;
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buf: T) -> Result<Self> {
        let len = buf.as_ref().len();
        if len < field::FIXED_LEN {
            return Err(Error::Truncated);
        }
        let p = Packet { buf };
        if len < p.total_len() {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    pub fn into_inner(self) -> T {
        self.buf
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    pub fn htype(&self) -> u16 {
        be16(self.b(), field::HTYPE)
    }

    pub fn ptype(&self) -> u16 {
        be16(self.b(), field::PTYPE)
    }

    pub fn hlen(&self) -> u8 {
        self.b()[field::HLEN]
    }

    pub fn plen(&self) -> u8 {
        self.b()[field::PLEN]
    }

    pub fn oper(&self) -> u16 {
        be16(self.b(), field::OPER)
    }

    /// Fixed part plus sender and target hardware and protocol addresses.
    pub fn total_len(&self) -> usize {
        field::FIXED_LEN + 2 * (self.hlen() as usize + self.plen() as usize)
    }

    /// Offsets of sender HW, sender proto, target HW, target proto.
    fn offsets(&self) -> [usize; 4] {
        let (h, p) = (self.hlen() as usize, self.plen() as usize);
        let f = field::FIXED_LEN;
        [f, f + h, f + h + p, f + 2 * h + p]
    }

    pub fn sender_hw_addr(&self) -> &[u8] {
        let o = self.offsets();
        &self.b()[o[0]..o[1]]
    }

    pub fn sender_proto_addr(&self) -> &[u8] {
        let o = self.offsets();
        &self.b()[o[1]..o[2]]
    }

    pub fn target_hw_addr(&self) -> &[u8] {
        let o = self.offsets();
        &self.b()[o[2]..o[3]]
    }

    pub fn target_proto_addr(&self) -> &[u8] {
        let o = self.offsets();
        &self.b()[o[3]..o[3] + self.plen() as usize]
    }

    /// Sender and target IPv4 addresses when this is ARP for IPv4.
    pub fn ipv4_addrs(&self) -> Option<([u8; 4], [u8; 4])> {
        if self.ptype() != 0x0800 || self.plen() != 4 {
            return None;
        }
        let s = self.sender_proto_addr();
        let t = self.target_proto_addr();
        Some(([s[0], s[1], s[2], s[3]], [t[0], t[1], t[2], t[3]]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_oper(&mut self, op: u16) {
        put16(self.buf.as_mut(), field::OPER, op);
    }
}

/// An Ethernet / IPv4 ARP packet's fields (the only kind the responders build).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub oper: u16,
    pub sender_hw: [u8; 6],
    pub sender_ip: [u8; 4],
    pub target_hw: [u8; 6],
    pub target_ip: [u8; 4],
}

impl Repr {
    /// `None` unless the packet is Ethernet (htype 1, hlen 6) / IPv4 (0x0800, plen 4).
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Option<Self> {
        if p.htype() != 1 || p.hlen() != 6 {
            return None;
        }
        let (sender_ip, target_ip) = p.ipv4_addrs()?;
        let mac = |s: &[u8]| [s[0], s[1], s[2], s[3], s[4], s[5]];
        Some(Repr {
            oper: p.oper(),
            sender_hw: mac(p.sender_hw_addr()),
            sender_ip,
            target_hw: mac(p.target_hw_addr()),
            target_ip,
        })
    }

    /// Writes the 28 bytes at the start of `buf`. Errors: `Truncated` when shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = emit_buf(buf, ETH_IPV4_LEN)?;
        put16(b, field::HTYPE, 1);
        put16(b, field::PTYPE, 0x0800);
        b[field::HLEN] = 6;
        b[field::PLEN] = 4;
        put16(b, field::OPER, self.oper);
        b[8..14].copy_from_slice(&self.sender_hw);
        b[14..18].copy_from_slice(&self.sender_ip);
        b[18..24].copy_from_slice(&self.target_hw);
        b[24..28].copy_from_slice(&self.target_ip);
        Ok(ETH_IPV4_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUEST: [u8; 28] = [
        0, 1, 8, 0, 6, 4, 0, 1, 2, 0xfc, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
    ];

    #[test]
    fn arp_request() {
        let p = Packet::new_checked(&REQUEST).unwrap();
        assert_eq!(p.oper(), 1);
        assert_eq!(p.htype(), 1);
        assert_eq!(p.sender_hw_addr(), &[2, 0xfc, 0, 0, 0, 1]);
        assert_eq!(p.ipv4_addrs(), Some(([10, 0, 0, 1], [10, 0, 0, 2])));
    }

    #[test]
    fn arp_truncated_addresses() {
        assert_eq!(
            Packet::new_checked(&REQUEST[..27]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&REQUEST[..7]).unwrap_err(),
            Error::Truncated
        );
        // Non-IPv4 ARP: recognised, no IPv4 addresses.
        let mut b = REQUEST;
        b[2] = 0x86;
        b[3] = 0xdd;
        assert_eq!(Packet::new_checked(&b).unwrap().ipv4_addrs(), None);
    }

    #[test]
    fn repr_round_trip_and_reply() {
        let p = Packet::new_checked(&REQUEST[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.oper, oper::REQUEST);
        assert_eq!((r.sender_ip, r.target_ip), ([10, 0, 0, 1], [10, 0, 0, 2]));
        let mut b = [0u8; 28];
        assert_eq!(r.emit(&mut b), Ok(28));
        assert_eq!(b, REQUEST);
        assert_eq!(r.emit(&mut b[..27]), Err(Error::Truncated));
        let mut q = Packet::new_checked(&mut b[..]).unwrap();
        q.set_oper(oper::REPLY);
        assert_eq!(q.oper(), 2);
        assert_eq!(q.target_hw_addr(), &[0; 6]);
        let mut x = REQUEST;
        x[1] = 6; // htype 6 (IEEE 802): not Ethernet
        assert!(Repr::parse(&Packet::new_checked(&x[..]).unwrap()).is_none());
    }
}
