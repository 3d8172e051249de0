//! Every verdict goes somewhere (CPU executor): `pass` to the output port, `mirror` to the
//! output port and a copy to the mirror port, `to_host` to the slow path (a pcap file, a port of
//! the config, or a library callback), `drop` counted. The files are read back (and by tshark)
//! and their counts checked against the summary.

use pipeline::internal::testdata::capture_frames;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use pipeline::config;
use pipeline::daemon;
use pipeline::internal::executor::cpu::{self, CpuShared};
use pipeline::internal::port::out::CallbackTx;
use pipeline::internal::stage::parse::parse_frame;

const RULES: &str = "rules:
  - { name: udp-to-host, proto: udp, action: to-host }
  - { name: icmp-mirror, proto: icmp, action: mirror }
  - { name: drop-200, dst: 192.168.200.0/24, action: drop }
";

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-vd-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn config(dir: &Path, output: &str) -> PathBuf {
    std::fs::write(dir.join("rules.yaml"), RULES).unwrap();
    let yaml = format!(
        "ports:\n  - name: g\n    gen: {{ count: 3000, seed: 5, size: 128 }}\n\
         \x20 - name: out\n    pcap: {{ tx: {{ path: out.pcap }} }}\n\
         \x20 - name: mir\n    pcap: {{ tx: {{ path: mir.pcap }} }}\n\
         \x20 - name: host\n    pcap: {{ tx: {{ path: host.pcap }} }}\n\
         queues: {{ count: 1, burst: 16 }}\n\
         pipeline:\n  - parse\n  - acl: {{ rules: rules.yaml }}\n  - count\n\
         executor: {{ kind: cpu }}\noutput: {output}\n"
    );
    let p = dir.join("c.yaml");
    std::fs::write(&p, yaml).unwrap();
    p
}

fn protos(frames: &[Vec<u8>]) -> Vec<u8> {
    frames.iter().map(|f| parse_frame(f).ip_proto).collect()
}

fn run(path: &Path) -> daemon::Summary {
    let cfg = config::load(path).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap();
    let ports = daemon::open_ports(&p.cfg).unwrap();
    let shared = CpuShared::new(&p.cpu_spec());
    daemon::run_cpu(&p, &shared, ports)
}

fn tally<'a>(s: &'a daemon::Summary, role: &str) -> &'a pipeline::internal::port::out::OutTally {
    s.outputs
        .iter()
        .find(|t| t.role == role)
        .unwrap_or_else(|| panic!("no {role} in {:?}", s.outputs))
}

