//! The CPU executor's receive threads: one per (port, queue) where the port can split its
//! frames by queue ([`RxPort::split_by_queue`]: a `pcap` port steers its capture once, at
//! load; a DPDK port polls each RX queue on its own thread), else one per port that steers every frame (the NIC-style software steering of the
//! parent module). A per-queue thread writes its frames straight into its queue's burst (one
//! copy from the loaded capture; a burst owns its bytes because the stages rewrite them in
//! place) and steers nothing: no thread serves every queue of a port on the data path.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Scope;

use crossbeam_utils::Backoff;

use super::{acquire, flush_queue, ingest, wait_on, CpuRunSpec, CpuShared, Slot};
use crate::burst::Burst;
use crate::port::{PortError, QueueRx, QueueTally, RxPort, RxStatus};
use crate::ring::{Consumer, Producer};
use crate::threads::spawn_named;
use crate::verdict::DropReason;

/// How the receive threads are laid out (`queues.rx_threads`, `queues.cores`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxThreads {
    /// One receive thread per (port, queue) where the port can split by queue (default);
    /// false: one per port.
    pub per_queue: bool,
    /// Cores the receive threads are pinned to: queue q's thread on `cores[q % len]` (a
    /// per-port thread: port p's on `cores[p % len]`). Empty: not pinned.
    pub cores: Vec<usize>,
    /// Why every port keeps one receive thread although `per_queue` asks for one per queue (a
    /// stage that orders frames across queues); `None`: ports split where they can.
    pub one_per_port: Option<String>,
    /// The TX side's threads: one per worker queue, each sending its queue's frames on its own
    /// TX queue of a DPDK port (default; `queues.tx_threads: per_queue`), or one for every
    /// queue (`one`). See `executor::tx`.
    pub tx_per_queue: bool,
}

impl Default for RxThreads {
    fn default() -> Self {
        RxThreads {
            per_queue: true,
            cores: Vec::new(),
            one_per_port: None,
            tx_per_queue: true,
        }
    }
}

/// One receiving port and the threads that receive it.
pub(super) enum Feed {
    /// One thread steers every frame of the port.
    Port(Box<dyn RxPort>),
    /// One thread per queue (the port itself kept for its name and counters).
    Queues(Box<dyn RxPort>, Vec<Box<dyn QueueRx>>),
}

impl Feed {
    pub(super) fn threads(&self) -> usize {
        match self {
            Feed::Port(_) => 1,
            Feed::Queues(_, q) => q.len(),
        }
    }
}

/// Splits every port that can be split by queue (when `queues.rx_threads` asks for it); logs
/// each port's layout and why (`event=rx_threads`).
pub(super) fn plan(spec: &CpuRunSpec, rx: Vec<Box<dyn RxPort>>) -> Vec<Feed> {
    rx.into_iter()
        .map(
            |mut p| match split_port(&spec.rx_threads, &spec.steering, spec.queues, p.as_mut()) {
                Ok(qs) => Feed::Queues(p, qs),
                Err(_) => Feed::Port(p),
            },
        )
        .collect()
}

/// Splits `p` by queue for one receive thread per queue when `threads` asks for it and the
/// port can; logs the port's layout and why (`event=rx_threads`, both executors). `Err(why)`:
/// one thread receives the port.
pub(crate) fn split_port(
    threads: &RxThreads,
    steering: &Arc<crate::steer::Steering>,
    queues: usize,
    p: &mut dyn RxPort,
) -> Result<Vec<Box<dyn QueueRx>>, String> {
    let t = std::time::Instant::now();
    let split = if let Some(why) = &threads.one_per_port {
        Err(why.clone())
    } else if threads.per_queue {
        p.split_by_queue(steering, queues.max(1))
    } else {
        Err("queues.rx_threads is `per_port`".to_string())
    };
    let split_ms = t.elapsed().as_millis() as u64;
    let name = p.name().to_string();
    match split {
        Ok(qs) => {
            tracing::info!(
                event = "rx_threads",
                port = %name,
                threads = "per_queue",
                count = qs.len(),
                split_ms,
                copies = "once per frame (port -> the queue's burst)",
                "port {name}: one receive thread per queue ({}), split in {split_ms} ms (a loaded capture or frame pool steered once; a DPDK port by its RX queues); each frame copied once into its queue's burst (a burst owns its bytes: the stages rewrite them in place)",
                qs.len()
            );
            Ok(qs)
        }
        Err(why) => {
            tracing::info!(
                event = "rx_threads",
                port = %name,
                threads = "per_port",
                copies = "twice per frame (port -> receive burst -> queue burst)",
                reason = %why,
                "port {name}: one receive thread steers every frame: {why}"
            );
            Err(why)
        }
    }
}

