//! The daemon checking itself (`verify: { sample: N }`): one burst in N of each queue is copied
//! and re-run on the CPU reference (the Rust stages, [`Pipeline`]) on a thread of its own,
//! `pw-verify`, and every frame's result compared with what the executor gave it.
//!
//! What is compared, per frame (through [`compare_chunk`], the comparison `pktwarp verify`
//! uses): the verdict in its ABI form (action, drop reason, out port, matched rule, mark), the
//! packet metadata when the executor keeps it (the CPU executor does), and, when the pipeline
//! rewrites frames, the frame's bytes as the executor left them. Per burst: the counters the
//! burst moved (frames and bytes per stage, verdicts, drops by the stages' reasons, parse
//! statuses, ACL rule hits and misses), read around the burst on its worker (their only writer)
//! against the same counters of a scratch run of the reference. A custom stage's own counters
//! (global to all queues) are not compared.
//!
//! On the GPU executor the tap is `daemon::run_gpu::verify`: it copies the burst as submitted
//! and hands over the ring's verdicts and the TX ring's frames (no metadata, no counters: see
//! there).
//!
//! State: the reference runs the burst with the very ACL and route tables the executor used
//! ([`BurstTables`], loaded once for the burst before it ran), so a reload between the burst and
//! its check is no mismatch. A custom stage is re-run on the same instance (a stage whose
//! verdict depends on what it saw before is what this catches); a stage that keeps every frame
//! (its `rerun_refusal`, a keyed stage's, or the flow-table stages) refuses `verify` (config
//! check).
//!
//! The data path never waits: the verifier takes one burst at a time; a burst due for a sample
//! while it is busy is skipped and counted (`skipped_busy`). The frames of a burst found to
//! differ go to the slow path (`output.to_host`) through a bounded queue to the TX thread;
//! what does not fit, or finds no slow path, is counted (`capture_dropped`). Counts:
//! [`VerifyBoard`], exported as `pktwarp_verify_*` and in the run summary.

use std::sync::atomic::Ordering::{self, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use crate::burst::Burst;
use crate::counters::QueueCounters;
use crate::meta::PacketMeta;
use crate::stage::{BurstTables, Pipeline};
use crate::verdict::{DropReason, Verdict};
use pktwarp_core::abi;

use super::{compare_chunk, to_abi, Expected, GpuChunk, Tally};

/// Batches of mismatching frames queued for the slow path at most (one batch per checked burst).
pub const CAPTURE_QUEUE: usize = 8;

/// Mismatch lines logged per run at most (the counters keep counting).
const LOG_LINES: u64 = 20;

/// What the verifier did, read by the metrics and the summary; and whether it is busy.
#[derive(Debug, Default)]
pub struct VerifyBoard {
    /// The sampling period (`verify.sample`; 0: off).
    pub sample: AtomicU64,
    pub sampled_bursts: AtomicU64,
    /// Frames of the sampled bursts: what `pktwarp_verify_sampled_total` counts.
    pub sampled_frames: AtomicU64,
    /// Frames whose result differs from the reference's.
    pub mismatch_frames: AtomicU64,
    /// Sampled bursts whose counters differ from the reference's.
    pub counter_mismatches: AtomicU64,
    /// Bursts due for a sample while the verifier was busy with the last one.
    pub skipped_busy: AtomicU64,
    /// Mismatching frames handed to the slow path, and those that were not (queue full, or
    /// no `output.to_host`).
    pub captured_frames: AtomicU64,
    pub capture_dropped: AtomicU64,
    busy: AtomicBool,
    logged: AtomicU64,
}

/// The verifier's counts in the run summary (and its JSON).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerifySummary {
    pub sample: u64,
    pub sampled_bursts: u64,
    pub sampled_frames: u64,
    pub mismatch_frames: u64,
    pub counter_mismatches: u64,
    pub skipped_busy: u64,
    pub captured_frames: u64,
    pub capture_dropped: u64,
}

impl VerifyBoard {
    pub fn new(sample: u64) -> Arc<VerifyBoard> {
        let b = VerifyBoard::default();
        b.sample.store(sample, Relaxed);
        Arc::new(b)
    }

