//! The `fronthaul` stage's YAML options (`pipeline: [..., fronthaul: {...}]`).

use std::path::PathBuf;

use serde::Deserialize;

use super::bfp::Method;
use super::decode::{Compression, DecodeParams};
use pipeline::wire::oran::EaxcBits;

/// Options of the `fronthaul` stage. Every key is optional; the defaults describe a 100 MHz
/// carrier at 30 kHz subcarrier spacing with BFP9 static compression, as NVIDIA Aerial ships.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FronthaulConfig {
    /// PRBs of the carrier, 1 ..= 1024 (numPrbu 0 means all of them). Default 273.
    #[serde(default = "default_prbs")]
    pub carrier_prbs: u16,
    /// Numerology mu, 0 ..= 4: 2^mu slots per 1 ms subframe, subcarrier spacing 15 * 2^mu kHz.
    /// Default 1 (30 kHz).
    #[serde(default = "default_numerology")]
    pub numerology: u8,
    /// Widths in bits of the eAxC id's DU port, band sector, CC and RU port ids (sum 16).
    /// Default [4, 4, 4, 4].
    #[serde(default = "default_eaxc_bits")]
    pub eaxc_bits: [u8; 4],
    /// U-plane compression. Default `{method: bfp, iq_width: 9, hdr: static}`.
    #[serde(default)]
    pub comp: CompConfig,
    /// The eAxC ids of the slot grid, in grid order. Empty (default): eAxCs get grid indices
    /// in order of arrival, up to `max_eaxcs`; later ones are counted `eaxc_overflow`; a slot
    /// then closes only by eviction, timeout or the end (docs/fronthaul.md).
    #[serde(default)]
    pub eaxcs: Vec<u16>,
    /// Most eAxCs of a learnt grid (1 ..= 64). Default 16.
    #[serde(default = "default_max_eaxcs")]
    pub max_eaxcs: u16,
    /// The slot grid's sample type and scale.
    #[serde(default)]
    pub grid: GridConfig,
    /// The Ta4 reception window (O-RAN CUS 4.4): a U-plane packet arriving less than `min_ns`
    /// after its symbol's start is early, more than `max_ns` after it late. Default 50 us
    /// .. 331 us.
    #[serde(default)]
    pub ta4: Ta4Window,
    /// Where frame 0 of the 256-frame (2.56 s) cycle starts, in ns since the Unix epoch modulo
    /// the cycle: 0 (default) for GPS/PTP-aligned radio time. Arrival times are the frames'
    /// receive times: capture timestamps on pcap replay, the port's receive time live (a frame
    /// without one is untimed).
    #[serde(default)]
    pub time_offset_ns: u64,
    /// A slot still missing PRBs this long after its first packet is closed as partial
    /// (receive times, on both executors: docs/fronthaul.md).
    /// Default 2000 us (a 0.5 ms slot plus the largest Ta4 with margin).
    #[serde(default = "default_slot_timeout_us")]
    pub slot_timeout_us: u64,
    /// Slots assembled at once; a packet of a further slot closes the oldest as partial.
    /// 1 ..= 16, default 4.
    #[serde(default = "default_open_slots")]
    pub max_open_slots: u16,
    /// Where completed slots go. Default `none` (counted only).
    #[serde(default)]
    pub sink: SinkConfig,
}

fn default_prbs() -> u16 {
    273
}
fn default_numerology() -> u8 {
    1
}
fn default_eaxc_bits() -> [u8; 4] {
    [4, 4, 4, 4]
}
fn default_max_eaxcs() -> u16 {
    16
}
fn default_slot_timeout_us() -> u64 {
    2000
}
fn default_open_slots() -> u16 {
    4
}

impl Default for FronthaulConfig {
    fn default() -> Self {
        FronthaulConfig {
            carrier_prbs: default_prbs(),
            numerology: default_numerology(),
            eaxc_bits: default_eaxc_bits(),
            comp: CompConfig::default(),
            eaxcs: Vec::new(),
            max_eaxcs: default_max_eaxcs(),
            grid: GridConfig::default(),
            ta4: Ta4Window::default(),
            time_offset_ns: 0,
            slot_timeout_us: default_slot_timeout_us(),
            max_open_slots: default_open_slots(),
            sink: SinkConfig::default(),
        }
    }
}

