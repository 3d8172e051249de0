//! Reading input files with a size bound: a text file read whole (a config, a rule file, a
//! trace) is read through [`read_text_bounded`], so `/dev/zero`, a huge file or a gzip bomb is
//! an error that names the file and the limit, not an out-of-memory kill.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Longest rule file or header trace read, after decompression: 256 MiB (a million
/// ClassBench rules take about 80 MB).
pub const MAX_TEXT_INPUT_BYTES: u64 = 256 << 20;

/// Reads `path` as UTF-8 text, gunzipping it when its name ends in `.gz`, and refuses more
/// than `limit` bytes (decompressed). The error says which file, which limit and what `what`
/// is (for the message: "rule file", "config", ...).
pub fn read_text_bounded(path: &Path, limit: u64, what: &str) -> std::io::Result<String> {
    let f = std::fs::File::open(path)?;
    let gz = path.extension().is_some_and(|e| e == "gz");
    let src: Box<dyn Read> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(
            f,
        )))
    } else {
        Box::new(std::io::BufReader::new(f))
    };
    let mut bytes = Vec::new();
    // One byte past the limit tells "exactly at the limit" from "over it".
    src.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(path, limit, what, gz));
    }
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (first bad byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

fn too_large(path: &Path, limit: u64, what: &str, gz: bool) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::FileTooLarge,
        format!(
            "{what} {} is larger than the limit of {} MiB{} (is it the right file?)",
            path.display(),
            limit >> 20,
            if gz { " once decompressed" } else { "" },
        ),
    )
}

/// The folder of the large external test corpus (ClassBench rule sets and traces, tcpdump's
/// test captures, O-RAN vectors; README "Test data" says what it is and where it comes from):
/// `$PKTWARP_DATA` when set, else the first `shared/data` found beside a checkout of this
/// repository ([`data_dir_candidates`]), else the first candidate (so a test that then misses its
/// input names where it looked: [`require_data`]). Tests and benchmarks find the corpus through
/// this one function.
pub fn data_dir() -> PathBuf {
    pick_data_dir(std::env::var_os("PKTWARP_DATA"), &data_dir_candidates())
}

/// `$PKTWARP_DATA` (non-empty) as given, else the first candidate that is a folder, else the
/// first candidate.
fn pick_data_dir(var: Option<OsString>, candidates: &[PathBuf]) -> PathBuf {
    match var {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => candidates
            .iter()
            .find(|p| p.is_dir())
            .or(candidates.first())
            .cloned()
            .unwrap_or_default(),
    }
}

