//! The Prometheus exposition: a custom [`Collector`] that reads the data path's single-writer
//! counters at scrape time. Nothing on the data path knows about Prometheus: a scrape only loads
//! relaxed atomics the workers keep anyway, so it never pauses or slows a worker.
//!
//! Families (every one prefixed `pktwarp_`; counters end in `_total`, units are base units):
//! see [`FAMILIES`] and `deploy/README.md`.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, LabelPair, MetricFamily, MetricType};
use prometheus::{Encoder, Registry, TextEncoder};

use crate::counters::{QueueCounters, LATENCY_BUCKETS_NS, PARSE_STATUS_SLOTS};
use crate::stage::Pipeline;
use crate::verdict::DropReason;

use super::ControlState;

/// (name, help, type, labels) of every family the collector can emit.
pub const FAMILIES: &[(&str, &str, MetricType, &[&str])] = &[
    ("pktwarp_build_info", "Build of the running pktwarp (always 1).", MetricType::GAUGE, &["version", "profile"]),
    ("pktwarp_executor_info", "Executor and mode running the pipeline (always 1).", MetricType::GAUGE, &["executor", "mode", "reason"]),
    ("pktwarp_start_time_seconds", "Unix time the daemon started.", MetricType::GAUGE, &[]),
    ("pktwarp_log_write_errors_total", "Log lines dropped because writing them to stderr failed (a closed log pipe, a full disk).", MetricType::COUNTER, &[]),
    ("pktwarp_rx_frames_total", "Frames received into a queue.", MetricType::COUNTER, &["port", "queue"]),
    ("pktwarp_rx_bytes_total", "Bytes of frames received into a queue.", MetricType::COUNTER, &["port", "queue"]),
    ("pktwarp_tx_frames_total", "Frames transmitted from a queue to the output port.", MetricType::COUNTER, &["port", "queue"]),
    ("pktwarp_tx_bytes_total", "Bytes transmitted from a queue to the output port.", MetricType::COUNTER, &["port", "queue"]),
    ("pktwarp_drops_total", "Frames dropped, by reason.", MetricType::COUNTER, &["port", "queue", "reason"]),
    ("pktwarp_verdicts_total", "Frames per non-drop verdict (pass, mirror, to_host).", MetricType::COUNTER, &["port", "queue", "verdict"]),
    ("pktwarp_ring_occupancy_bursts", "Bursts waiting in a queue's ring (last seen by the ingest).", MetricType::GAUGE, &["port", "queue"]),
    ("pktwarp_stage_frames_total", "Frames each pipeline stage processed.", MetricType::COUNTER, &["queue", "stage", "position"]),
    ("pktwarp_stage_counter_total", "A custom stage's own counters, by name (all queues; the same names on the CPU and GPU executors).", MetricType::COUNTER, &["stage", "position", "counter"]),
    ("pktwarp_rate_limit_frames_total", "Frames a rate_limit stage's rule took (result=matched), dropped over its rate (limited) and found no bucket for (table_full), by rule name (all queues).", MetricType::COUNTER, &["position", "rule", "result"]),
    ("pktwarp_parse_errors_total", "Frames the parse stage rejected, by parse status.", MetricType::COUNTER, &["queue", "status"]),
    ("pktwarp_acl_rule_hits_total", "Frames matched per ACL rule (rule index in the file; indexes at or past metrics.rule_series_cap are summed under rule=\"other\").", MetricType::COUNTER, &["rule"]),
    ("pktwarp_acl_no_match_total", "Frames no ACL rule matched (the stage default applied).", MetricType::COUNTER, &["queue"]),
    ("pktwarp_burst_latency_seconds", "Per burst: ingest hand-off to the worker finishing the pipeline.", MetricType::HISTOGRAM, &["queue"]),
    ("pktwarp_ruleset_generation", "ACL rule-set generation in force (0 at start, +1 per successful reload).", MetricType::GAUGE, &[]),
    ("pktwarp_ruleset_rules", "Rules in the ACL rule set in force.", MetricType::GAUGE, &[]),
    ("pktwarp_rule_reloads_total", "Rule reloads attempted, by result (success, failure).", MetricType::COUNTER, &["result"]),
    ("pktwarp_rule_reload_last_success_timestamp_seconds", "Unix time of the last successful reload (0: none).", MetricType::GAUGE, &[]),
    ("pktwarp_verify_sampled_total", "Frames the sampling verifier (verify.sample) re-ran on the CPU reference and compared with the executor's results.", MetricType::COUNTER, &[]),
    ("pktwarp_verify_mismatch_total", "Sampled frames whose verdict, metadata or rewritten bytes differ from the CPU reference's.", MetricType::COUNTER, &[]),
    ("pktwarp_verify_burst_mismatch_total", "Sampled bursts whose counters (stage frames and bytes, verdicts, drops, rule hits) differ from the CPU reference's.", MetricType::COUNTER, &[]),
    ("pktwarp_verify_skipped_total", "Bursts due for a sample that were not checked: the verifier was still busy with the last one.", MetricType::COUNTER, &[]),
    ("pktwarp_verify_captured_frames_total", "Mismatching frames sent to the slow path (result=captured) or not (result=dropped: its queue full, or no output.to_host).", MetricType::COUNTER, &["result"]),
    ("pktwarp_ipfix_records_exported_total", "Flow records in IPFIX messages the socket to the collector accepted.", MetricType::COUNTER, &[]),
    ("pktwarp_ipfix_messages_sent_total", "IPFIX messages the socket to the collector accepted.", MetricType::COUNTER, &[]),
    ("pktwarp_ipfix_templates_sent_total", "IPFIX template sets sent (at start, every template_refresh_s or template_refresh_messages, after a send error).", MetricType::COUNTER, &[]),
    ("pktwarp_ipfix_send_errors_total", "IPFIX messages the socket refused (collector unreachable, buffer full): their records are lost.", MetricType::COUNTER, &[]),
    ("pktwarp_ipfix_records_dropped_total", "Flow records not queued for export: the exporter's queue (ipfix.queue) was full.", MetricType::COUNTER, &[]),
    ("pktwarp_gpu_kernel_heartbeat", "Last heartbeat word of a queue's persistent kernel.", MetricType::GAUGE, &["queue", "gpu"]),
    ("pktwarp_gpu_kernel_stalled", "1 while a queue's kernel heartbeat is stuck with work queued.", MetricType::GAUGE, &["queue", "gpu"]),
    ("pktwarp_gpu_kernel_stalls_total", "Stalls the watchdog detected on a queue.", MetricType::COUNTER, &["queue", "gpu"]),
    ("pktwarp_gpu_kernel_restarts_total", "Kernel restarts the watchdog performed on a queue.", MetricType::COUNTER, &["queue", "gpu"]),
    ("pktwarp_gpu_queues", "Queues (rings and persistent kernels) placed on a GPU.", MetricType::GAUGE, &["gpu"]),
    ("pktwarp_gpu_rx_frames_total", "Frames received into the queues of a GPU.", MetricType::COUNTER, &["gpu"]),
    ("pktwarp_gpu_rx_bytes_total", "Bytes of frames received into the queues of a GPU.", MetricType::COUNTER, &["gpu"]),
    ("pktwarp_shutting_down", "1 once SIGTERM/SIGINT stopped intake and the daemon is draining.", MetricType::GAUGE, &[]),
    ("pktwarp_port_rx_frames_total", "Frames the port's device received (DPDK ethdev ipackets).", MetricType::COUNTER, &["port"]),
    ("pktwarp_port_tx_frames_total", "Frames the port's device sent (DPDK ethdev opackets).", MetricType::COUNTER, &["port"]),
    ("pktwarp_port_rx_bytes_total", "Bytes the port's device received (DPDK ethdev ibytes).", MetricType::COUNTER, &["port"]),
    ("pktwarp_port_tx_bytes_total", "Bytes the port's device sent (DPDK ethdev obytes).", MetricType::COUNTER, &["port"]),
    ("pktwarp_port_rx_missed_total", "Frames the device dropped with its RX queues full (DPDK ethdev imissed).", MetricType::COUNTER, &["port"]),
    ("pktwarp_port_rx_errors_total", "Erroneous frames the device received (DPDK ethdev ierrors).", MetricType::COUNTER, &["port"]),
    ("pktwarp_port_tx_errors_total", "Frames the device failed to send (DPDK ethdev oerrors).", MetricType::COUNTER, &["port"]),
    ("pktwarp_port_rx_nombuf_total", "RX buffer allocation failures of the device (DPDK ethdev rx_nombuf).", MetricType::COUNTER, &["port"]),
    ("pktwarp_port_steering_in_nic", "1 when the port's NIC steers the config's whole steering rule set (rte_flow), 0 when the ingest steers in software.", MetricType::GAUGE, &["port"]),
    ("pktwarp_port_xstat", "The device's extended statistics (DPDK xstats), by their DPDK name; read every second by the control thread.", MetricType::GAUGE, &["port", "name"]),
];

