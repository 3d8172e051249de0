//! The CPU executor end to end through the config: frames in = frames counted + frames dropped
//! with a reason; pcap in -> pcap out is byte-identical; config errors name file, line and key.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pipeline::config;
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::port::pcap::CaptureReader;

fn run_yaml(yaml: &str, dir: &Path) -> daemon::Summary {
    let path = dir.join("test.yaml");
    std::fs::write(&path, yaml).unwrap();
    let cfg = config::load(&path).unwrap();
    let p = daemon::prepare(cfg).unwrap();
    let ports = daemon::open_ports(&p.cfg).unwrap();
    let shared = CpuShared::new(&p.cpu_spec());
    daemon::run_cpu(&p, &shared, ports)
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn gen_parse_count_accounts_for_every_frame() {
    let dir = tmpdir("gen");
    for queues in [1, 2, 3] {
        let s = run_yaml(
            &format!(
                "ports:\n  - name: g\n    gen: {{ count: 20000, seed: 3, malformed_ratio: 0.05, size: imix }}\n\
                 queues: {{ count: {queues}, burst: 16, ring_slots: 8 }}\n\
                 pipeline: [parse, count]\nexecutor: {{ kind: cpu }}\n"
            ),
            &dir,
        );
        assert_eq!(s.executor, "cpu");
        assert_eq!(s.rx_frames, 20000, "queues={queues}");
        let parse_err = s.drops.iter().find(|(r, _)| r == "parse_error").unwrap().1;
        assert!(parse_err > 0, "malformed frames must be counted");
        let per_status: u64 = s.parse_errors.iter().map(|(_, n)| n).sum();
        assert_eq!(per_status, parse_err);
        let counted = s.counted[0].1;
        assert_eq!(counted + parse_err, 20000, "queues={queues}");
        assert_eq!(s.queues.len(), queues);
        if queues > 1 {
            assert!(
                s.queues.iter().all(|q| q.rx_frames > 0),
                "RSS spreads over every queue"
            );
        }
    }
}

#[test]
fn pcap_in_pcap_out_is_byte_identical() {
    let dir = tmpdir("pcap");
    let input = pipeline::internal::testdata::multi_proto_pcap();
    let out = dir.join("out.pcap");
    let s = run_yaml(
        &format!(
            "ports:\n  - name: in\n    pcap:\n      rx: {{ path: {} }}\n  - name: out\n    pcap:\n      tx: {{ path: {} }}\n\
             pipeline: [count]\nexecutor: {{ kind: cpu }}\noutput: {{ port: out }}\n",
            input.display(),
            out.display()
        ),
        &dir,
    );
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    let mut a = CaptureReader::open(&input).unwrap();
    let mut b = CaptureReader::open(&out).unwrap();
    let mut n = 0;
    loop {
        let fa = a.next_frame().unwrap().map(|f| f.data.to_vec());
        let fb = b.next_frame().unwrap().map(|f| f.data.to_vec());
        assert_eq!(fa, fb, "frame {n}");
        if fa.is_none() {
            break;
        }
        n += 1;
    }
    assert_eq!(n, 23);
    assert_eq!(s.tx_frames, 23);
}

#[test]
fn ring_full_drops_are_counted_not_lost() {
    let dir = tmpdir("full");
    let s = run_yaml(
        "ports:\n  - name: g\n    gen: { count: 50000, seed: 9 }\n\
         queues: { count: 1, burst: 4, ring_slots: 2, on_full: drop }\n\
         pipeline: [parse, count]\nexecutor: { kind: cpu }\n",
        &dir,
    );
    let full = s.drops.iter().find(|(r, _)| r == "ring_full").unwrap().1;
    let counted = s.counted[0].1;
    let parse_err = s.drops.iter().find(|(r, _)| r == "parse_error").unwrap().1;
    assert_eq!(counted + full + parse_err, 50000);
}

#[test]
fn config_errors_name_file_line_and_key() {
    let dir = tmpdir("cfgerr");
    let path = dir.join("bad.yaml");
    std::fs::write(
        &path,
        "ports:\n  - name: g\n    gen: { count: 10 }\npipeline:\n  - parse\nexecutor:\n  kind: cpu\n  burts: 3\n",
    )
    .unwrap();
    let e = config::load(&path).unwrap_err();
    assert_eq!(e.line, 8);
    assert!(e.to_string().contains("bad.yaml:8:3"), "{e}");
    assert!(e.to_string().contains("burts"), "{e}");

    std::fs::write(
        &path,
        "ports:\n  - name: g\n    gen: { count: 10 }\npipeline: [parse]\noutput:\n  port: nowhere\n",
    )
    .unwrap();
    let e = config::load(&path).unwrap_err();
    assert_eq!((e.line, e.key.as_str()), (6, "output.port"), "{e}");

    std::fs::write(&path, "ports:\n  - name: g\npipeline: [parse]\n").unwrap();
    let e = config::load(&path).unwrap_err();
    assert_eq!(e.key, "ports[0]", "{e}");
    assert!(e.to_string().contains("exactly one backend"), "{e}");

    std::fs::write(
        &path,
        "ports:\n  - name: g\n    gen: { count: 10 }\npipeline: [count, acl: { rules: x.yaml }]\n",
    )
    .unwrap();
    let e = config::load(&path).unwrap_err();
    assert!(e.to_string().contains("needs a `parse` stage"), "{e}");
}

#[test]
fn stop_flag_ends_an_endless_source_and_drains() {
    let dir = tmpdir("stop");
    let path = dir.join("forever.yaml");
    std::fs::write(
        &path,
        "ports:\n  - name: g\n    gen: { seed: 2 }\npipeline: [parse, count]\nexecutor: { kind: cpu }\n",
    )
    .unwrap();
    let p = daemon::prepare(config::load(&path).unwrap()).unwrap();
    let ports = daemon::open_ports(&p.cfg).unwrap();
    let shared = CpuShared::new(&p.cpu_spec());
    let stopper = Arc::clone(&shared);
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        stopper
            .stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let s = daemon::run_cpu(&p, &shared, ports);
    t.join().unwrap();
    assert!(s.rx_frames > 0);
    assert_eq!(
        s.counted[0].1 + s.drops.iter().map(|d| d.1).sum::<u64>(),
        s.rx_frames
    );
}

#[test]
fn software_steering_rules_place_every_frame_in_its_queue() {
    use pipeline::burst::Burst;
    use pipeline::meta::PacketMeta;
    use pipeline::verdict::Verdict;
    use std::sync::Mutex;

    let dir = tmpdir("steer");
    std::fs::write(
        dir.join("s.steering.yaml"),
        "queues: 4\nrules:\n  - name: udp\n    match:\n      udp: {}\n    actions: [{ queue: 3 }]\n  \
         - name: icmp-drop\n    match:\n      ipv4: { proto: 1 }\n    actions: [drop]\n",
    )
    .unwrap();
    let path = dir.join("steer.yaml");
    std::fs::write(
        &path,
        "ports:\n  - name: g\n    gen: { count: 20000, seed: 4 }\nqueues: { count: 4 }\n\
         steering: { rules: s.steering.yaml }\npipeline: [parse, count]\nexecutor: { kind: cpu }\n",
    )
    .unwrap();
    let p = daemon::prepare(config::load(&path).unwrap()).unwrap();
    let ports = daemon::open_ports(&p.cfg).unwrap();
    // (queue, ip_proto) of every frame the workers saw.
    let seen: Arc<Mutex<Vec<(usize, u8)>>> = Arc::default();
    let s2 = Arc::clone(&seen);
    let mut spec = p.cpu_spec();
    spec.observer = Some(Arc::new(
        move |q: usize, _b: &Burst, metas: &[PacketMeta], _v: &[Verdict], _g: u64| {
            let mut s = s2.lock().unwrap();
            s.extend(metas.iter().map(|m| (q, m.ip_proto)));
        },
    ));
    let shared = CpuShared::new(&spec);
    let out = pipeline::internal::executor::cpu::run(&spec, &shared, ports.rx, ports.tx);
    assert!(out.errors.is_empty());
    let seen = seen.lock().unwrap();
    let steering_drops: u64 = shared
        .counters
        .iter()
        .map(|c| c.drop_count(pipeline::verdict::DropReason::SteeringDrop))
        .sum();
    assert!(steering_drops > 0, "ICMP is dropped by steering");
    assert_eq!(seen.len() as u64 + steering_drops, 20000);
    assert!(
        seen.iter().all(|(_, proto)| *proto != 1),
        "no ICMP reaches a worker"
    );
    for (q, proto) in seen.iter() {
        if *proto == 17 {
            assert_eq!(*q, 3, "every UDP frame goes to queue 3");
        }
    }
    assert!(seen.iter().any(|(_, p)| *p == 17));
    // What no rule decides is spread by RSS over all four queues.
    assert!((0..4).all(|q| seen.iter().any(|(sq, p)| *sq == q && *p == 6)));
}

#[test]
fn two_receiving_ports_into_shared_queues_count_every_frame() {
    let dir = tmpdir("twoports");
    let s = run_yaml(
        "ports:\n  - name: a\n    gen: { count: 30000, seed: 1 }\n  - name: b\n    gen: { count: 20000, seed: 2, size: imix }\n\
         queues: { count: 2, burst: 8, ring_slots: 4 }\npipeline: [parse, count]\nexecutor: { kind: cpu }\n",
        &dir,
    );
    assert_eq!(s.rx_frames, 50000);
    let drops: u64 = s.drops.iter().map(|d| d.1).sum();
    assert_eq!(s.counted[0].1 + drops, 50000);
}
