//! `conntrack`: connection tracking on the CPU executor. Each queue owns a flow table
//! (`pktwarp_flow::FlowTable`, docs/flow-table.md); every frame reaching the stage is applied to
//! its queue's table and gets its connection state in the metadata (`PacketMeta::ct_state`),
//! which the ACL's `ct:` match reads. The stage drops nothing: the ACL decides.
//!
//! A frame that would open a flow in a bucket full of assured flows (`table_full`) goes on
//! untracked (`ct_state` 0), counted. Both directions of a flow must reach one queue: a config
//! with a `conntrack` stage steers in software by the flow key
//! ([`crate::steer::Steering::with_flow_steering`]).

use std::sync::{Mutex, OnceLock};

use pktwarp_flow::{FlowConfig, FlowCounters, FlowTable};

use crate::burst::FrameDesc;
use crate::meta::PacketMeta;
use crate::stage::descriptor::{GpuImpl, StageDescriptor, StageNeeds};

/// The stage's counters, summed over its queues' tables.
pub const COUNTER_NAMES: [&str; 6] = [
    "created",
    "expired",
    "early_evicted",
    "table_full",
    "untracked",
    "invalid",
];

/// The `conntrack` stage, described ([`crate::stage::descriptor`]).
pub const DESCRIPTOR: StageDescriptor = StageDescriptor {
    name: "conntrack",
    usage: "`conntrack: { entries, strict, hash_seed, timeouts }`",
    summary: "TCP, UDP and ICMP connection tracking, a flow table per queue (docs/flow-table.md): puts the frame's connection state in the metadata for the ACL's `ct:` match; drops nothing",
    needs: StageNeeds {
        reads_meta: true,
        reads_time: true,
        ..StageNeeds::NONE
    },
    drop_reasons: &[],
    counters: &COUNTER_NAMES,
    gpu: GpuImpl::CpuOnly,
    reloads: false,
};

/// Queues with a table of their own; a queue number past them shares the table of its number
/// modulo this (correct, behind the lock, but contended).
pub const MAX_QUEUES: usize = 256;

/// Why the GPU executor refuses a pipeline with `conntrack`.
pub const GPU_REFUSAL: &str =
    "conntrack runs on the CPU executor until the GPU flow table placement lands";

/// The stage: its config and one table per queue, made when the queue's first frame comes (a
/// queue that gets no traffic takes no memory). Each queue has one worker, so a table's lock is
/// not contended.
pub struct ConntrackStage {
    config: FlowConfig,
    tables: Vec<OnceLock<Option<Mutex<FlowTable>>>>,
}

impl ConntrackStage {
    /// Checks the config and makes queue 0's table (so a table that cannot be had is an error
    /// at start, not in the data path).
    pub fn new(config: &FlowConfig) -> anyhow::Result<ConntrackStage> {
        config
            .validate()
            .map_err(|e| anyhow::anyhow!("stage `conntrack`: {e}"))?;
        let first = FlowTable::from_config(config)
            .map_err(|e| anyhow::anyhow!("stage `conntrack`: {e}"))?;
        let tables: Vec<OnceLock<Option<Mutex<FlowTable>>>> =
            (0..MAX_QUEUES).map(|_| OnceLock::new()).collect();
        let _ = tables[0].set(Some(Mutex::new(first)));
        Ok(ConntrackStage {
            config: *config,
            tables,
        })
    }

    pub fn config(&self) -> &FlowConfig {
        &self.config
    }

    fn table(&self, queue: u16) -> Option<&Mutex<FlowTable>> {
        self.tables[queue as usize % MAX_QUEUES]
            .get_or_init(|| match FlowTable::from_config(&self.config) {
                Ok(t) => Some(Mutex::new(t)),
                Err(e) => {
                    // The config was checked at start: only memory can fail here.
                    tracing::error!(
                        queue,
                        "conntrack: queue {queue}'s flow table cannot be made ({e}): its \
                         frames go untracked"
                    );
                    None
                }
            })
            .as_ref()
    }

