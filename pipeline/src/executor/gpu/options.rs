//! The GPU executor's options (YAML: under `executor:` when it is `gpu` or `auto`): how bursts
//! reach the kernel ([`Mode`]), where rings live ([`Placement`]), value checks, and the defaults
//! derived from them (threads per CTA, CTAs per burst, tagged queues).

use super::abi::{self, Desc, SlotHdr};
use super::multi;
use super::round_up;
use super::tagged::tagged_stores_atomic;

/// How bursts reach the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// One CTA per queue polls its ring for the life of the executor.
    #[default]
    Persistent,
    /// One kernel launch per burst.
    Launch,
    /// One CUDA graph launch per `graph_bursts` bursts.
    Graph,
}

/// Where a queue's ring lives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// GPU memory, filled by DMA (as a GPUDirect NIC would).
    Device,
    /// Pinned host memory the GPU reads directly. The default: for rings the host fills (pcap,
    /// gen, DPDK without GPUDirect) it measured several times the `device` rate end to end and
    /// lower latency (BENCHMARKS.md, "GPU data path").
    #[default]
    Mapped,
}

/// Options of the GPU executor (YAML: under `executor:` when it is `gpu` or `auto`).
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct GpuOptions {
    /// `persistent` (default), `launch` or `graph`.
    pub mode: Mode,
    /// Ring placement of every queue: `mapped` (default) or `device`.
    pub placement: Placement,
    /// Per-queue placement overriding `placement` (index = queue number; shorter lists leave the
    /// remaining queues at `placement`).
    pub queue_placement: Vec<Placement>,
    /// Most frames in one burst (1..=1024). Default 256. The daemon's slots hold the larger of
    /// this and `queues.burst` (`daemon::run_gpu::GpuSlots`).
    pub burst_size: u32,
    /// Slots (bursts) per ring. Default 64. With `graph` a multiple of `graph_bursts`.
    pub ring_slots: u32,
    /// Bytes of frame data a slot holds. Default `burst_size * 2048`.
    pub slot_data_bytes: Option<u32>,
    /// Bursts per CUDA graph launch in `graph` mode. Default 8.
    pub graph_bursts: u32,
    /// CUDA device index. Default 0. Ignored when `devices` is given.
    pub device: u32,
    /// Spread the queues over several GPUs: a list of device indices (`[0, 1]`) or `all`.
    /// Queue k runs on `devices[k % n]` (round-robin), each GPU with its own executor (context,
    /// kernel module, rings, persistent CTA group). An index named twice gets two executors on
    /// that GPU (their persistent CTAs must fit on it together). Default: `device` alone.
    pub devices: Option<multi::Devices>,
    /// Threads per CTA (a multiple of 32; at most 512 in `persistent` mode, 256 otherwise).
    /// Default 256: a thread per frame for bursts of 256 and more; with smaller bursts the
    /// spare threads stage the slot (more loads in flight) and share each frame's ACL lookup (a
    /// group of up to 32 lanes per frame), which is what keeps a small burst's latency low. In
    /// `persistent` mode with bursts of at most 32 frames the default is 512 where every
    /// persistent CTA still gets an SM of its own ([`GpuOptions::default_threads`]).
    pub block_threads: Option<u32>,
    /// Bounded wait of the persistent kernel: it exits after this long without a burst even if
    /// the host never sets the exit flag (last resort against a dead host). Default 60000 ms.
    pub idle_timeout_ms: u64,
    /// Write every frame's parsed metadata back to the host (for `pktwarp verify`). Default false.
    pub emit_meta: bool,
    /// Persistent CTAs per queue (1..=64). CTA j of a queue takes bursts j, j + n, j + 2n, ...,
    /// so n bursts of one queue are processed at once: more throughput per queue, same latency
    /// per burst. Default 1.
    pub ctas_per_queue: u32,
    /// Record where each burst's time goes on the GPU (`pw_burst_trace`: %globaltimer when the
    /// kernel saw the burst, staged it, ran the stages, merged counters, fenced), read with
    /// [`GpuExecutor::burst_trace`](super::GpuExecutor::burst_trace). For latency analysis (`pktwarp bench`); default false.
    pub trace_bursts: bool,
    /// CTAs that share each burst (persistent mode, 1..=8): CTA j of a burst's group runs frames
    /// [n * j / k, n * (j + 1) / k) (boundaries rounded down to even frame numbers), so a small
    /// burst's lookups spread over k SMs with a warp per frame (a lookup is a chain of dependent
    /// steps; lookups that share a warp or an SM's schedulers wait for each other). Every CTA of
    /// the group polls the slot itself and publishes its own done word. Default: with `device`
    /// rings, `burst_size / 8` rounded up, at most 4 (1 for bursts of 8 frames or fewer, 4 from
    /// 25 frames up); 1 for bursts of more than 32 frames (the CTAs are better spent on more
    /// bursts at once, `ctas_per_queue`) and when a queue is `mapped`: there every CTA of the
    /// group reads the slot across PCIe, which measured slower than one CTA (H200, 32-frame
    /// bursts: device stages 5.66 -> 3.49 us with a group, mapped slower; docs/perf-log.md,
    /// "latency work on the 32-frame burst", 2026-11-29). A pipeline with an ordered stage
    /// (conntrack, rate_limit) defaults to 1; k > 1 there splits the frames by the stage's key,
    /// not by index (the owned layout: docs/stages.md, "Per-queue stage state").
    pub burst_ctas: Option<u32>,
    /// Copy the frame bytes of bursts whose mean frame is 256 bytes or more into a `mapped`
    /// ring with non-temporal stores (to memory, past this core's caches). Default true: the
    /// kernel reads only the headers of such frames (a chunk of them does not fit shared memory,
    /// so they are parsed in place), and the host's copy, the limit there, goes faster. Small
    /// frames are read whole, which measured faster from the CPU's cache (H200: 1518 B end to end
    /// +13-35% in five of six paired rounds, -4% in one; 64 B -4-5% when every burst took
    /// non-temporal stores; docs/perf-log.md, "latency work on the 32-frame burst", 2026-11-29).
    /// `device` rings' pinned staging never takes them, nor do a [tagged](GpuOptions::tagged)
    /// slot's granules (their 16-byte atomicity is documented for plain aligned stores only).
    pub nt_stores: bool,
    /// Tagged words on a `persistent` kernel's `mapped` rings (`PW_PIPE_TAGGED`): the host
    /// writes a burst as 16-byte granules of 12 image bytes and its tag, the whole CTA polls the
    /// slot and has the burst in shared memory one PCIe round trip after the host's stores
    /// (instead of two: the poll, then the copy), and verdicts come back tagged (no done word
    /// behind a fence). 4/3 of the bytes across PCIe, so for small bursts: it applies only where
    /// a burst's image (header, descriptors, frame bytes) fits the kernel's 24 KiB staging area,
    /// and on CPUs whose 16-byte stores are atomic (x86-64 with AVX). Default (unset): on
    /// wherever it applies; `false`: off; `true`: on, and an error where a mapped queue cannot
    /// have it.
    pub tagged: Option<bool>,
    /// The daemon hands a `pcap` port's capture or a pooled `gen` port's frames (split by
    /// queue) to the GPU by reference where the queues can take them: copied once into pinned
    /// host memory, descriptors per frame, a `device` ring gathering the frames into its slots,
    /// a `mapped` ring's kernel reading them where they are (docs/gpu-ingest.md). Default
    /// false, the receive threads copying every frame into the slot bursts: measured on an
    /// H100, by reference is no faster on `mapped` rings yet and far slower on `device` rings
    /// (the per-burst gather).
    pub by_reference: bool,
    /// Test only: the persistent kernel of queue `queue` takes burst `burst` (0-based, in that
    /// queue's order) and never finishes it, beating no more, until the host stops it: the
    /// stall the watchdog's `on_stall: restart` must recover from. Unset in production.
    pub test_stall: Option<TestStall>,
}

