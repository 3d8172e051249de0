//! The generated-rule-set check shared by acl_ipv6_gen.rs and classbench_gen.rs: a seeded
//! ClassBench-like set and trace are written to a temp folder, `dpdk-test-acl` (Debian
//! `dpdk-dev`, installed by scripts/install-deps.sh; `PKTWARP_DPDK_TEST_ACL` names another
//! binary) is run on the same files, and every trace line's answer is compared with the
//! compiled matcher (key by key and in batches) and the CUDA matcher compiled for the host; a
//! sample also against the linear first-match reference, and every header made to match
//! nothing must match nothing. Without `dpdk-test-acl` the check fails and says so.

use flow_rules::abi::{AclKey, ACL_NO_MATCH};
use flow_rules::acl::gen6::{GenSpec, Generated, Profile};
use flow_rules::acl::{classbench, cuda_host, AclClassifier, AclRuleSet};
use std::path::{Path, PathBuf};
use std::process::Command;

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(tag: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("pw-aclgen-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    TempDir(d)
}

static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// rte_acl's answer for every trace line (`result: N`; 4294967295 = no match), in order.
fn dpdk_answers(rules: &Path, trace: &Path, nrules: usize, nheaders: usize, v6: bool) -> Vec<u32> {
    let bin = std::env::var("PKTWARP_DPDK_TEST_ACL").unwrap_or_else(|_| "dpdk-test-acl".into());
    let out = Command::new(&bin)
        .args([
            "--no-huge",
            "--no-pci",
            "--no-shconf",
            "-m",
            "2048",
            "-l",
            "0",
        ])
        // One EAL run directory per call: the tests run on parallel threads of one process.
        .arg(format!(
            "--file-prefix=pwgen{}-{}-{}",
            if v6 { 6 } else { 4 },
            std::process::id(),
            RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ))
        .arg("--")
        .arg(format!("--rulesf={}", rules.display()))
        .arg(format!("--tracef={}", trace.display()))
        .arg(format!("--rulenum={nrules}"))
        .arg(format!("--tracenum={nheaders}"))
        .args(["--iter=1", "--alg=scalar", "--verbose=3"])
        .args(v6.then_some("--ipv6"))
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {bin}: {e} (Debian dpdk-dev; scripts/install-deps.sh installs it)")
        });
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{bin} failed ({}): {}\n{}",
        out.status,
        text.lines().rev().take(20).collect::<Vec<_>>().join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter(|l| l.contains("5tuple:"))
        .map(|l| {
            let v = l.rsplit_once("result:").expect("result field").1.trim();
            v.parse::<u32>()
                .unwrap_or_else(|_| panic!("bad result in `{l}`"))
        })
        .collect()
}

/// The generator of one address family: `gen4::generate` or `gen6::generate`.
pub struct Family {
    pub generate: fn(&GenSpec) -> Generated,
    pub v6: bool,
}

/// Generates `nrules` rules and 10 headers per rule of `profile` from `seed` and checks every
/// header's answer against `dpdk-test-acl`'s (see the callers' module docs).
pub fn check(family: &Family, profile: Profile, nrules: usize, seed: u64) {
    let headers = 10 * nrules;
    let g = (family.generate)(&GenSpec {
        profile,
        rules: nrules,
        headers,
        miss_frac: 0.1,
        seed,
    });
    let dir = temp_dir(&format!(
        "{}{profile:?}{nrules}",
        if family.v6 { 6 } else { 4 }
    ));
    let (rp, tp) = (dir.0.join("rules"), dir.0.join("trace"));
    std::fs::write(&rp, &g.rules).unwrap();
    std::fs::write(&tp, &g.trace).unwrap();
    let set = AclRuleSet {
        rules: classbench::parse_rules(&rp, &g.rules).unwrap(),
        warnings: Vec::new(),
    };
    let trace = classbench::parse_trace(&tp, &g.trace).unwrap();
    assert_eq!((set.rules.len(), trace.len()), (nrules, headers));
    let want = dpdk_answers(&rp, &tp, nrules, headers, family.v6);
    assert_eq!(
        want.len(),
        headers,
        "{profile:?} {nrules}: dpdk-test-acl answers"
    );
    let cls = AclClassifier::build(&set.rules);
    let keys: Vec<AclKey> = trace.iter().map(|t| t.key).collect();
    let mut batch = vec![0u32; keys.len()];
    cls.classify_batch(&keys, &mut batch);
    let mut portable = vec![0u32; keys.len()];
    cls.classify_batch_portable(&keys, &mut portable);
    let mut misses = 0;
    for (i, (t, &w)) in trace.iter().zip(&want).enumerate() {
        let line = i + 1;
        assert_eq!(cls.classify(&t.key), w, "{profile:?} {nrules}: line {line}");
        assert_eq!(batch[i], w, "{profile:?} {nrules}: batch, line {line}");
        assert_eq!(
            portable[i], w,
            "{profile:?} {nrules}: portable batch, line {line}"
        );
        if i % 5 == 0 {
            let c = cuda_host::classify(&cls, &t.key);
            assert_eq!(c, w, "{profile:?} {nrules}: CUDA on host, line {line}");
        }
        if i % 53 == 0 {
            let lin = set
                .classify_linear(&t.key)
                .map_or(ACL_NO_MATCH, |x| x as u32);
            assert_eq!(
                lin, w,
                "{profile:?} {nrules}: linear reference, line {line}"
            );
        }
        if t.filter == Some(u32::MAX) {
            misses += 1;
            assert_eq!(w, ACL_NO_MATCH, "line {line} was made to match nothing");
        }
    }
    assert_eq!(misses, g.misses);
    assert!(misses > headers / 20, "{misses} misses of {headers}");
    let hits = want.iter().filter(|&&w| w != ACL_NO_MATCH).count();
    assert!(
        hits > headers / 2,
        "{hits} of {headers} headers match a rule"
    );
}
