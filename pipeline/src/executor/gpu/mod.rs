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

pub mod abi;
pub mod compose;
pub mod driver;
pub mod kernels;
pub mod multi;
mod stages;
pub mod tables;

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::burst::Burst;
use crate::meta::PacketMeta;
use abi::{Desc, Desc8, QueueCounters, QueueCtrl, QueueDesc, SlotHdr, Verdict};
pub use compose::image_for_pipeline;
use driver::{Context, DeviceBuffer, Event, Function, Graph, Module, PinnedBuffer, Stream};
pub use driver::{DeviceInfo, Unavailable};
pub use kernels::{KernelImage, LoadedFrom};
use tables::{Retirement, TableVersion};

/// Device placement: the largest unused span between a burst's descriptors and its data that is
/// still copied along to save a second DMA.
const COPY_GAP_MAX: usize = 4096;

/// Volatile read of one field of a queue's control block (the GPU writes it).
macro_rules! ctrl_get {
    ($b:expr, $field:ident) => {{
        let c = $b.host as *const QueueCtrl;
        // SAFETY: the pinned buffer holds one QueueCtrl for the executor's life; a volatile read
        // of a plain integer field.
        unsafe { ptr::read_volatile(ptr::addr_of!((*c).$field)) }
    }};
}

/// Volatile store to one field of a queue's control block (the GPU reads it).
macro_rules! ctrl_set {
    ($b:expr, $field:ident, $v:expr) => {{
        let c = $b.host as *mut QueueCtrl;
        // SAFETY: as in ctrl_get; the host is this field's only writer.
        unsafe { ptr::write_volatile(ptr::addr_of_mut!((*c).$field), $v) }
    }};
}

/// Mean frame size from which a burst goes into a mapped ring with non-temporal stores
/// ([`GpuOptions::nt_stores`]).
const NT_MIN_FRAME: usize = 256;

/// Copies `len` bytes to `dst` (16-byte aligned) with non-temporal stores for whole 16-byte
/// granules (the rest with plain stores): the lines go to memory instead of this core's cache, so
/// the GPU's reads of them across PCIe need not pull them out of a core. Callers fence after.
///
/// # Safety
/// `dst` valid for `len` bytes and 16-byte aligned; `src` valid for `len` bytes.
unsafe fn stream_copy(dst: *mut u8, src: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let whole = len & !15;
        let mut i = 0;
        while i < whole {
            // SAFETY: i + 16 <= len for both buffers; dst + i is 16-byte aligned (caller).
            unsafe {
                _mm_stream_si128(
                    dst.add(i) as *mut __m128i,
                    _mm_loadu_si128(src.add(i) as *const __m128i),
                )
            };
            i += 16;
        }
        // SAFETY: the tail lies inside both buffers.
        unsafe { ptr::copy_nonoverlapping(src.add(whole), dst.add(whole), len - whole) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as the caller's contract.
    unsafe {
        ptr::copy_nonoverlapping(src, dst, len)
    };
}

/// Stores the first 16 bytes of `src` at `dst` (16-byte aligned) as one access where the CPU
/// has one: the GPU reads them with one 16-byte load (`PW_PIPE_SLOT_SEQ`) and must never see the
/// new seq beside an old n_frames / data_bytes. x86-64: an aligned SSE store, atomic on every
/// CPU with AVX (Intel SDM vol. 3A 9.1.1; AMD APM vol. 2 7.3.2). Elsewhere: the other 12 bytes,
/// a release fence, then seq (the GPU may then read a torn granule only while seq is still old).
///
/// # Safety
/// `dst` is valid for 16 bytes of writes and 16-byte aligned.
unsafe fn store16(dst: *mut u8, src: &[u8; 16]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_store_si128};
        // SAFETY: SSE2 is part of x86-64; src has 48 readable bytes; dst is aligned (caller).
        unsafe {
            _mm_store_si128(
                dst as *mut __m128i,
                _mm_loadu_si128(src.as_ptr() as *const __m128i),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // SAFETY: dst is valid for 16 bytes (caller); seq is bytes 8..12 of pw_slot_hdr.
        unsafe {
            ptr::copy_nonoverlapping(src.as_ptr(), dst, 8);
            ptr::copy_nonoverlapping(src.as_ptr().add(12), dst.add(12), 4);
            fence(Ordering::Release);
            ptr::write_volatile(
                dst.add(8) as *mut u32,
                u32::from_ne_bytes([src[8], src[9], src[10], src[11]]),
            );
        }
    }
}

/// Writes `descs` at `dst` in format `dfmt` (`DESC_COMPACT`: [`Desc8`], else [`Desc`]).
///
/// # Safety
/// `dst` is valid for `descs.len()` descriptors of that format (no alignment needed).
unsafe fn write_descs(dst: *mut u8, descs: &[crate::burst::FrameDesc], dfmt: u8) {
    if dfmt == abi::DESC_COMPACT {
        let dp = dst as *mut Desc8;
        for (i, d) in descs.iter().enumerate() {
            // SAFETY: i < descs.len() (caller).
            unsafe { ptr::write_unaligned(dp.add(i), Desc8::from(d)) };
        }
    } else {
        let dp = dst as *mut Desc;
        for (i, d) in descs.iter().enumerate() {
            // SAFETY: as above.
            unsafe { ptr::write_unaligned(dp.add(i), Desc::from(d)) };
        }
    }
}

/// Whether this CPU's aligned 16-byte stores are single-copy atomic, which tagged granules need
/// (the kernel takes a granule whose tag it sees as wholly this burst's): x86-64 with AVX (Intel
/// and AMD guarantee it there).
pub fn tagged_stores_atomic() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Writes the first `len` bytes of `img` at `dst` (16-byte aligned) as tagged granules
/// (`PW_PIPE_TAGGED`): 16 bytes {img[12g..12g+4], img[12g+4..12g+8], img[12g+8..12g+12], tag}
/// per 12 image bytes, the first granule (the header's n_frames / data_bytes, which the kernel
/// sizes the burst by) last. `img` holds [`tagged_src_len`]`(len)` bytes (each granule is one
/// 16-byte load; bytes past `len` are written as they are). One aligned 16-byte SSE store
/// (`movdqa`) per granule, atomic on CPUs with AVX ([`tagged_stores_atomic`]; tagged queues are
/// refused elsewhere), so a granule the kernel sees tagged is wholly this burst's and no fence
/// is needed. Never non-temporal stores: the documented 16-byte atomicity (Intel SDM vol. 3A
/// 9.1.1; AMD: cacheable accesses) does not cover `movntdq`, whose write-combining buffer may
/// leave in smaller pieces when it is flushed part-full, so the kernel could see a granule's
/// tag with stale bytes beside it.
///
/// # Safety
/// `dst` is valid for `16 * len.div_ceil(12)` bytes of writes and 16-byte aligned.
#[cfg(target_arch = "x86_64")]
unsafe fn store_tagged(dst: *mut u8, img: &[u8], len: usize, tag: u32) {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cvtsi32_si128, _mm_loadu_si128, _mm_or_si128, _mm_set_epi32,
        _mm_slli_si128, _mm_store_si128,
    };
    let granules = tagged_granules(len);
    assert!(
        img.len() >= tagged_src_len(len),
        "store_tagged: image not padded"
    );
    let keep = _mm_set_epi32(0, -1, -1, -1);
    let t = _mm_slli_si128::<12>(_mm_cvtsi32_si128(tag as i32));
    for g in (0..granules).rev() {
        // SAFETY: img holds 12g + 16 bytes (asserted above, g < granules); dst + 16g is 16-byte
        // aligned and inside the caller's range.
        unsafe {
            let p = _mm_loadu_si128(img.as_ptr().add(abi::TAG_PAYLOAD * g) as *const __m128i);
            let v = _mm_or_si128(_mm_and_si128(p, keep), t);
            _mm_store_si128(dst.add(16 * g) as *mut __m128i, v);
        }
    }
}

