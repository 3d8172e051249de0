//! `pktwarp run` on the shipped fronthaul config (fewer slots, metrics on, lingering after the
//! input ends): /metrics has the `pktwarp_fronthaul_*` families per eAxC with the run's final
//! counts, `promtool check metrics` accepts the exposition, and the JSON summary's `fronthaul`
//! block says the same.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn configs() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/configs"))
}

/// The shipped config with 4 slots, metrics on an ephemeral port and `control.linger`.
fn config(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(configs().join("fronthaul.yaml")).unwrap();
    let rules = configs().join("rules/fronthaul-gen.steering.yaml");
    let text = text.replace("slots: 2000 ", "slots: 4 ").replace(
        "rules/fronthaul-gen.steering.yaml",
        &rules.display().to_string(),
    );
    assert!(text.contains("slots: 4 "));
    let text = format!("{text}\nmetrics: {{ listen: 127.0.0.1:0 }}\ncontrol: {{ linger: true }}\n");
    let p = dir.join("fronthaul.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

struct Daemon {
    child: Child,
    logs: Arc<Mutex<Vec<serde_json::Value>>>,
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
        Daemon { child, logs }
    }

    /// Waits (30 s at most: a debug build on a loaded 2-core machine) for a log event.
    fn wait_log(&self, event: &str) -> serde_json::Value {
        let t = Instant::now();
        loop {
            if let Some(v) = self
                .logs
                .lock()
                .unwrap()
                .iter()
                .find(|v| v["fields"]["event"] == event)
            {
                return v.clone();
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "no `{event}` log event; logs: {:#?}",
                self.logs.lock().unwrap()
            );
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

fn scrape(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to /metrics");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    body.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap()
}

/// The value of the one sample of `name` whose labels contain every one of `labels`.
fn value(text: &str, name: &str, labels: &[&str]) -> f64 {
    let hits: Vec<f64> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, v) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name && labels.iter().all(|x| rest.contains(x))).then(|| v.parse().ok())?
        })
        .collect();
    assert_eq!(hits.len(), 1, "{name} {labels:?}:\n{text}");
    hits[0]
}

#[test]
fn metrics_per_eaxc_pass_promtool_and_match_the_summary() {
    let dir = std::env::temp_dir().join(format!("pktwarp-fh-metrics-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = Daemon::start(&config(&dir));
    let addr = d.wait_log("metrics_listen")["fields"]["addr"]
        .as_str()
        .unwrap()
        .to_string();
    d.wait_log("linger");
    let m = scrape(&addr);
    // 4 slots x 14 symbols x 6 packets of 273 PRBs in all, per eAxC.
    for e in ["0", "1"] {
        let eaxc = format!("eaxc=\"{e}\"");
        let eaxc = eaxc.as_str();
        assert_eq!(value(&m, "pktwarp_fronthaul_packets_total", &[eaxc]), 336.0);
        assert_eq!(value(&m, "pktwarp_fronthaul_prbs_total", &[eaxc]), 15288.0);
        let on_time = ["window=\"on_time\"", eaxc];
        assert_eq!(
            value(&m, "pktwarp_fronthaul_arrivals_total", &on_time),
            336.0
        );
        let late = ["window=\"late\"", eaxc];
        assert_eq!(value(&m, "pktwarp_fronthaul_arrivals_total", &late), 0.0);
        let gaps = ["kind=\"gap\"", eaxc];
        assert_eq!(value(&m, "pktwarp_fronthaul_seq_errors_total", &gaps), 0.0);
        let complete = ["result=\"complete\"", eaxc];
        assert_eq!(value(&m, "pktwarp_fronthaul_slots_total", &complete), 4.0);
    }
    let uplane = ["kind=\"uplane\"", "position=\"1\""];
    assert_eq!(value(&m, "pktwarp_fronthaul_frames_total", &uplane), 672.0);
    let rej = ["kind=\"rejected\""];
    assert_eq!(value(&m, "pktwarp_fronthaul_frames_total", &rej), 0.0);
    let partial = ["result=\"partial\""];
    assert_eq!(
        value(&m, "pktwarp_fronthaul_cell_slots_total", &partial),
        0.0
    );

    // promtool reads the exposition from stdin; any lint or format problem is a failure.
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (scripts/install-deps.sh installs prometheus)");
    p.stdin.take().unwrap().write_all(m.as_bytes()).unwrap();
    let out = p.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let ok = Command::new("kill")
        .args(["-INT", &d.child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let mut d = d;
    let t = Instant::now();
    let status = loop {
        if let Some(st) = d.child.try_wait().unwrap() {
            break st;
        }
        assert!(t.elapsed() < Duration::from_secs(15), "no exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    d.child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{out}");
    let s: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON summary");
    let f = &s["fronthaul"][0];
    assert_eq!(f["position"], 1);
    assert_eq!(f["prbs"], 2 * 15288);
    assert_eq!(
        (f["slots_complete"].as_u64(), f["slots_partial"].as_u64()),
        (Some(4), Some(0))
    );
    assert_eq!(f["per_eaxc"][1]["eaxc"], 1);
    assert_eq!(f["per_eaxc"][1]["on_time"], 336);
    assert_eq!(f["errors"], serde_json::json!([]));
    let _ = std::fs::remove_dir_all(&dir);
}
