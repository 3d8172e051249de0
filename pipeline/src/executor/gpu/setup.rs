//! Building a GPU executor: its context, the kernel module and the functions it launches, the
//! slot layout, every queue's rings and buffers with the descriptor the kernels read; starting
//! the persistent kernel (or capturing the graphs) and stopping it.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::abi::{self, Desc, QueueCounters, QueueDesc, SlotHdr, Verdict};
use super::driver::{Context, DeviceBuffer, Function, Module, PinnedBuffer, Stream};
use super::tables::{Retirement, TableVersion};
use super::tagged::tagged_granules;
use super::teardown::{self, KernelMem, KernelOwner, KernelStillRunning, Teardown};
use super::{
    kernels, lock, round_up, stages, GpuExecutor, GpuOptions, HostCounters, KernelImage,
    LoadedFrom, Mode, PipelineDesc, Placement, Queue,
};
use crate::meta::PacketMeta;

/// Threads a block of a composed pipeline's persistent kernel (`PW_PERSISTENT_MAX_THREADS` in
/// kernels.cu).
const COMPOSED_MAX_THREADS: u32 = 256;

/// How long a shutdown waits for the kernels to return unless told ([`GpuExecutor::set_stop_wait`]).
const DEFAULT_STOP_WAIT: Duration = Duration::from_secs(10);

/// Carveout preference (percent of the most shared memory) asking for the most L1.
const CARVEOUT_MAX_L1: i32 = 0;

/// The loaded kernel module and the functions an executor launches from it.
struct Kernels {
    module: Module,
    loaded_from: LoadedFrom,
    f_persistent: Function,
    f_burst: Function,
    f_burst_slot: Function,
    f_bulk: Function,
}

/// A ring slot's layout in bytes, the same for every queue of an executor.
#[derive(Clone, Copy)]
struct SlotLayout {
    /// Most frames in one burst.
    burst_max: usize,
    /// Where the frame data starts: after the header and `burst_max` full-format descriptors.
    data_offset: usize,
    /// Bytes of frame data one burst may carry.
    data_cap: usize,
    slot_bytes: usize,
    /// Slots per ring.
    slots: usize,
}

impl SlotLayout {
    fn new(opts: &GpuOptions, n_queues: usize) -> anyhow::Result<SlotLayout> {
        let bm = opts.burst_size as usize;
        let data_offset = round_up(
            std::mem::size_of::<SlotHdr>() + bm * std::mem::size_of::<Desc>(),
            abi::SLOT_ALIGN,
        );
        let data_cap = opts.slot_data_capacity() as usize;
        let mut slot_bytes = round_up(data_offset + data_cap, abi::SLOT_ALIGN);
        if (0..n_queues).any(|q| opts.tagged_queue(q)) {
            // A tagged slot holds its image at 16 bytes per TAG_PAYLOAD payload bytes.
            let granules = tagged_granules(opts.image_max());
            slot_bytes = slot_bytes.max(round_up(16 * granules, abi::SLOT_ALIGN));
        }
        if slot_bytes > u32::MAX as usize {
            anyhow::bail!("executor: a slot of {slot_bytes} bytes is too large");
        }
        Ok(SlotLayout {
            burst_max: bm,
            data_offset,
            data_cap,
            slot_bytes,
            slots: opts.ring_slots as usize,
        })
    }
}

/// A queue's TX ring (mapped): `pw_tx_desc[slots * burst_max]` and the parts' count words.
pub(super) struct TxRing {
    /// The descriptors (`TxDesc[slots * burst_max]`), then, in a pipeline that sets send
    /// times, a `u64` send time per descriptor (`PW_TX_TIMES`).
    pub(super) descs: PinnedBuffer,
    pub(super) counts: PinnedBuffer,
    /// Byte offset of the send times in `descs`; `None`: the pipeline sets none.
    pub(super) times_at: Option<usize>,
}

/// A queue's ring memory: a device ring with its pinned staging and device producer index
/// (`device`), or a ring in mapped pinned memory (`mapped`).
struct Ring {
    ring_dev: Option<DeviceBuffer>,
    ring_mapped: Option<PinnedBuffer>,
    staging: Option<PinnedBuffer>,
    prod_dev: Option<DeviceBuffer>,
    /// The ring's device address (what the kernels read).
    addr: u64,
}

