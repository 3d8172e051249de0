//! The totals of a run, read from the per-queue counters (the same for both executors).

use std::sync::Arc;
use std::time::Duration;

use super::ExecutorChoice;
use crate::counters::QueueCounters;
use crate::stage::{self, Pipeline};
use crate::verdict::DropReason;

/// Totals over all queues, for the final summary.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct QueueSummary {
    pub queue: usize,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub passed: u64,
    pub mirrored: u64,
    pub to_host: u64,
    pub tx_frames: u64,
    pub drops: Vec<(String, u64)>,
}

/// A custom stage's own counters in the summary.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CustomStageSummary {
    /// The stage's index in the pipeline.
    pub position: usize,
    /// Its registered name (`syn_guard`).
    pub name: String,
    /// (counter, value), in the stage's order.
    pub counters: Vec<(String, u64)>,
    /// The stage's own summary section (`CustomStage::summary_section`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section: Option<serde_json::Value>,
}

/// How the GPU executor receives one port whose frames are in GPU memory: `in_place` (gathered
/// device to device into the ring slots) or `staged` (copied to host memory first), and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GpuIngest {
    pub port: String,
    pub path: String,
    pub reason: String,
}

/// Where the GPU executor's TX threads read the frames they send, and why (`path`:
/// `as_received`, `gpu_slot` or `copied_out`; see docs/ports.md, "Where the TX threads read a
/// frame").
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GpuTx {
    pub path: String,
    pub reason: String,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    pub executor: String,
    pub executor_reason: String,
    pub elapsed_s: f64,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub mpps: f64,
    pub gbps: f64,
    pub drops: Vec<(String, u64)>,
    pub parse_errors: Vec<(String, u64)>,
    pub queues: Vec<QueueSummary>,
    /// Rules with hits, (rule index, hits), most hit first, at most 20.
    pub top_rules: Vec<(u32, u64)>,
    pub acl_default: u64,
    /// Frames and bytes counted by each `count` stage (stage index, frames, bytes).
    pub counted: Vec<(usize, u64, u64)>,
    /// Each custom stage's own named counters, labelled by its name.
    pub custom_stages: Vec<CustomStageSummary>,
    pub errors: Vec<String>,
    /// Each receiving port's own counters (DPDK ethdev stats and xstats), by port.
    pub port_counters: Vec<(String, Vec<(String, u64)>)>,
    /// How frames moved from input to output: `copy` (into bursts and out again) or
    /// `zero_copy` (DPDK in and out: mbufs passed along, see executor::cpu::zero_copy).
    pub forwarding: String,
    /// Who steers each receiving DPDK port (`nic` or `software`) and why (set by the caller
    /// from [`super::OpenPorts::steering`]).
    pub steering: Vec<super::PortSteering>,
    /// How the GPU executor receives each port: frames in GPU memory (GPUDirect) `in_place`
    /// or `staged`; frames in host memory `by_reference` (pinned, gathered on the GPU) or
    /// `staged` (copied by the receive threads); and why. Empty for the CPU executor.
    pub gpu_ingest: Vec<GpuIngest>,
    /// Where the GPU executor's TX threads read the frames they send (absent: the CPU
    /// executor, or nothing transmitted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_tx: Option<GpuTx>,
    /// The stages' own parts under keys of their own ([`stage::report::StageReport`]), each a
    /// list in pipeline order (the O-RAN stage's frames, PRBs, slots and errors per eAxC).
    #[serde(flatten)]
    pub stage_reports: std::collections::BTreeMap<String, Vec<serde_json::Value>>,
    /// Their text summary lines: (key, line), in pipeline order.
    #[serde(skip)]
    pub stage_lines: Vec<(String, String)>,
    /// Receive threads the run started: one per (port, queue) for a port split by queue,
    /// one per port otherwise (`queues.rx_threads`; both executors).
    pub receive_threads: usize,
    /// What each destination took: output ports (by config name), the mirror port and the
    /// slow path (`to_host`), with the frames they failed to take. CPU executor.
    pub outputs: Vec<crate::port::out::OutTally>,
    /// What the sampling verifier (`verify: { sample: N }`) checked and found; absent when
    /// it is off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<crate::verify::sampler::VerifySummary>,
    /// Log lines dropped because writing them to stderr failed (`control::logs`; set by the
    /// caller when the run is over).
    pub log_write_errors: u64,
}

