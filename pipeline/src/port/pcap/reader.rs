//! Streaming reader for capture files: classic pcap (both byte orders, microsecond and
//! nanosecond magic) and pcapng (SHB / IDB / EPB / SPB / obsolete PB, several sections and
//! interfaces, per-interface link type and timestamp resolution, both byte orders; other blocks
//! are skipped).
//!
//! Every length read from the file is checked before use; a truncated or corrupt file is a
//! [`PortError::Format`] naming the file and the byte offset of the bad record. Nothing here
//! panics on any input (see `tests/port_pcap_reader.rs`, which feeds random bytes).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::port::PortError;

/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u16 = 1;

/// Largest record (pcap packet or pcapng block) accepted. Real frames are at most a few hundred
/// KiB; a larger length means a corrupt file, and refusing it bounds memory use.
pub const MAX_RECORD_LEN: u32 = 16 << 20;

const PCAP_MAGIC_US: u32 = 0xA1B2_C3D4;
const PCAP_MAGIC_NS: u32 = 0xA1B2_3C4D;
const PCAPNG_SHB: u32 = 0x0A0D_0D0A;
const PCAPNG_BOM: u32 = 0x1A2B_3C4D;
const BT_IDB: u32 = 1;
const BT_PB: u32 = 2;
const BT_SPB: u32 = 3;
const BT_EPB: u32 = 6;

/// The Wireshark / tcpdump short name of a link type (the names `capinfos` and `tshark -T`
/// print), for error messages and the `parse` CLI. `None` for types without a common name.
pub fn link_type_name(link_type: u16) -> Option<&'static str> {
    Some(match link_type {
        0 => "null",
        1 => "ether",
        6 => "ieee-802-5",
        8 => "slip",
        9 => "ppp",
        10 => "fddi",
        12 | 14 | 101 => "rawip",
        50 => "ppp",
        51 => "pppoe",
        100 => "atm-rfc1483",
        104 => "chdlc",
        105 => "ieee-802-11",
        106 => "linux-atm-clip",
        107 => "frelay",
        108 => "loop",
        113 => "linux-sll",
        117 => "pflog",
        119 => "prism",
        122 => "ip-over-fc",
        123 => "atm-pdus",
        127 => "ieee-802-11-radiotap",
        129 => "arcnet_linux",
        137 => "juniper-atm1",
        147..=162 => return user_name(link_type),
        178 => "juniper-ether",
        195 => "wpan",
        220 => "usb-linux-mmapped",
        226 => "ipnet",
        228 => "rawip4",
        229 => "rawip6",
        231 => "dbus",
        239 => "nflog",
        242 => "ip-ib",
        258 => "pktap",
        271 => "vsock",
        276 => "linux-sll2",
        _ => return None,
    })
}

fn user_name(link_type: u16) -> Option<&'static str> {
    const USER: [&str; 16] = [
        "user0", "user1", "user2", "user3", "user4", "user5", "user6", "user7", "user8", "user9",
        "user10", "user11", "user12", "user13", "user14", "user15",
    ];
    USER.get(usize::from(link_type.checked_sub(147)?)).copied()
}

/// `"113 (linux-sll)"`, or just the number for unnamed types.
pub fn describe_link_type(link_type: u16) -> String {
    match link_type_name(link_type) {
        Some(n) => format!("{link_type} ({n})"),
        None => link_type.to_string(),
    }
}

/// Which container format a file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureFormat {
    /// Classic libpcap; `nanos` for the nanosecond-resolution magic.
    Pcap {
        nanos: bool,
    },
    Pcapng,
}

/// One captured frame, borrowed from the reader until the next call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Capture timestamp in nanoseconds since the Unix epoch (saturating on overflow).
    pub timestamp_ns: u64,
    /// The captured bytes (`caplen` of them).
    pub data: &'a [u8],
    /// Length of the frame on the wire (>= `data.len()` in a well-formed file).
    pub orig_len: u32,
    /// Link type of the frame's interface (low 16 bits of the pcap header field).
    pub link_type: u16,
    /// pcapng interface id within its section (0 for pcap).
    pub interface: u32,
    /// Byte offset of the record in the file (for error messages).
    pub offset: u64,
}

#[derive(Clone, Copy, Debug)]
struct Interface {
    link_type: u16,
    snaplen: u32,
    /// Timestamp resolution: `(is_power_of_two, exponent)`; units are 10^-e or 2^-e seconds.
    tsresol: (bool, u8),
    /// `if_tsoffset`, seconds added to every timestamp.
    tsoffset: i64,
}

