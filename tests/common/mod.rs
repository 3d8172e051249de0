//! Helpers of the integration tests that run the `pktwarp` binary as a daemon: a scratch
//! folder, atomic file writes, the daemon with its JSON log lines collected, and HTTP GETs of
//! its /metrics with the sums of their samples.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long [`Daemon::wait_log`] waits for an event: a debug build on a loaded 2-core machine.
pub const LOG_WAIT: Duration = Duration::from_secs(30);

/// A fresh folder under the temp dir, unique per test process.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `pktwarp ARGS CONFIG`, run to its end.
pub fn pktwarp(args: &[&str], cfg: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pktwarp"))
        .args(args)
        .arg(cfg)
        .output()
        .expect("spawn pktwarp")
}

/// `pktwarp ARGS`, run to its end: exit code (-1 when killed), stdout, stderr.
pub fn pktwarp_out(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pktwarp"))
        .args(args)
        .output()
        .expect("run pktwarp");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Atomic replace, so a reload never reads a half-written file.
pub fn put(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A running `pktwarp` with its stderr (JSON log lines) collected; killed when dropped.
pub struct Daemon {
    pub child: Child,
    pub logs: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl Daemon {
    /// Spawns `cmd` with stdout and stderr piped; stderr lines are parsed as JSON (a line that
    /// is not JSON is kept as `{"raw": line}`).
    pub fn spawn(mut cmd: Command) -> Daemon {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pktwarp");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let err = child.stderr.take().unwrap();
        let l = Arc::clone(&logs);
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let v = serde_json::from_str(&line)
                    .unwrap_or_else(|_| serde_json::json!({ "raw": line }));
                l.lock().unwrap().push(v);
            }
        });
        Daemon { child, logs }
    }

    /// `pktwarp --log-json run --quiet --json CFG`.
    pub fn run(cfg: &Path) -> Daemon {
        let mut c = Command::new(env!("CARGO_BIN_EXE_pktwarp"));
        c.args(["--log-json", "run", "--quiet", "--json"]).arg(cfg);
        Daemon::spawn(c)
    }

    /// The first log event with `fields.event == event` matching `pred`, if any yet.
    pub fn find(
        &self,
        event: &str,
        pred: &impl Fn(&serde_json::Value) -> bool,
    ) -> Option<serde_json::Value> {
        self.logs
            .lock()
            .unwrap()
            .iter()
            .find(|v| v["fields"]["event"] == event && pred(v))
            .cloned()
    }

    /// Waits ([`LOG_WAIT`] at most) for a log event with `fields.event == event` matching
    /// `pred`; fails with the logs.
    pub fn wait_log(
        &self,
        event: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let t = Instant::now();
        loop {
            if let Some(v) = self.find(event, &pred) {
                return v;
            }
            assert!(
                t.elapsed() < LOG_WAIT,
                "no `{event}` log event; logs: {:#?}",
                self.logs.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The /metrics address the daemon logged (waits for it).
    pub fn metrics_addr(&self) -> String {
        let ev = self.wait_log("metrics_listen", |_| true);
        ev["fields"]["addr"].as_str().unwrap().to_string()
    }

    /// Sends `sig` (`-HUP`, `-TERM`, ...) with kill(1).
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    }

    /// Waits `limit` at most for the exit; returns the status code (-signal when killed by
    /// one), stdout, and how long it took.
    pub fn wait(mut self, limit: Duration) -> (i32, String, Duration) {
        use std::os::unix::process::ExitStatusExt;
        let t = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let mut out = String::new();
                let _ = self.child.stdout.take().unwrap().read_to_string(&mut out);
                let code = st.code().unwrap_or_else(|| -st.signal().unwrap_or(0));
                return (code, out, t.elapsed());
            }
            if t.elapsed() > limit {
                let _ = self.child.kill();
                panic!(
                    "pktwarp did not exit within {limit:?}; logs: {:#?}",
                    self.logs.lock().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 GET with `Connection: close`: (status line, body).
pub fn get(addr: &str, path: &str) -> std::io::Result<(String, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head.lines().next().unwrap_or("").to_string();
    Ok((status, body.to_string()))
}

/// The body of `GET /metrics`, which must answer 200.
pub fn scrape(addr: &str) -> String {
    let (status, body) = get(addr, "/metrics").expect("GET /metrics");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}\n{body}");
    body
}

/// Sum of every sample of `name` whose labels contain `labels`.
pub fn sum(text: &str, name: &str, labels: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name && rest.contains(labels)).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// `promtool check metrics` (scripts/install-deps.sh installs prometheus) accepts the
/// exposition: any lint or format problem fails.
pub fn promtool_check(exposition: &str) {
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (scripts/install-deps.sh installs prometheus)");
    p.stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = p.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A bounded gen -> pcap TX config writing to `out` (`pktwarp run` on it ends by itself), as
/// `DIR/cfg.yaml`.
pub fn tx_config(dir: &Path, out: &Path, count: u64) -> PathBuf {
    let p = dir.join("cfg.yaml");
    std::fs::write(
        &p,
        format!(
            "ports:
  - name: wire
    gen: {{ size: 64, count: {count} }}
  - name: out
    pcap: {{ tx: {{ path: '{}' }} }}
queues: {{ count: 2 }}
pipeline: [parse, count]
executor: {{ kind: cpu }}
output: {{ port: out }}
metrics: {{ enabled: false }}
",
            out.display()
        ),
    )
    .unwrap();
    p
}
