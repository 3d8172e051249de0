//! `--reload-torture SWAPS`: continuous traffic through the GPU executor while the ACL table is
//! swapped SWAPS times between `--rules` (even generations) and `--rules-b` (odd ones), every
//! `--swap-every` bursts, with bursts of the old table still in flight at each swap. Each burst
//! comes back with the generation its slot header named; every frame's verdict must equal the
//! reference's under that generation's rule set, generations never go back on a queue, every
//! frame comes back (frames in == verdicts out + counted drops), and every replaced table is
//! freed by the end. The input is replayed until all swaps are done.

use anyhow::Context as _;
use pipeline::burst::Burst;
use pipeline::internal::executor::gpu::abi::Verdict;
use pipeline::internal::executor::gpu::multi::MultiGpu;
use pipeline::internal::executor::gpu::{Mode, PipelineDesc, Placement, SubmitError};
use pipeline::verify::split_bursts;
use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use super::check::{gpu_options, queues_for, CHUNK};
use super::rules::Acl;
use super::source::Source;
use super::{kernel_image, slot_data_bytes, Args, ModeArg, PlacementArg};

/// The torture's running totals.
#[derive(Default)]
struct Totals {
    generation: u64,
    since_swap: u32,
    frames_in: u64,
    verdicts_out: u64,
    host_drops: u64,
    mismatches: u64,
    differing: u64,
    passes: u64,
    frames_by_parity: [u64; 2],
    gens_seen: BTreeSet<u64>,
    /// The last generation each queue returned.
    last_gen: Vec<u64>,
    regressions: u64,
    max_retired: usize,
}

/// One torture: its options, both rule sets and the executor.
struct Torture<'a> {
    a: &'a Args,
    swaps: u32,
    swap_every: u32,
    sets: [Acl; 2],
    ex: MultiGpu,
    show: usize,
    t: Totals,
}

/// The torture over `sets`, the rule sets of --rules and --rules-b (read before the GPU was
/// looked for).
pub fn reload_torture(a: &Args, swaps: u32, sets: [Acl; 2]) -> anyhow::Result<i32> {
    let t0 = Instant::now();
    let (Some(ra), Some(rb)) = (&a.rules, &a.rules_b) else {
        anyhow::bail!("--reload-torture needs --rules and --rules-b");
    };
    let mode: Mode = a
        .mode
        .first()
        .copied()
        .unwrap_or(ModeArg::Persistent)
        .into();
    let placement: Placement = a
        .placement
        .first()
        .copied()
        .unwrap_or(PlacementArg::Mapped)
        .into();
    let opts = gpu_options(a, mode, placement);
    let tagged = opts.tagged_queue(0);
    let pd = PipelineDesc {
        parse: true,
        acl: Some(sets[0].tables()),
        count: true,
        default_action: sets[0].default_action(),
    };
    let ex = MultiGpu::new(opts, pd, queues_for(a), &kernel_image())?;
    let nq = ex.n_queues();
    let mut t = Torture {
        a,
        swaps,
        swap_every: a.swap_every.max(1),
        sets,
        ex,
        show: a.show,
        t: Totals {
            last_gen: vec![0; nq],
            ..Default::default()
        },
    };
    let mut src = Source::from_args(a)?;
    let mut chunk = Burst::default();
    loop {
        chunk.clear();
        let cap = CHUNK.min(a.limit.unwrap_or(u64::MAX).min(CHUNK as u64) as usize);
        if !src.fill(&mut chunk, cap)? {
            t.t.passes += 1;
            if t.t.generation >= swaps as u64 {
                break;
            }
            src = Source::from_args(a)?;
            continue;
        }
        t.chunk(&chunk)?;
    }
    let desc = format!(
        "{} / {}",
        format!("{mode:?}").to_lowercase(),
        format!("{placement:?}{}", if tagged { " tagged" } else { "" }).to_lowercase()
    );
    t.finish(&desc, mode, placement, ra.as_path(), rb.as_path(), t0)
}

