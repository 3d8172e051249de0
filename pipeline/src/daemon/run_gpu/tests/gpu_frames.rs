//! Ports whose frames are in GPU memory (GPUDirect) on the GPU host side, with host memory
//! standing in for the GPU's: received in place (descriptors built by the ingest, frames
//! "gathered" by the stand-in from the port's buffers, the buffers given back only after
//! that), or staged where the host must read the frames; both count as the CPU executor.

use std::sync::atomic::AtomicU64;

use super::*;
use crate::daemon::GpuIngest;
use crate::port::gpu_rx::{GpuFrame, GpuRx, GpuRxBurst, GpuRxStatus};
use crate::port::{RxPort, RxStatus};
use crate::steer::Steering;

/// A port "receiving into GPU memory": each frame of `inner` copied into a buffer of its own
/// (its address is the frame's "device address"), the queue chosen as a NIC's RSS would (the
/// same Toeplitz hash as the software steering). Through [`RxPort`] it is the staged path.
struct InGpuMemory {
    inner: Box<dyn RxPort>,
    steering: Steering,
    nq: usize,
    gpu: u32,
    rx: Burst,
    ended: bool,
    /// The stand-in's record of gathered frames: a buffer given back before its frame was
    /// gathered is counted in `early`.
    gathered: Arc<Mutex<std::collections::HashSet<u64>>>,
    bursts: Arc<AtomicU64>,
    released: Arc<AtomicU64>,
    early: Arc<AtomicU64>,
}

/// One received burst's buffers; dropping it is the port getting them back.
struct Buffers {
    bufs: Vec<Box<[u8]>>,
    gathered: Arc<Mutex<std::collections::HashSet<u64>>>,
    released: Arc<AtomicU64>,
    early: Arc<AtomicU64>,
}

