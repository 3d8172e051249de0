//! Loading rule files: each rule is loaded, or skipped with its reason (what it needs that
//! pktwarp lacks, or what is malformed about it), and the report counts both.

use super::{parse_rule, Blocker, Rule, RuleError, Variables};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// How to load.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    pub vars: Variables,
    /// A malformed rule is an error (true) or a skip with its reason (false).
    pub strict: bool,
    /// The rules run in a pipeline with connection tracking (a `conntrack` stage before
    /// inspection): rules with `flow` direction / state, `flowbits`, `threshold` and
    /// `detection_filter` load. Without it they are skipped ("needs the flow table").
    pub flow_table: bool,
}

/// A rule that can be evaluated.
#[derive(Debug, Clone)]
pub struct LoadedRule {
    pub file: String,
    pub line: usize,
    pub rule: Rule,
}

/// A rule that cannot: malformed (`error`), or parsed with what it needs (`blockers`).
#[derive(Debug, Clone)]
pub struct Skipped {
    pub file: String,
    pub line: usize,
    pub sid: Option<u32>,
    /// The reason counted in the report: the malformed keyword, or the first blocker.
    pub reason: String,
    pub blockers: Vec<Blocker>,
    pub error: Option<RuleError>,
    /// The parsed form (None when malformed), kept so it can be enabled later.
    pub rule: Option<Rule>,
}

/// Counts for one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileCounts {
    pub loaded: usize,
    pub skipped: usize,
}

/// What a load did: every rule read is in `loaded` or `skipped`.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    pub loaded: Vec<LoadedRule>,
    pub skipped: Vec<Skipped>,
    pub per_file: BTreeMap<String, FileCounts>,
}

impl LoadReport {
    pub fn total(&self) -> usize {
        self.loaded.len() + self.skipped.len()
    }

    /// Skipped rules by reason (malformed: `malformed <keyword>`).
    pub fn by_reason(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for s in &self.skipped {
            *m.entry(s.reason.clone()).or_insert(0) += 1;
        }
        m
    }

    fn count_skipped(&self, ok: impl Fn(&Blocker) -> bool) -> usize {
        self.skipped
            .iter()
            .filter(|s| s.error.is_none() && !s.blockers.is_empty() && s.blockers.iter().all(&ok))
            .count()
    }

    /// Skipped rules that need only the flow table (flow, flowbits, threshold,
    /// detection_filter): loadable once it lands.
    pub fn need_only_flow_table(&self) -> usize {
        self.count_skipped(|b| matches!(b, Blocker::FlowTable(_)))
    }

    /// Skipped rules that need only pcre.
    pub fn need_only_pcre(&self) -> usize {
        self.count_skipped(|b| matches!(b, Blocker::Pcre(_)))
    }

    /// Skipped rules that need only pcre and the flow table.
    pub fn need_only_pcre_and_flow_table(&self) -> usize {
        self.count_skipped(|b| matches!(b, Blocker::Pcre(_) | Blocker::FlowTable(_)))
    }

    /// Loaded share of all rules read, in percent.
    pub fn coverage_percent(&self) -> f64 {
        if self.total() == 0 {
            return 0.0;
        }
        100.0 * self.loaded.len() as f64 / self.total() as f64
    }

    fn merge(&mut self, o: LoadReport) {
        self.loaded.extend(o.loaded);
        self.skipped.extend(o.skipped);
        for (f, c) in o.per_file {
            let e = self.per_file.entry(f).or_default();
            e.loaded += c.loaded;
            e.skipped += c.skipped;
        }
    }
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "rules: {} read, {} loaded ({:.1}%), {} skipped",
            self.total(),
            self.loaded.len(),
            self.coverage_percent(),
            self.skipped.len()
        )?;
        writeln!(
            f,
            "loadable with the flow table: +{}; needing only pcre: {}; only pcre and the flow table: {}",
            self.need_only_flow_table(),
            self.need_only_pcre(),
            self.need_only_pcre_and_flow_table()
        )?;
        let mut reasons: Vec<_> = self.by_reason().into_iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        for (r, n) in reasons {
            writeln!(f, "  skipped {n:6}  {r}")?;
        }
        for (file, c) in &self.per_file {
            writeln!(f, "  {file}: {} loaded, {} skipped", c.loaded, c.skipped)?;
        }
        Ok(())
    }
}