enum Kind {
    Pcap {
        big_endian: bool,
        nanos: bool,
        link_type: u16,
    },
    Pcapng {
        big_endian: bool,
        interfaces: Vec<Interface>,
    },
}

/// A streaming capture-file reader. See the module documentation.
pub struct CaptureReader {
    path: String,
    src: Box<dyn Read + Send>,
    /// Bytes consumed from the file so far.
    pos: u64,
    kind: Kind,
    buf: Vec<u8>,
    require_ethernet: bool,
}

impl std::fmt::Debug for CaptureReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureReader")
            .field("path", &self.path)
            .field("pos", &self.pos)
            .field("format", &self.format())
            .finish()
    }
}

/// `rd16` / `rd32` / `rd64`: the integer at `at` of `b` in big (`be`) or little endian; 0
/// where `b` is too short (the callers check lengths first; this only keeps a slip from
/// panicking).
macro_rules! rd {
    ($name:ident, $t:ty) => {
        fn $name(b: &[u8], at: usize, be: bool) -> $t {
            let mut a = [0u8; std::mem::size_of::<$t>()];
            if let Some(s) = b.get(at..at + a.len()) {
                a.copy_from_slice(s);
            }
            if be {
                <$t>::from_be_bytes(a)
            } else {
                <$t>::from_le_bytes(a)
            }
        }
    };
}
rd!(rd16, u16);
rd!(rd32, u32);
rd!(rd64, u64);

/// Converts `ts` units of the given resolution (plus an offset in seconds) to nanoseconds,
/// saturating instead of overflowing.
fn ts_to_ns(ts: u64, tsresol: (bool, u8), tsoffset: i64) -> u64 {
    let ns: u128 = match tsresol {
        (false, e) if e <= 9 => u128::from(ts) * 10u128.pow(9 - u32::from(e)),
        (false, e) => {
            // 10^e overflows u128 past e = 38; such a resolution leaves nothing but zero.
            match 10u128.checked_pow(u32::from(e) - 9) {
                Some(div) => u128::from(ts) / div,
                None => 0,
            }
        }
        (true, e) => {
            let scaled = u128::from(ts) * 1_000_000_000;
            if e >= 127 {
                0
            } else {
                scaled >> e
            }
        }
    };
    let off = i128::from(tsoffset) * 1_000_000_000;
    let total = (ns as i128).saturating_add(off);
    total.clamp(0, i128::from(u64::MAX)) as u64
}

