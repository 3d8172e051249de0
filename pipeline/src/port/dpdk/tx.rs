//! Transmitting with a copy: [`DpdkTx`] (a [`TxPort`]) copies frames into fresh mbufs of the
//! port's TX pool (chained for a long frame where the device can send chains) and sends them in
//! bursts, counting what the device does not take.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::timed::Held;
use super::{copy_bytes, eal, sys, DpdkPort, HandleCounters, PortPools, ZcFacts};
use crate::port::{PortError, TimedFrame, TxPort, TxSent};

/// Transmits on one of a port's TX queues; implements [`TxPort`].
pub struct DpdkTx {
    pub(super) label: String,
    pub(super) port: DpdkPort,
    pub(super) queue: u16,
    pub(super) burst: usize,
    pub(super) mbufs: Vec<*mut sys::rte_mbuf>,
    /// Fresh mbufs allocated in bulk and not used yet (returned to the pool on drop).
    pub(super) stash: Vec<*mut sys::rte_mbuf>,
    /// Pools whose mbufs `tx_mbufs` already handed to this port (registered in its
    /// `foreign_pools`); compared by address, never dereferenced.
    pub(super) lent_pools: Vec<*const PortPools>,
    /// The last burst source checked against `lent_pools`.
    pub(super) last_lent: *const PortPools,
    /// Zero-copy path counts (see [`HandleCounters`]).
    pub(super) hc: Arc<HandleCounters>,
    /// Copies of setup facts read on every zero-copy burst (no trip to the shared PortInner).
    pub(super) zc: ZcFacts,
    /// Frames held for their send time (software pacing; `timed`).
    pub(super) held: Held,
}

impl Drop for DpdkTx {
    fn drop(&mut self) {
        let mut held = self.held.take_all();
        if !held.is_empty() {
            // Not flushed: the frames held for later are never sent (counted).
            self.port
                .inner
                .counters
                .tx_full
                .fetch_add(held.len() as u64, Ordering::Relaxed);
            // SAFETY: filled mbufs owned by this handle, never given to the device.
            unsafe { sys::rte_pktmbuf_free_bulk(held.as_mut_ptr(), held.len() as u32) };
        }
        if !self.stash.is_empty() {
            // SAFETY: fresh mbufs owned by this handle; the pool lives while self.port does.
            unsafe { sys::rte_pktmbuf_free_bulk(self.stash.as_mut_ptr(), self.stash.len() as u32) };
        }
    }
}

// SAFETY: the mbuf pointers are owned by this handle (stash) or only held during one tx call.
unsafe impl Send for DpdkTx {}

impl DpdkTx {
    /// A fresh TX mbuf from this handle's stash, refilled from the pool in bulk.
    #[inline]
    pub(super) fn take_mbuf(&mut self) -> Option<*mut sys::rte_mbuf> {
        if self.stash.is_empty() {
            let n = self.burst;
            self.stash.resize(n, std::ptr::null_mut());
            // Raw objects: fill() sets the first cache line; the pool keeps next = NULL,
            // nb_segs = 1 and refcnt = 1 for free mbufs, so the second line is not touched
            // (what rte_pktmbuf_reset would write there costs a cache miss per frame).
            // SAFETY: stash has n pointer slots; pool valid.
            let rc = unsafe {
                sys::pw_rte_mempool_get_bulk(
                    self.port.inner.tx_pool,
                    self.stash.as_mut_ptr().cast(),
                    n as u32,
                )
            };
            if rc != 0 {
                self.stash.clear();
                return None;
            }
        }
        self.stash.pop()
    }