/// The port families fed by a port's `ethdev_<field>` counters: (family, field).
const PORT_ETHDEV: &[(&str, &str)] = &[
    ("pktwarp_port_rx_frames_total", "ethdev_ipackets"),
    ("pktwarp_port_tx_frames_total", "ethdev_opackets"),
    ("pktwarp_port_rx_bytes_total", "ethdev_ibytes"),
    ("pktwarp_port_tx_bytes_total", "ethdev_obytes"),
    ("pktwarp_port_rx_missed_total", "ethdev_imissed"),
    ("pktwarp_port_rx_errors_total", "ethdev_ierrors"),
    ("pktwarp_port_tx_errors_total", "ethdev_oerrors"),
    ("pktwarp_port_rx_nombuf_total", "ethdev_rx_nombuf"),
];

/// What the collector describes besides the live counters: fixed at start.
#[derive(Clone, Debug)]
pub struct StaticInfo {
    pub executor: String,
    pub mode: String,
    pub reason: String,
    /// Label of the receiving side: the port name when one port receives, else the names joined
    /// with `+` (the CPU executor's queue counters sum every receiving port).
    pub rx_port: String,
    /// The output port's name, or `none`.
    pub tx_port: String,
    pub stage_names: Vec<String>,
    /// Rules with their own `rule` series.
    pub rule_series_cap: usize,
    /// GPU executor: the device index of each queue (the `gpu` label); empty on the CPU.
    pub queue_gpu: Vec<String>,
}

