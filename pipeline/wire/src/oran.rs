//! O-RAN fronthaul CUS-plane (O-RAN.WG4.CUS, split 7.2x) messages carried in eCPRI: the eAxC id,
//! the radio application header, U-plane sections (with or without udCompHdr) and C-plane
//! messages of section types 1 and 3 (0 and 5 recognised).
//!
//! Views are generic over `AsRef<[u8]>` (read) and `AsMut<[u8]>` (write); `new_checked`
//! validates lengths once so no accessor can panic afterwards.

use super::{be16, Error, Result};

/// The split of the 16-bit eAxC id (PC_ID / RTC_ID) into DU port, band sector, CC and RU port
/// ids, most significant first. O-RAN leaves the widths to the deployment; 4/4/4/4 is the
/// default here (Wireshark's is 2/6/4/4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EaxcBits([u8; 4]);

impl Default for EaxcBits {
    fn default() -> Self {
        EaxcBits([4, 4, 4, 4])
    }
}

/// An eAxC id split into its four parts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Eaxc {
    pub du_port: u16,
    pub band_sector: u16,
    pub cc: u16,
    pub ru_port: u16,
}

impl EaxcBits {
    /// Widths in bits of DU port, band sector, CC and RU port; they must add up to 16.
    pub fn new(w: [u8; 4]) -> core::result::Result<Self, String> {
        let sum: u32 = w.iter().map(|&b| u32::from(b)).sum();
        if sum != 16 {
            return Err(format!(
                "eAxC widths {}/{}/{}/{} add up to {sum} bits, not 16",
                w[0], w[1], w[2], w[3]
            ));
        }
        Ok(EaxcBits(w))
    }

    pub fn widths(&self) -> [u8; 4] {
        self.0
    }

    pub fn split(&self, id: u16) -> Eaxc {
        let mut parts = [0u16; 4];
        let mut shift = 16u32;
        for (p, &w) in parts.iter_mut().zip(self.0.iter()) {
            shift -= u32::from(w);
            let mask = ((1u32 << w) - 1) as u16;
            *p = ((u32::from(id) >> shift) as u16) & mask;
        }
        Eaxc {
            du_port: parts[0],
            band_sector: parts[1],
            cc: parts[2],
            ru_port: parts[3],
        }
    }

    /// The 16-bit id; each part is cut to its width.
    pub fn join(&self, e: Eaxc) -> u16 {
        let parts = [e.du_port, e.band_sector, e.cc, e.ru_port];
        let mut id = 0u32;
        for (&p, &w) in parts.iter().zip(self.0.iter()) {
            id = (id << w) | (u32::from(p) & ((1u32 << w) - 1));
        }
        id as u16
    }
}

/// dataDirection: 0 = uplink (RU to DU, received by the DU), 1 = downlink.
pub const DIR_UPLINK: u8 = 0;
pub const DIR_DOWNLINK: u8 = 1;

mod radio_field {
    pub const DIR_VER_FILTER: usize = 0;
    pub const FRAME_ID: usize = 1;
    pub const SUBFRAME_SLOT: usize = 2;
    pub const SLOT_SYMBOL: usize = 3;
    pub const LEN: usize = 4;
}

/// The 4-byte radio application header (timing header) that starts every U-plane and C-plane
/// message.
#[derive(Clone, Copy, Debug)]
pub struct RadioHeader<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> RadioHeader<T> {
    pub const LEN: usize = radio_field::LEN;

    pub fn new_checked(buf: T) -> Result<Self> {
        if buf.as_ref().len() < radio_field::LEN {
            return Err(Error::Truncated);
        }
        Ok(RadioHeader { buf })
    }

    fn b(&self, i: usize) -> u8 {
        self.buf.as_ref()[i]
    }

    pub fn data_direction(&self) -> u8 {
        self.b(radio_field::DIR_VER_FILTER) >> 7
    }

    pub fn payload_version(&self) -> u8 {
        (self.b(radio_field::DIR_VER_FILTER) >> 4) & 7
    }

