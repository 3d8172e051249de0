//! Hot reload of the ACL rule set: re-read the config file, rebuild and validate the `acl`
//! stage's tables aside, and publish them with one epoch swap ([`Pipeline::reload_acl`]). Any
//! failure leaves the running tables in force, is counted, and is logged with file, line and
//! reason.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use flow_rules::error::RuleError;

use crate::config::{self, StageConfig};
use crate::stage::acl::AclStage;
use crate::stage::Pipeline;

use super::ControlState;

/// Why a reload was refused: where (file and 1-based line, 0 when unknown) and what.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {reason}", file.display(), if *line > 0 { format!(":{line}") } else { String::new() })]
pub struct ReloadError {
    pub file: PathBuf,
    pub line: u32,
    pub reason: String,
}

/// What a successful reload published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reloaded {
    pub generation: u64,
    pub rules: usize,
    pub rule_file: PathBuf,
}

/// Rebuilds the pipeline's ACL tables from the config file on demand.
pub struct Reloader {
    config_path: PathBuf,
    pipeline: Arc<Pipeline>,
    state: Arc<ControlState>,
    /// Why in-place reload cannot work with the running executor (for an executor without a
    /// table swap; both built-in executors have one); every reload is then refused with this
    /// reason.
    refuse: Option<String>,
}

impl Reloader {
    pub fn new(config_path: &Path, pipeline: Arc<Pipeline>, state: Arc<ControlState>) -> Self {
        Reloader {
            config_path: config_path.to_path_buf(),
            pipeline,
            state,
            refuse: None,
        }
    }

    /// Refuses every reload with `reason` (the running executor cannot swap tables), so the
    /// published generation never claims rules that are not in force.
    pub fn refusing(mut self, reason: impl Into<String>) -> Self {
        self.refuse = Some(reason.into());
        self
    }

    /// The rule file the current config names (for watching), if the config still loads.
    pub fn rule_file(&self) -> Option<PathBuf> {
        let cfg = config::load(&self.config_path).ok()?;
        acl_config(&cfg).map(|a| cfg.resolve(&a.rules))
    }

    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// Builds, validates and publishes; counts and logs the outcome. `trigger` says why
    /// (`sighup`, `rule_file_changed`, ...), for the log.
    pub fn reload(&self, trigger: &str) -> Result<Reloaded, ReloadError> {
        let t = Instant::now();
        let from = self.pipeline.generation();
        match self.build().and_then(|(stage, file)| {
            let rules = stage.rule_count();
            let generation = self.pipeline.reload_acl(stage).map_err(|e| ReloadError {
                file: self.config_path.clone(),
                line: 0,
                reason: e.to_string(),
            })?;
            Ok(Reloaded {
                generation,
                rules,
                rule_file: file,
            })
        }) {
            Ok(r) => {
                self.state.reload_ok.fetch_add(1, Ordering::Relaxed);
                let now_ms = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                self.state
                    .last_reload_ok_unix_ms
                    .store(now_ms, Ordering::Relaxed);
                tracing::info!(
                    event = "reload",
                    result = "success",
                    trigger,
                    file = %r.rule_file.display(),
                    rules = r.rules,
                    from_generation = from,
                    generation = r.generation,
                    took_ms = t.elapsed().as_secs_f64() * 1e3,
                    "rule set reloaded"
                );
                Ok(r)
            }
            Err(e) => {
                self.state.reload_failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    event = "reload",
                    result = "failure",
                    trigger,
                    file = %e.file.display(),
                    line = e.line,
                    reason = %e.reason,
                    generation = from,
                    "reload rejected, the running rule set stays in force"
                );
                Err(e)
            }
        }
    }

    /// The new tables, built aside from whatever runs now.
    fn build(&self) -> Result<(AclStage, PathBuf), ReloadError> {
        if let Some(why) = &self.refuse {
            return Err(ReloadError {
                file: self.config_path.clone(),
                line: 0,
                reason: why.clone(),
            });
        }
        let cfg = config::load(&self.config_path).map_err(|e| ReloadError {
            file: e.file.clone(),
            line: e.line,
            reason: if e.key.is_empty() {
                e.message.clone()
            } else {
                format!("key `{}`: {}", e.key, e.message)
            },
        })?;
        let now: Vec<&str> = self.pipeline.stage_names();
        let new: Vec<&str> = cfg.pipeline.iter().map(|s| s.value.name()).collect();
        if now != new {
            return Err(ReloadError {
                file: self.config_path.clone(),
                line: 0,
                reason: format!(
                    "the pipeline's stages changed ({now:?} -> {new:?}); only the acl rule set \
                     reloads in place, restart pktwarp to change the stages"
                ),
            });
        }
        let Some(acl) = acl_config(&cfg) else {
            return Err(ReloadError {
                file: self.config_path.clone(),
                line: 0,
                reason: "the pipeline has no acl stage: nothing to reload".into(),
            });
        };
        let file = cfg.resolve(&acl.rules);
        let stage = AclStage::from_config(acl, &|p| cfg.resolve(p)).map_err(|e| match e
            .downcast_ref::<RuleError>()
        {
            Some(r) => ReloadError {
                file: r.loc.file.clone(),
                line: r.loc.line as u32,
                reason: if r.field.is_empty() {
                    r.message.clone()
                } else {
                    format!("field `{}`: {}", r.field, r.message)
                },
            },
            None => ReloadError {
                file: file.clone(),
                line: 0,
                reason: format!("{e:#}"),
            },
        })?;
        Ok((stage, file))
    }
}

fn acl_config(cfg: &config::Config) -> Option<&config::AclStageConfig> {
    cfg.pipeline.iter().find_map(|s| match &s.value {
        StageConfig::Acl(a) => Some(a),
        _ => None,
    })
}
