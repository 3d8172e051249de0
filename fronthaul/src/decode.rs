//! The U-plane frame decoder: Ethernet (up to two 802.1Q / 802.1ad tags), the eCPRI common
//! header, PC_ID / SEQ_ID, the radio application header and every section, checked whole
//! before any PRB is handed out: a bad section rejects the frame, never a partial decode.
//! `gpu-kernels/cuda/fronthaul.cuh` implements the same checks in the same order.

use super::bfp::{self, Method, PRB_SAMPLES};
use pipeline::wire::ecpri::{self, SeqId};
use pipeline::wire::ethernet::ether_type;
use pipeline::wire::oran::{self, RadioRepr, UdCompHdr, UplaneSection};

/// Symbols per slot (normal cyclic prefix).
pub const SYMBOLS_PER_SLOT: u8 = 14;
/// Most VLAN tags walked before the eCPRI EtherType.
pub const MAX_VLAN: usize = 2;

/// Why a frame was rejected. The names are the `reason` label of the error counters and the
/// `reason` of `pktwarp fronthaul`'s error lines; the codes are the CUDA header's
/// `PW_FH_*` (same order).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reject {
    EthTruncated = 1,
    VlanTruncated = 2,
    VlanTooMany = 3,
    NotEcpri = 4,
    EcpriTruncated = 5,
    EcpriBadRevision = 6,
    EcpriConcatenated = 7,
    EcpriLenExceedsFrame = 8,
    EcpriUnsupportedType = 9,
    RadioHeaderTruncated = 10,
    BadPayloadVersion = 11,
    BadSubframe = 12,
    BadSlot = 13,
    BadSymbol = 14,
    NoSections = 15,
    SectionTruncated = 16,
    UnsupportedCompMethod = 17,
    PrbOutOfCarrier = 18,
    PrbBytesExceedPayload = 19,
    CplaneTruncated = 20,
    CplaneUnsupportedSectionType = 21,
    CplaneBadExtLen = 22,
}

impl Reject {
    pub const ALL: [Reject; 22] = [
        Reject::EthTruncated,
        Reject::VlanTruncated,
        Reject::VlanTooMany,
        Reject::NotEcpri,
        Reject::EcpriTruncated,
        Reject::EcpriBadRevision,
        Reject::EcpriConcatenated,
        Reject::EcpriLenExceedsFrame,
        Reject::EcpriUnsupportedType,
        Reject::RadioHeaderTruncated,
        Reject::BadPayloadVersion,
        Reject::BadSubframe,
        Reject::BadSlot,
        Reject::BadSymbol,
        Reject::NoSections,
        Reject::SectionTruncated,
        Reject::UnsupportedCompMethod,
        Reject::PrbOutOfCarrier,
        Reject::PrbBytesExceedPayload,
        Reject::CplaneTruncated,
        Reject::CplaneUnsupportedSectionType,
        Reject::CplaneBadExtLen,
    ];
    pub const COUNT: usize = Self::ALL.len();

    pub fn name(self) -> &'static str {
        match self {
            Reject::EthTruncated => "eth_truncated",
            Reject::VlanTruncated => "vlan_truncated",
            Reject::VlanTooMany => "vlan_too_many",
            Reject::NotEcpri => "not_ecpri",
            Reject::EcpriTruncated => "ecpri_truncated",
            Reject::EcpriBadRevision => "ecpri_bad_revision",
            Reject::EcpriConcatenated => "ecpri_concatenated",
            Reject::EcpriLenExceedsFrame => "ecpri_len_exceeds_frame",
            Reject::EcpriUnsupportedType => "ecpri_unsupported_type",
            Reject::RadioHeaderTruncated => "radio_header_truncated",
            Reject::BadPayloadVersion => "bad_payload_version",
            Reject::BadSubframe => "bad_subframe",
            Reject::BadSlot => "bad_slot",
            Reject::BadSymbol => "bad_symbol",
            Reject::NoSections => "no_sections",
            Reject::SectionTruncated => "section_truncated",
            Reject::UnsupportedCompMethod => "unsupported_comp_method",
            Reject::PrbOutOfCarrier => "prb_out_of_carrier",
            Reject::PrbBytesExceedPayload => "prb_bytes_exceed_payload",
            Reject::CplaneTruncated => "cplane_truncated",
            Reject::CplaneUnsupportedSectionType => "cplane_unsupported_section_type",
            Reject::CplaneBadExtLen => "cplane_bad_ext_len",
        }
    }

    /// From the CUDA header's code (0 is "ok").
    pub fn from_code(c: u8) -> Option<Reject> {
        Self::ALL.get(usize::from(c).checked_sub(1)?).copied()
    }

    /// Index into per-reason counter arrays.
    pub fn index(self) -> usize {
        self as usize - 1
    }
}

