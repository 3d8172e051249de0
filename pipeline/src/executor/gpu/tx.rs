//! The TX ring read back: after a burst is done, the descriptors its kernel wrote (what to send,
//! where, in frame order) and the slot's frame bytes as the stages left them, for the output
//! ports to transmit from (they play the NIC's part: no verdict is read to find the frames).

use std::ptr;
use std::sync::atomic::Ordering;

use super::abi::{self, TxDesc, Verdict};
use super::{GpuExecutor, Placement, Queue};
use crate::meta::PacketMeta;

/// One finished burst, as [`GpuExecutor::poll_bursts`] hands it over.
pub struct Reaped<'a> {
    pub seq: u32,
    /// The rule-set generation its slot header named.
    pub generation: u64,
    pub verdicts: &'a [Verdict],
    /// With `emit_meta`.
    pub metas: Option<&'a [PacketMeta]>,
    /// With a TX ring (composed pipelines): the frames to transmit, in frame order, each
    /// naming its bytes in `data` and its output port.
    pub tx: Option<&'a [TxDesc]>,
    /// With a TX ring in a pipeline that sets send times: each descriptor's send time (same
    /// index as `tx`); empty otherwise (send now).
    pub tx_times: &'a [u64],
    /// With a TX ring: the slot's data area as the kernel left it (a rewriting pipeline's frames
    /// are changed in place there), as many bytes as the burst's data. With a device ring it is
    /// the staging slot, brought back from the device only when the stages rewrite frames.
    /// Holding reaped slots ([`GpuExecutor::hold_reaped_slots`]) these bytes stay where they
    /// are, unchanged, until the burst is released.
    pub data: Option<&'a [u8]>,
}

impl GpuExecutor {
    /// From now on a reaped burst's slot (its ring data, a device ring's staging slot) stays
    /// out of reuse until [`GpuExecutor::release`] names it, so the caller may send frames from
    /// the data area [`Reaped::data`] names after the poll returned, as a NIC sends from its
    /// ring. A submit meeting only unreleased slots is refused as `RingFull` (the sender
    /// back-pressures ingest; nothing is overwritten). Set before the first submit; the
    /// caller then releases every burst it reaped, in any order.
    pub fn hold_reaped_slots(&self) {
        self.hold.store(true, Ordering::Relaxed);
    }

    /// Whether reaped slots are held until released.
    pub fn holds_reaped_slots(&self) -> bool {
        self.hold.load(Ordering::Relaxed)
    }

    /// Burst `seq` of `queue` is sent: its slot may be reused (holding reaped slots; a no-op
    /// otherwise, and for a queue or burst that is not there).
    pub fn release(&self, queue: usize, seq: u32) {
        let Some(marks) = self.releases.get(queue) else {
            return;
        };
        let slots = marks.len() as u32;
        if let Some(m) = marks.get((seq % slots.max(1)) as usize) {
            // Release: every read of the slot's data by the caller happened before.
            m.store(seq.wrapping_add(1), Ordering::Release);
        }
    }

    /// The first burst of `queue` whose slot is not free: the first not reaped, or, holding
    /// reaped slots, the first not released (advanced here over the releases, in order).
    pub(super) fn first_unfree(&self, queue: usize, q: &mut Queue) -> u32 {
        if !self.holds_reaped_slots() {
            return q.reaped;
        }
        let Some(marks) = self.releases.get(queue) else {
            return q.reaped;
        };
        let slots = marks.len() as u32;
        while q.released != q.reaped {
            let seq = q.released;
            // Acquire: the caller's reads of the slot come before this submit rewrites it.
            if marks[(seq % slots) as usize].load(Ordering::Acquire) != seq.wrapping_add(1) {
                break;
            }
            q.released = seq.wrapping_add(1);
        }
        q.released
    }

