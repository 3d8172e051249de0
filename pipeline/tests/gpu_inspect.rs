//! On a GPU: the `inspect` stage on the GPU executor equals the CPU executor frame by frame:
//! `parse -> inspect -> count` and `parse -> conntrack -> inspect -> count` over generated
//! traffic with planted payloads (VLAN, IPv6 with extension headers, VXLAN, GTP-U, fragments,
//! cut frames), the fixed rule set and property-generated ones, and a generated set with
//! flowbits, noalert, thresholds and detection_filters (the per-queue state resolved in frame
//! order): every frame's action and drop reason, the stage's counters, its state counters and
//! every rule's hits read back from the device buffer, in
//! every mode and ring placement, bursts of 32 and 256, and the fixed set with 1 CTA a burst on
//! device rings and 4 on mapped ones (the CTA split apart from the placement). Needs a CUDA GPU
//! (listed in docs/hardware-only-tests.md); `scripts/gpu-suite.sh` runs it (check
//! `inspect-gpu`), and scripts/gpu-inspect-check.sh compares the whole daemon with ET Open.
//!
//! On a difference the message says where and what: every differing frame counted by queue
//! and burst, the first ones with their burst, ring slot and index in it, the CPU's and the
//! GPU's verdict words, the CPU's rule hits on the frame alone, whether the GPU's metadata
//! (what its `parse` saw) equals the CPU's, and the frame's first bytes. A burst that does not
//! finish fails after a bounded wait naming it (its queue, sequence number, slot, rule-set
//! epoch) and the queue's kernel state, instead of hanging.

mod gpu_common;
mod inspect_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use inspect_common::state::state_rules;
use inspect_common::{fixed_rules, pipeline, random_rules, rule_sids, scratch, sid_hits, traffic};
use pipeline::burst::{Burst, FrameDesc};
use pipeline::counters::QueueCounters;
use pipeline::internal::executor::gpu::{
    image_for_pipeline, GpuExecutor, GpuOptions, Mode, Placement,
};
use pipeline::stage::{Pipeline, Stage};

const QUEUES: usize = 2;
const RING_SLOTS: u32 = 8;
/// No burst finishing for this long fails the test (the kernel's idle timeout is 60 s: a
/// host call that blocked until it would show as a stall of about that long).
const STALL: Duration = Duration::from_secs(20);
/// Differing frames described one by one in a failure message.
const SHOWN: usize = 8;

/// One executor on the GPU at a time: the two tests would otherwise run at once (cargo's test
/// threads), two executors of one process sharing the primary context and its memory pool, so
/// a failure could be either's. `PKTWARP_GPU_INSPECT_PARALLEL=1` runs them at once again, to
/// tell a difference that needs two executors from one that does not.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> Option<std::sync::MutexGuard<'static, ()>> {
    if std::env::var_os("PKTWARP_GPU_INSPECT_PARALLEL").is_some_and(|v| v == "1") {
        return None;
    }
    Some(ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Runs `f`; its panic's first line when it failed (the whole message is printed as it
/// happens). The tests run every configuration so that one GPU run gives the whole matrix of
/// modes, placements, burst sizes and sets, then fail naming each one that differed.
fn failure(f: impl FnOnce()) -> Option<String> {
    let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).err()?;
    let msg = e
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into());
    Some(msg.lines().next().unwrap_or_default().to_string())
}

