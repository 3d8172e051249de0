//! A sink that delivers from a thread of its own: the file sinks (`.npy`, raw) write a slot of
//! up to megabytes per slot, and done inline that write held the data path (the CPU executor's
//! worker, the GPU executor's completion poll) for the write's time, so the slots that closed
//! behind it were handed over late. Here the data path only copies the slot into a bounded
//! queue; a full queue makes it wait (the disk sets the pace, nothing is dropped).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::grid::SlotGrid;
use super::sink::SlotSink;

/// Slots queued for the writer at most: a burst of closes (a timeout closing several at once)
/// is absorbed, while the memory held stays a few slots.
pub const QUEUE_SLOTS: usize = 4;

/// Wraps a sink so that its `slot` runs on a writer thread (see the module's text). Its errors
/// come back through [`SlotSink::late_errors`]; [`SlotSink::finish`] waits for the queue to
/// drain; dropping it delivers what is queued, then stops the thread.
pub struct BackgroundSink {
    tx: Option<SyncSender<SlotGrid>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    progress: Mutex<Progress>,
    drained: Condvar,
}

#[derive(Default)]
struct Progress {
    /// Slots handed over and not yet delivered.
    pending: u64,
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
        })
    }
}

/// The writer thread: every queued slot to `inner`, in order, until the queue closes. A
/// panic in the sink counts as that slot's error; the thread goes on with the next.
fn write_all(mut inner: Box<dyn SlotSink>, rx: Receiver<SlotGrid>, shared: &Shared) {
    for g in rx {
        let r = catch_unwind(AssertUnwindSafe(|| inner.slot(&g)))
            .unwrap_or_else(|_| Err("the sink panicked writing a slot".to_string()));
        let mut p = shared.lock();
        p.pending -= 1;
        if let Err(e) = r {
            p.errors += 1;
            p.first.get_or_insert(e);
        }
        shared.drained.notify_all();
    }
}

impl SlotSink for BackgroundSink {
    fn slot(&mut self, slot: &SlotGrid) -> Result<(), String> {
        let Some(tx) = self.tx.as_ref() else {
            return Err("the sink's writer thread has stopped".to_string());
        };
        self.shared.lock().pending += 1;
        if tx.send(slot.clone()).is_err() {
            self.shared.lock().pending -= 1;
            return Err("the sink's writer thread has stopped".to_string());
        }
        Ok(())
    }

    fn late_errors(&mut self) -> (u64, Option<String>) {
        let mut p = self.shared.lock();
        (std::mem::take(&mut p.errors), p.first.take())
    }

    fn finish(&mut self) {
        let mut p = self.shared.lock();
        while p.pending > 0 {
            p = self
                .shared
                .drained
                .wait(p)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for BackgroundSink {
    fn drop(&mut self) {
        // Closing the queue ends the writer's loop once it has delivered what is queued.
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
#[path = "sink_writer_tests.rs"]
mod tests;