/// Reads the counters of a running daemon at scrape time.
pub struct DaemonCollector {
    counters: Vec<Arc<QueueCounters>>,
    pipeline: Arc<Pipeline>,
    state: Arc<ControlState>,
    info: StaticInfo,
    descs: Vec<Desc>,
    /// The ports' own counters (DPDK ethdev stats, xstats), as last read by the control thread.
    ports: Option<Arc<crate::port::PortCounterBoard>>,
    /// The sampling verifier's counts (`verify:` on).
    verify: Option<Arc<crate::verify::sampler::VerifyBoard>>,
    /// The IPFIX exporter's counters (`ipfix:` on).
    ipfix: Option<Arc<pktwarp_flow::ipfix::IpfixCounters>>,
}

/// The exposition text of one CPU-executor queue's counters and a pipeline, as a scrape gives
/// it (tests of the stages whose counters reach the metrics).
#[cfg(test)]
pub(crate) fn render_for_test(q: Arc<QueueCounters>, pipeline: Arc<Pipeline>) -> String {
    let info = StaticInfo {
        executor: "cpu".into(),
        mode: "run_to_completion".into(),
        reason: "test".into(),
        rx_port: "g".into(),
        tx_port: "none".into(),
        stage_names: pipeline.stage_names(),
        rule_series_cap: 4,
        queue_gpu: Vec::new(),
    };
    let c = DaemonCollector::new(vec![q], pipeline, ControlState::new(None), info);
    String::from_utf8(Exposition::new(c).unwrap().render().unwrap()).unwrap()
}

/// A registered stage's metric family may not take the name of one of the daemon's
/// ([`FAMILIES`]): the exposition would hold the name twice. Checked when the metrics endpoint
/// starts; the error names the stage and the family.
pub fn check_stage_families(pipeline: &Pipeline) -> anyhow::Result<()> {
    for (i, s) in pipeline.stages.iter().enumerate() {
        let crate::stage::Stage::Custom(c) = s else {
            continue;
        };
        for f in c.cpu().metric_families() {
            let full = format!("pktwarp_{}", f.name);
            let exported = pipeline.exported_families();
            if FAMILIES
                .iter()
                .map(|d| d.0)
                .chain(exported.iter().map(|e| e.name))
                .any(|d| d == full)
            {
                anyhow::bail!(
                    "stage `{}` (pipeline[{i}]): metric family `{full}`: the daemon has a family \
                     of that name",
                    c.name()
                );
            }
        }
    }
    Ok(())
}

