//! A rule set ready to inspect frames: the rule files of a config loaded (each rule loaded or
//! skipped with its reason), compiled into the evaluator's [`Program`] and one prefilter per
//! buffer the rules' fast patterns name, with the catalog the alert log names rules by.
//!
//! Inspecting a frame: each buffer the frame has (the L4 payload, the HTTP buffers of a head
//! the segment carries) goes through its buffer's prefilter; the rules whose fast pattern
//! occurs, and the rules without one, are the candidates, each then fully checked
//! ([`eval::rule_matches`]). The decision follows Suricata's default action order: a matching
//! `pass` rule ends inspection (no alerts); otherwise every matching `drop`, `reject` and
//! `alert` rule alerts, and the frame is dropped when one of them is `drop` or `reject`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::alert::{Classifications, RuleCatalog};
use crate::eval::state::{StateConfig, Stateful};
use crate::eval::{self, program::Program, Frame};
use crate::matcher::{Image, MatchSet, PatternSet};
use crate::rules::{self, Action, Buffer, LoadOptions, LoadReport, RuleError, Variables};

/// What a rule set is built from (the stage's `rules`, `vars`, `strict`).
#[derive(Debug, Clone, Default)]
pub struct SetConfig {
    /// Rule files, folders (their `*.rules`, in name order) or file-name globs (`*`, `?` in
    /// the last component), already resolved against the config's folder.
    pub rules: Vec<PathBuf>,
    /// Variables over Suricata's defaults (`HOME_NET`, `EXTERNAL_NET`, `HTTP_PORTS`, ...).
    pub vars: BTreeMap<String, String>,
    /// A malformed rule refuses the whole set (true) or is skipped with its reason (false).
    pub strict: bool,
    /// A `conntrack` stage runs before inspection: rules with `flow:` direction or state,
    /// `flowbits`, `threshold` and `detection_filter` load ([`LoadOptions::flow_table`]);
    /// otherwise they are skipped ("needs the flow table").
    pub flow_table: bool,
    /// Load only the rules the GPU stage runs too ([`crate::gpu::rule_refusal`]: payload rules
    /// without state), so the set is the same on both executors; the others are skipped,
    /// counted by the reason `runs on the CPU only (...)`.
    pub gpu_rules_only: bool,
    /// Sizes of the flowbits / threshold tables (each queue's).
    pub state: StateConfig,
}

/// Why a rule set was not built: a rule file's line, or a config key (`rules[1]`,
/// `vars.HOME_NET`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetError {
    #[error("{0}")]
    Rule(RuleError),
    #[error("{key}: {msg}")]
    Config { key: String, msg: String },
}

impl SetError {
    fn config(key: impl Into<String>, msg: impl Into<String>) -> SetError {
        SetError::Config {
            key: key.into(),
            msg: msg.into(),
        }
    }
}

/// What a load did, for `pktwarp validate`, the log and the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetReport {
    /// The rule files read, in load order.
    pub files: Vec<String>,
    pub loaded: usize,
    pub skipped: usize,
    /// Skipped rules by reason (`pcre`, `needs the flow table (flow)`, `malformed content`, ...).
    pub skipped_by_reason: BTreeMap<String, usize>,
    /// Prefilter patterns over every buffer (duplicates counted once per buffer).
    pub patterns: usize,
    /// Loaded rules without a positive content: checked on every frame.
    pub unfiltered: usize,
}

impl std::fmt::Display for SetReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rules loaded, {} skipped, from {} file(s); {} prefilter patterns, {} rules \
             without one",
            self.loaded,
            self.skipped,
            self.files.len(),
            self.patterns,
            self.unfiltered
        )?;
        for (reason, n) in &self.skipped_by_reason {
            write!(f, "; skipped {n}: {reason}")?;
        }
        Ok(())
    }
}

/// One buffer's patterns while a set compiles, and each pattern's id by (bytes, nocase).
type BufferPatterns = (PatternSet, HashMap<(Vec<u8>, bool), usize>);

/// One buffer's prefilter: its image, and the rules each pattern stands for.
#[derive(Debug)]
struct BufferMatcher {
    buffer: Buffer,
    image: Image,
    rules_of: Vec<Vec<u32>>,
}