/// Where the compression parameters come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Fixed by configuration; sections carry no udCompHdr (O-RAN "static").
    Static { method: Method, width: u8 },
    /// Each section's udCompHdr (udIqWidth 0 = 16; udCompMeth 0 or 1).
    Dynamic,
}

/// What the decoder needs to know about the carrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeParams {
    /// PRBs of the carrier (numPrbu 0 means all of them; startPrbu + numPrbu must fit).
    pub carrier_prbs: u16,
    /// Slots per subframe are 2^numerology (slotId is checked against it).
    pub numerology: u8,
    pub compression: Compression,
}

impl Default for DecodeParams {
    fn default() -> Self {
        DecodeParams {
            carrier_prbs: 273,
            numerology: 1,
            compression: Compression::Static {
                method: Method::Bfp,
                width: 9,
            },
        }
    }
}

/// A U-plane frame that passed every check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Uplane {
    pub eaxc: u16,
    pub seq: SeqId,
    pub radio: RadioRepr,
    /// VLAN id of the outermost tag, if any.
    pub vlan: Option<u16>,
    pub sections: u16,
    pub prbs: u32,
    /// Offset in the frame of the first section, and the end of the eCPRI payload.
    body: (usize, usize),
}

/// One section, located in the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    pub section_id: u16,
    /// The symbol its PRBs belong to (the radio header's, advanced by symInc).
    pub symbol: u8,
    pub start_prb: u16,
    /// PRBs in the section (numPrbu, 0 resolved to the carrier).
    pub num_prb: u16,
    /// 2 when rb is set (every other PRB), else 1.
    pub stride: u16,
    pub method: Method,
    pub width: u8,
    /// Offset in the frame of the first PRB's bytes.
    pub data: usize,
    pub prb_bytes: usize,
}

/// A C-plane message that passed its checks (counted, not decoded further here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cplane {
    pub eaxc: u16,
    pub seq: SeqId,
    pub radio: RadioRepr,
    pub section_type: u8,
    pub sections: u8,
}

/// A frame the decoder accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    Uplane(Uplane),
    Cplane(Cplane),
}

/// The eCPRI message of an Ethernet frame: its offset and the outer VLAN id.
fn ecpri_offset(frame: &[u8]) -> Result<(usize, Option<u16>), Reject> {
    if frame.len() < 14 {
        return Err(Reject::EthTruncated);
    }
    let mut ty = u16::from_be_bytes([frame[12], frame[13]]);
    let mut off = 14;
    let mut vlan = None;
    let mut tags = 0;
    while ether_type::is_vlan(ty) {
        if tags == MAX_VLAN {
            return Err(Reject::VlanTooMany);
        }
        if frame.len() < off + 4 {
            return Err(Reject::VlanTruncated);
        }
        let tci = u16::from_be_bytes([frame[off], frame[off + 1]]);
        vlan.get_or_insert(tci & 0x0fff);
        ty = u16::from_be_bytes([frame[off + 2], frame[off + 3]]);
        off += 4;
        tags += 1;
    }
    if ty != ether_type::ECPRI {
        return Err(Reject::NotEcpri);
    }
    Ok((off, vlan))
}

