//! The fronthaul stage's counters as the run summary shows them and as Prometheus samples
//! (`pktwarp_fronthaul_*`, per eAxC with an `eaxc` label). One place turns the counters into
//! names, so the summary, the JSON summary and /metrics agree.

use serde::{Deserialize, Serialize};

use super::decode::Reject;
use super::stage::{EaxcCounters, FronthaulCounters};
use pipeline::stage::Pipeline;
use pipeline::stage::{ExportedFamily, ExportedKind, ExportedSamples, ExportedValue};

/// One eAxC of a fronthaul stage in the summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EaxcSummary {
    pub eaxc: u16,
    pub packets: u64,
    pub prbs: u64,
    pub early: u64,
    pub on_time: u64,
    pub late: u64,
    /// Packets without a receive time (timing not judged).
    pub untimed: u64,
    pub seq_gaps: u64,
    pub seq_duplicates: u64,
    pub seq_out_of_order: u64,
    pub duplicate_prbs: u64,
    /// Packets refused because their slot had closed, and their PRBs.
    pub slot_closed: u64,
    pub slot_closed_prbs: u64,
    pub slots_complete: u64,
    pub slots_partial: u64,
    /// Rejected frames of this eAxC, (reason, count), non-zero ones.
    pub errors: Vec<(String, u64)>,
}

/// One fronthaul stage in the run summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FronthaulSummary {
    /// The stage's index in the pipeline.
    pub position: usize,
    pub frames: u64,
    pub uplane: u64,
    pub cplane: u64,
    pub not_ecpri: u64,
    pub rejected: u64,
    pub prbs: u64,
    pub slots_complete: u64,
    pub slots_partial: u64,
    /// GPU executor: slots stored on the GPU that never reached the sink (see
    /// `FronthaulCounters::slots_lost`).
    pub slots_lost: u64,
    pub duplicate_prbs: u64,
    pub saturated_samples: u64,
    pub eaxc_unexpected: u64,
    pub sink_errors: u64,
    /// Completion latency of the complete slots (see `FronthaulCounters::slot_latency_count`):
    /// slots measured, p50 and p99 in ns (0 when none).
    pub slot_latency_count: u64,
    pub slot_latency_p50_ns: u64,
    pub slot_latency_p99_ns: u64,
    /// Rejected frames, (reason, count), non-zero ones.
    pub errors: Vec<(String, u64)>,
    pub per_eaxc: Vec<EaxcSummary>,
}

fn by_reason(errors: &[u64; Reject::COUNT]) -> Vec<(String, u64)> {
    Reject::ALL
        .iter()
        .filter(|r| errors[r.index()] > 0)
        .map(|r| (r.name().to_string(), errors[r.index()]))
        .collect()
}

impl FronthaulSummary {
    pub fn new(position: usize, c: &FronthaulCounters) -> Self {
        FronthaulSummary {
            position,
            frames: c.frames,
            uplane: c.uplane,
            cplane: c.cplane,
            not_ecpri: c.not_ecpri,
            rejected: c.errors_total(),
            prbs: c.prbs,
            slots_complete: c.slots_complete,
            slots_partial: c.slots_partial,
            slots_lost: c.slots_lost,
            duplicate_prbs: c.duplicate_prbs,
            saturated_samples: c.saturated_samples,
            eaxc_unexpected: c.eaxc_unexpected,
            sink_errors: c.sink_errors,
            slot_latency_count: c.slot_latency_count,
            slot_latency_p50_ns: c.slot_latency_p50_ns,
            slot_latency_p99_ns: c.slot_latency_p99_ns,
            errors: by_reason(&c.errors),
            per_eaxc: c.per_eaxc.iter().map(eaxc_summary).collect(),
        }
    }