/// What the setup of every queue of one executor shares.
struct QueueSetup<'a> {
    ctx: &'a Context,
    opts: &'a GpuOptions,
    layout: SlotLayout,
    /// The pipeline's `PIPE_*` flags, before the per-queue ones (tagged, slot seq).
    flags: u32,
    composed: bool,
    default_action: u8,
    /// The ACL table the first bursts name.
    table: &'a Option<Arc<TableVersion>>,
    /// Device address of the composed stages' parameter table (0: none).
    stage_params: u64,
    /// Bytes the host leaves after every frame (`KernelImage::frame_room`).
    frame_room: u32,
    /// A stage sets send times: the TX ring carries them (`TxRing::times_at`).
    timed: bool,
}

impl QueueSetup<'_> {
    /// Queue `qi`'s ring, buffers and stream, and the descriptor the kernels read for it.
    fn new_queue(&self, qi: usize) -> anyhow::Result<(Queue, QueueDesc)> {
        let (ctx, opts) = (self.ctx, self.opts);
        let SlotLayout {
            burst_max: bm,
            data_offset,
            slot_bytes,
            slots,
            ..
        } = self.layout;
        let placement = opts.placement_of(qi);
        let tagged = opts.tagged_queue(qi);
        let ring = self.new_ring(placement, tagged)?;
        let ctrl = PinnedBuffer::new(ctx, abi::CTRL_SIZE)?;
        if let Some(t) = opts.test_stall.filter(|t| t.queue as usize == qi) {
            ctrl_set!(ctrl, stall_at, t.burst.wrapping_add(1));
        }
        let vsize = if tagged {
            abi::VERDICT_TAGGED_SIZE
        } else {
            std::mem::size_of::<Verdict>()
        };
        let verdicts = PinnedBuffer::new(ctx, slots * bm * vsize)?;
        if tagged {
            // SAFETY: as the ring (new_ring): tag 0 is no burst's.
            unsafe { ptr::write_bytes(verdicts.host, 0, slots * bm * vsize) };
        }
        let metas = if opts.emit_meta {
            Some(PinnedBuffer::new(
                ctx,
                slots * bm * std::mem::size_of::<PacketMeta>(),
            )?)
        } else {
            None
        };
        // One counter block per persistent CTA; one done word per slot and CTA of a burst.
        let ctas = if opts.mode == Mode::Persistent {
            opts.ctas_of_queue()
        } else {
            1
        };
        let counters = DeviceBuffer::new(ctx, ctas * std::mem::size_of::<QueueCounters>())?;
        counters.zero()?;
        let done = PinnedBuffer::new(ctx, slots * opts.parts() as usize * 4)?;
        let stage_counters = if self.composed {
            Some(stages::new_counters(ctx)?)
        } else {
            None
        };
        let tx = self.new_tx_ring(tagged)?;
        let trace = self.new_trace()?;
        let producer = match (&ring.prod_dev, placement) {
            (Some(p), Placement::Device) => p.ptr,
            _ => ctrl.dev, // &ctrl->producer, offset 0
        };
        let desc = QueueDesc {
            ring: ring.addr,
            producer,
            ctrl: ctrl.dev,
            verdicts: verdicts.dev,
            metas: metas.as_ref().map_or(0, |m| m.dev),
            counters: counters.ptr,
            // Ring bursts name their table in the slot header (hot swap), never here: a
            // replaced table is freed while the descriptor lives on.
            rule_hits: 0,
            acl_tables: 0,
            idle_timeout_ns: opts.idle_timeout_ms.saturating_mul(1_000_000),
            slots: slots as u32,
            burst_max: bm as u32,
            slot_bytes: slot_bytes as u32,
            data_offset: data_offset as u32,
            pipeline: if tagged {
                self.flags | abi::PIPE_TAGGED
            } else if placement == Placement::Mapped && opts.mode == Mode::Persistent {
                self.flags | abi::PIPE_SLOT_SEQ
            } else {
                self.flags
            },
            n_rules: 0,
            default_action: self.default_action,
            port_id: 0,
            queue_id: qi as u16,
            ctas: ctas as u32,
            done: done.dev,
            trace: trace.as_ref().map_or(0, |t| t.dev),
            stage_counters: stage_counters.as_ref().map_or(0, |b| b.ptr),
            stage_params: self.stage_params,
            tx: tx.as_ref().map_or(0, |t| t.descs.dev),
            tx_counts: tx.as_ref().map_or(0, |t| t.counts.dev),
            frame_room: self.frame_room,
            reserved3: 0,
        };
        let queue = Queue {
            placement,
            tagged,
            image: if tagged {
                Vec::with_capacity(opts.image_max())
            } else {
                Vec::new()
            },
            tagged_verdicts: Vec::new(),
            ring_dev: ring.ring_dev,
            ring_mapped: ring.ring_mapped,
            staging: ring.staging,
            prod_dev: ring.prod_dev,
            ctrl,
            verdicts,
            metas,
            counters,
            stage_counters,
            n_counters: ctas,
            done,
            trace,
            tx,
            stream: Stream::new(ctx)?,
            graphs: Vec::new(),
            slot_frames: vec![0; slots],
            slot_gen: vec![0; slots],
            slot_data: vec![0; slots],
            tx_scratch: Vec::new(),
            tx_times_scratch: Vec::new(),
            gather: Default::default(),
            table: self.table.clone(),
            params: self.stage_params,
            restarting: false,
            relaunched: Vec::new(),
            lost_bursts: 0,
            next_seq: 0,
            reaped: 0,
            released: 0,
            pending: 0,
            pending_start: 0,
            host: HostCounters::default(),
        };
        Ok((queue, desc))
    }

    /// The TX ring: a composed pipeline's kernel writes what to send (not in a tagged queue,
    /// whose verdicts arrive without the done word that orders the ring's words).
    fn new_tx_ring(&self, tagged: bool) -> anyhow::Result<Option<TxRing>> {
        if !self.composed || tagged {
            return Ok(None);
        }
        let (slots, bm) = (self.layout.slots, self.layout.burst_max);
        let ring = slots * bm * std::mem::size_of::<abi::TxDesc>();
        let times = if self.timed { slots * bm * 8 } else { 0 };
        let descs = PinnedBuffer::new(self.ctx, ring + times)?;
        let counts = PinnedBuffer::new(self.ctx, slots * self.opts.parts() as usize * 4)?;
        Ok(Some(TxRing {
            descs,
            counts,
            times_at: self.timed.then_some(ring),
        }))
    }

    /// The per-slot burst trace buffer, with `trace_bursts`.
    fn new_trace(&self) -> anyhow::Result<Option<PinnedBuffer>> {
        if !self.opts.trace_bursts {
            return Ok(None);
        }
        let bytes = self.layout.slots * std::mem::size_of::<abi::BurstTrace>();
        let t = PinnedBuffer::new(self.ctx, bytes)?;
        // SAFETY: a fresh host allocation of exactly this many bytes; no GPU work yet.
        unsafe { ptr::write_bytes(t.host, 0, bytes) };
        Ok(Some(t))
    }

    /// A queue's ring memory for `placement`, initialised so that no fresh slot reads as a
    /// burst.
    fn new_ring(&self, placement: Placement, tagged: bool) -> anyhow::Result<Ring> {
        let ctx = self.ctx;
        let SlotLayout {
            slot_bytes, slots, ..
        } = self.layout;
        let ring_bytes = slot_bytes * slots;
        Ok(match placement {
            Placement::Device => {
                let r = DeviceBuffer::new(ctx, ring_bytes)?;
                r.zero()?;
                let p = DeviceBuffer::new(ctx, 256)?;
                p.zero()?;
                let s = PinnedBuffer::new(ctx, ring_bytes)?;
                let addr = r.ptr;
                Ring {
                    ring_dev: Some(r),
                    ring_mapped: None,
                    staging: Some(s),
                    prod_dev: Some(p),
                    addr,
                }
            }
            Placement::Mapped => {
                let r = PinnedBuffer::new(ctx, ring_bytes)?;
                if tagged {
                    // Tag 0 everywhere: burst seq's tag is seq + 1, never 0 in the first lap.
                    // SAFETY: a fresh host allocation of exactly ring_bytes; no GPU work yet.
                    unsafe { ptr::write_bytes(r.host, 0, ring_bytes) };
                } else {
                    // Each slot's header names the lap before the first (seq = slot - slots),
                    // so a kernel polling for seq (PW_PIPE_SLOT_SEQ) never takes fresh memory
                    // for a burst.
                    for k in 0..slots {
                        let h = SlotHdr {
                            seq: (k as u32).wrapping_sub(slots as u32),
                            ..Default::default()
                        };
                        // SAFETY: slot k's header lies inside the new buffer; no GPU work yet.
                        unsafe {
                            ptr::write_unaligned(r.host.add(k * slot_bytes) as *mut SlotHdr, h)
                        };
                    }
                }
                let addr = r.dev;
                Ring {
                    ring_dev: None,
                    ring_mapped: Some(r),
                    staging: None,
                    prod_dev: None,
                    addr,
                }
            }
        })
    }
}