/// Where [`data_dir`] looks without `$PKTWARP_DATA`, in order: `shared/data` beside the
/// checkout this crate was built from; beside the main checkout when that one is a git
/// worktree (its corpus sits beside the repository, not beside every worktree); and the same
/// two for the workspace around the current folder (a test binary run from another copy).
pub fn data_dir_candidates() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let built = Path::new(env!("CARGO_MANIFEST_DIR"));
    roots.extend(built.parent().map(Path::to_path_buf));
    if let Ok(cwd) = std::env::current_dir() {
        roots.extend(
            cwd.ancestors()
                .find(|a| a.join("Cargo.lock").is_file())
                .map(Path::to_path_buf),
        );
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for r in roots {
        let main = main_checkout_of(&r);
        for root in std::iter::once(r).chain(main) {
            if let Some(p) = root.parent().map(|p| p.join("shared/data")) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// The main checkout of the git worktree at `root`, or None when `root` is none: a worktree's
/// `.git` is a file naming its git folder (`gitdir: ...`), whose `commondir` leads to the main
/// repository's `.git`.
fn main_checkout_of(root: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(root.join(".git")).ok()?;
    let gitdir = root.join(text.strip_prefix("gitdir:")?.trim());
    let common = std::fs::read_to_string(gitdir.join("commondir")).ok()?;
    let common = std::fs::canonicalize(gitdir.join(common.trim())).ok()?;
    common.parent().map(Path::to_path_buf)
}

/// A corpus input for a benchmark: `rel` below [`data_dir`] (`""`: the folder itself). Tests
/// use [`require_corpus`], which lets a run without the corpus pass outside CI.
///
/// # Panics
/// When it does not exist, with the path and how the corpus folder was chosen (a benchmark
/// run on the corpus has nothing to measure without it). For benchmarks only; product code
/// reads paths from its config.
pub fn require_data(rel: &str) -> PathBuf {
    let dir = data_dir();
    let p = if rel.is_empty() { dir } else { dir.join(rel) };
    if !p.exists() {
        panic!(
            "{}",
            data_missing(&p, std::env::var_os("PKTWARP_DATA"), &data_dir_candidates())
        );
    }
    p
}

/// True when running in CI: `CI` set to anything but empty, `0` or `false`.
pub fn in_ci() -> bool {
    ci_value(std::env::var_os("CI"))
}

fn ci_value(v: Option<OsString>) -> bool {
    v.is_some_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// A corpus input a test needs: `rel` below [`data_dir`] (`""`: the folder itself).
///
/// Present: `Some(path)`. Missing: in CI ([`in_ci`]) the test fails with the path and how the
/// folder was chosen, since CI must run every corpus test; elsewhere it prints on stderr that
/// the test did not run and why, appends the test's name to [`not_run_record`] (the test
/// script prints one summary line from it), and returns None, on which the test returns
/// (README, "Test data").
pub fn require_corpus(rel: &str) -> Option<PathBuf> {
    let dir = data_dir();
    let p = if rel.is_empty() { dir } else { dir.join(rel) };
    corpus_input(p, in_ci(), &not_run_record(), &current_test(), &|p| {
        data_missing(p, std::env::var_os("PKTWARP_DATA"), &data_dir_candidates())
    })
}

/// [`require_corpus`] with its surroundings given: CI or not, the record file, the test's name
/// and the message of a missing path.
fn corpus_input(
    p: PathBuf,
    ci: bool,
    record: &Path,
    test: &str,
    why: &dyn Fn(&Path) -> String,
) -> Option<PathBuf> {
    if p.exists() {
        return Some(p);
    }
    let why = why(&p);
    if ci {
        panic!("{test}: {why}; CI requires the corpus");
    }
    eprintln!("not run (no corpus): {test}: {why}");
    record_not_run(record, test);
    None
}

/// The running test, as `binary::test` (libtest names each test's thread after the test; the
/// binary's file name, less cargo's hash, says which test target it is).
fn current_test() -> String {
    let exe = std::env::current_exe().ok();
    let bin = exe
        .as_deref()
        .and_then(Path::file_stem)
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let bin = match bin.rsplit_once('-') {
        Some((b, h)) if h.len() == 16 && h.bytes().all(|c| c.is_ascii_hexdigit()) => b.to_string(),
        _ => bin,
    };
    let thread = std::thread::current();
    format!("{bin}::{}", thread.name().unwrap_or("?"))
}

/// The file the corpus tests that did not run are listed in, one per line:
/// `$PKTWARP_NOT_RUN_FILE` when set (scripts/ci.sh sets it), else `tmp/corpus-not-run.txt` in
/// the cargo target folder the test binary runs from (`target/debug/deps/NAME` ->
/// `target/tmp/`), else in the system temp folder.
pub fn not_run_record() -> PathBuf {
    if let Some(f) = std::env::var_os("PKTWARP_NOT_RUN_FILE").filter(|f| !f.is_empty()) {
        return PathBuf::from(f);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let target = exe
        .parent()
        .filter(|d| d.file_name().is_some_and(|n| n == "deps"))
        .and_then(Path::parent)
        .and_then(Path::parent);
    match target {
        Some(t) => t.join("tmp/corpus-not-run.txt"),
        None => std::env::temp_dir().join("pktwarp-corpus-not-run.txt"),
    }
}

/// Appends `test` as one line (one `write` of an O_APPEND file, so parallel tests do not
/// interleave). A failure to record only loses the summary line, so it is reported, not fatal.
fn record_not_run(file: &Path, test: &str) {
    use std::io::Write;
    if let Some(d) = file.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    let r = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .and_then(|mut f| f.write_all(format!("{test}\n").as_bytes()));
    if let Err(e) = r {
        eprintln!("cannot record {test} in {}: {e}", file.display());
    }
}

/// The message of a missing corpus input: the path, the variable and where the default looked.
fn data_missing(path: &Path, var: Option<OsString>, candidates: &[PathBuf]) -> String {
    match var {
        Some(v) if !v.is_empty() => format!(
            "test data missing: {} (PKTWARP_DATA={}; README \"Test data\" says what the corpus holds)",
            path.display(),
            Path::new(&v).display()
        ),
        _ => format!(
            "test data missing: {} (PKTWARP_DATA is unset and none of {} exists; set PKTWARP_DATA \
             to the corpus folder, README \"Test data\")",
            path.display(),
            candidates
                .iter()
                .map(|c| c.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_zero_is_refused_with_the_limit() {
        let e = read_text_bounded(Path::new("/dev/zero"), 1 << 20, "rule file").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
        let m = e.to_string();
        assert!(m.contains("/dev/zero") && m.contains("1 MiB"), "{m}");
    }

    #[test]
    fn gzip_bomb_is_refused_after_decompression() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("fr-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("bomb.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![b'\n'; 1 << 20];
        for _ in 0..8 {
            enc.write_all(&zeros).unwrap();
        }
        let gz = enc.finish().unwrap();
        assert!(gz.len() < 64 * 1024, "the bomb is small on disk");
        std::fs::write(&p, gz).unwrap();
        let e = read_text_bounded(&p, 4 << 20, "trace").unwrap_err();
        assert!(e.to_string().contains("once decompressed"), "{e}");
        // Under the limit it reads.
        assert_eq!(
            read_text_bounded(&p, 16 << 20, "trace").unwrap().len(),
            8 << 20
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fr-data-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn data_dir_prefers_the_variable_then_the_first_existing_candidate() {
        let d = scratch("pick");
        let (a, b) = (d.join("a/shared/data"), d.join("b/shared/data"));
        std::fs::create_dir_all(&b).unwrap();
        let cands = [a.clone(), b.clone()];
        assert_eq!(
            pick_data_dir(Some("/x/y".into()), &cands),
            PathBuf::from("/x/y")
        );
        // Empty counts as unset; the first candidate that exists wins.
        assert_eq!(pick_data_dir(Some("".into()), &cands), b);
        assert_eq!(pick_data_dir(None, &cands), b);
        // None exists: the first, so the message names where the data belongs.
        std::fs::remove_dir_all(&b).unwrap();
        assert_eq!(pick_data_dir(None, &cands), a);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_worktree_leads_to_its_main_checkout() {
        let d = scratch("wt");
        let main = d.join("repo");
        let gitdir = main.join(".git/worktrees/wt1");
        std::fs::create_dir_all(&gitdir).unwrap();
        std::fs::write(gitdir.join("commondir"), "../..\n").unwrap();
        let wt = d.join("elsewhere/wt1");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
        let found = main_checkout_of(&wt).expect("main checkout");
        assert_eq!(found, std::fs::canonicalize(&main).unwrap());
        // The main checkout itself (a .git folder) and a plain folder have none.
        assert_eq!(main_checkout_of(&main), None);
        assert_eq!(main_checkout_of(&d), None);
        // A broken .git file is no main checkout, not a panic.
        std::fs::write(wt.join(".git"), "nonsense").unwrap();
        assert_eq!(main_checkout_of(&wt), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_default_candidates_start_beside_this_checkout() {
        let c = data_dir_candidates();
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        assert_eq!(c[0], here.parent().unwrap().join("shared/data"), "{c:?}");
    }

    #[test]
    fn a_missing_input_names_the_path_and_the_variable() {
        let cands = [PathBuf::from("/nowhere/shared/data")];
        let p = Path::new("/nowhere/shared/data/pcaps/x.pcap");
        let m = data_missing(p, None, &cands);
        assert!(m.contains("/nowhere/shared/data/pcaps/x.pcap"), "{m}");
        assert!(m.contains("PKTWARP_DATA is unset"), "{m}");
        assert!(m.contains("none of /nowhere/shared/data exists"), "{m}");
        let m = data_missing(p, Some("/corpus".into()), &cands);
        assert!(
            m.contains("PKTWARP_DATA=/corpus") && m.contains("x.pcap"),
            "{m}"
        );
    }

    #[test]
    fn not_utf8_names_the_offset() {
        let dir = std::env::temp_dir().join(format!("fr-input8-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("bin.txt");
        std::fs::write(&p, b"ok\n\xff\xfe").unwrap();
        let e = read_text_bounded(&p, 1024, "rule file").unwrap_err();
        assert!(e.to_string().contains("offset 3"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_corpus_fails_in_ci_and_is_recorded_elsewhere() {
        let d = scratch("corpus");
        let record = d.join("tmp/not-run.txt");
        let why = |p: &Path| format!("test data missing: {}", p.display());
        // Present: the path, whatever CI says, and nothing recorded.
        let here = corpus_input(d.clone(), true, &record, "bin::a", &why);
        assert_eq!(here, Some(d.clone()));
        let gone = d.join("classbench");
        assert_eq!(
            corpus_input(gone.clone(), false, &record, "bin::b", &why),
            None
        );
        assert_eq!(
            corpus_input(gone.clone(), false, &record, "bin::c", &why),
            None
        );
        let text = std::fs::read_to_string(&record).unwrap();
        assert_eq!(text, "bin::b\nbin::c\n");
        let e =
            std::panic::catch_unwind(|| corpus_input(gone.clone(), true, &record, "bin::d", &why))
                .expect_err("CI requires the corpus");
        let m = e.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            m.contains("bin::d") && m.contains("classbench") && m.contains("CI requires"),
            "{m}"
        );
        assert_eq!(
            std::fs::read_to_string(&record).unwrap(),
            text,
            "CI records nothing"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn ci_is_set_unless_empty_zero_or_false() {
        assert!(!ci_value(None));
        for off in ["", "0", "false", "FALSE"] {
            assert!(!ci_value(Some(off.into())), "{off}");
        }
        for on in ["true", "1", "yes"] {
            assert!(ci_value(Some(on.into())), "{on}");
        }
    }

    #[test]
    fn the_record_sits_in_the_target_folder_of_the_test_binary() {
        // This unit test runs from target/debug/deps (or PKTWARP_NOT_RUN_FILE names the file).
        let r = not_run_record();
        if std::env::var_os("PKTWARP_NOT_RUN_FILE").is_none() {
            assert!(r.ends_with("tmp/corpus-not-run.txt"), "{}", r.display());
        }
        assert!(
            current_test().starts_with("flow_rules::"),
            "{}",
            current_test()
        );
    }
}
