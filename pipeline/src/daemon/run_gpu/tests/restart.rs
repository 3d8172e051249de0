//! `on_stall: restart` on the GPU host side: a queue whose kernel stalls on one burst is found by
//! the watchdog (the real one, ticking over the counters the queue threads publish), restarted
//! by its own queue thread, and loses that burst alone (counted as `kernel_stall`); the other
//! queues and every other burst count exactly as on the CPU executor.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::*;
use crate::control::settings::OnStall;
use crate::control::watchdog::{CountersProbe, Watchdog, WatchdogEvent};
use crate::control::QueueHealth;

#[test]
fn a_stalled_queue_is_restarted_and_loses_only_the_burst_it_held() {
    let yaml = format!(
        "ports:\n{}queues: {{ count: 3, burst: 16, ring_slots: 4 }}\n{INLINE}",
        gen_port("a", 6000, 3, "imix")
    );
    let p = prepared(&yaml);
    let cpu = run_cpu_ref(&p, false);
    let mut dev = CpuStandIn::new(&p, 4, 1);
    dev.stall = Some((1, 5));
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let done = AtomicBool::new(false);
    let mut events = Vec::new();
    let (r, s) = std::thread::scope(|sc| {
        let watch = sc.spawn(|| {
            let mut probe = CountersProbe {
                counters: shared.counters.clone(),
                restarts: Some(Arc::clone(&shared.restarts)),
            };
            let health: Vec<QueueHealth> = (0..3).map(|_| QueueHealth::default()).collect();
            // A second: on a loaded 2-core machine a healthy queue thread can sit unscheduled
            // for a tenth of one with work pending, and must not be taken for a stall.
            let mut w = Watchdog::new(3, Duration::from_secs(1), OnStall::Restart);
            let mut ev = Vec::new();
            while !done.load(Ordering::Acquire) {
                ev.extend(w.tick(Instant::now(), &mut probe, &health));
                std::thread::sleep(Duration::from_millis(5));
            }
            ev
        });
        let out = run_host(&p, &dev, &shared, None);
        done.store(true, Ordering::Release);
        events = watch.join().unwrap();
        out
    });
    r.expect("the run ends despite the stall");
    let restarted: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            WatchdogEvent::Restarted { queue } => Some(*queue),
            _ => None,
        })
        .collect();
    assert_eq!(restarted, [1], "queue 1 restarted once: {events:?}");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, WatchdogEvent::Exit { .. })),
        "{events:?}"
    );
    let drop_of = |s: &Summary, name: &str| s.drops.iter().find(|d| d.0 == name).map_or(0, |d| d.1);
    let lost = drop_of(&s, "kernel_stall");
    // A GPU slot gathers several receive bursts: the stalled one holds at most a slot's frames.
    let slot = GpuSlots::of(&p.cfg).frames as u64;
    assert!(
        lost > 0 && lost <= slot,
        "one slot's frames lost: {lost} of at most {slot}"
    );
    assert_eq!(s.rx_frames, cpu.s.rx_frames, "every frame received");
    let outcomes = |s: &Summary| -> u64 {
        s.queues
            .iter()
            .map(|q| q.passed + q.mirrored + q.to_host)
            .sum::<u64>()
            + s.drops.iter().map(|d| d.1).sum::<u64>()
    };
    assert_eq!(outcomes(&s), s.rx_frames, "received == passed + drops");
    // Queues 0 and 2 never paused: exactly the CPU executor's counts.
    for q in [0, 2] {
        let (g, c) = (&s.queues[q], &cpu.s.queues[q]);
        assert_eq!(
            (g.rx_frames, g.passed, &g.drops),
            (c.rx_frames, c.passed, &c.drops),
            "queue {q}"
        );
    }
    // Queue 1 lost that burst only.
    let (g, c) = (&s.queues[1], &cpu.s.queues[1]);
    let g_out: u64 = g.passed
        + g.drops
            .iter()
            .filter(|d| d.0 != "kernel_stall")
            .map(|d| d.1)
            .sum::<u64>();
    let c_out: u64 = c.passed + c.drops.iter().map(|d| d.1).sum::<u64>();
    assert_eq!(
        g_out + lost,
        c_out,
        "queue 1: everything but the lost burst"
    );
}
