//! Timed send on a TX handle ([`DpdkTx`]): frames with a send time (`Verdict::send_ns`, ns in
//! the receive timestamps' clock, which for DPDK ports is the host's realtime clock, read here
//! as `now_ns`). A time more than `tx_max_hold_ms` ahead is refused (`tx_horizon`); a time
//! that has passed is sent at once (`pktwarp_tx_late`). Otherwise:
//! - Tx timestamp offload (the device advertised `RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP`): the
//!   frame goes to the device at once with its time in the registered mbuf dynamic field and
//!   the dynamic flag set; the time is moved into the device clock with one
//!   `rte_eth_read_clock` per burst, taken to count nanoseconds (as mlx5's does); a device
//!   whose clock cannot be read is paced in software instead.
//! - Software pacing: the frame is copied into an mbuf now and held, in send-time order, until
//!   `tx_poll` (called by the TX thread between bursts, never waiting) finds it due. The TX
//!   thread never blocks on it; `flush` at the end of a run waits out the frames still held,
//!   at most `tx_max_hold_ms`. A held frame is not counted sent when it is taken
//!   (`TxSent::held`): once the device took it or not, it is reported with the queue it came
//!   from (`TxPort::take_settled`), so the queue counts it sent, or a `tx_error` drop, then.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::Ordering;

use super::rx::now_ns;
use super::tx::DpdkTx;
use super::{eal, sys};
use crate::port::{PortError, Settled, TimedFrame, TxSent};

/// Frames a handle holds for their send time (software pacing): a min-heap of (send time,
/// arrival order, mbuf address, queue it came from), so frames of one time keep their order.
#[derive(Default)]
pub(crate) struct Held {
    heap: BinaryHeap<Reverse<(u64, u64, usize, u16)>>,
    seq: u64,
    /// What became of held frames since the last `take_settled`, by queue.
    settled: Vec<Settled>,
}

impl Held {
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Every mbuf held, emptied (to free them).
    pub(crate) fn take_all(&mut self) -> Vec<*mut sys::rte_mbuf> {
        self.heap
            .drain()
            .map(|Reverse((_, _, m, _))| m as *mut sys::rte_mbuf)
            .collect()
    }

    fn settle(&mut self, queue: u16) -> &mut Settled {
        let q = usize::from(queue);
        if self.settled.len() <= q {
            self.settled.resize(q + 1, Settled::default());
        }
        let s = &mut self.settled[q];
        s.queue = queue;
        s
    }

    /// Appends the settled counts (one entry per queue with any) and clears them.
    pub(crate) fn take_settled(&mut self, out: &mut Vec<Settled>) {
        for s in &mut self.settled {
            if s.sent + s.failed > 0 {
                out.push(*s);
            }
            *s = Settled::default();
        }
    }
}

/// How one timed frame is sent.
enum When {
    /// Now, with no time on it (0, or a time already past).
    Now,
    /// Now, with this device-clock time in the Tx timestamp field.
    Stamped(u64),
    /// Held until this time.
    Hold(u64),
    /// Not at all: further ahead than the port holds.
    TooFar,
}

impl DpdkTx {
    /// [`crate::port::TxPort::tx_burst_timed`] for a DPDK port (see the module documentation).
    /// Held frames are reported for `queue` once settled.
    pub(super) fn timed_burst(
        &mut self,
        frames: &mut dyn Iterator<Item = TimedFrame<'_>>,
        queue: u16,
    ) -> Result<TxSent, PortError> {
        eal::register_thread();
        let now = now_ns();
        let horizon = self
            .port
            .inner
            .opts
            .tx_max_hold_ms
            .saturating_mul(1_000_000);
        let port = self.port.inner.setup.port_id;
        // The device clock against ours, read once per burst (offload only).
        let dev_now = self.port.inner.setup.tx_timestamp.and_then(|_| {
            let mut c = 0u64;
            // SAFETY: valid started port, writable local.
            (unsafe { sys::rte_eth_read_clock(port, &mut c) } == 0).then_some(c)
        });
        let inner = std::sync::Arc::clone(&self.port.inner);
        let c = &inner.counters;
        let mut out = TxSent {
            bytes: Some(0),
            ..TxSent::default()
        };
        let mut now_frames: Vec<(&[u8], u64)> = Vec::new();
        for (f, at) in frames {
            let when = if at == 0 {
                When::Now
            } else if at <= now {
                c.tx_late.fetch_add(1, Ordering::Relaxed);
                When::Now
            } else if at - now > horizon {
                When::TooFar
            } else if let Some(d) = dev_now {
                When::Stamped(d.wrapping_add(at - now))
            } else {
                When::Hold(at)
            };
            match when {
                When::Now => now_frames.push((f, 0)),
                When::Stamped(t) => now_frames.push((f, t)),
                When::TooFar => {
                    c.tx_horizon.fetch_add(1, Ordering::Relaxed);
                    out.too_far += 1;
                }
                When::Hold(t) => {
                    if self.hold(f, t, queue) {
                        out.held += 1;
                    }
                }
            }
        }
        if !now_frames.is_empty() {
            let n = self.send_stamped(&mut now_frames.iter().copied())?;
            out.sent += n;
            let b: u64 = now_frames[..n].iter().map(|(f, _)| f.len() as u64).sum();
            out.bytes = out.bytes.map(|x| x + b);
        }
        self.release_due()?;
        Ok(out)
    }

