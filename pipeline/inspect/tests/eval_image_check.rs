//! The image check the GPU probes run before an upload (`pw_insp_image_check` in
//! gpu-kernels/cuda/inspect_eval.cuh, compiled for the host by pktwarp-kernels' `host` feature):
//! it accepts the images the ET Open sets compile to, refuses an image of the previous layout
//! (version 1, 92-byte rules: what a stale inspect-bench binary wrote, which the kernels read at
//! a 96-byte stride and so walked out of the image), and refuses exactly what
//! `Program::from_image` refuses when a record word is corrupted.

mod common;

use pktwarp_inspect::eval::image::{ImageHeader, IMAGE_VERSION};
use pktwarp_inspect::eval::program::{Program, RuleHead};
use pktwarp_inspect::rules::{load_dir, parse_rule, LoadOptions, Variables};
use pktwarp_kernels::host::ffi;
use std::mem::{offset_of, size_of};

use common::Rng64 as Rng;

/// The C check on `bytes`: Ok, or its reason.
fn c_check(bytes: &[u8]) -> Result<(), String> {
    let mut why = [0u8; 256];
    // SAFETY: `bytes` is readable for its length (the callee reads no further, and copies
    // what it reads, so no alignment is needed); `why` is writable for its length and the
    // callee NUL-terminates within it.
    let ok = unsafe {
        ffi::pw_host_insp_image_check(
            bytes.as_ptr(),
            bytes.len() as u64,
            why.as_mut_ptr(),
            why.len() as u64,
        )
    };
    if ok == 1 {
        return Ok(());
    }
    let end = why.iter().position(|&b| b == 0).unwrap_or(why.len());
    Err(String::from_utf8_lossy(&why[..end]).into_owned())
}

