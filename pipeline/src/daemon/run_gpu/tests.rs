//! The GPU host side's threading without a GPU: a stand-in device runs the CPU pipeline on each
//! submitted burst (its verdicts come back a few polls later, as a GPU's do), and the runs are
//! held equal to the CPU executor's on the same config: every count, and the TX order of each
//! queue.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::device::{PollFn, QueueDevice, TxView};
use super::*;
use crate::config;
use crate::counters::QueueCounters;
use crate::daemon::{open_ports, prepare, summarize};
use crate::executor::cpu;
use crate::executor::gpu::abi::{StageCounters, TxDesc, DROP_NONE};
use crate::executor::gpu::SubmitError;
use crate::meta::PacketMeta;
use crate::port::{PortError, TxPort};
use crate::stage::Stage;
use host_run::{accounted, dropped, handled, summarized};

/// A burst "on the GPU": its verdicts, the polls left before it is finished and, for a
/// pipeline that rewrites, its TX ring (descriptors, and the burst's data as the stages left it).
struct OnGpu {
    seq: u32,
    v: Vec<Verdict>,
    left: u32,
    /// Descriptors, the bytes of the burst's data in its ring slot, send times.
    tx: Option<(Vec<TxDesc>, usize, Vec<u64>)>,
}

/// What a released slot's data area is overwritten with: a frame sent after its slot was
/// released (or reused) shows it.
const RELEASED_FILL: u8 = 0xEE;

/// One stand-in queue: the bursts "on the GPU".
struct FakeQueue {
    next_seq: u32,
    on_gpu: VecDeque<OnGpu>,
    polls: u32,
    counters: QueueCounters,
    metas: Vec<PacketMeta>,
    verdicts: Vec<crate::verdict::Verdict>,
    /// Each ring slot's data area (the TX ring's frames as the stages left them), allocated
    /// once: a held slot's bytes never move.
    ring: Vec<Box<[u8]>>,
    /// Bursts reaped, and (holding slots) released in order; per slot the last burst released.
    reaped: u32,
    released: u32,
    marks: Vec<Option<u32>>,
}

/// A GPU stand-in: the CPU pipeline at submit, a ring of `slots` bursts per queue, verdicts
/// after `lag` polls, and optionally a kernel that stops at burst `fail_at` of queue 0.
struct CpuStandIn {
    pipeline: Arc<Pipeline>,
    slots: u32,
    slot_cap: usize,
    burst_max: usize,
    lag: u32,
    fail_at: Option<u32>,
    queues: Vec<Mutex<FakeQueue>>,
    published: Mutex<Vec<(u64, u32, u8)>>,
    /// Stage parameter sets published: (generation, blocks).
    params_published: Mutex<Vec<(u64, Vec<Vec<u8>>)>>,
    /// (queue, burst): that queue's kernel takes the burst and never finishes it, its
    /// heartbeat frozen, until stopped (the `test_stall` knob of the real executor).
    stall: Option<(usize, u32)>,
    /// Per queue: stopped for a restart.
    stopped: Vec<std::sync::atomic::AtomicBool>,
    /// Agrees to hold reaped slots for the TX thread (`hold_slots`), as the real executor does.
    can_hold: bool,
    holding: std::sync::atomic::AtomicBool,
    /// Frames in "GPU memory" (host memory standing in) copied into a slot and not yet given
    /// back by their port, by address; and how many were copied.
    gathered: Arc<Mutex<std::collections::HashSet<u64>>>,
    gathered_frames: std::sync::atomic::AtomicU64,
    corrupt: Option<sampled::Corrupt>,
    /// Reads frames from host memory (`host_frames`), and the bytes copied there so far.
    reads_host: bool,
    host_copied: std::sync::atomic::AtomicU64,
    /// The `rate_limit` tables' counters "on the device", by (stage, queue).
    rate_state: rate_limit::DeviceCounters,
    /// Plays mapped rings: a by-reference burst travels as the executor encodes it for one
    /// (`gather::by_reference`: a base address, each descriptor's offset from it) and its
    /// frames are read through that, as the kernel reads them (`PW_SLOT_REFS`), not gathered.
    mapped_refs: bool,
    read_in_place: std::sync::atomic::AtomicU64,
    /// Each `host_frames` store: (host address, bytes).
    stores: Mutex<Vec<(usize, usize)>>,
    /// The persistent kernel, as far as freeing the `host_frames` memory waits for it.
    kernel: Arc<rx_threads::StandInKernel>,
    /// Flow export's device state: conntrack's tables and their ended-flow rings.
    flows: Option<flow_stats::DeviceFlows>,
}

