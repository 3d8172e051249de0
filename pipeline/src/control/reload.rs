//! Hot reload of the ACL rule set, the `route` stages' route tables and the stages' options:
//! re-read the config file, rebuild and validate the `acl` stage's tables, every `route`
//! stage's table and every `custom:` stage whose options changed aside, and publish them with
//! one epoch swap each ([`Pipeline::reload_acl`], [`Pipeline::publish_routes`],
//! [`Pipeline::reload_stage_options`]). Any failure leaves everything running in force, is
//! counted, and is logged with file, line and reason.
//!
//! Two guards: a reload that would publish a table (the ACL rules, a `route` stage's routes)
//! with no entries, or fewer than half of those in force (what a half-written or truncated file
//! looks like), is refused with a warning unless the new config sets
//! `control.allow_rule_shrink: true` (`check_shrink`, one guard for every table); and a
//! config change outside the ACL stage (ports, queues, steering (its rule file's contents too),
//! executor, metrics, built-in stages' options, ...) is logged as needing a restart, since only
//! the rule set, the route tables and user stages' options swap in place.

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
    /// The rule-set generation in force (unchanged without an acl stage).
    pub generation: u64,
    /// Rules in force (0 without an acl stage).
    pub rules: usize,
    /// The rule file read (empty without an acl stage).
    pub rule_file: PathBuf,
    /// The stages rebuilt with new options, by name.
    pub rebuilt: Vec<String>,
    /// The stage-parameter generation in force.
    pub params_generation: u64,
    /// Each `route` stage's new table: (IPv4 routes, IPv6 routes, generation).
    pub routes: Vec<(usize, usize, u64)>,
    /// Config sections that changed but only take effect after a restart (empty: none).
    pub restart_needed: Vec<&'static str>,
}

impl Reloaded {
    /// Whether anything was published (ACL rules, route tables, a stage's new options);
    /// otherwise the reload only found changes that need a restart.
    pub fn published(&self) -> bool {
        !self.rule_file.as_os_str().is_empty()
            || !self.routes.is_empty()
            || !self.rebuilt.is_empty()
    }
}

/// Rebuilds the pipeline's ACL tables from the config file on demand.
pub struct Reloader {
    config_path: PathBuf,
    /// The command line's `--set` changes, applied again at every reload.
    overrides: Vec<config::Override>,
    pipeline: Arc<Pipeline>,
    state: Arc<ControlState>,
    /// Why in-place reload cannot work with the running executor (for an executor without a
    /// table swap; both built-in executors have one); every reload is then refused with this
    /// reason.
    refuse: Option<String>,
    /// What the running process was started with, section by section, for
    /// [`Reloaded::restart_needed`]; empty: not known (no comparison).
    baseline: Vec<(&'static str, String)>,
}

impl Reloader {
    pub fn new(config_path: &Path, pipeline: Arc<Pipeline>, state: Arc<ControlState>) -> Self {
        Reloader {
            config_path: config_path.to_path_buf(),
            overrides: Vec::new(),
            pipeline,
            state,
            refuse: None,
            baseline: Vec::new(),
        }
    }

    /// Remembers the config the process runs with, so a reload can say which changes need a
    /// restart, and the command line's changes to it, which every reload applies again.
    pub fn with_baseline(mut self, cfg: &config::Config) -> Self {
        self.baseline = sections(cfg);
        self.overrides = cfg.overrides.clone();
        self
    }

    /// Refuses every reload with `reason` (the running executor cannot swap tables), so the
    /// published generation never claims rules that are not in force.
    pub fn refusing(mut self, reason: impl Into<String>) -> Self {
        self.refuse = Some(reason.into());
        self
    }

