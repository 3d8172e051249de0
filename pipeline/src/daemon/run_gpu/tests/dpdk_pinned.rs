//! A DPDK port whose RX pool is pinned host memory mapped for the GPU (`gpu_buffers: pinned`)
//! on the GPU host side (cargo feature `dpdk`, a real EAL on net_pcap, the stand-in device):
//! the pool's memory here is plain page-aligned host memory (`gpu::page_memory`: no CUDA in
//! CI), registered with DPDK as external memory for real. The port is received by reference
//! (each slot carries descriptors and the frames' addresses in the pool, the mbufs held with
//! it), the counts and frames are the CPU executor's on the same port, the stand-in got every
//! frame by address (none copied by a receive thread), and every mbuf went back to its pool.

use std::path::Path;

use super::dpdk_mbufs::{eal, frames, hook, seen};
use super::*;
use crate::port::dpdk::{gpu, BufferPlacement, DpdkPort};

/// One net_pcap device `wire` with its RX pool pinned (its capture in; with `out`, its capture
/// out too, `output.port` the port itself), `rxq` RX queues, `queues.count` `nq`.
fn yaml(tag: &str, dir: &Path, out: bool, (rxq, nq): (u16, u16), pipeline: &str) -> String {
    let eal = eal();
    let (tx, output) = if out {
        (
            format!(",tx_pcap={}", dir.join("out.pcap").display()),
            "output: { port: wire }\n",
        )
    } else {
        (String::new(), "")
    };
    let rx: Vec<String> = (0..rxq)
        .map(|q| format!("rx_pcap={}", dir.join(format!("in{q}.pcap")).display()))
        .collect();
    format!(
        "ports:\n  - name: wire\n    dpdk:\n      eal_args: {eal}\n      \
         vdev: \"net_pcap_pin{tag},{}{tx}\"\n      mempool_size: 1023\n      \
         rx_queues: {rxq}\n      tx_queues: 1\n      idle_end_ms: 300\n      \
         gpu_buffers: pinned\n\
         {output}queues: {{ count: {nq}, burst: 32, ring_slots: 4{one} }}\n{pipeline}",
        rx.join(","),
        // One TX queue: one TX thread where there are several queues.
        one = if nq > 1 { ", tx_threads: one" } else { "" }
    )
}

/// How the GPU host side runs: the stand-in's mapped rings (read in place) or device rings
/// (gathered), whether it reads host memory at all, whether the mbufs are sent themselves,
/// whether a recorder is the output where the port does not transmit.
#[derive(Clone, Copy, Debug)]
struct Gpu {
    mapped: bool,
    reads_host: bool,
    mbufs: bool,
    record: bool,
}

/// What one run did.
struct Ran {
    s: Summary,
    /// The capture written (`out`), or the recorder's frames.
    out: Vec<Vec<u8>>,
    in_use: (u64, u64),
    /// Frames the stand-in got by address (gathered or read in place).
    by_address: u64,
    /// The mbufs the port received and sent.
    received: std::collections::HashSet<usize>,
    sent: Vec<usize>,
}

/// The prepared config with the pool's memory plain host pages (no CUDA here).
fn pinned_prepared(yaml: &str) -> Prepared {
    let mut p = prepared(yaml);
    for port in &mut p.cfg.ports {
        if let Some(d) = port.value.dpdk.as_mut() {
            d.pinned_alloc = Some(gpu::PinnedAllocator(gpu::page_memory));
        }
    }
    p
}

