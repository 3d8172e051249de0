//! The sampling verifier (`verify: { sample: N }`, `verify::sampler`) on the GPU
//! executor. A queue's thread copies one burst in N as it submits it (the frames and
//! descriptors as fed, before the GPU rewrites anything) with the tables the GPU runs it with;
//! at reap it hands the copy and what the GPU returned (verdicts; for a rewriting pipeline the
//! frames its TX ring names, as the stages left them) to the `pw-verify` thread, which re-runs
//! it on the reference and compares.
//!
//! Tables: the GPU classifies a burst with the tables published before its submit. The
//! publishers mark each publish in [`PublishedTables`] (a sequence number, odd while one is
//! under way, and the generations published), and a burst is sampled only when no publish
//! overlapped its submit and the pipeline's tables loaded for it are the ones published; else
//! the next burst is sampled instead (a reload defers a sample by a burst, never skips one).
//!
//! Not compared on the GPU: the metadata (the rings return none) and the burst's counters
//! (the host side counts them from the very verdicts compared; a composed pipeline's stage
//! counters are summed on the device for all bursts, with no per-burst delta to read). Bursts
//! whose frames the GPU reads where they lie (received into GPU memory, or a capture by
//! reference) have no copy in the burst and are not sampled.

use std::sync::atomic::Ordering::{Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use super::device::TxView;
use super::host::HostSpec;
use super::reload::{AclPublisher, ParamsPublisher};
use super::tx::Captures;
use crate::burst::Burst;
use crate::executor::gpu::abi::Verdict;
use crate::stage::{BurstTables, Pipeline};
use crate::threads::spawn_named;
use crate::verify::sampler::{Sample, VerifyBoard, VerifyTap, VerifyWiring};

/// The verifier's parts for one run of the host side; idle with sampling off.
pub(crate) struct HostVerify {
    wiring: VerifyWiring,
    record: Option<Arc<PublishedTables>>,
    period: u64,
    pipeline: Arc<Pipeline>,
    board: Arc<VerifyBoard>,
    acl_on: bool,
    composed: bool,
    /// Set once the verifier checked its last sample (at once with sampling off).
    done: AtomicBool,
}

impl HostVerify {
    /// `slow`: the run has a slow path for the mismatching frames.
    pub fn new(spec: &HostSpec<'_>, board: &Arc<VerifyBoard>, slow: bool) -> HostVerify {
        let (period, pipeline) = (spec.verify.0, Arc::clone(&spec.verify.1));
        let wiring = VerifyWiring::new(period, &pipeline, board, slow);
        let on = wiring.taps.is_some();
        HostVerify {
            record: on.then(|| PublishedTables::new(spec.acl_generation, spec.params_generation)),
            done: AtomicBool::new(!on),
            wiring,
            period,
            pipeline,
            board: Arc::clone(board),
            acl_on: spec.acl_on,
            composed: spec.composed,
        }
    }

    /// The publishers of reloaded tables, which tell the taps what the GPU has.
    pub fn publishers(&self, spec: &HostSpec<'_>) -> (AclPublisher, ParamsPublisher) {
        (
            AclPublisher::new(spec.acl_on, spec.acl_generation).recording(self.record.clone()),
            ParamsPublisher::new(spec.composed, spec.params_generation)
                .recording(self.record.clone()),
        )
    }

    /// Queue `q`'s tap, with sampling on.
    pub fn tap(&self, q: usize) -> Option<GpuTap> {
        let (tx, record) = (self.wiring.taps.as_ref()?, self.record.as_ref()?);
        let tap = VerifyTap::new(self.period, Arc::clone(&self.board), tx.clone());
        let p = Arc::clone(&self.pipeline);
        let r = Arc::clone(record);
        Some(GpuTap::new(tap, p, q, r, self.acl_on, self.composed))
    }

    /// After the taps are handed out: starts `pw-verify` (it ends after the last queue thread,
    /// which hold the only senders left). What the TX thread takes: the captures, the flag.
    pub fn start<'s>(&'s mut self, s: &'s std::thread::Scope<'s, '_>) -> Captures<'s> {
        let HostVerify { wiring, done, .. } = self;
        let done: &'s AtomicBool = done;
        wiring.taps = None;
        if let Some((v, rx)) = wiring.verifier.take() {
            spawn_named(s, "pw-verify".to_string(), move || {
                // Set on return, or on a panic of the reference, so the TX thread never waits
                // for a verifier that is gone.
                let _done = SetOnDrop(done);
                // Its captures are queued by the time it returns: the TX thread takes them.
                v.run(rx);
            });
        }
        (wiring.capture.take(), done)
    }
}

/// Sets its flag when dropped.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Release);
    }
}