    /// Applies one frame to its queue's table and writes its state into `meta`.
    #[inline]
    pub fn apply(&self, desc: &FrameDesc, frame: &[u8], meta: &mut PacketMeta) {
        let Some(t) = self.table(desc.queue) else {
            meta.ct_state = pktwarp_flow::ct::UNTRACKED;
            return;
        };
        // A worker that panicked while holding the lock left the table as it was between two
        // frames (apply has no partial state worth refusing).
        let mut t = t.lock().unwrap_or_else(|p| p.into_inner());
        meta.ct_state = t.apply(meta, frame, desc.timestamp_ns).ct_state;
    }

    /// [`ConntrackStage::apply`] on the frames of a burst chunk whose bit is set in `alive`
    /// (frame i: `queues[i]`, `frames[i]`, `times[i]`, `metas[i]`), in order, taking the
    /// queue's table once when they are all of one queue (a burst is).
    pub fn apply_chunk(
        &self,
        queues: &[u16],
        frames: &[&[u8]],
        times: &[u64],
        metas: &mut [PacketMeta],
        alive: u64,
    ) {
        let n = metas
            .len()
            .min(frames.len())
            .min(times.len())
            .min(queues.len())
            .min(64);
        let all = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        let one_queue = queues[..n].iter().all(|&q| q == queues[0]);
        let table = if n > 0 && one_queue {
            self.table(queues[0])
        } else {
            None
        };
        let Some(t) = table else {
            // Several queues, or the queue has no table: one frame at a time.
            for i in (0..n).filter(|&i| alive >> i & 1 != 0) {
                let d = FrameDesc {
                    queue: queues[i],
                    timestamp_ns: times[i],
                    ..FrameDesc::default()
                };
                self.apply(&d, frames[i], &mut metas[i]);
            }
            return;
        };
        let mut t = t.lock().unwrap_or_else(|p| p.into_inner());
        if alive & all == all {
            let mut out = [pktwarp_flow::FlowResult::default(); 64];
            let out = &mut out[..n];
            // Lengths are equal by construction: an error is impossible, and would leave
            // every frame untracked.
            if t.apply_burst(&metas[..n], &frames[..n], &times[..n], out)
                .is_err()
            {
                out.fill(pktwarp_flow::FlowResult::default());
            }
            for (m, r) in metas[..n].iter_mut().zip(out.iter()) {
                m.ct_state = r.ct_state;
            }
        } else {
            for i in (0..n).filter(|&i| alive >> i & 1 != 0) {
                metas[i].ct_state = t.apply(&metas[i], frames[i], times[i]).ct_state;
            }
        }
    }

    /// The counters over every queue's table.
    pub fn flow_counters(&self) -> FlowCounters {
        let mut sum = FlowCounters::default();
        for t in self.tables.iter().filter_map(|t| t.get()).flatten() {
            let c = t.lock().unwrap_or_else(|p| p.into_inner()).counters();
            sum.created += c.created;
            sum.expired += c.expired;
            sum.early_evicted += c.early_evicted;
            sum.table_full += c.table_full;
            sum.untracked += c.untracked;
            sum.invalid += c.invalid;
        }
        sum
    }

