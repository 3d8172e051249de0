//! The stateful firewall's GPU pipeline compiled for the host equals the CPU executor frame by
//! frame: `parse -> conntrack -> acl -> count` as the GPU executor generates it (the conntrack
//! stage of cuda/conntrack_stage.cuh over flow.cuh, its tables in the per-queue state block the
//! executor lays out, the acl stage picking the frame's connection state's classifier for the
//! `ct:` rules) against `Pipeline::run_frames`: the metadata (ct_state included), the verdict
//! (action, reason, rule, mark) and every counter (the six conntrack counters, ACL matches and
//! defaults, rule hits, frames per stage), on generated connection traffic with churn (flows that
//! age out, abandoned ones) over two queues, with a table large enough and one so small that
//! flows are evicted and refused.
//!
//! The host build runs frames one at a time in arrival order; the GPU's ordering of a round's
//! frames per flow (cuda/flow_order.cuh) is held to the same result on the GPU machine
//! (scripts/gpu-conntrack-check.sh, the hardware-only test in pipeline/tests/gpu_conntrack.rs).

mod conntrack_common;

mod host_cuda_common;

use conntrack_common::{firewall, traffic};
use host_cuda_common::{Compared, Sides};
use pipeline::burst::FrameDesc;
use pipeline::counters::QueueCounters;
use pipeline::internal::stage::flow_stats::FlowStatsStage;
use pipeline::internal::stage::flow_stats_gpu::GpuFlowDrain;
use pipeline::stage::{Pipeline, Stage};
use pktwarp_kernels::host::{AclSel, HostFrame, HostPipeline};

/// Runs `frames` through both and compares; returns the conntrack counters.
fn check(p: &Pipeline, frames: &[(FrameDesc, Vec<u8>)], queues: usize) -> Vec<(&'static str, u64)> {
    let (specs, params) =
        pipeline::internal::executor::gpu::compose::stage_specs(p).expect("specs");
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["parse", "conntrack", "acl", "count"]);
    assert!(pktwarp_kernels::codegen::pipeline_orders_flows(&specs));
    let host = HostPipeline::compile(&specs).unwrap_or_else(|e| panic!("{e}"));
    // The per-queue state as the executor lays it out: one buffer, queue q's table at
    // q * bytes, its address and the queue count written into the block.
    let state = p.stages[1].gpu_queue_state();
    assert_eq!(state.len(), 1);
    let per_queue = state[0].bytes;
    let mut tables = vec![0u64; per_queue * queues / 8];
    let mut ct_block = params[1].clone();
    let at = state[0].addr_at;
    ct_block[at..at + 8].copy_from_slice(&(tables.as_mut_ptr() as u64).to_le_bytes());
    ct_block[at + 8..at + 12].copy_from_slice(&(queues as u32).to_le_bytes());
    let acl = p.acl().expect("an acl stage");
    let n_rules = acl.rule_count();
    let image = acl.gpu_image_bytes();
    let words: Vec<u32> = image
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    assert_eq!(
        words[0],
        flow_rules::acl::ct::CT_IMAGE_MAGIC,
        "a per-state image"
    );
    let mut hits = vec![0u64; n_rules];
    let sel = AclSel {
        tables: words.as_ptr() as u64,
        rule_hits: hits.as_mut_ptr() as u64,
        n_rules: n_rules as u32,
        default_action: acl.default as u8,
        stage_params: 0,
    };
    let blocks: Vec<&[u8]> = vec![&[], &ct_block, &[], &[]];
    let c = QueueCounters::new(4, n_rules);
    let mut gc = [[0u64; 8]; pktwarp_kernels::MAX_STAGES];
    let mut sides = Sides::new(p, &host, &c, Some(&sel));
    let mut states = [0u64; 7];
    let mut keyed = 0usize;
    for (n, chunk) in frames.chunks(32).enumerate() {
        let ct_states = |s: &Compared| {
            format!(
                "; cpu ct_state {}, gpu ct_state {}",
                s.meta.ct_state, s.gpu_meta[137]
            )
        };
        sides.burst(n, chunk, &blocks, &mut gc, ct_states, |s| {
            states[(s.meta.ct_state as usize).min(6)] += 1;
            keyed += order_key_is_the_bucket(&host, &blocks, &ct_block, s.d, s.f, s.meta) as usize;
        });
    }
    assert!(
        keyed > frames.len() / 2,
        "{keyed} of {} frames keyed",
        frames.len()
    );
    let Stage::Conntrack(ct) = &p.stages[1] else {
        panic!("pipeline[1] is conntrack")
    };
    if ct.gpu_ring_cap() != 0 {
        let bytes: Vec<u8> = tables.iter().flat_map(|w| w.to_le_bytes()).collect();
        compare_rings(ct, &bytes, per_queue, queues);
    }
    let cpu = ct.counters();
    let gpu: Vec<u64> = gc[1][1..7].to_vec();
    assert_eq!(
        cpu.iter().map(|c| c.1).collect::<Vec<_>>(),
        gpu,
        "conntrack counters {cpu:?}"
    );
    for (k, g) in gc.iter().enumerate().take(4) {
        assert_eq!(g[0], c.stage_frames[k].get(), "frames at stage {k}");
    }
    assert_eq!(gc[2][2], c.acl_default.get(), "acl defaults");
    let cpu_hits: Vec<u64> = c.rule_hits.iter().map(|h| h.get()).collect();
    assert_eq!(hits, cpu_hits, "rule hits");
    assert_eq!(gc[2][1], hits.iter().sum::<u64>(), "acl matches");
    // The traffic reaches every state the firewall's rules name but closed, both ways.
    for s in [0, 1, 2, 3, 4, 5] {
        assert!(states[s] > 0, "no frame in state {s}: {states:?}");
    }
    cpu
}

