//! A stage's host side on the GPU executor: work the host does beside the kernel while a run
//! goes, on the stage's device buffers (a stage that assembles results on the GPU hands them
//! on from here), and once more at its end, drained, before the GPUs shut down.
//!
//! The executor knows no stage by name: it asks the pipeline for the host sides
//! ([`crate::stage::Pipeline::gpu_host_sides`]), polls each every [`GpuHostSide::poll_interval`]
//! on one thread beside its host side, and calls [`GpuHostSide::finish`] at the end. What a host
//! side may touch is [`StageGpuMemory`]: its stage's buffers on every GPU, the counter blocks,
//! and [`HandedLog`], when bursts were handed to the GPU.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::burst::{Burst, FrameDesc};
use crate::stage::run::Pipeline;

/// The GPU executor's memory of the stages, as a stage's host side reads and writes it: each
/// GPU holds its own copy of a stage's buffers.
pub trait StageGpuMemory: Sync {
    /// GPUs the pipeline runs on.
    fn gpus(&self) -> usize;
    /// Stage `k`'s buffer `i` on GPU `gpu`, as it is now (the kernel may be writing it).
    fn read_buffer(&self, gpu: usize, k: usize, i: usize) -> anyhow::Result<Vec<u8>>;
    /// `len` bytes of that buffer from `offset`; an error when the range is not inside it.
    fn read_buffer_range(
        &self,
        gpu: usize,
        k: usize,
        i: usize,
        offset: usize,
        len: usize,
    ) -> anyhow::Result<Vec<u8>>;
    /// Sets the 32-bit word at `offset` of that buffer while the kernel runs; later reads of
    /// the stage's buffers on that GPU are ordered behind it.
    fn set_buffer_word(
        &self,
        gpu: usize,
        k: usize,
        i: usize,
        offset: usize,
        value: u32,
    ) -> anyhow::Result<()>;
    /// Each stage's counter block (8 words, word 0 the frames it saw), by pipeline position,
    /// summed over every queue and GPU.
    fn counter_blocks(&self) -> anyhow::Result<Vec<[u64; 8]>>;
    /// Ring slots a queue has (bursts in flight at most).
    fn ring_slots(&self) -> u32;
}

/// A stage's work on the host beside the GPU kernel. `poll` runs on one thread for the whole
/// run, [`GpuHostSide::poll_interval`] after its last poll ended, with the other stages' host
/// sides; `finish` once,
/// after the last burst was reaped and before the GPUs shut down. An error ends the polling
/// and fails the run once the host side is done.
pub trait GpuHostSide: Send {
    /// What the logs call it (its stage's name).
    fn name(&self) -> &str;
    /// Time from the end of one poll to the next.
    fn poll_interval(&self) -> Duration;
    fn poll(&mut self, p: &Pipeline, mem: &dyn StageGpuMemory) -> anyhow::Result<()>;
    fn finish(self: Box<Self>, p: &Pipeline, mem: &dyn StageGpuMemory) -> anyhow::Result<()>;
}

/// Bursts the [`HandedLog`] remembers (the newest).
const HANDED_KEEP: usize = 1 << 14;

/// When the host handed bursts to the GPU, by the receive times of their frames: (earliest,
/// latest receive time, when), in handing order. Bursts without receive times are not kept.
/// The GPU executor records into it; a host side learns from it when the burst holding a frame
/// went to the GPU (a latency measured from there).
#[derive(Debug, Default)]
pub struct HandedLog {
    bursts: Mutex<VecDeque<(u64, u64, Instant)>>,
}

impl HandedLog {
    /// Records `burst`, handed to the GPU at `at`.
    pub fn record(&self, burst: &Burst, at: Instant) {
        self.record_descs(&burst.descs, at);
    }

    /// [`HandedLog::record`] of a burst known by its descriptors (frames in GPU memory).
    pub fn record_descs(&self, descs: &[FrameDesc], at: Instant) {
        let ts = descs.iter().map(|d| d.timestamp_ns).filter(|&t| t != 0);
        let (lo, hi) = ts.fold((u64::MAX, 0), |(lo, hi), t| (lo.min(t), hi.max(t)));
        if hi == 0 {
            return;
        }
        let mut b = self.bursts.lock().unwrap_or_else(|p| p.into_inner());
        if b.len() >= HANDED_KEEP {
            b.pop_front();
        }
        b.push_back((lo, hi, at));
    }

    /// When the burst holding a frame received at `ts` was handed over: the earliest of the
    /// newest run of bursts whose receive times hold `ts` (a capture replayed in a loop holds
    /// a time again a lap later; the newest lap is the one a slot completing now is from).
    pub fn handed_at(&self, ts: u64) -> Option<Instant> {
        if ts == 0 {
            return None;
        }
        let b = self.bursts.lock().unwrap_or_else(|p| p.into_inner());
        let mut found = None;
        for &(lo, hi, at) in b.iter().rev() {
            if (lo..=hi).contains(&ts) {
                found = Some(at);
            } else if found.is_some() {
                break;
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handed_log_finds_the_burst_of_a_receive_time() {
        let log = HandedLog::default();
        let burst = |ts: &[u64]| {
            let mut b = Burst::default();
            for &t in ts {
                b.push(
                    &[0u8; 60],
                    FrameDesc {
                        timestamp_ns: t,
                        ..FrameDesc::default()
                    },
                );
            }
            b
        };
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        log.record(&burst(&[0, 0]), at(0)); // no receive times: not kept
        log.record(&burst(&[100, 200]), at(1));
        log.record(&burst(&[200, 300]), at(2));
        log.record(&burst(&[400]), at(3));
        assert_eq!(log.handed_at(150), Some(at(1)));
        assert_eq!(
            log.handed_at(200),
            Some(at(1)),
            "the earliest burst holding it"
        );
        assert_eq!(log.handed_at(400), Some(at(3)));
        assert_eq!(log.handed_at(350), None);
        assert_eq!(log.handed_at(0), None);
        // A replay's next lap holds the times again: the newest lap.
        log.record(&burst(&[100, 200]), at(9));
        assert_eq!(log.handed_at(150), Some(at(9)));
        for i in 0..HANDED_KEEP as u64 + 5 {
            log.record(&burst(&[1000 + i]), at(10));
        }
        assert_eq!(log.bursts.lock().unwrap().len(), HANDED_KEEP, "bounded");
    }
}