    /// Copies `frame` into a fresh mbuf held until `at`; false when it cannot (counted).
    fn hold(&mut self, frame: &[u8], at: u64, queue: u16) -> bool {
        let Some(m) = self.take_mbuf() else {
            self.port
                .inner
                .counters
                .tx_nombuf
                .fetch_add(1, Ordering::Relaxed);
            return false;
        };
        // SAFETY: m is a fresh mbuf of the TX pool owned by this handle.
        if !unsafe { self.fill(m, frame) } {
            // SAFETY: ours, possibly with a partial chain; freed whole.
            unsafe { sys::pw_rte_pktmbuf_free(m) };
            return false;
        }
        let h = &mut self.held;
        h.heap.push(Reverse((at, h.seq, m as usize, queue)));
        h.seq += 1;
        self.port
            .inner
            .counters
            .tx_paced
            .fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Sends every held frame whose time has come, in time order; never waits. A burst the
    /// device takes only in part frees and counts the rest (`tx_full`), as an untimed one;
    /// each frame's outcome is settled for its queue.
    pub(super) fn release_due(&mut self) -> Result<(), PortError> {
        if self.held.len() == 0 {
            return Ok(());
        }
        eal::register_thread();
        let now = now_ns();
        let port = self.port.inner.setup.port_id;
        // Each frame's queue and length, read before the device owns the mbuf.
        let mut whose: Vec<(u16, u64)> = Vec::with_capacity(self.burst);
        loop {
            let mut k = 0usize;
            let mut bytes = 0u64;
            whose.clear();
            while k < self.burst {
                match self.held.heap.peek() {
                    Some(Reverse((at, _, _, _))) if *at <= now => {}
                    _ => break,
                }
                let Some(Reverse((_, _, m, q))) = self.held.heap.pop() else {
                    break;
                };
                let m = m as *mut sys::rte_mbuf;
                // SAFETY: a filled mbuf this handle owns (held since `hold`).
                let len = u64::from(unsafe { (*m).pkt_len });
                bytes += len;
                whose.push((q, len));
                self.mbufs[k] = m;
                k += 1;
            }
            if k == 0 {
                return Ok(());
            }
            // The device takes a prefix of the burst: those are sent, the rest failed.
            let (sent, _) = self.send(port, k, bytes);
            for (i, &(q, len)) in whose.iter().enumerate() {
                let s = self.held.settle(q);
                if i < sent {
                    s.sent += 1;
                    s.bytes += len;
                } else {
                    s.failed += 1;
                }
            }
            if k < self.burst {
                return Ok(());
            }
        }
    }

    /// At the end of a run: waits for every held frame's time (each was at most
    /// `tx_max_hold_ms` ahead when taken) and sends it.
    pub(super) fn drain_held(&mut self) -> Result<(), PortError> {
        while let Some(Reverse((at, _, _, _))) = self.held.heap.peek().copied() {
            let now = now_ns();
            if at > now {
                let wait = (at - now).min(1_000_000);
                std::thread::sleep(std::time::Duration::from_nanos(wait));
            }
            self.release_due()?;
        }
        Ok(())
    }

    /// Writes the device-clock send time into the mbuf's Tx timestamp field and sets the flag.
    ///
    /// # Safety
    /// `m` is an mbuf this handle owns and the port has Tx timestamp offload
    /// (`setup.tx_timestamp`).
    pub(super) unsafe fn stamp(&self, m: *mut sys::rte_mbuf, t: u64) {
        if let Some((field, flag)) = self.port.inner.setup.tx_timestamp {
            // SAFETY: the registered dynamic field is 8 bytes at `field` inside every mbuf
            // (rte_mbuf_dyn_tx_timestamp_register); `m` is ours.
            unsafe {
                let p = (m as *mut u8).add(field as usize) as *mut u64;
                p.write_unaligned(t);
                (*m).ol_flags |= flag;
            }
        }
    }
}