impl DaemonCollector {
    pub fn new(
        counters: Vec<Arc<QueueCounters>>,
        pipeline: Arc<Pipeline>,
        state: Arc<ControlState>,
        info: StaticInfo,
    ) -> Self {
        let exported = pipeline.exported_families().into_iter();
        let descs = FAMILIES
            .iter()
            .map(|&(name, help, _, labels)| (name, help, labels))
            .chain(exported.map(|e| (e.name, e.help, e.labels)))
            .filter_map(|(name, help, labels)| {
                Desc::new(
                    name.to_string(),
                    help.to_string(),
                    labels.iter().map(|l| l.to_string()).collect(),
                    Default::default(),
                )
                .ok()
            })
            .collect();
        DaemonCollector {
            counters,
            pipeline,
            state,
            info,
            descs,
            ports: None,
            verify: None,
            ipfix: None,
        }
    }

    /// Also exposes the ports' own counters from `board` (the `pktwarp_port_*` families).
    pub fn with_port_counters(mut self, board: Arc<crate::port::PortCounterBoard>) -> Self {
        self.ports = Some(board);
        self
    }

    /// Also exposes the sampling verifier's counts (the `pktwarp_verify_*` families) when
    /// `board` has sampling on.
    pub fn with_verify(mut self, board: Arc<crate::verify::sampler::VerifyBoard>) -> Self {
        self.verify = (board.sample.load(Relaxed) > 0).then_some(board);
        self
    }

    /// Also exposes flow export's counters (the `pktwarp_ipfix_*` families).
    pub fn with_ipfix(mut self, c: Option<Arc<pktwarp_flow::ipfix::IpfixCounters>>) -> Self {
        self.ipfix = c;
        self
    }
}

impl DaemonCollector {
    /// Every custom stage's named counters (they count over all queues).
    fn custom_counters(&self) -> Vec<proto::Metric> {
        let mut out = Vec::new();
        for (i, s) in self.pipeline.stages.iter().enumerate() {
            let pos = i.to_string();
            // A registered stage's, a rate limit's, or a flow-table stage's (conntrack,
            // flow_stats).
            let (stage, counters) = match s {
                crate::stage::Stage::Custom(c) => (c.name(), c.counters()),
                crate::stage::Stage::RateLimit(rl) => ("rate_limit", rl.counters()),
                s => match s.flow_table_counters() {
                    Some((name, c)) => (name, c),
                    None => continue,
                },
            };
            for (name, v) in counters {
                let labels = [("stage", stage), ("position", &pos), ("counter", name)];
                out.push(counter(&labels, v));
            }
        }
        out
    }

    /// The families registered stages declare (`CustomStage::metric_families`), each sample
    /// labelled with its stage and position first; two stages of one kind share a family.
    /// The families the stages of the pipeline export under names of their own
    /// ([`crate::stage::report::ExportedFamily`]).
    fn exported_families(&self, out: &mut Out) {
        use crate::stage::report::{ExportedKind, ExportedValue};
        for fam in self.pipeline.exported_samples() {
            let ms = fam.samples.iter().map(|(l, v)| {
                let l: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
                match v {
                    ExportedValue::Counter(n) => counter(&l, *n),
                    ExportedValue::Histogram {
                        bounds_ns,
                        cumulative,
                        count,
                        sum_ns,
                    } => seconds_histogram(&l, bounds_ns, cumulative, *count, *sum_ns),
                }
            });
            let ty = match fam.family.kind {
                ExportedKind::Counter => MetricType::COUNTER,
                ExportedKind::Histogram => MetricType::HISTOGRAM,
            };
            out.push_family(fam.family.name, fam.family.help, ty, ms.collect());
        }
    }

