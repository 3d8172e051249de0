//! The `pcre` DFA tables against PCRE2: property-generated patterns of the regular subset
//! (classes, alternation, repeats, anchors, caseless, `m` / `s`, `$` before a final newline,
//! ungreedy, anchored) on generated buffers, from every subject start (`R`) and search start
//! (Suricata's retry from the last match start + 1): matched, the match end and the match
//! start equal PCRE2's.

mod common;

use common::pcre2::Pcre2;
use pktwarp_inspect::pcre::table::Table;
use pktwarp_inspect::pcre::{compile, view};
use proptest::prelude::*;

fn leaf() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a",
        "b",
        "A",
        "\\n",
        "\\x0a",
        "1",
        " ",
        "_",
        "[ab]",
        "[^a]",
        "[a-c]",
        "[^\\n]",
        "\\d",
        "\\w",
        "\\s",
        "\\W",
        "\\S",
        ".",
        "^",
        "$",
        "\\b",
        "\\B",
        "\\A",
        "\\z",
        "\\Z",
        "\\x41",
        "[[:alpha:]]",
        "[\\x00-\\x20]",
        "\\h",
        "\\N",
        "(?i)a",
        "(?s).",
        "(?m)$",
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
    assert!(
        compiled >= cases.len() - 3,
        "{compiled} of {} compiled",
        cases.len()
    );
}

/// A difference between the DFA (forward and reverse tables) and PCRE2 on one subject
/// (None: equal, or PCRE2 gave up).
fn differs(
    (fwd, rev): (&Table, &Table),
    oracle: &Pcre2,
    buf: &[u8],
    sub: usize,
    from: usize,
    stats: &mut EtStats,
) -> Option<String> {
    let want = match oracle.find(&buf[sub..], from - sub) {
        Ok(w) => w.map(|(s, e)| (s + sub, e + sub)),
        Err(_) => {
            stats.pcre2_errors += 1;
            return None;
        }
    };
    stats.searches += 1;
    let got = fwd
        .find_end(buf, sub, from)
        .map(|e| (rev.find_start(buf, sub, from, e).unwrap_or(usize::MAX), e));
    stats.matched += usize::from(got.is_some());
    (got != want).then(|| {
        format!(
            "DFA {got:?}, PCRE2 {want:?} on {:?} (subject from {sub}, search from {from})",
            String::from_utf8_lossy(&buf[..buf.len().min(200)])
        )
    })
}

#[derive(Default, Debug)]
struct EtStats {
    searches: usize,
    matched: usize,
    pcre2_errors: usize,
}

/// The buffers of the tcpdump captures (payloads and HTTP buffers), deduplicated, at most
/// `cap` of them spread over the set.
fn corpus_buffers(cap: usize) -> Option<Vec<Vec<u8>>> {
    use pktwarp_inspect::eval::{self, decode::decode, Counters};
    use pktwarp_inspect::rules::Buffer;
    let pcaps = flow_rules::input::require_corpus("pcaps/tcpdump")?;
    let mut files: Vec<_> = std::fs::read_dir(&pcaps)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let mut set = std::collections::BTreeSet::new();
    let mut c = Counters::default();
    for f in &files {
        for raw in common::ethernet_frames(f).unwrap_or_default() {
            let Some(fr) = decode(&raw) else { continue };
            if !fr.payload.is_empty() {
                set.insert(fr.payload.to_vec());
            }
            if let Some(h) = eval::http_of(fr.ip_proto, fr.payload, &mut c) {
                for b in Buffer::ALL {
                    if let Some(v) = h.buffer(b).filter(|v| !v.is_empty()) {
                        set.insert(v.to_vec());
                    }
                }
            }
        }
    }
    // At most 1,024 bytes of each: PCRE2 without JIT backtracks on long subjects.
    let all: Vec<Vec<u8>> = set
        .into_iter()
        .map(|mut v| {
            v.truncate(1024);
            v
        })
        .collect();
    let step = all.len().div_ceil(cap).max(1);
    Some(all.into_iter().step_by(step).collect())
}

