//! Flow export (`parse -> conntrack -> flow_stats -> count`, and `parse -> flow_stats -> count`
//! with a table of its own) on the GPU host side against the CPU executor: the same records (flows, packets and octets per direction, start and end, TCP
//! flags, end reason) as multisets, and the same counters. The stand-in plays the device as the
//! GPU does it: its own pipeline with the CUDA stages' work (conntrack's tables, `flow_stats`
//! doing nothing per frame: a `count` in its place), each queue's flows that end inside a frame's
//! visit moved into an ended-flow ring image after its table (cuda/flow.cuh's layout), the table
//! and ring read and written only through `read_queue_state` / `write_queue_state`. So records
//! reach the daemon's `flow_stats` stage only through the host side's drain, its quiet-queue
//! sweeps and its copy of the tables at the end (daemon::run_gpu::flow_export). The kernel
//! itself is pipeline/tests/flow_stats_cuda_host.rs, and on the GPU machine gpu_flow_stats.rs.

use super::*;
use crate::port::pcap::{CaptureWriter, WriteFormat};
use crate::stage::conntrack::ConntrackStage;
use pktwarp_flow::ipfix::{FlowQueue, FlowRecord as IpfixRecord};
use pktwarp_flow::ring;
use pktwarp_flow::{ef, FlowEntry, FlowRecord, ENDED_CAP};

/// The stand-in's flow tables and rings: the device pipeline's conntrack tables, and per queue
/// a ring image.
pub(super) struct DeviceFlows {
    /// The conntrack stage's position.
    pub k: usize,
    pipeline: Arc<Pipeline>,
    rings: Vec<Mutex<Vec<u8>>>,
}

/// A record's entry as the table held it (the inverse of `FlowRecord::of`).
fn entry_of(r: &FlowRecord) -> FlowEntry {
    let mut e = FlowEntry {
        key: r.key,
        state: r.tcp_state,
        tcp_flags: r.tcp_flags,
        last_seen_ns: r.last_seen_ns,
        first_seen_ns: r.first_seen_ns,
        packets: r.packets,
        bytes: r.bytes,
        ..FlowEntry::default()
    };
    e.flags = ef::OCCUPIED;
    if r.src == (r.key.addr[0], r.key.port[0]) {
        e.flags |= ef::ORIG_FROM_A;
    }
    if r.replied {
        e.flags |= ef::SEEN_REPLY;
    }
    if r.assured {
        e.flags |= ef::ASSURED;
    }
    e
}

impl DeviceFlows {
    /// Over the device pipeline `p` (its conntrack's tables report the flows that end).
    pub fn new(p: &Arc<Pipeline>, queues: usize) -> DeviceFlows {
        let k = p
            .stages
            .iter()
            .position(|s| matches!(s, Stage::Conntrack(_)))
            .expect("a conntrack stage");
        let d = DeviceFlows {
            k,
            pipeline: Arc::clone(p),
            rings: (0..queues)
                .map(|_| Mutex::new(ring::new_ring(ENDED_CAP as u32)))
                .collect(),
        };
        d.ct().tables().report_ended();
        d
    }

    fn ct(&self) -> &ConntrackStage {
        match &self.pipeline.stages[self.k] {
            Stage::Conntrack(c) => c,
            _ => unreachable!("position of a conntrack stage"),
        }
    }

    fn table_bytes(&self) -> usize {
        pktwarp_flow::bytes_needed(self.ct().config().entries) as usize
    }

    /// After a burst of queue `q` ran: the flows that ended go into its ring, as the kernel
    /// writes them (record, then its stamp; a full ring counts them lost).
    pub fn after_submit(&self, q: usize) {
        let Some(t) = self.ct().tables().table(q as u16) else {
            return;
        };
        let mut ended = Vec::new();
        t.lock().unwrap().take_ended(&mut ended);
        let mut r = self.rings[q].lock().unwrap();
        for (rec, why) in ended {
            let h = ring::header(&r).unwrap();
            if h.head - h.tail == u64::from(h.cap) {
                r[16..24].copy_from_slice(&(h.lost + 1).to_le_bytes());
                continue;
            }
            let bytes = ring::encode(&entry_of(&rec), why);
            // The stand-in's own check: the record decodes as the table reported it.
            assert_eq!(ring::decode(&bytes), Some((rec, why)));
            let (st, at) = ring::slot_offsets(h.cap, h.head);
            r[at..at + bytes.len()].copy_from_slice(&bytes);
            r[st..st + 8].copy_from_slice(&(h.head + 1).to_le_bytes());
            r[0..8].copy_from_slice(&(h.head + 1).to_le_bytes());
        }
    }