impl CpuStandIn {
    fn new(p: &Prepared, slots: u32, lag: u32) -> CpuStandIn {
        let stages = p.pipeline.stages.len();
        let rules = p.pipeline.rule_count();
        let shape = GpuSlots::of(&p.cfg);
        CpuStandIn {
            pipeline: Arc::clone(&p.pipeline),
            slots,
            // The daemon's slot shape (RX bursts gathered into larger slots).
            slot_cap: shape.frames * 2048,
            burst_max: shape.frames,
            lag,
            fail_at: None,
            queues: (0..p.cfg.queues.count)
                .map(|_| {
                    Mutex::new(FakeQueue {
                        next_seq: 0,
                        on_gpu: VecDeque::new(),
                        polls: 0,
                        counters: QueueCounters::new(stages, rules),
                        metas: Vec::new(),
                        verdicts: Vec::new(),
                        ring: (0..slots)
                            .map(|_| vec![0u8; shape.frames * 2048].into())
                            .collect(),
                        reaped: 0,
                        released: 0,
                        marks: vec![None; slots as usize],
                    })
                })
                .collect(),
            published: Mutex::new(Vec::new()),
            params_published: Mutex::new(Vec::new()),
            stall: None,
            stopped: (0..p.cfg.queues.count)
                .map(|_| std::sync::atomic::AtomicBool::new(false))
                .collect(),
            can_hold: true,
            holding: std::sync::atomic::AtomicBool::new(false),
            gathered: Arc::default(),
            gathered_frames: Default::default(),
            corrupt: None,
            reads_host: true,
            host_copied: Default::default(),
            rate_state: Default::default(),
            mapped_refs: false,
            read_in_place: Default::default(),
            stores: Mutex::default(),
            kernel: Arc::default(),
            flows: None,
        }
    }

    fn holds(&self) -> bool {
        self.holding.load(Ordering::Relaxed)
    }

    /// Whether queue `fq` has no free slot: every one holds a burst on the "GPU" or, holding
    /// slots, one reaped and not yet released.
    fn ring_full(&self, fq: &mut FakeQueue) -> bool {
        if !self.holds() {
            return fq.on_gpu.len() >= self.slots as usize;
        }
        while fq.released != fq.reaped
            && fq.marks[(fq.released % self.slots) as usize] == Some(fq.released)
        {
            fq.released += 1;
        }
        fq.next_seq - fq.released >= self.slots
    }

    /// Whether queue `q`'s kernel holds the stalled burst now.
    fn stalled(&self, q: usize, fq: &FakeQueue) -> bool {
        self.stall
            .is_some_and(|(sq, seq)| sq == q && fq.on_gpu.front().is_some_and(|b| b.seq == seq))
    }

    fn queue(&self, q: usize) -> std::sync::MutexGuard<'_, FakeQueue> {
        self.queues[q].lock().unwrap()
    }
}

// SAFETY: holding slots, a slot's data area (a boxed buffer that never moves) is written only by
// a submit into that slot, which waits for the release of its last burst (`ring_full`), and by
// the release itself; the stand-in outlives every run over it.
unsafe impl QueueDevice for CpuStandIn {
    fn slot_data_capacity(&self) -> usize {
        self.slot_cap
    }

