//! Stages a crate above the library adds under a config key of their own: `- KEY: {...}` in the
//! `pipeline:` list, written and checked as a built-in's (`- acl: {...}`), not through the
//! `custom:` door. The crate registers a [`KeyedStage`] once, at the start of the process
//! ([`register`]), before any config is read: the config's stage list is parsed by serde before
//! a [`crate::stage::StageRegistry`] is at hand, so the keys are known process-wide.
//!
//! The stage's options are parsed by its own parser, from the config text itself
//! ([`KeyedOptions::parse`]), so an error in them names the file, line, column and key exactly
//! as an error in a built-in's options does.

use std::any::Any;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use pktwarp_core::config_error::ConfigError;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer};

use crate::stage::descriptor::StageDescriptor;
use crate::stage::registry::BuiltStage;

/// A stage with a config key of its own, as the crate that brings it describes it.
pub trait KeyedStage: Send + Sync {
    /// Its descriptor: `name` is the config key (a plain name no built-in takes).
    fn descriptor(&self) -> &'static StageDescriptor;
    /// Parses and checks the options where the config writes them ([`KeyedOptions::parse`]
    /// gives located errors); the result is what [`KeyedStage::build`] gets.
    fn check(&self, options: &KeyedOptions<'_>) -> Result<Arc<dyn Any + Send + Sync>, ConfigError>;
    /// Builds the stage from the options [`KeyedStage::check`] returned; `resolve` turns a
    /// relative path of the options into one against the config's folder.
    fn build(
        &self,
        options: &(dyn Any + Send + Sync),
        resolve: &dyn Fn(&Path) -> PathBuf,
    ) -> anyhow::Result<BuiltStage>;
    /// Why a second run of a burst through the stage would change what it keeps (the sampled
    /// self-check, `verify:`, re-runs bursts); `None`: it keeps nothing per frame.
    fn rerun_refusal(&self) -> Option<&'static str> {
        None
    }
}

static KEYED: RwLock<Vec<&'static dyn KeyedStage>> = RwLock::new(Vec::new());

/// Adds `stage` under its descriptor's name. Registering the same stage again does nothing; a
/// name a built-in or another keyed stage takes is an error.
pub fn register(stage: &'static dyn KeyedStage) -> anyhow::Result<()> {
    let name = stage.descriptor().name;
    let mut all = KEYED.write().unwrap_or_else(|e| e.into_inner());
    match all.iter().find(|s| s.descriptor().name == name) {
        Some(s) if std::ptr::addr_eq(*s, stage) => Ok(()),
        Some(_) => anyhow::bail!("stage key `{name}` is registered twice"),
        None => {
            crate::stage::registry::check_name(name)?;
            if name == crate::stage::descriptor::CUSTOM_KEY
                || crate::stage::descriptor::builtin(name).is_some()
            {
                anyhow::bail!("stage key `{name}` is a built-in stage's");
            }
            all.push(stage);
            Ok(())
        }
    }
}

/// The keyed stage registered under `key`.
pub fn get(key: &str) -> Option<&'static dyn KeyedStage> {
    let all = KEYED.read().unwrap_or_else(|e| e.into_inner());
    all.iter().copied().find(|s| s.descriptor().name == key)
}

/// Every keyed stage registered, in registration order.
pub fn all() -> Vec<&'static dyn KeyedStage> {
    KEYED.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// A keyed stage's entry of the config's stage list: its key, its options as written (what a
/// reload compares: a change needs a restart), and once the config was checked
/// (`config::parse_str`), its options as its [`KeyedStage::check`] returned them.
#[derive(Clone)]
pub struct KeyedStageConfig {
    pub stage: &'static dyn KeyedStage,
    pub written: serde_json::Value,
    pub options: Option<Arc<dyn Any + Send + Sync>>,
}

impl KeyedStageConfig {
    pub fn name(&self) -> &'static str {
        self.stage.descriptor().name
    }
}

impl fmt::Debug for KeyedStageConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedStageConfig")
            .field("key", &self.name())
            .field("options", &self.written)
            .field("checked", &self.options.is_some())
            .finish()
    }
}

