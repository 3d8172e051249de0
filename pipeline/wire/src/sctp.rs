//! SCTP common header (RFC 9260).

use super::{be16, be32, Error, Result};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const VTAG: usize = 4;
    pub const HEADER_LEN: usize = 12;
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

    pub fn src_port(&self) -> u16 {
        be16(self.buf, field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.buf, field::DST_PORT)
    }

    pub fn verification_tag(&self) -> u32 {
        be32(self.buf, field::VTAG)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports() {
        let b = [0, 17, 0, 18, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0];
        let h = Header::new_checked(&b).unwrap();
        assert_eq!((h.src_port(), h.dst_port()), (17, 18));
        assert_eq!(h.verification_tag(), 0xdead_beef);
        assert!(Header::new_checked(&b[..11]).is_err());
    }
}