    fn submit(&self, q: usize, burst: &Burst) -> Result<u32, SubmitError> {
        let mut fq = self
            .queues
            .get(q)
            .ok_or(SubmitError::NoQueue(q))?
            .lock()
            .unwrap();
        if burst.len() > self.burst_max || burst.data.len() > self.slot_cap {
            return Err(SubmitError::TooLarge {
                frames: burst.len(),
                bytes: burst.data.len(),
                max_frames: self.burst_max as u32,
                max_bytes: self.slot_cap as u32,
            });
        }
        if self.ring_full(&mut fq) {
            return Err(SubmitError::RingFull {
                queue: q,
                slots: self.slots,
            });
        }
        let slot = (fq.next_seq % self.slots) as usize;
        let FakeQueue {
            counters,
            metas,
            verdicts,
            ring,
            ..
        } = &mut *fq;
        // A rewriting pipeline runs on the GPU's copy of the burst, and its TX ring names
        // what to send from there (as the kernel's does).
        let tx = if self.pipeline.rewrites() || sets_send_time(&self.pipeline) {
            let mut b = burst.clone();
            self.pipeline
                .run_burst_mut(&mut b, metas, verdicts, counters);
            let descs: Vec<TxDesc> = b
                .descs
                .iter()
                .zip(verdicts.iter())
                .enumerate()
                .filter(|(_, (_, v))| v.action != crate::verdict::Action::Drop)
                .map(|(i, (d, v))| TxDesc {
                    offset: d.offset,
                    len: d.len,
                    frame: i as u16,
                    out_port: v.out_port,
                    action: v.action as u8,
                    ..TxDesc::default()
                })
                .collect();
            // The ring's send times (PW_TX_TIMES), one per descriptor, where a stage sets them.
            let times = if sets_send_time(&self.pipeline) {
                verdicts
                    .iter()
                    .filter(|v| v.action != crate::verdict::Action::Drop)
                    .map(|v| v.send_ns)
                    .collect()
            } else {
                Vec::new()
            };
            // The slot's data area takes the frames as the stages left them.
            let len = b.data.len().min(ring[slot].len());
            ring[slot][..len].copy_from_slice(&b.data[..len]);
            sampled::corrupt_bytes(self.corrupt, &mut ring[slot], &descs);
            Some((descs, len, times))
        } else {
            self.pipeline.run_burst(burst, metas, verdicts, counters);
            None
        };
        rate_limit::to_device(&self.pipeline, q, &self.rate_state);
        if let Some(f) = &self.flows {
            f.after_submit(q);
        }
        let mut v: Vec<Verdict> = verdicts
            .iter()
            .map(|v| Verdict {
                action: v.action as u8,
                drop_reason: v.reason.map_or(DROP_NONE, |r| r as u8),
                out_port: v.out_port,
                rule: v.rule,
                mark: v.mark,
            })
            .collect();
        sampled::corrupt_verdict(self.corrupt, &mut v);
        let seq = fq.next_seq;
        fq.next_seq += 1;
        fq.on_gpu.push_back(OnGpu {
            seq,
            v,
            left: self.lag,
            tx,
        });
        Ok(seq)
    }

    fn gpu_frames_refusal(&self, gpu: u32) -> Option<String> {
        (gpu != 0).then(|| format!("the stand-in is GPU 0, the frames are in GPU {gpu}'s memory"))
    }

    /// "Pinned" memory: a copy in host memory, its host address the "device address".
    fn host_frames(&self, bytes: &[u8]) -> Result<super::device::HostFrames, String> {
        if !self.reads_host {
            return Err("the stand-in was told not to read host memory".into());
        }
        let copy: Box<[u8]> = bytes.into();
        self.host_copied
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        use crate::executor::gpu::multi::HostFramesRead as Read;
        let read = [Read::Gathered, Read::InPlace][usize::from(self.mapped_refs)];
        let at = (copy.as_ptr() as usize, copy.len());
        self.stores.lock().unwrap().push(at);
        Ok(super::device::HostFrames {
            base: copy.as_ptr() as u64,
            host: copy.as_ptr(),
            len: copy.len(),
            keep: Box::new(rx_threads::StandInPinned::new(copy, &self.kernel)),
            read: read.describe(),
        })
    }