/// Checks the whole frame; on success every section is known to lie inside the eCPRI payload
/// and the carrier.
pub fn check(frame: &[u8], p: &DecodeParams) -> Result<Message, Reject> {
    let (off, vlan) = ecpri_offset(frame)?;
    let rest = &frame[off..];
    let h = ecpri::Header::new_checked(rest).map_err(|_| Reject::EcpriTruncated)?;
    if h.revision() != 1 {
        return Err(Reject::EcpriBadRevision);
    }
    if h.concatenated() {
        return Err(Reject::EcpriConcatenated);
    }
    if ecpri::Header::HEADER_LEN + usize::from(h.payload_size()) > rest.len() {
        return Err(Reject::EcpriLenExceedsFrame);
    }
    let msg_type = h.msg_type();
    if msg_type != ecpri::MSG_IQ_DATA && msg_type != ecpri::MSG_REAL_TIME_CONTROL {
        return Err(Reject::EcpriUnsupportedType);
    }
    let m = ecpri::IdMessage::new_checked(rest).map_err(|_| Reject::EcpriTruncated)?;
    let body = m.body();
    let radio = oran::RadioHeader::new_checked(body).map_err(|_| Reject::RadioHeaderTruncated)?;
    let radio = RadioRepr::parse(&radio);
    check_timing(&radio, p.numerology)?;
    if msg_type == ecpri::MSG_REAL_TIME_CONTROL {
        let c = oran::CplaneMessage::new_checked(body).map_err(|e| match e {
            oran::CplaneError::Truncated => Reject::CplaneTruncated,
            oran::CplaneError::UnsupportedSectionType(_) => Reject::CplaneUnsupportedSectionType,
            oran::CplaneError::BadExtLen => Reject::CplaneBadExtLen,
        })?;
        return Ok(Message::Cplane(Cplane {
            eaxc: m.pc_id(),
            seq: m.seq(),
            radio,
            section_type: c.section_type(),
            sections: c.num_sections(),
        }));
    }
    let start = off + ecpri::ID_MESSAGE_HEADER_LEN + oran::RadioHeader::<&[u8]>::LEN;
    let end = off + ecpri::Header::HEADER_LEN + usize::from(h.payload_size());
    let mut u = Uplane {
        eaxc: m.pc_id(),
        seq: m.seq(),
        radio,
        vlan,
        sections: 0,
        prbs: 0,
        body: (start, end),
    };
    let mut it = Sections::new(frame, &u, p);
    for s in &mut it {
        let s = s?;
        u.sections += 1;
        u.prbs += u32::from(s.num_prb);
    }
    if u.sections == 0 {
        return Err(Reject::NoSections);
    }
    Ok(Message::Uplane(u))
}

fn check_timing(r: &RadioRepr, numerology: u8) -> Result<(), Reject> {
    if r.payload_version != 1 {
        return Err(Reject::BadPayloadVersion);
    }
    if r.subframe_id > 9 {
        return Err(Reject::BadSubframe);
    }
    if u32::from(r.slot_id) >= 1u32 << numerology.min(6) {
        return Err(Reject::BadSlot);
    }
    if r.symbol_id >= SYMBOLS_PER_SLOT {
        return Err(Reject::BadSymbol);
    }
    Ok(())
}

/// The sections of a checked (or being checked) U-plane frame, in order.
pub struct Sections<'a> {
    frame: &'a [u8],
    off: usize,
    end: usize,
    symbol: u8,
    p: &'a DecodeParams,
    failed: bool,
}

impl<'a> Sections<'a> {
    pub fn new(frame: &'a [u8], u: &Uplane, p: &'a DecodeParams) -> Self {
        Sections {
            frame,
            off: u.body.0,
            end: u.body.1.min(frame.len()),
            symbol: u.radio.symbol_id,
            p,
            failed: false,
        }
    }

