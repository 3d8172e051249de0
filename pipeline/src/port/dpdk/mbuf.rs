//! Zero-copy forwarding, the way a DPDK application (DPDK's examples/l2fwd) does it: frames stay
//! in the mbufs the PMD received them into, the pipeline reads them in place, dropped frames are
//! freed, and the rest are handed to `rte_eth_tx_burst` as they are.
//!
//! [`DpdkRx::rx_mbufs`] fills an [`MbufBurst`]; [`MbufBurst::frames`] gives the pipeline
//! (`Pipeline::run_frames`) each frame's descriptor and bytes; [`MbufBurst::retain`] frees the
//! frames a verdict dropped; [`DpdkTx::tx_mbufs`] sends the rest. The copying path
//! (`RxPort::rx_burst` / `TxPort::tx_burst`) stays for everything else (GPU queues, other ports).
//!
//! Chained (multi-segment) mbufs, which a PMD delivers for frames larger than one buffer (e.g.
//! net_pcap on a jumbo frame, or scatter RX): the chain is kept as it is for TX, and the frame's
//! bytes are copied once, at receive, into the burst's own buffer so [`MbufBurst::frame`] can
//! hand out one contiguous slice. A chain sent to a device that cannot transmit chains (no
//! `MULTI_SEGS` offload) is freed and counted `tx_oversize`, as the copying path does.
//!
//! Receive buffers in GPU memory (GPUDirect) are not readable by the CPU: `rx_mbufs` refuses
//! such a port (use `rx_gpu`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use dpdk_sys as sys;

use super::{config_err, eal, now_ns, BufferPlacement, DpdkRx, DpdkTx, PortPools, MAX_BURST};
use crate::burst::FrameDesc;
use crate::port::{PortError, RxStatus};

/// `Tag::linear` of a frame whose mbuf is one segment (read in place).
const IN_PLACE: u32 = u32::MAX;

/// Per-frame facts kept beside the mbuf pointer.
#[derive(Clone, Copy, Debug, Default)]
struct Tag {
    /// Offset of the frame's contiguous copy in [`MbufBurst::linear`] (chained mbufs only), or
    /// [`IN_PLACE`].
    linear: u32,
    /// pktwarp index of the receiving port.
    port: u16,
    /// RX queue it arrived on.
    queue: u16,
    /// Receive time (ns, one clock read per receive call).
    timestamp_ns: u64,
}

/// Up to [`MAX_BURST`] received mbufs, owned: the ones still held when the burst is cleared or
/// dropped are freed. Reuse one per polling thread (the arrays are allocated once).
pub struct MbufBurst {
    mbufs: Vec<*mut sys::rte_mbuf>,
    tags: Vec<Tag>,
    len: usize,
    /// Contiguous copies of chained frames (see the module doc).
    linear: Vec<u8>,
    /// Keeps the pools of the held mbufs alive (a port closed while its mbufs are here would
    /// otherwise free their pool).
    pools: Vec<Arc<PortPools>>,
}

// SAFETY: the mbufs are owned by this value alone (nobody else frees or reads them until they
// are sent or freed through it); mempools are thread-safe.
unsafe impl Send for MbufBurst {}

impl Default for MbufBurst {
    fn default() -> Self {
        MbufBurst::new()
    }
}

impl Drop for MbufBurst {
    fn drop(&mut self) {
        self.clear();
    }
}