    pub fn filter_index(&self) -> u8 {
        self.b(radio_field::DIR_VER_FILTER) & 0x0f
    }

    pub fn frame_id(&self) -> u8 {
        self.b(radio_field::FRAME_ID)
    }

    pub fn subframe_id(&self) -> u8 {
        self.b(radio_field::SUBFRAME_SLOT) >> 4
    }

    /// slotId: 6 bits over bytes 2 and 3.
    pub fn slot_id(&self) -> u8 {
        ((self.b(radio_field::SUBFRAME_SLOT) & 0x0f) << 2) | (self.b(radio_field::SLOT_SYMBOL) >> 6)
    }

    /// symbolId (U-plane) / startSymbolId (C-plane).
    pub fn symbol_id(&self) -> u8 {
        self.b(radio_field::SLOT_SYMBOL) & 0x3f
    }
}

/// The radio application header's fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RadioRepr {
    pub data_direction: u8,
    pub payload_version: u8,
    pub filter_index: u8,
    pub frame_id: u8,
    pub subframe_id: u8,
    pub slot_id: u8,
    pub symbol_id: u8,
}

impl RadioRepr {
    pub fn parse<T: AsRef<[u8]>>(h: &RadioHeader<T>) -> Self {
        RadioRepr {
            data_direction: h.data_direction(),
            payload_version: h.payload_version(),
            filter_index: h.filter_index(),
            frame_id: h.frame_id(),
            subframe_id: h.subframe_id(),
            slot_id: h.slot_id(),
            symbol_id: h.symbol_id(),
        }
    }

    /// The 4 wire bytes; each field is cut to its width.
    pub fn emit(&self) -> [u8; 4] {
        [
            ((self.data_direction & 1) << 7)
                | ((self.payload_version & 7) << 4)
                | (self.filter_index & 0x0f),
            self.frame_id,
            ((self.subframe_id & 0x0f) << 4) | ((self.slot_id >> 2) & 0x0f),
            ((self.slot_id & 3) << 6) | (self.symbol_id & 0x3f),
        ]
    }
}

/// udCompMeth values (O-RAN CUS Table 6-43).
pub mod comp_meth {
    pub const NONE: u8 = 0;
    pub const BFP: u8 = 1;
    pub const BLOCK_SCALING: u8 = 2;
    pub const MU_LAW: u8 = 3;
    pub const MODULATION: u8 = 4;
}

/// udCompHdr: udIqWidth (4 bits, 0 means 16) and udCompMeth (4 bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdCompHdr {
    pub iq_width: u8,
    pub meth: u8,
}

impl UdCompHdr {
    pub fn from_byte(b: u8) -> Self {
        UdCompHdr {
            iq_width: b >> 4,
            meth: b & 0x0f,
        }
    }

    pub fn to_byte(self) -> u8 {
        ((self.iq_width & 0x0f) << 4) | (self.meth & 0x0f)
    }

    /// The sample width in bits: udIqWidth 0 stands for 16.
    pub fn width(self) -> u8 {
        if self.iq_width == 0 {
            16
        } else {
            self.iq_width
        }
    }
}

mod section_field {
    pub const SECTION_ID: usize = 0;
    pub const FLAGS_START: usize = 1;
    pub const START_LO: usize = 2;
    pub const NUM_PRB: usize = 3;
    pub const LEN: usize = 4;
    pub const UD_COMP_HDR: usize = 4;
    pub const LEN_WITH_COMP_HDR: usize = 6;
}

/// A U-plane section header: sectionId (12 bits), rb, symInc, startPrbu (10 bits), numPrbu (8
/// bits, 0 = every PRB of the carrier), then udCompHdr and a reserved byte when the
/// deployment sends them (dynamic compression). The PRB data follows; its length depends on the
/// compression, so the section's end is the decoder's business.
#[derive(Clone, Copy, Debug)]
pub struct UplaneSection<T: AsRef<[u8]>> {
    buf: T,
    comp_hdr: bool,
}

