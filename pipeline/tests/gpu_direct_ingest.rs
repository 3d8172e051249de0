//! On a GPU: the GPU executor's in-place ingest of frames in GPU memory (the GPUDirect receive
//! path) without a GPUDirect NIC. A port plays the NIC: it keeps a pool of GPU buffers
//! (`cuMemAlloc`, as the DPDK port's RX mempool in GPU memory), writes each received frame into
//! a free buffer, hands the frames' device addresses over through `GpuRx` (as `DpdkRx::rx_gpu`
//! does) and gets the buffers back only when the daemon drops their hold. The daemon's GPU run
//! gathers them device to device into its device ring slots; its counts must equal the CPU
//! executor's on the same frames, every buffer must come back, and since a buffer given back is
//! poisoned at once (all ones) before it is reused, one given back before the GPU copied its
//! frame would change the counts. Needs a CUDA GPU (listed in docs/hardware-only-tests.md); the GPU machine runs it
//! (scripts/gpu-carry.sh carries it, scripts/gpu-run.sh step `gpu-direct-ingest`).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pipeline::burst::Burst;
use pipeline::daemon::{open_ports, prepare, run_cpu, run_gpu};
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::executor::gpu::driver::{Context, DeviceBuffer, Stream};
use pipeline::internal::port::gpu_rx::{GpuFrame, GpuRx, GpuRxBurst, GpuRxStatus};
use pipeline::internal::steer::Steering;
use pipeline::internal::testdata::assert_same_counts;
use pipeline::meta::PacketMeta;
use pipeline::port::{PortError, RxPort, RxStatus};

/// Bytes a buffer holds (DPDK's default mbuf data room) and buffers in the pool.
const BUF: usize = 2176;
const POOL: usize = 4096;

/// The GPU buffers a port receives into, with the free ones' indices.
struct Pool {
    ctx: Context,
    mem: DeviceBuffer,
    stream: Stream,
    free: Mutex<Vec<usize>>,
}

/// One received burst's buffers; dropping it gives them back to the pool.
struct Hold {
    pool: Arc<Pool>,
    bufs: Vec<usize>,
    released: Arc<AtomicU64>,
    poison_failed: Arc<AtomicU64>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        // Poisoned before they go back (all ones: no valid Ethernet / IP header), so a frame the
        // GPU had not copied yet when its buffer came back would be read as garbage and change
        // the counts, however soon the buffer is reused.
        let poison = [0xffu8; BUF];
        if self.pool.ctx.bind().is_ok() {
            for &b in &self.bufs {
                let r = self
                    .pool
                    .mem
                    .upload_range_on(&self.pool.stream, b * BUF, &poison);
                if r.is_err() {
                    self.poison_failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        } else {
            self.poison_failed.fetch_add(1, Ordering::Relaxed);
        }
        self.pool.free.lock().unwrap().extend(self.bufs.drain(..));
        self.released.fetch_add(1, Ordering::Relaxed);
    }
}

/// A port receiving into GPU memory: the frames of `inner`, each written into a free buffer of
/// the pool, on the queue a NIC's RSS would choose (the software steering's Toeplitz hash).
struct InGpuMemory {
    inner: Box<dyn RxPort>,
    pool: Arc<Pool>,
    steering: Steering,
    nq: usize,
    rx: Burst,
    ended: bool,
    bursts: Arc<AtomicU64>,
    released: Arc<AtomicU64>,
    poison_failed: Arc<AtomicU64>,
    /// Calls that found too few free buffers (the NIC out of mbufs): answered Idle.
    starved: Arc<AtomicU64>,
}

impl RxPort for InGpuMemory {
    fn rx_burst(&mut self, burst: &mut Burst, max: usize) -> Result<RxStatus, PortError> {
        self.inner.rx_burst(burst, max)
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn gpu_rx(&mut self) -> Option<&mut dyn GpuRx> {
        Some(self)
    }
}

impl GpuRx for InGpuMemory {
    fn gpu(&self) -> u32 {
        0
    }

