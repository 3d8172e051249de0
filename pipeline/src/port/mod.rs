//! Ports: sources and sinks of frames. Backends: `pcap` (file replay and record), `gen`
//! (built-in traffic generator), `tap` (a Linux TAP device: the slow path's way into the host's
//! stack); `dpdk` and `doca` arrive behind cargo features.

use std::sync::{Arc, Mutex};

use crate::burst::Burst;

#[cfg(feature = "dpdk")]
pub(crate) mod dpdk;
pub(crate) mod gen;
pub(crate) mod gpu_rx;
pub(crate) mod out;
pub(crate) mod pace;
pub(crate) mod pcap;
pub(crate) mod tap;

/// What an RX call produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxStatus {
    /// `n` frames were appended to the burst.
    Frames(usize),
    /// Nothing now (rate limit, live source); call again.
    Idle,
    /// The source is exhausted (end of file after the last loop, generator count reached).
    End,
}

/// Errors of a port: they name the file and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    // The I/O error is part of the message, not a `source()`: a chain printed with `{:#}`
    // would name it twice ("x.pcap: Is a directory: Is a directory").
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("{path}: {reason}")]
    Format { path: String, reason: String },
    #[error("{0}")]
    Config(String),
}

/// A receive side: appends up to `max` frames to `burst` (without clearing it).
pub trait RxPort: Send {
    fn rx_burst(&mut self, burst: &mut Burst, max: usize) -> Result<RxStatus, PortError>;
    /// Human-readable name for logs and the summary (e.g. `pcap:in.pcap`).
    fn name(&self) -> &str;
    /// Total frames this port will produce when known (for a progress bar).
    fn expected_frames(&self) -> Option<u64> {
        None
    }
    /// The backend's own counters as (name, value) pairs, for the summary and metrics (a DPDK
    /// port: ethdev stats, xstats and its drop counters); empty when it keeps none.
    fn port_counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// A reader of [`RxPort::port_counters`] the control thread can call while the executor
    /// owns the port (`None` when the backend keeps no counters of its own).
    fn counter_source(&self) -> Option<CounterSource> {
        None
    }
    /// The port's NIC steers the config's steering rules (all of them, installed by the
    /// daemon): each frame's `FrameDesc::queue` and `mark` are the NIC's and the ingest must
    /// not steer it again. False (software steering by the ingest) for every other port.
    fn steered_in_nic(&self) -> bool {
        false
    }
    /// The port's frames are in GPU memory and it can hand them over in place
    /// ([`gpu_rx::GpuRx`]): a GPUDirect DPDK port. `None` for every other port.
    fn gpu_rx(&mut self) -> Option<&mut dyn gpu_rx::GpuRx> {
        None
    }
    /// Splits the port's frames by queue under `steering` over `queues` queues, for one receive
    /// thread per queue (docs/ports.md): each [`QueueRx`] gives its queue's frames, in the
    /// order and with the queue, mark and drops the steering gives them. `Err(why)` when the
    /// port is received by one thread (the default).
    fn split_by_queue(
        &mut self,
        steering: &Arc<crate::steer::Steering>,
        queues: usize,
    ) -> Result<Vec<Box<dyn QueueRx>>, String> {
        let _ = (steering, queues);
        Err("the backend is received by one thread".into())
    }
}

/// What one queue's receive call took in: every frame the steering gave the queue, those it
/// dropped included (counted on the queue, as the one-thread ingest counts them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueTally {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub steering_drops: u64,
}