impl<T: AsRef<[u8]>> UplaneSection<T> {
    pub fn new_checked(buf: T, comp_hdr: bool) -> Result<Self> {
        if buf.as_ref().len() < Self::header_len_for(comp_hdr) {
            return Err(Error::Truncated);
        }
        Ok(UplaneSection { buf, comp_hdr })
    }

    /// Section header bytes: 4, or 6 with udCompHdr.
    pub const fn header_len_for(comp_hdr: bool) -> usize {
        if comp_hdr {
            section_field::LEN_WITH_COMP_HDR
        } else {
            section_field::LEN
        }
    }

    pub fn header_len(&self) -> usize {
        Self::header_len_for(self.comp_hdr)
    }

    fn b(&self, i: usize) -> u8 {
        self.buf.as_ref()[i]
    }

    pub fn section_id(&self) -> u16 {
        be16(self.buf.as_ref(), section_field::SECTION_ID) >> 4
    }

    /// rb: 1 = every other PRB is used.
    pub fn rb(&self) -> bool {
        self.b(section_field::FLAGS_START) & 0x08 != 0
    }

    pub fn sym_inc(&self) -> bool {
        self.b(section_field::FLAGS_START) & 0x04 != 0
    }

    pub fn start_prb(&self) -> u16 {
        (u16::from(self.b(section_field::FLAGS_START) & 3) << 8)
            | u16::from(self.b(section_field::START_LO))
    }

    /// numPrbu as sent (0 = all PRBs of the carrier).
    pub fn num_prb(&self) -> u8 {
        self.b(section_field::NUM_PRB)
    }

    pub fn ud_comp_hdr(&self) -> Option<UdCompHdr> {
        self.comp_hdr
            .then(|| UdCompHdr::from_byte(self.b(section_field::UD_COMP_HDR)))
    }

    /// Bytes after the section header (this section's PRBs and any sections after it).
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UplaneSection<T> {
    fn bm(&mut self, i: usize) -> &mut u8 {
        &mut self.buf.as_mut()[i]
    }

    pub fn set_section_id(&mut self, id: u16) {
        let lo = self.b(section_field::FLAGS_START) & 0x0f;
        *self.bm(section_field::SECTION_ID) = (id >> 4) as u8;
        *self.bm(section_field::FLAGS_START) = (((id & 0x0f) as u8) << 4) | lo;
    }

    pub fn set_flags_start(&mut self, rb: bool, sym_inc: bool, start_prb: u16) {
        let hi = self.b(section_field::FLAGS_START) & 0xf0;
        *self.bm(section_field::FLAGS_START) =
            hi | (u8::from(rb) << 3) | (u8::from(sym_inc) << 2) | ((start_prb >> 8) as u8 & 3);
        *self.bm(section_field::START_LO) = start_prb as u8;
    }

    pub fn set_num_prb(&mut self, n: u8) {
        *self.bm(section_field::NUM_PRB) = n;
    }

    /// Writes udCompHdr and the reserved byte; no-op for a view without them.
    pub fn set_ud_comp_hdr(&mut self, h: UdCompHdr) {
        if self.comp_hdr {
            *self.bm(section_field::UD_COMP_HDR) = h.to_byte();
            *self.bm(section_field::UD_COMP_HDR + 1) = 0;
        }
    }
}

/// A U-plane section header's fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UplaneSectionRepr {
    pub section_id: u16,
    pub rb: bool,
    pub sym_inc: bool,
    pub start_prb: u16,
    pub num_prb: u8,
    pub ud_comp_hdr: Option<UdCompHdr>,
}

impl UplaneSectionRepr {
    pub fn parse<T: AsRef<[u8]>>(s: &UplaneSection<T>) -> Self {
        UplaneSectionRepr {
            section_id: s.section_id(),
            rb: s.rb(),
            sym_inc: s.sym_inc(),
            start_prb: s.start_prb(),
            num_prb: s.num_prb(),
            ud_comp_hdr: s.ud_comp_hdr(),
        }
    }

    pub fn header_len(&self) -> usize {
        UplaneSection::<&[u8]>::header_len_for(self.ud_comp_hdr.is_some())
    }