    /// The summary's text lines: the stage, then one per eAxC.
    pub fn lines(&self) -> Vec<String> {
        let errs = |e: &[(String, u64)]| -> String {
            if e.is_empty() {
                "0 errors".into()
            } else {
                let v: Vec<String> = e.iter().map(|(r, n)| format!("{r}={n}")).collect();
                format!("errors {}", v.join(" "))
            }
        };
        let latency = if self.slot_latency_count > 0 {
            format!(
                " (completion latency p50 {:.1} us / p99 {:.1} us over {})",
                self.slot_latency_p50_ns as f64 / 1e3,
                self.slot_latency_p99_ns as f64 / 1e3,
                self.slot_latency_count
            )
        } else {
            String::new()
        };
        let mut out = vec![format!(
            "stage {}: {} frames ({} U-plane, {} C-plane, {} not eCPRI, {} rejected), {} PRBs, slots {} complete / {} partial / {} lost{latency}, {} duplicate PRBs, {} saturated samples, {} unexpected eAxC, {} sink errors, {}",
            self.position,
            self.frames,
            self.uplane,
            self.cplane,
            self.not_ecpri,
            self.rejected,
            self.prbs,
            self.slots_complete,
            self.slots_partial,
            self.slots_lost,
            self.duplicate_prbs,
            self.saturated_samples,
            self.eaxc_unexpected,
            self.sink_errors,
            errs(&self.errors)
        )];
        for e in &self.per_eaxc {
            out.push(format!(
                "eAxC {}: {} packets, {} PRBs, early {} / on time {} / late {} / untimed {}, seq gaps {} / duplicates {} / out of order {}, slots {} complete / {} partial, {} duplicate PRBs, {} packets after their slot closed ({} PRBs), {}",
                e.eaxc,
                e.packets,
                e.prbs,
                e.early,
                e.on_time,
                e.late,
                e.untimed,
                e.seq_gaps,
                e.seq_duplicates,
                e.seq_out_of_order,
                e.slots_complete,
                e.slots_partial,
                e.duplicate_prbs,
                e.slot_closed,
                e.slot_closed_prbs,
                errs(&e.errors)
            ));
        }
        out
    }
}

fn eaxc_summary(e: &EaxcCounters) -> EaxcSummary {
    EaxcSummary {
        eaxc: e.eaxc,
        packets: e.packets,
        prbs: e.prbs,
        early: e.early,
        on_time: e.on_time,
        late: e.late,
        untimed: e.untimed,
        seq_gaps: e.seq_gaps,
        seq_duplicates: e.seq_duplicates,
        seq_out_of_order: e.seq_out_of_order,
        duplicate_prbs: e.duplicate_prbs,
        slot_closed: e.slot_closed,
        slot_closed_prbs: e.slot_closed_prbs,
        slots_complete: e.slots_complete,
        slots_partial: e.slots_partial,
        errors: by_reason(&e.errors),
    }
}

/// Every fronthaul stage of the pipeline, its open slots closed first (call at the end of a
/// run: a slot still waiting for PRBs is counted partial and handed to the sink).
pub fn summaries(pipeline: &Pipeline) -> Vec<FronthaulSummary> {
    pipeline
        .stages
        .iter()
        .enumerate()
        .filter_map(|(i, st)| {
            let f = super::FronthaulStage::of(st)?;
            f.flush();
            Some(FronthaulSummary::new(i, &f.counters()))
        })
        .collect()
}

/// The summary key the fronthaul stages report under.
pub const SUMMARY_KEY: &str = "fronthaul";

/// The fronthaul stage `f` at `position` in the run summary, its open slots closed first (call
/// at the end of a run): its entry, its text lines, and the slots it decoded and lost on the way
/// to the disk, which fail the run.
pub fn stage_report(position: usize, f: &super::FronthaulStage) -> pipeline::stage::StageReport {
    f.flush();
    let s = FronthaulSummary::new(position, &f.counters());
    let mut errors = Vec::new();
    if s.slots_lost > 0 {
        errors.push(format!(
            "fronthaul stage {}: {} slots stored on the GPU never reached the sink (the \
             completion poll fell a whole ring behind)",
            s.position, s.slots_lost
        ));
    }
    if s.sink_errors > 0 {
        errors.push(format!(
            "fronthaul stage {}: its sink failed to deliver {} slots (the first error is logged \
             above; pktwarp_fronthaul_sink_errors_total)",
            s.position, s.sink_errors
        ));
    }
    pipeline::stage::StageReport {
        key: SUMMARY_KEY,
        position,
        json: serde_json::to_value(&s).unwrap_or(serde_json::Value::Null),
        lines: s.lines(),
        errors,
    }
}

