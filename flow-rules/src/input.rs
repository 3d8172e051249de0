//! Reading input files with a size bound: a text file read whole (a config, a rule file, a
//! trace) is read through [`read_text_bounded`], so `/dev/zero`, a huge file or a gzip bomb is
//! an error that names the file and the limit, not an out-of-memory kill.

use std::io::Read;
use std::path::Path;

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
/// `$PKTWARP_DATA` when set, else `shared/data` beside the checkout. Tests and benchmarks find
/// the corpus through this one function.
pub fn data_dir() -> std::path::PathBuf {
    match std::env::var_os("PKTWARP_DATA") {
        Some(d) if !d.is_empty() => std::path::PathBuf::from(d),
        _ => std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data")),
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
}