/// Which tables the GPU has, as the publishers left word.
#[derive(Debug, Default)]
pub(crate) struct PublishedTables {
    /// Odd while a publish is under way; +2 per publish.
    seq: AtomicU64,
    acl: AtomicU64,
    params: AtomicU64,
}

impl PublishedTables {
    /// The GPU starts with ACL generation `acl` and stage-parameter generation `params`.
    pub fn new(acl: u64, params: u64) -> Arc<PublishedTables> {
        Arc::new(PublishedTables {
            seq: AtomicU64::new(0),
            acl: AtomicU64::new(acl),
            params: AtomicU64::new(params),
        })
    }

    /// A publish begins: bursts submitted from now on may run with either tables.
    pub fn begin(&self) {
        self.seq.fetch_add(1, SeqCst);
    }

    /// The GPU has ACL generation `g` for every burst submitted from now on.
    pub fn end_acl(&self, g: u64) {
        self.acl.store(g, SeqCst);
        self.seq.fetch_add(1, SeqCst);
    }

    /// The GPU has stage-parameter generation `g` for every burst submitted from now on.
    pub fn end_params(&self, g: u64) {
        self.params.store(g, SeqCst);
        self.seq.fetch_add(1, SeqCst);
    }

    /// (sequence, ACL generation, parameter generation), or `None` during a publish.
    fn read(&self) -> Option<(u64, u64, u64)> {
        let s = self.seq.load(SeqCst);
        let (a, p) = (self.acl.load(SeqCst), self.params.load(SeqCst));
        (s % 2 == 0 && self.seq.load(SeqCst) == s).then_some((s, a, p))
    }
}

/// A burst copied at submit: its input and the tables the GPU runs it with.
pub(crate) struct Taken {
    input: Burst,
    tables: BurstTables,
    seq: u64,
}

/// A queue thread's end of the verifier on the GPU executor.
pub(crate) struct GpuTap {
    tap: VerifyTap,
    pipeline: Arc<Pipeline>,
    queue: usize,
    record: Arc<PublishedTables>,
    /// The GPU classifies with an acl stage / runs stage parameter blocks: their generations
    /// must be the published ones.
    acl_on: bool,
    composed: bool,
    /// The sampled burst on the GPU, by its sequence number.
    on_gpu: Option<(u32, Taken)>,
}

impl GpuTap {
    pub fn new(
        tap: VerifyTap,
        pipeline: Arc<Pipeline>,
        queue: usize,
        record: Arc<PublishedTables>,
        acl_on: bool,
        composed: bool,
    ) -> GpuTap {
        GpuTap {
            tap,
            pipeline,
            queue,
            record,
            acl_on,
            composed,
            on_gpu: None,
        }
    }

    /// Submits `burst` (frames in host memory) with `submit`, copying it first when it is due.
    pub fn submit<E>(
        &mut self,
        burst: &Burst,
        submit: impl FnOnce(&Burst) -> Result<u32, E>,
    ) -> Result<u32, E> {
        let taken = self.before_submit(burst);
        let r = submit(burst);
        match (taken, r.as_ref().ok().copied()) {
            (Some(t), seq) => self.after_submit(t, seq),
            (None, None) => self.tap.uncount(),
            (None, Some(_)) => {}
        }
        r
    }

    /// Before `burst` (frames in host memory) is submitted: a copy of it when it is due, the
    /// verifier free and the GPU's tables known.
    fn before_submit(&mut self, burst: &Burst) -> Option<Taken> {
        let pipeline = &*self.pipeline;
        if !self.tap.due() {
            return None;
        }
        let Some((seq, acl, params)) = self.record.read() else {
            self.tap.defer();
            return None;
        };
        let tables = pipeline.load_tables();
        let stale = (self.acl_on && tables.acl_generation().is_some_and(|g| g != acl))
            || (self.composed && pipeline.params_generation() != params);
        if stale {
            // Reloaded, not yet on the GPU.
            self.tap.defer();
            return None;
        }
        Some(Taken {
            input: burst.clone(),
            tables,
            seq,
        })
    }