/// Every ET Open 2019 pcre that has a DFA, against PCRE2: on the tcpdump corpus's buffers,
/// and on buffers built for it (a shortest subject the DFA matches, with the rule's contents
/// before it, a final newline after it, its case flipped, cut short), from several subject
/// and search starts. PCRE2 must accept every pattern the DFA accepts.
#[test]
fn etopen_pcres_agree_with_pcre2() {
    use pktwarp_inspect::rules::{load_dir, Detect, LoadOptions};
    use std::collections::BTreeMap;
    let Some(dir) = flow_rules::input::require_corpus("ids/etopen-2019") else {
        return;
    };
    let Some(corpus) = corpus_buffers(300) else {
        return;
    };
    let opts = LoadOptions {
        flow_table: true,
        ..LoadOptions::default()
    };
    let rep = load_dir(&dir, &opts).expect("load");
    let mut pats: BTreeMap<(String, String), Vec<u8>> = BTreeMap::new();
    for l in &rep.loaded {
        let contents: Vec<u8> = l
            .rule
            .detect
            .iter()
            .filter_map(|(_, d)| match d {
                Detect::Content(c) if !c.negated => Some(c.pattern.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        for (_, d) in &l.rule.detect {
            if let Detect::Pcre(p) = d {
                pats.entry((p.pattern.clone(), p.flags.clone()))
                    .or_insert_with(|| contents.clone());
            }
        }
    }
    let mut stats = EtStats::default();
    let (mut witnessed, mut bad) = (0usize, Vec::new());
    for ((pat, flags), contents) in &pats {
        let c = compile(pat.as_bytes(), flags, true).expect("a loaded pcre compiles");
        let oracle = Pcre2::new(pat.as_bytes(), flags)
            .unwrap_or_else(|e| panic!("/{pat}/{flags}: the DFA took it, PCRE2 refuses it ({e})"));
        let fwd = view(&c.forward).expect("forward table");
        let rev_words = c.reverse.clone().expect("reverse table");
        let rev = view(&rev_words).expect("reverse table");
        let mut check = |buf: &[u8], sub: usize, from: usize, stats: &mut EtStats| {
            if let Some(d) = differs((&fwd, &rev), &oracle, buf, sub, from, stats) {
                bad.push(format!("/{pat}/{flags}: {d}"));
            }
        };
        for buf in &corpus {
            check(buf, 0, 0, &mut stats);
        }
        let Some(w) = fwd.witness() else {
            continue;
        };
        witnessed += 1;
        let flip: Vec<u8> = w
            .iter()
            .map(|b| {
                if b.is_ascii_alphabetic() {
                    b ^ 0x20
                } else {
                    *b
                }
            })
            .collect();
        let mut built = vec![
            w.clone(),
            [contents.as_slice(), &w].concat(),
            [&w[..], b"\n"].concat(),
            [&w[..], b"\r\n"].concat(),
            [b"x ", &w[..], b"\n"].concat(),
            contents.clone(),
            flip,
        ];
        if w.len() > 1 {
            built.push(w[..w.len() - 1].to_vec());
        }
        for buf in built.iter().filter(|b| !b.is_empty()) {
            for sub in [0, 1, buf.len() / 2] {
                for from in [sub, sub + 1] {
                    if from <= buf.len() {
                        check(buf, sub, from, &mut stats);
                    }
                }
            }
        }
    }
    println!(
        "{} ET Open pcre patterns, {} with a witness, {} corpus buffers: {stats:?}",
        pats.len(),
        witnessed,
        corpus.len()
    );
    assert!(
        bad.is_empty(),
        "{} differences:\n{}",
        bad.len(),
        bad[..bad.len().min(20)].join("\n")
    );
    // 1,145 distinct (pattern, flags) pairs of the 5,648 pcre keywords load; all have a witness.
    assert!(
        pats.len() > 1000 && witnessed * 100 > pats.len() * 95,
        "{witnessed} of {}",
        pats.len()
    );
    assert!(stats.matched > witnessed, "{stats:?}");
}
