//! The exporting process: a bounded queue the data path pushes finished flows into without
//! blocking, and the control-thread side that encodes and sends them.

use super::config::{IpfixConfig, IpfixError};
use super::encode::Encoder;
use super::FlowRecord;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The exporter's counters, shared by the queue's producers, the exporter and the metrics
/// reader (docs/ipfix.md names their `pktwarp_ipfix_*` metric families).
#[derive(Debug, Default)]
pub struct IpfixCounters {
    records_exported: AtomicU64,
    messages_sent: AtomicU64,
    templates_sent: AtomicU64,
    send_errors: AtomicU64,
    records_dropped: AtomicU64,
}

/// A snapshot of [`IpfixCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpfixStats {
    /// Data records in messages the socket accepted.
    pub records_exported: u64,
    /// Messages the socket accepted.
    pub messages_sent: u64,
    /// Template Sets in messages the socket accepted.
    pub templates_sent: u64,
    /// Messages the socket refused (collector unreachable, buffer full, ...): their records are
    /// lost.
    pub send_errors: u64,
    /// Records not queued: the queue was full, or the record's addresses differ in IP version.
    pub records_dropped: u64,
}

impl IpfixCounters {
    /// The counters now.
    pub fn snapshot(&self) -> IpfixStats {
        IpfixStats {
            records_exported: self.records_exported.load(Relaxed),
            messages_sent: self.messages_sent.load(Relaxed),
            templates_sent: self.templates_sent.load(Relaxed),
            send_errors: self.send_errors.load(Relaxed),
            records_dropped: self.records_dropped.load(Relaxed),
        }
    }
}

/// Why [`FlowQueue::try_push`] did not queue a record (it is counted in `records_dropped`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushError {
    /// The queue holds `queue` records already.
    Full,
    /// Source and destination are of different IP versions.
    MixedIpVersions,
    /// The exporter is gone.
    Closed,
}

/// The producer side of the exporter's queue: cheap to clone, one per data-path thread.
#[derive(Clone, Debug)]
pub struct FlowQueue {
    tx: SyncSender<FlowRecord>,
    counters: Arc<IpfixCounters>,
}

impl FlowQueue {
    /// A queue of `cap` records whose other end is `rx` instead of an exporter (an in-process
    /// consumer: tests comparing two executors' records).
    pub fn channel(cap: usize) -> (FlowQueue, Receiver<FlowRecord>) {
        let (tx, rx) = sync_channel(cap);
        let q = FlowQueue {
            tx,
            counters: Arc::new(IpfixCounters::default()),
        };
        (q, rx)
    }

    /// Queues a record for export without blocking; a record that cannot be queued is dropped
    /// and counted.
    pub fn try_push(&self, r: FlowRecord) -> Result<(), PushError> {
        let e = if r.ip_version().is_none() {
            PushError::MixedIpVersions
        } else {
            match self.tx.try_send(r) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(_)) => PushError::Full,
                Err(TrySendError::Disconnected(_)) => PushError::Closed,
            }
        };
        self.counters.records_dropped.fetch_add(1, Relaxed);
        Err(e)
    }
}

/// The exporting process, run by the control thread: [`Exporter::poll`] sends what is queued.
#[derive(Debug)]
pub struct Exporter {
    socket: UdpSocket,
    collector: SocketAddr,
    rx: Receiver<FlowRecord>,
    encoder: Encoder,
    counters: Arc<IpfixCounters>,
    refresh_ms: u64,
    refresh_messages: u32,
    queue: usize,
    /// When the templates were last sent (ms since the epoch); None: they are due.
    last_templates_ms: Option<u64>,
    messages_since_templates: u32,
    batch: Vec<FlowRecord>,
}

