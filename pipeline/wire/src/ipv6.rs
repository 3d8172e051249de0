//! IPv6 fixed header (RFC 8200) and the extension headers the parser walks.

use super::{array, be16, be32, emit_buf, put16, put32, Error, Result};

/// Next-header values of the extension headers walked by the parser.
pub mod ext {
    pub const HOP_BY_HOP: u8 = 0;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const AUTH: u8 = 51;
    pub const DEST_OPTS: u8 = 60;

    #[inline(always)]
    pub fn is_walked(nh: u8) -> bool {
        matches!(nh, HOP_BY_HOP | ROUTING | FRAGMENT | AUTH | DEST_OPTS)
    }
}

mod field {
    pub const VER_TC_FLOW: usize = 0;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;
    pub const HEADER_LEN: usize = 40;
}

/// Offset of the payload-length field (for error offsets).
pub const PAYLOAD_LEN_FIELD: usize = field::PAYLOAD_LEN;

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = field::HEADER_LEN;

/// The 40-byte IPv6 header. As for IPv4, whether the payload length fits the frame is the
/// caller's decision.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl Packet<&'static [u8]> {
    pub const HEADER_LEN: usize = field::HEADER_LEN;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Errors: `Truncated`, `BadVersion`.
    pub fn new_checked(buf: T) -> Result<Self> {
        if buf.as_ref().len() < field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = Packet { buf };
        if p.version() != 6 {
            return Err(Error::BadVersion);
        }
        Ok(p)
    }

    pub fn into_inner(self) -> T {
        self.buf
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    pub fn version(&self) -> u8 {
        self.b()[field::VER_TC_FLOW] >> 4
    }

    pub fn traffic_class(&self) -> u8 {
        (be16(self.b(), field::VER_TC_FLOW) >> 4) as u8
    }

    /// The DSCP: the high 6 bits of the traffic class (RFC 2474).
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    pub fn flow_label(&self) -> u32 {
        be32(self.b(), field::VER_TC_FLOW) & 0x000F_FFFF
    }

    /// 0 means a jumbogram (RFC 2675) or unknown: the payload runs to the end of the frame.
    pub fn payload_len(&self) -> u16 {
        be16(self.b(), field::PAYLOAD_LEN)
    }

    pub fn next_header(&self) -> u8 {
        self.b()[field::NEXT_HEADER]
    }

    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOP_LIMIT]
    }

    pub fn src(&self) -> [u8; 16] {
        array(self.b(), field::SRC)
    }

    pub fn dst(&self) -> [u8; 16] {
        array(self.b(), field::DST)
    }
}

/// IPv6 has no header checksum: these setters are all a rewrite needs (the hop limit and the
/// traffic class are not in the TCP / UDP / ICMPv6 pseudo header).
impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }

    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = be16(self.b(), field::VER_TC_FLOW);
        put16(
            self.bm(),
            field::VER_TC_FLOW,
            (w & 0xF00F) | (u16::from(tc) << 4),
        );
    }

    /// Sets the DSCP (low 6 bits of `dscp`), keeping the ECN bits.
    pub fn set_dscp(&mut self, dscp: u8) {
        let tc = ((dscp & 0x3F) << 2) | (self.traffic_class() & 0x03);
        self.set_traffic_class(tc);
    }

    pub fn set_flow_label(&mut self, fl: u32) {
        let w = be32(self.b(), field::VER_TC_FLOW);
        put32(
            self.bm(),
            field::VER_TC_FLOW,
            (w & 0xFFF0_0000) | (fl & 0x000F_FFFF),
        );
    }

    pub fn set_payload_len(&mut self, len: u16) {
        put16(self.bm(), field::PAYLOAD_LEN, len);
    }

    pub fn set_next_header(&mut self, nh: u8) {
        self.bm()[field::NEXT_HEADER] = nh;
    }

    pub fn set_hop_limit(&mut self, h: u8) {
        self.bm()[field::HOP_LIMIT] = h;
    }

    pub fn set_src(&mut self, a: [u8; 16]) {
        self.bm()[field::SRC..field::SRC + 16].copy_from_slice(&a);
    }

    pub fn set_dst(&mut self, a: [u8; 16]) {
        self.bm()[field::DST..field::DST + 16].copy_from_slice(&a);
    }
}

/// The fixed header's fields, for building frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub next_header: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    /// 20 bits.
    pub flow_label: u32,
    pub payload_len: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Self {
        Repr {
            src: p.src(),
            dst: p.dst(),
            next_header: p.next_header(),
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
            payload_len: p.payload_len(),
        }
    }

    /// Writes the 40-byte header at the start of `buf`. Errors: `Truncated` when shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let h = emit_buf(buf, field::HEADER_LEN)?;
        let w = (6u32 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0xF_FFFF);
        put32(h, field::VER_TC_FLOW, w);
        put16(h, field::PAYLOAD_LEN, self.payload_len);
        h[field::NEXT_HEADER] = self.next_header;
        h[field::HOP_LIMIT] = self.hop_limit;
        h[field::SRC..field::SRC + 16].copy_from_slice(&self.src);
        h[field::DST..field::DST + 16].copy_from_slice(&self.dst);
        Ok(field::HEADER_LEN)
    }
}

