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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// Frames the GPU may be handed between two of this side's polls, for a side whose device
    /// state a faster input would overwrite before a poll read it (a ring of results the
    /// kernel reuses). The executor then holds its input until a poll has covered what it
    /// reaped ([`PollGate`]); `None`: the input never waits for this side.
    fn frames_per_poll(&self) -> Option<u64> {
        None
    }
    fn finish(self: Box<Self>, p: &Pipeline, mem: &dyn StageGpuMemory) -> anyhow::Result<()>;
}

/// Back-pressure from the stages' host sides to the GPU executor's input: at most `limit` frames
/// are handed to the GPU beyond those a completed poll covered (reaped before it began), so a
/// kernel never runs more than `limit` frames ahead of the host side that reads its results,
/// however fast the input or slow the poll. A burst of more than `limit` frames still goes
/// when everything handed before it was covered. Deadlock-free: a burst handed is finished by
/// the GPU and reaped without any further input, and a poll then covers it; the poll thread
/// [`PollGate::open`]s the gate for good when it ends (an error), so no input waits on it.
#[derive(Debug)]
pub struct PollGate {
    limit: u64,
    /// Frames handed (reserved before the submit, given back when it fails).
    handed: AtomicU64,
    /// Frames of finished bursts the queue threads reaped.
    reaped: AtomicU64,
    /// Reaped frames covered by a completed poll (those reaped when it began).
    covered: AtomicU64,
    open: AtomicBool,
    /// Bursts the gate held, and whether one waits now (the poll thread then polls at once).
    stalls: AtomicU64,
    waiting: AtomicBool,
}

impl PollGate {
    pub fn new(limit: u64) -> PollGate {
        PollGate {
            limit: limit.max(1),
            handed: AtomicU64::new(0),
            reaped: AtomicU64::new(0),
            covered: AtomicU64::new(0),
            open: AtomicBool::new(false),
            stalls: AtomicU64::new(0),
            waiting: AtomicBool::new(false),
        }
    }

    /// Takes room for a burst of `n` frames; false when it must wait for a poll (then
    /// [`PollGate::waiting`] says so to the poll thread).
    pub fn try_take(&self, n: u64) -> bool {
        if self.open.load(Ordering::Acquire) {
            return true;
        }
        let mut h = self.handed.load(Ordering::Acquire);
        loop {
            let ahead = h.saturating_sub(self.covered.load(Ordering::Acquire));
            if ahead > 0 && ahead + n > self.limit {
                self.waiting.store(true, Ordering::Release);
                return false;
            }
            match (self.handed).compare_exchange_weak(h, h + n, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(now) => h = now,
            }
        }
    }

    /// Gives back what [`PollGate::try_take`] took for a burst that was not handed over.
    pub fn give_back(&self, n: u64) {
        if !self.open.load(Ordering::Acquire) {
            self.handed.fetch_sub(n, Ordering::AcqRel);
        }
    }

    /// A burst the gate held (counted once per burst by the caller).
    pub fn stalled(&self) {
        self.stalls.fetch_add(1, Ordering::Relaxed);
    }

    /// Bursts the gate held so far.
    pub fn stalls(&self) -> u64 {
        self.stalls.load(Ordering::Relaxed)
    }

    /// `n` frames of finished bursts were reaped.
    pub fn reaped(&self, n: u64) {
        self.reaped.fetch_add(n, Ordering::AcqRel);
    }

    /// Frames reaped so far: what a poll that begins now covers.
    pub fn reaped_so_far(&self) -> u64 {
        self.reaped.load(Ordering::Acquire)
    }

    /// A poll that began when [`PollGate::reaped_so_far`] was `r` has completed.
    pub fn covered(&self, r: u64) {
        self.covered.fetch_max(r, Ordering::AcqRel);
    }

    /// Whether a burst waits for a poll (cleared by the call).
    pub fn waiting(&self) -> bool {
        self.waiting.swap(false, Ordering::AcqRel)
    }

    /// No burst waits from now on (the poll thread ended).
    pub fn open(&self) {
        self.open.store(true, Ordering::Release);
    }

    /// Frames handed beyond what a completed poll covered.
    pub fn ahead(&self) -> u64 {
        let h = self.handed.load(Ordering::Acquire);
        h.saturating_sub(self.covered.load(Ordering::Acquire))
    }
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

    #[test]
    fn the_poll_gate_holds_the_input_until_a_poll_covers_what_was_reaped() {
        let g = PollGate::new(64);
        assert!(g.try_take(32) && g.try_take(32), "two bursts fit");
        assert!(!g.try_take(32), "a third runs past the limit");
        assert!(g.waiting() && !g.waiting(), "the poll thread is told once");
        // Reaped, but no poll has covered it: still held.
        g.reaped(64);
        assert!(!g.try_take(1));
        // A poll that began before the reap covers nothing.
        g.covered(0);
        assert!(!g.try_take(1));
        let r = g.reaped_so_far();
        g.covered(r);
        assert_eq!(g.ahead(), 0);
        assert!(g.try_take(32));
        // A failed submit gives its room back.
        g.give_back(32);
        assert_eq!(g.ahead(), 0);
        // A burst larger than the limit goes alone, once nothing is ahead.
        assert!(g.try_take(100));
        assert!(!g.try_take(1));
        g.reaped(100);
        g.covered(g.reaped_so_far());
        assert!(g.try_take(1));
        g.stalled();
        assert_eq!(g.stalls(), 1);
        // Opened (the poll thread ended): nothing waits.
        g.open();
        assert!((0..10).all(|_| g.try_take(1000)));
    }
}
