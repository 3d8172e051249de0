//! Receiving with a copy: [`DpdkRx`] (an [`RxPort`]) copies each frame of a burst into the
//! pipeline's [`Burst`] (from GPU memory too, when the RX pool lives there), applies software
//! steering, and frees the mbufs; [`DpdkRx::rx_gpu`] hands GPUDirect frames over in place.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{
    append_bytes, config_err, eal, flow, gpu, sys, BufferPlacement, DpdkPort, HandleCounters,
    ZcFacts, MAX_BURST,
};
use crate::burst::{Burst, FrameDesc};
use crate::port::gpu_rx::{GpuRx, GpuRxBurst, GpuRxStatus};
use crate::port::{PortError, RxPort, RxStatus};

/// Receives from some of a port's RX queues; implements [`RxPort`].
pub struct DpdkRx {
    pub(super) label: String,
    pub(super) port: DpdkPort,
    pub(super) queues: Vec<u16>,
    pub(super) next: usize,
    pub(super) burst: usize,
    pub(super) mbufs: Vec<*mut sys::rte_mbuf>,
    /// Receive time of the last frame (ns, [`now_ns`]).
    pub(super) last_frame_ns: u64,
    /// `rx_mbufs` got frames since its last empty poll (it reads no clock per burst: the idle
    /// time counts from the first empty poll after frames).
    pub(super) zc_fresh: bool,
    pub(super) idle_end: Option<Duration>,
    pub(super) steering: flow::SoftwareHandle,
    /// Zero-copy path counts (see [`HandleCounters`]).
    pub(super) hc: Arc<HandleCounters>,
    /// Copies of setup facts read on every zero-copy burst (no trip to the shared PortInner).
    pub(super) zc: ZcFacts,
}

// SAFETY: the mbuf array only holds pointers between an rx call and its free inside that call.
unsafe impl Send for DpdkRx {}

impl DpdkRx {
    /// The port this handle receives from.
    pub fn port(&self) -> &DpdkPort {
        &self.port
    }

