//! Bad and random input: the parser, the HTTP head parser and the evaluator never panic.

use pktwarp_inspect::eval::{self, program::Program, Counters, Frame};
use pktwarp_inspect::http;
use pktwarp_inspect::rules::{load_str, parse_rule, LoadOptions, Variables};
use proptest::prelude::*;

/// Option fragments, valid and not, that random rules are made of.
const FRAGMENTS: &[&str] = &[
    r#"content:"ab";"#,
    r#"content:"|00 ff|A";"#,
    r#"content:!"b";"#,
    "nocase;",
    "offset:2;",
    "depth:3;",
    "distance:-4;",
    "distance:0;",
    "within:3;",
    "within:1000000;",
    "isdataat:1,relative;",
    "isdataat:!3;",
    "byte_test:1,>,3,0;",
    "byte_test:4,=,0x41,-2,relative,little;",
    "byte_test:8,&,1,-100,relative;",
    "byte_test:5,=,99,0,string,dec;",
    "byte_jump:1,0,relative;",
    "byte_jump:2,-1,relative,multiplier 7,align,post_offset -3;",
    "byte_jump:4,0,from_beginning,bitmask 0x0ff0;",
    "byte_jump:8,0;",
    "byte_jump:20,0,string,hex;",
    "http_uri;",
    "http_header;",
    "http.method;",
    "file_data;",
    "pkt_data;",
    "urilen:3<>9;",
    "dsize:>2;",
    "flags:S+;",
    "fast_pattern;",
    "pcre:\"/a/\";",
    "sid;",
    ";;",
    "content:\"",
    "(",
    ")",
];

fn frame<'a>(payload: &'a [u8], head: Option<&'a http::HttpHead>) -> Frame<'a> {
    Frame {
        ip_proto: 6,
        src: "10.0.0.1".parse().unwrap(),
        dst: "10.0.0.2".parse().unwrap(),
        src_port: 1234,
        dst_port: 80,
        tcp_flags: 0x02,
        icmp_type: 0,
        icmp_code: 0,
        ct_state: 0,
        ct_dir: 0,
        payload,
        http: head,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_rules_on_random_payloads(
        picks in proptest::collection::vec(0..FRAGMENTS.len(), 0..10),
        payload in proptest::collection::vec(any::<u8>(), 0..80),
        http_like in any::<bool>(),
    ) {
        let opts: String = picks.iter().map(|&i| FRAGMENTS[i]).collect::<Vec<_>>().join(" ");
        let text = format!("alert tcp any any -> any any ({opts} sid:1;)");
        let mut payload = payload;
        if http_like {
            let mut p = b"GET /a?b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n".to_vec();
            p.extend_from_slice(&payload);
            payload = p;
        }
        let mut c = Counters::default();
        let head = eval::http_of(6, &payload, &mut c);
        if let Ok(rule) = parse_rule(&text, &Variables::default()) {
            let mut p = Program::new();
            if p.add(&rule).is_ok() {
                let _ = eval::matching(&p, &frame(&payload, head.as_ref()));
            }
        }
    }

    #[test]
    fn arbitrary_text_never_panics_the_loader(text in "\\PC{0,200}") {
        let _ = load_str(&text, "fuzz.rules", &LoadOptions::default());
        let _ = parse_rule(&text, &Variables::default());
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_http_parser(b in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = http::parse(&b);
        let mut with_head = b"POST /%41%/..//. HTTP/1.0\r\n".to_vec();
        with_head.extend_from_slice(&b);
        let _ = http::parse(&with_head);
    }
}

#[test]
fn header_shaped_garbage_is_an_error_not_a_panic() {
    for t in [
        "alert tcp [[[[[[ any -> any any (sid:1;)",
        "alert tcp any any -> any any (content:\"|\"; sid:1;)",
        "alert tcp any any -> any any (content:\"\\\"; sid:1;)",
        "alert tcp [!any] any -> any any (sid:1;)",
        "alert tcp any [:] -> any any (sid:1;)",
        "alert tcp any any -> any any (byte_jump:1,99999999999; sid:1;)",
        "alert tcp any any -> any any (sid:99999999999;)",
        "alert tcp any any -> any any (msg:\"\\",
    ] {
        assert!(parse_rule(t, &Variables::default()).is_err(), "{t}");
    }
}