/// Where a keyed stage's options are: the config text, the stage's index in `pipeline:`, and
/// how the config reports a YAML error (file, line, column, key).
pub struct KeyedOptions<'a> {
    pub text: &'a str,
    pub index: usize,
    pub key: &'static str,
    /// The config's error for a YAML error of its text.
    pub yaml_error: &'a dyn Fn(serde_saphyr::Error) -> ConfigError,
}

impl KeyedOptions<'_> {
    /// The options of `pipeline[index].KEY` as `T`, parsed from the config text: an unknown
    /// key or a bad value is an error at its own line and column.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        let path = [
            Seg::Key("pipeline".into()),
            Seg::Index(self.index),
            Seg::Key(self.key.into()),
        ];
        parse_at(self.text, &path, self.yaml_error)
    }
}

/// One step of a path into the config document: a map's key or a list's index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// The node at `path` of the YAML `text` as `T`, with serde-saphyr's located errors (mapped by
/// `yaml_error`); an error when the path is not in the text.
pub fn parse_at<T: DeserializeOwned>(
    text: &str,
    path: &[Seg],
    yaml_error: &dyn Fn(serde_saphyr::Error) -> ConfigError,
) -> Result<T, ConfigError> {
    AT.with(|a| *a.borrow_mut() = path.to_vec());
    let doc = serde_saphyr::from_str::<Doc<T>>(text);
    AT.with(|a| a.borrow_mut().clear());
    match doc {
        Ok(Doc(Some(v))) => Ok(v),
        Ok(Doc(None)) => Err(ConfigError {
            file: PathBuf::new(),
            line: 0,
            column: 0,
            key: path_key(path),
            message: "not found in the config text".into(),
        }),
        Err(e) => Err(yaml_error(e)),
    }
}

/// `pipeline[1].fronthaul`: the key of a path as config errors write it.
fn path_key(path: &[Seg]) -> String {
    let mut out = String::new();
    for s in path {
        match s {
            Seg::Key(k) if out.is_empty() => out.push_str(k),
            Seg::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

thread_local! {
    /// The path [`parse_at`] reads (serde's entry point takes a type, not a seed).
    static AT: std::cell::RefCell<Vec<Seg>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The config document, of which only the node at [`AT`]'s path is read (as `T`).
struct Doc<T>(Option<T>);

impl<'de, T: DeserializeOwned> de::Deserialize<'de> for Doc<T> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let path = AT.with(|a| a.borrow().clone());
        if path.is_empty() {
            return Err(de::Error::custom("no node to read"));
        }
        PathSeed::<T>(&path, std::marker::PhantomData)
            .deserialize(d)
            .map(Doc)
    }
}

/// The node at the path under the node deserialized, as `T` (`None`: not there).
struct PathSeed<'p, T>(&'p [Seg], std::marker::PhantomData<T>);

impl<'de, T: DeserializeOwned> de::DeserializeSeed<'de> for PathSeed<'_, T> {
    type Value = Option<T>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        match self.0.first() {
            None => T::deserialize(d).map(Some),
            Some(Seg::Key(_)) => d.deserialize_map(self),
            Some(Seg::Index(_)) => d.deserialize_seq(self),
        }
    }
}

impl<'de, T: DeserializeOwned> de::Visitor<'de> for PathSeed<'_, T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", path_key(self.0))
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let Some(Seg::Key(want)) = self.0.first() else {
            return Err(de::Error::custom("a map where the path has an index"));
        };
        let mut out = None;
        while let Some(k) = map.next_key::<String>()? {
            if k == *want && out.is_none() {
                out = map.next_value_seed(PathSeed::<T>(&self.0[1..], std::marker::PhantomData))?;
            } else {
                map.next_value::<de::IgnoredAny>()?;
            }
        }
        Ok(out)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Option<T>, A::Error> {
        let Some(Seg::Index(want)) = self.0.first() else {
            return Err(de::Error::custom("a list where the path has a key"));
        };
        let mut out = None;
        let mut i = 0;
        loop {
            if i == *want {
                match seq
                    .next_element_seed(PathSeed::<T>(&self.0[1..], std::marker::PhantomData))?
                {
                    Some(v) => out = v,
                    None => break,
                }
            } else if seq.next_element::<de::IgnoredAny>()?.is_none() {
                break;
            }
            i += 1;
        }
        Ok(out)
    }
}

