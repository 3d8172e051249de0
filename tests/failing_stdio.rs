//! `pktwarp` with a stderr or stdout that fails: a log pipe whose reader exited, a full disk
//! (`/dev/full`), a closed pipe. A failed log write is dropped and counted
//! (`pktwarp_log_write_errors_total`, the summary's `log_write_errors`) and signals keep
//! working; a failed stdout is a one-line error on stderr and exit 1, never a panic (101).

mod common;

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{put, scrape, scratch, sum, tx_config};

const RULES: &str = "rules:
  - { proto: tcp, dst_port: 1-100, action: drop }
  - { proto: udp, action: drop }
";

/// A generator at 20 kpps forever, a CPU executor, `metrics` as given.
fn daemon_config(dir: &Path, metrics: &str) -> PathBuf {
    put(&dir.join("rules.yaml"), RULES);
    let p = dir.join("cfg.yaml");
    std::fs::write(
        &p,
        format!(
            "ports:
  - name: wire
    gen: {{ size: 64, rate: {{ pps: 20000 }} }}
queues: {{ count: 2 }}
pipeline: [parse, {{ acl: {{ rules: rules.yaml }} }}, count]
executor: {{ kind: cpu }}
metrics: {metrics}
control: {{ drain_timeout_ms: 3000 }}
"
        ),
    )
    .unwrap();
    p
}

fn dev_full() -> Stdio {
    Stdio::from(File::create("/dev/full").expect("/dev/full"))
}

/// The write end of a pipe whose read end is already closed: every write fails with EPIPE
/// (Rust programs ignore SIGPIPE), from the first byte on.
fn closed_pipe() -> Stdio {
    let mut fds = [0i32; 2];
    // Close-on-exec: a child that another test thread spawns meanwhile must not inherit the
    // read end, or the pipe stays open and the writes this test expects to fail succeed.
    // SAFETY: pipe2(2) fills the two-element array it is given.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just created by pipe(2) and are owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

fn pktwarp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pktwarp"))
}

/// Whether process `pid` has a thread named `name` (what `ps -L` shows).
fn has_thread(pid: u32, name: &str) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks
        .filter_map(Result::ok)
        .any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name))
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig}");
}

/// Waits `limit` at most for the exit (kills it past that): the status code (-N when killed by
/// signal N), the stdout, how long it took.
fn finish(mut child: Child, limit: Duration) -> (i32, String, Duration) {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let t = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut out = String::new();
            if let Some(mut o) = child.stdout.take() {
                let _ = o.read_to_string(&mut out);
            }
            let code = st.code().unwrap_or_else(|| -st.signal().unwrap_or(0));
            return (code, out, t.elapsed());
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("pktwarp did not exit within {limit:?} of the signal (hung)");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn summary_json(out: &str) -> serde_json::Value {
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("summary is not JSON ({e}): {out}"))
}

