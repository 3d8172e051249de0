//! Handing bursts to the GPU: a burst written into its ring slot (plain, non-temporal or tagged
//! stores), the slot copied to the device ring where it lives there, and the producer index
//! published (or the burst's kernel or graph launched) per mode.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{fence, Ordering};

use super::abi::{self, Desc, Desc8, SlotHdr};
use super::tables::TableVersion;
use super::tagged::{demote_lines, store_tagged, tagged_granules, tagged_src_len};
use super::{gpu_err, lock, round_up, GpuExecutor, Mode, Placement, Queue, SubmitError};
use crate::burst::Burst;

/// Device placement: the largest unused span between a burst's descriptors and its data that is
/// still copied along to save a second DMA.
const COPY_GAP_MAX: usize = 4096;

/// Mean frame size from which a burst goes into a mapped ring with non-temporal stores
/// ([`GpuOptions::nt_stores`](super::GpuOptions::nt_stores)).
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

/// A by-reference burst's data area (`at`: its frames' base address; nothing for another).
///
/// # Safety
/// `data` is valid for [`super::gather::REFS_DATA`] bytes of writes.
unsafe fn write_refs_base(data: *mut u8, at: Option<u64>) {
    if let Some(at) = at {
        let mut g = [0u8; super::gather::REFS_DATA];
        g[..8].copy_from_slice(&at.to_le_bytes());
        // SAFETY: the caller's promise.
        unsafe { ptr::copy_nonoverlapping(g.as_ptr(), data, g.len()) };
    }
}