    /// Reads burst `slot`'s TX descriptors (`n` frames) into `out` (and their send times into
    /// `times`, where the pipeline sets them) and returns where its data
    /// area is (host address, bytes): the mapped ring itself, or the staging slot after a copy
    /// back from the device ring. `None` without a TX ring. Called once the burst is done.
    /// An error when the kernel's words are inconsistent (a descriptor outside the data area).
    pub(super) fn take_tx(
        &self,
        q: &Queue,
        slot: usize,
        n: usize,
        out: &mut Vec<TxDesc>,
        times: &mut Vec<u64>,
    ) -> anyhow::Result<Option<(*const u8, usize)>> {
        out.clear();
        times.clear();
        let Some(tx) = q.tx.as_ref() else {
            return Ok(None);
        };
        let bm = self.opts.burst_size as usize;
        let parts = self.opts.parts() as usize;
        let bytes = q.slot_data[slot] as usize;
        // A rewriting stage may grow the last frame into its room, which the burst's data
        // includes (the host reserved it); nothing may reach past the slot's data area.
        let cap = self.data_cap as usize;
        let mut end = bytes;
        for p in 0..parts {
            // SAFETY: slot * parts + p < slots * parts words (the counts buffer); written by
            // the GPU before the done word the caller saw (acquire fence there).
            let word =
                unsafe { ptr::read_volatile((tx.counts.host as *const u32).add(slot * parts + p)) };
            let (lo, k) = abi::tx_count(word);
            if lo + k > n {
                anyhow::bail!(
                    "TX ring: burst part {p} says {k} frames from frame {lo}, the burst has {n}"
                );
            }
            // One bulk copy of the part's descriptors (streamed at memcpy speed), checked
            // afterwards in cache, rather than a volatile read per descriptor from memory the
            // GPU just wrote: this is on every reap of the feeding / TX thread.
            let first = out.len();
            // SAFETY: slot * bm + lo + k <= slots * bm descriptors (lo + k <= n <= bm); the
            // GPU wrote them before the done word the caller saw (acquire fence there) and
            // does not write them again before this slot is reused, which needs this reap.
            out.extend_from_slice(unsafe {
                std::slice::from_raw_parts((tx.descs.host as *const TxDesc).add(slot * bm + lo), k)
            });
            if let Some(at) = tx.times_at {
                // SAFETY: the send times follow the descriptors in the same buffer, one u64
                // per descriptor at the same index (PW_TX_TIMES), written with them.
                times.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(
                        (tx.descs.host.add(at) as *const u64).add(slot * bm + lo),
                        k,
                    )
                });
            }
            for d in &out[first..] {
                let e = d.offset as usize + d.len as usize;
                if e > cap || usize::from(d.frame) >= n {
                    anyhow::bail!(
                        "TX ring: descriptor of frame {} ({} bytes at {}) lies outside the burst",
                        d.frame,
                        d.len,
                        d.offset
                    );
                }
                end = end.max(e);
            }
        }
        // The owned layout (cuda/kernels_owned.cu) splits a burst's frames by flow, not by
        // index: each part's list is in arrival order, but the parts' lists interleave.
        if parts > 1 && out.windows(2).any(|w| w[0].frame >= w[1].frame) {
            merge_by_frame(out, times)?;
        }
        let end = end.min(cap);
        let off = slot * self.slot_bytes as usize + self.data_offset as usize;
        let host = match (
            q.placement,
            q.ring_mapped.as_ref(),
            q.staging.as_ref(),
            q.ring_dev.as_ref(),
        ) {
            (Placement::Mapped, Some(r), _, _) => r.host,
            (Placement::Device, _, Some(st), Some(dev)) => {
                // Stages that only read leave the device ring's frames as the staging slot
                // holds them: nothing to bring back.
                if end > 0 && self.frames_written {
                    // The port reads what the stages left in device memory: one copy of the
                    // data area back into the slot's staging, which is this burst's until the
                    // reap returns (until its release, holding reaped slots).
                    self.ctx.bind()?;
                    // SAFETY: off + end lies inside both the ring and the staging buffer
                    // (end <= data_cap); the kernel is done with the slot and the staging slot
                    // is not rewritten before this reap.
                    unsafe {
                        q.stream
                            .copy_dtoh(st.host.add(off), dev.ptr + off as u64, end)?
                    };
                    q.stream.synchronize()?;
                }
                st.host
            }
            _ => anyhow::bail!("TX ring: queue without ring memory"),
        };
        // SAFETY: off + end lies inside the ring (or staging) buffer: end <= data_cap.
        Ok(Some((unsafe { host.add(off) } as *const u8, end)))
    }
}

/// The parts' descriptors (and their send times, where the ring has them) in frame order; a
/// frame named twice is an error (each part writes only the frames it owns).
fn merge_by_frame(out: &mut Vec<TxDesc>, times: &mut Vec<u64>) -> anyhow::Result<()> {
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_unstable_by_key(|&i| out[i].frame);
    if let Some(w) = order
        .windows(2)
        .find(|w| out[w[0]].frame == out[w[1]].frame)
    {
        anyhow::bail!("TX ring: frame {} sent by two burst parts", out[w[0]].frame);
    }
    let descs: Vec<TxDesc> = order.iter().map(|&i| out[i]).collect();
    if !times.is_empty() {
        let t: Vec<u64> = order
            .iter()
            .map(|&i| times.get(i).copied().unwrap_or(0))
            .collect();
        *times = t;
    }
    *out = descs;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(frame: u16) -> TxDesc {
        TxDesc {
            frame,
            offset: u32::from(frame) * 64,
            ..TxDesc::default()
        }
    }

    /// Two parts' lists, each in arrival order, come back in frame order with their send
    /// times; a frame in both is an error.
    #[test]
    fn owned_parts_merge_in_frame_order() {
        let mut out = vec![d(0), d(3), d(4), d(1), d(2), d(5)];
        let mut times = vec![10, 13, 14, 11, 12, 15];
        merge_by_frame(&mut out, &mut times).unwrap();
        assert_eq!(
            out.iter().map(|x| x.frame).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4, 5]
        );
        assert_eq!(out[1].offset, 64);
        assert_eq!(times, [10, 11, 12, 13, 14, 15]);
        let mut out = vec![d(0), d(2), d(2)];
        let e = merge_by_frame(&mut out, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("frame 2"), "{e}");
    }
}
