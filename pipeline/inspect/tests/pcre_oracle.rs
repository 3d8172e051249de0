//! The `pcre` DFA tables against PCRE2: property-generated patterns of the regular subset
//! (classes, alternation, repeats, anchors, caseless, `m` / `s`, `$` before a final newline,
//! ungreedy, anchored) on generated buffers, from every subject start (`R`) and search start
//! (Suricata's retry from the last match start + 1): matched, the match end and the match
//! start equal PCRE2's.

mod common;

use common::pcre2::Pcre2;
use pktwarp_inspect::pcre::{compile, view};
use proptest::prelude::*;

fn leaf() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a", "b", "A", "\\n", "\\x0a", "1", " ", "_", "[ab]", "[^a]", "[a-c]", "[^\\n]", "\\d",
        "\\w", "\\s", "\\W", "\\S", ".", "^", "$", "\\b", "\\B", "\\A", "\\z", "\\Z", "\\x41",
        "[[:alpha:]]", "[\\x00-\\x20]", "\\h", "\\N", "(?i)a", "(?s).", "(?m)$",
    ])
    .prop_map(str::to_string)
}

fn pattern() -> impl Strategy<Value = String> {
    leaf().prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 2..4).prop_map(|v| v.concat()),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}|{b}")),
            inner.clone().prop_map(|a| format!("(?:{a})")),
            inner.clone().prop_map(|a| format!("({a})")),
            (
                inner,
                prop::sample::select(vec!["*", "+", "?", "{1,2}", "{2}", "{0,3}", "{1,}"]),
                any::<bool>()
            )
                .prop_map(|(a, q, lazy)| format!("(?:{a}){q}{}", if lazy { "?" } else { "" })),
        ]
    })
}

fn flags() -> impl Strategy<Value = String> {
    prop::sample::subsequence(vec!['i', 'm', 's', 'A', 'E', 'G'], 0..4)
        .prop_map(|v| v.into_iter().collect())
}

fn buffer() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(b"abA\n 1_-B".to_vec()), 0..10)
}

/// Compares one (pattern, flags) on `bufs`; returns false when the DFA refused it.
fn agree(pat: &str, letters: &str, bufs: &[Vec<u8>]) -> Result<bool, TestCaseError> {
    let Ok(c) = compile(pat.as_bytes(), letters, true) else {
        return Ok(false);
    };
    let oracle = Pcre2::new(pat.as_bytes(), letters)
        .map_err(|e| TestCaseError::fail(format!("/{pat}/{letters}: PCRE2 refuses it ({e})")))?;
    let fwd = view(&c.forward).map_err(TestCaseError::fail)?;
    let rev_words = c.reverse.clone().unwrap_or_default();
    let rev = view(&rev_words).map_err(TestCaseError::fail)?;
    for buf in bufs {
        for sub in 0..=buf.len() {
            for from in sub..=buf.len() {
                let want = oracle
                    .find(&buf[sub..], from - sub)
                    .map_err(|e| TestCaseError::fail(format!("PCRE2 error {e}")))?
                    .map(|(s, e)| (s + sub, e + sub));
                let end = fwd.find_end(buf, sub, from);
                let got = end.map(|e| (rev.find_start(buf, sub, from, e), e));
                prop_assert_eq!(
                    got,
                    want.map(|(s, e)| (Some(s), e)),
                    "/{}/{} on {:?} subject from {} search from {}",
                    pat,
                    letters,
                    String::from_utf8_lossy(buf),
                    sub,
                    from
                );
            }
        }
    }
    Ok(true)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]
    #[test]
    fn generated_patterns_agree_with_pcre2(
        pat in pattern(),
        letters in flags(),
        bufs in prop::collection::vec(buffer(), 6),
    ) {
        // A refused pattern is a rejected case: proptest fails when over 1,024 are.
        prop_assume!(agree(&pat, &letters, &bufs)?);
    }
}

/// Hand-picked cases where PCRE and `regex-syntax` read the same text differently.
#[test]
fn pcre_specific_meanings_agree_with_pcre2() {
    let cases: &[(&str, &str)] = &[
        ("a$", ""),
        ("a$", "E"),
        ("a$", "m"),
        ("a\\Z", ""),
        ("a\\Z", "m"),
        ("$", ""),
        ("\\n$", ""),
        ("a$\\n", ""),
        ("a\\n?$", ""),
        ("^a", "m"),
        ("^\\n", "m"),
        ("a\\s", ""),
        ("\\x0b\\s", ""),
        ("[\\x0b]\\s", ""),
        ("\\h+", ""),
        ("\\v", ""),
        ("\\012", ""),
        ("\\0", ""),
        ("\\cA", ""),
        ("\\c[", ""),
        ("[]a]", ""),
        ("[^]a]", ""),
        ("[a-]", ""),
        ("[\\d-]", ""),
        ("a{,2}", ""),
        ("a{2,}", ""),
        ("a{x", ""),
        ("a b # c\n", "x"),
        ("[ ]b", "x"),
        ("(?i:a)b", ""),
        ("a(?i)b|c", ""),
        ("a+?b", "G"),
        ("\\Qa.b\\E+", ""),
        ("[[:^alpha:]]", ""),
        ("[[:upper:]]", "i"),
        ("\\bA\\b", "i"),
        ("(?:)", ""),
        ("a|", ""),
        ("(a|ab)(c|bcd)", ""),
        ("x*", "A"),
    ];
    let bufs: Vec<Vec<u8>> = [
        &b""[..],
        b"a",
        b"a\n",
        b"a\n\n",
        b"\na\nb\n",
        b"ab\x0b \t\xa0\x85\x01\x1b",
        b"A b\nAB_a]-",
        b"abcd\n",
        b"aa{,2}a{xa.bb",
        b"xxab",
        b"\n",
    ]
    .iter()
    .map(|b| b.to_vec())
    .collect();
    let mut compiled = 0;
    for (p, f) in cases {
        let mine = compile(p.as_bytes(), f, true);
        match Pcre2::new(p.as_bytes(), f) {
            Err(_) => assert!(mine.is_err(), "/{p}/{f}: PCRE2 refuses it, the DFA took it"),
            Ok(_) => {
                if agree(p, f, &bufs).unwrap_or_else(|e| panic!("{e}")) {
                    compiled += 1;
                }
            }
        }
    }
    // All but `{,2}` (read differently by PCRE2 versions) and `\Z` with `m` have a DFA.
    assert!(compiled >= cases.len() - 3, "{compiled} of {} compiled", cases.len());
}
