//! One TX thread per worker queue (CPU executor; the GPU host side runs the same TX loop):
//! with 1, 2 and 4 queues every frame is sent once, each queue's frames leave in the order the
//! queue received them, from that queue's thread `pw-tx<q>`; a port that gives a sender per TX
//! queue has queue q's frames on its TX queue q, a port that cannot (one shared sender) still
//! gets each queue's frames in order; `queues.tx_threads: one` keeps one thread `pw-tx`. Bad
//! input: a port with fewer TX queues than queues stops the run with an error naming it.

use std::sync::{Arc, Mutex};

use pipeline::burst::{Burst, FrameDesc};
use pipeline::internal::executor::cpu::{self, CpuRunSpec, CpuShared, RxThreads};
use pipeline::internal::port::out::OutPorts;
use pipeline::internal::ring::OnFull;
use pipeline::internal::steer::Steering;
use pipeline::port::{PortError, RxPort, RxStatus, TxPort, TxSent, WireFrame};
use pipeline::stage::{Pipeline, Stage};

const FRAMES: u32 = 3000;

/// An Ethernet / IPv4 / UDP frame of flow `flow` carrying `seq` after the UDP header.
fn frame(flow: u16, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&50u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 1, 2]);
    f[34..36].copy_from_slice(&(1000 + flow).to_be_bytes());
    f[36..38].copy_from_slice(&53u16.to_be_bytes());
    f[38..40].copy_from_slice(&30u16.to_be_bytes());
    f[42..46].copy_from_slice(&seq.to_be_bytes());
    f
}

fn seq_of(f: &[u8]) -> u32 {
    u32::from_be_bytes([f[42], f[43], f[44], f[45]])
}

/// FRAMES frames of 61 flows (RSS spreads them), then the end.
struct Source {
    next: u32,
}

impl RxPort for Source {
    fn rx_burst(&mut self, burst: &mut Burst, max: usize) -> Result<RxStatus, PortError> {
        if self.next >= FRAMES {
            return Ok(RxStatus::End);
        }
        let mut n = 0;
        while n < max && self.next < FRAMES {
            let f = frame((self.next % 61) as u16, self.next);
            burst.push(&f, FrameDesc::default());
            self.next += 1;
            n += 1;
        }
        Ok(RxStatus::Frames(n))
    }
    fn name(&self) -> &str {
        "source"
    }
}

/// One frame as a sender took it: the sender's TX queue (None: the one shared sender), the
/// queue the TX loop named, the sending thread, the frame's sequence number.
#[derive(Clone, Debug)]
struct Took {
    handle: Option<u16>,
    queue: u16,
    thread: String,
    seq: u32,
}

/// Records what it is given; with `tx_queues`, gives one sender per TX queue, up to that many.
struct Recorder {
    log: Arc<Mutex<Vec<Took>>>,
    handle: Option<u16>,
    tx_queues: Option<usize>,
}

impl TxPort for Recorder {
    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        Ok(self
            .tx_burst_wire(&mut frames.map(|f| (f, 0, 0)), u16::MAX)?
            .sent)
    }
    fn tx_burst_wire(
        &mut self,
        frames: &mut dyn Iterator<Item = WireFrame<'_>>,
        queue: u16,
    ) -> Result<TxSent, PortError> {
        let thread = std::thread::current().name().unwrap_or("").to_string();
        let mut log = self.log.lock().unwrap();
        let mut sent = 0;
        for (f, _, _) in frames {
            log.push(Took {
                handle: self.handle,
                queue,
                thread: thread.clone(),
                seq: seq_of(f),
            });
            sent += 1;
        }
        Ok(TxSent {
            sent,
            ..TxSent::default()
        })
    }
    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }
    fn name(&self) -> &str {
        "recorder"
    }
    fn queue_senders(&self, n: usize) -> Option<Result<Vec<Box<dyn TxPort>>, PortError>> {
        let have = self.tx_queues?;
        if have < n {
            return Some(Err(PortError::Config(format!(
                "recorder has {have} TX queues for {n} TX threads"
            ))));
        }
        Some(Ok((0..n)
            .map(|q| {
                Box::new(Recorder {
                    log: Arc::clone(&self.log),
                    handle: Some(q as u16),
                    tx_queues: None,
                }) as Box<dyn TxPort>
            })
            .collect()))
    }
}

fn spec(queues: usize, tx_per_queue: bool) -> CpuRunSpec {
    CpuRunSpec {
        queues,
        burst: 16,
        ring_slots: 8,
        on_full: OnFull::Wait,
        pipeline: Arc::new(Pipeline::new(vec![Stage::Parse, Stage::Count])),
        steering: Arc::new(Steering::rss_only(queues as u16).expect("steering")),
        observer: None,
        verify_sample: 0,
        rx_threads: RxThreads {
            tx_per_queue,
            ..RxThreads::default()
        },
    }
}

