//! UDP header (RFC 768).

use super::{be16, checksum, emit_buf, put16, Error, Result};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
    pub const HEADER_LEN: usize = 8;
}

/// Offset of the length field (for error offsets).
pub const LENGTH_FIELD: usize = field::LENGTH;

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::HEADER_LEN;

/// The 8-byte UDP header. The length field is checked against the IP packet by the caller
/// (it legitimately exceeds a first fragment). For the checksum methods the buffer must be
/// exactly the datagram (header and payload).
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

    pub fn src_port(&self) -> u16 {
        be16(self.b(), field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.b(), field::DST_PORT)
    }

    /// Header + payload length as the header claims.
    pub fn length(&self) -> u16 {
        be16(self.b(), field::LENGTH)
    }

    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM)
    }

    /// Whether the checksum is right over the whole buffer with the pseudo-header sum `pseudo`;
    /// a 0 checksum (none, allowed over IPv4) counts as right.
    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        self.checksum() == 0 || checksum::verify(pseudo, self.b())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }

    pub fn set_src_port(&mut self, p: u16) {
        put16(self.bm(), field::SRC_PORT, p);
    }

    pub fn set_dst_port(&mut self, p: u16) {
        put16(self.bm(), field::DST_PORT, p);
    }

    pub fn set_length(&mut self, l: u16) {
        put16(self.bm(), field::LENGTH, l);
    }

    pub fn set_checksum(&mut self, c: u16) {
        put16(self.bm(), field::CHECKSUM, c);
    }

    /// Recomputes the checksum over the whole buffer with the pseudo-header sum `pseudo`
    /// (a computed 0 is written 0xFFFF).
    pub fn fill_checksum(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let c = checksum::udp_wire(checksum::finish(checksum::sum(pseudo, self.b())));
        self.set_checksum(c);
    }

    /// Updates the checksum for covered bytes that changed from `old` to `new` at an even
    /// offset (RFC 1624). A datagram without a checksum (0) keeps none.
    pub fn update_checksum(&mut self, old: &[u8], new: &[u8]) {
        if self.checksum() != 0 {
            let c = checksum::udp_wire(checksum::update(self.checksum(), old, new));
            self.set_checksum(c);
        }
    }

    /// Sets the destination port and updates the checksum incrementally.
    pub fn set_dst_port_update_checksum(&mut self, p: u16) {
        let old = self.dst_port().to_be_bytes();
        self.set_dst_port(p);
        self.update_checksum(&old, &p.to_be_bytes());
    }
}

/// The header's fields, for building frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Header + payload.
    pub length: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Self {
        Repr {
            src_port: h.src_port(),
            dst_port: h.dst_port(),
            length: h.length(),
        }
    }

    /// Writes the 8-byte header (checksum 0: [`Header::fill_checksum`] once the payload is
    /// written) at the start of `buf`. Errors: `Truncated` when shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let h = emit_buf(buf, field::HEADER_LEN)?;
        put16(h, field::SRC_PORT, self.src_port);
        put16(h, field::DST_PORT, self.dst_port);
        put16(h, field::LENGTH, self.length);
        put16(h, field::CHECKSUM, 0);
        Ok(field::HEADER_LEN)
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

    #[test]
    fn repr_setters_and_checksum() {
        let mut d = [0u8; 12];
        let r = Repr {
            src_port: 53,
            dst_port: 4000,
            length: 12,
        };
        assert_eq!(r.emit(&mut d), Ok(8));
        assert_eq!(r.emit(&mut d[..7]), Err(Error::Truncated));
        d[8..].copy_from_slice(&[1, 2, 3, 4]);
        let src = [0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let pseudo = checksum::pseudo_v6(src, src, 17, 12);
        let mut h = Header::new_checked(&mut d[..]).unwrap();
        assert!(h.verify_checksum(pseudo), "0 = no checksum");
        h.fill_checksum(pseudo);
        assert_ne!(h.checksum(), 0);
        assert!(h.verify_checksum(pseudo));
        assert_eq!(Repr::parse(&h), r);
        h.set_dst_port_update_checksum(4001);
        assert!(h.verify_checksum(pseudo));
        h.set_checksum(0);
        h.set_dst_port_update_checksum(4002);
        assert_eq!(h.checksum(), 0, "no checksum stays none");
        h.set_src_port(1);
        h.set_length(9);
        assert_eq!((h.src_port(), h.length()), (1, 9));
    }
}
