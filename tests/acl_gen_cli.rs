//! `pktwarp acl-gen`: writes a rule set and trace that `pktwarp classify` reads (same seed, same
//! files), and refuses bad arguments with an error naming the option.

mod common;
use common::pktwarp_out as pktwarp;
use std::path::PathBuf;

fn temp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pw-aclgen-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn writes_a_set_classify_reads_and_is_deterministic() {
    let (a, b) = (temp("a"), temp("b"));
    for d in [&a, &b] {
        let (rc, out, err) = pktwarp(&[
            "acl-gen",
            "--profile",
            "fw",
            "--rules",
            "200",
            "--headers",
            "1000",
            "--seed",
            "9",
            "--out",
            d.to_str().unwrap(),
            "--name",
            "s",
        ]);
        assert_eq!(rc, 0, "{err}");
        assert!(
            out.contains("200 rules") && out.contains("1000 headers"),
            "{out}"
        );
    }
    let read = |d: &PathBuf, f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    assert_eq!(read(&a, "s"), read(&b, "s"));
    assert_eq!(read(&a, "s_trace"), read(&b, "s_trace"));
    let (rc, out, err) = pktwarp(&[
        "classify",
        "--rules",
        a.join("s").to_str().unwrap(),
        "--trace",
        a.join("s_trace").to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    let answers: Vec<i64> = out.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(answers.len(), 1000);
    assert!(answers.contains(&-1) && answers.iter().any(|&x| x >= 0));
    for d in [a, b] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn bad_arguments_are_refused_by_name() {
    let d = temp("bad");
    let o = d.to_str().unwrap();
    for (args, want) in [
        (vec!["--rules", "0"], "--rules 0"),
        (vec!["--rules", "2000000"], "--rules 2000000"),
        (vec!["--rules", "10", "--headers", "0"], "--headers 0"),
        (vec!["--rules", "10", "--miss", "1.5"], "--miss 1.5"),
        (
            vec!["--rules", "10", "--profile", "ipc"],
            "unknown profile `ipc`",
        ),
    ] {
        let mut a = vec!["acl-gen", "--out", o];
        a.extend(args);
        let (rc, _, err) = pktwarp(&a);
        assert_ne!(rc, 0, "{a:?} accepted");
        assert!(err.contains(want), "{a:?}: {err}");
    }
    // An output folder that cannot be made: a file in the way.
    let file = std::env::temp_dir().join(format!("pw-aclgen-file-{}", std::process::id()));
    std::fs::write(&file, "x").unwrap();
    let sub = file.join("sub");
    let (rc, _, err) = pktwarp(&["acl-gen", "--rules", "10", "--out", sub.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("creating"), "{err}");
    let _ = std::fs::remove_file(file);
    assert!(!d.exists());
}
