//! ICMP (RFC 792) and ICMPv6 (RFC 4443) share the first 8 bytes' layout: type, code, checksum,
//! 4 bytes of type-specific header.

use super::{be16, Error, Result};

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const REST: usize = 4;
    pub const HEADER_LEN: usize = 8;
}

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

    pub fn msg_type(&self) -> u8 {
        self.buf[field::TYPE]
    }

    pub fn code(&self) -> u8 {
        self.buf[field::CODE]
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }

    /// Echo identifier / first half of the type-specific word.
    pub fn rest_hi(&self) -> u16 {
        be16(self.buf, field::REST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_request() {
        let b = [8, 0, 0xf7, 0xff, 0x12, 0x34, 0, 1];
        let h = Header::new_checked(&b).unwrap();
        assert_eq!((h.msg_type(), h.code()), (8, 0));
        assert_eq!(h.checksum(), 0xf7ff);
        assert_eq!(h.rest_hi(), 0x1234);
        assert!(Header::new_checked(&b[..7]).is_err());
    }
}