    /// Writes the header into `buf` (at least [`Self::header_len`] bytes).
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let mut s = UplaneSection::new_checked(buf, self.ud_comp_hdr.is_some())?;
        s.set_section_id(self.section_id);
        s.set_flags_start(self.rb, self.sym_inc, self.start_prb);
        s.set_num_prb(self.num_prb);
        if let Some(h) = self.ud_comp_hdr {
            s.set_ud_comp_hdr(h);
        }
        Ok(())
    }
}

/// C-plane section types (O-RAN CUS Table 7.3-1).
pub mod section_type {
    /// Unused resource blocks or symbols (idle / guard periods).
    pub const UNUSED: u8 = 0;
    /// Most DL/UL channels.
    pub const NORMAL: u8 = 1;
    /// PRACH and mixed numerology channels.
    pub const PRACH: u8 = 3;
    /// UE scheduling information (UE-ID assignment).
    pub const UE_SCHED: u8 = 5;
}

/// Bytes of the C-plane common header (radio header included) for a section type, and of each
/// section before its extensions; `None` for a type this view does not take.
pub fn cplane_lengths(section_type: u8) -> Option<(usize, usize)> {
    match section_type {
        section_type::UNUSED => Some((12, 8)),
        section_type::NORMAL | section_type::UE_SCHED => Some((8, 8)),
        section_type::PRACH => Some((12, 12)),
        _ => None,
    }
}

mod cplane_field {
    pub const NUM_SECTIONS: usize = 4;
    pub const SECTION_TYPE: usize = 5;
    /// Types 1 and 5: udCompHdr right after sectionType.
    pub const UD_COMP_HDR_T1: usize = 6;
    /// Types 0 and 3: timeOffset, frameStructure, cpLength.
    pub const TIME_OFFSET: usize = 6;
    pub const FRAME_STRUCTURE: usize = 8;
    pub const CP_LENGTH: usize = 9;
    /// Type 3: udCompHdr after cpLength.
    pub const UD_COMP_HDR_T3: usize = 11;
}

/// A C-plane message (eCPRI real-time control) of section type 0, 1, 3 or 5. `new_checked`
/// walks every section and its extensions once, so [`CplaneMessage::sections`] cannot fail.
#[derive(Clone, Copy, Debug)]
pub struct CplaneMessage<T: AsRef<[u8]>> {
    buf: T,
}

/// Why a C-plane message was refused (beyond plain truncation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CplaneError {
    #[error("truncated C-plane message")]
    Truncated,
    #[error("section type {0} is not parsed (0, 1, 3 and 5 are)")]
    UnsupportedSectionType(u8),
    #[error("section extension with extLen 0")]
    BadExtLen,
}

impl<T: AsRef<[u8]>> CplaneMessage<T> {
    pub fn new_checked(buf: T) -> core::result::Result<Self, CplaneError> {
        let b = buf.as_ref();
        if b.len() < cplane_field::SECTION_TYPE + 1 {
            return Err(CplaneError::Truncated);
        }
        let ty = b[cplane_field::SECTION_TYPE];
        let (hdr, sec) = cplane_lengths(ty).ok_or(CplaneError::UnsupportedSectionType(ty))?;
        if b.len() < hdr {
            return Err(CplaneError::Truncated);
        }
        let mut off = hdr;
        for _ in 0..b[cplane_field::NUM_SECTIONS] {
            off = section_end(b, off, sec)?;
        }
        Ok(CplaneMessage { buf })
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    pub fn radio(&self) -> RadioRepr {
        // The constructor checked at least 6 bytes.
        RadioRepr::parse(&RadioHeader { buf: self.b() })
    }

    pub fn num_sections(&self) -> u8 {
        self.b()[cplane_field::NUM_SECTIONS]
    }

    pub fn section_type(&self) -> u8 {
        self.b()[cplane_field::SECTION_TYPE]
    }

    /// udCompHdr of the common header (types 1, 3 and 5).
    pub fn ud_comp_hdr(&self) -> Option<UdCompHdr> {
        let at = match self.section_type() {
            section_type::NORMAL | section_type::UE_SCHED => cplane_field::UD_COMP_HDR_T1,
            section_type::PRACH => cplane_field::UD_COMP_HDR_T3,
            _ => return None,
        };
        Some(UdCompHdr::from_byte(self.b()[at]))
    }

    /// timeOffset, frameStructure (FFT size << 4 | subcarrier spacing) and cpLength of types 0
    /// and 3.
    pub fn timing(&self) -> Option<(u16, u8, u16)> {
        matches!(
            self.section_type(),
            section_type::UNUSED | section_type::PRACH
        )
        .then(|| {
            let b = self.b();
            (
                be16(b, cplane_field::TIME_OFFSET),
                b[cplane_field::FRAME_STRUCTURE],
                be16(b, cplane_field::CP_LENGTH),
            )
        })
    }

    /// The sections in order (validated by the constructor).
    pub fn sections(&self) -> impl Iterator<Item = CplaneSection> + '_ {
        let ty = self.section_type();
        let (hdr, sec) = cplane_lengths(ty).unwrap_or((usize::MAX, 0));
        let b = self.b();
        let mut off = hdr;
        (0..self.num_sections()).filter_map(move |_| {
            let start = off;
            off = section_end(b, off, sec).ok()?;
            Some(CplaneSection::parse(ty, &b[start..off]))
        })
    }
}

