//! `pktwarp verify --trace T --rules R` on the `dpdk-test-acl --ipv6` formats that `pktwarp
//! acl-gen` writes and `pktwarp classify` reads: the trace and rules are read before the GPU is
//! looked for, so a bad line is reported (file, line, field) on any machine, and a good IPv6
//! trace is either compared on the GPU or reported read, with a clear word that there is no GPU.

mod common;
use common::pktwarp_out as pktwarp;
use std::path::{Path, PathBuf};

/// A fresh folder with an IPv6 rule set `s` and its trace `s_trace` from `pktwarp acl-gen`.
fn generated(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pw-verify6-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let (rc, _, err) = pktwarp(&[
        "acl-gen",
        "--rules",
        "100",
        "--headers",
        "600",
        "--seed",
        "3",
        "--out",
        d.to_str().unwrap(),
        "--name",
        "s",
    ]);
    assert_eq!(rc, 0, "{err}");
    d
}

fn verify(trace: &Path, rules: &Path) -> (i32, String, String) {
    pktwarp(&[
        "verify",
        "--trace",
        trace.to_str().unwrap(),
        "--rules",
        rules.to_str().unwrap(),
    ])
}

#[test]
fn ipv6_trace_is_compared_or_read_with_no_gpu_said() {
    let d = generated("ok");
    // IPv4 lines (decimal, dotted) in the same file: the family is per line, as classify reads.
    let mut text = std::fs::read_to_string(d.join("s_trace")).unwrap();
    text.push_str("3232235777\t167772162\t1024\t80\t6\t0\t0\n10.0.0.1 10.0.0.2 53 53 17\n");
    std::fs::write(d.join("s_trace"), text).unwrap();
    let (rc, out, err) = verify(&d.join("s_trace"), &d.join("s"));
    match rc {
        0 => assert!(
            out.contains("602 frames") && out.contains("verify: PASS"),
            "{out}"
        ),
        3 => assert!(
            err.contains("602 headers (2 IPv4, 600 IPv6)")
                && err.contains("100 rules")
                && err.contains("no usable GPU"),
            "{err}"
        ),
        _ => panic!("exit {rc}\nstdout: {out}\nstderr: {err}"),
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_bad_trace_or_rule_line_is_reported_before_the_gpu_check() {
    let d = generated("bad");
    let trace = d.join("s_trace");
    let good = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<&str> = good.lines().collect();
    let bad = d.join("bad_trace");
    for (line, field) in [
        ("2001:db8::1\t2001:db8::g\t1\t2\t6\t0\t0", "dst"),
        ("256.1.1.1\t10.0.0.1\t1\t2\t6\t0\t0", "src"),
        ("2001:db8::1\t2001:db8::2\t1\t2\t300\t0\t0", "proto"),
    ] {
        std::fs::write(&bad, format!("{}\n{}\n{line}\n", lines[0], lines[1])).unwrap();
        let (rc, out, err) = verify(&bad, &d.join("s"));
        assert!(
            rc != 0 && rc != 3 && err.contains("bad_trace") && err.contains("line 3"),
            "{line}: exit {rc}\nstdout: {out}\nstderr: {err}"
        );
        assert!(err.contains(&format!("`{field}`")), "{line}: {err}");
        assert!(!err.contains("no usable GPU"), "{err}");
    }
    // A bad rule line too, with a good trace.
    let rules = std::fs::read_to_string(d.join("s")).unwrap();
    let bad_rules = d.join("bad_rules");
    std::fs::write(
        &bad_rules,
        rules.replacen(
            '@',
            "@2001:db8::/129 ::/0 0 : 65535 0 : 65535 0x06/0xff\n@",
            1,
        ),
    )
    .unwrap();
    let (rc, out, err) = verify(&trace, &bad_rules);
    assert!(
        rc != 0 && rc != 3 && err.contains("bad_rules:1") && err.contains("`src`"),
        "exit {rc}\nstdout: {out}\nstderr: {err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
