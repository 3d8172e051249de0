//! The matcher's semantics: the image walker (full rows only, and mostly sparse rows) and the
//! aho-corasick CPU matcher against a brute-force reference; limits and bad images.

mod common;

use common::*;
use pktwarp_inspect::matcher::cpu::AcMatcher;
use pktwarp_inspect::matcher::{
    set_of, CompileOptions, Image, Match, MatchSet, MatcherError, PatternSet,
};
use proptest::prelude::*;

/// Only the root's row is full: every other state is sparse (failure links walked).
const SPARSE: CompileOptions = CompileOptions {
    dense_budget_bytes: 0,
};

fn all_agree(set: &PatternSet, buf: &[u8]) {
    let want = sorted(brute_force(set, buf));
    for opts in [CompileOptions::default(), SPARSE] {
        let img = Image::compile_with(set, &opts).expect("compile");
        let mut got = Vec::new();
        img.find_all(buf, &mut got);
        assert_eq!(sorted(got), want, "image walker, {opts:?}");
        assert_eq!(
            img.match_set(buf),
            set_of(&want, set.len()),
            "image set, {opts:?}"
        );
    }
    for dfa in [false, true] {
        let ac = AcMatcher::build(set, dfa).expect("aho-corasick");
        let mut got = Vec::new();
        ac.find_all(buf, &mut got);
        assert_eq!(sorted(got), want, "aho-corasick, dfa {dfa}");
        assert_eq!(
            ac.match_set(buf),
            set_of(&want, set.len()),
            "aho-corasick set, dfa {dfa}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn random_sets_and_payloads_agree(pats in patterns(24), buf in payload(200)) {
        all_agree(&set_of_pairs(&pats), &buf);
    }

    #[test]
    fn planted_patterns_agree(pats in patterns(16), filler in payload(4), flips in any::<u64>()) {
        let buf = planted(&pats, &filler, flips);
        all_agree(&set_of_pairs(&pats), &buf);
    }
}

fn set(pats: &[(&[u8], bool)]) -> PatternSet {
    let mut s = PatternSet::new();
    for (b, nc) in pats {
        s.add(b, *nc).expect("valid pattern");
    }
    s
}

#[test]
fn overlapping_duplicate_and_case_variants_all_reported() {
    let s = set(&[
        (b"abab", false),
        (b"bab", false),
        (b"b", false),
        (b"ABAB", false),
        (b"abab", true),
        (b"abab", false),
    ]);
    let img = Image::compile(&s).unwrap();
    let mut got = Vec::new();
    img.find_all(b"xababab", &mut got);
    let m = |pattern, end| Match { pattern, end };
    // "abab" ends at 5 and 7, "bab" at 5 and 7, "b" at 3, 5, 7; ABAB never (case-sensitive);
    // the nocase copy and the duplicate both report.
    let want = vec![
        m(0, 5),
        m(0, 7),
        m(1, 5),
        m(1, 7),
        m(2, 3),
        m(2, 5),
        m(2, 7),
        m(4, 5),
        m(4, 7),
        m(5, 5),
        m(5, 7),
    ];
    assert_eq!(sorted(got), want);
    assert_eq!(
        img.match_set(b"xABAB").iter().collect::<Vec<_>>(),
        vec![3, 4]
    );
}

#[test]
fn patterns_at_both_edges_and_whole_buffer() {
    let s = set(&[(b"GET ", false), (b"\r\n\r\n", false), (b"host", true)]);
    let img = Image::compile(&s).unwrap();
    assert_eq!(
        img.match_set(b"GET / HTTP/1.1\r\nHOST: a\r\n\r\n").count(),
        3
    );
    assert_eq!(img.match_set(b"GET ").iter().collect::<Vec<_>>(), vec![0]);
    assert_eq!(img.match_set(b"GET").count(), 0);
    assert_eq!(img.match_set(b"").count(), 0);
}

#[test]
fn longest_pattern_and_64k_buffer() {
    let long: Vec<u8> = (0..255u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut pats: Vec<(Vec<u8>, bool)> = vec![(long.clone(), false), (b"Zz".to_vec(), true)];
    let mut rng = Rng(0x5eed);
    for _ in 0..200 {
        let n = 1 + (rng.next() % 12) as usize;
        pats.push((rng.bytes(n, ALPHABET), rng.next() % 2 == 0));
    }
    let s = set_of_pairs(&pats);
    let mut buf = rng.bytes(65536, ALPHABET);
    buf[65536 - 255..].copy_from_slice(&long);
    all_agree(&s, &buf);
    assert!(Image::compile(&s).unwrap().match_set(&buf).contains(0));
}

#[test]
fn empty_set_matches_nothing() {
    let s = PatternSet::new();
    let img = Image::compile(&s).unwrap();
    assert_eq!(img.match_set(b"anything").words().len(), 0);
    let mut got = Vec::new();
    img.find_all(b"anything", &mut got);
    assert!(got.is_empty());
    assert_eq!(AcMatcher::new(&s).unwrap().match_set(b"x").count(), 0);
}

#[test]
fn bad_patterns_are_refused_with_their_index() {
    let mut s = PatternSet::new();
    s.add(b"ok", false).unwrap();
    assert_eq!(
        s.add(b"", false),
        Err(MatcherError::EmptyPattern { index: 1 })
    );
    let e = s.add(&[b'x'; 256], true).unwrap_err();
    assert_eq!(e, MatcherError::PatternTooLong { index: 1, len: 256 });
    assert!(e.to_string().contains("pattern 1: 256 bytes"), "{e}");
    assert!(s.add(&[b'x'; 255], true).is_ok());
}

#[test]
fn bitmap_of_wrong_size_or_stray_bit_is_refused() {
    assert!(MatchSet::from_words(vec![0, 0], 33).is_ok());
    assert!(MatchSet::from_words(vec![0], 33).is_err());
    let e = MatchSet::from_words(vec![0, 2], 33).unwrap_err();
    assert!(e.to_string().contains("bit 33"), "{e}");
}

fn sample_image() -> Image {
    let s = set(&[
        (b"abc", false),
        (b"bcd", true),
        (b"cde", false),
        (b"x", false),
    ]);
    Image::compile_with(&s, &SPARSE).unwrap()
}

#[test]
fn truncated_or_corrupt_images_are_refused_naming_the_field() {
    let w = sample_image().into_words();
    assert!(Image::from_words(w.clone()).is_ok());
    for n in 0..w.len() {
        assert!(
            Image::from_words(w[..n].to_vec()).is_err(),
            "truncated to {n}"
        );
    }
    let mut bad = w.clone();
    bad[0] ^= 1;
    let e = Image::from_words(bad).unwrap_err().to_string();
    assert!(e.contains("word 0 (magic)"), "{e}");
    // A sparse state failing to itself would loop the walkers forever.
    let mut bad = w.clone();
    let shdr = w[9] as usize;
    bad[shdr] = w[4];
    let e = Image::from_words(bad).unwrap_err().to_string();
    assert!(e.contains("sparse failure"), "{e}");
    let mut bad = w.clone();
    let pat = w[13] as usize;
    bad[pat + 1] = 200;
    let e = Image::from_words(bad).unwrap_err().to_string();
    assert!(e.contains("(pattern)"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any word changed to anything: refused, or (when still consistent) walked without a panic.
    #[test]
    fn mutated_images_never_panic(at in any::<prop::sample::Index>(), v in any::<u32>(), buf in payload(64)) {
        let mut w = sample_image().into_words();
        let i = at.index(w.len());
        w[i] = v;
        if let Ok(img) = Image::from_words(w) {
            let mut out = Vec::new();
            img.find_all(&buf, &mut out);
            let _ = img.match_set(&buf);
        }
    }
}

#[test]
fn sparse_and_dense_layouts_are_the_same_automaton() {
    let s = set(&[
        (b"he", false),
        (b"she", true),
        (b"his", false),
        (b"hers", false),
    ]);
    let dense = Image::compile(&s).unwrap();
    let sparse = Image::compile_with(&s, &SPARSE).unwrap();
    assert_eq!(dense.n_dense(), dense.n_states());
    assert_eq!(sparse.n_dense(), 1);
    assert_eq!(dense.n_states(), 10);
    assert!(sparse.size_bytes() < dense.size_bytes());
    for buf in [&b"ushers"[..], b"SHE HIS hers"] {
        assert_eq!(dense.match_set(buf), sparse.match_set(buf));
    }
}

#[test]
fn rule_contents_decode_hex_escapes_and_nocase() {
    let line = br#"alert http any any -> any any (msg:"x"; content:"GET|20|/a\"b"; nocase; content:!"|0d 0A|x"; content:"|ff|"; nocase; sid:1;)"#;
    let got = common::corpus::contents(line);
    assert_eq!(
        got,
        vec![
            (b"GET /a\"b".to_vec(), true),
            (Vec::new(), false),
            (vec![0xff], true)
        ]
    );
}

#[test]
fn an_image_over_the_size_limit_is_refused_before_it_is_built() {
    // Every state of the 255-byte chain lists every duplicate of "a": 255 x 300,000 outputs.
    let mut s = PatternSet::new();
    s.add(&[b'a'; 255], false).unwrap();
    for _ in 0..300_000 {
        s.add(b"a", false).unwrap();
    }
    match Image::compile(&s) {
        Err(MatcherError::ImageTooLarge { words }) => assert!(words > 255 * 300_000, "{words}"),
        other => panic!(
            "expected ImageTooLarge, got {:?}",
            other.map(|i| i.n_states())
        ),
    }
}