    /// The rule file the current config names (for watching), if the config still loads.
    pub fn rule_file(&self) -> Option<PathBuf> {
        let cfg = config::load_with(&self.config_path, &self.overrides).ok()?;
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
        match self.build().and_then(|(acl, cfg)| self.apply(acl, &cfg)) {
            Ok(r) => {
                self.state.reload_ok.fetch_add(1, Ordering::Relaxed);
                let now_ms = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                self.state
                    .last_reload_ok_unix_ms
                    .store(now_ms, Ordering::Relaxed);
                if !r.restart_needed.is_empty() && !r.published() {
                    tracing::warn!(
                        event = "reload",
                        result = "restart_needed",
                        trigger,
                        sections = %r.restart_needed.join(","),
                        "nothing reloadable changed, but the config's {} changed: those \
                         changes are NOT in force until pktwarp is restarted",
                        r.restart_needed.join(", ")
                    );
                    return Ok(r);
                }
                if !r.restart_needed.is_empty() {
                    tracing::warn!(
                        event = "reload",
                        result = "restart_needed",
                        trigger,
                        file = %r.rule_file.display(),
                        rules = r.rules,
                        generation = r.generation,
                        rebuilt = %r.rebuilt.join(","),
                        sections = %r.restart_needed.join(","),
                        "the ACL rules and user stages' options were reloaded, but the config's \
                         {} changed too: those changes are NOT in force until pktwarp is \
                         restarted",
                        r.restart_needed.join(", ")
                    );
                    return Ok(r);
                }
                tracing::info!(
                    event = "reload",
                    result = "success",
                    trigger,
                    file = %r.rule_file.display(),
                    rules = r.rules,
                    from_generation = from,
                    generation = r.generation,
                    rebuilt = %r.rebuilt.join(","),
                    params_generation = r.params_generation,
                    took_ms = t.elapsed().as_secs_f64() * 1e3,
                    "reloaded (rules{}{})",
                    if r.rebuilt.is_empty() { "" } else { ", options of " },
                    r.rebuilt.join(", ")
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
                    "reload rejected, the rules, routes and options in force stay"
                );
                Err(e)
            }
        }
    }

    /// Checks what `build` made and publishes it: the user stages' new builds, the route
    /// tables, then the ACL tables. Everything that can fail is built before anything is
    /// published, so a refused reload leaves everything running in force.
    fn apply(
        &self,
        acl: Option<(AclStage, PathBuf)>,
        cfg: &config::Config,
    ) -> Result<Reloaded, ReloadError> {
        let (rules, file) = match &acl {
            Some((stage, file)) => (stage.rule_count(), file.clone()),
            None => (0, PathBuf::new()),
        };
        let allow_shrink = cfg.control.allow_rule_shrink;
        if acl.is_some() {
            let now = self.pipeline.rule_count();
            check_shrink(Table::AclRules, &file, rules, now, allow_shrink)?;
        }
        let restart_needed: Vec<&'static str> = if self.baseline.is_empty() {
            Vec::new()
        } else {
            let now = sections(cfg);
            self.baseline
                .iter()
                .zip(now.iter())
                .filter(|(a, b)| a.1 != b.1)
                .map(|(a, _)| a.0)
                .collect()
        };
        if let Some((stage, file)) = &acl {
            // Before anything is published: a refusal leaves everything in force.
            self.pipeline
                .check_acl_reload(stage)
                .map_err(|e| ReloadError {
                    file: file.clone(),
                    line: 0,
                    reason: e.to_string(),
                })?;
        }
        // The route files named at start, read again and built aside.
        let routes = self.pipeline.prepare_routes().map_err(rule_error)?;
        for (route_file, now, new) in self.pipeline.route_sizes(&routes) {
            check_shrink(Table::Routes, &route_file, new, now, allow_shrink)?;
        }
        // An `inspect` stage's paths as it was built with them (resolved against the config).
        let stage_cfgs: Vec<StageConfig> = cfg
            .pipeline
            .iter()
            .map(|s| match &s.value {
                StageConfig::Inspect(c) => StageConfig::Inspect(c.resolved(&|p| cfg.resolve(p))),
                other => other.clone(),
            })
            .collect();
        let options = self
            .pipeline
            .reload_stage_options(&stage_cfgs)
            .map_err(|e| ReloadError {
                file: self.config_path.clone(),
                line: 0,
                reason: format!("{e:#}"),
            })?;
        // A stage whose options did not change is not rebuilt, so nothing was published. A
        // change that only a restart applies (a built-in stage's options, say) is not a failed
        // reload: it is reported as needing a restart, as beside a reloaded rule file.
        let nothing = acl.is_none() && routes.is_empty() && options.rebuilt.is_empty();
        if nothing && restart_needed.is_empty() {
            return Err(ReloadError {
                file: self.config_path.clone(),
                line: 0,
                reason: "the pipeline has no acl or route stage and no stage's options \
                         changed: nothing to reload"
                    .into(),
            });
        }
        let route_tables = self.pipeline.publish_routes(routes);
        let generation = match acl {
            Some((stage, _)) => self.pipeline.reload_acl(stage).map_err(|e| ReloadError {
                file: self.config_path.clone(),
                line: 0,
                reason: e.to_string(),
            })?,
            None => self.pipeline.generation(),
        };
        Ok(Reloaded {
            generation,
            rules,
            rule_file: file,
            rebuilt: options.rebuilt,
            // After the route tables' publish: a new route table moves it on too.
            params_generation: self.pipeline.params_generation(),
            routes: route_tables,
            restart_needed,
        })
    }

