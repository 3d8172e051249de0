//! Stopping an executor's kernels within a deadline, and what becomes of the memory they read
//! when they do not stop in time.
//!
//! A persistent kernel reads its queue descriptors, rings, control blocks, the ACL tables and
//! the stage parameter sets until it returns. Freeing any of them under it lets it read (and
//! write: verdicts, counters, done words, TX rings) memory the driver may hand out again, and a
//! plain `cuMemFree` / `cuModuleUnload` waits for the whole device, i.e. for a kernel that may
//! never return, so the process would not exit either. So the memory lives in [`KernelMem`]
//! fields, which nothing frees implicitly: an executor frees them only once its kernels are
//! known to have returned ([`release`] says [`Teardown::Free`]), and otherwise leaks them on
//! purpose (a warning, and [`abandoned_executors`] counts it). The process then ends as the
//! daemon promises (exit 3 within `control.drain_timeout_ms`), and the driver reclaims the
//! context, kernel first, when it does.

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Executors whose kernels had not returned when they were dropped: their device memory, rings
/// and tables were left allocated (see the module comment). Process-wide.
static ABANDONED: AtomicU64 = AtomicU64::new(0);

/// How many executors this process dropped with a kernel still running (their memory leaked on
/// purpose rather than freed under the kernel).
pub fn abandoned_executors() -> u64 {
    ABANDONED.load(Ordering::Relaxed)
}

/// The persistent kernel (or a launched one) had not returned by the shutdown's deadline. Its
/// tables and rings stay allocated until the process exits; the daemon exits with status 3
/// (`control::EXIT_DRAIN_TIMEOUT`).
#[derive(Debug, thiserror::Error)]
#[error(
    "the GPU kernels did not return within {waited_ms} ms of the exit flag: their tables and \
     rings are left allocated until the process exits (a persistent kernel also stops by itself \
     after executor.gpu.idle_timeout_ms without bursts)"
)]
pub struct KernelStillRunning {
    pub waited_ms: u64,
}

/// A value that kernels may read (device or mapped memory, a module, the context holding them).
/// It is never dropped implicitly: the owner calls [`KernelMem::free`] once its kernels have
/// returned, and a value never freed is leaked, which is the sound outcome while a kernel may
/// still read it.
pub(crate) struct KernelMem<T>(ManuallyDrop<T>);

impl<T> KernelMem<T> {
    pub(crate) fn new(value: T) -> Self {
        KernelMem(ManuallyDrop::new(value))
    }

    /// Drops the value now.
    ///
    /// # Safety
    /// No kernel reads or writes it any more, it is freed once, and it is never used after.
    pub(crate) unsafe fn free(&mut self) {
        ManuallyDrop::drop(&mut self.0)
    }
}

impl<T> Deref for KernelMem<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for KernelMem<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// What owns kernels and the memory they read.
pub(crate) trait KernelOwner {
    /// Asks every kernel reading this owner's memory to return (idempotent).
    fn request_stop(&mut self);
    /// Whether every such kernel has returned, without waiting. An error (a context broken by
    /// a fault) leaves it unknown.
    fn kernels_idle(&self) -> anyhow::Result<bool>;
}

/// How often [`wait_stopped`] looks.
const POLL: Duration = Duration::from_micros(50);

/// Asks `owner`'s kernels to stop and waits until they have returned (true) or `deadline`
/// passed (false). Returns at most one poll interval after the deadline.
pub(crate) fn wait_stopped(
    owner: &mut impl KernelOwner,
    deadline: Instant,
) -> anyhow::Result<bool> {
    owner.request_stop();
    loop {
        if owner.kernels_idle()? {
            return Ok(true);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        std::thread::sleep(POLL.min(deadline - now));
    }
}

/// What an owner being dropped does with its [`KernelMem`] fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub(crate) enum Teardown {
    /// Every kernel has returned: free them.
    Free,
    /// A kernel may still run (or whether one does is unknown): leave them allocated. Counted
    /// in [`abandoned_executors`] and logged.
    Leak,
}

