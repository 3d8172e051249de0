//! validate == run: each bad value that `pktwarp run` refuses at start is refused by `pktwarp
//! validate` too, with the file, the key and the allowed range (about 25 of them once passed
//! validate and failed run, one aborting the CPU executor); every input file has a size bound
//! (`/dev/zero` as a config, rule file, trace or capture is an error naming the file, not an
//! out-of-memory kill); a file that is both read and written is refused.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;
use common::{pktwarp, scratch};

/// A config with one gen port (`gen` is its option map's body), a pcap TX port (`tx`), and
/// `extra` top-level sections.
fn config(dir: &Path, gen: &str, tx: &str, extra: &str) -> PathBuf {
    let p = dir.join("cfg.yaml");
    std::fs::write(
        &p,
        format!(
            "ports:
  - name: wire
    gen: {{ count: 10, {gen} }}
  - name: out
    pcap: {{ tx: {{ {tx} }} }}
pipeline: [parse, {{ acl: {{ rules: rules.yaml }} }}, count]
executor: {{ kind: cpu }}
output: {{ port: out }}
{extra}
"
        ),
    )
    .unwrap();
    p
}

/// Runs validate and run on the config: both must fail, validate's error naming the config
/// file and each of `wanted`.
fn refused(cfg: &Path, what: &str, wanted: &[&str]) {
    let v = pktwarp(&["validate"], cfg);
    let err = String::from_utf8_lossy(&v.stderr);
    assert!(
        !v.status.success(),
        "{what}: validate accepted it: {}",
        String::from_utf8_lossy(&v.stdout)
    );
    assert!(err.contains("cfg.yaml"), "{what}: no file named: {err}");
    for w in wanted {
        assert!(err.contains(w), "{what}: `{w}` missing from: {err}");
    }
    // The location leads the message (`file:line:column:`); the parser's own "at line L,
    // column C" would say it twice.
    assert!(
        !err.contains(", column "),
        "{what}: location given twice: {err}"
    );
    let r = pktwarp(&["run", "--quiet", "--json"], cfg);
    assert!(!r.status.success(), "{what}: run accepted it");
    assert_eq!(
        r.status.code(),
        Some(2),
        "{what}: run did not fail cleanly: {:?}",
        r.status
    );
}

/// The TX side of a case that is not about it.
const OK_TX: &str = "path: out.pcap";
/// Stands for `metrics: { listen: <an address in use> }` (bound when the test runs).
const BUSY: &str = "@busy metrics listener@";

/// (what, gen port options, pcap TX options, extra sections, what validate's error must name).
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
);

