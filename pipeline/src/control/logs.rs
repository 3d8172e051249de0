//! Where the daemon's log lines go: stderr, through a writer that cannot take a thread down.
//! `eprintln!` and tracing-subscriber's own error report panic when stderr fails (a log pipe
//! whose reader exited, a full disk); on the signal or control thread that left SIGTERM, SIGINT
//! and SIGHUP doing nothing. Here a line that cannot be written is dropped and counted
//! ([`write_errors`]: `pktwarp_log_write_errors_total`, the summary's `log_write_errors`).

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

static WRITE_ERRORS: AtomicU64 = AtomicU64::new(0);

/// Log writes to stderr that failed (their lines were dropped) since the process started.
pub fn write_errors() -> u64 {
    WRITE_ERRORS.load(Ordering::Relaxed)
}

/// Counts one dropped log line (also for a log call that panicked, see [`guarded`]).
pub fn count_write_error() {
    WRITE_ERRORS.fetch_add(1, Ordering::Relaxed);
}

/// stderr as a log writer (`tracing_subscriber::fmt().with_writer(|| Stderr)`): every write
/// reports success; one that failed is counted instead.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        // One formatted event is one write_all: a failure drops (and counts) the whole line.
        if io::stderr().lock().write_all(buf).is_err() {
            count_write_error();
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = io::stderr().flush();
        Ok(())
    }
}

/// `eprintln!` that never panics: the line is written whole or dropped and counted.
pub fn stderr_line(args: std::fmt::Arguments) {
    let _ = Stderr.write_all(format!("{args}\n").as_bytes());
}

/// Runs a log call where a panic must not end the thread (the signal thread): a subscriber
/// of an embedding binary may still panic on a failing writer. Such a panic counts as a
/// dropped line.
pub fn guarded(log: impl FnOnce()) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(log)).is_err() {
        count_write_error();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_log_call_is_counted_not_propagated() {
        let before = write_errors();
        guarded(|| panic!("failed printing to stderr"));
        guarded(|| {});
        assert_eq!(write_errors(), before + 1);
    }
}