/// Where a burst's frame bytes are.
#[derive(Clone, Copy)]
enum Frames<'a> {
    /// In host memory: the burst's data, written into the slot (or its staging).
    Host(&'a [u8]),
    /// In GPU memory: one device address per descriptor, gathered into the device ring's slot
    /// (`bytes` of data area, the frames where their descriptors say).
    Device { srcs: &'a [u64], bytes: usize },
}

impl GpuExecutor {
    /// Hands a burst to queue `queue`. Returns its sequence number, or why not (counted).
    pub fn submit(&self, queue: usize, burst: &Burst) -> Result<u32, SubmitError> {
        self.submit_frames(queue, &burst.descs, Frames::Host(&burst.data))
    }

    /// Hands a burst whose frames are in GPU memory to queue `queue` (a GPUDirect NIC's
    /// receive buffers): frame `i` is `descs[i].len` bytes at device address `srcs[i]`, copied
    /// device to device to `descs[i].offset` of the slot's data area (`bytes` long) before the
    /// kernel sees the burst (see `gather`). Refused (an error, nothing sent) on a
    /// tagged queue, a device ring in `graph` mode, or when a frame lies outside `bytes` or
    /// the slot. On a mapped ring the burst goes by reference instead (frames loaded in pinned
    /// host memory, [`GpuExecutor::pinned_copy`]): the slot carries the descriptors and the
    /// lowest address, and the kernel reads each frame where it is (`PW_SLOT_REFS`); refused
    /// where `gather::host_refusal` says.
    ///
    /// # Safety
    /// Every `srcs[i]..srcs[i] + descs[i].len` is device memory of this executor's GPU (its
    /// primary context) and stays allocated and unchanged until this burst is reaped
    /// ([`GpuExecutor::poll_bursts`]).
    pub unsafe fn submit_gpu_frames(
        &self,
        queue: usize,
        descs: &[crate::burst::FrameDesc],
        srcs: &[u64],
        bytes: usize,
    ) -> Result<u32, SubmitError> {
        self.submit_frames(queue, descs, Frames::Device { srcs, bytes })
    }

    fn submit_frames(
        &self,
        queue: usize,
        descs: &[crate::burst::FrameDesc],
        frames: Frames<'_>,
    ) -> Result<u32, SubmitError> {
        let qm = self.queues.get(queue).ok_or(SubmitError::NoQueue(queue))?;
        let mut q = lock(qm);
        let n = descs.len();
        let mut refs = Vec::new();
        let refs_base = self.refs_burst(queue, &q, descs, frames, &mut refs)?;
        let descs = refs_base.map_or(descs, |_| refs.as_slice());
        let bytes = match frames {
            Frames::Host(data) => data.len(),
            Frames::Device { .. } if refs_base.is_some() => super::gather::REFS_DATA,
            Frames::Device { srcs, bytes } => {
                if let Some(why) = super::gather::refusal(q.placement, q.tagged, self.opts.mode) {
                    return Err(SubmitError::Gpu(format!("queue {queue}: {why}")));
                }
                super::gather::check(descs, srcs, bytes, self.data_cap as usize)
                    .map_err(|e| SubmitError::Gpu(format!("queue {queue}: {e}")))?;
                bytes
            }
        };
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
        if q.next_seq.wrapping_sub(self.first_unfree(queue, &mut q)) >= slots {
            q.host.ring_full_bursts += 1;
            q.host.ring_full_frames += n as u64;
            return Err(SubmitError::RingFull { queue, slots });
        }
        let seq = q.next_seq;
        let slot = (seq % slots) as usize;
        // Compact descriptors when every frame allows (8 bytes a frame instead of 32), unless a
        // stage reads the receive time, which only full descriptors carry.
        let dfmt = if pktwarp_kernels::codegen::pipeline_reads_time(&self.stage_specs) {
            abi::DESC_FULL
        } else {
            Desc8::format_for(descs)
        };
        let off = slot * self.slot_bytes as usize;
        let base = match (&q.staging, &q.ring_mapped) {
            (Some(s), _) => s.host,
            (None, Some(r)) => r.host,
            (None, None) => return Err(gpu_err("queue has no ring memory")),
        };
        // SAFETY: the slot lies inside the buffer (slot < slots) and neither the GPU nor the
        // caller is reading it: its previous burst was reaped, and released where the
        // executor holds reaped slots (ring-full check above), and for `device` placement the
        // staging copy of that burst completed before the kernel consumed it.
        unsafe {
            let slot_ptr = base.add(off);
            let t = q.table.as_deref();
            let hdr = SlotHdr {
                n_frames: n as u16,
                desc_format: dfmt,
                flags: if refs_base.is_some() {
                    abi::SLOT_REFS
                } else {
                    0
                },
                data_bytes: bytes as u32,
                seq,
                generation: t.map_or(0, |t| t.generation as u32),
                acl_tables: t.map_or(0, TableVersion::tables_addr),
                rule_hits: t.map_or(0, TableVersion::hits_addr),
                n_rules: t.map_or(0, |t| t.n_rules),
                default_action: t.map_or(self.default_action, |t| t.default_action),
                stage_params: q.params,
                ..Default::default()
            };
            let hb = std::mem::size_of::<SlotHdr>();
            let raw: [u8; 48] = std::mem::transmute(hdr);
            if let (true, Frames::Host(data)) = (q.tagged, frames) {
                // The image (header, descriptors, frame bytes, each padded to 16 bytes), then
                // all of it as tagged words.
                let nd = round_up(n * Desc8::size_of_format(dfmt), 16);
                let len = hb + nd + round_up(bytes, 16);
                let mut img = std::mem::take(&mut q.image);
                img.clear();
                img.resize(tagged_src_len(len), 0);
                img[..hb].copy_from_slice(&raw);
                write_descs(img.as_mut_ptr().add(hb), descs, dfmt);
                img[hb + nd..hb + nd + bytes].copy_from_slice(data);
                store_tagged(slot_ptr, &img, len, seq.wrapping_add(1));
                demote_lines(slot_ptr, 16 * tagged_granules(len));
                q.image = img;
            } else {
                // Everything but the header's first 16 bytes, then those (n_frames, data_bytes, seq,
                // generation) in one store after a release fence: a persistent kernel polling a
                // mapped ring reads them as its "ready" signal (PW_PIPE_SLOT_SEQ).
                ptr::copy_nonoverlapping(raw.as_ptr().add(16), slot_ptr.add(16), hb - 16);
                write_descs(slot_ptr.add(hb), descs, dfmt);
                let data = slot_ptr.add(self.data_offset as usize);
                // Non-temporal stores only for bursts of large frames, into a mapped ring: the
                // kernel parses those in place and reads their headers alone, while small frames
                // are read whole, faster from the CPU's cache. (Never for a tagged slot, above:
                // see store_tagged.) Frames in GPU memory are gathered at publish.
                let nt = self.opts.nt_stores && q.staging.is_none() && bytes >= NT_MIN_FRAME * n;
                match frames {
                    Frames::Host(src) if nt => {
                        stream_copy(data, src.as_ptr(), bytes);
                        // Non-temporal stores are ordered before the header's store only by
                        // sfence.
                        #[cfg(target_arch = "x86_64")]
                        std::arch::x86_64::_mm_sfence();
                    }
                    Frames::Host(src) => ptr::copy_nonoverlapping(src.as_ptr(), data, bytes),
                    Frames::Device { .. } => write_refs_base(data, refs_base),
                }
                fence(Ordering::Release);
                let mut g0 = [0u8; 16];
                g0.copy_from_slice(&raw[..16]);
                store16(slot_ptr, &g0);
            }
        }
        q.slot_frames[slot] = n as u32;
        q.slot_data[slot] = bytes as u32;
        q.slot_gen[slot] = q.table.as_ref().map_or(0, |t| t.generation);
        q.next_seq = seq.wrapping_add(1);
        q.host.submitted_bursts += 1;
        q.host.submitted_frames += n as u64;
        let gather = match frames {
            Frames::Device { srcs, .. } if refs_base.is_none() => Some((descs, srcs)),
            _ => None,
        };
        q.host.read_in_place_frames += if refs_base.is_some() { n as u64 } else { 0 };
        self.publish(
            queue,
            &mut q,
            seq,
            off,
            n * Desc8::size_of_format(dfmt),
            bytes,
            gather,
        )
        .map_err(gpu_err)?;
        Ok(seq)
    }

    /// A mapped ring takes frames by address as a by-reference burst: its kernel reads each
    /// frame where it is (`PW_SLOT_REFS`), from the base address in the slot's data area. The
    /// base, with `out` the descriptors' offsets from it; `None` for every other burst.
    fn refs_burst(
        &self,
        queue: usize,
        q: &Queue,
        descs: &[crate::burst::FrameDesc],
        frames: Frames<'_>,
        out: &mut Vec<crate::burst::FrameDesc>,
    ) -> Result<Option<u64>, SubmitError> {
        let (Frames::Device { srcs, .. }, Placement::Mapped) = (frames, q.placement) else {
            return Ok(None);
        };
        let tx = q.tx.is_some();
        if let Some(why) = super::gather::host_refusal(q.placement, q.tagged, self.opts.mode, tx) {
            return Err(SubmitError::Gpu(format!("queue {queue}: {why}")));
        }
        super::gather::by_reference(descs, srcs, out)
            .map(Some)
            .map_err(|e| SubmitError::Gpu(format!("queue {queue}: {e}")))
    }

    /// `gather`: the burst's frames are in GPU memory (descriptors and addresses, checked by
    /// `submit_frames`), copied into the device ring's slot after its header.
    #[allow(clippy::too_many_arguments)]
    fn publish(
        &self,
        queue: usize,
        q: &mut Queue,
        seq: u32,
        off: usize,
        desc_bytes: usize,
        bytes: usize,
        gather: Option<(&[crate::burst::FrameDesc], &[u64])>,
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
                        self.fill_slot(q, off, desc_bytes, bytes, gather)?;
                        let p = q.prod_dev.as_ref().map_or(0, |p| p.ptr);
                        // SAFETY: p is the queue's own producer word (a 4-byte device
                        // buffer that device placement always allocates).
                        unsafe { q.stream.write_u32(p, seq.wrapping_add(1))? };
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
                    self.fill_slot(q, off, desc_bytes, bytes, gather)?;
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

    /// Device placement: the slot's header and descriptors from staging into the ring, and its
    /// frames from staging or, for frames in GPU memory, gathered from where they are; all on
    /// the queue's stream, before what the caller queues next (the producer index).
    fn fill_slot(
        &self,
        q: &mut Queue,
        off: usize,
        desc_bytes: usize,
        bytes: usize,
        gather: Option<(&[crate::burst::FrameDesc], &[u64])>,
    ) -> anyhow::Result<()> {
        let Some((descs, srcs)) = gather else {
            return self.copy_slot(q, off, desc_bytes, bytes);
        };
        self.copy_slot(q, off, desc_bytes, 0)?;
        let Some(ring) = q.ring_dev.as_ref() else {
            anyhow::bail!("device placement without device ring");
        };
        let data = ring.ptr + (off + self.data_offset as usize) as u64;
        let mut scratch = std::mem::take(&mut q.gather);
        // SAFETY: submit_frames checked the descriptors against the slot's data area (they
        // stay inside it) and the caller of submit_gpu_frames vouches for the sources; the
        // kernel reads the slot only after the producer index the caller queues next.
        let r = unsafe { super::gather::copy(&q.stream, data, descs, srcs, &mut scratch) };
        q.gather = scratch;
        q.host.gathered_frames += descs.len() as u64;
        r
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
}
