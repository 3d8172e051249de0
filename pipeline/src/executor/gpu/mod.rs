//! The GPU executor: queues in GPU memory (or mapped pinned host memory), persistent kernels that
//! poll them and run parse -> acl -> count, verdicts and counters back in host-visible memory.
//!
//! Per queue a burst ring of `ring_slots` slots (see the `@@gpu-queues@@` section of the ABI
//! header). Ingest for ports that are not GPUDirect NICs plays the NIC's part:
//! - `device` placement: the burst is written into a pinned staging slot, copied asynchronously
//!   into the ring slot in device memory, then the producer index is published in stream order
//!   after the copy (`cuStreamWriteValue32_v2` on the queue's non-blocking stream);
//! - `mapped` placement: the burst is written straight into the ring slot in pinned host memory
//!   and the producer index stored after a release fence; the kernel reads over PCIe.
//!
//! Modes: `persistent` (one CTA per queue polls its ring until the host sets the exit flag, or a
//! bounded idle wait passes), `launch` (one kernel per burst) and `graph` (a CUDA graph over
//! `graph_bursts` bursts), the latter two kept for comparison as l2fwd-nv does.
//!
//! ACL table hot swap ([`GpuExecutor::publish_acl`], see [`tables`]): every burst names its
//! table, generation and default action in its slot header, so a burst is classified wholly by
//! one table; a replaced table is freed once every queue has reaped past its last burst.
//! Several GPUs: [`multi::MultiGpu`], one executor per entry of `devices`.
//!
//! Nothing here panics on a machine without a GPU: [`probe`] and [`GpuExecutor::new`] return the
//! reason instead.

pub use pktwarp_core::abi;
pub mod compose;
pub mod driver;
pub mod kernels;
pub mod multi;
mod stages;
pub mod tables;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use abi::{QueueCounters, Verdict};
pub use bulk::{measure_htod, DeviceFrames};
pub use compose::image_for_pipeline;
use driver::{Context, DeviceBuffer, Function, Graph, Module, PinnedBuffer, Stream};
pub use driver::{DeviceInfo, Unavailable};
pub use gather::gather_copies;
pub use kernels::{KernelImage, LoadedFrom};
pub use options::{GpuOptions, Mode, Placement, TestStall};
pub use restart::Restarted;
use tables::{Retirement, TableVersion};
pub use tagged::tagged_stores_atomic;
use teardown::KernelMem;
pub use teardown::{abandoned_executors, KernelStillRunning};
pub use tx::Reaped;

/// Volatile read of one field of a queue's control block (the GPU writes it).
macro_rules! ctrl_get {
    ($b:expr, $field:ident) => {{
        let c = $b.host as *const $crate::executor::gpu::abi::QueueCtrl;
        // SAFETY: the pinned buffer holds one QueueCtrl for the executor's life; a volatile read
        // of a plain integer field.
        unsafe { ::std::ptr::read_volatile(::std::ptr::addr_of!((*c).$field)) }
    }};
}

/// Volatile store to one field of a queue's control block (the GPU reads it).
macro_rules! ctrl_set {
    ($b:expr, $field:ident, $v:expr) => {{
        let c = $b.host as *mut $crate::executor::gpu::abi::QueueCtrl;
        // SAFETY: as in ctrl_get; the host is this field's only writer.
        unsafe { ::std::ptr::write_volatile(::std::ptr::addr_of_mut!((*c).$field), $v) }
    }};
}

// After the macros: these modules use them.
mod bulk;
pub(crate) mod gather;
mod options;
mod reap;
mod restart;
mod setup;
mod stage_memory;
mod submit;
mod tagged;
mod teardown;
mod tx;

/// Is a GPU usable for `executor: auto`? The device description, or the reason not (never a
/// panic; safe on machines without an NVIDIA driver).
pub fn probe(device: u32) -> Result<DeviceInfo, Unavailable> {
    driver::probe(device)
}

/// What the executor checks of its options against the pipeline's kernel before it touches a
/// GPU: their ranges, the CTA rules of stages that keep ordered state, tagged queues and send
/// times. `pktwarp validate` runs it where there is no GPU, so a config the executor would
/// refuse is refused there too.
pub fn check_options(opts: &GpuOptions, image: &KernelImage) -> anyhow::Result<()> {
    opts.validate().map_err(anyhow::Error::msg)?;
    let opts = setup::one_cta_for_ordered_state(opts.clone(), image)?;
    setup::untagged_for_send_times(opts, image).map(drop)
}