/// See [`GpuOptions::test_stall`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TestStall {
    pub queue: u32,
    pub burst: u32,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            mode: Mode::Persistent,
            placement: Placement::Mapped,
            queue_placement: Vec::new(),
            burst_size: 256,
            ring_slots: 64,
            slot_data_bytes: None,
            graph_bursts: 8,
            device: 0,
            devices: None,
            block_threads: None,
            idle_timeout_ms: 60_000,
            emit_meta: false,
            ctas_per_queue: 1,
            trace_bursts: false,
            burst_ctas: None,
            nt_stores: true,
            tagged: None,
            by_reference: false,
            test_stall: None,
        }
    }
}

impl GpuOptions {
    /// Checks value ranges; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.burst_size == 0 || self.burst_size > abi::MAX_BURST {
            return Err(format!(
                "executor.burst_size: {} is out of range 1..={}",
                self.burst_size,
                abi::MAX_BURST
            ));
        }
        if self.ring_slots < 2 || self.ring_slots > 1 << 16 {
            return Err(format!(
                "executor.ring_slots: {} is out of range 2..=65536",
                self.ring_slots
            ));
        }
        if self.mode == Mode::Graph
            && (self.graph_bursts == 0 || self.ring_slots % self.graph_bursts != 0)
        {
            return Err(format!(
                "executor.graph_bursts: {} must be >= 1 and divide ring_slots ({})",
                self.graph_bursts, self.ring_slots
            ));
        }
        if let Some(t) = self.block_threads {
            let max = if self.mode == Mode::Persistent {
                512
            } else {
                256
            };
            if t == 0 || t % 32 != 0 || t > max {
                return Err(format!(
                    "executor.block_threads: {t} must be a multiple of 32 in 32..={max} (mode {:?})",
                    self.mode
                ));
            }
        }
        if let Some(b) = self.slot_data_bytes {
            if b == 0 || b > 1 << 30 {
                return Err(format!(
                    "executor.slot_data_bytes: {b} is out of range 1..=2^30"
                ));
            }
        }
        if self.ctas_per_queue == 0 || self.ctas_per_queue > 64 {
            return Err(format!(
                "executor.ctas_per_queue: {} is out of range 1..=64",
                self.ctas_per_queue
            ));
        }
        if let Some(multi::Devices::List(l)) = &self.devices {
            if l.is_empty() {
                return Err(
                    "executor.gpu.devices: an empty list names no GPU (give indices or `all`)"
                        .into(),
                );
            }
        }
        if self.idle_timeout_ms == 0 {
            return Err("executor.idle_timeout_ms: must be > 0".into());
        }
        if let Some(k) = self.burst_ctas {
            if k == 0 || k > 8 {
                return Err(format!("executor.burst_ctas: {k} is out of range 1..=8"));
            }
        }
        if self.tagged == Some(true) {
            if self.placement != Placement::Mapped
                && !self.queue_placement.contains(&Placement::Mapped)
            {
                return Err("executor.tagged: true, but no queue is mapped (tagged words are for mapped rings)".into());
            }
            if let Some(why) = self.tagged_unfit() {
                return Err(format!("executor.tagged: true, but {why}"));
            }
        }
        Ok(())
    }

    pub(super) fn placement_of(&self, q: usize) -> Placement {
        self.queue_placement
            .get(q)
            .copied()
            .unwrap_or(self.placement)
    }

    /// Threads per CTA: `block_threads`, or 256 (an executor sets the field from
    /// [`GpuOptions::default_threads`] when it starts).
    pub fn threads(&self) -> u32 {
        self.block_threads.unwrap_or(256)
    }

    /// Persistent CTAs that must be resident at once: this executor's for `n_queues` queues
    /// and `beside_ctas` of other executors on the same GPU.
    pub(super) fn persistent_ctas(&self, n_queues: usize, beside_ctas: usize) -> usize {
        n_queues * self.ctas_of_queue() + beside_ctas
    }

    /// `block_threads` when it is not set, for `n_queues` queues on a GPU of `sms`
    /// multiprocessors beside `beside_ctas` persistent CTAs of other executors: 512 in
    /// `persistent` mode with bursts of at most 32 frames when every persistent CTA still has
    /// an SM of its own (a 512-thread CTA fills an SM's registers), else 256. Latency: with 512
    /// threads 16 or 32 lanes share each frame's ACL lookup instead of 8 or 16, so fewer frames'
    /// lookups share (and diverge in) a warp (H200, 32-frame mapped bursts: docs/perf-log.md,
    /// "parse fast path, 512 threads, fewer barriers", 2026-11-30).
    pub fn default_threads(&self, n_queues: usize, beside_ctas: usize, sms: usize) -> u32 {
        let want = self.persistent_ctas(n_queues, beside_ctas);
        if self.mode == Mode::Persistent && self.burst_size <= 32 && want <= sms {
            512
        } else {
            256
        }
    }

    /// CTAs per burst (`burst_ctas`, or its default; 1 outside `persistent`).
    pub fn parts(&self) -> u32 {
        if self.mode != Mode::Persistent {
            return 1;
        }
        let mapped = self.placement == Placement::Mapped
            || self.queue_placement.contains(&Placement::Mapped);
        self.burst_ctas
            .unwrap_or(if self.burst_size > 32 || mapped {
                1
            } else {
                self.burst_size.div_ceil(8).clamp(1, 4)
            })
    }

    /// Persistent CTAs per queue: `ctas_per_queue` groups of [`Self::parts`].
    pub(super) fn ctas_of_queue(&self) -> usize {
        self.ctas_per_queue as usize * self.parts() as usize
    }

    pub fn slot_data_capacity(&self) -> u32 {
        self.slot_data_bytes
            .unwrap_or(self.burst_size.saturating_mul(2048))
    }

    /// Bytes of the largest burst image a slot can carry (header, descriptors in the full format,
    /// frame bytes, each padded to 16 bytes): what a tagged slot holds as payload.
    pub(super) fn image_max(&self) -> usize {
        std::mem::size_of::<SlotHdr>()
            + round_up(self.burst_size as usize * std::mem::size_of::<Desc>(), 16)
            + round_up(self.slot_data_capacity() as usize, 16)
    }

    /// Why a `mapped` queue cannot have tagged words, or None when it can.
    pub(super) fn tagged_unfit(&self) -> Option<String> {
        if self.mode != Mode::Persistent {
            return Some(format!("mode is {:?}, not persistent", self.mode));
        }
        if !tagged_stores_atomic() {
            return Some(
                "this CPU does not store 16 bytes at once (tagged granules need x86-64 with AVX)"
                    .into(),
            );
        }
        let img = self.image_max();
        // pw_poll_tagged: at most 32 granules per thread.
        let lim = abi::STAGE_BYTES.min(self.threads() as usize * 32 * abi::TAG_PAYLOAD);
        (img > lim).then(|| {
            format!(
                "a burst image of up to {img} bytes (burst_size {} x 32 B descriptors + slot_data_bytes {} + 48 B header) exceeds the {lim} bytes the kernel stages",
                self.burst_size,
                self.slot_data_capacity()
            )
        })
    }

    /// Do bursts always leave a block two or more threads per frame with at most
    /// `PW_SPLIT_MAX` frames (so a parse + acl burst always takes the kernel's two-pass path)?
    pub(super) fn small_bursts(&self) -> bool {
        self.burst_size <= abi::SPLIT_MAX && 2 * self.burst_size <= self.threads()
    }

    /// Does queue `q` carry tagged words ([`GpuOptions::tagged`])?
    pub fn tagged_queue(&self, q: usize) -> bool {
        self.placement_of(q) == Placement::Mapped
            && self.tagged != Some(false)
            && self.tagged_unfit().is_none()
    }
}