/// One queue's share of a port split by queue ([`RxPort::split_by_queue`]): its frames are
/// already steered (queue and mark set), so its thread hands them to the queue's worker as
/// they come.
pub trait QueueRx: Send {
    /// Appends up to `max` frames of the queue to `burst`, each followed by `room` spare
    /// bytes (see [`Burst::push_with_room`]), and counts what it took in into `tally`.
    /// `Frames(0)`: only steering drops this time.
    fn rx_queue(
        &mut self,
        burst: &mut Burst,
        max: usize,
        room: usize,
        tally: &mut QueueTally,
    ) -> Result<RxStatus, PortError>;
    fn name(&self) -> &str;
    /// The queue whose frames it gives.
    fn queue(&self) -> u16;
    /// The loaded frames the queue replays, shared by the queues of its port, when it can
    /// hand them over by reference ([`QueueRx::rx_refs`]): a receiver that copies them once
    /// into memory the GPU reads then takes descriptors only. `Err(why)` (the default: frames
    /// received per burst): its frames are copied.
    fn frame_store(&self) -> Result<Arc<Vec<u8>>, String> {
        Err("its frames are received burst by burst: nothing loaded to refer to".into())
    }
    /// What differs by reference from the frames copied, if anything (logged with the path).
    fn store_note(&self) -> Option<&'static str> {
        None
    }
    /// As [`QueueRx::rx_queue`], but appends each frame's descriptor with `offset` into
    /// [`QueueRx::frame_store`] instead of its bytes (the caller lays the frames out).
    fn rx_refs(
        &mut self,
        refs: &mut Vec<crate::burst::FrameDesc>,
        max: usize,
        tally: &mut QueueTally,
    ) -> Result<RxStatus, PortError> {
        let _ = (refs, max, tally);
        Err(PortError::Config(format!(
            "{}: frames are not handed over by reference",
            self.name()
        )))
    }
}

/// Reads a port's own counters from any thread; `None` once the port is closed.
pub type CounterSource = Arc<dyn Fn() -> Option<Vec<(String, u64)>> + Send + Sync>;

/// The receiving ports' own counters (a DPDK port: ethdev stats, xstats) as the metrics
/// endpoint shows them. The control thread refreshes them periodically ([`Self::refresh`]),
/// never the data path; the end of a run publishes the summary's final values
/// ([`Self::publish`]), so a lingering daemon serves exactly what its summary says.
#[derive(Default)]
pub struct PortCounterBoard {
    inner: Mutex<Board>,
}

#[derive(Default)]
struct Board {
    /// (config name, RxPort name, reader)
    sources: Vec<(String, String, CounterSource)>,
    /// (config name, counters), in config order.
    snapshot: Vec<(String, Vec<(String, u64)>)>,
}

impl PortCounterBoard {
    /// Registers the receiving ports that keep counters (`names`: their config names, in the
    /// same order as `ports`).
    pub fn watch(&self, ports: &[Box<dyn RxPort>], names: &[String]) {
        if let Ok(mut b) = self.inner.lock() {
            for (p, n) in ports.iter().zip(names) {
                if let Some(src) = p.counter_source() {
                    b.sources.push((n.clone(), p.name().to_string(), src));
                    b.snapshot.push((n.clone(), Vec::new()));
                }
            }
        }
    }

    /// Reads every registered port that is still open (control thread only: a DPDK port's
    /// stats call takes microseconds and must not run on a data-path thread).
    pub fn refresh(&self) {
        let sources: Vec<(String, CounterSource)> = match self.inner.lock() {
            Ok(b) => b
                .sources
                .iter()
                .map(|(n, _, s)| (n.clone(), Arc::clone(s)))
                .collect(),
            Err(_) => return,
        };
        // Read without holding the lock (a scrape must not wait on the device).
        let fresh: Vec<(String, Vec<(String, u64)>)> = sources
            .into_iter()
            .filter_map(|(n, s)| s().map(|c| (n, c)))
            .collect();
        self.store(fresh);
    }

    /// Stores final counters, as the run summary gives them (keyed by RxPort name).
    pub fn publish(&self, by_port: &[(String, Vec<(String, u64)>)]) {
        let named: Vec<(String, Vec<(String, u64)>)> = match self.inner.lock() {
            Ok(b) => by_port
                .iter()
                .filter_map(|(label, c)| {
                    let (n, _, _) = b.sources.iter().find(|(_, l, _)| l == label)?;
                    Some((n.clone(), c.clone()))
                })
                .collect(),
            Err(_) => return,
        };
        self.store(named);
    }

    fn store(&self, fresh: Vec<(String, Vec<(String, u64)>)>) {
        if let Ok(mut b) = self.inner.lock() {
            for (n, c) in fresh {
                if let Some(slot) = b.snapshot.iter_mut().find(|(m, _)| *m == n) {
                    slot.1 = c;
                }
            }
        }
    }

    /// The last values read: (config port name, counters).
    pub fn snapshot(&self) -> Vec<(String, Vec<(String, u64)>)> {
        self.inner
            .lock()
            .map(|b| b.snapshot.clone())
            .unwrap_or_default()
    }
}

