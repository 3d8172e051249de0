//! A prepared config on the GPU executor. The host side is arranged as the CPU executor is
//! ([`host`]): an ingest thread per receiving port plays the NIC (software steering into each
//! queue), a thread per queue submits that queue's bursts to its GPU ring and reaps its
//! verdicts, and a TX thread transmits the passed frames. Counters land in the same per-queue
//! counters as the CPU executor's, so the summary and the metrics read the same for both.

mod device;
mod flow_export;
mod gpu_ingest;
mod host;
mod ingest;
#[cfg(feature = "dpdk")]
mod mbufs;
mod queue;
mod reap;
mod reload;
mod stage_host;
mod tx;
mod verify;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use super::{summarize, OpenPorts, Prepared, Summary};
use crate::burst::Burst;
use crate::executor::cpu::CpuShared;
use crate::executor::gpu::abi::Verdict;
use crate::executor::gpu::multi::MultiGpu;
use crate::executor::gpu::{AclTablesRef, KernelImage, PipelineDesc};
use crate::stage::acl::AclStage;
use crate::stage::Pipeline;

/// A burst on its way through the host side: built by an ingest thread, submitted and reaped
/// by its queue's thread, transmitted by the TX thread, then back to its ingest thread.
pub(crate) struct Slot {
    pub burst: Burst,
    /// Its verdicts, copied out of the GPU's memory (counted on the queue thread).
    pub verdicts: Vec<Verdict>,
    /// What the TX thread sends, in order: the kernel's TX ring (composed pipelines: the
    /// burst's data then holds the frames as the stages left them), or the frames the verdicts
    /// forward, mirror or send to the host (built-in pipeline).
    pub tx: Vec<crate::executor::gpu::abi::TxDesc>,
    /// The send time of each entry of `tx` (the TX ring's, a pipeline that sets them); empty:
    /// send every one now.
    pub tx_times: Vec<u64>,
    /// The GPU slot it ran in, held for the TX thread until its frames are sent (a device
    /// that holds reaped slots, with an output port); None once released.
    pub ring: Option<RingHold>,
    /// The receive thread that owns it (a port's, or one queue's of a port split by queue;
    /// see `host`): the index of the channel it goes back on.
    pub owner: usize,
    /// When the ingest handed it to its queue (burst latency: verdicts read - this).
    pub handed: Instant,
    /// Frames in GPU memory (a GPUDirect port received in place): each descriptor's device
    /// address (same index as `burst.descs`; `burst.data` stays empty) and the bytes of slot
    /// data area they take with their room. Empty for a burst in host memory.
    pub gpu_srcs: Vec<u64>,
    pub gpu_bytes: usize,
    /// The ports' hold on the buffers behind `gpu_srcs`, released once the burst is reaped
    /// (the GPU copied the frames out of them by then) or dropped before submit.
    pub holds: Vec<GpuHold>,
    /// The loaded frames `gpu_srcs` point into (a port's frames by reference): held until
    /// the TX thread has sent the burst, which reads the frames no stage changed there.
    pub store: Option<Arc<FrameStore>>,
    /// Set by the queue thread at the reap: no stage changed the frames (the pipeline does not
    /// rewrite), so the TX thread sends each from where it arrived (the store, or the burst the
    /// receive thread filled), not from the GPU slot.
    pub as_received: bool,
    /// The mbufs its frames arrived in, kept to be sent themselves (DPDK in and out: see
    /// `mbufs`); the TX entries that go as their mbuf are then left out of the copying TX.
    #[cfg(feature = "dpdk")]
    pub kept: mbufs::Kept,
    pub by_mbuf: bool,
    /// `gpu_srcs` are host addresses too (a DPDK port's pinned RX pool, mapped for the GPU at
    /// the same address): the TX thread reads a frame no stage changed there, while `kept`
    /// holds its mbuf.
    pub host_srcs: bool,
}

