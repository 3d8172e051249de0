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
    let spec = host_spec(p, GpuSlots::of(&p.cfg), p.pipeline.acl().is_some(), 0);
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

/// A port that holds every frame with a send time and, when polled, sends the even ones of
/// what it holds and gives up the odd ones (a device that filled up meanwhile), settling each
/// for the queue it came from.
#[derive(Default)]
struct Pacer {
    held: Vec<(u16, u64)>,
    settled: Vec<crate::port::Settled>,
    sent: Arc<Mutex<u64>>,
}

impl Pacer {
    fn settle(&mut self) {
        for (k, (q, len)) in self.held.drain(..).enumerate() {
            let q = usize::from(q);
            if self.settled.len() <= q {
                self.settled.resize(q + 1, crate::port::Settled::default());
            }
            let s = &mut self.settled[q];
            s.queue = q as u16;
            if k % 2 == 0 {
                s.sent += 1;
                s.bytes += len;
                *self.sent.lock().unwrap() += 1;
            } else {
                s.failed += 1;
            }
        }
    }
}

impl TxPort for Pacer {
    fn tx_burst_queued(
        &mut self,
        frames: &mut dyn Iterator<Item = crate::port::TimedFrame<'_>>,
        queue: u16,
    ) -> Result<crate::port::TxSent, PortError> {
        let mut out = crate::port::TxSent::default();
        for (f, at) in frames {
            if at == 0 {
                out.sent += 1;
                *self.sent.lock().unwrap() += 1;
            } else {
                self.held.push((queue, f.len() as u64));
                out.held += 1;
            }
        }
        Ok(out)
    }

    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        self.tx_burst_queued(&mut frames.map(|f| (f, 0)), 0)
            .map(|t| t.sent)
    }

    fn tx_poll(&mut self) -> Result<(), PortError> {
        self.settle();
        Ok(())
    }

    fn take_settled(&mut self, out: &mut Vec<crate::port::Settled>) {
        out.extend(self.settled.drain(..).filter(|s| s.sent + s.failed > 0));
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.settle();
        Ok(())
    }

    fn name(&self) -> &str {
        "pacer"
    }
}

/// A delay line over two queues into a port that paces and loses half of what it held.
fn delayed() -> Prepared {
    prepared(&format!(
        "ports:\n{}queues: {{ count: 2, burst: 32, ring_slots: 4 }}\n\
         pipeline:\n  - parse\n  - tx_time: {{ delay_ns: 1000 }}\n  - count\n\
         executor: {{ kind: cpu }}\n",
        gen_port("tgen", 3000, 12, "imix")
    ))
}

/// Queue counters after a run: frames sent, their bytes, `tx_error` drops, and the output
/// port's tally (frames, failed).
fn tx_counts(s: &Summary, out: &[crate::port::out::OutTally]) -> (u64, u64, u64, u64, u64) {
    let err = s
        .drops
        .iter()
        .find(|(k, _)| k == "tx_error")
        .map_or(0, |(_, v)| *v);
    let o = out
        .iter()
        .find(|o| o.role == "output")
        .expect("output tally");
    (s.tx_frames, s.tx_bytes, err, o.frames, o.failed)
}

#[test]
fn held_frames_count_sent_only_once_sent_on_both_executors() {
    let p = delayed();
    let mut results = Vec::new();
    for gpu in [false, true] {
        let sent = Arc::new(Mutex::new(0u64));
        let port = Pacer {
            sent: Arc::clone(&sent),
            ..Pacer::default()
        };
        let shared = Arc::new(cpu::CpuShared::new(&p.cpu_spec()));
        let mut ports = open_ports(&p.cfg).expect("ports");
        let mut out = crate::port::out::OutPorts::single(Some(Box::new(port) as Box<dyn TxPort>));
        let t = Instant::now();
        let tallies = if gpu {
            let dev = CpuStandIn::new(&p, 4, 1);
            let spec = host_spec(&p, GpuSlots::of(&p.cfg), false, 0);
            let o = host::run(&dev, &spec, &shared, &mut ports.rx, &mut out);
            o.result.expect("host run");
            o.outputs
        } else {
            let rx = std::mem::take(&mut ports.rx);
            cpu::run_out(&p.cpu_spec(), &shared, rx, out).out
        };
        let s = summarize(
            &shared.counters,
            &p.pipeline,
            t.elapsed(),
            &p.choice,
            Vec::new(),
        );
        let (frames, bytes, err, port_frames, port_failed) = tx_counts(&s, &tallies);
        let really = *sent.lock().unwrap();
        let what = if gpu { "GPU host side" } else { "CPU executor" };
        assert!(s.rx_frames > 2000, "{what}: frames came in");
        // Sent only what the port sent; the rest of what it held is a tx_error drop.
        assert_eq!(frames, really, "{what}: tx_frames are the frames sent");
        assert_eq!(port_frames, really, "{what}: the port's tally");
        assert!(
            err > 0 && err == port_failed,
            "{what}: {err} vs {port_failed}"
        );
        let passed: u64 = s.queues.iter().map(|q| q.passed).sum();
        assert_eq!(
            frames + err,
            passed,
            "{what}: every frame passed is sent or lost"
        );
        assert!(
            bytes > 0 && bytes < s.rx_bytes,
            "{what}: bytes of the frames sent"
        );
        results.push((frames, bytes, err));
    }
    // The pacer settles per poll in arrival order, so the two executors lose frames
    // differently; both count what happened.
    assert!(results.iter().all(|r| r.0 > 0));
}
