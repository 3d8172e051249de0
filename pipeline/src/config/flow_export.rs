//! The checks of flow export: `flow_stats` stages and the `ipfix:` section (docs/ipfix.md).

use std::path::Path;

use super::{Config, ConfigError, StageConfig};

/// A `flow_stats` stage's options are valid for its pipeline (with or without `conntrack`),
/// there is at most one, it has an `ipfix:` section to export to, and an `ipfix:` section has
/// a `flow_stats` stage and a collector that resolves. Errors name the file, line and key.
pub(super) fn check_flow_export(file: &Path, cfg: &Config) -> Result<(), ConfigError> {
    let conntrack = cfg
        .pipeline
        .iter()
        .any(|s| matches!(s.value, StageConfig::Conntrack(_)));
    let mut seen = false;
    for (i, s) in cfg.pipeline.iter().enumerate() {
        let StageConfig::FlowStats(c) = &s.value else {
            continue;
        };
        let at = |key: String, why: String| ConfigError::at(file, s, key, why);
        if seen {
            return Err(at(
                format!("pipeline[{i}].flow_stats"),
                "a pipeline has at most one `flow_stats` stage".into(),
            ));
        }
        seen = true;
        c.validate(conntrack).map_err(|(key, why)| {
            let key = if key.is_empty() {
                format!("pipeline[{i}].flow_stats")
            } else {
                format!("pipeline[{i}].flow_stats.{key}")
            };
            at(key, why)
        })?;
        if cfg.ipfix.is_none() {
            return Err(at(
                format!("pipeline[{i}].flow_stats"),
                "flow records need a collector: add an `ipfix:` section \
                 (`ipfix: { collector: HOST:PORT }`, docs/ipfix.md)"
                    .into(),
            ));
        }
    }
    let Some(ipfix) = &cfg.ipfix else {
        return Ok(());
    };
    if !seen {
        return Err(ConfigError::at(
            file,
            ipfix,
            "ipfix",
            "no `flow_stats` stage in the pipeline makes flow records: add `- flow_stats` after \
             `parse` (docs/ipfix.md)",
        ));
    }
    ipfix.value.resolve().map(|_| ()).map_err(|e| match e {
        pktwarp_flow::ipfix::IpfixError::Config { key, msg } => {
            ConfigError::at(file, ipfix, format!("ipfix.{key}"), msg)
        }
        other => ConfigError::at(file, ipfix, "ipfix", other.to_string()),
    })
}