/// A received burst's buffers in GPU memory, shared by the slots its frames went to.
pub(crate) type GpuHold = Arc<std::sync::Mutex<Box<dyn Send>>>;

impl Slot {
    fn new(owner: usize, burst: usize) -> Slot {
        Slot {
            burst: Burst::with_capacity(burst, burst * 2048),
            verdicts: Vec::with_capacity(burst),
            tx: Vec::with_capacity(burst),
            tx_times: Vec::new(),
            ring: None,
            owner,
            handed: Instant::now(),
            gpu_srcs: Vec::new(),
            gpu_bytes: 0,
            holds: Vec::new(),
            store: None,
            as_received: false,
            #[cfg(feature = "dpdk")]
            kept: mbufs::Kept::default(),
            by_mbuf: false,
            host_srcs: false,
        }
    }

    /// Empties it for reuse (the buffers it held go back to their port).
    fn reset(&mut self) {
        self.burst.clear();
        self.verdicts.clear();
        self.release();
    }

    /// Gives back the buffers in GPU memory and the store it held.
    fn release(&mut self) {
        self.gpu_srcs.clear();
        self.gpu_bytes = 0;
        self.holds.clear();
        self.store = None;
        self.as_received = false;
        #[cfg(feature = "dpdk")]
        self.kept.clear();
        self.by_mbuf = false;
        self.host_srcs = false;
    }
}

/// A port's loaded frames in host memory the device reads (by reference, see
/// [`device::HostFrames`]): the device address of its first byte, where the host reads the
/// same bytes, and the hold that keeps them allocated. The bytes never change while the run
/// lasts.
pub(crate) struct FrameStore {
    dev: u64,
    host: *const u8,
    len: usize,
    pub hold: GpuHold,
}

// SAFETY: the bytes are only read, never written after the store is made, and stay allocated
// while `hold` lives (FrameStore::new's contract).
unsafe impl Send for FrameStore {}
// SAFETY: as above: shared reads of bytes nobody writes.
unsafe impl Sync for FrameStore {}

impl FrameStore {
    /// The `len` bytes at `host`, which the device reads at `dev`, kept allocated by `hold`.
    ///
    /// # Safety
    /// `host..+len` is readable host memory holding the bytes the device reads at `dev..`,
    /// unchanged and allocated while `hold` lives.
    unsafe fn new(dev: u64, host: *const u8, len: usize, hold: GpuHold) -> FrameStore {
        FrameStore {
            dev,
            host,
            len,
            hold,
        }
    }

    /// The device address of byte `offset`.
    fn dev_addr(&self, offset: u32) -> u64 {
        self.dev + u64::from(offset)
    }

    /// The `len` bytes at device address `at`, read on the host; `None` outside the store.
    fn frame(&self, at: u64, len: usize) -> Option<&[u8]> {
        let off = usize::try_from(at.checked_sub(self.dev)?).ok()?;
        if off.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: off..off + len lies inside the store (checked), which stays allocated and
        // unchanged while self (and so `hold`) lives (FrameStore::new's contract).
        Some(unsafe { std::slice::from_raw_parts(self.host.add(off), len) })
    }
}

/// A reaped burst's GPU slot, out of reuse until the TX thread releases it
/// ([`QueueDevice::release`]): with a TX ring, the frames are sent from the slot's data area
/// as the stages left them (the mapped ring slot, or a device ring's staging slot), not from a
/// copy.
pub(crate) struct RingHold {
    pub q: usize,
    pub seq: u32,
    data: Option<(*const u8, usize)>,
}

// SAFETY: the pointer is only read (by the one thread that has the slot), and the memory it
// names stays put until the release (RingHold::new's contract).
unsafe impl Send for RingHold {}

