//! ACL table hot swap on the GPU executor.
//!
//! Each published rule set is one device buffer: the flat ACL image (the very bytes the CPU
//! matcher walks) followed by its own per-rule hit counters (so the counters are reallocated with
//! the swap, sized for that rule set, and zeroed). The host writes the buffer's address, the
//! generation and the default action into every burst's slot header at submit, so a burst is
//! classified wholly by one table and the running kernel never needs to be told about a swap.
//!
//! An image is uploaded (stream-ordered, synchronised) before any burst can name it; an old one
//! is kept in a [`Retirement`] list with, per queue, the sequence number of the first burst that
//! no longer names it, and freed once every queue has reaped past that point.

use super::driver::{Context, DeviceBuffer, Stream};

/// One published ACL image on one GPU and its hit counters.
pub struct TableVersion {
    /// Image bytes, padded to 8, then `n_rules` u64 hit counters. Dropped before `stream`.
    buf: DeviceBuffer,
    hits_off: usize,
    pub generation: u64,
    pub n_rules: u32,
    pub default_action: u8,
    /// The stream the buffer was allocated and is freed on (stream-ordered: neither waits for
    /// the persistent kernel, which a plain cuMemAlloc / cuMemFree would).
    _stream: Stream,
}

impl TableVersion {
    /// Uploads `image` with zeroed hit counters; returns once the copy is complete.
    pub(crate) fn upload(
        ctx: &Context,
        image: &[u8],
        n_rules: u32,
        generation: u64,
        default_action: u8,
    ) -> anyhow::Result<TableVersion> {
        let stream = Stream::new(ctx)?;
        let hits_off = image.len().div_ceil(8) * 8;
        let total = hits_off + n_rules as usize * 8;
        // SAFETY: `stream` outlives the buffer (declared before it here; TableVersion declares
        // `_stream` after `buf`). No kernel sees the address before this returns; after that a
        // table is dropped only once every queue has reaped past the last burst that named it
        // (Retirement) or after shutdown waited for the kernels, and the bulk runs that hold it
        // (DeviceFrames) wait for their kernel.
        let buf = unsafe { DeviceBuffer::new_async(ctx, total, &stream) }?;
        buf.zero_on(&stream)?;
        buf.upload_on(&stream, image)?;
        Ok(TableVersion {
            buf,
            hits_off,
            generation,
            n_rules,
            default_action,
            _stream: stream,
        })
    }

    /// Device address of the image.
    pub fn tables_addr(&self) -> u64 {
        self.buf.ptr
    }

    /// Device address of the hit counters (0 without rules).
    pub fn hits_addr(&self) -> u64 {
        if self.n_rules == 0 {
            0
        } else {
            self.buf.ptr + self.hits_off as u64
        }
    }

    /// The hit counters (a snapshot on the table's own stream; never waits for the kernel).
    pub fn read_hits(&self) -> anyhow::Result<Vec<u64>> {
        let mut raw = vec![0u8; self.n_rules as usize * 8];
        if raw.is_empty() {
            return Ok(Vec::new());
        }
        // SAFETY: the source range is the counters inside the allocation; `raw` outlives the
        // synchronize below.
        unsafe {
            self._stream
                .copy_dtoh(raw.as_mut_ptr(), self.hits_addr(), raw.len())?;
        }
        self._stream.synchronize()?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect())
    }
}

/// Items (old tables) waiting until every queue has reaped past the last burst that named them.
/// Host-side bookkeeping only, so it is tested without a GPU.
#[derive(Debug)]
pub struct Retirement<T> {
    /// (item, per queue: sequence number of the first burst that does not name the item).
    waiting: Vec<(T, Vec<u32>)>,
}

impl<T> Default for Retirement<T> {
    fn default() -> Self {
        Retirement {
            waiting: Vec::new(),
        }
    }
}

impl<T> Retirement<T> {
    /// `item` was replaced; on queue `q`, bursts before `ends[q]` (free-running sequence numbers)
    /// may still name it.
    pub fn retire(&mut self, item: T, ends: Vec<u32>) {
        self.waiting.push((item, ends));
    }

    /// Items still waiting.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Takes out every item whose bursts are all reaped: `reaped[q]` is queue q's count of
    /// bursts whose verdicts the host has read (wrap-safe comparison). A queue missing from
    /// `reaped` holds its items.
    pub fn collect(&mut self, reaped: &[u32]) -> Vec<T> {
        let mut out = Vec::new();
        let mut keep = Vec::with_capacity(self.waiting.len());
        for (item, ends) in self.waiting.drain(..) {
            let done = ends.iter().enumerate().all(|(q, &end)| {
                reaped
                    .get(q)
                    .is_some_and(|&r| (r.wrapping_sub(end) as i32) >= 0)
            });
            if done {
                out.push(item);
            } else {
                keep.push((item, ends));
            }
        }
        self.waiting = keep;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_only_after_every_queue_reaped_past() {
        let mut r = Retirement::default();
        // Table 1 replaced when queue 0 had issued bursts 0..5 and queue 1 bursts 0..3.
        r.retire(1, vec![5, 3]);
        assert!(r.collect(&[4, 3]).is_empty(), "queue 0 still has burst 4");
        assert!(r.collect(&[5, 2]).is_empty(), "queue 1 still has burst 2");
        // Table 2 replaced later.
        r.retire(2, vec![9, 3]);
        assert_eq!(r.collect(&[5, 3]), vec![1]);
        assert_eq!(r.len(), 1);
        assert!(r.collect(&[8, 100]).is_empty());
        assert_eq!(r.collect(&[9, 3]), vec![2]);
        assert!(r.is_empty());
    }

    #[test]
    fn nothing_in_flight_frees_at_once_and_wraps() {
        let mut r = Retirement::default();
        r.retire("a", vec![7]);
        assert_eq!(r.collect(&[7]), vec!["a"]);
        // Sequence numbers wrap: end just past u32::MAX.
        r.retire("b", vec![2]);
        assert!(r.collect(&[u32::MAX - 1]).is_empty());
        assert!(r.collect(&[1]).is_empty());
        assert_eq!(r.collect(&[2]), vec!["b"]);
        // A queue missing from the reaped list keeps the item.
        r.retire("c", vec![0, 0]);
        assert!(r.collect(&[10]).is_empty());
        assert_eq!(r.collect(&[10, 0]), vec!["c"]);
    }
}