/// `bfp` (udCompMeth 1) or `none` (udCompMeth 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompMethodName {
    #[default]
    Bfp,
    None,
}

/// `static`: every section uses `method` / `iq_width` and carries no udCompHdr; `dynamic`:
/// each section's udCompHdr says (udIqWidth 0 = 16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompHdr {
    #[default]
    Static,
    Dynamic,
}

/// U-plane compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompConfig {
    /// `bfp` (default) or `none`; used when `hdr` is `static`.
    #[serde(default)]
    pub method: CompMethodName,
    /// Bits per I or Q sample (mantissa bits for BFP), 1 ..= 16. Default 9. Static only.
    #[serde(default = "default_iq_width")]
    pub iq_width: u8,
    /// `static` (default) or `dynamic`.
    #[serde(default)]
    pub hdr: CompHdr,
}

fn default_iq_width() -> u8 {
    9
}

impl Default for CompConfig {
    fn default() -> Self {
        CompConfig {
            method: CompMethodName::Bfp,
            iq_width: default_iq_width(),
            hdr: CompHdr::Static,
        }
    }
}

/// Sample type of the slot grid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GridFormat {
    /// int16 I/Q, decompressed samples saturated to 16 bits.
    #[default]
    Int16,
    /// IEEE half precision, sample * beta (as cuPHY's front end consumes it).
    Fp16,
}

/// The slot grid.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridConfig {
    /// `int16` (default) or `fp16`.
    #[serde(default)]
    pub format: GridFormat,
    /// FP16 scale: each sample is multiplied by it (finite, > 0). Default 1.0.
    #[serde(default = "default_beta")]
    pub beta: f32,
}

fn default_beta() -> f32 {
    1.0
}

impl Default for GridConfig {
    fn default() -> Self {
        GridConfig {
            format: GridFormat::Int16,
            beta: default_beta(),
        }
    }
}

/// The Ta4 window, in ns after the symbol's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ta4Window {
    /// Earliest on-time arrival. Default 50000.
    #[serde(default = "default_ta4_min")]
    pub min_ns: i64,
    /// Latest on-time arrival (>= min_ns). Default 331000.
    #[serde(default = "default_ta4_max")]
    pub max_ns: i64,
}

fn default_ta4_min() -> i64 {
    50_000
}
fn default_ta4_max() -> i64 {
    331_000
}

impl Default for Ta4Window {
    fn default() -> Self {
        Ta4Window {
            min_ns: default_ta4_min(),
            max_ns: default_ta4_max(),
        }
    }
}

/// Where completed slots go: `none`; `{npy: {dir: PATH}}` (one `.npy` file per slot,
/// shape eAxC x symbol x PRB x 12 x 2, the grid's sample type); or `{raw: PATH}` /
/// `{raw: {dir: PATH, max_files: N}}` (raw little-endian samples and a JSON sidecar per slot,
/// see [`super::raw`]). A library callback is given to [`super::FronthaulStage::with_sink`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SinkConfig {
    #[default]
    None,
    Npy {
        /// Folder for the files (created if missing); relative to the config file's folder.
        dir: PathBuf,
        /// Stop writing after this many slots (still counted). Default: no limit.
        #[serde(default)]
        max_files: Option<u64>,
    },
    Raw(RawSinkConfig),
}

impl SinkConfig {
    /// The sink's folder, if it writes files (to resolve it against the config's folder).
    pub fn dir_mut(&mut self) -> Option<&mut PathBuf> {
        match self {
            SinkConfig::None => None,
            SinkConfig::Npy { dir, .. } => Some(dir),
            SinkConfig::Raw(r) => Some(&mut r.dir),
        }
    }
}

