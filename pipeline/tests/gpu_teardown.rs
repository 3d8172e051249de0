//! On a GPU: a persistent kernel that never returns (a user stage that spins on a word nobody
//! writes) is not freed under. `GpuExecutor::shutdown` gives up at its wait with a
//! `KernelStillRunning`, dropping the executor leaks its rings and tables instead of freeing
//! them (or blocking in `cuMemFree`, which waits for the device), the abandonment is counted, and
//! the whole process still exits promptly. The work runs in a child process so the test can time
//! the process's exit with the kernel still running. Needs a CUDA GPU (listed in
//! docs/hardware-only-tests.md); the GPU machine runs it (scripts/gpu-carry.sh carries it).

mod gpu_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use pipeline::burst::{Burst, FrameDesc};
use pipeline::internal::executor::gpu::{
    abandoned_executors, image_for_pipeline, GpuExecutor, GpuOptions, KernelStillRunning, Mode,
    Placement,
};
use pipeline::internal::stage::{BuiltStage, CustomSlot, GpuStage, Pipeline, Stage};
use pipeline::internal::testdata::MaxLen;

/// Spins while its parameter word is 0: volatile reads, so the loop is not optimised away.
const HANG: &str = r#"
PW_DEVICE void hang_stage(const pw_frame *f, pw_packet_meta *m, pw_verdict *v, const void *p,
                          pw_stage_counters *c) {
    const volatile uint32_t *go = (const volatile uint32_t *)p;
    while (*go == 0) {
    }
}
"#;

const WAIT: Duration = Duration::from_millis(300);

fn hanging_pipeline() -> Pipeline {
    let built = BuiltStage {
        cpu: Arc::new(MaxLen::new(usize::MAX)),
        gpu: Some(GpuStage {
            source: HANG.into(),
            function: "hang_stage".into(),
            params: vec![0; 8],
            counter_names: vec!["too_long".into()],
            buffers: Vec::new(),
        }),
    };
    let slot = CustomSlot::new("hang", built, false).expect("a valid stage");
    Pipeline::new(vec![Stage::Custom(Box::new(slot)), Stage::Count])
}

/// The child: builds the executor, hangs its kernel on one burst, shuts down, drops it.
#[test]
#[ignore]
fn hung_kernel_child() {
    let p = hanging_pipeline();
    let image = image_for_pipeline(&p).expect("image");
    let opts = GpuOptions {
        mode: Mode::Persistent,
        placement: Placement::Mapped,
        burst_size: 32,
        ring_slots: 8,
        ..GpuOptions::default()
    };
    let pd = gpu_common::counting(false);
    let mut ex = GpuExecutor::new(opts, pd, 1, &image).expect("executor");
    let mut b = Burst::default();
    let d = FrameDesc {
        wire_len: 64,
        ..FrameDesc::default()
    };
    b.push(&[0u8; 64], d);
    ex.submit(0, &b).expect("submit");
    ex.set_stop_wait(WAIT);
    let t = Instant::now();
    let e = ex.shutdown().expect_err("the kernel cannot have returned");
    let waited = t.elapsed();
    assert!(
        e.downcast_ref::<KernelStillRunning>().is_some(),
        "not a KernelStillRunning: {e:#}"
    );
    assert!(
        waited >= WAIT && waited < WAIT + Duration::from_secs(2),
        "{waited:?}"
    );
    let t = Instant::now();
    drop(ex);
    let dropped = t.elapsed();
    assert!(
        dropped < Duration::from_secs(2),
        "the drop waited {dropped:?}"
    );
    assert_eq!(abandoned_executors(), 1);
    println!("CHILD-OK waited {waited:?}, dropped in {dropped:?}");
}

#[test]
fn a_hung_kernel_is_leaked_not_freed_and_the_process_exits() {
    if pipeline::internal::testdata::no_gpu(
        file!(),
        "a_hung_kernel_is_leaked_not_freed_and_the_process_exits",
    ) {
        return;
    }
    let t = Instant::now();
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--ignored", "--exact", "hung_kernel_child", "--nocapture"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the child");
    // The child builds a context and compiles (or finds cached) the composed kernel first:
    // allow that, then its shutdown (0.3 s), drop and exit.
    let limit = Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("the child did not exit within {limit:?} (a free or unload under the kernel blocks)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("CHILD-OK"),
        "child did not run:\n{stdout}\n{stderr}"
    );
    eprintln!(
        "{}",
        stdout
            .lines()
            .find(|l| l.contains("CHILD-OK"))
            .unwrap_or("")
    );
    eprintln!("child process ran and exited in {:?}", t.elapsed());
}
