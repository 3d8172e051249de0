//! The fronthaul stages' slot completion on the GPU executor: a thread beside the host side
//! that looks at each stage's slot states on every GPU every [`POLL`] and hands the slots that
//! closed to the stage's sink (see [`crate::fronthaul::live`]); what is still open at the end
//! closes in `fronthaul::gpu::absorb_from_gpu`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::executor::gpu::multi::MultiGpu;
use crate::fronthaul::live::LiveStages;
use crate::stage::Pipeline;

/// Time between two looks at the slot states: a slot is 0.5 ms at 30 kHz and a ring entry is
/// reused `2 x max_open_slots` slots later, so a slot closes within a poll or two of its last
/// PRB, long before its entry is taken again. A poll itself takes tens of microseconds (its
/// reads of GPU memory), which a sleep of 100 us doubled: slot completion latency p50 was
/// ~250 us at radio speed on the H200 (docs/perf-log.md, "the whole GPU fronthaul daemon, fed",
/// 2026-12-04).
pub(crate) const POLL: Duration = Duration::from_micros(20);

/// Runs `host` (the host side, on `gpu`) with the completion poll beside it when the pipeline
/// has a fronthaul stage; returns what `host` returned and the poll's state for the end of the
/// run. An error of the poll (a failed read of GPU memory) ends the poll and is returned once
/// `host` is done.
pub(crate) fn with_live<R>(
    p: &Pipeline,
    gpu: &mut MultiGpu,
    host: impl FnOnce(&MultiGpu) -> R,
) -> anyhow::Result<(R, LiveStages)> {
    let mut live = LiveStages::new(p)?;
    if live.is_empty() {
        return Ok((host(gpu), live));
    }
    gpu.set_handed_log(live.handed.clone());
    let gpu = &*gpu;
    let stop = AtomicBool::new(false);
    let (r, polled) = std::thread::scope(|s| {
        let poller = crate::threads::spawn_named(
            s,
            "pw-fh-poll".into(),
            || -> anyhow::Result<LiveStages> {
                while !stop.load(Ordering::Acquire) {
                    live.poll(p, gpu)?;
                    std::thread::sleep(POLL);
                }
                Ok(live)
            },
        );
        let r = host(gpu);
        stop.store(true, Ordering::Release);
        (r, poller.join())
    });
    let live = polled
        .map_err(|_| anyhow::anyhow!("the fronthaul completion thread panicked"))?
        .map_err(|e| e.context("fronthaul slot completion"))?;
    Ok((r, live))
}
