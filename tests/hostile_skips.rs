//! A test that skips must not pass CI quietly. This holds docs/hardware-only-tests.md and the
//! code together: every `#[ignore]` test is listed there with its reason; every entry names a
//! test function that exists in its file (and, in the hardware table, calls
//! `pipeline::testdata::skip`, or `no_gpu` which calls it, for that test); a skip printed by hand (`"skipped: ..."`) sits
//! next to a check that CI is not set; a test that reads the external corpus goes through
//! `require_corpus` (required in CI, noted as not run elsewhere), so it needs no entry here.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every .rs file of the workspace (not build output, not fuzz's own target).
fn sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![root()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                if !name.starts_with('.') && !name.starts_with("target") {
                    todo.push(p);
                }
            } else if name.ends_with(".rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root())
        .unwrap()
        .to_string_lossy()
        .to_string()
}

/// The name of the first `fn` at or after byte `at`.
fn next_fn(text: &str, at: usize) -> Option<String> {
    let i = text[at..].find("fn ")? + at + 3;
    let name: String = text[i..]
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    Some(name)
}

/// The test names of every `skip(file!(), "name", ...)` and `no_gpu(file!(), "name")` call
/// in `text` (`no_gpu` calls `skip` when there is no GPU).
fn skip_calls(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let calls = ["testdata::skip(", "testdata::no_gpu("]
        .into_iter()
        .flat_map(|c| text.match_indices(c));
    for (i, _) in calls {
        let rest = text[i..].split_once("file!(),").map(|x| x.1).unwrap_or("");
        if let Some(name) = rest.trim_start().strip_prefix('"') {
            out.push(name.split('"').next().unwrap_or("").to_string());
        }
    }
    out
}

/// (table, file, test, reason) rows of the doc; table 0 = hardware, 1 = ignored.
fn doc_rows() -> Vec<(usize, String, String, String)> {
    let doc = std::fs::read_to_string(root().join("docs/hardware-only-tests.md")).unwrap();
    let mut table = usize::MAX;
    let mut out = Vec::new();
    for l in doc.lines() {
        if l.starts_with("## ") {
            table = table.wrapping_add(1);
        }
        let cells: Vec<&str> = l.split('|').map(str::trim).collect();
        if cells.len() >= 6 && cells[1].ends_with(".rs") {
            out.push((
                table,
                cells[1].to_string(),
                cells[2].to_string(),
                cells[4].to_string(),
            ));
        }
    }
    out
}

#[test]
fn every_ignored_or_skipping_test_is_listed_with_its_reason() {
    let rows = doc_rows();
    assert!(rows.len() >= 10, "{rows:?}");
    // The helper reads the same list.
    let helper: Vec<(String, String)> = pipeline::internal::testdata::hardware_only_tests();
    let mine: Vec<(String, String)> = rows.iter().map(|r| (r.1.clone(), r.2.clone())).collect();
    assert_eq!(helper, mine, "the helper parses the doc differently");
    let listed = |f: &str, t: &str| rows.iter().any(|r| r.1 == f && r.2 == t);
    let mut problems = Vec::new();
    let mut calls: Vec<(String, String)> = Vec::new();
    for p in sources() {
        let f = rel(&p);
        if f == "tests/hostile_skips.rs" || f == "pipeline/src/testdata.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        // Attribute lines only (not a doc comment that mentions one).
        let attrs = text.match_indices("#[ignore").filter(|(i, _)| {
            text[..*i]
                .rsplit('\n')
                .next()
                .unwrap_or("")
                .trim()
                .is_empty()
        });
        for (i, _) in attrs {
            let t = next_fn(&text, i).unwrap_or_default();
            if !listed(&f, &t) {
                problems.push(format!("{f}: #[ignore] test {t} is not listed"));
            }
        }
        for t in skip_calls(&text) {
            if !listed(&f, &t) {
                problems.push(format!(
                    "{f}: {t} calls skip but is not listed (it would fail CI)"
                ));
            }
            calls.push((f.clone(), t));
        }
        if text.contains("eprintln!(\"skipped") && !text.contains("var_os(\"CI\")") {
            problems.push(format!("{f}: prints a skip without checking CI"));
        }
        let is_test = f.contains("/tests/") || f.starts_with("tests/") || f.ends_with("_tests.rs");
        let reads_corpus = text.contains("data_dir()") || text.contains("require_data(");
        if is_test && reads_corpus && !text.contains("require_corpus(") {
            problems.push(format!(
                "{f}: reads the corpus without require_corpus (it would fail, not note, without it)"
            ));
        }
    }
    for (table, f, t, reason) in &rows {
        let text = std::fs::read_to_string(root().join(f)).unwrap_or_default();
        if !text.contains(&format!("fn {t}(")) {
            problems.push(format!("listed {f}: {t}: no such test function"));
        }
        if reason.len() < 10 {
            problems.push(format!("listed {f}: {t}: no reason given"));
        }
        if *table == 0 && !calls.iter().any(|(cf, ct)| cf == f && ct == t) {
            problems.push(format!(
                "listed {f}: {t} as hardware-only but it never calls testdata::skip (or no_gpu)"
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