impl Drop for Buffers {
    fn drop(&mut self) {
        let mut g = self.gathered.lock().unwrap();
        for b in &self.bufs {
            if !g.remove(&(b.as_ptr() as u64)) {
                self.early.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.released.fetch_add(1, Ordering::Relaxed);
    }
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
        self.gpu
    }

    fn rx_gpu_burst(&mut self, max: usize) -> Result<GpuRxStatus, PortError> {
        if self.ended {
            return Ok(GpuRxStatus::End);
        }
        self.rx.clear();
        let st = self.inner.rx_burst(&mut self.rx, max)?;
        self.ended = st == RxStatus::End;
        if self.rx.is_empty() {
            return Ok(if self.ended {
                GpuRxStatus::End
            } else {
                GpuRxStatus::Idle
            });
        }
        let mut meta = PacketMeta::default();
        let mut frames = Vec::new();
        let mut bufs = Vec::new();
        for (d, f) in self.rx.frames() {
            let (q, _, _) = self.steering.steer_marked(f, &mut meta, self.nq);
            let buf: Box<[u8]> = f.into();
            frames.push(GpuFrame {
                addr: buf.as_ptr() as u64,
                len: d.len,
                wire_len: d.wire_len,
                queue: q as u16,
                rss_hash: d.rss_hash,
                mark: 0,
            });
            bufs.push(buf);
        }
        self.bursts.fetch_add(1, Ordering::Relaxed);
        Ok(GpuRxStatus::Frames(GpuRxBurst {
            frames,
            timestamp_ns: 1,
            hold: Box::new(Buffers {
                bufs,
                gathered: Arc::clone(&self.gathered),
                released: Arc::clone(&self.released),
                early: Arc::clone(&self.early),
            }),
        }))
    }
}

struct GpuRun {
    s: Summary,
    bursts: u64,
    released: u64,
    early: u64,
}

/// `p`'s ports in "GPU memory" of GPU `gpu`, on the host side over a stand-in.
fn run_in_gpu_memory(p: &Prepared, gpu: u32, dev: &CpuStandIn, record: bool) -> GpuRun {
    let ports = open_ports(&p.cfg).expect("ports");
    let (bursts, released, early) = (Arc::default(), Arc::default(), Arc::default());
    let mut rx: Vec<Box<dyn RxPort>> = ports
        .rx
        .into_iter()
        .map(|inner| {
            Box::new(InGpuMemory {
                inner,
                steering: p.cfg.build_steering().expect("steering"),
                nq: p.cfg.queues.count as usize,
                gpu,
                rx: Burst::with_capacity(64, 64 * 2048),
                ended: false,
                gathered: Arc::clone(&dev.gathered),
                bursts: Arc::clone(&bursts),
                released: Arc::clone(&released),
                early: Arc::clone(&early),
            }) as Box<dyn RxPort>
        })
        .collect();
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let spec = host_spec(p, GpuSlots::of(&p.cfg), p.pipeline.acl().is_some(), 0);
    let rec = record.then(|| {
        Box::new(Recorder {
            frames: Arc::default(),
            times: Arc::default(),
            fail: false,
        }) as Box<dyn TxPort>
    });
    let mut out_ports = crate::port::out::OutPorts::single(rec);
    let t = Instant::now();
    let out = host::run(dev, &spec, &shared, &mut rx, &mut out_ports);
    out.result.expect("host run");
    let mut s = summarize(
        &shared.counters,
        &p.pipeline,
        t.elapsed(),
        &p.choice,
        out.errors,
    );
    s.gpu_ingest = out.gpu_ingest;
    drop(rx);
    GpuRun {
        s,
        bursts: bursts.load(Ordering::Relaxed),
        released: released.load(Ordering::Relaxed),
        early: early.load(Ordering::Relaxed),
    }
}

fn paths(s: &Summary) -> Vec<(String, String)> {
    s.gpu_ingest
        .iter()
        .map(|g: &GpuIngest| (g.path.clone(), g.reason.clone()))
        .collect()
}

#[test]
fn frames_in_gpu_memory_received_in_place_count_as_the_cpu_executor() {
    let yaml = format!(
        "ports:\n{}{}queues: {{ count: 3, burst: 32, ring_slots: 4 }}\n{INLINE}",
        gen_port("a", 5000, 21, "imix"),
        gen_port("b", 3000, 22, "100")
    );
    let p = prepared(&yaml);
    let cpu = run_cpu_ref(&p, false);
    assert_eq!(cpu.s.rx_frames, 8000);
    for (slots, lag) in [(4, 0), (2, 3)] {
        let dev = CpuStandIn::new(&p, slots, lag);
        let g = run_in_gpu_memory(&p, 0, &dev, false);
        let what = format!("in place, ring of {slots}, verdicts after {lag} polls");
        assert_same_counts(&g.s, &cpu.s, &what);
        let ps = paths(&g.s);
        assert_eq!(ps.len(), 2, "{what}: both ports decided: {ps:?}");
        assert!(
            ps.iter().all(|(path, _)| path == "in_place"),
            "{what}: {ps:?}"
        );
        // Every frame went through the gather, and every buffer came back after it.
        assert_eq!(dev.gathered_frames.load(Ordering::Relaxed), 8000, "{what}");
        assert!(g.bursts > 0, "{what}");
        assert_eq!(
            g.released, g.bursts,
            "{what}: every received burst given back"
        );
        assert_eq!(
            g.early, 0,
            "{what}: no buffer given back before its frame was copied"
        );
        assert!(dev.gathered.lock().unwrap().is_empty(), "{what}");
    }
}

#[test]
fn frames_in_gpu_memory_the_host_must_read_are_staged_and_still_counted() {
    let base = format!(
        "ports:\n{}queues: {{ count: 2, burst: 32, ring_slots: 4 }}\n",
        gen_port("a", 3000, 23, "imix")
    );
    // Steering rules no NIC took (software steering), an output port, rings on another GPU.
    let file = std::env::temp_dir().join(format!("pw-gpu-frames-{}.yaml", std::process::id()));
    std::fs::write(
        &file,
        "queues: 2\nrules:\n  - name: dns\n    match: { udp: { dst_port: 53 } }\n    actions:\n      - queue: 1\n",
    )
    .expect("rule file");
    let rules = format!("{base}steering: {{ rules: {} }}\n{INLINE}", file.display());
    let plain = format!("{base}{INLINE}");
    for (yaml, gpu, record, why) in [
        (rules.as_str(), 0, false, "applied in software"),
        (plain.as_str(), 0, true, "transmits frames"),
        (plain.as_str(), 1, false, "frames are in GPU 1's memory"),
    ] {
        let p = prepared(yaml);
        let cpu = run_cpu_ref(&p, record);
        let dev = CpuStandIn::new(&p, 4, 1);
        let g = run_in_gpu_memory(&p, gpu, &dev, record);
        assert_same_counts(&g.s, &cpu.s, why);
        let ps = paths(&g.s);
        assert_eq!(ps.len(), 1, "{why}: {ps:?}");
        assert_eq!(ps[0].0, "staged", "{why}: {ps:?}");
        assert!(ps[0].1.contains(why), "{why}: {ps:?}");
        assert_eq!(dev.gathered_frames.load(Ordering::Relaxed), 0, "{why}");
        assert_eq!(g.bursts, 0, "{why}: nothing received in place");
    }
    let _ = std::fs::remove_file(&file);
}

#[test]
fn ports_in_host_memory_are_decided_as_host_ports() {
    let yaml = format!(
        "ports:\n{}queues: {{ count: 2, burst: 32, ring_slots: 4 }}\n{INLINE}",
        gen_port("a", 500, 24, "100")
    );
    let p = prepared(&yaml);
    let dev = CpuStandIn::new(&p, 4, 0);
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let (r, s) = run_host(&p, &dev, &shared, None);
    r.expect("host run");
    assert_eq!(s.rx_frames, 500);
    // Copied by its receive thread (no in-place decision for frames in host memory).
    let paths: Vec<&str> = s.gpu_ingest.iter().map(|g| g.path.as_str()).collect();
    assert_eq!(paths, [super::gpu_ingest::STAGED]);
    assert_eq!(dev.gathered_frames.load(Ordering::Relaxed), 0);
}

#[test]
fn frames_in_gpu_memory_dropped_by_a_full_ring_are_counted_and_their_buffers_given_back() {
    let yaml = format!(
        "ports:\n{}queues: {{ count: 2, burst: 8, ring_slots: 2, on_full: drop }}\n\
         executor: {{ kind: cpu, gpu: {{ burst_size: 8 }} }}\n{}",
        gen_port("a", 6000, 25, "64"),
        INLINE.replace("executor: { kind: cpu }\n", "")
    );
    let p = prepared(&yaml);
    // One burst on the "GPU" at a time, done only after 50 polls: the rings fill.
    let dev = CpuStandIn::new(&p, 1, 50);
    let g = run_in_gpu_memory(&p, 0, &dev, false);
    let s = &g.s;
    assert_eq!(s.rx_frames, 6000);
    assert_eq!(paths(s)[0].0, "in_place", "{:?}", paths(s));
    let ring_full = s
        .drops
        .iter()
        .find(|(n, _)| n == "ring_full")
        .map_or(0, |d| d.1);
    assert!(ring_full > 0, "a full ring drops: {:?}", s.drops);
    assert_all_accounted(s, 6000);
    // Only the frames that reached a slot were copied; every buffer came back, those of the
    // refused bursts without a copy (and only those).
    let gathered = dev.gathered_frames.load(Ordering::Relaxed);
    assert_eq!(gathered + ring_full, 6000, "{:?}", s.drops);
    assert_eq!(g.released, g.bursts);
    assert_eq!(g.early, ring_full, "buffers back uncopied = frames refused");
    assert!(dev.gathered.lock().unwrap().is_empty());
}