/// Loads the kernel module into `ctx`, checks it has the stages `pipeline` runs, picks the
/// persistent kernel, checks that the persistent CTAs fit the GPU (beside `beside_ctas` of other
/// executors) and sets the functions' carveout.
fn load_kernels(
    ctx: &Context,
    opts: &GpuOptions,
    pipeline: &PipelineDesc<'_>,
    image: &KernelImage,
    composed: bool,
    n_queues: usize,
    beside_ctas: usize,
) -> anyhow::Result<Kernels> {
    let (module, loaded_from) = kernels::load(ctx, image)?;
    if pipeline.acl.is_some() && !pipeline.parse {
        anyhow::bail!("the acl stage needs the parse stage before it on the GPU");
    }
    // Every queue tagged with small parse + acl bursts (the latency case): the persistent
    // kernel compiled with that path alone (pw_persistent_small; see kernels.cu).
    let small = opts.mode == Mode::Persistent
        && !composed
        && pipeline.parse
        && pipeline.acl.is_some()
        && opts.small_bursts()
        && (0..n_queues).all(|q| opts.tagged_queue(q));
    let f_persistent = if small {
        module.function(c"pw_persistent_small")?
    } else {
        module.function(c"pw_persistent")?
    };
    let f_burst = module.function(c"pw_burst")?;
    let f_burst_slot = module.function(c"pw_burst_slot")?;
    let f_bulk = module.function(c"pw_bulk")?;
    if pipeline.default_action as usize >= abi::ACTIONS {
        anyhow::bail!(
            "pipeline default action {} is not an action",
            pipeline.default_action
        );
    }
    tracing::info!(
        "GPU executor on {} (sm_{}{}, {} SMs): kernels from {} in {:.2} s; mode {:?}{}, {} queue(s)",
        ctx.info.name,
        ctx.info.compute_capability.0,
        ctx.info.compute_capability.1,
        ctx.info.multiprocessors,
        loaded_from.how,
        loaded_from.seconds,
        opts.mode,
        if small { " (small-burst kernel)" } else { "" },
        n_queues
    );
    if opts.mode == Mode::Persistent {
        let per_sm = f_persistent.occupancy(opts.threads())?;
        let fit = per_sm as usize * ctx.info.multiprocessors as usize;
        let want = opts.persistent_ctas(n_queues, beside_ctas);
        if want > fit {
            anyhow::bail!(
                "{n_queues} persistent queues x {} CTAs{} do not fit on GPU {} ({}: {fit} CTAs of {} threads at once)",
                opts.ctas_of_queue(),
                if beside_ctas > 0 { format!(" beside {beside_ctas} CTAs of other executors") } else { String::new() },
                opts.device,
                ctx.info.name,
                opts.threads()
            );
        }
        // The ACL walk reads its image through the SM's L1, which shares its SRAM with shared
        // memory: with no preference the driver gave these kernels a smaller L1 (measured on
        // the H200, 32-frame bursts: ~0.25 us slower at p50 than with the most L1, ~1 us
        // faster than with the most shared memory). Asked only when every persistent CTA
        // has an SM of its own, so the hint cannot cost CTAs that must run side by side.
        if want <= ctx.info.multiprocessors as usize {
            f_persistent.set_carveout(CARVEOUT_MAX_L1)?;
        }
    }
    // Launch / graph mode: one block per launch.
    f_burst.set_carveout(CARVEOUT_MAX_L1)?;
    f_burst_slot.set_carveout(CARVEOUT_MAX_L1)?;
    Ok(Kernels {
        module,
        loaded_from,
        f_persistent,
        f_burst,
        f_burst_slot,
        f_bulk,
    })
}

