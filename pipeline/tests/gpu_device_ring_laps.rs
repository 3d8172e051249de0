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
//! Then, on device rings with four CTAs and staged frames, what the `inspect` pipeline of
//! pipeline/tests/gpu_inspect.rs adds to this transport, one at a time and all together (that
//! test differs from the CPU only there): full descriptors (a frame with a steering mark; a
//! stage reading the receive time gets them too), a slow stage with a 12 KiB stack array (the
//! inspect stage's HTTP scratch), two queues run one after the other, and metadata read back;
//! and all of them with one CTA a burst, the control.
//! Needs a CUDA GPU (listed in docs/hardware-only-tests.md).

mod gpu_common;

use std::sync::Arc;

use pipeline::burst::{Burst, FrameDesc};
use pipeline::internal::executor::gpu::{
    image_for_pipeline, GpuExecutor, GpuOptions, Mode, Placement,
};
use pipeline::internal::stage::{BuiltStage, CustomSlot, GpuStage, Pipeline, Stage};
use pipeline::internal::testdata::MaxLen;

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

/// The same hash, by a stage shaped like `inspect` on the GPU: the frame copied into a 12 KiB
/// stack array (local memory, as the inspect stage's HTTP scratch) in a scattered order and
/// hashed from there, after about 20 us of spinning (an inspected frame's time), so the CTAs of
/// a burst finish apart and run with a large stack frame.
const CUDA_SLOW: &str = r#"
PW_DEVICE void fnv_slow_stage(const pw_frame *f, pw_packet_meta *m, pw_verdict *v, const void *p,
                              pw_stage_counters *c) {
    uint8_t scratch[12288];
    const uint32_t n = f->len < 12288u ? f->len : 12288u;
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t k = (uint32_t)(((uint64_t)i * 7919u) % n);
        scratch[k] = f->data[k];
    }
    const long long t0 = clock64();
    while (clock64() - t0 < 40000) {
    }
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++) {
        h ^= scratch[i];
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

fn pipeline(slow: bool) -> Pipeline {
    let (source, function) = if slow {
        (CUDA_SLOW, "fnv_slow_stage")
    } else {
        (CUDA, "fnv_stage")
    };
    let built = BuiltStage {
        cpu: Arc::new(MaxLen::new(usize::MAX)),
        gpu: Some(GpuStage {
            source: source.into(),
            function: function.into(),
            params: vec![0; 8],
            counter_names: vec!["too_long".into()],
            buffers: Vec::new(),
        }),
    };
    let slot = CustomSlot::new("fnv", built, false).expect("a valid stage");
    Pipeline::new(vec![Stage::Custom(Box::new(slot)), Stage::Count])
}

/// Burst `k`: 32 frames of 900..1399 bytes (`small`: 60..249), each a xorshift stream seeded
/// by its frame number; `full`: each with a steering mark, so the burst takes full descriptors.
fn burst(k: usize, small: bool, full: bool) -> Burst {
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
            mark: u32::from(full),
            ..FrameDesc::default()
        };
        b.push(&bytes, d);
    }
    b
}

/// One run of the matrix: where the ring is, CTAs a burst, and what the inspect pipeline adds.
#[derive(Clone, Copy)]
struct Case {
    placement: Placement,
    ctas: u32,
    /// 60..249-byte frames (staged whole), else 900..1399 (chunked).
    small: bool,
    /// Full descriptors (every frame with a steering mark).
    full: bool,
    /// The slow stage with the 12 KiB stack array.
    slow: bool,
    /// Two queues, the second's bursts after all of the first's.
    queues: usize,
    /// Metadata read back (`emit_meta`).
    meta: bool,
}

impl Case {
    fn plain(placement: Placement, ctas: u32, small: bool) -> Case {
        Case {
            placement,
            ctas,
            small,
            full: false,
            slow: false,
            queues: 1,
            meta: false,
        }
    }

