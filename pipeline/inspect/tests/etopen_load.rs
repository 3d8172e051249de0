//! The whole Emerging Threats Open 2019 set (the external corpus, `ids/etopen-2019`): every
//! rule is loaded or skipped with a reason, nothing panics, every loaded rule compiles and
//! evaluates, and the coverage numbers are printed (`--nocapture`).

use pktwarp_inspect::eval::{self, program::Program, Counters, Frame};
use pktwarp_inspect::rules::{load_dir, Blocker, LoadOptions};

#[test]
fn etopen_2019_loads_or_skips_every_rule() {
    let Some(dir) = flow_rules::input::require_corpus("ids/etopen-2019") else {
        return;
    };
    let rep = load_dir(&dir, &LoadOptions::default()).expect("lenient load");
    println!("{rep}");
    // The corpus README: 35 files, 10,350 active rules.
    assert_eq!(rep.per_file.len(), 35);
    assert_eq!(rep.total(), 10_350);
    for s in &rep.skipped {
        assert!(
            !s.reason.is_empty(),
            "{}:{} skipped without a reason",
            s.file,
            s.line
        );
        assert!(s.error.is_some() || !s.blockers.is_empty());
    }
    // 3,673 lines of the corpus have pcre (README); the rules whose pcre has no DFA with PCRE's
    // meaning (back-references, look-around, over the state budget) are skipped for it.
    let pcre = rep
        .skipped
        .iter()
        .filter(|s| s.blockers.iter().any(|b| matches!(b, Blocker::Pcre(_))))
        .count();
    assert_eq!(pcre, 260, "rules skipped for pcre");
    // The coverage today (update when support grows): loaded, and loadable with the flow
    // table, with pcre, with both.
    assert_eq!(rep.loaded.len(), 457);
    assert_eq!(rep.need_only_flow_table(), 8963);
    assert_eq!(rep.need_only_pcre(), 0);
    assert_eq!(rep.need_only_pcre_and_flow_table(), 9218);
    let mut p = Program::new();
    for l in &rep.loaded {
        p.add(&l.rule)
            .unwrap_or_else(|e| panic!("{}:{}: {e}", l.file, l.line));
    }
    // Every loaded rule evaluates (no panic) on an HTTP request and on binary data.
    let req = b"GET /index.php?id=1 HTTP/1.1\r\nHost: a.example\r\nUser-Agent: x\r\n\r\n";
    let mut c = Counters::default();
    let head = eval::http_of(6, req, &mut c);
    for payload in [&req[..], &[0u8, 1, 2, 0xff, b'|', 0x90, 0x90][..]] {
        let f = Frame {
            ip_proto: 6,
            src: "10.0.0.1".parse().unwrap(),
            dst: "8.8.8.8".parse().unwrap(),
            src_port: 40000,
            dst_port: 80,
            tcp_flags: 0x18,
            icmp_type: 0,
            icmp_code: 0,
            ct_state: 0,
            ct_dir: 0,
            payload,
            http: head.as_ref().filter(|_| payload.len() == req.len()),
        };
        let _ = eval::matching(&p, &f);
    }
}

#[test]
fn etopen_2019_malformed_rules_are_named() {
    let Some(dir) = flow_rules::input::require_corpus("ids/etopen-2019") else {
        return;
    };
    let rep = load_dir(&dir, &LoadOptions::default()).expect("lenient load");
    let errors: Vec<String> = rep
        .skipped
        .iter()
        .filter_map(|s| s.error.as_ref().map(|e| e.to_string()))
        .collect();
    // byte_test of 0 bytes (later Suricata reads the whole buffer) and a pcre whose
    // quotes do not pair.
    assert_eq!(
        errors,
        vec![
            "emerging-info.rules:957: sid 2017639: byte_test: 0 bytes (1..23 allowed)",
            "emerging-policy.rules:867: sid 2002945: pcre: not a quoted string",
        ]
    );
    // Strict mode stops at the first of them, naming it.
    let strict = LoadOptions {
        strict: true,
        ..LoadOptions::default()
    };
    let e = load_dir(&dir, &strict).unwrap_err();
    assert_eq!(e.to_string(), errors[0]);
}

#[test]
fn etopen_2019_loaded_rules_use_only_evaluated_keywords() {
    let Some(dir) = flow_rules::input::require_corpus("ids/etopen-2019") else {
        return;
    };
    let rep = load_dir(&dir, &LoadOptions::default()).expect("lenient load");
    let mut seen = std::collections::BTreeSet::new();
    for l in &rep.loaded {
        seen.extend(l.rule.keywords.iter().cloned());
    }
    // Exactly what the evaluator implements, plus metadata and the prefilter hint.
    let expected = [
        "byte_jump",
        "byte_test",
        "classtype",
        "content",
        "depth",
        "distance",
        "dsize",
        "fast_pattern",
        "flags",
        "flow",
        "http_client_body",
        "http_method",
        "http_uri",
        "http_user_agent",
        "icode",
        "isdataat",
        "itype",
        "metadata",
        "msg",
        "nocase",
        "offset",
        "pcre",
        "reference",
        "rev",
        "sid",
        "within",
    ];
    assert_eq!(
        seen.iter().map(String::as_str).collect::<Vec<_>>(),
        expected
    );
    // `flow` in a loaded rule says only what is true of every packet.
    for l in &rep.loaded {
        if let Some(f) = l.rule.flow {
            assert!(
                !f.needs_flow_table() && !f.only_stream,
                "{}:{}",
                l.file,
                l.line
            );
            assert!(f.stateless || f.no_stream);
        }
    }
}

