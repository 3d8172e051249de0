//! Frames sent from the GPU slot they ran in: the stand-in holds each reaped slot until the TX
//! thread releases it and overwrites a slot's data area as soon as it is released, so a frame
//! read after its slot was released (or a slot reused before its frames were sent) reaches the
//! port as filler, never as the CPU executor's frame.

use std::time::Duration;

use super::*;

/// A recorder that takes its time over every burst, as a port at line rate behind a slower
/// link does: the bursts reaped meanwhile wait in their held slots.
struct Slow {
    inner: Recorder,
    pause: Duration,
}

impl TxPort for Slow {
    fn tx_burst_timed(
        &mut self,
        frames: &mut dyn Iterator<Item = crate::port::TimedFrame<'_>>,
    ) -> Result<crate::port::TxSent, PortError> {
        std::thread::sleep(self.pause);
        self.inner.tx_burst_timed(frames)
    }

    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        std::thread::sleep(self.pause);
        self.inner.tx_burst(frames)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn name(&self) -> &str {
        "slow"
    }
}

/// A rewriting pipeline (MACs swapped, TTL down) on one queue with a ring of two slots.
fn rewriting() -> Prepared {
    prepared(&format!(
        "ports:\n{}queues: {{ count: 1, burst: 32, ring_slots: 2, on_full: wait }}\n\
         pipeline:\n  - parse\n  - l2fwd: {{ mac: swap }}\n  - ttl\n  - count\n\
         executor: {{ kind: cpu }}\n",
        gen_port("tgen", 4000, 11, "imix")
    ))
}

/// The GPU host side over the stand-in (holding its slots or not) with a slow output port:
/// the frames sent, the summary, and the queue's bursts reaped and released.
fn run_slow(p: &Prepared, can_hold: bool) -> (Vec<Vec<u8>>, Summary, u32, u32) {
    let mut dev = CpuStandIn::new(p, 2, 0);
    dev.can_hold = can_hold;
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let frames = Arc::new(Mutex::new(Vec::new()));
    let port = Slow {
        inner: Recorder {
            frames: Arc::clone(&frames),
            times: Arc::new(Mutex::new(Vec::new())),
            fail: false,
        },
        pause: Duration::from_micros(300),
    };
    let mut ports = open_ports(&p.cfg).expect("ports");
    let spec = host_spec(p, p.pipeline.acl().is_some(), 0);
    let mut out = crate::port::out::OutPorts::single(Some(Box::new(port) as Box<dyn TxPort>));
    let t = Instant::now();
    let o = host::run(&dev, &spec, &shared, &mut ports.rx, &mut out);
    o.result.expect("host run");
    let s = summarize(
        &shared.counters,
        &p.pipeline,
        t.elapsed(),
        &p.choice,
        o.errors,
    );
    let mut fq = dev.queue(0);
    // Advances the release count over the last releases.
    let _ = dev.ring_full(&mut fq);
    let tx = std::mem::take(&mut *frames.lock().unwrap());
    (tx, s, fq.reaped, fq.released)
}

#[test]
fn a_slow_port_sends_every_frame_from_its_held_slot_before_the_slot_is_reused() {
    let p = rewriting();
    assert!(p.pipeline.rewrites());
    let cpu = run_cpu_ref(&p, true);
    assert!(cpu.tx.len() > 3000, "the CPU run sent most frames");
    let (tx, s, reaped, released) = run_slow(&p, true);
    assert!(
        !tx.iter().any(|f| f.iter().all(|&b| b == RELEASED_FILL)),
        "a frame was read after its slot was released"
    );
    // One queue: the TX order is the receive order on both executors.
    assert_same_frames(&tx, &cpu.tx, "held slots, slow port");
    assert_same_counts(&s, &cpu.s, "held slots, slow port");
    // Two slots and a slow port: ingest waited for the port (nothing dropped as ring_full),
    // and every burst reaped was released once sent.
    assert_eq!(s.drops, cpu.s.drops);
    assert!(reaped > 2, "{reaped} bursts");
    assert_eq!(released, reaped, "every reaped burst released");
}

#[test]
fn a_device_that_does_not_hold_its_slots_has_its_frames_copied_out() {
    let p = rewriting();
    let cpu = run_cpu_ref(&p, true);
    let (tx, s, reaped, released) = run_slow(&p, false);
    assert_same_frames(&tx, &cpu.tx, "copied out, slow port");
    assert_same_counts(&s, &cpu.s, "copied out, slow port");
    // Nothing was held: nothing released.
    assert!(reaped > 2);
    assert_eq!(released, 0);
}
