//! IPv4 header (RFC 791).

use super::{array, be16, checksum, emit_buf, put16, Error, Result};

mod field {
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const TOTAL_LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
    pub const MIN_HEADER_LEN: usize = 20;
}

/// Offset of the total-length field (for error offsets).
pub const TOTAL_LEN_FIELD: usize = field::TOTAL_LEN;

/// An IPv4 header. `new_checked` validates the header itself (version, IHL, options present,
/// total length >= header length); whether the total length fits the frame is the caller's
/// decision (see `stage::parse`), so truncated captures still show their addresses.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl Packet<&'static [u8]> {
    pub const MIN_HEADER_LEN: usize = field::MIN_HEADER_LEN;
}

/// Length of the IPv4 header without options.
pub const MIN_HEADER_LEN: usize = field::MIN_HEADER_LEN;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Errors: `Truncated` (fixed part or options cut), `BadVersion`, `BadHeaderLen` (IHL < 5),
    /// `BadLength` (total length < IHL * 4).
    pub fn new_checked(buf: T) -> Result<Self> {
        let len = buf.as_ref().len();
        if len < field::MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = Packet { buf };
        if p.version() != 4 {
            return Err(Error::BadVersion);
        }
        if p.header_len() < field::MIN_HEADER_LEN {
            return Err(Error::BadHeaderLen);
        }
        if (p.total_len() as usize) < p.header_len() {
            return Err(Error::BadLength);
        }
        if len < p.header_len() {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    pub fn into_inner(self) -> T {
        self.buf
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }

    /// IHL * 4.
    pub fn header_len(&self) -> usize {
        (self.b()[field::VER_IHL] & 0x0F) as usize * 4
    }

    pub fn tos(&self) -> u8 {
        self.b()[field::TOS]
    }

    /// The DSCP: the high 6 bits of the TOS byte (RFC 2474).
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    pub fn total_len(&self) -> u16 {
        be16(self.b(), field::TOTAL_LEN)
    }

    pub fn ident(&self) -> u16 {
        be16(self.b(), field::IDENT)
    }

    pub fn dont_frag(&self) -> bool {
        self.b()[field::FLAGS_FRAG] & 0x40 != 0
    }

    pub fn more_frags(&self) -> bool {
        self.b()[field::FLAGS_FRAG] & 0x20 != 0
    }

    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        be16(self.b(), field::FLAGS_FRAG) & 0x1FFF
    }

    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }

    pub fn protocol(&self) -> u8 {
        self.b()[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM)
    }

    pub fn src(&self) -> [u8; 4] {
        array(self.b(), field::SRC)
    }

    pub fn dst(&self) -> [u8; 4] {
        array(self.b(), field::DST)
    }

    /// Whether the header checksum (options included) is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(0, &self.b()[..self.header_len()])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Options (may be empty), borrowed for as long as the frame.
    pub fn options(&self) -> &'a [u8] {
        let b = self.buf.as_ref();
        &b[field::MIN_HEADER_LEN..(b[field::VER_IHL] & 0x0F) as usize * 4]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }

    /// Replaces the 16-bit header word at `at` (even) and updates the checksum (RFC 1624).
    fn replace_word(&mut self, at: usize, new: u16) {
        let old = be16(self.b(), at);
        put16(self.bm(), at, new);
        let c = checksum::update16(self.checksum(), old, new);
        self.set_checksum(c);
    }

    pub fn set_tos(&mut self, tos: u8) {
        self.bm()[field::TOS] = tos;
    }

    pub fn set_ttl(&mut self, ttl: u8) {
        self.bm()[field::TTL] = ttl;
    }

    pub fn set_protocol(&mut self, p: u8) {
        self.bm()[field::PROTOCOL] = p;
    }

    pub fn set_total_len(&mut self, len: u16) {
        put16(self.bm(), field::TOTAL_LEN, len);
    }

    pub fn set_ident(&mut self, id: u16) {
        put16(self.bm(), field::IDENT, id);
    }

    pub fn set_checksum(&mut self, c: u16) {
        put16(self.bm(), field::CHECKSUM, c);
    }

    pub fn set_src(&mut self, a: [u8; 4]) {
        self.bm()[field::SRC..field::SRC + 4].copy_from_slice(&a);
    }

    pub fn set_dst(&mut self, a: [u8; 4]) {
        self.bm()[field::DST..field::DST + 4].copy_from_slice(&a);
    }

    /// Recomputes the header checksum from scratch (options included).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = checksum::checksum(&self.b()[..hl]);
        self.set_checksum(c);
    }

    /// Sets the TTL and updates the checksum incrementally (TTL and protocol share a word).
    pub fn set_ttl_update_checksum(&mut self, ttl: u8) {
        let w = (u16::from(ttl) << 8) | u16::from(self.protocol());
        self.replace_word(field::TTL, w);
    }

    /// Sets the TOS byte and updates the checksum incrementally (it shares a word with
    /// version / IHL).
    pub fn set_tos_update_checksum(&mut self, tos: u8) {
        let w = (u16::from(self.b()[field::VER_IHL]) << 8) | u16::from(tos);
        self.replace_word(field::VER_IHL, w);
    }

    /// Sets the DSCP (low 6 bits of `dscp`), keeping the ECN bits, checksum updated.
    pub fn set_dscp_update_checksum(&mut self, dscp: u8) {
        let tos = ((dscp & 0x3F) << 2) | (self.tos() & 0x03);
        self.set_tos_update_checksum(tos);
    }
}

