//! Steering rule files: parsing, every validation error (file, line, column and field asserted),
//! shadowed-rule warnings, and the shipped example files.

use flow_rules::error::RuleError;
use flow_rules::steering::{
    Action, Item, Masked, PortRange, RssAction, RssHash, SteerRuleSet, ETHER_TYPE_IPV4,
};

const FILE: &str = "test.steering.yaml";

/// 1-based line and column (in characters) of the first occurrence of `marker` in `text`.
fn position_of(text: &str, marker: &str) -> (usize, usize) {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("marker `{marker}` not in the test text"));
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before[before.rfind('\n').map_or(0, |i| i + 1)..]
        .chars()
        .count()
        + 1;
    (line, col)
}

/// Parses `text`, expects an error at `marker` about `field` whose message contains `msg`.
#[track_caller]
fn expect_err(text: &str, marker: &str, field: &str, msg: &str) -> RuleError {
    let e = match SteerRuleSet::parse(text, FILE) {
        Ok(_) => panic!("expected an error about {field}, parsed fine:\n{text}"),
        Err(e) => e,
    };
    let (line, col) = position_of(text, marker);
    assert_eq!(e.loc.file.to_str(), Some(FILE), "{e}");
    assert_eq!((e.loc.line, e.loc.column), (line, col), "place of: {e}");
    assert_eq!(e.field, field, "field of: {e}");
    assert!(e.message.contains(msg), "message of `{e}` lacks `{msg}`");
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("{FILE}:{line}:{col}: field `{field}`: ")),
        "display: {shown}"
    );
    e
}

/// One rule with this `match` body (flow style) and these actions.
fn rule(m: &str, actions: &str) -> String {
    format!("queues: 8\nrules:\n  - name: r0\n    match: {m}\n    actions: {actions}\n")
}

#[track_caller]
fn parse_ok(text: &str) -> SteerRuleSet {
    match SteerRuleSet::parse(text, FILE) {
        Ok(s) => s,
        Err(e) => panic!("{e}\n{text}"),
    }
}