/// Where a receive thread reports.
pub(super) struct IngestSinks<'a> {
    pub spec: &'a CpuRunSpec,
    pub shared: &'a Arc<CpuShared>,
    /// One flag per receive thread, set when it ends.
    pub done: &'a [AtomicBool],
    pub errors: &'a Mutex<Vec<String>>,
    pub port_counters: &'a Mutex<PortCounters>,
}

/// Each receiving port's own counters at its end: (port name, (counter, value)).
pub(super) type PortCounters = Vec<(String, Vec<(String, u64)>)>;

/// Each port's rings: to each queue's worker, and the slots back from the workers and the TX
/// thread (per port, one per queue; the TX list is empty without a TX thread).
pub(super) type PortRings = (
    Vec<Producer<Box<Slot>>>,
    Vec<Consumer<Box<Slot>>>,
    Vec<Consumer<Box<Slot>>>,
);

/// Pins the calling receive thread to `cores[k % len]` (no-op without cores); a failure is
/// logged (`pktwarp validate` checks the cores beforehand).
pub(crate) fn pin(cores: &[usize], k: usize, thread: &str) {
    if cores.is_empty() {
        return;
    }
    let cpu = cores[k % cores.len()];
    if let Err(e) = crate::affinity::pin_current_thread(cpu) {
        tracing::warn!(event = "pin_failed", thread, cpu, error = %e, "{thread}: cannot pin to CPU {cpu}: {e}");
    }
}

/// Starts the receive threads of every port in `feeds` (`rings` in the same order).
pub(super) fn spawn_ingest<'scope, 'env>(
    s: &'scope Scope<'scope, 'env>,
    sinks: &'env IngestSinks<'env>,
    feeds: Vec<Feed>,
    rings: Vec<PortRings>,
) {
    let mut k = 0usize;
    for (pi, (feed, (producers, frees, tx_frees))) in feeds.into_iter().zip(rings).enumerate() {
        match feed {
            Feed::Port(mut port) => {
                let done = &sinks.done[k];
                k += 1;
                spawn_named(s, format!("pw-in{pi}"), move || {
                    pin(&sinks.spec.rx_threads.cores, pi, "pw-in");
                    let shared: &CpuShared = sinks.shared;
                    let r = ingest(
                        sinks.spec,
                        shared,
                        pi as u16,
                        port.as_mut(),
                        producers,
                        frees,
                        tx_frees,
                    );
                    finish(sinks, port.as_ref(), r.err().map(|e| e.to_string()));
                    done.store(true, Ordering::Release);
                });
            }
            Feed::Queues(port, queues) => {
                let mut tx_frees = tx_frees.into_iter();
                let ends: Vec<&AtomicBool> = sinks.done[k..k + queues.len()].iter().collect();
                k += queues.len();
                // The last thread of the port to end reports the port's own counters.
                let left = Arc::new(std::sync::atomic::AtomicUsize::new(queues.len()));
                let port: Arc<Mutex<Box<dyn RxPort>>> = Arc::new(Mutex::new(port));
                for (((mut src, prod), free), done) in
                    queues.into_iter().zip(producers).zip(frees).zip(ends)
                {
                    let txf = tx_frees.next();
                    let (left, port) = (Arc::clone(&left), Arc::clone(&port));
                    let q = src.queue() as usize;
                    spawn_named(s, format!("pw-in{pi}q{q}"), move || {
                        pin(&sinks.spec.rx_threads.cores, q, "pw-in");
                        let r =
                            ingest_queue(sinks.spec, sinks.shared, src.as_mut(), prod, free, txf);
                        if let Err(e) = r {
                            if let Ok(mut v) = sinks.errors.lock() {
                                v.push(format!("{}: {e}", src.name()));
                            }
                        }
                        if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                            if let Ok(p) = port.lock() {
                                finish(sinks, p.as_ref(), None);
                            }
                        }
                        done.store(true, Ordering::Release);
                    });
                }
            }
        }
    }
}

