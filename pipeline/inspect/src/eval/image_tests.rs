//! The image layout (pinned numbers: `gpu-kernels/cuda/inspect_eval.cuh` asserts the same),
//! its round trip, bad images, the frame record and the verdict's action order.

use super::*;
use crate::http::{self, HttpParse};
use crate::rules::{parse_rule, Variables};

fn program(rules: &[&str]) -> Program {
    let mut p = Program::new();
    for r in rules {
        let r = parse_rule(r, &Variables::default()).unwrap_or_else(|e| panic!("{r}: {e:?}"));
        p.add(&r).unwrap();
    }
    p
}

const RULES: &[&str] = &[
    r#"alert tcp 10.0.0.0/8 any -> [8.8.8.8,2001:db8::/32] 80 (content:"abab"; nocase; content:"c"; distance:1; within:4; sid:1;)"#,
    r#"drop udp any 53 <> any !53 (byte_test:2,>,7,0,relative,little; byte_jump:1,0,align; isdataat:!3,relative; dsize:>2; sid:2;)"#,
    r#"pass http any any -> any any (http.uri; content:"/x"; http.method; content:"GET"; urilen:<9; sid:3;)"#,
    r#"reject icmp any any -> any any (itype:8; icode:0; sid:4;)"#,
    r#"alert tcp any any -> any any (flags:S,12; content:!"zz"; offset:1; depth:5; sid:5;)"#,
];

#[test]
fn record_layout_is_pinned() {
    assert_eq!(size_of::<Op>(), 40);
    assert_eq!(
        [
            offset_of!(Op, flags),
            offset_of!(Op, nbytes),
            offset_of!(Op, a),
            offset_of!(Op, b),
            offset_of!(Op, pat_off),
            offset_of!(Op, pat_len),
            offset_of!(Op, value),
            offset_of!(Op, mask)
        ],
        [2, 4, 8, 12, 16, 20, 24, 32]
    );
    assert_eq!(size_of::<RuleHead>(), 96);
    assert_eq!(
        [
            offset_of!(RuleHead, action),
            offset_of!(RuleHead, src),
            offset_of!(RuleHead, dst),
            offset_of!(RuleHead, sport),
            offset_of!(RuleHead, dport),
            offset_of!(RuleHead, ops),
            offset_of!(RuleHead, dsize),
            offset_of!(RuleHead, itype),
            offset_of!(RuleHead, icode),
            offset_of!(RuleHead, has_flags),
            offset_of!(RuleHead, flow)
        ],
        [8, 12, 20, 28, 36, 44, 52, 64, 76, 88, 92]
    );
    assert_eq!(size_of::<AddrRange>(), 32);
    assert_eq!(size_of::<PortRange>(), 4);
    assert_eq!(size_of::<ImageHeader>(), 64);
    assert_eq!(size_of::<FrameRec>(), 272);
    assert_eq!(
        [
            offset_of!(FrameRec, data_off),
            offset_of!(FrameRec, ip_proto),
            offset_of!(FrameRec, has_http),
            offset_of!(FrameRec, buf_off),
            offset_of!(FrameRec, buf_len)
        ],
        [32, 40, 44, 48, 160]
    );
    assert_eq!(size_of::<Verdict>(), 8);
}

#[test]
fn image_round_trips_and_holds_the_records_at_their_offsets() {
    let p = program(RULES);
    let img = p.image().unwrap();
    assert_eq!(Program::from_image(&img).unwrap(), p);
    let b: Vec<u8> = img.iter().flat_map(|w| w.to_le_bytes()).collect();
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    assert_eq!(&b[..4], b"PWIE");
    assert_eq!(u32_at(14 * 4) as usize, b.len());
    // Rule 1 (the drop rule): sid, action, its dport span; its first op's kind and value.
    let (rules, ops) = (u32_at(8 * 4) as usize, u32_at(9 * 4) as usize);
    let r1 = rules + size_of::<RuleHead>();
    assert_eq!(u32_at(r1), 2);
    assert_eq!(b[r1 + 8], ACT_DROP);
    assert_eq!(b[r1 + 9], PROTO_UDP);
    assert_eq!(b[r1 + 11], 1, "<> is both ways");
    let first_op = u32_at(r1 + 44) as usize;
    let o = ops + first_op * size_of::<Op>();
    assert_eq!(b[o], OP_BYTE_TEST);
    assert_eq!(u64::from_le_bytes(b[o + 24..o + 32].try_into().unwrap()), 7);
    // The nocase pattern is stored lower-cased with its failure words beside it.
    let (pats, fail) = (u32_at(12 * 4) as usize, u32_at(13 * 4) as usize);
    assert_eq!(&b[pats..pats + 4], b"abab");
    let f: Vec<u32> = (0..4).map(|k| u32_at(fail + 4 * k)).collect();
    assert_eq!(f, [0, 0, 1, 2]);
    // Address keys: most significant word first (10.0.0.0/8 as ::ffff:10.0.0.0).
    let a = u32_at(10 * 4) as usize;
    let lo0 = u64::from_le_bytes(b[a..a + 8].try_into().unwrap());
    let lo1 = u64::from_le_bytes(b[a + 8..a + 16].try_into().unwrap());
    assert_eq!((lo0, lo1), (0, 0xffff_0a00_0000));
}

