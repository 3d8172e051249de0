//! The shipped IDS (configs/ids.yaml: parse -> conntrack -> inspect -> count) on the CPU
//! executor. Its input capture is made here (HTTP requests clean and not, a NOP sled, DNS queries, ICMP
//! echoes, a request inside VXLAN, ARP) and the shipped capture must be these bytes
//! (`PKTWARP_REGENERATE=1 cargo test -p pipeline --test ids_config the_shipped_capture`
//! rewrites it). Checks: each rule alerts on exactly its frames (EVE lines read with
//! serde_json), the drop rule drops, the pass rule silences, alerted frames reach the host
//! capture, and the run accounts for every frame. With the shared corpus, the same config runs
//! the ET Open set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pipeline::config;
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::port::pcap::{CaptureReader, CaptureWriter, WriteFormat};

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

const MAC: [u8; 12] = [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];

/// Ethernet / IPv4 (`proto`) from `src` to `dst` around `l4`.
fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
    let mut f = MAC.to_vec();
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
    f.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(l4);
    while f.len() < 60 {
        f.push(0);
    }
    f
}

fn tcp(src: ([u8; 4], u16), dst: ([u8; 4], u16), payload: &[u8]) -> Vec<u8> {
    let mut l4 = src.1.to_be_bytes().to_vec();
    l4.extend_from_slice(&dst.1.to_be_bytes());
    l4.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x18, 0xfa, 0, 0, 0, 0, 0]);
    l4.extend_from_slice(payload);
    ipv4(6, src.0, dst.0, &l4)
}

fn udp(src: ([u8; 4], u16), dst: ([u8; 4], u16), payload: &[u8]) -> Vec<u8> {
    let mut l4 = src.1.to_be_bytes().to_vec();
    l4.extend_from_slice(&dst.1.to_be_bytes());
    l4.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    l4.extend_from_slice(&[0, 0]);
    l4.extend_from_slice(payload);
    ipv4(17, src.0, dst.0, &l4)
}

fn echo(src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut l4 = vec![8, 0, 0, 0, 0, 7, 0, 1];
    l4.extend_from_slice(payload);
    ipv4(1, src, dst, &l4)
}

fn http_get(uri: &str, agent: &str, extra: &str) -> Vec<u8> {
    format!("GET {uri} HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: {agent}\r\n{extra}Accept: */*\r\n\r\n")
        .into_bytes()
}

