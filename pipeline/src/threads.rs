//! Named data-path threads: `top -H`, `ps -L`, gdb and `/proc/PID/task/*/comm` then tell an
//! operator which one is busy (`pw-in0` a port's ingest, `pw-q3` a queue's worker, `pw-tx` the
//! TX thread), which is how a saturated stage of the host side is found.

use std::thread::{Builder, Scope, ScopedJoinHandle};

/// `scope.spawn` with a thread name (Linux keeps the first 15 bytes).
pub(crate) fn spawn_named<'scope, 'env, F, T>(
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
        .spawn_scoped(scope, f)
        // What `Scope::spawn` does when the OS refuses a thread.
        .expect("failed to spawn thread")
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
}
