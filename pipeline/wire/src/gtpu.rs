//! GTP-U header (3GPP TS 29.281) and its extension headers.

use super::{be16, be32, Error, Result};

mod field {
    pub const FLAGS: usize = 0;
    pub const MSG_TYPE: usize = 1;
    pub const LENGTH: usize = 2;
    pub const TEID: usize = 4;
    pub const SEQ: usize = 8;
    pub const NPDU: usize = 10;
    pub const NEXT_EXT: usize = 11;
    pub const MIN_HEADER_LEN: usize = 8;
    pub const OPT_HEADER_LEN: usize = 12;
}

/// Offset of the length field (for error offsets).
pub const LENGTH_FIELD: usize = field::LENGTH;
/// Message type of a T-PDU (user data: an IP packet follows).
pub const MSG_T_PDU: u8 = 0xFF;

const FLAG_E: u8 = 0x04;
const FLAG_S: u8 = 0x02;
const FLAG_PN: u8 = 0x01;

/// The GTP-U header: 8 bytes, plus 4 (sequence number, N-PDU number, next extension type) when
/// any of E, S, PN is set. Errors: `Truncated`, `BadVersion` (version != 1 or PT != 1).
#[derive(Clone, Copy, Debug)]
pub struct Header<'a> {
    buf: &'a [u8],
}

impl<'a> Header<'a> {
    pub const MIN_HEADER_LEN: usize = field::MIN_HEADER_LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < field::MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let h = Header { buf };
        if h.version() != 1 || h.flags() & 0x10 == 0 {
            return Err(Error::BadVersion);
        }
        if buf.len() < h.header_len() {
            return Err(Error::Truncated);
        }
        Ok(h)
    }

    pub fn flags(&self) -> u8 {
        self.buf[field::FLAGS]
    }

    pub fn version(&self) -> u8 {
        self.flags() >> 5
    }

    pub fn msg_type(&self) -> u8 {
        self.buf[field::MSG_TYPE]
    }

    /// Bytes after the 8-byte mandatory part (optional fields, extensions and the T-PDU).
    pub fn length(&self) -> u16 {
        be16(self.buf, field::LENGTH)
    }

    pub fn teid(&self) -> u32 {
        be32(self.buf, field::TEID)
    }

    fn has_optional(&self) -> bool {
        self.flags() & (FLAG_E | FLAG_S | FLAG_PN) != 0
    }

    /// 8, or 12 with the optional fields.
    pub fn header_len(&self) -> usize {
        if self.has_optional() {
            field::OPT_HEADER_LEN
        } else {
            field::MIN_HEADER_LEN
        }
    }

    pub fn seq(&self) -> Option<u16> {
        (self.flags() & FLAG_S != 0).then(|| be16(self.buf, field::SEQ))
    }

    pub fn npdu(&self) -> Option<u8> {
        (self.flags() & FLAG_PN != 0).then(|| self.buf[field::NPDU])
    }

    /// The first extension header's type when E is set (0 = none).
    pub fn next_ext_type(&self) -> u8 {
        if self.flags() & FLAG_E != 0 {
            self.buf[field::NEXT_EXT]
        } else {
            0
        }
    }
}

/// One GTP-U extension header: length in 4-byte units, content, next extension type.
/// Errors: `BadLength` (length 0), `Truncated`.
#[derive(Clone, Copy, Debug)]
pub struct ExtHeader<'a> {
    buf: &'a [u8],
}

impl<'a> ExtHeader<'a> {
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        let Some(&units) = buf.first() else {
            return Err(Error::Truncated);
        };
        if units == 0 {
            return Err(Error::BadLength);
        }
        if buf.len() < units as usize * 4 {
            return Err(Error::Truncated);
        }
        Ok(ExtHeader { buf })
    }

    pub fn header_len(&self) -> usize {
        self.buf[0] as usize * 4
    }

    pub fn next_ext_type(&self) -> u8 {
        self.buf[self.header_len() - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_t_pdu() {
        let b = [0x30, 0xff, 0x00, 0x5c, 0x00, 0x00, 0x12, 0x34];
        let h = Header::new_checked(&b).unwrap();
        assert_eq!(h.msg_type(), MSG_T_PDU);
        assert_eq!(h.length(), 92);
        assert_eq!(h.teid(), 0x1234);
        assert_eq!(h.header_len(), 8);
        assert_eq!(h.next_ext_type(), 0);
        assert_eq!(h.seq(), None);
        assert!(Header::new_checked(&b[..7]).is_err());
    }

    #[test]
    fn optional_fields_and_extension() {
        // E and S set, seq 7, next extension 0x85 (PDU session container), one 4-byte extension.
        let b = [
            0x36, 0xff, 0x00, 0x08, 0, 0, 0, 1, 0x00, 0x07, 0x00, 0x85, 0x01, 0x10, 0x09, 0x00,
        ];
        let h = Header::new_checked(&b).unwrap();
        assert_eq!(h.header_len(), 12);
        assert_eq!(h.seq(), Some(7));
        assert_eq!(h.next_ext_type(), 0x85);
        let e = ExtHeader::new_checked(&b[12..]).unwrap();
        assert_eq!(e.header_len(), 4);
        assert_eq!(e.next_ext_type(), 0);
        assert_eq!(Header::new_checked(&b[..11]).unwrap_err(), Error::Truncated);
        assert_eq!(
            ExtHeader::new_checked(&b[12..15]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            ExtHeader::new_checked(&[0, 0, 0, 0]).unwrap_err(),
            Error::BadLength
        );
        assert_eq!(ExtHeader::new_checked(&[]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn wrong_version() {
        let b = [0x50, 0xff, 0, 0, 0, 0, 0, 0];
        assert_eq!(Header::new_checked(&b).unwrap_err(), Error::BadVersion);
        let b = [0x20, 0xff, 0, 0, 0, 0, 0, 0]; // GTP' (PT = 0)
        assert_eq!(Header::new_checked(&b).unwrap_err(), Error::BadVersion);
    }
}