impl MbufBurst {
    pub fn new() -> Self {
        MbufBurst {
            mbufs: vec![std::ptr::null_mut(); MAX_BURST],
            tags: vec![Tag::default(); MAX_BURST],
            len: 0,
            linear: Vec::new(),
            pools: Vec::new(),
        }
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether frame `i` arrived as a chain of several mbufs (its bytes were copied once into
    /// this burst's buffer; the chain itself is what TX sends).
    pub fn is_chained(&self, i: usize) -> bool {
        self.tags[..self.len][i].linear != IN_PLACE
    }

    /// The bytes of frame `i` (panics when `i >= len()`, like slice indexing).
    pub fn frame(&self, i: usize) -> &[u8] {
        let m = self.mbufs[..self.len][i];
        // SAFETY: m is an mbuf this burst owns (received, not yet sent or freed: both need
        // &mut self, which the returned borrow of self excludes). Its header is host memory.
        let mb = unsafe { &*m };
        let lin = self.tags[i].linear;
        if lin != IN_PLACE {
            let start = lin as usize;
            return &self.linear[start..start + mb.pkt_len as usize];
        }
        // SAFETY: a one-segment mbuf holds data_len bytes at buf_addr + data_off, in host
        // memory (rx_mbufs refuses GPU-memory ports), alive while the burst owns the mbuf,
        // which outlives the returned borrow (see above).
        unsafe {
            std::slice::from_raw_parts(
                (mb.buf_addr as *const u8).add(mb.data_off as usize),
                mb.data_len as usize,
            )
        }
    }

    /// Frame `i`'s descriptor (`offset` is 0: the bytes are in the mbuf, see [`Self::frame`]).
    pub fn desc(&self, i: usize) -> FrameDesc {
        let m = self.mbufs[..self.len][i];
        let t = self.tags[i];
        // SAFETY: an owned mbuf (see frame()); only its header is read.
        let mb = unsafe { &*m };
        let has_rss = mb.ol_flags & u64::from(sys::RTE_MBUF_F_RX_RSS_HASH) != 0;
        FrameDesc {
            offset: 0,
            len: mb.pkt_len,
            wire_len: mb.pkt_len,
            port: t.port,
            queue: t.queue,
            // SAFETY: reading the rss member of the hash union (a plain u32) when the PMD
            // flagged it valid.
            rss_hash: if has_rss {
                unsafe { mb.__bindgen_anon_2.hash.rss }
            } else {
                0
            },
            timestamp_ns: t.timestamp_ns,
        }
    }

    /// Every frame's descriptor and bytes, in order: what `Pipeline::run_frames` takes.
    pub fn frames(&self) -> impl ExactSizeIterator<Item = (FrameDesc, &[u8])> + '_ {
        (0..self.len).map(move |i| (self.desc(i), self.frame(i)))
    }

    /// Frees frame `i` (a verdict dropped it) and closes the gap: later frames move down one.
    pub fn drop_frame(&mut self, i: usize) {
        assert!(i < self.len, "frame {i} of a burst of {}", self.len);
        self.remove_where(0, |j| j == i);
    }

    /// Keeps the frames for which `keep(i)` is true (`i` = the frame's index before this call,
    /// so it lines up with the verdicts of a pipeline run over this burst) and frees the rest
    /// with one bulk free. Returns how many were freed.
    pub fn retain(&mut self, mut keep: impl FnMut(usize) -> bool) -> usize {
        self.remove_where(0, |i| !keep(i))
    }

    /// Frees every frame.
    pub fn clear(&mut self) {
        if self.len > 0 {
            // SAFETY: mbufs[..len] are owned by this burst; rte_pktmbuf_free_bulk takes chains
            // and mbufs of any pool (their pools are alive: `pools`).
            unsafe { sys::rte_pktmbuf_free_bulk(self.mbufs.as_mut_ptr(), self.len as u32) };
        }
        self.len = 0;
        self.linear.clear();
    }

    /// Frees the frames at or after `from` for which `gone(i)` holds and compacts the arrays.
    fn remove_where(&mut self, from: usize, mut gone: impl FnMut(usize) -> bool) -> usize {
        let mut freed = [std::ptr::null_mut::<sys::rte_mbuf>(); MAX_BURST];
        let mut nf = 0usize;
        let mut w = from;
        for r in from..self.len {
            if gone(r) {
                freed[nf] = self.mbufs[r];
                nf += 1;
            } else {
                self.mbufs[w] = self.mbufs[r];
                self.tags[w] = self.tags[r];
                w += 1;
            }
        }
        self.len = w;
        if nf > 0 {
            // SAFETY: the nf mbufs were owned by this burst and are no longer in its arrays.
            unsafe { sys::rte_pktmbuf_free_bulk(freed.as_mut_ptr(), nf as u32) };
        }
        nf
    }

    fn hold_pools(&mut self, pools: &Arc<PortPools>) {
        if !self.pools.iter().any(|p| Arc::ptr_eq(p, pools)) {
            self.pools.push(Arc::clone(pools));
        }
    }
}

/// What [`DpdkTx::tx_mbufs`] did with a burst (the burst is empty afterwards).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MbufTx {
    /// Frames the device took.
    pub sent: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Frames freed instead (device full after the retries: `tx_full`; a chain the device
    /// cannot send: `tx_oversize`), counted in the port's counters.
    pub dropped: usize,
}

impl DpdkRx {
    /// Receives up to `max` frames (at most the port's `burst_size`, and what room the burst
    /// has) into `burst`, appending, without copying them: polls this handle's queues round
    /// robin until one gives frames. Software steering (rules the NIC refused) applies as on
    /// the copying path: a drop fate frees the frame (counted `rx_steering_drop`); a queue fate
    /// is not applied (the frame stays on the queue it arrived on, see docs/dpdk.md). Refuses a
    /// port whose RX buffers are in GPU memory.
    pub fn rx_mbufs(&mut self, burst: &mut MbufBurst, max: usize) -> Result<RxStatus, PortError> {
        eal::register_thread();
        let inner = &self.port.inner;
        if inner.setup.placement == BufferPlacement::GpuDirect {
            return Err(config_err(format!(
                "port {}: rx_mbufs reads frames on the CPU, but RX buffers are in GPU memory (use rx_gpu)",
                inner.setup.name
            )));
        }
        let want = max.min(self.burst).min(MAX_BURST - burst.len);
        if want == 0 {
            return Ok(RxStatus::Idle);
        }
        burst.hold_pools(&inner.pools);
        let nq = self.queues.len();
        for _ in 0..nq {
            let q = self.queues[self.next];
            self.next = (self.next + 1) % nq;
            let start = burst.len;
            // SAFETY: started port, valid queue; mbufs[start..] has room for `want` pointers.
            let n = unsafe {
                sys::pw_rte_eth_rx_burst(
                    inner.setup.port_id,
                    q,
                    burst.mbufs.as_mut_ptr().add(start),
                    want as u16,
                )
            } as usize;
            if n == 0 {
                continue;
            }
            let ts = now_ns();
            self.last_frame_ns = ts;
            let tag = Tag {
                linear: IN_PLACE,
                port: self.port.index,
                queue: q,
                timestamp_ns: ts,
            };
            let mut bytes = 0u64;
            for i in start..start + n {
                let m = burst.mbufs[i];
                let mut t = tag;
                // SAFETY: m is an mbuf the PMD just returned: a valid chain of nb_segs
                // segments, each with data_len bytes at buf_addr + data_off in host memory,
                // owned by the burst from now on.
                unsafe {
                    let mb = &*m;
                    bytes += u64::from(mb.pkt_len);
                    if mb.nb_segs > 1 || !mb.next.is_null() {
                        t.linear = burst.linear.len() as u32;
                        let mut seg = m;
                        while !seg.is_null() {
                            let s = &*seg;
                            let data = (s.buf_addr as *const u8).add(s.data_off as usize);
                            burst
                                .linear
                                .extend_from_slice(std::slice::from_raw_parts(
                                    data,
                                    s.data_len as usize,
                                ));
                            seg = s.next;
                        }
                    }
                }
                burst.tags[i] = t;
            }
            burst.len = start + n;
            let sw = self.steering.load();
            if !sw.is_empty() {
                let mut drop = [false; MAX_BURST];
                let mut dropped_bytes = 0u64;
                for (i, d) in drop.iter_mut().enumerate().take(start + n).skip(start) {
                    if matches!(sw.steer(burst.frame(i)), Some(super::SwFate::Drop)) {
                        *d = true;
                        dropped_bytes += burst.frame(i).len() as u64;
                    }
                }
                let gone = burst.remove_where(start, |i| drop[i]);
                bytes -= dropped_bytes;
                inner
                    .counters
                    .rx_steering_drop
                    .fetch_add(gone as u64, Ordering::Relaxed);
            }
            // As on the copying path: every frame received counts, bytes of those kept.
            inner
                .counters
                .rx_frames
                .fetch_add(n as u64, Ordering::Relaxed);
            inner.counters.rx_bytes.fetch_add(bytes, Ordering::Relaxed);
            return Ok(RxStatus::Frames(burst.len - start));
        }
        match self.idle_end {
            Some(d) if now_ns().saturating_sub(self.last_frame_ns) >= d.as_nanos() as u64 => {
                Ok(RxStatus::End)
            }
            _ => Ok(RxStatus::Idle),
        }
    }

