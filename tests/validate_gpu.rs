//! `pktwarp validate` with `executor: { kind: gpu }` checks the pipeline against the GPU kernel
//! generator, on any machine: any valid order or subset is accepted (the fused or a composed
//! template), a stage that needs `parse` before it is refused naming it. Metrics are off: the
//! tests run `validate` in parallel, and each would check that the default listen address is
//! free.

use std::process::Command;

fn validate(stages: &str) -> (bool, String) {
    validate_with(stages, "")
}

/// `gpu`: the `executor.gpu` options, as YAML flow-map entries (empty: none).
fn validate_with(stages: &str, gpu: &str) -> (bool, String) {
    let dir = std::env::temp_dir().join(format!("pw-validate-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/configs/rules/inline-filter.rules.yaml"
    );
    // One file per stage list (tests run in parallel), named by its hash: lists of one length
    // must not share a file.
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (stages, gpu).hash(&mut h);
        h.finish()
    };
    let cfg = dir.join(format!("c{key:016x}.yaml"));
    std::fs::write(
        &cfg,
        format!(
            "ports:\n  - name: g\n    gen: {{ count: 10 }}\nqueues: {{ count: 1 }}\n\
             pipeline:\n{}\nexecutor: {{ kind: gpu{} }}\n\
             metrics: {{ enabled: false }}\n",
            stages.replace("RULES", rules),
            if gpu.is_empty() {
                String::new()
            } else {
                format!(", gpu: {{ {gpu} }}")
            }
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pktwarp"))
        .arg("validate")
        .arg(&cfg)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn parse_count_is_accepted_for_the_gpu() {
    let (ok, text) = validate("  - parse\n  - count");
    assert!(ok, "{text}");
    assert!(
        text.contains("parse -> count") && text.contains("Fused"),
        "{text}"
    );
}

#[test]
fn another_order_is_accepted_as_a_composed_kernel() {
    let (ok, text) = validate("  - count\n  - parse\n  - acl: { rules: RULES }");
    assert!(ok, "{text}");
    assert!(text.contains("Composed"), "{text}");
}

#[test]
fn acl_before_parse_is_refused_naming_the_stage() {
    let (ok, text) = validate("  - acl: { rules: RULES }\n  - parse");
    assert!(!ok, "{text}");
    assert!(text.contains("acl") && text.contains("parse"), "{text}");
    assert!(text.contains("pipeline[0]"), "{text}");
}

/// flow_stats with a flow table of its own (no conntrack) runs on the GPU: a composed kernel
/// (its own form of the stage keeps per-queue flow state); beside rate_limit, the other such
/// stage, too (a channel of the kernel's order each); beside two rate_limit stages it is
/// refused naming them.
#[test]
fn flow_stats_with_its_own_table_is_accepted_for_the_gpu() {
    // The records' collector, after the stage list.
    const IPFIX: &str = "\nipfix: { collector: '127.0.0.1:4739' }";
    let (ok, text) = validate(&format!(
        "  - parse\n  - flow_stats: {{ entries: 64 }}\n  - count{IPFIX}"
    ));
    assert!(ok, "{text}");
    assert!(
        text.contains("parse -> flow_stats -> count") && text.contains("Composed"),
        "{text}"
    );
    let rl = "  - rate_limit: { entries: 64, rules: [{ name: a, key: src, rate_pps: 10 }] }\n";
    let (ok, text) = validate(&format!(
        "  - parse\n  - flow_stats: {{ entries: 64 }}\n{rl}  - count{IPFIX}"
    ));
    assert!(ok, "{text}");
    assert!(
        text.contains("parse -> flow_stats -> rate_limit -> count") && text.contains("Composed"),
        "{text}"
    );
    let (ok, text) = validate(&format!(
        "  - parse\n  - flow_stats: {{ entries: 64 }}\n{rl}{rl}  - count{IPFIX}"
    ));
    assert!(!ok, "{text}");
    assert!(
        text.contains("`rate_limit`")
            && text.contains("`flow_stats`")
            && text.contains("at most 2"),
        "{text}"
    );
}

/// Options the GPU executor refuses for a pipeline are refused by `validate` on a machine
/// without a GPU too, naming the key: several CTAs a queue beside conntrack's ordered state.
#[test]
fn gpu_options_the_executor_refuses_are_refused_without_a_gpu() {
    let stages = "  - parse\n  - conntrack: { entries: 1024 }\n  - count";
    let (ok, text) = validate_with(stages, "ctas_per_queue: 4");
    assert!(!ok, "{text}");
    assert!(
        text.contains("executor.gpu.ctas_per_queue: 4") && text.contains("`conntrack`"),
        "{text}"
    );
    let (ok, text) = validate_with(stages, "ctas_per_queue: 1");
    assert!(ok, "{text}");
}
