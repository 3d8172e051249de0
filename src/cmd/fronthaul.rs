//! `pktwarp fronthaul CAPTURE`: decodes every O-RAN U-plane PRB of a capture: one JSON line per
//! PRB, one error line per rejected frame, a summary on stderr.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use pipeline::internal::port::pcap::CaptureReader;
use pipeline::wire::oran::{EaxcBits, DIR_UPLINK};
use pktwarp_fronthaul::bfp::Method;
use pktwarp_fronthaul::decode::{decode_frame, Compression, DecodeParams, Message};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CompMethodArg {
    Bfp,
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CompHdrArg {
    Static,
    Dynamic,
}

#[derive(clap::Args)]
pub struct Args {
    /// Capture file (pcap or pcapng, Ethernet link type).
    pub capture: PathBuf,
    /// Bits per I or Q sample (BFP mantissa width) under static compression, 1..=16.
    #[arg(long, default_value_t = 9)]
    pub iq_width: u8,
    /// Compression method under static compression.
    #[arg(long, value_enum, default_value_t = CompMethodArg::Bfp)]
    pub comp_method: CompMethodArg,
    /// `static`: sections carry no udCompHdr (method and width from the options); `dynamic`:
    /// each section's udCompHdr gives them.
    #[arg(long, value_enum, default_value_t = CompHdrArg::Static)]
    pub comp_hdr: CompHdrArg,
    /// PRBs of the carrier (numPrbu 0 means all of them), 1..=1024.
    #[arg(long, default_value_t = 273)]
    pub carrier_prbs: u16,
    /// Numerology (2^mu slots per subframe; slotId is checked against it), 0..=4.
    #[arg(long, default_value_t = 1)]
    pub numerology: u8,
    /// eAxC id split: DU port, band sector, CC, RU port widths in bits (sum 16).
    #[arg(long, value_delimiter = ',', default_value = "4,4,4,4")]
    pub eaxc_bits: Vec<u8>,
}

/// What one run counted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub frames: u64,
    pub uplane: u64,
    pub cplane: u64,
    pub prbs: u64,
    pub errors: BTreeMap<&'static str, u64>,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let errs: Vec<String> = self
            .errors
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        write!(
            f,
            "{} frames: {} U-plane ({} PRBs decoded), {} C-plane, {} rejected{}{}",
            self.frames,
            self.uplane,
            self.prbs,
            self.cplane,
            self.errors.values().sum::<u64>(),
            if errs.is_empty() { "" } else { ": " },
            errs.join(" ")
        )
    }
}

fn params(args: &Args) -> anyhow::Result<(DecodeParams, EaxcBits)> {
    if !(1..=16).contains(&args.iq_width) {
        anyhow::bail!("--iq-width: {} is not in 1..=16", args.iq_width);
    }
    if !(1..=1024).contains(&args.carrier_prbs) {
        anyhow::bail!("--carrier-prbs: {} is not in 1..=1024", args.carrier_prbs);
    }
    if args.numerology > 4 {
        anyhow::bail!("--numerology: {} is not in 0..=4", args.numerology);
    }
    let w: [u8; 4] = args.eaxc_bits.as_slice().try_into().map_err(|_| {
        anyhow::anyhow!(
            "--eaxc-bits: 4 widths A,B,C,D expected, got {}",
            args.eaxc_bits.len()
        )
    })?;
    let bits = EaxcBits::new(w).map_err(|e| anyhow::anyhow!("--eaxc-bits: {e}"))?;
    let method = match args.comp_method {
        CompMethodArg::Bfp => Method::Bfp,
        CompMethodArg::None => Method::None,
    };
    let compression = match args.comp_hdr {
        CompHdrArg::Static => Compression::Static {
            method,
            width: args.iq_width,
        },
        CompHdrArg::Dynamic => Compression::Dynamic,
    };
    Ok((
        DecodeParams {
            carrier_prbs: args.carrier_prbs,
            numerology: args.numerology,
            compression,
        },
        bits,
    ))
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let summary = match run_to(&args, &mut out) {
        Ok(s) => s,
        Err(e) if is_broken_pipe(&e) => return Ok(0),
        Err(e) => return Err(e),
    };
    if let Err(e) = out.flush() {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e).context("writing to stdout");
        }
    }
    errln!("{}: {summary}", args.capture.display());
    Ok(0)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Writes the JSON lines to `out`; returns the counts.
