//! `pktwarp run CONFIG`: the daemon. Runs the config's pipeline until its input ends (or
//! SIGINT/SIGTERM), then prints the summary.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use pipeline::daemon::CpuShared;
use pipeline::daemon::{self, Summary};

#[derive(clap::Args)]
pub struct Args {
    /// YAML config (see configs/ and README).
    pub config: PathBuf,
    #[command(flatten)]
    pub set: super::ConfigSet,
    /// Print the final summary as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// No progress bar even on a terminal.
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    run_with(args, &pipeline::stage::StageRegistry::default())
}

/// [`run`] with the `custom:` stages of `registry` usable in the config.
pub fn run_with(args: Args, registry: &pipeline::stage::StageRegistry) -> anyhow::Result<i32> {
    let cfg = args.set.load(&args.config)?;
    let prepared = daemon::prepare_with(cfg, registry)?;
    tracing::info!(
        executor = prepared.choice.name,
        reason = %prepared.choice.reason,
        queues = prepared.cfg.queues.count,
        stages = ?prepared.pipeline.stage_names(),
        "starting"
    );
    let ports = daemon::open_ports(&prepared.cfg)?;
    let steering = ports.steering.clone();
    let expected: Option<u64> = ports
        .rx
        .iter()
        .map(|p| p.expected_frames())
        .try_fold(0u64, |acc, e| e.map(|e| acc + e));
    let shared = CpuShared::new(&prepared.cpu_spec());
    // The ports' own counters (DPDK ethdev stats, xstats) for /metrics, read by the control
    // thread.
    shared.port_counters.watch(&ports.rx, &ports.rx_names);
    // The control plane: /metrics, SIGHUP reload, SIGTERM/SIGINT stop intake with a bounded
    // drain (a second signal forces exit), rule-file watching (pipeline::control).
    let control = pipeline::control::Control::start(
        &prepared,
        &shared,
        &ports.rx_names,
        pipeline::control::ControlSetup::daemon(),
    )?;
    let progress = (!args.quiet && std::io::stdout().is_terminal())
        .then(|| super::progress::spawn(Arc::clone(&shared), expected));
    let summary = if prepared.choice.name == "gpu" {
        // The pipeline's kernel: the built-in image, or its generated module (NVRTC, cached).
        let image = pipeline::daemon::image_for_pipeline(&prepared.pipeline)?;
        tracing::info!(
            "GPU pipeline {} ({:?} template)",
            image.pipeline,
            image.template
        );
        daemon::run_gpu(&prepared, &shared, ports, &image)
    } else {
        Ok(daemon::run_cpu(&prepared, &shared, ports))
    };
    shared.stop.store(true, Ordering::Relaxed);
    let mut summary = match summary {
        Ok(s) => s,
        Err(e) => return drain_failure(e),
    };
    summary.steering = steering;
    // Final values, so /metrics (while lingering) says what the summary says.
    shared.port_counters.publish(&summary.port_counters);
    if prepared.cfg.control.linger && !control.state().shutting_down.load(Ordering::Acquire) {
        tracing::info!(
            event = "linger",
            rx_frames = summary.rx_frames,
            "input ended; serving metrics until SIGTERM/SIGINT"
        );
        control.wait_for_stop();
    }
    tracing::info!(
        event = "shutdown",
        rx_frames = summary.rx_frames,
        tx_frames = summary.tx_frames,
        elapsed_s = summary.elapsed_s,
        "drained; final summary follows"
    );
    control.finish();
    shared.stop.store(true, Ordering::Relaxed);
    if let Some(p) = progress {
        p.finish();
    }
    summary.log_write_errors = pipeline::internal::control::logs::write_errors();
    let json = if args.json {
        Some(serde_json::to_string(&summary)?)
    } else {
        None
    };
    let printed = super::to_stdout("the summary", |w| match &json {
        Some(j) => writeln!(w, "{j}"),
        None => write_summary(w, &summary),
    });
    for e in &summary.errors {
        tracing::error!("{e}");
    }
    // The run itself is over either way: a stdout that failed is said (exit 1), not a panic.
    printed?;
    Ok(if summary.errors.is_empty() { 0 } else { 1 })
}

/// The exit status of a run that failed: 3 (`control.drain_timeout_ms`, as a SIGTERM whose
/// drain outlives it) when the GPU kernels did not return in time, else the error itself (2).
fn drain_failure(e: anyhow::Error) -> anyhow::Result<i32> {
    match e.downcast_ref::<pipeline::daemon::KernelStillRunning>() {
        Some(_) => {
            tracing::error!(
                event = "shutdown",
                exit_code = pipeline::control::EXIT_DRAIN_TIMEOUT,
                abandoned_executors = pipeline::daemon::abandoned_executors(),
                "{e:#}"
            );
            Ok(pipeline::control::EXIT_DRAIN_TIMEOUT)
        }
        None => Err(e),
    }
}

