//! Two stages that keep per-queue state in frame order in one GPU pipeline, compiled for the
//! host, equal the CPU executor frame by frame: `parse -> conntrack -> rate_limit -> count` (a
//! stateful firewall's table with per-source budgets), `parse -> flow_stats (own table) ->
//! rate_limit -> count`, the shipped stateful firewall with a rate_limit after its ACL (frames
//! the ACL drops on conntrack's state never reach rate_limit: not counted, no bucket) and
//! `parse -> rate_limit -> conntrack -> count` (frames over budget never reach the flow table).
//! Compared: the metadata and verdict of every frame, the flow table of every queue byte for byte
//! after every 8th burst and the last, the table counters, rate_limit's table and per-rule counters (read from
//! each queue's state and folded into a stage with `add_gpu_counters`), and the frames per
//! stage, on generated connection traffic with churn over two queues plus a SYN flood from
//! sixteen sources over their budget.
//!
//! The host build runs frames one at a time in arrival order, as the CPU; on the GPU each
//! ordered stage orders a round's frames by its own key on its own channel of
//! cuda/flow_order.cuh (codegen::order_channels), which the GPU machine holds to the same result
//! (pipeline/tests/gpu_rate_limit.rs, the combined pipeline).

#[allow(dead_code)]
mod conntrack_common;
#[allow(dead_code)]
mod rate_limit_common;

mod host_cuda_common;

use conntrack_common::firewall_edited;
use host_cuda_common::Sides;
use pipeline::burst::FrameDesc;
use pipeline::counters::QueueCounters;
use pipeline::internal::stage::config::StageConfig;
use pipeline::internal::stage::flow_tables::{lock, FlowTables};
use pipeline::internal::stage::rate_limit::{queue_counters_at, RateLimitStage};
use pipeline::stage::{Pipeline, Stage};
use pipeline::verdict::{Action, DropReason};
use pktwarp_flow::rate::{RateCounters, COUNTERS_BYTES};
use pktwarp_kernels::host::{AclSel, HostPipeline};
use rate_limit_common::with_flood;

/// Per-source budgets: SYNs (the flood's sources go over theirs), and every frame per /24.
const RL: &str = "{ entries: 256, rules: [\
    { name: syn, match: { proto: tcp, tcp_flags: \"syn !ack\" }, key: src, rate_pps: 100, burst: 50 },\
    { name: per_net, key: src_prefix/24/48, rate_pps: 2000, burst: 60 } ] }";

fn pipeline_of(yaml: &str) -> Pipeline {
    let stages: Vec<StageConfig> = serde_saphyr::from_str(yaml).expect("stages");
    pipeline::internal::stage::build(&stages, |x| x.to_path_buf()).expect("pipeline")
}

/// What one comparison saw (the CPU's, equal to the GPU side's).
struct Seen {
    rules: Vec<(String, [u64; 3])>,
    /// Frames dropped `rate_limited`, and dropped for another reason.
    limited: u64,
    other_drops: u64,
    /// Flood SYNs (from 203.0.113.0/24) dropped `rate_limited`.
    flood_limited: u64,
    table: pktwarp_flow::FlowCounters,
}

/// The stage keeping a flow table (conntrack, or flow_stats with its own) and its tables.
fn flow_keeper(p: &Pipeline) -> (usize, &FlowTables) {
    p.stages
        .iter()
        .enumerate()
        .find_map(|(k, s)| match s {
            Stage::Conntrack(c) => Some((k, &**c.tables())),
            Stage::FlowStats(f) if f.owns_tables() => Some((k, &**f.tables())),
            _ => None,
        })
        .expect("a stage with a flow table")
}

fn rate_limiter(p: &Pipeline) -> (usize, &RateLimitStage) {
    p.stages
        .iter()
        .enumerate()
        .find_map(|(k, s)| match s {
            Stage::RateLimit(r) => Some((k, &**r)),
            _ => None,
        })
        .expect("a rate_limit stage")
}

