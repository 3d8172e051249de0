//! The `pcap` port: replays a pcap / pcapng file as its RX side ([`PcapRx`]) and records its TX
//! side to a capture file ([`PcapTx`]).

mod reader;
mod split;
mod writer;

use std::path::PathBuf;

use serde::{Deserialize, Deserializer};

pub use reader::{
    describe_link_type, link_type_name, CaptureFormat, CaptureReader, Frame, LINKTYPE_ETHERNET,
    MAX_RECORD_LEN,
};
pub use split::PcapQueueRx;
pub use writer::{CaptureWriter, PcapTx, PcapTxOptions, WriteFormat};

use crate::burst::{Burst, FrameDesc};
use crate::port::pace::{Pacer, Rate};
use crate::port::{PortError, QueueRx, RxPort, RxStatus};

/// How many times a file is replayed: a count (>= 1) or `forever`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loops {
    Count(u64),
    Forever,
}

impl Default for Loops {
    fn default() -> Self {
        Loops::Count(1)
    }
}

impl<'de> Deserialize<'de> for Loops {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Loops;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a loop count >= 1 or `forever`")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Loops, E> {
                if v == 0 {
                    return Err(E::custom("loops must be >= 1 (or `forever`)"));
                }
                Ok(Loops::Count(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Loops, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom("loops must be >= 1 (or `forever`)")),
                }
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Loops, E> {
                match v {
                    "forever" => Ok(Loops::Forever),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// Options of the `pcap` port's RX side (file replay).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcapRxOptions {
    /// Capture file to replay: pcap (micro- or nanosecond, either byte order) or pcapng. Every
    /// interface must have the Ethernet link type. The whole file is loaded into memory once;
    /// loops replay from memory.
    pub path: PathBuf,
    /// Largest capture file (bytes) the port loads; a larger one is refused before it is read.
    /// Default [`MAX_REPLAY_BYTES`] (4 GiB). See docs/ports.md.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// How many times to replay the file: a count >= 1, or `forever`. Default 1.
    #[serde(default)]
    pub loops: Loops,
    /// Replay pace: `unlimited` (default), `capture` (the file's own timing), `{pps: N}` or
    /// `{bps: N}`.
    #[serde(default)]
    pub rate: Rate,
}

/// Default of `pcap.rx.max_bytes`: the largest capture a `pcap` RX side loads into memory
/// (it replays from memory): 4 GiB.
pub const MAX_REPLAY_BYTES: u64 = 4 << 30;

impl PcapRxOptions {
    /// The checks [`PcapRx::open`] makes before reading the file; the error starts with the
    /// key (`pcap.rx.rate: ...`).
    pub fn check(&self) -> Result<(), String> {
        if self.max_bytes == Some(0) {
            return Err("pcap.rx.max_bytes: must be > 0 (bytes of capture file to load)".into());
        }
        self.rate.validate("pcap.rx.rate")
    }

    /// `max_bytes` or its default.
    pub fn limit(&self) -> u64 {
        self.max_bytes.unwrap_or(MAX_REPLAY_BYTES)
    }

    pub fn new(path: impl Into<PathBuf>) -> Self {
        PcapRxOptions {
            path: path.into(),
            loops: Loops::default(),
            rate: Rate::default(),
            max_bytes: None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Stored {
    offset: usize,
    len: u32,
    orig_len: u32,
    /// Capture timestamp relative to the first frame (0 for frames stamped earlier).
    rel_ns: u64,
}

/// RX side of the `pcap` port: replays a capture file from memory.
pub struct PcapRx {
    name: String,
    port: u16,
    data: Vec<u8>,
    frames: Vec<Stored>,
    /// Timestamp of the first frame in the file.
    base_ns: u64,
    /// Time one loop occupies under capture timing: the capture span plus one mean gap.
    loop_ns: u64,
    loops: Loops,
    loop_idx: u64,
    next: usize,
    pacer: Pacer,
}

impl std::fmt::Debug for PcapRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapRx")
            .field("name", &self.name)
            .field("frames", &self.frames.len())
            .field("loops", &self.loops)
            .finish()
    }
}

impl PcapRx {
    /// Loads `opts.path` (an error names the file and byte offset, or the non-Ethernet link
    /// type). `port` is the ingress port index written into every [`FrameDesc`].
    pub fn open(opts: &PcapRxOptions, port: u16) -> Result<Self, PortError> {
        let path = opts.path.display().to_string();
        let size = check_size(opts)?;
        let limit = opts.limit();
        let mut reader = CaptureReader::open_ethernet(&opts.path)?;
        // The frames are at most the file: one allocation, no doubling past the bound.
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        let mut frames = Vec::new();
        let mut base_ns = None;
        let mut last_rel = 0u64;
        while let Some(f) = reader.next_frame()? {
            if f.link_type != LINKTYPE_ETHERNET {
                return Err(PortError::Format {
                    path,
                    reason: format!(
                        "at byte offset {}: link type {} is not Ethernet",
                        f.offset,
                        describe_link_type(f.link_type)
                    ),
                });
            }
            let base = *base_ns.get_or_insert(f.timestamp_ns);
            let rel_ns = f.timestamp_ns.saturating_sub(base);
            last_rel = last_rel.max(rel_ns);
            frames.push(Stored {
                offset: data.len(),
                len: f.data.len() as u32,
                orig_len: f.orig_len.max(f.data.len() as u32),
                rel_ns,
            });
            // The file grew since its size was checked.
            if (data.len() + f.data.len()) as u64 > limit {
                return Err(PortError::Format {
                    path,
                    reason: format!(
                        "at byte offset {}: more than {limit} bytes of frames, over the replay \
                         limit `pcap.rx.max_bytes` = {limit} (the pcap port loads the capture \
                         into memory)",
                        f.offset
                    ),
                });
            }
            data.extend_from_slice(f.data);
        }
        frames.shrink_to_fit();
        let gap = match frames.len() {
            0 | 1 => 0,
            n => last_rel / (n as u64 - 1),
        };
        Ok(PcapRx {
            name: format!("pcap:{path}"),
            port,
            data,
            frames,
            base_ns: base_ns.unwrap_or(0),
            loop_ns: last_rel.saturating_add(gap),
            loops: opts.loops,
            loop_idx: 0,
            next: 0,
            pacer: Pacer::new(opts.rate),
        })
    }

    /// Frames in one pass over the file.
    pub fn frames_per_loop(&self) -> usize {
        self.frames.len()
    }

    /// What `pktwarp validate` checks without loading the capture: the options, the file's
    /// size against `max_bytes`, its header and its first record (format and link type).
    pub fn probe(opts: &PcapRxOptions) -> Result<(), PortError> {
        check_size(opts)?;
        let mut reader = CaptureReader::open_ethernet(&opts.path)?;
        if let Some(f) = reader.next_frame()? {
            if f.link_type != LINKTYPE_ETHERNET {
                return Err(PortError::Format {
                    path: opts.path.display().to_string(),
                    reason: format!(
                        "at byte offset {}: link type {} is not Ethernet",
                        f.offset,
                        describe_link_type(f.link_type)
                    ),
                });
            }
        }
        Ok(())
    }
}

/// The options' checks and the capture file's size (returned) against `max_bytes`, before
/// anything is read.
fn check_size(opts: &PcapRxOptions) -> Result<u64, PortError> {
    let path = opts.path.display().to_string();
    opts.check()
        .map_err(|e| PortError::Config(format!("{path}: {e}")))?;
    let size = std::fs::metadata(&opts.path)
        .map_err(|error| PortError::Io {
            path: path.clone(),
            error,
        })?
        .len();
    let limit = opts.limit();
    if size > limit {
        return Err(PortError::Format {
            path,
            reason: format!(
                "the capture is {size} bytes, over the replay limit `pcap.rx.max_bytes` = \
                 {limit} bytes (the pcap port loads the whole capture into memory); raise \
                 pcap.rx.max_bytes or replay a smaller capture"
            ),
        });
    }
    Ok(size)
}

impl RxPort for PcapRx {
    fn rx_burst(&mut self, burst: &mut Burst, max: usize) -> Result<RxStatus, PortError> {
        if self.frames.is_empty() {
            return Ok(RxStatus::End);
        }
        let now = self.pacer.now_ns();
        let mut n = 0;
        while n < max {
            if self.next == self.frames.len() {
                self.loop_idx += 1;
                self.next = 0;
            }
            if let Loops::Count(c) = self.loops {
                if self.loop_idx >= c {
                    break;
                }
            }
            let s = self.frames[self.next];
            let loop_off = self.loop_idx.saturating_mul(self.loop_ns);
            let due = loop_off.saturating_add(s.rel_ns);
            if !self.pacer.admit(now, s.orig_len, due) {
                break;
            }
            let bytes = &self.data[s.offset..s.offset + s.len as usize];
            burst.push(
                bytes,
                FrameDesc {
                    wire_len: s.orig_len,
                    port: self.port,
                    timestamp_ns: self.base_ns.saturating_add(due),
                    ..FrameDesc::default()
                },
            );
            self.next += 1;
            n += 1;
        }
        if n > 0 {
            return Ok(RxStatus::Frames(n));
        }
        let done = match self.loops {
            Loops::Count(c) => self.loop_idx >= c,
            Loops::Forever => false,
        };
        Ok(if done { RxStatus::End } else { RxStatus::Idle })
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn split_by_queue(
        &mut self,
        steering: &std::sync::Arc<crate::steer::Steering>,
        queues: usize,
    ) -> Result<Vec<Box<dyn QueueRx>>, String> {
        if let Some(why) = split::refusal(self) {
            return Err(why);
        }
        Ok(split::split(self, steering, queues)
            .into_iter()
            .map(|q| Box::new(q) as Box<dyn QueueRx>)
            .collect())
    }

    fn expected_frames(&self) -> Option<u64> {
        match self.loops {
            Loops::Count(c) => Some(c.saturating_mul(self.frames.len() as u64)),
            Loops::Forever => None,
        }
    }
}