impl RingHold {
    /// Burst `seq` of queue `q`, its frames in `data` when given.
    ///
    /// # Safety
    /// `data` must stay at its address, unchanged, until [`QueueDevice::release`] names
    /// `(q, seq)` (the device's contract after `hold_slots`), and the device must outlive this
    /// hold's reads: the host side's threads end before the device is dropped.
    unsafe fn new(q: usize, seq: u32, data: Option<&[u8]>) -> RingHold {
        RingHold {
            q,
            seq,
            data: data.map(|d| (d.as_ptr(), d.len())),
        }
    }

    /// The slot's frame bytes (with a TX ring).
    fn data(&self) -> Option<&[u8]> {
        // SAFETY: the slot is held (RingHold::new's contract) and only read while this
        // borrow lives; the TX thread releases it after its last read.
        self.data
            .map(|(p, n)| unsafe { std::slice::from_raw_parts(p, n) })
    }
}

/// Waits a little: spin, then yield, then (idle for long) sleep, giving the core away as the
/// CPU executor's threads do (CI runs every thread of a run on two cores).
fn wait_on(backoff: &Backoff) {
    if backoff.is_completed() {
        std::thread::sleep(Duration::from_micros(20));
    } else {
        backoff.snooze();
    }
}

/// Which built-in stages the config's pipeline has (the queue flags of the fused template; a
/// composed pipeline's order is its generated kernel's, checked when the image is made).
fn gpu_pipeline_flags(p: &Pipeline) -> anyhow::Result<(bool, bool, bool)> {
    if let Some(why) = p.gpu_refusal() {
        anyhow::bail!("{why}");
    }
    let names: Vec<String> = p.stage_names().iter().map(|n| n.to_string()).collect();
    let has = |stage: &str| names.iter().any(|n| n == stage);
    Ok((has("parse"), has("acl"), has("count")))
}

/// What the GPU runs for `p`: the one place the daemon builds a [`PipelineDesc`]. `acl` is the
/// pipeline's ACL stage as read once (`Pipeline::acl`) and `acl_bytes` its classifier image,
/// which the description borrows.
fn gpu_pipeline_desc<'a>(
    p: &Pipeline,
    acl: Option<&AclStage>,
    acl_bytes: Option<&'a [u8]>,
) -> anyhow::Result<PipelineDesc<'a>> {
    let (parse, acl_on, count) = gpu_pipeline_flags(p)?;
    Ok(PipelineDesc {
        parse,
        acl: match (acl, acl_bytes) {
            (Some(a), Some(bytes)) if acl_on => Some(AclTablesRef {
                bytes,
                n_rules: a.rule_count() as u32,
            }),
            _ => None,
        },
        count,
        default_action: acl.map_or(crate::verdict::Action::Pass, |a| a.default) as u8,
    })
}

/// The shape of the daemon's GPU rings. A queue's kernel takes one slot at a time, so a slot of
/// a few dozen frames caps a busy queue at what one slot's round trip allows (64-frame slots:
/// 9 Mpps on one queue of an H200, against 18 with 256-frame slots; BENCHMARKS.md). The RX
/// bursts (`queues.burst`) are therefore gathered into slots of `executor.gpu.burst_size` frames
/// (default 256) when that is larger; a partial slot still leaves as soon as its port goes quiet
/// (or after 100 us), so a light load keeps its latency. The ring keeps the frames in flight
/// `queues.ring_slots x queues.burst` allows (at least 2 slots): the memory a config asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GpuSlots {
    pub frames: usize,
    pub ring_slots: usize,
}

impl GpuSlots {
    pub(crate) fn of(cfg: &crate::config::Config) -> GpuSlots {
        let q = &cfg.queues;
        let burst = q.burst as usize;
        let frames = burst.max(cfg.executor.gpu.burst_size as usize);
        let in_flight = q.ring_slots as usize * burst;
        GpuSlots {
            frames,
            ring_slots: in_flight.div_ceil(frames).next_power_of_two().max(2),
        }
    }
}