    /// The new tables, built aside from whatever runs now.
    fn build(&self) -> Result<(Option<(AclStage, PathBuf)>, config::Config), ReloadError> {
        if let Some(why) = &self.refuse {
            return Err(ReloadError {
                file: self.config_path.clone(),
                line: 0,
                reason: why.clone(),
            });
        }
        let cfg =
            config::load_with(&self.config_path, &self.overrides).map_err(|e| ReloadError {
                file: e.file.clone(),
                line: e.line,
                reason: if e.key.is_empty() {
                    e.message.clone()
                } else {
                    format!("key `{}`: {}", e.key, e.message)
                },
            })?;
        let now: Vec<String> = self.pipeline.stage_names();
        let new: Vec<String> = cfg
            .pipeline
            .iter()
            .map(|s| s.value.name().to_string())
            .collect();
        if now != new {
            // A stage the application spliced into the pipeline by hand is in no config, so
            // every reload would refuse it: say how to make the config describe it.
            let spliced: Vec<&String> = now
                .iter()
                .filter(|n| !new.contains(n) && !crate::stage::descriptor::is_reserved(n))
                .collect();
            let hint = if spliced.is_empty() {
                String::new()
            } else {
                format!(
                    "; the running stages {spliced:?} are not in the config: register them in a \
                     StageRegistry and name them in the config (`- custom: {{ name: ... }}`)"
                )
            };
            return Err(ReloadError {
                file: self.config_path.clone(),
                line: 0,
                reason: format!(
                    "the pipeline's stages changed ({now:?} -> {new:?}); only the acl rule set \
                     and user stages' options reload in place, restart pktwarp to change the \
                     stages{hint}"
                ),
            });
        }
        let Some(acl) = acl_config(&cfg) else {
            return Ok((None, cfg));
        };
        let file = cfg.resolve(&acl.rules);
        let tx = cfg.port_names().tx;
        let stage =
            AclStage::from_config(acl, &|p| cfg.resolve(p), Some(&tx)).map_err(|e| match e
                .downcast_ref::<RuleError>()
            {
                Some(r) => rule_error(r.clone()),
                None => ReloadError {
                    file: file.clone(),
                    line: 0,
                    reason: format!("{e:#}"),
                },
            })?;
        Ok((Some((stage, file)), cfg))
    }
}

/// What a reload swaps in, for the shrink guard's messages.
#[derive(Clone, Copy, Debug)]
enum Table {
    AclRules,
    Routes,
}

impl Table {
    /// The table, and what it counts.
    fn words(self) -> (&'static str, &'static str) {
        match self {
            Table::AclRules => ("ACL rule set", "rules"),
            Table::Routes => ("route table", "routes"),
        }
    }
}

