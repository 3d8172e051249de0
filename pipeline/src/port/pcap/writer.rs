//! Capture-file writer (pcap with nanosecond timestamps, or pcapng) and the `pcap` port's TX
//! side.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use crate::port::{PortError, TxPort};

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
    pub fn new(path: impl Into<PathBuf>) -> Self {
        PcapTxOptions {
            path: path.into(),
            format: WriteFormat::default(),
            snaplen: DEFAULT_SNAPLEN,
        }
    }
}

/// Buffered writer of an Ethernet capture file.
pub struct CaptureWriter {
    path: String,
    out: BufWriter<File>,
    format: WriteFormat,
    snaplen: u32,
    frames: u64,
}

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
            source,
        })?;
        let mut w = CaptureWriter {
            path: name,
            out: BufWriter::with_capacity(1 << 20, file),
            format,
            snaplen,
            frames: 0,
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
        w.write(&hdr)?;
        Ok(w)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), PortError> {
        self.out.write_all(bytes).map_err(|source| PortError::Io {
            path: self.path.clone(),
            source,
        })
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
        self.frames += 1;
        Ok(())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    pub fn flush(&mut self) -> Result<(), PortError> {
        self.out.flush().map_err(|source| PortError::Io {
            path: self.path.clone(),
            source,
        })
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

impl TxPort for PcapTx {
    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        let mut n = 0;
        for f in frames {
            self.writer.write_frame(f, 0, now)?;
            n += 1;
        }
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.writer.flush()
    }

    fn name(&self) -> &str {
        &self.name
    }
}