    /// [`COUNTER_NAMES`] and their values.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.flow_counters();
        let v = [
            c.created,
            c.expired,
            c.early_evicted,
            c.table_full,
            c.untracked,
            c.invalid,
        ];
        COUNTER_NAMES.iter().copied().zip(v).collect()
    }

    /// Flows held now, over every queue.
    pub fn flows(&self) -> usize {
        self.tables
            .iter()
            .filter_map(|t| t.get())
            .flatten()
            .map(|t| t.lock().unwrap_or_else(|p| p.into_inner()).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pktwarp_flow::ct;

    fn stage(entries: u64) -> ConntrackStage {
        let c: FlowConfig =
            serde_saphyr::from_str(&format!("entries: {entries}\n")).expect("config");
        ConntrackStage::new(&c).expect("stage")
    }

    /// A TCP frame from `a` to `b` with `flags`, parsed.
    fn tcp(a: ([u8; 4], u16), b: ([u8; 4], u16), flags: u8) -> (Vec<u8>, PacketMeta) {
        let mut f = vec![0u8; 54];
        f[12] = 0x08;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&40u16.to_be_bytes());
        f[22] = 64;
        f[23] = 6;
        f[26..30].copy_from_slice(&a.0);
        f[30..34].copy_from_slice(&b.0);
        f[34..36].copy_from_slice(&a.1.to_be_bytes());
        f[36..38].copy_from_slice(&b.1.to_be_bytes());
        f[38..42].copy_from_slice(&1000u32.to_be_bytes());
        f[46] = 0x50;
        f[47] = flags;
        f[48..50].copy_from_slice(&64000u16.to_be_bytes());
        let mut m = PacketMeta::default();
        crate::stage::parse::parse(&f, &mut m);
        assert_eq!(m.status, 0, "the test frame parses");
        (f, m)
    }

    fn run(s: &ConntrackStage, queue: u16, f: &(Vec<u8>, PacketMeta)) -> u8 {
        let d = FrameDesc {
            queue,
            len: f.0.len() as u32,
            timestamp_ns: 1_000_000_000,
            ..FrameDesc::default()
        };
        let mut m = f.1;
        s.apply(&d, &f.0, &mut m);
        m.ct_state
    }

    #[test]
    fn states_go_into_the_metadata_per_queue() {
        let s = stage(64);
        let (c, srv) = (([10, 0, 0, 1], 40000), ([192, 0, 2, 1], 80));
        let syn = tcp(c, srv, 0x02);
        let synack = tcp(srv, c, 0x12);
        let finack = tcp(srv, c, 0x11);
        assert_eq!(run(&s, 0, &syn), ct::NEW);
        assert_eq!(run(&s, 0, &synack), ct::ESTABLISHED);
        // Queue 1 has its own table: the SYN+ACK opens nothing there.
        assert_eq!(run(&s, 1, &synack), ct::INVALID);
        assert_eq!(run(&s, 0, &finack), ct::CLOSING);
        assert_eq!(s.flows(), 1);
        let c = s.counters();
        assert_eq!(c[0], ("created", 1));
        assert_eq!(c[5], ("invalid", 1));
    }

    /// The stage's counters are exposed as `pktwarp_stage_counter_total{stage="conntrack"}`.
    #[test]
    fn counters_reach_the_metrics() {
        use crate::stage::config::StageConfig;
        use std::sync::Arc;
        let c: FlowConfig = serde_saphyr::from_str("entries: 64\n").expect("config");
        let stages = [
            StageConfig::Parse,
            StageConfig::Conntrack(c),
            StageConfig::Count,
        ];
        let p = Arc::new(crate::stage::build(&stages, |x| x.to_path_buf()).expect("pipeline"));
        let q = Arc::new(crate::counters::QueueCounters::new(p.stages.len(), 0));
        let (c, srv) = (([10, 0, 0, 1], 40000), ([192, 0, 2, 1], 80));
        let mut b = crate::burst::Burst::default();
        for f in [tcp(c, srv, 0x02), tcp(srv, c, 0x12), tcp(c, srv, 0x10)] {
            let d = FrameDesc {
                len: f.0.len() as u32,
                wire_len: f.0.len() as u32,
                ..FrameDesc::default()
            };
            b.push(&f.0, d);
        }
        let mut metas = Vec::new();
        p.run_burst(&b, &mut metas, &mut Vec::new(), &q);
        let states: Vec<u8> = metas.iter().map(|m| m.ct_state).collect();
        assert_eq!(states, [ct::NEW, ct::ESTABLISHED, ct::ESTABLISHED]);
        let text = crate::control::metrics::render_for_test(q, Arc::clone(&p));
        let has = |series: &str| text.lines().any(|l| l == series);
        assert!(
            has(
                r#"pktwarp_stage_counter_total{stage="conntrack",position="1",counter="created"} 1"#
            ),
            "{text}"
        );
        assert!(
            has(
                r#"pktwarp_stage_counter_total{stage="conntrack",position="1",counter="invalid"} 0"#
            ),
            "{text}"
        );
    }

    #[test]
    fn bad_configs_are_errors_naming_the_key() {
        let e = ConntrackStage::new(&FlowConfig {
            entries: 12,
            strict: false,
            hash_seed: 0,
            timeouts: Default::default(),
        })
        .err()
        .expect("12 is not a multiple of 8");
        assert!(e.to_string().contains("entries"), "{e}");
        let e = serde_saphyr::from_str::<FlowConfig>("entries: 64\ncapacity: 8\n")
            .expect_err("unknown key");
        assert!(e.to_string().contains("capacity"), "{e}");
    }
}