#[test]
fn parses_every_item_and_action() {
    let text = r#"
queues: 8
rules:
  - name: all-fields-v4
    match:
      eth: { dst: "00:11:22:33:44:55", src: "02:00:00:00:00:00/ff:00:00:00:00:00", ether_type: 0x0800 }
      vlan: { vid: 100, pcp: 5 }
      ipv4: { src: 10.0.0.0/8, dst: 192.168.1.1, proto: 17, dscp: 46 }
      udp: { src_port: 1000-2000, dst_port: 4789 }
      vxlan: { vni: 42 }
    actions:
      - rss: { queues: [1, 2, 3], hash: [ipv4, udp, l3-dst-only] }
      - mark: 7
  - match:
      ipv6: { dst: "2001:db8::/32" }
      tcp: { dst_port: 443 }
    actions: [{ queue: 4 }]
  - match:
      gtp-u: { teid: 0xdeadbeef }
    actions: [drop]
  - match:
      ecpri: { msg_type: 2, eaxc_id: 0x0102 }
    actions: [{ mark: 1 }]
  - match:
      vlan:
    actions: [{ queue: 0 }, { mark: 9 }]
  - actions: [{ rss: { queues: [5, 6] } }]
"#;
    let set = parse_ok(text);
    assert_eq!(set.queues, Some(8));
    assert_eq!(set.rules.len(), 6);
    let r0 = &set.rules[0];
    assert_eq!(r0.name.as_deref(), Some("all-fields-v4"));
    let names: Vec<_> = r0.pattern.iter().map(Item::name).collect();
    assert_eq!(names, ["eth", "vlan", "ipv4", "udp", "vxlan"]);
    match &r0.pattern[0] {
        Item::Eth(e) => {
            assert_eq!(
                e.dst,
                Some(Masked {
                    spec: [0, 0x11, 0x22, 0x33, 0x44, 0x55],
                    mask: [0xff; 6]
                })
            );
            assert_eq!(
                e.src,
                Some(Masked {
                    spec: [2, 0, 0, 0, 0, 0],
                    mask: [0xff, 0, 0, 0, 0, 0]
                })
            );
            assert_eq!(e.ether_type, Some(ETHER_TYPE_IPV4));
        }
        other => panic!("{other:?}"),
    }
    match &r0.pattern[2] {
        Item::Ipv4(i) => {
            let src = i.src.as_ref().map(|p| (p.addr.to_string(), p.len));
            assert_eq!(src, Some(("10.0.0.0".to_string(), 8)));
            let dst = i.dst.as_ref().map(|p| (p.addr.to_string(), p.len));
            assert_eq!(dst, Some(("192.168.1.1".to_string(), 32)));
            assert_eq!((i.proto, i.dscp), (Some(17), Some(46)));
        }
        other => panic!("{other:?}"),
    }
    match &r0.pattern[3] {
        Item::Udp(p) => {
            assert_eq!(p.src_port, Some(PortRange { lo: 1000, hi: 2000 }));
            assert_eq!(p.dst_port, Some(PortRange::single(4789)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        r0.actions,
        vec![
            Action::Rss(RssAction {
                queues: vec![1, 2, 3],
                hash: RssHash::IPV4
                    .union(RssHash::UDP)
                    .union(RssHash::L3_DST_ONLY)
            }),
            Action::Mark(7)
        ]
    );
    assert_eq!(set.rules[1].actions, vec![Action::Queue(4)]);
    match &set.rules[2].pattern[..] {
        [Item::GtpU(g)] => assert_eq!(g.teid, Some(0xdead_beef)),
        other => panic!("{other:?}"),
    }
    match &set.rules[3].pattern[..] {
        [Item::Ecpri(e)] => assert_eq!((e.msg_type, e.pc_id), (Some(2), Some(0x0102))),
        other => panic!("{other:?}"),
    }
    // `vlan:` with no fields still requires a tag.
    assert!(matches!(&set.rules[4].pattern[..], [Item::Vlan(_)]));
    assert!(set.rules[5].pattern.is_empty());
    match &set.rules[5].actions[..] {
        [Action::Rss(r)] => assert_eq!(r.hash, RssHash::DEFAULT),
        other => panic!("{other:?}"),
    }
    assert!(set.warnings.is_empty(), "{:?}", set.warnings);
    assert_eq!(set.location(1).line, 14);
}

#[test]
fn empty_file_has_no_rules() {
    assert!(parse_ok("").rules.is_empty());
    assert!(parse_ok("# nothing yet\n").rules.is_empty());
    assert!(parse_ok("rules: []\n").rules.is_empty());
}

#[test]
fn unknown_keys_name_the_key() {
    expect_err("queue: 4\nrules: []\n", "queue", "queue", "unknown field");
    expect_err(
        "rules:\n  - nme: x\n    actions: [drop]\n",
        "nme",
        "nme",
        "unknown field",
    );
    expect_err(
        &rule("{ipv5: {}}", "[drop]"),
        "ipv5",
        "ipv5",
        "unknown field",
    );
    expect_err(
        &rule("{ipv4: {dest: 10.0.0.1}}", "[drop]"),
        "dest",
        "dest",
        "unknown field",
    );
    expect_err(
        &rule("{}", "[{rss: {queues: [1], hash_fields: [ipv4]}}]"),
        "hash_fields",
        "hash_fields",
        "unknown field",
    );
    expect_err(&rule("{}", "[flood]"), "flood", "actions", "unknown action");
}

#[test]
fn structural_errors_name_the_key() {
    expect_err(
        "rules:\n  - match: {}\n",
        "match",
        "actions",
        "missing field",
    );
    expect_err(
        "rules:\n  - match: {}\n    match: {}\n    actions: [drop]\n",
        "match: {}\n    actions",
        "match",
        "duplicate",
    );
    expect_err(
        &rule("{ipv4: {dst: [1, 2]}}", "[drop]"),
        "[1, 2]",
        "dst",
        "",
    );
    expect_err(&rule("{ipv4: 5}", "[drop]"), "5}", "ipv4", "");
}

#[test]
fn empty_values_are_errors_not_wildcards() {
    expect_err(
        "rules:\n  - match:\n      vlan: { vid: }\n    actions: [drop]\n",
        ": }",
        "vlan.vid",
        "needs a value",
    );
    expect_err(&rule("{}", "[{queue: }]"), ": }]", "queue", "needs a value");
}

#[test]
fn numbers_out_of_range() {
    expect_err("queues: 0\n", "0", "queues", "at least one queue");
    expect_err("queues: many\n", "many", "queues", "expected a number");
    expect_err("queues: 65536\n", "65536", "queues", "out of range");
    expect_err(
        &rule("{eth: {ether_type: 0x10000}}", "[drop]"),
        "0x10000",
        "eth.ether_type",
        "out of range",
    );
    expect_err(
        &rule("{vlan: {vid: 4096}}", "[drop]"),
        "4096",
        "vlan.vid",
        "0..=4095",
    );
    expect_err(
        &rule("{vlan: {pcp: 8}}", "[drop]"),
        "8}",
        "vlan.pcp",
        "0..=7",
    );
    expect_err(
        &rule("{ipv4: {dscp: 64}}", "[drop]"),
        "64",
        "ipv4.dscp",
        "0..=63",
    );
    expect_err(
        &rule("{ipv6: {proto: 256}}", "[drop]"),
        "256",
        "ipv6.proto",
        "0..=255",
    );
    expect_err(
        &rule("{vxlan: {vni: 16777216}}", "[drop]"),
        "16777216",
        "vxlan.vni",
        "out of range",
    );
    expect_err(
        &rule("{gtpu: {teid: 0x100000000}}", "[drop]"),
        "0x100000000",
        "gtpu.teid",
        "out of range",
    );
    expect_err(
        &rule("{ecpri: {msg_type: 0x100}}", "[drop]"),
        "0x100",
        "ecpri.msg_type",
        "out of range",
    );
    expect_err(
        &rule("{ecpri: {pc_id: -1}}", "[drop]"),
        "-1",
        "ecpri.pc_id",
        "expected a number",
    );
    expect_err(
        &rule("{}", "[{mark: 4294967296}]"),
        "4294967296",
        "mark",
        "out of range",
    );
    expect_err(
        &rule("{}", "[{queue: 65536}]"),
        "65536",
        "queue",
        "out of range",
    );
}

#[test]
fn bad_macs() {
    expect_err(
        &rule("{eth: {dst: \"00:11:22:33:44\"}}", "[drop]"),
        "\"00:11",
        "eth.dst",
        "bad MAC address",
    );
    expect_err(
        &rule("{eth: {src: \"00:11:22:33:44:gg\"}}", "[drop]"),
        "\"00:11",
        "eth.src",
        "bad MAC address",
    );
    expect_err(
        &rule("{eth: {dst: \"00:11:22:33:44:55/ff:ff\"}}", "[drop]"),
        "\"00:11",
        "eth.dst",
        "bad MAC mask",
    );
    expect_err(
        &rule("{eth: {dst: \"00:11:22:33:44:55/49\"}}", "[drop]"),
        "\"00:11",
        "eth.dst",
        "bad MAC mask",
    );
    expect_err(
        &rule("{eth: {dst: \"00:11:22:33:44:55/24\"}}", "[drop]"),
        "\"00:11",
        "eth.dst",
        "bits set outside its mask",
    );
    // A length mask is the same as the MAC-style one.
    let set = parse_ok(&rule("{eth: {dst: \"00:11:22:00:00:00/24\"}}", "[drop]"));
    match &set.rules[0].pattern[..] {
        [Item::Eth(e)] => assert_eq!(e.dst.map(|m| m.mask), Some([0xff, 0xff, 0xff, 0, 0, 0])),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_prefixes() {
    expect_err(
        &rule("{ipv4: {src: 10.0.0.256/8}}", "[drop]"),
        "10.0.0.256",
        "ipv4.src",
        "bad IPv4 address",
    );
    expect_err(
        &rule("{ipv4: {dst: 10.0.0.0/33}}", "[drop]"),
        "10.0.0.0",
        "ipv4.dst",
        "longer than 32",
    );
    expect_err(
        &rule("{ipv4: {dst: 10.0.0.0/x}}", "[drop]"),
        "10.0.0.0",
        "ipv4.dst",
        "bad prefix length",
    );
    let e = expect_err(
        &rule("{ipv4: {dst: 10.1.2.3/8}}", "[drop]"),
        "10.1.2.3",
        "ipv4.dst",
        "bits set beyond the prefix length",
    );
    assert!(e.message.contains("10.0.0.0/8"), "{e}");
    expect_err(
        &rule("{ipv6: {src: \"2001:db8::g/32\"}}", "[drop]"),
        "\"2001",
        "ipv6.src",
        "bad IPv6 address",
    );
    expect_err(
        &rule("{ipv6: {src: \"2001:db8::/129\"}}", "[drop]"),
        "\"2001",
        "ipv6.src",
        "longer than 128",
    );
    expect_err(
        &rule("{ipv6: {dst: \"2001:db8::1/64\"}}", "[drop]"),
        "\"2001",
        "ipv6.dst",
        "bits set beyond the prefix length",
    );
}

#[test]
fn bad_ports() {
    expect_err(
        &rule("{tcp: {dst_port: http}}", "[drop]"),
        "http",
        "tcp.dst_port",
        "bad port",
    );
    expect_err(
        &rule("{udp: {src_port: 70000}}", "[drop]"),
        "70000",
        "udp.src_port",
        "bad port",
    );
    expect_err(
        &rule("{udp: {src_port: 100-}}", "[drop]"),
        "100-",
        "udp.src_port",
        "bad port",
    );
    expect_err(
        &rule("{tcp: {dst_port: 2000-1000}}", "[drop]"),
        "2000-1000",
        "tcp.dst_port",
        "inverted range 2000-1000",
    );
}

#[test]
fn contradictory_items() {
    expect_err(
        &rule("{ipv4: {}, ipv6: {}}", "[drop]"),
        "{}}",
        "ipv6",
        "cannot both match",
    );
    expect_err(
        &rule("{tcp: {}, udp: {}}", "[drop]"),
        "{}}",
        "udp",
        "cannot both match",
    );
    expect_err(
        &rule("{vxlan: {}, gtpu: {}}", "[drop]"),
        "{}}",
        "gtpu",
        "cannot both match",
    );
    expect_err(
        &rule("{eth: {ether_type: 0x86dd}, ipv4: {}}", "[drop]"),
        "0x86dd",
        "eth.ether_type",
        "contradicts the `ipv4` item",
    );
    expect_err(
        &rule("{eth: {ether_type: 0x8100}}", "[drop]"),
        "0x8100",
        "eth.ether_type",
        "VLAN tag type",
    );
    expect_err(
        &rule("{ipv4: {proto: 17}, tcp: {}}", "[drop]"),
        "17",
        "ipv4.proto",
        "contradicts the `tcp` item",
    );
    expect_err(
        &rule("{tcp: {}, vxlan: {}}", "[drop]"),
        "{}}",
        "vxlan",
        "cannot follow `tcp`",
    );
    expect_err(
        &rule("{ipv6: {proto: 6}, gtpu: {}}", "[drop]"),
        "6}",
        "ipv6.proto",
        "contradicts the `gtpu` item",
    );
    expect_err(
        &rule("{ipv4: {}, ecpri: {}}", "[drop]"),
        "{}}",
        "ecpri",
        "cannot follow `ipv4`",
    );
    expect_err(
        &rule("{eth: {ether_type: 0x0800}, ecpri: {}}", "[drop]"),
        "0x0800",
        "eth.ether_type",
        "contradicts the `ecpri` item",
    );
}

#[test]
fn conflicting_and_empty_actions() {
    let text = rule("{}", "[]");
    expect_err(&text, "[]", "actions", "at least one action");
    let text = "rules:\n  - actions:\n      - queue: 1\n      - drop\n";
    expect_err(
        text,
        "drop",
        "actions",
        "conflicting fate actions: `queue` and `drop`",
    );
    let text = rule("{}", "[{rss: {queues: [1]}}, {queue: 2}]");
    expect_err(&text, "{queue: 2}", "actions", "`rss` and `queue`");
    let text = rule("{}", "[{mark: 1}, {queue: 2}, {mark: 3}]");
    expect_err(&text, "{mark: 3}", "actions", "more than one `mark`");
    let text = rule("{}", "[{mark: 1}, drop]");
    expect_err(&text, "{mark: 1}", "actions", "dropped frame");
    let text = rule("{}", "[{queue: 1, mark: 2}]");
    // Two actions in one mapping: serde-saphyr's error, at the second key.
    expect_err(&text, "mark: 2", "mark", "end of mapping");
}

#[test]
fn queues_and_rss() {
    let text = "queues: 4\nrules:\n  - actions: [{queue: 4}]\n";
    expect_err(
        text,
        "4}",
        "queue",
        "queue 4 does not exist: the port has 4 queues",
    );
    let text = "queues: 4\nrules:\n  - actions: [{rss: {queues: [0, 1, 7, 2]}}]\n";
    expect_err(text, "7,", "rss.queues", "queue 7 does not exist");
    let text = rule("{}", "[{rss: {queues: [1, 2, 1]}}]");
    expect_err(&text, "1]", "rss.queues", "queue 1 is listed twice");
    let text = rule("{}", "[{rss: {queues: []}}]");
    expect_err(&text, "[]}", "rss.queues", "at least one queue");
    let text = rule("{}", "[{rss: {queues: [1], hash: [ipv4, sctp]}}]");
    expect_err(&text, "sctp", "rss.hash", "unknown hash field `sctp`");
    let text = rule(
        "{}",
        "[{rss: {queues: [1], hash: [ipv4, l3-src-only, l3-dst-only]}}]",
    );
    expect_err(&text, "[ipv4, l3", "rss.hash", "exclude each other");
    let text = rule(
        "{}",
        "[{rss: {queues: [1], hash: [ipv4, tcp, l4-src-only, l4-dst-only]}}]",
    );
    expect_err(&text, "[ipv4, tcp", "rss.hash", "exclude each other");
    let text = rule("{}", "[{rss: {queues: [1], hash: [tcp]}}]");
    expect_err(&text, "[tcp]", "rss.hash", "needs `ipv4` and/or `ipv6`");
    let text = rule("{}", "[{rss: {queues: [1], hash: [ipv6, l4-dst-only]}}]");
    expect_err(&text, "[ipv6, l4", "rss.hash", "need `tcp` or `udp`");

    // Without `queues:` any index is accepted until the port's count is known.
    let text = "rules:\n  - actions: [{queue: 3}]\n  - actions: [{rss: {queues: [0, 9]}}]\n";
    let set = parse_ok(text);
    assert!(set.check_queues(10).is_ok());
    let e = match set.check_queues(8) {
        Err(e) => e,
        Ok(()) => panic!("queue 9 of 8 accepted"),
    };
    assert_eq!((e.loc.line, e.loc.column), position_of(text, "9]"));
    assert_eq!(e.field, "rss.queues");
    let e = match set.check_queues(2) {
        Err(e) => e,
        Ok(()) => panic!("queue 3 of 2 accepted"),
    };
    assert_eq!((e.loc.line, e.loc.column), position_of(text, "3}"));
    assert_eq!(e.field, "queue");
}

#[test]
fn duplicate_rule_names() {
    let text = "rules:\n  - name: a\n    actions: [drop]\n  - name: a\n    actions: [drop]\n";
    let e = match SteerRuleSet::parse(text, FILE) {
        Err(e) => e,
        Ok(_) => panic!("duplicate names accepted"),
    };
    // The error is on the second rule's name.
    assert_eq!(
        (e.loc.line, e.loc.column, e.field.as_str()),
        (4, 11, "name")
    );
    assert!(e.message.contains("duplicate rule name `a`"), "{e}");
}

#[test]
fn structure_errors_read_in_file_terms() {
    let e = expect_err("rules:\n", ":\n", "rules", "expected a list here");
    assert!(!e.message.contains("sequence start"), "{e}");
    expect_err("rules:\n  - drop\n", "drop", "rules", "expected a mapping");
    let e = expect_err(
        "queues: 4\nqueues: 5\n",
        "queues: 5",
        "queues",
        "duplicate key `queues`",
    );
    assert!(!e.message.contains("DuplicateKeyPolicy"), "{e}");
}

#[test]
fn yaml_syntax_errors_have_a_place() {
    let e = match SteerRuleSet::parse("rules: [\n", FILE) {
        Err(e) => e,
        Ok(_) => panic!("accepted broken YAML"),
    };
    assert!(e.loc.line >= 1, "{e}");
    assert!(e.to_string().starts_with(FILE), "{e}");
}

#[test]
fn missing_file_is_an_error_naming_it() {
    let e = match SteerRuleSet::load("/nonexistent/x.steering.yaml") {
        Err(e) => e,
        Ok(_) => panic!("loaded a missing file"),
    };
    assert!(
        e.to_string().starts_with("/nonexistent/x.steering.yaml"),
        "{e}"
    );
}

#[test]
fn shadowed_rules_are_warnings() {
    let text = "\
rules:
  - name: all-udp
    match: {udp: {}}
    actions: [{queue: 1}]
  - name: dns
    match: {ipv4: {dst: 10.0.0.0/8}, udp: {dst_port: 53}}
    actions: [{queue: 2}]
  - name: tcp-web
    match: {tcp: {dst_port: 80-443}}
    actions: [{queue: 3}]
  - name: tcp-https
    match: {tcp: {dst_port: 443}}
    actions: [{queue: 4}]
  - name: tcp-wide
    match: {tcp: {dst_port: 1-1000}}
    actions: [{queue: 5}]
";
    let set = parse_ok(text);
    assert_eq!(set.warnings.len(), 2, "{:?}", set.warnings);
    let w = &set.warnings[0];
    assert_eq!(w.loc.line, position_of(text, "name: dns").0);
    assert_eq!(w.field, "match");
    assert!(w.message.contains("rule 1 `dns` is never reached"), "{w}");
    assert!(w.message.contains("rule 0 `all-udp` (line 2)"), "{w}");
    assert!(w.to_string().contains("warning"), "{w}");
    let w = &set.warnings[1];
    assert_eq!(w.loc.line, position_of(text, "name: tcp-https").0);
    // tcp-wide (1-1000) is not inside 80-443: no warning.
}

#[test]
fn shipped_example_files_load() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/rules");
    let mut n = 0;
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path.to_string_lossy().to_string();
        if !name.ends_with(".steering.yaml") {
            continue;
        }
        let set = SteerRuleSet::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(!set.rules.is_empty(), "{name}");
        assert!(set.warnings.is_empty(), "{name}: {:?}", set.warnings);
        let _ = set.compile();
        n += 1;
    }
    assert!(n >= 2, "expected the example steering files in {dir}");
}