/// Values `pktwarp run` refuses at start.
const BAD_VALUES: &[Case] = &[
    (
        "rate 0",
        "rate: { pps: 0 }",
        OK_TX,
        "",
        &["ports[0].gen.rate", "positive"],
    ),
    (
        "rate negative",
        "rate: { pps: -100 }",
        OK_TX,
        "",
        &["ports[0].gen.rate", "positive"],
    ),
    (
        "bps 0",
        "rate: { bps: 0 }",
        OK_TX,
        "",
        &["ports[0].gen.rate"],
    ),
    (
        "size 10",
        "size: 10",
        OK_TX,
        "",
        &["ports[0].gen.size", "64 ..= 9216"],
    ),
    (
        "size 100000",
        "size: 100000",
        OK_TX,
        "",
        &["size", "64 ..= 9216"],
    ),
    (
        "custom size 20",
        "size: [{ size: 20, weight: 1 }]",
        OK_TX,
        "",
        &["ports[0].gen.size", "64 ..= 9216"],
    ),
    (
        "weights 0",
        "size: [{ size: 64, weight: 0 }]",
        OK_TX,
        "",
        &["ports[0].gen.size", "sum to 0"],
    ),
    (
        "vlan 5000",
        "vlan: 5000",
        OK_TX,
        "",
        &["ports[0].gen.vlan", "0 ..= 4095"],
    ),
    (
        "malformed_ratio 2",
        "malformed_ratio: 2",
        OK_TX,
        "",
        &["ports[0].gen.malformed_ratio", "0.0 ..= 1.0"],
    ),
    (
        "malformed_ratio -0.5",
        "malformed_ratio: -0.5",
        OK_TX,
        "",
        &["ports[0].gen.malformed_ratio", "0.0 ..= 1.0"],
    ),
    (
        "src /33",
        "flows: { src: 1.2.3.4/33 }",
        OK_TX,
        "",
        &["ports[0].gen.flows.src", "0 ..= 32"],
    ),
    (
        "dst not an address",
        "flows: { dst: 300.1.1.1 }",
        OK_TX,
        "",
        &["ports[0].gen.flows.dst", "not an IPv4 address"],
    ),
    (
        "src6 /129",
        "flows: { src6: '2001:db8::/129' }",
        OK_TX,
        "",
        &["ports[0].gen.flows.src6", "0 ..= 128"],
    ),
    (
        "ipv6_share 1.5",
        "flows: { ipv6_share: 1.5 }",
        OK_TX,
        "",
        &["ports[0].gen.flows.ipv6_share", "0.0 ..= 1.0"],
    ),
    (
        "flow_count 0",
        "flows: { flow_count: 0 }",
        OK_TX,
        "",
        &["ports[0].gen.flows.flow_count", "1 ..="],
    ),
    (
        "flow_count 4G",
        "flows: { flow_count: 4000000000 }",
        OK_TX,
        "",
        &["ports[0].gen.flows.flow_count", "1 ..= 16777216"],
    ),
    (
        "protocols 0",
        "flows: { protocols: { tcp: 0, udp: 0, icmp: 0 } }",
        OK_TX,
        "",
        &["ports[0].gen.flows.protocols", "> 0"],
    ),
    (
        "duration 0",
        "duration_s: 0",
        OK_TX,
        "",
        &["ports[0].gen.duration_s", "> 0"],
    ),
    (
        "duration negative",
        "duration_s: -3",
        OK_TX,
        "",
        &["ports[0].gen.duration_s"],
    ),
    (
        "capture rate on gen",
        "rate: capture",
        OK_TX,
        "",
        &["ports[0].gen.rate", "pcap"],
    ),
    (
        "trace missing",
        "trace: no-such-trace.txt",
        OK_TX,
        "",
        &["ports[0].gen.trace", "no-such-trace.txt"],
    ),
    (
        "trace and flows",
        "trace: t.txt, flows: {}",
        OK_TX,
        "",
        &["ports[0].gen.trace", "exclusive"],
    ),
    (
        "tx folder missing",
        "",
        "path: no/such/folder/out.pcap",
        "",
        &["ports[1].pcap.tx.path", "does not exist"],
    ),
    (
        "tx is a folder",
        "",
        "path: '.'",
        "",
        &["ports[1].pcap.tx.path", "folder"],
    ),
    (
        "tx path empty",
        "",
        "path: ''",
        "",
        &["ports[1].pcap.tx.path", "empty path"],
    ),
    (
        "snaplen 0",
        "",
        "path: out.pcap, snaplen: 0",
        "",
        &["ports[1].pcap.tx.snaplen", "1 ..= 16777216"],
    ),
    (
        "snaplen huge",
        "",
        "path: out.pcap, snaplen: 100000000",
        "",
        &["ports[1].pcap.tx.snaplen", "1 ..= 16777216"],
    ),
    (
        "metrics.listen in use",
        "",
        OK_TX,
        BUSY,
        &["metrics.listen", "cannot listen"],
    ),
    (
        "metrics.listen not an address",
        "",
        OK_TX,
        "metrics: { listen: 'localhost' }",
        &["metrics.listen", "host:port"],
    ),
    (
        "metrics.max_connections 0",
        "",
        OK_TX,
        "metrics: { max_connections: 0, listen: '127.0.0.1:0' }",
        &["metrics.max_connections", "1 ..= 4096"],
    ),
    (
        "ring_slots 2^31",
        "",
        OK_TX,
        "queues: { ring_slots: 2147483648 }",
        &["ring_slots", "allowed range 2 ..= 65536"],
    ),
    (
        "ring_slots 3",
        "",
        OK_TX,
        "queues: { ring_slots: 3 }",
        &["queues.ring_slots", "power of two"],
    ),
    (
        "ring_slots 2^33",
        "",
        OK_TX,
        "queues: { ring_slots: 8589934592 }",
        &["ring_slots", "allowed range 2 ..= 65536"],
    ),
    (
        "queues.count 0",
        "",
        OK_TX,
        "queues: { count: 0 }",
        &["count", "allowed range 1 ..= 1024"],
    ),
    (
        "queues.count 70000",
        "",
        OK_TX,
        "queues: { count: 70000 }",
        &["count", "70000 is out of range (allowed range 1 ..= 1024)"],
    ),
    (
        "queues.burst 0",
        "",
        OK_TX,
        "queues: { burst: 0 }",
        &["burst", "allowed range 1 ..= 4096"],
    ),
    (
        "drain_timeout 0",
        "",
        OK_TX,
        "control: { drain_timeout_ms: 0 }",
        &["control.drain_timeout_ms", "1 ..= 86400000"],
    ),
    (
        "watch_interval huge",
        "",
        OK_TX,
        "control: { watch_interval_ms: 18446744073709551615 }",
        &["control.watch_interval_ms", "50 ..= 86400000"],
    ),
];

