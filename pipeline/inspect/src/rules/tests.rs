//! Parser tests, one construct each, and the errors (file, line, keyword).

use super::*;

fn parse(opts: &str) -> Rule {
    parse_with("alert tcp any any -> any any", opts)
}

fn parse_with(head: &str, opts: &str) -> Rule {
    parse_rule(&format!("{head} ({opts} sid:1;)"), &Variables::default())
        .unwrap_or_else(|e| panic!("{head} ({opts}): {e:?}"))
}

fn parse_err(opts: &str) -> (String, String) {
    parse_rule(
        &format!("alert tcp any any -> any any ({opts} sid:1;)"),
        &Variables::default(),
    )
    .expect_err(opts)
}

fn content(r: &Rule, i: usize) -> (&Buffer, &Content) {
    match &r.detect[i] {
        (b, Detect::Content(c)) => (b, c),
        o => panic!("{o:?}"),
    }
}

#[test]
fn header_fields() {
    let r = parse_with(
        "reject http $HOME_NET any <> [1.2.3.4,!1.2.3.5] !$HTTP_PORTS",
        "",
    );
    assert_eq!(r.action, Action::Reject);
    assert_eq!(r.proto, Proto::Http);
    assert_eq!(r.direction, Direction::Both);
    assert!(r.dst.contains("1.2.3.4".parse().unwrap()));
    assert!(!r.dst.contains("1.2.3.5".parse().unwrap()));
    assert!(!r.dst_ports.contains(80) && r.dst_ports.contains(81));
    let r = parse_with("drop dns any any -> any 53", "");
    assert_eq!(r.proto, Proto::AppLayer("dns".into()));
    assert_eq!(r.blockers(), vec![Blocker::Protocol("dns".into())]);
    for (head, field) in [
        ("alarm tcp any any -> any any", "action"),
        ("alert t/cp any any -> any any", "protocol"),
        ("alert tcp 1.2.3.999 any -> any any", "source"),
        ("alert tcp any 99999 -> any any", "source port"),
        ("alert tcp any any => any any", "direction"),
        ("alert tcp any any -> $NOPE any", "destination"),
        ("alert tcp any any -> any [1:0]", "destination port"),
    ] {
        let e = parse_rule(&format!("{head} (sid:1;)"), &Variables::default()).unwrap_err();
        assert_eq!(e.0, field, "{head}: {e:?}");
    }
}

#[test]
fn meta_options() {
    let r = parse(
        r#"msg:"a \"b\" \w"; rev:3; gid:2; classtype:trojan-activity; priority:1; metadata:a b, c d; reference:url,x.org;"#,
    );
    assert_eq!(r.msg, "a \"b\" w");
    assert_eq!((r.sid, r.rev, r.gid, r.priority), (1, 3, 2, Some(1)));
    assert_eq!(r.classtype.as_deref(), Some("trojan-activity"));
    assert_eq!(r.metadata, vec!["a b, c d"]);
    assert_eq!(r.references, vec!["url,x.org"]);
    let kw = [
        "msg",
        "rev",
        "gid",
        "classtype",
        "priority",
        "metadata",
        "reference",
        "sid",
    ];
    assert_eq!(r.keywords, kw);
    assert!(r.blockers().is_empty());
    let e = parse_rule(
        "alert tcp any any -> any any (msg:\"x\";)",
        &Variables::default(),
    );
    assert_eq!(e.unwrap_err().0, "sid");
    assert_eq!(parse_err("rev:x;").0, "rev");
}