impl CaptureReader {
    /// Opens a pcap or pcapng file and reads its file header. Any link type is accepted; check
    /// [`Frame::link_type`] (or use [`CaptureReader::open_ethernet`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PortError> {
        let p = path.as_ref();
        let name = p.display().to_string();
        let file = File::open(p).map_err(|source| PortError::Io {
            path: name.clone(),
            error: source,
        })?;
        Self::from_reader(name, BufReader::with_capacity(1 << 16, file))
    }

    /// Like [`CaptureReader::open`], but a link type other than Ethernet (in the pcap header or
    /// any pcapng interface) is an error naming the file and the link type.
    pub fn open_ethernet(path: impl AsRef<Path>) -> Result<Self, PortError> {
        let mut r = Self::open(path)?;
        r.require_ethernet(true)?;
        Ok(r)
    }

    /// Reads a capture from any byte stream; `name` is used in error messages.
    pub fn from_reader(
        name: impl Into<String>,
        src: impl Read + Send + 'static,
    ) -> Result<Self, PortError> {
        let mut r = CaptureReader {
            path: name.into(),
            src: Box::new(src),
            pos: 0,
            kind: Kind::Pcap {
                big_endian: false,
                nanos: false,
                link_type: 0,
            },
            buf: Vec::new(),
            require_ethernet: false,
        };
        r.read_file_header()?;
        Ok(r)
    }

    /// Turns the Ethernet-only check on or off. When on, it applies to the pcap header now and
    /// to every pcapng interface block read from here on.
    pub fn require_ethernet(&mut self, on: bool) -> Result<(), PortError> {
        self.require_ethernet = on;
        if on {
            if let Kind::Pcap { link_type, .. } = self.kind {
                self.check_link_type(link_type, 0)?;
            }
            if let Kind::Pcapng { interfaces, .. } = &self.kind {
                if let Some(i) = interfaces.iter().find(|i| i.link_type != LINKTYPE_ETHERNET) {
                    return Err(self.not_ethernet(i.link_type, 0));
                }
            }
        }
        Ok(())
    }

    /// The file name used in errors.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn format(&self) -> CaptureFormat {
        match self.kind {
            Kind::Pcap { nanos, .. } => CaptureFormat::Pcap { nanos },
            Kind::Pcapng { .. } => CaptureFormat::Pcapng,
        }
    }

    /// Link type of a classic pcap file, or of the first interface of a pcapng file seen so far.
    pub fn link_type(&self) -> Option<u16> {
        match &self.kind {
            Kind::Pcap { link_type, .. } => Some(*link_type),
            Kind::Pcapng { interfaces, .. } => interfaces.first().map(|i| i.link_type),
        }
    }

    fn err(&self, offset: u64, reason: impl std::fmt::Display) -> PortError {
        PortError::Format {
            path: self.path.clone(),
            reason: format!("at byte offset {offset}: {reason}"),
        }
    }

    fn not_ethernet(&self, link_type: u16, offset: u64) -> PortError {
        self.err(
            offset,
            format!(
                "link type {} is not Ethernet (only link type 1, ether, is supported)",
                describe_link_type(link_type)
            ),
        )
    }

    fn check_link_type(&self, link_type: u16, offset: u64) -> Result<(), PortError> {
        if self.require_ethernet && link_type != LINKTYPE_ETHERNET {
            return Err(self.not_ethernet(link_type, offset));
        }
        Ok(())
    }

    /// Reads up to `n` bytes into `self.buf` (replacing it). Returns how many were read (fewer
    /// only at end of file). Grows the buffer as data arrives, so a bogus huge length in a
    /// truncated file does not allocate that much.
    fn fill(&mut self, n: usize) -> Result<usize, PortError> {
        self.buf.clear();
        let got = (&mut self.src)
            .take(n as u64)
            .read_to_end(&mut self.buf)
            .map_err(|source| PortError::Io {
                path: self.path.clone(),
                error: source,
            })?;
        self.pos += got as u64;
        Ok(got)
    }

    fn read_file_header(&mut self) -> Result<(), PortError> {
        let got = self.fill(24)?;
        if got < 4 {
            return Err(self.err(0, "file too short for a capture header (empty file?)"));
        }
        let magic_le = rd32(&self.buf, 0, false);
        let magic_be = rd32(&self.buf, 0, true);
        if magic_le == PCAPNG_SHB {
            // pcapng: the 24 bytes read are the start of the first section header block.
            return self.read_shb(0);
        }
        let (big_endian, nanos) = match (magic_le, magic_be) {
            (PCAP_MAGIC_US, _) => (false, false),
            (PCAP_MAGIC_NS, _) => (false, true),
            (_, PCAP_MAGIC_US) => (true, false),
            (_, PCAP_MAGIC_NS) => (true, true),
            _ => {
                return Err(self.err(
                    0,
                    format!("not a pcap or pcapng file (magic 0x{magic_be:08x})"),
                ))
            }
        };
        if got < 24 {
            return Err(self.err(0, format!("pcap file header truncated ({got} of 24 bytes)")));
        }
        let link_type = (rd32(&self.buf, 20, big_endian) & 0xFFFF) as u16;
        self.kind = Kind::Pcap {
            big_endian,
            nanos,
            link_type,
        };
        self.check_link_type(link_type, 20)
    }

    /// Parses a section header block whose first `self.buf.len()` bytes have been read and
    /// which starts at byte `start`.
    fn read_shb(&mut self, start: u64) -> Result<(), PortError> {
        let have = self.buf.len();
        if have < 12 {
            let more = self.read_more(12 - have)?;
            if more < 12 - have {
                return Err(self.err(start, "section header block truncated"));
            }
        }
        let bom = rd32(&self.buf, 8, false);
        let big_endian = match bom {
            PCAPNG_BOM => false,
            _ if rd32(&self.buf, 8, true) == PCAPNG_BOM => true,
            _ => {
                return Err(self.err(
                    start + 8,
                    format!("bad pcapng byte-order magic 0x{bom:08x}"),
                ))
            }
        };
        let total = rd32(&self.buf, 4, big_endian);
        self.check_block_len(total, 28, start)?;
        let have = self.buf.len();
        let want = total as usize - have;
        if self.read_more(want)? < want {
            return Err(self.err(start, "section header block truncated"));
        }
        self.check_trailer(total, big_endian, start)?;
        let major = rd16(&self.buf, 12, big_endian);
        if major != 1 {
            return Err(self.err(
                start + 12,
                format!("unsupported pcapng major version {major}"),
            ));
        }
        self.kind = Kind::Pcapng {
            big_endian,
            interfaces: Vec::new(),
        };
        Ok(())
    }

    /// Appends up to `n` more bytes to `self.buf`.
    fn read_more(&mut self, n: usize) -> Result<usize, PortError> {
        let got = (&mut self.src)
            .take(n as u64)
            .read_to_end(&mut self.buf)
            .map_err(|source| PortError::Io {
                path: self.path.clone(),
                error: source,
            })?;
        self.pos += got as u64;
        Ok(got)
    }

    fn check_block_len(&self, total: u32, min: u32, start: u64) -> Result<(), PortError> {
        if total < min || total % 4 != 0 || total > MAX_RECORD_LEN {
            return Err(self.err(
                start + 4,
                format!("bad pcapng block length {total} (must be a multiple of 4, >= {min}, <= {MAX_RECORD_LEN})"),
            ));
        }
        Ok(())
    }

    fn check_trailer(&self, total: u32, be: bool, start: u64) -> Result<(), PortError> {
        let trailer = rd32(&self.buf, total as usize - 4, be);
        if trailer != total {
            return Err(self.err(
                start + u64::from(total) - 4,
                format!("pcapng block length {total} and trailing length {trailer} differ"),
            ));
        }
        Ok(())
    }

    /// Returns the next frame, `Ok(None)` at a clean end of file.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, PortError> {
        match self.kind {
            Kind::Pcap {
                big_endian,
                nanos,
                link_type,
            } => self.next_pcap(big_endian, nanos, link_type),
            Kind::Pcapng { .. } => self.next_pcapng(),
        }
    }

    fn next_pcap(
        &mut self,
        be: bool,
        nanos: bool,
        link_type: u16,
    ) -> Result<Option<Frame<'_>>, PortError> {
        let start = self.pos;
        let got = self.fill(16)?;
        if got == 0 {
            return Ok(None);
        }
        if got < 16 {
            return Err(self.err(
                start,
                format!("record header truncated ({got} of 16 bytes)"),
            ));
        }
        let sec = u64::from(rd32(&self.buf, 0, be));
        let frac = u64::from(rd32(&self.buf, 4, be));
        let caplen = rd32(&self.buf, 8, be);
        let orig_len = rd32(&self.buf, 12, be);
        if caplen > MAX_RECORD_LEN {
            return Err(self.err(
                start + 8,
                format!("captured length {caplen} exceeds the limit {MAX_RECORD_LEN}"),
            ));
        }
        let got = self.fill(caplen as usize)?;
        if got < caplen as usize {
            return Err(self.err(
                start,
                format!("packet data truncated ({got} of {caplen} bytes)"),
            ));
        }
        let frac_ns = if nanos { frac } else { frac * 1000 };
        Ok(Some(Frame {
            timestamp_ns: sec * 1_000_000_000 + frac_ns,
            data: &self.buf,
            orig_len,
            link_type,
            interface: 0,
            offset: start,
        }))
    }

    fn next_pcapng(&mut self) -> Result<Option<Frame<'_>>, PortError> {
        loop {
            let start = self.pos;
            let got = self.fill(8)?;
            if got == 0 {
                return Ok(None);
            }
            if got < 8 {
                return Err(self.err(start, format!("block header truncated ({got} of 8 bytes)")));
            }
            let be = match &self.kind {
                Kind::Pcapng { big_endian, .. } => *big_endian,
                Kind::Pcap { .. } => false,
            };
            if rd32(&self.buf, 0, false) == PCAPNG_SHB {
                self.read_shb(start)?;
                continue;
            }
            let btype = rd32(&self.buf, 0, be);
            let total = rd32(&self.buf, 4, be);
            self.check_block_len(total, 12, start)?;
            let want = total as usize - 8;
            let got = self.read_more(want)?;
            if got < want {
                return Err(self.err(
                    start,
                    format!(
                        "block of type {btype} truncated ({} of {total} bytes)",
                        got + 8
                    ),
                ));
            }
            self.check_trailer(total, be, start)?;
            // Body: bytes 8 .. total-4 of self.buf.
            let body_end = total as usize - 4;
            match btype {
                BT_IDB => self.read_idb(be, body_end, start)?,
                BT_EPB | BT_PB => return self.packet_block(btype, be, body_end, start),
                BT_SPB => return self.simple_packet_block(be, body_end, start),
                _ => {} // unknown or uninteresting block (NRB, ISB, DSB, custom): skip
            }
        }
    }

    fn read_idb(&mut self, be: bool, body_end: usize, start: u64) -> Result<(), PortError> {
        if body_end < 16 {
            return Err(self.err(start, "interface description block too short"));
        }
        let link_type = rd16(&self.buf, 8, be);
        let snaplen = rd32(&self.buf, 12, be);
        let mut iface = Interface {
            link_type,
            snaplen,
            tsresol: (false, 6),
            tsoffset: 0,
        };
        // Options: code u16, length u16, value padded to 4.
        let mut at = 16usize;
        while at + 4 <= body_end {
            let code = rd16(&self.buf, at, be);
            let len = usize::from(rd16(&self.buf, at + 2, be));
            let val = at + 4;
            if code == 0 {
                break;
            }
            if val + len > body_end {
                return Err(self.err(
                    start + at as u64,
                    format!("interface option {code} overruns its block"),
                ));
            }
            match (code, len) {
                (9, 1) => {
                    let v = self.buf[val];
                    iface.tsresol = (v & 0x80 != 0, v & 0x7F);
                }
                (14, 8) => iface.tsoffset = rd64(&self.buf, val, be) as i64,
                _ => {}
            }
            at = val + len.div_ceil(4) * 4;
        }
        self.check_link_type(link_type, start + 8)?;
        if let Kind::Pcapng { interfaces, .. } = &mut self.kind {
            interfaces.push(iface);
        }
        Ok(())
    }

    fn interface(&self, id: u32, start: u64) -> Result<Interface, PortError> {
        if let Kind::Pcapng { interfaces, .. } = &self.kind {
            if let Some(i) = interfaces.get(id as usize) {
                return Ok(*i);
            }
        }
        Err(self.err(
            start + 8,
            format!("packet refers to interface {id}, which has no interface description block"),
        ))
    }

    fn packet_block(
        &mut self,
        btype: u32,
        be: bool,
        body_end: usize,
        start: u64,
    ) -> Result<Option<Frame<'_>>, PortError> {
        if body_end < 28 {
            return Err(self.err(start, format!("packet block of type {btype} too short")));
        }
        let id = if btype == BT_EPB {
            rd32(&self.buf, 8, be)
        } else {
            u32::from(rd16(&self.buf, 8, be))
        };
        let iface = self.interface(id, start)?;
        let ts = (u64::from(rd32(&self.buf, 12, be)) << 32) | u64::from(rd32(&self.buf, 16, be));
        let caplen = rd32(&self.buf, 20, be) as usize;
        let orig_len = rd32(&self.buf, 24, be);
        if 28 + caplen > body_end {
            return Err(self.err(
                start + 20,
                format!(
                    "captured length {caplen} overruns its block ({} bytes of data)",
                    body_end - 28
                ),
            ));
        }
        Ok(Some(Frame {
            timestamp_ns: ts_to_ns(ts, iface.tsresol, iface.tsoffset),
            data: &self.buf[28..28 + caplen],
            orig_len,
            link_type: iface.link_type,
            interface: id,
            offset: start,
        }))
    }

    fn simple_packet_block(
        &mut self,
        be: bool,
        body_end: usize,
        start: u64,
    ) -> Result<Option<Frame<'_>>, PortError> {
        if body_end < 12 {
            return Err(self.err(start, "simple packet block too short"));
        }
        let iface = self.interface(0, start)?;
        let orig_len = rd32(&self.buf, 8, be);
        // The captured length is implied: the original length, cut by the snap length and the
        // block size (snaplen 0 means unlimited).
        let mut caplen = (orig_len as usize).min(body_end - 12);
        if iface.snaplen != 0 {
            caplen = caplen.min(iface.snaplen as usize);
        }
        Ok(Some(Frame {
            timestamp_ns: 0,
            data: &self.buf[12..12 + caplen],
            orig_len,
            link_type: iface.link_type,
            interface: 0,
            offset: start,
        }))
    }
}
