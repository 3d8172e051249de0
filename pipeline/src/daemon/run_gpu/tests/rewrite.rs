//! A rewriting pipeline on the GPU host side: the TX list each burst comes back with (the
//! stand-in plays the kernel's TX ring: descriptors and the frames as the stages left them)
//! sends every frame to the port it names, the mirror port and the slow path, byte for byte
//! as the CPU executor sends them.

use super::*;
use crate::testdata::capture_frames;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-gpu-rw-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// l3fwd over two output ports, with ACL rules that mirror and send to the host, every
/// output a capture in `dir`.
fn l3fwd(dir: &Path, queues: u32) -> String {
    let d = dir.display();
    format!(
        "ports:\n{}  - name: port0\n    pcap: {{ tx: {{ path: {d}/port0.pcap }} }}\n  \
         - name: port1\n    pcap: {{ tx: {{ path: {d}/port1.pcap }} }}\n  \
         - name: mon\n    pcap: {{ tx: {{ path: {d}/mirror.pcap }} }}\n\
         queues: {{ count: {queues}, burst: 32, ring_slots: 8 }}\n\
         pipeline:\n  - parse\n  - acl: {{ rules: {d}/rules.yaml, default: pass }}\n  \
         - route: {{ routes: rules/l3fwd.routes.yaml }}\n  - ttl\n  \
         - vlan: {{ push: {{ vid: 7 }} }}\n  - l2fwd: {{ src: '02:00:00:00:00:fe' }}\n  - count\n\
         executor: {{ kind: cpu }}\n\
         output:\n  port: port0\n  mirror: mon\n  \
         to_host: {{ pcap: {d}/slow.pcap }}\n",
        gen_port("tgen", 3000, 5, "imix"),
    )
}

const RULES: &str =
    "rules:\n  - { dst_port: 1-99, action: mirror }\n  - { dst_port: 100-199, action: to-host }\n";

/// Runs `yaml` (outputs in `dir`) on the CPU executor, or on the GPU host side over the
/// stand-in; the frames of every output capture.
fn run(dir: &Path, queues: u32, gpu: bool) -> (Summary, Vec<Vec<Vec<u8>>>) {
    std::fs::write(dir.join("rules.yaml"), RULES).unwrap();
    let p = prepared(&l3fwd(dir, queues));
    assert!(p.pipeline.rewrites());
    let shared = Arc::new(cpu::CpuShared::new(&p.cpu_spec()));
    let mut ports = open_ports(&p.cfg).expect("ports");
    let s = if gpu {
        let dev = CpuStandIn::new(&p, 8, 2);
        let spec = host_spec(&p, GpuSlots::of(&p.cfg), p.pipeline.acl().is_some(), 0);
        let mut out = ports.take_out();
        let t = Instant::now();
        let o = host::run(&dev, &spec, &shared, &mut ports.rx, &mut out);
        o.result.expect("host run");
        drop(out);
        let mut s = summarize(
            &shared.counters,
            &p.pipeline,
            t.elapsed(),
            &p.choice,
            o.errors,
        );
        s.outputs = o.outputs;
        s
    } else {
        let out = ports.take_out();
        let o = cpu::run_out(&p.cpu_spec(), &shared, ports.rx, out);
        let mut s = summarize(
            &shared.counters,
            &p.pipeline,
            o.elapsed,
            &p.choice,
            o.errors,
        );
        s.outputs = o.out;
        s
    };
    let files = ["port0", "port1", "mirror", "slow"];
    (
        s,
        files
            .iter()
            .map(|f| capture_frames(&dir.join(format!("{f}.pcap"))).unwrap())
            .collect(),
    )
}

#[test]
fn rewritten_frames_reach_their_ports_mirror_and_slow_path_as_on_the_cpu() {
    let (da, db) = (tmpdir("cpu"), tmpdir("gpu"));
    let (cs, cf) = run(&da, 1, false);
    let (gs, gf) = run(&db, 1, true);
    assert_same_counts(&gs, &cs, "l3fwd 1 queue");
    for (k, name) in ["port0", "port1", "mirror", "slow"].iter().enumerate() {
        assert!(!cf[k].is_empty(), "{name}: the CPU run sent frames there");
        assert_same_frames(&gf[k], &cf[k], name);
    }
    let tally = |s: &Summary| {
        s.outputs
            .iter()
            .map(|o| {
                // The slow path and mirror are named by their file, in each run's own folder.
                let name = o.name.rsplit('/').next().unwrap_or_default().to_string();
                (o.role, name, o.frames, o.bytes, o.failed)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(tally(&gs), tally(&cs));
    // The frames were rewritten (a VLAN tag pushed, TTL down), not sent as received.
    assert!(cf[0].iter().all(|f| f[12..14] == [0x81, 0x00]));
    let _ = std::fs::remove_dir_all(&da);
    let _ = std::fs::remove_dir_all(&db);
}

#[test]
fn several_queues_send_the_same_frames_per_port() {
    let (da, db) = (tmpdir("cpu4"), tmpdir("gpu4"));
    let (cs, mut cf) = run(&da, 4, false);
    let (gs, mut gf) = run(&db, 4, true);
    assert_same_counts(&gs, &cs, "l3fwd 4 queues");
    // Queues interleave differently on each run: the same frames, in any order.
    for (g, c) in gf.iter_mut().zip(cf.iter_mut()) {
        g.sort();
        c.sort();
        assert_eq!(g, c);
    }
    let _ = std::fs::remove_dir_all(&da);
    let _ = std::fs::remove_dir_all(&db);
}