    fn name(&self) -> String {
        let size = if self.small {
            "staged (60..249 B)"
        } else {
            "chunked (900..1399 B)"
        };
        let mut s = format!(
            "persistent / {:?} / burst_ctas {} / {size}",
            self.placement, self.ctas
        );
        for (on, what) in [
            (self.full, "full descriptors"),
            (self.slow, "slow stage, 12 KiB stack"),
            (self.queues > 1, "2 queues"),
            (self.meta, "metadata out"),
        ] {
            if on {
                s += " / ";
                s += what;
            }
        }
        s
    }
}

/// Runs the bursts through a fresh executor: `None` when every frame's hash matched, else what
/// differed (queue, bursts, slots, first frame index in each).
fn check(c: Case) -> Option<String> {
    let what = c.name();
    let image = image_for_pipeline(&pipeline(c.slow)).expect("image");
    let opts = GpuOptions {
        mode: Mode::Persistent,
        placement: c.placement,
        burst_size: FRAMES as u32,
        ring_slots: SLOTS,
        burst_ctas: Some(c.ctas),
        tagged: Some(false),
        emit_meta: c.meta,
        ..GpuOptions::default()
    };
    let pd = gpu_common::counting(false);
    let mut ex = GpuExecutor::new(opts, pd, c.queues, &image).expect("executor");
    ex.start().expect("start");
    let bursts: Vec<Burst> = (0..SINGLE + STREAMED)
        .map(|k| burst(k, c.small, c.full))
        .collect();
    let want: Vec<Vec<u32>> = bursts
        .iter()
        .map(|b| b.frames().map(|(_, f)| fnv(f)).collect())
        .collect();
    let mut bad: Vec<String> = Vec::new();
    let mut bad_frames = 0usize;
    for q in 0..c.queues {
        let (mut next, mut done) = (0usize, 0usize);
        let t = std::time::Instant::now();
        while done < bursts.len() {
            let in_flight = if next < SINGLE { 1 } else { IN_FLIGHT };
            while next < bursts.len() && next - done < in_flight {
                ex.submit(q, &bursts[next]).expect("submit");
                next += 1;
            }
            ex.poll(q, |seq, v, m| {
                let k = seq as usize;
                let wrong: Vec<usize> = (0..v.len()).filter(|&i| v[i].mark != want[k][i]).collect();
                if c.meta && m.is_none_or(|m| m.len() != v.len()) {
                    bad.push(format!("queue {q} burst {k}: no metadata for every frame"));
                }
                if let Some(&first) = wrong.first() {
                    bad_frames += wrong.len();
                    bad.push(format!(
                        "queue {q} burst {k} (slot {}, lap {}): {} of {} frames, first index \
                         {first}",
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
                t.elapsed().as_secs() < 60,
                "{what}: queue {q} burst {done} never finished"
            );
        }
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
    if pipeline::internal::testdata::no_gpu(
        file!(),
        "a_persistent_kernel_reads_each_laps_bytes_of_a_ring_slot",
    ) {
        return;
    }
    let mut cases: Vec<Case> = [
        (Placement::Device, 4),
        (Placement::Device, 1),
        (Placement::Mapped, 4),
        (Placement::Mapped, 1),
    ]
    .into_iter()
    .flat_map(|(p, k)| [Case::plain(p, k, false), Case::plain(p, k, true)])
    .collect();
    // What gpu_inspect's pipeline adds, one at a time on device rings with 4 CTAs, then all
    // together with 4 CTAs and with 1 (the configuration that differs there, and its control).
    let base = Case::plain(Placement::Device, 4, true);
    let all = Case {
        full: true,
        slow: true,
        queues: 2,
        meta: true,
        ..base
    };
    cases.extend([
        Case { full: true, ..base },
        Case { slow: true, ..base },
        Case {
            queues: 2,
            meta: true,
            ..base
        },
        all,
        Case { ctas: 1, ..all },
    ]);
    // Every case runs, so one failing run shows the whole matrix.
    let failed: Vec<String> = cases.into_iter().filter_map(check).collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