/// The flat ACL tables for the GPU: the very bytes the CPU matcher walks.
#[derive(Clone, Copy, Debug)]
pub struct AclTablesRef<'a> {
    pub bytes: &'a [u8],
    /// Rules in the table (size of the per-rule hit counters).
    pub n_rules: u32,
}

/// What each queue runs.
#[derive(Clone, Copy, Debug)]
pub struct PipelineDesc<'a> {
    pub parse: bool,
    pub acl: Option<AclTablesRef<'a>>,
    pub count: bool,
    /// Action when no ACL rule matches (`ACTION_*`; the acl stage's `default`).
    pub default_action: u8,
}

impl PipelineDesc<'_> {
    fn flags(&self) -> u32 {
        let mut f = 0;
        if self.parse {
            // The CPU executor drops malformed frames at the parse stage; so does the GPU.
            f |= abi::PIPE_PARSE | abi::PIPE_DROP_MALFORMED;
        }
        if self.acl.is_some() {
            f |= abi::PIPE_ACL;
        }
        if self.count {
            f |= abi::PIPE_COUNT;
        }
        f
    }
}

/// Why `submit` did not take a burst. Every refusal is counted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SubmitError {
    #[error("ring of queue {queue} is full ({slots} bursts in flight)")]
    RingFull { queue: usize, slots: u32 },
    #[error("burst of {frames} frames / {bytes} bytes exceeds the slot ({max_frames} frames / {max_bytes} bytes)")]
    TooLarge {
        frames: usize,
        bytes: usize,
        max_frames: u32,
        max_bytes: u32,
    },
    #[error("no queue {0}")]
    NoQueue(usize),
    #[error("GPU error: {0}")]
    Gpu(String),
}

/// Host-side counters of one queue (refusals before the GPU saw anything).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct HostCounters {
    pub submitted_bursts: u64,
    pub submitted_frames: u64,
    pub ring_full_bursts: u64,
    pub ring_full_frames: u64,
    pub too_large_bursts: u64,
    pub too_large_frames: u64,
    /// Frames copied device to device from GPU memory into a slot (`submit_gpu_frames`).
    pub gathered_frames: u64,
    /// Frames a mapped ring's kernel read where they were, by reference (`submit_gpu_frames`
    /// on a mapped ring).
    pub read_in_place_frames: u64,
}

/// A snapshot of every queue's counters.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CountersSnapshot {
    pub queues: Vec<QueueCounters>,
    /// Per queue, each stage's counter block (composed pipelines; empty for the fused template,
    /// whose stages count in `queues`).
    pub stages: Vec<Vec<abi::StageCounters>>,
    pub host: Vec<HostCounters>,
    /// Per-rule hits over all queues (empty without an acl stage).
    pub rule_hits: Vec<u64>,
}

