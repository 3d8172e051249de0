//! The CUDA full check (gpu-kernels/cuda/inspect_eval.cuh, compiled for the host through
//! host/inspect_eval_host.cpp by pktwarp-kernels' `host` feature) equals the Rust evaluator
//! (pktwarp_inspect::eval) on every output: each candidate's match flag and each frame's
//! verdict (rule and action), frame by frame and rule by rule. The Rust side runs from the
//! program read back from the very image the CUDA gets. Cases: generated rules and frames
//! (every payload keyword, HTTP buffers, header tests), hostile payloads that hit the search
//! limit, and the loaded ET Open rules over the tcpdump captures (the external corpus).

mod common;

use pktwarp_inspect::eval::decode::decode;
use pktwarp_inspect::eval::image::{frame_record, verdict, FrameRec, Verdict, NO_RULE};
use pktwarp_inspect::eval::program::{AddrRange, PortRange, Program, RuleHead};
use pktwarp_inspect::eval::{self, Counters, Frame};
use pktwarp_inspect::http::{self, HttpHead, HttpParse};
use pktwarp_inspect::rules::{parse_rule, Variables};
use pktwarp_kernels::host::ffi;
use std::mem::{offset_of, size_of};

use common::Rng64 as Rng;

/// Per frame, the candidates' match flags; per frame, the verdict.
type Outputs = (Vec<Vec<u8>>, Vec<Verdict>);

/// The batch through the host-compiled CUDA.
fn cuda(img: &[u64], frames: &[Frame], cands: &[Vec<u32>]) -> Outputs {
    let mut arena = Vec::new();
    let recs: Vec<FrameRec> = frames
        .iter()
        .map(|f| frame_record(f, &mut arena).expect("arena"))
        .collect();
    let mut off = vec![0u32];
    let mut flat = Vec::new();
    for c in cands {
        flat.extend_from_slice(c);
        off.push(flat.len() as u32);
    }
    let mut matched = vec![0xeeu8; flat.len()];
    let mut verdicts = vec![
        Verdict {
            rule: 0xdead,
            action: 0xee,
            _pad: [0; 3],
        };
        frames.len()
    ];
    // SAFETY: the image is a checked Program::image; `recs` holds frames.len() records whose
    // buffers lie in `arena`; `off` has frames.len() + 1 words and ends at flat.len(); every
    // candidate index is checked against the rule count by the callee; `matched` and
    // `verdicts` have one slot per candidate / frame; FrameRec and Verdict are the
    // #[repr(C)] mirrors of pw_insp_frame / pw_insp_verdict (layout test below).
    unsafe {
        ffi::pw_host_insp_batch(
            img.as_ptr(),
            recs.as_ptr().cast(),
            frames.len() as u32,
            arena.as_ptr(),
            off.as_ptr(),
            flat.as_ptr(),
            matched.as_mut_ptr(),
            verdicts.as_mut_ptr().cast(),
        );
    }
    let per_frame = off
        .windows(2)
        .map(|w| matched[w[0] as usize..w[1] as usize].to_vec())
        .collect();
    (per_frame, verdicts)
}

/// The batch through the Rust evaluator.
fn rust(p: &Program, frames: &[Frame], cands: &[Vec<u32>]) -> Outputs {
    let mut out = (Vec::new(), Vec::new());
    for (f, c) in frames.iter().zip(cands) {
        let mut m = vec![0xeeu8; c.len()];
        out.1.push(verdict(p, f, c, &mut m));
        out.0.push(m);
    }
    out
}

/// The image of `p` and the program read back from it (what the Rust side evaluates).
fn imaged(p: &Program) -> (Vec<u64>, Program) {
    let img = p.image().expect("image");
    let back = Program::from_image(&img).expect("read back");
    assert_eq!(&back, p);
    (img, back)
}

/// Both sides on the batch; every output compared. Returns the matches counted.
fn same(
    (img, back): &(Vec<u64>, Program),
    frames: &[Frame],
    cands: &[Vec<u32>],
    label: &dyn Fn(u32) -> String,
) -> usize {
    let (rm, rv) = rust(back, frames, cands);
    let (cm, cv) = cuda(img, frames, cands);
    let mut hits = 0;
    for (i, f) in frames.iter().enumerate() {
        for (j, &c) in cands[i].iter().enumerate() {
            assert!(rm[i][j] <= 1, "the Rust flag was not written");
            assert_eq!(
                rm[i][j],
                cm[i][j],
                "frame {i} rule {c} ({}): Rust {} CUDA {}; payload {:?}, http {}",
                label(c),
                rm[i][j],
                cm[i][j],
                String::from_utf8_lossy(f.payload),
                f.http.is_some()
            );
            hits += usize::from(rm[i][j]);
        }
        assert_eq!(rv[i], cv[i], "frame {i}: verdicts differ");
    }
    hits
}