    fn stage_families(&self, out: &mut Out) {
        use crate::stage::api::MetricKind;
        let mut fams: std::collections::BTreeMap<String, (String, MetricKind, Vec<proto::Metric>)> =
            Default::default();
        for (i, s) in self.pipeline.stages.iter().enumerate() {
            let crate::stage::Stage::Custom(c) = s else {
                continue;
            };
            let (pos, cpu) = (i.to_string(), c.cpu());
            let declared = cpu.metric_families();
            for (k, labels, v) in cpu.metric_samples() {
                let Some(f) = declared.get(k) else { continue };
                if labels.len() != f.labels.len() {
                    continue;
                }
                let mut l = vec![("stage", c.name()), ("position", pos.as_str())];
                l.extend(
                    f.labels
                        .iter()
                        .map(String::as_str)
                        .zip(labels.iter().map(String::as_str)),
                );
                let m = match f.kind {
                    MetricKind::Counter => counter(&l, v.max(0.0) as u64),
                    MetricKind::Gauge => gauge(&l, v),
                };
                let e = fams
                    .entry(format!("pktwarp_{}", f.name))
                    .or_insert_with(|| (f.help.clone(), f.kind, Vec::new()));
                e.2.push(m);
            }
        }
        for (name, (help, kind, metrics)) in fams {
            let ty = match kind {
                MetricKind::Counter => MetricType::COUNTER,
                MetricKind::Gauge => MetricType::GAUGE,
            };
            out.push_family(&name, &help, ty, metrics);
        }
    }
}

fn lp(pairs: &[(&str, &str)]) -> Vec<LabelPair> {
    pairs
        .iter()
        .map(|(k, v)| {
            let mut l = LabelPair::default();
            l.set_name(k.to_string());
            l.set_value(v.to_string());
            l
        })
        .collect()
}

fn counter(labels: &[(&str, &str)], v: u64) -> proto::Metric {
    let mut c = proto::Counter::default();
    c.set_value(v as f64);
    let mut m = proto::Metric::default();
    m.set_label(lp(labels));
    m.set_counter(c);
    m
}

fn gauge(labels: &[(&str, &str)], v: f64) -> proto::Metric {
    let mut g = proto::Gauge::default();
    g.set_value(v);
    let mut m = proto::Metric::default();
    m.set_label(lp(labels));
    m.set_gauge(g);
    m
}

/// Collects families in [`FAMILIES`] order; empty ones are left out (the text format has no
/// way to say "a family without samples").
struct Out {
    fams: Vec<MetricFamily>,
}

impl Out {
    fn push(&mut self, name: &str, metrics: Vec<proto::Metric>) {
        if metrics.is_empty() {
            return;
        }
        let Some((_, help, ty, _)) = FAMILIES.iter().find(|f| f.0 == name) else {
            return;
        };
        self.push_family(name, help, *ty, metrics);
    }

    /// A family of a stage's own (checked when the stage was built: its name is not one of
    /// [`FAMILIES`]).
    fn push_family(&mut self, name: &str, help: &str, ty: MetricType, metrics: Vec<proto::Metric>) {
        if metrics.is_empty() {
            return;
        }
        let mut f = MetricFamily::default();
        f.set_name(name.to_string());
        f.set_help(help.to_string());
        f.set_field_type(ty);
        f.set_metric(metrics);
        self.fams.push(f);
    }
}

impl Collector for DaemonCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut out = Out { fams: Vec::new() };
        self.collect_info(&mut out);
        self.collect_queues(&mut out);
        self.collect_reloads(&mut out);
        self.collect_verify(&mut out);
        let ipfix = self.ipfix.as_deref().map(super::flow_export::metric_values);
        for (name, v) in ipfix.into_iter().flatten() {
            out.push(name, vec![counter(&[], v)]);
        }
        self.collect_gpus(&mut out);
        self.collect_ports(&mut out);
        out.fams
    }
}

