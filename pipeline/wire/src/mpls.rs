//! MPLS label stack entry (RFC 3032).

use super::{be32, Error, Result};

/// One 4-byte label stack entry.
#[derive(Clone, Copy, Debug)]
pub struct Lse<'a> {
    buf: &'a [u8],
}

impl<'a> Lse<'a> {
    pub const LEN: usize = 4;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < Self::LEN {
            return Err(Error::Truncated);
        }
        Ok(Lse { buf })
    }

    /// label << 12 | tc << 9 | s << 8 | ttl.
    pub fn raw(&self) -> u32 {
        be32(self.buf, 0)
    }

    pub fn label(&self) -> u32 {
        self.raw() >> 12
    }

    pub fn tc(&self) -> u8 {
        ((self.raw() >> 9) & 7) as u8
    }

    pub fn bottom_of_stack(&self) -> bool {
        self.raw() & 0x100 != 0
    }

    pub fn ttl(&self) -> u8 {
        self.raw() as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_fields() {
        // label 17, tc 5, S=1, ttl 64
        let b = [0x00, 0x01, 0x1b, 0x40];
        let l = Lse::new_checked(&b).unwrap();
        assert_eq!(l.label(), 17);
        assert_eq!(l.tc(), 5);
        assert!(l.bottom_of_stack());
        assert_eq!(l.ttl(), 64);
        assert!(Lse::new_checked(&b[..3]).is_err());
    }
}
