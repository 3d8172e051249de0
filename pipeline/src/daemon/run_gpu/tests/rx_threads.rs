//! Receive threads on the GPU host side: a port split by queue (`pcap`, `gen` with a fixed set
//! of distinct frames) is received by one thread per queue, which gives each queue the
//! frames, counts and TX order that one thread steering the whole port gives it, on either
//! executor.

use super::*;

fn with_threads(yaml: &str, mode: &str) -> String {
    yaml.replace("rx_threads: MODE", &format!("rx_threads: {mode}"))
}

/// Runs `yaml` (its queues' `rx_threads: MODE`) per port and per queue on the CPU executor and
/// on the GPU host side: the same counts and, per queue, the same TX order everywhere; the
/// receive threads are one per port or one per queue.
fn same_everywhere(yaml: &str, queues: usize) {
    let pp = prepared(&with_threads(yaml, "per_port"));
    let pq = prepared(&with_threads(yaml, "per_queue"));
    let reference = run_cpu_ref(&pp, true);
    assert_eq!(reference.s.receive_threads, 1);
    let want = by_queue(&pp, &reference.tx);
    assert!(want.iter().all(|q| !q.is_empty()), "every queue transmits");
    let runs = [
        ("cpu per_queue", run_cpu_ref(&pq, true), queues),
        ("gpu per_port", run_fake(&pp, 2, 1, true), 1),
        ("gpu per_queue", run_fake(&pq, 2, 1, true), queues),
    ];
    for (what, r, threads) in &runs {
        assert_eq!(r.s.receive_threads, *threads, "{what}: receive threads");
        assert_same_counts(&r.s, &reference.s, what);
        let got = by_queue(&pp, &r.tx);
        for q in 0..queues {
            assert_same_frames(&got[q], &want[q], &format!("{what}: queue {q} TX order"));
        }
    }
}

#[test]
fn pcap_per_queue_threads_count_and_send_as_one_per_port() {
    let input = crate::testdata::multi_proto_pcap();
    let yaml = format!(
        "ports:\n  - name: in\n    pcap: {{ rx: {{ path: {}, loops: 4 }} }}\n\
         queues: {{ count: 3, burst: 8, ring_slots: 4, rx_threads: MODE }}\n{INLINE}",
        input.display()
    );
    same_everywhere(&yaml, 3);
}

/// A generator whose distinct frames are pooled (a fixed flow set), with malformed frames
/// (built per frame) among them.
const GEN_POOLED: &str =
    "  - name: g\n    gen: { count: 5000, seed: 5, size: imix, malformed_ratio: 0.03, \
    flows: { flow_count: 300, ipv6_share: 0.2 } }\n";

#[test]
fn gen_per_queue_threads_count_and_send_as_one_per_port() {
    let yaml = format!(
        "ports:\n{GEN_POOLED}queues: {{ count: 3, burst: 16, ring_slots: 4, rx_threads: MODE }}\n{INLINE}"
    );
    same_everywhere(&yaml, 3);
}

#[test]
fn a_queue_thread_moves_what_overflows_a_slot_to_the_next_and_drops_what_never_fits() {
    let yaml = format!(
        "ports:\n{GEN_POOLED}queues: {{ count: 2, burst: 16, rx_threads: MODE }}\n{INLINE}"
    );
    let run = |mode: &str| {
        let p = prepared(&with_threads(&yaml, mode));
        let mut dev = CpuStandIn::new(&p, 8, 0);
        // A few small frames a slot: a receive call overflows it often; 576 and 1514 B
        // frames never fit.
        dev.slot_cap = 700;
        let shared = cpu::CpuShared::new(&p.cpu_spec());
        let (r, s) = run_host(&p, &dev, &shared, None);
        r.expect("host run");
        s
    };
    let (one, each) = (run("per_port"), run("per_queue"));
    assert_eq!((one.receive_threads, each.receive_threads), (1, 2));
    let too_long = |s: &Summary| {
        s.drops
            .iter()
            .find(|(n, _)| n == "too_long")
            .map_or(0, |d| d.1)
    };
    assert!(too_long(&each) > 0, "{:?}", each.drops);
    assert_same_counts(&each, &one, "slot overflow");
    let handled: u64 = each
        .queues
        .iter()
        .map(|q| q.passed + q.mirrored + q.to_host)
        .sum();
    let dropped: u64 = each.drops.iter().map(|(_, n)| n).sum();
    assert_eq!(handled + dropped, 5000);
}

