//! The control plane seen from outside: spawns `pktwarp run` on a generator config, scrapes
//! /metrics over HTTP, reloads with SIGHUP (a bad rule file, then a good one), watches the rule
//! file, and stops with SIGTERM, checking the JSON logs, the metrics and the exit status.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RULES_A: &str = "rules:
  - { name: a-tcp-low, proto: tcp, dst_port: 1-511, action: drop }
  - { name: a-udp, proto: udp, action: mirror }
";
const RULES_B: &str = "rules:
  - { name: b-udp-high, proto: udp, dst_port: 512-1023, action: drop }
  - { name: b-tcp, proto: tcp, action: mirror }
  - { name: b-icmp, proto: icmp, action: drop }
";

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn put(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A running daemon with its stderr (JSON log lines) collected.
struct Daemon {
    child: Child,
    logs: Arc<Mutex<Vec<serde_json::Value>>>,
    metrics: String,
}

impl Daemon {
    fn start(cfg: &Path) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pktwarp"))
            .args(["--log-json", "run", "--quiet", "--json"])
            .arg(cfg)
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
        let mut d = Daemon {
            child,
            logs,
            metrics: String::new(),
        };
        let ev = d.wait_log("metrics_listen", |_| true);
        d.metrics = ev["fields"]["addr"].as_str().unwrap().to_string();
        d
    }

    /// Waits (10 s at most) for a log event with `fields.event == event` matching `pred`.
    fn wait_log(
        &self,
        event: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let t = Instant::now();
        loop {
            if let Some(v) = self
                .logs
                .lock()
                .unwrap()
                .iter()
                .find(|v| v["fields"]["event"] == event && pred(v))
            {
                return v.clone();
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "no `{event}` log event; logs: {:#?}",
                self.logs.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn scrape(&self) -> String {
        let mut s = TcpStream::connect(&self.metrics).expect("connect to /metrics");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.metrics
        )
        .unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        assert!(body.starts_with("HTTP/1.1 200"), "{body}");
        body
    }

    /// Sum of every sample of `name` whose labels contain `labels`.
    fn metric(&self, name: &str, labels: &str) -> f64 {
        sum(&self.scrape(), name, labels)
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    }

    /// Waits (15 s at most) for the exit; returns the status code and stdout.
    fn wait(mut self) -> (i32, String) {
        let t = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let mut out = String::new();
                self.child
                    .stdout
                    .take()
                    .unwrap()
                    .read_to_string(&mut out)
                    .unwrap();
                return (st.code().unwrap_or(-1), out);
            }
            if t.elapsed() > Duration::from_secs(15) {
                let _ = self.child.kill();
                panic!("pktwarp did not exit within 15 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sum(text: &str, name: &str, labels: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name && rest.contains(labels)).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn config(dir: &Path, gen: &str, control: &str) -> PathBuf {
    let p = dir.join("cfg.yaml");
    std::fs::write(
        &p,
        format!(
            "ports:
  - name: wire
    gen:
{gen}
      size: 64
      flows: {{ src: 10.0.0.0/8, dst: 192.168.0.0/16, dst_ports: 1-1023 }}
queues: {{ count: 2, burst: 32 }}
pipeline:
  - parse
  - acl: {{ rules: rules.yaml }}
  - count
executor: {{ kind: cpu }}
metrics: {{ listen: 127.0.0.1:0, rule_series_cap: 2 }}
{control}
"
        ),
    )
    .unwrap();
    p
}

#[test]
fn sighup_reload_bad_then_good_and_sigterm_drains() {
    let dir = scratch("daemon-hup");
    put(&dir.join("rules.yaml"), RULES_A);
    let cfg = config(&dir, "      rate: { pps: 20000 }", "");
    let d = Daemon::start(&cfg);
    wait_until("frames counted", || {
        d.metric("pktwarp_rx_frames_total", "") > 0.0
    });
    let m = d.scrape();
    assert_eq!(sum(&m, "pktwarp_ruleset_generation", ""), 0.0);
    assert_eq!(sum(&m, "pktwarp_ruleset_rules", ""), 2.0);
    assert_eq!(sum(&m, "pktwarp_executor_info", "executor=\"cpu\""), 1.0);
    assert!(sum(&m, "pktwarp_burst_latency_seconds_count", "queue=\"0\"") > 0.0);

    // A rule file with a bad port range on line 3: rejected, logged with file, line, reason.
    put(
        &dir.join("rules.yaml"),
        "rules:\n  - { proto: tcp, action: drop }\n  - { proto: tcp, dst_port: 900-80, action: drop }\n",
    );
    d.signal("-HUP");
    let ev = d.wait_log("reload", |v| v["fields"]["result"] == "failure");
    let f = &ev["fields"];
    assert_eq!(ev["level"], "ERROR");
    assert!(f["file"].as_str().unwrap().ends_with("rules.yaml"), "{ev}");
    assert_eq!(f["line"], 3, "{ev}");
    assert!(f["reason"].as_str().unwrap().contains("dst_port"), "{ev}");
    let m = d.scrape();
    assert_eq!(
        sum(&m, "pktwarp_rule_reloads_total", "result=\"failure\""),
        1.0
    );
    assert_eq!(
        sum(&m, "pktwarp_rule_reloads_total", "result=\"success\""),
        0.0
    );
    assert_eq!(sum(&m, "pktwarp_ruleset_generation", ""), 0.0);
    assert_eq!(
        sum(&m, "pktwarp_ruleset_rules", ""),
        2.0,
        "old rules still in force"
    );

    // The old rules keep classifying: hits still land on rule 0/1 (A's), not on "other".
    let hits_before = d.metric("pktwarp_acl_rule_hits_total", "rule=\"1\"");
    wait_until("old rules keep matching", || {
        d.metric("pktwarp_acl_rule_hits_total", "rule=\"1\"") > hits_before
    });

    put(&dir.join("rules.yaml"), RULES_B);
    d.signal("-HUP");
    d.wait_log("reload", |v| v["fields"]["result"] == "success");
    let m = d.scrape();
    assert_eq!(sum(&m, "pktwarp_ruleset_generation", ""), 1.0);
    assert_eq!(sum(&m, "pktwarp_ruleset_rules", ""), 3.0);
    assert_eq!(
        sum(&m, "pktwarp_rule_reloads_total", "result=\"success\""),
        1.0
    );
    // B has 3 rules and the series cap is 2: rule 2's hits go to "other".
    wait_until("rule past the cap counted as other", || {
        d.metric("pktwarp_acl_rule_hits_total", "rule=\"other\"") > 0.0
    });

    d.signal("-TERM");
    d.wait_log("shutdown", |v| v["fields"]["signal"] == "SIGTERM");
    let (code, out) = d.wait();
    assert_eq!(code, 0, "{out}");
    let s: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON summary");
    let rx = s["rx_frames"].as_u64().unwrap();
    assert!(rx > 0);
    // Drained: every received frame has a verdict or a counted drop.
    let mut accounted = 0;
    for q in s["queues"].as_array().unwrap() {
        accounted += q["passed"].as_u64().unwrap()
            + q["mirrored"].as_u64().unwrap()
            + q["to_host"].as_u64().unwrap();
        for d in q["drops"].as_array().unwrap() {
            accounted += d[1].as_u64().unwrap();
        }
    }
    assert_eq!(accounted, rx, "{s}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn linger_serves_final_totals_and_watch_reloads_on_change() {
    let dir = scratch("daemon-watch");
    put(&dir.join("rules.yaml"), RULES_A);
    let cfg = config(
        &dir,
        "      count: 3000\n      rate: { pps: 30000 }",
        "control: { linger: true, watch_rules: true, watch_interval_ms: 100 }",
    );
    let d = Daemon::start(&cfg);
    d.wait_log("linger", |_| true);
    // The input ended; the endpoint still serves the final totals.
    assert_eq!(d.metric("pktwarp_rx_frames_total", ""), 3000.0);
    // Changing the rule file is picked up without a signal.
    put(&dir.join("rules.yaml"), RULES_B);
    d.wait_log("reload", |v| {
        v["fields"]["result"] == "success" && v["fields"]["trigger"] == "rule_file_changed"
    });
    assert_eq!(d.metric("pktwarp_ruleset_generation", ""), 1.0);
    d.signal("-INT");
    let (code, out) = d.wait();
    assert_eq!(code, 0, "{out}");
    let s: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON summary");
    assert_eq!(s["rx_frames"], 3000);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_metrics_and_control_settings_are_config_errors() {
    let dir = scratch("daemon-cfg");
    put(&dir.join("rules.yaml"), RULES_A);
    for (section, key) in [
        ("metrics: { listen: 'localhost' }", "metrics.listen"),
        ("control: { on_stall: reboot }", "reboot"),
        (
            "control: { watch_interval_ms: 1 }",
            "control.watch_interval_ms",
        ),
    ] {
        let p = dir.join("cfg.yaml");
        std::fs::write(
            &p,
            format!(
                "ports: [{{ name: g, gen: {{ count: 1 }} }}]\npipeline: [parse, {{ acl: {{ rules: rules.yaml }} }}]\n{section}\n"
            ),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_pktwarp"))
            .arg("validate")
            .arg(&p)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{section}: accepted");
        assert!(
            err.contains("cfg.yaml") && err.contains(key),
            "{section}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