/// With flow export on (a flow_stats stage turns the tables' reporting on), each queue's
/// ended-flow ring after its table holds what the CPU table reports ended, in the same order
/// (the host build applies frames one at a time); every cause occurs.
fn compare_rings(
    ct: &pipeline::internal::stage::conntrack::ConntrackStage,
    bytes: &[u8],
    per_queue: usize,
    queues: usize,
) {
    let table_bytes = pktwarp_flow::bytes_needed(ct.config().entries) as usize;
    let mut causes = [0usize; 3];
    let mut cpu_ended = Vec::new();
    for (q, t) in ct.tables().made() {
        assert!(q < queues);
        let at = q * per_queue + table_bytes;
        let mut image = bytes[at..(q + 1) * per_queue].to_vec();
        let mut got = Vec::new();
        pktwarp_flow::ring::drain(&mut image, &mut got).expect("drain");
        let mut want = Vec::new();
        t.lock().unwrap().take_ended(&mut want);
        assert_eq!(got, want, "queue {q}: ended flows, ring vs CPU table");
        for (_, why) in &want {
            causes[*why as usize] += 1;
        }
        cpu_ended.extend(want);
    }
    assert!(
        causes[0] > 0 && causes[1] > 0,
        "expired, evicted: {causes:?}"
    );
    // The records as flow export emits them: drained from the rings by the GPU host side's
    // drain (GpuFlowDrain), against the CPU tables' ended flows, through the same emission.
    let fs_cfg: pipeline::internal::stage::flow_stats::FlowStatsConfig =
        serde_saphyr::from_str("{}").expect("config");
    let gpu = FlowStatsStage::new(&fs_cfg, Some(ct.tables().clone())).expect("stage");
    let mut image = bytes.to_vec();
    let mut drain = GpuFlowDrain::default();
    let snapshot = image.clone();
    let taken = drain
        .drain(
            ct.tables(),
            &gpu,
            queues,
            &mut |q, off, len| Ok(snapshot[q * per_queue + off..][..len].to_vec()),
            &mut |q, off, b| {
                image[q * per_queue + off..][..b.len()].copy_from_slice(b);
                Ok(())
            },
        )
        .expect("drain");
    assert_eq!(taken, causes.iter().sum::<usize>());
    let cpu = FlowStatsStage::new(&fs_cfg, Some(ct.tables().clone())).expect("stage");
    for (r, why) in &cpu_ended {
        cpu.emit_ended(r, *why);
    }
    assert_eq!(gpu.counters(), cpu.counters(), "records by end reason");
    // The tails were written back: a second drain takes nothing.
    let again = drain
        .drain(
            ct.tables(),
            &gpu,
            queues,
            &mut |q, off, len| Ok(image[q * per_queue + off..][..len].to_vec()),
            &mut |_, _, _| Ok(()),
        )
        .expect("drain");
    assert_eq!(again, 0);
}

