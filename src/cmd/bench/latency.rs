//! One latency configuration timed: bursts handed to `submit` one at a time (a graph's worth in
//! graph mode), each a random 0-`--latency-gap-us` after the last one's verdicts, the time until
//! the host sees their verdicts, every verdict checked against the reference; and the host
//! thread's stalls (the machine taking its core away), counted so a tail made by the machine can
//! be told from one made by pktwarp.

use pipeline::burst::Burst;
use pipeline::internal::executor::gpu::abi::{self, Verdict};
use pipeline::internal::executor::gpu::{
    AclTablesRef, GpuExecutor, GpuOptions, Mode, PipelineDesc, Placement,
};
use pipeline::verify::Reference;
use std::time::{Duration, Instant};

use super::super::verify::kernel_image;
use super::end_to_end::round_up;
use super::Args;

/// One latency configuration.
#[derive(Clone, Copy)]
pub struct LatCase<'a> {
    pub tables: Option<AclTablesRef<'a>>,
    pub parse: bool,
    pub mode: Mode,
    pub placement: Placement,
    pub burst: u32,
    /// Threads per CTA (None: the executor's default).
    pub threads: Option<u32>,
    /// Record the GPU-side timestamps of every burst (`trace_bursts`).
    pub trace: bool,
    /// `burst_ctas` (None: the executor's default).
    pub burst_ctas: Option<u32>,
    /// `tagged` (None: the executor's default).
    pub tagged: Option<bool>,
    /// The reference pipeline on the rules of `tables`, every verdict is checked against
    /// (parse + acl pipelines only).
    pub reference: Option<&'a Reference>,
}

impl<'a> LatCase<'a> {
    /// Parse + acl (`tables`, every verdict checked against `reference`), untraced, the
    /// executor's defaults for everything else.
    pub fn full(
        tables: AclTablesRef<'a>,
        reference: &'a Reference,
        mode: Mode,
        placement: Placement,
        burst: u32,
    ) -> Self {
        LatCase {
            tables: Some(tables),
            parse: true,
            mode,
            placement,
            burst,
            threads: None,
            trace: false,
            burst_ctas: None,
            tagged: None,
            reference: Some(reference),
        }
    }
}

/// Per-burst latency samples (us, sorted) and, with `trace`, the GPU-side steps of each burst
/// (us): [seen -> staged, staged -> stages done, -> just before the done store, the counters
/// merged after done (off the latency path), outside the GPU (total minus seen -> fenced: host
/// writes, PCIe, the poll, the host seeing done), of which the host's `submit` call, of the
/// stages the small-burst path's parse pass (staged -> every frame's ACL key ready; NaN on other
/// paths)].
pub struct LatResult {
    pub samples: Vec<f64>,
    /// The samples of bursts without a host stall (sorted), and how many had one.
    pub unstalled: Vec<f64>,
    pub stalled: usize,
    pub steps: Vec<[f64; STEPS]>,
    /// Verdicts compared with the CPU reference, and how many differed.
    pub checked: u64,
    pub mismatches: u64,
    /// The queue carried tagged words.
    pub tagged: bool,
    /// Threads per CTA the executor ran with.
    pub threads: u32,
    /// CTAs per burst the executor ran with.
    pub parts: u32,
}