/// The shrink guard of every table a reload swaps in (the ACL rules, each `route` stage's
/// routes): refuses a table of `new` entries that has none, or fewer than half of the `now` in
/// force (what a half-written or truncated file looks like: published, it would drop most
/// traffic), unless the new config sets `control.allow_rule_shrink`.
fn check_shrink(
    table: Table,
    file: &Path,
    new: usize,
    now: usize,
    allow: bool,
) -> Result<(), ReloadError> {
    let shrinks = now > 0 && (new == 0 || new.saturating_mul(2) < now);
    if !shrinks || allow {
        return Ok(());
    }
    let (what, unit) = table.words();
    let reason = format!(
        "the new {what} has {new} {unit} where {now} are in force (a loss of more than half, \
         or all): refused as a likely half-written file; set `control.allow_rule_shrink: true` \
         in the config to publish it"
    );
    tracing::warn!(
        event = "reload_shrink",
        table = unit,
        file = %file.display(),
        new,
        in_force = now,
        "{reason}"
    );
    Err(ReloadError {
        file: file.to_path_buf(),
        line: 0,
        reason,
    })
}

/// The config's sections that only a restart applies, each rendered for comparison (spans
/// left out, so moving a line is no change; `control.allow_rule_shrink` left out, since the
/// reload itself reads it).
fn sections(cfg: &config::Config) -> Vec<(&'static str, String)> {
    let ports: Vec<String> = cfg.ports.iter().map(|p| format!("{:?}", p.value)).collect();
    // The acl stage's rules and a custom stage's options reload in place: only their presence
    // and name count here.
    let stages: Vec<String> = cfg
        .pipeline
        .iter()
        .filter(|s| !matches!(s.value, StageConfig::Acl(_)))
        .map(|s| match &s.value {
            StageConfig::Custom(c) => format!("custom {}", c.name),
            // Its rules reload in place; its table's size and seed only with a restart.
            StageConfig::RateLimit(r) => format!("rate_limit {} {}", r.entries, r.hash_seed),
            StageConfig::Inspect(_) => "inspect".into(),
            other => format!("{other:?}"),
        })
        .collect();
    let mut control = cfg.control.clone();
    control.allow_rule_shrink = false;
    vec![
        ("ports", ports.join(";")),
        ("queues", format!("{:?}", cfg.queues)),
        ("steering", steering_section(cfg)),
        ("pipeline", stages.join(";")),
        ("executor", format!("{:?}", cfg.executor)),
        (
            "output",
            format!("{:?}", cfg.output.as_ref().map(|o| &o.port.value)),
        ),
        ("metrics", format!("{:?}", cfg.metrics)),
        ("control", format!("{control:?}")),
        (
            "ipfix",
            format!("{:?}", cfg.ipfix.as_ref().map(|s| &s.value)),
        ),
    ]
}

/// The steering section and its rule file's contents: steering rules (in a NIC or in the
/// ingest) are installed once at start and never swapped by a reload (a NIC's rte_flow rules
/// cannot be replaced in one step with the software set), so an edited rule file is reported
/// as needing a restart rather than silently left unread.
fn steering_section(cfg: &config::Config) -> String {
    use std::hash::{Hash, Hasher};
    let file = cfg.steering.as_ref().and_then(|s| s.rules.as_ref());
    let contents = file.map(|p| match std::fs::read(cfg.resolve(p)) {
        Ok(bytes) => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            bytes.hash(&mut h);
            format!("{:016x}", h.finish())
        }
        Err(e) => format!("unreadable: {}", e.kind()),
    });
    format!("{:?} {contents:?}", cfg.steering)
}

/// A rule or route file's error as a reload error (its file and line).
fn rule_error(r: RuleError) -> ReloadError {
    ReloadError {
        file: r.loc.file.clone(),
        line: r.loc.line as u32,
        reason: if r.field.is_empty() {
            r.message.clone()
        } else {
            format!("field `{}`: {}", r.field, r.message)
        },
    }
}

fn acl_config(cfg: &config::Config) -> Option<&config::AclStageConfig> {
    cfg.pipeline.iter().find_map(|s| match &s.value {
        StageConfig::Acl(a) => Some(a),
        _ => None,
    })
}
