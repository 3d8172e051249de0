//! Receive threads: a `pcap` port received by one thread per queue (its capture steered once
//! at load) gives each queue the frames, marks, verdicts and counters that one thread steering
//! the whole port gives it, and the same output capture; `queues.rx_threads` and
//! `queues.cores` are checked.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pipeline::config;
use pipeline::daemon;
use pipeline::internal::executor::cpu::{self, CpuShared};
use pipeline::internal::port::pcap::CaptureReader;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-rxthreads-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Per queue, in the order its worker ran them: (frame bytes, mark, timestamp, verdict).
type Seen = Vec<Vec<(Vec<u8>, u32, u64, String)>>;

struct Outcome {
    summary: daemon::Summary,
    receive_threads: usize,
    seen: Seen,
    out: Vec<Vec<u8>>,
}

fn steering_file(dir: &Path) -> PathBuf {
    // Drops UDP 53 (a steering drop counted on queue 0), marks and pins TCP 80 to queue 1,
    // the rest by RSS.
    let p = dir.join("steer.yaml");
    std::fs::write(
        &p,
        "queues: 2\nrules:\n  - name: dns\n    match: { udp: { dst_port: 53 } }\n    actions: [drop]\n\
         \x20 - name: web\n    match: { tcp: { dst_port: 80 } }\n    actions: [{ queue: 1 }, { mark: 7 }]\n",
    )
    .unwrap();
    p
}