/// What the stand-in playing a mapped ring does with a by-reference burst: the executor's
/// encoding (`gather::by_reference`: a base address, each descriptor's offset from it), then
/// each frame read at base + offset into `b` (laid out as `descs` say), as the kernel reads it.
///
/// # Safety
/// Every `srcs[i]..+descs[i].len` is readable host memory.
pub(super) unsafe fn read_by_reference(
    descs: &[crate::burst::FrameDesc],
    srcs: &[u64],
    b: &mut Burst,
) -> Result<(), SubmitError> {
    let mut refs = Vec::new();
    let base = crate::executor::gpu::gather::by_reference(descs, srcs, &mut refs)
        .map_err(SubmitError::Gpu)?;
    for (d, r) in descs.iter().zip(&refs) {
        let at = (base + u64::from(r.offset)) as *const u8;
        // SAFETY: base + offset is srcs[i] (by_reference's contract), readable (the caller).
        let f = unsafe { std::slice::from_raw_parts(at, r.len as usize) };
        b.data[d.offset as usize..][..f.len()].copy_from_slice(f);
    }
    Ok(())
}

/// How long the stand-in's persistent kernel waits without bursts before it returns by itself
/// (the real one's `executor.gpu.idle_timeout_ms`, 60 s by default).
const STAND_IN_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The stand-in's persistent kernel, for the one constraint of a real one that the host side's
/// memory handling meets: freeing pinned host memory (`cuMemFreeHost`) waits for every kernel of
/// the context, and a persistent kernel returns only when the executor stops it (after the
/// host side's run) or after its idle timeout. A free while it runs blocks that long.
#[derive(Default)]
pub(super) struct StandInKernel {
    running: std::sync::atomic::AtomicBool,
    pub(super) freed_while_running: std::sync::atomic::AtomicU64,
    pub(super) freed_after_stop: std::sync::atomic::AtomicU64,
    /// The "pinned" stores freed, overwritten with filler and kept here (not given back to
    /// the allocator), so a frame read from one after its free shows as filler.
    freed: Mutex<Vec<Box<[u8]>>>,
}

impl StandInKernel {
    pub(super) fn start(&self) {
        self.running.store(true, Ordering::SeqCst);
    }

    pub(super) fn stop(&self) {
        self.running.store(false, Ordering::SeqCst);
    }

