//! Ethernet II header and IEEE 802.1Q / 802.1ad VLAN tags.

use super::{array, be16, Error, Result};

/// EtherType values the parser knows.
pub mod ether_type {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const IPV6: u16 = 0x86DD;
    pub const MPLS_UNICAST: u16 = 0x8847;
    pub const MPLS_MULTICAST: u16 = 0x8848;
    pub const QINQ: u16 = 0x88A8;
    pub const QINQ_OLD: u16 = 0x9100;
    pub const ECPRI: u16 = 0xAEFE;
    /// Values below this are IEEE 802.3 lengths, not EtherTypes.
    pub const MIN_ETHER_TYPE: u16 = 0x0600;

    /// 802.1Q, 802.1ad and the pre-standard 0x9100 QinQ tag.
    #[inline(always)]
    pub fn is_vlan(t: u16) -> bool {
        t == VLAN || t == QINQ || t == QINQ_OLD
    }
}

mod field {
    pub const DST: usize = 0;
    pub const SRC: usize = 6;
    pub const ETHER_TYPE: usize = 12;
    pub const HEADER_LEN: usize = 14;
}

/// An Ethernet II header (no FCS).
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    buf: &'a [u8],
}

impl<'a> Frame<'a> {
    pub const HEADER_LEN: usize = field::HEADER_LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Frame { buf })
    }

    pub fn dst(&self) -> [u8; 6] {
        array(self.buf, field::DST)
    }

    pub fn src(&self) -> [u8; 6] {
        array(self.buf, field::SRC)
    }

    pub fn ether_type(&self) -> u16 {
        be16(self.buf, field::ETHER_TYPE)
    }

    pub fn payload(&self) -> &'a [u8] {
        &self.buf[field::HEADER_LEN..]
    }
}

mod vlan_field {
    pub const TCI: usize = 0;
    pub const ETHER_TYPE: usize = 2;
    pub const LEN: usize = 4;
}

/// One VLAN tag as it follows a VLAN TPID: TCI and the next EtherType.
#[derive(Clone, Copy, Debug)]
pub struct VlanTag<'a> {
    buf: &'a [u8],
}

impl<'a> VlanTag<'a> {
    pub const LEN: usize = vlan_field::LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < vlan_field::LEN {
            return Err(Error::Truncated);
        }
        Ok(VlanTag { buf })
    }

    /// PCP (3 bits) | DEI (1) | VID (12).
    pub fn tci(&self) -> u16 {
        be16(self.buf, vlan_field::TCI)
    }

    pub fn vid(&self) -> u16 {
        self.tci() & 0x0FFF
    }

    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    pub fn ether_type(&self) -> u16 {
        be16(self.buf, vlan_field::ETHER_TYPE)
    }
}

/// A VLAN tag's fields, for building frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanRepr {
    pub tci: u16,
    pub ether_type: u16,
}

impl VlanRepr {
    pub fn parse(tag: &VlanTag<'_>) -> Self {
        VlanRepr {
            tci: tag.tci(),
            ether_type: tag.ether_type(),
        }
    }

    pub fn emit(&self) -> [u8; 4] {
        let t = self.tci.to_be_bytes();
        let e = self.ether_type.to_be_bytes();
        [t[0], t[1], e[0], e[1]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethernet_fields() {
        let b = [
            1, 2, 3, 4, 5, 6, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0x08, 0x00, 0x45,
        ];
        let f = Frame::new_checked(&b).unwrap();
        assert_eq!(f.dst(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(f.src(), [0xa, 0xb, 0xc, 0xd, 0xe, 0xf]);
        assert_eq!(f.ether_type(), ether_type::IPV4);
        assert_eq!(f.payload(), &[0x45]);
        assert_eq!(Frame::new_checked(&b[..13]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn vlan_tag_fields_and_repr() {
        let b = [0xa0, 0x64, 0x86, 0xdd];
        let t = VlanTag::new_checked(&b).unwrap();
        assert_eq!(t.vid(), 100);
        assert_eq!(t.pcp(), 5);
        assert_eq!(t.ether_type(), ether_type::IPV6);
        let r = VlanRepr::parse(&t);
        assert_eq!(r.emit(), b);
        assert!(VlanTag::new_checked(&b[..3]).is_err());
        assert!(
            ether_type::is_vlan(0x9100)
                && ether_type::is_vlan(0x88a8)
                && !ether_type::is_vlan(0x0800)
        );
    }
}
