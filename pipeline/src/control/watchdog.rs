//! Kernel watchdog: a queue whose heartbeat stops advancing while work is queued for it is
//! stalled. The check is generic over a [`QueueProbe`] (heartbeat and pending work per queue, and
//! a way to restart one queue) so it is tested with a fake here and wired to the GPU executor's
//! queue state words.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::settings::OnStall;
use super::QueueHealth;

/// One reading of a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSample {
    /// A word the queue's kernel bumps while it runs (bursts done, idle polls).
    pub heartbeat: u64,
    /// Work handed to the queue and not yet done (bursts).
    pub pending: u64,
}

/// What the watchdog watches.
pub trait QueueProbe {
    fn queues(&self) -> usize;
    /// The queue's state now; `None` when it cannot be read (the queue is skipped).
    fn sample(&self, queue: usize) -> Option<QueueSample>;
    /// Restarts the queue's kernel; an error says why it could not.
    fn restart(&mut self, queue: usize) -> anyhow::Result<()>;
}

/// What a tick decided for one queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchdogEvent {
    /// The heartbeat stood still this long with `pending` work.
    Stalled {
        queue: usize,
        heartbeat: u64,
        pending: u64,
        for_ms: u64,
    },
    Restarted {
        queue: usize,
    },
    /// The heartbeat moves again after a stall.
    Recovered {
        queue: usize,
    },
    /// `on_stall: exit`, or a restart that failed: the daemon must exit non-zero.
    Exit {
        queue: usize,
        reason: String,
    },
}

#[derive(Clone, Copy, Debug)]
struct Track {
    heartbeat: u64,
    /// Since when the heartbeat has stood still with work pending.
    since: Instant,
    stalled: bool,
}

/// The stall detector. Call [`Watchdog::tick`] periodically (period well under `stall_after`).
pub struct Watchdog {
    stall_after: Duration,
    on_stall: OnStall,
    tracks: Vec<Option<Track>>,
}

impl Watchdog {
    pub fn new(queues: usize, stall_after: Duration, on_stall: OnStall) -> Self {
        Watchdog {
            stall_after,
            on_stall,
            tracks: vec![None; queues],
        }
    }

    /// Samples every queue at time `now`, updates `health` (metrics) and acts on stalls.
    /// Events are also logged here, with fields.
    pub fn tick(
        &mut self,
        now: Instant,
        probe: &mut dyn QueueProbe,
        health: &[QueueHealth],
    ) -> Vec<WatchdogEvent> {
        let mut events = Vec::new();
        let n = probe.queues().min(self.tracks.len());
        for q in 0..n {
            let Some(s) = probe.sample(q) else { continue };
            if let Some(h) = health.get(q) {
                h.heartbeat.store(s.heartbeat, Ordering::Relaxed);
            }
            let t = self.tracks[q].get_or_insert(Track {
                heartbeat: s.heartbeat,
                since: now,
                stalled: false,
            });
            if s.heartbeat != t.heartbeat || s.pending == 0 {
                // Alive (or idle with nothing to do: a still heartbeat is no stall then).
                if t.stalled && s.heartbeat != t.heartbeat {
                    tracing::info!(
                        event = "stall_recovered",
                        queue = q,
                        heartbeat = s.heartbeat,
                        "queue kernel heartbeat moves again"
                    );
                    events.push(WatchdogEvent::Recovered { queue: q });
                    t.stalled = false;
                    if let Some(h) = health.get(q) {
                        h.stalled.store(false, Ordering::Relaxed);
                    }
                }
                t.heartbeat = s.heartbeat;
                t.since = now;
                continue;
            }
            let still = now.saturating_duration_since(t.since);
            if t.stalled || still < self.stall_after {
                continue;
            }
            t.stalled = true;
            let for_ms = still.as_millis() as u64;
            tracing::error!(
                event = "stall",
                queue = q,
                heartbeat = s.heartbeat,
                pending = s.pending,
                stalled_ms = for_ms,
                action = ?self.on_stall,
                "queue kernel heartbeat stopped with work queued"
            );
            if let Some(h) = health.get(q) {
                h.stalled.store(true, Ordering::Relaxed);
                h.stalls.fetch_add(1, Ordering::Relaxed);
            }
            events.push(WatchdogEvent::Stalled {
                queue: q,
                heartbeat: s.heartbeat,
                pending: s.pending,
                for_ms,
            });
            match self.on_stall {
                OnStall::Exit => events.push(WatchdogEvent::Exit {
                    queue: q,
                    reason: format!("queue {q} stalled for {for_ms} ms (on_stall: exit)"),
                }),
                OnStall::Restart => match probe.restart(q) {
                    Ok(()) => {
                        tracing::warn!(
                            event = "kernel_restart",
                            queue = q,
                            "queue kernel restarted"
                        );
                        if let Some(h) = health.get(q) {
                            h.restarts.fetch_add(1, Ordering::Relaxed);
                            h.stalled.store(false, Ordering::Relaxed);
                        }
                        // A fresh grace period: a restarted kernel that stalls again is
                        // detected (and restarted) again.
                        t.stalled = false;
                        t.since = now;
                        events.push(WatchdogEvent::Restarted { queue: q });
                    }
                    Err(e) => {
                        tracing::error!(event = "kernel_restart", queue = q, error = %e, "queue kernel restart failed; exiting for the supervisor");
                        events.push(WatchdogEvent::Exit {
                            queue: q,
                            reason: format!("queue {q} stalled and its restart failed: {e}"),
                        });
                    }
                },
            }
        }
        events
    }
}