    /// After the submit: `Some(seq)`, the GPU took it as burst `seq`; `None`, it did not.
    fn after_submit(&mut self, t: Taken, seq: Option<u32>) {
        match seq {
            // No publish overlapped the submit: the burst runs with the tables taken.
            Some(s) if self.record.read().is_some_and(|(r, _, _)| r == t.seq) => {
                self.on_gpu = Some((s, t));
            }
            _ => self.tap.defer(),
        }
    }

    /// A reaped burst: when it is the sampled one, hands it with the GPU's results to the
    /// verifier. `rewrites`: the frames the TX ring names are compared as the GPU left them.
    pub fn reaped(&mut self, seq: u32, v: &[Verdict], tx: Option<&TxView<'_>>, rewrites: bool) {
        let Some((want, _)) = &self.on_gpu else {
            return;
        };
        if *want != seq {
            // A restart gave the sampled burst up (reaped ones come in submit order).
            if (seq.wrapping_sub(*want) as i32) > 0 {
                self.on_gpu = None;
                self.tap.defer();
            }
            return;
        }
        let Some((_, t)) = self.on_gpu.take() else {
            return;
        };
        let (output, output_sent) = match tx {
            Some(tx) if rewrites => {
                let (o, s) = gpu_output(&t.input, tx);
                (Some(o), Some(s))
            }
            _ => (None, None),
        };
        self.tap.hand_over(Sample {
            queue: self.queue,
            input: t.input,
            tables: t.tables,
            verdicts: v.to_vec(),
            metas: None,
            output,
            output_sent,
            counts: None,
        });
    }
}

