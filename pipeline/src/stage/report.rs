//! A stage's own part of the run summary beyond its named counters: a top-level key of the JSON
//! summary with one entry per stage of its kind, lines of the text summary, and problems that
//! fail the run. The daemon gathers them from the pipeline ([`Pipeline::stage_reports`])
//! without knowing the stages.

use crate::stage::run::{Pipeline, Stage};

/// One stage's part of the run summary.
#[derive(Clone, Debug, PartialEq)]
pub struct StageReport {
    /// The summary's key: the JSON summary holds `key: [entry, ...]`, one entry per stage that
    /// reported under it, in pipeline order; the text summary prints each line after it.
    pub key: &'static str,
    /// The stage's position in the pipeline.
    pub position: usize,
    /// The stage's JSON entry.
    pub json: serde_json::Value,
    /// Lines of the text summary.
    pub lines: Vec<String>,
    /// What went wrong in the run (each fails it: exit status 1).
    pub errors: Vec<String>,
}

impl Pipeline {
    /// Every stage's report, in pipeline order. Called once at the end of a run: a stage may
    /// close what is still open first (the fronthaul stage's open slots, counted partial).
    pub fn stage_reports(&self) -> Vec<StageReport> {
        let mut out = Vec::new();
        for (k, s) in self.stages.iter().enumerate() {
            match s {
                Stage::Custom(c) => out.extend(c.cpu().summary_report(k)),
                Stage::Fronthaul(f) => out.push(crate::fronthaul::report::stage_report(k, f)),
                _ => {}
            }
        }
        out
    }
}

/// A metric family a kind of stage exports under a full name of its own (the fronthaul stage's
/// `pktwarp_fronthaul_*`), with labels of its choosing, beside the daemon's families. The
/// daemon exposes the families of the stages in its pipeline without knowing them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportedFamily {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: ExportedKind,
    pub labels: &'static [&'static str],
}

/// The type of an [`ExportedFamily`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportedKind {
    Counter,
    /// A histogram in seconds ([`ExportedValue::Histogram`]).
    Histogram,
}

/// One sample of an [`ExportedFamily`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExportedValue {
    Counter(u64),
    /// Bucket bounds in ns, the cumulative count at each bound, the count and the sum (ns).
    Histogram {
        bounds_ns: &'static [u64],
        cumulative: Vec<u64>,
        count: u64,
        sum_ns: u64,
    },
}

/// Labels of one sample: (name, value), in the family's label order.
pub type Labels = Vec<(&'static str, String)>;

/// The samples of one exported family now (one per stage, or per stage and label values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportedSamples {
    pub family: &'static ExportedFamily,
    pub samples: Vec<(Labels, ExportedValue)>,
}

impl Pipeline {
    /// The exported families of the kinds of stages in the pipeline (declared once per kind).
    pub fn exported_families(&self) -> &'static [ExportedFamily] {
        if self.stages.iter().any(|s| matches!(s, Stage::Fronthaul(_))) {
            &crate::fronthaul::report::EXPORTED
        } else {
            &[]
        }
    }

    /// The samples of every exported family, in exposition order; a family without samples is
    /// left out. Reads counters only (called at every scrape).
    pub fn exported_samples(&self) -> Vec<ExportedSamples> {
        if self.exported_families().is_empty() {
            return Vec::new();
        }
        crate::fronthaul::report::exported_samples(self)
    }
}