/// A compiled rule set, immutable once built (a reload builds another).
#[derive(Debug)]
pub struct RuleSet {
    program: Program,
    actions: Vec<Action>,
    matchers: Vec<BufferMatcher>,
    /// Rules without a prefilter pattern, in rule order.
    always: Vec<u32>,
    catalog: Arc<RuleCatalog>,
    report: SetReport,
    /// The flowbits / threshold state of the set, empty: each user clones its own.
    state: Stateful,
    /// Whether a rule has flowbits, `noalert`, a threshold or a detection_filter.
    stateful: Vec<bool>,
    /// Each rule's file and line, by rule index.
    origins: Vec<(String, usize)>,
}

/// Per-thread scratch for [`RuleSet::inspect`] (reused frame to frame; any set may use it).
#[derive(Debug, Default)]
pub struct Scratch {
    sets: Vec<MatchSet>,
    cands: Vec<u32>,
    /// The rules that matched the last frame, in rule order.
    pub matched: Vec<u32>,
}

/// What inspection decided for a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// No rule matched.
    Clean,
    /// A `pass` rule matched (its index): inspection stops, nothing alerts.
    Pass(u32),
    /// Rules matched and alert ([`Scratch::matched`]); `drop`: one of them is `drop` or
    /// `reject`.
    Alert { drop: bool },
}

impl RuleSet {
    /// Loads and compiles the rules of `cfg`; the catalog names rule classtypes from `classes`.
    pub fn load(cfg: &SetConfig, classes: &Classifications) -> Result<RuleSet, SetError> {
        let opts = LoadOptions {
            vars: variables(&cfg.vars)?,
            strict: cfg.strict,
            flow_table: cfg.flow_table,
        };
        if cfg.rules.is_empty() {
            return Err(SetError::config(
                "rules",
                "empty: name at least one rule file, folder or glob",
            ));
        }
        let mut files = Vec::new();
        for (i, entry) in cfg.rules.iter().enumerate() {
            files.extend(expand(entry).map_err(|m| SetError::config(format!("rules[{i}]"), m))?);
        }
        let mut rep = LoadReport::default();
        for f in &files {
            let name = f.display().to_string();
            let bytes = std::fs::read(f).map_err(|e| {
                SetError::Rule(RuleError {
                    file: name.clone(),
                    line: 0,
                    sid: None,
                    keyword: "file".into(),
                    msg: e.to_string(),
                })
            })?;
            let one = rules::load_str(&String::from_utf8_lossy(&bytes), &name, &opts)
                .map_err(SetError::Rule)?;
            rep.loaded.extend(one.loaded);
            rep.skipped.extend(one.skipped);
        }
        if cfg.gpu_rules_only {
            rep = Self::gpu_rules_of(rep, cfg.strict, classes)?;
        }
        let mut set = Self::compile(rep, cfg.strict, classes)?;
        set.state = set.state.with_config(cfg.state);
        set.report.files = files.iter().map(|f| f.display().to_string()).collect();
        Ok(set)
    }

    /// `rep` with the rules the GPU stage cannot take moved to its skipped ones, each with its
    /// reason.
    fn gpu_rules_of(
        mut rep: LoadReport,
        strict: bool,
        classes: &Classifications,
    ) -> Result<LoadReport, SetError> {
        let all = Self::compile(rep.clone(), strict, classes)?;
        let cpu_only: HashMap<(String, usize), &'static str> = (0..all.len() as u32)
            .filter_map(|i| {
                let why = crate::gpu::rule_refusal(&all, i)?;
                let (f, l) = all.origin(i)?;
                Some(((f.to_string(), l), why))
            })
            .collect();
        let (keep, moved): (Vec<_>, Vec<_>) = std::mem::take(&mut rep.loaded)
            .into_iter()
            .partition(|l| !cpu_only.contains_key(&(l.file.clone(), l.line)));
        rep.loaded = keep;
        for l in moved {
            let why = cpu_only[&(l.file.clone(), l.line)];
            rep.skipped.push(rules::Skipped {
                file: l.file,
                line: l.line,
                sid: Some(l.rule.sid),
                reason: format!("runs on the CPU only ({why})"),
                blockers: Vec::new(),
                error: None,
                rule: Some(l.rule),
            });
        }
        Ok(rep)
    }

