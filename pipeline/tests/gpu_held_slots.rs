//! On a GPU: holding reaped slots (`GpuExecutor::hold_reaped_slots`, what the daemon does so its
//! TX thread sends frames from the ring slot they ran in). With a ring of two slots, two bursts
//! reaped and not released leave no slot: the next submit is `RingFull`; releasing the later
//! burst first frees nothing (the next slot is the earlier one's); releasing the earlier one
//! takes exactly one more burst; the TX ring's data area of each burst holds its own frames. In
//! every mode and placement. Needs a CUDA GPU (listed in docs/hardware-only-tests.md);
//! `scripts/gpu-run.sh` runs it on the GPU machine (step `held-slots`).

mod gpu_common;

use std::sync::Arc;

use pipeline::burst::{Burst, FrameDesc};
use pipeline::internal::executor::gpu::{
    image_for_pipeline, GpuExecutor, GpuOptions, Mode, Placement, SubmitError,
};
use pipeline::internal::stage::{BuiltStage, CustomSlot, GpuStage, Pipeline, Stage};
use pipeline::internal::testdata::MaxLen;

/// Passes every frame (a composed pipeline: its kernel writes the TX ring).
const CUDA: &str = r#"
PW_DEVICE void keep_stage(const pw_frame *f, pw_packet_meta *m, pw_verdict *v, const void *p,
                          pw_stage_counters *c) {
}
"#;

fn pipeline() -> Pipeline {
    let built = BuiltStage {
        cpu: Arc::new(MaxLen::new(usize::MAX)),
        gpu: Some(GpuStage {
            source: CUDA.into(),
            function: "keep_stage".into(),
            params: vec![0; 8],
            counter_names: vec!["too_long".into()],
            buffers: Vec::new(),
        }),
    };
    let slot = CustomSlot::new("keep", built, false).expect("a valid stage");
    Pipeline::new(vec![Stage::Custom(Box::new(slot)), Stage::Count])
}

/// 16 frames of 64..=544 bytes, every byte `fill`.
fn burst(fill: u8) -> Burst {
    let mut b = Burst::default();
    for i in 0..16usize {
        let n = 64 + i * 32;
        let d = FrameDesc {
            wire_len: n as u32,
            ..FrameDesc::default()
        };
        b.push(&vec![fill; n], d);
    }
    b
}

/// Reaps until `n` more bursts came back: (seq, the TX ring's frames as bytes).
fn reap(ex: &GpuExecutor, n: usize, what: &str) -> Vec<(u32, Vec<Vec<u8>>)> {
    let mut got = Vec::new();
    let t = std::time::Instant::now();
    while got.len() < n {
        ex.poll_bursts(0, |r| {
            let (Some(tx), Some(data)) = (r.tx, r.data) else {
                panic!("{what}: a composed pipeline without a TX ring");
            };
            let frames = tx
                .iter()
                .map(|d| data[d.offset as usize..(d.offset + d.len) as usize].to_vec())
                .collect();
            got.push((r.seq, frames));
        })
        .expect("poll");
        assert!(t.elapsed().as_secs() < 20, "{what}: bursts never finished");
    }
    got
}

fn frames_of(b: &Burst) -> Vec<Vec<u8>> {
    b.frames().map(|(_, f)| f.to_vec()).collect()
}

fn check(mode: Mode, placement: Placement) {
    let what = format!("{mode:?} / {placement:?}");
    let image = image_for_pipeline(&pipeline()).expect("image");
    let opts = GpuOptions {
        mode,
        placement,
        burst_size: 32,
        ring_slots: 2,
        ..GpuOptions::default()
    };
    let pd = gpu_common::counting(false);
    let mut ex = GpuExecutor::new(opts, pd, 1, &image).expect("executor");
    ex.hold_reaped_slots();
    assert!(ex.holds_reaped_slots());
    ex.start().expect("start");
    let full =
        |ex: &GpuExecutor, b: &Burst| matches!(ex.submit(0, b), Err(SubmitError::RingFull { .. }));
    let (a, b, c) = (burst(0xa1), burst(0xb2), burst(0xc3));
    let s0 = ex.submit(0, &a).expect("submit");
    let s1 = ex.submit(0, &b).expect("submit");
    ex.flush(0).expect("flush");
    let got = reap(&ex, 2, &what);
    assert_eq!(got[0], (s0, frames_of(&a)), "{what}: burst 0's frames");
    assert_eq!(got[1], (s1, frames_of(&b)), "{what}: burst 1's frames");
    // Both reaped, neither released: no slot.
    assert!(full(&ex, &c), "{what}: a held slot was reused");
    ex.release(0, s1);
    assert!(
        full(&ex, &c),
        "{what}: the later release freed the earlier slot"
    );
    ex.release(0, s0);
    let s2 = ex.submit(0, &c).expect("the released slot takes a burst");
    let s3 = ex.submit(0, &a).expect("so does the other one");
    assert!(full(&ex, &b), "{what}: two bursts in flight fill the ring");
    ex.flush(0).expect("flush");
    let got = reap(&ex, 2, &what);
    assert_eq!(got[0], (s2, frames_of(&c)), "{what}: burst 2's frames");
    assert_eq!(got[1], (s3, frames_of(&a)), "{what}: burst 3's frames");
    ex.release(0, s2);
    ex.release(0, s3);
    ex.submit(0, &b).expect("every slot released");
    ex.flush(0).expect("flush");
    reap(&ex, 1, &what);
    ex.shutdown().expect("shutdown");
}

#[test]
fn held_slots_are_reused_only_once_released_on_the_gpu() {
    if pipeline::internal::testdata::no_gpu(
        file!(),
        "held_slots_are_reused_only_once_released_on_the_gpu",
    ) {
        return;
    }
    for mode in [Mode::Persistent, Mode::Launch] {
        for placement in [Placement::Mapped, Placement::Device] {
            check(mode, placement);
        }
    }
}
