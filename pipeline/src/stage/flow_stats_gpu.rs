//! Flow export on the GPU executor, the host's side of the device's ended-flow rings
//! (docs/flow-export-gpu.md): each queue's ring after its flow table in `conntrack`'s per-queue
//! state (cuda/flow.cuh `pw_flow_ring`) is read from its tail to the first record not yet
//! stamped, the records go to the `flow_stats` stage as the CPU table's ended flows do
//! ([`FlowStatsStage::emit_ended`]), and the new tail is written back so the kernel may reuse the
//! slots; records the ring had no room for (`lost`) count as `records_dropped`.
//!
//! Not yet run by the GPU executor (`flow_stats::GPU_REFUSAL`: the sweeps and the shutdown flush
//! are left); the host-built pipeline test drains its rings through it.

use pktwarp_flow::ring::{self, HEADER_BYTES, TAIL_AT};
use pktwarp_flow::ENTRY_SIZE;

use crate::stage::conntrack::ConntrackStage;
use crate::stage::flow_stats::FlowStatsStage;

/// Reads `len` bytes at `offset` of queue `q`'s part of the ring stage's per-queue state.
pub type ReadState<'a> = dyn FnMut(usize, usize, usize) -> anyhow::Result<Vec<u8>> + 'a;
/// Writes bytes at `offset` of queue `q`'s part of the ring stage's per-queue state.
pub type WriteState<'a> = dyn FnMut(usize, usize, &[u8]) -> anyhow::Result<()> + 'a;

/// Per queue, what the drain has seen of its ring.
#[derive(Clone, Copy, Default)]
struct Seen {
    lost: u64,
}

/// The drain of every queue's ring (see the module doc).
#[derive(Default)]
pub struct GpuFlowDrain {
    seen: Vec<Seen>,
}

impl GpuFlowDrain {
    /// Drains each of `queues` queues' rings of `ct` into `fs`; the records taken.
    pub fn drain(
        &mut self,
        ct: &ConntrackStage,
        fs: &FlowStatsStage,
        queues: usize,
        read: &mut ReadState<'_>,
        write: &mut WriteState<'_>,
    ) -> anyhow::Result<usize> {
        let cap = ct.gpu_ring_cap();
        if cap == 0 {
            return Ok(0);
        }
        let at = usize::try_from(pktwarp_flow::bytes_needed(ct.config().entries))
            .map_err(|_| anyhow::anyhow!("conntrack: the table is too large"))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use pktwarp_flow::{FlowConfig, FlowEntry};

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
            ct,
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
