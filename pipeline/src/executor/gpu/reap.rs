//! Reading results back: verdicts (and metadata) of finished bursts in order, the slots freed
//! behind them, counters, per-burst GPU timestamps and queue state words.

use std::ptr;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use super::abi::{self, QueueCounters, Verdict};
use super::tx::Reaped;

use super::{lock, stages, CountersSnapshot, GpuExecutor, Mode, Queue};
use crate::meta::PacketMeta;

impl GpuExecutor {
    /// The GPU timestamps of burst `seq` of `queue` (`trace_bursts`), once they are complete:
    /// after the queue finished burst `seq + ctas` (whose system fence orders them; see
    /// `pw_burst_trace`) and before the slot's next lap overwrites them. None otherwise.
    pub fn burst_trace(&self, queue: usize, seq: u32) -> Option<abi::BurstTrace> {
        let q = lock(self.queues.get(queue)?);
        let t = q.trace.as_ref()?;
        let ctas = if self.opts.mode == Mode::Persistent {
            self.opts.ctas_per_queue.max(1)
        } else {
            1
        };
        if q.reaped.wrapping_sub(seq) <= ctas || q.reaped.wrapping_sub(seq) > self.opts.ring_slots {
            return None;
        }
        let slot = (seq % self.opts.ring_slots) as usize;
        let rec = (t.host as *const abi::BurstTrace).wrapping_add(slot);
        // SAFETY: slot < slots: the record lies in the buffer. seq first: the GPU writes it last
        // (after the burst's done word's release, or behind a fence in a tagged queue).
        let s = unsafe { ptr::read_volatile(ptr::addr_of!((*rec).seq)) };
        if s != u64::from(seq) + 1 {
            return None;
        }
        fence(Ordering::Acquire);
        // SAFETY: as above; every field was written before seq.
        Some(unsafe { ptr::read_volatile(rec) })
    }

    /// Does `queue` carry tagged words ([`GpuOptions::tagged`](super::GpuOptions::tagged))?
    pub fn tagged(&self, queue: usize) -> bool {
        self.queues.get(queue).is_some_and(|q| lock(q).tagged)
    }

    /// Bursts handed to `queue` whose verdicts are not yet read.
    pub fn in_flight(&self, queue: usize) -> u32 {
        self.queues.get(queue).map_or(0, |q| {
            let q = lock(q);
            q.next_seq.wrapping_sub(q.reaped)
        })
    }

    /// Calls `f(seq, verdicts, metas)` for every burst of `queue` the GPU finished since the
    /// last call, in order, then frees their slots. `metas` is given with `emit_meta`. Returns
    /// the number of bursts. An error when the queue's kernel stopped (timeout, bad slot).
    pub fn poll(
        &self,
        queue: usize,
        mut f: impl FnMut(u32, &[Verdict], Option<&[PacketMeta]>),
    ) -> anyhow::Result<usize> {
        self.poll_tagged(queue, |seq, _, v, m| f(seq, v, m))
    }

    /// As [`GpuExecutor::poll`], with the rule-set generation each burst was classified with
    /// (the one its slot header named): `f(seq, generation, verdicts, metas)`. Frees replaced
    /// ACL tables once no burst in flight names them.
    pub fn poll_tagged(
        &self,
        queue: usize,
        mut f: impl FnMut(u32, u64, &[Verdict], Option<&[PacketMeta]>),
    ) -> anyhow::Result<usize> {
        self.poll_bursts(queue, |r| f(r.seq, r.generation, r.verdicts, r.metas))
    }

