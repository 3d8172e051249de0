//! IPv6 fixed header (RFC 8200) and the extension headers the parser walks.

use super::{array, be16, be32, Error, Result};

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

/// The 40-byte IPv6 header. As for IPv4, whether the payload length fits the frame is the
/// caller's decision.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Packet<'a> {
    pub const HEADER_LEN: usize = field::HEADER_LEN;

    /// Errors: `Truncated`, `BadVersion`.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = Packet { buf };
        if p.version() != 6 {
            return Err(Error::BadVersion);
        }
        Ok(p)
    }

    pub fn version(&self) -> u8 {
        self.buf[field::VER_TC_FLOW] >> 4
    }

    pub fn traffic_class(&self) -> u8 {
        (be16(self.buf, field::VER_TC_FLOW) >> 4) as u8
    }

    pub fn flow_label(&self) -> u32 {
        be32(self.buf, field::VER_TC_FLOW) & 0x000F_FFFF
    }

    /// 0 means a jumbogram (RFC 2675) or unknown: the payload runs to the end of the frame.
    pub fn payload_len(&self) -> u16 {
        be16(self.buf, field::PAYLOAD_LEN)
    }

    pub fn next_header(&self) -> u8 {
        self.buf[field::NEXT_HEADER]
    }

    pub fn hop_limit(&self) -> u8 {
        self.buf[field::HOP_LIMIT]
    }

    pub fn src(&self) -> [u8; 16] {
        array(self.buf, field::SRC)
    }

    pub fn dst(&self) -> [u8; 16] {
        array(self.buf, field::DST)
    }
}

/// A hop-by-hop, routing, destination-options, fragment or AH extension header, with the length
/// its own length field gives (fragment: 8; AH: (len + 2) * 4; others: (len + 1) * 8).
#[derive(Clone, Copy, Debug)]
pub struct ExtHeader<'a> {
    buf: &'a [u8],
    kind: u8,
}

impl<'a> ExtHeader<'a> {
    /// `kind` is the next-header value that announced this header. Errors: `Truncated` when the
    /// buffer is shorter than 2 bytes (8 for a fragment header) or than the header's length.
    pub fn new_checked(buf: &'a [u8], kind: u8) -> Result<Self> {
        let min = if kind == ext::FRAGMENT { 8 } else { 2 };
        if buf.len() < min {
            return Err(Error::Truncated);
        }
        let h = ExtHeader { buf, kind };
        if buf.len() < h.header_len() {
            return Err(Error::Truncated);
        }
        Ok(h)
    }

    pub fn kind(&self) -> u8 {
        self.kind
    }

    pub fn next_header(&self) -> u8 {
        self.buf[0]
    }

    pub fn header_len(&self) -> usize {
        match self.kind {
            ext::FRAGMENT => 8,
            ext::AUTH => (self.buf[1] as usize + 2) * 4,
            _ => (self.buf[1] as usize + 1) * 8,
        }
    }

    /// Fragment header: offset in 8-byte units, more-fragments bit and identification.
    pub fn fragment(&self) -> Option<(u16, bool, u32)> {
        if self.kind != ext::FRAGMENT {
            return None;
        }
        let fo = be16(self.buf, 2);
        Some((fo >> 3, fo & 1 != 0, be32(self.buf, 4)))
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
}
