//! The alert log: a thread of its own that encodes and writes EVE lines, fed through a bounded
//! queue the data path never waits on (a full queue drops the alert and counts it). Write
//! failures are counted and the lines lost with them, never an error to the data path.

use super::config::{EveConfig, EveConfigError};
use super::{eve, Alert, RuleCatalog};
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest a written line waits in the writer's buffer when alerts keep coming.
const FLUSH_INTERVAL: Duration = Duration::from_millis(200);
/// Buffered bytes that force a write.
const FLUSH_BYTES: usize = 64 * 1024;
/// Alerts taken from the queue before a write, so a busy log writes in batches.
const BATCH: usize = 256;
/// Least time between attempts to open a log that failed to open.
const REOPEN_RETRY: Duration = Duration::from_secs(1);

/// An alert in the queue, with the catalog its rule index is in (None: the log's own).
type Queued = (Alert, Option<Arc<RuleCatalog>>);

/// The log's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AlertLogCounters {
    /// Lines written to the file.
    pub written: u64,
    /// Alerts not queued: the queue was full (or the writer gone).
    pub dropped: u64,
    /// Failed opens and writes.
    pub write_errors: u64,
    /// Lines lost to failed opens and writes.
    pub lost: u64,
    /// Reopens done.
    pub reopens: u64,
}

#[derive(Debug, Default)]
struct Shared {
    written: AtomicU64,
    dropped: AtomicU64,
    write_errors: AtomicU64,
    lost: AtomicU64,
    reopens: AtomicU64,
    reopen: AtomicBool,
    stop: AtomicBool,
}

/// The data path's handle: [`AlertSender::send`] never blocks.
#[derive(Debug, Clone)]
pub struct AlertSender {
    tx: SyncSender<Queued>,
    shared: Arc<Shared>,
    payload_max: Option<usize>,
}

impl AlertSender {
    /// Queues `a` for the log; false (and counted as dropped) when the queue is full. Its
    /// payload is cut to `eve.payload_max`, or removed when `eve.payload` is off.
    pub fn send(&self, a: Alert) -> bool {
        self.queue(a, None)
    }

    /// [`AlertSender::send`] for an alert whose rule index is in `rules` rather than the
    /// catalog the log started with (a rule set published by a reload since).
    pub fn send_for(&self, a: Alert, rules: &Arc<RuleCatalog>) -> bool {
        self.queue(a, Some(Arc::clone(rules)))
    }

    fn queue(&self, mut a: Alert, rules: Option<Arc<RuleCatalog>>) -> bool {
        match self.payload_max {
            None => a.payload = None,
            Some(max) => {
                if let Some(p) = &mut a.payload {
                    p.truncate(max);
                }
            }
        }
        match self.tx.try_send((a, rules)) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Whether alerts should carry payload bytes (so the data path copies them only then).
    pub fn wants_payload(&self) -> Option<usize> {
        self.payload_max
    }
}

/// Reopen requests and counters of a running log, from any thread.
#[derive(Debug, Clone)]
pub struct AlertLogHandle(Arc<Shared>);

impl AlertLogHandle {
    /// See [`AlertLog::reopen`].
    pub fn reopen(&self) {
        self.0.reopen.store(true, Ordering::SeqCst);
    }

    pub fn counters(&self) -> AlertLogCounters {
        let s = &self.0;
        AlertLogCounters {
            written: s.written.load(Ordering::Relaxed),
            dropped: s.dropped.load(Ordering::Relaxed),
            write_errors: s.write_errors.load(Ordering::Relaxed),
            lost: s.lost.load(Ordering::Relaxed),
            reopens: s.reopens.load(Ordering::Relaxed),
        }
    }
}

/// The running alert log.
#[derive(Debug)]
pub struct AlertLog {
    sender: AlertSender,
    thread: Option<JoinHandle<()>>,
}

impl AlertLog {
    /// Checks `cfg` and starts the writer thread; the file is opened by that thread (a FIFO
    /// or a slow mount never holds up the caller).
    pub fn start(cfg: &EveConfig, rules: Arc<RuleCatalog>) -> Result<AlertLog, EveConfigError> {
        cfg.check()?;
        let (tx, rx) = sync_channel(cfg.queue);
        let shared = Arc::new(Shared::default());
        let mut w = Writer {
            path: cfg.path.clone(),
            payload: cfg.payload,
            rules,
            rx,
            queue: cfg.queue,
            shared: shared.clone(),
            file: None,
            last_open: None,
            buf: Vec::with_capacity(FLUSH_BYTES * 2),
            pending: 0,
            torn: false,
        };
        let thread = std::thread::Builder::new()
            .name("pw-eve-log".into())
            .spawn(move || w.run())
            .map_err(|e| EveConfigError {
                key: "path",
                msg: format!("cannot start the writer thread: {e}"),
            })?;
        Ok(AlertLog {
            sender: AlertSender {
                tx,
                shared,
                payload_max: cfg.payload.then_some(cfg.payload_max),
            },
            thread: Some(thread),
        })
    }

    /// A handle for a data-path thread.
    pub fn sender(&self) -> AlertSender {
        self.sender.clone()
    }

