//! The DDoS scrubber's rate limits on the host-built GPU pipeline equal the CPU executor frame by
//! frame: `parse -> rate_limit -> count` as the GPU executor generates it (the rate_limit stage
//! of cuda/rate_limit_stage.cuh over rate_limit.cuh, its tables and counters in the per-queue
//! state block the executor lays out, the rules in its parameter block) against
//! `Pipeline::run_frames`: the metadata, the verdict (action, reason `rate_limited`, rule, mark),
//! the frames per stage, and the table and per-rule counters (read from each queue's state and
//! folded into a stage with `add_gpu_counters`), on connection traffic over two queues plus a
//! SYN flood from sixteen sources whose budget (burst, then the rate) both keep alike; with a
//! table large enough and one so small that frames find no bucket.
//!
//! The host build runs frames one at a time in arrival order; the GPU orders a round's frames
//! per bucket (cuda/flow_order.cuh), as it does for conntrack.

#[allow(dead_code)]
mod conntrack_common;
mod rate_limit_common;

mod host_cuda_common;

use host_cuda_common::Sides;
use pipeline::burst::FrameDesc;
use pipeline::counters::QueueCounters;
use pipeline::internal::stage::rate_limit::{queue_counters_at, RateLimitStage};
use pipeline::stage::{Pipeline, Stage};
use pipeline::verdict::{Action, DropReason};
use pktwarp_flow::rate::{RateConfig, RateCounters, COUNTERS_BYTES};
use pktwarp_kernels::host::HostPipeline;
use rate_limit_common::{rules, scrubber, with_flood};

/// What [`check`] saw: the CPU stage's table and rule counters, and SYN-flood passes per source.
struct Seen {
    counters: Vec<(&'static str, u64)>,
    rules: Vec<(String, [u64; 3])>,
    flood_passed: [u64; 16],
    /// Frames dropped `rate_limited`.
    limited: u64,
}

/// The stage's GPU parameter block in force, its state's address and queue count written in as
/// the executor writes them.
fn gpu_block(p: &Pipeline, state: &mut [u64], queues: usize) -> Vec<u8> {
    let mut block = p.stages[1].gpu_params().expect("a GPU block").block;
    let at = p.stages[1].gpu_queue_state()[0].addr_at;
    block[at..at + 8].copy_from_slice(&(state.as_mut_ptr() as u64).to_le_bytes());
    block[at + 8..at + 12].copy_from_slice(&(queues as u32).to_le_bytes());
    block
}

/// Runs `frames` through both and compares frame by frame, then the counters. `reload`: before
/// burst N, new rules published on the CPU (SIGHUP's path) and the GPU block rebuilt.
fn check(p: &Pipeline, frames: &[(FrameDesc, Vec<u8>)], queues: usize) -> Seen {
    check_reloading(p, frames, queues, None)
}

fn check_reloading(
    p: &Pipeline,
    frames: &[(FrameDesc, Vec<u8>)],
    queues: usize,
    reload: Option<(usize, RateConfig)>,
) -> Seen {
    // The GPU executor takes it; the stage list is the one its generator takes.
    assert_eq!(p.gpu_refusal(), None);
    let list = p.gpu_stage_list();
    let specs: Vec<_> = list
        .iter()
        .map(|s| s.builtin_spec().expect("a CUDA stage"))
        .collect();
    let params: Vec<Vec<u8>> = list
        .iter()
        .map(|s| s.library.as_ref().map_or(Vec::new(), |l| l.block.clone()))
        .collect();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["parse", "rate_limit", "count"]);
    assert!(pktwarp_kernels::codegen::pipeline_orders_flows(&specs));
    let host = HostPipeline::compile(&specs).unwrap_or_else(|e| panic!("{e}"));
    let Stage::RateLimit(rl) = &p.stages[1] else {
        panic!("pipeline[1] is rate_limit")
    };
    // The per-queue state as the executor lays it out: one zeroed buffer, queue q's at
    // q * bytes, its address and the queue count written into the block.
    let state = p.stages[1].gpu_queue_state();
    assert_eq!(state.len(), 1);
    let per_queue = state[0].bytes;
    assert_eq!(per_queue % 8, 0);
    let mut tables = vec![0u64; per_queue * queues / 8];
    let mut block = gpu_block(p, &mut tables, queues);
    assert!(
        block[12..] == params[1][12..],
        "the generator's block, addresses apart"
    );
    let c = QueueCounters::new(3, 0);
    let mut gc = [[0u64; 8]; pktwarp_kernels::MAX_STAGES];
    let mut sides = Sides::new(p, &host, &c, None);
    let mut flood_passed = [0u64; 16];
    let mut limited = 0u64;
    for (n, chunk) in frames.chunks(32).enumerate() {
        if let Some((_, new)) = reload.as_ref().filter(|r| r.0 == n) {
            let new = rl
                .prepare_reload(new)
                .expect("good rules")
                .expect("a change");
            rl.publish(new);
            block = gpu_block(p, &mut tables, queues);
        }
        let blocks: Vec<&[u8]> = vec![&[], &block, &[]];
        sides.burst(
            n,
            chunk,
            &blocks,
            &mut gc,
            |_| String::new(),
            |s| {
                let (v, f) = (s.verdict, s.f);
                if v.action == Action::Drop {
                    assert_eq!(v.reason, Some(DropReason::RateLimited));
                    limited += 1;
                } else if f[23] == 6 && f[47] == 0x02 && f[26..29] == [203, 0, 113] {
                    flood_passed[(f[29] - 1) as usize] += 1;
                }
            },
        );
    }
    for (k, g) in gc.iter().enumerate().take(3) {
        assert_eq!(g[0], c.stage_frames[k].get(), "frames at stage {k}");
    }
    // The device counters: each queue's, after its table.
    let bytes: Vec<u8> = tables.iter().flat_map(|w| w.to_le_bytes()).collect();
    let off = queue_counters_at(&rl.config()) as usize;
    let mut sum = RateCounters::default();
    for q in 0..queues {
        let at = q * per_queue + off;
        let qc = RateCounters::from_bytes(&bytes[at..at + COUNTERS_BYTES]).expect("counters");
        sum.created += qc.created;
        sum.reused += qc.reused;
        for (s, r) in sum.rules.iter_mut().zip(qc.rules) {
            s.matched += r.matched;
            s.limited += r.limited;
            s.table_full += r.table_full;
        }
    }
    // Folded into a fresh stage of the same rules, they read as the CPU stage's (a reload
    // that renamed rules moved the CPU's counts so far to the old names: table-wide only).
    let folded = RateLimitStage::new(&rl.config()).expect("stage");
    folded.add_gpu_counters(&rl.rule_names(), &sum);
    assert_eq!(folded.counters(), rl.counters(), "table counters");
    if reload.is_none() {
        assert_eq!(folded.rule_counters(), rl.rule_counters(), "rule counters");
    }
    Seen {
        counters: rl.counters(),
        rules: rl.rule_counters(),
        flood_passed,
        limited,
    }
}

