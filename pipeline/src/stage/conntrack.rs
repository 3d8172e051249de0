//! `conntrack`: connection tracking. Each queue owns a flow table (`pktwarp_flow::FlowTable`,
//! docs/flow-table.md); every frame reaching the stage is applied to its queue's table and gets
//! its connection state in the metadata (`PacketMeta::ct_state`), which the ACL's `ct:` match
//! reads. The stage drops nothing: the ACL decides.
//!
//! On the CPU executor the tables are host memory, made per queue on first use. On the GPU
//! executor they are the stage's per-queue state in device memory ([`gpu_block`],
//! gpu-kernels/cuda/conntrack_stage.cuh): frames of one flow applied in arrival order within a
//! burst, flows in parallel, so both executors give every frame the same state; the device
//! counters are folded into [`ConntrackStage::counters`] ([`ConntrackStage::add_gpu_counters`]).
//!
//! A frame that would open a flow in a bucket full of assured flows (`table_full`) goes on
//! untracked (`ct_state` 0), counted. Both directions of a flow must reach one queue: a config
//! with a `conntrack` stage steers in software by the flow key
//! ([`crate::steer::Steering::with_flow_steering`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pktwarp_flow::{FlowConfig, FlowCounters};

use crate::burst::FrameDesc;
use crate::meta::PacketMeta;
use crate::stage::descriptor::{GpuImpl, StageDescriptor, StageNeeds};
use crate::stage::flow_tables::{lock, FlowTables};

/// The stage's counters, summed over its queues' tables.
pub const COUNTER_NAMES: [&str; 6] = [
    "created",
    "expired",
    "early_evicted",
    "table_full",
    "untracked",
    "invalid",
];

/// The `conntrack` stage, described (the stage descriptor, `stage::descriptor`).
pub const DESCRIPTOR: StageDescriptor = StageDescriptor {
    name: "conntrack",
    usage: "`conntrack: { entries, strict, hash_seed, timeouts }`",
    summary: "TCP, UDP and ICMP connection tracking, a flow table per queue (docs/flow-table.md): puts the frame's connection state in the metadata for the ACL's `ct:` match; drops nothing",
    needs: StageNeeds {
        reads_meta: true,
        reads_time: true,
        keeps_flow_state: Some(pktwarp_flow::ENTRY_SIZE as u32),
        ..StageNeeds::NONE
    },
    drop_reasons: &[],
    counters: &COUNTER_NAMES,
    gpu: GpuImpl::Library {
        function: "pw_stage_conntrack",
    },
    reloads: false,
};

/// Queues with a table of their own (see [`FlowTables`]).
pub use crate::stage::flow_tables::MAX_QUEUES;

/// Bytes of the GPU parameter block (`pw_ct_params` of conntrack_stage.cuh).
pub const GPU_BLOCK: usize = 176;
/// Where the executor writes the per-queue state's base address (u64) and queue count (u32 at
/// +8) in the block (`pktwarp_kernels::KernelImage::queue_state`).
pub const GPU_STATE_AT: usize = 0;

/// The GPU parameter block of `config` (`pw_ct_params`): the state's base and queue count
/// (written by the executor), one queue's table bytes, and the table's parameters
/// (`pw_flow_table`, its entry address left 0: the kernel computes its queue's).
/// `ring_cap`: slots of the ended-flow ring after each queue's table (0: none; see
/// [`ConntrackStage::gpu_ring_cap`]), at byte 12.
pub fn gpu_block(config: &FlowConfig, ring_cap: u32) -> Vec<u8> {
    let mut b = vec![0u8; GPU_BLOCK];
    b[12..16].copy_from_slice(&ring_cap.to_le_bytes());
    b[16..24].copy_from_slice(&queue_state_bytes(config, ring_cap).to_le_bytes());
    let abi = pktwarp_flow::FlowTableAbi {
        entries: 0,
        nbuckets: (config.entries / pktwarp_flow::BUCKET_ENTRIES as u64) as u32,
        seed: config.hash_seed,
        strict: config.strict as u32,
        reserved: 0,
        timeout_ns: config.timeouts.to_ns_array(),
    };
    b[24..32].copy_from_slice(&abi.entries.to_le_bytes());
    b[32..36].copy_from_slice(&abi.nbuckets.to_le_bytes());
    b[36..40].copy_from_slice(&abi.seed.to_le_bytes());
    b[40..44].copy_from_slice(&abi.strict.to_le_bytes());
    b[44..48].copy_from_slice(&abi.reserved.to_le_bytes());
    for (i, t) in abi.timeout_ns.iter().enumerate() {
        b[48 + 8 * i..56 + 8 * i].copy_from_slice(&t.to_le_bytes());
    }
    b
}

