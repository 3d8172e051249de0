use super::*;
use crate::eval::decode::decode;

fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pw-engine-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch folder");
    d
}

/// An Ethernet / IPv4 / TCP frame from 10.0.0.1:40000 to 192.0.2.1:80 carrying `payload`.
fn tcp_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (40 + payload.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 192, 0, 2, 1]);
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&80u16.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xfa, 0, 0, 0, 0, 0]);
    f.extend_from_slice(payload);
    f
}

const RULES: &str = r#"
alert tcp any any -> any 80 (msg:"evil"; content:"evil"; sid:1; rev:1;)
drop tcp any any -> any any (msg:"worse"; content:"worse"; nocase; sid:2;)
pass tcp any any -> any any (msg:"fine"; content:"trusted"; sid:3;)
alert tcp any any -> any any (msg:"pcre one"; pcre:"/(x)\1/"; sid:4;)
alert tcp any any -> $HOME_NET any (msg:"home"; content:"home"; sid:5;)
"#;

fn load(rules: &str, vars: &[(&str, &str)], strict: bool) -> Result<RuleSet, SetError> {
    let d = scratch_dir(&format!("{}", rules.len() + vars.len()));
    std::fs::write(d.join("a.rules"), rules).expect("write");
    let cfg = SetConfig {
        rules: vec![d.join("*.rules")],
        vars: vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        strict,
        flow_table: false,
        gpu_rules_only: false,
        state: Default::default(),
    };
    RuleSet::load(&cfg, &Classifications::standard())
}

#[test]
fn prefilter_then_full_check_decides_in_action_order() {
    let set = load(RULES, &[("HOME_NET", "[192.0.2.0/24]")], true).expect("set");
    let r = set.report();
    assert_eq!((r.loaded, r.skipped), (4, 1), "{r}");
    assert_eq!(r.skipped_by_reason.get("pcre: back-reference"), Some(&1));
    let mut s = Scratch::default();
    let run = |p: &[u8], s: &mut Scratch| {
        let bytes = tcp_frame(p);
        let f = decode(&bytes).expect("decodes");
        (set.inspect(&f, s), s.matched.clone())
    };
    assert_eq!(run(b"nothing here", &mut s), (Decision::Clean, vec![]));
    assert_eq!(
        run(b"an evil thing", &mut s),
        (Decision::Alert { drop: false }, vec![0])
    );
    // nocase drop and the alert: both alert, the frame drops.
    assert_eq!(
        run(b"evil and WORSE", &mut s),
        (Decision::Alert { drop: true }, vec![0, 1])
    );
    // A pass rule wins over both and silences them.
    assert_eq!(
        run(b"evil worse trusted", &mut s),
        (Decision::Pass(2), vec![])
    );
    // HOME_NET from the config: the destination is in it.
    assert_eq!(
        run(b"home", &mut s),
        (Decision::Alert { drop: false }, vec![3])
    );
    assert_eq!(set.catalog().get(3).map(|r| r.sid), Some(5));
}

#[test]
fn a_malformed_rule_names_its_file_and_line_when_strict() {
    let bad = "alert tcp any any -> any any (msg:\"a\"; content:\"a\"; sid:1;)\n\
               alert tcp any any -> any any (msg:\"b\"; content:\"b\"; sid:notanumber;)\n";
    let e = load(bad, &[], true).expect_err("malformed");
    let t = e.to_string();
    assert!(t.contains("a.rules:2:"), "{t}");
    assert!(t.contains("sid"), "{t}");
    // Lenient: skipped with its reason.
    let set = load(bad, &[], false).expect("lenient");
    assert_eq!(set.report().loaded, 1);
    assert_eq!(
        set.report().skipped_by_reason.get("malformed sid"),
        Some(&1)
    );
}

#[test]
fn bad_vars_and_missing_files_name_their_key() {
    let e = load(RULES, &[("HOME_NET", "[10.0.0.0/33]")], true).expect_err("bad var");
    assert!(e.to_string().starts_with("vars.HOME_NET: "), "{e}");
    let e = load(RULES, &[("HTTP_PORTS", "[80,notaport]")], true).expect_err("bad ports");
    assert!(e.to_string().starts_with("vars.HTTP_PORTS: "), "{e}");
    let cfg = SetConfig {
        rules: vec![PathBuf::from("/nonexistent/pw/x.rules")],
        ..SetConfig::default()
    };
    let e = RuleSet::load(&cfg, &Classifications::standard()).expect_err("missing");
    assert_eq!(
        e.to_string(),
        "rules[0]: /nonexistent/pw/x.rules: no such rule file or folder"
    );
    let d = scratch_dir("empty-glob");
    let cfg = SetConfig {
        rules: vec![d.join("*.rules")],
        ..SetConfig::default()
    };
    let e = RuleSet::load(&cfg, &Classifications::standard()).expect_err("no match");
    assert!(e.to_string().contains("matches no rule file"), "{e}");
    let e = RuleSet::load(&SetConfig::default(), &Classifications::standard()).expect_err("none");
    assert!(e.to_string().starts_with("rules: empty"), "{e}");
}

#[test]
fn globs_match_whole_names() {
    assert!(glob_match(b"*.rules", b"emerging-dos.rules"));
    assert!(!glob_match(b"*.rules", b"emerging-dos.rules.bak"));
    assert!(glob_match(b"emerging-?os.rules", b"emerging-dos.rules"));
    assert!(glob_match(b"a*b*c", b"axxbyyc"));
    assert!(!glob_match(b"a*b*c", b"axxbyy"));
}

/// `gpu_rules_only` keeps the rules the GPU stage runs: payload and HTTP rules, and since the
/// GPU stage keeps flowbits and thresholds too, the rules with state.
#[test]
fn gpu_rules_only_keeps_state_rules() {
    let d = std::env::temp_dir().join(format!("pw-engine-gpu-only-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("a.rules"),
        "alert tcp any any -> any any (msg:\"p\"; content:\"abc\"; sid:1;)\n\
         alert http any any -> any any (msg:\"h\"; content:\"x\"; http_uri; sid:2;)\n\
         alert tcp any any -> any any (msg:\"s\"; content:\"q\"; flowbits:set,b; sid:3;)\n\
         alert tcp any any -> any any (msg:\"t\"; content:\"r\"; threshold:type limit, \
         track by_src, count 1, seconds 9; sid:4;)\n",
    )
    .unwrap();
    let cfg = |only| SetConfig {
        rules: vec![d.join("a.rules")],
        strict: true,
        flow_table: true,
        gpu_rules_only: only,
        ..SetConfig::default()
    };
    let all = RuleSet::load(&cfg(false), &Classifications::standard()).unwrap();
    assert_eq!(all.len(), 4);
    assert_eq!(crate::gpu::refusal(&all), None);
    let gpu = RuleSet::load(&cfg(true), &Classifications::standard()).unwrap();
    let sids: Vec<u32> = gpu.catalog().rules.iter().map(|r| r.sid).collect();
    assert_eq!(sids, [1, 2, 3, 4]);
    assert_eq!(gpu.report().skipped, 0);
}
