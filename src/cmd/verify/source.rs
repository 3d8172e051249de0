//! Where `pktwarp verify` takes its frames from: a daemon config's first receiving port, every
//! capture of a file or folder, a ClassBench trace or the generator.

use anyhow::Context as _;
use pipeline::burst::{Burst, FrameDesc};
use pipeline::internal::port::pcap::CaptureReader;
use pipeline::port::{RxPort, RxStatus};
use std::path::{Path, PathBuf};

use super::Args;

/// Where frames come from, a chunk at a time.
pub enum Source {
    Pcaps {
        files: Vec<PathBuf>,
        next: usize,
        reader: Option<CaptureReader>,
        skipped: Vec<String>,
    },
    Port(Box<dyn RxPort>),
}

impl Source {
    pub fn from_args(a: &Args) -> anyhow::Result<Source> {
        if let Some(c) = &a.config {
            let cfg = a.set.load(c)?;
            let mut ports = pipeline::daemon::open_ports(&cfg)?;
            if ports.rx.len() > 1 {
                tracing::warn!(
                    "verify reads the first receiving port (`{}`) of {}",
                    ports.rx_names[0],
                    c.display()
                );
            }
            let port = ports.rx.swap_remove(0);
            if port.expected_frames().is_none() && a.limit.is_none() {
                anyhow::bail!(
                    "{}: port `{}` never ends; give --limit N",
                    c.display(),
                    ports.rx_names[0]
                );
            }
            return Ok(Source::Port(port));
        }
        if let Some(p) = &a.input {
            let mut files = Vec::new();
            collect_captures(p, &mut files)?;
            files.sort();
            if files.is_empty() {
                anyhow::bail!("{}: no pcap/pcapng files", p.display());
            }
            return Ok(Source::Pcaps {
                files,
                next: 0,
                reader: None,
                skipped: Vec::new(),
            });
        }
        let mut g = pipeline::internal::port::gen::GenOptions {
            size: pipeline::internal::port::gen::FrameSize::Fixed(a.size),
            ..Default::default()
        };
        if let Some(t) = &a.trace {
            g.trace = Some(t.clone());
        } else if let Some(n) = a.gen {
            g.count = Some(n);
            g.malformed_ratio = a.malformed;
            g.flows = Some(pipeline::internal::port::gen::FlowOptions {
                ipv6_share: a.ipv6,
                ..Default::default()
            });
        } else {
            anyhow::bail!("give one input: --input PCAP|DIR, --trace FILE or --gen N");
        }
        Ok(Source::Port(Box::new(
            pipeline::internal::port::gen::GenRx::new(&g, 0)?,
        )))
    }

    /// Appends up to `max` frames to `chunk`; false at the end.
    pub fn fill(&mut self, chunk: &mut Burst, max: usize) -> anyhow::Result<bool> {
        match self {
            Source::Port(p) => loop {
                if chunk.len() >= max {
                    return Ok(true);
                }
                match p.rx_burst(chunk, max - chunk.len())? {
                    RxStatus::Frames(_) | RxStatus::Idle => continue,
                    RxStatus::End => return Ok(!chunk.is_empty()),
                }
            },
            Source::Pcaps {
                files,
                next,
                reader,
                skipped,
            } => {
                while chunk.len() < max {
                    if reader.is_none() {
                        let Some(f) = files.get(*next) else {
                            return Ok(!chunk.is_empty());
                        };
                        *next += 1;
                        match CaptureReader::open_ethernet(f) {
                            Ok(r) => *reader = Some(r),
                            Err(e) => {
                                skipped.push(e.to_string());
                                continue;
                            }
                        }
                    }
                    let Some(r) = reader.as_mut() else { continue };
                    match r.next_frame() {
                        Ok(Some(fr)) => {
                            let d = FrameDesc {
                                wire_len: fr.orig_len,
                                timestamp_ns: fr.timestamp_ns,
                                ..Default::default()
                            };
                            chunk.push(fr.data, d);
                        }
                        Ok(None) => *reader = None,
                        Err(e) => {
                            // A damaged file: what was read is checked, the rest is reported.
                            skipped.push(format!("{e} (after some frames)"));
                            *reader = None;
                        }
                    }
                }
                Ok(true)
            }
        }
    }

    pub fn skipped(&self) -> &[String] {
        match self {
            Source::Pcaps { skipped, .. } => skipped,
            Source::Port(_) => &[],
        }
    }
}

fn collect_captures(p: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let md = std::fs::metadata(p).with_context(|| format!("{}", p.display()))?;
    if md.is_file() {
        out.push(p.to_path_buf());
        return Ok(());
    }
    for e in std::fs::read_dir(p).with_context(|| format!("{}", p.display()))? {
        let e = e.with_context(|| format!("{}", p.display()))?;
        let path = e.path();
        if path.is_dir() {
            collect_captures(&path, out)?;
        } else {
            let n = path.to_string_lossy();
            if n.ends_with(".pcap") || n.ends_with(".pcapng") || n.ends_with(".cap") {
                out.push(path);
            }
        }
    }
    Ok(())
}
