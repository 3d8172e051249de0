//! Generator modes a crate above the library adds to the `gen` port: a key of the `gen:` section
//! (`gen: { KEY: {...}, rate: ... }`) whose options the mode parses, and which then makes every
//! frame of the port (an application's own traffic: radio frames, a protocol's messages).
//! Registered once at the start of the process ([`register`]), before any config is read.
//!
//! With a mode the port's IP-frame keys (`trace`, `flows`, `count`, `size`, ...) are refused:
//! the mode's frames, their number and their timing are its own; `rate` paces them as it paces
//! the other `gen` frames (`capture`: each frame at its own timestamp).

use std::any::Any;
use std::fmt;
use std::sync::{Arc, RwLock};

use serde::de::{self, IntoDeserializer};
use serde::Deserialize;

use pktwarp_core::config_error::ConfigError;

use crate::port::pace::Rate;
use crate::port::{PortError, RxPort};

/// A generator mode, as the crate that brings it describes it.
pub trait GenMode: Send + Sync {
    /// Its key in the `gen:` section (a plain name that is no key of the section's own).
    fn key(&self) -> &'static str;
    /// Parses its options where the config writes them ([`ModeOptions::parse`] gives located
    /// errors: an unknown key or a bad value at its own line, column and key).
    fn parse(&self, at: &ModeOptions<'_>) -> Result<Arc<dyn Any + Send + Sync>, ConfigError>;
    /// Checks the parsed options as config loading and `pktwarp validate` do, without opening
    /// anything: the error starts with its key (`gen.KEY.field: ...`).
    fn check(&self, options: &(dyn Any + Send + Sync)) -> Result<(), String>;
    /// The frames of the port at index `port`, paced by `rate`.
    fn open(
        &self,
        options: &(dyn Any + Send + Sync),
        rate: Rate,
        port: u16,
    ) -> Result<Box<dyn GenSource>, PortError>;
}

/// A mode's frames: a receive side of its own (the `gen` port hands its bursts on).
pub trait GenSource: RxPort + fmt::Debug {}

impl<T: RxPort + fmt::Debug> GenSource for T {}

static MODES: RwLock<Vec<&'static dyn GenMode>> = RwLock::new(Vec::new());

/// Adds `mode` under its key. Registering the same mode again does nothing; a key the `gen:`
/// section has, or another mode's, is an error.
pub fn register(mode: &'static dyn GenMode) -> anyhow::Result<()> {
    let key = mode.key();
    let mut all = MODES.write().unwrap_or_else(|e| e.into_inner());
    match all.iter().find(|m| m.key() == key) {
        Some(m) if std::ptr::addr_eq(*m, mode) => Ok(()),
        Some(_) => anyhow::bail!("gen mode `{key}` is registered twice"),
        None => {
            if OWN_KEYS.contains(&key) || key.is_empty() {
                anyhow::bail!("gen mode `{key}`: a key of the `gen:` section itself");
            }
            all.push(mode);
            Ok(())
        }
    }
}

/// The mode registered under `key`.
pub fn get(key: &str) -> Option<&'static dyn GenMode> {
    let all = MODES.read().unwrap_or_else(|e| e.into_inner());
    all.iter().copied().find(|m| m.key() == key)
}

/// The `gen:` section's own keys ([`super::GenOptions`]).
const OWN_KEYS: &[&str] = &[
    "trace",
    "flows",
    "size",
    "count",
    "duration_s",
    "rate",
    "seed",
    "malformed_ratio",
    "vlan",
    "tcp_flags",
    "payload",
];

/// A `gen` port's mode, its options as written (what a reload compares) and, once the config
/// was checked (`config::parse_str`), as its [`GenMode::parse`] returned them.
#[derive(Clone)]
pub struct GenModeConfig {
    pub mode: &'static dyn GenMode,
    pub written: serde_json::Value,
    pub options: Option<Arc<dyn Any + Send + Sync>>,
}

