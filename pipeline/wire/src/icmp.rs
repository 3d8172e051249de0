//! ICMP (RFC 792) and ICMPv6 (RFC 4443) share the first 8 bytes' layout: type, code, checksum,
//! 4 bytes of type-specific header.

use super::{be16, checksum, emit_buf, put16, put32, Error, Result};

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const REST: usize = 4;
    pub const HEADER_LEN: usize = 8;
}

/// Message types the responders use.
pub mod msg_type {
    pub const ECHO_REPLY: u8 = 0;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
    pub const V6_ECHO_REQUEST: u8 = 128;
    pub const V6_ECHO_REPLY: u8 = 129;
}

/// Length of the fixed part.
pub const HEADER_LEN: usize = field::HEADER_LEN;

/// The first 8 bytes of an ICMP / ICMPv6 message. For the checksum methods the buffer must be
/// exactly the message (ICMPv4: no pseudo header, pass 0; ICMPv6: [`checksum::pseudo_v6`]).
#[derive(Clone, Copy, Debug)]
pub struct Header<T: AsRef<[u8]>> {
    buf: T,
}

impl Header<&'static [u8]> {
    pub const HEADER_LEN: usize = field::HEADER_LEN;
}

impl<T: AsRef<[u8]>> Header<T> {
    pub fn new_checked(buf: T) -> Result<Self> {
        if buf.as_ref().len() < field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Header { buf })
    }

    pub fn into_inner(self) -> T {
        self.buf
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    pub fn msg_type(&self) -> u8 {
        self.b()[field::TYPE]
    }

    pub fn code(&self) -> u8 {
        self.b()[field::CODE]
    }

    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM)
    }

    /// Echo identifier / first half of the type-specific word.
    pub fn rest_hi(&self) -> u16 {
        be16(self.b(), field::REST)
    }

    /// Echo sequence number / second half of the type-specific word.
    pub fn rest_lo(&self) -> u16 {
        be16(self.b(), field::REST + 2)
    }

    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        checksum::verify(pseudo, self.b())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }

    pub fn set_msg_type(&mut self, t: u8) {
        self.bm()[field::TYPE] = t;
    }

    pub fn set_code(&mut self, c: u8) {
        self.bm()[field::CODE] = c;
    }

    pub fn set_checksum(&mut self, c: u16) {
        put16(self.bm(), field::CHECKSUM, c);
    }

    /// Recomputes the checksum over the whole buffer with `pseudo` (0 for ICMPv4).
    pub fn fill_checksum(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let c = checksum::finish(checksum::sum(pseudo, self.b()));
        self.set_checksum(c);
    }

    /// Turns an echo request into its reply in place: the type word changes, identifier,
    /// sequence and data stay, the checksum is updated incrementally (RFC 1624).
    pub fn set_type_update_checksum(&mut self, t: u8) {
        let old = be16(self.b(), field::TYPE);
        let new = (u16::from(t) << 8) | u16::from(self.code());
        put16(self.bm(), field::TYPE, new);
        let c = checksum::update16(self.checksum(), old, new);
        self.set_checksum(c);
    }
}

/// The fixed part's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub msg_type: u8,
    pub code: u8,
    /// The type-specific word (echo: identifier << 16 | sequence).
    pub rest: u32,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Self {
        Repr {
            msg_type: h.msg_type(),
            code: h.code(),
            rest: (u32::from(h.rest_hi()) << 16) | u32::from(h.rest_lo()),
        }
    }

    /// Writes the 8 bytes (checksum 0: [`Header::fill_checksum`] once the data is written) at
    /// the start of `buf`. Errors: `Truncated` when shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let h = emit_buf(buf, field::HEADER_LEN)?;
        h[field::TYPE] = self.msg_type;
        h[field::CODE] = self.code;
        put16(h, field::CHECKSUM, 0);
        put32(h, field::REST, self.rest);
        Ok(field::HEADER_LEN)
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

    #[test]
    fn echo_reply_in_place() {
        let mut m = [8u8, 0, 0, 0, 0x12, 0x34, 0, 1, b'p', b'i', b'n', b'g'];
        let r = Repr {
            msg_type: msg_type::ECHO_REQUEST,
            code: 0,
            rest: 0x1234_0001,
        };
        let mut e = [0u8; 8];
        assert_eq!(r.emit(&mut e), Ok(8));
        assert_eq!(e[..], m[..8]);
        assert_eq!(r.emit(&mut e[..7]), Err(Error::Truncated));
        let mut h = Header::new_checked(&mut m[..]).unwrap();
        h.fill_checksum(0);
        assert!(h.verify_checksum(0));
        assert_eq!(Repr::parse(&h), r);
        h.set_type_update_checksum(msg_type::ECHO_REPLY);
        assert!(h.verify_checksum(0));
        assert_eq!((h.msg_type(), h.rest_hi(), h.rest_lo()), (0, 0x1234, 1));
        h.set_code(3);
        assert!(!h.verify_checksum(0));
    }
}
