//! `on_stall: restart`: relaunching one queue's persistent kernel while the others run.
//!
//! The persistent kernel is one grid over every queue, but a queue's CTAs only read their own
//! descriptor, so they can leave alone (the queue's exit flag) and come back as a kernel of
//! their own over that one descriptor, on a stream of their own, while the rest of the grid keeps
//! running. A stalled kernel (a stage that never finishes, or the `test_stall` knob) holds one
//! burst: [`GpuExecutor::stop_queue`] tells the queue's CTAs to leave and waits for them; the
//! caller then polls as usual, reaping every burst they finished; [`GpuExecutor::relaunch_queue`]
//! gives up the burst they held (the caller counts its frames as lost) and starts the queue's
//! kernel again at the burst after it. A kernel that does not leave within the wait is hung past
//! what a restart can mend (the daemon exits instead).

use std::ffi::c_void;
use std::time::{Duration, Instant};

use super::abi::{self, QueueDesc};
use super::driver::Stream;
use super::{lock, GpuExecutor, Mode};

/// What a restart gave up: the burst the stalled kernel held, if it held one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restarted {
    /// Its sequence number (in the queue's submit order) and frames.
    pub lost: Option<(u32, u32)>,
}

impl GpuExecutor {
    /// Tells queue `queue`'s persistent kernel to leave and waits up to `wait` for every CTA of
    /// it to return. Polls after this reap what it finished without reporting the stop as an
    /// error. Needs mode `persistent` with `ctas_per_queue: 1` (one CTA group takes the bursts
    /// in order, so the one it held is the first one not finished).
    pub fn stop_queue(&self, queue: usize, wait: Duration) -> anyhow::Result<()> {
        if self.opts.mode != Mode::Persistent || !self.persistent_running {
            anyhow::bail!("queue {queue}: no persistent kernel to restart");
        }
        if self.opts.ctas_per_queue != 1 {
            anyhow::bail!(
                "queue {queue}: a restart needs ctas_per_queue: 1 (this executor runs {}: their \
                 bursts finish out of order)",
                self.opts.ctas_per_queue
            );
        }
        let qm = self
            .queues
            .get(queue)
            .ok_or_else(|| anyhow::anyhow!("no queue {queue}"))?;
        let mut q = lock(qm);
        q.restarting = true;
        ctrl_set!(q.ctrl, exit_flag, 1);
        let parts = self.opts.parts();
        let t = Instant::now();
        while ctrl_get!(q.ctrl, exited) < parts {
            if t.elapsed() > wait {
                anyhow::bail!(
                    "queue {queue}: its kernel did not return within {} ms of the exit flag (hung \
                     in a stage): it cannot be restarted in place",
                    wait.as_millis()
                );
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    }

    /// After [`GpuExecutor::stop_queue`] and a poll: gives up the first burst still in flight
    /// (the one the stopped kernel held; its slot is free again, its verdicts never come) and
    /// starts the queue's kernel again at the burst after it, on a stream of its own. Waits for
    /// it to report running (bounded).
    pub fn relaunch_queue(&self, queue: usize) -> anyhow::Result<Restarted> {
        let qm = self
            .queues
            .get(queue)
            .ok_or_else(|| anyhow::anyhow!("no queue {queue}"))?;
        let mut q = lock(qm);
        if !q.restarting {
            anyhow::bail!("queue {queue}: relaunch without stop_queue");
        }
        let lost = (q.reaped != q.next_seq).then(|| {
            let seq = q.reaped;
            let slot = (seq % self.opts.ring_slots) as usize;
            (seq, q.slot_frames[slot])
        });
        if let Some((seq, _)) = lost {
            // Never handed to the caller: its slot is free at once.
            self.release(queue, seq);
            q.reaped = q.reaped.wrapping_add(1);
            q.lost_bursts = q.lost_bursts.wrapping_add(1);
        }
        ctrl_set!(q.ctrl, first_seq, q.reaped);
        ctrl_set!(q.ctrl, stall_at, 0);
        ctrl_set!(q.ctrl, exited, 0);
        ctrl_set!(q.ctrl, status, abi::QSTATE_IDLE);
        ctrl_set!(q.ctrl, exit_flag, 0);
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        let stream = Stream::new(&self.ctx)?;
        let mut qd = self.qdescs.ptr + (queue * std::mem::size_of::<QueueDesc>()) as u64;
        let mut ctas = 1u32;
        let mut parts = self.opts.parts();
        let mut params = [
            &mut qd as *mut u64 as *mut c_void,
            &mut ctas as *mut u32 as *mut c_void,
            &mut parts as *mut u32 as *mut c_void,
        ];
        // SAFETY: pw_persistent(const pw_queue_desc*, uint32_t, uint32_t) over this queue's one
        // descriptor (inside the array): a grid of 1 x parts blocks, as the queue had in the
        // first launch; its previous CTAs have all returned (stop_queue).
        unsafe {
            self.f_persistent
                .launch(&stream, parts, self.threads, &mut params)?
        };
        let t = Instant::now();
        loop {
            let st = ctrl_get!(q.ctrl, status);
            if st == abi::QSTATE_RUNNING {
                break;
            }
            if st != abi::QSTATE_IDLE || t.elapsed() > Duration::from_secs(10) {
                anyhow::bail!("queue {queue}: the relaunched kernel did not start (state {st})");
            }
            if stream.is_idle()? {
                anyhow::bail!("queue {queue}: the relaunched kernel exited at start");
            }
            std::hint::spin_loop();
        }
        q.relaunched.push(stream);
        q.restarting = false;
        Ok(Restarted { lost })
    }
}