pub fn run_to(args: &Args, out: &mut dyn Write) -> anyhow::Result<Summary> {
    let (p, bits) = params(args)?;
    let mut reader = CaptureReader::open_ethernet(&args.capture)?;
    let mut s = Summary::default();
    let mut line = Vec::with_capacity(512);
    while let Some(frame) = reader.next_frame()? {
        s.frames += 1;
        let n = s.frames;
        let mut prbs = 0u64;
        let mut io: std::io::Result<()> = Ok(());
        let r = decode_frame(frame.data, &p, |u, sec, prb, exp, iq| {
            if io.is_err() {
                return;
            }
            prbs += 1;
            line.clear();
            let e = bits.split(u.eaxc);
            let dir = if u.radio.data_direction == DIR_UPLINK {
                "ul"
            } else {
                "dl"
            };
            // Written by hand: fixed key order, and ~10x faster than building a Value per PRB.
            let _ = write!(
                line,
                "{{\"frame\":{n},\"eaxc\":{},\"eaxc_parts\":[{},{},{},{}],\"seq\":{},\"dir\":\"{dir}\",\"frame_id\":{},\"subframe\":{},\"slot\":{},\"symbol\":{},\"section\":{},\"prb\":{prb},\"exponent\":{exp},\"iq\":[",
                u.eaxc, e.du_port, e.band_sector, e.cc, e.ru_port, u.seq.seq,
                u.radio.frame_id, u.radio.subframe_id, u.radio.slot_id, sec.symbol, sec.section_id
            );
            for (i, x) in iq.iter().enumerate() {
                let _ = write!(line, "{}{x}", if i == 0 { "" } else { "," });
            }
            line.extend_from_slice(b"]}\n");
            io = out.write_all(&line);
        });
        io.context("writing JSON")?;
        match r {
            Ok(Message::Uplane(_)) => {
                s.uplane += 1;
                s.prbs += prbs;
            }
            Ok(Message::Cplane(_)) => s.cplane += 1,
            Err(reason) => {
                *s.errors.entry(reason.name()).or_default() += 1;
                writeln!(
                    out,
                    "{{\"frame\":{n},\"status\":\"error\",\"reason\":\"{}\"}}",
                    reason.name()
                )
                .context("writing JSON")?;
            }
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(capture: PathBuf, width: u8) -> Args {
        Args {
            capture,
            iq_width: width,
            comp_method: CompMethodArg::Bfp,
            comp_hdr: CompHdrArg::Static,
            carrier_prbs: 273,
            numerology: 1,
            eaxc_bits: vec![4, 4, 4, 4],
        }
    }

    #[test]
    fn bad_options_are_clear_errors() {
        let mut a = args(pktwarp_fronthaul::testdata::fronthaul_pcap(), 17);
        assert!(run_to(&a, &mut Vec::new())
            .unwrap_err()
            .to_string()
            .contains("--iq-width"));
        a.iq_width = 9;
        a.eaxc_bits = vec![4, 4, 4];
        assert!(run_to(&a, &mut Vec::new())
            .unwrap_err()
            .to_string()
            .contains("--eaxc-bits"));
        a.eaxc_bits = vec![8, 8, 8, 8];
        assert!(run_to(&a, &mut Vec::new())
            .unwrap_err()
            .to_string()
            .contains("32 bits"));
        a.eaxc_bits = vec![4, 4, 4, 4];
        a.carrier_prbs = 0;
        assert!(run_to(&a, &mut Vec::new())
            .unwrap_err()
            .to_string()
            .contains("--carrier-prbs"));
        let a = args(PathBuf::from("/nonexistent.pcap"), 9);
        assert!(run_to(&a, &mut Vec::new())
            .unwrap_err()
            .to_string()
            .contains("nonexistent"));
    }

    #[test]
    fn bfp9_lines_and_summary() {
        let mut out = Vec::new();
        // A generated capture: 8 frames of one 4-PRB section (the real vectors' samples are
        // checked against their truth files in tests/fronthaul_cli.rs).
        let s = run_to(
            &args(pktwarp_fronthaul::testdata::fronthaul_pcap(), 9),
            &mut out,
        )
        .unwrap();
        assert_eq!((s.frames, s.uplane, s.prbs), (8, 8, 32));
        let text = String::from_utf8(out).unwrap();
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["frame"], 1);
        assert_eq!(first["dir"], "dl");
        assert_eq!(first["prb"], 0);
        assert_eq!(first["iq"].as_array().map(|a| a.len()), Some(24));
        assert_eq!(text.lines().count(), 32);
        assert!(s.to_string().contains("32 PRBs decoded"), "{s}");
    }
}
