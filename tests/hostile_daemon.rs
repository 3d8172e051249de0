//! `pktwarp run` under a hostile or careless operator, one test per finding of a review of it:
//! SIGTERM while a metrics client stalls (it finished, never), a second SIGTERM (exit 130), a
//! SIGHUP during start-up (it killed the daemon, exit 129), a reload to an empty or
//! half-written rule file (published), TX to `/dev/full` and to a file that stops growing
//! (frames counted as sent that never reached the file).

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{put, scrape, scratch, tx_config, Daemon};

const RULES4: &str = "rules:
  - { proto: tcp, dst_port: 1-100, action: drop }
  - { proto: tcp, dst_port: 101-200, action: mirror }
  - { proto: udp, action: drop }
  - { proto: icmp, action: pass }
";

/// A generator config, forever at `pps` unless `gen_extra` bounds it.
fn config(dir: &Path, gen_extra: &str, tail: &str) -> PathBuf {
    let p = dir.join("cfg.yaml");
    std::fs::write(
        &p,
        format!(
            "ports:
  - name: wire
    gen: {{ size: 64, {gen_extra} }}
{tail}
queues: {{ count: 2 }}
pipeline: [parse, {{ acl: {{ rules: rules.yaml }} }}, count]
executor: {{ kind: cpu }}
metrics: {{ listen: '127.0.0.1:0' }}
"
        ),
    )
    .unwrap();
    p
}

