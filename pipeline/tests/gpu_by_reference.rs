//! On a GPU: loaded frames handed to the GPU executor by reference (docs/gpu-ingest.md), a
//! `pcap` port's capture and a pooled `gen` port's frame pool copied once into pinned host
//! memory, descriptors per frame: `device` rings gather the frames into their slots, `mapped`
//! rings' kernels gather them from where they are into shared memory (`PW_SLOT_REFS`,
//! `pw_stage_refs`; bursts too wide for the staging area are read in place). Every run's
//! counts must equal the CPU executor's on the same config, with the path asked for
//! (`by_reference`, or `staged` with `executor.gpu.by_reference: false`), and every
//! by-reference run must end within [`BOUND`]: in persistent mode the loaded frames' pinned
//! memory was once freed while the kernel ran, which waits for the kernel's 60 s idle timeout
//! (docs/gpu-ingest.md). Needs a CUDA GPU
//! (listed in docs/hardware-only-tests.md); the GPU machine runs it (scripts/gpu-carry.sh
//! carries it, `scripts/gpu-suite.manifest` step `gpu-by-reference`).

mod gpu_common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pipeline::daemon::{open_ports, prepare, run_cpu, run_gpu};
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::testdata::assert_same_counts;

/// The longest a by-reference run may take: each source runs in well under a second on an
/// H100 (launch mode: 0.17 s with the setup), and the stall this guards against lasts the
/// kernel's idle timeout (`executor.gpu.idle_timeout_ms`, 60 s).
const BOUND: Duration = Duration::from_secs(5);

/// A capture replayed 6 times, a pooled generator of IMIX frames (IPv4 and IPv6: mapped rings
/// read most bursts in place, too wide to gather) and one of 64 B frames (gathered whole into
/// shared memory, 256-frame slots).
fn sources() -> Vec<(&'static str, String)> {
    let cap = pipeline::internal::testdata::multi_proto_pcap();
    vec![
        (
            "pcap",
            format!("pcap: {{ rx: {{ path: {}, loops: 6 }} }}", cap.display()),
        ),
        (
            "gen",
            "gen: { count: 60000, seed: 12, size: imix, flows: { src: 10.0.0.0/8, \
             dst: 192.168.0.0/16, dst_ports: 1-1023, ipv6_share: 0.2, flow_count: 500 } }"
                .to_string(),
        ),
        (
            "gen64",
            "gen: { count: 80000, seed: 14, size: 64, flows: { src: 10.0.0.0/8, \
             dst: 192.168.0.0/16, dst_ports: 1-1023, ipv6_share: 0.1, flow_count: 700 } }"
                .to_string(),
        ),
    ]
}

/// The config over `port` on the CPU executor (`gpu` None) or on the GPU executor with these
/// options.
fn config(port: &str, gpu: Option<&str>) -> pipeline::config::Config {
    let executor = match gpu {
        None => "{ kind: cpu }".to_string(),
        Some(o) => format!("{{ kind: gpu, gpu: {{ {o} }} }}"),
    };
    let yaml = format!(
        "ports:\n  - name: in\n    {port}\n\
         queues: {{ count: 3, burst: 64, ring_slots: 8, rx_threads: per_queue }}\n\
         pipeline:\n  - parse\n  - acl: {{ rules: rules/inline-filter.rules.yaml, default: pass }}\n  - count\n\
         executor: {executor}\n"
    );
    pipeline::config::parse_str(&yaml, &configs_dir().join("gpu-by-reference-test.yaml"))
        .expect("config")
}

/// The shipped configs folder: beside the sources where the test was built, else `configs/` of
/// the folder it runs in (a carried binary runs from a repository root on the GPU machine).
fn configs_dir() -> std::path::PathBuf {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    if built.is_dir() {
        built
    } else {
        std::path::PathBuf::from("configs")
    }
}

