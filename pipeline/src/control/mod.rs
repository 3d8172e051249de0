//! The control plane: the one CPU thread that never touches a packet. It serves Prometheus
//! metrics read from the data path's counters (`metrics`, `http`), reloads the ACL rule set
//! on SIGHUP or when the rule file changes (`reload`), stops intake and bounds the drain on
//! SIGTERM / SIGINT, and watches GPU kernel heartbeats (`watchdog`).
//!
//! Exit statuses it may force: 3 = the drain did not finish within `control.drain_timeout_ms`,
//! 4 = a stalled queue with `on_stall: exit` (or a restart that failed), 130 = a second
//! SIGTERM / SIGINT during the drain.

pub(crate) mod flow_export;
pub(crate) mod http;
pub(crate) mod logs;
pub(crate) mod metrics;
pub(crate) mod reload;
pub use crate::config::settings;
pub(crate) mod watchdog;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::executor::cpu::CpuShared;
use crate::prepare::Prepared;

use self::http::MetricsServer;
use self::metrics::{DaemonCollector, Exposition, StaticInfo};
use self::reload::Reloader;
use self::watchdog::{QueueProbe, Watchdog, WatchdogEvent};

/// Exit status when the drain outlives `control.drain_timeout_ms`.
pub const EXIT_DRAIN_TIMEOUT: i32 = 3;
/// Exit status when the watchdog gives up on a stalled queue.
pub const EXIT_STALL: i32 = 4;
/// Exit status on a second SIGTERM / SIGINT.
pub const EXIT_FORCED: i32 = 130;
/// How often the control thread re-reads the ports' own counters (DPDK ethdev stats and
/// xstats) for the metrics.
pub const PORT_COUNTERS_PERIOD: Duration = Duration::from_secs(1);

/// SIGHUP as seen before the control plane runs: `seen` is set by a SIGHUP that arrived early,
/// `default` makes one end the process as SIGHUP's default action would.
struct EarlyHup {
    seen: Arc<AtomicBool>,
    default: Arc<AtomicBool>,
}

static EARLY_HUP: std::sync::OnceLock<EarlyHup> = std::sync::OnceLock::new();

/// Takes SIGHUP over before anything else, so one that arrives while the daemon starts (loading
/// a large rule set takes seconds) does not kill it with SIGHUP's default action: it is noted,
/// and [`Control::start`] reloads once the control plane runs. Call it first thing in `main`;
/// a command that is not a daemon calls [`release_sighup`] once it knows.
pub fn hold_sighup() -> std::io::Result<()> {
    use signal_hook::consts::SIGHUP;
    let early = EarlyHup {
        seen: Arc::new(AtomicBool::new(false)),
        default: Arc::new(AtomicBool::new(false)),
    };
    // Registered in this order, the flag is set before the conditional default acts.
    signal_hook::flag::register(SIGHUP, Arc::clone(&early.seen))?;
    signal_hook::flag::register_conditional_default(SIGHUP, Arc::clone(&early.default))?;
    let _ = EARLY_HUP.set(early);
    Ok(())
}

/// Gives SIGHUP its default action back (it ends the process) after [`hold_sighup`]: for the
/// commands that are not the daemon.
pub fn release_sighup() {
    if let Some(e) = EARLY_HUP.get() {
        e.default.store(true, Ordering::Release);
    }
}

/// Whether a SIGHUP arrived since [`hold_sighup`] (and clears it).
fn early_sighup() -> bool {
    EARLY_HUP
        .get()
        .is_some_and(|e| e.seen.swap(false, Ordering::AcqRel))
}

/// Watchdog readings of one queue, for the metrics.
#[derive(Debug, Default)]
pub struct QueueHealth {
    pub heartbeat: AtomicU64,
    pub stalled: AtomicBool,
    pub stalls: AtomicU64,
    pub restarts: AtomicU64,
}

/// Control-plane counters (written by the control thread, read by the metrics endpoint).
#[derive(Debug)]
pub struct ControlState {
    pub start_unix_s: f64,
    pub reload_ok: AtomicU64,
    pub reload_failed: AtomicU64,
    pub last_reload_ok_unix_ms: AtomicU64,
    /// Set by the first SIGTERM / SIGINT (or [`Control::request_stop`]).
    pub shutting_down: AtomicBool,
    /// One entry per watched queue; `None` when no watchdog runs (CPU executor).
    pub watchdog: Option<Vec<QueueHealth>>,
}