    /// Polls RX queue `q` once; appends its frames to `burst`, each followed by `room` spare
    /// bytes (see [`Burst::push_with_room`]). Returns the frames the device gave (those the
    /// port's software steering dropped included).
    pub(super) fn poll_queue(
        &mut self,
        q: u16,
        burst: &mut Burst,
        max: usize,
        room: usize,
    ) -> usize {
        let want = max.min(self.burst);
        let inner = &self.port.inner;
        // SAFETY: started port, valid queue, mbufs has room for `want` <= MAX_BURST pointers.
        let n = unsafe {
            sys::eth_rx_burst(inner.setup.port_id, q, self.mbufs.as_mut_ptr(), want as u16)
        } as usize;
        if n == 0 {
            return 0;
        }
        let ts = now_ns();
        self.last_frame_ns = ts;
        let sw = self.steering.load();
        let mut bytes = 0u64;
        let on_gpu = inner.setup.placement == BufferPlacement::GpuDirect;
        if on_gpu && !inner.pools.ext.as_ref().is_some_and(|g| g.make_current()) {
            // The frames are in GPU memory and CUDA is unusable on this thread: count them.
            // SAFETY: the n mbufs are ours (returned by rx_burst).
            unsafe { sys::rte_pktmbuf_free_bulk(self.mbufs.as_mut_ptr(), n as u32) };
            inner
                .counters
                .rx_gpu_copy_error
                .fetch_add(n as u64, Ordering::Relaxed);
            return 0;
        }
        for i in 0..n {
            let m = self.mbufs[i];
            if let Some(&next) = self.mbufs[..n].get(i + 1) {
                // SAFETY: next is a valid mbuf returned by this rx call; only its first cache
                // line (written by the PMD) is read, to start fetching its data early.
                unsafe { prefetch((*next).buf_addr.cast::<u8>().add((*next).data_off as usize)) };
            }
            let offset = burst.data.len() as u32;
            // SAFETY: m is an mbuf the PMD just returned: a valid chain of nb_segs segments,
            // each with data_len bytes at buf_addr + data_off (host memory, or GPU memory when
            // the placement is GpuDirect), owned by us until freed below.
            let (pkt_len, rss, copied, mark) = unsafe {
                let mut seg = m;
                let mut copied = true;
                while !seg.is_null() {
                    let s = &*seg;
                    let data = (s.buf_addr as *const u8).add(s.data_off as usize);
                    if on_gpu {
                        copied &= gpu::copy_to_host(data, s.data_len as usize, &mut burst.data);
                    } else {
                        append_bytes(&mut burst.data, data, s.data_len as usize);
                    }
                    seg = s.next;
                }
                let mb = &*m;
                let has = mb.ol_flags & u64::from(sys::RTE_MBUF_F_RX_RSS_HASH) != 0;
                (
                    mb.pkt_len,
                    has.then_some(mb.__bindgen_anon_2.hash.rss),
                    copied,
                    super::mbuf::nic_mark(mb),
                )
            };
            if !copied {
                burst.data.truncate(offset as usize);
                inner
                    .counters
                    .rx_gpu_copy_error
                    .fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let len = burst.data.len() as u32 - offset;
            let frame = &burst.data[offset as usize..];
            // A rule the NIC refused: its fate and its mark, as the NIC would have applied them.
            let decision = sw.decide(frame);
            let mark = decision.mark.unwrap_or(mark);
            let queue = match decision.fate {
                None => q,
                Some(flow::SwFate::Queue(sq)) => sq,
                Some(flow::SwFate::Drop) => {
                    // Dropped by a software steering rule: take the frame back out.
                    burst.data.truncate(offset as usize);
                    inner
                        .counters
                        .rx_steering_drop
                        .fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            };
            bytes += len as u64;
            burst.descs.push(FrameDesc {
                offset,
                len,
                wire_len: pkt_len.max(len),
                port: self.port.index,
                queue,
                rss_hash: rss.unwrap_or(0),
                mark,
                timestamp_ns: ts,
            });
            if room > 0 {
                burst.data.resize(burst.data.len() + room, 0);
            }
        }
        // SAFETY: the n mbufs are ours (returned by rx_burst) and no longer referenced.
        unsafe { sys::pw_rx_free_bulk(inner.rx_pool, self.mbufs.as_mut_ptr(), n as u32) };
        // This handle's own counters (summed by DpdkPort::counters): the receive threads of
        // one port share no counter cache line.
        self.hc.rx_frames.add(n as u64);
        self.hc.rx_bytes.add(bytes);
        n
    }
}

pub use crate::port::gpu_rx::GpuFrame;

/// Frames received into GPU memory. Their mbufs stay owned by this value, so the NIC does not
/// reuse the buffers while the GPU reads them; dropping it returns them to the pool.
pub struct GpuFrames {
    port: DpdkPort,
    mbufs: Vec<*mut sys::rte_mbuf>,
    pub frames: Vec<GpuFrame>,
    pub timestamp_ns: u64,
}

// SAFETY: the mbufs are owned by this value alone until it is dropped; mempools are thread-safe.
unsafe impl Send for GpuFrames {}

impl Drop for GpuFrames {
    fn drop(&mut self) {
        if !self.mbufs.is_empty() {
            // SAFETY: mbufs received by rx_gpu and owned here; the pool lives while port does.
            unsafe { sys::rte_pktmbuf_free_bulk(self.mbufs.as_mut_ptr(), self.mbufs.len() as u32) };
        }
        let _ = &self.port;
    }
}

impl DpdkRx {
    /// Receives up to `max` frames without copying them (GPUDirect ports only): the frames stay
    /// in GPU memory where the NIC wrote them. Software steering (for rules the NIC refused)
    /// needs the headers on the CPU and is not applied here; a GPU pipeline steers on the GPU.
    pub fn rx_gpu(&mut self, max: usize) -> Result<GpuFrames, PortError> {
        eal::register_thread();
        let inner = &self.port.inner;
        if inner.setup.placement != BufferPlacement::GpuDirect {
            return Err(config_err(format!(
                "port {}: rx_gpu needs RX buffers in GPU memory (placement is {:?})",
                inner.setup.name, inner.setup.placement
            )));
        }
        let want = max.min(self.burst).min(MAX_BURST);
        let mut out = GpuFrames {
            port: self.port.clone(),
            mbufs: Vec::with_capacity(want),
            frames: Vec::with_capacity(want),
            timestamp_ns: now_ns(),
        };
        let nq = self.queues.len();
        for _ in 0..nq {
            let q = self.queues[self.next];
            self.next = (self.next + 1) % nq;
            // SAFETY: started port, valid queue, room for `want` pointers.
            let n = unsafe {
                sys::eth_rx_burst(inner.setup.port_id, q, self.mbufs.as_mut_ptr(), want as u16)
            } as usize;
            for &m in &self.mbufs[..n] {
                // SAFETY: an mbuf the PMD returned; only its header (host memory) is read.
                let mb = unsafe { &*m };
                let has = mb.ol_flags & u64::from(sys::RTE_MBUF_F_RX_RSS_HASH) != 0;
                let rss = if has {
                    // SAFETY: reading the rss member of the hash union (plain u32).
                    unsafe { mb.__bindgen_anon_2.hash.rss }
                } else {
                    0
                };
                out.frames.push(GpuFrame {
                    addr: mb.buf_addr as u64 + u64::from(mb.data_off),
                    len: u32::from(mb.data_len),
                    wire_len: mb.pkt_len,
                    queue: q,
                    rss_hash: rss,
                    mark: super::mbuf::nic_mark(mb),
                });
                out.mbufs.push(m);
            }
            if n > 0 {
                let bytes: u64 = out.frames.iter().map(|f| u64::from(f.len)).sum();
                inner
                    .counters
                    .rx_frames
                    .fetch_add(n as u64, Ordering::Relaxed);
                inner.counters.rx_bytes.fetch_add(bytes, Ordering::Relaxed);
                self.last_frame_ns = out.timestamp_ns;
                break;
            }
        }
        Ok(out)
    }
}

impl GpuRx for DpdkRx {
    fn gpu(&self) -> u32 {
        // The RX pool's GPU memory is GPU 0's (gpu::GpuMemory).
        0
    }

    fn rx_gpu_burst(&mut self, max: usize) -> Result<GpuRxStatus, PortError> {
        let mut got = self.rx_gpu(max)?;
        if got.frames.is_empty() {
            return Ok(match self.idle_end {
                Some(d) if now_ns().saturating_sub(self.last_frame_ns) >= d.as_nanos() as u64 => {
                    GpuRxStatus::End
                }
                _ => GpuRxStatus::Idle,
            });
        }
        let frames = std::mem::take(&mut got.frames);
        Ok(GpuRxStatus::Frames(GpuRxBurst {
            frames,
            timestamp_ns: got.timestamp_ns,
            hold: Box::new(got),
        }))
    }
}

impl DpdkRx {
    /// Nothing received: `End` once `idle_end_ms` passed since the last frame, else `Idle`.
    pub(super) fn idle_status(&self) -> RxStatus {
        match self.idle_end {
            Some(d) if now_ns().saturating_sub(self.last_frame_ns) >= d.as_nanos() as u64 => {
                RxStatus::End
            }
            _ => RxStatus::Idle,
        }
    }
}

impl RxPort for DpdkRx {
    fn rx_burst(&mut self, burst: &mut Burst, max: usize) -> Result<RxStatus, PortError> {
        eal::register_thread();
        if max == 0 {
            return Ok(RxStatus::Idle);
        }
        // Poll each queue at most once, starting after the last one served.
        let nq = self.queues.len();
        for _ in 0..nq {
            let q = self.queues[self.next];
            self.next = (self.next + 1) % nq;
            let n = self.poll_queue(q, burst, max, 0);
            if n > 0 {
                return Ok(RxStatus::Frames(n));
            }
        }
        Ok(self.idle_status())
    }

    fn name(&self) -> &str {
        &self.label
    }

    fn port_counters(&self) -> Vec<(String, u64)> {
        self.port.counters()
    }

    fn steered_in_nic(&self) -> bool {
        self.port.steered_in_nic()
    }

    fn split_by_queue(
        &mut self,
        steering: &Arc<crate::steer::Steering>,
        queues: usize,
    ) -> Result<Vec<Box<dyn crate::port::QueueRx>>, String> {
        Ok(self
            .split(steering, queues)?
            .into_iter()
            .map(|q| Box::new(q) as Box<dyn crate::port::QueueRx>)
            .collect())
    }

    fn gpu_rx(&mut self) -> Option<&mut dyn GpuRx> {
        if self.port.inner.setup.placement == BufferPlacement::GpuDirect {
            Some(self)
        } else {
            None
        }
    }

    fn counter_source(&self) -> Option<crate::port::CounterSource> {
        // Weak: the metrics never keep a device open after the run let go of it.
        let inner = Arc::downgrade(&self.port.inner);
        let index = self.port.index;
        Some(Arc::new(move || {
            let inner = inner.upgrade()?;
            Some(DpdkPort { inner, index }.counters())
        }))
    }
}

/// Wall-clock nanoseconds for receive timestamps, from the TSC (one `rdtsc` per burst instead
/// of a clock_gettime, which costs ~100 ns under some hypervisors), anchored to the realtime
/// clock once per process.
pub(super) fn now_ns() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        // (anchor ns, anchor TSC, ns per TSC tick): one multiply per call (a u128 division
        // costs more than the rest of a zero-copy burst's bookkeeping).
        static BASE: OnceLock<(u64, u64, f64)> = OnceLock::new();
        let &(base_ns, base_tsc, ns_per_tick) = BASE.get_or_init(|| {
            // SAFETY: rte_get_tsc_hz only reads a value EAL measured at init (ports exist only
            // after init).
            let hz = unsafe { sys::rte_get_tsc_hz() };
            let scale = if hz > 0 { 1e9 / hz as f64 } else { 0.0 };
            // SAFETY: _rdtsc has no preconditions on x86_64.
            let tsc = unsafe { core::arch::x86_64::_rdtsc() };
            (wall_ns(), tsc, scale)
        });
        if ns_per_tick > 0.0 {
            // SAFETY: as above.
            let dt = unsafe { core::arch::x86_64::_rdtsc() }.wrapping_sub(base_tsc);
            // f64 keeps ns exact to well under a microsecond for months of uptime.
            return base_ns + (dt as f64 * ns_per_tick) as u64;
        }
    }
    wall_ns()
}

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Starts loading the cache line at `p` (a hint; never faults).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint and does not fault on any address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p.cast::<i8>(), core::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
