//! UDP header (RFC 768).

use super::{be16, Error, Result};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
    pub const HEADER_LEN: usize = 8;
}

/// Offset of the length field (for error offsets).
pub const LENGTH_FIELD: usize = field::LENGTH;

/// The 8-byte UDP header. The length field is checked against the IP packet by the caller
/// (it legitimately exceeds a first fragment).
#[derive(Clone, Copy, Debug)]
pub struct Header<'a> {
    buf: &'a [u8],
}

impl<'a> Header<'a> {
    pub const HEADER_LEN: usize = field::HEADER_LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Header { buf })
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buf, field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.buf, field::DST_PORT)
    }

    /// Header + payload length as the header claims.
    pub fn length(&self) -> u16 {
        be16(self.buf, field::LENGTH)
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let b = [0xc0, 0x00, 0x12, 0xb5, 0x00, 0x86, 0xab, 0xcd];
        let h = Header::new_checked(&b).unwrap();
        assert_eq!((h.src_port(), h.dst_port()), (49152, 4789));
        assert_eq!(h.length(), 134);
        assert_eq!(h.checksum(), 0xabcd);
        assert_eq!(Header::new_checked(&b[..7]).unwrap_err(), Error::Truncated);
    }
}