#[test]
fn sigterm_finishes_in_time_while_a_metrics_client_stalls() {
    let dir = scratch("hostile-term");
    put(&dir.join("rules.yaml"), RULES4);
    let cfg = config(
        &dir,
        "rate: { pps: 20000 }",
        "control: { drain_timeout_ms: 2000 }",
    );
    let mut d = Daemon::run(&cfg);
    let addr = d.metrics_addr();
    // A client that pipelines 2000 scrapes and reads none of the answers: more than the
    // socket buffers hold, so the server's writes to it back up.
    let mut hog = TcpStream::connect(&addr).unwrap();
    hog.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    for _ in 0..2000 {
        if hog
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .is_err()
        {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    d.signal("-TERM");
    let mut exited = None;
    while t.elapsed() < Duration::from_millis(2500) {
        if let Some(st) = d.child.try_wait().unwrap() {
            exited = Some((st, t.elapsed()));
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let Some((st, took)) = exited else {
        // Still there: a second SIGTERM must end it (the docs promise exit 130).
        d.signal("-TERM");
        let (code, _, _) = d.wait(Duration::from_secs(10));
        panic!("the first SIGTERM did not end pktwarp within 2.5 s (the second: exit {code})");
    };
    assert_eq!(st.code(), Some(0), "{st:?}");
    assert!(
        took < Duration::from_millis(2000 + 1500),
        "SIGTERM took {took:?} with drain_timeout_ms 2000"
    );
    drop(hog);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_second_sigterm_exits_130_while_the_drain_is_stuck() {
    let dir = scratch("hostile-term2");
    put(&dir.join("rules.yaml"), RULES4);
    // The output is a FIFO that is opened for reading but never read: once the pipe is full,
    // transmit blocks, so the drain cannot finish.
    let fifo = dir.join("out.pcap");
    let ok = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo");
    let _reader = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc_o_nonblock())
            .open(&fifo)
            .unwrap()
    };
    let cfg = dir.join("cfg.yaml");
    std::fs::write(
        &cfg,
        "ports:
  - name: wire
    gen: { size: 1024 }
  - name: out
    pcap: { tx: { path: out.pcap } }
queues: { count: 1 }
pipeline: [parse, count]
executor: { kind: cpu }
output: { port: out }
metrics: { listen: '127.0.0.1:0' }
control: { drain_timeout_ms: 60000 }
",
    )
    .unwrap();
    let d = Daemon::run(&cfg);
    d.metrics_addr();
    std::thread::sleep(Duration::from_millis(500));
    d.signal("-TERM");
    d.wait_log("shutdown", |v| v["fields"]["signal"] == "SIGTERM");
    std::thread::sleep(Duration::from_millis(300));
    d.signal("-TERM");
    let (code, out, took) = d.wait(Duration::from_secs(10));
    assert_eq!(code, 130, "{out}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// O_NONBLOCK, so opening the FIFO's read end does not wait for a writer.
fn libc_o_nonblock() -> i32 {
    0o4000
}

#[test]
fn a_sighup_during_start_up_does_not_kill_the_daemon() {
    let dir = scratch("hostile-early-hup");
    // Enough ClassBench rules that loading them takes a while.
    let mut rules = String::new();
    for i in 0..40_000u32 {
        rules.push_str(&format!(
            "@10.{}.{}.0/24\t192.168.0.0/16\t0 : 65535\t{} : {}\t0x06/0xFF\n",
            (i >> 8) & 255,
            i & 255,
            i % 60000,
            i % 60000 + 10
        ));
    }
    std::fs::write(dir.join("rules.cb"), rules).unwrap();
    let cfg = dir.join("cfg.yaml");
    std::fs::write(
        &cfg,
        "ports:
  - name: wire
    gen: { size: 64, count: 2000 }
pipeline: [parse, { acl: { rules: rules.cb, format: classbench } }, count]
executor: { kind: cpu }
metrics: { listen: '127.0.0.1:0' }
",
    )
    .unwrap();
    let d = Daemon::run(&cfg);
    // Well inside main, well before the rules are compiled.
    std::thread::sleep(Duration::from_millis(40));
    d.signal("-HUP");
    let early = d.find("metrics_listen", &|_| true).is_none();
    let (code, out, _) = d.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "killed or failed: {out}");
    let s: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON summary");
    assert_eq!(s["rx_frames"], 2000);
    assert!(
        early,
        "the SIGHUP came after start-up: the test proves nothing"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_reload_to_an_empty_or_truncated_rule_file_is_refused() {
    let dir = scratch("hostile-shrink");
    put(&dir.join("rules.yaml"), RULES4);
    let cfg = config(&dir, "rate: { pps: 5000 }", "");
    let d = Daemon::run(&cfg);
    let addr = d.metrics_addr();
    put(&dir.join("rules.yaml"), "rules: []\n");
    d.signal("-HUP");
    let ev = d.wait_log("reload", |v| v["fields"]["result"] == "failure");
    assert!(
        ev["fields"]["reason"]
            .as_str()
            .unwrap()
            .contains("allow_rule_shrink"),
        "{ev}"
    );
    let w = d.wait_log("reload_shrink", |_| true);
    assert_eq!(w["level"], "WARN", "{w}");
    // Half-written: 1 of the 4 rules.
    put(
        &dir.join("rules.yaml"),
        "rules:\n  - { proto: tcp, dst_port: 1-100, action: drop }\n",
    );
    d.signal("-HUP");
    wait_until(|| {
        d.logs
            .lock()
            .unwrap()
            .iter()
            .filter(|v| v["fields"]["event"] == "reload" && v["fields"]["result"] == "failure")
            .count()
            == 2
    });
    assert!(scrape(&addr).contains("pktwarp_ruleset_rules 4"));
    // Allowed by the config: published, and the other change (queues) needs a restart.
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "queues: { count: 2 }",
        "queues: { count: 3 }\ncontrol: { allow_rule_shrink: true }",
    );
    put(&cfg, &text);
    d.signal("-HUP");
    let ev = d.wait_log("reload", |v| v["fields"]["result"] == "restart_needed");
    assert_eq!(ev["fields"]["rules"], 1, "{ev}");
    assert!(
        ev["fields"]["sections"]
            .as_str()
            .unwrap()
            .contains("queues"),
        "{ev}"
    );
    assert!(scrape(&addr).contains("pktwarp_ruleset_rules 1"));
    d.signal("-TERM");
    let (code, out, _) = d.wait(Duration::from_secs(15));
    assert_eq!(code, 0, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn wait_until(f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(15), "timed out");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn tx_to_dev_full_is_a_clear_error_and_counts_nothing_sent() {
    let dir = scratch("hostile-devfull");
    let cfg = tx_config(&dir, Path::new("/dev/full"), 5000);
    let out = Command::new(env!("CARGO_BIN_EXE_pktwarp"))
        .args(["run", "--quiet", "--json"])
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "ran: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        err.contains("/dev/full") && err.contains("No space left"),
        "{err}"
    );
    // No summary claims frames sent.
    assert!(!String::from_utf8_lossy(&out.stdout).contains("\"tx_frames\""));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tx_to_a_file_that_cannot_grow_counts_exactly_what_it_holds() {
    let dir = scratch("hostile-fsize");
    let out_path = dir.join("out.pcap");
    let cfg = tx_config(&dir, &out_path, 20_000);
    // A 64 KiB file size limit stands in for a full disk (SIGXFSZ ignored, so writes past it
    // fail with EFBIG as they would with ENOSPC).
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f 64; exec '{}' run --quiet --json '{}'",
            env!("CARGO_BIN_EXE_pktwarp"),
            cfg.display()
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("out.pcap"), "{stderr}");
    let s: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let sent = s["tx_frames"].as_u64().unwrap();
    let mut r = pipeline::internal::port::pcap::CaptureReader::open(&out_path).unwrap();
    let (mut in_file, mut bytes_in_file) = (0u64, 0u64);
    while let Some(f) = r.next_frame().expect("the file is whole records") {
        in_file += 1;
        bytes_in_file += f.data.len() as u64;
    }
    assert_eq!(s["tx_bytes"].as_u64().unwrap(), bytes_in_file, "{s}");
    assert!(in_file > 100, "only {in_file} frames fit");
    assert!(in_file < 20_000);
    assert_eq!(
        sent, in_file,
        "summary says {sent} sent, the file holds {in_file}"
    );
    let tx_errors: u64 = s["drops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d[0] == "tx_error")
        .map(|d| d[1].as_u64().unwrap())
        .sum();
    assert_eq!(sent + tx_errors, 20_000, "{s}");
    let _ = std::fs::remove_dir_all(&dir);
}
