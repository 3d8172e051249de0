//! VXLAN header (RFC 7348).

use super::{be32, Error, Result};

mod field {
    pub const FLAGS: usize = 0;
    pub const VNI: usize = 4;
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

    pub fn flags(&self) -> u8 {
        self.buf[field::FLAGS]
    }

    /// The I flag: the VNI is valid. The parser records the VNI field whatever this says.
    pub fn vni_valid(&self) -> bool {
        self.flags() & 0x08 != 0
    }

    /// 24-bit VXLAN network identifier.
    pub fn vni(&self) -> u32 {
        be32(self.buf, field::VNI) >> 8
    }

    pub fn payload(&self) -> &'a [u8] {
        &self.buf[field::HEADER_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vni() {
        let b = [0x0c, 0x00, 0x00, 0x03, 0x00, 0x00, 0x2a, 0x00, 0xee];
        let h = Header::new_checked(&b).unwrap();
        assert!(h.vni_valid());
        assert_eq!(h.vni(), 42);
        assert_eq!(h.payload(), &[0xee]);
        assert!(Header::new_checked(&b[..7]).is_err());
    }
}
