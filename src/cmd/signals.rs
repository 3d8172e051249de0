//! SIGINT / SIGTERM stop intake; the executor drains what is in flight and the summary follows.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use pipeline::executor::cpu::CpuShared;

pub fn stop_on_signal(shared: Arc<CpuShared>) -> anyhow::Result<()> {
    let mut signals =
        signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])?;
    std::thread::Builder::new()
        .name("pktwarp-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                tracing::info!(signal = sig, "stopping intake, draining in-flight bursts");
                shared.stop.store(true, Ordering::Relaxed);
            }
        })?;
    Ok(())
}
