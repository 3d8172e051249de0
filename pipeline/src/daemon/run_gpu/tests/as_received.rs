//! Frames no stage changed leave from where they arrived: the pinned store of a port by
//! reference, or the burst a copying port's receive thread filled; never from the GPU slot,
//! which the device does not hold for them (the stand-in overwrites a slot as soon as its poll
//! returned, and a store once it is freed, so a frame read from either after that reaches the
//! port as filler). Rewritten frames still leave from the slot (held) or a copy of it.

use super::rx_threads::{ask_by_reference, path_of, pcap_yaml, GEN_CLEAN};
use super::*;
use crate::daemon::run_gpu::gpu_ingest;
use crate::daemon::run_gpu::tx::{AS_RECEIVED, COPIED_OUT, GPU_SLOT};

/// Each frame a port was given: its address and its bytes.
type Sent = Vec<(usize, Vec<u8>)>;

/// A port that records where each frame it was given lies (its address) and its bytes.
struct Spy {
    sent: Arc<Mutex<Sent>>,
}

impl TxPort for Spy {
    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        let mut v = self.sent.lock().unwrap();
        let before = v.len();
        v.extend(frames.map(|f| (f.as_ptr() as usize, f.to_vec())));
        Ok(v.len() - before)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn name(&self) -> &str {
        "spy"
    }
}

/// The GPU host side on `p` over `dev` into a [`Spy`]: the summary and what it was given.
fn run_spy(p: &Prepared, dev: &CpuStandIn) -> (Summary, Sent) {
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let mut ports = open_ports(&p.cfg).expect("ports");
    let spec = host_spec(p, GpuSlots::of(&p.cfg), p.pipeline.acl().is_some(), 0);
    let sent = Arc::new(Mutex::new(Vec::new()));
    let spy = Spy {
        sent: Arc::clone(&sent),
    };
    let mut out = crate::port::out::OutPorts::single(Some(Box::new(spy) as Box<dyn TxPort>));
    let (r, s, pinned) = summarized(p, &shared, || {
        dev.kernel.start();
        let o = host::run(dev, &spec, &shared, &mut ports.rx, &mut out);
        dev.kernel.stop();
        o
    });
    r.expect("host run");
    // The store is freed here (after the stop), as run_gpu frees it after the executor.
    drop(pinned);
    let sent = std::mem::take(&mut *sent.lock().unwrap());
    (s, sent)
}

/// Whether `len` bytes at `addr` lie inside one of the stand-in's stores.
fn in_a_store(dev: &CpuStandIn, addr: usize, len: usize) -> bool {
    let stores = dev.stores.lock().unwrap();
    stores
        .iter()
        .any(|&(at, n)| addr >= at && addr + len <= at + n)
}

fn tx_path(s: &Summary) -> &str {
    s.gpu_tx.as_ref().map_or("none", |t| t.path.as_str())
}

fn no_filler(sent: &[(usize, Vec<u8>)], what: &str) {
    assert!(
        !sent
            .iter()
            .any(|(_, f)| f.iter().all(|&b| b == RELEASED_FILL)),
        "{what}: a frame was read after its slot or store was released"
    );
}

#[test]
fn a_capture_by_reference_is_sent_from_its_pinned_store() {
    let p = prepared(&ask_by_reference(&pcap_yaml("per_queue", true)));
    assert!(!p.pipeline.rewrites());
    let cpu = run_cpu_ref(&p, true);
    let want = by_queue(&p, &cpu.tx);
    for (placement, mapped) in [("device", false), ("mapped", true)] {
        let what = format!("{placement} rings");
        let mut dev = CpuStandIn::new(&p, 4, 1);
        dev.mapped_refs = mapped;
        let (s, sent) = run_spy(&p, &dev);
        let (path, why) = path_of(&s);
        assert_eq!(path, gpu_ingest::BY_REFERENCE, "{what}: {why}");
        assert_eq!(tx_path(&s), AS_RECEIVED, "{what}: {:?}", s.gpu_tx);
        let reason = &s.gpu_tx.as_ref().unwrap().reason;
        assert!(
            reason.contains(": its loaded frames in pinned host memory"),
            "{reason}"
        );
        assert_same_counts(&s, &cpu.s, &what);
        accounted(&s, &what);
        no_filler(&sent, &what);
        // Every frame handed to the port lies in the store: none was copied to be sent.
        assert!(!sent.is_empty());
        for (at, f) in &sent {
            assert!(
                in_a_store(&dev, *at, f.len()),
                "{what}: a frame at {at:#x} is no store's"
            );
        }
        // The device was not asked to hold its slots: none is released by the TX threads.
        assert!(
            !dev.holds(),
            "{what}: slots held for frames that never leave from them"
        );
        assert_eq!(dev.queue(0).released, 0);
        let frames: Vec<Vec<u8>> = sent.into_iter().map(|(_, f)| f).collect();
        let got = by_queue(&p, &frames);
        for q in 0..3 {
            assert_same_frames(&got[q], &want[q], &format!("{what}: queue {q} TX order"));
        }
        // The store was freed once, after the stop (never under the TX threads).
        let k = &dev.kernel;
        assert_eq!(k.freed_while_running.load(Ordering::SeqCst), 0, "{what}");
        assert_eq!(k.freed_after_stop.load(Ordering::SeqCst), 1, "{what}");
    }
}

