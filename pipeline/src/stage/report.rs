//! A stage's own part of the run summary beyond its named counters: a top-level key of the JSON
//! summary with one entry per stage of its kind, lines of the text summary, and problems that
//! fail the run. The daemon gathers them from the pipeline ([`Pipeline::stage_reports`])
//! without knowing the stages.

use std::sync::Arc;

use crate::stage::run::{CustomStage, Pipeline, Stage};

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
    /// close what is still open first (a stage that assembles frames into larger units closes those still open).
    pub fn stage_reports(&self) -> Vec<StageReport> {
        let mut out = Vec::new();
        for (k, s) in self.stages.iter().enumerate() {
            if let Stage::Custom(c) = s {
                out.extend(c.cpu().summary_report(k));
            }
        }
        out
    }
}

/// A metric family a kind of stage exports under a full name of its own (`pktwarp_KIND_*`,
/// [`crate::stage::CustomStage::exported_families`]), with labels of its choosing, beside the daemon's families. The
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
    /// The first stage of each kind that exports families, with its families (a kind's
    /// families are one `'static` list, declared once however many stages of it run).
    fn exporting_kinds(&self) -> Vec<(Arc<dyn CustomStage>, &'static [ExportedFamily])> {
        let mut out: Vec<(Arc<dyn CustomStage>, &'static [ExportedFamily])> = Vec::new();
        for s in &self.stages {
            let Stage::Custom(c) = s else { continue };
            let cpu = c.cpu_arc();
            let fams = cpu.exported_families();
            if !fams.is_empty() && !out.iter().any(|(_, f)| f[0].name == fams[0].name) {
                out.push((cpu, fams));
            }
        }
        out
    }

    /// The exported families of the kinds of stages in the pipeline (declared once per kind).
    pub fn exported_families(&self) -> Vec<&'static ExportedFamily> {
        self.exporting_kinds()
            .into_iter()
            .flat_map(|(_, f)| f.iter())
            .collect()
    }

    /// The samples of every exported family, in exposition order; a family without samples is
    /// left out. Reads counters only (called at every scrape).
    pub fn exported_samples(&self) -> Vec<ExportedSamples> {
        self.exporting_kinds()
            .into_iter()
            .flat_map(|(s, _)| s.exported_samples(self))
            .collect()
    }
}