#[test]
fn flows_that_end_reach_the_ring_as_the_cpu_table_reports_them() {
    let frames = traffic(11, 4000);
    let p = firewall(16, "ring");
    let Stage::Conntrack(ct) = &p.stages[1] else {
        panic!("pipeline[1] is conntrack")
    };
    assert_eq!(ct.gpu_ring_cap(), 0, "no flow export, no ring");
    ct.tables().report_ended();
    assert_eq!(ct.gpu_ring_cap(), pktwarp_flow::ENDED_CAP as u32);
    check(&p, &frames, 2);
}

/// The owned layout's key of a frame (the GPU's key pass, host-built) is the bucket the CPU's
/// flow table applies it in (`hash(key, seed) % nbuckets`), none where the frame has no flow:
/// so frames of one bucket go to one CTA, whatever the CTAs' count. Returns whether it had one.
fn order_key_is_the_bucket(
    host: &HostPipeline,
    blocks: &[&[u8]],
    ct_block: &[u8],
    d: &FrameDesc,
    f: &[u8],
    meta: &pipeline::meta::PacketMeta,
) -> bool {
    let hf = HostFrame {
        len: f.len(),
        wire_len: d.wire_len,
        port: d.port,
        timestamp_ns: d.timestamp_ns,
        queue: d.queue,
        ..HostFrame::default()
    };
    // The key pass counts into scratch blocks (the GPU never reads them).
    let mut scratch = [[0u64; 8]; pktwarp_kernels::MAX_STAGES];
    let key = host
        .order_key(f, &hf, blocks, &mut scratch)
        .expect("a list with a key pass");
    // The table block at 24 in the conntrack block: nbuckets at +8, seed at +12.
    let word = |at: usize| u32::from_le_bytes(ct_block[at..at + 4].try_into().unwrap());
    let (nbuckets, seed) = (word(32), word(36));
    let want = match pktwarp_flow::key::classify(meta, f) {
        Ok(pk) => pktwarp_flow::key::hash(&pk.key, seed) % nbuckets,
        Err(_) => u32::MAX,
    };
    assert_eq!(key, want, "frame of queue {} ({} bytes)", d.queue, f.len());
    key != u32::MAX
}

#[test]
fn the_stateful_firewall_on_the_host_built_gpu_pipeline_equals_the_cpu() {
    let frames = traffic(7, 6000);
    assert!(frames.iter().any(|f| f.0.queue == 1) && frames.iter().any(|f| f.0.queue == 0));
    let c = check(&firewall(65536, "big"), &frames, 2);
    let get = |n: &str| c.iter().find(|x| x.0 == n).map_or(0, |x| x.1);
    assert!(get("created") > 100 && get("expired") > 0, "{c:?}");
    assert_eq!(get("table_full") + get("early_evicted"), 0, "{c:?}");
}

/// Two buckets a queue: flows are evicted early and refused when a bucket is all assured.
#[test]
fn a_full_table_evicts_and_refuses_alike() {
    let frames = traffic(11, 4000);
    let c = check(&firewall(16, "small"), &frames, 2);
    let get = |n: &str| c.iter().find(|x| x.0 == n).map_or(0, |x| x.1);
    assert!(get("early_evicted") > 0 && get("table_full") > 0, "{c:?}");
}
