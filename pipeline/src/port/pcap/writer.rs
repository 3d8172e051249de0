//! Capture-file writer (pcap with nanosecond timestamps, or pcapng) and the `pcap` port's TX
//! side. A record's captured length is the bytes written (the frame's, cut to the snap length);
//! its original length is the frame's wire length, never less: a frame read from a capture with
//! a small snap length is written as cut as it was read, not as a whole frame of its bytes.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use crate::port::{PortError, TimedFrame, TxPort, TxSent, WireFrame};

/// Output container format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteFormat {
    /// Classic pcap, little-endian, nanosecond-resolution magic (`0xa1b23c4d`).
    #[default]
    Pcap,
    /// pcapng: one section, one Ethernet interface with nanosecond resolution, one enhanced
    /// packet block per frame.
    Pcapng,
}

/// Default snap length: frames longer than this are cut (their original length is kept).
pub const DEFAULT_SNAPLEN: u32 = 262_144;

fn default_snaplen() -> u32 {
    DEFAULT_SNAPLEN
}

/// Options of the `pcap` port's TX side (recording).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcapTxOptions {
    /// Output file; created or truncated when the port opens.
    pub path: PathBuf,
    /// `pcap` (default) or `pcapng`.
    #[serde(default)]
    pub format: WriteFormat,
    /// Longest captured frame in bytes (1 ..= 16 MiB); longer frames are cut, their
    /// original length recorded. Default 262144.
    #[serde(default = "default_snaplen")]
    pub snaplen: u32,
}

impl PcapTxOptions {
    /// The checks [`CaptureWriter::create`] makes before creating the file; the error starts
    /// with the key (`pcap.tx.snaplen: ...`).
    pub fn check(&self) -> Result<(), String> {
        // An empty path would resolve to the config's folder, or to nothing for a config named
        // without one: run then fails where validate passed.
        if self.path.as_os_str().is_empty() {
            return Err("pcap.tx.path: names no file (an empty path)".into());
        }
        let max = crate::port::pcap::MAX_RECORD_LEN;
        if self.snaplen == 0 || self.snaplen > max {
            return Err(format!(
                "pcap.tx.snaplen: must be 1 ..= {max}, got {}",
                self.snaplen
            ));
        }
        Ok(())
    }

    pub fn new(path: impl Into<PathBuf>) -> Self {
        PcapTxOptions {
            path: path.into(),
            format: WriteFormat::default(),
            snaplen: DEFAULT_SNAPLEN,
        }
    }
}

/// Writer of an Ethernet capture file. Frames are buffered and written by [`flush`], and a
/// frame counts as written ([`frames`]) only once the OS took all of its bytes: when a write
/// fails (disk full, `/dev/full`, a file size limit) the file is cut back to its last whole
/// record, so `frames()` is exactly what the file holds.
///
/// [`flush`]: CaptureWriter::flush
/// [`frames`]: CaptureWriter::frames
pub struct CaptureWriter {
    path: String,
    out: File,
    format: WriteFormat,
    snaplen: u32,
    /// Frames in the file.
    frames: u64,
    /// Bytes in the file (whole records only).
    file_len: u64,
    /// Records not yet written, and where each ends in `buf`.
    buf: Vec<u8>,
    ends: Vec<usize>,
}

/// Buffered bytes that trigger a write from [`CaptureWriter::write_frame`].
const FLUSH_AT: usize = 1 << 20;

impl std::fmt::Debug for CaptureWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureWriter")
            .field("path", &self.path)
            .field("format", &self.format)
            .field("frames", &self.frames)
            .finish()
    }
}