/// The header fields, for building frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub protocol: u8,
    pub ttl: u8,
    pub tos: u8,
    pub ident: u16,
    pub more_frags: bool,
    pub frag_offset: u16,
    /// Bytes after the 20-byte header (options are not modelled).
    pub payload_len: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Self {
        Repr {
            src: p.src(),
            dst: p.dst(),
            protocol: p.protocol(),
            ttl: p.ttl(),
            tos: p.tos(),
            ident: p.ident(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
            payload_len: p.total_len().saturating_sub(p.header_len() as u16),
        }
    }

    /// Writes the 20-byte header (IHL 5, DF clear) with its checksum at the start of `buf`.
    /// Errors: `Truncated` when `buf` is shorter than 20 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let h = emit_buf(buf, field::MIN_HEADER_LEN)?;
        h[field::VER_IHL] = 0x45;
        h[field::TOS] = self.tos;
        put16(
            h,
            field::TOTAL_LEN,
            self.payload_len.wrapping_add(field::MIN_HEADER_LEN as u16),
        );
        put16(h, field::IDENT, self.ident);
        let ff = (self.frag_offset & 0x1FFF) | if self.more_frags { 0x2000 } else { 0 };
        put16(h, field::FLAGS_FRAG, ff);
        h[field::TTL] = self.ttl;
        h[field::PROTOCOL] = self.protocol;
        put16(h, field::CHECKSUM, 0);
        h[field::SRC..field::SRC + 4].copy_from_slice(&self.src);
        h[field::DST..field::DST + 4].copy_from_slice(&self.dst);
        let c = checksum::checksum(h);
        put16(h, field::CHECKSUM, c);
        Ok(field::MIN_HEADER_LEN)
    }

    /// [`Repr::emit`] into a new array.
    pub fn to_bytes(&self) -> [u8; 20] {
        let mut h = [0u8; 20];
        // 20 bytes always fit.
        let _ = self.emit(&mut h);
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 10.0.5.1 -> 10.0.5.2, SCTP, IHL 6 with a record-route option, total length 36.
    const WITH_OPTIONS: [u8; 24] = [
        0x46, 0x00, 0x00, 0x24, 0x00, 0x01, 0x00, 0x00, 0x40, 0x84, 0x00, 0x00, 10, 0, 5, 1, 10, 0,
        5, 2, 0x07, 0x03, 0x04, 0x00,
    ];

    #[test]
    fn fields_and_options() {
        let p = Packet::new_checked(&WITH_OPTIONS).unwrap();
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.total_len(), 36);
        assert_eq!(p.protocol(), 132);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.src(), [10, 0, 5, 1]);
        assert_eq!(p.dst(), [10, 0, 5, 2]);
        assert_eq!(p.options(), &[7, 3, 4, 0]);
        assert!(!p.more_frags());
    }

    #[test]
    fn header_errors() {
        assert_eq!(
            Packet::new_checked(&WITH_OPTIONS[..19]).unwrap_err(),
            Error::Truncated
        );
        // Options cut.
        assert_eq!(
            Packet::new_checked(&WITH_OPTIONS[..22]).unwrap_err(),
            Error::Truncated
        );
        let mut b = WITH_OPTIONS;
        b[0] = 0x43;
        assert_eq!(Packet::new_checked(&b).unwrap_err(), Error::BadHeaderLen);
        b[0] = 0x65;
        assert_eq!(Packet::new_checked(&b).unwrap_err(), Error::BadVersion);
        let mut b = WITH_OPTIONS;
        b[3] = 20; // total length < 24-byte header
        assert_eq!(Packet::new_checked(&b).unwrap_err(), Error::BadLength);
    }

    #[test]
    fn fragment_fields_and_repr_round_trip() {
        let r = Repr {
            src: [1, 2, 3, 4],
            dst: [5, 6, 7, 8],
            protocol: 17,
            ttl: 9,
            tos: 0xb8,
            ident: 0x1234,
            more_frags: true,
            frag_offset: 125,
            payload_len: 1000,
        };
        let mut h = [0u8; 20];
        assert_eq!(r.emit(&mut h), Ok(20));
        let p = Packet::new_checked(&h).unwrap();
        assert_eq!(p.frag_offset(), 125);
        assert!(p.more_frags());
        assert!(p.verify_checksum());
        assert_eq!(Repr::parse(&p), r);
        assert_eq!(r.emit(&mut h[..19]), Err(Error::Truncated));
    }

    // The same header emitted by a tested peer (etherparse) and by Repr::emit.
    #[test]
    fn emit_matches_etherparse() {
        let mut e = etherparse::Ipv4Header::new(
            1000,
            9,
            etherparse::IpNumber(17),
            [1, 2, 3, 4],
            [5, 6, 7, 8],
        )
        .unwrap();
        e.identification = 0x1234;
        e.dont_fragment = false;
        e.dscp = etherparse::IpDscp::try_new(0x2e).unwrap();
        e.header_checksum = e.calc_header_checksum();
        let r = Repr {
            src: [1, 2, 3, 4],
            dst: [5, 6, 7, 8],
            protocol: 17,
            ttl: 9,
            tos: 0x2e << 2,
            ident: 0x1234,
            more_frags: false,
            frag_offset: 0,
            payload_len: 1000,
        };
        let mut h = [0u8; 20];
        r.emit(&mut h).unwrap();
        assert_eq!(h[..], e.to_bytes()[..]);
    }

    #[test]
    fn incremental_setters_keep_the_checksum_right() {
        let mut b = WITH_OPTIONS;
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.fill_checksum();
        assert!(p.verify_checksum());
        for ttl in [63u8, 1, 0, 255] {
            p.set_ttl_update_checksum(ttl);
            assert_eq!(p.ttl(), ttl);
            assert!(p.verify_checksum(), "ttl {ttl}");
        }
        p.set_dscp_update_checksum(46);
        assert_eq!((p.dscp(), p.tos() & 3), (46, 0));
        assert!(p.verify_checksum());
        let c = p.checksum();
        p.fill_checksum();
        assert_eq!(p.checksum(), c, "incremental equals full recomputation");
        p.set_ttl(1);
        assert!(
            !p.verify_checksum(),
            "a raw setter leaves the checksum stale"
        );
        assert_eq!(b[8], 1);
    }
}