/// The host build and the ACL's selector data (its image words and rule hits), as in
/// conntrack_cuda_host.rs.
struct AclData {
    words: Vec<u32>,
    hits: Vec<u64>,
}

impl AclData {
    fn sel(&mut self, p: &Pipeline) -> Option<AclSel> {
        let acl = p.acl()?;
        Some(AclSel {
            tables: self.words.as_ptr() as u64,
            rule_hits: self.hits.as_mut_ptr() as u64,
            n_rules: acl.rule_count() as u32,
            default_action: acl.default as u8,
            stage_params: 0,
        })
    }
}

/// Runs `frames` through the CPU and the host-built GPU pipeline over `queues` queues and
/// compares them (see the file's comment); `names`: the stage list the generator must take.
fn compare(p: &Pipeline, frames: &[(FrameDesc, Vec<u8>)], queues: usize, names: &[&str]) -> Seen {
    assert_eq!(p.gpu_refusal(), None, "the GPU executor runs {names:?}");
    let (specs, mut params) =
        pipeline::internal::executor::gpu::compose::stage_specs(p).expect("specs");
    let got: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(got, names);
    assert_eq!(specs.iter().filter(|s| s.orders_flows()).count(), 2);
    let channels = pktwarp_kernels::codegen::order_channels(&specs).expect("channels");
    assert_eq!(channels.iter().map(|c| c.1).collect::<Vec<_>>(), [0, 1]);
    let host = HostPipeline::compile(&specs).unwrap_or_else(|e| panic!("{e}"));
    // Each stage's per-queue state as the executor lays it out: one zeroed buffer, queue q's
    // at q * bytes, its address and the queue count written into the stage's block.
    let mut states: Vec<(usize, Vec<u64>, usize)> = Vec::new();
    for (k, s) in p.stages.iter().enumerate() {
        let st = s.gpu_queue_state();
        if st.is_empty() {
            continue;
        }
        assert_eq!(st.len(), 1, "stage {k}");
        let per_queue = st[0].bytes;
        assert_eq!(per_queue % 8, 0);
        let mut buf = vec![0u64; per_queue * queues / 8];
        let at = st[0].addr_at;
        params[k][at..at + 8].copy_from_slice(&(buf.as_mut_ptr() as u64).to_le_bytes());
        params[k][at + 8..at + 12].copy_from_slice(&(queues as u32).to_le_bytes());
        states.push((k, buf, per_queue));
    }
    assert_eq!(states.len(), 2, "two stages with per-queue state");
    let mut acl = AclData {
        words: Vec::new(),
        hits: Vec::new(),
    };
    if let Some(a) = p.acl() {
        acl.words = a
            .gpu_image_bytes()
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        acl.hits = vec![0; a.rule_count()];
    }
    let sel = acl.sel(p);
    let blocks: Vec<&[u8]> = params.iter().map(Vec::as_slice).collect();
    let n_rules = p.acl().map_or(0, |a| a.rule_count());
    let c = QueueCounters::new(p.stages.len(), n_rules);
    let mut gc = [[0u64; 8]; pktwarp_kernels::MAX_STAGES];
    let mut sides = Sides::new(p, &host, &c, sel.as_ref());
    let (kt, tables) = flow_keeper(p);
    let (kr, rl) = rate_limiter(p);
    let (mut limited, mut other_drops, mut flood_limited) = (0u64, 0u64, 0u64);
    for (n, chunk) in frames.chunks(32).enumerate() {
        sides.burst(
            n,
            chunk,
            &blocks,
            &mut gc,
            |_| String::new(),
            |s| {
                let (v, f) = (s.verdict, s.f);
                match (v.action, v.reason) {
                    (Action::Drop, Some(DropReason::RateLimited)) => {
                        limited += 1;
                        flood_limited += u64::from(f.len() > 29 && f[26..29] == [203, 0, 113]);
                    }
                    (Action::Drop, _) => other_drops += 1,
                    _ => {}
                }
            },
        );
        // Every 8th burst and after the last (a large table's copy is slow in a debug build).
        if n % 8 == 7 || (n + 1) * 32 >= frames.len() {
            let (_, dev, per_queue) = states.iter().find(|s| s.0 == kt).expect("table state");
            same_tables(tables, dev, *per_queue, queues, n);
        }
    }
    for (k, g) in gc.iter().enumerate().take(p.stages.len()) {
        assert_eq!(g[0], c.stage_frames[k].get(), "frames at stage {k}");
    }
    let t = tables.counters();
    let want_table = [
        t.created,
        t.expired,
        t.early_evicted,
        t.table_full,
        t.untracked,
        t.invalid,
    ];
    assert_eq!(gc[kt][1..7], want_table, "flow table counters {t:?}");
    if let Some(a) = p.acl() {
        let cpu_hits: Vec<u64> = c.rule_hits.iter().map(|h| h.get()).collect();
        assert_eq!(acl.hits, cpu_hits, "rule hits");
        let ka = p.stages.iter().position(|s| matches!(s, Stage::Acl(_)));
        assert_eq!(gc[ka.expect("acl")][2], c.acl_default.get(), "acl defaults");
        assert!(a.rule_count() > 0);
    }
    let (_, dev, per_queue) = states.iter().find(|s| s.0 == kr).expect("rate state");
    same_rate_counters(rl, dev, *per_queue, queues);
    Seen {
        rules: rl.rule_counters(),
        limited,
        other_drops,
        flood_limited,
        table: t,
    }
}