/// The parts of [`DaemonCollector::collect`], in exposition order.
impl DaemonCollector {
    /// Build, executor, start time, dropped log lines.
    fn collect_info(&self, out: &mut Out) {
        let info = &self.info;
        let st = &self.state;
        let profile = if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        };
        out.push(
            "pktwarp_build_info",
            vec![gauge(
                &[("version", env!("CARGO_PKG_VERSION")), ("profile", profile)],
                1.0,
            )],
        );
        out.push(
            "pktwarp_executor_info",
            vec![gauge(
                &[
                    ("executor", &info.executor),
                    ("mode", &info.mode),
                    ("reason", &info.reason),
                ],
                1.0,
            )],
        );
        out.push(
            "pktwarp_start_time_seconds",
            vec![gauge(&[], st.start_unix_s)],
        );
        out.push(
            "pktwarp_log_write_errors_total",
            vec![counter(&[], super::logs::write_errors())],
        );
    }

    /// Per queue: traffic, drops, verdicts, ring occupancy, stage frames and counters, the
    /// stages' exported families, parse errors, ACL hits, burst latency.
    fn collect_queues(&self, out: &mut Out) {
        let info = &self.info;
        let qnames: Vec<String> = (0..self.counters.len()).map(|q| q.to_string()).collect();
        let (rxp, txp) = (info.rx_port.as_str(), info.tx_port.as_str());
        let per_q = |port: &str, f: &dyn Fn(&QueueCounters) -> u64| -> Vec<proto::Metric> {
            self.counters
                .iter()
                .zip(&qnames)
                .map(|(c, q)| counter(&[("port", port), ("queue", q)], f(c)))
                .collect()
        };
        out.push(
            "pktwarp_rx_frames_total",
            per_q(rxp, &|c| c.rx_frames.get()),
        );
        out.push("pktwarp_rx_bytes_total", per_q(rxp, &|c| c.rx_bytes.get()));
        out.push(
            "pktwarp_tx_frames_total",
            per_q(txp, &|c| c.tx_frames.get()),
        );
        out.push("pktwarp_tx_bytes_total", per_q(txp, &|c| c.tx_bytes.get()));
        let mut drops = Vec::new();
        let mut verdicts = Vec::new();
        let mut occupancy = Vec::new();
        let mut stages = Vec::new();
        let mut parse = Vec::new();
        let mut no_match = Vec::new();
        let mut latency = Vec::new();
        let positions: Vec<String> = (0..info.stage_names.len()).map(|i| i.to_string()).collect();
        let mut rule_hits = vec![0u64; info.rule_series_cap];
        let mut rule_other = 0u64;
        for (c, q) in self.counters.iter().zip(&qnames) {
            for r in DropReason::ALL {
                drops.push(counter(
                    &[("port", rxp), ("queue", q), ("reason", r.name())],
                    c.drop_count(r),
                ));
            }
            for (name, v) in [
                ("pass", c.passed.get()),
                ("mirror", c.mirrored.get()),
                ("to_host", c.to_host.get()),
            ] {
                verdicts.push(counter(
                    &[("port", rxp), ("queue", q), ("verdict", name)],
                    v,
                ));
            }
            occupancy.push(gauge(
                &[("port", rxp), ("queue", q)],
                c.ring_occupancy.get() as f64,
            ));
            for ((name, pos), n) in info.stage_names.iter().zip(&positions).zip(&c.stage_frames) {
                stages.push(counter(
                    &[("queue", q), ("stage", name), ("position", pos)],
                    n.get(),
                ));
            }
            for (s, n) in c.parse_status.iter().enumerate().take(PARSE_STATUS_SLOTS) {
                let n = n.get();
                if n > 0 {
                    let status = crate::meta::ParseStatus::describe(s as u16);
                    parse.push(counter(&[("queue", q), ("status", &status)], n));
                }
            }
            for (i, h) in c.rule_hits.iter().enumerate() {
                match rule_hits.get_mut(i) {
                    Some(slot) => *slot += h.get(),
                    None => rule_other += h.get(),
                }
            }
            rule_other += c.rule_hits_other.get();
            no_match.push(counter(&[("queue", q)], c.acl_default.get()));
            latency.push(histogram(q, c));
        }
        out.push("pktwarp_drops_total", drops);
        out.push("pktwarp_verdicts_total", verdicts);
        out.push("pktwarp_ring_occupancy_bursts", occupancy);
        out.push("pktwarp_stage_frames_total", stages);
        out.push("pktwarp_stage_counter_total", self.custom_counters());
        self.stage_families(out);
        self.exported_families(out);
        for (fam, samples) in crate::stage::rate_limit::metric_families(&self.pipeline) {
            let ms = samples.iter().map(|(l, v)| {
                let l: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
                counter(&l, *v)
            });
            out.push(fam, ms.collect());
        }
        out.push("pktwarp_parse_errors_total", parse);
        let has_acl = self.pipeline.acl().is_some();
        if has_acl {
            let rules = self.pipeline.rule_count();
            let mut hits: Vec<proto::Metric> = rule_hits
                .iter()
                .enumerate()
                .take(rules.max(self.counters.first().map_or(0, |c| c.rule_hits.len())))
                .map(|(i, n)| counter(&[("rule", &i.to_string())], *n))
                .collect();
            if rules > info.rule_series_cap || rule_other > 0 {
                hits.push(counter(&[("rule", "other")], rule_other));
            }
            out.push("pktwarp_acl_rule_hits_total", hits);
            out.push("pktwarp_acl_no_match_total", no_match);
        }
        out.push("pktwarp_burst_latency_seconds", latency);
    }

    /// The rule set in force and its reloads.
    fn collect_reloads(&self, out: &mut Out) {
        let st = &self.state;
        out.push(
            "pktwarp_ruleset_generation",
            vec![gauge(&[], self.pipeline.generation() as f64)],
        );
        if self.pipeline.acl().is_some() {
            out.push(
                "pktwarp_ruleset_rules",
                vec![gauge(&[], self.pipeline.rule_count() as f64)],
            );
        }
        out.push(
            "pktwarp_rule_reloads_total",
            vec![
                counter(&[("result", "success")], st.reload_ok.load(Relaxed)),
                counter(&[("result", "failure")], st.reload_failed.load(Relaxed)),
            ],
        );
        out.push(
            "pktwarp_rule_reload_last_success_timestamp_seconds",
            vec![gauge(
                &[],
                st.last_reload_ok_unix_ms.load(Relaxed) as f64 / 1e3,
            )],
        );
    }

    /// The sampling verifier: frames checked and mismatched, skipped samples, captures.
    fn collect_verify(&self, out: &mut Out) {
        let Some(v) = &self.verify else { return };
        let one = |name: &str, c: &std::sync::atomic::AtomicU64, out: &mut Out| {
            out.push(name, vec![counter(&[], c.load(Relaxed))]);
        };
        one("pktwarp_verify_sampled_total", &v.sampled_frames, out);
        one("pktwarp_verify_mismatch_total", &v.mismatch_frames, out);
        one(
            "pktwarp_verify_burst_mismatch_total",
            &v.counter_mismatches,
            out,
        );
        one("pktwarp_verify_skipped_total", &v.skipped_busy, out);
        out.push(
            "pktwarp_verify_captured_frames_total",
            vec![
                counter(&[("result", "captured")], v.captured_frames.load(Relaxed)),
                counter(&[("result", "dropped")], v.capture_dropped.load(Relaxed)),
            ],
        );
    }

    /// Per GPU: queues and traffic; the persistent kernels' watchdog.
    fn collect_gpus(&self, out: &mut Out) {
        let info = &self.info;
        let st = &self.state;
        if !info.queue_gpu.is_empty() {
            // (queues, rx frames, rx bytes) per GPU.
            let mut per_gpu: std::collections::BTreeMap<&str, (u64, u64, u64)> = Default::default();
            for (c, g) in self.counters.iter().zip(&info.queue_gpu) {
                let e = per_gpu.entry(g.as_str()).or_default();
                e.0 += 1;
                e.1 += c.rx_frames.get();
                e.2 += c.rx_bytes.get();
            }
            out.push(
                "pktwarp_gpu_queues",
                per_gpu
                    .iter()
                    .map(|(g, v)| gauge(&[("gpu", g)], v.0 as f64))
                    .collect(),
            );
            out.push(
                "pktwarp_gpu_rx_frames_total",
                per_gpu
                    .iter()
                    .map(|(g, v)| counter(&[("gpu", g)], v.1))
                    .collect(),
            );
            out.push(
                "pktwarp_gpu_rx_bytes_total",
                per_gpu
                    .iter()
                    .map(|(g, v)| counter(&[("gpu", g)], v.2))
                    .collect(),
            );
        }
        if let Some(w) = &st.watchdog {
            let qs: Vec<String> = (0..w.len()).map(|q| q.to_string()).collect();
            let each = |f: &dyn Fn(&super::QueueHealth) -> f64, ctr: bool| {
                w.iter()
                    .zip(&qs)
                    .enumerate()
                    .map(|(i, (h, q))| {
                        let v = f(h);
                        let g = info.queue_gpu.get(i).map_or("unknown", String::as_str);
                        if ctr {
                            counter(&[("queue", q), ("gpu", g)], v as u64)
                        } else {
                            gauge(&[("queue", q), ("gpu", g)], v)
                        }
                    })
                    .collect::<Vec<_>>()
            };
            out.push(
                "pktwarp_gpu_kernel_heartbeat",
                each(&|h| h.heartbeat.load(Relaxed) as f64, false),
            );
            out.push(
                "pktwarp_gpu_kernel_stalled",
                each(&|h| h.stalled.load(Relaxed) as u8 as f64, false),
            );
            out.push(
                "pktwarp_gpu_kernel_stalls_total",
                each(&|h| h.stalls.load(Relaxed) as f64, true),
            );
            out.push(
                "pktwarp_gpu_kernel_restarts_total",
                each(&|h| h.restarts.load(Relaxed) as f64, true),
            );
        }
    }

    /// Shutdown state and the ports' device counters.
    fn collect_ports(&self, out: &mut Out) {
        let st = &self.state;
        out.push(
            "pktwarp_shutting_down",
            vec![gauge(&[], st.shutting_down.load(Relaxed) as u8 as f64)],
        );
        if let Some(board) = &self.ports {
            let snap = board.snapshot();
            for (family, field) in PORT_ETHDEV {
                let m: Vec<proto::Metric> = snap
                    .iter()
                    .filter_map(|(port, c)| {
                        let v = c.iter().find(|(k, _)| k == field)?.1;
                        Some(counter(&[("port", port)], v))
                    })
                    .collect();
                out.push(family, m);
            }
            let nic: Vec<proto::Metric> = snap
                .iter()
                .filter_map(|(port, c)| {
                    let v = c.iter().find(|(k, _)| k == "pktwarp_steering_in_nic")?.1;
                    Some(gauge(&[("port", port)], v as f64))
                })
                .collect();
            out.push("pktwarp_port_steering_in_nic", nic);
            let xstats: Vec<proto::Metric> = snap
                .iter()
                .flat_map(|(port, c)| {
                    c.iter().filter_map(move |(k, v)| {
                        let name = k.strip_prefix("xstat_")?;
                        Some(gauge(&[("port", port), ("name", name)], *v as f64))
                    })
                })
                .collect();
            out.push("pktwarp_port_xstat", xstats);
        }
    }
}