    /// A pinned pool's frames are host memory standing in for memory the GPU maps.
    fn pinned_frames(&self, gpu: u32) -> Result<&'static str, String> {
        if gpu != 0 || !self.reads_host {
            return Err("the stand-in was told not to read host memory".into());
        }
        use crate::executor::gpu::multi::HostFramesRead as Read;
        Ok([Read::Gathered, Read::InPlace][usize::from(self.mapped_refs)].describe())
    }

    /// Plays the gather: the "device addresses" are host addresses of the port's buffers.
    unsafe fn submit_gpu_frames(
        &self,
        q: usize,
        descs: &[crate::burst::FrameDesc],
        srcs: &[u64],
        bytes: usize,
    ) -> Result<u32, SubmitError> {
        crate::executor::gpu::gather::check(descs, srcs, bytes, self.slot_cap)
            .map_err(SubmitError::Gpu)?;
        let mut b = Burst::with_capacity(descs.len(), bytes);
        b.data.resize(bytes, 0);
        b.descs.extend_from_slice(descs);
        if self.mapped_refs {
            // SAFETY: the caller's promise, as below.
            unsafe { rx_threads::read_by_reference(descs, srcs, &mut b)? };
            let seq = self.submit(q, &b)?;
            self.read_in_place
                .fetch_add(descs.len() as u64, Ordering::Relaxed);
            return Ok(seq);
        }
        for (d, &src) in descs.iter().zip(srcs) {
            // SAFETY: the caller's promise: src..+len is the port's buffer, alive until reaped.
            let f = unsafe { std::slice::from_raw_parts(src as *const u8, d.len as usize) };
            b.data[d.offset as usize..][..f.len()].copy_from_slice(f);
        }
        let seq = self.submit(q, &b)?;
        // Copied into a slot (a refused burst's frames were not): the reap comes after this,
        // on this same queue thread.
        self.gathered.lock().unwrap().extend(srcs);
        self.gathered_frames
            .fetch_add(descs.len() as u64, Ordering::Relaxed);
        Ok(seq)
    }

    fn flush(&self, _q: usize) -> anyhow::Result<()> {
        Ok(())
    }

    fn poll(&self, q: usize, f: &mut PollFn<'_>) -> anyhow::Result<usize> {
        let mut fq = self.queue(q);
        fq.polls += 1;
        // Every burst on the "GPU" gets one poll nearer its end (they run side by side, as
        // CTAs do); the finished ones at the front are reaped, several at once when they are.
        for b in fq.on_gpu.iter_mut() {
            b.left = b.left.saturating_sub(1);
        }
        let mut n = 0;
        while let Some(b) = fq.on_gpu.front() {
            if self.stall == Some((q, b.seq)) {
                break;
            }
            if q == 0 && self.fail_at == Some(b.seq) {
                anyhow::bail!("queue {q}: persistent kernel stopped (stand-in)");
            }
            if b.left > 0 {
                break;
            }
            let slot = (b.seq % self.slots) as usize;
            let tx = b.tx.as_ref().map(|(descs, len, times)| TxView {
                descs,
                data: &fq.ring[slot][..*len],
                times,
            });
            f(b.seq, &b.v, tx);
            if !self.holds() {
                // Not held: the slot is free once its poll returned; what was there is gone.
                fq.ring[slot].fill(RELEASED_FILL);
            }
            fq.on_gpu.pop_front();
            fq.reaped += 1;
            n += 1;
        }
        Ok(n)
    }

    fn hold_slots(&self) -> bool {
        self.holding.store(self.can_hold, Ordering::Relaxed);
        self.can_hold
    }

    fn release(&self, q: usize, seq: u32) {
        let mut fq = self.queue(q);
        let slot = (seq % self.slots) as usize;
        assert!(
            seq < fq.reaped && fq.marks[slot].is_none_or(|m| m < seq),
            "queue {q}: burst {seq} released before it was reaped, or twice"
        );
        fq.marks[slot] = Some(seq);
        // Released: the slot may take the next burst; what was there is gone.
        fq.ring[slot].fill(RELEASED_FILL);
    }

    fn heartbeat(&self, q: usize) -> Option<u32> {
        let mut fq = self.queue(q);
        if self.stalled(q, &fq) {
            // A stalled kernel beats no more.
            fq.polls = fq.polls.saturating_sub(1);
        }
        Some(fq.polls)
    }

    fn read_queue_state(
        &self,
        k: usize,
        i: usize,
        q: usize,
        at: usize,
        len: usize,
    ) -> anyhow::Result<Vec<u8>> {
        match &self.flows {
            Some(f) if (k, i) == (f.k, 0) => f.read(q, at, len),
            _ => rate_limit::read(&self.pipeline, &self.rate_state, (k, i, q), at, len),
        }
    }

    fn write_queue_state(
        &self,
        k: usize,
        i: usize,
        q: usize,
        at: usize,
        b: &[u8],
    ) -> anyhow::Result<()> {
        match &self.flows {
            Some(f) if (k, i) == (f.k, 0) => f.write(q, at, b),
            _ => anyhow::bail!("stage {k}: no per-queue state {i} to write on the stand-in"),
        }
    }

    fn stop_queue(&self, q: usize) -> anyhow::Result<()> {
        self.stopped[q].store(true, Ordering::Relaxed);
        Ok(())
    }

    fn relaunch_queue(&self, q: usize) -> anyhow::Result<crate::executor::gpu::Restarted> {
        if !self.stopped[q].swap(false, Ordering::Relaxed) {
            anyhow::bail!("relaunch without stop");
        }
        let mut fq = self.queue(q);
        let lost = fq.on_gpu.pop_front().map(|b| (b.seq, b.v.len() as u32));
        if let Some((seq, _)) = lost {
            // Never handed to the caller: free at once, as the executor's relaunch does.
            let slot = (seq % self.slots) as usize;
            fq.reaped += 1;
            fq.marks[slot] = Some(seq);
        }
        Ok(crate::executor::gpu::Restarted { lost })
    }

    fn publish_acl(
        &self,
        tables: &AclTablesRef<'_>,
        generation: u64,
        default_action: u8,
    ) -> anyhow::Result<()> {
        let mut p = self.published.lock().unwrap();
        p.push((generation, tables.n_rules, default_action));
        Ok(())
    }

    fn publish_stage_params(&self, params: &[Vec<u8>], generation: u64) -> anyhow::Result<()> {
        let mut p = self.params_published.lock().unwrap();
        p.push((generation, params.to_vec()));
        Ok(())
    }

    /// What a composed kernel's counter blocks would hold: frames per stage and the count
    /// stage's bytes. A user stage's own counters stay 0: the stand-in ran its CPU
    /// implementation, which counted them already.
    fn stage_counters(&self) -> anyhow::Result<Vec<Vec<StageCounters>>> {
        Ok(self
            .queues
            .iter()
            .map(|fq| {
                let fq = fq.lock().unwrap();
                self.pipeline
                    .stages
                    .iter()
                    .enumerate()
                    .map(|(k, s)| {
                        let mut c = StageCounters::default();
                        c.v[0] = fq.counters.stage_frames[k].get();
                        if matches!(s, Stage::Count) {
                            c.v[crate::executor::gpu::abi::COUNT_CTR_BYTES] =
                                fq.counters.stage_bytes[k].get();
                        }
                        c
                    })
                    .collect()
            })
            .collect())
    }
}

