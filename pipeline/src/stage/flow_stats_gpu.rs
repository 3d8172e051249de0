//! Flow export on the GPU executor, the host's side of the device's ended-flow rings
//! (docs/flow-export-gpu.md): each queue's ring after its flow table in the per-queue state of
//! the stage that keeps the tables (`conntrack`, or `flow_stats` with a table of its own: the
//! same layout; cuda/flow.cuh `pw_flow_ring`) is read from its tail to the first record not yet
//! stamped, the records go to the `flow_stats` stage as the CPU table's ended flows do
//! ([`FlowStatsStage::emit_ended`]), and the new tail is written back so the kernel may reuse the
//! slots; records the ring had no room for (`lost`) count as `records_dropped`.
//! The sweeps run the CPU's sweep on a host copy of a quiet queue's buckets and write back what
//! changed; at shutdown the device tables are copied into the stage's CPU tables for the CPU's
//! flush. The GPU host side calls it (daemon::run_gpu::flow_export).

use pktwarp_flow::ring::{self, HEADER_BYTES, TAIL_AT};
use pktwarp_flow::{FlowTable, ENTRY_SIZE};

use crate::stage::flow_stats::{FlowStatsStage, SWEEP_CHUNK};
use crate::stage::flow_tables::{lock, FlowTables};

/// Reads `len` bytes at `offset` of queue `q`'s part of the ring stage's per-queue state.
pub type ReadState<'a> = dyn FnMut(usize, usize, usize) -> anyhow::Result<Vec<u8>> + 'a;
/// Writes bytes at `offset` of queue `q`'s part of the ring stage's per-queue state.
pub type WriteState<'a> = dyn FnMut(usize, usize, &[u8]) -> anyhow::Result<()> + 'a;

/// Per queue, what the drain has seen of its ring, and where its sweep goes on.
#[derive(Clone, Copy, Default)]
struct Seen {
    lost: u64,
    cursor: u32,
}

/// Bytes of one bucket in the device table (its entries, one after another).
const BUCKET_BYTES: usize = pktwarp_flow::BUCKET_ENTRIES * ENTRY_SIZE;

/// The drain of every queue's ring (see the module doc), the sweeps of the device tables (the
/// CPU's code on a host copy of their buckets) and their copy into the CPU tables at shutdown.
#[derive(Default)]
pub struct GpuFlowDrain {
    seen: Vec<Seen>,
    /// The host copy the sweeps load a window of device buckets into (made on first use).
    scratch: Option<FlowTable>,
    /// Entries the sweeps removed (the CPU table counts them `expired`; the device's counter
    /// block does not see them).
    swept: u64,
}

impl GpuFlowDrain {
    /// Entries the sweeps removed from the device tables so far (the CPU table's `expired`
    /// counts them too: conntrack's counter).
    pub fn swept(&self) -> u64 {
        self.swept
    }

