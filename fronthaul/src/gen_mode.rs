//! The `gen` port's O-RAN mode (`gen: { oran: {...} }`): U-plane frames of known IQ
//! ([`crate::oran_gen`]), a generator mode (`pipeline::port::gen::mode`) registered with
//! the stage ([`crate::register()`]).

use std::any::Any;
use std::sync::Arc;

use crate::oran_gen::{OranGenOptions, OranRx};
use pipeline::config::ConfigError;
use pipeline::internal::port::gen::mode::{GenMode, GenModeConfig, GenSource, ModeOptions};
use pipeline::internal::port::pace::Rate;
use pipeline::port::PortError;

/// The `oran` key of the `gen:` section.
pub struct Oran;

/// The mode, registered.
pub static MODE: Oran = Oran;

/// The O-RAN options of a `gen` port's mode, if it is this one.
pub fn options(m: Option<&GenModeConfig>) -> Option<&OranGenOptions> {
    m.and_then(GenModeConfig::options_as::<OranGenOptions>)
}

fn of(options: &(dyn Any + Send + Sync)) -> Result<&OranGenOptions, String> {
    options
        .downcast_ref::<OranGenOptions>()
        .ok_or_else(|| "gen.oran: options of another mode".to_string())
}

impl GenMode for Oran {
    fn key(&self) -> &'static str {
        "oran"
    }

    fn parse(&self, at: &ModeOptions<'_>) -> Result<Arc<dyn Any + Send + Sync>, ConfigError> {
        let o: OranGenOptions = at.parse()?;
        Ok(Arc::new(o))
    }

    fn check(&self, options: &(dyn Any + Send + Sync)) -> Result<(), String> {
        of(options)?.validate()
    }

    fn open(
        &self,
        options: &(dyn Any + Send + Sync),
        rate: Rate,
        port: u16,
    ) -> Result<Box<dyn GenSource>, PortError> {
        let o = of(options).map_err(PortError::Config)?;
        Ok(Box::new(OranRx::new(o, rate, port)?))
    }
}