impl CaptureWriter {
    /// Creates (truncates) `path` and writes the file header.
    pub fn create(
        path: impl AsRef<Path>,
        format: WriteFormat,
        snaplen: u32,
    ) -> Result<Self, PortError> {
        let name = path.as_ref().display().to_string();
        if snaplen == 0 || snaplen > crate::port::pcap::MAX_RECORD_LEN {
            return Err(PortError::Config(format!(
                "{name}: snaplen must be 1 ..= {}, got {snaplen}",
                crate::port::pcap::MAX_RECORD_LEN
            )));
        }
        let file = File::create(path.as_ref()).map_err(|source| PortError::Io {
            path: name.clone(),
            error: source,
        })?;
        let mut w = CaptureWriter {
            path: name,
            out: file,
            format,
            snaplen,
            frames: 0,
            file_len: 0,
            buf: Vec::with_capacity(64 * 1024),
            ends: Vec::new(),
        };
        let mut hdr = Vec::with_capacity(64);
        match format {
            WriteFormat::Pcap => {
                hdr.extend_from_slice(&0xA1B2_3C4Du32.to_le_bytes());
                hdr.extend_from_slice(&2u16.to_le_bytes());
                hdr.extend_from_slice(&4u16.to_le_bytes());
                hdr.extend_from_slice(&[0; 8]); // thiszone, sigfigs
                hdr.extend_from_slice(&snaplen.to_le_bytes());
                hdr.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
            }
            WriteFormat::Pcapng => {
                // Section header block: BOM, version 1.0, section length unknown (-1).
                hdr.extend_from_slice(&0x0A0D_0D0Au32.to_le_bytes());
                hdr.extend_from_slice(&28u32.to_le_bytes());
                hdr.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
                hdr.extend_from_slice(&1u16.to_le_bytes());
                hdr.extend_from_slice(&0u16.to_le_bytes());
                hdr.extend_from_slice(&u64::MAX.to_le_bytes());
                hdr.extend_from_slice(&28u32.to_le_bytes());
                // Interface description block: Ethernet, snaplen, if_tsresol = 9 (ns).
                hdr.extend_from_slice(&1u32.to_le_bytes());
                hdr.extend_from_slice(&32u32.to_le_bytes());
                hdr.extend_from_slice(&1u16.to_le_bytes());
                hdr.extend_from_slice(&0u16.to_le_bytes());
                hdr.extend_from_slice(&snaplen.to_le_bytes());
                hdr.extend_from_slice(&9u16.to_le_bytes());
                hdr.extend_from_slice(&1u16.to_le_bytes());
                hdr.extend_from_slice(&[9, 0, 0, 0]);
                hdr.extend_from_slice(&[0; 4]); // opt_endofopt
                hdr.extend_from_slice(&32u32.to_le_bytes());
            }
        }
        // Written at once: a file that cannot take even its header fails here, at start.
        w.out.write_all(&hdr).map_err(|source| PortError::Io {
            path: w.path.clone(),
            error: source,
        })?;
        w.file_len = hdr.len() as u64;
        Ok(w)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), PortError> {
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Appends one frame (cut to the snap length). `orig_len` below `frame.len()` is raised
    /// to it.
    pub fn write_frame(
        &mut self,
        frame: &[u8],
        orig_len: u32,
        timestamp_ns: u64,
    ) -> Result<(), PortError> {
        let caplen = frame.len().min(self.snaplen as usize);
        let data = &frame[..caplen];
        let orig_len = orig_len.max(u32::try_from(frame.len()).unwrap_or(u32::MAX));
        let mut hdr = [0u8; 28];
        match self.format {
            WriteFormat::Pcap => {
                let sec = u32::try_from(timestamp_ns / 1_000_000_000).unwrap_or(u32::MAX);
                let ns = (timestamp_ns % 1_000_000_000) as u32;
                hdr[0..4].copy_from_slice(&sec.to_le_bytes());
                hdr[4..8].copy_from_slice(&ns.to_le_bytes());
                hdr[8..12].copy_from_slice(&(caplen as u32).to_le_bytes());
                hdr[12..16].copy_from_slice(&orig_len.to_le_bytes());
                self.write(&hdr[..16])?;
                self.write(data)?;
            }
            WriteFormat::Pcapng => {
                let padded = caplen.div_ceil(4) * 4;
                let total = (32 + padded) as u32;
                hdr[0..4].copy_from_slice(&6u32.to_le_bytes());
                hdr[4..8].copy_from_slice(&total.to_le_bytes());
                hdr[8..12].copy_from_slice(&0u32.to_le_bytes()); // interface 0
                hdr[12..16].copy_from_slice(&((timestamp_ns >> 32) as u32).to_le_bytes());
                hdr[16..20].copy_from_slice(&(timestamp_ns as u32).to_le_bytes());
                hdr[20..24].copy_from_slice(&(caplen as u32).to_le_bytes());
                hdr[24..28].copy_from_slice(&orig_len.to_le_bytes());
                self.write(&hdr)?;
                self.write(data)?;
                self.write(&[0u8; 3][..padded - caplen])?;
                self.write(&total.to_le_bytes())?;
            }
        }
        self.ends.push(self.buf.len());
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    /// Frames in the file so far (written by the OS, not just buffered).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Frames buffered, not yet written.
    pub fn pending(&self) -> usize {
        self.ends.len()
    }

    /// Writes the buffered frames. On an error, the frames whose bytes all reached the file
    /// count as written, the file is cut back to the end of the last of them, and the rest are
    /// discarded.
    pub fn flush(&mut self) -> Result<(), PortError> {
        let mut off = 0usize;
        let mut failure = None;
        while off < self.buf.len() {
            match self.out.write(&self.buf[off..]) {
                Ok(0) => {
                    failure = Some(std::io::Error::from(std::io::ErrorKind::WriteZero));
                    break;
                }
                Ok(n) => off += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let whole = self.ends.partition_point(|&end| end <= off);
        let whole_bytes = if whole == 0 { 0 } else { self.ends[whole - 1] };
        self.frames += whole as u64;
        self.file_len += whole_bytes as u64;
        self.buf.clear();
        self.ends.clear();
        match failure {
            None => Ok(()),
            Some(source) => {
                if off > whole_bytes {
                    // A record's head without its tail would make the file unreadable past it.
                    let _ = self.out.set_len(self.file_len);
                }
                Err(PortError::Io {
                    path: self.path.clone(),
                    error: source,
                })
            }
        }
    }
}

impl Drop for CaptureWriter {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            tracing::warn!("{e}");
        }
    }
}

/// TX side of the `pcap` port: records every frame, stamped with the wall-clock time of the
/// `tx_burst` call (use [`PcapTx::write_frame`] to keep a frame's own timestamp).
pub struct PcapTx {
    name: String,
    writer: CaptureWriter,
    /// A write error after some frames of a burst were written: reported by the next call.
    failed: Option<PortError>,
}

impl std::fmt::Debug for PcapTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapTx").field("name", &self.name).finish()
    }
}

