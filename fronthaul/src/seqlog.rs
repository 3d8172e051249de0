//! Sequence ids of the GPU fronthaul stage, judged in arrival order on the host.
//!
//! The kernel runs the frames of a burst, and several bursts of a queue, at once, so it cannot
//! tell which frame came before which; [`SeqTracker`]'s judgement of a frame needs exactly that.
//! So the kernel logs each accepted U-plane packet of a grid eAxC with its arrival position
//! (`pw_frame.queue`, `burst_seq`, `burst_index`; stage ABI 5) in a ring (`pw_fh_seq_entry`,
//! buffer `fronthaul.seq`), and the host's completion poll reads the ring and feeds the entries
//! to one [`SeqTracker`] per eAxC in position order: the same judge as the CPU executor's, so the
//! counts (gaps, duplicates, out of order) are the same where the positions are the CPU's
//! arrival order (each eAxC steered to one queue, as `configs/fronthaul.yaml` does).
//!
//! When an entry may be judged: a queue's burst `b` only enters its ring slot once burst
//! `b - ring_slots` has been reaped, so once an entry of burst `b` of a queue has been read,
//! every frame of that queue's bursts up to `b - ring_slots` has logged its entry (before its
//! burst's done word). Entries of those bursts are judged; later ones wait (the end of the run
//! judges everything). Positions order by (queue's GPU, queue, burst, index): an eAxC split over
//! queues has no arrival order between them on either executor.

use std::collections::BTreeMap;

use super::track::{SeqEvent, SeqTracker};

/// Entries of the ring (`PW_FH_SEQ_LOG`).
pub const SEQ_LOG: usize = 65536;
/// Bytes of one entry (`pw_fh_seq_entry`) and of the head before the first.
pub const ENTRY_BYTES: usize = 16;
pub const HEAD_BYTES: usize = 16;
/// Bytes of the `fronthaul.seq` buffer.
pub const LOG_BYTES: usize = HEAD_BYTES + SEQ_LOG * ENTRY_BYTES;

/// One GPU's sequence log, as the judge reads it.
pub trait LogSource {
    /// Entries appended so far (the head word).
    fn seq_head(&self) -> anyhow::Result<u64>;
    /// `n` entries' bytes from ring index `at` (`at + n <= SEQ_LOG`).
    fn seq_entries(&self, at: usize, n: usize) -> anyhow::Result<Vec<u8>>;
    /// Ring slots of each queue (bursts of a queue in flight at most).
    fn ring_slots(&self) -> u32;
}

/// A logged packet: position (GPU, queue, unwrapped burst, index), eAxC index, 8-bit id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Logged {
    pos: (usize, u16, u64, u32),
    eaxc: u8,
    id: u8,
}

/// The judge of one stage over its GPUs.
#[derive(Debug, Default)]
pub struct SeqJudge {
    /// Per GPU: the next log index to read.
    tail: Vec<u64>,
    /// Per (GPU, queue): the newest burst read (unwrapped).
    newest: BTreeMap<(usize, u16), u64>,
    pending: Vec<Logged>,
    trackers: Vec<SeqTracker>,
    /// Per eAxC index: (gaps, duplicates, out of order).
    counts: Vec<[u64; 3]>,
    /// Entries overwritten before they were read (the poll fell a whole ring behind).
    pub lost: u64,
}

impl SeqJudge {
    pub fn new(n_eaxcs: usize) -> SeqJudge {
        SeqJudge {
            trackers: vec![SeqTracker::default(); n_eaxcs],
            counts: vec![[0; 3]; n_eaxcs],
            ..SeqJudge::default()
        }
    }

    /// Per eAxC index: (gaps, duplicates, out of order) judged so far.
    pub fn counts(&self) -> &[[u64; 3]] {
        &self.counts
    }