/// Logs a hint when a stage reads whole frames from a ring in mapped host memory: the
/// kernel then reads them across PCIe a few frames at a time.
fn placement_hint(opts: &GpuOptions, image: &KernelImage, n_queues: usize) {
    if image.stages.iter().any(|s| s.reads_payload())
        && (0..n_queues).any(|q| opts.placement_of(q) == Placement::Mapped)
    {
        tracing::info!(
            event = "placement_hint",
            "a stage of the pipeline ({}) reads whole frames: on mapped rings the kernel \
             reads them across PCIe a few frames at a time; executor.gpu.placement: device \
             moved about 4x the frames per second for a stage reading whole frames on the \
             H200 (BENCHMARKS.md)",
            image.pipeline
        );
    }
}

impl GpuExecutor {
    /// Sets up `n_queues` rings, loads the kernels and (mode `persistent`) starts one CTA per
    /// queue. Errors (no GPU, no usable kernel image, bad options) say why.
    pub fn new(
        opts: GpuOptions,
        pipeline: PipelineDesc<'_>,
        n_queues: usize,
        image: &KernelImage,
    ) -> anyhow::Result<GpuExecutor> {
        let mut ex = Self::new_beside(opts, pipeline, n_queues, image, 0)?;
        ex.start()?;
        Ok(ex)
    }

