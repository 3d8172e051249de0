//! The evaluator against an independent oracle (tests/oracle/content_re.py, on Python's
//! `re`) for rules of content with nocase / offset / depth / distance / within, on random
//! payloads over a small alphabet (so relative chains and retries happen often).
//! python3 is required under CI=true; elsewhere its absence is reported and the test returns.

use pktwarp_inspect::eval::{self, program::Program, Frame};
use pktwarp_inspect::rules::{parse_rule, Variables};
mod common;

use std::fmt::Write as _;
use std::process::Command;

use common::Rng64 as Rng;

#[derive(Debug)]
struct C {
    pat: Vec<u8>,
    nocase: bool,
    offset: Option<u32>,
    depth: Option<u32>,
    distance: Option<i32>,
    within: Option<i32>,
}

fn random_content(r: &mut Rng) -> C {
    let len = 1 + r.below(3) as usize;
    let pat: Vec<u8> = (0..len).map(|_| b"abAB"[r.below(4) as usize]).collect();
    let mut c = C {
        pat,
        nocase: r.chance(40),
        offset: None,
        depth: None,
        distance: None,
        within: None,
    };
    match r.below(3) {
        0 => {
            if r.chance(50) {
                c.offset = Some(r.below(6) as u32);
            }
            if r.chance(50) {
                c.depth = Some((len as u64 + r.below(8)) as u32);
            }
        }
        1 => {
            if r.chance(70) {
                c.distance = Some(r.below(9) as i32 - 3);
            }
            if c.distance.is_none() || r.chance(60) {
                c.within = Some((len as u64 + r.below(6)) as i32);
            }
        }
        _ => {}
    }
    c
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn rule_text(cs: &[C], sid: usize) -> String {
    let mut s = String::from("alert tcp any any -> any any (");
    for c in cs {
        write!(s, "content:\"|{}|\"; ", hex(&c.pat)).unwrap();
        if c.nocase {
            s.push_str("nocase; ");
        }
        for (k, v) in [
            ("offset", c.offset.map(|v| v as i64)),
            ("depth", c.depth.map(|v| v as i64)),
            ("distance", c.distance.map(i64::from)),
            ("within", c.within.map(i64::from)),
        ] {
            if let Some(v) = v {
                write!(s, "{k}:{v}; ").unwrap();
            }
        }
    }
    write!(s, "sid:{sid};)").unwrap();
    s
}

fn python() -> Option<()> {
    if Command::new("python3").arg("--version").output().is_ok() {
        return Some(());
    }
    assert!(
        !flow_rules::input::in_ci(),
        "python3 is required for the content oracle under CI"
    );
    eprintln!("not run: python3 is missing (content oracle)");
    None
}

#[test]
fn content_chains_agree_with_the_python_re_oracle() {
    if python().is_none() {
        return;
    }
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut rules = Vec::new();
    while rules.len() < 400 {
        let n = 1 + r.below(4) as usize;
        let cs: Vec<C> = (0..n).map(|_| random_content(&mut r)).collect();
        rules.push(cs);
    }
    let payloads: Vec<Vec<u8>> = (0..60)
        .map(|_| {
            let len = r.below(24) as usize;
            (0..len).map(|_| b"abAB."[r.below(5) as usize]).collect()
        })
        .collect();
    let mut input = String::new();
    let mut prog = Program::new();
    for (i, cs) in rules.iter().enumerate() {
        let text = rule_text(cs, i + 1);
        let rule =
            parse_rule(&text, &Variables::default()).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        prog.add(&rule).unwrap();
        input.push_str("RULE\n");
        for c in cs {
            let o = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
            writeln!(
                input,
                "C {} {} {} {} {} {}",
                hex(&c.pat),
                u8::from(c.nocase),
                o(c.offset.map(i64::from)),
                o(c.depth.map(i64::from)),
                o(c.distance.map(i64::from)),
                o(c.within.map(i64::from))
            )
            .unwrap();
        }
    }
    for p in &payloads {
        writeln!(input, "PAYLOAD {}", hex(p)).unwrap();
    }
    let dir = std::env::temp_dir().join(format!("pktwarp-content-oracle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = dir.join("cases.txt");
    std::fs::write(&cases, &input).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/content_re.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(&cases)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
    let expected = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = expected.lines().collect();
    assert_eq!(lines.len(), rules.len());
    let (mut matched, mut checked) = (0, 0);
    for (i, line) in lines.iter().enumerate() {
        for (j, p) in payloads.iter().enumerate() {
            let f = Frame {
                ip_proto: 6,
                src: "1.1.1.1".parse().unwrap(),
                dst: "2.2.2.2".parse().unwrap(),
                src_port: 1,
                dst_port: 2,
                tcp_flags: 0,
                icmp_type: 0,
                icmp_code: 0,
                ct_state: 0,
                ct_dir: 0,
                payload: p,
                http: None,
            };
            let got = eval::rule_matches(&prog, i, &f);
            let want = line.as_bytes()[j] == b'1';
            assert_eq!(
                got,
                want,
                "rule {} on payload {:?}: evaluator {got}, oracle {want}",
                rule_text(&rules[i], i + 1),
                String::from_utf8_lossy(p)
            );
            matched += usize::from(got);
            checked += 1;
        }
    }
    // The sample must exercise both outcomes in earnest.
    assert!(
        matched > checked / 10 && matched < checked * 9 / 10,
        "{matched} of {checked}"
    );
    println!("{checked} rule/payload pairs agree ({matched} matches)");
}