/// Runs FRAMES frames over `queues` queues into a recorder; what it took, and the run's errors.
fn run(queues: usize, tx_per_queue: bool, tx_queues: Option<usize>) -> (Vec<Took>, Vec<String>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let port = Recorder {
        log: Arc::clone(&log),
        handle: None,
        tx_queues,
    };
    let spec = spec(queues, tx_per_queue);
    let shared = CpuShared::new(&spec);
    let out = OutPorts::single(Some(Box::new(port)));
    let r = cpu::run_out(&spec, &shared, vec![Box::new(Source { next: 0 })], out);
    if r.errors.is_empty() {
        // Counts exact: every frame received, counted and sent, none dropped.
        let sum = |f: &dyn Fn(&pipeline::counters::QueueCounters) -> u64| -> u64 {
            shared.counters.iter().map(|c| f(c)).sum()
        };
        assert_eq!(sum(&|c| c.rx_frames.get()), u64::from(FRAMES));
        assert_eq!(sum(&|c| c.tx_frames.get()), u64::from(FRAMES));
        assert_eq!(sum(&|c| c.drops.iter().map(|d| d.get()).sum()), 0);
        assert_eq!(r.out.len(), 1, "{:?}", r.out);
        assert_eq!(r.out[0].frames, u64::from(FRAMES), "{:?}", r.out);
    }
    let took = log.lock().unwrap().clone();
    (took, r.errors)
}

/// Every frame once; each queue's frames in increasing sequence (the order its worker had
/// them, which is the source's order within a queue).
fn check_once_and_in_order(took: &[Took], queues: usize, what: &str) {
    let mut seen = vec![false; FRAMES as usize];
    for t in took {
        assert!(!seen[t.seq as usize], "{what}: frame {} sent twice", t.seq);
        seen[t.seq as usize] = true;
    }
    assert!(seen.iter().all(|s| *s), "{what}: a frame was not sent");
    let mut last = vec![None::<u32>; queues];
    for t in took {
        let q = usize::from(t.queue);
        assert!(q < queues, "{what}: queue {q}");
        if let Some(l) = last[q] {
            assert!(t.seq > l, "{what}: queue {q} sent {} after {l}", t.seq);
        }
        last[q] = Some(t.seq);
    }
    if queues > 1 {
        let busy = last.iter().filter(|l| l.is_some()).count();
        assert!(busy > 1, "{what}: RSS put every frame on one queue");
    }
}

#[test]
fn each_queue_sends_from_its_own_thread_on_its_own_tx_queue() {
    for queues in [1usize, 2, 4] {
        let (took, errors) = run(queues, true, Some(queues));
        assert!(errors.is_empty(), "{errors:?}");
        let what = format!("{queues} queues, a sender per TX queue");
        check_once_and_in_order(&took, queues, &what);
        // One queue: the port as opened is queue 0's sender.
        let want = |q: u16| (queues > 1).then_some(q);
        for t in &took {
            assert_eq!(t.handle, want(t.queue), "{what}: TX queue of {t:?}");
            assert_eq!(t.thread, format!("pw-tx{}", t.queue), "{what}: {t:?}");
        }
    }
}

#[test]
fn a_port_of_one_sender_is_shared_and_keeps_each_queues_order() {
    for queues in [1usize, 2, 4] {
        let (took, errors) = run(queues, true, None);
        assert!(errors.is_empty(), "{errors:?}");
        let what = format!("{queues} queues, one shared sender");
        check_once_and_in_order(&took, queues, &what);
        for t in &took {
            assert_eq!(t.handle, None, "{what}: {t:?}");
            assert_eq!(t.thread, format!("pw-tx{}", t.queue), "{what}: {t:?}");
        }
    }
}

#[test]
fn tx_threads_one_sends_every_queue_from_one_thread() {
    let (took, errors) = run(4, false, Some(4));
    assert!(errors.is_empty(), "{errors:?}");
    check_once_and_in_order(&took, 4, "tx_threads: one");
    for t in &took {
        assert_eq!(t.thread, "pw-tx", "{t:?}");
        // The port is not split: its one sender takes every queue.
        assert_eq!(t.handle, None, "{t:?}");
    }
}

#[test]
fn fewer_tx_queues_than_queues_is_an_error_naming_the_port() {
    let (took, errors) = run(4, true, Some(2));
    assert!(took.is_empty(), "nothing runs: {took:?}");
    let e = errors.join("; ");
    assert!(e.contains("recorder") && e.contains("2 TX queues"), "{e}");
}