/// The sid of a rule that did not parse, when one can be read from its text.
fn sid_of(text: &str) -> Option<u32> {
    let i = text.find("sid:")?;
    let rest = text[i + 4..].trim_start();
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Loads the rules in `text` (the contents of `file`, named in reasons and errors).
/// Lines starting with `#` are comments; a line ending in `\` continues on the next.
pub fn load_str(text: &str, file: &str, opts: &LoadOptions) -> Result<LoadReport, RuleError> {
    let mut rep = LoadReport::default();
    let counts = rep.per_file.entry(file.to_string()).or_default().clone();
    let mut counts = counts;
    let mut pending = String::new();
    let mut start_line = 0;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if pending.is_empty() {
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            start_line = i + 1;
        }
        if let Some(cont) = t.strip_suffix('\\') {
            pending.push_str(cont);
            continue;
        }
        pending.push_str(t);
        let rule_text = std::mem::take(&mut pending);
        one_rule(&rule_text, file, start_line, opts, &mut rep, &mut counts)?;
    }
    if !pending.is_empty() {
        let rule_text = std::mem::take(&mut pending);
        one_rule(&rule_text, file, start_line, opts, &mut rep, &mut counts)?;
    }
    rep.per_file.insert(file.to_string(), counts);
    Ok(rep)
}

fn one_rule(
    text: &str,
    file: &str,
    line: usize,
    opts: &LoadOptions,
    rep: &mut LoadReport,
    counts: &mut FileCounts,
) -> Result<(), RuleError> {
    match parse_rule(text, &opts.vars) {
        Ok(rule) => {
            let blockers = rule.blockers_with(opts.flow_table);
            if blockers.is_empty() {
                counts.loaded += 1;
                rep.loaded.push(LoadedRule {
                    file: file.to_string(),
                    line,
                    rule,
                });
            } else {
                counts.skipped += 1;
                rep.skipped.push(Skipped {
                    file: file.to_string(),
                    line,
                    sid: Some(rule.sid),
                    reason: blockers[0].to_string(),
                    blockers,
                    error: None,
                    rule: Some(rule),
                });
            }
        }
        Err((keyword, msg)) => {
            let e = RuleError {
                file: file.to_string(),
                line,
                sid: sid_of(text),
                keyword: keyword.clone(),
                msg,
            };
            if opts.strict {
                return Err(e);
            }
            counts.skipped += 1;
            rep.skipped.push(Skipped {
                file: file.to_string(),
                line,
                sid: e.sid,
                reason: format!("malformed {keyword}"),
                blockers: Vec::new(),
                error: Some(e),
                rule: None,
            });
        }
    }
    Ok(())
}

/// Loads one rule file. A file that cannot be read is an error naming it.
pub fn load_file(path: &Path, opts: &LoadOptions) -> Result<LoadReport, RuleError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| RuleError {
        file: name.clone(),
        line: 0,
        sid: None,
        keyword: "file".into(),
        msg: e.to_string(),
    })?;
    // Rule files are ASCII; a stray non-UTF-8 byte must not lose the whole file.
    let text = String::from_utf8_lossy(&bytes);
    let short = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or(name);
    load_str(&text, &short, opts)
}

/// Loads every `*.rules` file of `dir`, in name order.
pub fn load_dir(dir: &Path, opts: &LoadOptions) -> Result<LoadReport, RuleError> {
    let io = |e: std::io::Error| RuleError {
        file: dir.display().to_string(),
        line: 0,
        sid: None,
        keyword: "directory".into(),
        msg: e.to_string(),
    };
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rules"))
        .collect();
    files.sort();
    let mut rep = LoadReport::default();
    for f in files {
        rep.merge(load_file(&f, opts)?);
    }
    Ok(rep)
}