/// Deserializes the config's `pipeline:` list: an entry whose key a keyed stage registered is
/// that stage (its options read later, by [`KeyedOptions::parse`]); any other is a built-in's
/// or `custom:`, read by the stage enum as it always was.
pub fn stage_list<'de, D: de::Deserializer<'de>>(
    d: D,
) -> Result<Vec<serde_saphyr::Spanned<crate::stage::config::StageConfig>>, D::Error> {
    let entries = Vec::<serde_saphyr::Spanned<Entry>>::deserialize(d)?;
    Ok(entries
        .into_iter()
        .map(|s| serde_saphyr::Spanned::new(s.value.0, s.referenced, s.defined))
        .collect())
}

use serde::Deserialize;

/// One entry of the stage list.
struct Entry(crate::stage::config::StageConfig);

impl<'de> de::Deserialize<'de> for Entry {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(EntryVisitor)
    }
}

struct EntryVisitor;

impl<'de> de::Visitor<'de> for EntryVisitor {
    type Value = Entry;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a stage: its key, with its options where it has some (`- parse`, `- acl: {...}`)",
        )
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Entry, E> {
        if let Some(stage) = get(v) {
            return Err(E::custom(format!(
                "the `{}` stage takes options: `- {}: {{...}}`",
                stage.descriptor().name,
                stage.descriptor().name
            )));
        }
        let d: de::value::StrDeserializer<'_, E> = v.into_deserializer();
        crate::stage::config::StageConfig::deserialize(d).map(Entry)
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        let Some(key) = map.next_key::<String>()? else {
            return Err(de::Error::custom(
                "a stage entry names its stage: `- KEY: {...}`",
            ));
        };
        let entry = match get(&key) {
            Some(stage) => {
                let written = map.next_value::<serde_json::Value>()?;
                crate::stage::config::StageConfig::Keyed(KeyedStageConfig {
                    stage,
                    written,
                    options: None,
                })
            }
            None => crate::stage::config::StageConfig::deserialize(EnumDe { key, map: &mut map })?,
        };
        if let Some(other) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!(
                "a stage entry has one key, its stage's: `{other}` is a second (indent a \
                 stage's options under its key)"
            )));
        }
        Ok(Entry(entry))
    }
}

/// The stage enum read from a map whose key was read already.
struct EnumDe<'a, A> {
    key: String,
    map: &'a mut A,
}

impl<'de, A: de::MapAccess<'de>> de::Deserializer<'de> for EnumDe<'_, A> {
    type Error = A::Error;
    fn deserialize_any<V: de::Visitor<'de>>(self, v: V) -> Result<V::Value, A::Error> {
        v.visit_enum(self)
    }
    fn deserialize_enum<V: de::Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, A::Error> {
        v.visit_enum(self)
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier
        ignored_any
    }
}

impl<'de, A: de::MapAccess<'de>> de::EnumAccess<'de> for EnumDe<'_, A> {
    type Error = A::Error;
    type Variant = Self;
    fn variant_seed<V: de::DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self), A::Error> {
        let key: de::value::StrDeserializer<'_, A::Error> = self.key.as_str().into_deserializer();
        let v = seed.deserialize(key)?;
        Ok((v, self))
    }
}

impl<'de, A: de::MapAccess<'de>> de::VariantAccess<'de> for EnumDe<'_, A> {
    type Error = A::Error;
    fn unit_variant(self) -> Result<(), A::Error> {
        self.map.next_value::<()>()
    }
    fn newtype_variant_seed<T: de::DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
    fn tuple_variant<V: de::Visitor<'de>>(self, _len: usize, _v: V) -> Result<V::Value, A::Error> {
        Err(de::Error::custom("no stage takes a list of options"))
    }
    fn struct_variant<V: de::Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        _v: V,
    ) -> Result<V::Value, A::Error> {
        Err(de::Error::custom("no stage takes a struct of options"))
    }
}