    /// The host copy a sweep window is loaded into: [`SWEEP_CHUNK`] buckets (256 KiB) with the
    /// table's timeouts, whatever the table's size (a sweep visits entries in place, by their
    /// own deadlines, never by their keys' buckets).
    fn scratch(&mut self, tables: &FlowTables) -> anyhow::Result<&mut FlowTable> {
        if self.scratch.is_none() {
            let mut c = *tables.config();
            c.entries = c
                .entries
                .min(u64::from(SWEEP_CHUNK) * pktwarp_flow::BUCKET_ENTRIES as u64);
            self.scratch = Some(FlowTable::from_config(&c)?);
        }
        self.scratch
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("no host copy of the flow table"))
    }

    /// Sweeps `buckets` buckets of queue `q`'s device table from where its last sweep stopped,
    /// at `now_ns` ([`FlowStatsStage::queue_clock`]): a window at a time is read, swept by
    /// [`FlowStatsStage::sweep_table`] (the CPU's records and active-timeout restarts) and
    /// written back where it changed. The queue must be quiet (no burst in flight): the kernel
    /// would otherwise change the buckets between the read and the write. Drain the ring first,
    /// so its records come before the sweep's, as on the CPU.
    #[allow(clippy::too_many_arguments)]
    pub fn sweep(
        &mut self,
        tables: &FlowTables,
        fs: &FlowStatsStage,
        q: usize,
        now_ns: u64,
        buckets: u32,
        read: &mut ReadState<'_>,
        write: &mut WriteState<'_>,
    ) -> anyhow::Result<()> {
        if self.seen.len() <= q {
            self.seen.resize(q + 1, Seen::default());
        }
        let mut cursor = self.seen[q].cursor;
        let nbuckets = u32::try_from(tables.config().entries / pktwarp_flow::BUCKET_ENTRIES as u64)
            .map_err(|_| anyhow::anyhow!("flow table: too large"))?;
        let t = self.scratch(tables)?;
        let mut left = buckets.min(nbuckets);
        let mut swept = 0u64;
        while left > 0 {
            // A window of the device's buckets at the start of the host copy.
            let n = left.min(t.nbuckets()).min(nbuckets - cursor);
            let at = cursor as usize * BUCKET_BYTES;
            let before = read(q, at, n as usize * BUCKET_BYTES)?;
            t.load_buckets(0, &before)?;
            let expired = t.counters().expired;
            fs.sweep_table(t, 0, n, now_ns);
            swept += t.counters().expired - expired;
            let after = t.bucket_bytes(0, n)?;
            if after != before.as_slice() {
                write(q, at, after)?;
            }
            cursor = (cursor + n) % nbuckets;
            left -= n;
        }
        self.seen[q].cursor = cursor;
        self.swept += swept;
        Ok(())
    }

    /// At shutdown, after the last burst was reaped (the kernels stopped) and the rings were
    /// drained: each of `queues` queues' device table is copied into the stage's CPU table of
    /// that queue (unused on the GPU executor), so the control thread's
    /// [`FlowStatsStage::flush`] exports every flow still in it as on the CPU executor (end of
    /// flow or forced end, the exporter sent between records when its queue fills).
    pub fn load_tables(
        &mut self,
        tables: &FlowTables,
        queues: usize,
        read: &mut ReadState<'_>,
    ) -> anyhow::Result<()> {
        for q in 0..queues {
            let qid = u16::try_from(q).map_err(|_| anyhow::anyhow!("queue {q}: too many"))?;
            let Some(t) = tables.table(qid) else {
                anyhow::bail!("queue {q}: no host table to copy the device's flow table into");
            };
            let mut t = lock(t);
            let nbuckets = t.nbuckets();
            let mut b = 0;
            while b < nbuckets {
                let n = (nbuckets - b).min(SWEEP_CHUNK);
                let bytes = read(q, b as usize * BUCKET_BYTES, n as usize * BUCKET_BYTES)?;
                t.load_buckets(b, &bytes)?;
                b += n;
            }
        }
        Ok(())
    }

    /// Drains each of `queues` queues' rings after `tables`' device tables into `fs`; the
    /// records taken.
    pub fn drain(
        &mut self,
        tables: &FlowTables,
        fs: &FlowStatsStage,
        queues: usize,
        read: &mut ReadState<'_>,
        write: &mut WriteState<'_>,
    ) -> anyhow::Result<usize> {
        let cap = gpu_ring_cap(tables);
        if cap == 0 {
            return Ok(0);
        }
        let at = usize::try_from(pktwarp_flow::bytes_needed(tables.config().entries))
            .map_err(|_| anyhow::anyhow!("flow table: too large"))?;
        self.seen.resize(queues, Seen::default());
        let mut taken = 0;
        for (q, seen) in self.seen.iter_mut().enumerate() {
            let h = ring::header(&read(q, at, HEADER_BYTES)?)
                .ok_or_else(|| anyhow::anyhow!("queue {q}: a short ended-flow ring header"))?;
            fs.add_dropped(h.lost.saturating_sub(seen.lost));
            seen.lost = seen.lost.max(h.lost);
            if h.cap == 0 {
                // No flow ended yet: the kernel stores the cap with the first record.
                continue;
            }
            if h.cap != cap || h.tail > h.head || h.head - h.tail > u64::from(cap) {
                anyhow::bail!(
                    "queue {q}: the ended-flow ring's header does not hold (cap {} of {cap}, \
                     tail {}, head {})",
                    h.cap,
                    h.tail,
                    h.head
                );
            }
            let mut tail = h.tail;
            'ring: while tail < h.head {
                // A contiguous run of slots: up to the head or the ring's end.
                let slot = tail % u64::from(cap);
                let n = (h.head - tail).min(u64::from(cap) - slot) as usize;
                let (stamp_at, rec_at) = ring::slot_offsets(cap, tail);
                let stamps = read(q, at + stamp_at, 8 * n)?;
                let recs = read(q, at + rec_at, ENTRY_SIZE * n)?;
                for i in 0..n {
                    let stamp = u64::from_le_bytes(stamps[8 * i..8 * i + 8].try_into()?);
                    if stamp != tail + 1 {
                        break 'ring;
                    }
                    let rec = &recs[ENTRY_SIZE * i..ENTRY_SIZE * (i + 1)];
                    let (r, why) = ring::decode(rec).ok_or_else(|| {
                        anyhow::anyhow!("queue {q}: ended-flow record {tail} does not decode")
                    })?;
                    fs.emit_ended(&r, why);
                    tail += 1;
                    taken += 1;
                }
            }
            if tail != h.tail {
                write(q, at + TAIL_AT, &tail.to_le_bytes())?;
            }
        }
        Ok(taken)
    }
}

