//! The raw-IQ sink: each closed slot's grid as raw little-endian samples (int16, or FP16 bit
//! patterns) in `slot_<n>_f<frame>_sf<subframe>_s<slot>_<complete|partial>.iq`, with a JSON
//! sidecar of the same name (`.json`) that says how to read it: sample type, shape and axis
//! order, eAxC ids, numerology, carrier, beta, completion. Any tool reads it without NumPy
//! (`numpy.fromfile(path, '<i2').reshape(shape)` does too). [`read_slot`] reads one back.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::bfp::PRB_SAMPLES;
use super::config::{FronthaulConfig, GridFormat};
use super::grid::{GridData, SlotGrid};
use super::sink::SlotSink;

/// Axis names of the data, outermost first.
pub const AXES: [&str; 5] = ["eaxc", "symbol", "prb", "re", "iq"];
/// Largest sidecar [`read_slot`] reads (a sidecar is a few hundred bytes).
const MAX_SIDECAR: u64 = 1 << 20;

/// The JSON sidecar of one slot file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSlotMeta {
    /// `int16` or `fp16` (IEEE half), little-endian.
    pub format: String,
    /// (eAxCs, 14 symbols, PRBs, 12 REs, 2 = I/Q), in [`AXES`] order, row-major.
    pub shape: [usize; 5],
    pub axes: Vec<String>,
    /// The eAxC id of each index of the first axis.
    pub eaxcs: Vec<u16>,
    pub numerology: u8,
    pub carrier_prbs: u16,
    /// FP16 grids: the scale applied to each sample (1.0 for int16).
    pub beta: f32,
    pub frame_id: u8,
    pub subframe_id: u8,
    pub slot_id: u8,
    /// Every expected PRB arrived (else closed partial by timeout, eviction or end of input).
    pub complete: bool,
    /// PRBs received, over all eAxCs, and per eAxC index.
    pub prbs_filled: usize,
    pub prbs_filled_per_eaxc: Vec<usize>,
    /// The data file beside the sidecar, and its size.
    pub data_file: String,
    pub bytes: usize,
}

/// Writes every closed slot as a raw file and its sidecar.
pub struct RawSink {
    dir: PathBuf,
    written: u64,
    max_files: Option<u64>,
    numerology: u8,
    carrier_prbs: u16,
    format: GridFormat,
    beta: f32,
}

impl RawSink {
    pub fn create(
        dir: &Path,
        max_files: Option<u64>,
        cfg: &FronthaulConfig,
    ) -> Result<Self, String> {
        super::sink::prepare_dir(dir, "fronthaul.sink.raw.dir")?;
        Ok(RawSink {
            dir: dir.to_path_buf(),
            written: 0,
            max_files,
            numerology: cfg.numerology,
            carrier_prbs: cfg.carrier_prbs,
            format: cfg.grid.format,
            beta: cfg.grid.beta,
        })
    }

    pub fn written(&self) -> u64 {
        self.written
    }
}

/// The samples of the grid's rows in use ([`SlotGrid::rows`]) as little-endian bytes.
pub fn raw_bytes(g: &SlotGrid) -> Vec<u8> {
    g.rows_bytes()
}

impl SlotSink for RawSink {
    fn slot(&mut self, g: &SlotGrid) -> Result<(), String> {
        if self.max_files.is_some_and(|m| self.written >= m) {
            return Ok(());
        }
        let k = g.key;
        let stem = format!(
            "slot_{:06}_f{}_sf{}_s{}_{}",
            self.written,
            k.frame_id,
            k.subframe_id,
            k.slot_id,
            if g.complete { "complete" } else { "partial" }
        );
        // A learnt grid writes the eAxCs it has learnt, not its empty rows: the shape and the
        // ids agree, as the reader checks.
        let [_, s, p] = g.shape();
        let e = g.rows();
        let data = raw_bytes(g);
        let meta = RawSlotMeta {
            format: match self.format {
                GridFormat::Int16 => "int16",
                GridFormat::Fp16 => "fp16",
            }
            .into(),
            shape: [e, s, p, PRB_SAMPLES / 2, 2],
            axes: AXES.iter().map(|a| a.to_string()).collect(),
            eaxcs: g.eaxc_ids.clone(),
            numerology: self.numerology,
            carrier_prbs: self.carrier_prbs,
            beta: match self.format {
                GridFormat::Int16 => 1.0,
                GridFormat::Fp16 => self.beta,
            },
            frame_id: k.frame_id,
            subframe_id: k.subframe_id,
            slot_id: k.slot_id,
            complete: g.complete,
            prbs_filled: g.filled_count(),
            prbs_filled_per_eaxc: (0..e).map(|i| g.filled_for(i)).collect(),
            data_file: format!("{stem}.iq"),
            bytes: data.len(),
        };
        // The data first, the sidecar last: a sidecar names only a data file written whole.
        super::sink::write_whole(&self.dir.join(&meta.data_file), &data)?;
        let json = serde_json::to_vec_pretty(&meta).map_err(|e| e.to_string())?;
        super::sink::write_whole(&self.dir.join(format!("{stem}.json")), &json)?;
        self.written += 1;
        Ok(())
    }
}