    /// A free of pinned memory: waits for the kernel to stop or idle out.
    fn free(&self) {
        if !self.running.load(Ordering::SeqCst) {
            self.freed_after_stop.fetch_add(1, Ordering::SeqCst);
            return;
        }
        self.freed_while_running.fetch_add(1, Ordering::SeqCst);
        let t = Instant::now();
        while self.running.load(Ordering::SeqCst) && t.elapsed() < STAND_IN_IDLE_TIMEOUT {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// The stand-in's "pinned" copy of a port's loaded frames: dropping it frees it (its bytes
/// overwritten with [`RELEASED_FILL`], as a released slot's are).
pub(super) struct StandInPinned {
    bytes: Box<[u8]>,
    kernel: Arc<StandInKernel>,
}

impl StandInPinned {
    pub(super) fn new(bytes: Box<[u8]>, kernel: &Arc<StandInKernel>) -> StandInPinned {
        StandInPinned {
            bytes,
            kernel: Arc::clone(kernel),
        }
    }
}

impl Drop for StandInPinned {
    fn drop(&mut self) {
        self.kernel.free();
        let mut gone = std::mem::take(&mut self.bytes);
        gone.fill(RELEASED_FILL);
        self.kernel.freed.lock().unwrap().push(gone);
    }
}

/// A by-reference run must not free the loaded frames' pinned memory while the persistent
/// kernel runs: on the H100 that free (by the last thread to let go of it, a receive thread
/// ending or a queue thread reaping the last burst) waited for the kernel's 60 s idle timeout,
/// on `device` and `mapped` rings alike, and the daemon's watchdog found that queue thread
/// stuck inside its poll. The host side hands the memory back to be freed after the stop.
#[test]
fn a_by_reference_run_frees_its_pinned_frames_only_after_the_kernel_stops() {
    let gen = format!(
        "ports:\n{GEN_CLEAN}queues: {{ count: 3, burst: 16, ring_slots: 4, rx_threads: per_queue }}\n{INLINE}"
    );
    for (source, yaml) in [("pcap", pcap_yaml("per_queue", false)), ("gen", gen)] {
        for (placement, mapped) in [("device", false), ("mapped", true)] {
            let what = format!("{source}, persistent, {placement} rings, by reference");
            let p = prepared(&ask_by_reference(&yaml));
            let mut dev = CpuStandIn::new(&p, 4, 1);
            dev.mapped_refs = mapped;
            let shared = cpu::CpuShared::new(&p.cpu_spec());
            let t = Instant::now();
            let (r, s) = run_host(&p, &dev, &shared, None);
            let took = t.elapsed();
            r.expect("host run");
            assert_eq!(path_of(&s).0, gpu_ingest::BY_REFERENCE, "{what}");
            let k = &dev.kernel;
            assert_eq!(
                k.freed_while_running.load(Ordering::SeqCst),
                0,
                "{what}: the pinned frames were freed while the persistent kernel ran (the run \
                 took {took:?}: a free waits for the kernel's idle timeout)"
            );
            assert_eq!(
                k.freed_after_stop.load(Ordering::SeqCst),
                1,
                "{what}: the pinned frames are freed once, after the stop"
            );
            assert!(took < STAND_IN_IDLE_TIMEOUT, "{what}: took {took:?}");
        }
    }
}

/// After the executor: the loaded frames are freed, unless an executor was abandoned with a
/// kernel still running meanwhile (then leaked: that kernel may still read them, and the free
/// would wait for it).
#[test]
fn run_gpu_frees_the_pinned_frames_unless_an_executor_was_abandoned() {
    use std::sync::atomic::AtomicU64;
    static ABANDONED: AtomicU64 = AtomicU64::new(0);
    fn abandoned() -> u64 {
        ABANDONED.load(Ordering::SeqCst)
    }
    for (leaked, what) in [(false, "stopped"), (true, "abandoned")] {
        let hold: GpuHold = Arc::new(Mutex::new(Box::new(vec![0u8; 16]) as Box<dyn Send>));
        let alive = Arc::downgrade(&hold);
        let mut pinned = super::super::PinnedFrames::counting(abandoned);
        pinned.holds.push(hold);
        if leaked {
            ABANDONED.fetch_add(1, Ordering::SeqCst);
        }
        drop(pinned);
        assert_eq!(alive.upgrade().is_some(), leaked, "{what}");
    }
}

/// A capture replayed 4 times over 3 queues, with an output port or not.
pub(super) fn pcap_yaml(mode: &str, output: bool) -> String {
    let input = crate::testdata::multi_proto_pcap();
    let out = if output {
        "  - name: out\n    pcap: { tx: { path: /dev/null } }\noutput: { port: out }\n"
    } else {
        ""
    };
    format!(
        "ports:\n  - name: in\n    pcap: {{ rx: {{ path: {}, loops: 4 }} }}\n{out}\
         queues: {{ count: 3, burst: 8, ring_slots: 4, rx_threads: {mode} }}\n{INLINE}",
        input.display()
    )
}

/// The GPU host side on `yaml` over a stand-in that reads host memory (`reads_host`): its
/// summary, the frames it gathered by address and the bytes it was given to hold.
pub(super) fn ask_by_reference(yaml: &str) -> String {
    if yaml.contains("by_reference") {
        return yaml.to_string();
    }
    yaml.replace(
        "executor: { kind: cpu }",
        "executor: { kind: cpu, gpu: { by_reference: true } }",
    )
}

/// By default a split capture is copied, saying how to ask for by reference.
#[test]
fn by_reference_is_off_by_default() {
    let yaml = pcap_yaml("per_queue", false).replace(
        "executor: { kind: cpu }",
        "executor: { kind: cpu, gpu: { tagged: false } }",
    );
    let (s, gathered, _) = host_run(&yaml, true);
    let (path, why) = path_of(&s);
    assert_eq!(path, gpu_ingest::STAGED);
    assert!(why.contains("by_reference is false"), "{why}");
    assert_eq!(gathered, 0);
}

fn host_run(yaml: &str, reads_host: bool) -> (Summary, u64, u64) {
    let (s, gathered, held, _) = host_run_on(yaml, reads_host, false);
    (s, gathered, held)
}

/// [`host_run`], the stand-in playing mapped rings (`mapped`): also the frames it read in
/// place through by-reference descriptors. By reference is asked for
/// (`executor.gpu.by_reference: true`, off by default) unless `yaml` says otherwise.
fn host_run_on(yaml: &str, reads_host: bool, mapped: bool) -> (Summary, u64, u64, u64) {
    let p = prepared(&ask_by_reference(yaml));
    let mut dev = CpuStandIn::new(&p, 4, 1);
    dev.reads_host = reads_host;
    dev.mapped_refs = mapped;
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    // The config's output port, played by a recorder.
    let rec = p.cfg.output.is_some().then(|| Recorder {
        frames: Arc::default(),
        times: Arc::default(),
        fail: false,
    });
    let (r, s) = run_host(&p, &dev, &shared, rec);
    r.expect("host run");
    (
        s,
        dev.gathered_frames.load(Ordering::Relaxed),
        dev.host_copied.load(Ordering::Relaxed),
        dev.read_in_place.load(Ordering::Relaxed),
    )
}

pub(super) fn path_of(s: &Summary) -> (String, String) {
    assert_eq!(s.gpu_ingest.len(), 1, "{:?}", s.gpu_ingest);
    let g = &s.gpu_ingest[0];
    (g.path.clone(), g.reason.clone())
}

#[test]
fn a_split_capture_goes_by_reference_and_counts_as_the_copying_path() {
    let yaml = pcap_yaml("per_queue", false);
    let reference = run_cpu_ref(&prepared(&yaml), false);
    let (s, gathered, held) = host_run(&yaml, true);
    assert_eq!(
        path_of(&s).0,
        gpu_ingest::BY_REFERENCE,
        "{:?}",
        s.gpu_ingest
    );
    assert_same_counts(&s, &reference.s, "by reference");
    assert_eq!(s.receive_threads, 3);
    // Every frame reached its slot by address, none through a host copy; the capture was
    // copied into "pinned" memory once (not once a lap).
    assert_eq!(gathered, s.rx_frames);
    let capture = std::fs::metadata(crate::testdata::multi_proto_pcap())
        .unwrap()
        .len();
    assert!(
        held > 0 && held < capture,
        "{held} of a {capture}-byte file"
    );
    // The same run copying (the device reads no host memory): the same counts, nothing
    // gathered, and the reason named.
    let (c, gathered, _) = host_run(&yaml, false);
    let (path, why) = path_of(&c);
    assert_eq!(path, gpu_ingest::STAGED);
    assert!(why.contains("told not to read host memory"), "{why}");
    assert!(why.contains("each queue's receive thread copies"), "{why}");
    assert_eq!(gathered, 0);
    assert_same_counts(&c, &s, "copying");
}

#[test]
fn each_copying_port_names_why() {
    // An output port is no reason: the TX threads send from the store (tests/as_received).
    let (s, gathered, _) = host_run(&pcap_yaml("per_queue", true), true);
    assert_eq!(path_of(&s).0, gpu_ingest::BY_REFERENCE);
    assert_eq!(gathered, s.rx_frames);
    // One receive thread for the port.
    let (s, _, _) = host_run(&pcap_yaml("per_port", false), true);
    let why = path_of(&s).1;
    assert!(
        why.contains("one receive thread steers") && why.contains("per_port"),
        "{why}"
    );
    // The knob that keeps the copying path for comparison.
    let yaml = pcap_yaml("per_queue", false).replace(
        "executor: { kind: cpu }",
        "executor: { kind: cpu, gpu: { by_reference: false } }",
    );
    let (s, gathered, _) = host_run(&yaml, true);
    let why = path_of(&s).1;
    assert!(why.contains("by_reference is false"), "{why}");
    assert_eq!(gathered, 0);
    // Sampled verification re-runs bursts from their host bytes.
    let yaml = pcap_yaml("per_queue", false).replace(
        "executor: { kind: cpu }",
        "executor: { kind: cpu }\nverify: { sample: 4 }",
    );
    let (s, gathered, _) = host_run(&yaml, true);
    let (path, why) = path_of(&s);
    assert_eq!(path, gpu_ingest::STAGED);
    assert!(why.contains("verify.sample"), "{why}");
    assert_eq!(gathered, 0);
    // A generator with malformed frames builds those per frame, outside its pool.
    let yaml = format!(
        "ports:\n{GEN_POOLED}queues: {{ count: 2, burst: 16, rx_threads: per_queue }}\n{INLINE}"
    );
    let (s, gathered, _) = host_run(&yaml, true);
    let why = path_of(&s).1;
    assert!(why.contains("malformed"), "{why}");
    assert_eq!((s.rx_frames, gathered), (5000, 0));
    // A generator drawing fresh headers per frame is received by one thread.
    let yaml = format!(
        "ports:\n  - name: g\n    gen: {{ count: 500, seed: 5 }}\n\
         queues: {{ count: 2, burst: 16, rx_threads: per_queue }}\n{INLINE}"
    );
    let (s, gathered, _) = host_run(&yaml, true);
    let (path, why) = path_of(&s);
    assert_eq!(path, gpu_ingest::STAGED);
    assert!(why.contains("drawn afresh per frame"), "{why}");
    assert_eq!((s.rx_frames, gathered), (500, 0));
}

/// A generator whose every frame is a pool frame (a fixed flow set, IPv4 and IPv6, IMIX).
pub(super) const GEN_CLEAN: &str = "  - name: g\n    gen: { count: 6000, seed: 9, size: imix, \
    flows: { flow_count: 200, ipv6_share: 0.3 } }\n";

#[test]
fn a_pooled_generator_goes_by_reference_and_counts_as_the_copying_path() {
    let yaml = format!(
        "ports:\n{GEN_CLEAN}queues: {{ count: 3, burst: 16, ring_slots: 4, rx_threads: per_queue }}\n{INLINE}"
    );
    let reference = run_cpu_ref(&prepared(&yaml), false);
    let (s, gathered, held) = host_run(&yaml, true);
    let (path, why) = path_of(&s);
    assert_eq!(path, gpu_ingest::BY_REFERENCE, "{why}");
    assert!(why.contains("identification"), "{why}");
    assert_same_counts(&s, &reference.s, "gen by reference");
    assert_eq!(s.rx_frames, 6000);
    assert_eq!(s.receive_threads, 3);
    // Every frame the steering kept went by address; the pool (at most 200 flows x 3 IMIX
    // sizes) was copied once, far less than the frames generated.
    let dropped: u64 = s
        .drops
        .iter()
        .filter(|(n, _)| n == "steering_drop")
        .map(|d| d.1)
        .sum();
    assert_eq!(gathered, s.rx_frames - dropped);
    let generated: u64 = s.queues.iter().map(|q| q.rx_bytes).sum();
    assert!(
        held > 0 && held * 5 < generated,
        "{held} held of {generated}"
    );
    // Copying: the same counts, bytes included.
    let (c, gathered, _) = host_run(&yaml, false);
    assert_eq!(path_of(&c).0, gpu_ingest::STAGED);
    assert_eq!(gathered, 0);
    assert_same_counts(&c, &s, "gen copying");
    let bytes = |s: &Summary| -> Vec<u64> { s.queues.iter().map(|q| q.rx_bytes).collect() };
    assert_eq!(bytes(&c), bytes(&s));
}

#[test]
fn mapped_rings_read_frames_by_reference_in_place_and_count_as_copying() {
    // A capture and a pooled generator, each split over 3 queues.
    let gen = format!(
        "ports:\n{GEN_CLEAN}queues: {{ count: 3, burst: 16, ring_slots: 4, rx_threads: per_queue }}\n{INLINE}"
    );
    for yaml in [pcap_yaml("per_queue", false), gen] {
        let reference = run_cpu_ref(&prepared(&yaml), false);
        let (s, gathered, held, in_place) = host_run_on(&yaml, true, true);
        let (path, why) = path_of(&s);
        assert_eq!(path, gpu_ingest::BY_REFERENCE, "{why}");
        assert!(why.contains("reads the frames where they are"), "{why}");
        assert_same_counts(&s, &reference.s, "mapped by reference");
        // Every frame read through its descriptor, none gathered into a slot.
        assert_eq!(gathered, 0);
        assert!(in_place > 0 && held > 0);
        let dropped: u64 = s
            .drops
            .iter()
            .filter(|(n, _)| n == "steering_drop")
            .map(|d| d.1)
            .sum();
        assert_eq!(in_place, s.rx_frames - dropped);
        // The copying mode stays the fallback: the same counts.
        let (c, _, _, in_place) = host_run_on(&yaml, false, true);
        assert_eq!(path_of(&c).0, gpu_ingest::STAGED);
        assert_eq!(in_place, 0);
        assert_same_counts(&c, &s, "mapped copying");
    }
}
