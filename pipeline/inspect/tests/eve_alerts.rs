//! The EVE alert log end to end: lines checked by an independent JSON parser (Python's), a
//! writer that cannot write never blocks the data path, failed writes are counted, and a
//! reopen after a rename writes a new file.

use pktwarp_inspect::alert::{
    Alert, AlertAction, AlertLog, Classifications, EveConfig, RuleCatalog, Tuple, L4,
};
use pktwarp_inspect::rules::{load_dir, parse_rule, LoadOptions, Rule, Variables};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pw-eve-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch folder");
    d
}

fn small_catalog() -> Arc<RuleCatalog> {
    let rules: Vec<Rule> = [
        r#"alert tcp any any -> any 80 (msg:"ET TEST ünïcode \"q\" \\ tab"; content:"x"; classtype:web-application-attack; sid:1000001; rev:3; metadata:created_at 2019_01_01;)"#,
        r#"drop udp any any -> any 53 (msg:"dns"; content:"y"; classtype:bad-unknown; sid:1000002; rev:1;)"#,
        r#"alert icmp any any -> any any (msg:"icmp"; itype:8; sid:1000003; rev:1; priority:2;)"#,
    ]
    .iter()
    .map(|r| parse_rule(r, &Variables::default()).expect("test rule"))
    .collect();
    Arc::new(RuleCatalog::new(&rules, &Classifications::standard()))
}

/// An alert of every shape: v4/v6, TCP/UDP/ICMP/other, tagged or not, payload or not.
fn alert(i: u32, rules: u32) -> Alert {
    let v6 = i % 2 == 1;
    let (src, dst) = if v6 {
        (
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, i as u16)),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        )
    } else {
        (
            IpAddr::V4(Ipv4Addr::new(10, 0, (i >> 8) as u8, i as u8)),
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
        )
    };
    let (proto, l4) = match i % 4 {
        0 => (
            6,
            L4::Ports {
                src: 40000,
                dst: 80,
            },
        ),
        1 => (17, L4::Ports { src: 5353, dst: 53 }),
        2 => (if v6 { 58 } else { 1 }, L4::Icmp { kind: 8, code: 0 }),
        _ => (47, L4::None),
    };
    Alert {
        ts_ns: 1_700_000_000_000_000_000 + u64::from(i) * 1_234_567,
        tuple: Tuple {
            src,
            dst,
            proto,
            l4,
            vlan: match i % 3 {
                0 => [None, None],
                1 => [Some(100), None],
                _ => [Some(100), Some(4094)],
            },
        },
        rule: i % rules,
        action: if i % 5 == 0 {
            AlertAction::Blocked
        } else {
            AlertAction::Allowed
        },
        payload: (i % 2 == 0).then(|| (0..=255u8).cycle().skip(i as usize).take(300).collect()),
    }
}

/// Runs `f` on a thread and fails the test if it has not returned within 10 s (a send that
/// blocked would otherwise hang the test).
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(v) => v,
        Err(_) => panic!("{what} did not return within 10 s: the data path blocked"),
    }
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let t = Instant::now();
    while !done() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The checker: Python's json module parses each line; the fields, their types and formats
/// are checked against the EVE alert field list (not against this crate's encoder).
const CHECK_PY: &str = r#"
import json, re, sys, base64
TS = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}[+-]\d{4}$')
TOP = {"timestamp","flow_id","event_type","vlan","src_ip","src_port","dest_ip","dest_port",
       "proto","ip_v","icmp_type","icmp_code","pkt_src","alert","payload","payload_printable"}