/// The host side's view of a prepared config: `acl_on` when the GPU runs an acl stage, with
/// the tables of generation `acl_generation` at start.
fn host_spec(
    p: &Prepared,
    shape: GpuSlots,
    acl_on: bool,
    acl_generation: u64,
) -> host::HostSpec<'_> {
    let q = &p.cfg.queues;
    host::HostSpec {
        queues: q.count as usize,
        burst: q.burst as usize,
        slot_frames: shape.frames,
        ring_slots: shape.ring_slots,
        on_full: q.on_full,
        pipeline: &p.pipeline,
        steering: &p.steering,
        rx_threads: p.rx_threads(),
        acl_on,
        acl_generation,
        composed: crate::executor::gpu::compose::is_composed(&p.pipeline),
        params_generation: p.pipeline.params_generation(),
        verify: (
            crate::config::verify::sample_of(&p.cfg.verify),
            Arc::clone(&p.pipeline),
        ),
        by_reference: p.cfg.executor.gpu.by_reference,
        gate: None,
        #[cfg(feature = "dpdk")]
        mbufs: None,
        #[cfg(feature = "dpdk")]
        pinned: Vec::new(),
    }
}

/// The ports' loaded frames in pinned host memory (by reference), released after the
/// executor: a free of pinned memory waits for every kernel of the context, so freed while the
/// persistent kernel runs it stalls until that kernel's idle timeout (the run then ends that
/// late); and when the executor was left with a kernel still running (its memory leaked on
/// purpose, `abandoned_executors`), they are leaked too, as that kernel may still read them.
struct PinnedFrames {
    holds: Vec<GpuHold>,
    /// The process's abandoned executors: at the start of the run, and how to count them now.
    abandoned_at: u64,
    abandoned: fn() -> u64,
}

impl PinnedFrames {
    fn new() -> PinnedFrames {
        PinnedFrames::counting(crate::executor::gpu::abandoned_executors)
    }

    fn counting(abandoned: fn() -> u64) -> PinnedFrames {
        PinnedFrames {
            holds: Vec::new(),
            abandoned_at: abandoned(),
            abandoned,
        }
    }
}

impl Drop for PinnedFrames {
    fn drop(&mut self) {
        if !self.holds.is_empty() && (self.abandoned)() > self.abandoned_at {
            tracing::warn!(
                "the loaded frames' pinned memory stays allocated until the process exits: a \
                 GPU kernel may still read it"
            );
            std::mem::forget(std::mem::take(&mut self.holds));
        }
    }
}

/// Whether the received mbufs are sent themselves (DPDK in and out, `mbufs`); logged
/// (`event=forwarding_path`) where a DPDK port receives.
#[cfg(feature = "dpdk")]
fn mbuf_plan(p: &Prepared, ports: &OpenPorts) -> Option<mbufs::MbufPlan> {
    if ports.dpdk_rx.iter().all(Option::is_none) {
        return None;
    }
    match mbufs::plan(p, ports) {
        Ok(m) => {
            let input = mbufs::MbufPlan::names(&m.rx.iter().collect::<Vec<_>>());
            let output = mbufs::MbufPlan::names(&m.outputs());
            tracing::info!(
                event = "forwarding_path",
                path = "zero_copy",
                input = %input,
                output = %output,
                "GPU executor: DPDK {input} -> DPDK {output}, the received mbufs sent themselves \
                 where an input splits by RX queue",
            );
            Some(m)
        }
        Err(why) => {
            tracing::info!(event = "forwarding_path", path = "copy", reason = %why, "GPU executor forwarding by copy: {why}");
            None
        }
    }
}

/// The input DPDK ports whose RX pool is pinned host memory mapped for the GPU, by input
/// index (`None` for every other port): received by reference where they can (`host::feeds`).
#[cfg(feature = "dpdk")]
fn pinned_ports(ports: &OpenPorts) -> Vec<Option<crate::port::dpdk::DpdkPort>> {
    use crate::port::dpdk::BufferPlacement;
    ports
        .dpdk_rx
        .iter()
        .map(|p| {
            p.as_ref()
                .filter(|p| p.buffer_placement() == BufferPlacement::Pinned)
                .cloned()
        })
        .collect()
}