#[test]
fn mirror_copies_and_to_host_pcap_get_exactly_their_frames() {
    let dir = tmpdir("pcap");
    let s = run(&config(
        &dir,
        "{ port: out, mirror: mir, to_host: { pcap: slow.pcap } }",
    ));
    let q = &s.queues[0];
    assert!(q.to_host > 0 && q.mirrored > 0 && q.passed > 0, "{q:?}");
    let acl = s
        .drops
        .iter()
        .find(|(r, _)| r == "acl_drop")
        .map_or(0, |d| d.1);
    assert!(acl > 0);
    assert_eq!(s.rx_frames, q.passed + q.mirrored + q.to_host + acl);
    let (out, mir, slow) = (
        capture_frames(&dir.join("out.pcap")).unwrap(),
        capture_frames(&dir.join("mir.pcap")).unwrap(),
        capture_frames(&dir.join("slow.pcap")).unwrap(),
    );
    // The output port: passed and mirrored frames; the copies: the mirrored ones, in order.
    assert_eq!(out.len() as u64, q.passed + q.mirrored);
    assert_eq!(s.tx_frames, out.len() as u64);
    let mirrored_out: Vec<&Vec<u8>> = out
        .iter()
        .filter(|f| parse_frame(f).ip_proto == 1)
        .collect();
    assert_eq!(mir.len() as u64, q.mirrored);
    assert_eq!(mirrored_out, mir.iter().collect::<Vec<_>>());
    assert!(protos(&mir).iter().all(|p| *p == 1));
    // The slow path: the UDP frames, which never reach the output port.
    assert_eq!(slow.len() as u64, q.to_host);
    assert!(protos(&slow).iter().all(|p| *p == 17));
    assert!(protos(&out).iter().all(|p| *p != 17));
    assert_eq!(
        (tally(&s, "mirror").frames, tally(&s, "to_host").frames),
        (q.mirrored, q.to_host)
    );
    assert_eq!(tally(&s, "output").name, "out");
    // The unused TX port is opened (every port with a transmit side is) and stays empty.
    assert_eq!(capture_frames(&dir.join("host.pcap")).unwrap().len(), 0);
    // tshark reads the slow path as the UDP frames.
    let o = Command::new("tshark")
        .arg("-r")
        .arg(dir.join("slow.pcap"))
        .args(["-T", "fields", "-e", "ip.proto"])
        .output()
        .expect("tshark runs");
    let lines: Vec<String> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len() as u64, q.to_host);
    assert!(lines.iter().all(|l| l == "17"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn to_host_to_a_port_and_to_a_callback() {
    let dir = tmpdir("port");
    let s = run(&config(&dir, "{ port: out, to_host: { port: host } }"));
    let host = capture_frames(&dir.join("host.pcap")).unwrap();
    assert_eq!(host.len() as u64, s.queues[0].to_host);
    assert!(!host.is_empty() && protos(&host).iter().all(|p| *p == 17));
    assert_eq!(tally(&s, "to_host").frames, host.len() as u64);
    // No mirror port: the copies are not made, the originals still go out.
    assert_eq!(
        capture_frames(&dir.join("out.pcap")).unwrap().len() as u64,
        s.queues[0].passed + s.queues[0].mirrored
    );
    // The library callback as the slow path (cpu::run_out with OutPorts).
    let cfg = config::load(&config(&dir, "{ port: out }")).unwrap();
    let p = daemon::prepare(cfg).unwrap();
    let mut ports = daemon::open_ports(&p.cfg).unwrap();
    let mut dests = ports.take_out();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&seen);
    dests.to_host = Some(Box::new(CallbackTx::new("app", move |f: &[u8]| {
        s2.lock().unwrap().push(f.to_vec())
    })));
    let shared = CpuShared::new(&p.cpu_spec());
    let o = cpu::run_out(&p.cpu_spec(), &shared, ports.rx, dests);
    assert!(o.errors.is_empty(), "{:?}", o.errors);
    let got = seen.lock().unwrap().clone();
    assert_eq!(got, host, "the callback gets the same frames, in order");
    let t = o.out.iter().find(|t| t.role == "to_host").unwrap();
    assert_eq!((t.name.as_str(), t.frames), ("app", host.len() as u64));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn mirror_and_slow_path_do_not_keep_the_config_off_the_gpu() {
    // The GPU executor's TX thread delivers mirror copies and the slow path as the CPU
    // executor's does: choosing the executor never looks at them (without a GPU, `auto`
    // takes the CPU for that reason alone).
    let dir = tmpdir("gpu");
    let path = config(&dir, "{ port: out, mirror: mir }");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("kind: cpu", "kind: auto");
    std::fs::write(&path, text).unwrap();
    let p = daemon::prepare(config::load(&path).unwrap()).unwrap();
    assert!(p.pipeline.gpu_refusal().is_none());
    assert!(
        !p.choice.reason.contains("output.mirror"),
        "{}",
        p.choice.reason
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_slow_path_file_that_cannot_be_written_is_a_config_error() {
    let dir = tmpdir("badslow");
    let path = config(
        &dir,
        "{ port: out, to_host: { pcap: no/such/folder/slow.pcap } }",
    );
    let cfg = config::load(&path).unwrap();
    let e = pipeline::daemon::preflight(&cfg).unwrap_err();
    assert_eq!(e.key, "output.to_host.pcap");
    assert!(
        e.line > 0 && e.to_string().contains("does not exist"),
        "{e}"
    );
    // Run opens it and says which key failed (no panic, no partial run).
    let p = daemon::prepare(cfg).unwrap();
    let e = daemon::open_ports(&p.cfg)
        .err()
        .expect("cannot open the slow path");
    assert!(format!("{e:#}").contains("output.to_host.pcap"), "{e:#}");
    // The slow-path file may not be an input either.
    let path = config(&dir, "{ port: out, to_host: { pcap: rules.yaml } }");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "gen: { count: 3000, seed: 5, size: 128 }",
        "pcap: { rx: { path: rules.yaml } }",
    );
    std::fs::write(&path, text).unwrap();
    let e = config::load(&path).unwrap_err();
    assert_eq!(e.key, "output.to_host.pcap", "{e}");
    std::fs::remove_dir_all(&dir).ok();
}