    /// Sends self.mbufs[..k] (retrying `tx_retries` times while the device takes nothing);
    /// frees and counts what it did not take. Returns (frames sent, whether all were).
    pub(super) fn send(&mut self, port: u16, k: usize, bytes: u64) -> (usize, bool) {
        let inner = &self.port.inner;
        let mut sent = 0usize;
        let mut tries = 0u32;
        while sent < k {
            // SAFETY: mbufs[sent..k] are filled mbufs we own; the PMD takes ownership of the
            // ones it accepts.
            let got = unsafe {
                sys::eth_tx_burst(
                    port,
                    self.queue,
                    self.mbufs.as_mut_ptr().add(sent),
                    (k - sent) as u16,
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
        inner
            .counters
            .tx_frames
            .fetch_add(sent as u64, Ordering::Relaxed);
        if sent == k {
            inner.counters.tx_bytes.fetch_add(bytes, Ordering::Relaxed);
            return (sent, true);
        }
        let mut unsent = 0u64;
        for &m in &self.mbufs[sent..k] {
            // SAFETY: the device did not take m; still ours.
            unsent += u64::from(unsafe { (*m).pkt_len });
        }
        // SAFETY: the device did not take these; they are still ours.
        unsafe { sys::rte_pktmbuf_free_bulk(self.mbufs.as_mut_ptr().add(sent), (k - sent) as u32) };
        inner
            .counters
            .tx_bytes
            .fetch_add(bytes - unsent, Ordering::Relaxed);
        inner
            .counters
            .tx_full
            .fetch_add((k - sent) as u64, Ordering::Relaxed);
        (sent, false)
    }

    /// Copies `frame` into the fresh mbuf `m` (chaining more mbufs for a long frame when the
    /// device can send chains). Returns false when the frame cannot be sent (counted).
    ///
    /// # Safety
    /// `m` is a freshly allocated mbuf from the TX pool, owned by the caller.
    pub(super) unsafe fn fill(&self, m: *mut sys::rte_mbuf, frame: &[u8]) -> bool {
        let inner = &self.port.inner;
        let room = inner.tx_data_room as usize;
        if frame.len() > room && !inner.setup.tx_multi_seg {
            inner.counters.tx_oversize.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let mut rest = frame;
        let mut seg = m;
        loop {
            let take = rest.len().min(room);
            // SAFETY: seg is an owned fresh mbuf with `room` bytes of room after the headroom.
            unsafe {
                let s = &mut *seg;
                if seg == m {
                    // First segment, raw from the pool: what rte_pktmbuf_reset sets in the
                    // first cache line (the chained ones come from rte_pktmbuf_alloc).
                    s.data_off = (sys::RTE_PKTMBUF_HEADROOM as u16).min(s.buf_len);
                    s.ol_flags &= sys::RTE_MBUF_F_EXTERNAL;
                    s.__bindgen_anon_1.packet_type = 0;
                    s.vlan_tci = 0;
                    s.vlan_tci_outer = 0;
                    s.port = u16::MAX;
                }
                let dst = (s.buf_addr as *mut u8).add(s.data_off as usize);
                copy_bytes(dst, rest.as_ptr(), take);
                s.data_len = take as u16;
                s.pkt_len = take as u32;
            }
            rest = &rest[take..];
            if rest.is_empty() {
                return true;
            }
            // SAFETY: valid pool.
            let next = unsafe { sys::pw_rte_pktmbuf_alloc(inner.tx_pool) };
            if next.is_null() {
                inner.counters.tx_nombuf.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            // SAFETY: both are owned mbufs; chain updates m's pkt_len and nb_segs.
            if unsafe { sys::pw_rte_pktmbuf_chain(m, next) } != 0 {
                // SAFETY: `next` is ours and not linked.
                unsafe { sys::pw_rte_pktmbuf_free(next) };
                inner.counters.tx_oversize.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            seg = next;
        }
    }
}

impl DpdkTx {
    /// Sends the frames, each with its device-clock send time in the Tx timestamp field (0:
    /// none; only on a port with the offload); stops at the first burst the device takes only
    /// in part (after `tx_retries`), so the count returned is a prefix of the frames given
    /// (less frames skipped as oversize), and the frames not taken are counted (`tx_full`,
    /// `tx_nombuf`, `tx_oversize`).
    pub(super) fn send_stamped(
        &mut self,
        frames: &mut dyn Iterator<Item = (&[u8], u64)>,
    ) -> Result<usize, PortError> {
        eal::register_thread();
        let port = self.port.inner.setup.port_id;
        let mut accepted = 0usize;
        // Filled mbufs waiting to be sent: self.mbufs[..k].
        let mut k = 0usize;
        let mut bytes = 0u64;
        loop {
            let next = frames.next();
            if let Some((f, at)) = next {
                let Some(m) = self.take_mbuf() else {
                    let left = 1 + frames.count() as u64;
                    self.port
                        .inner
                        .counters
                        .tx_nombuf
                        .fetch_add(left, Ordering::Relaxed);
                    // Send what is filled already, then stop.
                    let (sent, _) = self.send(port, k, bytes);
                    return Ok(accepted + sent);
                };
                // SAFETY: m is a fresh mbuf of the TX pool owned by this handle.
                if unsafe { self.fill(m, f) } {
                    if at != 0 {
                        // SAFETY: m is ours and filled; `at` is only non-zero on a port with
                        // the offload (timed_burst).
                        unsafe { self.stamp(m, at) };
                    }
                    self.mbufs[k] = m;
                    k += 1;
                    bytes += f.len() as u64;
                } else {
                    // SAFETY: ours, possibly with a partial chain; freed whole.
                    unsafe { sys::pw_rte_pktmbuf_free(m) };
                }
                if k < self.burst {
                    continue;
                }
            }
            if k > 0 {
                let (sent, complete) = self.send(port, k, bytes);
                accepted += sent;
                if !complete {
                    // The device is full: what the caller still offers is dropped (counted).
                    let left = if next.is_some() {
                        frames.count() as u64
                    } else {
                        0
                    };
                    self.port
                        .inner
                        .counters
                        .tx_full
                        .fetch_add(left, Ordering::Relaxed);
                    return Ok(accepted);
                }
                k = 0;
                bytes = 0;
            }
            if next.is_none() {
                return Ok(accepted);
            }
        }
    }
}

impl TxPort for DpdkTx {
    /// Sends the frames now (see [`DpdkTx::send_stamped`]).
    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        self.send_stamped(&mut frames.map(|f| (f, 0)))
    }

    /// Frames with send times: Tx timestamp offload, else held and paced in software
    /// (`port::dpdk::timed`).
    fn tx_burst_timed(
        &mut self,
        frames: &mut dyn Iterator<Item = TimedFrame<'_>>,
    ) -> Result<TxSent, PortError> {
        self.timed_burst(frames, 0)
    }

    fn tx_burst_queued(
        &mut self,
        frames: &mut dyn Iterator<Item = TimedFrame<'_>>,
        queue: u16,
    ) -> Result<TxSent, PortError> {
        self.timed_burst(frames, queue)
    }

    fn tx_poll(&mut self) -> Result<(), PortError> {
        self.release_due()
    }

    fn take_settled(&mut self, out: &mut Vec<crate::port::Settled>) {
        self.held.take_settled(out);
    }

    /// Sends the frames still held for their time (waiting for it, at most `tx_max_hold_ms`),
    /// then lets the driver free what it has sent.
    fn flush(&mut self) -> Result<(), PortError> {
        self.drain_held()?;
        // SAFETY: started port and valid queue; frees mbufs the driver has finished sending.
        unsafe { sys::rte_eth_tx_done_cleanup(self.port.inner.setup.port_id, self.queue, 0) };
        Ok(())
    }

    fn name(&self) -> &str {
        &self.label
    }

    /// TX queues `0..n` of this port, one handle each (a DPDK TX queue takes one sender at a
    /// time; distinct queues take concurrent senders).
    fn queue_senders(&self, n: usize) -> Option<Result<Vec<Box<dyn TxPort>>, PortError>> {
        let have = usize::from(self.port.inner.setup.tx_queues);
        if have < n && self.port.inner.opts.tx_queues_fitted {
            // `tx_queues` left out and the device has fewer: the threads share one sender.
            tracing::info!(
                event = "tx_threads",
                port = %self.port.inner.setup.name,
                sender = "shared",
                "port {}: {n} TX threads share TX queue {} (the device has {have} TX queues)",
                self.port.inner.setup.name,
                self.queue
            );
            return None;
        }
        if have < n {
            return Some(Err(super::config_err(format!(
                "port {} has {have} TX queues (dpdk.tx_queues) for {n} TX threads, one per queue: give dpdk.tx_queues: {n}, or queues.tx_threads: one",
                self.port.inner.setup.name
            ))));
        }
        Some(
            (0..n)
                .map(|q| {
                    self.port
                        .tx(q as u16)
                        .map(|t| Box::new(t) as Box<dyn TxPort>)
                })
                .collect(),
        )
    }
}