/// The frames as the GPU left them (the TX ring's descriptors into the slot's data area, laid
/// out as the burst's own data), and which frames the ring names.
fn gpu_output(input: &Burst, tx: &TxView<'_>) -> (Burst, Vec<bool>) {
    let mut out = input.clone();
    let mut sent = vec![false; input.len()];
    for d in tx.descs {
        let f = usize::from(d.frame);
        let r = d.offset as usize..d.offset as usize + d.len as usize;
        let (Some(src), Some(desc)) = (tx.data.get(r.clone()), out.descs.get_mut(f)) else {
            continue;
        };
        desc.offset = d.offset;
        desc.len = d.len;
        if out.data.len() < r.end {
            out.data.resize(r.end, 0);
        }
        out.data[r].copy_from_slice(src);
        sent[f] = true;
    }
    (out, sent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::sampler::VerifyBoard;
    use std::sync::atomic::Ordering::Relaxed;

    fn burst() -> Burst {
        let mut b = Burst::default();
        for i in 0..4u8 {
            b.push(&[i; 64], crate::burst::FrameDesc::default());
        }
        b
    }

    /// A reload not yet published defers the sample to the next burst (the one after is
    /// sampled once the GPU has the tables), and a publish during the submit drops it too.
    #[test]
    fn a_sample_waits_for_the_gpu_to_have_the_tables() {
        let p = Arc::new(crate::stage::test_inline_filter_pipeline());
        let board = VerifyBoard::new(100);
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let record = PublishedTables::new(0, p.params_generation());
        let tap = VerifyTap::new(100, Arc::clone(&board), tx);
        let mut g = GpuTap::new(tap, Arc::clone(&p), 0, Arc::clone(&record), true, false);
        let b = burst();
        let rules = flow_rules::acl::RuleFormat::Yaml;
        let dir = std::env::temp_dir().join(format!("pktwarp-gpu-verify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("all.yaml");
        std::fs::write(&path, "rules:\n  - name: all\n    action: drop\n").unwrap();
        let acl = crate::stage::acl::AclStage::load(&path, rules, crate::verdict::Action::Pass);
        p.reload_acl(acl.unwrap()).unwrap();
        // Generation 1 in the pipeline, 0 on the GPU: no sample, the verifier free.
        assert!(g.before_submit(&b).is_none());
        assert!(g.before_submit(&b).is_none());
        assert_eq!(board.skipped_busy.load(Relaxed), 0);
        record.begin();
        assert!(g.before_submit(&b).is_none(), "a publish under way");
        record.end_acl(1);
        let t = g
            .before_submit(&b)
            .expect("due, and the GPU has the tables");
        assert_eq!(t.tables.acl_generation(), Some(1));
        // A publish between the copy and the submit's end: given up, the next one due.
        record.begin();
        record.end_acl(1);
        g.after_submit(t, Some(0));
        assert!(g.on_gpu.is_none());
        let t = g.before_submit(&b).expect("due again");
        g.after_submit(t, Some(7));
        // Only burst 7 is handed over, with the GPU's verdicts.
        let v = vec![Verdict::default(); b.len()];
        g.reaped(6, &v, None, false);
        assert!(rx.try_recv().is_err());
        g.reaped(7, &v, None, false);
        let s = rx.try_recv().expect("the sample");
        assert_eq!((s.input.len(), s.verdicts.len()), (4, 4));
        assert!(s.metas.is_none() && s.counts.is_none() && s.output.is_none());
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A burst the GPU ring refused (retried under `on_full: wait`) counts once: sampling stays
    /// one burst in N however often a full ring sends one back.
    #[test]
    fn a_refused_submit_counts_once() {
        let p = Arc::new(crate::stage::test_inline_filter_pipeline());
        let board = VerifyBoard::new(2);
        let (tx, _rx) = std::sync::mpsc::sync_channel(1);
        let tap = VerifyTap::new(2, Arc::clone(&board), tx);
        let mut g = GpuTap::new(tap, p, 0, PublishedTables::new(0, 0), true, false);
        let b = burst();
        assert_eq!(g.submit(&b, |_| Ok::<u32, ()>(0)), Ok(0));
        assert!(g.on_gpu.is_some(), "the 1st burst is sampled");
        for _ in 0..5 {
            assert_eq!(g.submit(&b, |_| Err(())), Err(()));
        }
        assert_eq!(g.submit(&b, |_| Ok::<u32, ()>(1)), Ok(1));
        assert_eq!(
            board.skipped_busy.load(Relaxed),
            0,
            "the 2nd burst is not due"
        );
        assert_eq!(g.submit(&b, |_| Ok::<u32, ()>(2)), Ok(2));
        assert_eq!(
            board.skipped_busy.load(Relaxed),
            1,
            "the 3rd is, the verifier busy"
        );
    }

    /// The rewritten frames are read from where the TX ring names them; frames it does not
    /// name are marked unsent (not compared).
    #[test]
    fn the_output_is_what_the_tx_ring_names() {
        let b = burst();
        let mut data = b.data.clone();
        data[64 + 3] = 0xAB;
        let d1 = b.descs[1];
        let descs = [crate::executor::gpu::abi::TxDesc {
            offset: d1.offset,
            len: d1.len - 4,
            frame: 1,
            ..Default::default()
        }];
        let tx = TxView {
            descs: &descs,
            data: &data,
            times: &[],
        };
        let (out, sent) = gpu_output(&b, &tx);
        assert_eq!(sent, [false, true, false, false]);
        assert_eq!(out.frame(1).len(), 60);
        assert_eq!(out.frame(1)[3], 0xAB);
        assert_eq!(out.frame(0), b.frame(0));
    }

    /// A sampled burst a restart gave up frees the verifier once a later burst is reaped.
    #[test]
    fn a_lost_sample_frees_the_verifier() {
        let p = Arc::new(crate::stage::test_inline_filter_pipeline());
        let board = VerifyBoard::new(1);
        let (tx, _rx) = std::sync::mpsc::sync_channel(1);
        let tap = VerifyTap::new(1, Arc::clone(&board), tx);
        let mut g = GpuTap::new(tap, p, 0, PublishedTables::new(0, 0), true, false);
        let t = g.before_submit(&burst()).expect("due");
        g.after_submit(t, Some(3));
        assert!(g.before_submit(&burst()).is_none());
        g.reaped(4, &[], None, false);
        assert!(g.on_gpu.is_none());
        assert!(g.before_submit(&burst()).is_some(), "free again");
    }
}