/// Bytes of one queue's state on the GPU: its table's entries (128 bytes each), then its
/// ended-flow ring when it has one (`ring_cap` slots: `pktwarp_flow::ring`).
pub fn queue_state_bytes(config: &FlowConfig, ring_cap: u32) -> u64 {
    let ring = if ring_cap == 0 {
        0
    } else {
        pktwarp_flow::ring::ring_bytes(ring_cap) as u64
    };
    pktwarp_flow::bytes_needed(config.entries).saturating_add(ring)
}

/// The stage: its config and one table per queue ([`FlowTables`], which a `flow_stats` stage of
/// the same pipeline shares).
pub struct ConntrackStage {
    tables: Arc<FlowTables>,
    /// The GPU executor's tables' counters (device, folded in as they grow), in
    /// [`COUNTER_NAMES`] order.
    gpu: [AtomicU64; 6],
}

impl ConntrackStage {
    /// Checks the config and makes queue 0's table (so a table that cannot be had is an error
    /// at start, not in the data path).
    pub fn new(config: &FlowConfig) -> anyhow::Result<ConntrackStage> {
        Ok(ConntrackStage {
            tables: Arc::new(FlowTables::new(config, "conntrack")?),
            gpu: Default::default(),
        })
    }

    pub fn config(&self) -> &FlowConfig {
        self.tables.config()
    }

    /// The tables, for a `flow_stats` stage that exports their flows.
    /// Slots of each queue's ended-flow ring on the GPU: a `flow_stats` stage exports this
    /// table's flows (it turned the tables' reporting on), else 0 (no ring).
    pub fn gpu_ring_cap(&self) -> u32 {
        crate::stage::flow_stats_gpu::gpu_ring_cap(&self.tables)
    }

    /// The GPU parameter block ([`gpu_block`]) of this stage.
    pub fn gpu_block(&self) -> Vec<u8> {
        gpu_block(self.config(), self.gpu_ring_cap())
    }

    /// Bytes of one queue's GPU state ([`queue_state_bytes`]) of this stage.
    pub fn queue_state_bytes(&self) -> u64 {
        queue_state_bytes(self.config(), self.gpu_ring_cap())
    }

    pub fn tables(&self) -> &Arc<FlowTables> {
        &self.tables
    }

    /// Applies one frame to its queue's table and writes its state into `meta`.
    #[inline]
    pub fn apply(&self, desc: &FrameDesc, frame: &[u8], meta: &mut PacketMeta) {
        let Some(t) = self.tables.table(desc.queue) else {
            meta.ct_state = pktwarp_flow::ct::UNTRACKED;
            meta.ct_dir = 0;
            return;
        };
        lock(t).apply(meta, frame, desc.timestamp_ns).store(meta);
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
            self.tables.table(queues[0])
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
        let mut t = lock(t);
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
                r.store(m);
            }
        } else {
            for i in (0..n).filter(|&i| alive >> i & 1 != 0) {
                let r = t.apply(&metas[i], frames[i], times[i]);
                r.store(&mut metas[i]);
            }
        }
    }

    /// Adds growth of the GPU tables' counters (in [`COUNTER_NAMES`] order).
    pub fn add_gpu_counters(&self, grown: &[u64]) {
        for (c, g) in self.gpu.iter().zip(grown) {
            c.fetch_add(*g, Ordering::Relaxed);
        }
    }

    /// The counters over every queue's table (the GPU executor's too).
    pub fn flow_counters(&self) -> FlowCounters {
        let g = |i: usize| self.gpu[i].load(Ordering::Relaxed);
        let c = self.tables.counters();
        FlowCounters {
            created: c.created + g(0),
            expired: c.expired + g(1),
            early_evicted: c.early_evicted + g(2),
            table_full: c.table_full + g(3),
            untracked: c.untracked + g(4),
            invalid: c.invalid + g(5),
        }
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
        self.tables.flows()
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
        run_meta(s, queue, f).ct_state
    }

    fn run_meta(s: &ConntrackStage, queue: u16, f: &(Vec<u8>, PacketMeta)) -> PacketMeta {
        let d = FrameDesc {
            queue,
            len: f.0.len() as u32,
            timestamp_ns: 1_000_000_000,
            ..FrameDesc::default()
        };
        let mut m = f.1;
        s.apply(&d, &f.0, &mut m);
        m
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

    #[test]
    fn direction_goes_into_the_metadata() {
        let s = stage(64);
        let (c, srv) = (([10, 0, 0, 1], 40000), ([192, 0, 2, 1], 80));
        let (syn, synack, ack) = (tcp(c, srv, 0x02), tcp(srv, c, 0x12), tcp(c, srv, 0x10));
        // 1 from the SYN's side (the originator), 2 the reply; 0 when not tracked (queue 1
        // has no flow for a SYN+ACK).
        let dirs = [&syn, &synack, &ack].map(|f| run_meta(&s, 0, f).ct_dir);
        assert_eq!(dirs, [1, 2, 1]);
        let m = run_meta(&s, 1, &synack);
        assert_eq!((m.ct_state, m.ct_dir), (ct::INVALID, 0));
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