    /// The counts; `None` when sampling is off.
    pub fn summary(&self) -> Option<VerifySummary> {
        let sample = self.sample.load(Relaxed);
        (sample > 0).then(|| VerifySummary {
            sample,
            sampled_bursts: self.sampled_bursts.load(Relaxed),
            sampled_frames: self.sampled_frames.load(Relaxed),
            mismatch_frames: self.mismatch_frames.load(Relaxed),
            counter_mismatches: self.counter_mismatches.load(Relaxed),
            skipped_busy: self.skipped_busy.load(Relaxed),
            captured_frames: self.captured_frames.load(Relaxed),
            capture_dropped: self.capture_dropped.load(Relaxed),
        })
    }

    /// Takes the verifier for one burst: false when it is still on the last one.
    fn try_take(&self) -> bool {
        self.busy
            .compare_exchange(false, true, Ordering::Acquire, Relaxed)
            .is_ok()
    }

    fn release(&self) {
        self.busy.store(false, Ordering::Release);
    }
}

/// The counters one burst moved on its queue (`QueueCounters::stage_snapshot` after minus
/// before), with the drops the ingest and TX threads count left out (they are not the burst's
/// and move concurrently).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BurstCounts(Vec<u64>);

impl BurstCounts {
    fn read(c: &QueueCounters) -> BurstCounts {
        let mut v = c.stage_snapshot();
        let drops = v.len() - DropReason::COUNT;
        for r in [
            DropReason::RingFull,
            DropReason::SteeringDrop,
            DropReason::TxError,
            DropReason::TxHorizon,
        ] {
            v[drops + r as usize] = 0;
        }
        BurstCounts(v)
    }

    fn since(self, before: &BurstCounts) -> BurstCounts {
        let d = self.0.iter().zip(&before.0);
        BurstCounts(d.map(|(a, b)| a.wrapping_sub(*b)).collect())
    }
}

/// One sampled burst and what the executor made of it.
pub struct Sample {
    pub queue: usize,
    /// The frames as the executor received them.
    pub input: Burst,
    /// The tables the executor ran the burst with.
    pub tables: BurstTables,
    /// The executor's verdicts, in ABI form.
    pub verdicts: Vec<abi::Verdict>,
    /// The executor's metadata, when it keeps it.
    pub metas: Option<Vec<PacketMeta>>,
    /// The frames as the executor left them, when the pipeline rewrites.
    pub output: Option<Burst>,
    /// Which frames of `output` the executor sent (the GPU's TX ring names them; a dropped
    /// frame's bytes are not compared); `None`: every frame is compared.
    pub output_sent: Option<Vec<bool>>,
    /// The counters the burst moved, and the queue's number of rule-hit counters.
    pub counts: Option<(BurstCounts, usize)>,
}

/// A burst being sampled on a worker: taken before the pipeline runs on it.
pub struct Pending {
    input: Burst,
    tables: BurstTables,
    before: BurstCounts,
}

impl Pending {
    /// The tables the burst must run with.
    pub fn tables(&self) -> &BurstTables {
        &self.tables
    }
}

/// A worker's end of the verifier: its sampling count and the hand-off.
pub struct VerifyTap {
    period: u64,
    seen: u64,
    board: Arc<VerifyBoard>,
    tx: SyncSender<Sample>,
}

impl VerifyTap {
    pub fn new(period: u64, board: Arc<VerifyBoard>, tx: SyncSender<Sample>) -> VerifyTap {
        VerifyTap {
            period: period.max(1),
            seen: 0,
            board,
            tx,
        }
    }

    /// Counts one burst: true when it is due (the 1st, then one in `period`) and the verifier
    /// was free, and is now taken for it (handed a sample, or [`VerifyTap::defer`]red).
    pub fn due(&mut self) -> bool {
        self.seen += 1;
        if (self.seen - 1) % self.period != 0 {
            return false;
        }
        if !self.board.try_take() {
            self.board.skipped_busy.fetch_add(1, Relaxed);
            return false;
        }
        true
    }

    /// The burst [`VerifyTap::due`] took cannot be sampled (the executor's tables are being
    /// swapped): frees the verifier and makes the next burst due instead.
    pub fn defer(&mut self) {
        self.seen -= 1;
        self.board.release();
    }

