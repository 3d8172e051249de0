//! A sink that delivers from a thread of its own: the file sinks (`.npy`, raw) write a slot of
//! up to megabytes per slot, and done inline that write held the data path (the CPU executor's
//! worker, the GPU executor's completion poll) for the write's time, so the slots that closed
//! behind it were handed over late. Here the data path only copies the slot into a bounded
//! queue; a full queue makes it wait (the disk sets the pace). A writer that delivers nothing
//! for [`STALL`] is taken as hung: what it holds and what it is offered then are counted as
//! sink errors rather than waited for.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::grid::SlotGrid;
use super::sink::SlotSink;

/// Slots queued for the writer at most: a burst of closes (a timeout closing several at once)
/// is absorbed, while the memory held stays a few slots.
pub const QUEUE_SLOTS: usize = 4;

/// How long the data path waits for room in the queue, and the end of a run for the queue to
/// drain, while the writer delivers nothing: past it the writer is taken as hung (a FIFO nobody
/// reads, a hung mount) and the slots it holds or is offered are counted as sink errors, so
/// the run ends and prints its summary instead of hanging.
pub const STALL: Duration = Duration::from_secs(5);

/// Wraps a sink so that its `slot` runs on a writer thread (see the module's text). Its errors
/// come back through [`SlotSink::late_errors`]; [`SlotSink::finish`] waits for the queue to
/// drain (at most [`STALL`] without progress); dropping it delivers what is queued, then
/// stops the thread (a hung writer is left behind, not waited for).
pub struct BackgroundSink {
    tx: Option<SyncSender<SlotGrid>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    stall: Duration,
    /// The writer was given up on while it held slots: it is not joined.
    abandoned: bool,
}

#[derive(Default)]
struct Shared {
    progress: Mutex<Progress>,
    drained: Condvar,
}

#[derive(Default)]
struct Progress {
    /// Slots handed over and not yet delivered (nor given up on).
    pending: u64,
    /// Slots the writer has finished with (written or failed): its progress.
    delivered: u64,
    /// `delivered` when the writer was found hung; cleared once it moves again.
    hung_at: Option<u64>,
    /// Errors since the last `late_errors`, and the first one's message.
    errors: u64,
    first: Option<String>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Progress> {
        // The writer never panics while holding it (the sink's panics are caught outside).
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl BackgroundSink {
    /// Starts the writer thread (`pw-sink-NAME`) over `inner`.
    pub fn spawn(name: &str, inner: Box<dyn SlotSink>) -> Result<BackgroundSink, String> {
        Self::with_stall(name, inner, STALL)
    }

    /// [`Self::spawn`] with a wait other than [`STALL`] for a writer that delivers nothing.
    pub fn with_stall(
        name: &str,
        inner: Box<dyn SlotSink>,
        stall: Duration,
    ) -> Result<BackgroundSink, String> {
        let (tx, rx) = sync_channel::<SlotGrid>(QUEUE_SLOTS);
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("pw-sink-{name}"))
            .spawn(move || write_all(inner, rx, &theirs))
            .map_err(|e| format!("fronthaul.sink: cannot start the {name} writer thread: {e}"))?;
        Ok(BackgroundSink {
            tx: Some(tx),
            shared,
            thread: Some(thread),
            stall,
            abandoned: false,
        })
    }

    /// Waits on the writer's progress until `done` holds or the writer delivered nothing for
    /// `self.stall`; returns the lock and whether `done` holds.
    fn wait_for<'a>(
        &'a self,
        mut p: MutexGuard<'a, Progress>,
        done: impl Fn(&Progress) -> bool,
    ) -> (MutexGuard<'a, Progress>, bool) {
        let (mut seen, mut since) = (p.delivered, Instant::now());
        while !done(&p) {
            if p.delivered != seen {
                (seen, since) = (p.delivered, Instant::now());
            }
            let Some(left) = self.stall.checked_sub(since.elapsed()) else {
                p.hung_at = Some(p.delivered);
                return (p, false);
            };
            p = self
                .shared
                .drained
                .wait_timeout(p, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        (p, true)
    }
}

/// The writer thread: every queued slot to `inner`, in order, until the queue closes. A
/// panic in the sink counts as that slot's error; the thread goes on with the next.
fn write_all(mut inner: Box<dyn SlotSink>, rx: Receiver<SlotGrid>, shared: &Shared) {
    for g in rx {
        let r = catch_unwind(AssertUnwindSafe(|| inner.slot(&g)))
            .unwrap_or_else(|_| Err("the sink panicked writing a slot".to_string()));
        let mut p = shared.lock();
        // Slots given up on (a hung writer at the end of a run) are no longer pending.
        p.pending = p.pending.saturating_sub(1);
        p.delivered += 1;
        if let Err(e) = r {
            p.errors += 1;
            p.first.get_or_insert(e);
        }
        shared.drained.notify_all();
    }
}

const STOPPED: &str = "the sink's writer thread has stopped";

impl SlotSink for BackgroundSink {
    fn slot(&mut self, slot: &SlotGrid) -> Result<(), String> {
        let Some(tx) = self.tx.as_ref() else {
            return Err(STOPPED.to_string());
        };
        let mut g = slot.clone();
        let mut p = self.shared.lock();
        let (mut seen, mut since) = (p.delivered, Instant::now());
        loop {
            // Counted before it is queued: the writer may deliver it before try_send returns.
            p.pending += 1;
            match tx.try_send(g) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    p.pending -= 1;
                    let TrySendError::Full(back) = e else {
                        return Err(STOPPED.to_string());
                    };
                    g = back;
                }
            }
            // Full. A writer already found hung that has not moved since: no wait per slot.
            if p.hung_at == Some(p.delivered) {
                return Err(hung(self.stall));
            }
            if p.delivered != seen {
                (seen, since) = (p.delivered, Instant::now());
            }
            let Some(left) = self.stall.checked_sub(since.elapsed()) else {
                p.hung_at = Some(p.delivered);
                return Err(hung(self.stall));
            };
            // Room comes when the writer takes the next slot, which it does not announce:
            // look again within a millisecond.
            p = self
                .shared
                .drained
                .wait_timeout(p, left.min(Duration::from_millis(1)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn late_errors(&mut self) -> (u64, Option<String>) {
        let mut p = self.shared.lock();
        (std::mem::take(&mut p.errors), p.first.take())
    }

    fn finish(&mut self) {
        let p = self.shared.lock();
        let (mut p, ok) = if p.pending > 0 && p.hung_at == Some(p.delivered) {
            (p, false)
        } else {
            self.wait_for(p, |p| p.pending == 0)
        };
        if !ok {
            // What the writer still holds is lost: counted, and never waited for again.
            let lost = std::mem::take(&mut p.pending);
            p.errors += lost;
            p.first
                .get_or_insert_with(|| format!("{lost} slots not written: {}", hung(self.stall)));
        }
        drop(p);
        self.abandoned |= !ok;
    }
}

/// The error of a slot offered to (or held by) a writer that delivered nothing for `stall`.
fn hung(stall: Duration) -> String {
    format!(
        "the sink's writer delivered nothing for {:.1} s (a FIFO nobody reads, a hung mount?); \
         slot not written",
        stall.as_secs_f64()
    )
}

impl Drop for BackgroundSink {
    fn drop(&mut self) {
        if !self.abandoned {
            self.finish();
        }
        // Closing the queue ends the writer's loop once it has delivered what is queued.
        self.tx = None;
        if let Some(t) = self.thread.take() {
            if !self.abandoned {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
#[path = "sink_writer_tests.rs"]
mod tests;