pub fn latency(a: &Args, base: &Burst, c: LatCase<'_>) -> anyhow::Result<LatResult> {
    let g = 8u32;
    let (mode, placement, burst) = (c.mode, c.placement, c.burst);
    let opts = GpuOptions {
        mode,
        placement,
        burst_size: burst,
        ring_slots: 32,
        graph_bursts: g,
        slot_data_bytes: Some(round_up(burst as usize * 64, 4096) as u32),
        device: a.device,
        block_threads: c.threads,
        trace_bursts: c.trace,
        burst_ctas: c.burst_ctas,
        tagged: c.tagged,
        ..Default::default()
    };
    let pd = PipelineDesc {
        parse: c.parse,
        acl: c.tables,
        count: true,
        default_action: abi::ACTION_PASS,
    };
    let ex = GpuExecutor::new(opts, pd, 1, &kernel_image())?;
    let bursts: Vec<Burst> = pipeline::verify::split_bursts(base, burst as usize, usize::MAX)
        .into_iter()
        .map(|(_, b)| b)
        .filter(|b| b.len() == burst as usize)
        .take(64)
        .collect();
    if bursts.is_empty() {
        anyhow::bail!("trace too short for bursts of {burst}");
    }
    // What the CPU executor decides for each frame of each burst (parse + acl only).
    let want: Option<Vec<Vec<Verdict>>> = match (c.parse, c.reference) {
        (true, Some(r)) => Some(bursts.iter().map(|b| r.verdicts(b)).collect()),
        _ => None,
    };
    let (mut checked, mut mismatches) = (0u64, 0u64);
    let per = if mode == Mode::Graph { g as usize } else { 1 };
    let warm = 200;
    let total = a.latency_bursts + warm;
    // (us, whether the host thread stalled during the burst) of each timed burst.
    let mut out: Vec<(f64, bool)> = Vec::with_capacity(a.latency_bursts);
    // (seq, total us) of measured bursts whose GPU trace is read once it is complete.
    let mut pending: Vec<(u32, f64, f64)> = Vec::new();
    let mut steps = Vec::new();
    let mut k = 0usize;
    let deadline = Duration::from_secs(5);
    // Uniform gaps from a fixed seed (xorshift64): every configuration sees the same sequence.
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    while k < total {
        if a.latency_gap_us > 0.0 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let gap = Duration::from_secs_f64(
                a.latency_gap_us * 1e-6 * (rng >> 11) as f64 / (1u64 << 53) as f64,
            );
            let t = Instant::now();
            while t.elapsed() < gap {
                std::hint::spin_loop();
            }
        }
        let mut t_submit = Vec::with_capacity(per);
        let mut submit_us = Vec::with_capacity(per);
        for j in 0..per {
            let t0 = Instant::now();
            t_submit.push(t0);
            ex.submit(0, &bursts[(k + j) % bursts.len()])
                .map_err(|e| anyhow::anyhow!("latency submit: {e}"))?;
            submit_us.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        let mut done = 0usize;
        // From here on (not across the submit calls: a launch takes several microseconds).
        let mut clock = StallClock::new();
        let t = clock.last;
        while done < per {
            ex.poll(0, |seq, v, _| {
                let now = Instant::now();
                let stalled = clock.gap_until(now) >= STALL;
                if let Some(w) = &want {
                    let w = &w[(k + done) % bursts.len()];
                    checked += v.len() as u64;
                    mismatches += v.iter().zip(w).filter(|(g, w)| g != w).count() as u64
                        + w.len().abs_diff(v.len()) as u64;
                }
                if k + done >= warm {
                    let us = now.duration_since(t_submit[done]).as_secs_f64() * 1e6;
                    out.push((us, stalled));
                    if c.trace {
                        pending.push((seq, us, submit_us[done]));
                    }
                }
                done += 1;
            })?;
            if clock.tick() - t > deadline {
                anyhow::bail!(
                    "latency: burst not done after {deadline:?} ({mode:?}, {placement:?})"
                );
            }
        }
        k += per;
        pending.retain(|&(seq, us, sub)| match ex.burst_trace(0, seq) {
            Some(tr) => {
                let d = |x: u64, y: u64| y.saturating_sub(x) as f64 / 1e3;
                let gpu = d(tr.seen, tr.fenced);
                steps.push([
                    d(tr.seen, tr.staged),
                    d(tr.staged, tr.ran),
                    d(tr.ran, tr.fenced),
                    d(tr.fenced, tr.merged),
                    us - gpu,
                    sub,
                    // Only the small-burst path's parse pass records it.
                    if tr.parsed == 0 {
                        f64::NAN
                    } else {
                        d(tr.staged, tr.parsed)
                    },
                ]);
                false
            }
            None => true,
        });
    }
    let stalled = out.iter().filter(|s| s.1).count();
    let mut unstalled: Vec<f64> = out.iter().filter(|s| !s.1).map(|s| s.0).collect();
    unstalled.sort_by(f64::total_cmp);
    let mut samples: Vec<f64> = out.into_iter().map(|s| s.0).collect();
    samples.sort_by(f64::total_cmp);
    Ok(LatResult {
        samples,
        unstalled,
        stalled,
        steps,
        checked,
        mismatches,
        tagged: ex.tagged(0),
        threads: ex.options().threads(),
        parts: ex.options().parts(),
    })
}

