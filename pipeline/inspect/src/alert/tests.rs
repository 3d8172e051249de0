use super::classify::{Classifications, DEFAULT_CLASSIFICATION};
use super::eve::{base64, encode, flow_id, printable, proto_name, timestamp};
use super::*;
use crate::eval::Frame;
use crate::rules::{parse_rule, Variables};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const RULE: &str = r#"alert tcp any any -> any 80 (msg:"ET MALWARE BTGrab.com Spyware Downloading Ads"; content:"btgrab"; classtype:trojan-activity; sid:2001999; rev:9; metadata:created_at 2010_07_30, updated_at 2019_07_26;)"#;

fn catalog(rules: &[&str]) -> RuleCatalog {
    let parsed: Vec<Rule> = rules
        .iter()
        .map(|r| parse_rule(r, &Variables::default()).expect("test rule parses"))
        .collect();
    RuleCatalog::new(&parsed, &Classifications::standard())
}

fn tcp_alert() -> Alert {
    Alert {
        // 2009-11-24T21:27:09.534255 UTC
        ts_ns: 1_259_098_029_534_255_999,
        tuple: Tuple {
            src: IpAddr::V4(Ipv4Addr::new(192, 168, 2, 7)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 250, 50)),
            proto: 6,
            l4: L4::Ports { src: 1041, dst: 80 },
            vlan: [None, None],
        },
        rule: 0,
        action: AlertAction::Allowed,
        payload: None,
    }
}

#[test]
fn eve_line_of_a_handcrafted_alert_is_exact() {
    let cat = catalog(&[RULE]);
    let a = tcp_alert();
    let mut out = Vec::new();
    assert!(encode(&a, &cat.rules[0], false, &mut out));
    let fid = flow_id(&a.tuple);
    let want = format!(
        concat!(
            r#"{{"timestamp":"2009-11-24T21:27:09.534255+0000","flow_id":{},"event_type":"alert","#,
            r#""src_ip":"192.168.2.7","src_port":1041,"dest_ip":"10.0.250.50","dest_port":80,"proto":"TCP","#,
            r#""ip_v":4,"pkt_src":"wire/pcap","alert":{{"action":"allowed","gid":1,"signature_id":2001999,"rev":9,"#,
            r#""signature":"ET MALWARE BTGrab.com Spyware Downloading Ads","#,
            r#""category":"A Network Trojan was detected","severity":1,"#,
            r#""metadata":{{"created_at":["2010_07_30"],"updated_at":["2019_07_26"]}}}}}}"#,
            "\n"
        ),
        fid
    );
    assert_eq!(String::from_utf8(out).unwrap(), want);
}

#[test]
fn eve_line_vlan_icmpv6_blocked_payload() {
    let cat = catalog(&[
        r#"drop icmp any any -> any any (msg:"ping \"quoted\""; itype:128; sid:7; rev:2; gid:3; priority:4;)"#,
    ]);
    let a = Alert {
        ts_ns: 1_546_344_000_123_456_000,
        tuple: Tuple {
            src: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
            dst: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)),
            proto: 58,
            l4: L4::Icmp { kind: 128, code: 0 },
            vlan: [Some(100), Some(7)],
        },
        rule: 0,
        action: AlertAction::of_rule(Action::Drop, true),
        payload: Some(b"ab\x00\r\n\xffz".to_vec()),
    };
    let mut out = Vec::new();
    assert!(encode(&a, &cat.rules[0], true, &mut out));
    let want = format!(
        concat!(
            r#"{{"timestamp":"2019-01-01T12:00:00.123456+0000","flow_id":{},"event_type":"alert","vlan":[100,7],"#,
            r#""src_ip":"2001:db8::1","dest_ip":"2001:db8::2","proto":"IPv6-ICMP","ip_v":6,"#,
            r#""icmp_type":128,"icmp_code":0,"pkt_src":"wire/pcap","#,
            r#""alert":{{"action":"blocked","gid":3,"signature_id":7,"rev":2,"signature":"ping \"quoted\"","severity":4}},"#,
            r#""payload":"YWIADQr/eg==","payload_printable":"ab.\r\n.z"}}"#,
            "\n"
        ),
        flow_id(&a.tuple)
    );
    assert_eq!(String::from_utf8(out).unwrap(), want);
    // The same alert without payload output: no payload fields.
    let mut out = Vec::new();
    assert!(encode(&a, &cat.rules[0], false, &mut out));
    assert!(!String::from_utf8(out).unwrap().contains("payload"));
}

