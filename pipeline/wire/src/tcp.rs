//! TCP header (RFC 9293).

use super::{be16, be32, checksum, emit_buf, put16, put32, Error, Result};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const DATA_OFF_NS: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
    pub const MIN_HEADER_LEN: usize = 20;
}

/// Offset of the data-offset field (for error offsets).
pub const DATA_OFFSET_FIELD: usize = field::DATA_OFF_NS;

/// TCP flag bits as stored in `PacketMeta::tcp_flags` (9 bits).
pub mod flags {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;
    pub const URG: u16 = 0x020;
    pub const ECE: u16 = 0x040;
    pub const CWR: u16 = 0x080;
    pub const NS: u16 = 0x100;

    /// "SYN|ACK" style text, most significant first as tcpdump prints them.
    pub fn to_text(f: u16) -> String {
        const NAMES: [(u16, &str); 9] = [
            (NS, "NS"),
            (CWR, "CWR"),
            (ECE, "ECE"),
            (URG, "URG"),
            (ACK, "ACK"),
            (PSH, "PSH"),
            (RST, "RST"),
            (SYN, "SYN"),
            (FIN, "FIN"),
        ];
        let mut s = String::new();
        for (bit, name) in NAMES {
            if f & bit != 0 {
                if !s.is_empty() {
                    s.push('|');
                }
                s.push_str(name);
            }
        }
        s
    }
}

/// Length of the TCP header without options.
pub const MIN_HEADER_LEN: usize = field::MIN_HEADER_LEN;

/// A TCP header including options, over a buffer that starts with it. For the checksum methods
/// the buffer must be exactly the segment (header and payload, no Ethernet padding): the
/// checksum covers all of it. Errors: `Truncated` (fixed part or options cut), `BadHeaderLen`
/// (data offset < 5).
#[derive(Clone, Copy, Debug)]
pub struct Header<T: AsRef<[u8]>> {
    buf: T,
}

impl Header<&'static [u8]> {
    pub const MIN_HEADER_LEN: usize = field::MIN_HEADER_LEN;
}

impl<T: AsRef<[u8]>> Header<T> {
    pub fn new_checked(buf: T) -> Result<Self> {
        let len = buf.as_ref().len();
        if len < field::MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let h = Header { buf };
        if h.header_len() < field::MIN_HEADER_LEN {
            return Err(Error::BadHeaderLen);
        }
        if len < h.header_len() {
            return Err(Error::Truncated);
        }
        Ok(h)
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

    pub fn seq(&self) -> u32 {
        be32(self.b(), field::SEQ)
    }

    pub fn ack(&self) -> u32 {
        be32(self.b(), field::ACK)
    }

    /// Data offset * 4.
    pub fn header_len(&self) -> usize {
        (self.b()[field::DATA_OFF_NS] >> 4) as usize * 4
    }

    /// NS CWR ECE URG ACK PSH RST SYN FIN (see [`flags`]).
    pub fn flags(&self) -> u16 {
        ((self.b()[field::DATA_OFF_NS] as u16 & 1) << 8) | self.b()[field::FLAGS] as u16
    }

    pub fn window(&self) -> u16 {
        be16(self.b(), field::WINDOW)
    }

    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM)
    }

    /// Whether the checksum over the whole buffer and the pseudo-header sum `pseudo`
    /// ([`checksum::pseudo_v4`] / [`checksum::pseudo_v6`]) is right.
    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        checksum::verify(pseudo, self.b())
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Header<&'a T> {
    /// Options (may be empty), borrowed for as long as the frame.
    pub fn options(&self) -> &'a [u8] {
        let b = self.buf.as_ref();
        &b[field::MIN_HEADER_LEN..(b[field::DATA_OFF_NS] >> 4) as usize * 4]
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

    pub fn set_seq(&mut self, v: u32) {
        put32(self.bm(), field::SEQ, v);
    }

    pub fn set_ack(&mut self, v: u32) {
        put32(self.bm(), field::ACK, v);
    }

    /// The 9 flag bits (see [`flags`]); the data offset is kept.
    pub fn set_flags(&mut self, f: u16) {
        let b = self.bm();
        b[field::DATA_OFF_NS] = (b[field::DATA_OFF_NS] & 0xFE) | ((f >> 8) & 1) as u8;
        b[field::FLAGS] = f as u8;
    }

    pub fn set_window(&mut self, w: u16) {
        put16(self.bm(), field::WINDOW, w);
    }

    pub fn set_checksum(&mut self, c: u16) {
        put16(self.bm(), field::CHECKSUM, c);
    }

    /// Recomputes the checksum over the whole buffer with the pseudo-header sum `pseudo`.
    pub fn fill_checksum(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let c = checksum::finish(checksum::sum(pseudo, self.b()));
        self.set_checksum(c);
    }

    /// Updates the checksum for covered bytes (segment or pseudo header) that changed from
    /// `old` to `new` at an even offset (RFC 1624): an address rewritten by NAT, a port.
    pub fn update_checksum(&mut self, old: &[u8], new: &[u8]) {
        let c = checksum::update(self.checksum(), old, new);
        self.set_checksum(c);
    }

    /// Sets the destination port and updates the checksum incrementally.
    pub fn set_dst_port_update_checksum(&mut self, p: u16) {
        let old = self.dst_port();
        self.set_dst_port(p);
        let c = checksum::update16(self.checksum(), old, p);
        self.set_checksum(c);
    }
}

