//! The options of the stages and `gen` modes that crates above the library register
//! (`crate::stage::keyed`, `crate::port::gen::mode`): each parsed by its owner from the config
//! text, so its errors have their own lines; the result goes into the config.

use super::{yaml_error, Config, ConfigError, StageConfig};

/// The keyed stages' options (`crate::stage::keyed`), each parsed and checked by its stage from
/// the config `text`; the result goes into the stage's entry.
pub(super) fn check_keyed(cfg: &mut Config, text: &str) -> Result<(), ConfigError> {
    let path = cfg.path.clone();
    let yaml_error = |e| yaml_error(e, text, &path);
    for (index, s) in cfg.pipeline.iter_mut().enumerate() {
        let StageConfig::Keyed(k) = &mut s.value else {
            continue;
        };
        let at = crate::stage::keyed::KeyedOptions {
            text,
            index,
            key: k.name(),
            yaml_error: &yaml_error,
        };
        let options = k.stage.check(&at).map_err(|mut e| {
            e.file.clone_from(&path);
            if e.line == 0 {
                (e.line, e.column) = (s.referenced.line() as u32, s.referenced.column() as u32);
            }
            e
        })?;
        k.options = Some(options);
    }
    Ok(())
}

/// The `gen` ports' modes' options (`crate::port::gen::mode`), each parsed by its mode from the
/// config `text`.
pub(super) fn check_gen_modes(cfg: &mut Config, text: &str) -> Result<(), ConfigError> {
    let path = cfg.path.clone();
    let yaml_error = |e| yaml_error(e, text, &path);
    for (port, p) in cfg.ports.iter_mut().enumerate() {
        let Some(m) = p.value.gen.as_mut().and_then(|g| g.mode.as_mut()) else {
            continue;
        };
        let at = crate::port::gen::mode::ModeOptions {
            text,
            port,
            key: m.mode.key(),
            yaml_error: &yaml_error,
        };
        let options = m.mode.parse(&at).map_err(|mut e| {
            e.file.clone_from(&path);
            if e.line == 0 {
                (e.line, e.column) = (p.referenced.line() as u32, p.referenced.column() as u32);
            }
            e
        })?;
        m.options = Some(options);
    }
    Ok(())
}
