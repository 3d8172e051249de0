//! `pktwarp flow-gen`: writes a capture of connection traffic that replays (same seed, same
//! file), and refuses bad arguments with an error naming the option.

mod common;
use common::pktwarp_out as pktwarp;
use std::path::PathBuf;

fn temp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pw-flowgen-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn writes_the_same_capture_for_the_same_seed() {
    let d = temp("same");
    let mut files = Vec::new();
    for (name, seed) in [("a.pcap", "3"), ("b.pcap", "3"), ("c.pcap", "4")] {
        let p = d.join(name);
        let (rc, out, err) = pktwarp(&[
            "flow-gen",
            "--out",
            p.to_str().unwrap(),
            "--frames",
            "3000",
            "--seed",
            seed,
        ]);
        assert_eq!(rc, 0, "{err}");
        assert!(out.contains("3000 frames"), "{out}");
        files.push(std::fs::read(&p).unwrap());
    }
    assert!(files[0].len() > 3000 * 54, "a pcap of 3000 frames");
    assert_eq!(files[0], files[1], "same seed, same file");
    assert_ne!(files[0], files[2], "another seed, other traffic");
    // It replays through the parser: the first frame is Ethernet.
    let (rc, out, err) = pktwarp(&["parse", d.join("a.pcap").to_str().unwrap()]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.lines().count(), 3000);
}

#[test]
fn bad_arguments_are_errors_naming_the_option() {
    let d = temp("bad");
    let out = d.join("x.pcap");
    let o = out.to_str().unwrap();
    for (args, want) in [
        (vec!["--frames", "0"], "--frames 0"),
        (vec!["--concurrent", "0"], "--concurrent 0"),
        (vec!["--clients", "70000"], "--clients 70000"),
        (vec!["--idle-pct", "101"], "--idle-pct 101"),
    ] {
        let mut a = vec!["flow-gen", "--out", o];
        a.extend(args);
        let (rc, _, err) = pktwarp(&a);
        assert_eq!(rc, 2, "{err}");
        assert!(err.contains(want), "{err}");
        assert!(!out.exists(), "nothing written on a bad argument");
    }
    let (rc, _, err) = pktwarp(&["flow-gen", "--out", "/nonexistent-dir/x.pcap"]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("/nonexistent-dir/x.pcap"), "{err}");
}
