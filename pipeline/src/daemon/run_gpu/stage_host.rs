//! The stages' host sides on the GPU executor ([`crate::stage::gpu_host::GpuHostSide`]): a
//! thread beside the host side polls each when it is due; at the end of the run (drained,
//! before shutdown) each finishes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::executor::gpu::multi::MultiGpu;
use crate::stage::gpu_host::{GpuHostSide, HandedLog, PollGate, StageGpuMemory};
use crate::stage::Pipeline;

/// Shortest time between two polls of one host side.
const MIN_POLL: Duration = Duration::from_micros(1);

/// Runs `host` (the host side, on `gpu`) with the stages' host sides polled beside it; returns
/// what `host` returned and the host sides, for [`finish`]. `host` gets the gate that paces
/// its input when a host side asks for one ([`GpuHostSide::frames_per_poll`]). An error of a
/// poll (a failed read of GPU memory) ends the polling and is returned once `host` is done.
pub(crate) fn with_stage_hosts<R>(
    p: &Pipeline,
    gpu: &mut MultiGpu,
    host: impl FnOnce(&MultiGpu, Option<Arc<PollGate>>) -> R,
) -> anyhow::Result<(R, Vec<Box<dyn GpuHostSide>>)> {
    let handed = Arc::new(HandedLog::default());
    let sides = p.gpu_host_sides(&handed)?;
    if !sides.is_empty() {
        gpu.set_handed_log(handed);
    }
    let gate = gate_for(&sides);
    polled(p, &*gpu, sides, gate, host)
}

/// The gate of the host sides that pace the input (the least of their frames per poll), if any.
pub(crate) fn gate_for(sides: &[Box<dyn GpuHostSide>]) -> Option<Arc<PollGate>> {
    let limit = sides.iter().filter_map(|s| s.frames_per_poll()).min()?;
    Some(Arc::new(PollGate::new(limit)))
}

/// `host(mem, gate)` with `sides` polled on a thread beside it, each `poll_interval` after its
/// last poll ended, and a side that paces the input at once when a burst waits for it. Each
/// completed poll of every pacing side moves the gate on to the frames reaped before it began.
pub(crate) fn polled<M: StageGpuMemory, R>(
    p: &Pipeline,
    mem: &M,
    mut sides: Vec<Box<dyn GpuHostSide>>,
    gate: Option<Arc<PollGate>>,
    host: impl FnOnce(&M, Option<Arc<PollGate>>) -> R,
) -> anyhow::Result<(R, Vec<Box<dyn GpuHostSide>>)> {
    if sides.is_empty() {
        return Ok((host(mem, None), sides));
    }
    let stop = AtomicBool::new(false);
    let paces: Vec<bool> = sides
        .iter()
        .map(|s| s.frames_per_poll().is_some())
        .collect();
    let g = gate.as_deref();
    let (r, polled) = std::thread::scope(|s| {
        let poller = crate::threads::spawn_named(
            s,
            "pw-stage-poll".into(),
            || -> anyhow::Result<Vec<Box<dyn GpuHostSide>>> {
                // Whatever ends the polling (an error included), no burst waits on it after.
                let _open = OpenOnDrop(g);
                let mut due = vec![Instant::now(); sides.len()];
                // Per side: the frames reaped before its last completed poll began.
                let mut covered: Vec<Option<u64>> = vec![None; sides.len()];
                while !stop.load(Ordering::Acquire) {
                    let now = Instant::now();
                    let urgent = g.is_some_and(PollGate::waiting);
                    for (i, (side, at)) in sides.iter_mut().zip(due.iter_mut()).enumerate() {
                        if now >= *at || (urgent && paces[i]) {
                            let began = g.map(PollGate::reaped_so_far);
                            side.poll(p, mem)?;
                            if paces[i] {
                                covered[i] = began;
                            }
                            // The interval is the pause after a poll, not its period: a poll
                            // that takes longer than it still leaves the GPU's memory alone
                            // for that long.
                            *at = Instant::now() + side.poll_interval().max(MIN_POLL);
                        }
                    }
                    if let Some(g) = g {
                        let least = covered.iter().zip(&paces).filter(|(_, &p)| p);
                        if let Some(c) = least.map(|(c, _)| *c).min().flatten() {
                            g.covered(c);
                        }
                    }
                    let next = due.iter().min().copied().unwrap_or(now);
                    let wait = next.saturating_duration_since(Instant::now());
                    if urgent {
                        // The input waits on these polls: the next one at once.
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(wait.max(MIN_POLL));
                    }
                }
                Ok(sides)
            },
        );
        let r = host(mem, gate.clone());
        stop.store(true, Ordering::Release);
        (r, poller.join())
    });
    let sides =
        polled.map_err(|_| anyhow::anyhow!("the stages' host-side poll thread panicked"))??;
    if let Some(g) = &gate {
        if g.stalls() > 0 {
            tracing::info!(
                event = "stage_poll_gate",
                stalls = g.stalls(),
                "the input waited {} times for the stages' host-side polls to read what the \
                 GPU had done",
                g.stalls()
            );
        }
    }
    Ok((r, sides))
}