#[test]
fn each_bad_value_fails_validate_with_its_key_and_range() {
    let dir = scratch("hostile-validate");
    std::fs::write(
        dir.join("rules.yaml"),
        "rules:\n  - { proto: udp, action: drop }\n",
    )
    .unwrap();
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = format!("metrics: {{ listen: '{}' }}", held.local_addr().unwrap());
    let t = Instant::now();
    for &(what, gen, tx, extra, wanted) in BAD_VALUES {
        let extra = if extra == BUSY {
            busy.clone()
        } else if extra.contains("metrics") {
            extra.to_string()
        } else {
            format!("{extra}\nmetrics: {{ listen: '127.0.0.1:0' }}")
        };
        let cfg = config(&dir, gen, tx, &extra);
        refused(&cfg, what, wanted);
    }
    assert!(BAD_VALUES.len() >= 25);
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    // The same config with good values passes (the cases fail for their value alone), and
    // validate writes nothing (run, in the metrics case above, did create the output).
    let _ = std::fs::remove_file(dir.join("out.pcap"));
    let cfg = config(
        &dir,
        "rate: { pps: 1000 }",
        OK_TX,
        "metrics: { listen: '127.0.0.1:0' }",
    );
    let v = pktwarp(&["validate"], &cfg);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
    assert!(
        !dir.join("out.pcap").exists(),
        "validate created the output file"
    );
    drop(held);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pcap_inputs_are_checked_by_validate() {
    let dir = scratch("hostile-validate-pcap");
    std::fs::write(dir.join("rules.yaml"), "rules: []\n").unwrap();
    std::fs::write(dir.join("text.pcap"), "this is not a capture\n").unwrap();
    for (rx, wanted) in [
        (
            "path: missing.pcap",
            vec!["ports[0].pcap.rx.path", "missing.pcap"],
        ),
        (
            "path: text.pcap",
            vec!["ports[0].pcap.rx.path", "text.pcap"],
        ),
        (
            "path: /dev/zero",
            vec!["ports[0].pcap.rx.path", "/dev/zero"],
        ),
        (
            "path: in.pcap, rate: { pps: 0 }",
            vec!["ports[0].pcap.rx.rate", "positive"],
        ),
    ] {
        let p = dir.join("cfg.yaml");
        std::fs::write(
            &p,
            format!(
                "ports:\n  - name: wire\n    pcap: {{ rx: {{ {rx} }} }}\npipeline: [parse]\nmetrics: {{ enabled: false }}\n"
            ),
        )
        .unwrap();
        refused(&p, rx, &wanted);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An empty rule file `rules.yaml` and a one-frame capture `in.pcap` in `dir`.
fn rules_and_capture(dir: &Path) {
    std::fs::write(dir.join("rules.yaml"), "rules: []\n").unwrap();
    let mut w = pipeline::internal::port::pcap::CaptureWriter::create(
        dir.join("in.pcap"),
        pipeline::internal::port::pcap::WriteFormat::Pcap,
        65535,
    )
    .unwrap();
    w.write_frame(&[0u8; 60], 60, 0).unwrap();
}

#[test]
fn one_file_read_and_written_is_refused() {
    let dir = scratch("hostile-same-file");
    rules_and_capture(&dir);
    let before = std::fs::read(dir.join("in.pcap")).unwrap();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for tx in ["in.pcap", "./sub/../in.pcap"] {
        let p = dir.join("cfg.yaml");
        std::fs::write(
            &p,
            format!(
                "ports:
  - name: wire
    pcap: {{ rx: {{ path: in.pcap }}, tx: {{ path: '{tx}' }} }}
pipeline: [parse]
output: {{ port: wire }}
metrics: {{ enabled: false }}
"
            ),
        )
        .unwrap();
        refused(
            &p,
            tx,
            &[
                "ports[0].pcap.tx.path",
                "ports[0].pcap.rx.path",
                "overwrite",
            ],
        );
    }
    assert_eq!(
        std::fs::read(dir.join("in.pcap")).unwrap(),
        before,
        "the input was touched"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TX path that is a hard link of the capture, the rule file or the config is one file under
/// two names: recording to it would overwrite the input.
#[test]
fn a_tx_path_hard_linked_to_an_input_is_refused() {
    let dir = scratch("hostile-hard-link");
    rules_and_capture(&dir);
    let cfg = dir.join("cfg.yaml");
    for (target, other_key) in [
        ("in.pcap", "ports[0].pcap.rx.path"),
        ("rules.yaml", "pipeline[1].acl.rules"),
        ("cfg.yaml", "the config file"),
    ] {
        let link = dir.join("out.pcap");
        let _ = std::fs::remove_file(&link);
        let body = "ports:
  - name: wire
    pcap: { rx: { path: in.pcap }, tx: { path: out.pcap } }
pipeline: [parse, { acl: { rules: rules.yaml, format: yaml } }]
output: { port: wire }
metrics: { enabled: false }
";
        std::fs::write(&cfg, body).unwrap();
        std::fs::hard_link(dir.join(target), &link).unwrap();
        let before = std::fs::read(dir.join(target)).unwrap();
        refused(
            &cfg,
            target,
            &["ports[0].pcap.tx.path", other_key, "overwrite"],
        );
        assert_eq!(
            std::fs::read(dir.join(target)).unwrap(),
            before,
            "{target} was touched"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dev_zero_inputs_are_errors_naming_the_file_and_limit() {
    let dir = scratch("hostile-dev-zero");
    // The config itself.
    let t = Instant::now();
    let v = pktwarp(&["validate"], Path::new("/dev/zero"));
    let err = String::from_utf8_lossy(&v.stderr);
    assert!(!v.status.success());
    assert!(err.contains("/dev/zero") && err.contains("16 MiB"), "{err}");
    // A rule file (YAML and ClassBench), a steering rule file, a gen trace.
    for (what, body) in [
        (
            "yaml rules",
            "ports: [{ name: g, gen: { count: 1 } }]\npipeline: [parse, { acl: { rules: /dev/zero, format: yaml } }]\n",
        ),
        (
            "classbench rules",
            "ports: [{ name: g, gen: { count: 1 } }]\npipeline: [parse, { acl: { rules: /dev/zero, format: classbench } }]\n",
        ),
        (
            "steering rules",
            "ports: [{ name: g, gen: { count: 1 } }]\nsteering: { rules: /dev/zero }\npipeline: [parse]\n",
        ),
        (
            "trace",
            "ports: [{ name: g, gen: { trace: /dev/zero } }]\npipeline: [parse]\n",
        ),
    ] {
        let p = dir.join("cfg.yaml");
        std::fs::write(&p, format!("{body}metrics: {{ enabled: false }}\n")).unwrap();
        for args in [&["validate"][..], &["run", "--quiet"][..]] {
            let o = pktwarp(args, &p);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{what} {args:?}: {err}");
            assert!(
                err.contains("/dev/zero") && err.contains("256 MiB"),
                "{what} {args:?}: {err}"
            );
        }
    }
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shadowed_rule_warnings_are_capped() {
    let dir = scratch("hostile-shadow");
    let mut rules = String::from("rules:\n  - { proto: udp, action: drop }\n");
    for _ in 0..300 {
        rules.push_str("  - { proto: udp, dst_port: 53, action: drop }\n");
    }
    std::fs::write(dir.join("rules.yaml"), rules).unwrap();
    let p = dir.join("cfg.yaml");
    std::fs::write(
        &p,
        "ports: [{ name: g, gen: { count: 1 } }]\npipeline: [parse, { acl: { rules: rules.yaml } }]\nmetrics: { enabled: false }\n",
    )
    .unwrap();
    let o = pktwarp(&["validate"], &p);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    let lines = err.lines().filter(|l| l.contains("shadowed")).count();
    assert!(lines <= 6, "{lines} shadowed-rule lines: {err}");
    assert!(err.contains("300 shadowed rules in all"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An empty TX path in a config named without a folder (`pktwarp validate cfg.yaml`) resolved
/// to no file at all: validate passed and run failed. Refused by validate, naming the key.
#[test]
fn an_empty_tx_path_is_refused_with_a_relative_config_name() {
    let dir = scratch("hostile-validate-empty-tx");
    std::fs::write(dir.join("rules.yaml"), "rules: []\n").unwrap();
    config(&dir, "", "path: ''", "metrics: { enabled: false }");
    let v = std::process::Command::new(env!("CARGO_BIN_EXE_pktwarp"))
        .args(["validate", "cfg.yaml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&v.stderr);
    assert_eq!(v.status.code(), Some(2), "validate: {err}");
    assert!(
        err.contains("ports[1].pcap.tx.path") && err.contains("empty path"),
        "{err}"
    );
}

/// An I/O error is named once: the port error carried it both in its message and as its
/// source, and `{:#}` printed it twice ("dir: Is a directory (os error 21): Is a directory").
#[test]
fn an_io_error_is_named_once() {
    let dir = scratch("hostile-run-io-once");
    std::fs::write(dir.join("rules.yaml"), "rules: []\n").unwrap();
    let folder = dir.join("a-folder");
    std::fs::create_dir_all(&folder).unwrap();
    let cfg = config(
        &dir,
        "",
        &format!("path: '{}'", folder.display()),
        "metrics: { enabled: false }",
    );
    let r = std::process::Command::new(env!("CARGO_BIN_EXE_pktwarp"))
        .args(["run", "--quiet"])
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("Is a directory").count(), 1, "{err}");
}