#[test]
fn action_names() {
    assert_eq!(
        AlertAction::of_rule(Action::Alert, true).as_str(),
        "allowed"
    );
    assert_eq!(AlertAction::of_rule(Action::Drop, true).as_str(), "blocked");
    assert_eq!(
        AlertAction::of_rule(Action::Reject, true).as_str(),
        "blocked"
    );
    // IDS mode: a drop rule only alerts.
    assert_eq!(
        AlertAction::of_rule(Action::Drop, false).as_str(),
        "allowed"
    );
}

#[test]
fn timestamps_match_a_day_by_day_calendar() {
    assert_eq!(timestamp(0), "1970-01-01T00:00:00.000000+0000");
    assert_eq!(
        timestamp(951_782_400_000_001_000),
        "2000-02-29T00:00:00.000001+0000"
    );
    assert_eq!(
        timestamp(4_102_444_799_999_999_999),
        "2099-12-31T23:59:59.999999+0000"
    );
    let (mut y, mut m, mut d) = (1970u32, 1u32, 1u32);
    for day in 0u64..60_000 {
        let want = format!("{y:04}-{m:02}-{d:02}T00:00:00.000000+0000");
        assert_eq!(timestamp(day * 86_400 * 1_000_000_000), want, "day {day}");
        let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let len = [
            31,
            if leap { 29 } else { 28 },
            31,
            30,
            31,
            30,
            31,
            31,
            30,
            31,
            30,
            31,
        ];
        d += 1;
        if d > len[m as usize - 1] {
            d = 1;
            m += 1;
            if m > 12 {
                m = 1;
                y += 1;
            }
        }
    }
}

#[test]
fn base64_rfc4648_vectors() {
    let v = [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ];
    for (i, o) in v {
        assert_eq!(base64(i.as_bytes()), o, "{i:?}");
    }
    assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    assert_eq!(printable(b"GET /\x01\x7f\t"), "GET /...");
}

#[test]
fn proto_names() {
    assert_eq!(proto_name(6), "TCP");
    assert_eq!(proto_name(17), "UDP");
    assert_eq!(proto_name(1), "ICMP");
    assert_eq!(proto_name(58), "IPv6-ICMP");
    assert_eq!(proto_name(132), "SCTP");
    assert_eq!(proto_name(253), "253");
}

#[test]
fn flow_id_is_one_per_flow() {
    let a = tcp_alert().tuple;
    let mut back = a;
    back.src = a.dst;
    back.dst = a.src;
    back.l4 = L4::Ports { src: 80, dst: 1041 };
    assert_eq!(flow_id(&a), flow_id(&back));
    // Pinned: the id must not change between builds (logs are correlated across restarts).
    assert_eq!(flow_id(&a), 450_518_771_082_847);
    let mut other = a;
    other.l4 = L4::Ports { src: 1042, dst: 80 };
    assert_ne!(flow_id(&a), flow_id(&other));
    let mut tagged = a;
    tagged.vlan = [Some(5), None];
    assert_ne!(flow_id(&a), flow_id(&tagged));
    assert!(flow_id(&a) < 1 << 51);
}

#[test]
fn standard_classification_table() {
    let c = Classifications::parse("default", DEFAULT_CLASSIFICATION).unwrap();
    assert_eq!(c.len(), 43);
    assert_eq!(Classifications::standard(), c);
    let t = c.get("trojan-activity").unwrap();
    assert_eq!(
        (t.description.as_str(), t.priority),
        ("A Network Trojan was detected", 1)
    );
    assert_eq!(c.get("tcp-connection").unwrap().priority, 4);
    assert_eq!(
        c.get("web-application-attack").unwrap().description,
        "Web Application Attack"
    );
    // Every classtype the ET Open 2019 rules use (but the empty one) is in the table.
    for name in [
        "web-application-attack",
        "trojan-activity",
        "attempted-user",
        "policy-violation",
        "bad-unknown",
        "attempted-admin",
        "misc-activity",
        "protocol-command-decode",
        "attempted-recon",
        "shellcode-detect",
        "attempted-dos",
        "misc-attack",
        "web-application-activity",
        "not-suspicious",
        "rpc-portmap-decode",
        "successful-admin",
        "successful-user",
        "suspicious-filename-detect",
        "denial-of-service",
        "unusual-client-port-connection",
        "network-scan",
        "suspicious-login",
        "successful-recon-limited",
        "string-detect",
        "unsuccessful-user",
        "non-standard-protocol",
        "system-call-detect",
        "default-login-attempt",
        "unknown",
        "successful-dos",
        "successful-recon-largescale",
    ] {
        assert!(c.get(name).is_some(), "{name}");
    }
}