fn dns_query(id: u16, name: &[&str]) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);
    for l in name {
        q.push(l.len() as u8);
        q.extend_from_slice(l.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// One frame and the sid it alerts on (0: none), whether it is dropped, whether it goes to the
/// host (alerted, not dropped).
struct F {
    bytes: Vec<u8>,
    sid: u32,
    drop: bool,
}

fn f(bytes: Vec<u8>, sid: u32, drop: bool) -> F {
    F { bytes, sid, drop }
}

fn traffic() -> Vec<F> {
    let (inside, web) = ([10, 0, 0, 20], [93, 184, 216, 34]);
    let outside = [198, 51, 100, 7];
    let mut out = Vec::new();
    for i in 0..40u16 {
        let p = http_get(&format!("/page/{i}.html"), "Mozilla/5.0", "");
        out.push(f(tcp((inside, 40000 + i), (web, 80), &p), 0, false));
    }
    for i in 0..5u16 {
        let p = http_get("/search?q=1", "sqlmap/1.4.7#stable (http://sqlmap.org)", "");
        out.push(f(tcp((inside, 41000 + i), (web, 80), &p), 9900001, false));
    }
    for i in 0..4u16 {
        let p = http_get("/cgi-bin/view?f=../../../../etc/passwd", "curl/8.0", "");
        out.push(f(
            tcp((outside, 42000 + i), ([10, 0, 0, 80], 80), &p),
            9900002,
            false,
        ));
    }
    for i in 0..3u16 {
        let mut p = vec![0x90u8; 64];
        p.extend_from_slice(&[0x31, 0xc0, 0x50, 0x68]);
        out.push(f(
            tcp((outside, 43000 + i), ([10, 0, 0, 9], 445), &p),
            9900003,
            true,
        ));
    }
    for i in 0..10u16 {
        let q = dns_query(i, &["www", "example", "com"]);
        out.push(f(
            udp((inside, 50000 + i), ([8, 8, 8, 8], 53), &q),
            0,
            false,
        ));
    }
    for i in 0..6u16 {
        let q = dns_query(100 + i, &["c2-test", "example"]);
        out.push(f(
            udp((inside, 51000 + i), ([8, 8, 8, 8], 53), &q),
            9900004,
            false,
        ));
    }
    out.push(f(
        echo(outside, inside, b"pktwarp-marker 0001"),
        9900005,
        false,
    ));
    out.push(f(
        echo(outside, inside, b"pktwarp-marker 0002"),
        9900005,
        false,
    ));
    out.push(f(echo(outside, inside, b"abcdefghijklmnop"), 0, false));
    // The sanctioned scanner: sqlmap, but with its token: the pass rule wins.
    for i in 0..2u16 {
        let p = http_get("/", "sqlmap/1.4.7", "X-Scan-Token: 4f2a\r\n");
        out.push(f(tcp((inside, 44000 + i), (web, 80), &p), 0, false));
    }
    // A sqlmap request inside VXLAN: the inner packet is inspected.
    let inner = tcp(
        (inside, 45000),
        (web, 80),
        &http_get("/", "sqlmap/1.4.7", ""),
    );
    let mut vx = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
    vx.extend_from_slice(&inner);
    out.push(f(
        udp(([172, 31, 0, 1], 5000), ([172, 31, 0, 2], 4789), &vx),
        9900001,
        false,
    ));
    // ARP: not IP, not inspected.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&MAC[6..]);
    arp.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    arp.resize(60, 0);
    out.push(f(arp, 0, false));
    out
}

fn time_ns(i: usize) -> u64 {
    1_700_000_000_000_000_000 + i as u64 * 10_000
}

fn write_capture(path: &Path, frames: &[F]) {
    let mut w = CaptureWriter::create(path, WriteFormat::Pcap, 65535).expect("capture");
    for (i, x) in frames.iter().enumerate() {
        w.write_frame(&x.bytes, x.bytes.len() as u32, time_ns(i))
            .expect("write");
    }
    w.flush().expect("flush");
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-ids-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("rules")).unwrap();
    d
}

/// The shipped config, rules and capture in a folder of their own, its /tmp outputs moved
/// there, the metrics endpoint off (tests run in parallel).
fn shipped_copy(name: &str) -> PathBuf {
    let d = tmpdir(name);
    let c = root().join("configs");
    for p in ["ids.pcap", "rules/ids.rules"] {
        std::fs::copy(c.join(p), d.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    }
    let text = std::fs::read_to_string(c.join("ids.yaml"))
        .unwrap()
        .replace("/tmp/pktwarp-ids-", &format!("{}/", d.display()));
    std::fs::write(d.join("c.yaml"), text + "metrics: { enabled: false }\n").unwrap();
    d.join("c.yaml")
}

#[test]
fn the_shipped_capture_is_the_generated_traffic() {
    let frames = traffic();
    let shipped = root().join("configs/ids.pcap");
    if std::env::var_os("PKTWARP_REGENERATE").is_some() {
        write_capture(&shipped, &frames);
    }
    let d = tmpdir("gen");
    write_capture(&d.join("x.pcap"), &frames);
    let want = std::fs::read(d.join("x.pcap")).unwrap();
    let have = std::fs::read(&shipped).expect("configs/ids.pcap");
    assert!(
        want == have,
        "configs/ids.pcap is not this test's traffic: run it with PKTWARP_REGENERATE=1"
    );
}

fn run(cfg_path: &Path) -> daemon::Summary {
    let cfg = config::load(cfg_path).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(p.choice.name, "cpu");
    let ports = daemon::open_ports(&p.cfg).unwrap_or_else(|e| panic!("{e}"));
    let shared = CpuShared::new(&p.cpu_spec());
    daemon::run_cpu(&p, &shared, ports)
}

/// The EVE log's lines, each parsed: sid -> lines.
fn eve_sids(path: &Path) -> BTreeMap<u64, u64> {
    let text = std::fs::read_to_string(path).expect("the EVE log");
    let mut m = BTreeMap::new();
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert_eq!(v["event_type"], "alert", "{l}");
        *m.entry(v["alert"]["signature_id"].as_u64().expect("sid"))
            .or_insert(0) += 1;
    }
    m
}

fn frames_in(path: &Path) -> u64 {
    let mut r = CaptureReader::open(path).expect("capture");
    let mut n = 0;
    while r.next_frame().expect("frame").is_some() {
        n += 1;
    }
    n
}

#[test]
fn the_shipped_config_alerts_drops_and_accounts_for_every_frame() {
    let frames = traffic();
    let cfg = shipped_copy("run");
    let dir = cfg.parent().unwrap().to_path_buf();
    let s = run(&cfg);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.rx_frames, frames.len() as u64);
    let counted: u64 = s.counted.iter().map(|c| c.1).sum();
    let dropped: u64 = s.drops.iter().map(|d| d.1).sum();
    assert_eq!(counted + dropped, s.rx_frames, "received = counted + drops");
    let want_drops = frames.iter().filter(|x| x.drop).count() as u64;
    for (reason, n) in &s.drops {
        let want = if reason == "inspect_drop" {
            want_drops
        } else {
            0
        };
        assert_eq!(*n, want, "drops `{reason}`");
    }
    let mut want: BTreeMap<u64, u64> = BTreeMap::new();
    for x in frames.iter().filter(|x| x.sid != 0) {
        *want.entry(u64::from(x.sid)).or_insert(0) += 1;
    }
    assert_eq!(eve_sids(&dir.join("eve.json")), want);
    let alerted_on = frames.iter().filter(|x| x.sid != 0 && !x.drop).count() as u64;
    assert_eq!(frames_in(&dir.join("alerted.pcap")), alerted_on);
    let st = s
        .custom_stages
        .iter()
        .find(|c| c.name == "inspect")
        .expect("the inspect stage in the summary");
    let get = |n: &str| st.counters.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
    assert_eq!(get("inspected"), Some(frames.len() as u64 - 1));
    assert_eq!(get("alerts"), Some(want.values().sum()));
    assert_eq!(get("drops"), Some(want_drops));
    assert_eq!(get("passes"), Some(2));
    assert_eq!(get("eve_dropped"), Some(0));
    let sec = st.section.as_ref().expect("its section");
    assert_eq!(sec["rules"]["loaded"], 6);
    assert_eq!(sec["flow_table"], true);
    assert_eq!(sec["rules"]["skipped"], 0);
    assert_eq!(sec["top_rules"][0]["sid"], 9900001);
    assert_eq!(sec["top_rules"][0]["hits"], 6);
}

