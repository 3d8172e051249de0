//! Ethernet II header and IEEE 802.1Q / 802.1ad VLAN tags.

use super::{array, be16, emit_buf, put16, Error, Result};

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

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = field::HEADER_LEN;

/// An Ethernet II header (no FCS) over a buffer that starts with it.
#[derive(Clone, Copy, Debug)]
pub struct Frame<T: AsRef<[u8]>> {
    buf: T,
}

impl Frame<&'static [u8]> {
    pub const HEADER_LEN: usize = field::HEADER_LEN;
}

impl<T: AsRef<[u8]>> Frame<T> {
    pub fn new_checked(buf: T) -> Result<Self> {
        if buf.as_ref().len() < field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Frame { buf })
    }

    pub fn into_inner(self) -> T {
        self.buf
    }

    pub fn dst(&self) -> [u8; 6] {
        array(self.buf.as_ref(), field::DST)
    }

    pub fn src(&self) -> [u8; 6] {
        array(self.buf.as_ref(), field::SRC)
    }

    pub fn ether_type(&self) -> u16 {
        be16(self.buf.as_ref(), field::ETHER_TYPE)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Frame<&'a T> {
    /// Everything after the 14-byte header, borrowed for as long as the frame.
    pub fn payload(&self) -> &'a [u8] {
        &self.buf.as_ref()[field::HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    pub fn set_dst(&mut self, mac: [u8; 6]) {
        self.buf.as_mut()[field::DST..field::DST + 6].copy_from_slice(&mac);
    }

    pub fn set_src(&mut self, mac: [u8; 6]) {
        self.buf.as_mut()[field::SRC..field::SRC + 6].copy_from_slice(&mac);
    }

    /// Exchanges source and destination (l2fwd's `mac: swap`).
    pub fn swap_macs(&mut self) {
        let (d, s) = (self.dst(), self.src());
        self.set_dst(s);
        self.set_src(d);
    }

    pub fn set_ether_type(&mut self, t: u16) {
        put16(self.buf.as_mut(), field::ETHER_TYPE, t);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut()[field::HEADER_LEN..]
    }
}

/// The Ethernet II header's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub ether_type: u16,
}

impl Repr {
    pub const LEN: usize = field::HEADER_LEN;

    pub fn parse<T: AsRef<[u8]>>(f: &Frame<T>) -> Self {
        Repr {
            dst: f.dst(),
            src: f.src(),
            ether_type: f.ether_type(),
        }
    }

    /// Writes the 14 bytes at the start of `buf`. Errors: `Truncated` when it is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = emit_buf(buf, field::HEADER_LEN)?;
        b[field::DST..field::DST + 6].copy_from_slice(&self.dst);
        b[field::SRC..field::SRC + 6].copy_from_slice(&self.src);
        put16(b, field::ETHER_TYPE, self.ether_type);
        Ok(field::HEADER_LEN)
    }
}

mod vlan_field {
    pub const TCI: usize = 0;
    pub const ETHER_TYPE: usize = 2;
    pub const LEN: usize = 4;
}

/// One VLAN tag as it follows a VLAN TPID: TCI and the next EtherType.
#[derive(Clone, Copy, Debug)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buf: T,
}

impl VlanTag<&'static [u8]> {
    pub const LEN: usize = vlan_field::LEN;
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    pub fn new_checked(buf: T) -> Result<Self> {
        if buf.as_ref().len() < vlan_field::LEN {
            return Err(Error::Truncated);
        }
        Ok(VlanTag { buf })
    }

    /// PCP (3 bits) | DEI (1) | VID (12).
    pub fn tci(&self) -> u16 {
        be16(self.buf.as_ref(), vlan_field::TCI)
    }

    pub fn vid(&self) -> u16 {
        self.tci() & 0x0FFF
    }

    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    pub fn ether_type(&self) -> u16 {
        be16(self.buf.as_ref(), vlan_field::ETHER_TYPE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    pub fn set_tci(&mut self, tci: u16) {
        put16(self.buf.as_mut(), vlan_field::TCI, tci);
    }

    /// Sets the VLAN id (low 12 bits of `vid`), keeping PCP and DEI.
    pub fn set_vid(&mut self, vid: u16) {
        self.set_tci((self.tci() & 0xF000) | (vid & 0x0FFF));
    }

    /// Sets the priority (low 3 bits of `pcp`), keeping DEI and VID.
    pub fn set_pcp(&mut self, pcp: u8) {
        self.set_tci((self.tci() & 0x1FFF) | (u16::from(pcp & 7) << 13));
    }

    pub fn set_ether_type(&mut self, t: u16) {
        put16(self.buf.as_mut(), vlan_field::ETHER_TYPE, t);
    }
}

/// A VLAN tag's fields, for building frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanRepr {
    pub tci: u16,
    pub ether_type: u16,
}

impl VlanRepr {
    pub const LEN: usize = vlan_field::LEN;

    pub fn parse<T: AsRef<[u8]>>(tag: &VlanTag<T>) -> Self {
        VlanRepr {
            tci: tag.tci(),
            ether_type: tag.ether_type(),
        }
    }

    /// Writes the 4 bytes at the start of `buf`. Errors: `Truncated` when it is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = emit_buf(buf, vlan_field::LEN)?;
        put16(b, vlan_field::TCI, self.tci);
        put16(b, vlan_field::ETHER_TYPE, self.ether_type);
        Ok(vlan_field::LEN)
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
        let mut out = [0u8; 4];
        assert_eq!(r.emit(&mut out), Ok(4));
        assert_eq!(out, b);
        assert_eq!(r.emit(&mut out[..3]), Err(Error::Truncated));
        assert!(VlanTag::new_checked(&b[..3]).is_err());
        assert!(
            ether_type::is_vlan(0x9100)
                && ether_type::is_vlan(0x88a8)
                && !ether_type::is_vlan(0x0800)
        );
    }

    #[test]
    fn setters_write_only_their_field() {
        let mut b = [
            1, 2, 3, 4, 5, 6, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0x08, 0x00, 0x45,
        ];
        let mut f = Frame::new_checked(&mut b[..]).unwrap();
        f.swap_macs();
        f.set_ether_type(ether_type::IPV6);
        f.payload_mut()[0] = 0x60;
        assert_eq!(
            b,
            [0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 1, 2, 3, 4, 5, 6, 0x86, 0xdd, 0x60]
        );
        let r = Repr::parse(&Frame::new_checked(&b[..]).unwrap());
        let mut out = [0u8; 14];
        assert_eq!(r.emit(&mut out), Ok(14));
        assert_eq!(out[..], b[..14]);
        assert_eq!(r.emit(&mut out[..13]), Err(Error::Truncated));
        assert!(Frame::new_checked(&mut b[..13]).is_err());
    }

    #[test]
    fn vlan_setters_keep_the_other_bits() {
        // PCP 5, DEI 1, VID 100.
        let mut b = [0xb0, 0x64, 0x08, 0x00];
        let mut t = VlanTag::new_checked(&mut b[..]).unwrap();
        t.set_vid(0xFFF);
        assert_eq!((t.pcp(), t.vid(), t.tci() & 0x1000), (5, 0xFFF, 0x1000));
        t.set_pcp(2);
        assert_eq!((t.pcp(), t.vid(), t.tci() & 0x1000), (2, 0xFFF, 0x1000));
        t.set_ether_type(ether_type::IPV6);
        assert_eq!(b, [0x5f, 0xff, 0x86, 0xdd]);
    }
}