impl Exporter {
    /// Checks the configuration, resolves the collector and opens the socket (connected, so an
    /// ICMP port unreachable from a collector that is down comes back as a send error).
    pub fn new(cfg: &IpfixConfig) -> Result<(Exporter, FlowQueue), IpfixError> {
        let (collector, max_len) = cfg.resolve()?;
        let socket_err = |source| IpfixError::Socket {
            addr: collector,
            source,
        };
        let local: SocketAddr = if collector.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = UdpSocket::bind(local).map_err(socket_err)?;
        socket.connect(collector).map_err(socket_err)?;
        // A full socket buffer is a send error, never a stall of the control thread.
        socket.set_nonblocking(true).map_err(socket_err)?;
        let (tx, rx) = sync_channel(cfg.queue);
        let counters = Arc::new(IpfixCounters::default());
        let queue = FlowQueue {
            tx,
            counters: counters.clone(),
        };
        let exporter = Exporter {
            socket,
            collector,
            rx,
            encoder: Encoder::new(cfg.observation_domain, max_len),
            counters,
            refresh_ms: cfg.template_refresh_s.saturating_mul(1000),
            refresh_messages: cfg.template_refresh_messages,
            queue: cfg.queue,
            last_templates_ms: None,
            messages_since_templates: 0,
            batch: Vec::new(),
        };
        Ok((exporter, queue))
    }

    /// The collector's resolved address.
    pub fn collector(&self) -> SocketAddr {
        self.collector
    }

    /// The counters, for the metrics reader.
    pub fn counters(&self) -> Arc<IpfixCounters> {
        self.counters.clone()
    }

    /// Sends what is queued, and the templates when due; never blocks. Returns the messages
    /// it tried to send.
    pub fn poll(&mut self) -> usize {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.poll_at(now_ms)
    }

    /// [`Exporter::poll`] at a given time (ms since the UNIX epoch).
    pub fn poll_at(&mut self, now_ms: u64) -> usize {
        // At most one queue's worth per call, so producers that keep pushing cannot hold the
        // control thread here.
        self.batch.clear();
        self.batch.extend(self.rx.try_iter().take(self.queue));
        let export_time = u32::try_from(now_ms / 1000).unwrap_or(u32::MAX);
        let batch = std::mem::take(&mut self.batch);
        let mut rest = &batch[..];
        let mut tried = 0;
        loop {
            let templates = self.templates_due(now_ms);
            if rest.is_empty() && !templates {
                break;
            }
            let (msg, used) = self.encoder.message(rest, export_time, templates);
            rest = &rest[used..];
            tried += 1;
            let sent = self
                .socket
                .send(&msg.bytes)
                .is_ok_and(|n| n == msg.bytes.len());
            if sent {
                self.counters.messages_sent.fetch_add(1, Relaxed);
                self.counters
                    .records_exported
                    .fetch_add(msg.records as u64, Relaxed);
            } else {
                self.counters.send_errors.fetch_add(1, Relaxed);
            }
            if msg.templates && sent {
                self.counters.templates_sent.fetch_add(1, Relaxed);
                self.last_templates_ms = Some(now_ms);
                self.messages_since_templates = 0;
            } else if sent {
                self.messages_since_templates = self.messages_since_templates.saturating_add(1);
            } else {
                // The collector may have lost its templates (restarted): send them again.
                self.last_templates_ms = None;
            }
            if rest.is_empty() {
                break;
            }
        }
        self.batch = batch;
        tried
    }

    fn templates_due(&self, now_ms: u64) -> bool {
        match self.last_templates_ms {
            None => true,
            Some(t) => {
                now_ms.saturating_sub(t) >= self.refresh_ms
                    || self.messages_since_templates >= self.refresh_messages
            }
        }
    }

    /// Runs the exporter on a thread of its own, polling every `period`, until
    /// [`ExporterThread::stop`] (which sends what is still queued).
    pub fn spawn(mut self, period: Duration) -> std::io::Result<ExporterThread> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("pktwarp-ipfix".into())
            .spawn(move || {
                while !flag.load(Relaxed) {
                    self.poll();
                    std::thread::park_timeout(period);
                }
                self.poll();
                self
            })?;
        Ok(ExporterThread { stop, handle })
    }
}

/// An exporter running on its own thread ([`Exporter::spawn`]).
#[derive(Debug)]
pub struct ExporterThread {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Exporter>,
}

impl ExporterThread {
    /// Stops the thread after a last poll and gives the exporter back (None if its thread
    /// panicked).
    pub fn stop(self) -> Option<Exporter> {
        self.stop.store(true, Relaxed);
        self.handle.thread().unpark();
        self.handle.join().ok()
    }
}

#[cfg(test)]
#[path = "exporter_tests.rs"]
mod tests;