    /// Compiles the loaded rules of `rep` (a rule the evaluator cannot take is an error when
    /// `strict`, else skipped with the reason `compile`).
    pub fn compile(
        rep: LoadReport,
        strict: bool,
        classes: &Classifications,
    ) -> Result<RuleSet, SetError> {
        let mut report = SetReport {
            skipped: rep.skipped.len(),
            skipped_by_reason: rep.by_reason(),
            ..SetReport::default()
        };
        let mut program = Program::new();
        let mut kept = Vec::new();
        let mut origins = Vec::new();
        for l in &rep.loaded {
            match program.add(&l.rule) {
                Ok(_) => {
                    kept.push(&l.rule);
                    origins.push((l.file.clone(), l.line));
                }
                Err(msg) if strict => {
                    return Err(SetError::Rule(RuleError {
                        file: l.file.clone(),
                        line: l.line,
                        sid: Some(l.rule.sid),
                        keyword: "rule".into(),
                        msg,
                    }))
                }
                Err(_) => {
                    report.skipped += 1;
                    *report
                        .skipped_by_reason
                        .entry("cannot compile".into())
                        .or_insert(0) += 1;
                }
            }
        }
        report.loaded = kept.len();
        let mut by_buffer: BTreeMap<Buffer, BufferPatterns> = BTreeMap::new();
        let mut rules_of: BTreeMap<Buffer, Vec<Vec<u32>>> = BTreeMap::new();
        let mut always = Vec::new();
        for (i, r) in kept.iter().enumerate() {
            let Some(p) = r.prefilter() else {
                always.push(i as u32);
                continue;
            };
            let (set, ids) = by_buffer.entry(p.buffer).or_default();
            let lists = rules_of.entry(p.buffer).or_default();
            let id = match ids.get(&(p.pattern.clone(), p.nocase)) {
                Some(&id) => id,
                None => match set.add(&p.pattern, p.nocase) {
                    Ok(id) => {
                        ids.insert((p.pattern.clone(), p.nocase), id as usize);
                        lists.push(Vec::new());
                        id as usize
                    }
                    // A pattern the prefilter cannot hold (over 255 bytes): the rule is
                    // checked on every frame instead, same result.
                    Err(_) => {
                        always.push(i as u32);
                        continue;
                    }
                },
            };
            lists[id].push(i as u32);
        }
        let mut matchers = Vec::new();
        for (buffer, (set, _)) in by_buffer {
            report.patterns += set.len();
            let image = Image::compile(&set)
                .map_err(|e| SetError::config("rules", format!("prefilter: {e}")))?;
            matchers.push(BufferMatcher {
                buffer,
                image,
                rules_of: rules_of.remove(&buffer).unwrap_or_default(),
            });
        }
        report.unfiltered = always.len();
        let state = Stateful::new(&kept, StateConfig::default());
        let stateful = (0..kept.len()).map(|i| state.has_state(i)).collect();
        Ok(RuleSet {
            state,
            stateful,
            origins,
            actions: kept.iter().map(|r| r.action).collect(),
            catalog: Arc::new(RuleCatalog::new(kept.iter().copied(), classes)),
            program,
            matchers,
            always,
            report,
        })
    }

    /// The file and line rule `i` was loaded from.
    pub fn origin(&self, i: u32) -> Option<(&str, usize)> {
        self.origins.get(i as usize).map(|(f, l)| (f.as_str(), *l))
    }

    /// The compiled rules (the evaluator's program).
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Rules without a prefilter pattern (checked on every frame), in rule order.
    pub fn unfiltered(&self) -> &[u32] {
        &self.always
    }