#[test]
fn the_log_reader_exiting_neither_panics_a_thread_nor_disables_signals() {
    let dir = scratch("stdio-logpipe");
    let cfg = daemon_config(&dir, "{ listen: '127.0.0.1:0' }");
    let mut child = pktwarp()
        .args(["--log-json", "run", "--quiet", "--json"])
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the log until the metrics address, then close the read end: every later log line
    // meets EPIPE, as when a log shipper on the other end of the pipe exits.
    let err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if v["fields"]["event"] == "metrics_listen" {
                return v["fields"]["addr"].as_str().map(str::to_string);
            }
        }
        None
    });
    let addr = reader.join().unwrap().expect("no metrics_listen log line");
    let pid = child.id();
    wait_for("the signal thread", Duration::from_secs(10), || {
        has_thread(pid, "pktwarp-signals")
    });
    // SIGHUP: the signal thread and the control thread both log (the reload).
    signal(&child, "-HUP");
    let mut reloaded = 0.0;
    let t = Instant::now();
    while reloaded < 1.0 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
        reloaded = sum(
            &scrape(&addr),
            "pktwarp_rule_reloads_total",
            "result=\"success\"",
        );
    }
    let body = scrape(&addr);
    signal(&child, "-TERM");
    let (code, out, took) = finish(child, Duration::from_secs(10));
    assert_eq!(
        code, 0,
        "SIGTERM after the log pipe closed: exit {code}; {out}"
    );
    assert!(took < Duration::from_secs(3 + 2), "SIGTERM took {took:?}");
    assert_eq!(reloaded, 1.0, "the SIGHUP reload never happened");
    let lost = sum(&body, "pktwarp_log_write_errors_total", "");
    assert!(lost >= 2.0, "log write errors not counted: {lost}\n{body}");
    let s = summary_json(&out);
    assert!(
        s["log_write_errors"].as_u64().unwrap() as f64 > lost,
        "the summary's log_write_errors: {s}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_log_disk_from_the_start_still_runs_and_stops_on_sigint() {
    let dir = scratch("stdio-logfull");
    let cfg = daemon_config(&dir, "{ enabled: false }");
    let mut child = pktwarp()
        .args(["run", "--quiet", "--json"])
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(dev_full())
        .spawn()
        .unwrap();
    let pid = child.id();
    // The control thread starts after the first log lines ("starting") failed.
    wait_for("the control thread", Duration::from_secs(20), || {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("pktwarp ended before its control plane ran: {st}");
        }
        has_thread(pid, "pktwarp-control") && has_thread(pid, "pktwarp-signals")
    });
    signal(&child, "-HUP");
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, "-INT");
    let (code, out, took) = finish(child, Duration::from_secs(10));
    assert_eq!(code, 0, "stderr on /dev/full: exit {code}; {out}");
    assert!(took < Duration::from_secs(3 + 2), "SIGINT took {took:?}");
    let s = summary_json(&out);
    // At least: starting, signal (SIGHUP), reload, signal-driven shutdown, drained.
    assert!(s["log_write_errors"].as_u64().unwrap() >= 4, "{s}");
    assert!(s["rx_frames"].as_u64().unwrap() > 0, "{s}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `pktwarp ARGS` with stdout `out`: its output with the stderr.
fn with_stdout(args: &[&str], out: Stdio) -> Output {
    pktwarp()
        .args(args)
        .stdout(out)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// Exit 1 with one clear line on stderr, not a panic.
fn assert_stdout_error(what: &str, out: &Output, why: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert!(
        err.contains("pktwarp: error: writing")
            && err.contains("to stdout failed")
            && err.contains(why),
        "{what}: {err}"
    );
}

const FULL: &str = "No space left on device";
const EPIPE: &str = "Broken pipe";

/// Frames in a pcap file written by the pcap TX port.
fn frames_in(path: &Path) -> u64 {
    let mut r = pipeline::internal::port::pcap::CaptureReader::open(path).unwrap();
    let mut n = 0;
    while r.next_frame().expect("whole records").is_some() {
        n += 1;
    }
    n
}

#[test]
fn run_with_a_failing_stdout_says_so_and_keeps_its_output_file_whole() {
    let dir = scratch("stdio-run");
    let pcap = dir.join("out.pcap");
    let cfg = tx_config(&dir, &pcap, 3000);
    let cfg = cfg.to_str().unwrap();
    for (stdout, why, json) in [
        (dev_full(), FULL, false),
        (dev_full(), FULL, true),
        (closed_pipe(), EPIPE, false),
        (closed_pipe(), EPIPE, true),
    ] {
        let _ = std::fs::remove_file(&pcap);
        let mut args = vec!["run", "--quiet"];
        if json {
            args.push("--json");
        }
        args.push(cfg);
        let out = with_stdout(&args, stdout);
        assert_stdout_error(&format!("run (json {json})"), &out, why);
        assert!(String::from_utf8_lossy(&out.stderr).contains("summary"));
        assert_eq!(frames_in(&pcap), 3000, "the data path lost frames");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn validate_kernels_acl_gen_and_bench_with_a_failing_stdout_exit_1_not_101() {
    let dir = scratch("stdio-cmds");
    let cfg = tx_config(&dir, &dir.join("out.pcap"), 10);
    let cfg = cfg.to_str().unwrap();
    let gen_out = dir.join("acl");
    let gen_out = gen_out.to_str().unwrap();
    let commands: [&[&str]; 3] = [
        &["validate", cfg],
        &["kernels", cfg],
        &["acl-gen", "--rules", "20", "--out", gen_out],
    ];
    for args in commands {
        for (stdout, why) in [(dev_full(), FULL), (closed_pipe(), EPIPE)] {
            let out = with_stdout(args, stdout);
            assert_stdout_error(args[0], &out, why);
        }
        // With a working stdout the same command succeeds: the failure above was stdout's.
        let ok = with_stdout(args, Stdio::piped());
        assert_eq!(ok.status.code(), Some(0), "{}: {ok:?}", args[0]);
    }
    assert!(Path::new(gen_out).join("ipv6_acl_20_trace").is_file());
    // `bench` writes its first line (the machine) before any measurement: a failing stdout
    // ends it there, on a machine with or without a GPU.
    let bench_out = dir.join("bench");
    let bench = ["bench", "--out", bench_out.to_str().unwrap()];
    for (stdout, why) in [(dev_full(), FULL), (closed_pipe(), EPIPE)] {
        let out = with_stdout(&bench, stdout);
        assert_stdout_error("bench", &out, why);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("the bench table"),
            "{out:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