    /// Reads what each GPU logged since the last poll and judges what can be judged; `end`:
    /// every entry (the run is over, nothing is in flight).
    pub fn poll(&mut self, srcs: &[&dyn LogSource], end: bool) -> anyhow::Result<()> {
        if self.tail.len() < srcs.len() {
            self.tail.resize(srcs.len(), 0);
        }
        for (g, s) in srcs.iter().enumerate() {
            self.read(g, *s)?;
        }
        self.judge(srcs, end);
        Ok(())
    }

    fn read(&mut self, g: usize, s: &dyn LogSource) -> anyhow::Result<()> {
        let head = s.seq_head()?;
        let mut tail = self.tail[g];
        if head.saturating_sub(tail) > SEQ_LOG as u64 {
            let skip = head - SEQ_LOG as u64;
            self.lost += skip - tail;
            tail = skip;
        }
        while tail < head {
            let at = (tail % SEQ_LOG as u64) as usize;
            let n = ((head - tail) as usize).min(SEQ_LOG - at);
            let b = s.seq_entries(at, n)?;
            let mut took = 0;
            for e in b.chunks_exact(ENTRY_BYTES).take(n) {
                let w = |k: usize| {
                    u32::from_le_bytes([e[4 * k], e[4 * k + 1], e[4 * k + 2], e[4 * k + 3]])
                };
                // Reserved and not written yet (or written by a later lap: then the poll fell a
                // ring behind and the next read counts it lost).
                if w(0) != (tail + took as u64 + 1) as u32 {
                    break;
                }
                self.push(g, w(1), w(2), w(3));
                took += 1;
            }
            tail += took as u64;
            if took < n {
                break;
            }
        }
        self.tail[g] = tail;
        Ok(())
    }

    fn push(&mut self, g: usize, burst: u32, index: u32, qe: u32) {
        let queue = (qe >> 16) as u16;
        // Bursts unwrapped against the newest of the queue (within 2^31 of it).
        let newest = self.newest.entry((g, queue)).or_insert(u64::from(burst));
        let d = i64::from(burst.wrapping_sub(*newest as u32) as i32);
        let b = (*newest as i64 + d).max(0) as u64;
        *newest = (*newest).max(b);
        self.pending.push(Logged {
            pos: (g, queue, b, index),
            eaxc: (qe >> 8) as u8,
            id: qe as u8,
        });
    }