/// Opens the gate when the poll thread ends, however it ends.
struct OpenOnDrop<'a>(Option<&'a PollGate>);

impl Drop for OpenOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(g) = self.0 {
            g.open();
        }
    }
}

/// Each host side's end of the run, in pipeline order (the GPU drained, before shutdown).
pub(crate) fn finish(
    p: &Pipeline,
    mem: &dyn StageGpuMemory,
    sides: Vec<Box<dyn GpuHostSide>>,
) -> anyhow::Result<()> {
    for side in sides {
        let name = side.name().to_string();
        side.finish(p, mem)
            .map_err(|e| e.context(format!("stage `{name}`: the end of its GPU host side")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// No GPU: one stage buffer word that `set_buffer_word` writes and the reads return.
    #[derive(Default)]
    struct FakeMem {
        word: Mutex<u32>,
    }

    impl StageGpuMemory for FakeMem {
        fn gpus(&self) -> usize {
            1
        }
        fn read_buffer(&self, _: usize, _: usize, _: usize) -> anyhow::Result<Vec<u8>> {
            Ok(self.word.lock().unwrap().to_le_bytes().to_vec())
        }
        fn read_buffer_range(
            &self,
            g: usize,
            k: usize,
            i: usize,
            _: usize,
            _: usize,
        ) -> anyhow::Result<Vec<u8>> {
            self.read_buffer(g, k, i)
        }
        fn set_buffer_word(
            &self,
            _: usize,
            _: usize,
            _: usize,
            _: usize,
            v: u32,
        ) -> anyhow::Result<()> {
            *self.word.lock().unwrap() = v;
            Ok(())
        }
        fn counter_blocks(&self) -> anyhow::Result<Vec<[u64; 8]>> {
            Ok(Vec::new())
        }
        fn ring_slots(&self) -> u32 {
            4
        }
    }

    /// Counts its polls, fails the poll `fail_at` (if any), records its finish.
    struct Side {
        polls: Arc<Mutex<u32>>,
        finished: Arc<Mutex<bool>>,
        fail_at: Option<u32>,
    }

    impl GpuHostSide for Side {
        fn name(&self) -> &str {
            "probe"
        }
        fn poll_interval(&self) -> Duration {
            Duration::from_micros(50)
        }
        fn poll(&mut self, _: &Pipeline, mem: &dyn StageGpuMemory) -> anyhow::Result<()> {
            let mut n = self.polls.lock().unwrap();
            *n += 1;
            if Some(*n) == self.fail_at {
                anyhow::bail!("read failed at poll {n}");
            }
            mem.set_buffer_word(0, 0, 0, 0, *n)
        }
        fn finish(self: Box<Self>, _: &Pipeline, _: &dyn StageGpuMemory) -> anyhow::Result<()> {
            *self.finished.lock().unwrap() = true;
            Ok(())
        }
    }

    fn side(fail_at: Option<u32>) -> (Side, Arc<Mutex<u32>>, Arc<Mutex<bool>>) {
        let (polls, finished) = (Arc::default(), Arc::default());
        let s = Side {
            polls: Arc::clone(&polls),
            finished: Arc::clone(&finished),
            fail_at,
        };
        (s, polls, finished)
    }

    #[test]
    fn host_sides_are_polled_while_the_host_side_runs_then_finished() {
        let p = Pipeline::new(vec![crate::stage::Stage::Count]);
        let mem = FakeMem::default();
        let (s, polls, finished) = side(None);
        let (r, sides) = polled(&p, &mem, vec![Box::new(s)], None, |m: &FakeMem, _| {
            // The host side runs until the poll thread has written the word a few times.
            let t0 = Instant::now();
            while *m.word.lock().unwrap() < 3 && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_micros(100));
            }
            *m.word.lock().unwrap()
        })
        .unwrap();
        assert!(r >= 3, "polled while the host side ran: {r}");
        assert!(!*finished.lock().unwrap(), "finish waits for the end");
        finish(&p, &mem, sides).unwrap();
        assert!(*finished.lock().unwrap());
        assert!(*polls.lock().unwrap() >= 3);
    }

    #[test]
    fn a_failed_poll_ends_polling_and_is_returned_after_the_host_side() {
        let p = Pipeline::new(vec![crate::stage::Stage::Count]);
        let mem = FakeMem::default();
        let (s, polls, _) = side(Some(2));
        let e = polled(&p, &mem, vec![Box::new(s)], None, |_: &FakeMem, _| {
            std::thread::sleep(Duration::from_millis(20));
        })
        .err()
        .expect("the poll's error");
        assert!(format!("{e:#}").contains("read failed at poll 2"), "{e:#}");
        assert_eq!(*polls.lock().unwrap(), 2, "no poll after the failed one");
    }

    #[test]
    fn without_host_sides_the_host_side_runs_alone() {
        let p = Pipeline::new(vec![crate::stage::Stage::Count]);
        let (r, sides) = polled(
            &p,
            &FakeMem::default(),
            Vec::new(),
            None,
            |_: &FakeMem, _| 7,
        )
        .unwrap();
        assert_eq!((r, sides.len()), (7, 0));
    }
}