    /// The burst last counted by [`VerifyTap::due`] (and not taken) was not run after all: it
    /// comes again (a full GPU ring under `on_full: wait`) and counts once.
    pub fn uncount(&mut self) {
        self.seen = self.seen.saturating_sub(1);
    }

    /// Called before the pipeline runs on `burst`: when this burst is due (the 1st, then one
    /// in `period`) and the verifier is free, copies it and loads the tables it must run with.
    pub fn begin(
        &mut self,
        pipeline: &Pipeline,
        burst: &Burst,
        c: &QueueCounters,
    ) -> Option<Pending> {
        if !self.due() {
            return None;
        }
        Some(Pending {
            input: burst.clone(),
            tables: pipeline.load_tables(),
            before: BurstCounts::read(c),
        })
    }

    /// Called after the pipeline ran on the pending burst: hands it with the executor's
    /// results to the verifier (never waiting).
    #[allow(clippy::too_many_arguments)]
    pub fn finish(
        &self,
        p: Pending,
        queue: usize,
        pipeline: &Pipeline,
        burst: &Burst,
        metas: &[PacketMeta],
        verdicts: &[Verdict],
        c: &QueueCounters,
    ) {
        let counts = BurstCounts::read(c).since(&p.before);
        let s = Sample {
            queue,
            input: p.input,
            tables: p.tables,
            verdicts: verdicts.iter().map(to_abi).collect(),
            metas: Some(metas.to_vec()),
            output: pipeline.rewrites().then(|| burst.clone()),
            output_sent: None,
            counts: Some((counts, c.rule_hits.len())),
        };
        self.hand_over(s);
    }

    /// Hands a sample of the burst [`VerifyTap::due`] took to the verifier (never waiting).
    pub fn hand_over(&self, s: Sample) {
        match self.tx.try_send(s) {
            Ok(()) => {}
            // The verifier has gone (it never refuses while taken): the sample is lost.
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.board.skipped_busy.fetch_add(1, Relaxed);
                self.board.release();
            }
        }
    }
}

/// A run's verifier parts, all `None` with sampling off: the sender each worker's tap clones,
/// the verifier with its receiver (for the `pw-verify` thread), and the receiving end of the
/// captures (with a slow path only).
pub struct VerifyWiring {
    pub taps: Option<SyncSender<Sample>>,
    pub verifier: Option<(Verifier, Receiver<Sample>)>,
    pub capture: Option<Receiver<Burst>>,
}

impl VerifyWiring {
    /// `period` 0: off. `slow`: the run has a slow path for the captures.
    pub fn new(
        period: u64,
        pipeline: &Arc<Pipeline>,
        board: &Arc<VerifyBoard>,
        slow: bool,
    ) -> VerifyWiring {
        if period == 0 {
            return VerifyWiring {
                taps: None,
                verifier: None,
                capture: None,
            };
        }
        // One sample at a time: the board's busy flag admits one, this channel holds it.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Sample>(1);
        let (cap_tx, cap_rx) = std::sync::mpsc::sync_channel::<Burst>(CAPTURE_QUEUE);
        let v = Verifier::new(
            Arc::clone(pipeline),
            Arc::clone(board),
            slow.then_some(cap_tx),
        );
        VerifyWiring {
            taps: Some(tx),
            verifier: Some((v, rx)),
            capture: slow.then_some(cap_rx),
        }
    }
}

/// The `pw-verify` thread's side.
pub struct Verifier {
    pipeline: Arc<Pipeline>,
    board: Arc<VerifyBoard>,
    /// Mismatching frames to the slow path (None: no `output.to_host`).
    capture: Option<SyncSender<Burst>>,
}

impl Verifier {
    pub fn new(
        pipeline: Arc<Pipeline>,
        board: Arc<VerifyBoard>,
        capture: Option<SyncSender<Burst>>,
    ) -> Verifier {
        Verifier {
            pipeline,
            board,
            capture,
        }
    }

    /// Checks samples until every tap is gone.
    pub fn run(&self, rx: Receiver<Sample>) {
        while let Ok(s) = rx.recv() {
            self.check(&s);
            self.board.release();
        }
    }