#[test]
fn content_modifiers() {
    let r = parse(
        r#"content:"A|42|"; nocase; offset:1; depth:5; fast_pattern; content:!"x"; distance:-2; within:4; rawbytes; content:"yz"; fast_pattern:0,1;"#,
    );
    let (_, a) = content(&r, 0);
    assert_eq!(a.pattern, b"AB");
    assert!(a.nocase && !a.negated);
    assert_eq!((a.offset, a.depth), (Some(1), Some(5)));
    assert_eq!(a.fast_pattern, FastPattern::Yes);
    let (_, b) = content(&r, 1);
    assert!(b.negated && b.rawbytes);
    assert_eq!((b.distance, b.within), (Some(-2), Some(4)));
    assert_eq!(
        content(&r, 2).1.fast_pattern,
        FastPattern::Part { offset: 0, len: 1 }
    );
    assert_eq!(
        content(&parse(r#"content:"abc"; fast_pattern:only;"#), 0)
            .1
            .fast_pattern,
        FastPattern::Only
    );
}

#[test]
fn content_modifier_errors() {
    for (opts, kw) in [
        ("nocase;", "nocase"),
        (r#"content:"a"; nocase; nocase;"#, "nocase"),
        (r#"content:"abc"; depth:2;"#, "depth"),
        (r#"content:"abc"; within:2;"#, "within"),
        (r#"content:"a"; offset:1; distance:1;"#, "content"),
        (r#"content:"a"; depth:1; within:4;"#, "content"),
        (r#"content:"a"; depth:0;"#, "depth"),
        (r#"content:"a"; offset:-1;"#, "offset"),
        (r#"content:"a"; offset:1; offset:2;"#, "offset"),
        (
            r#"content:"a"; distance:0; fast_pattern:only;"#,
            "fast_pattern",
        ),
        (r#"content:"ab"; fast_pattern:1,5;"#, "fast_pattern"),
        (
            r#"content:"ab"; fast_pattern:only; content:"c"; distance:0;"#,
            "fast_pattern",
        ),
        (
            r#"content:"ab"; fast_pattern:only; isdataat:1,relative;"#,
            "fast_pattern",
        ),
        (r#"content:"|4"#, "content"),
        ("content:;", "content"),
        (r#"content:"a"; http_uri; http_header;"#, "http_header"),
        ("http_uri;", "http_uri"),
        (r#"content:"Host"; http_host;"#, "http_host"),
    ] {
        assert_eq!(parse_err(opts).0, kw, "{opts}");
    }
}

#[test]
fn buffers_legacy_and_sticky() {
    let r = parse(
        r#"content:"GET"; http_method; uricontent:"/a"; content:"b"; http_uri; distance:0; isdataat:2,relative; http.header; content:"h"; isdataat:1; pkt_data; content:"p"; file_data; content:"f";"#,
    );
    let bufs: Vec<Buffer> = r.detect.iter().map(|(b, _)| *b).collect();
    use Buffer::*;
    assert_eq!(
        bufs,
        vec![HttpMethod, HttpUri, HttpUri, HttpUri, HttpHeader, HttpHeader, Payload, FileData]
    );
    assert!(
        parse_with("alert udp any any -> any any", r#"content:"a";"#)
            .blockers()
            .is_empty()
    );
    let e = parse_rule(
        r#"alert udp any any -> any any (content:"a"; http_uri; sid:1;)"#,
        &Variables::default(),
    );
    assert_eq!(e.unwrap_err().0, "protocol");
}

#[test]
fn numeric_keywords() {
    let r = parse(
        r#"dsize:10<>20; itype:>3; icode:<2; urilen:5,raw; isdataat:!10,relative; flags:S+,12;"#,
    );
    assert_eq!(r.dsize, Some(Range::Between(10, 20)));
    assert_eq!(r.itype, Some(Range::Gt(3)));
    assert_eq!(r.icode, Some(Range::Lt(2)));
    assert_eq!(
        r.detect[0],
        (Buffer::HttpRawUri, Detect::UriLen(Range::Eq(5)))
    );
    assert_eq!(
        r.detect[1].1,
        Detect::IsDataAt {
            n: 10,
            negated: true,
            relative: true
        }
    );
    assert_eq!(
        r.flags,
        Some(TcpFlags {
            flags: 0x02,
            mode: FlagMode::All,
            ignore: 0xc0
        })
    );
    assert_eq!(
        parse("flags:!FA;").flags.map(|f| (f.flags, f.mode)),
        Some((0x11, FlagMode::Not))
    );
    assert_eq!(
        parse("flags:*SR;").flags.map(|f| f.mode),
        Some(FlagMode::Any)
    );
    assert_eq!(
        parse("flags:0;").flags.map(|f| (f.flags, f.mode)),
        Some((0, FlagMode::Exact))
    );
    for (opts, kw) in [
        ("dsize:20<>10;", "dsize"),
        ("dsize:x;", "dsize"),
        ("flags:SX;", "flags"),
        ("urilen:5,odd;", "urilen"),
        ("isdataat:5,backwards;", "isdataat"),
    ] {
        assert_eq!(parse_err(opts).0, kw, "{opts}");
    }
}

#[test]
fn byte_keywords() {
    let r = parse(
        "byte_test:2,!&,0x0F,-3,relative,little,bitmask 0xF0; byte_test:4,>=,010,0,string,hex; \
         byte_jump:4,12,relative,align,multiplier 2,post_offset -4,from_beginning,big;",
    );
    let Detect::ByteTest(t) = &r.detect[0].1 else {
        panic!()
    };
    assert_eq!(
        (t.nbytes, t.negated, t.op, t.value, t.offset),
        (2, true, ByteOp::And, 15, -3)
    );
    assert!(t.relative);
    assert_eq!((t.format, t.bitmask), (NumFormat::LittleEndian, Some(0xF0)));
    let Detect::ByteTest(t) = &r.detect[1].1 else {
        panic!()
    };
    assert_eq!(
        (t.op, t.value, t.format),
        (ByteOp::Ge, 8, NumFormat::String(16))
    );
    let Detect::ByteJump(j) = &r.detect[2].1 else {
        panic!()
    };
    assert_eq!(
        (j.nbytes, j.offset, j.multiplier, j.post_offset),
        (4, 12, 2, -4)
    );
    assert!(j.relative && j.align && j.from_beginning);
    for (opts, kw) in [
        ("byte_test:9,=,1,0;", "byte_test"),
        ("byte_test:2,~,1,0;", "byte_test"),
        ("byte_test:2,=,1;", "byte_test"),
        ("byte_test:2,=,1,0,hex;", "byte_test"),
        ("byte_test:2,=,1,0,dce;", "byte_test"),
        ("byte_jump:4;", "byte_jump"),
        ("byte_jump:4,0,multiplier 0;", "byte_jump"),
        ("byte_jump:30,0,string,dec;", "byte_jump"),
    ] {
        assert_eq!(parse_err(opts).0, kw, "{opts}");
    }
    // byte_extract variables are not supported: the rule is skipped for them, not malformed.
    let r = parse(r#"byte_test:2,=,myvar,0;"#);
    assert_eq!(
        r.blockers(),
        vec![Blocker::Keyword("byte_test with a variable".into())]
    );
}

#[test]
fn flow_and_state_keywords_block_with_their_reason() {
    let r = parse("flow:established,to_server; flowbits:set,x; flowbits:noalert; threshold:type limit, track by_src, count 1, seconds 60;");
    let f = r.flow.unwrap();
    assert!(f.established && f.to_server && !f.to_client);
    assert_eq!(
        r.flowbits,
        vec![
            Flowbit {
                cmd: FlowbitCmd::Set,
                names: vec!["x".into()]
            },
            Flowbit {
                cmd: FlowbitCmd::NoAlert,
                names: vec![]
            }
        ]
    );
    assert_eq!(
        r.threshold,
        Some(Threshold {
            kind: ThresholdKind::Limit,
            track: Track::BySrc,
            count: 1,
            seconds: 60
        })
    );
    // With a flow table they load; only_stream still needs reassembly.
    assert!(r.blockers_with(true).is_empty());
    assert_eq!(
        parse("flow:only_stream,to_server;").blockers_with(true),
        vec![Blocker::Stream]
    );
    assert_eq!(
        r.blockers(),
        vec![
            Blocker::FlowTable("flow".into()),
            Blocker::FlowTable("flowbits".into()),
            Blocker::FlowTable("threshold".into())
        ]
    );
    assert!(parse("flow:stateless;").blockers().is_empty());
    assert!(parse("flow:no_stream;").blockers().is_empty());
    assert_eq!(parse("flow:only_stream;").blockers(), vec![Blocker::Stream]);
    assert_eq!(
        parse("flow:from_server;").flow.map(|f| f.to_client),
        Some(true)
    );
    assert_eq!(parse_err("flow:sideways;").0, "flow");
    assert_eq!(parse_err("flow:to_server,to_client;").0, "flow");
    let r = parse(
        r#"content:"a"; pcre:"/(a)\d\;?\1/Ri"; detection_filter:track by_src, count 5, seconds 1;"#,
    );
    assert_eq!(
        r.blockers(),
        vec![
            Blocker::Pcre("back-reference".into()),
            Blocker::FlowTable("detection_filter".into())
        ]
    );
    // A pcre with a DFA blocks nothing.
    let r = parse(r#"content:"a"; pcre:"/a\d\;?/Ri";"#);
    assert!(r.blockers().is_empty());
    let r = parse(r#"pcre:"/x/U"; dns_query; content:"a"; ssl_state:client_hello;"#);
    assert_eq!(r.blockers()[0], Blocker::Keyword("dns_query".into()));
    assert_eq!(r.detect[0].0, Buffer::HttpUri);
}

#[test]
fn too_many_payload_keywords_block() {
    let opts = r#"content:"a"; "#.repeat(MAX_DETECT + 1);
    let r = parse(&opts);
    assert_eq!(r.blockers(), vec![Blocker::TooManyKeywords(MAX_DETECT + 1)]);
    assert!(parse(&r#"content:"a"; "#.repeat(MAX_DETECT))
        .blockers()
        .is_empty());
}

#[test]
fn loader_reports_and_strict_errors() {
    let text = "# a comment\n\nalert tcp any any -> any any (content:\"a\"; sid:1;)\n\
                alert tcp any any -> any any (content:\"a\"; depth:0; sid:2;)\n\
                alert dns any any -> any any (sid:3;)\n\
                alert tcp any any -> any any (content:\"a\"; \\\n  pcre:\"/(a)\\1/\"; sid:4;)\n\
                alert tcp any any -> any any (flow:established; sid:5;)\n";
    let rep = load_str(text, "t.rules", &LoadOptions::default()).unwrap();
    assert_eq!(rep.loaded.len(), 1);
    assert_eq!(rep.loaded[0].line, 3);
    let reasons: Vec<(usize, Option<u32>, &str)> = rep
        .skipped
        .iter()
        .map(|s| (s.line, s.sid, s.reason.as_str()))
        .collect();
    assert_eq!(
        reasons,
        vec![
            (4, Some(2), "malformed depth"),
            (5, Some(3), "app-layer protocol dns"),
            (6, Some(4), "pcre: back-reference"),
            (8, Some(5), "needs the flow table (flow)"),
        ]
    );
    assert_eq!(rep.need_only_pcre(), 1);
    assert_eq!(rep.need_only_flow_table(), 1);
    assert_eq!(
        rep.per_file["t.rules"],
        load::FileCounts {
            loaded: 1,
            skipped: 4
        }
    );
    let strict = LoadOptions {
        strict: true,
        ..LoadOptions::default()
    };
    let e = load_str(text, "t.rules", &strict).unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.line, e.sid, e.keyword.as_str()),
        ("t.rules", 4, Some(2), "depth")
    );
    assert!(
        e.to_string().starts_with("t.rules:4: sid 2: depth: "),
        "{e}"
    );
    let e = load_file(std::path::Path::new("/nonexistent/x.rules"), &strict).unwrap_err();
    assert_eq!(e.keyword, "file");
    assert!(load_dir(std::path::Path::new("/nonexistent"), &strict).is_err());
}

#[test]
fn variables_given_at_load() {
    let opts = LoadOptions {
        vars: Variables::with(&[("HOME_NET", "[1.1.1.0/24]"), ("$HTTP_PORTS", "[80,8080]")]),
        strict: true,
        flow_table: false,
    };
    let rep = load_str(
        "alert tcp $EXTERNAL_NET any -> $HOME_NET $HTTP_PORTS (sid:1;)",
        "v.rules",
        &opts,
    )
    .unwrap();
    let r = &rep.loaded[0].rule;
    assert!(
        r.dst.contains("1.1.1.9".parse().unwrap()) && !r.dst.contains("10.0.0.1".parse().unwrap())
    );
    assert!(
        r.src.contains("10.0.0.1".parse().unwrap()) && !r.src.contains("1.1.1.9".parse().unwrap())
    );
    assert!(r.dst_ports.contains(8080));
}

#[test]
fn prefilter_pattern_choice() {
    let r = parse(r#"content:"ab"; content:!"longest"; content:"abc"; nocase; content:"xyz";"#);
    let p = r.prefilter().unwrap();
    assert_eq!(
        (p.buffer, p.pattern.as_slice(), p.nocase),
        (Buffer::Payload, &b"abc"[..], true)
    );
    let r = parse(r#"content:"abcdef"; content:"GET"; http_method; fast_pattern;"#);
    assert_eq!(r.prefilter().unwrap().buffer, Buffer::HttpMethod);
    let r = parse(r#"content:"abcdef"; fast_pattern:2,3;"#);
    assert_eq!(r.prefilter().unwrap().pattern, b"cde");
    assert_eq!(parse(r#"content:!"x"; dsize:3;"#).prefilter(), None);
}

#[test]
fn flowbits_parse_with_or_groups() {
    let r = parse("flowbits:isset,a|b; flowbits:isnotset, c ;");
    assert_eq!(r.flowbits[0].names, vec!["a", "b"]);
    assert_eq!(r.flowbits[0].cmd, FlowbitCmd::IsSet);
    assert_eq!(r.flowbits[1].names, vec!["c"]);
    assert_eq!(r.flowbits[1].cmd, FlowbitCmd::IsNotSet);
}

#[test]
fn malformed_flow_flowbits_threshold_name_the_keyword() {
    for (opts, kw, why) in [
        ("flowbits:sett,a;", "flowbits", "unknown flowbits command"),
        ("flowbits:set;", "flowbits", "needs a name"),
        ("flowbits:set,a|b;", "flowbits", "only with isset"),
        ("flowbits:noalert,a;", "flowbits", "takes no name"),
        ("flowbits:isset,a|;", "flowbits", "bad flowbit name"),
        (
            "threshold:type limit, track by_src, count 1;",
            "threshold",
            "no 'seconds'",
        ),
        (
            "threshold:type sometimes, track by_src, count 1, seconds 1;",
            "threshold",
            "unknown type",
        ),
        (
            "threshold:type limit, track by_flow, count 1, seconds 1;",
            "threshold",
            "unsupported track",
        ),
        (
            "threshold:type limit, track by_src, count x, seconds 1;",
            "threshold",
            "not a valid number",
        ),
        (
            "threshold:type limit, type both, track by_src, count 1, seconds 1;",
            "threshold",
            "given twice",
        ),
        (
            "threshold:type limit, track by_src, count 0, seconds 1;",
            "threshold",
            "count 0",
        ),
        ("threshold:limit;", "threshold", "not 'name value'"),
        (
            "detection_filter:type limit, track by_src, count 1, seconds 1;",
            "detection_filter",
            "unknown option",
        ),
        (
            "detection_filter:track by_src, count 1;",
            "detection_filter",
            "no 'seconds'",
        ),
        (
            "detection_filter:track by_src, count 1, seconds 0;",
            "detection_filter",
            "seconds 0",
        ),
        ("flow:to_server,sideways;", "flow", "unknown flow option"),
    ] {
        let (k, msg) = parse_err(opts);
        assert_eq!(k, kw, "{opts}");
        assert!(msg.contains(why), "{opts}: {msg}");
    }
    // Through the loader, in strict mode: file, line, sid and keyword.
    let text = "\n\nalert tcp any any -> any any (msg:\"x\"; threshold:type limit; sid:77;)\n";
    let strict = LoadOptions {
        strict: true,
        flow_table: true,
        ..LoadOptions::default()
    };
    let e = load_str(text, "t.rules", &strict).unwrap_err();
    assert_eq!((e.file.as_str(), e.line, e.sid), ("t.rules", 3, Some(77)));
    assert_eq!(e.keyword, "threshold");
    assert!(
        e.to_string().starts_with("t.rules:3: sid 77: threshold: "),
        "{e}"
    );
}

#[test]
fn flow_table_option_loads_flow_rules() {
    let text = "alert tcp any any -> any any (msg:\"a\"; flow:established,to_server; content:\"x\"; sid:1;)\n\
                alert tcp any any -> any any (msg:\"b\"; flowbits:set,x; flowbits:noalert; sid:2;)\n\
                alert tcp any any -> any any (msg:\"c\"; flow:only_stream; sid:3;)\n";
    let off = load_str(text, "f.rules", &LoadOptions::default()).unwrap();
    assert_eq!(off.loaded.len(), 0);
    assert_eq!(off.skipped[0].reason, "needs the flow table (flow)");
    assert_eq!(off.skipped[1].reason, "needs the flow table (flowbits)");
    let on = LoadOptions {
        flow_table: true,
        ..LoadOptions::default()
    };
    let rep = load_str(text, "f.rules", &on).unwrap();
    let sids: Vec<u32> = rep.loaded.iter().map(|l| l.rule.sid).collect();
    assert_eq!(sids, [1, 2]);
    assert_eq!(
        rep.skipped[0].reason,
        "needs stream reassembly (flow:only_stream)"
    );
}
