//! Flow export on the control thread: the IPFIX exporter (`pktwarp_flow::ipfix`) fed by the
//! pipeline's `flow_stats` stage. Every [`SWEEP_PERIOD`] the control loop sweeps the flow
//! tables for idle and active flows and sends what is queued (with the templates when due);
//! at the end it exports every flow still alive (forced end) and sends the rest.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pktwarp_flow::ipfix::{Exporter, IpfixConfig, IpfixCounters};

use crate::stage::flow_stats::FlowStatsStage;
use crate::stage::{Pipeline, Stage};

/// How often the control thread sweeps the flow tables and sends.
pub const SWEEP_PERIOD: Duration = Duration::from_millis(100);
/// Buckets of each queue's table one sweep visits (8 entries each): a table of 65,536 entries
/// is swept whole every 0.4 s, one of 10 M every minute (an idle flow's record may wait that
/// long after its timeout).
pub const SWEEP_BUCKETS: u32 = 2048;

/// The exporter and the pipeline whose `flow_stats` stage feeds it.
pub struct FlowExport {
    exporter: Exporter,
    pipeline: Arc<Pipeline>,
    position: usize,
    next_sweep: Instant,
}

impl FlowExport {
    /// Opens the exporter's socket to the collector and attaches its queue to the pipeline's
    /// `flow_stats` stage; `None` when there is no `ipfix:` section or no such stage.
    pub fn start(
        ipfix: Option<&IpfixConfig>,
        pipeline: &Arc<Pipeline>,
    ) -> anyhow::Result<Option<FlowExport>> {
        let Some(cfg) = ipfix else {
            return Ok(None);
        };
        let Some(position) = pipeline
            .stages
            .iter()
            .position(|s| matches!(s, Stage::FlowStats(_)))
        else {
            return Ok(None);
        };
        let (exporter, queue) = Exporter::new(cfg)?;
        let export = FlowExport {
            exporter,
            pipeline: Arc::clone(pipeline),
            position,
            next_sweep: Instant::now(),
        };
        if let Some(s) = export.stage() {
            s.attach(queue);
        }
        tracing::info!(
            event = "ipfix_export",
            collector = %export.exporter.collector(),
            observation_domain = cfg.observation_domain,
            "exporting flow records as IPFIX to {}",
            export.exporter.collector()
        );
        Ok(Some(export))
    }

    fn stage(&self) -> Option<&FlowStatsStage> {
        match self.pipeline.stages.get(self.position) {
            Some(Stage::FlowStats(s)) => Some(s),
            _ => None,
        }
    }

    /// The exporter's counters, for the metrics.
    pub fn counters(&self) -> Arc<IpfixCounters> {
        self.exporter.counters()
    }

    /// The control loop's call: sweeps and sends when [`SWEEP_PERIOD`] has passed.
    pub fn tick(&mut self, now: Instant) {
        if now < self.next_sweep {
            return;
        }
        self.next_sweep = now + SWEEP_PERIOD;
        if let Some(s) = self.stage() {
            s.sweep(now, SWEEP_BUCKETS);
        }
        self.exporter.poll();
    }

    /// After the last frame: every live flow exported (forced end), everything queued sent.
    pub fn finish(mut self) {
        let pipeline = Arc::clone(&self.pipeline);
        if let Some(Stage::FlowStats(s)) = pipeline.stages.get(self.position) {
            let exporter = &mut self.exporter;
            s.flush(&mut || {
                exporter.poll();
            });
        }
        self.exporter.poll();
        let c = self.exporter.counters().snapshot();
        tracing::info!(
            event = "ipfix_export_end",
            records_exported = c.records_exported,
            messages_sent = c.messages_sent,
            send_errors = c.send_errors,
            records_dropped = c.records_dropped,
            "flow export ended"
        );
    }
}

/// (family, value) of the exporter's counters: the `pktwarp_ipfix_*` metric families.
pub fn metric_values(c: &IpfixCounters) -> [(&'static str, u64); 5] {
    let s = c.snapshot();
    [
        ("pktwarp_ipfix_records_exported_total", s.records_exported),
        ("pktwarp_ipfix_messages_sent_total", s.messages_sent),
        ("pktwarp_ipfix_templates_sent_total", s.templates_sent),
        ("pktwarp_ipfix_send_errors_total", s.send_errors),
        ("pktwarp_ipfix_records_dropped_total", s.records_dropped),
    ]
}