/// Whether a stage sets send times (the real kernel writes them into its TX ring).
fn sets_send_time(p: &Pipeline) -> bool {
    p.stages.iter().any(|s| matches!(s, Stage::TxTime(_)))
}

/// Records every frame it is given and its send time (and can refuse all of them).
struct Recorder {
    frames: Arc<Mutex<Vec<Vec<u8>>>>,
    times: Arc<Mutex<Vec<u64>>>,
    fail: bool,
}

impl TxPort for Recorder {
    fn tx_burst_timed(
        &mut self,
        frames: &mut dyn Iterator<Item = crate::port::TimedFrame<'_>>,
    ) -> Result<crate::port::TxSent, PortError> {
        let mut times = Vec::new();
        let sent = self.tx_burst(&mut frames.map(|(f, t)| {
            times.push(t);
            f
        }))?;
        self.times.lock().unwrap().extend(times);
        Ok(crate::port::TxSent {
            sent,
            ..Default::default()
        })
    }

    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        if self.fail {
            return Err(PortError::Config("recorder refuses (test)".into()));
        }
        let mut v = self.frames.lock().unwrap();
        let before = v.len();
        v.extend(frames.map(<[u8]>::to_vec));
        Ok(v.len() - before)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn name(&self) -> &str {
        "recorder"
    }
}

fn configs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs")
}

/// A config whose relative paths resolve in the shipped configs folder.
fn prepared(yaml: &str) -> Prepared {
    let cfg = config::parse_str(yaml, &configs_dir().join("test.yaml")).expect("config");
    prepare(cfg).expect("prepare")
}

const INLINE: &str = "pipeline:\n  - parse\n  - acl: { rules: rules/inline-filter.rules.yaml, default: pass }\n  - count\nexecutor: { kind: cpu }\n";

fn gen_port(name: &str, count: u64, seed: u64, size: &str) -> String {
    format!(
        "  - name: {name}\n    gen: {{ count: {count}, size: {size}, seed: {seed}, malformed_ratio: 0.02, \
         flows: {{ src: 10.0.0.0/8, dst: 192.168.0.0/16, dst_ports: 1-1023, ipv6_share: 0.1 }} }}\n"
    )
}

/// What a run did: its summary and the frames it transmitted.
struct Run {
    s: Summary,
    tx: Vec<Vec<u8>>,
    /// The send time of each frame of `tx`.
    times: Vec<u64>,
}

fn run_cpu_ref(p: &Prepared, record: bool) -> Run {
    let spec = p.cpu_spec();
    let shared = cpu::CpuShared::new(&spec);
    let ports = open_ports(&p.cfg).expect("ports");
    let frames = Arc::new(Mutex::new(Vec::new()));
    let times = Arc::new(Mutex::new(Vec::new()));
    let tx: Option<Box<dyn TxPort>> = record.then(|| {
        Box::new(Recorder {
            frames: Arc::clone(&frames),
            times: Arc::clone(&times),
            fail: false,
        }) as Box<dyn TxPort>
    });
    let out = cpu::run(&spec, &shared, ports.rx, tx);
    let mut s = summarize(
        &shared.counters,
        &p.pipeline,
        out.elapsed,
        &p.choice,
        out.errors,
    );
    s.receive_threads = out.receive_threads;
    let tx = std::mem::take(&mut *frames.lock().unwrap());
    let times = std::mem::take(&mut *times.lock().unwrap());
    Run { s, tx, times }
}