/// A gap at least this long between two consecutive clock reads of the latency host thread
/// while it polls for a burst's verdicts means it was off its CPU: an interrupt or, on a
/// virtual machine, the hypervisor running something else (a poll takes well under a
/// microsecond; on the GPU test machine the probe below finds few gaps of 1-2 us and many of
/// 2-50). The burst counts as stalled: the bench reports how many were and the p99 without
/// them beside the p99 of every burst, so a tail made by the machine can be told from one made
/// by pktwarp. The submit call is not watched (a launch takes several microseconds), so a
/// stall there is not caught: the count is a lower bound.
pub const STALL: Duration = Duration::from_micros(2);

/// The latency host thread's clock reads, keeping the longest gap between consecutive ones.
struct StallClock {
    last: Instant,
    max_gap: Duration,
}

impl StallClock {
    fn new() -> Self {
        Self {
            last: Instant::now(),
            max_gap: Duration::ZERO,
        }
    }

    fn tick(&mut self) -> Instant {
        let now = Instant::now();
        self.max_gap = self.max_gap.max(now - self.last);
        self.last = now;
        now
    }

    /// The longest gap so far, counting the one from the last tick to `now`.
    fn gap_until(&self, now: Instant) -> Duration {
        self.max_gap.max(now.saturating_duration_since(self.last))
    }
}

/// What [`host_jitter`] saw.
pub struct Jitter {
    /// Gaps of at least [`STALL`] per second, and the longest (us).
    pub stalls_per_s: f64,
    pub max_us: f64,
    /// Share of the time spent in those gaps.
    pub lost: f64,
}

/// The calling thread reads the clock back to back for `dur`: every gap of [`STALL`] or more is
/// time it was off its CPU. Run on the latency host thread's core just before the latency rows
/// (nothing else of the bench runs then), it says how often the machine takes that core away.
pub fn host_jitter(dur: Duration) -> Jitter {
    let t0 = Instant::now();
    let mut last = t0;
    let (mut n, mut max, mut lost) = (0u64, Duration::ZERO, Duration::ZERO);
    while last - t0 < dur {
        let now = Instant::now();
        let gap = now - last;
        if gap >= STALL {
            n += 1;
            lost += gap;
            max = max.max(gap);
        }
        last = now;
    }
    let secs = (last - t0).as_secs_f64();
    Jitter {
        stalls_per_s: n as f64 / secs,
        max_us: max.as_secs_f64() * 1e6,
        lost: lost.as_secs_f64() / secs,
    }
}

/// Columns of a traced burst's steps (LatResult::steps).
pub const STEPS: usize = 7;

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread put to sleep between two clock reads is a stall for the burst, and the longest
    /// gap is kept across later reads (a quiet moment after the stall does not hide it).
    #[test]
    fn stall_clock_keeps_the_longest_gap() {
        let mut c = StallClock::new();
        std::thread::sleep(Duration::from_millis(5));
        let now = Instant::now();
        assert!(c.gap_until(now) >= Duration::from_millis(5));
        c.tick();
        c.tick();
        assert!(c.max_gap >= Duration::from_millis(5));
        assert!(c.gap_until(Instant::now()) >= STALL);
    }
}