struct Queue {
    placement: Placement,
    /// Tagged words both ways ([`GpuOptions::tagged`]).
    tagged: bool,
    /// Tagged queue: the burst's image, assembled before it is written as tagged words.
    image: Vec<u8>,
    /// Tagged queue: the verdicts of the burst being reaped, untagged for the caller.
    tagged_verdicts: Vec<Verdict>,
    /// Ring slots in device memory (`device`) ...
    ring_dev: Option<DeviceBuffer>,
    /// ... or in mapped pinned memory (`mapped`).
    ring_mapped: Option<PinnedBuffer>,
    /// Pinned staging slots for `device` placement (one per ring slot: a slot's staging is
    /// rewritten only after its copy has been consumed).
    staging: Option<PinnedBuffer>,
    /// Producer index in device memory (`device` placement).
    prod_dev: Option<DeviceBuffer>,
    ctrl: PinnedBuffer,
    verdicts: PinnedBuffer,
    metas: Option<PinnedBuffer>,
    /// One pw_queue_counters per serving CTA (device memory).
    counters: DeviceBuffer,
    /// pw_stage_counters[MAX_STAGES] (device memory; composed template only).
    stage_counters: Option<DeviceBuffer>,
    n_counters: usize,
    /// done[slot] = seq + 1 once burst seq is finished (the completion handshake).
    done: PinnedBuffer,
    /// pw_burst_trace[slots] when `trace_bursts`.
    trace: Option<PinnedBuffer>,
    /// The TX ring (composed pipelines, untagged queues).
    tx: Option<setup::TxRing>,
    stream: Stream,
    graphs: Vec<Graph>,
    /// Frames in each slot (host copy, for reading verdicts back).
    slot_frames: Vec<u32>,
    /// Rule-set generation each slot's burst was classified with (host copy of its header).
    slot_gen: Vec<u64>,
    /// Frame bytes of each slot's burst (host copy of its header's data_bytes).
    slot_data: Vec<u32>,
    /// The TX descriptors of the burst being reaped.
    tx_scratch: Vec<abi::TxDesc>,
    /// Their send times (a pipeline that sets them).
    tx_times_scratch: Vec<u64>,
    /// The copy list of a burst whose frames are in GPU memory.
    gather: gather::Scratch,
    /// The ACL table the next burst submitted to this queue names (None without an acl stage).
    table: Option<Arc<TableVersion>>,
    /// Device address of the stage parameter table the next burst names (0: none, fused).
    params: u64,
    /// Between [`GpuExecutor::stop_queue`] and [`GpuExecutor::relaunch_queue`]: the queue's
    /// kernel is stopped on purpose, so polls reap what it finished without calling it an error.
    restarting: bool,
    /// Streams of the kernels relaunched for this queue (kept until shutdown waits for them).
    relaunched: Vec<Stream>,
    /// Bursts given up by restarts (reaped without a kernel ever finishing them).
    lost_bursts: u32,
    /// Bursts handed over (producer count).
    next_seq: u32,
    /// Bursts whose verdicts the host has read (their slots are free again, unless the
    /// executor holds reaped slots: [`GpuExecutor::hold_reaped_slots`]).
    reaped: u32,
    /// Holding reaped slots: bursts whose slots the caller released, in order (`<= reaped`).
    released: u32,
    /// Graph mode: bursts staged since the last launch, starting at `pending_start`.
    pending: u32,
    pending_start: u32,
    host: HostCounters,
}

// SAFETY: the raw pointers inside are to pinned memory owned by this struct; access is serialised
// by the executor's per-queue Mutex.
unsafe impl Send for Queue {}

/// The GPU executor.
pub struct GpuExecutor {
    opts: GpuOptions,
    pipeline_flags: u32,
    /// The stages rewrite frames in their ring slots (`PW_PIPELINE_WRITES`): a device ring's
    /// data area comes back to the host with the TX ring.
    frames_written: bool,
    default_action: u8,
    slot_bytes: u32,
    data_offset: u32,
    data_cap: u32,
    threads: u32,
    // Every field the kernels may read (or that holds such memory) is a `KernelMem`: freed by
    // the drop only once the kernels have returned, else leaked on purpose (see `teardown`).
    queues: KernelMem<Vec<Mutex<Queue>>>,
    qdescs: KernelMem<DeviceBuffer>,
    /// The ACL table in force (named by every burst submitted from now on).
    current: KernelMem<Mutex<Option<Arc<TableVersion>>>>,
    /// Replaced ACL tables and stage parameter sets still named by bursts in flight.
    retired: KernelMem<Mutex<Retirement<Retired>>>,
    /// `retired.len()`, readable without the lock (poll checks it on every call).
    retired_len: AtomicUsize,
    /// Reaped slots stay out of reuse until released ([`GpuExecutor::hold_reaped_slots`]).
    hold: AtomicBool,
    /// Per queue, per slot: `seq + 1` once burst `seq` of that slot was released (written by
    /// the caller's sending thread without the queue's lock; read by submit).
    releases: Vec<Box<[AtomicU32]>>,
    kernel_stream: KernelMem<Stream>,
    /// Side copies (counter reads) that must not wait for the persistent kernel.
    aux_stream: KernelMem<Stream>,
    /// Pinned memory the host side's small reads of stage buffers go through (a stage's
    /// host side's several reads a poll), made on first use. No kernel is given it.
    read_bounce: Mutex<Option<driver::PinnedBuffer>>,
    f_persistent: Function,
    f_burst: Function,
    f_burst_slot: Function,
    f_bulk: Function,
    persistent_running: bool,
    /// A shutdown timed out with a kernel still running: the drop looks once more and leaks
    /// the memory if it still runs, without waiting again.
    abandoned: bool,
    /// How long a shutdown (and the drop, when no shutdown ran) waits for the kernels to return
    /// after the exit flag ([`GpuExecutor::set_stop_wait`]).
    stop_wait: std::time::Duration,
    pub loaded_from: LoadedFrom,
    /// The stages the module runs; composed template: their parameter blocks on the device.
    stage_specs: Vec<pktwarp_kernels::StageSpec>,
    /// The first parameter set (named by the queue descriptors, so kept for the executor's
    /// life); bursts name the set in force in their slot header.
    stage_params: KernelMem<Option<Arc<stages::StageParams>>>,
    /// The parameter set in force (the first one until a reload publishes another).
    params_current: KernelMem<Mutex<Option<Arc<stages::StageParams>>>>,
    /// The stages' own device buffers (kept across parameter reloads).
    stage_buffers: KernelMem<stages::StageBuffers>,
    // Freed last: everything above lives in this context.
    module: KernelMem<Module>,
    ctx: KernelMem<Context>,
}

