//! The CPU executor's stage list without ports or threads: parse -> acl (a ClassBench set) ->
//! count over the set's header trace as 64 B frames (TCP / UDP / other as the trace says: the
//! `gen` port's trace mode, as `gen: {trace: ...}` makes them), in bursts of 64, each burst
//! through `Pipeline::run_burst_mut` as a CPU worker runs it. The frames stay resident, so the
//! figure is the stages' cost alone (no generator, ring or ingest thread to share the core
//! with). Prints the median Mpps and ns a frame of ROUNDS passes and
//! the pass's verdict counts (the same for any build). Under callgrind the measured loop is
//! `pass` alone: `ROUNDS=1 valgrind --tool=callgrind --toggle-collect='*acl_stage*pass*'
//! BENCH_BIN`: Ir / (2 x frames) = instructions a frame (the warm-up pass and one round).
//!
//! `SET=acl1_10K ROUNDS=9 cargo bench -p pipeline --bench acl_stage` (SET: a ClassBench set in
//! ../shared/data/classbench with its `_trace`). Results: docs/perf-log.md.

use std::time::Instant;

use pipeline::burst::Burst;
use pipeline::config::{AclStageConfig, DefaultAction, RuleFormat, StageConfig};
use pipeline::counters::QueueCounters;
use pipeline::internal::port::gen::{FrameSize, GenOptions, GenRx};
use pipeline::meta::PacketMeta;
use pipeline::port::{RxPort, RxStatus};
use pipeline::stage::Pipeline;
use pipeline::verdict::Verdict;

const BURST: usize = 64;

/// Every burst through the stage list once; frames run.
#[inline(never)]
fn pass(
    p: &Pipeline,
    bursts: &mut [Burst],
    metas: &mut Vec<PacketMeta>,
    verdicts: &mut Vec<Verdict>,
    c: &QueueCounters,
) -> usize {
    let mut n = 0;
    for b in bursts.iter_mut() {
        p.run_burst_mut(b, metas, verdicts, c);
        n += b.len();
    }
    n
}

/// The trace's frames in bursts of [`BURST`], on ports 0 and 1 alternately.
fn trace_bursts(trace: std::path::PathBuf) -> Vec<Burst> {
    let g = GenOptions {
        trace: Some(trace),
        size: FrameSize::Fixed(64),
        ..GenOptions::default()
    };
    let mut rx = GenRx::new(&g, 0).expect("the trace reads");
    let mut bursts = Vec::new();
    loop {
        let mut b = Burst::with_capacity(BURST, BURST * 64);
        if let RxStatus::End = rx.rx_burst(&mut b, BURST).expect("the generator") {
            return bursts;
        }
        for (i, d) in b.descs.iter_mut().enumerate() {
            d.port = (i % 2) as u16;
        }
        bursts.push(b);
    }
}

fn main() {
    let set = std::env::var("SET").unwrap_or_else(|_| "acl1_10K".into());
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9)
        .max(1);
    let dir = flow_rules::input::require_data("classbench");
    let stages = [
        StageConfig::Parse,
        StageConfig::Acl(AclStageConfig {
            rules: dir.join(&set),
            format: Some(RuleFormat::Classbench),
            default: DefaultAction::Pass,
        }),
        StageConfig::Count,
    ];
    let p =
        pipeline::internal::stage::build(&stages, |p| p.to_path_buf()).expect("the rule set loads");
    let mut bursts = trace_bursts(dir.join(format!("{set}_trace")));
    let c = QueueCounters::new(p.stages.len(), p.rule_count());
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    // Warm-up, and the verdict counts of one pass.
    let frames = pass(&p, &mut bursts, &mut metas, &mut verdicts, &c);
    let (passed, dflt) = (c.passed.get(), c.acl_default.get());
    let mut ns = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let n = pass(&p, &mut bursts, &mut metas, &mut verdicts, &c);
        ns.push(t.elapsed().as_nanos() as f64 / n as f64);
    }
    ns.sort_by(f64::total_cmp);
    let med = ns[ns.len() / 2];
    println!(
        "{set}: {frames} frames in bursts of {BURST}, parse -> acl -> count: {:.2} ns a frame \
         ({:.3} Mpps; min {:.2}, max {:.2} ns; {rounds} passes); one pass: {passed} passed, \
         {dflt} default",
        med,
        1e3 / med,
        ns[0],
        ns[ns.len() - 1]
    );
}