/// Slots of each queue's ended-flow ring after `tables`' device tables: `ENDED_CAP` when a
/// `flow_stats` stage turned the tables' reporting on, else 0 (no ring). The one rule for both
/// keepers of the tables (`ConntrackStage::gpu_ring_cap`, `flow_stats` with its own).
pub fn gpu_ring_cap(tables: &FlowTables) -> u32 {
    if tables.reports_ended() {
        pktwarp_flow::ENDED_CAP as u32
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pktwarp_flow::{FlowConfig, FlowEntry};

    use crate::stage::conntrack::ConntrackStage;

    fn stages() -> (ConntrackStage, FlowStatsStage) {
        let cfg: FlowConfig = serde_saphyr::from_str("entries: 64\n").unwrap();
        let ct = ConntrackStage::new(&cfg).unwrap();
        let fs_cfg: crate::stage::flow_stats::FlowStatsConfig =
            serde_saphyr::from_str("{}").unwrap();
        let fs = FlowStatsStage::new(&fs_cfg, Some(ct.tables().clone())).unwrap();
        (ct, fs)
    }

    /// A ring of `cap` slots holding records `seqs` (UDP flows, evicted), stamped or not, as
    /// the device writes them after a table of 64 entries.
    fn state(cap: u32, head: u64, tail: u64, lost: u64, stamped: &[u64]) -> Vec<u8> {
        let table = pktwarp_flow::bytes_needed(64) as usize;
        let mut s = vec![0u8; table];
        let mut r = ring::new_ring(cap);
        r[0..8].copy_from_slice(&head.to_le_bytes());
        r[8..16].copy_from_slice(&tail.to_le_bytes());
        r[16..24].copy_from_slice(&lost.to_le_bytes());
        for &seq in stamped {
            let (st, rec) = ring::slot_offsets(cap, seq);
            r[st..st + 8].copy_from_slice(&(seq + 1).to_le_bytes());
            let mut e = FlowEntry::default();
            e.key.proto = 17;
            e.key.ip_version = 4;
            e.key.addr[0][0] = seq as u32;
            e.flags = pktwarp_flow::ef::OCCUPIED | pktwarp_flow::ef::ORIG_FROM_A;
            e.packets = [1 + seq, 0];
            let b = ring::encode(&e, pktwarp_flow::Ended::Evicted);
            r[rec..rec + ENTRY_SIZE].copy_from_slice(&b);
        }
        s.extend(r);
        s
    }

    fn run(ct: &ConntrackStage, fs: &FlowStatsStage, dev: &mut [u8]) -> anyhow::Result<usize> {
        let mut drain = GpuFlowDrain::default();
        let snapshot = dev.to_vec();
        let mut writes = Vec::new();
        let n = drain.drain(
            ct.tables(),
            fs,
            1,
            &mut |_, off, len| Ok(snapshot[off..off + len].to_vec()),
            &mut |_, off, b| {
                writes.push((off, b.to_vec()));
                Ok(())
            },
        )?;
        for (off, b) in writes {
            dev[off..off + b.len()].copy_from_slice(&b);
        }
        Ok(n)
    }

    fn counter(fs: &FlowStatsStage, name: &str) -> u64 {
        fs.counters()
            .iter()
            .find(|c| c.0 == name)
            .map_or(0, |c| c.1)
    }

    /// Records across the ring's end are taken in order up to the first unstamped slot, the
    /// tail written back; lost records count as dropped.
    #[test]
    fn records_are_taken_to_the_first_unstamped_slot_across_the_wrap() {
        let (ct, fs) = stages();
        let cap = ct.gpu_ring_cap();
        let mut dev = state(
            cap,
            cap as u64 + 3,
            cap as u64 - 2,
            5,
            &[cap as u64 - 2, cap as u64 - 1, cap as u64, cap as u64 + 2],
        );
        let n = run(&ct, &fs, &mut dev).unwrap();
        assert_eq!(n, 3, "the unstamped record stops the drain");
        let table = pktwarp_flow::bytes_needed(64) as usize;
        let h = ring::header(&dev[table..]).unwrap();
        assert_eq!(h.tail, cap as u64 + 1);
        assert_eq!(counter(&fs, "lack_of_resources"), 3);
        // No exporter attached: the three, and the five the device lost, are dropped.
        assert_eq!(counter(&fs, "records_dropped"), 8);
    }

    #[test]
    fn a_header_that_does_not_hold_is_an_error_naming_the_queue() {
        let (ct, fs) = stages();
        let mut dev = state(ct.gpu_ring_cap(), 2, 5, 0, &[]);
        let e = run(&ct, &fs, &mut dev).unwrap_err().to_string();
        assert!(e.contains("queue 0") && e.contains("tail 5"), "{e}");
        let mut dev = state(8, 1, 0, 0, &[0]);
        let e = run(&ct, &fs, &mut dev).unwrap_err().to_string();
        assert!(e.contains("cap 8"), "{e}");
    }
}