/// One run on the CPU executor (`gpu: None`) or the GPU host side over the stand-in; `out`:
/// the port transmits (else, on the GPU with `record`, a recorder is the output).
fn run(tag: &str, shape: (u16, u16), pipeline: &str, out: bool, gpu: Option<Gpu>) -> Ran {
    let dir = std::env::temp_dir().join(format!("pw-gpu-pinned-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    for q in 0..shape.0 {
        crate::testdata::write_pcap(&dir.join(format!("in{q}.pcap")), 1, &frames()).expect("in");
    }
    let p = pinned_prepared(&yaml(tag, &dir, out, shape, pipeline));
    let mut ports = open_ports(&p.cfg).expect("ports");
    let port: DpdkPort = ports.dpdk_rx[0].clone().expect("dpdk wire");
    assert_eq!(port.buffer_placement(), BufferPlacement::Pinned);
    let id = port.setup().port_id;
    hook(&port);
    let before = port.mbufs_in_use();
    let shared = Arc::new(cpu::CpuShared::new(&p.cpu_spec()));
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let range = port.rx_buffers().expect("the pool's memory");
    let (s, by_address) = match gpu {
        None => (crate::daemon::run_cpu(&p, &shared, ports), 0),
        Some(g) => {
            let mut dev = CpuStandIn::new(&p, 2, 1);
            dev.mapped_refs = g.mapped;
            dev.reads_host = g.reads_host;
            let mut spec = host_spec(&p, GpuSlots::of(&p.cfg), p.pipeline.acl().is_some(), 0);
            // As run_gpu makes them.
            spec.pinned = super::super::pinned_ports(&ports);
            if g.mbufs {
                spec.mbufs = Some(super::super::mbufs::plan(&p, &ports).expect("mbuf plan"));
            }
            let mut dests = ports.take_out();
            if !out && g.record {
                let rec = Recorder {
                    frames: Arc::clone(&recorded),
                    times: Arc::default(),
                    fail: false,
                };
                dests = crate::port::out::OutPorts::single(Some(Box::new(rec)));
            }
            let (r, s, _pinned) = summarized(&p, &shared, || {
                host::run(&dev, &spec, &shared, &mut ports.rx, &mut dests)
            });
            r.expect("host run");
            // The addresses the slots carried lie in the pool's memory.
            let inside = |a: &u64| (range.0..range.0 + range.1 as u64).contains(a);
            assert!(dev.gathered.lock().unwrap().iter().all(inside));
            let n = dev.gathered_frames.load(Ordering::Relaxed)
                + dev.read_in_place.load(Ordering::Relaxed);
            (s, n)
        }
    };
    let after = port.mbufs_in_use();
    let (received, sent) = seen(id);
    drop(port);
    let out = if out {
        crate::testdata::capture_frames(&dir.join("out.pcap")).expect("output")
    } else {
        std::mem::take(&mut *recorded.lock().unwrap())
    };
    Ran {
        s,
        out,
        in_use: (before, after),
        by_address,
        received,
        sent,
    }
}

fn ingest(s: &Summary) -> &crate::daemon::summary::GpuIngest {
    let g = s
        .gpu_ingest
        .iter()
        .find(|g| g.port.contains("net_pcap_pin"));
    g.unwrap_or_else(|| panic!("a decision for wire: {:?}", s.gpu_ingest))
}

const REWRITING: &str = "pipeline:\n  - parse\n  - l2fwd: { mac: swap }\n  - ttl\n  - count\n\
                         executor: { kind: cpu }\n";

#[test]
fn dpdk_pinned_pool_goes_by_reference_and_counts_as_the_cpu_executor() {
    let n = frames().len() as u64;
    let gathered = Gpu {
        mapped: false,
        reads_host: true,
        mbufs: true,
        record: false,
    };
    let mapped = Gpu {
        mapped: true,
        ..gathered
    };
    for (tag, pipeline) in [("i", INLINE), ("r", REWRITING)] {
        let cpu = run(&format!("{tag}c"), (1, 1), pipeline, true, None);
        assert_eq!(cpu.s.rx_frames, n, "cpu {tag}");
        assert!(cpu.s.tx_frames > 0, "cpu {tag}");
        assert_eq!(cpu.in_use.1, cpu.in_use.0, "cpu {tag}: every mbuf back");
        for (g, what) in [(gathered, "device rings"), (mapped, "mapped rings")] {
            let what = format!("{tag}, {what}");
            let r = run(
                &format!("{tag}{}", u8::from(g.mapped)),
                (1, 1),
                pipeline,
                true,
                Some(g),
            );
            let s = &r.s;
            let d = ingest(s);
            assert_eq!(
                d.path,
                super::super::gpu_ingest::BY_REFERENCE,
                "{what}: {d:?}"
            );
            assert!(d.reason.contains("pinned host memory"), "{what}: {d:?}");
            assert_eq!(s.rx_frames, n, "{what}");
            accounted(s, &what);
            assert_same_counts(s, &cpu.s, &what);
            assert_same_frames(&r.out, &cpu.out, &what);
            // Every frame reached the "GPU" by its address in the pool: no receive thread
            // copied one.
            assert_eq!(r.by_address, n, "{what}: frames handed by address");
            assert_eq!(
                r.in_use.1, r.in_use.0,
                "{what}: every mbuf back in its pool"
            );
            let t = s.gpu_tx.as_ref().expect("tx path");
            assert_eq!(t.path, super::super::tx::MBUF, "{what}: {t:?}");
            // The mbufs sent are the ones received (the rewrites copied back into them).
            assert_eq!(r.sent.len() as u64, s.tx_frames, "{what}");
            assert!(r.sent.iter().all(|m| r.received.contains(m)), "{what}");
        }
    }
}

#[test]
fn dpdk_pinned_frames_sent_by_copy_are_read_where_they_arrived() {
    // A capture file as the output (no mbuf path): the TX thread reads each frame no stage
    // changed in the pinned pool, from the mbuf the slot holds.
    let n = frames().len() as u64;
    let g = Gpu {
        mapped: true,
        reads_host: true,
        mbufs: false,
        record: true,
    };
    let gpu = run("x1", (1, 1), INLINE, false, Some(g));
    let cpu = run("xc", (1, 1), INLINE, true, None);
    assert_eq!(ingest(&gpu.s).path, super::super::gpu_ingest::BY_REFERENCE);
    assert_same_counts(&gpu.s, &cpu.s, "recorder");
    assert_same_frames(&gpu.out, &cpu.out, "recorder");
    assert_eq!(gpu.by_address, n);
    assert_eq!(gpu.in_use.1, gpu.in_use.0, "every mbuf back in its pool");
    let t = gpu.s.gpu_tx.as_ref().expect("tx path");
    assert_eq!(t.path, super::super::tx::AS_RECEIVED, "{t:?}");
    assert!(
        t.reason.contains("its mbufs in the pinned RX pool"),
        "{t:?}"
    );
}

#[test]
fn dpdk_pinned_one_thread_steers_and_refusals_fall_back_to_staged() {
    let n = frames().len() as u64;
    let g = Gpu {
        mapped: false,
        reads_host: true,
        mbufs: false,
        record: false,
    };
    // Two pipeline queues, one RX queue: the port does not split, one thread steers (no
    // output: one TX queue would not serve two TX threads).
    let cpu = run("sc", (1, 2), INLINE, false, None);
    let one = run("s1", (1, 2), INLINE, false, Some(g));
    let d = ingest(&one.s);
    assert_eq!(d.path, super::super::gpu_ingest::BY_REFERENCE, "{d:?}");
    assert!(d.reason.contains("one receive thread ("), "{d:?}");
    assert_same_counts(&one.s, &cpu.s, "one thread");
    assert_eq!(one.by_address, n);
    assert_eq!(one.in_use.1, one.in_use.0, "every mbuf back in its pool");
    // Steering rules the NIC does not take: the thread reads each frame's headers in the pool.
    let file = std::env::temp_dir().join(format!("pw-gpu-pinned-{}.yaml", std::process::id()));
    std::fs::write(
        &file,
        "queues: 2\nrules:\n  - name: dns\n    match: { udp: { dst_port: 53 } }\n    \
         actions:\n      - queue: 1\n",
    )
    .expect("rule file");
    let steered = format!("steering: {{ rules: {} }}\n{INLINE}", file.display());
    let cpu = run("tc", (1, 2), &steered, false, None);
    let sw = run("t1", (1, 2), &steered, false, Some(g));
    let d = ingest(&sw.s);
    assert_eq!(d.path, super::super::gpu_ingest::BY_REFERENCE, "{d:?}");
    assert!(d.reason.contains("one receive thread"), "{d:?}");
    assert_same_counts(&sw.s, &cpu.s, "software steering");
    assert!(
        sw.s.queues.iter().all(|q| q.rx_frames > 0),
        "both queues: {:?}",
        sw.s.queues
    );
    assert_eq!(sw.by_address, n);
    assert_eq!(sw.in_use.1, sw.in_use.0, "every mbuf back in its pool");
    // No output: each slot's mbufs go back at the reap.
    let quiet = run("s2", (1, 1), INLINE, false, Some(g));
    assert_eq!(quiet.by_address, n);
    assert_eq!(quiet.in_use.1, quiet.in_use.0);
    // A device that cannot read host memory: staged, the reason named, the same counts.
    let refused = Gpu {
        reads_host: false,
        ..g
    };
    let staged = run("s3", (1, 1), INLINE, true, Some(refused));
    let d = ingest(&staged.s);
    assert_eq!(d.path, super::super::gpu_ingest::STAGED, "{d:?}");
    assert!(
        d.reason
            .contains("pinned host memory mapped for the GPU, but"),
        "{d:?}"
    );
    assert_eq!(
        staged.s.gpu_ingest.len(),
        1,
        "one decision per port: {:?}",
        staged.s.gpu_ingest
    );
    let cpu1 = run("s4", (1, 1), INLINE, true, None);
    assert_same_counts(&staged.s, &cpu1.s, "staged");
    assert_same_frames(&staged.out, &cpu1.out, "staged");
    assert_eq!(staged.by_address, 0, "staged frames are copied");
    assert_eq!(staged.in_use.1, staged.in_use.0);
}

/// A pinned pool that cannot be made fails the port's open, naming the port, the option and
/// why (here: an allocator that fails as CUDA does without a GPU).
#[test]
fn dpdk_pinned_without_memory_fails_naming_why() {
    fn no_gpu(_: usize) -> Result<Box<dyn gpu::RxMemory>, String> {
        Err("libcuda (the NVIDIA driver) is not installed".into())
    }
    let dir = std::env::temp_dir().join(format!("pw-gpu-pinned-e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    crate::testdata::write_pcap(&dir.join("in0.pcap"), 1, &frames()).expect("in");
    let mut p = prepared(&yaml("e", &dir, false, (1, 1), INLINE));
    for port in &mut p.cfg.ports {
        if let Some(d) = port.value.dpdk.as_mut() {
            d.pinned_alloc = Some(gpu::PinnedAllocator(no_gpu));
        }
    }
    let e = open_ports(&p.cfg).err().expect("no pinned memory, no port");
    let e = format!("{e:#}");
    assert!(e.contains("gpu_buffers: pinned"), "{e}");
    assert!(e.contains("libcuda"), "{e}");
    assert!(e.contains("wire") || e.contains("net_pcap_pine"), "{e}");
}