pub fn summarize(
    counters: &[Arc<QueueCounters>],
    pipeline: &Pipeline,
    elapsed: Duration,
    choice: &ExecutorChoice,
    errors: Vec<String>,
) -> Summary {
    let mut s = Summary {
        executor: choice.name.to_string(),
        executor_reason: choice.reason.clone(),
        elapsed_s: elapsed.as_secs_f64(),
        errors,
        forwarding: "copy".into(),
        ..Summary::default()
    };
    let mut drops = [0u64; DropReason::COUNT];
    let mut parse = vec![0u64; crate::counters::PARSE_STATUS_SLOTS];
    let mut rules = vec![0u64; pipeline.rule_count()];
    let mut counted: Vec<(usize, u64, u64)> = pipeline
        .stages
        .iter()
        .enumerate()
        .filter(|(_, st)| matches!(st, stage::Stage::Count))
        .map(|(i, _)| (i, 0, 0))
        .collect();
    for (q, c) in counters.iter().enumerate() {
        let qs = QueueSummary {
            queue: q,
            rx_frames: c.rx_frames.get(),
            rx_bytes: c.rx_bytes.get(),
            passed: c.passed.get(),
            mirrored: c.mirrored.get(),
            to_host: c.to_host.get(),
            tx_frames: c.tx_frames.get(),
            drops: DropReason::ALL
                .iter()
                .filter(|r| c.drop_count(**r) > 0)
                .map(|r| (r.name().to_string(), c.drop_count(*r)))
                .collect(),
        };
        s.rx_frames += qs.rx_frames;
        s.rx_bytes += qs.rx_bytes;
        s.tx_frames += qs.tx_frames;
        s.tx_bytes += c.tx_bytes.get();
        s.acl_default += c.acl_default.get();
        for r in DropReason::ALL {
            drops[r as usize] += c.drop_count(r);
        }
        for (i, p) in c.parse_status.iter().enumerate() {
            parse[i] += p.get();
        }
        // Counters sized for a larger rule set published before a reload that shrank it.
        if rules.len() < c.rule_hits.len() {
            rules.resize(c.rule_hits.len(), 0);
        }
        for (i, h) in c.rule_hits.iter().enumerate() {
            rules[i] += h.get();
        }
        for (si, f, b) in counted.iter_mut() {
            *f += c.stage_frames[*si].get();
            *b += c.stage_bytes[*si].get();
        }
        s.queues.push(qs);
    }
    s.drops = DropReason::ALL
        .iter()
        .map(|r| (r.name().to_string(), drops[*r as usize]))
        .collect();
    s.parse_errors = parse
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| (crate::meta::ParseStatus::describe(i as u16), *n))
        .collect();
    let mut top: Vec<(u32, u64)> = rules
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| (i as u32, *n))
        .collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    top.truncate(20);
    s.top_rules = top;
    s.counted = counted;
    s.custom_stages = stage_sections(pipeline);
    // A stage may close what is still open first (slots still waiting for data, counted
    // partial and sent on); what it reports failed fails the run.
    for r in pipeline.stage_reports() {
        let entries = s.stage_reports.entry(r.key.to_string()).or_default();
        entries.push(r.json);
        s.stage_lines
            .extend(r.lines.into_iter().map(|l| (r.key.to_string(), l)));
        s.errors.extend(r.errors);
    }
    if s.elapsed_s > 0.0 {
        s.mpps = s.rx_frames as f64 / s.elapsed_s / 1e6;
        s.gbps = s.rx_bytes as f64 * 8.0 / s.elapsed_s / 1e9;
    }
    s
}

/// The summary entries of the stages with counters of their own: registered stages, the
/// responder and the conntrack tables.
fn stage_sections(pipeline: &stage::Pipeline) -> Vec<CustomStageSummary> {
    pipeline
        .stages
        .iter()
        .enumerate()
        .filter_map(|(i, st)| match st {
            // A built-in through the registry door without counters (`ttl`), or a stage under a
            // config key of its own without counters, has no section.
            stage::Stage::Custom(c)
                if stage::descriptor::is_reserved(c.name()) && c.counter_names().is_empty() =>
            {
                None
            }
            stage::Stage::Custom(c) => {
                let counters = c.counters().into_iter();
                let counters = counters.map(|(n, v)| (n.to_string(), v)).collect();
                Some(CustomStageSummary {
                    position: i,
                    name: c.name().to_string(),
                    counters,
                    section: c.cpu().summary_section(),
                })
            }
            // The built-in responder's replies, labelled as a stage's own counters are.
            stage::Stage::Respond(r) => Some(CustomStageSummary {
                position: i,
                name: "respond".into(),
                counters: crate::rewrite::respond::COUNTER_NAMES
                    .iter()
                    .zip(r.op.counters())
                    .map(|(n, v)| (n.to_string(), v))
                    .collect(),
                section: None,
            }),
            // The rate-limit tables' counters, over every queue, and each rule's.
            stage::Stage::RateLimit(rl) => {
                let mut counters: Vec<(String, u64)> = rl
                    .counters()
                    .into_iter()
                    .map(|(n, v)| (n.to_string(), v))
                    .collect();
                for (rule, v) in rl.rule_counters() {
                    for (res, n) in crate::stage::rate_limit::RULE_RESULTS.iter().zip(v) {
                        counters.push((format!("{rule}.{res}"), n));
                    }
                }
                Some(CustomStageSummary {
                    position: i,
                    name: "rate_limit".into(),
                    counters,
                    section: None,
                })
            }
            // The flow tables' counters (conntrack, flow_stats), over every queue.
            st => st
                .flow_table_counters()
                .map(|(name, c)| CustomStageSummary {
                    position: i,
                    name: name.into(),
                    counters: c.into_iter().map(|(n, v)| (n.to_string(), v)).collect(),
                    section: None,
                }),
        })
        .collect()
}