/// The fixed header's fields (no options), for building frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    /// The 9 flag bits (see [`flags`]).
    pub flags: u16,
    pub window: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Self {
        Repr {
            src_port: h.src_port(),
            dst_port: h.dst_port(),
            seq: h.seq(),
            ack: h.ack(),
            flags: h.flags(),
            window: h.window(),
        }
    }

    /// Writes the 20-byte header (data offset 5, checksum and urgent pointer 0) at the start of
    /// `buf`; the checksum needs the payload: [`Header::fill_checksum`] after it is written.
    /// Errors: `Truncated` when `buf` is shorter than 20 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let h = emit_buf(buf, field::MIN_HEADER_LEN)?;
        put16(h, field::SRC_PORT, self.src_port);
        put16(h, field::DST_PORT, self.dst_port);
        put32(h, field::SEQ, self.seq);
        put32(h, field::ACK, self.ack);
        h[field::DATA_OFF_NS] = (5 << 4) | ((self.flags >> 8) & 1) as u8;
        h[field::FLAGS] = self.flags as u8;
        put16(h, field::WINDOW, self.window);
        put16(h, field::CHECKSUM, 0);
        put16(h, field::URGENT, 0);
        Ok(field::MIN_HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 1234 -> 80, seq 1, ack 2, data offset 6 (4 bytes of options), NS|SYN|ACK, window 8192.
    const SYN_ACK: [u8; 24] = [
        0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 2, 0x61, 0x12, 0x20, 0x00, 0, 0, 0, 0, 2, 4,
        5, 0xb4,
    ];

    #[test]
    fn fields() {
        let h = Header::new_checked(&SYN_ACK).unwrap();
        assert_eq!((h.src_port(), h.dst_port()), (1234, 80));
        assert_eq!((h.seq(), h.ack()), (1, 2));
        assert_eq!(h.header_len(), 24);
        assert_eq!(h.flags(), flags::NS | flags::SYN | flags::ACK);
        assert_eq!(flags::to_text(h.flags()), "NS|ACK|SYN");
        assert_eq!(h.window(), 8192);
        assert_eq!(h.options(), &[2, 4, 5, 0xb4]);
    }

    #[test]
    fn errors() {
        assert_eq!(
            Header::new_checked(&SYN_ACK[..19]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Header::new_checked(&SYN_ACK[..23]).unwrap_err(),
            Error::Truncated
        );
        let mut b = SYN_ACK;
        b[12] = 0x40;
        assert_eq!(Header::new_checked(&b).unwrap_err(), Error::BadHeaderLen);
    }

    #[test]
    fn setters_repr_and_checksum() {
        // 20-byte header + 3 bytes of payload, between 10.0.0.1 and 10.0.0.2.
        let mut seg = [0u8; 23];
        let r = Repr {
            src_port: 1234,
            dst_port: 80,
            seq: 7,
            ack: 9,
            flags: flags::NS | flags::ACK,
            window: 512,
        };
        assert_eq!(r.emit(&mut seg), Ok(20));
        assert_eq!(r.emit(&mut seg[..19]), Err(Error::Truncated));
        seg[20..].copy_from_slice(b"abc");
        let pseudo = checksum::pseudo_v4([10, 0, 0, 1], [10, 0, 0, 2], 6, 23);
        let mut h = Header::new_checked(&mut seg[..]).unwrap();
        h.fill_checksum(pseudo);
        assert!(h.verify_checksum(pseudo));
        assert_eq!(Repr::parse(&h), r);
        h.set_dst_port_update_checksum(8080);
        assert!(h.verify_checksum(pseudo));
        h.set_flags(flags::SYN);
        assert_eq!((h.flags(), h.header_len()), (flags::SYN, 20));
        assert!(
            !h.verify_checksum(pseudo),
            "a raw setter leaves the checksum stale"
        );
        // A NAT-style address change, applied to the pseudo header's part.
        let c0 = h.checksum();
        h.fill_checksum(pseudo);
        let pseudo2 = checksum::pseudo_v4([10, 0, 0, 1], [192, 168, 1, 2], 6, 23);
        h.update_checksum(&[10, 0, 0, 2], &[192, 168, 1, 2]);
        assert!(h.verify_checksum(pseudo2));
        assert_ne!(c0, h.checksum());
    }
}