    /// A handle for the threads that ask for reopens (a signal handler) or read counters
    /// (metrics).
    pub fn handle(&self) -> AlertLogHandle {
        AlertLogHandle(self.sender.shared.clone())
    }

    /// Asks the writer to close and reopen the file (after log rotation renamed it; what
    /// SIGHUP asks for). Alerts queued after this call go to the new file.
    pub fn reopen(&self) {
        self.handle().reopen();
    }

    pub fn counters(&self) -> AlertLogCounters {
        self.handle().counters()
    }

    /// Writes what is queued, closes the file and ends the thread; the final counters. Waits
    /// for the writer, so for a file whose open or write blocks (a FIFO nobody reads) it
    /// returns once that call does.
    pub fn shutdown(mut self) -> AlertLogCounters {
        self.sender.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            // A panic in the writer only loses the log; the counters still answer.
            let _ = t.join();
        }
        self.counters()
    }
}

impl Drop for AlertLog {
    /// Stops the writer without waiting for it (it writes what is queued, then exits).
    fn drop(&mut self) {
        self.sender.shared.stop.store(true, Ordering::SeqCst);
    }
}

struct Writer {
    path: PathBuf,
    payload: bool,
    rules: Arc<RuleCatalog>,
    rx: Receiver<Queued>,
    queue: usize,
    shared: Arc<Shared>,
    file: Option<File>,
    last_open: Option<Instant>,
    buf: Vec<u8>,
    /// Lines in `buf`.
    pending: u64,
    /// The last write stopped inside a line: the next write starts a new one.
    torn: bool,
}

impl Writer {
    fn run(&mut self) {
        self.open();
        let mut last_flush = Instant::now();
        loop {
            match self.rx.recv_timeout(FLUSH_INTERVAL) {
                Ok(a) => {
                    self.take(a);
                    for _ in 1..BATCH {
                        match self.rx.try_recv() {
                            Ok(a) => self.take(a),
                            Err(_) => break,
                        }
                        if self.buf.len() >= FLUSH_BYTES {
                            self.flush();
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if self.shared.reopen.swap(false, Ordering::SeqCst) {
                self.flush();
                self.reopen();
            }
            // Write when the queue is momentarily empty (each line out at once when alerts
            // are rare) or at least every FLUSH_INTERVAL under load.
            if self.pending > 0 {
                self.flush();
                last_flush = Instant::now();
            } else if last_flush.elapsed() >= FLUSH_INTERVAL {
                last_flush = Instant::now();
                if self.file.is_none() && self.open_due() {
                    self.open();
                }
            }
            if self.shared.stop.load(Ordering::SeqCst) {
                // What was queued when stop was asked, not what senders keep adding after.
                for _ in 0..self.queue {
                    let Ok(a) = self.rx.try_recv() else { break };
                    self.take(a);
                    if self.buf.len() >= FLUSH_BYTES {
                        self.flush();
                    }
                }
                self.flush();
                break;
            }
        }
        self.flush();
    }

    /// Encodes one alert into the buffer; a reopen asked for before it was queued comes first.
    fn take(&mut self, (a, rules): Queued) {
        if self.shared.reopen.swap(false, Ordering::SeqCst) {
            self.flush();
            self.reopen();
        }
        let rules = rules.unwrap_or_else(|| Arc::clone(&self.rules));
        let Some(rule) = rules.get(a.rule) else {
            // An index the catalog does not know: a caller's bug; the line is lost, counted.
            self.shared.lost.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if eve::encode(&a, rule, self.payload, &mut self.buf) {
            self.pending += 1;
        } else {
            self.shared.lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn open_due(&self) -> bool {
        self.last_open.is_none_or(|t| t.elapsed() >= REOPEN_RETRY)
    }

    fn open(&mut self) {
        self.last_open = Some(Instant::now());
        match OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o640)
            .open(&self.path)
        {
            Ok(f) => {
                self.file = Some(f);
                self.torn = false;
            }
            Err(_) => {
                self.file = None;
                self.shared.write_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn reopen(&mut self) {
        self.file = None;
        self.open();
        self.shared.reopens.fetch_add(1, Ordering::Relaxed);
    }

    /// Writes the buffer; on failure its lines are lost and counted.
    fn flush(&mut self) {
        if self.pending == 0 {
            return;
        }
        if self.file.is_none() && self.open_due() {
            self.open();
        }
        let lines = std::mem::take(&mut self.pending);
        let ok = match &mut self.file {
            Some(f) => {
                if self.torn {
                    self.buf.insert(0, b'\n');
                }
                let (ok, partial) = write_all(f, &self.buf);
                self.torn = partial;
                ok
            }
            None => false,
        };
        self.buf.clear();
        if ok {
            self.shared.written.fetch_add(lines, Ordering::Relaxed);
        } else {
            if self.file.is_some() {
                self.shared.write_errors.fetch_add(1, Ordering::Relaxed);
            }
            self.shared.lost.fetch_add(lines, Ordering::Relaxed);
        }
    }
}

/// Writes all of `buf`: (done, stopped after writing part of it).
fn write_all(f: &mut File, buf: &[u8]) -> (bool, bool) {
    let mut done = 0;
    while done < buf.len() {
        match f.write(&buf[done..]) {
            Ok(0) => return (false, done > 0),
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return (false, done > 0),
        }
    }
    (true, false)
}