    /// As [`GpuExecutor::new`] on `opts.device`, where `beside_ctas` persistent CTAs of other
    /// executors will occupy the same GPU (they must all be resident at once), but without
    /// starting the persistent kernel: call [`GpuExecutor::start`] once every executor that
    /// shares the GPU is built. Loading a module into a context (and the synchronous setup
    /// copies) waits for the device's running kernels, so a second executor built on a GPU
    /// whose persistent kernel already runs would wait for that kernel's idle timeout.
    pub fn new_beside(
        opts: GpuOptions,
        pipeline: PipelineDesc<'_>,
        n_queues: usize,
        image: &KernelImage,
        beside_ctas: usize,
    ) -> anyhow::Result<GpuExecutor> {
        opts.validate().map_err(anyhow::Error::msg)?;
        if n_queues == 0 {
            anyhow::bail!("the GPU executor needs at least one queue");
        }
        let ctx = Context::new(opts.device)
            .map_err(|e| anyhow::anyhow!("executor gpu: no usable GPU: {e}"))?;
        let mut opts = one_cta_for_inspect(one_cta_for_ordered_state(opts, image)?, image);
        let composed = image.template == pktwarp_kernels::Template::Composed;
        placement_hint(&opts, image, n_queues);
        opts = untagged_for_send_times(opts, image)?;
        if opts.block_threads.is_none() {
            let t = opts.default_threads(n_queues, beside_ctas, ctx.info.multiprocessors as usize);
            // The composed template runs a thread per frame (no lookup groups to fill a
            // larger block) and its persistent kernel is built for 256 threads a block.
            opts.block_threads = Some(if composed {
                t.min(COMPOSED_MAX_THREADS)
            } else {
                t
            });
        } else if composed && opts.threads() > COMPOSED_MAX_THREADS {
            anyhow::bail!(
                "executor.gpu.block_threads {} is more than the {COMPOSED_MAX_THREADS} a composed \
                 pipeline's kernel ({}) is built for",
                opts.threads(),
                image.pipeline
            );
        }
        let k = load_kernels(
            &ctx,
            &opts,
            &pipeline,
            image,
            composed,
            n_queues,
            beside_ctas,
        )?;
        let layout = SlotLayout::new(&opts, n_queues)?;

        // Generation 0: the rule set the executor starts with; publish_acl brings later ones.
        let table = match pipeline.acl {
            Some(t) => Some(Arc::new(TableVersion::upload(
                &ctx,
                t.bytes,
                t.n_rules,
                0,
                pipeline.default_action,
            )?)),
            None => None,
        };
        let mut flags = pipeline.flags();
        if opts.emit_meta {
            flags |= abi::PIPE_META_OUT;
        }
        // A composed pipeline always counts its queue's outcomes (as the CPU executor does);
        // its stages count into their own blocks.
        if composed {
            flags |= abi::PIPE_COUNT;
        }
        let stage_buffers = stages::StageBuffers::allocate(&ctx, image, n_queues)?;
        let stage_params = stages::StageParams::initial(&ctx, image, &stage_buffers)?.map(Arc::new);

        let setup = QueueSetup {
            ctx: &ctx,
            opts: &opts,
            layout,
            flags,
            composed,
            default_action: pipeline.default_action,
            table: &table,
            stage_params: stage_params.as_ref().map_or(0, |p| p.table_addr()),
            frame_room: image.frame_room,
            timed: pktwarp_kernels::codegen::pipeline_sets_send_time(&image.stages),
        };
        let mut queues = Vec::with_capacity(n_queues);
        let mut descs = Vec::with_capacity(n_queues);
        for qi in 0..n_queues {
            let (q, d) = setup.new_queue(qi)?;
            descs.push(d);
            queues.push(q);
        }
        let qbytes = descs.len() * std::mem::size_of::<QueueDesc>();
        let qdescs = DeviceBuffer::new(&ctx, qbytes)?;
        // SAFETY: QueueDesc is repr(C) plain data; viewing the Vec as bytes is sound.
        let raw = unsafe { std::slice::from_raw_parts(descs.as_ptr() as *const u8, qbytes) };
        qdescs.upload(raw)?;

        let kernel_stream = Stream::new(&ctx)?;
        let releases = (0..n_queues)
            .map(|_| {
                (0..opts.ring_slots)
                    .map(|_| std::sync::atomic::AtomicU32::new(0))
                    .collect()
            })
            .collect();
        let mut ex = GpuExecutor {
            threads: opts.threads(),
            opts,
            pipeline_flags: flags,
            frames_written: composed && pktwarp_kernels::codegen::pipeline_writes(&image.stages),
            default_action: pipeline.default_action,
            slot_bytes: layout.slot_bytes as u32,
            data_offset: layout.data_offset as u32,
            data_cap: layout.data_cap as u32,
            queues: KernelMem::new(queues.into_iter().map(Mutex::new).collect()),
            qdescs: KernelMem::new(qdescs),
            current: KernelMem::new(Mutex::new(table)),
            retired: KernelMem::new(Mutex::new(Retirement::default())),
            retired_len: AtomicUsize::new(0),
            hold: std::sync::atomic::AtomicBool::new(false),
            releases,
            kernel_stream: KernelMem::new(kernel_stream),
            aux_stream: KernelMem::new(Stream::new(&ctx)?),
            read_bounce: Mutex::new(None),
            f_persistent: k.f_persistent,
            f_burst: k.f_burst,
            f_burst_slot: k.f_burst_slot,
            f_bulk: k.f_bulk,
            persistent_running: false,
            abandoned: false,
            stop_wait: DEFAULT_STOP_WAIT,
            loaded_from: k.loaded_from,
            stage_specs: image.stages.clone(),
            params_current: KernelMem::new(Mutex::new(stage_params.clone())),
            stage_params: KernelMem::new(stage_params),
            stage_buffers: KernelMem::new(stage_buffers),
            module: KernelMem::new(k.module),
            ctx: KernelMem::new(ctx),
        };
        if ex.opts.mode == Mode::Graph {
            ex.build_graphs()?;
        }
        Ok(ex)
    }