#[test]
fn record_layout_equals_the_c_one() {
    let mut v = [0u32; 32];
    // SAFETY: the callee writes at most `cap` (32) words into `v`.
    let n = unsafe { ffi::pw_host_insp_layout(v.as_mut_ptr(), 32) } as usize;
    use pktwarp_inspect::eval::image::ImageHeader;
    use pktwarp_inspect::eval::program::Op;
    let want = [
        size_of::<ImageHeader>(),
        size_of::<Op>(),
        offset_of!(Op, a),
        offset_of!(Op, pat_off),
        offset_of!(Op, value),
        offset_of!(Op, mask),
        size_of::<RuleHead>(),
        offset_of!(RuleHead, action),
        offset_of!(RuleHead, src),
        offset_of!(RuleHead, ops),
        offset_of!(RuleHead, dsize),
        offset_of!(RuleHead, has_flags),
        offset_of!(RuleHead, flow),
        size_of::<AddrRange>(),
        size_of::<PortRange>(),
        size_of::<FrameRec>(),
        offset_of!(FrameRec, data_off),
        offset_of!(FrameRec, ip_proto),
        offset_of!(FrameRec, has_http),
        offset_of!(FrameRec, ct_state),
        offset_of!(FrameRec, ct_dir),
        offset_of!(FrameRec, buf_off),
        offset_of!(FrameRec, buf_len),
        size_of::<Verdict>(),
    ];
    let got: Vec<usize> = v[..n].iter().map(|&x| x as usize).collect();
    assert_eq!(got, want);
}

const ALPHA: &[u8] = b"abAB0:/ \r\n";

fn pattern(r: &mut Rng) -> Vec<u8> {
    let n = 1 + r.below(3) as usize;
    (0..n).map(|_| *r.pick(ALPHA)).collect()
}

fn hex(b: &[u8]) -> String {
    let h: Vec<String> = b.iter().map(|c| format!("{c:02x}")).collect();
    format!("|{}|", h.join(" "))
}

fn content(r: &mut Rng, o: &mut String) {
    let neg = if r.chance(15) { "!" } else { "" };
    o.push_str(&format!("content:{neg}\"{}\"; ", hex(&pattern(r))));
    if r.chance(30) {
        o.push_str("nocase; ");
    }
    match r.below(4) {
        0 => {
            if r.chance(60) {
                o.push_str(&format!("offset:{}; ", r.below(8)));
            }
            if r.chance(60) {
                o.push_str(&format!("depth:{}; ", 1 + r.below(10)));
            }
        }
        1 => {
            if r.chance(70) {
                o.push_str(&format!("distance:{}; ", r.int(-4, 6)));
            }
            if r.chance(60) {
                o.push_str(&format!("within:{}; ", 1 + r.below(10)));
            }
        }
        _ => {}
    }
}

fn numeric(r: &mut Rng) -> String {
    let mut s = String::new();
    if r.chance(30) {
        s.push_str(",relative");
    }
    match r.below(4) {
        0 => s.push_str(",little"),
        1 => {
            let f: &&str = r.pick(&[",string,dec", ",string,hex", ",string,oct"]);
            s.push_str(f);
        }
        _ => {}
    }
    if r.chance(15) {
        s.push_str(&format!(",bitmask 0x{:x}", 1 + r.below(0xfff)));
    }
    s
}

