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

    /// The raw 16 SEQ_ID bits (sequence id << 8 | E bit << 7 | sub-sequence id) when present;
    /// [`Header::seq`] splits them.
    pub fn seq_id(&self) -> Option<u16> {
        (self.has_ids() && self.buf.len() >= field::SEQ_ID + 2)
            .then(|| be16(self.buf, field::SEQ_ID))
    }

    /// SEQ_ID split into its three fields, when present.
    pub fn seq(&self) -> Option<SeqId> {
        self.seq_id().map(SeqId::from_raw)
    }
}

/// ecpriSeqid (eCPRI 2.0 3.2.4.1, O-RAN CUS 5.1.3.2.8): an 8-bit sequence id, the E bit (last
/// fragment of an application-layer fragmented message) and a 7-bit sub-sequence id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SeqId {
    pub seq: u8,
    pub e_bit: bool,
    pub subseq: u8,
}

impl SeqId {
    pub fn from_raw(raw: u16) -> Self {
        SeqId {
            seq: (raw >> 8) as u8,
            e_bit: raw & 0x80 != 0,
            subseq: (raw & 0x7f) as u8,
        }
    }

    /// The 16 wire bits; `subseq` is cut to its 7 bits.
    pub fn to_raw(self) -> u16 {
        (u16::from(self.seq) << 8) | (u16::from(self.e_bit) << 7) | u16::from(self.subseq & 0x7f)
    }
}

/// An IQ data (type 0) or real-time control (type 2) message: the common header, PC_ID /
/// RTC_ID and SEQ_ID, checked to be present and the payload size to lie inside the buffer.
#[derive(Clone, Copy, Debug)]
pub struct IdMessage<'a> {
    buf: &'a [u8],
}

/// Bytes of the common header plus PC_ID / RTC_ID and SEQ_ID.
pub const ID_MESSAGE_HEADER_LEN: usize = field::SEQ_ID + 2;

impl<'a> IdMessage<'a> {
    /// `buf` starts at the common header. Errors: `Truncated` when the ids do not fit,
    /// `BadLength` when the payload size claims more than `buf` holds or less than the ids.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        let h = Header::new_checked(buf)?;
        if buf.len() < ID_MESSAGE_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let end = field::HEADER_LEN + h.payload_size() as usize;
        if end > buf.len() || end < ID_MESSAGE_HEADER_LEN {
            return Err(Error::BadLength);
        }
        Ok(IdMessage { buf: &buf[..end] })
    }

    pub fn header(&self) -> Header<'a> {
        Header { buf: self.buf }
    }

    /// PC_ID (IQ data) or RTC_ID (real-time control): the eAxC id in O-RAN.
    pub fn pc_id(&self) -> u16 {
        be16(self.buf, field::PC_ID)
    }

    pub fn seq(&self) -> SeqId {
        SeqId::from_raw(be16(self.buf, field::SEQ_ID))
    }

    /// The bytes after SEQ_ID up to the end the payload size gives (the O-RAN message).
    pub fn body(&self) -> &'a [u8] {
        &self.buf[ID_MESSAGE_HEADER_LEN..]
    }
}

/// PC_ID / RTC_ID and SEQ_ID, for building frames (after [`Repr::emit`]).
pub fn emit_ids(pc_id: u16, seq: SeqId) -> [u8; 4] {
    let p = pc_id.to_be_bytes();
    let s = seq.to_raw().to_be_bytes();
    [p[0], p[1], s[0], s[1]]
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

    #[test]
    fn seq_id_is_split_into_seq_e_bit_and_subseq() {
        // seq 0x12, E = 1, subseq 0x05.
        let b = [0x10, 0x00, 0x00, 0x04, 0xab, 0xcd, 0x12, 0x85];
        let h = Header::new_checked(&b).unwrap();
        let s = h.seq().unwrap();
        assert_eq!(
            s,
            SeqId {
                seq: 0x12,
                e_bit: true,
                subseq: 5
            }
        );
        assert_eq!(s.to_raw(), 0x1285);
        assert_eq!(SeqId::from_raw(0x7f7f).subseq, 0x7f);
        assert!(!SeqId::from_raw(0x7f7f).e_bit);
        let m = IdMessage::new_checked(&b).unwrap();
        assert_eq!((m.pc_id(), m.seq().seq, m.body().len()), (0xabcd, 0x12, 0));
        assert_eq!(emit_ids(0xabcd, s), [0xab, 0xcd, 0x12, 0x85]);
    }

    #[test]
    fn id_message_checks_payload_size() {
        let mut b = [0x10, 0x00, 0x00, 0x06, 0, 1, 0, 0x80, 9, 9, 7];
        let m = IdMessage::new_checked(&b).unwrap();
        assert_eq!(m.body(), &[9, 9]);
        b[3] = 8; // claims 8 bytes, 7 follow
        assert_eq!(IdMessage::new_checked(&b).unwrap_err(), Error::BadLength);
        b[3] = 3; // shorter than the ids
        assert_eq!(IdMessage::new_checked(&b).unwrap_err(), Error::BadLength);
        assert_eq!(
            IdMessage::new_checked(&b[..7]).unwrap_err(),
            Error::Truncated
        );
    }
}