    /// `read_queue_state` of the conntrack stage: the table's bytes, then the ring.
    pub fn read(&self, q: usize, at: usize, len: usize) -> anyhow::Result<Vec<u8>> {
        let tb = self.table_bytes();
        let mut state = match self.ct().tables().table(q as u16) {
            Some(t) => t.lock().unwrap().as_bytes().to_vec(),
            None => anyhow::bail!("queue {q}: no table"),
        };
        state.extend_from_slice(&self.rings[q].lock().unwrap());
        anyhow::ensure!(
            at + len <= state.len(),
            "{len} bytes at {at} past the state"
        );
        assert!(at >= tb || at + len <= tb, "a read across the table's end");
        Ok(state[at..at + len].to_vec())
    }

    /// `write_queue_state` of the conntrack stage: whole buckets of the table (a sweep), or
    /// the ring's tail.
    pub fn write(&self, q: usize, at: usize, b: &[u8]) -> anyhow::Result<()> {
        let tb = self.table_bytes();
        if at >= tb {
            anyhow::ensure!(
                at - tb == ring::TAIL_AT && b.len() == 8,
                "only the ring's tail is the host's to write ({} bytes at {})",
                b.len(),
                at - tb
            );
            self.rings[q].lock().unwrap()[ring::TAIL_AT..ring::TAIL_AT + 8].copy_from_slice(b);
            return Ok(());
        }
        let bucket = pktwarp_flow::BUCKET_ENTRIES * pktwarp_flow::ENTRY_SIZE;
        anyhow::ensure!(at % bucket == 0, "a table write not at a bucket ({at})");
        let t = self.ct().tables().table(q as u16).expect("table");
        t.lock().unwrap().load_buckets((at / bucket) as u32, b)?;
        Ok(())
    }
}

/// The flow-export config on a capture of generated connection traffic; `device`: the
/// device's pipeline (`count` where `flow_stats` is: the CUDA stage does nothing per frame).
/// `own`: flow_stats with a table of its own (`parse -> flow_stats -> count`); the device's
/// pipeline then has `conntrack` in its place, with the same table: the CUDA stage is
/// conntrack's apply without the metadata store (cuda/flow_stats_stage.cuh), and nothing after
/// it reads the metadata.
fn config(dir: &Path, queues: u32, device: bool, own: bool) -> Prepared {
    const LONG: &str = "{ tcp_syn_sent: 86400, tcp_syn_recv: 86400, tcp_established: 86400, \
        tcp_fin_wait: 86400, tcp_close_wait: 86400, tcp_last_ack: 86400, tcp_time_wait: 86400, \
        tcp_close: 86400, tcp_syn_sent2: 86400, udp_unreplied: 86400, udp_replied: 86400, \
        icmp: 86400, other: 86400 }";
    let pcap = dir.join("flows.pcap");
    if !pcap.exists() {
        let frames = pktwarp_flow::testgen::generate(&pktwarp_flow::testgen::GenConfig {
            seed: 13,
            frames: 6000,
            concurrent: 64,
            idle_pct: 2,
            ..Default::default()
        });
        let mut w = CaptureWriter::create(&pcap, WriteFormat::Pcap, 65535).expect("capture");
        for f in &frames {
            w.write_frame(&f.bytes, f.bytes.len() as u32, f.time_ns)
                .expect("write");
        }
        w.flush().expect("flush");
    }
    // Nothing ages within the capture, nor an active timeout: what a sweep exports depends on
    // when it runs (wall clock) on either executor (docs/flow-export-gpu.md), so here the
    // sweeps run and export nothing, and the records are the rings' and the flush's. The
    // sweeps' records are held equal on the host build (flow_stats_cuda_host.rs).
    let table = format!("entries: 128, timeouts: {LONG}");
    let ipfix = if device {
        ""
    } else {
        "ipfix: { collector: \"127.0.0.1:4739\" }\n"
    };
    let stages = match (own, device) {
        (false, false) => {
            format!("  - conntrack: {{ {table} }}\n  - flow_stats: {{ active_timeout_s: 86400 }}\n")
        }
        (false, true) => format!("  - conntrack: {{ {table} }}\n  - count\n"),
        (true, false) => format!("  - flow_stats: {{ {table}, active_timeout_s: 86400 }}\n"),
        (true, true) => format!("  - conntrack: {{ {table} }}\n"),
    };
    let yaml = format!(
        "ports:\n  - name: wire\n    pcap:\n      rx: {{ path: {} }}\nqueues: {{ count: {queues}, \
         burst: 32, ring_slots: 8 }}\npipeline:\n  - parse\n{stages}  - count\n\
         {ipfix}executor: {{ kind: cpu }}\n",
        pcap.display(),
    );
    let cfg = config::parse_str(&yaml, &dir.join("c.yaml")).expect("config");
    prepare(cfg).expect("prepare")
}