    /// Re-runs one sample on the reference and counts, logs and captures what differs;
    /// returns the indexes of the frames that differ.
    pub fn check(&self, s: &Sample) -> Vec<usize> {
        let n = s.input.len();
        let rules = s.counts.as_ref().map_or(0, |(_, r)| *r);
        let scratch = QueueCounters::new(self.pipeline.stages.len(), rules);
        let mut reference = s.input.clone();
        let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
        self.pipeline.run_burst_mut_with(
            &mut reference,
            &mut metas,
            &mut verdicts,
            &scratch,
            &s.tables,
        );
        let keep_meta = s.metas.is_some();
        let want = Expected {
            metas: if keep_meta { metas } else { Vec::new() },
            verdicts: verdicts.iter().map(to_abi).collect(),
        };
        let seen = vec![true; n];
        let got = GpuChunk {
            verdicts: &s.verdicts,
            seen: &seen,
            metas: s.metas.as_deref(),
            bulk: None,
        };
        let mut bad = vec![false; n];
        let mut tally = Tally::default();
        compare_chunk(&s.input, 0, &want, &got, &mut tally, |m| {
            let i = match m {
                super::Mismatch::NoVerdict { index }
                | super::Mismatch::Meta { index, .. }
                | super::Mismatch::Verdict { index, .. }
                | super::Mismatch::Bulk { index, .. } => *index as usize,
            };
            if let Some(b) = bad.get_mut(i) {
                *b = true;
            }
            self.log(s.queue, &m.to_string());
        });
        if let Some(out) = &s.output {
            let sent = |i: usize| {
                s.output_sent
                    .as_ref()
                    .is_none_or(|m| m.get(i).copied().unwrap_or(false))
            };
            for (i, b) in bad.iter_mut().enumerate().filter(|(i, _)| sent(*i)) {
                let (x, y) = (out.frame(i), reference.frame(i));
                if x != y {
                    *b = true;
                    self.log(
                        s.queue,
                        &format!(
                            "  frame {i}: rewritten bytes differ: executor {} reference {}",
                            super::hex(&x[..x.len().min(64)]),
                            super::hex(&y[..y.len().min(64)])
                        ),
                    );
                }
            }
        }
        if let Some((exec, _)) = &s.counts {
            let refc = BurstCounts::read(&scratch);
            if *exec != refc {
                self.board.counter_mismatches.fetch_add(1, Relaxed);
                self.log(
                    s.queue,
                    &format!(
                        "  burst counters differ: executor {:?} reference {:?}",
                        exec.0, refc.0
                    ),
                );
            }
        }
        let bad: Vec<usize> = (0..n).filter(|i| bad[*i]).collect();
        self.board.sampled_bursts.fetch_add(1, Relaxed);
        self.board.sampled_frames.fetch_add(n as u64, Relaxed);
        self.board
            .mismatch_frames
            .fetch_add(bad.len() as u64, Relaxed);
        self.capture(s, &bad);
        bad
    }

    /// The mismatching frames, as received, to the slow path; counted either way.
    fn capture(&self, s: &Sample, bad: &[usize]) {
        if bad.is_empty() {
            return;
        }
        let k = bad.len() as u64;
        let mut frames = Burst::default();
        for &i in bad {
            if let Some(d) = s.input.descs.get(i) {
                frames.push(s.input.frame(i), *d);
            }
        }
        let sent = self
            .capture
            .as_ref()
            .is_some_and(|c| c.try_send(frames).is_ok());
        let counter = if sent {
            &self.board.captured_frames
        } else {
            &self.board.capture_dropped
        };
        counter.fetch_add(k, Relaxed);
    }