/// Every queue's flow table on the device (its state's first bytes) against the CPU's, byte for
/// byte, after burst `n`.
fn same_tables(tables: &FlowTables, dev: &[u64], per_queue: usize, queues: usize, n: usize) {
    for q in 0..queues {
        let Some(t) = tables.table(q as u16) else {
            continue;
        };
        let want = lock(t).as_bytes().to_vec();
        let got = bytes_of(dev, q * per_queue, want.len());
        if want == got {
            continue;
        }
        if let Some(e) = (0..want.len()).find(|&i| want[i] != got[i]) {
            panic!(
                "burst {n}: queue {q}'s flow table differs first at entry {}",
                e / 128
            );
        }
    }
}

/// rate_limit's device counters (each queue's, after its table), folded as the host side folds
/// them, against the CPU stage's table and per-rule counters.
fn same_rate_counters(rl: &RateLimitStage, dev: &[u64], per_queue: usize, queues: usize) {
    let off = queue_counters_at(&rl.config()) as usize;
    let mut sum = RateCounters::default();
    for q in 0..queues {
        let at = q * per_queue + off;
        let qc = RateCounters::from_bytes(&bytes_of(dev, at, COUNTERS_BYTES)).expect("counters");
        sum.created += qc.created;
        sum.reused += qc.reused;
        for (s, r) in sum.rules.iter_mut().zip(qc.rules) {
            s.matched += r.matched;
            s.limited += r.limited;
            s.table_full += r.table_full;
        }
    }
    let folded = RateLimitStage::new(&rl.config()).expect("stage");
    folded.add_gpu_counters(&rl.rule_names(), &sum);
    assert_eq!(folded.counters(), rl.counters(), "rate table counters");
    assert_eq!(folded.rule_counters(), rl.rule_counters(), "rule counters");
}

/// `len` bytes at byte `at` of the device state (little-endian words, as the device's).
fn bytes_of(words: &[u64], at: usize, len: usize) -> Vec<u8> {
    let first = at / 8;
    let last = (at + len).div_ceil(8);
    let b: Vec<u8> = words[first..last]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    b[at - first * 8..][..len].to_vec()
}

fn rule(s: &Seen, name: &str) -> [u64; 3] {
    s.rules.iter().find(|r| r.0 == name).expect("rule").1
}