/// Reads a slot back from its sidecar: the metadata and the samples (int16 values, or FP16 bit
/// patterns). Every inconsistency is an error naming the file and the field.
pub fn read_slot(sidecar: &Path) -> Result<(RawSlotMeta, GridData), String> {
    let name = sidecar.display();
    let len = std::fs::metadata(sidecar)
        .map_err(|e| format!("{name}: {e}"))?
        .len();
    if len > MAX_SIDECAR {
        return Err(format!(
            "{name}: {len} bytes, a sidecar has at most {MAX_SIDECAR}"
        ));
    }
    let text = std::fs::read(sidecar).map_err(|e| format!("{name}: {e}"))?;
    let meta: RawSlotMeta = serde_json::from_slice(&text).map_err(|e| format!("{name}: {e}"))?;
    let [e, s, p, re, iq] = meta.shape;
    if s != 14 || re != PRB_SAMPLES / 2 || iq != 2 || e != meta.eaxcs.len() || p > 1024 || e > 64 {
        return Err(format!(
            "{name}: shape {:?} does not fit eaxcs {:?}",
            meta.shape, meta.eaxcs
        ));
    }
    let want = e * s * p * PRB_SAMPLES * 2;
    if meta.bytes != want {
        return Err(format!(
            "{name}: bytes {} but the shape needs {want}",
            meta.bytes
        ));
    }
    // The data file is named, not a path: it must lie beside the sidecar.
    if meta.data_file.contains(['/', '\\']) || meta.data_file.starts_with('.') {
        return Err(format!(
            "{name}: data_file {:?} is not a file name",
            meta.data_file
        ));
    }
    let data_path = sidecar.with_file_name(&meta.data_file);
    let dlen = std::fs::metadata(&data_path)
        .map_err(|e| format!("{}: {e}", data_path.display()))?
        .len();
    if dlen != want as u64 {
        return Err(format!(
            "{}: {dlen} bytes, the sidecar's shape needs {want}",
            data_path.display()
        ));
    }
    let raw = std::fs::read(&data_path).map_err(|e| format!("{}: {e}", data_path.display()))?;
    let words = raw.chunks_exact(2).map(|c| [c[0], c[1]]);
    let data = match meta.format.as_str() {
        "int16" => GridData::Int16(words.map(i16::from_le_bytes).collect()),
        "fp16" => GridData::Fp16(words.map(u16::from_le_bytes).collect()),
        f => return Err(format!("{name}: format {f:?} is neither int16 nor fp16")),
    };
    Ok((meta, data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GridConfig;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pw-raw-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_slot_round_trips_and_bad_files_are_refused() {
        let d = dir("rt");
        let cfg = FronthaulConfig {
            carrier_prbs: 3,
            numerology: 2,
            grid: GridConfig {
                format: GridFormat::Fp16,
                beta: 0.25,
            },
            ..FronthaulConfig::default()
        };
        let mut sink = RawSink::create(&d, None, &cfg).unwrap();
        let mut g = SlotGrid::new(2, 3, GridFormat::Fp16, 0.25);
        let iq: [i32; 24] = std::array::from_fn(|i| i as i32 * 100 - 1000);
        g.store(1, 13, 2, &iq);
        g.eaxc_ids = vec![7, 9];
        sink.slot(&g).unwrap();
        let side = d.join("slot_000000_f0_sf0_s0_partial.json");
        let (m, data) = read_slot(&side).unwrap();
        assert_eq!(&data, g.data());
        assert_eq!(m.shape, [2, 14, 3, 12, 2]);
        assert_eq!(
            (m.eaxcs.clone(), m.numerology, m.beta),
            (vec![7, 9], 2, 0.25)
        );
        assert_eq!(
            (m.complete, m.prbs_filled, m.prbs_filled_per_eaxc.clone()),
            (false, 1, vec![0, 1])
        );
        // Sample 0 of eAxC 1, symbol 13, PRB 2 is -1000 * 0.25 in half precision.
        let GridData::Fp16(v) = &data else {
            panic!("fp16")
        };
        let at = ((14 + 13) * 3 + 2) * 24;
        assert_eq!(half::f16::from_bits(v[at]).to_f32(), -250.0);

        // A truncated data file, a shape that lies, a path as data_file: clear errors.
        let iq_path = d.join(&m.data_file);
        let full = std::fs::read(&iq_path).unwrap();
        std::fs::write(&iq_path, &full[..full.len() - 1]).unwrap();
        let e = read_slot(&side).unwrap_err();
        assert!(e.contains("bytes, the sidecar's shape needs"), "{e}");
        std::fs::write(&iq_path, &full).unwrap();
        let text = std::fs::read_to_string(&side).unwrap();
        for (from, to, what) in [
            ("\"bytes\": 4032", "\"bytes\": 4", "bytes"),
            ("slot_000000_f0_sf0_s0_partial.iq", "../x.iq", "data_file"),
            ("\"fp16\"", "\"f32\"", "format"),
            ("\"complete\"", "\"completed\"", "completed"),
        ] {
            assert!(text.contains(from), "{from}");
            let bad = d.join("bad.json");
            std::fs::write(&bad, text.replace(from, to)).unwrap();
            let e = read_slot(&bad).unwrap_err();
            assert!(e.contains(what) && e.contains("bad.json"), "{what}: {e}");
        }
        assert!(read_slot(&d.join("missing.json"))
            .unwrap_err()
            .contains("missing.json"));
        let e = RawSink::create(Path::new("/proc/version/x"), None, &cfg)
            .err()
            .unwrap();
        assert!(e.contains("fronthaul.sink.raw.dir"), "{e}");
        std::fs::remove_dir_all(&d).ok();
    }
}