/// What a port did with a burst of timed frames ([`TxPort::tx_burst_timed`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxSent {
    /// Frames sent or written now (the device or file took them).
    pub sent: usize,
    /// Frames taken to be sent at their time (software pacing): neither sent nor failed yet;
    /// what becomes of each is reported later by [`TxPort::take_settled`]. Never among `sent`.
    pub held: usize,
    /// Frames refused because their send time lies further ahead than the port holds frames
    /// (counted as `tx_horizon` drops); never among `sent`.
    pub too_far: usize,
    /// Bytes of the frames sent; `None`: the frames sent are the first `sent` ones offered
    /// (the caller sums them).
    pub bytes: Option<u64>,
}

/// What became of frames a port held for their send time ([`TxSent::held`]), for the queue
/// they were offered for ([`TxPort::tx_burst_queued`]): sent then (with their bytes), or not
/// (the device did not take them: `tx_full` on the port).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    pub queue: u16,
    pub sent: u64,
    pub bytes: u64,
    pub failed: u64,
}

/// A frame to transmit and when: (bytes, send time in ns of the receive timestamps' clock,
/// 0 = now; see `crate::verdict::Verdict::send_ns`).
pub type TimedFrame<'a> = (&'a [u8], u64);

/// A [`TimedFrame`] with its length on the wire (`crate::burst::FrameDesc::wire_len`): more
/// than its bytes when a capture's snap length cut the frame; below them (0): the bytes' length.
pub type WireFrame<'a> = (&'a [u8], u64, u32);

/// A transmit side: takes frames, returns how many it accepted.
pub trait TxPort: Send {
    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError>;
    /// Frames with their send times. A port that schedules (pcap: the record time; dpdk: Tx
    /// timestamp offload or software pacing) overrides it; the default sends every frame now,
    /// whatever its time (a callback, a port without a clock).
    fn tx_burst_timed(
        &mut self,
        frames: &mut dyn Iterator<Item = TimedFrame<'_>>,
    ) -> Result<TxSent, PortError> {
        let sent = self.tx_burst(&mut frames.map(|(f, _)| f))?;
        Ok(TxSent {
            sent,
            ..TxSent::default()
        })
    }
    /// As [`TxPort::tx_burst_timed`], for frames of queue `queue`: the frames it holds are
    /// reported with that queue by [`TxPort::take_settled`] once sent or given up.
    fn tx_burst_queued(
        &mut self,
        frames: &mut dyn Iterator<Item = TimedFrame<'_>>,
        queue: u16,
    ) -> Result<TxSent, PortError> {
        let _ = queue;
        self.tx_burst_timed(frames)
    }
    /// As [`TxPort::tx_burst_queued`], with each frame's wire length. A port that records it
    /// overrides this (pcap: a record's original length, so a cut frame stays marked cut); the
    /// default drops it, as a device sends the bytes it has.
    fn tx_burst_wire(
        &mut self,
        frames: &mut dyn Iterator<Item = WireFrame<'_>>,
        queue: u16,
    ) -> Result<TxSent, PortError> {
        self.tx_burst_queued(&mut frames.map(|(f, t, _)| (f, t)), queue)
    }
    /// Sends what the port held for later and is now due (software pacing); called by the TX
    /// thread between bursts, so it must not wait. Default: the port holds nothing.
    fn tx_poll(&mut self) -> Result<(), PortError> {
        Ok(())
    }
    /// Appends what became of the held frames settled since the last call (after `tx_poll`
    /// and `flush`), at most one entry per queue. Default: the port holds nothing.
    fn take_settled(&mut self, out: &mut Vec<Settled>) {
        let _ = out;
    }
    /// Flushes buffered output (pcap writer).
    fn flush(&mut self) -> Result<(), PortError>;
    fn name(&self) -> &str;
    /// Independent senders on TX queues `0..n` of the same port, one for each TX thread (one
    /// TX thread per worker queue sends on TX queue q): a backend whose queues take concurrent
    /// senders (DPDK) gives them; `Err` when it has fewer TX queues than `n`. `None` (the
    /// default: a pcap file writer, a TAP device, a callback): the TX threads share this one
    /// sender behind a lock ([`out::SharedTx`]), each queue's bursts still in its order.
    fn queue_senders(&self, n: usize) -> Option<Result<Vec<Box<dyn TxPort>>, PortError>> {
        let _ = n;
        None
    }
}