/// Runs a prepared config on the GPU executor (one executor per GPU of `executor.gpu.devices`,
/// queues round-robin, or one on `device`) until its input ends or `shared.stop`, drains the
/// bursts in flight and returns the summary.
pub fn run_gpu(
    p: &Prepared,
    shared: &Arc<CpuShared>,
    mut ports: OpenPorts,
    image: &KernelImage,
) -> anyhow::Result<Summary> {
    let setup = Instant::now();
    // Declared before the executor, so dropped after it on every path (its drop stops the
    // kernels, or leaks their memory when one still runs).
    let mut pinned = PinnedFrames::new();
    let mut opts = p.cfg.executor.gpu.clone();
    let shape = GpuSlots::of(&p.cfg);
    opts.burst_size = shape.frames as u32;
    opts.ring_slots = shape.ring_slots as u32;
    let acl = p.pipeline.acl();
    let acl_bytes = acl.as_ref().map(|a| a.gpu_image_bytes());
    let desc = gpu_pipeline_desc(&p.pipeline, acl.as_deref(), acl_bytes.as_deref())?;
    let acl_on = desc.acl.is_some();
    let mut gpu = MultiGpu::new(opts, desc, p.cfg.queues.count as usize, image)?;
    // The kernels' stop is bounded as the drain is: a kernel still running then leaves its
    // tables and rings allocated (never freed under it) and the run ends with a
    // KernelStillRunning error, which `pktwarp run` exits 3 for.
    gpu.set_stop_wait(Duration::from_millis(p.cfg.control.drain_timeout_ms));
    // The run's rates count from here: creating the context, loading the kernels, uploading the
    // tables and allocating the rings take a few hundred ms once, which would otherwise dominate
    // the rate of a short run.
    tracing::info!(
        "GPU executor ready in {:.3} s (context, kernels, tables, rings)",
        setup.elapsed().as_secs_f64()
    );
    let start = Instant::now();
    tracing::info!(
        event = "gpu_slots",
        frames = shape.frames,
        ring_slots = shape.ring_slots,
        "GPU slots of {} frames, {} a queue (RX bursts of {} gathered into them while the input is busy)",
        shape.frames,
        shape.ring_slots,
        p.cfg.queues.burst
    );
    let mut spec = host_spec(p, shape, acl_on, acl.as_ref().map_or(0, |a| a.generation));
    #[cfg(feature = "dpdk")]
    {
        spec.mbufs = mbuf_plan(p, &ports);
        spec.pinned = pinned_ports(&ports);
    }
    let mut dests = ports.take_out();
    // The stages' host sides work beside the host side (a poll thread), pacing its input
    // where they ask to.
    let (out, sides) = stage_host::with_stage_hosts(&p.pipeline, &mut gpu, |gpu, gate| {
        spec.gate = gate;
        let mut out = host::run(gpu, &spec, shared, &mut ports.rx, &mut dests);
        pinned.holds.append(&mut out.pinned);
        out
    })?;
    out.result?;
    // Drained, before shutdown: what the stages keep on the GPU is read back for the summary
    // and /metrics.
    stage_host::finish(&p.pipeline, &gpu, sides)?;
    gpu.shutdown()?;
    let mut s = summarize(
        &shared.counters,
        &p.pipeline,
        start.elapsed(),
        &p.choice,
        out.errors,
    );
    s.port_counters = ports
        .rx
        .iter()
        .map(|port| (port.name().to_string(), port.port_counters()))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    s.outputs = out.outputs;
    s.gpu_ingest = out.gpu_ingest;
    if out.tx.as_ref().is_some_and(|t| t.path == tx::MBUF) {
        s.forwarding = "zero_copy".into();
    }
    s.gpu_tx = out.tx;
    s.verify = shared.verify.summary();
    s.receive_threads = out.receive_threads;
    Ok(s)
}