    fn next_section(&mut self) -> Result<Section, Reject> {
        let dynamic = self.p.compression == Compression::Dynamic;
        let buf = &self.frame[self.off..self.end];
        let s = UplaneSection::new_checked(buf, dynamic).map_err(|_| Reject::SectionTruncated)?;
        let (method, width) = match self.p.compression {
            Compression::Static { method, width } => (method, width),
            Compression::Dynamic => {
                let h = s.ud_comp_hdr().unwrap_or(UdCompHdr::default());
                let m = Method::from_ud_comp_meth(h.meth).ok_or(Reject::UnsupportedCompMethod)?;
                (m, h.width())
            }
        };
        if s.sym_inc() {
            self.symbol += 1;
            if self.symbol >= SYMBOLS_PER_SLOT {
                return Err(Reject::BadSymbol);
            }
        }
        let num = match s.num_prb() {
            0 => self.p.carrier_prbs,
            n => u16::from(n),
        };
        let stride: u16 = if s.rb() { 2 } else { 1 };
        let last = u32::from(s.start_prb()) + u32::from(stride) * (u32::from(num) - 1);
        if num == 0 || last >= u32::from(self.p.carrier_prbs) {
            return Err(Reject::PrbOutOfCarrier);
        }
        let prb_bytes = bfp::prb_bytes(method, width);
        let data = self.off + s.header_len();
        let need = usize::from(num) * prb_bytes;
        if need > self.end - data {
            return Err(Reject::PrbBytesExceedPayload);
        }
        self.off = data + need;
        Ok(Section {
            section_id: s.section_id(),
            symbol: self.symbol,
            start_prb: s.start_prb(),
            num_prb: num,
            stride,
            method,
            width,
            data,
            prb_bytes,
        })
    }
}

impl Iterator for Sections<'_> {
    type Item = Result<Section, Reject>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.off >= self.end {
            return None;
        }
        let r = self.next_section();
        self.failed = r.is_err();
        Some(r)
    }
}

impl Section {
    /// PRB index (in the carrier) of the section's `k`-th PRB.
    pub fn prb(&self, k: u16) -> u16 {
        self.start_prb + k * self.stride
    }

    /// The bytes of the section's `k`-th PRB (empty past the frame: the frame was checked).
    #[inline]
    pub fn prb_bytes_of<'f>(&self, frame: &'f [u8], k: u16) -> &'f [u8] {
        let at = self.data + usize::from(k) * self.prb_bytes;
        frame.get(at..at + self.prb_bytes).unwrap_or(&[])
    }

    /// Decompresses the section's `k`-th PRB (`k < num_prb`; the frame was checked).
    #[inline]
    pub fn decode(&self, frame: &[u8], k: u16, out: &mut [i32; PRB_SAMPLES]) -> u8 {
        let at = self.data + usize::from(k) * self.prb_bytes;
        let bytes = frame.get(at..at + self.prb_bytes).unwrap_or(&[]);
        bfp::decompress_prb(bytes, self.method, self.width, out)
    }
}

