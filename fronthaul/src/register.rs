//! The fronthaul stage on the stage API: its config key `fronthaul:` (a keyed stage,
//! `pipeline::stage::keyed`), registered by the binary that runs it ([`register()`]).

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pktwarp_core::config_error::ConfigError;

use pipeline::internal::stage::keyed::{KeyedOptions, KeyedStage};
use pipeline::stage::BuiltStage;

use super::{FronthaulConfig, FronthaulStage};

/// The `fronthaul:` key of the config's stage list.
pub struct Key;

/// Adds the `fronthaul:` stage key and the `gen` port's `oran` mode to this process's configs
/// (once; again does nothing).
pub fn register() {
    static KEY: Key = Key;
    // Plain names no built-in stage or `gen` key takes: registering cannot fail.
    if let Err(e) = pipeline::internal::stage::keyed::register(&KEY) {
        unreachable!("the fronthaul stage key: {e:#}");
    }
    if let Err(e) = pipeline::internal::port::gen::mode::register(&super::gen_mode::MODE) {
        unreachable!("the gen port's oran mode: {e:#}");
    }
}

impl KeyedStage for Key {
    fn descriptor(&self) -> &'static pipeline::stage::StageDescriptor {
        &super::stage::DESCRIPTOR
    }

    fn check(&self, at: &KeyedOptions<'_>) -> Result<Arc<dyn Any + Send + Sync>, ConfigError> {
        let cfg: FronthaulConfig = at.parse()?;
        // The stage's checks start their message with its key: `fronthaul.numerology: ...`;
        // they are at the entry's line (the config fills it in).
        cfg.validate().map_err(|e| {
            let (sub, why) = e.split_once(": ").unwrap_or(("fronthaul", e.as_str()));
            ConfigError {
                file: PathBuf::new(),
                line: 0,
                column: 0,
                key: format!("pipeline[{}].{sub}", at.index),
                message: why.to_string(),
            }
        })?;
        Ok(Arc::new(cfg))
    }

    fn build(
        &self,
        options: &(dyn Any + Send + Sync),
        resolve: &dyn Fn(&Path) -> PathBuf,
    ) -> anyhow::Result<BuiltStage> {
        let Some(cfg) = options.downcast_ref::<FronthaulConfig>() else {
            anyhow::bail!("options of another stage");
        };
        // Its sink folder resolved against the config's.
        let mut f = cfg.clone();
        if let Some(dir) = f.sink.dir_mut() {
            *dir = resolve(dir);
        }
        let stage = FronthaulStage::from_config(&f).map_err(|e| anyhow::anyhow!(e))?;
        Ok(BuiltStage {
            cpu: Arc::new(stage),
            gpu: None,
        })
    }

    fn rerun_refusal(&self) -> Option<&'static str> {
        Some(
            "it keeps state from every frame (slot grid, sequence ids), which a second run \
             would record twice",
        )
    }
}