fn write_summary(w: &mut dyn Write, s: &Summary) -> std::io::Result<()> {
    writeln!(w, "executor   {} ({})", s.executor, s.executor_reason)?;
    for (port, counters) in &s.port_counters {
        // Non-zero counters only: a NIC's xstats run to hundreds of names.
        let nz: Vec<String> = counters
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        writeln!(
            w,
            "port       {port}: {}",
            if nz.is_empty() {
                "-".into()
            } else {
                nz.join(" ")
            }
        )?;
    }
    for st in &s.steering {
        writeln!(w, "steering   {}: by {} ({})", st.port, st.by, st.reason)?;
    }
    for g in &s.gpu_ingest {
        writeln!(w, "gpu ingest {}: {} ({})", g.port, g.path, g.reason)?;
    }
    if let Some(t) = &s.gpu_tx {
        writeln!(w, "gpu tx     {} ({})", t.path, t.reason)?;
    }
    writeln!(
        w,
        "received   {} frames, {} bytes in {:.3} s: {:.3} Mpps, {:.3} Gbit/s",
        s.rx_frames, s.rx_bytes, s.elapsed_s, s.mpps, s.gbps
    )?;
    writeln!(w, "sent       {} frames, {} bytes", s.tx_frames, s.tx_bytes)?;
    let drops: Vec<String> = s.drops.iter().map(|(r, n)| format!("{r}={n}")).collect();
    writeln!(w, "drops      {}", drops.join(" "))?;
    if !s.parse_errors.is_empty() {
        let p: Vec<String> = s
            .parse_errors
            .iter()
            .map(|(r, n)| format!("{r}={n}"))
            .collect();
        writeln!(w, "parse      {}", p.join(" "))?;
    }
    for (i, f, b) in &s.counted {
        writeln!(w, "count      stage {i}: {f} frames, {b} bytes")?;
    }
    for cs in &s.custom_stages {
        let c: Vec<String> = cs
            .counters
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let c = if c.is_empty() {
            "-".into()
        } else {
            c.join(" ")
        };
        writeln!(w, "{:<10} stage {}: {c}", cs.name, cs.position)?;
        if let Some(section) = &cs.section {
            writeln!(w, "{:<10} stage {}: {section}", cs.name, cs.position)?;
        }
    }
    for (key, line) in &s.stage_lines {
        writeln!(w, "{key:<10} {line}")?;
    }
    if !s.top_rules.is_empty() || s.acl_default > 0 {
        let r: Vec<String> = s
            .top_rules
            .iter()
            .map(|(r, n)| format!("#{r}={n}"))
            .collect();
        writeln!(w, "acl        default={} {}", s.acl_default, r.join(" "))?;
    }
    if let Some(v) = &s.verify {
        writeln!(
            w,
            "verify     1 burst in {}: {} frames in {} bursts checked, {} mismatched, \
             {} bursts with differing counters, {} samples skipped (busy), \
             {} frames captured, {} not",
            v.sample,
            v.sampled_frames,
            v.sampled_bursts,
            v.mismatch_frames,
            v.counter_mismatches,
            v.skipped_busy,
            v.captured_frames,
            v.capture_dropped
        )?;
    }
    writeln!(
        w,
        "queue   rx_frames    passed  mirrored   to_host tx_frames  drops"
    )?;
    for q in &s.queues {
        let d: Vec<String> = q.drops.iter().map(|(r, n)| format!("{r}={n}")).collect();
        writeln!(
            w,
            "{:>5} {:>11} {:>9} {:>9} {:>9} {:>9}  {}",
            q.queue,
            q.rx_frames,
            q.passed,
            q.mirrored,
            q.to_host,
            q.tx_frames,
            if d.is_empty() {
                "-".to_string()
            } else {
                d.join(" ")
            }
        )?;
    }
    if s.log_write_errors > 0 {
        writeln!(
            w,
            "log        {} lines dropped: writing them to stderr failed",
            s.log_write_errors
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_still_running_exit_3_other_errors_stay_errors() {
        // As MultiGpu::shutdown reports it: the GPU named in a context around the typed error.
        let e = anyhow::Error::new(pipeline::daemon::KernelStillRunning { waited_ms: 150 })
            .context("GPU 0");
        assert_eq!(
            drain_failure(e).unwrap(),
            pipeline::control::EXIT_DRAIN_TIMEOUT
        );
        let e = drain_failure(anyhow::anyhow!("ring setup failed")).unwrap_err();
        assert_eq!(e.to_string(), "ring setup failed");
    }
}
