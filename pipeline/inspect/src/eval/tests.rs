//! Semantic tests: each keyword on payloads worked out by hand from Suricata's rule
//! documentation (payload keywords, HTTP keywords, header keywords).

use super::program::Program;
use super::*;
use crate::rules::{parse_rule, Variables};

fn prog(rule: &str) -> Program {
    let r = parse_rule(rule, &Variables::default()).unwrap_or_else(|e| panic!("{rule}: {e:?}"));
    assert!(r.blockers().is_empty(), "{rule}: {:?}", r.blockers());
    let mut p = Program::new();
    p.add(&r).unwrap();
    p
}

fn tcp<'a>(payload: &'a [u8], http: Option<&'a HttpHead>) -> Frame<'a> {
    Frame {
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
        http,
    }
}

/// Whether `opts` (the options of a tcp any->any rule) match `payload`.
fn m(opts: &str, payload: &[u8]) -> bool {
    let p = prog(&format!("alert tcp any any -> any any ({opts} sid:1;)"));
    rule_matches(&p, 0, &tcp(payload, None))
}

#[test]
fn depth_and_offset_count_from_the_buffer_start() {
    assert!(m(r#"content:"abc"; depth:3;"#, b"abcdef"));
    assert!(!m(r#"content:"abc"; depth:3;"#, b"xabc"));
    assert!(m(r#"content:"def"; offset:3;"#, b"abcdef"));
    assert!(!m(r#"content:"def"; offset:3;"#, b"defabc"));
    // Depth counts from the offset: the window is [2, 4).
    assert!(m(r#"content:"cd"; offset:2; depth:2;"#, b"abcd"));
    assert!(!m(r#"content:"cd"; offset:2; depth:2;"#, b"abxcd"));
    assert!(!m(r#"content:"abc"; offset:10;"#, b"abc"));
}

#[test]
fn distance_and_within_are_relative_to_the_previous_match_end() {
    assert!(m(
        r#"content:"one"; content:"two"; distance:1;"#,
        b"one two"
    ));
    assert!(!m(
        r#"content:"one"; content:"two"; distance:1;"#,
        b"onetwo"
    ));
    assert!(m(r#"content:"one"; content:"two"; distance:0;"#, b"onetwo"));
    // distance:0 does not look before the previous match.
    assert!(!m(
        r#"content:"one"; content:"two"; distance:0;"#,
        b"two one"
    ));
    assert!(m(r#"content:"one"; content:"two"; within:5;"#, b"one two"));
    assert!(!m(
        r#"content:"one"; content:"two"; within:5;"#,
        b"one   two"
    ));
    // within bounds the window: [3+2, 3+2+4).
    assert!(m(
        r#"content:"one"; content:"two"; distance:2; within:4;"#,
        b"one  twoX"
    ));
    assert!(m(
        r#"content:"one"; content:"two"; distance:2; within:4;"#,
        b"one   two"
    ));
    assert!(!m(
        r#"content:"one"; content:"two"; distance:2; within:4;"#,
        b"one    two"
    ));
    // A negative distance looks back, clamped at the buffer start.
    assert!(m(
        r#"content:"b"; content:"a"; distance:-2; within:2;"#,
        b"ab"
    ));
    // The within end counts from cursor + distance even where the start was clamped:
    // [0, 2-5+4) = [0, 1) cannot hold "ab".
    assert!(!m(
        r#"content:"b"; content:"ab"; distance:-5; within:4;"#,
        b"ab"
    ));
    assert!(m(
        r#"content:"b"; content:"ab"; distance:-5; within:5;"#,
        b"ab"
    ));
    // Without a previous content, relative means from the buffer's start.
    assert!(m(r#"content:"xy"; distance:1;"#, b"axy"));
    assert!(!m(r#"content:"xy"; distance:1;"#, b"xy"));
}

#[test]
fn nocase_and_negation() {
    assert!(m(r#"content:"AbC"; nocase;"#, b"xxaBc"));
    assert!(!m(r#"content:"AbC";"#, b"xxaBc"));
    assert!(m(r#"content:!"evil";"#, b"good"));
    assert!(!m(r#"content:!"evil";"#, b"so evil"));
    // Relative negation: "a" not followed by "b" within 2.
    assert!(!m(r#"content:"a"; content:!"b"; within:2;"#, b"axb"));
    assert!(m(r#"content:"a"; content:!"b"; within:2;"#, b"axxb"));
    // An empty buffer matches nothing, even a lone negation (Suricata inspects no
    // empty buffer).
    assert!(!m(r#"content:!"evil";"#, b""));
}

#[test]
fn relative_chains_retry_earlier_matches() {
    // The first "a" is not followed by "b"; the second is.
    assert!(m(r#"content:"a"; content:"b"; within:1;"#, b"a..ab"));
    // Three levels: the first "x" leads to a "y" with no "z"; the second "x" works.
    let opts =
        r#"content:"x"; content:"y"; distance:0; within:2; content:"z"; distance:0; within:1;"#;
    assert!(m(opts, b"x.y...xyz"));
    assert!(!m(opts, b"x.y...xy.z"));
    // A relative negation retries the content before it too.
    assert!(m(r#"content:"a"; content:!"b"; within:1;"#, b"abac"));
    assert!(!m(r#"content:"a"; content:!"b"; within:1;"#, b"abab"));
    // Retries go through isdataat and byte_test relative to the content.
    assert!(m(r#"content:"k="; isdataat:3,relative;"#, b"k=1 k=123"));
    assert!(m(r#"content:"L"; byte_test:1,=,0x42,0,relative;"#, b"LALB"));
    // Overlapping occurrences are tried (retry at start + 1).
    assert!(m(r#"content:"aa"; content:"b"; within:1;"#, b"aaab"));
}

#[test]
fn search_limit_bounds_pathological_chains() {
    let mut opts = String::from(r#"content:"a";"#);
    for _ in 0..12 {
        opts.push_str(r#" content:"a"; distance:0;"#);
    }
    opts.push_str(r#" content:"b"; distance:0; within:1;"#);
    let t = std::time::Instant::now();
    assert!(!m(&opts, &[b'a'; 2000]));
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
    // A short chain that needs retries still matches.
    assert!(m(&opts, b"aaaaaaaaaaaaab"));
}

#[test]
fn hostile_payloads_search_in_linear_time() {
    // Every retry of the first content searches the rest of the payload for a long pattern
    // that is almost there at every position: a byte loop would take 1500 x 20,000 x 1,000
    // steps per rule; a linear search 1500 x 20,000.
    let payload = vec![b'a'; 20_000];
    let long = "a".repeat(999);
    let t = std::time::Instant::now();
    assert!(!m(
        &format!(r#"content:"a"; content:"{long}b"; distance:0;"#),
        &payload
    ));
    assert!(!m(
        &format!(
            r#"content:"A"; nocase; content:"{}B"; nocase; distance:0;"#,
            long.to_uppercase()
        ),
        &payload
    ));
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
    // The same chain matches where the pattern is.
    let mut hit = payload.clone();
    hit.push(b'b');
    assert!(m(
        &format!(r#"content:"a"; content:"{long}b"; distance:0;"#),
        &hit
    ));
}

#[test]
fn isdataat() {
    assert!(m(r#"content:"a"; isdataat:2,relative;"#, b"abc"));
    assert!(!m(r#"content:"a"; isdataat:2,relative;"#, b"ab"));
    assert!(m(r#"content:"a"; isdataat:!2,relative;"#, b"ab"));
    assert!(!m("isdataat:3;", b"abc"));
    assert!(m("isdataat:3;", b"abcd"));
    assert!(m("isdataat:!3;", b"abc"));
}

#[test]
fn byte_test() {
    let d = [0x00u8, 0x01, 0x02, 0x03];
    assert!(m("byte_test:2,=,0x0001,0;", &d));
    assert!(m("byte_test:2,=,0x0100,0,little;", &d));
    assert!(m("byte_test:2,>,0x0101,1;", &d));
    assert!(!m("byte_test:2,<,0x0102,1;", &d));
    assert!(m("byte_test:2,<=,0x0102,1;", &d));
    assert!(m("byte_test:1,&,2,2;", &d));
    assert!(m("byte_test:1,!&,1,2;", &d));
    assert!(!m("byte_test:1,^,3,3;", &d));
    assert!(m("byte_test:1,!=,3,2;", &d));
    // Out of the buffer: no match, negated or not.
    assert!(!m("byte_test:2,=,0,3;", &d));
    assert!(!m("byte_test:2,!=,0,3;", &d));
    // Bitmask, then shifted by the mask's trailing zeros: (0x0203 & 0x0FF0) >> 4 = 0x20.
    assert!(m("byte_test:2,=,0x20,2,bitmask 0x0FF0;", &d));
    // Strings: leading digits only, as strtoull reads them; no digit is no match.
    assert!(m("byte_test:4,=,123,0,string,dec;", b"123x"));
    assert!(m("byte_test:3,=,0x1f,0,string,hex;", b"1f "));
    assert!(m("byte_test:4,=,0x1f,0,string,hex;", b"0x1f"));
    assert!(m("byte_test:3,=,8,0,string,oct;", b"010"));
    assert!(!m("byte_test:3,>,0,0,string,dec;", b"abc"));
    // Relative with a negative offset reads before the cursor.
    assert!(m(r#"content:"Z"; byte_test:1,=,0x41,-2,relative;"#, b"AZ"));
}

#[test]
fn byte_jump() {
    // X, then one length byte (2): jump past it and 2 more bytes, then Y right there.
    let r = r#"content:"X"; byte_jump:1,0,relative; content:"Y"; within:1;"#;
    assert!(m(r, b"X\x02abY"));
    assert!(!m(r, b"X\x02aYb"));
    // Landing on the end of the buffer is outside it.
    assert!(!m(r#"content:"X"; byte_jump:1,0,relative;"#, b"X\x02ab"));
    assert!(m(r#"content:"X"; byte_jump:1,0,relative;"#, b"X\x02abc"));
    // multiplier, align, post_offset: 3*2 = 6 -> aligned 8, -1 -> 7 past the length byte.
    let r = r#"byte_jump:1,0,multiplier 2,align,post_offset -1; content:"Q"; within:1;"#;
    assert!(m(r, b"\x03.......Q"));
    // from_beginning: the value is a position from the buffer start.
    let r = r#"byte_jump:1,0,from_beginning; content:"Q"; within:1;"#;
    assert!(m(r, b"\x04...Q"));
    assert!(!m(r, b"\x04..Q."));
    // A value that overflows 64 bits lands past the end (no wrap-around).
    assert!(!m("byte_jump:8,0,multiplier 1000;", &[0xff; 12]));
    assert!(!m(
        "byte_jump:8,0,from_beginning,post_offset -100;",
        &[0x7f; 12]
    ));
    // String numbers: the jump starts after the digits read.
    let r = r#"byte_jump:3,0,string,dec; content:"Q"; within:1;"#;
    assert!(m(r, b"2 xQ"));
}

#[test]
fn frame_keywords() {
    assert!(m("dsize:3;", b"abc") && !m("dsize:3;", b"ab"));
    assert!(m("dsize:2<>4;", b"abc") && !m("dsize:2<>4;", b"ab"));
    assert!(m("flags:AP;", b"x") && !m("flags:A;", b"x"));
    assert!(m("flags:A+;", b"x") && m("flags:*SA;", b"x") && !m("flags:!A;", b"x"));
    // Ignoring PSH through the mask makes the exact test see only ACK.
    assert!(m("flags:A,P;", b"x"));
    // `!` is "not all of these" in Suricata: ACK is set but SYN is not.
    assert!(m("flags:!SA;", b"x") && !m("flags:!AP;", b"x"));
    // `0`: no flag set; `!0`: some flag set.
    assert!(!m("flags:0;", b"x") && m("flags:!0;", b"x"));
    let p = prog("alert tcp any any -> any any (flags:0; sid:1;)");
    let mut none = tcp(b"x", None);
    none.tcp_flags = 0;
    assert!(rule_matches(&p, 0, &none));
    let p = prog("alert icmp any any -> any any (itype:8; icode:0; sid:1;)");
    let mut f = tcp(b"", None);
    f.ip_proto = 1;
    f.icmp_type = 8;
    assert!(rule_matches(&p, 0, &f));
    f.icmp_type = 0;
    assert!(!rule_matches(&p, 0, &f));
    assert!(!rule_matches(&p, 0, &tcp(b"x", None)));
}

#[test]
fn header_addresses_ports_direction() {
    let f = tcp(b"x", None);
    let hit = |rule: &str| rule_matches(&prog(rule), 0, &f);
    assert!(hit(
        "alert tcp $HOME_NET any -> $EXTERNAL_NET $HTTP_PORTS (sid:1;)"
    ));
    assert!(!hit(
        "alert tcp $EXTERNAL_NET any -> $HOME_NET any (sid:1;)"
    ));
    assert!(hit(
        "alert tcp $EXTERNAL_NET any <> $HOME_NET 40000 (sid:1;)"
    ));
    assert!(!hit("alert tcp any any -> any !80 (sid:1;)"));
    assert!(hit("alert tcp any 1024: -> 8.8.8.0/24 [443,80] (sid:1;)"));
    assert!(!hit("alert udp any any -> any any (sid:1;)"));
    assert!(hit("alert ip any any -> any any (sid:1;)"));
    assert!(!hit(
        "alert tcp any any -> any any (content:\"x\"; dsize:>1; sid:1;)"
    ));
}

#[test]
fn http_buffers() {
    let req = b"GET /admin%2Ephp?x=1 HTTP/1.1\r\nHost: Ex.com\r\nCookie: s=1\r\n\r\n";
    let mut c = Counters::default();
    let head = http_of(6, req, &mut c).unwrap();
    let hit = |rule: &str| rule_matches(&prog(rule), 0, &tcp(req, Some(&head)));
    assert!(hit(
        r#"alert http any any -> any any (content:"GET"; http_method; content:"/admin.php"; http_uri; sid:1;)"#
    ));
    assert!(!hit(
        r#"alert http any any -> any any (content:"POST"; http_method; sid:1;)"#
    ));
    assert!(hit(
        r#"alert tcp any any -> any any (http.uri.raw; content:"%2E"; sid:1;)"#
    ));
    assert!(hit(
        r#"alert tcp any any -> any any (uricontent:"x=1"; urilen:>5; sid:1;)"#
    ));
    assert!(!hit(
        r#"alert tcp any any -> any any (content:"s=1"; http_header; sid:1;)"#
    ));
    assert!(hit(
        r#"alert tcp any any -> any any (content:"s=1"; http_cookie; sid:1;)"#
    ));
    assert!(hit(
        r#"alert tcp any any -> any any (content:"ex.com"; http_host; sid:1;)"#
    ));
    // Relative matches do not cross buffers: "/admin" is searched in the uri alone.
    assert!(hit(
        r#"alert tcp any any -> any any (content:"GET"; http_method; content:"/admin"; http_uri; depth:6; sid:1;)"#
    ));
    // An HTTP rule without a head (a split head) does not match; the split is counted.
    let part = b"GET / HTTP/1.1\r\nHost: a";
    assert!(http_of(6, part, &mut c).is_none());
    assert_eq!(c.http_split, 1);
    let p = prog(r#"alert http any any -> any any (content:"GET"; sid:1;)"#);
    assert!(!rule_matches(&p, 0, &tcp(part, None)));
    assert!(http_of(17, req, &mut c).is_none());
}

#[test]
fn matching_lists_rules_in_order() {
    let mut p = Program::new();
    for (i, o) in [r#"content:"a";"#, r#"content:"z";"#, r#"content:"b";"#]
        .iter()
        .enumerate()
    {
        let r = parse_rule(
            &format!("alert tcp any any -> any any ({o} sid:{};)", i + 1),
            &Variables::default(),
        )
        .unwrap();
        p.add(&r).unwrap();
    }
    assert_eq!(matching(&p, &tcp(b"ab", None)), vec![0, 2]);
    // Each action keeps its own code (the verdict ranks drop above reject).
    for (action, code) in [("alert", 0), ("drop", 1), ("reject", 3), ("pass", 2)] {
        let p = prog(&format!("{action} tcp any any -> any any (sid:9;)"));
        assert_eq!(p.rules[0].action, code, "{action}");
    }
    assert!(!rule_matches(&p, 7, &tcp(b"ab", None)));
}

/// `flow:` on the metadata's connection state and direction (docs.suricata.io, "Flow
/// Keywords": to_server / from_client is the direction from the side that opened the
/// connection; established needs the connection established; not_established the opposite;
/// without a flow, no direction holds). ct states: 1 new, 2 established, 5 closing.
#[test]
fn flow_direction_and_state() {
    let rule = |f: &str| {
        let r = parse_rule(
            &format!("alert tcp any any -> any any (flow:{f}; sid:1;)"),
            &Variables::default(),
        )
        .unwrap();
        assert!(r.blockers_with(true).is_empty());
        let mut p = Program::new();
        p.add(&r).unwrap();
        p
    };
    let on = |p: &Program, ct_state: u8, ct_dir: u8| {
        let mut f = tcp(b"x", None);
        f.ct_state = ct_state;
        f.ct_dir = ct_dir;
        rule_matches(p, 0, &f)
    };
    // (options, [untracked, new from the originator, established originator,
    //  established reply, closing reply, new reply])
    let cases: [(&str, [bool; 6]); 8] = [
        ("to_server", [false, true, true, false, false, false]),
        ("from_client", [false, true, true, false, false, false]),
        ("to_client", [false, false, false, true, true, true]),
        ("from_server", [false, false, false, true, true, true]),
        ("established", [false, false, true, true, true, false]),
        ("not_established", [true, true, false, false, false, true]),
        (
            "established,to_server",
            [false, false, true, false, false, false],
        ),
        (
            "to_client,not_established",
            [false, false, false, false, false, true],
        ),
    ];
    let frames = [(0, 0), (1, 1), (2, 1), (2, 2), (5, 2), (1, 2)];
    for (opts, want) in cases {
        let p = rule(opts);
        let got = frames.map(|(s, d)| on(&p, s, d));
        assert_eq!(got, want, "flow:{opts}");
    }
    // stateless and no_stream test nothing on packets.
    assert!(on(&rule("stateless"), 0, 0));
    assert!(on(&rule("no_stream,established"), 2, 2));
    // only_stream is refused by the compiler too, not just the loader.
    let r = parse_rule(
        "alert tcp any any -> any any (flow:only_stream; sid:1;)",
        &Variables::default(),
    )
    .unwrap();
    assert!(Program::new().add(&r).is_err());
}

#[test]
fn pcre_searches_its_buffer_and_moves_the_detection_pointer() {
    assert!(m(
        r#"content:"GET"; pcre:"/^GET\s+\/[a-z]+\.php$/";"#,
        b"GET /x.php\n"
    ));
    assert!(!m(
        r#"content:"GET"; pcre:"/^GET\s+\/[a-z]+\.php$/";"#,
        b"GET /x.php\n\n"
    ));
    assert!(m(r#"pcre:"/evil/i";"#, b"an EVIL payload"));
    // Negated: the pattern must not occur.
    assert!(!m(r#"content:"a"; pcre:!"/evil/i";"#, b"a EVIL"));
    assert!(m(r#"content:"a"; pcre:!"/evil/i";"#, b"a good"));
    // A content relative to a pcre starts at the match end.
    assert!(m(
        r#"pcre:"/id=\d+/"; content:"&"; distance:0; within:1;"#,
        b"id=12&x"
    ));
    assert!(!m(
        r#"pcre:"/id=\d+/"; content:"x"; distance:0; within:1;"#,
        b"id=12&x"
    ));
}

#[test]
fn relative_pcre_subject_starts_at_the_detection_pointer() {
    // `^` of a relative pcre is the detection pointer (the subject starts there).
    assert!(m(r#"content:"key="; pcre:"/^\d{3}/R";"#, b"xx key=123"));
    assert!(!m(r#"content:"key="; pcre:"/^\d{3}/R";"#, b"xx key= 123"));
    // Without R the subject is the whole buffer.
    assert!(!m(r#"content:"key="; pcre:"/^\d{3}/";"#, b"xx key=123"));
    // Nothing before the detection pointer is searched.
    assert!(!m(r#"content:"b"; pcre:"/a/R";"#, b"ab"));
}

#[test]
fn a_pcre_is_retried_from_its_match_start_plus_one() {
    // The first `a.` (at 0) is not followed by "z"; its retry finds the one at 3.
    assert!(m(
        r#"pcre:"/a./"; content:"z"; distance:0; within:1;"#,
        b"abyabz"
    ));
    // And a content before a relative pcre is retried as well.
    assert!(m(r#"content:"k"; pcre:"/^=\d/R";"#, b"k=x k=1"));
    assert!(!m(r#"content:"k"; pcre:"/^=\d/R";"#, b"k=x k=y"));
}