/// A `pcre` over the payload alphabet: classes, alternation, repeats, anchors, `$` before a
/// final newline, with PCRE and Suricata flags (relative, negated, caseless, multiline, ...).
fn pcre(r: &mut Rng, o: &mut String) {
    let atoms = [
        "a", "b", "A", "[ab]", "[^a]", "\\d", "\\s", "\\w", ".", "\\x3a", "/", "\\r?\\n",
    ];
    let mut pat = String::new();
    if r.chance(20) {
        pat.push('^');
    }
    for _ in 0..1 + r.below(4) {
        let a = *r.pick(&atoms);
        if r.chance(20) {
            let b = *r.pick(&atoms);
            pat.push_str(&format!("(?:{a}|{b})"));
        } else {
            pat.push_str(a);
        }
        if r.chance(40) {
            let q: &&str = r.pick(&["*", "+", "?", "{1,3}", "*?", "+?"]);
            pat.push_str(q);
        }
    }
    if r.chance(25) {
        pat.push('$');
    }
    if r.chance(10) {
        pat.push_str("\\b");
    }
    let mut flags = String::new();
    for (p, f) in [
        (40, 'R'),
        (20, 'i'),
        (15, 'm'),
        (15, 's'),
        (10, 'G'),
        (5, 'A'),
        (5, 'E'),
    ] {
        if r.chance(p) {
            flags.push(f);
        }
    }
    let neg = if r.chance(15) { "!" } else { "" };
    o.push_str(&format!("pcre:{neg}\"/{pat}/{flags}\"; "));
}

fn keyword(r: &mut Rng, o: &mut String) {
    match r.below(12) {
        10 | 11 => pcre(r, o),
        0..=4 => content(r, o),
        5 => {
            let neg = if r.chance(30) { "!" } else { "" };
            let rel = if r.chance(50) { ",relative" } else { "" };
            o.push_str(&format!("isdataat:{neg}{}{rel}; ", r.below(12)));
        }
        6 => {
            let op = r.pick(&["<", ">", "=", "<=", ">=", "&", "^", "!=", "!<"]);
            let n = 1 + r.below(4);
            // Values the payloads hold often (alphabet bytes, the numbers written in them), so
            // equality and the bounds of each comparison are hit.
            let v = match r.below(3) {
                0 => u64::from(*r.pick(ALPHA)),
                1 => *r.pick(&[0u64, 1, 7, 0x1f, 123, 0x6162, 0x4142]),
                _ => r.below(0x3100),
            };
            o.push_str(&format!(
                "byte_test:{n},{op},{v},{}{}; ",
                r.int(-2, 6),
                numeric(r)
            ));
        }
        7 => {
            let mut opts = numeric(r);
            for (p, s) in [
                (20, ",align".to_string()),
                (20, ",from_beginning".to_string()),
                (30, format!(",multiplier {}", 1 + r.below(3))),
                (30, format!(",post_offset {}", r.int(-3, 3))),
            ] {
                if r.chance(p) {
                    opts.push_str(&s);
                }
            }
            o.push_str(&format!(
                "byte_jump:{},{}{opts}; ",
                1 + r.below(3),
                r.below(5)
            ));
        }
        8 => {
            let b = r.pick(&[
                "http.uri",
                "http.method",
                "http.header",
                "http.host",
                "http.user_agent",
                "http.start",
                "http.request_line",
                "http.protocol",
                "http.uri.raw",
                "http.header_names",
                "pkt_data",
            ]);
            o.push_str(&format!("{b}; "));
        }
        _ => o.push_str(&format!("http.uri; urilen:{}; ", range(r))),
    }
}

fn range(r: &mut Rng) -> String {
    let a = r.below(30);
    match r.below(4) {
        0 => format!("{a}"),
        1 => format!("<{a}"),
        2 => format!(">{a}"),
        _ => format!("{a}<>{}", a + r.below(20)),
    }
}

/// `flow:` options as rules write them.
const FLOWS: &[&str] = &[
    "to_server",
    "to_client",
    "from_client",
    "from_server",
    "established",
    "not_established",
    "established,to_server",
    "to_client,established",
    "not_established,to_server",
    "stateless",
    "no_stream,to_client",
];

/// (ct_state, ct_dir) as the conntrack stage writes them: untracked, new and established from
/// the originator, established / closing / new / related / closed replies, invalid.
const CTS: &[(u8, u8)] = &[
    (0, 0),
    (1, 1),
    (2, 1),
    (2, 2),
    (5, 2),
    (1, 2),
    (3, 1),
    (6, 2),
    (4, 0),
];

