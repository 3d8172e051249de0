//! On a GPU: the stateful firewall (`parse -> conntrack -> acl -> count`) on the GPU executor
//! equals the CPU executor frame by frame: every frame's connection state (the metadata the
//! kernel writes back), action and rule, and the conntrack counters, over two queues of
//! generated connection traffic with churn, bursts of 32 and of 256 frames (a round of a
//! block's threads: the kernel orders frames of one flow within it, cuda/flow_order.cuh), in
//! every mode and ring placement, and with four CTAs a burst in persistent mode (the owned
//! layout, cuda/kernels_owned.cu: each CTA applies its part of the table's buckets). Needs a CUDA GPU (listed in docs/hardware-only-tests.md);
//! `scripts/gpu-run.sh` runs it on the GPU machine (step `conntrack`), and
//! scripts/gpu-conntrack-check.sh compares the whole daemon.

mod conntrack_common;
mod gpu_common;

use conntrack_common::{firewall, traffic};
use pipeline::burst::Burst;
use pipeline::counters::QueueCounters;
use pipeline::internal::executor::gpu::{
    image_for_pipeline, AclTablesRef, GpuExecutor, GpuOptions, Mode, PipelineDesc, Placement,
};
use pipeline::stage::Stage;

const QUEUES: usize = 2;

fn check(mode: Mode, placement: Placement, burst: usize, burst_ctas: u32) {
    let what = format!("{mode:?} / {placement:?} / bursts of {burst} / burst_ctas {burst_ctas}");
    let p = firewall(1024, "gpu");
    let frames = traffic(5, 20_000);
    // The CPU executor's answer, frame by frame (in arrival order: one table per queue).
    let c = QueueCounters::new(p.stages.len(), p.acl().map_or(0, |a| a.rule_count()));
    let want = gpu_common::cpu_answers(&p, &c, &frames, burst, |m, v| {
        (m.ct_state, v.action as u8, v.rule)
    });
    let Stage::Conntrack(ct) = &p.stages[1] else {
        panic!("pipeline[1] is conntrack")
    };
    let cpu_counters: Vec<u64> = ct.counters().iter().map(|c| c.1).collect();

    let image = image_for_pipeline(&p).expect("image");
    assert!(pktwarp_kernels::codegen::pipeline_orders_flows(
        &image.stages
    ));
    let acl = p.acl().expect("acl");
    let bytes = acl.gpu_image_bytes();
    let pd = PipelineDesc {
        parse: true,
        acl: Some(AclTablesRef {
            bytes: &bytes,
            n_rules: acl.rule_count() as u32,
        }),
        count: true,
        default_action: acl.default as u8,
    };
    let opts = GpuOptions {
        emit_meta: true,
        burst_ctas: Some(burst_ctas),
        ..gpu_common::burst_opts(mode, placement, burst)
    };
    let mut ex = GpuExecutor::new(opts, pd, QUEUES, &image).expect("executor");
    assert_eq!(
        ex.options().parts(),
        if mode == Mode::Persistent {
            burst_ctas
        } else {
            1
        }
    );
    ex.start().expect("start");
    // Each queue's frames in arrival order, as bursts; their indices into `frames`.
    let mut got: Vec<Option<(u8, u8, u32)>> = vec![None; frames.len()];
    for q in 0..QUEUES {
        let idx: Vec<usize> = (0..frames.len())
            .filter(|&i| frames[i].0.queue as usize == q)
            .collect();
        let bursts: Vec<&[usize]> = idx.chunks(burst).collect();
        let mut done = 0usize;
        let mut next = 0usize;
        let t = std::time::Instant::now();
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
            ex.poll(q, |seq, v, m| {
                let m = m.expect("metadata back (emit_meta)");
                for (k, &i) in bursts[seq as usize].iter().enumerate() {
                    got[i] = Some((m[k].ct_state, v[k].action, v[k].rule));
                }
                done += 1;
            })
            .expect("poll");
            assert!(t.elapsed().as_secs() < 60, "{what}: bursts never finished");
        }
    }
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(
            Some(*w),
            *g,
            "{what}: frame {i} (queue {}): (ct_state, action, rule) cpu vs gpu",
            frames[i].0.queue
        );
    }
    let snap = ex.counters().expect("counters");
    let mut gpu_counters = vec![0u64; 6];
    for q in &snap.stages {
        for (s, v) in gpu_counters.iter_mut().zip(&q[1].v[1..7]) {
            *s += v;
        }
    }
    assert_eq!(gpu_counters, cpu_counters, "{what}: conntrack counters");
    ex.shutdown().expect("shutdown");
}

#[test]
fn conntrack_on_the_gpu_equals_the_cpu_frame_by_frame() {
    if pipeline::internal::testdata::no_gpu(
        file!(),
        "conntrack_on_the_gpu_equals_the_cpu_frame_by_frame",
    ) {
        return;
    }
    for burst in [32, 256] {
        for mode in [Mode::Persistent, Mode::Launch] {
            for placement in [Placement::Mapped, Placement::Device] {
                check(mode, placement, burst, 1);
            }
        }
        for placement in [Placement::Mapped, Placement::Device] {
            check(Mode::Persistent, placement, burst, 4);
        }
    }
}
