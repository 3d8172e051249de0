//! On a GPU: every byte a persistent kernel reads from a ring slot is the one the host wrote for
//! that burst, lap after lap. A composed pipeline's one stage hashes each frame's bytes (FNV-1a)
//! into its verdict's mark; the test computes the same hash of what it submitted, frame by frame.
//! Bursts of 32 frames of 900..1399 bytes (~36 KiB: more than the kernel's 24 KiB stage, so
//! they run in chunks) and of 60..249 bytes (staged whole in shared memory: the other read
//! path), a ring of 8 slots, every frame's bytes different from every other's (a
//! stale byte of a slot's previous lap changes the hash). The kernel first waits for each burst
//! (one in flight: it reads the slot the moment the producer index names it), then runs behind
//! the host (six in flight). In a matrix that tells the causes apart: `device` and `mapped`
//! rings, one and four CTAs a burst (`burst_ctas`; four is the default of a device ring with
//! bursts of 32, one of a mapped ring), so a failure names the placement / CTA split it needs.
//! Needs a CUDA GPU (listed in docs/hardware-only-tests.md).

use std::sync::Arc;

use pipeline::burst::{Burst, FrameDesc};
use pipeline::internal::executor::gpu::{
    image_for_pipeline, GpuExecutor, GpuOptions, Mode, PipelineDesc, Placement,
};
use pipeline::internal::stage::{BuiltStage, CustomSlot, GpuStage, Pipeline, Stage};
use pipeline::internal::testdata::MaxLen;
use pipeline::verdict::Action;

/// FNV-1a of the frame's bytes into the verdict's mark.
const CUDA: &str = r#"
PW_DEVICE void fnv_stage(const pw_frame *f, pw_packet_meta *m, pw_verdict *v, const void *p,
                         pw_stage_counters *c) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < f->len; i++) {
        h ^= f->data[i];
        h *= 16777619u;
    }
    v->mark = h;
}
"#;

const FRAMES: usize = 32;
const SLOTS: u32 = 8;
/// Bursts waited for one at a time, then bursts with up to `IN_FLIGHT` in flight.
const SINGLE: usize = 120;
const STREAMED: usize = 200;
const IN_FLIGHT: usize = 6;

fn fnv(b: &[u8]) -> u32 {
    b.iter().fold(2166136261u32, |h, &x| {
        (h ^ u32::from(x)).wrapping_mul(16777619)
    })
}

fn pipeline() -> Pipeline {
    let built = BuiltStage {
        cpu: Arc::new(MaxLen::new(usize::MAX)),
        gpu: Some(GpuStage {
            source: CUDA.into(),
            function: "fnv_stage".into(),
            params: vec![0; 8],
            counter_names: vec!["too_long".into()],
            buffers: Vec::new(),
        }),
    };
    let slot = CustomSlot::new("fnv", built, false).expect("a valid stage");
    Pipeline::new(vec![Stage::Custom(Box::new(slot)), Stage::Count])
}

/// Burst `k`: 32 frames of 900..1399 bytes (`small`: 60..249), each a xorshift stream seeded
/// by its frame number.
fn burst(k: usize, small: bool) -> Burst {
    let mut b = Burst::default();
    for i in 0..FRAMES {
        let n = k * FRAMES + i;
        let len = if small {
            60 + (n * 37) % 190
        } else {
            900 + (n * 37) % 500
        };
        let mut x = (n as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let d = FrameDesc {
            wire_len: len as u32,
            ..FrameDesc::default()
        };
        b.push(&bytes, d);
    }
    b
}

/// Runs the bursts through a fresh executor: `None` when every frame's hash matched, else what
/// differed (bursts, slots, first frame index in each).
fn check(placement: Placement, ctas: u32, small: bool) -> Option<String> {
    let size = if small {
        "staged (60..249 B)"
    } else {
        "chunked (900..1399 B)"
    };
    let what = format!("persistent / {placement:?} / burst_ctas {ctas} / {size}");
    let image = image_for_pipeline(&pipeline()).expect("image");
    let opts = GpuOptions {
        mode: Mode::Persistent,
        placement,
        burst_size: FRAMES as u32,
        ring_slots: SLOTS,
        burst_ctas: Some(ctas),
        tagged: Some(false),
        ..GpuOptions::default()
    };
    let pd = PipelineDesc {
        parse: false,
        acl: None,
        count: true,
        default_action: Action::Pass as u8,
    };
    let mut ex = GpuExecutor::new(opts, pd, 1, &image).expect("executor");
    ex.start().expect("start");
    let bursts: Vec<Burst> = (0..SINGLE + STREAMED).map(|k| burst(k, small)).collect();
    let want: Vec<Vec<u32>> = bursts
        .iter()
        .map(|b| b.frames().map(|(_, f)| fnv(f)).collect())
        .collect();
    let mut bad: Vec<String> = Vec::new();
    let mut bad_frames = 0usize;
    let (mut next, mut done) = (0usize, 0usize);
    let t = std::time::Instant::now();
    while done < bursts.len() {
        let in_flight = if next < SINGLE { 1 } else { IN_FLIGHT };
        while next < bursts.len() && next - done < in_flight {
            ex.submit(0, &bursts[next]).expect("submit");
            next += 1;
        }
        ex.poll(0, |seq, v, _| {
            let k = seq as usize;
            let wrong: Vec<usize> = (0..v.len()).filter(|&i| v[i].mark != want[k][i]).collect();
            if let Some(&first) = wrong.first() {
                bad_frames += wrong.len();
                bad.push(format!(
                    "burst {k} (slot {}, lap {}): {} of {} frames, first index {first}",
                    seq % SLOTS,
                    seq / SLOTS,
                    wrong.len(),
                    v.len()
                ));
            }
            done += 1;
        })
        .unwrap_or_else(|e| panic!("{what}: poll: {e:#}"));
        assert!(
            t.elapsed().as_secs() < 30,
            "{what}: burst {done} never finished"
        );
    }
    ex.shutdown().expect("shutdown");
    (!bad.is_empty()).then(|| {
        format!(
            "{what}: {bad_frames} frames in {} bursts hashed other bytes than submitted; first: {}",
            bad.len(),
            bad.iter().take(6).cloned().collect::<Vec<_>>().join("; ")
        )
    })
}

#[test]
fn a_persistent_kernel_reads_each_laps_bytes_of_a_ring_slot() {
    if let Err(e) = pipeline::internal::executor::gpu::probe(0) {
        pipeline::internal::testdata::skip(
            file!(),
            "a_persistent_kernel_reads_each_laps_bytes_of_a_ring_slot",
            &format!("no usable GPU: {e}"),
        );
        return;
    }
    // Every case runs, so one failing run shows the whole matrix.
    let failed: Vec<String> = [
        (Placement::Device, 4),
        (Placement::Device, 1),
        (Placement::Mapped, 4),
        (Placement::Mapped, 1),
    ]
    .into_iter()
    .flat_map(|(p, k)| [(p, k, false), (p, k, true)])
    .filter_map(|(p, k, small)| check(p, k, small))
    .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
