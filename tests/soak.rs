//! Soak: `pktwarp run` on generated traffic (10K frames/s) for a few minutes
//! (`PKTWARP_SOAK_SECS`, default 150: sized for a 2-core CI machine) while SIGHUP storms
//! reload the rules (good and bad files alternating) and parallel clients scrape `/metrics`
//! and `/healthz`. It ends with:
//! - every frame accounted for: received == counted verdicts + drops, in the summary and in the
//!   last `/metrics` scrape, and both equal;
//! - every storm's reloads seen (generation == successful reloads, refusals counted);
//! - flat memory and threads: after a warm-up (the first quarter), RSS (VmRSS) grows by at most
//!   [`RSS_GROWTH_MIB`] MiB and the thread count by at most [`THREAD_GROWTH`]; a table leaked
//!   per reload (~1 MiB of compiled rules each, hundreds of reloads) or a thread per scrape
//!   would break both.
//!
//! A second, short run (24 s) does the same with `verify: { sample: 1000 }` and finds no
//! mismatch.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{get, put, Daemon};

/// Largest RSS growth (MiB) allowed from the end of the warm-up to the end of the run.
const RSS_GROWTH_MIB: u64 = 24;
/// Largest thread-count growth allowed from the end of the warm-up.
const THREAD_GROWTH: u64 = 2;
/// Rules per rule set: big enough that a leaked compiled table shows in RSS.
const RULES: u32 = 3000;