/// The same config over the ET Open 2019 set (the shared corpus): it loads leniently, skips by
/// reason, runs, and accounts for every frame; every EVE line is JSON.
#[test]
fn the_config_runs_the_et_open_set() {
    let Some(et) = flow_rules::input::require_corpus("ids/etopen-2019") else {
        return;
    };
    let cfg = shipped_copy("etopen");
    let dir = cfg.parent().unwrap().to_path_buf();
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "rules: [rules/ids.rules]",
        &format!("rules: [\"{}/*.rules\"]\n      strict: false", et.display()),
    );
    std::fs::write(&cfg, text).unwrap();
    let s = run(&cfg);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    let counted: u64 = s.counted.iter().map(|c| c.1).sum();
    let dropped: u64 = s.drops.iter().map(|d| d.1).sum();
    assert_eq!(counted + dropped, s.rx_frames);
    let st = s
        .custom_stages
        .iter()
        .find(|c| c.name == "inspect")
        .unwrap();
    let sec = st.section.as_ref().unwrap();
    let loaded = sec["rules"]["loaded"].as_u64().unwrap();
    let skipped = sec["rules"]["skipped"].as_u64().unwrap();
    assert_eq!(
        loaded + skipped,
        10_350,
        "every rule of the set loaded or skipped"
    );
    // With `conntrack` before `inspect` the flow keywords load (docs/inspect.md).
    assert_eq!(sec["flow_table"], true);
    assert_eq!(loaded, 9_420, "{sec}");
    // A pcre without a DFA form is skipped with its reason (docs/inspect-pcre.md).
    assert_eq!(
        sec["rules"]["skipped_by_reason"]["pcre: back-reference"],
        154
    );
    let _ = eve_sids(&dir.join("eve.json"));
}

/// `pktwarp validate`-style errors: a missing rule file names the key; bad vars are refused
/// when the config is read, by line and key.
#[test]
fn bad_rule_paths_and_vars_are_clear_errors() {
    let cfg = shipped_copy("bad");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace("rules/ids.rules", "rules/missing.rules")).unwrap();
    let c = config::load(&cfg).unwrap_or_else(|e| panic!("{e}"));
    let e = format!("{:#}", daemon::prepare(c).err().expect("missing rules"));
    assert!(
        e.contains("pipeline[2]") && e.contains("rules[0]") && e.contains("missing.rules"),
        "{e}"
    );
    std::fs::write(&cfg, text.replace("[10.0.0.0/8,", "[10.0.0.0/40,")).unwrap();
    let e = config::load(&cfg).expect_err("bad vars").to_string();
    assert!(e.contains("pipeline[2].inspect.vars.HOME_NET"), "{e}");
    assert!(e.contains("c.yaml:"), "{e}");
}

/// `executor: auto` runs the IDS on the CPU and says why (the GPU stage's caution); the GPU
/// stage takes every rule, the bundled HTTP rules and a rule with flowbits too (it loads:
/// conntrack runs first), with per-queue state tables for the stage.
#[test]
fn auto_picks_the_cpu_and_the_gpu_takes_every_rule() {
    let cfg = shipped_copy("auto");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace("kind: cpu", "kind: auto")).unwrap();
    let p = daemon::prepare(config::load(&cfg).unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(p.choice.name, "cpu");
    assert!(
        p.choice.reason.contains("stage `inspect`"),
        "{}",
        p.choice.reason
    );
    // The bundled rules (HTTP ones among them) are the GPU stage's too.
    assert_eq!(p.pipeline.gpu_refusal(), None);
    let rules = cfg.with_file_name("rules").join("ids.rules");
    let mut r = std::fs::read_to_string(&rules).unwrap();
    r.push_str(
        "alert tcp any any -> any any (msg:\"state\"; content:\"x\"; flowbits:set,a; sid:9900099;)\n",
    );
    std::fs::write(&rules, r).unwrap();
    let p = daemon::prepare(config::load(&cfg).unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(p.pipeline.gpu_refusal(), None);
    let k = p
        .pipeline
        .stages
        .iter()
        .position(|s| s.name() == "inspect")
        .expect("inspect");
    assert_eq!(p.pipeline.stages[k].gpu_queue_state().len(), 1);
}
