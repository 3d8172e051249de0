//! Exact parity with DPDK rte_acl on the shared corpus's ClassBench sets
//! (expected_dpdk_acl/*.match), and the 100K sets against the linear first-match reference.
//! Needs the external corpus (`flow_rules::input::require_corpus`); the generated counterpart
//! that needs none is tests/classbench_gen.rs.

use flow_rules::abi::ACL_NO_MATCH;
use flow_rules::acl::{classbench, cuda_host, load_rules, read_text, AclClassifier, RuleFormat};
use std::path::PathBuf;

fn data() -> Option<PathBuf> {
    flow_rules::input::require_corpus("classbench")
}

fn as_line(m: u32) -> String {
    if m == ACL_NO_MATCH {
        "-1".into()
    } else {
        m.to_string()
    }
}

fn parity(set: &str) {
    let Some(d) = data() else { return };
    let rules = load_rules(&d.join(set), RuleFormat::ClassBench).unwrap();
    let trace_path = d.join(format!("{set}_trace"));
    let trace = classbench::parse_trace(&trace_path, &read_text(&trace_path).unwrap()).unwrap();
    let expected = read_text(&d.join(format!("expected_dpdk_acl/{set}_trace.match"))).unwrap();
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(
        expected.len(),
        trace.len(),
        "{set}: trace and match line counts"
    );
    let cls = AclClassifier::build(&rules.rules);
    // The batch walk (leaf blocks; AVX2 where the CPU has it) and its portable form.
    let keys: Vec<_> = trace.iter().map(|t| t.key).collect();
    let (mut batch, mut portable) = (vec![0u32; keys.len()], vec![0u32; keys.len()]);
    cls.classify_batch(&keys, &mut batch);
    cls.classify_batch_portable(&keys, &mut portable);
    for (i, (t, e)) in trace.iter().zip(&expected).enumerate() {
        let got = as_line(cls.classify(&t.key));
        assert_eq!(got, *e, "{set}: trace line {} ({:?})", i + 1, t.key);
        assert_eq!(as_line(batch[i]), *e, "{set}: batch, trace line {}", i + 1);
        assert_eq!(
            as_line(portable[i]),
            *e,
            "{set}: portable batch, line {}",
            i + 1
        );
        // The GPU's cooperative lookup (groups of 4 / 8 / 32 lanes, played on the host) on the
        // same keys: these sets have leaves of up to 68 records, so chunks cross leaf ends.
        if i % 7 == 0 {
            for g in [4u32, 8, 32] {
                let got = as_line(cuda_host::classify_lanes(&cls, &t.key, g));
                assert_eq!(got, *e, "{set}: group of {g}, trace line {}", i + 1);
            }
        }
    }
}

#[test]
fn acl1_1k() {
    parity("acl1_1K");
}
#[test]
fn fw1_1k() {
    parity("fw1_1K");
}
#[test]
fn ipc1_1k() {
    parity("ipc1_1K");
}
#[test]
fn acl1_10k() {
    parity("acl1_10K");
}
#[test]
fn fw1_10k() {
    parity("fw1_10K");
}
#[test]
fn ipc1_10k() {
    parity("ipc1_10K");
}

/// 100K rules against the linear reference. The reference costs rules x trace (~10^10 rule
/// tests), so by default only a sample of the trace (every 97th line) is checked, in release
/// builds; scripts/bench-acl.sh runs this with `PW_ACL_100K_STEP=1` (the whole trace).
fn linear_100k(set: &str) {
    let Some(d) = data() else { return };
    let rules = load_rules(&d.join(format!("{set}.gz")), RuleFormat::ClassBench).unwrap();
    let tp = d.join(format!("{set}_trace.gz"));
    let trace = classbench::parse_trace(&tp, &read_text(&tp).unwrap()).unwrap();
    let cls = AclClassifier::build(&rules.rules);
    let s = cls.stats();
    println!("{set}: {s}");
    let step = std::env::var("PW_ACL_100K_STEP")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(97)
        .max(1);
    for t in trace.iter().step_by(step) {
        let want = rules
            .classify_linear(&t.key)
            .map_or(ACL_NO_MATCH, |i| i as u32);
        assert_eq!(cls.classify(&t.key), want, "{set}: {:?}", t.key);
    }
}

#[test]
#[cfg_attr(debug_assertions, ignore = "slow in debug builds; run with --release")]
fn acl1_100k_linear() {
    linear_100k("acl1_100K");
}
#[test]
#[cfg_attr(debug_assertions, ignore = "slow in debug builds; run with --release")]
fn fw1_100k_linear() {
    linear_100k("fw1_100K");
}
#[test]
#[cfg_attr(debug_assertions, ignore = "slow in debug builds; run with --release")]
fn ipc1_100k_linear() {
    linear_100k("ipc1_100K");
}