/// Checks a frame and hands every PRB (section, PRB index in the carrier, exponent, samples) to
/// `f`, only once the whole frame has passed.
pub fn decode_frame(
    frame: &[u8],
    p: &DecodeParams,
    mut f: impl FnMut(&Uplane, &Section, u16, u8, &[i32; PRB_SAMPLES]),
) -> Result<Message, Reject> {
    let m = check(frame, p)?;
    if let Message::Uplane(u) = &m {
        let mut iq = [0i32; PRB_SAMPLES];
        for s in Sections::new(frame, u, p).flatten() {
            for k in 0..s.num_prb {
                let e = s.decode(frame, k, &mut iq);
                f(u, &s, s.prb(k), e, &iq);
            }
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet + eCPRI + ids + radio header + sections (built by hand), payload size filled.
    fn frame(vlan: bool, sections: &[&[u8]]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 0xb, 2, 0, 0, 0, 0, 0xa];
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0x20, 0x07]);
        }
        f.extend_from_slice(&[0xae, 0xfe, 0x10, 0x00, 0, 0, 0x12, 0x34, 0x05, 0x80]);
        f.extend_from_slice(&[0x10, 0x03, 0x10, 0x45]); // UL, frame 3, subframe 1, slot 1, sym 5
        for s in sections {
            f.extend_from_slice(s);
        }
        let size = (f.len() - if vlan { 22 } else { 18 }) as u16;
        let at = if vlan { 20 } else { 16 };
        f[at..at + 2].copy_from_slice(&size.to_be_bytes());
        f
    }

    fn bfp9_section(id: u16, start: u16, n: u8) -> Vec<u8> {
        let mut s = vec![
            (id >> 4) as u8,
            ((id & 0xf) << 4) as u8 | (start >> 8) as u8,
            start as u8,
            n,
        ];
        for k in 0..n {
            s.push(k & 0x0f);
            s.extend(std::iter::repeat_n(0x80 | k, 27));
        }
        s
    }

    fn p9() -> DecodeParams {
        DecodeParams::default()
    }

    #[test]
    fn two_sections_decode_in_order() {
        let a = bfp9_section(1, 0, 2);
        let b = bfp9_section(2, 10, 3);
        let f = frame(true, &[&a, &b]);
        let mut seen = vec![];
        let m = decode_frame(&f, &p9(), |u, s, prb, e, iq| {
            assert_eq!(u.eaxc, 0x1234);
            seen.push((s.section_id, s.symbol, prb, e, iq[0]));
        })
        .unwrap();
        let Message::Uplane(u) = m else {
            panic!("not U-plane")
        };
        assert_eq!((u.sections, u.prbs, u.vlan, u.seq.seq), (2, 5, Some(7), 5));
        assert_eq!(
            (u.radio.frame_id, u.radio.subframe_id, u.radio.slot_id),
            (3, 1, 1)
        );
        assert_eq!(seen.len(), 5);
        assert_eq!(seen[0], (1, 5, 0, 0, -255)); // 0b1_0000_0001 as 9 bits
        assert_eq!(seen[4].0..=seen[4].2, 2..=12);
    }

    #[test]
    fn a_bad_second_section_rejects_the_frame_whole() {
        let a = bfp9_section(1, 0, 2);
        let b = bfp9_section(2, 272, 2); // PRB 273 is outside a 273-PRB carrier
        let f = frame(false, &[&a, &b]);
        let mut calls = 0;
        let r = decode_frame(&f, &p9(), |_, _, _, _, _| calls += 1);
        assert_eq!(r.unwrap_err(), Reject::PrbOutOfCarrier);
        assert_eq!(calls, 0, "no PRB of a rejected frame is handed out");
        // Cut the last PRB short: its bytes exceed the payload.
        let b = bfp9_section(2, 10, 2);
        let mut f = frame(false, &[&a, &b]);
        f.truncate(f.len() - 1);
        let n = f.len() - 18;
        f[16..18].copy_from_slice(&(n as u16).to_be_bytes());
        assert_eq!(check(&f, &p9()).unwrap_err(), Reject::PrbBytesExceedPayload);
    }

    #[test]
    fn header_rejections_by_reason() {
        let a = bfp9_section(1, 0, 1);
        let good = frame(false, &[&a]);
        type Edit = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(Edit, Reject)> = vec![
            (Box::new(|f| f.truncate(13)), Reject::EthTruncated),
            (Box::new(|f| f[12] = 0x08), Reject::NotEcpri),
            (Box::new(|f| f.truncate(17)), Reject::EcpriTruncated),
            (Box::new(|f| f[14] = 0x20), Reject::EcpriBadRevision),
            (Box::new(|f| f[14] = 0x11), Reject::EcpriConcatenated),
            (Box::new(|f| f[16] = 0x40), Reject::EcpriLenExceedsFrame),
            (Box::new(|f| f[15] = 0x33), Reject::EcpriUnsupportedType),
            (Box::new(|f| f[22] = 0x20), Reject::BadPayloadVersion),
            (Box::new(|f| f[24] = 0xa0), Reject::BadSubframe),
            (Box::new(|f| f[24] = 0x11), Reject::BadSlot),
            (Box::new(|f| f[25] = 0x4e), Reject::BadSymbol),
            (Box::new(|f| f[29] = 0), Reject::PrbBytesExceedPayload),
        ];
        for (i, (edit, want)) in cases.iter().enumerate() {
            let mut f = good.clone();
            edit(&mut f);
            assert_eq!(check(&f, &p9()).unwrap_err(), *want, "case {i}");
        }
        // No sections: payload size covering only ids and radio header.
        let mut f = good.clone();
        f[16..18].copy_from_slice(&8u16.to_be_bytes());
        assert_eq!(check(&f, &p9()).unwrap_err(), Reject::NoSections);
        // 3 bytes of a section header left.
        f[16..18].copy_from_slice(&11u16.to_be_bytes());
        assert_eq!(check(&f, &p9()).unwrap_err(), Reject::SectionTruncated);
        // Three VLAN tags.
        let mut f = good.clone();
        for _ in 0..3 {
            f.splice(12..12, [0x81, 0x00, 0, 1]);
        }
        assert_eq!(check(&f, &p9()).unwrap_err(), Reject::VlanTooMany);
        f.truncate(20);
        assert_eq!(check(&f, &p9()).unwrap_err(), Reject::VlanTruncated);
        for r in Reject::ALL {
            assert_eq!(Reject::from_code(r as u8), Some(r));
        }
        assert_eq!(Reject::from_code(0), None);
    }

    #[test]
    fn dynamic_compression_and_num_prbu_zero() {
        // udCompHdr: width 0 (= 16), method 0; numPrbu 0 = the whole 3-PRB carrier.
        let mut s = vec![0x00, 0x10, 0x00, 0x00, 0x00, 0x00];
        s.extend(std::iter::repeat_n(0xff, 3 * 48));
        let f = frame(false, &[&s]);
        let p = DecodeParams {
            carrier_prbs: 3,
            compression: Compression::Dynamic,
            ..p9()
        };
        let mut prbs = vec![];
        decode_frame(&f, &p, |_, s, prb, e, iq| {
            assert_eq!((s.method, s.width, e), (Method::None, 16, 0));
            assert_eq!(iq, &[-1; 24]);
            prbs.push(prb);
        })
        .unwrap();
        assert_eq!(prbs, [0, 1, 2]);
        let mut bad = s.clone();
        bad[4] = 0x93; // mu-law
        let f = frame(false, &[&bad]);
        assert_eq!(check(&f, &p).unwrap_err(), Reject::UnsupportedCompMethod);
        // rb: every other PRB; symInc moves the symbol.
        let mut s = vec![0x00, 0x1c, 0x00, 0x02, 0x91, 0x00];
        s.extend(std::iter::repeat_n(0, 2 * 28));
        let f = frame(false, &[&s]);
        let mut got = vec![];
        decode_frame(&f, &p, |_, s, prb, _, _| got.push((s.symbol, prb))).unwrap();
        assert_eq!(got, [(6, 0), (6, 2)]);
    }

    #[test]
    fn every_truncation_is_rejected_without_panic() {
        let a = bfp9_section(1, 0, 2);
        let b = bfp9_section(2, 4, 1);
        let f = frame(true, &[&a, &b]);
        assert!(check(&f, &p9()).is_ok());
        for cut in 0..f.len() {
            assert!(check(&f[..cut], &p9()).is_err(), "cut {cut}");
        }
    }
}
