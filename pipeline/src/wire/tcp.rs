//! TCP header (RFC 9293).

use super::{be16, be32, Error, Result};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const DATA_OFF_NS: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: usize = 14;
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

/// A TCP header including options. Errors: `Truncated` (fixed part or options cut),
/// `BadHeaderLen` (data offset < 5).
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
        if h.header_len() < field::MIN_HEADER_LEN {
            return Err(Error::BadHeaderLen);
        }
        if buf.len() < h.header_len() {
            return Err(Error::Truncated);
        }
        Ok(h)
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buf, field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.buf, field::DST_PORT)
    }

    pub fn seq(&self) -> u32 {
        be32(self.buf, field::SEQ)
    }

    pub fn ack(&self) -> u32 {
        be32(self.buf, field::ACK)
    }

    /// Data offset * 4.
    pub fn header_len(&self) -> usize {
        (self.buf[field::DATA_OFF_NS] >> 4) as usize * 4
    }

    /// NS CWR ECE URG ACK PSH RST SYN FIN (see [`flags`]).
    pub fn flags(&self) -> u16 {
        ((self.buf[field::DATA_OFF_NS] as u16 & 1) << 8) | self.buf[field::FLAGS] as u16
    }

    pub fn window(&self) -> u16 {
        be16(self.buf, field::WINDOW)
    }

    pub fn options(&self) -> &'a [u8] {
        &self.buf[field::MIN_HEADER_LEN..self.header_len()]
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
}