#[test]
fn kmp_failure_values() {
    assert_eq!(kmp_failure(b"aabaaab"), [0, 1, 0, 1, 2, 2, 3]);
    assert_eq!(kmp_failure(b"abcabd"), [0, 0, 0, 1, 2, 0]);
    assert!(kmp_failure(b"").is_empty());
}

#[test]
fn bad_images_are_refused_with_a_reason() {
    let img = program(RULES).image().unwrap();
    let msg = |v: &[u64]| Program::from_image(v).unwrap_err().to_string();
    assert!(msg(&[]).contains("header"), "{}", msg(&[]));
    let mut bad = img.clone();
    bad[0] ^= 1;
    assert!(msg(&bad).contains("magic"));
    assert!(msg(&img[..img.len() / 2]).contains("total"));
    // A rule whose op span runs past the ops.
    let mut p = program(RULES);
    p.rules[2].ops[1] = 1000;
    let e = msg(&p.image().unwrap());
    assert!(e.contains("rule 2 (sid 3)"), "{e}");
    let mut p = program(RULES);
    p.ops[0].pat_len = 10_000;
    assert!(msg(&p.image().unwrap()).contains("op 0"));
    let mut p =
        program(&[r#"alert tcp any any -> any any (byte_test:2,=,1,0,string,dec; sid:1;)"#]);
    p.ops[0].base = 40;
    assert!(msg(&p.image().unwrap()).contains("op 0: number base 40"));
    let mut p = program(RULES);
    p.fail[1] = 5;
    assert!(msg(&p.image().unwrap()).contains("failure value"));
    p.fail.pop();
    assert!(p.image().unwrap_err().to_string().contains("failure table"));
    // A section offset past the end.
    let mut bad = img.clone();
    bad[4] = (bad[4] & 0xffff_ffff) | (0xffff_0000u64 << 32);
    assert!(msg(&bad).contains("out of the image"), "{}", msg(&bad));
}

#[test]
fn frame_record_places_every_buffer_in_the_arena() {
    let seg = b"GET /a%41 HTTP/1.1\r\nHost: X.org\r\n\r\n";
    let HttpParse::Head(h) = http::parse(seg) else {
        panic!("not a head")
    };
    let f = Frame {
        ip_proto: 6,
        src: "10.0.0.1".parse().unwrap(),
        dst: "::1".parse().unwrap(),
        src_port: 1,
        dst_port: 80,
        tcp_flags: 0x18,
        icmp_type: 0,
        icmp_code: 0,
        ct_state: 0,
        ct_dir: 0,
        payload: seg,
        http: Some(&h),
    };
    let mut arena = vec![9u8; 5];
    let r = frame_record(&f, &mut arena).unwrap();
    assert_eq!(r.data_off, 5);
    let get = |b: Buffer| {
        let (o, l) = (r.buf_off[b as usize], r.buf_len[b as usize]);
        (l != ABSENT).then(|| &arena[(r.data_off + o) as usize..(r.data_off + o + l) as usize])
    };
    assert_eq!(get(Buffer::Payload), Some(&seg[..]));
    assert_eq!(get(Buffer::HttpUri), Some(&b"/aA"[..]));
    assert_eq!(get(Buffer::HttpHost), Some(&b"x.org"[..]));
    assert_eq!(get(Buffer::HttpStatCode), None);
    assert_eq!((r.has_http, r.dst), (1, [0, 1]));
}

#[test]
fn verdict_follows_the_action_order() {
    let p = program(&[
        "alert tcp any any -> any any (sid:1;)",
        "reject tcp any any -> any any (sid:2;)",
        "drop tcp any any -> any any (sid:3;)",
        "pass tcp any any -> any any (content:\"p\"; sid:4;)",
        "drop tcp any any -> any any (sid:5;)",
        "alert udp any any -> any any (sid:6;)",
    ]);
    let f = |payload: &'static [u8]| Frame {
        ip_proto: 6,
        src: "10.0.0.1".parse().unwrap(),
        dst: "10.0.0.2".parse().unwrap(),
        src_port: 1,
        dst_port: 2,
        tcp_flags: 0,
        icmp_type: 0,
        icmp_code: 0,
        ct_state: 0,
        ct_dir: 0,
        payload,
        http: None,
    };
    let mut m = [7u8; 6];
    let v = verdict(&p, &f(b"p"), &[0, 1, 2, 3, 4, 5], &mut m);
    assert_eq!((v.rule, v.action, m), (3, ACT_PASS, [1, 1, 1, 1, 1, 0]));
    let v = verdict(&p, &f(b"x"), &[0, 1, 4, 2, 3], &mut m);
    assert_eq!(
        (v.rule, v.action),
        (4, ACT_DROP),
        "first drop in candidate order"
    );
    assert_eq!(m[..5], [1, 1, 1, 1, 0]);
    let v = verdict(&p, &f(b"x"), &[0, 1], &mut m);
    assert_eq!((v.rule, v.action), (1, ACT_REJECT));
    let v = verdict(&p, &f(b"x"), &[5, 99], &mut m);
    assert_eq!(v, Verdict::default());
    assert_eq!(m[..2], [0, 0]);
}