/// The receiving port: a capture replayed 3 times, or a generator.
enum Input<'a> {
    Pcap(&'a Path),
    /// `gen` options (YAML flow mapping body); receive times are left out of the comparison
    /// (they are the wall clock's).
    Gen(&'a str),
}

fn run(dir: &Path, input: &Input, rx_threads: &str, queues: u16, room: bool) -> Outcome {
    let tag = match input {
        Input::Pcap(_) => "pcap",
        Input::Gen(_) => "gen",
    };
    let out = dir.join(format!("out-{tag}-{rx_threads}-{queues}-{room}.pcap"));
    let steer = if queues == 2 {
        format!("steering: {{ rules: {} }}\n", steering_file(dir).display())
    } else {
        String::new()
    };
    // `vlan` pushes a tag in place: every frame gets room after it.
    let stages = if room {
        "[parse, { vlan: { push: { vid: 5 } } }, count]"
    } else {
        "[parse, count]"
    };
    let port = match input {
        Input::Pcap(p) => format!("pcap:\n      rx: {{ path: {}, loops: 3 }}", p.display()),
        Input::Gen(g) => format!("gen: {{ {g} }}"),
    };
    let yaml = format!(
        "ports:\n  - name: in\n    {port}\n  - name: out\n    pcap:\n      tx: {{ path: {} }}\n\
         queues: {{ count: {queues}, burst: 8, ring_slots: 4, rx_threads: {rx_threads} }}\n{steer}\
         pipeline: {stages}\nexecutor: {{ kind: cpu }}\noutput: {{ port: out }}\n",
        out.display()
    );
    let path = dir.join(format!("cfg-{tag}-{rx_threads}-{queues}-{room}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    let cfg = config::load(&path).unwrap();
    let p = daemon::prepare(cfg).unwrap();
    let mut spec = p.cpu_spec();
    let seen: Arc<Mutex<Seen>> = Arc::new(Mutex::new(vec![Vec::new(); queues as usize]));
    let s2 = Arc::clone(&seen);
    let timed = matches!(input, Input::Pcap(_));
    spec.observer = Some(Arc::new(move |q, burst, _metas, verdicts, _gen| {
        let mut s = s2.lock().unwrap();
        for ((d, f), v) in burst.frames().zip(verdicts) {
            assert_eq!(d.queue as usize, q, "a frame in its queue's burst");
            let t = if timed { d.timestamp_ns } else { 0 };
            s[q].push((f.to_vec(), d.mark, t, format!("{v:?}")));
        }
    }));
    let shared = CpuShared::new(&spec);
    let mut ports = daemon::open_ports(&p.cfg).unwrap();
    let dests = ports.take_out();
    let o = cpu::run_out(&spec, &shared, ports.rx, dests);
    let summary = daemon::summarize(
        &shared.counters,
        &p.pipeline,
        o.elapsed,
        &p.choice,
        o.errors.clone(),
    );
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    let mut r = CaptureReader::open(&out).unwrap();
    let mut frames = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        frames.push(f.data.to_vec());
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    Outcome {
        summary,
        receive_threads: o.receive_threads,
        seen,
        out: frames,
    }
}

fn counts(s: &daemon::Summary) -> String {
    let q: Vec<_> = s
        .queues
        .iter()
        .map(|q| {
            (
                q.rx_frames,
                q.rx_bytes,
                q.passed,
                q.tx_frames,
                q.drops.clone(),
            )
        })
        .collect();
    format!(
        "{} {} {} {:?} {:?} {:?}",
        s.rx_frames, s.tx_frames, s.tx_bytes, s.drops, s.counted, q
    )
}

#[test]
fn one_receive_thread_per_queue_matches_one_per_port() {
    let dir = tmpdir("same");
    let input = pipeline::internal::testdata::multi_proto_pcap();
    same_per_queue_as_per_port(&dir, &Input::Pcap(&input));
}

/// A generator with a fixed flow set (its distinct frames pooled, steered once at the split),
/// some malformed frames (built and steered per frame by every queue) and IPv6 frames: each
/// queue's thread draws the port's sequence and keeps its own frames.
const GEN_POOLED: &str = "count: 3000, seed: 11, size: imix, malformed_ratio: 0.05, \
    flows: { flow_count: 200, dst_ports: 50-90, protocols: { tcp: 0.5, udp: 0.5 }, ipv6_share: 0.2 }";

#[test]
fn gen_one_receive_thread_per_queue_matches_one_per_port() {
    let dir = tmpdir("gen");
    same_per_queue_as_per_port(&dir, &Input::Gen(GEN_POOLED));
}

#[test]
fn gen_with_fresh_headers_or_a_rate_keeps_one_thread() {
    let dir = tmpdir("gen1");
    for g in [
        "count: 500, seed: 3",
        "count: 500, seed: 3, rate: { pps: 1000000 }, flows: { flow_count: 10 }",
    ] {
        let o = run(&dir, &Input::Gen(g), "per_queue", 2, false);
        assert_eq!(o.receive_threads, 1, "{g}");
        assert_eq!(o.summary.rx_frames, 500, "{g}");
    }
}

fn same_per_queue_as_per_port(dir: &Path, input: &Input) {
    for (queues, room) in [(1, false), (2, false), (2, true)] {
        let a = run(dir, input, "per_port", queues, room);
        let b = run(dir, input, "per_queue", queues, room);
        let what = format!("queues={queues} room={room}");
        assert_eq!(
            (a.receive_threads, b.receive_threads),
            (1, queues as usize),
            "{what}"
        );
        assert!(a.summary.rx_frames > 0, "{what}");
        assert_eq!(counts(&a.summary), counts(&b.summary), "{what}");
        // Every frame received was counted by the count stage or dropped with a reason.
        let s = &b.summary;
        let dropped: u64 = s.drops.iter().map(|d| d.1).sum();
        let counted = s.counted.first().map_or(0, |c| c.1);
        assert_eq!(s.rx_frames, counted + dropped, "{what}: {:?}", s.drops);
        // Each queue's worker saw the same frames, marks, times and verdicts in the same order.
        assert_eq!(a.seen, b.seen, "{what}");
        if queues == 2 {
            assert!(
                a.seen.iter().all(|q| !q.is_empty()),
                "{what}: both queues used"
            );
            let drops = &a.summary.queues[0].drops;
            assert!(
                drops.iter().any(|(r, n)| r == "steering_drop" && *n > 0),
                "{what}: the steering drop rule matched: {drops:?}"
            );
            assert!(a.seen[1].iter().any(|f| f.1 == 7), "{what}: a marked frame");
        }
        // The output capture: the same frames (the TX thread interleaves queues as they come).
        let (mut x, mut y) = (a.out.clone(), b.out.clone());
        if queues > 1 {
            x.sort();
            y.sort();
        }
        assert_eq!(x, y, "{what}");
        assert_eq!(x.len() as u64, a.summary.tx_frames, "{what}");
    }
}

fn load_err(yaml_queues: &str) -> String {
    let dir = tmpdir("bad");
    let path = dir.join("bad.yaml");
    std::fs::write(
        &path,
        format!(
            "ports:\n  - name: g\n    gen: {{ count: 10 }}\nqueues: {yaml_queues}\npipeline: [count]\n"
        ),
    )
    .unwrap();
    match config::load(&path) {
        Ok(cfg) => match daemon::preflight(&cfg) {
            Ok(()) => panic!("{yaml_queues}: accepted"),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_rx_threads_and_cores_are_named() {
    let e = load_err("{ count: 2, rx_threads: sometimes }");
    assert!(e.contains("rx_threads"), "{e}");
    assert!(e.contains("per_queue"), "{e}");
    let e = load_err("{ count: 2, cores: [] }");
    assert!(e.contains("queues.cores") && e.contains("empty"), "{e}");
    let e = load_err("{ count: 2, cores: [0, 0] }");
    assert!(e.contains("queues.cores[1]") && e.contains("twice"), "{e}");
    let e = load_err("{ count: 2, cores: [5000] }");
    assert!(e.contains("queues.cores[0]") && e.contains("5000"), "{e}");
    let e = load_err("{ count: 2, cores: [x] }");
    assert!(e.contains("cores"), "{e}");
    // A core the process may not run on: found by validate (preflight), not only at run.
    let allowed = pipeline::internal::affinity::allowed_cpus().unwrap();
    if let Some(absent) = (0..1000).find(|c| !allowed.contains(c)) {
        let e = load_err(&format!("{{ count: 2, cores: [{absent}] }}"));
        assert!(
            e.contains("queues.cores[0]") && e.contains("may not run on"),
            "{e}"
        );
    }
}