import ipaddress
ALERT = {"action","gid","signature_id","rev","signature","category","severity","metadata"}
n = 0
for raw in open(sys.argv[1], encoding="utf-8"):
    e = json.loads(raw)
    n += 1
    assert set(e) <= TOP, set(e) - TOP
    assert TS.match(e["timestamp"]), e["timestamp"]
    assert e["event_type"] == "alert"
    assert isinstance(e["flow_id"], int) and 0 <= e["flow_id"] < 2**53
    for k in ("src_ip", "dest_ip"):
        assert ipaddress.ip_address(e[k]).version == e["ip_v"], (k, e[k], e["ip_v"])
    assert e["pkt_src"] == "wire/pcap"
    assert e["proto"] in ("TCP", "UDP", "ICMP", "IPv6-ICMP", "GRE", "SCTP") or e["proto"].isdigit(), e["proto"]
    if e["proto"] in ("TCP", "UDP"):
        assert all(isinstance(e[k], int) and 0 <= e[k] < 65536 for k in ("src_port", "dest_port"))
    else:
        assert "src_port" not in e and "dest_port" not in e
    if e["proto"] in ("ICMP", "IPv6-ICMP"):
        assert e["ip_v"] == (6 if e["proto"] == "IPv6-ICMP" else 4)
        assert isinstance(e["icmp_type"], int) and isinstance(e["icmp_code"], int)
    if "vlan" in e:
        assert 1 <= len(e["vlan"]) <= 2 and all(0 <= v < 4096 for v in e["vlan"])
    a = e["alert"]
    assert set(a) <= ALERT, set(a) - ALERT
    assert a["action"] in ("allowed", "blocked")
    for k in ("gid", "signature_id", "rev", "severity"):
        assert isinstance(a[k], int) and a[k] >= 0, k
    assert isinstance(a["signature"], str)
    if "category" in a:
        assert isinstance(a["category"], str) and a["category"]
    if "metadata" in a:
        assert all(isinstance(v, list) for v in a["metadata"].values())
    if "payload" in e:
        p = base64.b64decode(e["payload"], validate=True)
        pp = e["payload_printable"]
        assert len(pp) == len(p)
        assert all(c == chr(b) if (32 <= b < 127 or b in (10, 13)) else c == "." for c, b in zip(pp, p))
print(n)
"#;