/// Decides, for an owner being dropped, whether its memory can be freed: it waits for its
/// kernels until `deadline` (an owner whose shutdown already timed out passes `now`: one more
/// look) and counts and logs an abandonment when they have not returned. `what` names the owner
/// in the warning.
pub(crate) fn release(owner: &mut impl KernelOwner, deadline: Instant, what: &str) -> Teardown {
    match wait_stopped(owner, deadline) {
        Ok(true) => Teardown::Free,
        Ok(false) => {
            ABANDONED.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                event = "gpu_memory_leaked",
                abandoned_executors = abandoned_executors(),
                "{what}: a kernel is still running, so its rings, ACL tables, route and stage \
                 parameter tables stay allocated (leaked until the process exits) rather than \
                 freed under it"
            );
            Teardown::Leak
        }
        Err(e) => {
            ABANDONED.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                event = "gpu_memory_leaked",
                abandoned_executors = abandoned_executors(),
                "{what}: cannot tell whether its kernels returned ({e:#}): their memory stays \
                 allocated until the process exits"
            );
            Teardown::Leak
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// Counts its drops (a stand-in for a device buffer: a drop is a free).
    struct Table(Arc<AtomicUsize>);
    impl Drop for Table {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A kernel owner whose kernels return `idle_after` polls after the stop request (never
    /// when `None`), or whose queries fail.
    struct Owner {
        stop_requested: bool,
        polls: std::cell::Cell<u32>,
        idle_after: Option<u32>,
        broken: bool,
        table: KernelMem<Table>,
    }

    impl Owner {
        fn new(idle_after: Option<u32>, frees: &Arc<AtomicUsize>) -> Owner {
            Owner {
                stop_requested: false,
                polls: std::cell::Cell::new(0),
                idle_after,
                broken: false,
                table: KernelMem::new(Table(Arc::clone(frees))),
            }
        }
    }

    impl KernelOwner for Owner {
        fn request_stop(&mut self) {
            self.stop_requested = true;
        }
        fn kernels_idle(&self) -> anyhow::Result<bool> {
            if self.broken {
                anyhow::bail!("CUDA_ERROR_ILLEGAL_ADDRESS");
            }
            let n = self.polls.get();
            self.polls.set(n + 1);
            Ok(self.stop_requested && self.idle_after.is_some_and(|k| n >= k))
        }
    }

    /// The owner's drop as `GpuExecutor`'s does it.
    impl Drop for Owner {
        fn drop(&mut self) {
            let deadline = Instant::now() + Duration::from_millis(100);
            if release(self, deadline, "test owner") == Teardown::Free {
                // SAFETY: release said every kernel returned; freed once, never used after.
                unsafe { self.table.free() };
            }
        }
    }

    #[test]
    fn memory_is_freed_once_the_kernels_return() {
        let frees = Arc::new(AtomicUsize::new(0));
        drop(Owner::new(Some(3), &frees));
        assert_eq!(frees.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_kernel_that_never_returns_leaks_its_memory_within_the_deadline() {
        let frees = Arc::new(AtomicUsize::new(0));
        let before = abandoned_executors();
        let t = Instant::now();
        drop(Owner::new(None, &frees));
        let took = t.elapsed();
        assert_eq!(
            frees.load(Ordering::SeqCst),
            0,
            "freed under a running kernel"
        );
        assert!(abandoned_executors() > before, "the abandonment is counted");
        assert!(
            took >= Duration::from_millis(100),
            "gave up early: {took:?}"
        );
        // The deadline bounds the wait (generous slack: CI shares two cores among builds).
        assert!(took < Duration::from_millis(1500), "waited {took:?}");
    }

    #[test]
    fn a_broken_context_leaks_rather_than_guessing() {
        let frees = Arc::new(AtomicUsize::new(0));
        let mut o = Owner::new(Some(0), &frees);
        o.broken = true;
        drop(o);
        assert_eq!(frees.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn wait_stopped_asks_first_and_honours_a_past_deadline() {
        let frees = Arc::new(AtomicUsize::new(0));
        let mut o = Owner::new(Some(0), &frees);
        // A deadline already passed still gets one look, after the stop request.
        assert!(wait_stopped(&mut o, Instant::now()).unwrap());
        assert!(o.stop_requested);
        let mut never = Owner::new(None, &frees);
        let t = Instant::now();
        assert!(!wait_stopped(&mut never, t).unwrap());
        assert!(t.elapsed() < Duration::from_millis(500));
        // Leak both fakes' tables as a real drop would not: forget the owners.
        std::mem::forget(o);
        std::mem::forget(never);
    }

    #[test]
    fn kernel_mem_is_never_dropped_implicitly() {
        let frees = Arc::new(AtomicUsize::new(0));
        {
            let m = KernelMem::new(Table(Arc::clone(&frees)));
            assert_eq!(m.0 .0.load(Ordering::SeqCst), 0);
            // m goes out of scope here.
        }
        assert_eq!(frees.load(Ordering::SeqCst), 0);
        let mut m = KernelMem::new(Table(Arc::clone(&frees)));
        // SAFETY: nothing reads the value after.
        unsafe { m.free() };
        assert_eq!(frees.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_error_says_what_stays_allocated_and_why() {
        let e = anyhow::Error::new(KernelStillRunning { waited_ms: 150 }).context("GPU 1");
        assert!(e.downcast_ref::<KernelStillRunning>().is_some());
        let s = format!("{e:#}");
        assert!(s.contains("150 ms") && s.contains("left allocated"), "{s}");
    }
}