impl PcapTx {
    pub fn create(opts: &PcapTxOptions) -> Result<Self, PortError> {
        let writer = CaptureWriter::create(&opts.path, opts.format, opts.snaplen)?;
        Ok(PcapTx {
            name: format!("pcap:{}", opts.path.display()),
            writer,
            failed: None,
        })
    }

    /// Writes one frame with the given original length and timestamp.
    pub fn write_frame(
        &mut self,
        frame: &[u8],
        orig_len: u32,
        timestamp_ns: u64,
    ) -> Result<(), PortError> {
        self.writer.write_frame(frame, orig_len, timestamp_ns)
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.writer.frames()
    }
}

impl PcapTx {
    /// Writes the frames through to the file, each stamped with its send time, or with the
    /// wall-clock time of the call where that is 0, and with its wire length as the record's
    /// original length (the captured length is the bytes written): the count returned is the
    /// frames the file now holds from this burst, never frames still in a buffer.
    fn write_burst(
        &mut self,
        frames: &mut dyn Iterator<Item = WireFrame<'_>>,
    ) -> Result<usize, PortError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        let before = self.writer.frames();
        let mut result = Ok(());
        for (f, at, wire) in frames {
            let ts = if at == 0 { now } else { at };
            if let Err(e) = self.writer.write_frame(f, wire, ts) {
                result = Err(e);
                break;
            }
        }
        if result.is_ok() {
            result = self.writer.flush();
        } else {
            self.writer.buf.clear();
            self.writer.ends.clear();
        }
        let sent = (self.writer.frames() - before) as usize;
        match result {
            Ok(()) => Ok(sent),
            Err(e) if sent > 0 => {
                self.failed = Some(e);
                Ok(sent)
            }
            Err(e) => Err(e),
        }
    }
}

impl TxPort for PcapTx {
    /// Writes the burst through to the file (see `PcapTx::write_burst`), stamped with the
    /// time of the call.
    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        self.write_burst(&mut frames.map(|f| (f, 0, 0)))
    }

    /// Each frame's send time is its record's timestamp (the file's resolution is ns: pcap
    /// with the nanosecond magic, or pcapng with `if_tsresol` 9); 0: the time of the call. A
    /// file's records are in the order sent, not sorted by time.
    fn tx_burst_timed(
        &mut self,
        frames: &mut dyn Iterator<Item = TimedFrame<'_>>,
    ) -> Result<TxSent, PortError> {
        let sent = self.write_burst(&mut frames.map(|(f, t)| (f, t, 0)))?;
        Ok(TxSent {
            sent,
            ..TxSent::default()
        })
    }

    /// As [`PcapTx::tx_burst_timed`], each record's original length the frame's wire length:
    /// a frame a capture's snap length cut comes out as cut (captured length = the bytes
    /// written, original length = the wire length, never less).
    fn tx_burst_wire(
        &mut self,
        frames: &mut dyn Iterator<Item = WireFrame<'_>>,
        _queue: u16,
    ) -> Result<TxSent, PortError> {
        let sent = self.write_burst(frames)?;
        Ok(TxSent {
            sent,
            ..TxSent::default()
        })
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.writer.flush()
    }

    fn name(&self) -> &str {
        &self.name
    }
}
