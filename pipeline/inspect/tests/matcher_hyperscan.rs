//! Hyperscan as the oracle (feature `hyperscan`; CI runs `cargo test -p pktwarp-inspect
//! --features hyperscan`): its occurrences and match sets equal the image walker's and the
//! aho-corasick matcher's on generated sets and payloads, and on the ET Open fast patterns over
//! tcpdump's payloads, HTTP-like text and random bytes (sets, and every occurrence).
#![cfg(feature = "hyperscan")]

mod common;

use common::corpus::{etopen_fast_patterns, http_like, tcpdump_payloads};
use common::*;
use flow_rules::input::require_corpus;
use pktwarp_inspect::matcher::cpu::AcMatcher;
use pktwarp_inspect::matcher::hyperscan::Hyperscan;
use pktwarp_inspect::matcher::{Image, PatternSet};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn hyperscan_equals_the_image_walker(pats in patterns(24), buf in payload(200)) {
        let set = set_of_pairs(&pats);
        let img = Image::compile(&set).expect("compile");
        let mut want = Vec::new();
        img.find_all(&buf, &mut want);
        let mut hs = Hyperscan::new(&set, false).expect("hyperscan");
        let mut got = Vec::new();
        hs.find_all(&buf, &mut got).expect("scan");
        prop_assert_eq!(sorted(got), sorted(want));
        let mut hs1 = Hyperscan::new(&set, true).expect("hyperscan set-only");
        prop_assert_eq!(hs1.match_set(&buf).expect("scan"), img.match_set(&buf));
    }
}

#[test]
fn etopen_fast_patterns_over_real_and_generated_payloads() {
    let (Some(rules), Some(pcaps)) = (require_corpus("ids/etopen-2019"), require_corpus("pcaps"))
    else {
        return;
    };
    let pats = etopen_fast_patterns(&rules);
    assert!(pats.len() > 2000, "{} fast patterns", pats.len());
    let set = set_of_pairs(&pats);
    let img = Image::compile(&set).expect("compile");
    let ac = AcMatcher::new(&set).expect("aho-corasick");
    let mut hs = Hyperscan::new(&set, true).expect("hyperscan");
    let mut payloads = tcpdump_payloads(&pcaps, 4 << 20);
    assert!(payloads.len() > 1000, "{} payloads", payloads.len());
    payloads.extend(http_like(2000, 7));
    let mut rng = Rng(99);
    payloads.extend((0..200).map(|i| rng.bytes(1 + i * 7, &(0..=255).collect::<Vec<u8>>())));
    let mut hs_all = Hyperscan::new(&set, false).expect("hyperscan, every match");
    let (mut hits, mut differ) = (0, Vec::new());
    for (i, p) in payloads.iter().enumerate() {
        let want = hs.match_set(p).expect("scan");
        hits += want.count();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        hs_all.find_all(p, &mut a).expect("scan");
        img.find_all(p, &mut b);
        if img.match_set(p) != want || ac.match_set(p) != want || sorted(a) != sorted(b) {
            differ.push(i);
        }
    }
    assert!(
        differ.is_empty(),
        "{} payloads differ, first {:?}",
        differ.len(),
        &differ[..differ.len().min(10)]
    );
    // The set is realistic only if real traffic hits it.
    assert!(hits > 1000, "{hits} pattern hits");
}

#[test]
fn empty_set_and_set_only_find_all_refused() {
    let mut hs = Hyperscan::new(&PatternSet::new(), false).expect("empty set");
    assert_eq!(hs.match_set(b"abc").unwrap().count(), 0);
    let mut s = PatternSet::new();
    s.add(b"a", false).unwrap();
    let mut hs = Hyperscan::new(&s, true).unwrap();
    let e = hs.find_all(b"a", &mut Vec::new()).unwrap_err();
    assert!(e.to_string().contains("set-only"), "{e}");
}

/// Clones share the database but not the scratch: scanning from several threads at once
/// gives every thread the sets the image walker gives, and a clone outlives the original.
#[test]
fn clones_scan_on_their_own_threads_and_outlive_the_original() {
    let mut set = PatternSet::new();
    for p in [&b"abc"[..], b"bcd", b"zz", b"\x00\xff"] {
        set.add(p, p == b"zz").expect("pattern");
    }
    let img = Image::compile(&set).expect("image");
    let original = Hyperscan::new(&set, true).expect("hyperscan");
    let clones: Vec<Hyperscan> = (0..4)
        .map(|_| original.try_clone().expect("clone"))
        .collect();
    drop(original);
    let mut rng = Rng(7);
    let bufs: Vec<Vec<u8>> = (0..400)
        .map(|i| rng.bytes(i % 64, b"abcdzZ\x00\xff"))
        .collect();
    std::thread::scope(|s| {
        for mut hs in clones {
            let (bufs, img) = (&bufs, &img);
            s.spawn(move || {
                for b in bufs {
                    assert_eq!(hs.match_set(b).expect("scan"), img.match_set(b), "{b:?}");
                }
            });
        }
    });
    let empty = Hyperscan::new(&PatternSet::new(), true).expect("empty");
    let mut c = empty.try_clone().expect("clone of an empty set");
    assert_eq!(c.match_set(b"abc").expect("scan").count(), 0);
}
