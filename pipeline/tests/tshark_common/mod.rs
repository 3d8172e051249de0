//! tshark as the independent oracle of the rewrite tests: the fields of every frame of a
//! capture, with IPv4 / TCP / UDP checksum validation on.

use std::path::Path;
use std::process::Command;

/// tshark's fields of every frame (checksum validation on), one Vec per frame.
pub fn tshark(file: &Path, fields: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    for o in [
        "ip.check_checksum:TRUE",
        "tcp.check_checksum:TRUE",
        "udp.check_checksum:TRUE",
    ] {
        cmd.args(["-o", o]);
    }
    cmd.arg("-r")
        .arg(file)
        .args(["-T", "fields", "-E", "occurrence=f"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd
        .output()
        .expect("tshark runs (scripts/install-deps.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}