#[test]
fn a_pooled_generator_by_reference_is_sent_from_its_pool() {
    let yaml = format!(
        "ports:\n{GEN_CLEAN}  - name: out\n    pcap: {{ tx: {{ path: /dev/null }} }}\n\
         output: {{ port: out }}\n\
         queues: {{ count: 3, burst: 16, ring_slots: 4, rx_threads: per_queue }}\n{INLINE}"
    );
    let p = prepared(&ask_by_reference(&yaml));
    let cpu = run_cpu_ref(&p, true);
    let dev = CpuStandIn::new(&p, 4, 1);
    let (s, sent) = run_spy(&p, &dev);
    assert_eq!(path_of(&s).0, gpu_ingest::BY_REFERENCE);
    assert_eq!(tx_path(&s), AS_RECEIVED);
    assert_same_counts(&s, &cpu.s, "gen by reference");
    accounted(&s, "gen by reference");
    no_filler(&sent, "gen");
    assert_eq!(sent.len(), cpu.tx.len());
    assert!(sent.iter().all(|(at, f)| in_a_store(&dev, *at, f.len())));
    // The pool's frames as built: the per-frame field (IPv4 identification, IPv6 flow
    // label) the copying path stamps is the pool's 0 (docs/gpu-ingest.md); the lengths and
    // everything else are the CPU executor's.
    let mut lens: Vec<usize> = sent.iter().map(|(_, f)| f.len()).collect();
    let mut want: Vec<usize> = cpu.tx.iter().map(Vec::len).collect();
    lens.sort_unstable();
    want.sort_unstable();
    assert_eq!(lens, want);
}

#[test]
fn a_copying_port_is_sent_from_its_receive_burst_and_its_gpu_slot_is_free_at_reap() {
    // The built-in pipeline (no TX ring) and one with a TX ring that rewrites nothing
    // (tx_time: send times only): neither needs the GPU slot once reaped.
    let tx_time = "pipeline:\n  - parse\n  - tx_time: { delay_ns: 500 }\n  - count\n\
                   executor: { kind: cpu }\n";
    for (what, pipeline) in [("built-in", INLINE), ("tx_time", tx_time)] {
        let p = prepared(&format!(
            "ports:\n{}queues: {{ count: 1, burst: 16, ring_slots: 4 }}\n{pipeline}",
            gen_port("a", 3000, 21, "imix")
        ));
        assert!(!p.pipeline.rewrites());
        let cpu = run_cpu_ref(&p, true);
        let dev = CpuStandIn::new(&p, 2, 1);
        let (s, sent) = run_spy(&p, &dev);
        assert_eq!(tx_path(&s), AS_RECEIVED, "{what}");
        assert!(
            s.gpu_tx
                .as_ref()
                .unwrap()
                .reason
                .contains(": the burst its receive thread copied it into"),
            "{what}: {:?}",
            s.gpu_tx
        );
        assert!(
            !dev.holds(),
            "{what}: the device was asked to hold its slots"
        );
        no_filler(&sent, what);
        assert_same_counts(&s, &cpu.s, what);
        accounted(&s, what);
        let frames: Vec<Vec<u8>> = sent.into_iter().map(|(_, f)| f).collect();
        assert_same_frames(&frames, &cpu.tx, what);
    }
}

#[test]
fn rewritten_frames_by_reference_leave_from_the_gpu_slot_or_a_copy_of_it() {
    // A rewriting pipeline over a capture by reference: the rewritten bytes are the slot's.
    let yaml = pcap_yaml("per_queue", true).replace(
        INLINE,
        "pipeline:\n  - parse\n  - l2fwd: { mac: swap }\n  - ttl\n  - count\n\
         executor: { kind: cpu }\n",
    );
    let p = prepared(&ask_by_reference(&yaml));
    assert!(p.pipeline.rewrites());
    let cpu = run_cpu_ref(&p, true);
    let want = by_queue(&p, &cpu.tx);
    for (can_hold, path) in [(true, GPU_SLOT), (false, COPIED_OUT)] {
        let mut dev = CpuStandIn::new(&p, 2, 1);
        dev.can_hold = can_hold;
        let (s, sent) = run_spy(&p, &dev);
        assert_eq!(path_of(&s).0, gpu_ingest::BY_REFERENCE, "{path}");
        assert_eq!(tx_path(&s), path);
        no_filler(&sent, path);
        assert_same_counts(&s, &cpu.s, path);
        accounted(&s, path);
        // Not the store's bytes: the rewritten ones.
        assert!(sent.iter().all(|(at, f)| !in_a_store(&dev, *at, f.len())));
        let frames: Vec<Vec<u8>> = sent.into_iter().map(|(_, f)| f).collect();
        let got = by_queue(&p, &frames);
        for q in 0..3 {
            assert_same_frames(&got[q], &want[q], &format!("{path}: queue {q}"));
        }
    }
}

#[test]
fn nothing_transmitted_no_tx_path() {
    let p = prepared(&ask_by_reference(&pcap_yaml("per_queue", false)));
    let dev = CpuStandIn::new(&p, 4, 1);
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let (r, s) = run_host(&p, &dev, &shared, None);
    r.expect("host run");
    assert_eq!(s.gpu_tx, None);
    assert!(!dev.holds());
}