fn python_check(path: &Path) -> usize {
    let out = Command::new("python3")
        .arg("-c")
        .arg(CHECK_PY)
        .arg(path)
        .output()
        .expect("python3 runs (scripts/install-deps.sh installs it)");
    assert!(
        out.status.success(),
        "python check failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
fn every_line_is_eve_json_checked_by_python() {
    let dir = scratch("python");
    let path = dir.join("eve.json");
    let mut cfg = EveConfig::new(&path);
    cfg.payload = true;
    cfg.payload_max = 64;
    cfg.queue = 4096;
    let cat = small_catalog();
    let n_rules = cat.len() as u32;
    let log = AlertLog::start(&cfg, cat).unwrap();
    let tx = log.sender();
    for i in 0..1000 {
        assert!(tx.send(alert(i, n_rules)), "queue of 4096 took alert {i}");
    }
    let c = log.shutdown();
    assert_eq!(
        (c.written, c.dropped, c.write_errors, c.lost),
        (1000, 0, 0, 0)
    );
    assert_eq!(python_check(&path), 1000);
    // payload_max cut every payload to 64 bytes (base64 of 64 bytes: 88 characters).
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(r#""payload":""#));
    assert!(text
        .lines()
        .filter_map(|l| l.split(r#""payload":""#).nth(1))
        .all(|p| p.find('"') == Some(88)));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn etopen_messages_encode_as_valid_eve() {
    let Some(dir) = flow_rules::input::require_corpus("ids/etopen-2019") else {
        return;
    };
    let rep = load_dir(&dir, &LoadOptions::default()).expect("lenient load");
    let rules: Vec<&Rule> = rep
        .loaded
        .iter()
        .map(|l| &l.rule)
        .chain(rep.skipped.iter().filter_map(|s| s.rule.as_ref()))
        .collect();
    let cat = RuleCatalog::new(rules.iter().copied(), &Classifications::standard());
    // Every classtype of the corpus is in the table but `Bitcoin-event` (4 rules; in no
    // standard table: their lines have no category).
    let unknown: Vec<u32> = cat.unknown_classtypes.iter().map(|u| u.0).collect();
    assert_eq!(unknown, [2017960, 2018014, 2019825, 2022886]);
    assert!(cat
        .unknown_classtypes
        .iter()
        .all(|u| u.1 == "Bitcoin-event"));
    let n_rules = cat.len() as u32;
    assert!(n_rules > 10_000);
    let scratch = scratch("etopen");
    let path = scratch.join("eve.json");
    let mut cfg = EveConfig::new(&path);
    cfg.queue = 1 << 15;
    let log = AlertLog::start(&cfg, Arc::new(cat)).unwrap();
    let tx = log.sender();
    let mut sent = 0;
    for r in 0..n_rules {
        let mut a = alert(r, n_rules);
        a.rule = r;
        // The queue may fill while the writer works; those alerts are counted, not lost.
        while !tx.send(a.clone()) {
            std::thread::sleep(Duration::from_millis(1));
        }
        sent += 1;
    }
    let c = log.shutdown();
    assert_eq!(c.written, sent);
    assert_eq!(python_check(&path), sent as usize);
    let _ = std::fs::remove_dir_all(scratch);
}

#[test]
fn a_writer_that_cannot_write_never_blocks_the_data_path() {
    let dir = scratch("fifo");
    let fifo = dir.join("eve.fifo");
    let st = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(st.success());
    let mut cfg = EveConfig::new(&fifo);
    cfg.queue = 8;
    let log = AlertLog::start(&cfg, small_catalog()).unwrap();
    let tx = log.sender();
    // Nobody opened the FIFO for reading: the writer waits in open() and takes nothing.
    let t = Instant::now();
    let accepted = bounded("10,000 sends", move || {
        (0..10_000).filter(|&i| tx.send(alert(i, 3))).count()
    });
    let took = t.elapsed();
    assert!(took < Duration::from_secs(5), "sends took {took:?}");
    assert_eq!(accepted, 8);
    let c = log.counters();
    assert_eq!((c.dropped, c.written), (10_000 - 8, 0));
    // A reader comes: the queued alerts are written, then the log ends.
    let reader = std::thread::spawn(move || std::fs::read_to_string(&fifo).unwrap());
    let c = log.shutdown();
    let text = reader.join().unwrap();
    assert_eq!(text.lines().count(), 8);
    assert_eq!((c.written, c.dropped, c.lost), (8, 10_000 - 8, 0));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_reader_that_stops_reading_fills_the_queue_not_the_data_path() {
    let dir = scratch("fifo-stalled");
    let fifo = dir.join("eve.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut cfg = EveConfig::new(&fifo);
    cfg.queue = 64;
    cfg.payload = true;
    let log = AlertLog::start(&cfg, small_catalog()).unwrap();
    let tx = log.sender();
    // Open for reading and do not read: the pipe (64 KiB) fills, the writer blocks in write.
    let f = std::fs::File::open(&fifo).unwrap();
    let sent = bounded("sends until 1000 drops", move || {
        let (mut sent, mut dropped) = (0u64, 0u64);
        while dropped < 1000 {
            if !tx.send(alert(sent as u32 * 2, 3)) {
                dropped += 1;
            }
            sent += 1;
        }
        sent
    });
    let c = log.counters();
    assert!(c.dropped >= 1000, "{c:?}");
    assert!(c.written < sent, "{c:?}");
    // Read now: everything that was queued gets out.
    let reader = std::thread::spawn(move || std::io::read_to_string(f).unwrap());
    let c = log.shutdown();
    let text = reader.join().unwrap();
    assert_eq!(c.written + c.dropped + c.lost, sent, "{c:?}");
    assert_eq!(text.lines().count() as u64, c.written);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn dev_full_counts_write_errors_and_keeps_going() {
    let cfg = EveConfig::new("/dev/full");
    let log = AlertLog::start(&cfg, small_catalog()).unwrap();
    let tx = log.sender();
    for i in 0..5 {
        assert!(tx.send(alert(i, 3)));
    }
    wait_for("5 lines lost", || log.counters().lost == 5);
    assert!(log.counters().write_errors >= 1);
    for i in 0..5 {
        assert!(tx.send(alert(i, 3)));
    }
    let c = log.shutdown();
    assert_eq!((c.written, c.lost, c.dropped), (0, 10, 0));
    assert!(c.write_errors >= 2, "{c:?}");
}

#[test]
fn reopen_after_rename_writes_a_new_file() {
    let dir = scratch("rotate");
    let path = dir.join("eve.json");
    let rotated = dir.join("eve.json.1");
    let log = AlertLog::start(&EveConfig::new(&path), small_catalog()).unwrap();
    let tx = log.sender();
    for i in 0..3 {
        assert!(tx.send(alert(i, 3)));
    }
    wait_for("3 lines written", || log.counters().written == 3);
    std::fs::rename(&path, &rotated).unwrap();
    log.reopen();
    for i in 3..5 {
        assert!(tx.send(alert(i, 3)));
    }
    let c = log.shutdown();
    assert_eq!((c.written, c.reopens), (5, 1));
    let old = std::fs::read_to_string(&rotated).unwrap();
    let new = std::fs::read_to_string(&path).unwrap();
    assert_eq!((old.lines().count(), new.lines().count()), (3, 2));
    // Appends: a second log on the same file keeps what is there.
    let log = AlertLog::start(&EveConfig::new(&path), small_catalog()).unwrap();
    assert!(log.sender().send(alert(9, 3)));
    assert_eq!(log.shutdown().written, 1);
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 3);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_config_is_refused_before_start() {
    let dir = scratch("badcfg");
    let mut cfg = EveConfig::new(&dir);
    let e = AlertLog::start(&cfg, small_catalog()).unwrap_err();
    assert_eq!(e.key, "path");
    cfg.path = dir.join("eve.json");
    cfg.queue = 0;
    let e = AlertLog::start(&cfg, small_catalog()).unwrap_err();
    assert_eq!(e.to_string(), "eve.queue: 0: must be 1 to 1048576 alerts");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn without_payload_config_no_payload_is_kept() {
    let dir = scratch("nopayload");
    let path = dir.join("eve.json");
    let log = AlertLog::start(&EveConfig::new(&path), small_catalog()).unwrap();
    let tx = log.sender();
    assert_eq!(tx.wants_payload(), None);
    assert!(tx.send(alert(0, 3)));
    log.shutdown();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("payload"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_log_that_cannot_be_opened_counts_and_recovers() {
    let dir = scratch("reopen-fail");
    let logs = dir.join("logs");
    std::fs::create_dir(&logs).unwrap();
    let path = logs.join("eve.json");
    let log = AlertLog::start(&EveConfig::new(&path), small_catalog()).unwrap();
    let handle = log.handle();
    let tx = log.sender();
    assert!(tx.send(alert(0, 3)));
    wait_for("1 line written", || handle.counters().written == 1);
    // The folder goes away and a reopen is asked for: the open fails, lines are lost.
    std::fs::rename(&logs, dir.join("logs.old")).unwrap();
    handle.reopen();
    assert!(tx.send(alert(1, 3)));
    wait_for("1 line lost", || handle.counters().lost == 1);
    assert!(handle.counters().write_errors >= 1);
    // The folder is back: the writer opens the file again by itself (at most 1 s later).
    std::fs::create_dir(&logs).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    assert!(tx.send(alert(2, 3)));
    let c = log.shutdown();
    assert_eq!((c.written, c.lost, c.reopens), (2, 1, 1), "{c:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_alert_for_an_unknown_rule_is_counted_lost_not_a_panic() {
    let dir = scratch("unknown-rule");
    let path = dir.join("eve.json");
    let log = AlertLog::start(&EveConfig::new(&path), small_catalog()).unwrap();
    let tx = log.sender();
    let mut a = alert(0, 3);
    a.rule = 3;
    assert!(tx.send(a.clone()));
    a.rule = u32::MAX;
    assert!(tx.send(a));
    assert!(tx.send(alert(1, 3)));
    let c = log.shutdown();
    assert_eq!((c.written, c.lost, c.write_errors), (1, 2, 0));
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
    let _ = std::fs::remove_dir_all(dir);
}
