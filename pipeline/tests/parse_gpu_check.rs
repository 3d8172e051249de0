//! The two host halves of the GPU check of the parse stage
//! (`tools/gpu-probes/parse-gpu-check.sh`): `write_inputs` writes the frames (the whole Ethernet
//! corpus, truncations and mutations of it, and the benchmark mix) with the Rust parser's
//! metadata; after the GPU has parsed them, `compare` holds the GPU's metadata equal to the Rust
//! one, byte for byte.
//!
//! Both are `#[ignore]`d: they need `PW_GPU_CHECK_DIR` and, for `compare`, the output of a GPU
//! run, which CI (no GPU) cannot produce. CI covers the same CUDA source through the host build
//! (`parse_cuda_host.rs`).

mod parse_common;

use std::io::Write;
use std::path::PathBuf;

use pipeline::internal::stage::parse::parse_frame;
use pipeline::meta::META_SIZE;

fn dir() -> PathBuf {
    PathBuf::from(std::env::var("PW_GPU_CHECK_DIR").expect("set PW_GPU_CHECK_DIR"))
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `u32 count`, then per frame `u32 len` and the bytes (little-endian).
fn write_frames(path: PathBuf, frames: &[Vec<u8>]) {
    let mut o = std::io::BufWriter::new(std::fs::File::create(&path).expect("create frames file"));
    o.write_all(&(frames.len() as u32).to_le_bytes())
        .expect("write");
    for f in frames {
        o.write_all(&(f.len() as u32).to_le_bytes()).expect("write");
        o.write_all(f).expect("write");
    }
}

#[test]
#[ignore = "needs PW_GPU_CHECK_DIR; run by tools/gpu-probes/parse-gpu-check.sh"]
fn write_inputs() {
    let corpus: Vec<Vec<u8>> = parse_common::corpus_frames()
        .expect("the corpus (PKTWARP_DATA)")
        .into_iter()
        .map(|(_, f)| f)
        .collect();
    let mut frames = corpus.clone();
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for f in &corpus {
        for cut in [0usize, 1, 13, 14, 17, 20, 30, 34, 38, 42, 54, 62, 74, 90] {
            if cut < f.len() {
                frames.push(f[..cut].to_vec());
            }
        }
        for _ in 0..20 {
            // Headers are in the first bytes; keep the file small.
            let mut g = f[..f.len().min(512)].to_vec();
            if g.is_empty() {
                continue;
            }
            for _ in 0..1 + rng.next() % 4 {
                let i = (rng.next() % g.len().min(128) as u64) as usize;
                g[i] = rng.next() as u8;
            }
            let keep = g.len() - (rng.next() % (g.len() as u64 / 4 + 1)) as usize;
            g.truncate(keep);
            frames.push(g);
        }
    }
    let d = dir();
    std::fs::create_dir_all(&d).expect("create PW_GPU_CHECK_DIR");
    write_frames(d.join("frames.bin"), &frames);
    write_frames(d.join("mix.bin"), &parse_common::mix::mix());
    let mut o =
        std::io::BufWriter::new(std::fs::File::create(d.join("expected.bin")).expect("create"));
    for f in &frames {
        o.write_all(parse_frame(f).as_bytes()).expect("write");
    }
    eprintln!(
        "{} corpus frames, {} frames in all, in {}",
        corpus.len(),
        frames.len(),
        d.display()
    );
}

#[test]
#[ignore = "needs the GPU's gpu_metas.bin in PW_GPU_CHECK_DIR; run by tools/gpu-probes/parse-gpu-check.sh"]
fn compare() {
    let d = dir();
    let want = std::fs::read(d.join("expected.bin")).expect("expected.bin");
    let got = std::fs::read(d.join("gpu_metas.bin")).expect("gpu_metas.bin");
    assert_eq!(want.len(), got.len(), "record counts differ");
    let n = want.len() / META_SIZE;
    let bad: Vec<usize> = (0..n)
        .filter(|i| {
            want[i * META_SIZE..(i + 1) * META_SIZE] != got[i * META_SIZE..(i + 1) * META_SIZE]
        })
        .collect();
    eprintln!(
        "{n} frames compared, {} mismatches (GPU pw_parse vs Rust parse)",
        bad.len()
    );
    assert!(
        bad.is_empty(),
        "first mismatching frames: {:?}",
        &bad[..bad.len().min(10)]
    );
}