/// Cumulative buckets from the per-queue latency histogram (non-cumulative single-writer
/// counts). The count is the sum of the buckets read, so the family is self-consistent even when
/// a worker adds between two loads.
fn histogram(q: &str, c: &QueueCounters) -> proto::Metric {
    let h = &c.burst_latency;
    let mut buckets = Vec::with_capacity(LATENCY_BUCKETS_NS.len());
    let mut cum = 0u64;
    for (i, bound) in LATENCY_BUCKETS_NS.iter().enumerate() {
        cum += h.bucket(i);
        let mut b = proto::Bucket::default();
        b.set_upper_bound(*bound as f64 / 1e9);
        b.set_cumulative_count(cum);
        buckets.push(b);
    }
    cum += h.bucket(LATENCY_BUCKETS_NS.len());
    let mut p = proto::Histogram::default();
    p.set_bucket(buckets);
    p.set_sample_count(cum);
    p.set_sample_sum(h.sum_ns() as f64 / 1e9);
    let mut m = proto::Metric::default();
    m.set_label(lp(&[("queue", q)]));
    m.set_histogram(p);
    m
}

/// A histogram in seconds from bounds and cumulative counts in ns.
fn seconds_histogram(
    labels: &[(&str, &str)],
    bounds_ns: &[u64],
    cumulative: &[u64],
    count: u64,
    sum_ns: u64,
) -> proto::Metric {
    let buckets = bounds_ns
        .iter()
        .zip(cumulative)
        .map(|(bound, n)| {
            let mut b = proto::Bucket::default();
            b.set_upper_bound(*bound as f64 / 1e9);
            b.set_cumulative_count(*n);
            b
        })
        .collect();
    let mut p = proto::Histogram::default();
    p.set_bucket(buckets);
    p.set_sample_count(count);
    p.set_sample_sum(sum_ns as f64 / 1e9);
    let mut m = proto::Metric::default();
    m.set_label(lp(labels));
    m.set_histogram(p);
    m
}

/// A registry holding one collector, and the text exposition of it.
pub struct Exposition {
    registry: Registry,
}

impl Exposition {
    pub fn new(collector: DaemonCollector) -> anyhow::Result<Self> {
        let registry = Registry::new();
        registry.register(Box::new(collector))?;
        Ok(Exposition { registry })
    }

    /// The Prometheus text format (version 0.0.4) of everything now.
    pub fn render(&self) -> anyhow::Result<Vec<u8>> {
        let mut buf = Vec::with_capacity(16 * 1024);
        TextEncoder::new().encode(&self.registry.gather(), &mut buf)?;
        Ok(buf)
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
