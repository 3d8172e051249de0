use super::*;

/// (matched end) of `pat` with `flags` on `buf`, searched from 0.
fn end(pat: &str, flags: &str, buf: &[u8]) -> Option<usize> {
    let c = compile(pat.as_bytes(), flags, true).unwrap_or_else(|e| panic!("{pat}: {e:?}"));
    view(&c.forward).expect("table").find_end(buf, 0, 0)
}

fn start(pat: &str, flags: &str, buf: &[u8]) -> Option<usize> {
    let c = compile(pat.as_bytes(), flags, true).expect("compiles");
    let e = view(&c.forward).expect("table").find_end(buf, 0, 0)?;
    view(c.reverse.as_deref().expect("reverse"))
        .expect("table")
        .find_start(buf, 0, 0, e)
}

#[test]
fn dollar_matches_before_a_final_newline_only() {
    assert_eq!(end("a$", "", b"a\n"), Some(1));
    assert_eq!(end("a$", "", b"a"), Some(1));
    assert_eq!(end("a$", "", b"a\nb"), None);
    assert_eq!(end("a$", "", b"a\n\n"), None);
    assert_eq!(end("a$", "E", b"a\n"), None);
    assert_eq!(end("a$", "m", b"a\nb"), Some(1));
    assert_eq!(end("a\\Z", "", b"a\n"), Some(1));
    assert_eq!(end("a\\z", "", b"a\n"), None);
    assert_eq!(end("a$\\n", "", b"a\n"), Some(2));
    assert_eq!(end("a\\n?$", "", b"a\n"), Some(2));
    assert_eq!(end("a\\n??$", "", b"a\n"), Some(1));
}

#[test]
fn leftmost_first_ends_and_starts() {
    assert_eq!(end("a+", "", b"xaaa"), Some(4));
    assert_eq!(end("a+?", "", b"xaaa"), Some(2));
    assert_eq!(end("a+", "G", b"xaaa"), Some(2));
    assert_eq!(end("a+?", "G", b"xaaa"), Some(4));
    assert_eq!(end("ab|a", "", b"ab"), Some(2));
    assert_eq!(end("a|ab", "", b"ab"), Some(1));
    assert_eq!(start("b+c", "", b"abbbc"), Some(1));
    assert_eq!(end("^b", "", b"ab"), None);
    assert_eq!(end("^b", "m", b"a\nb"), Some(3));
    assert_eq!(end("ABC", "i", b"xabc"), Some(4));
    assert_eq!(end("a.c", "", b"a\nc"), None);
    assert_eq!(end("a.c", "s", b"a\nc"), Some(3));
    assert_eq!(end("\\bfoo\\b", "", b"a foo."), Some(5));
    assert_eq!(end("\\x41\\0101\\x{42}", "", b"A\x081B"), Some(4));
    assert_eq!(end("b", "A", b"ab"), None);
}

#[test]
fn what_has_no_dfa_is_refused_with_its_reason() {
    let why = |p: &str| compile(p.as_bytes(), "", false).err().map(|s| s.0);
    assert_eq!(why("(a)\\1").as_deref(), Some("back-reference"));
    assert_eq!(why("a(?=b)").as_deref(), Some("look-ahead"));
    assert_eq!(why("(?<!a)b").as_deref(), Some("look-behind"));
    assert_eq!(why("(?>a+)b").as_deref(), Some("atomic group"));
    assert_eq!(why("a++").as_deref(), Some("possessive quantifier"));
    assert_eq!(why("\\p{L}").as_deref(), Some("Unicode property"));
    assert_eq!(why("(?(1)a|b)").as_deref(), Some("conditional group"));
    assert!(why("[a-").is_some_and(|w| w.starts_with("syntax")));
    assert!(why("a{0,2000}b{0,2000}[^x]{0,3000}").is_some());
    assert_eq!(why("a\\Rb"), Some("\\R (an atomic group)".into()));
}

#[test]
fn a_repeated_group_that_can_match_empty_is_refused() {
    // PCRE2 ends `(?:$|\S|\s){1,}` on "a\n" at 1 (the `$` iteration matched empty); the DFA
    // would end at 2.
    for p in [
        &b"(?:$|\\S|\\s){1,}"[..],
        b"(a?)*",
        b"(?:\\b|x)+",
        b"(a*){2,5}",
    ] {
        let Err(e) = compile(p, "", true) else {
            panic!("{} was not refused", String::from_utf8_lossy(p));
        };
        assert!(
            e.0.contains("can match empty"),
            "{}: {}",
            String::from_utf8_lossy(p),
            e.0
        );
    }
    for p in [&b"(a?){0,1}"[..], b"(?:a|bc)+", b"(\\s*x)*"] {
        assert!(
            compile(p, "", true).is_ok(),
            "{}",
            String::from_utf8_lossy(p)
        );
    }
}