    /// Each prefilter: its buffer, its image and, by pattern id, the rules the pattern stands
    /// for.
    pub fn prefilters(&self) -> impl Iterator<Item = (Buffer, &Image, &[Vec<u32>])> + '_ {
        self.matchers
            .iter()
            .map(|m| (m.buffer, &m.image, m.rules_of.as_slice()))
    }

    pub fn report(&self) -> &SetReport {
        &self.report
    }

    /// The loaded rules as the alert log names them, by rule index.
    pub fn catalog(&self) -> &Arc<RuleCatalog> {
        &self.catalog
    }

    /// Rules loaded.
    pub fn len(&self) -> usize {
        self.actions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    /// Fresh flowbits / threshold state for this set (empty tables), for
    /// [`Stateful::apply`] on the rules [`RuleSet::inspect`] matched.
    pub fn new_state(&self) -> Stateful {
        self.state.clone()
    }

    /// Whether rule `i` needs [`Stateful::apply`] before it fires (flowbits, `noalert`,
    /// `threshold`, `detection_filter`); false for a set loaded without the flow table.
    pub fn is_stateful(&self, i: u32) -> bool {
        self.stateful.get(i as usize).copied().unwrap_or(false)
    }

    /// The action of rule `i`.
    pub fn action(&self, i: u32) -> Option<Action> {
        self.actions.get(i as usize).copied()
    }

    /// Prefilter, then each candidate's full check; the matching rules are left in
    /// `s.matched`.
    pub fn inspect(&self, f: &Frame, s: &mut Scratch) -> Decision {
        self.inspect_gated(f, s, |_| true)
    }

    /// [`RuleSet::inspect`], where a matching `pass` rule ends inspection only when
    /// `pass_holds` says so (its flowbits and threshold, [`Stateful`]); otherwise it is
    /// passed over as if it had not matched.
    pub fn inspect_gated(
        &self,
        f: &Frame,
        s: &mut Scratch,
        mut pass_holds: impl FnMut(u32) -> bool,
    ) -> Decision {
        s.cands.clear();
        s.matched.clear();
        if s.sets.len() < self.matchers.len() {
            s.sets.resize_with(self.matchers.len(), || MatchSet::new(0));
        }
        for (m, ms) in self.matchers.iter().zip(s.sets.iter_mut()) {
            let bytes = match m.buffer {
                Buffer::Payload => Some(f.payload),
                b => f.http.and_then(|h| h.buffer(b)),
            };
            let Some(bytes) = bytes else { continue };
            if ms.n_patterns() != m.image.n_patterns() {
                *ms = MatchSet::new(m.image.n_patterns());
            }
            m.image.match_set_into(bytes, ms);
            for id in ms.iter() {
                if let Some(rules) = m.rules_of.get(id as usize) {
                    s.cands.extend_from_slice(rules);
                }
            }
        }
        s.cands.extend_from_slice(&self.always);
        s.cands.sort_unstable();
        s.cands.dedup();
        let mut drop = false;
        for &c in &s.cands {
            if !eval::rule_matches(&self.program, c as usize, f) {
                continue;
            }
            match self.actions[c as usize] {
                Action::Pass => {
                    if !pass_holds(c) {
                        continue;
                    }
                    s.matched.clear();
                    return Decision::Pass(c);
                }
                Action::Drop | Action::Reject => drop = true,
                Action::Alert => {}
            }
            s.matched.push(c);
        }
        if s.matched.is_empty() {
            Decision::Clean
        } else {
            Decision::Alert { drop }
        }
    }
}

/// Suricata's default variables with the config's over them, each checked: a name ending in
/// `PORTS` is a port group, any other an address group.
pub fn variables(over: &BTreeMap<String, String>) -> Result<Variables, SetError> {
    let mut v = Variables::default();
    for (k, val) in over {
        let name = k.trim_start_matches('$');
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(SetError::config(
                format!("vars.{k}"),
                "a variable name is letters, digits and `_`",
            ));
        }
        v.0.insert(name.to_string(), val.clone());
    }
    // A variable that names others is checked after them, so a bad value is blamed on the
    // variable that has it.
    let mut keys: Vec<&String> = over.keys().collect();
    keys.sort_by_key(|k| over[*k].contains('$'));
    for k in keys {
        let name = k.trim_start_matches('$');
        let val = &v.0[name];
        let r = if name.ends_with("PORTS") {
            rules::parse_ports(val, &v).map(|_| ())
        } else {
            rules::parse_addrs(val, &v).map(|_| ())
        };
        r.map_err(|m| SetError::config(format!("vars.{k}"), m))?;
    }
    Ok(v)
}

/// The rule files one `rules` entry names: the file; a folder's `*.rules`; or the files a
/// glob in the last component matches, in name order. None found is an error.
pub fn expand(entry: &Path) -> Result<Vec<PathBuf>, String> {
    let name = entry
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let listed = |dir: &Path, keep: &dyn Fn(&str) -> bool| -> Result<Vec<PathBuf>, String> {
        let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut v: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .filter(|p| p.file_name().is_some_and(|n| keep(&n.to_string_lossy())))
            .collect();
        v.sort();
        Ok(v)
    };
    let found = if name.contains(['*', '?']) {
        let dir = entry.parent().unwrap_or(Path::new("."));
        listed(dir, &|n| glob_match(name.as_bytes(), n.as_bytes()))?
    } else if entry.is_dir() {
        listed(entry, &|n| n.ends_with(".rules"))?
    } else if entry.is_file() {
        vec![entry.to_path_buf()]
    } else {
        return Err(format!("{}: no such rule file or folder", entry.display()));
    };
    if found.is_empty() {
        return Err(format!("{}: matches no rule file", entry.display()));
    }
    Ok(found)
}

/// `*` (any run of bytes) and `?` (one byte) against a whole name.
fn glob_match(pat: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p] == name[n]) {
            p += 1;
            n += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = Some((p, n));
            p += 1;
        } else if let Some((sp, sn)) = star {
            p = sp + 1;
            n = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