/// The GPU host side over `dev` on `p`'s ports; `shared` is given to watch it from outside.
fn run_host(
    p: &Prepared,
    dev: &CpuStandIn,
    shared: &cpu::CpuShared,
    tx: Option<Recorder>,
) -> (anyhow::Result<()>, Summary) {
    let mut ports = open_ports(&p.cfg).expect("ports");
    let acl_on = p.pipeline.acl().is_some();
    let spec = host_spec(p, GpuSlots::of(&p.cfg), acl_on, 0);
    let mut out_ports =
        crate::port::out::OutPorts::single(tx.map(|t| Box::new(t) as Box<dyn TxPort>));
    // The persistent kernel runs from before the host side until after it (as run_gpu
    // starts and shuts down the executor around it); what `out` holds is dropped after.
    let (r, s, _pinned) = summarized(p, shared, || {
        dev.kernel.start();
        let out = host::run(dev, &spec, shared, &mut ports.rx, &mut out_ports);
        dev.kernel.stop();
        out
    });
    (r, s)
}

fn run_fake(p: &Prepared, slots: u32, lag: u32, record: bool) -> Run {
    let dev = CpuStandIn::new(p, slots, lag);
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let frames = Arc::new(Mutex::new(Vec::new()));
    let times = Arc::new(Mutex::new(Vec::new()));
    let rec = record.then(|| Recorder {
        frames: Arc::clone(&frames),
        times: Arc::clone(&times),
        fail: false,
    });
    let (r, s) = run_host(p, &dev, &shared, rec);
    r.expect("host run");
    for q in 0..p.cfg.queues.count as usize {
        assert!(dev.queue(q).on_gpu.is_empty(), "queue {q} drained");
        let c = &shared.counters[q];
        assert_eq!(
            c.in_flight_bursts.get(),
            0,
            "queue {q}: nothing in flight at the end"
        );
        assert!(c.kernel_heartbeat.get() > 0, "queue {q}: heartbeat read");
        if c.rx_frames.get() > 0 {
            assert!(
                c.burst_latency.count() > 0,
                "queue {q}: burst latency observed"
            );
        }
    }
    let tx = std::mem::take(&mut *frames.lock().unwrap());
    let times = std::mem::take(&mut *times.lock().unwrap());
    Run { s, tx, times }
}

use crate::testdata::assert_same_counts;