fn gen_rule(r: &mut Rng, sid: u32) -> String {
    let action = r.pick(&["alert", "drop", "pass", "reject"]);
    let proto = r.pick(&["tcp", "tcp", "tcp", "udp", "ip", "icmp", "http"]);
    let addr = |r: &mut Rng| {
        *r.pick(&[
            "any",
            "any",
            "10.0.0.0/8",
            "!10.0.0.1",
            "[10.0.0.1,2001:db8::/32]",
        ])
    };
    let port = |r: &mut Rng| *r.pick(&["any", "any", "80", "[1:1024]", "!80"]);
    let dir = if r.chance(20) { "<>" } else { "->" };
    let mut o = String::new();
    for _ in 0..1 + r.below(4) {
        keyword(r, &mut o);
    }
    if r.chance(15) {
        o.push_str(&format!("dsize:{}; ", range(r)));
    }
    if r.chance(10) {
        let m = r.pick(&["", "+", "*", "!"]);
        let f = r.pick(&["S", "SA", "PA", "0", "A"]);
        o.push_str(&format!("flags:{m}{f}; "));
    }
    if r.chance(5) {
        o.push_str(&format!("itype:{}; ", range(r)));
    }
    if r.chance(10) {
        o.push_str(&format!("flow:{}; ", r.pick(FLOWS)));
    }
    let (sa, sp, da, dp) = (addr(r), port(r), addr(r), port(r));
    format!("{action} {proto} {sa} {sp} {dir} {da} {dp} ({o}sid:{sid};)")
}

/// A payload: random bytes of the pattern alphabet, or an HTTP request over them.
fn gen_payload(r: &mut Rng) -> Vec<u8> {
    let junk = |r: &mut Rng, n: u64| -> Vec<u8> {
        let len = r.below(n);
        let mut v: Vec<u8> = (0..len).map(|_| *r.pick(ALPHA)).collect();
        if r.chance(20) {
            v.extend_from_slice(b"0x1f 123 -7 ");
        }
        if r.chance(20) {
            v.extend((0..4).map(|_| r.below(256) as u8));
        }
        v
    };
    if r.chance(35) {
        let mut v = format!("{} /", r.pick(&["GET", "POST", "HEAD"])).into_bytes();
        v.extend(junk(r, 8).iter().filter(|c| !c.is_ascii_whitespace()));
        v.extend_from_slice(b" HTTP/1.1\r\nHost: aB.b0:80\r\nUser-Agent: ");
        v.extend(junk(r, 8).iter().filter(|&&c| c != b'\r' && c != b'\n'));
        v.extend_from_slice(b"\r\n\r\n");
        v.extend(junk(r, 10));
        return v;
    }
    junk(r, 40)
}

struct Owned {
    payload: Vec<u8>,
    http: Option<HttpHead>,
    proto: u8,
    ports: (u16, u16),
    flags: u8,
    addrs: (&'static str, &'static str),
    icmp: (u8, u8),
    ct: (u8, u8),
}

fn gen_frame(r: &mut Rng) -> Owned {
    let payload = gen_payload(r);
    let proto = *r.pick(&[6u8, 6, 6, 17, 1, 47]);
    let http = match (proto, http::parse(&payload)) {
        (6, HttpParse::Head(h)) => Some(*h),
        _ => None,
    };
    let port = |r: &mut Rng| *r.pick(&[80u16, 80, 443, 1000, 5000]);
    let addr =
        |r: &mut Rng| *r.pick(&["10.0.0.1", "10.9.9.9", "192.168.1.1", "2001:db8::5", "::1"]);
    Owned {
        payload,
        http,
        proto,
        ports: (port(r), port(r)),
        flags: *r.pick(&[0x02u8, 0x12, 0x18, 0x10, 0, 0xc2]),
        addrs: (addr(r), addr(r)),
        icmp: (r.below(10) as u8, r.below(2) as u8),
        ct: *r.pick(CTS),
    }
}

fn frame(o: &Owned) -> Frame<'_> {
    Frame {
        ip_proto: o.proto,
        src: o.addrs.0.parse().unwrap(),
        dst: o.addrs.1.parse().unwrap(),
        src_port: o.ports.0,
        dst_port: o.ports.1,
        tcp_flags: o.flags,
        icmp_type: o.icmp.0,
        icmp_code: o.icmp.1,
        ct_state: o.ct.0,
        ct_dir: o.ct.1,
        payload: &o.payload,
        http: o.http.as_ref(),
    }
}

