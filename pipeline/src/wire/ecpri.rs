//! eCPRI common header (eCPRI specification v2.0, section 3.1.3.1) and, for the IQ data, bit
//! sequence and real-time control messages, the PC_ID / RTC_ID and SEQ_ID that follow it.

use super::{be16, Error, Result};

mod field {
    pub const REV_C: usize = 0;
    pub const MSG_TYPE: usize = 1;
    pub const PAYLOAD_SIZE: usize = 2;
    pub const HEADER_LEN: usize = 4;
    pub const PC_ID: usize = 4;
    pub const SEQ_ID: usize = 6;
}

/// Offset of the payload-size field (for error offsets).
pub const PAYLOAD_SIZE_FIELD: usize = field::PAYLOAD_SIZE;

/// Message types that start with PC_ID / RTC_ID and SEQ_ID.
pub const MSG_IQ_DATA: u8 = 0;
pub const MSG_BIT_SEQUENCE: u8 = 1;
pub const MSG_REAL_TIME_CONTROL: u8 = 2;

/// The 4-byte common header; `buf` may extend past it (the payload).
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

    pub fn revision(&self) -> u8 {
        self.buf[field::REV_C] >> 4
    }

    /// C bit: another eCPRI message follows this one in the same frame.
    pub fn concatenated(&self) -> bool {
        self.buf[field::REV_C] & 1 != 0
    }

    pub fn msg_type(&self) -> u8 {
        self.buf[field::MSG_TYPE]
    }

    /// Bytes of payload after the common header, as the header claims.
    pub fn payload_size(&self) -> u16 {
        be16(self.buf, field::PAYLOAD_SIZE)
    }

    fn has_ids(&self) -> bool {
        matches!(
            self.msg_type(),
            MSG_IQ_DATA | MSG_BIT_SEQUENCE | MSG_REAL_TIME_CONTROL
        )
    }

    /// PC_ID / RTC_ID (the eAxC id for O-RAN) when the message type has one and it is present.
    pub fn pc_id(&self) -> Option<u16> {
        (self.has_ids() && self.buf.len() >= field::PC_ID + 2).then(|| be16(self.buf, field::PC_ID))
    }

    /// SEQ_ID (sequence id << 8 | E bit << 7 | sub-sequence id) when present.
    pub fn seq_id(&self) -> Option<u16> {
        (self.has_ids() && self.buf.len() >= field::SEQ_ID + 2)
            .then(|| be16(self.buf, field::SEQ_ID))
    }
}

/// The common header's fields, for building frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub revision: u8,
    pub concatenated: bool,
    pub msg_type: u8,
    pub payload_size: u16,
}

impl Repr {
    pub fn parse(h: &Header<'_>) -> Self {
        Repr {
            revision: h.revision(),
            concatenated: h.concatenated(),
            msg_type: h.msg_type(),
            payload_size: h.payload_size(),
        }
    }

    pub fn emit(&self) -> [u8; 4] {
        let s = self.payload_size.to_be_bytes();
        [
            (self.revision << 4) | self.concatenated as u8,
            self.msg_type,
            s[0],
            s[1],
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iq_data_header() {
        let b = [0x10, 0x00, 0x00, 0x08, 0x12, 0x34, 0x00, 0x80, 0, 0, 0, 0];
        let h = Header::new_checked(&b).unwrap();
        assert_eq!(h.revision(), 1);
        assert!(!h.concatenated());
        assert_eq!(h.msg_type(), MSG_IQ_DATA);
        assert_eq!(h.payload_size(), 8);
        assert_eq!(h.pc_id(), Some(0x1234));
        assert_eq!(h.seq_id(), Some(0x0080));
        assert_eq!(Repr::parse(&h).emit(), [0x10, 0, 0, 8]);
        // Header only: no ids.
        let h = Header::new_checked(&b[..5]).unwrap();
        assert_eq!(h.pc_id(), None);
        assert!(Header::new_checked(&b[..3]).is_err());
        // A message type without ids.
        let b = [0x11, 0x05, 0, 4, 1, 2, 3, 4];
        let h = Header::new_checked(&b).unwrap();
        assert!(h.concatenated());
        assert_eq!(h.pc_id(), None);
    }
}
