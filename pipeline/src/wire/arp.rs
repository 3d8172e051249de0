//! ARP (RFC 826).

use super::{be16, Error, Result};

mod field {
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const FIXED_LEN: usize = 8;
}

/// An ARP packet; `new_checked` requires the fixed part and all four addresses.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Packet<'a> {
    pub const FIXED_LEN: usize = field::FIXED_LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < field::FIXED_LEN {
            return Err(Error::Truncated);
        }
        let p = Packet { buf };
        if buf.len() < p.total_len() {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    pub fn htype(&self) -> u16 {
        be16(self.buf, field::HTYPE)
    }

    pub fn ptype(&self) -> u16 {
        be16(self.buf, field::PTYPE)
    }

    pub fn hlen(&self) -> u8 {
        self.buf[field::HLEN]
    }

    pub fn plen(&self) -> u8 {
        self.buf[field::PLEN]
    }

    pub fn oper(&self) -> u16 {
        be16(self.buf, field::OPER)
    }

    /// Fixed part plus sender and target hardware and protocol addresses.
    pub fn total_len(&self) -> usize {
        field::FIXED_LEN + 2 * (self.hlen() as usize + self.plen() as usize)
    }

    fn proto_addr(&self, at: usize) -> &'a [u8] {
        &self.buf[at..at + self.plen() as usize]
    }

    pub fn sender_hw_addr(&self) -> &'a [u8] {
        &self.buf[field::FIXED_LEN..field::FIXED_LEN + self.hlen() as usize]
    }

    pub fn sender_proto_addr(&self) -> &'a [u8] {
        self.proto_addr(field::FIXED_LEN + self.hlen() as usize)
    }

    pub fn target_proto_addr(&self) -> &'a [u8] {
        self.proto_addr(field::FIXED_LEN + 2 * self.hlen() as usize + self.plen() as usize)
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
}