#[test]
fn generated_rules_and_frames_agree() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut compiled, mut tried, mut hits, mut evals) = (0, 0, 0, 0);
    let mut with_pcre = 0usize;
    let mut actions = [0usize; 4];
    for round in 0..60 {
        let mut p = Program::new();
        let mut texts = Vec::new();
        while p.rules.len() < 40 {
            tried += 1;
            let t = gen_rule(&mut r, round * 1000 + tried);
            let Ok(rule) = parse_rule(&t, &Variables::default()) else {
                continue;
            };
            if rule.blockers_with(true).is_empty() && p.add(&rule).is_ok() {
                with_pcre += usize::from(t.contains("pcre:"));
                texts.push(t);
            }
        }
        compiled += p.rules.len();
        let owned: Vec<Owned> = (0..40).map(|_| gen_frame(&mut r)).collect();
        let frames: Vec<Frame> = owned.iter().map(frame).collect();
        // Every rule in order, or a shuffled subset with an out-of-range index.
        let cands: Vec<Vec<u32>> = (0..frames.len())
            .map(|_| {
                if r.chance(50) {
                    (0..p.rules.len() as u32).collect()
                } else {
                    let mut c: Vec<u32> = (0..8).map(|_| r.below(41) as u32).collect();
                    c.push(1000);
                    c
                }
            })
            .collect();
        evals += cands.iter().map(Vec::len).sum::<usize>();
        let label = |c: u32| texts.get(c as usize).cloned().unwrap_or_default();
        hits += same(&imaged(&p), &frames, &cands, &label);
        for f in &frames {
            let mut m = vec![0; p.rules.len()];
            let all: Vec<u32> = (0..p.rules.len() as u32).collect();
            let v = verdict(&p, f, &all, &mut m);
            if v.rule != NO_RULE {
                actions[v.action as usize] += 1;
            }
        }
    }
    println!("{compiled} rules of {tried} generated, {evals} evaluations, {hits} matches, verdicts {actions:?}");
    // Not a vacuous comparison: both outcomes are common and every action decides some frame.
    assert!(hits > evals / 50 && hits < evals / 2, "{hits} of {evals}");
    assert!(actions.iter().all(|&n| n > 10), "{actions:?}");
    assert!(compiled * 3 > tried as usize, "{compiled} of {tried}");
    // Rules with pcre are a good share of them.
    assert!(
        with_pcre * 5 > compiled,
        "{with_pcre} of {compiled} with pcre"
    );
}