fn soak_secs() -> u64 {
    std::env::var("PKTWARP_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150)
}

/// One ClassBench rule set; `salt` moves the destination ports so A and B differ.
fn rule_set(salt: u32) -> String {
    let mut s = String::new();
    for i in 0..RULES {
        let lo = (i * 7 + salt) % 60_000;
        s.push_str(&format!(
            "@10.{}.{}.0/24\t192.168.0.0/16\t0 : 65535\t{lo} : {}\t0x{:02x}/0xFF\n",
            (i >> 8) & 255,
            i & 255,
            lo + 20,
            if i % 2 == 0 { 6 } else { 17 }
        ));
    }
    // A catch-all last, so every reload keeps the rule count equal.
    s.push_str("@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\n");
    s
}

impl Daemon {
    /// Waits `limit` at most for a log event; fails at once when the daemon exits first.
    fn wait_event(&mut self, event: &str, limit: Duration) -> serde_json::Value {
        let t = Instant::now();
        loop {
            if let Some(v) = self.find(event, &|_| true) {
                return v;
            }
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!("pktwarp exited ({st}) before `{event}`: {:#?}", self.logs);
            }
            assert!(t.elapsed() < limit, "no `{event}` within {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Sum of a metric's series whose labels contain `labels`.
fn sum(text: &str, name: &str, labels: &str) -> u64 {
    common::sum(text, name, labels) as u64
}

/// (VmRSS in KiB, threads) of a process, from /proc.
fn proc_status(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |k: &str| -> Option<u64> {
        let l = s.lines().find(|l| l.starts_with(k))?;
        l[k.len()..].split_whitespace().next()?.parse().ok()
    };
    Some((field("VmRSS:")?, field("Threads:")?))
}

/// Scrapes until `stop`: every answer 200, counters never going backwards.
fn scraper(addr: String, stop: Arc<AtomicBool>, scrapes: Arc<AtomicU64>) -> Result<(), String> {
    let mut last_rx = 0;
    while !stop.load(Ordering::Relaxed) {
        let (st, body) = get(&addr, "/metrics").map_err(|e| format!("scrape: {e}"))?;
        if !st.contains(" 200") {
            return Err(format!("/metrics answered {st}"));
        }
        let rx = sum(&body, "pktwarp_rx_frames_total", "");
        if rx < last_rx {
            return Err(format!("rx_frames_total went back from {last_rx} to {rx}"));
        }
        last_rx = rx;
        let (st, _) = get(&addr, "/healthz").map_err(|e| format!("healthz: {e}"))?;
        if !st.contains(" 200") {
            return Err(format!("/healthz answered {st}"));
        }
        scrapes.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// Frames accounted for in the summary: verdicts plus drops over every queue.
fn summary_accounted(s: &serde_json::Value) -> u64 {
    let mut n = 0;
    for q in s["queues"].as_array().expect("queues") {
        n += q["passed"].as_u64().unwrap()
            + q["mirrored"].as_u64().unwrap()
            + q["to_host"].as_u64().unwrap();
        for d in q["drops"].as_array().unwrap() {
            n += d[1].as_u64().unwrap();
        }
    }
    n
}

/// The soak's config in `dir`: a bounded generator (`count` frames at 10K/s) with linger: once
/// the input ends, /metrics serves the final totals, which the summary must then repeat.
fn soak_config(dir: &Path, count: u64, extra: &str) -> PathBuf {
    let cfg = dir.join("cfg.yaml");
    std::fs::write(
        &cfg,
        format!(
            "ports:
  - name: wire
    gen:
      count: {}
      rate: {{ pps: 10000 }}
      size: imix
      malformed_ratio: 0.01
      flows: {{ src: 10.0.0.0/16, dst: 192.168.0.0/16, dst_ports: 1-60000 }}
queues: {{ count: 2, burst: 32, ring_slots: 64, on_full: drop }}
pipeline: [parse, {{ acl: {{ rules: rules.cb, format: classbench }} }}, count]
executor: {{ kind: cpu }}
metrics: {{ listen: '127.0.0.1:0', max_connections: 16 }}
control: {{ linger: true }}
{extra}",
            count
        ),
    )
    .unwrap();
    cfg
}

/// Reload storms until the input ends: five SIGHUPs 2 ms apart (they coalesce), then a pause;
/// the file alternates A, B, and every fourth storm a broken file (refused). Samples the
/// daemon's (time, RSS KiB, threads) every 500 ms. Returns (samples, storms, bad storms).
fn storm_until_linger(
    d: &mut Daemon,
    dir: &Path,
    (rules_a, rules_b): (&str, &str),
    t0: Instant,
    secs: u64,
) -> (Vec<(Duration, u64, u64)>, u64, u64) {
    let pid = d.child.id();
    let mut samples: Vec<(Duration, u64, u64)> = Vec::new();
    let (mut storms, mut bad_storms) = (0u64, 0u64);
    let mut last_sample = Instant::now() - Duration::from_secs(1);
    while d.find("linger", &|_| true).is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(secs * 4 + 60),
            "the input did not end within {}s",
            secs * 4 + 60
        );
        if let Some(st) = d.child.try_wait().unwrap() {
            panic!("pktwarp exited during the soak ({st}): {:#?}", d.logs);
        }
        let bad = storms % 4 == 3;
        if bad {
            put(&dir.join("rules.cb"), "@10.0.0.0/8\tnot-a-prefix\n");
            bad_storms += 1;
        } else if storms % 2 == 0 {
            put(&dir.join("rules.cb"), rules_a);
        } else {
            put(&dir.join("rules.cb"), rules_b);
        }
        for _ in 0..5 {
            d.signal("-HUP");
            std::thread::sleep(Duration::from_millis(2));
        }
        storms += 1;
        // Let the reload finish before the next file replaces this one.
        std::thread::sleep(Duration::from_millis(250));
        if last_sample.elapsed() >= Duration::from_millis(500) {
            if let Some((rss, threads)) = proc_status(pid) {
                samples.push((t0.elapsed(), rss, threads));
            }
            last_sample = Instant::now();
        }
    }
    (samples, storms, bad_storms)
}

#[test]
fn soak_reload_storms_and_scrapes_keep_counts_memory_and_threads_flat() {
    soak("soak", soak_secs(), "");
}

/// A short soak with the sampling verifier on (`verify: { sample: 1000 }`): the same checks,
/// and through the reload storms every sampled burst agrees with its re-run on the tables it
/// used (the CPU executor checked against itself).
#[test]
fn soak_with_verify_sampling() {
    let m = soak("soak-verify", 24, "verify: { sample: 1000 }\n");
    assert!(sum(&m, "pktwarp_verify_sampled_total", "") > 0, "{m}");
    assert_eq!(sum(&m, "pktwarp_verify_mismatch_total", ""), 0, "{m}");
    assert_eq!(sum(&m, "pktwarp_verify_burst_mismatch_total", ""), 0, "{m}");
}

/// Runs the soak for `secs` with `extra` config lines; the final /metrics exposition.
fn soak(name: &str, secs: u64, extra: &str) -> String {
    let pps = 10_000u64;
    let dir = common::scratch(name);
    let (rules_a, rules_b) = (rule_set(0), rule_set(3));
    put(&dir.join("rules.cb"), &rules_a);
    let cfg = soak_config(&dir, pps * secs, extra);
    let mut d = Daemon::run(&cfg);
    let addr = d.wait_event("metrics_listen", Duration::from_secs(60))["fields"]["addr"]
        .as_str()
        .unwrap()
        .to_string();

    let stop = Arc::new(AtomicBool::new(false));
    let scrapes = Arc::new(AtomicU64::new(0));
    let scrapers: Vec<_> = (0..4)
        .map(|_| {
            let (a, s, n) = (addr.clone(), Arc::clone(&stop), Arc::clone(&scrapes));
            std::thread::spawn(move || scraper(a, s, n))
        })
        .collect();

    let t0 = Instant::now();
    let (samples, storms, bad_storms) =
        storm_until_linger(&mut d, &dir, (&rules_a, &rules_b), t0, secs);
    // A good rule file in force for the final reload, so the last refusals do not linger.
    put(&dir.join("rules.cb"), &rules_a);
    stop.store(true, Ordering::Relaxed);
    for s in scrapers {
        s.join().unwrap().unwrap();
    }
    let ran = t0.elapsed();

    // Final totals from /metrics (linger: the input is done, nothing moves).
    let (_, m) = get(&addr, "/metrics").unwrap();
    let rx_m = sum(&m, "pktwarp_rx_frames_total", "");
    let verdicts_m = sum(&m, "pktwarp_verdicts_total", "");
    let drops_m = sum(&m, "pktwarp_drops_total", "");
    let ok_reloads = sum(&m, "pktwarp_rule_reloads_total", "result=\"success\"");
    let bad_reloads = sum(&m, "pktwarp_rule_reloads_total", "result=\"failure\"");
    let generation = sum(&m, "pktwarp_ruleset_generation", "");
    d.signal("-TERM");
    let (code, out, _) = d.wait(Duration::from_secs(30));
    assert_eq!(code, 0, "{out}");
    let s: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON summary");
    let rx = s["rx_frames"].as_u64().unwrap();
    eprintln!(
        "soak: {ran:?}, {storms} storms ({bad_storms} with a bad file), reloads {ok_reloads} ok / \
         {bad_reloads} refused, {} scrapes, rx {rx} (metrics {rx_m}), verdicts {verdicts_m}, \
         drops {drops_m}",
        scrapes.load(Ordering::Relaxed)
    );

    // Counts: nothing lost, nothing counted twice, metrics == summary.
    assert_eq!(rx, pps * secs, "the generator's frames all received");
    assert_eq!(
        summary_accounted(&s),
        rx,
        "summary: received != counted + drops: {s}"
    );
    assert_eq!(
        verdicts_m + drops_m,
        rx_m,
        "/metrics: received != counted + drops"
    );
    assert_eq!(rx_m, rx, "/metrics and the summary disagree");
    // The storms happened and every one was seen: a good file reloads (at least one per
    // storm, SIGHUPs of one storm may coalesce into one), a bad one is refused.
    assert!(storms >= 20, "only {storms} storms");
    assert!(
        ok_reloads >= storms - bad_storms,
        "{ok_reloads} reloads for {storms} storms"
    );
    assert!(
        bad_reloads >= bad_storms,
        "{bad_reloads} refusals for {bad_storms} bad files"
    );
    assert_eq!(generation, ok_reloads, "generation != successful reloads");
    assert!(
        scrapes.load(Ordering::Relaxed) >= secs,
        "scrapes were starved"
    );

    check_flat(&samples, ran);
    let _ = std::fs::remove_dir_all(&dir);
    m
}

/// Flat memory and threads after the warm-up quarter of a run of `ran`.
fn check_flat(samples: &[(Duration, u64, u64)], ran: Duration) {
    let warm = ran / 4;
    let after: Vec<_> = samples.iter().filter(|s| s.0 >= warm).collect();
    assert!(after.len() >= 8, "too few samples: {samples:?}");
    let base_n = (after.len() / 4).max(2);
    let (base, tail) = (&after[..base_n], &after[after.len() - base_n..]);
    let base_rss = base.iter().map(|s| s.1).max().unwrap();
    let tail_rss = tail.iter().map(|s| s.1).min().unwrap();
    let max_rss = after.iter().map(|s| s.1).max().unwrap();
    eprintln!(
        "soak: RSS {} MiB after warm-up, {} MiB at the end, {} MiB max; threads {:?}",
        base_rss >> 10,
        tail_rss >> 10,
        max_rss >> 10,
        (after[0].2, after.iter().map(|s| s.2).max().unwrap())
    );
    assert!(
        tail_rss <= base_rss + (RSS_GROWTH_MIB << 10),
        "RSS grew from {base_rss} KiB to {tail_rss} KiB (samples {samples:?})"
    );
    assert!(
        max_rss <= base_rss + ((2 * RSS_GROWTH_MIB) << 10),
        "RSS peaked at {max_rss} KiB from {base_rss} KiB"
    );
    let base_threads = base.iter().map(|s| s.2).max().unwrap();
    let max_threads = after.iter().map(|s| s.2).max().unwrap();
    assert!(
        max_threads <= base_threads + THREAD_GROWTH,
        "threads grew from {base_threads} to {max_threads} (samples {samples:?})"
    );
}