/// A port's end: its error (if any) and its own counters into the run's outcome.
fn finish(sinks: &IngestSinks<'_>, port: &dyn RxPort, error: Option<String>) {
    if let Some(e) = error {
        if let Ok(mut v) = sinks.errors.lock() {
            v.push(format!("{}: {e}", port.name()));
        }
    }
    let pc = port.port_counters();
    if !pc.is_empty() {
        if let Ok(mut v) = sinks.port_counters.lock() {
            v.push((port.name().to_string(), pc));
        }
    }
}

/// One queue's receive thread: frames straight into the queue's burst, full bursts to its
/// worker, until the source ends (or `shared.stop`).
fn ingest_queue(
    spec: &CpuRunSpec,
    shared: &CpuShared,
    src: &mut dyn QueueRx,
    mut producer: Producer<Box<Slot>>,
    mut frees: Consumer<Box<Slot>>,
    mut tx_frees: Option<Consumer<Box<Slot>>>,
) -> Result<(), PortError> {
    let q = src.queue() as usize;
    let c = &shared.counters[q];
    let burst = spec.burst.max(1);
    let limit = spec.ring_slots.saturating_sub(1).max(1);
    let room = spec.pipeline.frame_room();
    let mut made = 0usize;
    let mut current: Option<Box<Slot>> = None;
    // Frames received while the ring was full under `on_full: drop` (counted, then dropped).
    let mut spill = Burst::default();
    let backoff = Backoff::new();
    let mut result = Ok(());
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        if current.is_none() {
            current = acquire(
                spec,
                q,
                &mut frees,
                tx_frees.as_mut(),
                &mut made,
                limit,
                burst,
            );
        }
        let mut tally = QueueTally::default();
        let (status, full) = match current.as_mut() {
            Some(slot) => {
                let want = burst.saturating_sub(slot.burst.len()).max(1);
                (src.rx_queue(&mut slot.burst, want, room, &mut tally), 0)
            }
            None => {
                spill.clear();
                let r = src.rx_queue(&mut spill, burst, room, &mut tally);
                (r, spill.len() as u64)
            }
        };
        shared
            .rx_total
            .fetch_add(tally.rx_frames, Ordering::Relaxed);
        if tally.rx_frames > 0 {
            c.rx_frames.add_shared(tally.rx_frames);
            c.rx_bytes.add_shared(tally.rx_bytes);
            c.drops[DropReason::SteeringDrop as usize].add_shared(tally.steering_drops);
            c.drops[DropReason::RingFull as usize].add_shared(full);
        }
        match status {
            Err(e) => {
                result = Err(e);
                break;
            }
            Ok(RxStatus::End) => break,
            Ok(RxStatus::Idle) => {
                // A partial burst leaves while the source is quiet (low latency when paced).
                flush_queue(spec, shared, q, &mut current, &mut producer, &backoff);
                wait_on(&backoff);
                continue;
            }
            Ok(RxStatus::Frames(_)) => backoff.reset(),
        }
        if current.as_ref().is_some_and(|s| s.burst.len() >= burst) {
            flush_queue(spec, shared, q, &mut current, &mut producer, &backoff);
        }
    }
    flush_queue(spec, shared, q, &mut current, &mut producer, &backoff);
    result
}