/// The GPU executor as a [`QueueProbe`]: heartbeat from the queue's control block (host-visible
/// pinned memory, read without pausing the kernel), pending = bursts handed over and not reaped.
pub struct GpuProbe<'a> {
    pub exec: &'a crate::executor::gpu::GpuExecutor,
}

impl QueueProbe for GpuProbe<'_> {
    fn queues(&self) -> usize {
        self.exec.n_queues()
    }

    fn sample(&self, queue: usize) -> Option<QueueSample> {
        let (_status, heartbeat, _polls) = self.exec.queue_state(queue)?;
        Some(QueueSample {
            heartbeat: heartbeat as u64,
            pending: self.exec.in_flight(queue) as u64,
        })
    }

    fn restart(&mut self, queue: usize) -> anyhow::Result<()> {
        // Only the thread that polls a queue may restart it (it must reap what the stopped
        // kernel finished, in order): a probe over the executor alone cannot.
        anyhow::bail!(
            "queue {queue}: restart through the daemon's queue thread (RestartBoard), not the \
             executor probe"
        )
    }
}

pub use crate::executor::restart_board::RestartBoard;

/// How long the watchdog waits for a queue thread to restart its kernel.
pub const RESTART_WAIT: Duration = Duration::from_secs(5);

/// The GPU executor's queues as the daemon's host loop publishes them in the shared counters
/// (`kernel_heartbeat`, `in_flight_bursts`, refreshed at every poll), so the control thread can
/// watch them without touching the executor; restarts go to the queue threads through
/// `restarts`.
pub struct CountersProbe {
    pub counters: Vec<std::sync::Arc<crate::counters::QueueCounters>>,
    pub restarts: Option<std::sync::Arc<RestartBoard>>,
}

impl QueueProbe for CountersProbe {
    fn queues(&self) -> usize {
        self.counters.len()
    }

    fn sample(&self, queue: usize) -> Option<QueueSample> {
        let c = self.counters.get(queue)?;
        Some(QueueSample {
            heartbeat: c.kernel_heartbeat.get(),
            pending: c.in_flight_bursts.get(),
        })
    }

