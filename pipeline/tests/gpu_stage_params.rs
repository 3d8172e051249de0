//! On a GPU: a composed pipeline's stage parameter block swaps by epoch, and a stage's own
//! device buffer is written by the kernel and read back by the host.
//!
//! The user stage `max_len` drops frames longer than its parameter (a u32) and adds every frame
//! it sees to a u64 in its own device buffer. Bursts submitted before
//! `GpuExecutor::publish_stage_params` must run with the old limit and those after with the new
//! one, exactly at the burst boundary, in every mode and placement; the buffer must hold the
//! number of frames the stage saw. Needs a CUDA GPU (listed in docs/hardware-only-tests.md);
//! `scripts/gpu-run.sh` runs it on the GPU machine.

mod gpu_common;

use std::sync::Arc;

use pipeline::burst::{Burst, FrameDesc};
use pipeline::internal::executor::gpu::{
    image_for_pipeline, GpuExecutor, GpuOptions, Mode, Placement,
};
use pipeline::internal::stage::{BuiltStage, CustomSlot, GpuStage, Pipeline, Stage};
use pipeline::internal::testdata::MaxLen;
use pipeline::verdict::Action;
use pktwarp_kernels::StageBuffer;

const CUDA: &str = r#"
typedef struct { uint32_t max_len; uint32_t pad; uint64_t seen; } max_len_params;
PW_DEVICE void max_len_stage(const pw_frame *f, pw_packet_meta *m, pw_verdict *v, const void *p,
                             pw_stage_counters *c) {
    const max_len_params *q = (const max_len_params *)p;
    atomicAdd((unsigned long long *)q->seen, 1ull);
    if (f->len > q->max_len) {
        v->action = PW_ACTION_DROP;
        PW_ADD64(&c->v[1], 1);
    }
}
"#;

/// The parameter block: max_len, padding, then the buffer's address (patched by the executor).
fn params(max_len: u32) -> Vec<u8> {
    let mut b = max_len.to_le_bytes().to_vec();
    b.resize(16, 0);
    b
}

fn pipeline(max_len: u32) -> Pipeline {
    let built = BuiltStage {
        cpu: Arc::new(MaxLen::new(max_len as usize)),
        gpu: Some(GpuStage {
            source: CUDA.into(),
            function: "max_len_stage".into(),
            params: params(max_len),
            counter_names: vec!["too_long".into()],
            buffers: vec![StageBuffer {
                name: "seen".into(),
                bytes: 8,
                addr_at: 8,
            }],
        }),
    };
    let slot = CustomSlot::new("max_len", built, false).expect("a valid stage");
    Pipeline::new(vec![Stage::Custom(Box::new(slot)), Stage::Count])
}

/// 32 frames of 64..=1024 bytes.
fn burst() -> Burst {
    let mut b = Burst::default();
    for i in 0..32usize {
        let n = 64 + i * 31;
        let d = FrameDesc {
            wire_len: n as u32,
            ..FrameDesc::default()
        };
        b.push(&vec![i as u8; n], d);
    }
    b
}

fn dropped(v: &[pipeline::internal::executor::gpu::abi::Verdict]) -> Vec<bool> {
    v.iter().map(|v| v.action == Action::Drop as u8).collect()
}

fn expect(b: &Burst, max_len: usize) -> Vec<bool> {
    b.frames().map(|(d, _)| d.len as usize > max_len).collect()
}

fn check(mode: Mode, placement: Placement) {
    let p = pipeline(300);
    let image = image_for_pipeline(&p).expect("image");
    assert_eq!(image.template, pktwarp_kernels::Template::Composed);
    let opts = GpuOptions {
        mode,
        placement,
        burst_size: 32,
        ring_slots: 8,
        ..GpuOptions::default()
    };
    let pd = gpu_common::counting(false);
    let what = format!("{mode:?} / {placement:?}");
    let mut ex = GpuExecutor::new(opts, pd, 1, &image).expect("executor");
    ex.start().expect("start");
    let b = burst();
    let mut got: Vec<(u32, Vec<bool>)> = Vec::new();
    let reap = |ex: &GpuExecutor, got: &mut Vec<(u32, Vec<bool>)>, until: usize| {
        let t = std::time::Instant::now();
        while got.len() < until {
            ex.poll(0, |seq, v, _| got.push((seq, dropped(v))))
                .expect("poll");
            assert!(t.elapsed().as_secs() < 20, "{what}: bursts never finished");
        }
    };
    // Three bursts with 300, a swap to 100, three more: the swap falls between bursts 2 and 3
    // though they may all be in flight together.
    for _ in 0..3 {
        ex.submit(0, &b).expect("submit");
    }
    ex.publish_stage_params(&[params(100), Vec::new()], 1)
        .expect("publish");
    assert_eq!(ex.params_generation(), 1);
    for _ in 0..3 {
        ex.submit(0, &b).expect("submit");
    }
    reap(&ex, &mut got, 6);
    // And back to 700, through a second retirement of the replaced set.
    ex.publish_stage_params(&[params(700), Vec::new()], 2)
        .expect("publish");
    ex.submit(0, &b).expect("submit");
    reap(&ex, &mut got, 7);
    got.sort_by_key(|g| g.0);
    for (seq, d) in &got {
        let limit = match seq {
            0..=2 => 300,
            3..=5 => 100,
            _ => 700,
        };
        assert_eq!(
            d,
            &expect(&b, limit),
            "{what}: burst {seq} ran with max_len {limit}"
        );
    }
    let seen = ex.read_stage_buffer(0, 0).expect("read the buffer");
    let seen = u64::from_le_bytes(seen[..8].try_into().unwrap());
    assert_eq!(
        seen,
        7 * 32,
        "{what}: the stage's buffer counts every frame it saw"
    );
    assert!(ex
        .stage_buffer(0, 0)
        .is_some_and(|(addr, len)| addr != 0 && len == 8));
    assert!(ex.stage_buffer(0, 1).is_none() && ex.stage_buffer(1, 0).is_none());
    // A set for another kernel's stages is refused.
    assert!(ex.publish_stage_params(&[params(1)], 3).is_err());
    ex.shutdown().expect("shutdown");
}

#[test]
fn stage_params_swap_by_epoch_and_buffers_read_back_on_the_gpu() {
    if pipeline::internal::testdata::no_gpu(
        file!(),
        "stage_params_swap_by_epoch_and_buffers_read_back_on_the_gpu",
    ) {
        return;
    }
    for mode in [Mode::Persistent, Mode::Launch] {
        for placement in [Placement::Mapped, Placement::Device] {
            check(mode, placement);
        }
    }
}