/// End of the section at `off` (fixed part `sec` bytes, then extensions while ef is set).
fn section_end(b: &[u8], off: usize, sec: usize) -> core::result::Result<usize, CplaneError> {
    let fixed_end = off.checked_add(sec).ok_or(CplaneError::Truncated)?;
    if fixed_end > b.len() {
        return Err(CplaneError::Truncated);
    }
    // ef is the top bit of the byte after reMask / numSymbol.
    let mut ef = b[off + 6] & 0x80 != 0;
    let mut at = fixed_end;
    while ef {
        if at + 2 > b.len() {
            return Err(CplaneError::Truncated);
        }
        ef = b[at] & 0x80 != 0;
        let ext_type = b[at] & 0x7f;
        // extType 11 (flexible beamforming weights) has a 16-bit extLen; the others 8 bits.
        let words = if ext_type == 11 {
            if at + 3 > b.len() {
                return Err(CplaneError::Truncated);
            }
            usize::from(be16(b, at + 1))
        } else {
            usize::from(b[at + 1])
        };
        if words == 0 {
            return Err(CplaneError::BadExtLen);
        }
        at += 4 * words;
        if at > b.len() {
            return Err(CplaneError::Truncated);
        }
    }
    Ok(at)
}

/// One C-plane section's fixed fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CplaneSection {
    pub section_id: u16,
    pub rb: bool,
    pub sym_inc: bool,
    pub start_prb: u16,
    pub num_prb: u8,
    pub re_mask: u16,
    pub num_symbol: u8,
    pub ef: bool,
    /// beamId (types 1 and 3), ueId (type 5), 0 for type 0.
    pub beam_or_ue_id: u16,
    /// frequencyOffset (type 3, 24-bit two's complement), 0 otherwise.
    pub freq_offset: i32,
    /// Bytes of section extensions after the fixed part.
    pub ext_len: usize,
}