impl ControlState {
    pub fn new(watched_queues: Option<usize>) -> Arc<Self> {
        Arc::new(ControlState {
            start_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            reload_ok: AtomicU64::new(0),
            reload_failed: AtomicU64::new(0),
            last_reload_ok_unix_ms: AtomicU64::new(0),
            shutting_down: AtomicBool::new(false),
            watchdog: watched_queues.map(|n| (0..n).map(|_| QueueHealth::default()).collect()),
        })
    }
}

enum Event {
    Reload(&'static str),
    Stop(&'static str),
    Finish,
}

/// How the control plane starts.
pub struct ControlSetup {
    /// Handle SIGHUP (reload) and SIGTERM / SIGINT (drain, then forced exit on a second one).
    /// Tests that run in-process leave this off.
    pub install_signals: bool,
    /// Queues to watch (GPU executor); `None` runs no watchdog.
    pub probe: Option<Box<dyn QueueProbe + Send>>,
    /// Called instead of `std::process::exit(code)` when the control plane must end the
    /// process (drain timeout, second signal, stalled queue); after it returns the control
    /// thread stops. `None`: exit the process. For tests.
    pub on_fatal: Option<FatalHook>,
}

/// See [`ControlSetup::on_fatal`].
pub type FatalHook = Arc<dyn Fn(i32) + Send + Sync>;

fn fatal(hook: &Option<FatalHook>, code: i32) {
    match hook {
        Some(h) => h(code),
        None => std::process::exit(code),
    }
}

impl ControlSetup {
    /// What `pktwarp run` uses: signals handled, no watchdog probe beyond the executor's own,
    /// fatal conditions exit the process.
    pub fn daemon() -> Self {
        ControlSetup {
            install_signals: true,
            probe: None,
            on_fatal: None,
        }
    }
}

/// The running control plane. [`Control::finish`] stops it (also on drop).
pub struct Control {
    state: Arc<ControlState>,
    events: mpsc::Sender<Event>,
    thread: Option<JoinHandle<()>>,
    metrics: Option<MetricsServer>,
    signals: Option<signal_hook::iterator::Handle>,
}

impl Control {
    /// Starts the metrics endpoint (unless `metrics.enabled` is false), the signal thread and the
    /// control loop for a prepared config whose CPU executor shares `shared`.
    pub fn start(
        p: &Prepared,
        shared: &Arc<CpuShared>,
        rx_names: &[String],
        setup: ControlSetup,
    ) -> anyhow::Result<Control> {
        let cfg = &p.cfg;
        let mut setup = setup;
        if setup.probe.is_none()
            && p.choice.name == "gpu"
            && cfg.executor.gpu.mode == crate::executor::gpu::Mode::Persistent
        {
            // The daemon's GPU host loop publishes each queue's heartbeat and work in flight.
            setup.probe = Some(Box::new(watchdog::CountersProbe {
                counters: shared.counters.clone(),
                restarts: Some(Arc::clone(&shared.restarts)),
            }));
        }
        let watched = setup.probe.as_ref().map(|pr| pr.queues());
        let state = ControlState::new(watched);
        let ipfix = cfg.ipfix.as_ref().map(|s| &s.value);
        let flow_export = flow_export::FlowExport::start(ipfix, &p.pipeline)?;
        let ipfix_counters = flow_export.as_ref().map(|f| f.counters());
        let metrics = if cfg.metrics.enabled {
            let addr = cfg
                .metrics
                .listen_addr()
                .map_err(|e| anyhow::anyhow!("metrics.listen: {e}"))?;
            let info = StaticInfo {
                executor: p.choice.name.to_string(),
                mode: match (p.choice.name, cfg.executor.gpu.mode) {
                    ("cpu", _) => "run_to_completion".to_string(),
                    (_, crate::executor::gpu::Mode::Persistent) => "persistent".to_string(),
                    (_, crate::executor::gpu::Mode::Launch) => "launch".to_string(),
                    (_, crate::executor::gpu::Mode::Graph) => "graph".to_string(),
                },
                reason: p.choice.reason.clone(),
                rx_port: if rx_names.is_empty() {
                    "none".into()
                } else {
                    rx_names.join("+")
                },
                tx_port: cfg
                    .output
                    .as_ref()
                    .map_or("none".to_string(), |o| o.port.value.clone()),
                stage_names: p.pipeline.stage_names(),
                rule_series_cap: cfg.metrics.rule_series_cap,
                queue_gpu: if p.choice.name == "gpu" {
                    crate::executor::gpu::multi::queue_gpu_labels(
                        &cfg.executor.gpu,
                        cfg.queues.count as usize,
                    )
                } else {
                    Vec::new()
                },
            };
            metrics::check_stage_families(&p.pipeline)?;
            let collector = DaemonCollector::new(
                shared.counters.clone(),
                Arc::clone(&p.pipeline),
                Arc::clone(&state),
                info,
            )
            .with_port_counters(Arc::clone(&shared.port_counters))
            .with_verify(Arc::clone(&shared.verify))
            .with_ipfix(ipfix_counters);
            let server = MetricsServer::start_with(
                addr,
                Exposition::new(collector)?,
                http::HttpLimits::of(&cfg.metrics),
            )?;
            tracing::info!(
                event = "metrics_listen",
                addr = %server.addr,
                "serving metrics on http://{}/metrics",
                server.addr
            );
            Some(server)
        } else {
            None
        };
        let (tx, rx) = mpsc::channel();
        let signals = if setup.install_signals {
            Some(spawn_signals(tx.clone(), setup.on_fatal.clone())?)
        } else {
            None
        };
        if setup.install_signals && early_sighup() {
            // The rules were read before that signal may have meant them to be: read again.
            tracing::info!(
                event = "signal",
                signal = "SIGHUP",
                "SIGHUP arrived during start-up: reloading now"
            );
            let _ = tx.send(Event::Reload("sighup_during_startup"));
        }
        // Both executors swap tables in place: the CPU workers load the published tables per
        // burst, and the daemon's GPU host loop (daemon::run_gpu) uploads each new generation
        // with GpuExecutor::publish_acl, which every later burst names in its slot header.
        let reloader = Reloader::new(&cfg.path, Arc::clone(&p.pipeline), Arc::clone(&state))
            .with_baseline(cfg);
        let lp = LoopParams {
            watch_rules: cfg.control.watch_rules,
            watch_interval: Duration::from_millis(cfg.control.watch_interval_ms),
            drain_timeout: Duration::from_millis(cfg.control.drain_timeout_ms),
            on_fatal: setup.on_fatal.clone(),
            flow_export,
            watchdog: setup.probe.map(|probe| {
                (
                    probe,
                    Watchdog::new(
                        watched.unwrap_or(0),
                        Duration::from_millis(cfg.control.stall_after_ms),
                        cfg.control.on_stall,
                    ),
                )
            }),
        };
        let st = Arc::clone(&state);
        let sh = Arc::clone(shared);
        let thread = std::thread::Builder::new()
            .name("pktwarp-control".into())
            .spawn(move || control_loop(rx, reloader, st, sh, lp))?;
        Ok(Control {
            state,
            events: tx,
            thread: Some(thread),
            metrics,
            signals,
        })
    }

    pub fn state(&self) -> &Arc<ControlState> {
        &self.state
    }

    /// Where `/metrics` is served (the bound address: useful with port 0).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(|m| m.addr)
    }

    /// Asks the control thread to reload, as SIGHUP does.
    pub fn request_reload(&self) {
        let _ = self.events.send(Event::Reload("request"));
    }

    /// Stops intake and starts the bounded drain, as SIGTERM does.
    pub fn request_stop(&self) {
        let _ = self.events.send(Event::Stop("request"));
    }

    /// Blocks until a stop was requested (SIGTERM / SIGINT / [`Control::request_stop`]): for
    /// `control.linger`, which keeps the daemon serving metrics after its input ended.
    pub fn wait_for_stop(&self) {
        while !self.state.shutting_down.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the control thread, the signal thread and the metrics endpoint.
    pub fn finish(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        // The endpoint first (its stop is bounded: every connection is dropped), then the
        // control thread; the signal thread last, so a second SIGTERM still forces exit 130
        // while anything here takes time.
        self.metrics.take();
        let _ = self.events.send(Event::Finish);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(h) = self.signals.take() {
            h.close();
        }
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn spawn_signals(
    tx: mpsc::Sender<Event>,
    on_fatal: Option<FatalHook>,
) -> anyhow::Result<signal_hook::iterator::Handle> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGHUP, SIGTERM, SIGINT])?;
    let handle = signals.handle();
    std::thread::Builder::new()
        .name("pktwarp-signals".into())
        .spawn(move || {
            let mut stops = 0;
            for sig in signals.forever() {
                let name = match sig {
                    SIGHUP => "SIGHUP",
                    SIGTERM => "SIGTERM",
                    _ => "SIGINT",
                };
                // Logging is guarded: however the log fails, this thread lives on and every
                // later signal still acts.
                if sig == SIGHUP {
                    logs::guarded(|| {
                        tracing::info!(event = "signal", signal = name, "reload requested")
                    });
                    let _ = tx.send(Event::Reload("sighup"));
                    continue;
                }
                stops += 1;
                if stops > 1 {
                    // Handled here, not by the control loop, so it works even while that loop
                    // is busy (compiling a large rule set, say).
                    logs::guarded(|| {
                        tracing::error!(
                            event = "shutdown",
                            signal = name,
                            exit_code = EXIT_FORCED,
                            "second stop signal: exiting without finishing the drain"
                        )
                    });
                    fatal(&on_fatal, EXIT_FORCED);
                    return;
                }
                let _ = tx.send(Event::Stop(name));
            }
        })?;
    Ok(handle)
}

struct LoopParams {
    watch_rules: bool,
    watch_interval: Duration,
    drain_timeout: Duration,
    on_fatal: Option<FatalHook>,
    /// IPFIX flow export (`ipfix:` with a `flow_stats` stage).
    flow_export: Option<flow_export::FlowExport>,
    watchdog: Option<(Box<dyn QueueProbe + Send>, Watchdog)>,
}

/// Modification times of the config and rule files (either changing triggers a reload).
fn stamps(
    reloader: &Reloader,
    rule_file: &Option<PathBuf>,
) -> (Option<SystemTime>, Option<SystemTime>) {
    let m = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    (m(reloader.config_path()), rule_file.as_deref().and_then(m))
}

fn control_loop(
    rx: mpsc::Receiver<Event>,
    reloader: Reloader,
    state: Arc<ControlState>,
    shared: Arc<CpuShared>,
    mut lp: LoopParams,
) {
    let tick = Duration::from_millis(50).min(lp.watch_interval);
    let mut deadline: Option<Instant> = None;
    let mut rule_file = reloader.rule_file();
    let mut seen = stamps(&reloader, &rule_file);
    // A change is acted on once the file has stood still for one interval (no half-written
    // rule file gets loaded because the editor was still saving).
    let mut pending_change: Option<(Option<SystemTime>, Option<SystemTime>)> = None;
    let mut next_watch = Instant::now() + lp.watch_interval;
    // Port counters: read now, then every PORT_COUNTERS_PERIOD (here, never on a data path).
    shared.port_counters.refresh();
    let mut next_port_counters = Instant::now() + PORT_COUNTERS_PERIOD;
    loop {
        match rx.recv_timeout(tick) {
            Ok(Event::Reload(trigger)) => {
                let _ = reloader.reload(trigger);
                rule_file = reloader.rule_file();
                seen = stamps(&reloader, &rule_file);
            }
            Ok(Event::Stop(signal)) => {
                if !state.shutting_down.swap(true, Ordering::AcqRel) {
                    shared.stop.store(true, Ordering::Release);
                    deadline = Some(Instant::now() + lp.drain_timeout);
                    tracing::info!(
                        event = "shutdown",
                        signal,
                        drain_timeout_ms = lp.drain_timeout.as_millis() as u64,
                        "stopping intake, draining in-flight bursts"
                    );
                }
            }
            Ok(Event::Finish) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                // The run is over: the flows still alive are exported (forced end).
                if let Some(f) = lp.flow_export.take() {
                    f.finish();
                }
                break;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now > d) {
            tracing::error!(
                event = "shutdown",
                exit_code = EXIT_DRAIN_TIMEOUT,
                drain_timeout_ms = lp.drain_timeout.as_millis() as u64,
                "drain did not finish in time: exiting"
            );
            fatal(&lp.on_fatal, EXIT_DRAIN_TIMEOUT);
            return;
        }
        if let Some(f) = lp.flow_export.as_mut() {
            f.tick(now);
        }
        if now >= next_port_counters {
            next_port_counters = now + PORT_COUNTERS_PERIOD;
            shared.port_counters.refresh();
        }
        if lp.watch_rules && now >= next_watch {
            next_watch = now + lp.watch_interval;
            let s = stamps(&reloader, &rule_file);
            if s != seen {
                if pending_change == Some(s) {
                    pending_change = None;
                    let _ = reloader.reload("rule_file_changed");
                    rule_file = reloader.rule_file();
                    seen = stamps(&reloader, &rule_file);
                } else {
                    pending_change = Some(s);
                }
            }
        }
        let mut stalled_exit = false;
        if let Some((probe, wd)) = lp.watchdog.as_mut() {
            let health = state.watchdog.as_deref().unwrap_or(&[]);
            for ev in wd.tick(now, probe.as_mut(), health) {
                if let WatchdogEvent::Exit { queue, reason } = ev {
                    tracing::error!(event = "stall", queue, exit_code = EXIT_STALL, %reason, "exiting for the supervisor");
                    stalled_exit = true;
                }
            }
        }
        if stalled_exit {
            fatal(&lp.on_fatal, EXIT_STALL);
            return;
        }
    }
}