impl Torture<'_> {
    /// One chunk: the reference under both rule sets, then the bursts through the GPU with a
    /// swap every `swap_every` submitted bursts, then every verdict against its generation's.
    fn chunk(&mut self, chunk: &Burst) -> anyhow::Result<()> {
        let n = chunk.len();
        self.t.frames_in += n as u64;
        let refs: Vec<Vec<Verdict>> = self
            .sets
            .iter()
            .map(|s| s.reference.verdicts(chunk))
            .collect();
        self.t.differing += (0..n).filter(|&i| refs[0][i] != refs[1][i]).count() as u64;
        let bursts = split_bursts(
            chunk,
            self.a.burst as usize,
            slot_data_bytes(self.a) as usize,
        );
        let mut gpu_v = vec![Verdict::default(); n];
        let mut gpu_gen: Vec<Option<u64>> = vec![None; n];
        let nq = self.ex.n_queues();
        let mut inflight: Vec<VecDeque<(u32, usize, usize)>> = vec![Default::default(); nq];
        let mut next = 0usize;
        let mut last_progress = Instant::now();
        while next < bursts.len() || inflight.iter().any(|q| !q.is_empty()) {
            let mut progressed = false;
            if next < bursts.len() {
                self.maybe_swap()?;
                let q = next % nq;
                let (first, b) = &bursts[next];
                match self.ex.submit(q, b) {
                    Ok(seq) => {
                        inflight[q].push_back((seq, *first, b.len()));
                        next += 1;
                        self.t.since_swap += 1;
                        progressed = true;
                    }
                    Err(SubmitError::RingFull { .. }) => {}
                    Err(SubmitError::TooLarge { frames, .. }) => {
                        self.t.host_drops += frames as u64;
                        next += 1;
                    }
                    Err(e) => return Err(e.into()),
                }
                if next == bursts.len() {
                    for q in 0..nq {
                        self.ex.flush(q)?;
                    }
                }
            }
            let (ex, last_gen) = (&self.ex, &mut self.t.last_gen);
            let regressions = &mut self.t.regressions;
            for (q, fl) in inflight.iter_mut().enumerate() {
                let got = ex.poll_tagged(q, |seq, g, v, _| {
                    if let Some(&(s, first, len)) = fl.front() {
                        if s == seq && len == v.len() {
                            gpu_v[first..first + len].copy_from_slice(v);
                            for x in &mut gpu_gen[first..first + len] {
                                *x = Some(g);
                            }
                            if g < last_gen[q] {
                                *regressions += 1;
                            }
                            last_gen[q] = g;
                        }
                        fl.pop_front();
                    }
                })?;
                progressed |= got > 0;
            }
            if progressed {
                last_progress = Instant::now();
            } else if last_progress.elapsed() > Duration::from_secs(60) {
                anyhow::bail!("GPU made no progress for 60 s");
            } else {
                std::hint::spin_loop();
            }
        }
        self.check(&refs, &gpu_v, &gpu_gen);
        Ok(())
    }

    /// Publishes the other rule set once `swap_every` bursts went out since the last swap.
    fn maybe_swap(&mut self) -> anyhow::Result<()> {
        if self.t.since_swap >= self.swap_every && self.t.generation < self.swaps as u64 {
            self.t.generation += 1;
            let s = &self.sets[(self.t.generation % 2) as usize];
            self.ex
                .publish_acl(&s.tables(), self.t.generation, s.default_action())?;
            self.t.since_swap = 0;
            self.t.max_retired = self.t.max_retired.max(self.ex.retired_tables());
        }
        Ok(())
    }

    /// Every verdict that came back against the reference of the generation it carried.
    fn check(&mut self, refs: &[Vec<Verdict>], gpu_v: &[Verdict], gpu_gen: &[Option<u64>]) {
        for (i, (v, g)) in gpu_v.iter().zip(gpu_gen).enumerate() {
            let Some(g) = *g else { continue };
            self.t.verdicts_out += 1;
            self.t.gens_seen.insert(g);
            let want = &refs[(g % 2) as usize][i];
            self.t.frames_by_parity[(g % 2) as usize] += 1;
            if v != want {
                self.t.mismatches += 1;
                if self.show > 0 {
                    self.show -= 1;
                    outln_or_drop!("the verify report";
                        "  frame {i} of a chunk, generation {g}: verdict {v:?}, CPU reference of {} says {want:?}",
                        if g % 2 == 0 { "--rules" } else { "--rules-b" },
                    );
                }
            }
        }
    }

    /// The end checks, the report line, the JSON; the exit code.
    fn finish(
        mut self,
        desc: &str,
        mode: Mode,
        placement: Placement,
        ra: &std::path::Path,
        rb: &std::path::Path,
        t0: Instant,
    ) -> anyhow::Result<i32> {
        let snap = self.ex.counters()?;
        let retired_left = self.ex.retired_tables();
        let nq = self.ex.n_queues();
        self.ex.shutdown()?;
        let t = &self.t;
        let gpu_packets: u64 = snap.queues.iter().map(|c| c.packets).sum();
        let ring_full_frames: u64 = snap.host.iter().map(|h| h.ring_full_frames).sum();
        let lost = t.frames_in as i64 - t.verdicts_out as i64 - t.host_drops as i64;
        let problems = self.problems(gpu_packets, lost, retired_left);
        let ok = problems.is_empty();
        outln!("the verify report";
            "reload-torture [{desc} / GPUs {:?}, {nq} queues]: {} swaps ({} generations seen) between {} and {}, \
             {} frames in {} passes ({} where the two rule sets differ), verdicts {}, counted drops {}, lost {lost}, \
             mismatches {}, ring-full retries {ring_full_frames} frames, most tables awaiting release {}, left unreleased {retired_left} ({:.1} s): {}",
            self.ex.devices(),
            t.generation,
            t.gens_seen.len(),
            ra.display(),
            rb.display(),
            t.frames_in,
            t.passes,
            t.differing,
            t.verdicts_out,
            t.host_drops,
            t.mismatches,
            t.max_retired,
            t0.elapsed().as_secs_f64(),
            if ok { "PASS".to_string() } else { format!("FAIL: {}", problems.join("; ")) }
        );
        if let Some(j) = &self.a.json {
            let v = serde_json::json!({
                "test": "reload_torture", "mode": format!("{mode:?}").to_lowercase(),
                "placement": format!("{placement:?}").to_lowercase(), "devices": self.ex.devices(),
                "queues": nq, "swaps": t.generation, "generations_seen": t.gens_seen.len(),
                "rules": ra, "rules_b": rb, "frames_in": t.frames_in, "passes": t.passes,
                "frames_where_sets_differ": t.differing, "verdicts": t.verdicts_out,
                "counted_drops": t.host_drops, "lost": lost, "mismatches": t.mismatches,
                "ring_full_retry_frames": ring_full_frames, "max_tables_awaiting_release": t.max_retired,
                "tables_left_unreleased": retired_left, "seconds": t0.elapsed().as_secs_f64(),
                "ok": ok, "problems": problems,
            });
            std::fs::write(j, serde_json::to_vec_pretty(&v)?)
                .with_context(|| format!("{}", j.display()))?;
        }
        outln!("the verify report"; "verify: {}", if ok { "PASS" } else { "FAIL" });
        Ok(if ok { 0 } else { 1 })
    }

    /// What made the torture fail, one line each (empty: PASS).
    fn problems(&self, gpu_packets: u64, lost: i64, retired_left: usize) -> Vec<String> {
        let t = &self.t;
        let mut problems = Vec::new();
        if t.mismatches > 0 {
            problems.push(format!(
                "{} verdicts differ from the CPU reference of their generation",
                t.mismatches
            ));
        }
        if lost != 0 {
            problems.push(format!(
                "{lost} frames lost (in {}, verdicts {}, counted drops {})",
                t.frames_in, t.verdicts_out, t.host_drops
            ));
        }
        if gpu_packets != t.verdicts_out {
            problems.push(format!(
                "GPU count stage saw {gpu_packets} frames, {} verdicts came back",
                t.verdicts_out
            ));
        }
        if t.regressions > 0 {
            problems.push(format!(
                "{} bursts carried an older generation than the burst before them on their queue",
                t.regressions
            ));
        }
        if t.generation < self.swaps as u64 {
            problems.push(format!(
                "only {} of {} swaps done",
                t.generation, self.swaps
            ));
        }
        if t.frames_by_parity.contains(&0) || t.differing == 0 {
            problems.push(
                "the check cannot fail: both rule sets must classify some frames differently and both must carry traffic"
                    .to_string(),
            );
        }
        if retired_left > 0 {
            problems.push(format!(
                "{retired_left} replaced tables not freed after every burst was reaped"
            ));
        }
        problems
    }
}