#[test]
fn the_ddos_scrubber_on_the_host_built_gpu_pipeline_equals_the_cpu() {
    let frames = with_flood(7, 4000, 8000);
    assert!(frames.iter().any(|f| f.0.queue == 1));
    let s = check(&scrubber(65536), &frames, 2);
    let rule = |n: &str| s.rules.iter().find(|r| r.0 == n).expect("rule").1;
    assert!(rule("syn_flood")[1] > 0, "{:?}", s.rules);
    let limited: u64 = s.rules.iter().map(|r| r.1[1]).sum();
    assert_eq!(s.limited, limited, "{:?}", s.rules);
    assert_eq!(rule("syn_flood")[2], 0, "{:?}", s.rules);
    // The SYN-flood budget: 8000 SYNs over 80 ms, 500 a source: each passes its burst (200)
    // and what 100 a second refill in 80 ms (8), never more.
    for (i, n) in s.flood_passed.iter().enumerate() {
        assert!(
            (200..=209).contains(n),
            "source {i} passed {n}: {:?}",
            s.flood_passed
        );
    }
    let created = s
        .counters
        .iter()
        .find(|c| c.0 == "created")
        .expect("created")
        .1;
    assert!(created >= 16, "{:?}", s.counters);
}

/// One bucket group a queue: frames find no bucket (`on_full: pass`), counted alike.
#[test]
fn a_full_table_refuses_alike() {
    let frames = with_flood(11, 3000, 2000);
    let s = check(&scrubber(8), &frames, 2);
    let full: u64 = s.rules.iter().map(|r| r.1[2]).sum();
    assert!(full > 0, "{:?}", s.rules);
}

/// SIGHUP on both: new rates keep the buckets (same names and keys); new keys start every
/// bucket afresh (on the GPU by the block's key epoch, its old buckets free slots), frame for
/// frame as the CPU's tables.
#[test]
fn reloads_keep_or_restart_the_buckets_alike() {
    let frames = with_flood(5, 3000, 6000);
    let same_keys = {
        let mut c = rules(4096);
        c.rules[0].value.burst = Some(50);
        c.rules[0].value.rate_pps = 1000;
        c
    };
    let new_keys = {
        let mut c = rules(4096);
        c.rules[0].value.key = c.rules[2].value.key;
        c
    };
    for (what, new) in [("same keys", same_keys), ("new keys", new_keys)] {
        let p = scrubber(4096);
        let s = check_reloading(&p, &frames, 2, Some((frames.len() / 64, new)));
        let Stage::RateLimit(rl) = &p.stages[1] else {
            panic!("rate_limit")
        };
        let (_, epoch) = rl.gpu_rules();
        assert_eq!(epoch, u32::from(what == "new keys"), "{what}");
        assert!(s.limited > 0, "{what}: {:?}", s.rules);
    }
}
