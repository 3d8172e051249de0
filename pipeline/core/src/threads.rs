//! Named data-path threads: `top -H`, `ps -L`, gdb and `/proc/PID/task/*/comm` then tell an
//! operator which one is busy (`pw-in0` a port's ingest, `pw-q3` a queue's worker, `pw-tx3`
//! queue 3's TX thread, `pw-tx` the one TX thread of `queues.tx_threads: one`,
//! `pw-stage-poll` the stages' host sides on the GPU executor (the fronthaul completion poll),
//! `pw-verify` the sampling verifier of `verify.sample`), which is how a saturated stage of the
//! host side is found.

use std::thread::{Builder, Scope, ScopedJoinHandle};

/// `scope.spawn` with a thread name (Linux keeps the first 15 bytes) and a tight timer slack:
/// a data-path thread that finds its ring empty or full sleeps 20 us, and with the default
/// 50 us slack each such sleep lasted ~70 us, which held the CPU executor's fronthaul run (two
/// queues on 4-burst rings, ingest and workers waiting on each other) well below its
/// one-queue rate.
pub fn spawn_named<'scope, 'env, F, T>(
    scope: &'scope Scope<'scope, 'env>,
    name: String,
    f: F,
) -> ScopedJoinHandle<'scope, T>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    Builder::new()
        .name(name)
        .spawn_scoped(scope, move || {
            tight_timer_slack();
            f()
        })
        // What `Scope::spawn` does when the OS refuses a thread.
        .expect("failed to spawn thread")
}

/// Asks the kernel to wake this thread from its sleeps within a microsecond of the time asked
/// (Linux timer slack; the default 50 us let a 20 us sleep of the fronthaul completion poll last
/// ~75 us). For a thread whose short sleeps bound a latency. Best effort: an error is ignored.
fn tight_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer argument and changes only the calling
    // thread's timer slack; no memory is passed.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_thread_has_its_name() {
        let name = std::thread::scope(|s| {
            super::spawn_named(s, "pw-q7".into(), || {
                std::thread::current().name().map(str::to_owned)
            })
            .join()
            .ok()
            .flatten()
        });
        assert_eq!(name.as_deref(), Some("pw-q7"));
    }

    /// The calling thread's timer slack, in ns.
    #[cfg(target_os = "linux")]
    fn slack() -> i32 {
        // SAFETY: PR_GET_TIMERSLACK takes no argument and reads the calling thread's slack.
        unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_named_thread_has_the_tight_slack() {
        let inside =
            std::thread::scope(|s| super::spawn_named(s, "pw-in0".into(), slack).join().ok());
        assert_eq!(inside, Some(1));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn tight_timer_slack_is_this_threads() {
        let before = slack();
        let inside = std::thread::scope(|s| {
            s.spawn(|| {
                super::tight_timer_slack();
                slack()
            })
            .join()
            .unwrap()
        });
        assert_eq!(inside, 1);
        assert_eq!(
            slack(),
            before,
            "the calling thread's own slack is untouched"
        );
    }
}