    /// One mismatch line to the log, while the run's budget of lines lasts.
    fn log(&self, queue: usize, line: &str) {
        let n = self.board.logged.fetch_add(1, Relaxed);
        if n < LOG_LINES {
            tracing::warn!(
                event = "verify_mismatch",
                queue,
                "verify: queue {queue}:{line}"
            );
        } else if n == LOG_LINES {
            tracing::warn!(
                event = "verify_mismatch",
                "verify: more mismatches; see pktwarp_verify_mismatch_total"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::{RxPort, RxStatus};

    fn frames() -> Burst {
        let g = crate::port::gen::GenOptions {
            count: Some(256),
            malformed_ratio: 0.05,
            flows: Some(crate::port::gen::FlowOptions::default()),
            ..Default::default()
        };
        let mut rx = crate::port::gen::GenRx::new(&g, 0).expect("generator");
        let mut b = Burst::default();
        while !matches!(rx.rx_burst(&mut b, 512).expect("gen"), RxStatus::End) {}
        b
    }

    /// One burst through a tap, as a worker runs it: the sample the verifier gets.
    fn sampled(p: &Pipeline, board: &Arc<VerifyBoard>) -> Sample {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let mut tap = VerifyTap::new(1, Arc::clone(board), tx);
        let c = QueueCounters::new(p.stages.len(), p.rule_count());
        let mut b = frames();
        let pending = tap.begin(p, &b, &c).expect("the first burst is sampled");
        // The verifier is taken until this sample is checked: the next one is skipped.
        assert!(tap.begin(p, &b, &c).is_none());
        assert_eq!(board.skipped_busy.load(Relaxed), 1);
        let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
        p.run_burst_mut_with(&mut b, &mut metas, &mut verdicts, &c, pending.tables());
        tap.finish(pending, 0, p, &b, &metas, &verdicts, &c);
        rx.try_recv().expect("the sample was handed over")
    }

    /// A reload between a burst and its check is no mismatch (the burst's own tables are
    /// used); checked against the new tables, the same burst differs.
    #[test]
    fn the_check_uses_the_tables_the_burst_ran_with() {
        let p = Arc::new(crate::stage::test_inline_filter_pipeline());
        let board = VerifyBoard::new(1);
        let s = sampled(&p, &board);
        let dir = std::env::temp_dir().join(format!("pktwarp-sampler-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rules = dir.join("drop-all.yaml");
        std::fs::write(&rules, "rules:\n  - name: all\n    action: drop\n").unwrap();
        let all = crate::stage::acl::AclStage::load(
            &rules,
            flow_rules::acl::RuleFormat::Yaml,
            crate::verdict::Action::Pass,
        )
        .unwrap();
        p.reload_acl(all).unwrap();
        let v = Verifier::new(Arc::clone(&p), Arc::clone(&board), None);
        assert!(v.check(&s).is_empty());
        board.release();
        assert_eq!(board.mismatch_frames.load(Relaxed), 0);
        assert_eq!(board.counter_mismatches.load(Relaxed), 0);
        let mut stale = s;
        stale.tables = p.load_tables();
        let bad = v.check(&stale);
        assert!(!bad.is_empty());
        assert_eq!(board.mismatch_frames.load(Relaxed), bad.len() as u64);
        assert_eq!(board.counter_mismatches.load(Relaxed), 1);
        // No slow path: every mismatching frame counted as not captured.
        assert_eq!(board.capture_dropped.load(Relaxed), bad.len() as u64);
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Each compared field flags its frame: the out port, the metadata, the rewritten bytes;
    /// the mismatching frames are queued for the slow path as received.
    #[test]
    fn each_difference_flags_its_frame() {
        let p = Arc::new(crate::stage::test_inline_filter_pipeline());
        let board = VerifyBoard::new(1);
        let (cap_tx, cap_rx) = std::sync::mpsc::sync_channel(CAPTURE_QUEUE);
        let v = Verifier::new(Arc::clone(&p), Arc::clone(&board), Some(cap_tx));
        let mut s = sampled(&p, &board);
        assert!(v.check(&s).is_empty());
        s.verdicts[3].out_port = 9;
        if let Some(m) = s.metas.as_mut() {
            m[7].ip_ttl ^= 1;
        }
        let mut out = s.input.clone();
        let (d, buf) = out.frames_mut().nth(11).unwrap();
        assert!(d.len > 20);
        buf[20] ^= 0xff;
        s.output = Some(out);
        assert_eq!(v.check(&s), vec![3, 7, 11]);
        let got = cap_rx.try_recv().expect("captured");
        assert_eq!(got.len(), 3);
        assert_eq!(got.frame(1), s.input.frame(7));
        assert_eq!(board.captured_frames.load(Relaxed), 3);
        assert_eq!(board.sampled_bursts.load(Relaxed), 2);
        assert_eq!(board.sampled_frames.load(Relaxed), 2 * s.input.len() as u64);
    }
}