/// With a flow table (a pipeline with `conntrack`), the flow keywords load: at least 40% of
/// the set, every skip with its reason, and every loaded rule compiles; the stateful ones go
/// to the CPU state, the rest make a GPU image.
#[test]
fn etopen_2019_with_the_flow_table() {
    let Some(dir) = flow_rules::input::require_corpus("ids/etopen-2019") else {
        return;
    };
    let opts = LoadOptions {
        flow_table: true,
        ..LoadOptions::default()
    };
    let rep = load_dir(&dir, &opts).expect("lenient load");
    println!("{rep}");
    assert_eq!(rep.total(), 10_350);
    // 457 without the flow table + the 8,963 that needed only it (pcre loads as a DFA).
    assert_eq!(rep.loaded.len(), 9420);
    assert!(rep.coverage_percent() >= 90.0, "{}", rep.coverage_percent());
    assert_eq!(rep.need_only_flow_table(), 0);
    for s in &rep.skipped {
        assert!(!s.reason.is_empty(), "{}:{}", s.file, s.line);
        assert!(
            !s.blockers
                .iter()
                .any(|b| matches!(b, Blocker::FlowTable(_))),
            "{}:{}: {:?}",
            s.file,
            s.line,
            s.blockers
        );
    }
    let reasons = rep.by_reason();
    println!("{reasons:#?}");
    // The pcre keywords without a DFA, by reason (docs/inspect-pcre.md).
    for (why, n) in [
        ("back-reference", 154),
        ("DFA over 4096 states", 63),
        ("look-ahead", 33),
        ("possessive quantifier", 3),
        ("look-behind", 2),
        ("atomic group", 1),
    ] {
        assert_eq!(
            reasons.get(&format!("pcre: {why}")),
            Some(&n),
            "pcre: {why}"
        );
    }
    assert_eq!(
        reasons.get("needs stream reassembly (flow:only_stream)"),
        Some(&3)
    );
    let rules: Vec<_> = rep.loaded.iter().map(|l| &l.rule).collect();
    let stateful = rules.iter().filter(|r| r.needs_cpu_state()).count();
    let with_flow = rules
        .iter()
        .filter(|r| r.flow.is_some_and(|f| f.needs_flow_table()))
        .count();
    println!("{stateful} loaded rules keep CPU state, {with_flow} test flow direction / state");
    assert_eq!((stateful, with_flow), (958, 8871));
    let has_pcre = |r: &&&pktwarp_inspect::rules::Rule| {
        r.detect
            .iter()
            .any(|(_, d)| matches!(d, pktwarp_inspect::rules::Detect::Pcre(_)))
    };
    let with_pcre = rules.iter().filter(has_pcre).count();
    let pcre_only = rules
        .iter()
        .filter(has_pcre)
        .filter(|r| r.prefilter().is_none())
        .count();
    let mut cpu = Program::new();
    for r in &rules {
        cpu.add(r).expect("compiles");
    }
    // The GPU takes every loaded rule, state included: the image and the state section.
    let img = cpu.image().expect("GPU image");
    println!(
        "{with_pcre} loaded rules with pcre ({pcre_only} without a content); GPU image: {} rules, \
         {} pcre table words, {} bytes",
        cpu.rules.len(),
        cpu.dfa.len(),
        img.len() * 8
    );
    assert_eq!((with_pcre, pcre_only, cpu.rules.len()), (5264, 0, 9420));
    let mut state = pktwarp_inspect::eval::state::Stateful::new(
        &rules,
        pktwarp_inspect::eval::state::StateConfig::default(),
    );
    let section = state
        .gpu_section()
        .expect("ET Open's flowbit names fit a GPU flow entry");
    let with_state = section[1..=rules.len()].iter().filter(|&&w| w != 0).count();
    assert_eq!(with_state, 958);
    // Every loaded rule evaluates, with its state, on an HTTP request of an established flow
    // in both directions (no panic; the state grows only for rules that set flowbits).
    let req = b"GET /index.php?id=1 HTTP/1.1\r\nHost: a.example\r\nUser-Agent: x\r\n\r\n";
    let mut c = Counters::default();
    let head = eval::http_of(6, req, &mut c);
    let mut fired = 0;
    for (t, dir) in [(1u64, 1u8), (2, 2), (3, 1)] {
        let f = Frame {
            ip_proto: 6,
            src: "10.0.0.1".parse().unwrap(),
            dst: "8.8.8.8".parse().unwrap(),
            src_port: 40000,
            dst_port: 80,
            tcp_flags: 0x18,
            icmp_type: 0,
            icmp_code: 0,
            ct_state: 2,
            ct_dir: dir,
            payload: req,
            http: head.as_ref(),
        };
        let m = eval::matching(&cpu, &f);
        fired += state.apply(&f, t * 1_000_000_000, &m).len();
    }
    assert!(fired > 0);
    assert!(state.flows() <= 1);
}