/// Each frame's queue (steering is a pure function of the frame).
fn by_queue(p: &Prepared, frames: &[Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
    let nq = p.cfg.queues.count as usize;
    let mut out = vec![Vec::new(); nq];
    let mut meta = PacketMeta::default();
    for f in frames {
        let (q, _) = p.steering.steer(f, &mut meta, nq);
        out[q].push(f.clone());
    }
    out
}

/// Fails with the first frame where two frame sequences differ (not the whole sequences).
fn assert_same_frames(a: &[Vec<u8>], b: &[Vec<u8>], what: &str) {
    let first = a.iter().zip(b).position(|(x, y)| x != y);
    assert!(
        first.is_none() && a.len() == b.len(),
        "{what}: {} vs {} frames, first difference at {first:?}",
        a.len(),
        b.len()
    );
}

#[test]
fn two_ports_three_queues_count_as_the_cpu_executor() {
    // Two ports: two ingest threads feed every queue.
    let yaml = format!(
        "ports:\n{}{}queues: {{ count: 3, burst: 32, ring_slots: 8 }}\n{INLINE}",
        gen_port("a", 6000, 1, "imix"),
        gen_port("b", 4000, 2, "100")
    );
    let p = prepared(&yaml);
    let cpu = run_cpu_ref(&p, true);
    assert_eq!(cpu.s.rx_frames, 10_000);
    assert!(cpu.s.tx_frames > 0 && cpu.s.acl_default > 0);
    for (slots, lag) in [(4, 0), (2, 3)] {
        let gpu = run_fake(&p, slots, lag, true);
        let what = format!("ring of {slots}, verdicts after {lag} polls");
        assert_same_counts(&gpu.s, &cpu.s, &what);
        // The interleaving of two ports is a race on both executors: the same frames left.
        let (mut g, mut c) = (gpu.tx.clone(), cpu.tx.clone());
        g.sort();
        c.sort();
        assert_same_frames(&g, &c, &what);
    }
}

#[test]
fn each_queue_transmits_in_receive_order() {
    let yaml = format!(
        "ports:\n{}queues: {{ count: 3, burst: 16, ring_slots: 4 }}\n{INLINE}",
        gen_port("a", 6000, 3, "imix")
    );
    let p = prepared(&yaml);
    let cpu = run_cpu_ref(&p, true);
    let gpu = run_fake(&p, 2, 2, true);
    assert_same_counts(&gpu.s, &cpu.s, "three queues");
    let (g, c) = (by_queue(&p, &gpu.tx), by_queue(&p, &cpu.tx));
    for q in 0..3 {
        assert!(!c[q].is_empty(), "queue {q} transmits");
        assert_same_frames(&g[q], &c[q], &format!("queue {q} TX order"));
    }
}

#[test]
fn send_times_reach_the_port_through_the_tx_ring() {
    // A composed pipeline that sets send times: the kernel's TX ring carries them
    // (its send-time array, PW_TX_TIMES) to the TX thread, which gives each frame's to its port, as the CPU
    // executor gives the verdict's. A replayed capture's receive times are the file's, so the
    // two runs' times can be compared.
    let cap = crate::testdata::multi_proto_pcap();
    let yaml = format!(
        "ports:\n  - name: in\n    pcap: {{ rx: {{ path: {}, loops: 40 }} }}\n\
         queues: {{ count: 2, burst: 16, ring_slots: 4 }}\n\
         pipeline:\n  - parse\n  - tx_time: {{ delay_ns: 1234 }}\n  - count\n\
         executor: {{ kind: cpu }}\n",
        cap.display()
    );
    let p = prepared(&yaml);
    let cpu = run_cpu_ref(&p, true);
    let gpu = run_fake(&p, 2, 1, true);
    assert_same_counts(&gpu.s, &cpu.s, "tx_time");
    assert!(!cpu.tx.is_empty());
    assert_eq!(cpu.times.len(), cpu.tx.len());
    assert!(
        cpu.times.iter().all(|t| *t > 1234),
        "every frame has a time"
    );
    let pair = |r: &Run| -> Vec<Vec<u8>> {
        r.tx.iter()
            .zip(&r.times)
            .map(|(f, t)| [f.as_slice(), &t.to_le_bytes()].concat())
            .collect()
    };
    let (mut g, mut c) = (pair(&gpu), pair(&cpu));
    g.sort();
    c.sort();
    assert_same_frames(&g, &c, "frames with their send times");
}

#[test]
fn one_port_one_queue_transmits_in_receive_order() {
    let yaml = format!(
        "ports:\n{}queues: {{ count: 1, burst: 16, ring_slots: 4 }}\n{INLINE}",
        gen_port("a", 3000, 5, "imix")
    );
    let p = prepared(&yaml);
    let cpu = run_cpu_ref(&p, true);
    let gpu = run_fake(&p, 2, 1, true);
    assert_same_counts(&gpu.s, &cpu.s, "one queue");
    assert_same_frames(
        &gpu.tx,
        &cpu.tx,
        "the CPU executor's output, frame by frame",
    );
}

#[test]
fn without_an_output_port_counts_still_equal() {
    let yaml = format!(
        "ports:\n{}queues: {{ count: 2, burst: 64 }}\n{INLINE}",
        gen_port("a", 8000, 7, "64")
    );
    let p = prepared(&yaml);
    let cpu = run_cpu_ref(&p, false);
    let gpu = run_fake(&p, 8, 2, false);
    assert_same_counts(&gpu.s, &cpu.s, "no output");
}

#[test]
fn on_full_drop_counts_every_refused_frame() {
    let yaml = format!(
        "ports:\n{}queues: {{ count: 2, burst: 8, ring_slots: 2, on_full: drop }}\n{INLINE}",
        gen_port("a", 6000, 9, "64")
    );
    let p = prepared(&yaml);
    // One burst on the "GPU" at a time, done only after 50 polls: the rings fill.
    let gpu = run_fake(&p, 1, 50, false);
    let s = &gpu.s;
    assert_eq!(s.rx_frames, 6000);
    let drop = |r: &str| s.drops.iter().find(|(n, _)| n == r).map_or(0, |d| d.1);
    assert!(drop("ring_full") > 0, "a full ring drops: {:?}", s.drops);
    assert_all_accounted(s, 6000);
}

/// Every frame of the run passed (or mirrored, or went to the host) or was dropped with a
/// reason, and the count stage saw the ones not dropped.
fn assert_all_accounted(s: &Summary, frames: u64) {
    assert_eq!(
        handled(s) + dropped(s),
        frames,
        "every frame passed or dropped with a reason"
    );
    assert_eq!(
        s.counted[0].1,
        handled(s),
        "count saw the frames not dropped"
    );
}

#[test]
fn on_full_wait_loses_nothing_behind_a_slow_gpu() {
    let yaml = format!(
        "ports:\n{}queues: {{ count: 2, burst: 8, ring_slots: 2, on_full: wait }}\n{INLINE}",
        gen_port("a", 3000, 9, "64")
    );
    let p = prepared(&yaml);
    let cpu = run_cpu_ref(&p, false);
    let gpu = run_fake(&p, 1, 20, false);
    assert_same_counts(&gpu.s, &cpu.s, "slow GPU, wait");
}

#[test]
fn frames_and_bursts_too_large_for_a_slot_are_counted_too_long() {
    let yaml = format!(
        "ports:\n{}queues: {{ count: 2, burst: 16 }}\n{INLINE}",
        gen_port("a", 4000, 11, "imix")
    );
    let p = prepared(&yaml);
    let mut dev = CpuStandIn::new(&p, 8, 0);
    // Room for a few small frames a burst: large IMIX frames (576, 1500 B) never fit.
    dev.slot_cap = 500;
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let (r, s) = run_host(&p, &dev, &shared, None);
    r.expect("host run");
    let too_long = s
        .drops
        .iter()
        .find(|(n, _)| n == "too_long")
        .map_or(0, |d| d.1);
    assert!(too_long > 0, "{:?}", s.drops);
    let handled: u64 = s
        .queues
        .iter()
        .map(|q| q.passed + q.mirrored + q.to_host)
        .sum();
    let dropped: u64 = s.drops.iter().map(|(_, n)| n).sum();
    assert_eq!(handled + dropped, 4000);
}

#[test]
fn a_stopped_kernel_fails_the_run_without_hanging() {
    let yaml = format!(
        "ports:\n{}queues: {{ count: 2, burst: 16, ring_slots: 4, on_full: wait }}\n{INLINE}",
        gen_port("a", 1_000_000, 13, "64")
    );
    let p = prepared(&yaml);
    let mut dev = CpuStandIn::new(&p, 4, 1);
    dev.fail_at = Some(5);
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let t = Instant::now();
    let (r, s) = run_host(&p, &dev, &shared, None);
    let e = r.expect_err("the run fails");
    assert!(format!("{e:#}").contains("queue 0"), "{e:#}");
    assert!(s.rx_frames < 1_000_000, "intake stopped early");
    assert!(t.elapsed().as_secs() < 30, "no hang: {:?}", t.elapsed());
}

#[test]
fn stop_drains_every_burst_in_flight() {
    // A generator without end: the run ends by `stop`, as on SIGTERM.
    let yaml = format!(
        "ports:\n{}queues: {{ count: 2, burst: 32 }}\n{INLINE}",
        gen_port("a", 100_000_000, 17, "64")
    );
    let p = prepared(&yaml);
    let dev = CpuStandIn::new(&p, 8, 3);
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let (r, s) = std::thread::scope(|sc| {
        sc.spawn(|| {
            while shared.rx_total.load(Ordering::Relaxed) < 5000 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            shared.stop.store(true, Ordering::Relaxed);
        });
        run_host(&p, &dev, &shared, None)
    });
    r.expect("host run");
    assert!(s.rx_frames >= 5000 && s.rx_frames < 100_000_000);
    accounted(&s, "every received frame has a verdict");
    for q in 0..2 {
        assert!(dev.queue(q).on_gpu.is_empty(), "queue {q} drained");
    }
}

#[test]
fn a_tx_error_counts_the_frames_and_names_the_port() {
    let yaml = format!(
        "ports:\n{}queues: {{ count: 2, burst: 16 }}\n{INLINE}",
        gen_port("a", 2000, 19, "64")
    );
    let p = prepared(&yaml);
    let dev = CpuStandIn::new(&p, 4, 0);
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let rec = Recorder {
        frames: Arc::default(),
        times: Arc::default(),
        fail: true,
    };
    let (r, s) = run_host(&p, &dev, &shared, Some(rec));
    r.expect("a TX error is reported, not fatal");
    assert_eq!(s.errors.len(), 1, "{:?}", s.errors);
    assert!(s.errors[0].starts_with("recorder: "), "{:?}", s.errors);
    let tx_err = s
        .drops
        .iter()
        .find(|(n, _)| n == "tx_error")
        .map_or(0, |d| d.1);
    let forwarded: u64 = s.queues.iter().map(|q| q.passed + q.mirrored).sum();
    assert_eq!(
        tx_err, forwarded,
        "every forwarded frame counted as tx_error"
    );
    assert_eq!(s.tx_frames, 0);
}

mod as_received;
mod composed;
mod conntrack;
#[cfg(feature = "dpdk")]
mod dpdk_mbufs;
#[cfg(feature = "dpdk")]
mod dpdk_pinned;
#[cfg(feature = "dpdk")]
mod dpdk_ports;
#[cfg(feature = "dpdk")]
mod dpdk_queues;
mod flow_stats;
mod gpu_frames;
mod held;
mod hooks;
mod host_run;
mod inspect;
mod poll_gate;
mod publish;
mod rate_limit;
mod restart;
mod rewrite;
mod rx_threads;
mod sampled;
mod slots;
mod tx_lanes;
mod wire_len;