#[test]
fn bad_classification_lines_name_file_and_line() {
    let cases = [
        ("config classification: a,b\n", "three comma-separated"),
        (
            "\n# c\nclassification: a,b,1\n",
            "expected `config classification",
        ),
        ("config classification: a,b,0\n", "priority \"0\""),
        ("config classification: a,b,x\n", "priority \"x\""),
        ("config classification: a b,c,1\n", "one word"),
        ("config classification: a,,1\n", "empty description"),
    ];
    for (text, want) in cases {
        let e = Classifications::parse("my.config", text).unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("my.config:"), "{s}");
        assert!(s.contains(want), "{text:?}: {s}");
    }
    let e = Classifications::parse("f", "\n\nconfig classification: a,b\n").unwrap_err();
    assert_eq!(e.line, 3);
    let e = Classifications::load(std::path::Path::new("/nonexistent/x.config")).unwrap_err();
    assert!(e.to_string().contains("cannot read"), "{e}");
}

#[test]
fn catalog_severity_and_unknown_classtype() {
    let cat = catalog(&[
        RULE,
        r#"alert tcp any any -> any any (msg:"p"; classtype:trojan-activity; priority:3; sid:2; rev:1;)"#,
        r#"alert tcp any any -> any any (msg:"u"; classtype:no-such-class; sid:3; rev:1;)"#,
        r#"alert tcp any any -> any any (msg:"n"; sid:4; rev:1;)"#,
    ]);
    let sev: Vec<u32> = cat.rules.iter().map(|r| r.severity).collect();
    assert_eq!(sev, [1, 3, DEFAULT_SEVERITY, DEFAULT_SEVERITY]);
    assert_eq!(cat.rules[2].category, None);
    assert_eq!(cat.unknown_classtypes, [(3, "no-such-class".to_string())]);
    assert_eq!(
        metadata_map(&["a 1, b 2".into(), "a 3, lonely".into()]),
        [
            ("a".to_string(), vec!["1".to_string(), "3".to_string()]),
            ("b".to_string(), vec!["2".to_string()])
        ]
    );
}

#[test]
fn rule_hits_top_and_bounded_series() {
    let hits = RuleHits::from_ids([(1, 10), (1, 20), (1, 30), (1, 40), (3, 10)]);
    hits.add(0, 5);
    hits.add(1, 7);
    hits.hit(2);
    hits.add(4, 2);
    hits.hit(99);
    assert_eq!(hits.out_of_range(), 1);
    assert_eq!(hits.get(3), 0);
    let top: Vec<(u32, u64)> = hits.top(3).iter().map(|h| (h.index, h.hits)).collect();
    assert_eq!(top, [(1, 7), (0, 5), (4, 2)]);
    // sid 10 is two rules (gids 1 and 3): 7 hits; cap 1 -> one sid and "other".
    let s = hits.series(1);
    let flat: Vec<(String, u64)> = s.iter().map(|(l, v)| (l[0].1.clone(), *v)).collect();
    assert_eq!(flat, [("10".to_string(), 7), ("other".to_string(), 8)]);
    assert!(s.iter().all(|(l, _)| l.len() == 1 && l[0].0 == "sid"));
    // A cap above the sids with hits: no "other", no series for rules without hits.
    let flat: Vec<(String, u64)> = hits
        .series(10)
        .iter()
        .map(|(l, v)| (l[0].1.clone(), *v))
        .collect();
    assert_eq!(flat, [("10".into(), 7), ("20".into(), 7), ("30".into(), 1)]);
    assert!(hits.series(0).len() == 1);
}