/// The fronthaul stages of a run summary's JSON (`fronthaul: [...]`), as they were reported.
pub fn from_summary(
    reports: &std::collections::BTreeMap<String, Vec<serde_json::Value>>,
) -> anyhow::Result<Vec<FronthaulSummary>> {
    reports
        .get(SUMMARY_KEY)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|v| {
            serde_json::from_value(v.clone())
                .map_err(|e| anyhow::anyhow!("summary `{SUMMARY_KEY}` entry: {e}"))
        })
        .collect()
}

/// The families the fronthaul stages export (`Pipeline::exported_families`): the counters of
/// [`FAMILIES`], then the completion latency histogram, with their help and label names.
pub static EXPORTED: [ExportedFamily; 16] = [
    ExportedFamily {
        name: "pktwarp_fronthaul_frames_total",
        help: "Frames the fronthaul stage saw, by kind (uplane, cplane, not_ecpri, rejected).",
        kind: ExportedKind::Counter,
        labels: &["position", "kind"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_errors_total",
        help: "Frames the fronthaul stage rejected whole, by decode reason (all eAxCs).",
        kind: ExportedKind::Counter,
        labels: &["position", "reason"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_cell_slots_total",
        help: "Slots closed by the fronthaul stage (all eAxCs), by result (complete, partial; lost: stored on the GPU, never seen by the completion poll).",
        kind: ExportedKind::Counter,
        labels: &["position", "result"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_eaxc_unexpected_total",
        help: "U-plane packets of an eAxC outside the slot grid.",
        kind: ExportedKind::Counter,
        labels: &["position"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_saturated_samples_total",
        help: "Decompressed samples that did not fit 16 bits in the grid.",
        kind: ExportedKind::Counter,
        labels: &["position"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_packets_total",
        help: "U-plane packets accepted, per eAxC.",
        kind: ExportedKind::Counter,
        labels: &["position", "eaxc"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_prbs_total",
        help: "PRBs decoded into the slot grid, per eAxC.",
        kind: ExportedKind::Counter,
        labels: &["position", "eaxc"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_arrivals_total",
        help: "U-plane packets per eAxC by arrival against the Ta4 window (early, on_time, late, untimed).",
        kind: ExportedKind::Counter,
        labels: &["position", "eaxc", "window"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_seq_errors_total",
        help: "Sequence id errors per eAxC, by kind (gap: packets missing, duplicate, out_of_order; out_of_order is absent on the GPU executor, whose per-frame stage has no arrival order to judge it by).",
        kind: ExportedKind::Counter,
        labels: &["position", "eaxc", "kind"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_duplicate_prbs_total",
        help: "PRBs that arrived twice for one slot, per eAxC.",
        kind: ExportedKind::Counter,
        labels: &["position", "eaxc"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_slots_total",
        help: "Slots closed per eAxC, by result (complete: every PRB of the eAxC arrived, partial).",
        kind: ExportedKind::Counter,
        labels: &["position", "eaxc", "result"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_eaxc_errors_total",
        help: "Rejected frames whose eAxC is in the grid, per eAxC and decode reason.",
        kind: ExportedKind::Counter,
        labels: &["position", "eaxc", "reason"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_dropped_packets_total",
        help: "U-plane packets accepted but not stored, per eAxC, by reason (slot_closed: their slot had been handed to the sink, or its ring entry held a later slot).",
        kind: ExportedKind::Counter,
        labels: &["position", "eaxc", "reason"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_dropped_prbs_total",
        help: "PRBs of the packets in pktwarp_fronthaul_dropped_packets_total, per eAxC, by reason.",
        kind: ExportedKind::Counter,
        labels: &["position", "eaxc", "reason"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_sink_errors_total",
        help: "Slots the stage's sink failed to deliver (a write that failed, a writer that hung past its wait), per stage.",
        kind: ExportedKind::Counter,
        labels: &["position"],
    },
    ExportedFamily {
        name: "pktwarp_fronthaul_slot_latency_seconds",
        help: "Completion latency of the fronthaul stage's complete slots: from the burst holding a slot's last packet (CPU executor: its worker starting that packet; GPU executor: the host handing that burst to the GPU) to the slot handed to the sink.",
        kind: ExportedKind::Histogram,
        labels: &["position"],
    },
];

/// The samples of every fronthaul stage of `pipeline`, family by family in [`EXPORTED`] order:
/// the counters (a family without samples left out), then each stage's latency histogram.
pub fn exported_samples(pipeline: &Pipeline) -> Vec<ExportedSamples> {
    let family = |name: &str| EXPORTED.iter().find(|e| e.name == name);
    let mut out: Vec<ExportedSamples> = metric_families(pipeline)
        .into_iter()
        .filter_map(|(name, samples)| {
            Some(ExportedSamples {
                family: family(name)?,
                samples: samples
                    .into_iter()
                    .map(|(l, v)| (l, ExportedValue::Counter(v)))
                    .collect(),
            })
        })
        .collect();
    let latency = latency_histograms(pipeline);
    if let (Some(f), false) = (family(LATENCY_FAMILY), latency.is_empty()) {
        let samples = latency.into_iter().map(|(l, cumulative, count, sum_ns)| {
            let v = ExportedValue::Histogram {
                bounds_ns: &super::stage::SLOT_LATENCY_BUCKETS_NS,
                cumulative,
                count,
                sum_ns,
            };
            (l, v)
        });
        out.push(ExportedSamples {
            family: f,
            samples: samples.collect(),
        });
    }
    out
}

/// The completion latency histogram's family.
pub const LATENCY_FAMILY: &str = "pktwarp_fronthaul_slot_latency_seconds";

pub use pipeline::stage::Labels;

/// The counter families the fronthaul stages export, in exposition order (help, type and label
/// names are in [`EXPORTED`]).
pub const FAMILIES: [&str; 15] = [
    "pktwarp_fronthaul_frames_total",
    "pktwarp_fronthaul_errors_total",
    "pktwarp_fronthaul_cell_slots_total",
    "pktwarp_fronthaul_eaxc_unexpected_total",
    "pktwarp_fronthaul_saturated_samples_total",
    "pktwarp_fronthaul_packets_total",
    "pktwarp_fronthaul_prbs_total",
    "pktwarp_fronthaul_arrivals_total",
    "pktwarp_fronthaul_seq_errors_total",
    "pktwarp_fronthaul_duplicate_prbs_total",
    "pktwarp_fronthaul_slots_total",
    "pktwarp_fronthaul_eaxc_errors_total",
    "pktwarp_fronthaul_dropped_packets_total",
    "pktwarp_fronthaul_dropped_prbs_total",
    "pktwarp_fronthaul_sink_errors_total",
];

/// The samples of every fronthaul stage, grouped by family in [`FAMILIES`] order (a family
/// without samples is left out). Reads the counters only; open slots stay open.
pub fn metric_families(pipeline: &Pipeline) -> Vec<(&'static str, Vec<(Labels, u64)>)> {
    let mut fams: Vec<(&'static str, Vec<(Labels, u64)>)> =
        FAMILIES.iter().map(|f| (*f, Vec::new())).collect();
    for (i, st) in pipeline.stages.iter().enumerate() {
        if let Some(f) = super::FronthaulStage::of(st) {
            stage_samples(i, &f.counters(), &mut fams);
        }
    }
    fams.retain(|(_, s)| !s.is_empty());
    fams
}

/// The completion latency histogram of each fronthaul stage (`pktwarp_fronthaul_slot_latency_seconds`):
/// (labels, cumulative count per bound of [`super::stage::SLOT_LATENCY_BUCKETS_NS`], count, sum
/// in ns). Stages that measured nothing are included (count 0).
pub fn latency_histograms(pipeline: &Pipeline) -> Vec<(Labels, Vec<u64>, u64, u64)> {
    let mut out = Vec::new();
    for (i, st) in pipeline.stages.iter().enumerate() {
        if let Some(f) = super::FronthaulStage::of(st) {
            out.push(latency_histogram(i, &f.counters()));
        }
    }
    out
}

fn latency_histogram(pos: usize, c: &FronthaulCounters) -> (Labels, Vec<u64>, u64, u64) {
    let n = super::stage::SLOT_LATENCY_BUCKETS_NS.len();
    let mut cum = 0u64;
    let mut buckets = Vec::with_capacity(n);
    for i in 0..n {
        cum += c.slot_latency_buckets.get(i).copied().unwrap_or(0);
        buckets.push(cum);
    }
    // The count is the buckets' sum (with the one above the last bound), so the family is
    // self-consistent.
    cum += c.slot_latency_buckets.get(n).copied().unwrap_or(0);
    (
        vec![("position", pos.to_string())],
        buckets,
        cum,
        c.slot_latency_sum_ns,
    )
}

fn stage_samples(
    pos: usize,
    c: &FronthaulCounters,
    fams: &mut [(&'static str, Vec<(Labels, u64)>)],
) {
    let p = pos.to_string();
    let mut add = |fam: usize, mut labels: Labels, v: u64| {
        labels.insert(0, ("position", p.clone()));
        fams[fam].1.push((labels, v));
    };
    for (kind, v) in [
        ("uplane", c.uplane),
        ("cplane", c.cplane),
        ("not_ecpri", c.not_ecpri),
        ("rejected", c.errors_total()),
    ] {
        add(0, vec![("kind", kind.into())], v);
    }
    for r in Reject::ALL.iter().filter(|r| **r != Reject::NotEcpri) {
        add(1, vec![("reason", r.name().into())], c.errors[r.index()]);
    }
    add(2, vec![("result", "complete".into())], c.slots_complete);
    add(2, vec![("result", "partial".into())], c.slots_partial);
    add(2, vec![("result", "lost".into())], c.slots_lost);
    add(3, vec![], c.eaxc_unexpected);
    add(4, vec![], c.saturated_samples);
    add(14, vec![], c.sink_errors);
    for e in &c.per_eaxc {
        let id = || ("eaxc", e.eaxc.to_string());
        add(5, vec![id()], e.packets);
        add(6, vec![id()], e.prbs);
        for (w, v) in [
            ("early", e.early),
            ("on_time", e.on_time),
            ("late", e.late),
            ("untimed", e.untimed),
        ] {
            add(7, vec![id(), ("window", w.into())], v);
        }
        for (k, v) in [
            ("gap", e.seq_gaps),
            ("duplicate", e.seq_duplicates),
            ("out_of_order", e.seq_out_of_order),
        ] {
            add(8, vec![id(), ("kind", k.into())], v);
        }
        add(9, vec![id()], e.duplicate_prbs);
        add(
            10,
            vec![id(), ("result", "complete".into())],
            e.slots_complete,
        );
        add(
            10,
            vec![id(), ("result", "partial".into())],
            e.slots_partial,
        );
        // One reason so far: the packet's slot had closed (see `EaxcCounters::slot_closed`).
        add(
            12,
            vec![id(), ("reason", "slot_closed".into())],
            e.slot_closed,
        );
        add(
            13,
            vec![id(), ("reason", "slot_closed".into())],
            e.slot_closed_prbs,
        );
        // Non-zero reasons only: 21 reasons for each of up to 64 eAxCs would be 1344 series.
        for r in Reject::ALL.iter().filter(|r| e.errors[r.index()] > 0) {
            add(
                11,
                vec![id(), ("reason", r.name().into())],
                e.errors[r.index()],
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_and_lines_name_every_counter() {
        let mut c = FronthaulCounters {
            frames: 10,
            uplane: 7,
            not_ecpri: 1,
            prbs: 28,
            slots_complete: 1,
            slots_lost: 4,
            sink_errors: 5,
            ..Default::default()
        };
        c.errors[Reject::PrbOutOfCarrier.index()] = 2;
        let mut e = EaxcCounters {
            eaxc: 513,
            packets: 7,
            prbs: 28,
            on_time: 6,
            late: 1,
            seq_gaps: 3,
            slot_closed: 2,
            slot_closed_prbs: 8,
            ..Default::default()
        };
        e.errors[Reject::PrbOutOfCarrier.index()] = 1;
        c.per_eaxc.push(e);
        let mut fams: Vec<(&'static str, Vec<(Labels, u64)>)> =
            FAMILIES.iter().map(|f| (*f, Vec::new())).collect();
        stage_samples(1, &c, &mut fams);
        let find = |fam: &str, want: &[(&str, &str)]| -> u64 {
            let (_, s) = fams.iter().find(|f| f.0 == fam).unwrap();
            let hits: Vec<u64> = s
                .iter()
                .filter(|(l, _)| {
                    want.iter()
                        .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
                })
                .map(|(_, v)| *v)
                .collect();
            assert_eq!(hits.len(), 1, "{fam} {want:?}");
            hits[0]
        };
        assert_eq!(
            find("pktwarp_fronthaul_frames_total", &[("kind", "rejected")]),
            2
        );
        assert_eq!(
            find(
                "pktwarp_fronthaul_errors_total",
                &[("position", "1"), ("reason", "prb_out_of_carrier")]
            ),
            2
        );
        let late = [("eaxc", "513"), ("window", "late")];
        assert_eq!(find("pktwarp_fronthaul_arrivals_total", &late), 1);
        let gap = [("eaxc", "513"), ("kind", "gap")];
        assert_eq!(find("pktwarp_fronthaul_seq_errors_total", &gap), 3);
        let closed = [("eaxc", "513"), ("reason", "slot_closed")];
        assert_eq!(find("pktwarp_fronthaul_dropped_packets_total", &closed), 2);
        assert_eq!(find("pktwarp_fronthaul_dropped_prbs_total", &closed), 8);
        let r = [("eaxc", "513"), ("reason", "prb_out_of_carrier")];
        assert_eq!(find("pktwarp_fronthaul_eaxc_errors_total", &r), 1);
        assert_eq!(find("pktwarp_fronthaul_sink_errors_total", &[]), 5);
        assert_eq!(
            find("pktwarp_fronthaul_cell_slots_total", &[("result", "lost")]),
            4
        );
        // Every family is declared as a counter with these label names.
        for (fam, samples) in &fams {
            let e = EXPORTED
                .iter()
                .find(|f| f.name == *fam)
                .unwrap_or_else(|| panic!("{fam} not in EXPORTED"));
            let (ty, labels) = (e.kind, e.labels);
            assert_eq!(ty, ExportedKind::Counter, "{fam}");
            let name = fam;
            for (l, _) in samples {
                let names: Vec<&str> = l.iter().map(|(k, _)| *k).collect();
                assert_eq!(&names[..], labels, "{name}");
            }
        }
        let s = FronthaulSummary::new(1, &c);
        let lines = s.lines();
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].contains("errors prb_out_of_carrier=2"),
            "{}",
            lines[0]
        );
        assert!(lines[1].starts_with("eAxC 513: 7 packets, 28 PRBs, early 0 / on time 6 / late 1"));
        assert_eq!(s.errors, vec![("prb_out_of_carrier".to_string(), 2)]);
        assert!(!lines[0].contains("latency"), "none measured: {}", lines[0]);
        (c.slots_lost, c.sink_errors) = (0, 0);
        c.slot_latency_count = 3;
        c.slot_latency_p50_ns = 12_500;
        c.slot_latency_p99_ns = 40_000;
        let s = FronthaulSummary::new(1, &c);
        assert_eq!(
            (
                s.slot_latency_count,
                s.slot_latency_p50_ns,
                s.slot_latency_p99_ns
            ),
            (3, 12_500, 40_000)
        );
        let l = &s.lines()[0];
        assert!(
            l.contains("slots 1 complete / 0 partial / 0 lost (completion latency p50 12.5 us / p99 40.0 us over 3)"),
            "{l}"
        );
        // Every sequence kind has its sample, out of order included (both executors judge it).
        c.per_eaxc[0].seq_out_of_order = 2;
        let l = &FronthaulSummary::new(1, &c).lines()[1];
        assert!(l.contains("out of order 2, slots"), "{l}");
        c.sink_errors = 5;
        let l = &FronthaulSummary::new(1, &c).lines()[0];
        assert!(l.contains(", 5 sink errors,"), "{l}");
        let mut fams: Vec<(&'static str, Vec<(Labels, u64)>)> =
            FAMILIES.iter().map(|f| (*f, Vec::new())).collect();
        stage_samples(1, &c, &mut fams);
        let seq = &fams
            .iter()
            .find(|f| f.0 == "pktwarp_fronthaul_seq_errors_total")
            .unwrap()
            .1;
        let kinds: Vec<&str> = seq.iter().map(|(l, _)| l[2].1.as_str()).collect();
        assert_eq!(kinds, ["gap", "duplicate", "out_of_order"]);
        assert_eq!(seq[2].1, 2);
    }

    #[test]
    fn the_latency_histogram_is_cumulative_in_its_bounds() {
        let cfg = crate::FronthaulConfig {
            eaxcs: vec![1],
            carrier_prbs: 1,
            ..Default::default()
        };
        let stage = crate::FronthaulStage::from_config(&cfg).unwrap();
        // Three GPU slots closed complete, handed over 0 us, ~3 ms and ~200 ms ago.
        let l = crate::gpu::Layout::new(&cfg).unwrap();
        let mut g = crate::gpu::slot_of_entry(&l, 1, &[], &[]);
        g.complete = true;
        let now = std::time::Instant::now();
        for ago_us in [0u64, 3_000, 200_000] {
            let at = now.checked_sub(std::time::Duration::from_micros(ago_us));
            stage.close_gpu_slot(&g, at);
        }
        let (labels, buckets, count, sum) = latency_histogram(2, &stage.counters());
        assert_eq!(labels, vec![("position", "2".to_string())]);
        assert_eq!(count, 3);
        assert_eq!(
            buckets.len(),
            super::super::stage::SLOT_LATENCY_BUCKETS_NS.len()
        );
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
        // <= 2 ms: the first; <= 5 ms: two; <= 100 ms: still two (the third is above).
        assert_eq!((buckets[10], buckets[11], buckets[15]), (1, 2, 2));
        assert!(sum >= 203_000_000, "{sum}");
    }

    /// A registered stage beside a fronthaul stage that declares one of its families.
    struct Clash;
    impl pipeline::stage::CustomStage for Clash {
        fn process(
            &self,
            _: &[u8],
            _: &pipeline::meta::PacketMeta,
            _: &mut pipeline::verdict::Verdict,
        ) {
        }
        fn metric_families(&self) -> Vec<pipeline::stage::StageMetricFamily> {
            vec![pipeline::stage::StageMetricFamily {
                name: "fronthaul_frames_total".into(),
                help: "taken".into(),
                kind: pipeline::stage::MetricKind::Counter,
                labels: Vec::new(),
            }]
        }
    }

    #[test]
    fn the_exported_families_are_declared_once_and_refused_to_a_registered_stage() {
        let cfg = crate::FronthaulConfig {
            eaxcs: vec![1],
            carrier_prbs: 1,
            ..Default::default()
        };
        let fh = || {
            crate::FronthaulStage::from_config(&cfg)
                .unwrap()
                .into_stage()
        };
        let p = Pipeline::new(vec![fh()]);
        assert_eq!(p.exported_families(), EXPORTED.iter().collect::<Vec<_>>());
        assert!(Pipeline::new(vec![pipeline::stage::Stage::Count])
            .exported_families()
            .is_empty());
        // Every counter family of FAMILIES is declared, the histogram too.
        for f in FAMILIES.iter().chain([&LATENCY_FAMILY]) {
            assert_eq!(EXPORTED.iter().filter(|e| e.name == *f).count(), 1, "{f}");
        }
        let fams = p.exported_samples();
        let last = fams
            .last()
            .expect("the latency histogram, even with nothing measured");
        assert_eq!(last.family.name, LATENCY_FAMILY);
        assert!(matches!(
            last.samples[0].1,
            ExportedValue::Histogram { count: 0, .. }
        ));
        let built = pipeline::stage::BuiltStage {
            cpu: std::sync::Arc::new(Clash),
            gpu: None,
        };
        let clash = pipeline::stage::Stage::Custom(Box::new(
            pipeline::internal::stage::CustomSlot::new("clash", built, false).unwrap(),
        ));
        let e = pipeline::internal::control::metrics::check_stage_families(&Pipeline::new(vec![
            fh(),
            clash,
        ]))
        .unwrap_err();
        assert!(
            e.to_string().contains("pktwarp_fronthaul_frames_total"),
            "{e}"
        );
    }
}