fn bytes_of(img: &[u64]) -> Vec<u8> {
    img.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// `from_image` on bytes (padded to whole words, as the dump's reader would).
fn rust_check(bytes: &[u8]) -> Result<Program, String> {
    let words: Vec<u64> = bytes
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect();
    Program::from_image(&words).map_err(|e| e.to_string())
}

fn word(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn set_word(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Header word `field` (its byte offset in [`ImageHeader`]).
fn header(b: &[u8], field: usize) -> u32 {
    word(b, field)
}

/// The image of the previous layout (version 1): rule records without their last 4 bytes
/// (flow, state, pad), the sections after the rules moved down, offsets rewritten.
fn version_1(img: &[u8]) -> Vec<u8> {
    let h = |f: usize| header(img, f) as usize;
    let (nr, rules_at) = (
        h(offset_of!(ImageHeader, n_rules)),
        h(offset_of!(ImageHeader, rules_off)),
    );
    let old = size_of::<RuleHead>();
    let mut out = img[..rules_at].to_vec();
    for i in 0..nr {
        out.extend_from_slice(&img[rules_at + i * old..rules_at + i * old + old - 4]);
    }
    let shrink = nr * 4;
    let moved = |off: usize| (off - shrink).next_multiple_of(8);
    // Sections after the rules (ports, fail, patterns), each at its new aligned offset.
    let mut after = [
        offset_of!(ImageHeader, ports_off),
        offset_of!(ImageHeader, fail_off),
        offset_of!(ImageHeader, patterns_off),
    ];
    after.sort_by_key(|&f| h(f));
    let total = h(offset_of!(ImageHeader, total));
    for (k, &f) in after.iter().enumerate() {
        let start = h(f);
        let end = after.get(k + 1).map_or(total, |&g| h(g));
        out.resize(moved(start), 0);
        out.extend_from_slice(&img[start..end]);
        set_word(&mut out, f, moved(start) as u32);
    }
    out.resize(out.len().next_multiple_of(8), 0);
    let len = out.len() as u32;
    set_word(&mut out, offset_of!(ImageHeader, total), len);
    set_word(&mut out, offset_of!(ImageHeader, version), 1);
    // Version 1 had no pcre tables: those two header words were reserved, 0.
    set_word(&mut out, offset_of!(ImageHeader, n_dfa), 0);
    set_word(&mut out, offset_of!(ImageHeader, dfa_off), 0);
    out
}

/// 40 rules of every record kind, with ET-like sids (a sid read as a span is out of range).
fn sample_program() -> Program {
    let bodies = [
        r#"content:"abc"; nocase; offset:1; depth:9;"#,
        r#"content:"GET"; http_method; content:"/x"; http_uri;"#,
        r#"content:"a"; byte_test:2,>,7,0,relative,string,dec;"#,
        r#"content:"aab"; content:"b"; distance:0; within:4; isdataat:!2,relative;"#,
        "byte_jump:1,0,post_offset 2; dsize:>3;",
        r#"flow:to_server,established; content:"x";"#,
        r#"content:"q"; pcre:"/^q\d{2}$/Ri"; content:"z"; distance:0;"#,
    ];
    let heads = [
        "alert tcp any any -> any any",
        "alert http 10.0.0.0/8 any -> ![10.0.0.1,2001:db8::/32] 80",
        "drop udp any [1:1024] <> any !53",
        "alert ip any any -> any any",
    ];
    let mut p = Program::new();
    for i in 0..40 {
        let body = i % bodies.len();
        // HTTP buffers and flow: need a TCP head.
        let head = match body {
            1 => heads[1],
            5 => heads[0],
            _ => heads[i % heads.len()],
        };
        let t = format!("{head} ({} sid:{};)", bodies[body], 2_020_190 + i);
        let rule = parse_rule(&t, &Variables::default()).unwrap_or_else(|e| panic!("{t}: {e:?}"));
        p.add(&rule).unwrap_or_else(|e| panic!("{t}: {e}"));
    }
    p
}

#[test]
fn the_etopen_images_pass_the_check_loaded_and_flow_sets() {
    let Some(dir) = flow_rules::input::require_corpus("ids/etopen-2019") else {
        return;
    };
    for flow_table in [false, true] {
        let opts = LoadOptions {
            vars: Variables::with(&[("HOME_NET", "any"), ("EXTERNAL_NET", "any")]),
            strict: false,
            flow_table,
        };
        let rep = load_dir(&dir, &opts).expect("load");
        let mut p = Program::new();
        // Every loaded rule, state included (its flowbits / threshold are in the stage's
        // state section, not in the image; the image carries the rule's state flag).
        for l in &rep.loaded {
            p.add(&l.rule).expect("compile");
        }
        let img = p.image().expect("image");
        let b = bytes_of(&img);
        assert_eq!(c_check(&b), Ok(()), "flow_table {flow_table}");
        assert_eq!(rust_check(&b).as_ref(), Ok(&p), "flow_table {flow_table}");
        let flows = p.rules.iter().filter(|r| r.flow != 0).count();
        println!(
            "flow_table {flow_table}: {} rules ({flows} with flow:), {} bytes: accepted",
            p.rules.len(),
            b.len()
        );
        assert!(p.rules.len() > 400);
        assert_eq!(flows > 0, flow_table);
        // The image a binary of the previous layout writes for the same rules is refused.
        let old = version_1(&b);
        assert!(c_check(&old).unwrap_err().contains("version 1"));
    }
}

#[test]
fn an_image_of_the_previous_layout_is_refused() {
    let p = sample_program();
    let b = bytes_of(&p.image().expect("image"));
    assert_eq!(c_check(&b), Ok(()));
    let old = version_1(&b);
    // The conversion is faithful: the same words as the old writer's, rule by rule.
    let rules_at = header(&old, offset_of!(ImageHeader, rules_off)) as usize;
    assert_eq!(
        word(&old, rules_at + 92 + offset_of!(RuleHead, sid)),
        p.rules[1].sid
    );
    let why = c_check(&old).unwrap_err();
    assert!(
        why.contains(&format!(
            "version 1, this code reads version {IMAGE_VERSION}"
        )),
        "{why}"
    );
    assert!(rust_check(&old).is_err());
    // Even with its version forged, the 96-byte stride reads spans that are out of range.
    let mut forged = old.clone();
    set_word(&mut forged, offset_of!(ImageHeader, version), IMAGE_VERSION);
    let why = c_check(&forged).unwrap_err();
    assert!(why.starts_with("rule "), "{why}");
    assert!(rust_check(&forged).is_err());
}

#[test]
fn bad_headers_are_refused_with_their_reason() {
    let b = bytes_of(&sample_program().image().expect("image"));
    assert!(c_check(&b[..63]).unwrap_err().contains("shorter than"));
    let mut m = b.clone();
    m[0] ^= 1;
    assert!(c_check(&m).unwrap_err().contains("magic"));
    assert!(c_check(&b[..b.len() - 8]).unwrap_err().contains("total"));
    let mut m = b.clone();
    let ops = header(&b, offset_of!(ImageHeader, ops_off));
    set_word(&mut m, offset_of!(ImageHeader, ops_off), ops + 4);
    assert!(c_check(&m).unwrap_err().contains("section ops"));
    let mut m = b.clone();
    set_word(&mut m, offset_of!(ImageHeader, n_addrs), u32::MAX);
    assert!(c_check(&m).unwrap_err().contains("section addrs"));
}

/// Each record word of the rules, ops and failure sections set to a value near a bound (or
/// anything): the C check refuses exactly what `from_image` refuses. Header words: the C
/// check refuses at least what `from_image` refuses (it also wants aligned offsets and
/// sections inside `total`).
#[test]
fn the_c_check_refuses_what_from_image_refuses() {
    let p = sample_program();
    assert!(!p.dfa.is_empty(), "the sample has pcre tables");
    let b = bytes_of(&p.image().expect("image"));
    let h = |f: usize| header(&b, f) as usize;
    let sections = [
        (h(offset_of!(ImageHeader, rules_off)), p.rules.len() * 96),
        (h(offset_of!(ImageHeader, ops_off)), p.ops.len() * 40),
        (h(offset_of!(ImageHeader, fail_off)), p.fail.len() * 4),
        (h(offset_of!(ImageHeader, dfa_off)), p.dfa.len() * 4),
    ];
    let mut r = Rng(0x5eed_1e55_0f1a_6e77);
    let (mut refused, mut accepted) = (0, 0);
    for round in 0..6000 {
        let mut m = b.clone();
        let header_word = round % 8 == 0;
        let at = if header_word {
            4 * r.below(16) as usize
        } else {
            let (start, len) = *r.pick(&sections);
            start + 4 * r.below(len as u64 / 4) as usize
        };
        let old = word(&m, at);
        let n = *r.pick(&[
            p.rules.len(),
            p.ops.len(),
            p.addrs.len(),
            p.ports.len(),
            p.patterns.len(),
            64,
        ]) as u32;
        let any = r.next() as u32;
        let v = *r.pick(&[
            0,
            1,
            n.wrapping_sub(1),
            n,
            n + 1,
            old.wrapping_add(1),
            old.wrapping_sub(1),
            old ^ 0x100,
            u32::MAX,
            any,
        ]);
        set_word(&mut m, at, v);
        let (c, rust) = (c_check(&m), rust_check(&m));
        if header_word {
            assert!(
                rust.is_ok() || c.is_err(),
                "header byte {at} = {v}: C accepts, from_image says {rust:?}"
            );
        } else {
            assert_eq!(
                c.is_ok(),
                rust.is_ok(),
                "byte {at}: {old} -> {v}: C {c:?}, from_image {:?}",
                rust.as_ref().err()
            );
        }
        if c.is_ok() {
            accepted += 1;
        } else {
            refused += 1;
        }
    }
    println!("{accepted} corrupted images accepted, {refused} refused");
    assert!(accepted > 1000 && refused > 1000, "{accepted} / {refused}");
}