#[test]
fn loaded_frames_by_reference_count_as_the_cpu_executor_on_mapped_and_device_rings() {
    let cases = [
        (
            "mode: persistent, placement: mapped, by_reference: true",
            "by_reference",
        ),
        (
            "mode: persistent, placement: device, by_reference: true",
            "by_reference",
        ),
        (
            "mode: launch, placement: mapped, by_reference: true",
            "by_reference",
        ),
        (
            "mode: launch, placement: device, by_reference: true",
            "by_reference",
        ),
        ("mode: persistent, placement: mapped", "staged"),
        ("mode: persistent, placement: device", "staged"),
    ];
    // The configs are parsed everywhere (`prepare` of a GPU config needs the GPU).
    for (_, port) in sources() {
        for (opts, _) in cases {
            config(&port, Some(opts));
        }
    }
    if pipeline::internal::testdata::no_gpu(
        file!(),
        "loaded_frames_by_reference_count_as_the_cpu_executor_on_mapped_and_device_rings",
    ) {
        return;
    }
    for (name, port) in sources() {
        let cpu_p = prepare(config(&port, None)).expect("prepare");
        let shared = Arc::new(CpuShared::new(&cpu_p.cpu_spec()));
        let cpu = run_cpu(&cpu_p, &shared, open_ports(&cpu_p.cfg).expect("ports"));
        assert!(cpu.rx_frames > 0 && cpu.acl_default > 0, "{name}");
        for (opts, path) in cases {
            let what = format!("{name}, {opts}");
            let p = prepare(config(&port, Some(opts))).expect("prepare");
            let image =
                pipeline::internal::executor::gpu::image_for_pipeline(&p.pipeline).expect("image");
            let shared = Arc::new(CpuShared::new(&p.cpu_spec()));
            let t = Instant::now();
            let gpu = run_gpu(&p, &shared, open_ports(&p.cfg).expect("ports"), &image)
                .unwrap_or_else(|e| panic!("{what}: GPU run: {e:#}"));
            let took = t.elapsed();
            assert!(
                took < BOUND,
                "{what}: the run took {:.1} s (at most {} s): a by-reference run stalled until \
                 the persistent kernel's idle timeout (the pinned frames freed under it?)",
                took.as_secs_f64(),
                BOUND.as_secs()
            );
            assert_eq!(gpu.executor, "gpu", "{what}");
            let paths: Vec<&str> = gpu.gpu_ingest.iter().map(|g| g.path.as_str()).collect();
            assert_eq!(paths, [path], "{what}: {:?}", gpu.gpu_ingest);
            assert_same_counts(&gpu, &cpu, &what);
            println!(
                "GPU-BY-REFERENCE-OK {what}: {} frames, {} rule hits, {} default, {}, {:.3} s",
                gpu.rx_frames,
                gpu.top_rules.iter().map(|r| r.1).sum::<u64>(),
                gpu.acl_default,
                gpu.gpu_ingest[0].path,
                took.as_secs_f64()
            );
        }
    }
}

/// What the driver does with pinned host memory while a persistent kernel runs: the time of a
/// `cuMemHostAlloc` and of a `cuMemFreeHost` under it (a kernel with a 3 s idle timeout). The
/// free is expected to wait for the kernel (about 3 s here): why the by-reference ingest frees
/// its pinned frames only after the executor stops. Printed (`GPU-BY-REFERENCE-PINNED`), not
/// asserted: it is the driver's behaviour, not pktwarp's; the bound above is the check.
#[test]
fn pinned_memory_under_a_running_persistent_kernel() {
    use pipeline::internal::executor::gpu::{GpuExecutor, GpuOptions, Mode, Placement};
    use pipeline::stage::{Pipeline, Stage};
    if pipeline::internal::testdata::no_gpu(
        file!(),
        "pinned_memory_under_a_running_persistent_kernel",
    ) {
        return;
    }
    let p = Pipeline::new(vec![Stage::Count]);
    let image = pipeline::internal::executor::gpu::image_for_pipeline(&p).expect("image");
    let opts = GpuOptions {
        mode: Mode::Persistent,
        placement: Placement::Mapped,
        idle_timeout_ms: 3000,
        ..GpuOptions::default()
    };
    let pd = gpu_common::counting(false);
    let mut ex = GpuExecutor::new(opts, pd, 1, &image).expect("executor");
    let t = Instant::now();
    let b = ex.pinned_copy(&[0u8; 4096]).expect("pinned memory");
    let alloc = t.elapsed();
    let t = Instant::now();
    drop(b);
    let free = t.elapsed();
    ex.shutdown().expect("shutdown");
    println!(
        "GPU-BY-REFERENCE-PINNED under a running persistent kernel (idle timeout 3 s): \
         cuMemHostAlloc {:.3} s, cuMemFreeHost {:.3} s",
        alloc.as_secs_f64(),
        free.as_secs_f64()
    );
}