fn assert_none_failed(failed: &[String], runs: usize) {
    assert!(
        failed.is_empty(),
        "{} of {runs} runs failed (each one's whole message is above):\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The CPU executor's answer for one frame: (action, reason or 0xFF), its rule, its metadata.
#[derive(Clone)]
struct Want {
    action: u8,
    reason: u8,
    rule: u32,
    meta: Vec<u8>,
}

/// The GPU's answer for one frame and where it ran.
#[derive(Clone)]
struct Got {
    queue: usize,
    seq: u32,
    index: usize,
    /// action, drop_reason, out_port, rule, mark (`pw_verdict_out`).
    verdict: (u8, u8, u16, u32, u32),
    meta: Option<Vec<u8>>,
}

/// The CPU pipeline over `frames` in bursts of `burst`, frame by frame.
fn cpu_answers(p: &Pipeline, frames: &[(FrameDesc, Vec<u8>)], burst: usize) -> Vec<Want> {
    let c = QueueCounters::new(p.stages.len(), 0);
    gpu_common::cpu_answers(p, &c, frames, burst, |m, v| Want {
        action: v.action as u8,
        reason: v.reason.map_or(0xFF, |r| r as u8),
        rule: v.rule,
        meta: m.as_bytes().to_vec(),
    })
}

/// The state of `queue`'s kernel, for a failure message.
fn kernel_state(ex: &GpuExecutor, queue: usize) -> String {
    let Some((status, beat, polls)) = ex.queue_state(queue) else {
        return "no such queue".into();
    };
    let name = match status {
        0 => "not started",
        1 => "running",
        2 => "exited on the exit flag",
        3 => "exited after its idle timeout",
        4 => "stopped on a bad slot",
        _ => "unknown",
    };
    format!("kernel status {status} ({name}), heartbeat {beat}, empty polls {polls}")
}

/// Fails when no burst of `queue` finished for [`STALL`]: names the burst waited for.
struct Watch {
    last: Instant,
}

impl Watch {
    fn new() -> Watch {
        Watch {
            last: Instant::now(),
        }
    }

    fn check(&mut self, progressed: bool, stuck: impl FnOnce() -> String) {
        if progressed {
            self.last = Instant::now();
        } else if self.last.elapsed() > STALL {
            panic!("{} (no burst finished for {:?})", stuck(), STALL);
        }
    }
}

/// Runs every queue's frames through `ex` in bursts of `burst` (at most 6 in flight): each
/// frame's answer, by frame index.
fn gpu_answers(
    ex: &GpuExecutor,
    frames: &[(FrameDesc, Vec<u8>)],
    burst: usize,
    what: &str,
) -> Vec<Option<Got>> {
    let mut got: Vec<Option<Got>> = vec![None; frames.len()];
    for q in 0..QUEUES {
        let idx: Vec<usize> = (0..frames.len())
            .filter(|&i| frames[i].0.queue as usize == q)
            .collect();
        let bursts: Vec<&[usize]> = idx.chunks(burst).collect();
        let (mut done, mut next) = (0usize, 0usize);
        let mut watch = Watch::new();
        while done < bursts.len() {
            while next < bursts.len() && next - done < 6 {
                let mut b = Burst::default();
                for &i in bursts[next] {
                    let (d, f) = &frames[i];
                    b.push(f, *d);
                }
                ex.submit(q, &b).expect("submit");
                next += 1;
            }
            let n = ex
                .poll(q, |seq, v, m| {
                    for (j, &i) in bursts[seq as usize].iter().enumerate() {
                        got[i] = Some(Got {
                            queue: q,
                            seq,
                            index: j,
                            verdict: (
                                v[j].action,
                                v[j].drop_reason,
                                v[j].out_port,
                                v[j].rule,
                                v[j].mark,
                            ),
                            meta: m.map(|m| m[j].as_bytes().to_vec()),
                        });
                    }
                    done += 1;
                })
                .unwrap_or_else(|e| panic!("{what}: queue {q}: poll: {e:#}"));
            watch.check(n > 0, || {
                format!(
                    "{what}: queue {q}: burst {done} (slot {}, frames {:?}..) never finished: \
                     {next} of {} submitted, {} in flight; {}",
                    done as u32 % RING_SLOTS,
                    bursts[done].first(),
                    bursts.len(),
                    ex.in_flight(q),
                    kernel_state(ex, q)
                )
            });
        }
    }
    got
}

/// The CPU stage's hits (by sid) on frame `i` alone, on a fresh pipeline (a stateless set
/// gives the frame's own; after conntrack, without the flow's earlier frames).
fn frame_hits(
    fresh: &dyn Fn() -> Arc<Pipeline>,
    k: usize,
    f: &(FrameDesc, Vec<u8>),
) -> std::collections::BTreeMap<u32, u64> {
    let p = fresh();
    let _ = cpu_answers(&p, std::slice::from_ref(f), 1);
    let Stage::Custom(slot) = &p.stages[k] else {
        unreachable!("pipeline[{k}] is inspect")
    };
    sid_hits(slot)
}

/// Panics with a description of every frame whose GPU verdict (action, reason) differs from
/// the CPU's, or that no burst answered.
fn assert_same_verdicts(
    what: &str,
    frames: &[(FrameDesc, Vec<u8>)],
    want: &[Want],
    got: &[Option<Got>],
    fresh: &dyn Fn() -> Arc<Pipeline>,
    k: usize,
) {
    let bad: Vec<usize> = (0..frames.len())
        .filter(|&i| {
            got[i]
                .as_ref()
                .is_none_or(|g| (g.verdict.0, g.verdict.1) != (want[i].action, want[i].reason))
        })
        .collect();
    if bad.is_empty() {
        return;
    }
    // Per (queue, burst): how many differ, and whether every word of the burst's verdicts
    // is 0 (memory the kernel never wrote reads so; a pass it wrote says reason 0xFF).
    let mut per_burst = std::collections::BTreeMap::<(usize, u32), (usize, bool)>::new();
    for &i in &bad {
        if let Some(g) = &got[i] {
            let e = per_burst.entry((g.queue, g.seq)).or_insert((0, true));
            e.0 += 1;
        }
    }
    for g in got.iter().flatten() {
        if let Some(e) = per_burst.get_mut(&(g.queue, g.seq)) {
            e.1 &= g.verdict == (0, 0, 0, 0, 0);
        }
    }
    let mut msg = format!(
        "{what}: {} of {} frames differ (cpu vs gpu (action, reason)); by (queue, burst seq): \
         {:?} (count, every verdict word 0)\n",
        bad.len(),
        frames.len(),
        per_burst.iter().take(24).collect::<Vec<_>>()
    );
    for &i in bad.iter().take(SHOWN) {
        let w = &want[i];
        let (d, f) = &frames[i];
        msg += &format!(
            "  frame {i} (queue {}): cpu action {} reason {:#x} rule {:#x}, its rule hits alone \
             {:?}\n",
            d.queue,
            w.action,
            w.reason,
            w.rule,
            frame_hits(fresh, k, &frames[i])
        );
        match &got[i] {
            None => msg += "    gpu: no answer\n",
            Some(g) => {
                let (a, r, port, rule, mark) = g.verdict;
                msg += &format!(
                    "    gpu: burst {} slot {} index {}: action {a} reason {r:#x} out_port \
                     {port:#x} rule {rule:#x} mark {mark:#x}; metadata {}\n",
                    g.seq,
                    g.seq % RING_SLOTS,
                    g.index,
                    match &g.meta {
                        None => "not read".to_string(),
                        Some(m) if *m == w.meta => "equals the cpu's".to_string(),
                        Some(m) => format!(
                            "differs from byte {:?}",
                            m.iter().zip(&w.meta).position(|(a, b)| a != b)
                        ),
                    }
                );
            }
        }
        msg += &format!(
            "    frame ({} bytes): {:02x?}\n",
            f.len(),
            &f[..f.len().min(96)]
        );
    }
    panic!("{msg}");
}

fn check(
    fresh: &dyn Fn() -> Arc<Pipeline>,
    what: &str,
    mode: Mode,
    placement: Placement,
    burst: usize,
    burst_ctas: Option<u32>,
) {
    let p = fresh();
    let ctas = burst_ctas.map_or(String::new(), |k| format!(" / burst_ctas {k}"));
    let what = format!("{what}: {mode:?} / {placement:?} / bursts of {burst}{ctas}");
    let frames = traffic(7, 20_000);
    let k = p
        .stages
        .iter()
        .position(|s| s.name() == "inspect")
        .expect("inspect");
    // The CPU executor's answer, frame by frame (one queue's frames in arrival order).
    let want = cpu_answers(&p, &frames, burst);
    let Stage::Custom(slot) = &p.stages[k] else {
        panic!("pipeline[{k}] is inspect")
    };
    let cpu_counters: Vec<u64> = slot.counters().iter().take(5).map(|c| c.1).collect();
    let cpu_hits = sid_hits(slot);
    let sids = rule_sids(&p, k);
    let sec = slot.cpu().summary_section().expect("section");
    let cpu_state = ["flows_full", "trackers_full", "suppressed"]
        .map(|n| sec["state"][n].as_u64().expect("a state counter"));

    let image = image_for_pipeline(&p).expect("image");
    let pd = gpu_common::counting(true);
    let opts = GpuOptions {
        mode,
        placement,
        burst_size: burst as u32,
        ring_slots: RING_SLOTS,
        emit_meta: true,
        tagged: Some(false),
        burst_ctas,
        ..GpuOptions::default()
    };
    let mut ex = GpuExecutor::new(opts, pd, QUEUES, &image).expect("executor");
    ex.start().expect("start");
    let got = gpu_answers(&ex, &frames, burst, &what);
    // `want` is in chunk order over all frames; the CPU ran them in arrival order, as each
    // queue's bursts run on the GPU (the stage keeps no state across frames but conntrack's).
    assert_same_verdicts(&what, &frames, &want, &got, fresh, k);
    let snap = ex.counters().expect("counters");
    let mut gpu_counters = vec![0u64; 5];
    for q in &snap.stages {
        for (s, v) in gpu_counters.iter_mut().zip(&q[k].v[1..6]) {
            *s += v;
        }
    }
    assert_eq!(gpu_counters, cpu_counters, "{what}: inspect counters");
    let hits = ex.read_stage_buffer(k, 0).expect("hit buffer");
    let mut gpu_hits = std::collections::BTreeMap::new();
    let word = |i: usize| u64::from_le_bytes(hits[8 * i..8 * i + 8].try_into().unwrap());
    for (r, &sid) in sids.iter().enumerate() {
        let h = word(r);
        if h > 0 {
            *gpu_hits.entry(sid).or_insert(0u64) += h;
        }
    }
    assert_eq!(gpu_hits, cpu_hits, "{what}: rule hits by sid");
    let at = pktwarp_inspect::gpu::STATE_COUNTERS_AT / 8;
    let gpu_state = [word(at), word(at + 1), word(at + 2)];
    assert_eq!(
        gpu_state, cpu_state,
        "{what}: flows_full, trackers_full, suppressed"
    );
    assert_eq!(
        gpu_hits.values().sum::<u64>(),
        gpu_counters[1],
        "{what}: hits sum to alerts"
    );
    ex.shutdown().expect("shutdown");
}

#[test]
fn inspect_on_the_gpu_equals_the_cpu_frame_by_frame() {
    if pipeline::internal::testdata::no_gpu(
        file!(),
        "inspect_on_the_gpu_equals_the_cpu_frame_by_frame",
    ) {
        return;
    }
    let _one = one_at_a_time();
    let d = scratch("gpu");
    let fixed = d.join("fixed.rules");
    std::fs::write(&fixed, fixed_rules(true)).unwrap();
    let random = d.join("random.rules");
    std::fs::write(&random, random_rules(42, 200, true)).unwrap();
    // Flowbits, noalert, thresholds and detection_filters: the state resolved in frame order.
    let state = d.join("state.rules");
    std::fs::write(&state, state_rules(5, 60) + &random_rules(43, 40, true)).unwrap();
    let (mut failed, mut runs) = (Vec::new(), 0);
    for burst in [32, 256] {
        for mode in [Mode::Persistent, Mode::Launch] {
            for placement in [Placement::Mapped, Placement::Device] {
                // A fresh pipeline each time: the CPU's counters and conntrack's tables are
                // the run's.
                let sets: [(&str, &dyn Fn() -> Arc<Pipeline>); 4] = [
                    ("fixed", &|| pipeline(&fixed, false, "host")),
                    ("fixed + conntrack", &|| pipeline(&fixed, true, "none")),
                    ("random", &|| pipeline(&random, true, "mirror")),
                    ("state rules", &|| pipeline(&state, true, "host")),
                ];
                for (what, fresh) in sets {
                    runs += 1;
                    failed.extend(failure(|| check(fresh, what, mode, placement, burst, None)));
                }
            }
        }
    }
    // The CTA split apart from the ring placement: with `inspect` the executor now runs one CTA
    // a burst unless burst_ctas is set (setup::one_cta_for_inspect), so every run above has
    // one; here the fixed set with 4 CTAs on device rings (the former default, which differed)
    // and on mapped ones, and 1 set explicitly on device rings.
    let fixed_set = || pipeline(&fixed, false, "host");
    for (placement, k) in [
        (Placement::Device, 4),
        (Placement::Device, 1),
        (Placement::Mapped, 4),
    ] {
        runs += 1;
        failed.extend(failure(|| {
            check(
                &fixed_set,
                "fixed",
                Mode::Persistent,
                placement,
                32,
                Some(k),
            )
        }));
    }
    assert_none_failed(&failed, runs);
}

/// A rule reload on a running GPU executor: the new set's block published by epoch
/// (`publish_stage_params`); bursts submitted before it run set a, those after it set b, each
/// frame's (action, reason) as the CPU stage's under that set, and set b's hits in bank 1.
fn check_reload(mode: Mode, placement: Placement) {
    use pktwarp_inspect::gpu;
    let what = format!("reload: {mode:?} / {placement:?}");
    let d = scratch(&format!("gpu-reload-{mode:?}-{placement:?}"));
    let rules = d.join("r.rules");
    std::fs::write(&rules, fixed_rules(false)).unwrap();
    let p = pipeline(&rules, false, "host");
    let frames = traffic(11, 8000);
    let answers = |p: &Pipeline| -> Vec<(u8, u8)> {
        cpu_answers(p, &frames, 32)
            .iter()
            .map(|w| (w.action, w.reason))
            .collect()
    };
    let want_a = answers(&p);
    let image = image_for_pipeline(&p).expect("image");
    let pd = gpu_common::counting(true);
    let opts = GpuOptions {
        mode,
        placement,
        burst_size: 32,
        ring_slots: RING_SLOTS,
        tagged: Some(false),
        ..GpuOptions::default()
    };
    let mut ex = GpuExecutor::new(opts, pd, 1, &image).expect("executor");
    ex.start().expect("start");
    let bursts: Vec<Vec<usize>> = (0..frames.len())
        .collect::<Vec<_>>()
        .chunks(32)
        .map(|c| c.to_vec())
        .collect();
    let half = bursts.len() / 2;
    let mut got: Vec<Option<(u8, u8)>> = vec![None; frames.len()];
    let (mut done, mut next) = (0usize, 0usize);
    let mut want_b = Vec::new();
    // How long the publish took (a host call that waits for the device would show here).
    let mut publish: Option<Duration> = None;
    let mut watch = Watch::new();
    while done < bursts.len() {
        while next < bursts.len() && next - done < 6 {
            if next == half {
                std::fs::write(&rules, random_rules(9, 80, false)).unwrap();
                let Stage::Custom(slot) = &p.stages[1] else {
                    panic!("inspect")
                };
                let r = slot.cpu().reload_files().expect("reload").expect("files");
                (r.publish)();
                want_b = answers(&p);
                let (_, params) =
                    pipeline::internal::executor::gpu::compose::stage_specs(&p).expect("specs");
                let t = Instant::now();
                ex.publish_stage_params(&params, p.params_generation())
                    .expect("publish");
                publish = Some(t.elapsed());
                if t.elapsed() > Duration::from_secs(2) {
                    eprintln!("{what}: publish_stage_params took {:?}", t.elapsed());
                }
                // The publish may have waited: bursts before it count from here.
                watch = Watch::new();
            }
            let mut b = Burst::default();
            for &i in &bursts[next] {
                let (d, f) = &frames[i];
                b.push(f, *d);
            }
            ex.submit(0, &b).expect("submit");
            next += 1;
        }
        let n = ex
            .poll(0, |seq, v, _| {
                for (j, &i) in bursts[seq as usize].iter().enumerate() {
                    got[i] = Some((v[j].action, v[j].drop_reason));
                }
                done += 1;
            })
            .unwrap_or_else(|e| panic!("{what}: poll: {e:#}"));
        watch.check(n > 0, || {
            format!(
                "{what}: burst {done} (slot {}, set {}, executor params generation {}) never \
                 finished: {next} of {} submitted, {} in flight, the set published at burst \
                 {half} (publish took {publish:?}); {}",
                done as u32 % RING_SLOTS,
                if done < half { "a (epoch 0)" } else { "b" },
                ex.params_generation(),
                bursts.len(),
                ex.in_flight(0),
                kernel_state(&ex, 0)
            )
        });
    }
    for (n, b) in bursts.iter().enumerate() {
        let (want, set) = if n < half {
            (&want_a, "a")
        } else {
            (&want_b, "b")
        };
        for &i in b {
            assert_eq!(
                got[i],
                Some(want[i]),
                "{what}: frame {i} (burst {n}, slot {}, set {set})",
                n as u32 % RING_SLOTS
            );
        }
    }
    let hits = ex.read_stage_buffer(1, 0).expect("hit buffer");
    let bank1: u64 = hits[gpu::MAX_RULES * 8..gpu::STATE_COUNTERS_AT]
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
        .sum();
    assert!(bank1 > 0, "{what}: set b counted in bank 1");
    ex.shutdown().expect("shutdown");
}

#[test]
fn a_rule_reload_on_the_gpu_publishes_the_new_set_by_epoch() {
    if pipeline::internal::testdata::no_gpu(
        file!(),
        "a_rule_reload_on_the_gpu_publishes_the_new_set_by_epoch",
    ) {
        return;
    }
    let _one = one_at_a_time();
    let mut failed = Vec::new();
    for mode in [Mode::Persistent, Mode::Launch] {
        for placement in [Placement::Mapped, Placement::Device] {
            failed.extend(failure(|| check_reload(mode, placement)));
        }
    }
    assert_none_failed(&failed, 4);
}

/// Without a GPU: the message of a difference names the frame, its burst, slot and index, both
/// verdicts' words, the CPU's rule hits on the frame and whether the metadata agrees, and
/// tells a burst whose verdict words were never written (all 0) from one that was.
#[test]
fn a_difference_is_described_by_burst_slot_verdict_words_and_rule_hits() {
    let d = scratch("describe");
    let fixed = d.join("fixed.rules");
    std::fs::write(&fixed, fixed_rules(true)).unwrap();
    let fresh = || pipeline(&fixed, false, "host");
    let frames = traffic(7, 256);
    let want = cpu_answers(&fresh(), &frames, 32);
    // A GPU that answered as the CPU, but for queue 0's second burst when `zeroed`: never
    // written.
    let answers = |zeroed: bool| -> Vec<Option<Got>> {
        let mut seen = [0usize; QUEUES];
        frames
            .iter()
            .zip(&want)
            .map(|((fd, _), w)| {
                let q = fd.queue as usize;
                let (seq, index) = ((seen[q] / 32) as u32, seen[q] % 32);
                seen[q] += 1;
                let verdict = if zeroed && (q, seq) == (0, 1) {
                    (0, 0, 0, 0, 0)
                } else {
                    (w.action, w.reason, 0xFFFF, w.rule, 0)
                };
                Some(Got {
                    queue: q,
                    seq,
                    index,
                    verdict,
                    meta: Some(w.meta.clone()),
                })
            })
            .collect()
    };
    assert_same_verdicts("same", &frames, &want, &answers(false), &fresh, 1);
    let got = answers(true);
    let e = std::panic::catch_unwind(|| {
        assert_same_verdicts("zeroed", &frames, &want, &got, &fresh, 1);
    })
    .expect_err("queue 0's second burst differs");
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    // Frame 64 is queue 0's first of its second burst: to the host on the CPU (flags:SF).
    for part in [
        "zeroed: ",
        "((0, 1), (",
        ", true)",
        "frame 64 (queue 0): cpu action 3 reason 0xff",
        "{1012: 1}",
        "gpu: burst 1 slot 1 index 0: action 0 reason 0x0",
        "metadata equals the cpu's",
        "frame (62 bytes)",
    ] {
        assert!(msg.contains(part), "no `{part}` in:\n{msg}");
    }
    assert!(!msg.contains("(queue 1)"), "{msg}");
    // A run's failure, as the matrix of runs lists it: the message's first line.
    let line = failure(|| assert_same_verdicts("zeroed", &frames, &want, &got, &fresh, 1));
    assert_eq!(line.as_deref(), msg.lines().next());
    assert_eq!(failure(|| ()), None);
}
