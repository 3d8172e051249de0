//! ACL classify rate on one core, for profiling the CPU matcher without building the pktwarp
//! binary: `ACL_RULES=FILE ACL_TRACE=FILE [ACL_ITER=N] cargo bench -p flow-rules --bench acl_rate`.
//! Prints the build figures, then Mpps of `classify_batch` (what `pktwarp classify --bench` and
//! the acl stage run) and of `classify` key by key (unless `ACL_SINGLE=0`), after checking the
//! two agree on every key.
//! Without ACL_RULES it uses `classbench/acl1_10K` of the data folder.

use flow_rules::acl::{classbench, load_rules, read_text, AclClassifier, RuleFormat};
use std::hint::black_box;
use std::time::Instant;

/// Nanoseconds this thread has run on a CPU (utime + stime of `/proc/thread-self/stat`, in
/// clock ticks of 10 ms; 0 where absent): on a shared machine, a rate per CPU-second moves
/// much less than one per wall second. Runs of a few seconds keep the tick error near 1%.
fn cpu_ns() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/thread-self/stat") else {
        return 0;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = s.rsplit_once(')').map_or("", |x| x.1);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    f.iter().sum::<u64>() * 10_000_000
}

fn main() {
    let data = flow_rules::input::data_dir().join("classbench");
    let rules = std::env::var_os("ACL_RULES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| data.join("acl1_10K"));
    let trace = std::env::var_os("ACL_TRACE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| data.join("acl1_10K_trace"));
    let iter: u32 = std::env::var("ACL_ITER")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let set = match load_rules(&rules, RuleFormat::ClassBench) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("acl_rate: {e}");
            std::process::exit(2);
        }
    };
    let text = match read_text(&trace) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("acl_rate: {e}");
            std::process::exit(2);
        }
    };
    let keys: Vec<_> = match classbench::parse_trace(&trace, &text) {
        Ok(t) => t.into_iter().map(|t| t.key).collect(),
        Err(e) => {
            eprintln!("acl_rate: {e}");
            std::process::exit(2);
        }
    };
    let cls = AclClassifier::build(&set.rules);
    println!("{}", cls.stats());
    let mut batch = vec![0u32; keys.len()];
    cls.classify_batch(&keys, &mut batch);
    for (i, (k, &b)) in keys.iter().zip(&batch).enumerate() {
        assert_eq!(cls.classify(k), b, "key {i}: batch and single differ");
    }
    let n = keys.len() as f64 * f64::from(iter);
    let (t0, c0) = (Instant::now(), cpu_ns());
    for _ in 0..iter {
        cls.classify_batch(black_box(&keys), &mut batch);
        black_box(&batch);
    }
    let tb = t0.elapsed().as_secs_f64();
    let cb = (cpu_ns() - c0) as f64 / 1e9;
    // ACL_SINGLE=0 leaves out the key-by-key loop (instruction counts of the batch walk alone).
    let single_iter = if std::env::var("ACL_SINGLE").is_ok_and(|v| v == "0") {
        0
    } else {
        iter
    };
    let (t0, c0) = (Instant::now(), cpu_ns());
    for _ in 0..single_iter {
        for (k, o) in black_box(&keys).iter().zip(batch.iter_mut()) {
            *o = cls.classify(k);
        }
        black_box(&batch);
    }
    let ts = t0.elapsed().as_secs_f64();
    let ns = keys.len() as f64 * f64::from(single_iter);
    let cs = (cpu_ns() - c0) as f64 / 1e9;
    println!(
        "batch: {:.3} Mpps ({:.1} ns/key, {:.3} Mpps per CPU-s); single: {:.3} Mpps ({:.1} ns/key, {:.3} Mpps per CPU-s)",
        n / tb / 1e6,
        tb * 1e9 / n,
        n / cb.max(1e-9) / 1e6,
        ns / ts.max(1e-9) / 1e6,
        ts * 1e9 / ns.max(1.0),
        ns / cs.max(1e-9) / 1e6
    );
}
