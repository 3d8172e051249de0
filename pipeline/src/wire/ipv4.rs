//! IPv4 header (RFC 791).

use super::{array, be16, Error, Result};

mod field {
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const TOTAL_LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
    pub const MIN_HEADER_LEN: usize = 20;
}

/// Offset of the total-length field (for error offsets).
pub const TOTAL_LEN_FIELD: usize = field::TOTAL_LEN;

/// An IPv4 header. `new_checked` validates the header itself (version, IHL, options present,
/// total length >= header length); whether the total length fits the frame is the caller's
/// decision (see `stage::parse`), so truncated captures still show their addresses.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Packet<'a> {
    pub const MIN_HEADER_LEN: usize = field::MIN_HEADER_LEN;

    /// Errors: `Truncated` (fixed part or options cut), `BadVersion`, `BadHeaderLen` (IHL < 5),
    /// `BadLength` (total length < IHL * 4).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < field::MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = Packet { buf };
        if p.version() != 4 {
            return Err(Error::BadVersion);
        }
        if p.header_len() < field::MIN_HEADER_LEN {
            return Err(Error::BadHeaderLen);
        }
        if (p.total_len() as usize) < p.header_len() {
            return Err(Error::BadLength);
        }
        if buf.len() < p.header_len() {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    pub fn version(&self) -> u8 {
        self.buf[field::VER_IHL] >> 4
    }

    /// IHL * 4.
    pub fn header_len(&self) -> usize {
        (self.buf[field::VER_IHL] & 0x0F) as usize * 4
    }

    pub fn tos(&self) -> u8 {
        self.buf[field::TOS]
    }

    pub fn total_len(&self) -> u16 {
        be16(self.buf, field::TOTAL_LEN)
    }

    pub fn ident(&self) -> u16 {
        be16(self.buf, field::IDENT)
    }

    pub fn dont_frag(&self) -> bool {
        self.buf[field::FLAGS_FRAG] & 0x40 != 0
    }

    pub fn more_frags(&self) -> bool {
        self.buf[field::FLAGS_FRAG] & 0x20 != 0
    }

    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        be16(self.buf, field::FLAGS_FRAG) & 0x1FFF
    }

    pub fn ttl(&self) -> u8 {
        self.buf[field::TTL]
    }

    pub fn protocol(&self) -> u8 {
        self.buf[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }

    pub fn src(&self) -> [u8; 4] {
        array(self.buf, field::SRC)
    }

    pub fn dst(&self) -> [u8; 4] {
        array(self.buf, field::DST)
    }

    /// Options (may be empty).
    pub fn options(&self) -> &'a [u8] {
        &self.buf[field::MIN_HEADER_LEN..self.header_len()]
    }
}

/// The header fields, for building test frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub protocol: u8,
    pub ttl: u8,
    pub tos: u8,
    pub ident: u16,
    pub more_frags: bool,
    pub frag_offset: u16,
    /// Bytes after the 20-byte header (options are not modelled).
    pub payload_len: u16,
}

impl Repr {
    pub fn parse(p: &Packet<'_>) -> Self {
        Repr {
            src: p.src(),
            dst: p.dst(),
            protocol: p.protocol(),
            ttl: p.ttl(),
            tos: p.tos(),
            ident: p.ident(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
            payload_len: p.total_len().saturating_sub(p.header_len() as u16),
        }
    }

    /// The 20-byte header (checksum left 0: the parser does not verify it).
    pub fn emit(&self) -> [u8; 20] {
        let mut h = [0u8; 20];
        h[0] = 0x45;
        h[1] = self.tos;
        h[2..4].copy_from_slice(&(20 + self.payload_len).to_be_bytes());
        h[4..6].copy_from_slice(&self.ident.to_be_bytes());
        let ff = (self.frag_offset & 0x1FFF) | if self.more_frags { 0x2000 } else { 0 };
        h[6..8].copy_from_slice(&ff.to_be_bytes());
        h[8] = self.ttl;
        h[9] = self.protocol;
        h[12..16].copy_from_slice(&self.src);
        h[16..20].copy_from_slice(&self.dst);
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 10.0.5.1 -> 10.0.5.2, SCTP, IHL 6 with a record-route option, total length 36.
    const WITH_OPTIONS: [u8; 24] = [
        0x46, 0x00, 0x00, 0x24, 0x00, 0x01, 0x00, 0x00, 0x40, 0x84, 0x00, 0x00, 10, 0, 5, 1, 10, 0,
        5, 2, 0x07, 0x03, 0x04, 0x00,
    ];

    #[test]
    fn fields_and_options() {
        let p = Packet::new_checked(&WITH_OPTIONS).unwrap();
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.total_len(), 36);
        assert_eq!(p.protocol(), 132);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.src(), [10, 0, 5, 1]);
        assert_eq!(p.dst(), [10, 0, 5, 2]);
        assert_eq!(p.options(), &[7, 3, 4, 0]);
        assert!(!p.more_frags());
    }

    #[test]
    fn header_errors() {
        assert_eq!(
            Packet::new_checked(&WITH_OPTIONS[..19]).unwrap_err(),
            Error::Truncated
        );
        // Options cut.
        assert_eq!(
            Packet::new_checked(&WITH_OPTIONS[..22]).unwrap_err(),
            Error::Truncated
        );
        let mut b = WITH_OPTIONS;
        b[0] = 0x43;
        assert_eq!(Packet::new_checked(&b).unwrap_err(), Error::BadHeaderLen);
        b[0] = 0x65;
        assert_eq!(Packet::new_checked(&b).unwrap_err(), Error::BadVersion);
        let mut b = WITH_OPTIONS;
        b[3] = 20; // total length < 24-byte header
        assert_eq!(Packet::new_checked(&b).unwrap_err(), Error::BadLength);
    }

    #[test]
    fn fragment_fields_and_repr_round_trip() {
        let r = Repr {
            src: [1, 2, 3, 4],
            dst: [5, 6, 7, 8],
            protocol: 17,
            ttl: 9,
            tos: 0xb8,
            ident: 0x1234,
            more_frags: true,
            frag_offset: 125,
            payload_len: 1000,
        };
        let h = r.emit();
        let p = Packet::new_checked(&h).unwrap();
        assert_eq!(p.frag_offset(), 125);
        assert!(p.more_frags());
        assert_eq!(Repr::parse(&p), r);
    }
}