#[test]
fn hostile_payloads_hit_the_search_limit_the_same_and_fast() {
    let rules = [
        // 1500 retries of the first content, each a search over the rest of the payload.
        format!(r#"alert tcp any any -> any any (content:"a"; content:"{}b"; distance:0; sid:1;)"#, "a".repeat(500)),
        format!(r#"alert tcp any any -> any any (content:"a"; nocase; content:"{}B"; nocase; distance:0; sid:2;)"#, "A".repeat(300)),
        r#"alert tcp any any -> any any (content:"a"; content:"a"; distance:0; content:"a"; distance:0; content:"b"; distance:0; within:1; sid:3;)"#.to_string(),
        r#"alert tcp any any -> any any (content:"a"; content:"aaaa"; distance:0; sid:4;)"#.to_string(),
        // Exactly at the limit: "b" found by the 3000th search (payload a{1500}b) ...
        r#"alert tcp any any -> any any (content:"a"; content:"b"; distance:0; within:1; sid:5;)"#.to_string(),
        // ... and one past it (payload c a{1500} b: the 3001st), or one before (c a{1499} b).
        r#"alert tcp any any -> any any (content:"c"; content:"a"; distance:0; content:"b"; distance:0; within:1; sid:6;)"#.to_string(),
    ];
    let mut p = Program::new();
    for t in &rules {
        p.add(&parse_rule(t, &Variables::default()).unwrap())
            .unwrap();
    }
    let long = vec![b'a'; 16_000];
    let short = b"aaaaaaaab".to_vec();
    let run = |pre: &[u8], n: usize| [pre, &vec![b'a'; n], b"b"].concat();
    let edges = [run(b"", 1500), run(b"c", 1500), run(b"c", 1499)];
    let owned: Vec<Owned> = [long, short]
        .into_iter()
        .chain(edges)
        .map(|payload| Owned {
            payload,
            http: None,
            proto: 6,
            ports: (1, 2),
            flags: 0x18,
            addrs: ("10.0.0.1", "10.0.0.2"),
            icmp: (0, 0),
            ct: (0, 0),
        })
        .collect();
    let frames: Vec<Frame> = owned.iter().map(frame).collect();
    let cands = vec![vec![0, 1, 2, 3, 4, 5]; 5];
    let t = std::time::Instant::now();
    let img = p.image().unwrap();
    let (cm, _) = cuda(&img, &frames, &cands);
    let (rm, _) = rust(&p, &frames, &cands);
    assert_eq!(cm, rm);
    // The long payload exhausts the limit for rules 1-3 (3000 searches over up to 16,000
    // bytes each); rule 4 matches at once. The short one is too short for rules 1 and 2.
    assert_eq!(rm[..2], [vec![0, 0, 0, 1, 0, 0], vec![0, 0, 1, 1, 1, 0]]);
    assert_eq!(
        (rm[2][4], rm[3][5], rm[4][5]),
        (1, 0, 1),
        "the limit's edge"
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        t.elapsed()
    );
}

/// The loaded ET Open rules and the raw frames of the tcpdump captures; None (recorded as not
/// run, a failure under CI) without the corpus.
fn et_corpus() -> Option<(Program, Vec<Vec<u8>>)> {
    let (p, files) = common::etopen_program_and_captures()?;
    let frames = files
        .iter()
        .filter_map(|f| common::ethernet_frames(f))
        .flatten()
        .collect();
    Some((p, frames))
}

/// The same rules with every header test opened (any protocol, address and port), so the
/// payload keywords of every rule run on every payload.
fn opened(p: &Program) -> Program {
    let mut open = p.clone();
    open.addrs.push(AddrRange::new(0, u128::MAX));
    open.ports.push(PortRange {
        lo: 0,
        hi: u16::MAX,
    });
    let (a, pt) = (open.addrs.len() as u32 - 1, open.ports.len() as u32 - 1);
    for r in &mut open.rules {
        (r.src, r.dst, r.sport, r.dport) = ([a, 1], [a, 1], [pt, 1], [pt, 1]);
        r.proto = 0;
        r.flow = 0;
    }
    open
}

/// The decoded frames of `raw` with their HTTP heads.
fn decoded(raw: &[Vec<u8>]) -> Vec<(Frame<'_>, Option<HttpHead>)> {
    let mut counters = Counters::default();
    raw.iter()
        .filter_map(|b| decode(b))
        .map(|fr| (fr, eval::http_of(fr.ip_proto, fr.payload, &mut counters)))
        .collect()
}

fn with_http<'a>(d: &'a [(Frame<'a>, Option<HttpHead>)]) -> Vec<Frame<'a>> {
    d.iter()
        .map(|(fr, h)| Frame {
            http: h.as_ref(),
            ..*fr
        })
        .collect()
}

#[test]
fn etopen_rules_over_the_tcpdump_payloads_agree() {
    let Some((p, raw)) = et_corpus() else {
        return;
    };
    let all: Vec<u32> = (0..p.rules.len() as u32).collect();
    let label = |c: u32| format!("sid {}", p.rules[c as usize].sid);
    let (both, open) = (imaged(&p), imaged(&opened(&p)));
    let (mut frames_seen, mut hits, mut open_hits) = (0usize, 0usize, 0usize);
    // Batches of 64 frames, every loaded rule a candidate of every frame.
    for chunk in raw.chunks(64) {
        let d = decoded(chunk);
        let frames = with_http(&d);
        let cands = vec![all.clone(); frames.len()];
        frames_seen += frames.len();
        hits += same(&both, &frames, &cands, &label);
        open_hits += same(&open, &frames, &cands, &label);
    }
    println!(
        "{} rules x {frames_seen} frames: {hits} matches, {open_hits} with the headers opened",
        p.rules.len()
    );
    assert!(
        frames_seen > 3000 && hits > 0,
        "{frames_seen} frames, {hits} hits"
    );
    assert!(open_hits > hits * 5, "{open_hits} with the headers opened");
}

/// The inputs of tools/gpu-probes/inspect_gpu_check.cu (`inspect-gpu-check.sh inputs DIR`):
/// the opened ET Open rules over every tcpdump frame, every rule a candidate of every frame,
/// and the Rust outputs the GPU must reproduce. Files are little-endian arrays: image.bin
/// (the image), frames.bin (`FrameRec`s), arena.bin, cand_off.bin / cand_rules.bin (u32),
/// expect_matched.bin (u8 per candidate), expect_verdicts.bin (`Verdict`s).
#[test]
#[ignore = "writes the GPU check's inputs: tools/gpu-probes/inspect-gpu-check.sh inputs DIR"]
fn write_gpu_inputs() {
    let dir = std::path::PathBuf::from(
        std::env::var_os("PW_INSP_GPU_DIR").expect("PW_INSP_GPU_DIR: the output folder"),
    );
    let Some((p, raw)) = et_corpus() else {
        return;
    };
    let p = opened(&p);
    let img = p.image().expect("image");
    let d = decoded(&raw);
    let frames = with_http(&d);
    let all: Vec<u32> = (0..p.rules.len() as u32).collect();
    let cands = vec![all; frames.len()];
    let mut arena = Vec::new();
    let mut frame_bytes = Vec::new();
    for f in &frames {
        let r = frame_record(f, &mut arena).expect("arena");
        // SAFETY: FrameRec is #[repr(C)], plain integers without padding holes (272 bytes,
        // pinned by the layout tests); viewing one as bytes reads initialized memory only.
        let b = unsafe {
            std::slice::from_raw_parts((&r as *const FrameRec).cast::<u8>(), size_of::<FrameRec>())
        };
        frame_bytes.extend_from_slice(b);
    }
    let (matched, verdicts) = rust(&p, &frames, &cands);
    let u32s = |v: &[u32]| -> Vec<u8> { v.iter().flat_map(|w| w.to_le_bytes()).collect() };
    let mut off = vec![0u32];
    for c in &cands {
        off.push(off[off.len() - 1] + c.len() as u32);
    }
    let verdict_bytes: Vec<u8> = verdicts
        .iter()
        .flat_map(|v| [&v.rule.to_le_bytes()[..], &[v.action, 0, 0, 0]].concat())
        .collect();
    std::fs::create_dir_all(&dir).expect("create the output folder");
    let files: [(&str, Vec<u8>); 7] = [
        (
            "image.bin",
            img.iter().flat_map(|w| w.to_le_bytes()).collect(),
        ),
        ("frames.bin", frame_bytes),
        ("arena.bin", arena),
        ("cand_off.bin", u32s(&off)),
        ("cand_rules.bin", u32s(&cands.concat())),
        ("expect_matched.bin", matched.concat()),
        ("expect_verdicts.bin", verdict_bytes),
    ];
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    println!(
        "{} rules x {} frames written to {}",
        p.rules.len(),
        frames.len(),
        dir.display()
    );
}

/// Every keyword at its edges, enumerated: each comparison of byte_test at, below and above
/// the value read (every number format), contents at every offset / depth / distance / within
/// around the buffer ends, isdataat around the length, byte_jump landing around the end.
#[test]
fn keyword_edges_agree() {
    let mut texts: Vec<String> = Vec::new();
    let mut add = |o: String| {
        texts.push(format!(
            "alert ip any any -> any any ({o} sid:{};)",
            texts.len() + 1
        ))
    };
    let formats = [
        (1, ""),
        (2, ""),
        (2, ",little"),
        (3, ",string,dec"),
        (4, ",string,hex"),
        (3, ",string,oct"),
        (2, ",bitmask 0x0ff0"),
    ];
    let values = [
        0u64, 1, 7, 0x1f, 0x20, 0x60, 0x61, 0x62, 0x616, 0x6162, 0x6261, 122, 123, 124, 511, 0x30,
    ];
    for (n, fmt) in formats {
        for op in ["<", ">", "=", "<=", ">=", "&", "^", "!="] {
            for v in values {
                for rel in ["", ",relative"] {
                    add(format!("byte_test:{n},{op},{v},0{rel}{fmt};"));
                }
            }
        }
    }
    for pat in ["ab", "AB", "b"] {
        for o in 0..4 {
            for d in 1..6 {
                add(format!(
                    r#"content:"{pat}"; nocase; offset:{o}; depth:{d};"#
                ));
                add(format!(r#"content:!"{pat}"; offset:{o}; depth:{d};"#));
            }
        }
        for dist in -3..4 {
            for w in 1..5 {
                add(format!(
                    r#"content:"a"; content:"{pat}"; distance:{dist}; within:{w};"#
                ));
                add(format!(
                    r#"content:"a"; content:!"{pat}"; distance:{dist}; within:{w};"#
                ));
            }
        }
    }
    // Self-overlapping patterns: a search that restarts from scratch after a partial match
    // (instead of the failure function) misses them.
    for pat in ["aab", "abab", "aabaaab", "AAB", "abaa"] {
        add(format!(r#"content:"{pat}"; nocase;"#));
        add(format!(r#"content:"{pat}"; depth:9;"#));
        add(format!(r#"content:"b"; content:"{pat}"; distance:-4;"#));
    }
    for k in 0..8 {
        for f in ["", "!"] {
            add(format!("isdataat:{f}{k};"));
            add(format!(r#"content:"a"; isdataat:{f}{k},relative;"#));
        }
    }
    for off in 0..3 {
        for post in -2..3 {
            for extra in [
                "",
                ",align",
                ",from_beginning",
                ",multiplier 2",
                ",relative",
            ] {
                add(format!(
                    "byte_jump:1,{off},post_offset {post}{extra}; isdataat:0,relative;"
                ));
                add(format!(
                    r#"byte_jump:1,{off},post_offset {post}{extra}; content:"b"; within:2;"#
                ));
            }
        }
    }
    // Combinations Suricata rejects (a depth shorter than the pattern) are left out.
    let mut p = Program::new();
    let tried = texts.len();
    texts.retain(|t| parse_rule(t, &Variables::default()).is_ok_and(|r| p.add(&r).is_ok()));
    assert!(texts.len() * 10 > tried * 9, "{} of {tried}", texts.len());
    let payloads: [&[u8]; 11] = [
        b"aaab",
        b"abaababaa",
        b"aabaabaaab",
        b"ab123 ",
        b"ba",
        b"0x1fz",
        b"-7 ",
        b"777b",
        b"\x02ab\x00ab",
        b"\x01\x02b",
        b"\x61\x62\x61",
    ];
    let owned: Vec<Owned> = payloads
        .iter()
        .map(|pl| Owned {
            payload: pl.to_vec(),
            http: None,
            proto: 17,
            ports: (1, 2),
            flags: 0,
            addrs: ("10.0.0.1", "10.0.0.2"),
            icmp: (0, 0),
            ct: (0, 0),
        })
        .collect();
    let frames: Vec<Frame> = owned.iter().map(frame).collect();
    let all: Vec<u32> = (0..p.rules.len() as u32).collect();
    let cands = vec![all; frames.len()];
    let hits = same(&imaged(&p), &frames, &cands, &|c| texts[c as usize].clone());
    let evals = p.rules.len() * frames.len();
    println!(
        "{} edge rules x {} payloads: {hits} matches",
        p.rules.len(),
        frames.len()
    );
    assert!(
        hits > evals / 5 && hits < evals * 4 / 5,
        "{hits} of {evals}"
    );
}

/// Every `flow:` option set on every connection state and direction: Rust == CUDA, and each
/// option both matches and fails somewhere.
#[test]
fn flow_keyword_agrees_on_every_state() {
    let mut p = Program::new();
    let mut texts = Vec::new();
    for (i, f) in FLOWS.iter().enumerate() {
        let t = format!("alert tcp any any -> any any (flow:{f}; sid:{};)", i + 1);
        let rule = parse_rule(&t, &Variables::default()).unwrap();
        assert!(rule.blockers_with(true).is_empty(), "{t}");
        p.add(&rule).unwrap();
        texts.push(t);
    }
    let owned: Vec<Owned> = CTS
        .iter()
        .map(|&ct| Owned {
            payload: b"x".to_vec(),
            http: None,
            proto: 6,
            ports: (40000, 80),
            flags: 0x18,
            addrs: ("10.0.0.1", "10.0.0.2"),
            icmp: (0, 0),
            ct,
        })
        .collect();
    let frames: Vec<Frame> = owned.iter().map(frame).collect();
    let all: Vec<u32> = (0..p.rules.len() as u32).collect();
    let cands = vec![all; frames.len()];
    let label = |c: u32| texts.get(c as usize).cloned().unwrap_or_default();
    let hits = same(&imaged(&p), &frames, &cands, &label);
    for (i, t) in texts.iter().enumerate() {
        let n = frames
            .iter()
            .filter(|f| eval::rule_matches(&p, i, f))
            .count();
        let always = t.contains("stateless");
        assert!(
            n > 0 && (always || n < frames.len()),
            "{t}: {n} of {}",
            frames.len()
        );
    }
    assert!(hits > 0);
}