#[test]
fn conntrack_then_rate_limit_equals_the_cpu() {
    let frames = with_flood(7, 4000, 3000);
    assert!(frames.iter().any(|f| f.0.queue == 1));
    for (entries, what) in [(65536, "big"), (16, "small")] {
        let p = pipeline_of(&format!(
            "[parse, {{ conntrack: {{ entries: {entries} }} }}, {{ rate_limit: {RL} }}, count]"
        ));
        let s = compare(
            &p,
            &frames,
            2,
            &["parse", "conntrack", "rate_limit", "count"],
        );
        // The flood's sources go over their budget; the table churns.
        assert!(
            s.flood_limited > 0 && rule(&s, "syn")[1] > 0,
            "{what}: {:?}",
            s.rules
        );
        assert!(
            s.table.created > 100 && s.table.expired > 0,
            "{what}: {:?}",
            s.table
        );
        if what == "small" {
            assert!(
                s.table.early_evicted + s.table.table_full > 0,
                "{:?}",
                s.table
            );
        }
    }
}

#[test]
fn flow_stats_with_its_own_table_then_rate_limit_equals_the_cpu() {
    let frames = with_flood(11, 4000, 3000);
    let p = pipeline_of(&format!(
        "[parse, {{ flow_stats: {{ entries: 64, active_timeout_s: 1800 }} }}, \
         {{ rate_limit: {RL} }}, count]"
    ));
    let s = compare(
        &p,
        &frames,
        2,
        &["parse", "flow_stats", "rate_limit", "count"],
    );
    assert!(s.flood_limited > 0, "{:?}", s.rules);
    assert!(
        s.table.early_evicted + s.table.table_full > 0,
        "{:?}",
        s.table
    );
}

/// The stateful firewall with per-source budgets after its ACL: the flood (connections opened
/// from outside, dropped by the ACL on conntrack's state `new`) never reaches rate_limit, so no
/// flood frame is rate limited or matched by its SYN rule; the GPU side counts exactly the
/// CPU's.
#[test]
fn frames_dropped_on_conntracks_state_never_reach_rate_limit() {
    let frames = with_flood(5, 4000, 3000);
    let p = firewall_edited(65536, "pair", &|t| {
        let at = t.find("  - count").expect("count");
        format!("{}  - rate_limit: {RL}\n{}", &t[..at], &t[at..])
    });
    let names = ["parse", "conntrack", "acl", "rate_limit", "count"];
    let s = compare(&p, &frames, 2, &names);
    assert_eq!(s.flood_limited, 0);
    assert!(
        s.other_drops >= 3000,
        "the flood dropped by the ACL: {}",
        s.other_drops
    );
    // Without the ACL in between, the same flood is limited, and its 3000 SYNs are matched
    // by the SYN rule on top of what the firewall's rate_limit matched.
    let p = pipeline_of(&format!(
        "[parse, {{ conntrack: {{ entries: 65536 }} }}, {{ rate_limit: {RL} }}, count]"
    ));
    let plain = compare(
        &p,
        &frames,
        2,
        &["parse", "conntrack", "rate_limit", "count"],
    );
    assert!(plain.flood_limited > 0);
    assert!(
        rule(&s, "syn")[0] + 3000 <= rule(&plain, "syn")[0],
        "{:?} / {:?}",
        s.rules,
        plain.rules
    );
}

/// rate_limit first: the frames over budget never reach the flow table (conntrack on the
/// second channel), so the flood's sources create fewer flows than they send SYNs.
#[test]
fn rate_limit_then_conntrack_equals_the_cpu() {
    let frames = with_flood(3, 3000, 3000);
    let p = pipeline_of(&format!(
        "[parse, {{ rate_limit: {RL} }}, {{ conntrack: {{ entries: 65536 }} }}, count]"
    ));
    let s = compare(
        &p,
        &frames,
        2,
        &["parse", "rate_limit", "conntrack", "count"],
    );
    assert!(s.limited > 0 && s.flood_limited > 0, "{:?}", s.rules);
    // Each flood SYN has a port of its own: a flow for every one that reached the table.
    assert!(s.table.created + s.flood_limited >= 3000, "{:?}", s.table);
}