fn fs_of(p: &Prepared) -> &crate::stage::flow_stats::FlowStatsStage {
    p.pipeline
        .stages
        .iter()
        .find_map(|s| match s {
            Stage::FlowStats(f) => Some(&**f),
            _ => None,
        })
        .expect("a flow_stats stage")
}

/// The records the stage made (the control thread's flush at the end included), sorted (no
/// exporter runs here: the stage's queue is a channel).
fn records(p: &Prepared, rx: &std::sync::mpsc::Receiver<IpfixRecord>) -> Vec<IpfixRecord> {
    fs_of(p).flush(&mut || {});
    let mut v: Vec<IpfixRecord> = rx.try_iter().collect();
    v.sort_by_key(|r| format!("{r:?}"));
    v
}

#[test]
fn flow_export_on_the_gpu_host_side_equals_the_cpu_executor() {
    same_as_cpu(false);
}

/// flow_stats with a table of its own (no conntrack), its tables and rings its own per-queue
/// state (the host side reads and writes stage 1's): the same records and counters as the CPU
/// executor's.
#[test]
fn flow_export_with_an_own_table_on_the_gpu_host_side_equals_the_cpu_executor() {
    same_as_cpu(true);
}

fn same_as_cpu(own: bool) {
    let dir = std::env::temp_dir().join(format!("pw-standin-fs-{own}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for queues in [1, 2] {
        let what = format!("{queues} queue(s), own table {own}");
        let cpu_p = config(&dir, queues, false, own);
        let (q, cpu_rx) = FlowQueue::channel(1 << 20);
        fs_of(&cpu_p).attach(q);
        let cpu = run_cpu_ref(&cpu_p, false);
        let want = records(&cpu_p, &cpu_rx);

        let p = config(&dir, queues, false, own);
        assert_eq!(p.pipeline.gpu_refusal(), None, "{what}");
        assert_eq!(fs_of(&p).owns_tables(), own, "{what}");
        let (q, gpu_rx) = FlowQueue::channel(1 << 20);
        fs_of(&p).attach(q);
        let device = config(&dir, queues, true, own);
        let mut dev = CpuStandIn::new(&device, 4, 1);
        let flows = DeviceFlows::new(&device.pipeline, queues as usize);
        // The host side reads the state of the stage that keeps the tables: conntrack's, or
        // flow_stats' own, at the same position on the device.
        let keeper = if own { "flow_stats" } else { "conntrack" };
        assert_eq!(p.pipeline.stages[flows.k].name(), keeper, "{what}");
        dev.flows = Some(flows);
        let shared = cpu::CpuShared::new(&p.cpu_spec());
        let (r, s) = run_host(&p, &dev, &shared, None);
        r.expect("host run");
        let got = records(&p, &gpu_rx);
        assert_same_counts(&s, &cpu.s, &what);
        assert!(want.len() > 200, "{what}: {} records", want.len());
        assert_eq!(want.len(), got.len(), "{what}: records");
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(w, g, "{what}");
        }
        assert_eq!(fs_of(&p).counters(), fs_of(&cpu_p).counters(), "{what}");
        // Evicted and reopened flows through the rings, live ones through the flush.
        let c = fs_of(&p).counters();
        for n in ["end_of_flow", "forced_end", "lack_of_resources"] {
            assert!(
                c.iter().any(|x| x.0 == n && x.1 > 0),
                "{what}: no {n}: {c:?}"
            );
        }
    }
}

/// A stand-in ring that a drain finds not holding (its tail past its head) fails the run with
/// the queue named, never a hang or a panic: over conntrack's tables and flow_stats' own.
#[test]
fn a_ring_that_does_not_hold_fails_the_run_naming_the_queue() {
    let dir = std::env::temp_dir().join(format!("pw-standin-fs-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for own in [false, true] {
        let p = config(&dir, 1, false, own);
        let device = config(&dir, 1, true, own);
        let mut dev = CpuStandIn::new(&device, 4, 1);
        let flows = DeviceFlows::new(&device.pipeline, 1);
        {
            let mut r = flows.rings[0].lock().unwrap();
            r[8..16].copy_from_slice(&5u64.to_le_bytes());
        }
        dev.flows = Some(flows);
        let shared = cpu::CpuShared::new(&p.cpu_spec());
        let (r, _) = run_host(&p, &dev, &shared, None);
        let e = format!("{:#}", r.expect_err("a ring that does not hold"));
        assert!(
            e.contains("queue 0") && e.contains("does not hold"),
            "own table {own}: {e}"
        );
    }
}