impl GenModeConfig {
    /// Its options as the mode's own type `T`.
    pub fn options_as<T: Any>(&self) -> Option<&T> {
        self.options.as_deref()?.downcast_ref::<T>()
    }

    /// The parsed options; an error naming the mode when the config was not checked.
    pub fn parsed(&self) -> Result<&(dyn Any + Send + Sync), String> {
        self.options.as_deref().ok_or_else(|| {
            format!(
                "gen.{}: its options were not read from a config (`config::parse_str`)",
                self.mode.key()
            )
        })
    }
}

/// Where a mode's options are: the config text, the port's index in `ports:`, and how the
/// config reports a YAML error.
pub struct ModeOptions<'a> {
    pub text: &'a str,
    pub port: usize,
    pub key: &'static str,
    pub yaml_error: &'a dyn Fn(serde_saphyr::Error) -> ConfigError,
}

impl ModeOptions<'_> {
    /// The options of `ports[port].gen.KEY` as `T`, parsed from the config text.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, ConfigError> {
        use crate::stage::keyed::Seg;
        let path = [
            Seg::Key("ports".into()),
            Seg::Index(self.port),
            Seg::Key("gen".into()),
            Seg::Key(self.key.into()),
        ];
        crate::stage::keyed::parse_at(self.text, &path, self.yaml_error)
    }
}

impl fmt::Debug for GenModeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GenModeConfig({}: {})", self.mode.key(), self.written)
    }
}

impl PartialEq for GenModeConfig {
    fn eq(&self, other: &Self) -> bool {
        self.mode.key() == other.mode.key() && self.written == other.written
    }
}

/// Deserializes a port's `gen:` section: a registered mode's key is taken out and parsed by its
/// mode; every other key is the section's own, read as it always was.
pub fn gen_section<'de, D: de::Deserializer<'de>>(
    d: D,
) -> Result<Option<super::GenOptions>, D::Error> {
    Option::<Section>::deserialize(d).map(|s| s.map(|s| s.0))
}

struct Section(super::GenOptions);

impl<'de> Deserialize<'de> for Section {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(SectionVisitor)
    }
}

struct SectionVisitor;

impl<'de> de::Visitor<'de> for SectionVisitor {
    type Value = Section;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the generator's options")
    }
    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Section, A::Error> {
        let mut modes = Vec::new();
        let mut opts =
            super::GenOptions::deserialize(de::value::MapAccessDeserializer::new(WithoutModes {
                inner: map,
                modes: &mut modes,
            }))?;
        if modes.len() > 1 {
            return Err(de::Error::custom(format!(
                "gen: one mode at most, got `{}` and `{}`",
                modes[0].0.key(),
                modes[1].0.key()
            )));
        }
        if let Some((mode, written)) = modes.pop() {
            // Parsed from the config text once it is read (`config::parse_str`), so that its
            // errors have their own lines.
            opts.mode = Some(GenModeConfig {
                mode,
                written,
                options: None,
            });
        }
        Ok(Section(opts))
    }
}

/// The `gen:` map without the registered modes' keys, whose values it keeps aside.
struct WithoutModes<'m, A> {
    inner: A,
    modes: &'m mut Vec<(&'static dyn GenMode, serde_json::Value)>,
}

impl<'de, A: de::MapAccess<'de>> de::MapAccess<'de> for WithoutModes<'_, A> {
    type Error = A::Error;
    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(key) = self.inner.next_key::<String>()? else {
                return Ok(None);
            };
            match get(&key) {
                Some(mode) => {
                    let v = self.inner.next_value::<serde_json::Value>()?;
                    self.modes.push((mode, v));
                }
                None => {
                    let k: de::value::StringDeserializer<A::Error> = key.into_deserializer();
                    return seed.deserialize(k).map(Some);
                }
            }
        }
    }
    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, A::Error> {
        self.inner.next_value_seed(seed)
    }
}