/// `raw: PATH` or `raw: {dir: PATH, max_files: N}`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(from = "RawArg")]
pub struct RawSinkConfig {
    /// Folder for the files (created if missing); relative to the config file's folder.
    pub dir: PathBuf,
    /// Stop writing after this many slots (still counted). Default: no limit.
    pub max_files: Option<u64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawArg {
    Dir(PathBuf),
    Full(RawFull),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFull {
    dir: PathBuf,
    #[serde(default)]
    max_files: Option<u64>,
}

impl From<RawArg> for RawSinkConfig {
    fn from(a: RawArg) -> Self {
        match a {
            RawArg::Dir(dir) => RawSinkConfig {
                dir,
                max_files: None,
            },
            RawArg::Full(f) => RawSinkConfig {
                dir: f.dir,
                max_files: f.max_files,
            },
        }
    }
}

impl FronthaulConfig {
    /// Checks every value; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        let k = |key: &str, why: String| Err(format!("fronthaul.{key}: {why}"));
        if !(1..=1024).contains(&self.carrier_prbs) {
            return k(
                "carrier_prbs",
                format!("{} is not in 1..=1024", self.carrier_prbs),
            );
        }
        if self.numerology > 4 {
            return k("numerology", format!("{} is not in 0..=4", self.numerology));
        }
        if let Err(e) = EaxcBits::new(self.eaxc_bits) {
            return k("eaxc_bits", e);
        }
        if !(1..=16).contains(&self.comp.iq_width) {
            return k(
                "comp.iq_width",
                format!("{} is not in 1..=16", self.comp.iq_width),
            );
        }
        if !(1..=64).contains(&self.max_eaxcs) {
            return k("max_eaxcs", format!("{} is not in 1..=64", self.max_eaxcs));
        }
        if self.eaxcs.len() > 64 {
            return k("eaxcs", format!("{} ids, at most 64", self.eaxcs.len()));
        }
        let mut ids = self.eaxcs.clone();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return k("eaxcs", format!("eAxC {} listed twice", w[0]));
        }
        if !(self.grid.beta.is_finite() && self.grid.beta > 0.0) {
            return k(
                "grid.beta",
                format!("{} is not a finite number > 0", self.grid.beta),
            );
        }
        if self.ta4.min_ns > self.ta4.max_ns {
            return k(
                "ta4",
                format!(
                    "min_ns {} above max_ns {}",
                    self.ta4.min_ns, self.ta4.max_ns
                ),
            );
        }
        if self.slot_timeout_us == 0 {
            return k("slot_timeout_us", "must be > 0".into());
        }
        if !(1..=16).contains(&self.max_open_slots) {
            return k(
                "max_open_slots",
                format!("{} is not in 1..=16", self.max_open_slots),
            );
        }
        // An empty folder would resolve to the config's own folder: say so instead.
        match &self.sink {
            SinkConfig::Npy { dir, .. } if dir.as_os_str().is_empty() => {
                return k(
                    "sink.npy.dir",
                    "is empty (name a folder for the files)".into(),
                );
            }
            SinkConfig::Raw(r) if r.dir.as_os_str().is_empty() => {
                return k(
                    "sink.raw.dir",
                    "is empty (name a folder for the files)".into(),
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// The decoder's parameters (call after [`Self::validate`]).
    pub fn decode_params(&self) -> DecodeParams {
        let method = match self.comp.method {
            CompMethodName::Bfp => Method::Bfp,
            CompMethodName::None => Method::None,
        };
        DecodeParams {
            carrier_prbs: self.carrier_prbs,
            numerology: self.numerology,
            compression: match self.comp.hdr {
                CompHdr::Static => Compression::Static {
                    method,
                    width: self.comp.iq_width,
                },
                CompHdr::Dynamic => Compression::Dynamic,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(y: &str) -> Result<FronthaulConfig, String> {
        let c: FronthaulConfig = serde_saphyr::from_str(y).map_err(|e| e.to_string())?;
        c.validate()?;
        Ok(c)
    }

    #[test]
    fn defaults_and_keys() {
        let c = load("{}").unwrap();
        assert_eq!(c, FronthaulConfig::default());
        assert_eq!(c.decode_params(), DecodeParams::default());
        let c = load(
            "carrier_prbs: 106\nnumerology: 0\neaxc_bits: [2, 6, 4, 4]\n\
             comp: {method: none, iq_width: 16, hdr: dynamic}\neaxcs: [0, 1]\n\
             grid: {format: fp16, beta: 0.5}\nta4: {min_ns: 0, max_ns: 100}\n\
             sink: {npy: {dir: /tmp/x, max_files: 3}}\n",
        )
        .unwrap();
        assert_eq!(c.decode_params().compression, Compression::Dynamic);
        assert_eq!(c.grid.format, GridFormat::Fp16);
        assert!(matches!(
            c.sink,
            SinkConfig::Npy {
                max_files: Some(3),
                ..
            }
        ));
        assert_eq!(load("sink: none").unwrap().sink, SinkConfig::None);
        let raw = |dir: &str, max_files| {
            SinkConfig::Raw(RawSinkConfig {
                dir: dir.into(),
                max_files,
            })
        };
        assert_eq!(
            load("sink: {raw: /tmp/r}").unwrap().sink,
            raw("/tmp/r", None)
        );
        let c = load("sink: {raw: {dir: rel, max_files: 2}}").unwrap();
        assert_eq!(c.sink, raw("rel", Some(2)));
    }

    #[test]
    fn shipped_config_keys_parse() {
        // configs/fronthaul.yaml's stage options and generator options, and its steering rules.
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs");
        let text = std::fs::read_to_string(format!("{root}/fronthaul.yaml")).unwrap();
        let v: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        let stage = v["pipeline"]
            .as_array()
            .and_then(|p| p.iter().find_map(|s| s.get("fronthaul")))
            .expect("a fronthaul stage");
        let c: FronthaulConfig = serde_json::from_value(stage.clone()).unwrap();
        c.validate().unwrap();
        assert_eq!(c.eaxcs, [0, 1]);
        let g: crate::oran_gen::OranGenOptions =
            serde_json::from_value(v["ports"][0]["gen"]["oran"].clone()).unwrap();
        g.validate().unwrap();
        assert_eq!((g.carrier_prbs, g.iq_width, g.vlan), (273, 9, Some(100)));
        let rules = format!("{root}/rules/fronthaul-gen.steering.yaml");
        flow_rules::steering::SteerRuleSet::load(&rules).unwrap();
    }

    #[test]
    fn bad_values_name_their_key() {
        for (y, key) in [
            ("carrier_prbs: 0", "carrier_prbs"),
            ("numerology: 5", "numerology"),
            ("eaxc_bits: [4, 4, 4, 3]", "eaxc_bits"),
            ("comp: {iq_width: 17}", "comp.iq_width"),
            ("grid: {beta: 0}", "grid.beta"),
            ("ta4: {min_ns: 5, max_ns: 4}", "ta4"),
            ("eaxcs: [1, 1]", "eaxcs"),
            ("max_open_slots: 0", "max_open_slots"),
            ("slot_timeout_us: 0", "slot_timeout_us"),
            ("max_eaxcs: 65", "max_eaxcs"),
            ("sink: {npy: {dir: \"\"}}", "sink.npy.dir"),
            ("sink: {raw: \"\"}", "sink.raw.dir"),
            ("sink: {raw: {dir: \"\"}}", "sink.raw.dir"),
        ] {
            let e = load(y).unwrap_err();
            assert!(e.contains(key), "{y}: {e}");
        }
        assert!(load("unknown_key: 1").unwrap_err().contains("unknown_key"));
        assert!(load("comp: {method: mulaw}").is_err());
        assert!(load("sink: {npy: {}}").is_err());
        assert!(load("sink: {raw: {}}").is_err());
        assert!(load("sink: {raw: {dir: x, bogus: 1}}").is_err());
        assert!(load("sink: {raw: [1]}").is_err());
    }
}
