//! The stages' host sides on the GPU executor ([`crate::stage::gpu_host::GpuHostSide`]): a
//! thread beside the host side polls each when it is due; at the end of the run (drained,
//! before shutdown) each finishes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::executor::gpu::multi::MultiGpu;
use crate::stage::gpu_host::{GpuHostSide, HandedLog};
use crate::stage::Pipeline;

/// Shortest time between two polls of one host side.
const MIN_POLL: Duration = Duration::from_micros(1);

/// Runs `host` (the host side, on `gpu`) with the stages' host sides polled beside it; returns
/// what `host` returned and the host sides, for [`finish`]. An error of a poll (a failed read of
/// GPU memory) ends the polling and is returned once `host` is done.
pub(crate) fn with_stage_hosts<R>(
    p: &Pipeline,
    gpu: &mut MultiGpu,
    host: impl FnOnce(&MultiGpu) -> R,
) -> anyhow::Result<(R, Vec<Box<dyn GpuHostSide>>)> {
    let handed = Arc::new(HandedLog::default());
    let mut sides = p.gpu_host_sides(&handed)?;
    if sides.is_empty() {
        return Ok((host(gpu), sides));
    }
    gpu.set_handed_log(handed);
    let gpu = &*gpu;
    let stop = AtomicBool::new(false);
    let (r, polled) = std::thread::scope(|s| {
        let poller = crate::threads::spawn_named(
            s,
            "pw-stage-poll".into(),
            || -> anyhow::Result<Vec<Box<dyn GpuHostSide>>> {
                let mut due = vec![Instant::now(); sides.len()];
                while !stop.load(Ordering::Acquire) {
                    let now = Instant::now();
                    for (side, at) in sides.iter_mut().zip(due.iter_mut()) {
                        if now >= *at {
                            side.poll(p, gpu)?;
                            *at = now + side.poll_interval().max(MIN_POLL);
                        }
                    }
                    let next = due.iter().min().copied().unwrap_or(now);
                    std::thread::sleep(
                        next.saturating_duration_since(Instant::now()).max(MIN_POLL),
                    );
                }
                Ok(sides)
            },
        );
        let r = host(gpu);
        stop.store(true, Ordering::Release);
        (r, poller.join())
    });
    let sides =
        polled.map_err(|_| anyhow::anyhow!("the stages' host-side poll thread panicked"))??;
    Ok((r, sides))
}

/// Each host side's end of the run, in pipeline order (the GPU drained, before shutdown).
pub(crate) fn finish(
    p: &Pipeline,
    gpu: &MultiGpu,
    sides: Vec<Box<dyn GpuHostSide>>,
) -> anyhow::Result<()> {
    for side in sides {
        let name = side.name().to_string();
        side.finish(p, gpu)
            .map_err(|e| e.context(format!("stage `{name}`: the end of its GPU host side")))?;
    }
    Ok(())
}