    /// The idle time after which this handle reports the end of input (`idle_end_ms`).
    pub fn idle_end(&self) -> Option<Duration> {
        self.idle_end
    }
}

impl DpdkTx {
    /// Sends every frame of `burst` as it is (the mbufs go to the device; nothing is copied):
    /// retries `tx_retries` times while the device takes nothing, then frees what it did not
    /// take and counts it `tx_full`; chains the device cannot send are freed and counted
    /// `tx_oversize` first. Nothing is dropped silently: `MbufTx::dropped` and the port's
    /// counters say how many. The burst is empty afterwards.
    pub fn tx_mbufs(&mut self, burst: &mut MbufBurst) -> Result<MbufTx, PortError> {
        eal::register_thread();
        let inner = &self.port.inner;
        // The device returns the mbufs to their pools whenever it is done with them, up to its
        // close: keep those pools alive as long as this port.
        for p in &burst.pools {
            let addr = Arc::as_ptr(p);
            if !self.lent_pools.contains(&addr) {
                if !Arc::ptr_eq(p, &inner.pools) {
                    match inner.foreign_pools.lock() {
                        Ok(mut v) => v.push(Arc::clone(p)),
                        Err(_) => {
                            return Err(config_err(format!(
                                "port {}: pool registry poisoned",
                                inner.setup.name
                            )))
                        }
                    }
                }
                self.lent_pools.push(addr);
            }
        }
        let mut dropped = 0usize;
        if !inner.setup.tx_multi_seg && !burst.linear.is_empty() {
            let mut chained = [false; MAX_BURST];
            for (c, t) in chained.iter_mut().zip(&burst.tags[..burst.len]) {
                *c = t.linear != IN_PLACE;
            }
            let oversize = burst.remove_where(0, |i| chained[i]);
            inner
                .counters
                .tx_oversize
                .fetch_add(oversize as u64, Ordering::Relaxed);
            dropped += oversize;
        }
        let k = burst.len;
        let mut bytes = 0u64;
        for &m in &burst.mbufs[..k] {
            // SAFETY: owned mbufs; only the header is read.
            bytes += u64::from(unsafe { (*m).pkt_len });
        }
        let port = inner.setup.port_id;
        let mut sent = 0usize;
        let mut tries = 0u32;
        while sent < k {
            // SAFETY: mbufs[sent..k] are owned mbufs; the PMD takes ownership of the ones it
            // accepts (they leave the burst below).
            let got = unsafe {
                sys::pw_rte_eth_tx_burst(
                    port,
                    self.queue,
                    burst.mbufs.as_mut_ptr().add(sent),
                    (k - sent).min(u16::MAX as usize) as u16,
                )
            } as usize;
            sent += got;
            if got == 0 {
                tries += 1;
                if tries > inner.opts.tx_retries {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        let mut unsent_bytes = 0u64;
        if sent < k {
            for &m in &burst.mbufs[sent..k] {
                // SAFETY: the device did not take m; still owned by the burst.
                unsent_bytes += u64::from(unsafe { (*m).pkt_len });
            }
            // SAFETY: as above; freed here and forgotten by the burst below.
            unsafe {
                sys::rte_pktmbuf_free_bulk(burst.mbufs.as_mut_ptr().add(sent), (k - sent) as u32)
            };
            inner
                .counters
                .tx_full
                .fetch_add((k - sent) as u64, Ordering::Relaxed);
            dropped += k - sent;
        }
        // Sent mbufs belong to the device now, unsent ones are freed: the burst holds nothing.
        burst.len = 0;
        burst.linear.clear();
        inner
            .counters
            .tx_frames
            .fetch_add(sent as u64, Ordering::Relaxed);
        inner
            .counters
            .tx_bytes
            .fetch_add(bytes - unsent_bytes, Ordering::Relaxed);
        Ok(MbufTx {
            sent,
            bytes: bytes - unsent_bytes,
            dropped,
        })
    }
}