    fn rx_gpu_burst(&mut self, max: usize) -> Result<GpuRxStatus, PortError> {
        if self.ended {
            return Ok(GpuRxStatus::End);
        }
        let bufs: Vec<usize> = {
            let mut free = self.pool.free.lock().unwrap();
            if free.len() < max {
                self.starved.fetch_add(1, Ordering::Relaxed);
                return Ok(GpuRxStatus::Idle);
            }
            let at = free.len() - max;
            free.split_off(at)
        };
        self.rx.clear();
        let st = self.inner.rx_burst(&mut self.rx, max)?;
        self.ended = st == RxStatus::End;
        if self.rx.is_empty() {
            self.pool.free.lock().unwrap().extend(bufs);
            return Ok(if self.ended {
                GpuRxStatus::End
            } else {
                GpuRxStatus::Idle
            });
        }
        let gpu_err = |e| PortError::Config(format!("GPU buffers: {e}"));
        self.pool.ctx.bind().map_err(gpu_err)?;
        let mut meta = PacketMeta::default();
        let mut frames = Vec::new();
        for ((d, f), &b) in self.rx.frames().zip(&bufs) {
            assert!(f.len() <= BUF, "a generated frame fits a buffer");
            self.pool
                .mem
                .upload_range_on(&self.pool.stream, b * BUF, f)
                .map_err(gpu_err)?;
            let (q, _, _) = self.steering.steer_marked(f, &mut meta, self.nq);
            frames.push(GpuFrame {
                addr: self.pool.mem.ptr() + (b * BUF) as u64,
                len: d.len,
                wire_len: d.wire_len,
                queue: q as u16,
                rss_hash: d.rss_hash,
                mark: 0,
            });
        }
        let hold = Hold {
            pool: Arc::clone(&self.pool),
            bufs,
            released: Arc::clone(&self.released),
            poison_failed: Arc::clone(&self.poison_failed),
        };
        self.bursts.fetch_add(1, Ordering::Relaxed);
        Ok(GpuRxStatus::Frames(GpuRxBurst {
            frames,
            timestamp_ns: 1,
            hold: Box::new(hold),
        }))
    }
}

/// The config on the CPU executor (`mode` None) or on the GPU executor with device rings.
fn config(mode: Option<&str>) -> pipeline::config::Config {
    let executor = match mode {
        None => "{ kind: cpu }".to_string(),
        Some(m) => format!("{{ kind: gpu, gpu: {{ placement: device, mode: {m} }} }}"),
    };
    let yaml = format!(
        "ports:\n\
         \x20 - name: a\n    gen: {{ count: 40000, size: imix, seed: 31, malformed_ratio: 0.02, \
         flows: {{ src: 10.0.0.0/8, dst: 192.168.0.0/16, dst_ports: 1-1023, ipv6_share: 0.1 }} }}\n\
         \x20 - name: b\n    gen: {{ count: 20000, size: 64, seed: 32, malformed_ratio: 0.02, \
         flows: {{ src: 10.0.0.0/8, dst: 192.168.0.0/16, dst_ports: 1-1023, ipv6_share: 0.1 }} }}\n\
         queues: {{ count: 3, burst: 32, ring_slots: 8 }}\n\
         pipeline:\n  - parse\n  - acl: {{ rules: rules/inline-filter.rules.yaml, default: pass }}\n  - count\n\
         executor: {executor}\n"
    );
    pipeline::config::parse_str(&yaml, &configs_dir().join("gpu-direct-test.yaml")).expect("config")
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
fn frames_in_gpu_memory_are_gathered_on_the_gpu_and_count_as_the_cpu_executor() {
    // The configs are checked everywhere; the runs need the GPU.
    let modes = ["persistent", "launch"];
    let cfgs: Vec<_> = modes.iter().map(|m| config(Some(m))).collect();
    let cpu_p = prepare(config(None)).expect("prepare");
    if pipeline::internal::testdata::no_gpu(
        file!(),
        "frames_in_gpu_memory_are_gathered_on_the_gpu_and_count_as_the_cpu_executor",
    ) {
        return;
    }
    let shared = Arc::new(CpuShared::new(&cpu_p.cpu_spec()));
    let cpu = run_cpu(&cpu_p, &shared, open_ports(&cpu_p.cfg).expect("ports"));
    assert_eq!(cpu.rx_frames, 60_000);
    assert!(cpu.acl_default > 0 && !cpu.top_rules.is_empty());
    for (mode, cfg) in modes.into_iter().zip(cfgs) {
        let p = prepare(cfg).expect("prepare");
        let ctx = Context::new(0).expect("GPU 0");
        let mem = DeviceBuffer::new(&ctx, POOL * BUF).expect("GPU buffers");
        let stream = Stream::new(&ctx).expect("stream");
        let pool = Arc::new(Pool {
            ctx,
            mem,
            stream,
            free: Mutex::new((0..POOL).collect()),
        });
        let (bursts, released, starved, poison_failed) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
        );
        let mut ports = open_ports(&p.cfg).expect("ports");
        ports.rx = std::mem::take(&mut ports.rx)
            .into_iter()
            .map(|inner| {
                Box::new(InGpuMemory {
                    inner,
                    pool: Arc::clone(&pool),
                    steering: p.cfg.build_steering().expect("steering"),
                    nq: p.cfg.queues.count as usize,
                    rx: Burst::with_capacity(64, 64 * BUF),
                    ended: false,
                    bursts: Arc::clone(&bursts),
                    released: Arc::clone(&released),
                    poison_failed: Arc::clone(&poison_failed),
                    starved: Arc::clone(&starved),
                }) as Box<dyn RxPort>
            })
            .collect();
        let image =
            pipeline::internal::executor::gpu::image_for_pipeline(&p.pipeline).expect("image");
        let shared = Arc::new(CpuShared::new(&p.cpu_spec()));
        let t = std::time::Instant::now();
        let gpu = run_gpu(&p, &shared, ports, &image).expect("GPU run");
        let what = format!("{mode}, device rings");
        assert_eq!(gpu.executor, "gpu", "{what}");
        let paths: Vec<&str> = gpu.gpu_ingest.iter().map(|g| g.path.as_str()).collect();
        assert_eq!(
            paths,
            ["in_place", "in_place"],
            "{what}: {:?}",
            gpu.gpu_ingest
        );
        assert_same_counts(&gpu, &cpu, &what);
        let (b, r) = (
            bursts.load(Ordering::Relaxed),
            released.load(Ordering::Relaxed),
        );
        assert!(b > 0, "{what}");
        assert_ne!(
            pipeline::internal::executor::gpu::gather_copies(),
            "none yet",
            "{what}: the frames went through the executor's gather"
        );
        assert_eq!(
            poison_failed.load(Ordering::Relaxed),
            0,
            "{what}: buffers poisoned"
        );
        assert_eq!(r, b, "{what}: every received burst's buffers given back");
        assert_eq!(
            pool.free.lock().unwrap().len(),
            POOL,
            "{what}: the pool is whole"
        );
        println!(
            "GPU-DIRECT-INGEST-OK {what}: {} frames in {b} received bursts, gathered in place, \
             counts equal to the CPU executor ({} rule hits, {} default), copies by {}, {} starved \
             polls, {:.3} s",
            gpu.rx_frames,
            gpu.top_rules.iter().map(|r| r.1).sum::<u64>(),
            gpu.acl_default,
            pipeline::internal::executor::gpu::gather_copies(),
            starved.load(Ordering::Relaxed),
            t.elapsed().as_secs_f64()
        );
    }
}