fn round_up(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}

fn gpu_err(e: impl std::fmt::Display) -> SubmitError {
    SubmitError::Gpu(e.to_string())
}

impl GpuExecutor {
    pub fn device(&self) -> &DeviceInfo {
        &self.ctx.info
    }

    pub fn options(&self) -> &GpuOptions {
        &self.opts
    }

    pub fn n_queues(&self) -> usize {
        self.queues.len()
    }

    /// Bytes of frame data one burst may carry.
    pub fn slot_data_capacity(&self) -> u32 {
        self.data_cap
    }

    /// Persistent CTAs this executor keeps resident (0 in `launch` / `graph` mode).
    pub fn persistent_ctas(&self) -> usize {
        if self.opts.mode == Mode::Persistent {
            self.queues.len() * self.opts.ctas_of_queue()
        } else {
            0
        }
    }

    fn current_table(&self) -> Option<Arc<TableVersion>> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Rule-set generation of the ACL table in force (0 at start, or without an acl stage).
    pub fn acl_generation(&self) -> u64 {
        self.current_table().map_or(0, |t| t.generation)
    }

    /// Replaced ACL tables not yet freed (bursts in flight still name them).
    pub fn retired_tables(&self) -> usize {
        self.retired_len.load(Ordering::Relaxed)
    }

    /// Table hot swap: uploads `tables` to a fresh device buffer (with fresh per-rule hit
    /// counters sized for it) and makes every burst submitted from now on, on every queue, name
    /// it with `generation` and `default_action`. The table it replaces is freed once every
    /// queue has reaped past the last burst that named it. The running kernels are not touched.
    pub fn publish_acl(
        &self,
        tables: &AclTablesRef<'_>,
        generation: u64,
        default_action: u8,
    ) -> anyhow::Result<()> {
        if self.pipeline_flags & abi::PIPE_ACL == 0 {
            anyhow::bail!("the GPU executor runs no acl stage: no ACL table to swap");
        }
        if default_action as usize >= abi::ACTIONS {
            anyhow::bail!("ACL default action {default_action} is not an action");
        }
        let new = Arc::new(TableVersion::upload(
            &self.ctx,
            tables.bytes,
            tables.n_rules,
            generation,
            default_action,
        )?);
        let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let mut ends = Vec::with_capacity(self.queues.len());
        for qm in self.queues.iter() {
            let mut q = lock(qm);
            q.table = Some(Arc::clone(&new));
            // Bursts before this one named the old table.
            ends.push(q.next_seq);
        }
        if let Some(old) = cur.replace(new) {
            let mut r = self.retired.lock().unwrap_or_else(|p| p.into_inner());
            r.retire(Retired::Acl(old), ends);
            self.retired_len.store(r.len(), Ordering::Relaxed);
        }
        drop(cur);
        self.reclaim_tables();
        Ok(())
    }

    /// Frees the replaced tables no burst in flight names any more.
    fn reclaim_tables(&self) {
        let reaped: Vec<u32> = self.queues.iter().map(|q| lock(q).reaped).collect();
        let mut r = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        let freed = r.collect(&reaped);
        self.retired_len.store(r.len(), Ordering::Relaxed);
        drop(r);
        // Dropping the last reference frees the device buffer (stream-ordered).
        drop(freed);
    }
}

/// What a hot swap replaced, freed (on drop) once no burst in flight names it.
enum Retired {
    Acl(#[allow(dead_code)] Arc<TableVersion>),
    Params(#[allow(dead_code)] Arc<stages::StageParams>),
}

fn lock(m: &Mutex<Queue>) -> std::sync::MutexGuard<'_, Queue> {
    // A panic while holding the lock cannot leave the ring inconsistent in a way the GPU cares
    // about (indices are only advanced at the end), so a poisoned lock is used as is.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests;