/// A hop-by-hop, routing, destination-options, fragment or AH extension header, with the length
/// its own length field gives (fragment: 8; AH: (len + 2) * 4; others: (len + 1) * 8).
#[derive(Clone, Copy, Debug)]
pub struct ExtHeader<T: AsRef<[u8]>> {
    buf: T,
    kind: u8,
}

impl<T: AsRef<[u8]>> ExtHeader<T> {
    /// `kind` is the next-header value that announced this header. Errors: `Truncated` when the
    /// buffer is shorter than 2 bytes (8 for a fragment header) or than the header's length.
    pub fn new_checked(buf: T, kind: u8) -> Result<Self> {
        let min = if kind == ext::FRAGMENT { 8 } else { 2 };
        let len = buf.as_ref().len();
        if len < min {
            return Err(Error::Truncated);
        }
        let h = ExtHeader { buf, kind };
        if len < h.header_len() {
            return Err(Error::Truncated);
        }
        Ok(h)
    }

    pub fn kind(&self) -> u8 {
        self.kind
    }

    pub fn next_header(&self) -> u8 {
        self.buf.as_ref()[0]
    }

    pub fn header_len(&self) -> usize {
        match self.kind {
            ext::FRAGMENT => 8,
            ext::AUTH => (self.buf.as_ref()[1] as usize + 2) * 4,
            _ => (self.buf.as_ref()[1] as usize + 1) * 8,
        }
    }

    /// Fragment header: offset in 8-byte units, more-fragments bit and identification.
    pub fn fragment(&self) -> Option<(u16, bool, u32)> {
        if self.kind != ext::FRAGMENT {
            return None;
        }
        let fo = be16(self.buf.as_ref(), 2);
        Some((fo >> 3, fo & 1 != 0, be32(self.buf.as_ref(), 4)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(next: u8, plen: u16) -> [u8; 40] {
        let mut h = [0u8; 40];
        h[0] = 0x6b; // version 6, traffic class 0xb8
        h[1] = 0x81;
        h[2] = 0x23;
        h[3] = 0x45;
        h[4..6].copy_from_slice(&plen.to_be_bytes());
        h[6] = next;
        h[7] = 64;
        h[8] = 0x20;
        h[9] = 0x01;
        h[23] = 1;
        h[24] = 0x20;
        h[25] = 0x01;
        h[39] = 2;
        h
    }

    #[test]
    fn fixed_header() {
        let b = header(6, 20);
        let p = Packet::new_checked(&b).unwrap();
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 20);
        assert_eq!(p.next_header(), 6);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src()[15], 1);
        assert_eq!(p.dst()[15], 2);
        assert_eq!(Packet::new_checked(&b[..39]).unwrap_err(), Error::Truncated);
        let mut b = b;
        b[0] = 0x4b;
        assert_eq!(Packet::new_checked(&b).unwrap_err(), Error::BadVersion);
    }

    #[test]
    fn extension_headers() {
        // Hop-by-hop, length 1 => 16 bytes.
        let hbh = [60u8, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let h = ExtHeader::new_checked(&hbh, ext::HOP_BY_HOP).unwrap();
        assert_eq!(h.header_len(), 16);
        assert_eq!(h.next_header(), 60);
        assert!(h.fragment().is_none());
        assert_eq!(
            ExtHeader::new_checked(&hbh[..15], ext::HOP_BY_HOP).unwrap_err(),
            Error::Truncated
        );
        // AH, payload length 4 => 24 bytes.
        let mut ah = [0u8; 24];
        ah[0] = 6;
        ah[1] = 4;
        assert_eq!(
            ExtHeader::new_checked(&ah, ext::AUTH).unwrap().header_len(),
            24
        );
        assert!(ExtHeader::new_checked(&ah[..23], ext::AUTH).is_err());
        // Fragment: offset 152 (1216 bytes), M=1, id 0x0521c6bf.
        let frag = [17u8, 0, 0x04, 0xc1, 0x05, 0x21, 0xc6, 0xbf];
        let f = ExtHeader::new_checked(&frag, ext::FRAGMENT).unwrap();
        assert_eq!(f.fragment(), Some((152, true, 0x0521_c6bf)));
        assert!(ExtHeader::new_checked(&frag[..7], ext::FRAGMENT).is_err());
        assert!(ext::is_walked(43) && !ext::is_walked(6));
    }

    #[test]
    fn setters_and_repr_round_trip() {
        let mut b = header(17, 8);
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.set_hop_limit(1);
        p.set_dscp(10);
        assert_eq!((p.hop_limit(), p.dscp(), p.traffic_class() & 3), (1, 10, 0));
        assert_eq!(p.flow_label(), 0x12345, "the flow label is kept");
        p.set_flow_label(0xFFFFF);
        assert_eq!((p.flow_label(), p.version(), p.dscp()), (0xFFFFF, 6, 10));
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap());
        let mut out = [0u8; 40];
        assert_eq!(r.emit(&mut out), Ok(40));
        assert_eq!(out, b);
        assert_eq!(r.emit(&mut out[..39]), Err(Error::Truncated));
    }
}