    /// As [`GpuExecutor::poll`], with everything a finished burst left: its verdicts, metadata,
    /// rule-set generation and, with a TX ring, what the kernel said to transmit and the slot's
    /// frame bytes as the stages left them ([`Reaped`]).
    pub fn poll_bursts(&self, queue: usize, f: impl FnMut(&Reaped<'_>)) -> anyhow::Result<usize> {
        let n = self.poll_locked(queue, f)?;
        if n > 0 && self.retired_len.load(Ordering::Relaxed) > 0 {
            self.reclaim_tables();
        }
        Ok(n)
    }

    fn poll_locked(&self, queue: usize, mut f: impl FnMut(&Reaped<'_>)) -> anyhow::Result<usize> {
        let qm = self
            .queues
            .get(queue)
            .ok_or_else(|| anyhow::anyhow!("no queue {queue}"))?;
        let mut q = lock(qm);
        let mut done = 0;
        let bm = self.opts.burst_size as usize;
        let parts = self.opts.parts() as usize;
        while q.reaped != q.next_seq {
            let seq = q.reaped;
            let slot = (seq % self.opts.ring_slots) as usize;
            let n = q.slot_frames[slot] as usize;
            // Tagged verdicts: every one carries this burst's tag (the done word is written
            // only for an empty burst, and with metadata, which is not tagged).
            let by_tags = q.tagged && n > 0;
            if by_tags && !Self::take_tagged(&mut q, slot * bm, n, seq.wrapping_add(1)) {
                break;
            }
            // Every CTA of the burst's group has published its part.
            let finished = (by_tags && q.metas.is_none())
                || (0..parts).all(|p| {
                    // SAFETY: slot * parts + p < slots * parts, the done array's length; a
                    // volatile read of a word the GPU writes.
                    let word = unsafe {
                        ptr::read_volatile((q.done.host as *const u32).add(slot * parts + p))
                    };
                    word == seq.wrapping_add(1)
                });
            if !finished {
                break;
            }
            // Acquire: the verdicts were written before the done word (or their tags).
            fence(Ordering::Acquire);
            let mut tx = std::mem::take(&mut q.tx_scratch);
            let mut times = std::mem::take(&mut q.tx_times_scratch);
            // SAFETY: the GPU finished writing this slot's verdicts (its done word says so,
            // acquire fence above) and will not touch them until the slot is reused, which
            // needs this reap first.
            let (v, m) = unsafe {
                let v = if by_tags {
                    &q.tagged_verdicts[..n]
                } else {
                    std::slice::from_raw_parts(
                        (q.verdicts.host as *const Verdict).add(slot * bm),
                        n,
                    )
                };
                let m = q.metas.as_ref().map(|mb| {
                    std::slice::from_raw_parts((mb.host as *const PacketMeta).add(slot * bm), n)
                });
                (v, m)
            };
            // SAFETY: the slot's data area (take_tx checked the range against the ring buffer);
            // the GPU is done with it and nothing rewrites it before this reap.
            let data = self
                .take_tx(&q, slot, n, &mut tx, &mut times)?
                .map(|(p, len)| unsafe { std::slice::from_raw_parts(p, len) });
            f(&Reaped {
                seq,
                generation: q.slot_gen[slot],
                verdicts: v,
                metas: m,
                tx: data.map(|_| tx.as_slice()),
                tx_times: &times,
                data,
            });
            q.tx_scratch = tx;
            q.tx_times_scratch = times;
            q.reaped = seq.wrapping_add(1);
            done += 1;
        }
        if done == 0 && q.next_seq != q.reaped {
            let st = ctrl_get!(q.ctrl, status);
            if self.opts.mode == Mode::Persistent && st != abi::QSTATE_RUNNING && !q.restarting {
                anyhow::bail!(
                    "queue {queue}: persistent kernel stopped with {} bursts outstanding ({})",
                    q.next_seq.wrapping_sub(q.reaped),
                    qstate_name(st)
                );
            }
        }
        Ok(done)
    }

    /// Tagged queue: verdicts `first .. first + n` into `q.tagged_verdicts` if each of their
    /// three words carries `tag` (false, and nothing to use, while any does not yet).
    fn take_tagged(q: &mut Queue, first: usize, n: usize, tag: u32) -> bool {
        let words = q.verdicts.host as *const u64;
        q.tagged_verdicts.clear();
        for i in 0..n {
            // SAFETY: first + n <= slots * burst_max verdicts of 3 words each (the buffer);
            // volatile 8-byte reads of words the GPU stores 8 bytes at a time.
            let [w0, w1, w2] = unsafe {
                let p = words.add(3 * (first + i));
                [
                    ptr::read_volatile(p),
                    ptr::read_volatile(p.add(1)),
                    ptr::read_volatile(p.add(2)),
                ]
            };
            if [w0, w1, w2].iter().any(|w| (w >> 32) as u32 != tag) {
                return false;
            }
            q.tagged_verdicts.push(Verdict {
                action: w0 as u8,
                drop_reason: (w0 >> 8) as u8,
                out_port: (w0 >> 16) as u16,
                rule: w1 as u32,
                mark: w2 as u32,
            });
        }
        true
    }

    /// Polls `queue` until every burst handed over is done or `timeout` passes.
    pub fn drain(
        &self,
        queue: usize,
        timeout: Duration,
        mut f: impl FnMut(u32, &[Verdict], Option<&[PacketMeta]>),
    ) -> anyhow::Result<()> {
        self.flush(queue)?;
        let t = Instant::now();
        while self.in_flight(queue) > 0 {
            if self.poll(queue, &mut f)? == 0 {
                if t.elapsed() > timeout {
                    anyhow::bail!(
                        "queue {queue}: {} bursts not done after {:?}",
                        self.in_flight(queue),
                        timeout
                    );
                }
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    /// Counters of every queue, the host-side refusals and the per-rule hits. A queue whose
    /// every handed-over burst is done and read back is exact: the kernels add a burst's counts
    /// just after its done word (off the latency path) and count it in `bursts` behind a fence
    /// (the persistent kernel once its queue is idle for 20 us), so this waits (bounded) until
    /// `bursts` reaches the bursts handed over. A queue with bursts in flight gives a snapshot
    /// (fields may be mid-update and `bursts` may lag, which a snapshot tolerates).
    pub fn counters(&self) -> anyhow::Result<CountersSnapshot> {
        let mut snap = CountersSnapshot::default();
        self.ctx.bind()?;
        for (qi, q) in self.queues.iter().enumerate() {
            let q = lock(q);
            let mut blocks = vec![QueueCounters::default(); q.n_counters];
            let settled = self.pipeline_flags & abi::PIPE_COUNT != 0
                && q.pending == 0
                && q.reaped == q.next_seq;
            let t = Instant::now();
            let mut seen_all = false;
            loop {
                // SAFETY: QueueCounters is repr(C) plain u64s; the slice covers exactly the blocks.
                let raw = unsafe {
                    std::slice::from_raw_parts_mut(
                        blocks.as_mut_ptr() as *mut u8,
                        std::mem::size_of_val(blocks.as_slice()),
                    )
                };
                // On the side stream: a snapshot never waits for the persistent kernel.
                q.counters.download_on(&self.aux_stream, raw)?;
                // One more copy after the one that saw every burst counted: that copy may have
                // read another word before the kernel's update of it became visible.
                if !settled || seen_all {
                    break;
                }
                let bursts = blocks
                    .iter()
                    .fold(0u32, |a, b| a.wrapping_add(b.bursts as u32));
                // Each CTA of a burst's group counts the burst once.
                // Bursts given up by a restart (on_stall) were never counted by any CTA.
                let ran = q.next_seq.wrapping_sub(q.lost_bursts);
                if bursts == ran.wrapping_mul(self.opts.parts()) {
                    seen_all = true;
                    continue;
                }
                if t.elapsed() > Duration::from_secs(2) {
                    anyhow::bail!(
                        "queue {qi}: the kernel's CTAs counted {bursts} bursts of the {} done ({} CTAs each) after {:?}",
                        ran,
                        self.opts.parts(),
                        t.elapsed()
                    );
                }
                std::thread::sleep(Duration::from_micros(20));
            }
            let mut c = QueueCounters::default();
            for b in &blocks {
                c.merge(b);
            }
            // Every CTA of a burst's group counts the burst.
            c.bursts /= self.opts.parts() as u64;
            // Written before each burst's done word, so read after the queue counters settled.
            let sc = match &q.stage_counters {
                Some(b) => stages::read_counters(b, &self.aux_stream)?,
                None => Vec::new(),
            };
            stages::fold_builtin(&self.stage_specs, &sc, &mut c);
            snap.stages.push(sc);
            snap.queues.push(c);
            snap.host.push(q.host);
        }
        // Hits of the table in force (each published table has its own counters).
        if self.pipeline_flags & abi::PIPE_COUNT != 0 {
            if let Some(t) = self.current_table() {
                snap.rule_hits = t.read_hits()?;
            }
        }
        Ok(snap)
    }

    /// Queue state words (heartbeat, status) for health checks.
    pub fn queue_state(&self, queue: usize) -> Option<(u32, u32, u64)> {
        self.queues.get(queue).map(|q| {
            let q = lock(q);
            (
                ctrl_get!(q.ctrl, status),
                ctrl_get!(q.ctrl, heartbeat),
                ctrl_get!(q.ctrl, polls),
            )
        })
    }
}

fn qstate_name(s: u32) -> &'static str {
    match s {
        abi::QSTATE_IDLE => "not started",
        abi::QSTATE_RUNNING => "running",
        abi::QSTATE_EXIT_FLAG => "exited on the exit flag",
        abi::QSTATE_EXIT_TIMEOUT => "exited after the idle timeout",
        abi::QSTATE_BAD_SLOT => "stopped on an inconsistent slot header",
        _ => "unknown state",
    }
}