    fn judge(&mut self, srcs: &[&dyn LogSource], end: bool) {
        let ready = |l: &Logged| {
            end || {
                let lag = u64::from(srcs.get(l.pos.0).map_or(u32::MAX, |s| s.ring_slots()));
                let newest = self.newest.get(&(l.pos.0, l.pos.1)).copied().unwrap_or(0);
                l.pos.2 + lag <= newest
            }
        };
        let (mut now, later): (Vec<Logged>, Vec<Logged>) = self.pending.drain(..).partition(ready);
        self.pending = later;
        now.sort_unstable();
        for l in now {
            let e = usize::from(l.eaxc);
            let (Some(t), Some(c)) = (self.trackers.get_mut(e), self.counts.get_mut(e)) else {
                continue;
            };
            match t.observe(l.id) {
                SeqEvent::InOrder => {}
                SeqEvent::Gap(n) => c[0] += u64::from(n),
                SeqEvent::Duplicate => c[1] += 1,
                SeqEvent::OutOfOrder => c[2] += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A log in host memory, written as the kernel writes it.
    struct HostLog {
        bytes: RefCell<Vec<u8>>,
        slots: u32,
    }

    impl HostLog {
        fn new(slots: u32) -> HostLog {
            HostLog {
                bytes: RefCell::new(vec![0; LOG_BYTES]),
                slots,
            }
        }

        /// Appends (queue, burst, index, eAxC, id); `written` false: reserved only.
        fn append(&self, q: u16, burst: u32, index: u32, e: u8, id: u8, written: bool) {
            let mut b = self.bytes.borrow_mut();
            let i = u64::from_le_bytes(b[..8].try_into().unwrap());
            b[..8].copy_from_slice(&(i + 1).to_le_bytes());
            if written {
                self.write(&mut b, i, q, burst, index, e, id);
            }
        }

        #[allow(clippy::too_many_arguments)]
        fn write(&self, b: &mut [u8], i: u64, q: u16, burst: u32, index: u32, e: u8, id: u8) {
            let at = HEAD_BYTES + (i % SEQ_LOG as u64) as usize * ENTRY_BYTES;
            let qe = u32::from(q) << 16 | u32::from(e) << 8 | u32::from(id);
            for (k, w) in [(i + 1) as u32, burst, index, qe].iter().enumerate() {
                b[at + 4 * k..at + 4 * k + 4].copy_from_slice(&w.to_le_bytes());
            }
        }
    }

    impl LogSource for HostLog {
        fn seq_head(&self) -> anyhow::Result<u64> {
            Ok(u64::from_le_bytes(
                self.bytes.borrow()[..8].try_into().unwrap(),
            ))
        }
        fn seq_entries(&self, at: usize, n: usize) -> anyhow::Result<Vec<u8>> {
            let s = HEAD_BYTES + at * ENTRY_BYTES;
            Ok(self.bytes.borrow()[s..s + n * ENTRY_BYTES].to_vec())
        }
        fn ring_slots(&self) -> u32 {
            self.slots
        }
    }

    fn cpu(ids: &[u8]) -> [u64; 3] {
        let mut t = SeqTracker::default();
        let mut c = [0; 3];
        for &id in ids {
            match t.observe(id) {
                SeqEvent::InOrder => {}
                SeqEvent::Gap(n) => c[0] += u64::from(n),
                SeqEvent::Duplicate => c[1] += 1,
                SeqEvent::OutOfOrder => c[2] += 1,
            }
        }
        c
    }

    #[test]
    fn logged_in_any_order_judged_in_arrival_order() {
        // Arrival: ids with a gap, a duplicate and a late one, 4 frames a burst.
        let ids: Vec<u8> = vec![1, 2, 4, 4, 3, 5, 6, 9, 7, 8, 10, 11];
        let log = HostLog::new(2);
        // Bursts logged last first, each burst's frames backwards.
        for b in (0..3u32).rev() {
            for i in (0..4u32).rev() {
                log.append(0, b, i, 0, ids[(b * 4 + i) as usize], true);
            }
        }
        let mut j = SeqJudge::new(1);
        j.poll(&[&log], false).unwrap();
        // Newest burst 2, 2 slots: only burst 0 may be judged.
        assert_eq!(j.pending.len(), 8);
        j.poll(&[&log], true).unwrap();
        assert_eq!(j.counts()[0], cpu(&ids));
        assert_eq!(cpu(&ids), [3, 1, 3]);
    }

    #[test]
    fn an_entry_reserved_but_not_written_stops_the_read() {
        let log = HostLog::new(1);
        log.append(0, 0, 0, 0, 1, true);
        log.append(0, 0, 1, 0, 2, false);
        log.append(0, 1, 0, 0, 3, true);
        let mut j = SeqJudge::new(1);
        j.poll(&[&log], false).unwrap();
        assert_eq!(j.tail[0], 1);
        {
            let mut b = log.bytes.borrow_mut();
            log.write(&mut b, 1, 0, 0, 1, 0, 2);
        }
        j.poll(&[&log], true).unwrap();
        assert_eq!(j.tail[0], 3);
        assert_eq!(j.counts()[0], [0, 0, 0]);
    }

    #[test]
    fn a_ring_lapped_counts_lost_entries_and_bad_indices_are_ignored() {
        let log = HostLog::new(4);
        for i in 0..SEQ_LOG as u32 + 10 {
            log.append(1, i / 8, i % 8, 0, i as u8, true);
        }
        // An eAxC index outside the judge's eAxCs (a corrupt entry) is not counted.
        log.append(1, u32::MAX / 2, 0, 200, 0, true);
        let mut j = SeqJudge::new(1);
        j.poll(&[&log], true).unwrap();
        // 65547 appended, the newest 65536 read.
        assert_eq!(j.lost, 11);
        assert_eq!(j.counts()[0], [0, 0, 0]);
    }
}