impl CplaneSection {
    /// `b` is the whole section (fixed part and extensions), already length-checked.
    fn parse(ty: u8, b: &[u8]) -> Self {
        let fixed = if ty == section_type::PRACH { 12 } else { 8 };
        let freq_offset = if ty == section_type::PRACH {
            let raw = (u32::from(b[8]) << 16) | (u32::from(b[9]) << 8) | u32::from(b[10]);
            ((raw << 8) as i32) >> 8
        } else {
            0
        };
        CplaneSection {
            section_id: be16(b, 0) >> 4,
            rb: b[1] & 0x08 != 0,
            sym_inc: b[1] & 0x04 != 0,
            start_prb: (u16::from(b[1] & 3) << 8) | u16::from(b[2]),
            num_prb: b[3],
            re_mask: be16(b, 4) >> 4,
            num_symbol: b[5] & 0x0f,
            ef: b[6] & 0x80 != 0,
            beam_or_ue_id: if ty == section_type::UNUSED {
                0
            } else {
                be16(b, 6) & 0x7fff
            },
            freq_offset,
            ext_len: b.len() - fixed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eaxc_split_and_join() {
        let d = EaxcBits::default();
        let e = d.split(0x1234);
        assert_eq!(
            e,
            Eaxc {
                du_port: 1,
                band_sector: 2,
                cc: 3,
                ru_port: 4
            }
        );
        assert_eq!(d.join(e), 0x1234);
        // Wireshark's default split 2/6/4/4.
        let w = EaxcBits::new([2, 6, 4, 4]).unwrap();
        let e = w.split(0b1100_0101_0110_1001);
        assert_eq!((e.du_port, e.band_sector, e.cc, e.ru_port), (3, 5, 6, 9));
        assert_eq!(w.join(e), 0b1100_0101_0110_1001);
        let z = EaxcBits::new([0, 0, 8, 8]).unwrap();
        assert_eq!(z.split(0xabcd).du_port, 0);
        assert_eq!(z.split(0xabcd).cc, 0xab);
        assert!(EaxcBits::new([4, 4, 4, 5]).unwrap_err().contains("17 bits"));
    }

    #[test]
    fn radio_header_bytes() {
        // UL, version 1, filter 0, frame 0x5a, subframe 9, slot 0b10_1101, symbol 13.
        let b = [0x10, 0x5a, 0x9b, 0x4d];
        let h = RadioHeader::new_checked(&b[..]).unwrap();
        let r = RadioRepr::parse(&h);
        assert_eq!(
            r,
            RadioRepr {
                data_direction: DIR_UPLINK,
                payload_version: 1,
                filter_index: 0,
                frame_id: 0x5a,
                subframe_id: 9,
                slot_id: 0b10_1101,
                symbol_id: 13
            }
        );
        assert_eq!(r.emit(), b);
        // The first downlink header of up_bfp9.pcap.
        let h = RadioHeader::new_checked([0x90u8, 0, 0, 0]).unwrap();
        assert_eq!((h.data_direction(), h.payload_version()), (DIR_DOWNLINK, 1));
        assert_eq!(
            RadioHeader::new_checked(&b[..3]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn uplane_section_bytes() {
        // Section 1, rb 0, symInc 0, startPrbu 0, numPrbu 4 (up_bfp9.pcap frame 1).
        let b = [0x00, 0x10, 0x00, 0x04, 0x01, 0x14];
        let s = UplaneSection::new_checked(&b[..], false).unwrap();
        assert_eq!((s.section_id(), s.start_prb(), s.num_prb()), (1, 0, 4));
        assert_eq!(s.ud_comp_hdr(), None);
        assert_eq!(s.payload(), &[0x01, 0x14]);
        // Section 0xabc, rb, symInc, startPrbu 0x3ff, numPrbu 0, udCompHdr width 9 BFP.
        let b = [0xab, 0xcf, 0xff, 0x00, 0x91, 0x00, 0x07];
        let s = UplaneSection::new_checked(&b[..], true).unwrap();
        let r = UplaneSectionRepr::parse(&s);
        assert_eq!(
            r,
            UplaneSectionRepr {
                section_id: 0xabc,
                rb: true,
                sym_inc: true,
                start_prb: 0x3ff,
                num_prb: 0,
                ud_comp_hdr: Some(UdCompHdr {
                    iq_width: 9,
                    meth: 1
                })
            }
        );
        assert_eq!(s.payload(), &[0x07]);
        let mut out = [0u8; 6];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b[..6]);
        assert!(r.emit(&mut [0u8; 5]).is_err());
        assert_eq!(
            UplaneSection::new_checked(&b[..5], true).unwrap_err(),
            Error::Truncated
        );
        assert!(UplaneSection::new_checked(&b[..4], false).is_ok());
        assert_eq!(UdCompHdr::from_byte(0x01).width(), 16);
    }

    /// A type-1 C-plane message: 2 sections, the second with one extension (type 1, 2 words).
    fn type1() -> Vec<u8> {
        let mut m = vec![0x10, 0x01, 0x10, 0x42, 2, 1, 0x91, 0];
        // section 5, startPrbc 10, numPrbc 20, reMask 0xfff, numSymbol 14? (4 bits: 14), beam 7.
        m.extend_from_slice(&[0x00, 0x50, 0x0a, 20, 0xff, 0xfe, 0x00, 0x07]);
        // section 6 with ef: beam 0x1234.
        m.extend_from_slice(&[0x00, 0x60, 0x00, 0, 0xff, 0xf1, 0x92, 0x34]);
        m.extend_from_slice(&[0x01, 0x02, 0, 0, 0, 0, 0, 0]);
        m
    }

    #[test]
    fn cplane_type1_bytes() {
        let m = type1();
        let c = CplaneMessage::new_checked(&m[..]).unwrap();
        assert_eq!((c.section_type(), c.num_sections()), (1, 2));
        assert_eq!(c.radio().frame_id, 1);
        assert_eq!(
            c.ud_comp_hdr(),
            Some(UdCompHdr {
                iq_width: 9,
                meth: 1
            })
        );
        assert_eq!(c.timing(), None);
        let s: Vec<CplaneSection> = c.sections().collect();
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].section_id, s[0].start_prb, s[0].num_prb, s[0].re_mask),
            (5, 10, 20, 0xfff)
        );
        assert_eq!(
            (s[0].num_symbol, s[0].beam_or_ue_id, s[0].ef),
            (14, 7, false)
        );
        assert_eq!(
            (s[1].section_id, s[1].ef, s[1].beam_or_ue_id),
            (6, true, 0x1234)
        );
        assert_eq!(s[1].ext_len, 8);
        // Every cut is refused as truncated, never a panic.
        for cut in 0..m.len() {
            assert!(CplaneMessage::new_checked(&m[..cut]).is_err(), "cut {cut}");
        }
        let mut bad = m.clone();
        bad[25] = 0; // extLen 0
        assert_eq!(
            CplaneMessage::new_checked(&bad[..]).unwrap_err(),
            CplaneError::BadExtLen
        );
        bad[5] = 6;
        assert_eq!(
            CplaneMessage::new_checked(&bad[..]).unwrap_err(),
            CplaneError::UnsupportedSectionType(6)
        );
    }

    #[test]
    fn cplane_type3_bytes() {
        // Type 3: timeOffset 0x0102, frameStructure 0xc1, cpLength 0x0304, udCompHdr 0xe1.
        let mut m = vec![
            0x10, 0x02, 0x00, 0x00, 1, 3, 0x01, 0x02, 0xc1, 0x03, 0x04, 0xe1,
        ];
        // section 1, 12 PRBs, beam 1, frequencyOffset -2.
        m.extend_from_slice(&[0x00, 0x10, 0x00, 12, 0xff, 0xf1, 0x00, 0x01]);
        m.extend_from_slice(&[0xff, 0xff, 0xfe, 0x00]);
        let c = CplaneMessage::new_checked(&m[..]).unwrap();
        assert_eq!(c.timing(), Some((0x0102, 0xc1, 0x0304)));
        assert_eq!(c.ud_comp_hdr().map(|h| h.width()), Some(14));
        let s: Vec<CplaneSection> = c.sections().collect();
        assert_eq!((s[0].num_prb, s[0].freq_offset, s[0].ext_len), (12, -2, 0));
        assert!(CplaneMessage::new_checked(&m[..m.len() - 1]).is_err());
        // Type 0 and 5 are recognised.
        let t0 = [0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            CplaneMessage::new_checked(&t0[..]).unwrap().num_sections(),
            0
        );
        let t5 = [
            0x10, 0, 0, 0, 1, 5, 0x91, 0, 0, 0x10, 0, 1, 0xff, 0xf1, 0x00, 0x2a,
        ];
        let c = CplaneMessage::new_checked(&t5[..]).unwrap();
        assert_eq!(c.sections().next().map(|s| s.beam_or_ue_id), Some(42));
    }
}
