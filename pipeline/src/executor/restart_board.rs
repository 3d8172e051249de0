//! The mailbox through which the control thread's watchdog asks a queue's thread to restart
//! its kernel: only that thread touches its queue's submit and poll.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Restart requests from the watchdog (control thread) to the daemon's GPU queue threads, which
/// alone touch their queue's submit and poll, and their answers.
pub struct RestartBoard {
    cells: Vec<RestartCell>,
}

#[derive(Default)]
struct RestartCell {
    /// 0 nothing asked, 1 asked, 2 done, 3 failed (the reason in `error`).
    state: std::sync::atomic::AtomicU8,
    error: std::sync::Mutex<String>,
}

const R_NONE: u8 = 0;
const R_ASKED: u8 = 1;
const R_DONE: u8 = 2;
const R_FAILED: u8 = 3;

impl RestartBoard {
    pub fn new(queues: usize) -> RestartBoard {
        RestartBoard {
            cells: (0..queues).map(|_| RestartCell::default()).collect(),
        }
    }

    /// Asks queue `q`'s thread to restart its kernel and waits up to `wait` for the answer.
    pub fn request(&self, q: usize, wait: Duration) -> anyhow::Result<()> {
        let c = self
            .cells
            .get(q)
            .ok_or_else(|| anyhow::anyhow!("no queue {q} to restart"))?;
        c.state.store(R_ASKED, Ordering::Release);
        let t = Instant::now();
        loop {
            match c.state.load(Ordering::Acquire) {
                R_DONE => {
                    c.state.store(R_NONE, Ordering::Relaxed);
                    return Ok(());
                }
                R_FAILED => {
                    c.state.store(R_NONE, Ordering::Relaxed);
                    let e = c.error.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    anyhow::bail!("{e}");
                }
                _ if t.elapsed() > wait => {
                    // Taken back, so a late answer is not mistaken for the next request's.
                    c.state.store(R_NONE, Ordering::Release);
                    anyhow::bail!(
                        "queue {q}'s thread did not restart its kernel within {} ms",
                        wait.as_millis()
                    );
                }
                _ => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    /// For queue `q`'s thread: whether a restart was asked (taken: it asks once).
    pub fn take(&self, q: usize) -> bool {
        self.cells.get(q).is_some_and(|c| {
            c.state
                .compare_exchange(R_ASKED, R_NONE, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// For queue `q`'s thread: the outcome of the restart it took.
    pub fn answer(&self, q: usize, r: &anyhow::Result<()>) {
        if let Some(c) = self.cells.get(q) {
            match r {
                Ok(()) => c.state.store(R_DONE, Ordering::Release),
                Err(e) => {
                    *c.error.lock().unwrap_or_else(|p| p.into_inner()) = format!("{e:#}");
                    c.state.store(R_FAILED, Ordering::Release);
                }
            }
        }
    }
}