    fn restart(&mut self, queue: usize) -> anyhow::Result<()> {
        match &self.restarts {
            Some(b) => b.request(queue, RESTART_WAIT),
            None => anyhow::bail!("queue {queue}: nothing here can restart its kernel"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted queue set: heartbeats and pending work the test moves by hand.
    struct Fake {
        hb: Vec<u64>,
        pending: Vec<u64>,
        restarts: Vec<usize>,
        restart_ok: bool,
        unreadable: Option<usize>,
    }

    impl QueueProbe for Fake {
        fn queues(&self) -> usize {
            self.hb.len()
        }
        fn sample(&self, q: usize) -> Option<QueueSample> {
            if self.unreadable == Some(q) {
                return None;
            }
            Some(QueueSample {
                heartbeat: self.hb[q],
                pending: self.pending[q],
            })
        }
        fn restart(&mut self, q: usize) -> anyhow::Result<()> {
            if !self.restart_ok {
                anyhow::bail!("no restart here");
            }
            self.restarts.push(q);
            // A restarted kernel comes back with a fresh heartbeat.
            self.hb[q] += 1000;
            Ok(())
        }
    }

    fn health(n: usize) -> Vec<QueueHealth> {
        (0..n).map(|_| QueueHealth::default()).collect()
    }

    fn fake(n: usize) -> Fake {
        Fake {
            hb: vec![0; n],
            pending: vec![0; n],
            restarts: Vec::new(),
            restart_ok: true,
            unreadable: None,
        }
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn idle_queue_with_still_heartbeat_is_not_stalled() {
        let mut f = fake(1);
        let h = health(1);
        let mut w = Watchdog::new(1, 100 * MS, OnStall::Restart);
        let t0 = Instant::now();
        for i in 0..50 {
            assert!(w.tick(t0 + i * 10 * MS, &mut f, &h).is_empty());
        }
        assert_eq!(h[0].stalls.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn advancing_heartbeat_with_work_is_not_stalled() {
        let mut f = fake(2);
        f.pending = vec![5, 5];
        let h = health(2);
        let mut w = Watchdog::new(2, 100 * MS, OnStall::Exit);
        let t0 = Instant::now();
        for i in 0..50u32 {
            f.hb[0] += 1;
            f.hb[1] += 3;
            assert!(w.tick(t0 + i * 30 * MS, &mut f, &h).is_empty());
        }
        assert_eq!(h[1].heartbeat.load(Ordering::Relaxed), 150);
    }

    #[test]
    fn stall_is_reported_once_then_restarted_then_recovers() {
        let mut f = fake(2);
        f.pending = vec![3, 3];
        let h = health(2);
        let mut w = Watchdog::new(2, 100 * MS, OnStall::Restart);
        let t0 = Instant::now();
        f.restart_ok = true;
        // Queue 1 keeps moving, queue 0 freezes with work queued.
        let mut events = Vec::new();
        for i in 0..=10u32 {
            f.hb[1] += 1;
            events.extend(w.tick(t0 + i * 10 * MS, &mut f, &h));
        }
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(matches!(
            events[0],
            WatchdogEvent::Stalled {
                queue: 0,
                pending: 3,
                for_ms: 100,
                ..
            }
        ));
        assert_eq!(events[1], WatchdogEvent::Restarted { queue: 0 });
        assert_eq!(f.restarts, vec![0]);
        assert_eq!(h[0].stalls.load(Ordering::Relaxed), 1);
        assert_eq!(h[0].restarts.load(Ordering::Relaxed), 1);
        assert_eq!(h[1].stalls.load(Ordering::Relaxed), 0);
        // Freezes again after the restart: detected again after another full grace period.
        f.pending[1] = 0;
        let t1 = t0 + 100 * MS;
        assert!(w.tick(t1 + 10 * MS, &mut f, &h).is_empty()); // new heartbeat seen
        assert!(w.tick(t1 + 50 * MS, &mut f, &h).is_empty());
        let ev = w.tick(t1 + 111 * MS, &mut f, &h);
        assert!(
            matches!(ev[0], WatchdogEvent::Stalled { queue: 0, .. }),
            "{ev:?}"
        );
        assert_eq!(h[0].stalls.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn exit_policy_and_failed_restart_ask_for_exit() {
        for (policy, restart_ok) in [(OnStall::Exit, true), (OnStall::Restart, false)] {
            let mut f = fake(1);
            f.restart_ok = restart_ok;
            f.pending = vec![1];
            let h = health(1);
            let mut w = Watchdog::new(1, 50 * MS, policy);
            let t0 = Instant::now();
            assert!(w.tick(t0, &mut f, &h).is_empty());
            let ev = w.tick(t0 + 60 * MS, &mut f, &h);
            assert!(
                matches!(ev.last(), Some(WatchdogEvent::Exit { queue: 0, .. })),
                "{ev:?}"
            );
            assert!(f.restarts.is_empty());
            assert!(h[0].stalled.load(Ordering::Relaxed));
            // Reported once, not on every tick.
            assert!(w.tick(t0 + 200 * MS, &mut f, &h).is_empty());
            // The heartbeat moves: recovered, gauge cleared.
            f.hb[0] += 1;
            let ev = w.tick(t0 + 210 * MS, &mut f, &h);
            assert_eq!(ev, vec![WatchdogEvent::Recovered { queue: 0 }]);
            assert!(!h[0].stalled.load(Ordering::Relaxed));
        }
    }

    #[test]
    fn work_arriving_on_an_idle_queue_starts_a_fresh_grace_period() {
        let mut f = fake(1);
        let h = health(1);
        let mut w = Watchdog::new(1, 100 * MS, OnStall::Exit);
        let t0 = Instant::now();
        // Idle for a long time with a still heartbeat.
        assert!(w.tick(t0, &mut f, &h).is_empty());
        assert!(w.tick(t0 + 5000 * MS, &mut f, &h).is_empty());
        // Work arrives: not stalled until a full period passes without a heartbeat.
        f.pending[0] = 4;
        assert!(w.tick(t0 + 5050 * MS, &mut f, &h).is_empty());
        assert!(!w.tick(t0 + 5101 * MS, &mut f, &h).is_empty());
    }

    #[test]
    fn counters_probe_reads_what_the_gpu_loop_publishes() {
        let counters: Vec<_> = (0..2)
            .map(|_| std::sync::Arc::new(crate::counters::QueueCounters::new(1, 0)))
            .collect();
        let mut p = CountersProbe {
            counters: counters.clone(),
            restarts: None,
        };
        counters[1].kernel_heartbeat.set(42);
        counters[1].in_flight_bursts.set(3);
        assert_eq!(p.queues(), 2);
        assert_eq!(
            p.sample(1),
            Some(QueueSample {
                heartbeat: 42,
                pending: 3
            })
        );
        assert_eq!(p.sample(2), None);
        // Nothing to restart the queue with: the watchdog turns this into an exit.
        assert!(p.restart(0).is_err());
        let h = health(2);
        let mut w = Watchdog::new(2, 10 * MS, OnStall::Restart);
        let t0 = Instant::now();
        w.tick(t0, &mut p, &h);
        let ev = w.tick(t0 + 20 * MS, &mut p, &h);
        assert!(
            matches!(ev.last(), Some(WatchdogEvent::Exit { queue: 1, .. })),
            "{ev:?}"
        );
        assert_eq!(h[1].heartbeat.load(Ordering::Relaxed), 42);
    }

    #[test]
    fn unreadable_queue_is_skipped() {
        let mut f = fake(2);
        f.pending = vec![1, 1];
        f.unreadable = Some(0);
        let h = health(2);
        let mut w = Watchdog::new(2, 10 * MS, OnStall::Exit);
        let t0 = Instant::now();
        w.tick(t0, &mut f, &h);
        let ev = w.tick(t0 + 20 * MS, &mut f, &h);
        assert_eq!(ev.len(), 2);
        assert!(matches!(ev[0], WatchdogEvent::Stalled { queue: 1, .. }));
    }

    #[test]
    fn a_restart_is_asked_of_the_queue_thread_and_waits_for_its_answer() {
        let board = std::sync::Arc::new(RestartBoard::new(2));
        assert!(!board.take(0), "nothing asked yet");
        // A queue thread that restarts queue 1 once and fails on queue 0.
        let b = std::sync::Arc::clone(&board);
        let worker = std::thread::spawn(move || {
            let mut answered = 0;
            while answered < 2 {
                for q in 0..2 {
                    if b.take(q) {
                        let r = if q == 1 {
                            Ok(())
                        } else {
                            Err(anyhow::anyhow!("hung"))
                        };
                        b.answer(q, &r);
                        answered += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let counters: Vec<_> = (0..2)
            .map(|_| std::sync::Arc::new(crate::counters::QueueCounters::new(1, 0)))
            .collect();
        let mut p = CountersProbe {
            counters,
            restarts: Some(std::sync::Arc::clone(&board)),
        };
        p.restart(1).expect("queue 1 restarts");
        let e = p.restart(0).unwrap_err();
        assert!(format!("{e:#}").contains("hung"), "{e:#}");
        worker.join().unwrap();
        // Nobody answers: the request times out and is taken back.
        let t = Instant::now();
        let e = board.request(1, Duration::from_millis(30)).unwrap_err();
        assert!(t.elapsed() >= Duration::from_millis(30));
        assert!(format!("{e:#}").contains("did not restart"), "{e:#}");
        assert!(!board.take(1), "a timed-out request is withdrawn");
        assert!(
            board.request(5, Duration::from_millis(1)).is_err(),
            "no such queue"
        );
    }
}