#[test]
fn config_defaults_and_bad_values_name_the_key() {
    let c: EveConfig = serde_json::from_str(r#"{"path":"/tmp/eve.json"}"#).unwrap();
    assert_eq!(c, EveConfig::new("/tmp/eve.json"));
    assert_eq!((c.queue, c.payload, c.payload_max), (65_536, false, 4096));
    c.check().unwrap();
    let e = serde_json::from_str::<EveConfig>(r#"{"path":"/tmp/e","queu":5}"#).unwrap_err();
    assert!(e.to_string().contains("unknown field `queu`"), "{e}");
    let e = serde_json::from_str::<EveConfig>(r#"{"queue":5}"#).unwrap_err();
    assert!(e.to_string().contains("missing field `path`"), "{e}");
    let e = serde_json::from_str::<EveConfig>(r#"{"path":"/tmp/e","queue":-1}"#).unwrap_err();
    assert!(e.to_string().contains("-1"), "{e}");
    let check = |json: &str| {
        serde_json::from_str::<EveConfig>(json)
            .unwrap()
            .check()
            .unwrap_err()
            .to_string()
    };
    let cases = [
        (
            r#"{"path":"/tmp/e","queue":0}"#,
            "eve.queue: 0: must be 1 to",
        ),
        (
            r#"{"path":"/tmp/e","queue":99999999}"#,
            "eve.queue: 99999999",
        ),
        (r#"{"path":"/tmp/e","payload_max":0}"#, "eve.payload_max: 0"),
        (
            r#"{"path":"/tmp/e","payload_max":70000}"#,
            "eve.payload_max: 70000",
        ),
        (r#"{"path":""}"#, "eve.path: empty"),
        (
            r#"{"path":"/tmp/e","payload":true,"queue":1048576}"#,
            "eve.queue: 1048576 alerts of up to 4096 payload bytes (eve.payload_max) may hold 4096 MiB",
        ),
        (r#"{"path":"/tmp"}"#, "eve.path: /tmp: is a folder"),
        (
            r#"{"path":"/nonexistent-dir/e.json"}"#,
            "folder /nonexistent-dir does not exist",
        ),
        (
            r#"{"path":"/tmp/e","classification":"/nonexistent.config"}"#,
            "eve.classification: /nonexistent.config",
        ),
    ];
    for (json, want) in cases {
        let s = check(json);
        assert!(s.contains(want), "{json}: {s}");
    }
    // Without payload the same queue is fine; the default queue with payload is too.
    let c: EveConfig = serde_json::from_str(r#"{"path":"/tmp/e","queue":1048576}"#).unwrap();
    c.check().unwrap();
    let c: EveConfig = serde_json::from_str(r#"{"path":"/tmp/e","payload":true}"#).unwrap();
    c.check().unwrap();
    assert_eq!(c.classifications().unwrap().len(), 43);
    let mut c = c;
    c.classification = Some("/nonexistent.config".into());
    let e = c.classifications().unwrap_err().to_string();
    assert!(e.starts_with("/nonexistent.config:0: cannot read"), "{e}");
}

#[test]
fn alert_of_an_evaluated_frame() {
    let payload = b"GET /index.html HTTP/1.1\r\n";
    let f = Frame {
        ip_proto: 6,
        src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        src_port: 50000,
        dst_port: 80,
        tcp_flags: 0x18,
        icmp_type: 0,
        icmp_code: 0,
        ct_state: 0,
        ct_dir: 0,
        payload,
        http: None,
    };
    let a = Alert::of_frame(5, &f, [Some(9), None], 2, AlertAction::Allowed, Some(3));
    assert_eq!(
        a.tuple.l4,
        L4::Ports {
            src: 50000,
            dst: 80
        }
    );
    assert_eq!((a.tuple.vlan, a.rule, a.ts_ns), ([Some(9), None], 2, 5));
    assert_eq!(a.payload.as_deref(), Some(&b"GET"[..]));
    let a = Alert::of_frame(5, &f, [None, None], 2, AlertAction::Allowed, None);
    assert_eq!(a.payload, None);
    let icmp = Frame {
        ip_proto: 1,
        icmp_type: 8,
        icmp_code: 1,
        ct_state: 0,
        ct_dir: 0,
        ..f
    };
    assert_eq!(Tuple::of_frame(&icmp).l4, L4::Icmp { kind: 8, code: 1 });
    let gre = Frame { ip_proto: 47, ..f };
    assert_eq!(Tuple::of_frame(&gre).l4, L4::None);
}

#[test]
fn summary_line_of_top_rules() {
    let cat = catalog(&[
        RULE,
        r#"alert tcp any any -> any any (msg:"second"; sid:5; rev:1;)"#,
    ]);
    let hits = RuleHits::new(&cat);
    assert_eq!(cat.top_text(&hits, 5), "none");
    hits.add(1, 4);
    hits.add(0, 2);
    assert_eq!(
        cat.top_text(&hits, 5),
        r#"sid 5 "second": 4, sid 2001999 "ET MALWARE BTGrab.com Spyware Downloading Ads": 2"#
    );
    assert_eq!(cat.top_text(&hits, 1), r#"sid 5 "second": 4"#);
}