/// Moves the cache lines of `bytes` at `p` out of this core's caches into the shared last-level
/// cache (`cldemote`, a hint: a no-op on CPUs without it), after the host wrote them for the GPU.
/// A persistent kernel polls a tagged slot with rounds that read every line of it across PCIe;
/// a read of a line this core holds modified must first get it back from the core, while one
/// in the last-level cache is answered from there. Measured on the H200 machine (BENCHMARKS.md,
/// issue 4 session 11): 32-frame bursts ~0.2 us sooner at p50, though the submit call takes
/// ~0.5 us longer.
#[cfg(target_arch = "x86_64")]
fn demote_lines(p: *const u8, bytes: usize) {
    let end = p as usize + bytes;
    let mut line = p as usize & !63;
    while line < end {
        // SAFETY: cldemote only hints where a line should live; it neither reads nor writes
        // memory architecturally and raises no fault (an encoding older CPUs execute as a NOP).
        unsafe {
            std::arch::asm!("cldemote byte ptr [{0}]", in(reg) line, options(nostack, preserves_flags))
        };
        line += 64;
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn demote_lines(_p: *const u8, _bytes: usize) {}

/// Bytes [`store_tagged`] reads for an image of `len` bytes: whole granules, and 4 more (its
/// last granule is one 16-byte load).
fn tagged_src_len(len: usize) -> usize {
    tagged_granules(len) * abi::TAG_PAYLOAD + 4
}

/// Tagged granules (16 bytes each in the slot) that carry an image of `len` bytes.
fn tagged_granules(len: usize) -> usize {
    len.div_ceil(abi::TAG_PAYLOAD)
}

/// Tagged granules need atomic 16-byte stores ([`tagged_stores_atomic`] is false here), so no
/// queue is ever tagged on this architecture.
///
/// # Safety
/// Never called.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn store_tagged(_dst: *mut u8, _img: &[u8], _len: usize, _tag: u32) {
    unreachable!("tagged queues are refused on this architecture")
}

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
    /// lower latency (BENCHMARKS.md, issue 4).
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
    /// Most frames in one burst (1..=1024). Default 256.
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
    /// [`GpuExecutor::burst_trace`]. For latency analysis (`pktwarp bench`); default false.
    pub trace_bursts: bool,
    /// CTAs that share each burst (persistent mode, 1..=8): CTA j of a burst's group runs frames
    /// [n * j / k, n * (j + 1) / k) (boundaries rounded down to even frame numbers), so a small
    /// burst's lookups spread over k SMs with a warp per frame (a lookup is a chain of dependent
    /// steps; lookups that share a warp or an SM's schedulers wait for each other). Every CTA of
    /// the group polls the slot itself and publishes its own done word. Default: with `device` rings, `burst_size / 8` rounded up,
    /// at most 4 (1 for bursts of 8 frames or fewer, 4 from 25 frames up); 1 for bursts of more
    /// than 32 frames (the CTAs are better spent on more bursts at once, `ctas_per_queue`) and
    /// when a queue is `mapped`: there every CTA of the group reads the slot across PCIe, which
    /// measured slower than one CTA (BENCHMARKS.md, issue 4 session 3).
    pub burst_ctas: Option<u32>,
    /// Copy the frame bytes of bursts whose mean frame is 256 bytes or more into a `mapped`
    /// ring with non-temporal stores (to memory, past this core's caches). Default true: the
    /// kernel reads only the headers of such frames (a chunk of them does not fit shared memory,
    /// so they are parsed in place), and the host's copy, the limit there, goes faster. Small
    /// frames are read whole, which measured faster from the CPU's cache (BENCHMARKS.md, issue
    /// 4 session 3: 1518 B end to end +13-35% in five of six paired rounds, -4% in one; 64 B
    /// -4-5% when every burst took non-temporal stores). `device` rings' pinned staging is
    /// copied as before. A [tagged](GpuOptions::tagged) slot's granules never take them (their
    /// 16-byte atomicity is documented for plain aligned stores only).
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

    fn placement_of(&self, q: usize) -> Placement {
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
    fn persistent_ctas(&self, n_queues: usize, beside_ctas: usize) -> usize {
        n_queues * self.ctas_of_queue() + beside_ctas
    }

    /// `block_threads` when it is not set, for `n_queues` queues on a GPU of `sms`
    /// multiprocessors beside `beside_ctas` persistent CTAs of other executors: 512 in
    /// `persistent` mode with bursts of at most 32 frames when every persistent CTA still has
    /// an SM of its own (a 512-thread CTA fills an SM's registers), else 256. Latency: with 512
    /// threads 16 or 32 lanes share each frame's ACL lookup instead of 8 or 16, so fewer
    /// frames' lookups share (and diverge in) a warp (H200, 32-frame mapped bursts:
    /// BENCHMARKS.md, issue 4 session 6).
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
    fn ctas_of_queue(&self) -> usize {
        self.ctas_per_queue as usize * self.parts() as usize
    }

    pub fn slot_data_capacity(&self) -> u32 {
        self.slot_data_bytes
            .unwrap_or(self.burst_size.saturating_mul(2048))
    }

    /// Bytes of the largest burst image a slot can carry (header, descriptors in the full format,
    /// frame bytes, each padded to 16 bytes): what a tagged slot holds as payload.
    fn image_max(&self) -> usize {
        std::mem::size_of::<SlotHdr>()
            + round_up(self.burst_size as usize * std::mem::size_of::<Desc>(), 16)
            + round_up(self.slot_data_capacity() as usize, 16)
    }

    /// Why a `mapped` queue cannot have tagged words, or None when it can.
    fn tagged_unfit(&self) -> Option<String> {
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
    fn small_bursts(&self) -> bool {
        self.burst_size <= abi::SPLIT_MAX && 2 * self.burst_size <= self.threads()
    }

    /// Does queue `q` carry tagged words ([`GpuOptions::tagged`])?
    pub fn tagged_queue(&self, q: usize) -> bool {
        self.placement_of(q) == Placement::Mapped
            && self.tagged != Some(false)
            && self.tagged_unfit().is_none()
    }
}

/// Is a GPU usable for `executor: auto`? The device description, or the reason not (never a
/// panic; safe on machines without an NVIDIA driver).
pub fn probe(device: u32) -> Result<DeviceInfo, Unavailable> {
    driver::probe(device)
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
    stream: Stream,
    graphs: Vec<Graph>,
    /// Frames in each slot (host copy, for reading verdicts back).
    slot_frames: Vec<u32>,
    /// Rule-set generation each slot's burst was classified with (host copy of its header).
    slot_gen: Vec<u64>,
    /// The ACL table the next burst submitted to this queue names (None without an acl stage).
    table: Option<Arc<TableVersion>>,
    /// Bursts handed over (producer count).
    next_seq: u32,
    /// Bursts whose verdicts the host has read (their slots are free again).
    reaped: u32,
    /// Graph mode: bursts staged since the last launch, starting at `pending_start`.
    pending: u32,
    pending_start: u32,
    host: HostCounters,
}

// SAFETY: the raw pointers inside are to pinned memory owned by this struct; access is serialised
// by the executor's per-queue Mutex.
unsafe impl Send for Queue {}

/// Carveout preference (percent of the most shared memory) asking for the most L1.
const CARVEOUT_MAX_L1: i32 = 0;

/// The GPU executor.
pub struct GpuExecutor {
    opts: GpuOptions,
    pipeline_flags: u32,
    default_action: u8,
    slot_bytes: u32,
    data_offset: u32,
    data_cap: u32,
    threads: u32,
    queues: Vec<Mutex<Queue>>,
    qdescs: DeviceBuffer,
    /// The ACL table in force (named by every burst submitted from now on).
    current: Mutex<Option<Arc<TableVersion>>>,
    /// Replaced tables still named by bursts in flight.
    retired: Mutex<Retirement<Arc<TableVersion>>>,
    /// `retired.len()`, readable without the lock (poll checks it on every call).
    retired_len: AtomicUsize,
    kernel_stream: Stream,
    /// Side copies (counter reads) that must not wait for the persistent kernel.
    aux_stream: Stream,
    f_persistent: Function,
    f_burst: Function,
    f_burst_slot: Function,
    f_bulk: Function,
    persistent_running: bool,
    pub loaded_from: LoadedFrom,
    /// The stages the module runs; composed template: their parameter blocks on the device.
    stage_specs: Vec<pktwarp_kernels::StageSpec>,
    stage_params: Option<stages::StageParams>,
    // Dropped last: everything above lives in this context.
    _module: Module,
    ctx: Context,
}

fn round_up(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}

fn gpu_err(e: impl std::fmt::Display) -> SubmitError {
    SubmitError::Gpu(e.to_string())
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
        let mut opts = opts;
        if opts.block_threads.is_none() {
            opts.block_threads = Some(opts.default_threads(
                n_queues,
                beside_ctas,
                ctx.info.multiprocessors as usize,
            ));
        }
        let (module, loaded_from) = kernels::load(&ctx, image)?;
        let caps = kernels::caps(&module)?;
        if pipeline.parse && caps & kernels::CAP_PARSE == 0 {
            anyhow::bail!(
                "the kernel module was built without gpu-kernels/parse.cuh: no GPU parse stage"
            );
        }
        if pipeline.acl.is_some() && caps & kernels::CAP_ACL == 0 {
            anyhow::bail!(
                "the kernel module was built without gpu-kernels/acl.cuh: no GPU acl stage"
            );
        }
        if pipeline.acl.is_some() && !pipeline.parse {
            anyhow::bail!("the acl stage needs the parse stage before it on the GPU");
        }
        // Every queue tagged with small parse + acl bursts (the latency case): the persistent
        // kernel compiled with that path alone (pw_persistent_small; see kernels.cu).
        let composed = image.template == pktwarp_kernels::Template::Composed;
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
        let slots = opts.ring_slots as usize;

        // Generation 0: the rule set the executor starts with; publish_acl brings later ones.
        let (table, _n_rules) = match pipeline.acl {
            Some(t) => (
                Some(Arc::new(TableVersion::upload(
                    &ctx,
                    t.bytes,
                    t.n_rules,
                    0,
                    pipeline.default_action,
                )?)),
                t.n_rules,
            ),
            None => (None, 0),
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
        let stage_params = stages::StageParams::upload(&ctx, image)?;

        let mut queues = Vec::with_capacity(n_queues);
        let mut descs = Vec::with_capacity(n_queues);
        for qi in 0..n_queues {
            let placement = opts.placement_of(qi);
            let tagged = opts.tagged_queue(qi);
            let ring_bytes = slot_bytes * slots;
            let (ring_dev, ring_mapped, staging, prod_dev, ring_addr) = match placement {
                Placement::Device => {
                    let r = DeviceBuffer::new(&ctx, ring_bytes)?;
                    r.zero()?;
                    let p = DeviceBuffer::new(&ctx, 256)?;
                    p.zero()?;
                    let s = PinnedBuffer::new(&ctx, ring_bytes)?;
                    let a = r.ptr;
                    (Some(r), None, Some(s), Some(p), a)
                }
                Placement::Mapped => {
                    let r = PinnedBuffer::new(&ctx, ring_bytes)?;
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
                    let a = r.dev;
                    (None, Some(r), None, None, a)
                }
            };
            let ctrl = PinnedBuffer::new(&ctx, abi::CTRL_SIZE)?;
            let vsize = if tagged {
                abi::VERDICT_TAGGED_SIZE
            } else {
                std::mem::size_of::<Verdict>()
            };
            let verdicts = PinnedBuffer::new(&ctx, slots * bm * vsize)?;
            if tagged {
                // SAFETY: as the ring above: tag 0 is no burst's.
                unsafe { ptr::write_bytes(verdicts.host, 0, slots * bm * vsize) };
            }
            let metas = if opts.emit_meta {
                Some(PinnedBuffer::new(
                    &ctx,
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
            let counters = DeviceBuffer::new(&ctx, ctas * std::mem::size_of::<QueueCounters>())?;
            counters.zero()?;
            let done = PinnedBuffer::new(&ctx, slots * opts.parts() as usize * 4)?;
            let stage_counters = if composed {
                Some(stages::new_counters(&ctx)?)
            } else {
                None
            };
            let trace = if opts.trace_bursts {
                let t = PinnedBuffer::new(&ctx, slots * std::mem::size_of::<abi::BurstTrace>())?;
                // SAFETY: a fresh host allocation of exactly this many bytes; no GPU work yet.
                unsafe {
                    ptr::write_bytes(t.host, 0, slots * std::mem::size_of::<abi::BurstTrace>())
                };
                Some(t)
            } else {
                None
            };
            let producer = match (&prod_dev, placement) {
                (Some(p), Placement::Device) => p.ptr,
                _ => ctrl.dev, // &ctrl->producer, offset 0
            };
            descs.push(QueueDesc {
                ring: ring_addr,
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
                    flags | abi::PIPE_TAGGED
                } else if placement == Placement::Mapped && opts.mode == Mode::Persistent {
                    flags | abi::PIPE_SLOT_SEQ
                } else {
                    flags
                },
                n_rules: 0,
                default_action: pipeline.default_action,
                port_id: 0,
                queue_id: qi as u16,
                ctas: ctas as u32,
                done: done.dev,
                trace: trace.as_ref().map_or(0, |t| t.dev),
                stage_counters: stage_counters.as_ref().map_or(0, |b| b.ptr),
                stage_params: stage_params.as_ref().map_or(0, |p| p.table_addr()),
            });
            queues.push(Queue {
                placement,
                tagged,
                image: if tagged {
                    Vec::with_capacity(opts.image_max())
                } else {
                    Vec::new()
                },
                tagged_verdicts: Vec::new(),
                ring_dev,
                ring_mapped,
                staging,
                prod_dev,
                ctrl,
                verdicts,
                metas,
                counters,
                stage_counters,
                n_counters: ctas,
                done,
                trace,
                stream: Stream::new(&ctx)?,
                graphs: Vec::new(),
                slot_frames: vec![0; slots],
                slot_gen: vec![0; slots],
                table: table.clone(),
                next_seq: 0,
                reaped: 0,
                pending: 0,
                pending_start: 0,
                host: HostCounters::default(),
            });
        }
        let qbytes = descs.len() * std::mem::size_of::<QueueDesc>();
        let qdescs = DeviceBuffer::new(&ctx, qbytes)?;
        // SAFETY: QueueDesc is repr(C) plain data; viewing the Vec as bytes is sound.
        let raw = unsafe { std::slice::from_raw_parts(descs.as_ptr() as *const u8, qbytes) };
        qdescs.upload(raw)?;

        let kernel_stream = Stream::new(&ctx)?;
        let mut ex = GpuExecutor {
            threads: opts.threads(),
            opts,
            pipeline_flags: flags,
            default_action: pipeline.default_action,
            slot_bytes: slot_bytes as u32,
            data_offset: data_offset as u32,
            data_cap: data_cap as u32,
            queues: queues.into_iter().map(Mutex::new).collect(),
            qdescs,
            current: Mutex::new(table),
            retired: Mutex::new(Retirement::default()),
            retired_len: AtomicUsize::new(0),
            kernel_stream,
            aux_stream: Stream::new(&ctx)?,
            f_persistent,
            f_burst,
            f_burst_slot,
            f_bulk,
            persistent_running: false,
            loaded_from,
            stage_specs: image.stages.clone(),
            stage_params,
            _module: module,
            ctx,
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
        for qm in &self.queues {
            let mut q = lock(qm);
            q.table = Some(Arc::clone(&new));
            // Bursts before this one named the old table.
            ends.push(q.next_seq);
        }
        if let Some(old) = cur.replace(new) {
            let mut r = self.retired.lock().unwrap_or_else(|p| p.into_inner());
            r.retire(old, ends);
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
        for q in &self.queues {
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

    /// Hands a burst to queue `queue`. Returns its sequence number, or why not (counted).
    pub fn submit(&self, queue: usize, burst: &Burst) -> Result<u32, SubmitError> {
        let qm = self.queues.get(queue).ok_or(SubmitError::NoQueue(queue))?;
        let mut q = lock(qm);
        let n = burst.len();
        let bytes = burst.data.len();
        if n > self.opts.burst_size as usize || bytes > self.data_cap as usize {
            q.host.too_large_bursts += 1;
            q.host.too_large_frames += n as u64;
            return Err(SubmitError::TooLarge {
                frames: n,
                bytes,
                max_frames: self.opts.burst_size,
                max_bytes: self.data_cap,
            });
        }
        let slots = self.opts.ring_slots;
        if q.next_seq.wrapping_sub(q.reaped) >= slots {
            q.host.ring_full_bursts += 1;
            q.host.ring_full_frames += n as u64;
            return Err(SubmitError::RingFull { queue, slots });
        }
        let seq = q.next_seq;
        let slot = (seq % slots) as usize;
        // Compact descriptors when every frame allows (8 bytes a frame instead of 32).
        let dfmt = Desc8::format_for(&burst.descs);
        let off = slot * self.slot_bytes as usize;
        let base = match (&q.staging, &q.ring_mapped) {
            (Some(s), _) => s.host,
            (None, Some(r)) => r.host,
            (None, None) => return Err(gpu_err("queue has no ring memory")),
        };
        // SAFETY: the slot lies inside the buffer (slot < slots) and the GPU is not reading it:
        // its previous burst was reaped (ring-full check above), and for `device` placement the
        // staging copy of that burst completed before the kernel consumed it.
        unsafe {
            let slot_ptr = base.add(off);
            let t = q.table.as_deref();
            let hdr = SlotHdr {
                n_frames: n as u16,
                desc_format: dfmt,
                data_bytes: bytes as u32,
                seq,
                generation: t.map_or(0, |t| t.generation as u32),
                acl_tables: t.map_or(0, TableVersion::tables_addr),
                rule_hits: t.map_or(0, TableVersion::hits_addr),
                n_rules: t.map_or(0, |t| t.n_rules),
                default_action: t.map_or(self.default_action, |t| t.default_action),
                ..Default::default()
            };
            let hb = std::mem::size_of::<SlotHdr>();
            let raw: [u8; 48] = std::mem::transmute(hdr);
            if q.tagged {
                // The image (header, descriptors, frame bytes, each padded to 16 bytes), then
                // all of it as tagged words.
                let nd = round_up(n * Desc8::size_of_format(dfmt), 16);
                let len = hb + nd + round_up(bytes, 16);
                let mut img = std::mem::take(&mut q.image);
                img.clear();
                img.resize(tagged_src_len(len), 0);
                img[..hb].copy_from_slice(&raw);
                write_descs(img.as_mut_ptr().add(hb), &burst.descs, dfmt);
                img[hb + nd..hb + nd + bytes].copy_from_slice(&burst.data);
                store_tagged(slot_ptr, &img, len, seq.wrapping_add(1));
                demote_lines(slot_ptr, 16 * tagged_granules(len));
                q.image = img;
            } else {
                // Everything but the header's first 16 bytes, then those (n_frames, data_bytes, seq,
                // generation) in one store after a release fence: a persistent kernel polling a
                // mapped ring reads them as its "ready" signal (PW_PIPE_SLOT_SEQ).
                ptr::copy_nonoverlapping(raw.as_ptr().add(16), slot_ptr.add(16), hb - 16);
                write_descs(slot_ptr.add(hb), &burst.descs, dfmt);
                let data = slot_ptr.add(self.data_offset as usize);
                // Non-temporal stores only for bursts of large frames, into a mapped ring: the
                // kernel parses those in place and reads their headers alone, while small frames
                // are read whole, faster from the CPU's cache. (Never for a tagged slot, above:
                // see store_tagged.)
                let nt = self.opts.nt_stores && q.staging.is_none() && bytes >= NT_MIN_FRAME * n;
                if nt {
                    stream_copy(data, burst.data.as_ptr(), bytes);
                    // Non-temporal stores are ordered before the header's store only by sfence.
                    #[cfg(target_arch = "x86_64")]
                    std::arch::x86_64::_mm_sfence();
                } else {
                    ptr::copy_nonoverlapping(burst.data.as_ptr(), data, bytes);
                }
                fence(Ordering::Release);
                let mut g0 = [0u8; 16];
                g0.copy_from_slice(&raw[..16]);
                store16(slot_ptr, &g0);
            }
        }
        q.slot_frames[slot] = n as u32;
        q.slot_gen[slot] = q.table.as_ref().map_or(0, |t| t.generation);
        q.next_seq = seq.wrapping_add(1);
        q.host.submitted_bursts += 1;
        q.host.submitted_frames += n as u64;
        self.publish(
            queue,
            &mut q,
            seq,
            off,
            n * Desc8::size_of_format(dfmt),
            bytes,
        )
        .map_err(gpu_err)?;
        Ok(seq)
    }

    fn publish(
        &self,
        queue: usize,
        q: &mut Queue,
        seq: u32,
        off: usize,
        desc_bytes: usize,
        bytes: usize,
    ) -> anyhow::Result<()> {
        // A mapped ring in persistent mode needs no CUDA call (a driver call per burst on the
        // latency path); everything else does.
        if self.opts.mode != Mode::Persistent || q.placement != Placement::Mapped {
            self.ctx.bind()?;
        }
        match self.opts.mode {
            Mode::Persistent => {
                match q.placement {
                    Placement::Device => {
                        self.copy_slot(q, off, desc_bytes, bytes)?;
                        let p = q.prod_dev.as_ref().map_or(0, |p| p.ptr);
                        q.stream.write_u32(p, seq.wrapping_add(1))?;
                    }
                    Placement::Mapped => {
                        // Release: the slot's bytes before the producer index.
                        fence(Ordering::Release);
                        ctrl_set!(q.ctrl, producer, seq.wrapping_add(1));
                    }
                }
                Ok(())
            }
            Mode::Launch => {
                if q.placement == Placement::Device {
                    self.copy_slot(q, off, desc_bytes, bytes)?;
                }
                self.launch_burst(queue, q, seq)
            }
            Mode::Graph => {
                let g = self.opts.graph_bursts;
                let slots = self.opts.ring_slots;
                if q.pending == 0 && (q.pending_start % slots) % g != 0 {
                    // Out of step with the graph windows (after a flush): run singly until the
                    // next window starts.
                    if q.placement == Placement::Device {
                        self.copy_slot(q, off, desc_bytes, bytes)?;
                    }
                    self.launch_burst(queue, q, seq)?;
                    q.pending_start = seq.wrapping_add(1);
                    return Ok(());
                }
                q.pending += 1;
                if q.pending == g {
                    let w = ((q.pending_start % slots) / g) as usize;
                    q.graphs[w].launch(&q.stream)?;
                    q.pending_start = q.pending_start.wrapping_add(g);
                    q.pending = 0;
                }
                Ok(())
            }
        }
    }

    /// Device placement: the slot's header, `desc_bytes` of descriptors and `bytes` of frames
    /// from staging into the ring, on the queue's stream.
    fn copy_slot(
        &self,
        q: &Queue,
        off: usize,
        desc_bytes: usize,
        bytes: usize,
    ) -> anyhow::Result<()> {
        let (Some(ring), Some(st)) = (&q.ring_dev, &q.staging) else {
            anyhow::bail!("device placement without device ring");
        };
        let head = std::mem::size_of::<SlotHdr>() + desc_bytes;
        // SAFETY: both ranges lie inside the slot; the staging slot stays untouched until the
        // burst is reaped, which is after the kernel consumed it, which is after the copy.
        unsafe {
            let d = off + self.data_offset as usize;
            if bytes > 0 && d - off - head <= COPY_GAP_MAX {
                // One DMA over head, the small gap and the data: each copy costs a few
                // microseconds of issue and completion on the burst's critical path.
                q.stream
                    .copy_htod(ring.ptr + off as u64, st.host.add(off), d - off + bytes)?;
            } else {
                q.stream
                    .copy_htod(ring.ptr + off as u64, st.host.add(off), head)?;
                if bytes > 0 {
                    q.stream
                        .copy_htod(ring.ptr + d as u64, st.host.add(d), bytes)?;
                }
            }
        }
        Ok(())
    }

    fn launch_burst(&self, queue: usize, q: &Queue, seq: u32) -> anyhow::Result<()> {
        let mut qd = self.qdescs.ptr;
        let mut qn = queue as u32;
        let mut s = seq;
        let mut params = [
            &mut qd as *mut u64 as *mut c_void,
            &mut qn as *mut u32 as *mut c_void,
            &mut s as *mut u32 as *mut c_void,
        ];
        // SAFETY: matches pw_burst(const pw_queue_desc*, uint32_t, uint32_t).
        unsafe {
            self.f_burst
                .launch(&q.stream, 1, self.threads, &mut params)?
        };
        Ok(())
    }

    /// Graph mode: runs the bursts staged since the last graph launch one by one (a partial
    /// window). No-op in the other modes.
    pub fn flush(&self, queue: usize) -> anyhow::Result<()> {
        if self.opts.mode != Mode::Graph {
            return Ok(());
        }
        let qm = self
            .queues
            .get(queue)
            .ok_or_else(|| anyhow::anyhow!("no queue {queue}"))?;
        let mut q = lock(qm);
        self.ctx.bind()?;
        for k in 0..q.pending {
            let seq = q.pending_start.wrapping_add(k);
            let slot = (seq % self.opts.ring_slots) as usize;
            let off = slot * self.slot_bytes as usize;
            if let (Placement::Device, Some(st)) = (q.placement, q.staging.as_ref()) {
                let n = q.slot_frames[slot] as usize;
                // SAFETY: the slot's header lies inside staging; this thread wrote it at submit.
                let h = unsafe { ptr::read_unaligned(st.host.add(off) as *const SlotHdr) };
                let desc_bytes = n * Desc8::size_of_format(h.desc_format);
                self.copy_slot(&q, off, desc_bytes, h.data_bytes as usize)?;
            }
            self.launch_burst(queue, &q, seq)?;
        }
        q.pending_start = q.pending_start.wrapping_add(q.pending);
        q.pending = 0;
        Ok(())
    }

    /// The GPU timestamps of burst `seq` of `queue` (`trace_bursts`), once they are complete:
    /// after the queue finished burst `seq + ctas` (whose system fence orders them; see
    /// `pw_burst_trace`) and before the slot's next lap overwrites them. None otherwise.
    pub fn burst_trace(&self, queue: usize, seq: u32) -> Option<abi::BurstTrace> {
        let q = lock(self.queues.get(queue)?);
        let t = q.trace.as_ref()?;
        let ctas = if self.opts.mode == Mode::Persistent {
            self.opts.ctas_per_queue.max(1)
        } else {
            1
        };
        if q.reaped.wrapping_sub(seq) <= ctas || q.reaped.wrapping_sub(seq) > self.opts.ring_slots {
            return None;
        }
        let slot = (seq % self.opts.ring_slots) as usize;
        let rec = (t.host as *const abi::BurstTrace).wrapping_add(slot);
        // SAFETY: slot < slots: the record lies in the buffer. seq first: the GPU writes it last
        // (after the burst's done word's release, or behind a fence in a tagged queue).
        let s = unsafe { ptr::read_volatile(ptr::addr_of!((*rec).seq)) };
        if s != u64::from(seq) + 1 {
            return None;
        }
        fence(Ordering::Acquire);
        // SAFETY: as above; every field was written before seq.
        Some(unsafe { ptr::read_volatile(rec) })
    }

    /// Does `queue` carry tagged words ([`GpuOptions::tagged`])?
    pub fn tagged(&self, queue: usize) -> bool {
        self.queues.get(queue).is_some_and(|q| lock(q).tagged)
    }

    /// Bursts handed to `queue` whose verdicts are not yet read.
    pub fn in_flight(&self, queue: usize) -> u32 {
        self.queues.get(queue).map_or(0, |q| {
            let q = lock(q);
            q.next_seq.wrapping_sub(q.reaped)
        })
    }

    /// Calls `f(seq, verdicts, metas)` for every burst of `queue` the GPU finished since the
    /// last call, in order, then frees their slots. `metas` is given with `emit_meta`. Returns
    /// the number of bursts. An error when the queue's kernel stopped (timeout, bad slot).
    pub fn poll(
        &self,
        queue: usize,
        mut f: impl FnMut(u32, &[Verdict], Option<&[PacketMeta]>),
    ) -> anyhow::Result<usize> {
        self.poll_tagged(queue, |seq, _, v, m| f(seq, v, m))
    }

    /// As [`GpuExecutor::poll`], with the rule-set generation each burst was classified with
    /// (the one its slot header named): `f(seq, generation, verdicts, metas)`. Frees replaced
    /// ACL tables once no burst in flight names them.
    pub fn poll_tagged(
        &self,
        queue: usize,
        f: impl FnMut(u32, u64, &[Verdict], Option<&[PacketMeta]>),
    ) -> anyhow::Result<usize> {
        let n = self.poll_locked(queue, f)?;
        if n > 0 && self.retired_len.load(Ordering::Relaxed) > 0 {
            self.reclaim_tables();
        }
        Ok(n)
    }

    fn poll_locked(
        &self,
        queue: usize,
        mut f: impl FnMut(u32, u64, &[Verdict], Option<&[PacketMeta]>),
    ) -> anyhow::Result<usize> {
        let qm = self
            .queues
            .get(queue)
            .ok_or_else(|| anyhow::anyhow!("no queue {queue}"))?;
        let mut q = lock(qm);
        let mut done = 0;
        let bm = self.opts.burst_size as usize;
        let parts = self.opts.parts() as usize;
        while q.reaped != q.next_seq {
            let seq = q.reaped;
            let slot = (seq % self.opts.ring_slots) as usize;
            let n = q.slot_frames[slot] as usize;
            // Tagged verdicts: every one carries this burst's tag (the done word is written
            // only for an empty burst, and with metadata, which is not tagged).
            let by_tags = q.tagged && n > 0;
            if by_tags && !Self::take_tagged(&mut q, slot * bm, n, seq.wrapping_add(1)) {
                break;
            }
            // Every CTA of the burst's group has published its part.
            let finished = (by_tags && q.metas.is_none())
                || (0..parts).all(|p| {
                    // SAFETY: slot * parts + p < slots * parts, the done array's length; a
                    // volatile read of a word the GPU writes.
                    let word = unsafe {
                        ptr::read_volatile((q.done.host as *const u32).add(slot * parts + p))
                    };
                    word == seq.wrapping_add(1)
                });
            if !finished {
                break;
            }
            // Acquire: the verdicts were written before the done word (or their tags).
            fence(Ordering::Acquire);
            // SAFETY: the GPU finished writing this slot's verdicts (its done word says so,
            // acquire fence above) and will not touch them until the slot is reused, which
            // needs this reap first.
            let (v, m) = unsafe {
                let v = if by_tags {
                    &q.tagged_verdicts[..n]
                } else {
                    std::slice::from_raw_parts(
                        (q.verdicts.host as *const Verdict).add(slot * bm),
                        n,
                    )
                };
                let m = q.metas.as_ref().map(|mb| {
                    std::slice::from_raw_parts((mb.host as *const PacketMeta).add(slot * bm), n)
                });
                (v, m)
            };
            f(seq, q.slot_gen[slot], v, m);
            q.reaped = seq.wrapping_add(1);
            done += 1;
        }
        if done == 0 && q.next_seq != q.reaped {
            let st = ctrl_get!(q.ctrl, status);
            if self.opts.mode == Mode::Persistent && st != abi::QSTATE_RUNNING {
                anyhow::bail!(
                    "queue {queue}: persistent kernel stopped with {} bursts outstanding ({})",
                    q.next_seq.wrapping_sub(q.reaped),
                    qstate_name(st)
                );
            }
        }
        Ok(done)
    }

    /// Tagged queue: verdicts `first .. first + n` into `q.tagged_verdicts` if each of their
    /// three words carries `tag` (false, and nothing to use, while any does not yet).
    fn take_tagged(q: &mut Queue, first: usize, n: usize, tag: u32) -> bool {
        let words = q.verdicts.host as *const u64;
        q.tagged_verdicts.clear();
        for i in 0..n {
            // SAFETY: first + n <= slots * burst_max verdicts of 3 words each (the buffer);
            // volatile 8-byte reads of words the GPU stores 8 bytes at a time.
            let [w0, w1, w2] = unsafe {
                let p = words.add(3 * (first + i));
                [
                    ptr::read_volatile(p),
                    ptr::read_volatile(p.add(1)),
                    ptr::read_volatile(p.add(2)),
                ]
            };
            if [w0, w1, w2].iter().any(|w| (w >> 32) as u32 != tag) {
                return false;
            }
            q.tagged_verdicts.push(Verdict {
                action: w0 as u8,
                drop_reason: (w0 >> 8) as u8,
                reserved: (w0 >> 16) as u16,
                rule: w1 as u32,
                mark: w2 as u32,
            });
        }
        true
    }

    /// Polls `queue` until every burst handed over is done or `timeout` passes.
    pub fn drain(
        &self,
        queue: usize,
        timeout: Duration,
        mut f: impl FnMut(u32, &[Verdict], Option<&[PacketMeta]>),
    ) -> anyhow::Result<()> {
        self.flush(queue)?;
        let t = Instant::now();
        while self.in_flight(queue) > 0 {
            if self.poll(queue, &mut f)? == 0 {
                if t.elapsed() > timeout {
                    anyhow::bail!(
                        "queue {queue}: {} bursts not done after {:?}",
                        self.in_flight(queue),
                        timeout
                    );
                }
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    /// Counters of every queue, the host-side refusals and the per-rule hits. A queue whose
    /// every handed-over burst is done and read back is exact: the kernels add a burst's counts
    /// just after its done word (off the latency path) and count it in `bursts` behind a fence
    /// (the persistent kernel once its queue is idle for 20 us), so this waits (bounded) until
    /// `bursts` reaches the bursts handed over. A queue with bursts in flight gives a snapshot
    /// (fields may be mid-update and `bursts` may lag, which a snapshot tolerates).
    pub fn counters(&self) -> anyhow::Result<CountersSnapshot> {
        let mut snap = CountersSnapshot::default();
        self.ctx.bind()?;
        for (qi, q) in self.queues.iter().enumerate() {
            let q = lock(q);
            let mut blocks = vec![QueueCounters::default(); q.n_counters];
            let settled = self.pipeline_flags & abi::PIPE_COUNT != 0
                && q.pending == 0
                && q.reaped == q.next_seq;
            let t = Instant::now();
            let mut seen_all = false;
            loop {
                // SAFETY: QueueCounters is repr(C) plain u64s; the slice covers exactly the blocks.
                let raw = unsafe {
                    std::slice::from_raw_parts_mut(
                        blocks.as_mut_ptr() as *mut u8,
                        std::mem::size_of_val(blocks.as_slice()),
                    )
                };
                // On the side stream: a snapshot never waits for the persistent kernel.
                q.counters.download_on(&self.aux_stream, raw)?;
                // One more copy after the one that saw every burst counted: that copy may have
                // read another word before the kernel's update of it became visible.
                if !settled || seen_all {
                    break;
                }
                let bursts = blocks
                    .iter()
                    .fold(0u32, |a, b| a.wrapping_add(b.bursts as u32));
                // Each CTA of a burst's group counts the burst once.
                if bursts == q.next_seq.wrapping_mul(self.opts.parts()) {
                    seen_all = true;
                    continue;
                }
                if t.elapsed() > Duration::from_secs(2) {
                    anyhow::bail!(
                        "queue {qi}: the kernel's CTAs counted {bursts} bursts of the {} done ({} CTAs each) after {:?}",
                        q.next_seq,
                        self.opts.parts(),
                        t.elapsed()
                    );
                }
                std::thread::sleep(Duration::from_micros(20));
            }
            let mut c = QueueCounters::default();
            for b in &blocks {
                c.merge(b);
            }
            // Every CTA of a burst's group counts the burst.
            c.bursts /= self.opts.parts() as u64;
            // Written before each burst's done word, so read after the queue counters settled.
            let sc = match &q.stage_counters {
                Some(b) => stages::read_counters(b, &self.aux_stream)?,
                None => Vec::new(),
            };
            stages::fold_builtin(&self.stage_specs, &sc, &mut c);
            snap.stages.push(sc);
            snap.queues.push(c);
            snap.host.push(q.host);
        }
        // Hits of the table in force (each published table has its own counters).
        if self.pipeline_flags & abi::PIPE_COUNT != 0 {
            if let Some(t) = self.current_table() {
                snap.rule_hits = t.read_hits()?;
            }
        }
        Ok(snap)
    }

    /// Queue state words (heartbeat, status) for health checks.
    pub fn queue_state(&self, queue: usize) -> Option<(u32, u32, u64)> {
        self.queues.get(queue).map(|q| {
            let q = lock(q);
            (
                ctrl_get!(q.ctrl, status),
                ctrl_get!(q.ctrl, heartbeat),
                ctrl_get!(q.ctrl, polls),
            )
        })
    }

    /// Stops the persistent kernel (exit flag, then a bounded wait) and waits for all queued
    /// work. Idempotent.
    pub fn shutdown(&mut self) -> anyhow::Result<()> {
        self.ctx.bind()?;
        if self.persistent_running {
            for q in &self.queues {
                let q = lock(q);
                ctrl_set!(q.ctrl, exit_flag, 1);
            }
            let t = Instant::now();
            while !self.kernel_stream.is_idle()? {
                if t.elapsed() > Duration::from_secs(10) {
                    anyhow::bail!(
                        "persistent kernel did not exit within 10 s of the exit flag; it stops by \
                         itself after idle_timeout_ms"
                    );
                }
                std::thread::sleep(Duration::from_micros(50));
            }
            self.persistent_running = false;
        }
        for q in &self.queues {
            lock(q).stream.synchronize()?;
        }
        Ok(())
    }

    // ---- stage throughput on device-resident frames ----

    /// Copies frames to device memory for [`GpuExecutor::run_bulk`]. Stream-ordered
    /// allocations: safe while the persistent kernel runs (a plain cuMemFree would wait for it).
    pub fn upload_frames(&self, data: &[u8], descs: &[Desc]) -> anyhow::Result<DeviceFrames> {
        let stream = Stream::new(&self.ctx)?;
        let d = DeviceBuffer::new_async(&self.ctx, data.len(), &stream)?;
        d.upload_on(&stream, data)?;
        let nb = std::mem::size_of_val(descs);
        let ds = DeviceBuffer::new_async(&self.ctx, nb, &stream)?;
        // SAFETY: Desc is repr(C) plain data.
        ds.upload_on(&stream, unsafe {
            std::slice::from_raw_parts(descs.as_ptr() as *const u8, nb)
        })?;
        let v = DeviceBuffer::new_async(
            &self.ctx,
            descs.len() * std::mem::size_of::<Verdict>(),
            &stream,
        )?;
        let counters =
            DeviceBuffer::new_async(&self.ctx, std::mem::size_of::<QueueCounters>(), &stream)?;
        counters.zero_on(&stream)?;
        // The table in force now, kept alive by the frames (a later swap cannot free it).
        let table = self.current_table();
        let n_rules = table.as_ref().map_or(0, |t| t.n_rules);
        // Its own per-rule hits: bulk runs must not add to the queues' counters.
        let hits = DeviceBuffer::new_async(&self.ctx, n_rules as usize * 8, &stream)?;
        hits.zero_on(&stream)?;
        let qd = QueueDesc {
            pipeline: self.pipeline_flags & !abi::PIPE_META_OUT,
            counters: counters.ptr,
            rule_hits: if n_rules > 0 && self.pipeline_flags & abi::PIPE_COUNT != 0 {
                hits.ptr
            } else {
                0
            },
            ctas: 1,
            // Composed pipelines: the first queue's stage counters and the parameter table.
            stage_counters: self
                .queues
                .first()
                .and_then(|q| lock(q).stage_counters.as_ref().map(|b| b.ptr))
                .unwrap_or(0),
            stage_params: self.stage_params.as_ref().map_or(0, |p| p.table_addr()),
            acl_tables: table.as_ref().map_or(0, |t| t.tables_addr()),
            n_rules,
            default_action: table
                .as_ref()
                .map_or(self.default_action, |t| t.default_action),
            ..Default::default()
        };
        let qdb = DeviceBuffer::new_async(&self.ctx, std::mem::size_of::<QueueDesc>(), &stream)?;
        // SAFETY: QueueDesc is repr(C) plain data.
        qdb.upload_on(&stream, unsafe {
            std::slice::from_raw_parts(
                &qd as *const QueueDesc as *const u8,
                std::mem::size_of::<QueueDesc>(),
            )
        })?;
        Ok(DeviceFrames {
            _table: table,
            data: d,
            descs: ds,
            verdicts: v,
            counters,
            hits,
            qdesc: qdb,
            n: descs.len() as u32,
            stream,
        })
    }

    /// Runs the pipeline over all frames `reps` times; returns the GPU time of each pass in
    /// milliseconds (CUDA events).
    pub fn run_bulk(&self, f: &DeviceFrames, reps: usize) -> anyhow::Result<Vec<f64>> {
        self.ctx.bind()?;
        let threads = 256u32;
        let per_sm = self.f_bulk.occupancy(threads)?.max(1);
        let grid = (per_sm * self.ctx.info.multiprocessors).min(f.n.div_ceil(threads).max(1));
        let mut out = Vec::with_capacity(reps);
        let (e0, e1) = (Event::new(&self.ctx)?, Event::new(&self.ctx)?);
        for _ in 0..reps {
            let mut qd = f.qdesc.ptr;
            let mut data = f.data.ptr;
            let mut descs = f.descs.ptr;
            let mut n = f.n;
            let mut v = f.verdicts.ptr;
            let mut params = [
                &mut qd as *mut u64 as *mut c_void,
                &mut data as *mut u64 as *mut c_void,
                &mut descs as *mut u64 as *mut c_void,
                &mut n as *mut u32 as *mut c_void,
                &mut v as *mut u64 as *mut c_void,
            ];
            f.stream.record(&e0)?;
            // SAFETY: matches pw_bulk(const pw_queue_desc*, const uint8_t*, const pw_desc*,
            // uint32_t, pw_verdict*); all buffers hold n entries.
            unsafe { self.f_bulk.launch(&f.stream, grid, threads, &mut params)? };
            f.stream.record(&e1)?;
            e1.synchronize()?;
            out.push(e0.elapsed_ms(&e1)? as f64);
        }
        Ok(out)
    }

    /// The verdicts of the last bulk run.
    pub fn bulk_verdicts(&self, f: &DeviceFrames) -> anyhow::Result<Vec<Verdict>> {
        let mut v = vec![Verdict::default(); f.n as usize];
        let nb = std::mem::size_of_val(v.as_slice());
        // SAFETY: Verdict is repr(C) plain data; the buffer is exactly nb bytes.
        let raw = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, nb) };
        self.ctx.bind()?;
        f.verdicts.download_on(&f.stream, raw)?;
        Ok(v)
    }
}

impl Drop for GpuExecutor {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!("GPU executor shutdown: {e:#}");
        }
    }
}

/// Host->device copy bandwidth from pinned memory on device `device` (bytes per second),
/// `bytes` per copy, median of `reps`. Call it when no persistent kernel runs: freeing the
/// buffers synchronises the device.
pub fn measure_htod(device: u32, bytes: usize, reps: usize) -> anyhow::Result<f64> {
    let ctx = Context::new(device).map_err(|e| anyhow::anyhow!("{e}"))?;
    let src = PinnedBuffer::new(&ctx, bytes)?;
    let dst = DeviceBuffer::new(&ctx, bytes)?;
    let s = Stream::new(&ctx)?;
    let (e0, e1) = (Event::new(&ctx)?, Event::new(&ctx)?);
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        s.record(&e0)?;
        // SAFETY: both buffers hold `bytes`.
        unsafe { s.copy_htod(dst.ptr, src.host, bytes)? };
        s.record(&e1)?;
        e1.synchronize()?;
        t.push(e0.elapsed_ms(&e1)? as f64);
    }
    t.sort_by(f64::total_cmp);
    Ok(bytes as f64 / (t[t.len() / 2] / 1e3))
}

/// Frames resident in device memory, for stage throughput.
pub struct DeviceFrames {
    _table: Option<Arc<TableVersion>>,
    data: DeviceBuffer,
    descs: DeviceBuffer,
    verdicts: DeviceBuffer,
    counters: DeviceBuffer,
    hits: DeviceBuffer,
    qdesc: DeviceBuffer,
    n: u32,
    stream: Stream,
}

impl DeviceFrames {
    pub fn len(&self) -> usize {
        self.n as usize
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Per-rule hits accumulated over every bulk run so far.
    pub fn rule_hits(&self) -> anyhow::Result<Vec<u64>> {
        let mut raw = vec![0u8; self.hits.len];
        self.hits.download_on(&self.stream, &mut raw)?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect())
    }

    /// Counters accumulated over every bulk run so far.
    pub fn counters(&self) -> anyhow::Result<QueueCounters> {
        let mut c = QueueCounters::default();
        // SAFETY: QueueCounters is repr(C) plain data of exactly this size.
        let raw = unsafe {
            std::slice::from_raw_parts_mut(
                &mut c as *mut QueueCounters as *mut u8,
                std::mem::size_of::<QueueCounters>(),
            )
        };
        self.counters.download_on(&self.stream, raw)?;
        Ok(c)
    }
}

fn lock(m: &Mutex<Queue>) -> std::sync::MutexGuard<'_, Queue> {
    // A panic while holding the lock cannot leave the ring inconsistent in a way the GPU cares
    // about (indices are only advanced at the end), so a poisoned lock is used as is.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn qstate_name(s: u32) -> &'static str {
    match s {
        abi::QSTATE_IDLE => "not started",
        abi::QSTATE_RUNNING => "running",
        abi::QSTATE_EXIT_FLAG => "exited on the exit flag",
        abi::QSTATE_EXIT_TIMEOUT => "exited after the idle timeout",
        abi::QSTATE_BAD_SLOT => "stopped on an inconsistent slot header",
        _ => "unknown state",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_threads_are_512_only_for_small_persistent_bursts_that_fit() {
        let small = GpuOptions {
            burst_size: 32,
            ..Default::default()
        };
        assert_eq!(small.default_threads(1, 0, 132), 512);
        assert_eq!(small.default_threads(132, 0, 132), 512);
        // One CTA more than the SMs, or CTAs of another executor beside them: 256.
        assert_eq!(small.default_threads(133, 0, 132), 256);
        assert_eq!(small.default_threads(100, 40, 132), 256);
        // Device rings: 4 CTAs per 32-frame burst by default.
        let dev = GpuOptions {
            placement: Placement::Device,
            ..small.clone()
        };
        assert_eq!(dev.default_threads(33, 0, 132), 512);
        assert_eq!(dev.default_threads(34, 0, 132), 256);
        for o in [
            GpuOptions {
                burst_size: 64,
                ..small.clone()
            },
            GpuOptions {
                mode: Mode::Launch,
                ..small.clone()
            },
            GpuOptions {
                mode: Mode::Graph,
                ..small.clone()
            },
        ] {
            assert_eq!(o.default_threads(1, 0, 132), 256, "{o:?}");
        }
    }

    #[test]
    fn options_parse_and_validate() {
        let o: GpuOptions = serde_saphyr::from_str(
            "mode: graph\nplacement: mapped\nburst_size: 32\nring_slots: 64\ngraph_bursts: 8\n",
        )
        .unwrap();
        assert_eq!(o.mode, Mode::Graph);
        assert_eq!(o.placement_of(3), Placement::Mapped);
        assert!(o.validate().is_ok());
        assert_eq!(o.threads(), 256);
        let bad: Result<GpuOptions, _> = serde_saphyr::from_str("burst_sise: 3\n");
        assert!(bad.is_err());
        let o = GpuOptions {
            burst_size: 2000,
            ..Default::default()
        };
        assert!(o.validate().unwrap_err().contains("burst_size"));
        let o = GpuOptions {
            mode: Mode::Graph,
            ring_slots: 10,
            graph_bursts: 4,
            ..Default::default()
        };
        assert!(o.validate().unwrap_err().contains("graph_bursts"));
    }

    /// Where tagged words apply by default, and the errors `tagged: true` gives where they
    /// cannot.
    #[test]
    fn tagged_options() {
        let small = GpuOptions {
            burst_size: 32,
            slot_data_bytes: Some(4096),
            ..Default::default()
        };
        if !tagged_stores_atomic() {
            // No tagged queue on this CPU, and `tagged: true` says why.
            assert!(!small.tagged_queue(0));
            let on = GpuOptions {
                tagged: Some(true),
                ..small.clone()
            };
            let e = on.validate().unwrap_err();
            assert!(e.contains("AVX"), "{e}");
            return;
        }
        assert!(
            small.tagged_queue(0),
            "small mapped persistent slots are tagged"
        );
        // The default slots (burst 256 x 2048 B of data) do not fit the staging area.
        assert!(!GpuOptions::default().tagged_queue(0));
        let off = GpuOptions {
            tagged: Some(false),
            ..small.clone()
        };
        assert!(!off.tagged_queue(0));
        let mixed = GpuOptions {
            queue_placement: vec![Placement::Device],
            ..small.clone()
        };
        assert!(!mixed.tagged_queue(0) && mixed.tagged_queue(1));
        let launch = GpuOptions {
            mode: Mode::Launch,
            tagged: Some(true),
            ..small.clone()
        };
        assert!(!launch.tagged_queue(0));
        assert!(launch.validate().unwrap_err().contains("executor.tagged"));
        let big = GpuOptions {
            tagged: Some(true),
            ..Default::default()
        };
        let e = big.validate().unwrap_err();
        assert!(e.contains("executor.tagged") && e.contains("24576"), "{e}");
        let device = GpuOptions {
            placement: Placement::Device,
            tagged: Some(true),
            ..small.clone()
        };
        assert!(device
            .validate()
            .unwrap_err()
            .contains("no queue is mapped"));
        // A block of 32 threads checks at most 32 x 32 granules of 8 bytes.
        let narrow = GpuOptions {
            block_threads: Some(32),
            slot_data_bytes: Some(16384),
            ..small.clone()
        };
        assert!(!narrow.tagged_queue(0));
        let wide = GpuOptions {
            block_threads: Some(512),
            ..small.clone()
        };
        assert!(wide.validate().is_ok() && wide.tagged_queue(0));
        let wide_launch = GpuOptions {
            mode: Mode::Launch,
            ..wide
        };
        assert!(wide_launch
            .validate()
            .unwrap_err()
            .contains("block_threads"));
    }

    /// The host's tagged encoding is the layout the kernel decodes: granule g = {image[12g..12g +
    /// 12], tag}, the last granule's bytes past the image copied as they are, nothing written
    /// past its granules.
    #[test]
    fn tagged_encoding() {
        if !tagged_stores_atomic() {
            eprintln!("skipped: this CPU has no atomic 16-byte stores (no tagged queues here)");
            return;
        }
        for len in [48usize, 64, 100, 4704] {
            let mut img: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            img.resize(tagged_src_len(len), 0xEE); // bytes past len: written as they are
            let granules = len.div_ceil(12);
            // 16-byte aligned, one granule of slack that must stay untouched.
            let mut slot = vec![u128::MAX; granules + 1];
            // SAFETY: slot holds 16 * (granules + 1) bytes, 16-byte aligned.
            unsafe { store_tagged(slot.as_mut_ptr() as *mut u8, &img, len, 0xA5A5_0001) };
            let bytes: Vec<u8> = slot.iter().flat_map(|w| w.to_le_bytes()).collect();
            for g in 0..granules {
                let gr = &bytes[16 * g..16 * g + 16];
                assert_eq!(
                    &gr[..12],
                    &img[12 * g..12 * g + 12],
                    "len {len} granule {g}"
                );
                assert_eq!(
                    u32::from_le_bytes(gr[12..].try_into().unwrap()),
                    0xA5A5_0001
                );
            }
            assert_eq!(
                slot[granules],
                u128::MAX,
                "len {len}: wrote past the granules"
            );
        }
    }

    /// Without a GPU (CI) probing and construction return a reason, never panic.
    #[test]
    fn no_gpu_is_a_clean_error() {
        if driver::driver_present() {
            eprintln!("skipped: a CUDA driver is present on this machine");
            return;
        }
        let e = probe(0).unwrap_err();
        assert!(matches!(e, Unavailable::NoDriverLibrary), "{e}");
        let image = KernelImage {
            binary: None,
            ..pktwarp_kernels::builtin_image()
        };
        let pd = PipelineDesc {
            parse: true,
            acl: None,
            count: true,
            default_action: abi::ACTION_PASS,
        };
        let err = GpuExecutor::new(GpuOptions::default(), pd, 1, &image)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("no usable GPU"), "{err}");
    }
}