    /// Starts the persistent kernel (mode `persistent`; no-op otherwise or when running).
    pub fn start(&mut self) -> anyhow::Result<()> {
        if self.opts.mode == Mode::Persistent && !self.persistent_running {
            self.start_persistent()?;
        }
        Ok(())
    }

    fn start_persistent(&mut self) -> anyhow::Result<()> {
        self.ctx.bind()?;
        let mut qd = self.qdescs.ptr;
        let mut ctas = self.opts.ctas_per_queue;
        let mut parts = self.opts.parts();
        let mut params = [
            &mut qd as *mut u64 as *mut c_void,
            &mut ctas as *mut u32 as *mut c_void,
            &mut parts as *mut u32 as *mut c_void,
        ];
        // SAFETY: pw_persistent(const pw_queue_desc*, uint32_t, uint32_t); the array holds one
        // valid descriptor per queue and the grid is queues x ctas x parts blocks.
        unsafe {
            self.f_persistent.launch(
                &self.kernel_stream,
                self.queues.len() as u32 * ctas * parts,
                self.threads,
                &mut params,
            )?
        };
        self.persistent_running = true;
        // Wait until every CTA reports running, so the first burst's latency does not include
        // the kernel's start (bounded: a launch that never starts is an error).
        let t = Instant::now();
        for q in self.queues.iter() {
            let q = lock(q);
            loop {
                let st = ctrl_get!(q.ctrl, status);
                if st == abi::QSTATE_RUNNING {
                    break;
                }
                if st != abi::QSTATE_IDLE || t.elapsed() > Duration::from_secs(10) {
                    anyhow::bail!("persistent kernel did not start (queue state {st})");
                }
                if self.kernel_stream.is_idle()? {
                    anyhow::bail!("persistent kernel exited at start");
                }
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    fn build_graphs(&mut self) -> anyhow::Result<()> {
        self.ctx.bind()?;
        let g = self.opts.graph_bursts;
        let windows = self.opts.ring_slots / g;
        for (qi, q) in self.queues.iter().enumerate() {
            let mut q = lock(q);
            let mut graphs = Vec::with_capacity(windows as usize);
            for w in 0..windows {
                q.stream.begin_capture()?;
                let r: anyhow::Result<()> = (|| {
                    for k in 0..g {
                        let slot = w * g + k;
                        if let (Some(ring), Some(st)) = (&q.ring_dev, &q.staging) {
                            let off = slot as usize * self.slot_bytes as usize;
                            // SAFETY: both ranges lie inside their allocations (slot < slots).
                            unsafe {
                                q.stream.copy_htod(
                                    ring.ptr + off as u64,
                                    st.host.add(off),
                                    self.slot_bytes as usize,
                                )?
                            };
                        }
                        let mut qd = self.qdescs.ptr;
                        let mut qn = qi as u32;
                        let mut sl = slot;
                        let mut params = [
                            &mut qd as *mut u64 as *mut c_void,
                            &mut qn as *mut u32 as *mut c_void,
                            &mut sl as *mut u32 as *mut c_void,
                        ];
                        // SAFETY: matches pw_burst_slot(const pw_queue_desc*, uint32_t, uint32_t).
                        unsafe {
                            self.f_burst_slot
                                .launch(&q.stream, 1, self.threads, &mut params)?
                        };
                    }
                    Ok(())
                })();
                let graph = q.stream.end_capture();
                r?;
                graphs.push(graph?);
            }
            q.graphs = graphs;
        }
        Ok(())
    }

    /// How long [`GpuExecutor::shutdown`] (and the drop, when no shutdown ran) waits for the
    /// kernels to return after the exit flag; 10 s unless set (the daemon sets
    /// `control.drain_timeout_ms`).
    pub fn set_stop_wait(&mut self, wait: Duration) {
        self.stop_wait = wait;
    }

    /// Stops the persistent kernel (exit flag, then a wait of [`GpuExecutor::set_stop_wait`])
    /// and waits for all queued work. Idempotent. When a kernel has not returned by then the
    /// error is a [`KernelStillRunning`]: the executor's memory is then never freed under it
    /// (the drop leaks it, see `teardown`).
    pub fn shutdown(&mut self) -> anyhow::Result<()> {
        self.shutdown_by(Instant::now() + self.stop_wait)
    }

    /// [`GpuExecutor::shutdown`] with the wait ending at `deadline` (one deadline for every
    /// executor of a [`super::multi::MultiGpu`]).
    pub fn shutdown_by(&mut self, deadline: Instant) -> anyhow::Result<()> {
        self.ctx.bind()?;
        let t = Instant::now();
        if teardown::wait_stopped(self, deadline)? {
            self.persistent_running = false;
            self.abandoned = false;
            return Ok(());
        }
        self.abandoned = true;
        Err(KernelStillRunning {
            waited_ms: t.elapsed().as_millis() as u64,
        }
        .into())
    }
}

impl KernelOwner for GpuExecutor {
    fn request_stop(&mut self) {
        if self.persistent_running {
            for q in self.queues.iter() {
                let q = lock(q);
                ctrl_set!(q.ctrl, exit_flag, 1);
            }
        }
    }

    /// The first grid, the kernels of queues relaunched after a stall, and every queue's and
    /// side stream's queued work (launch / graph mode kernels, copies).
    fn kernels_idle(&self) -> anyhow::Result<bool> {
        self.ctx.bind()?;
        if !self.kernel_stream.is_idle()? || !self.aux_stream.is_idle()? {
            return Ok(false);
        }
        for q in self.queues.iter() {
            let q = lock(q);
            if !q.stream.is_idle()? {
                return Ok(false);
            }
            for s in &q.relaunched {
                if !s.is_idle()? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}

impl Drop for GpuExecutor {
    fn drop(&mut self) {
        // A shutdown that timed out already waited: one more look, no second wait.
        let deadline = if self.abandoned {
            Instant::now()
        } else {
            Instant::now() + self.stop_wait
        };
        let what = format!("GPU executor on device {}", self.opts.device);
        if teardown::release(self, deadline, &what) == Teardown::Leak {
            return;
        }
        // SAFETY: every kernel that reads these has returned (`release` waited for the
        // persistent grid, the relaunched kernels and every stream's work); each is freed once,
        // here, and never used after; in declaration order, the context that holds them last.
        unsafe {
            self.queues.free();
            self.qdescs.free();
            self.current.free();
            self.retired.free();
            self.kernel_stream.free();
            self.aux_stream.free();
            self.stage_params.free();
            self.params_current.free();
            self.stage_buffers.free();
            self.module.free();
            self.ctx.free();
        }
    }
}

/// A pipeline with a stage that keeps per-queue state in flow order (conntrack, rate_limit) runs
/// one CTA group per queue (`ctas_per_queue: 1`): the bursts of a queue one after another. By
/// default one CTA a burst, where cuda/flow_order.cuh orders a round's frames per flow (per
/// stage, on its own channel, where there are two such stages). Several
/// CTAs a burst (`burst_ctas: k`, persistent mode) take the owned layout
/// (cuda/kernels_owned.cu): each CTA applies the frames of its part of the table's buckets, so
/// they need a list whose key the kernel can name before the stage (codegen::pipeline_order_key)
/// and bursts of one round (burst_size <= the block's threads). More CTAs per queue (several
/// bursts at once), or a split by frame index, would apply frames of one flow out of order.
/// A pipeline with `inspect` and no `burst_ctas` set runs one CTA a burst: on an H100
/// (2026-12-07) the inspect pipeline with 4 CTAs a burst on device rings (the default for
/// bursts of at most 32 frames) differed from the CPU executor in 3,324 of 20,000 frames while
/// every 1-CTA configuration was equal, and the cause is not found yet
/// (`pipeline/tests/gpu_inspect.rs`, `gpu_device_ring_laps.rs` separate the factors). An
/// explicit `burst_ctas` is kept.
pub(super) fn one_cta_for_inspect(mut opts: GpuOptions, image: &KernelImage) -> GpuOptions {
    if opts.burst_ctas.is_none() && image.stages.iter().any(|s| s.name == "inspect") {
        if opts.parts() > 1 {
            tracing::warn!(
                event = "burst_ctas",
                burst_ctas = 1,
                default = opts.parts(),
                "executor.gpu.burst_ctas: 1 for a pipeline with `inspect` (more CTAs a burst \
                 are not yet proven equal to the CPU on the GPU; set burst_ctas to override)"
            );
        }
        opts.burst_ctas = Some(1);
    }
    opts
}

/// Send times reach the ports in the TX ring, which a tagged queue does not have: a pipeline
/// that sets them runs untagged, and `tagged: true` is refused.
pub(super) fn untagged_for_send_times(
    mut opts: GpuOptions,
    image: &KernelImage,
) -> anyhow::Result<GpuOptions> {
    if pktwarp_kernels::codegen::pipeline_sets_send_time(&image.stages) {
        if opts.tagged == Some(true) {
            anyhow::bail!(
                "executor.gpu.tagged: true, but the pipeline ({}) sets send times \
                 (tx_time), which travel in the TX ring that tagged queues do not have",
                image.pipeline
            );
        }
        opts.tagged = Some(false);
    }
    Ok(opts)
}

pub(super) fn one_cta_for_ordered_state(
    mut opts: GpuOptions,
    image: &KernelImage,
) -> anyhow::Result<GpuOptions> {
    let Some(s) = image.stages.iter().find(|s| s.orders_flows()) else {
        return Ok(opts);
    };
    if opts.ctas_per_queue != 1 {
        anyhow::bail!(
            "executor.gpu.ctas_per_queue: {}, but stage `{}` keeps per-queue state that frames \
             of one flow change in arrival order: it runs with ctas_per_queue: 1 (several CTAs \
             a burst, burst_ctas, split its state instead)",
            opts.ctas_per_queue,
            s.name
        );
    }
    match opts.burst_ctas {
        Some(k) if k > 1 && opts.mode == Mode::Persistent => {
            // A stage ordering state of its own on the second channel (inspect's flowbits and
            // thresholds, by source across flows) cannot be split by the flow's key.
            let second = image.stages.iter().enumerate().find(|(i, st)| {
                pktwarp_kernels::codegen::ORDERED_SECOND.contains(&st.function())
                    && image.queue_state.get(*i).is_some_and(|q| !q.is_empty())
            });
            if let Some((_, st)) = second {
                anyhow::bail!(
                    "executor.gpu.burst_ctas: {k}, but stage `{}` keeps flowbits / threshold \
                     state per queue that frames change in arrival order across flows: use \
                     burst_ctas: 1",
                    st.name
                );
            }
            // Two ordered stages key a frame differently (a flow, a source): no split of the
            // frames keeps both keys on one CTA.
            let mut ordered = image.stages.iter().filter(|st| st.orders_flows());
            if let (Some(a), Some(b)) = (ordered.next(), ordered.next()) {
                anyhow::bail!(
                    "executor.gpu.burst_ctas: {k}, but stages `{}` and `{}` both keep per-queue \
                     state in arrival order, each by its own key, which no split of a burst \
                     between CTAs keeps apart: use burst_ctas: 1",
                    a.name,
                    b.name
                );
            }
            if pktwarp_kernels::codegen::pipeline_order_key(&image.stages).is_none() {
                anyhow::bail!(
                    "executor.gpu.burst_ctas: {k}, but stage `{}` keeps per-queue state that \
                     frames of one flow change in arrival order, and only a pipeline whose \
                     stages before it are `parse` alone (none rewriting frames) can split it \
                     between CTAs: use burst_ctas: 1",
                    s.name
                );
            }
            let threads = opts.block_threads.unwrap_or(COMPOSED_MAX_THREADS);
            if opts.burst_size > threads {
                anyhow::bail!(
                    "executor.gpu.burst_ctas: {k} with stage `{}` needs bursts of at most one \
                     round of the block ({threads} threads), but burst_size is {}",
                    s.name,
                    opts.burst_size
                );
            }
        }
        Some(_) => {}
        None => opts.burst_ctas = Some(1),
    }
    Ok(opts)
}
