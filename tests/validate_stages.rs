//! `pktwarp validate` on stage lists with `executor: { kind: gpu }`: a stage that reads the
//! packet metadata without `parse` before it is a config error naming the stage, its line and
//! key; an order the GPU pipeline can run (`[parse, count]`) is accepted (on a machine without
//! a GPU, saying so). A `custom:` stage plain pktwarp does not know is an error naming it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn config(dir: &Path, name: &str, stages: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            "ports:\n  - name: g\n    gen: {{ count: 10 }}\npipeline:\n{stages}\n\
             executor: {{ kind: gpu }}\nmetrics: {{ enabled: false }}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("r.yaml"),
        "rules:\n  - { name: u, proto: udp, action: drop }\n",
    )
    .unwrap();
    p
}

fn validate(cfg: &Path) -> (Output, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pktwarp"))
        .arg("validate")
        .arg(cfg)
        .output()
        .unwrap();
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    let se = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, so, se)
}

#[test]
fn validate_with_the_gpu_executor_checks_stage_order() {
    let dir = std::env::temp_dir().join(format!("pktwarp-validate-stages-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let bad = config(&dir, "bad.yaml", "  - acl: { rules: r.yaml }\n  - parse");
    let (out, _, err) = validate(&bad);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.yaml:5:"), "{err}");
    assert!(err.contains("key `pipeline[0]`"), "{err}");
    assert!(
        err.contains("the `acl` stage") && err.contains("`parse` stage before it"),
        "{err}"
    );

    // Accepted on any machine: with a GPU as the executor it would be, without one saying so.
    let good = config(&dir, "good.yaml", "  - parse\n  - count");
    let (out, so, err) = validate(&good);
    assert!(out.status.success(), "{so}{err}");
    assert!(so.contains("stages: parse -> count"), "{so}");
    assert!(
        so.contains("executor would be gpu") || so.contains("ok for the gpu executor"),
        "{so}"
    );

    let unknown = config(
        &dir,
        "unknown.yaml",
        "  - parse\n  - custom: { name: syn_guard }",
    );
    let (out, _, err) = validate(&unknown);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("key `pipeline[1].custom.name`"), "{err}");
    assert!(err.contains("unknown custom stage `syn_guard`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
