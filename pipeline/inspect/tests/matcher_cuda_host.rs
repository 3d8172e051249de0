//! cuda/inspect_match.cuh compiled for the host (pktwarp-kernels feature `host`) against the Rust
//! image walker over the same image: the one-thread walk, every occurrence, the warp kernel's
//! chunked lanes, and the batch kernel's rows.

mod common;

use common::*;
use pktwarp_inspect::matcher::cpu::AcMatcher;
use pktwarp_inspect::matcher::{bitmap_words, CompileOptions, Image, Match, MatchSet, PatternSet};
use pktwarp_kernels::host::ffi;
use proptest::prelude::*;

fn cuda_match_set(img: &Image, buf: &[u8]) -> MatchSet {
    let mut words = vec![0u32; bitmap_words(img.n_patterns())];
    // SAFETY: the image passed Image::from_words (the walker's bounds), buf is len bytes and the
    // bitmap has a word for every pattern.
    unsafe {
        ffi::pw_host_inspect_match_set(
            img.words().as_ptr(),
            buf.as_ptr(),
            buf.len() as u32,
            words.as_mut_ptr(),
        )
    };
    MatchSet::from_words(words, img.n_patterns()).expect("bitmap of the CUDA walker")
}

fn cuda_lanes(img: &Image, buf: &[u8], lanes: u32) -> MatchSet {
    let mut words = vec![0u32; bitmap_words(img.n_patterns())];
    // SAFETY: as in cuda_match_set.
    unsafe {
        ffi::pw_host_inspect_match_set_lanes(
            img.words().as_ptr(),
            buf.as_ptr(),
            buf.len() as u32,
            lanes,
            words.as_mut_ptr(),
        )
    };
    MatchSet::from_words(words, img.n_patterns()).expect("bitmap of the CUDA lanes")
}

fn cuda_find_all(img: &Image, buf: &[u8]) -> Vec<Match> {
    let cap = 4 * buf.len() as u32 + 16;
    let (mut ids, mut ends) = (vec![0u32; cap as usize], vec![0u32; cap as usize]);
    // SAFETY: as in cuda_match_set; ids and ends hold cap entries.
    let n = unsafe {
        ffi::pw_host_inspect_find_all(
            img.words().as_ptr(),
            buf.as_ptr(),
            buf.len() as u32,
            ids.as_mut_ptr(),
            ends.as_mut_ptr(),
            cap,
        )
    };
    let n = n.min(cap) as usize;
    (0..n)
        .map(|i| Match {
            pattern: ids[i],
            end: ends[i] as usize,
        })
        .collect()
}

fn cuda_batch(img: &Image, bufs: &[Vec<u8>]) -> Vec<MatchSet> {
    let data: Vec<u8> = bufs.concat();
    let lengths: Vec<u32> = bufs.iter().map(|b| b.len() as u32).collect();
    let offsets: Vec<u32> = lengths
        .iter()
        .scan(0u32, |at, l| {
            let o = *at;
            *at += l;
            Some(o)
        })
        .collect();
    let words = bitmap_words(img.n_patterns());
    // Rows start dirty: the kernel zeroes each row first.
    let mut bitmaps = vec![u32::MAX; words * bufs.len()];
    // SAFETY: as in cuda_match_set; offsets/lengths index `data`, bitmaps has a row per buffer.
    unsafe {
        ffi::pw_host_inspect_match_batch(
            img.words().as_ptr(),
            data.as_ptr(),
            offsets.as_ptr(),
            lengths.as_ptr(),
            bufs.len() as u32,
            bitmaps.as_mut_ptr(),
        )
    };
    (0..bufs.len())
        .map(|i| {
            MatchSet::from_words(
                bitmaps[i * words..(i + 1) * words].to_vec(),
                img.n_patterns(),
            )
            .expect("row of the batch")
        })
        .collect()
}

/// aho-corasick == image walker == CUDA walker (one thread, 32 lanes, `lanes` lanes), dense and
/// sparse layouts.
fn all_agree(set: &PatternSet, buf: &[u8], lanes: u32) {
    let ac = AcMatcher::new(set).expect("aho-corasick");
    let want = ac.match_set(buf);
    for budget in [8usize << 20, 0] {
        let img = Image::compile_with(
            set,
            &CompileOptions {
                dense_budget_bytes: budget,
            },
        )
        .expect("compile");
        assert_eq!(img.match_set(buf), want, "Rust walker, budget {budget}");
        assert_eq!(
            cuda_match_set(&img, buf),
            want,
            "CUDA walker, budget {budget}"
        );
        assert_eq!(
            cuda_lanes(&img, buf, 32),
            want,
            "CUDA 32 lanes, budget {budget}"
        );
        assert_eq!(
            cuda_lanes(&img, buf, lanes),
            want,
            "CUDA {lanes} lanes, budget {budget}"
        );
        let mut rust = Vec::new();
        img.find_all(buf, &mut rust);
        assert_eq!(
            cuda_find_all(&img, buf),
            rust,
            "CUDA find_all, budget {budget}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_sets_and_payloads_agree(pats in patterns(24), buf in payload(300), lanes in 1u32..=64) {
        all_agree(&set_of_pairs(&pats), &buf, lanes);
    }

    #[test]
    fn planted_patterns_agree(pats in patterns(16), filler in payload(4), flips in any::<u64>(), lanes in 1u32..=64) {
        all_agree(&set_of_pairs(&pats), &planted(&pats, &filler, flips), lanes);
    }

    #[test]
    fn batch_rows_equal_one_walk_each(pats in patterns(40), bufs in prop::collection::vec(payload(80), 0..12)) {
        let set = set_of_pairs(&pats);
        let img = Image::compile(&set).expect("compile");
        let rows = cuda_batch(&img, &bufs);
        prop_assert_eq!(rows.len(), bufs.len());
        for (row, b) in rows.iter().zip(&bufs) {
            prop_assert_eq!(row, &img.match_set(b));
        }
    }
}

#[test]
fn chunk_edges_64k_buffer_and_long_patterns() {
    // Patterns longer than a lane's chunk, and ones straddling every chunk edge.
    let mut rng = Rng(42);
    let mut pats: Vec<(Vec<u8>, bool)> = (0..300)
        .map(|i| {
            let n = 1 + (rng.next() % 40) as usize;
            (rng.bytes(n, ALPHABET), i % 3 == 0)
        })
        .collect();
    pats.push((rng.bytes(255, b"ab"), false));
    let set = set_of_pairs(&pats);
    let mut buf = rng.bytes(65536, ALPHABET);
    let chunk = 65536 / 32;
    for (k, (p, _)) in pats.iter().enumerate().take(31) {
        let at = (k + 1) * chunk - p.len() / 2;
        buf[at..at + p.len()].copy_from_slice(p);
    }
    let ab = &pats[300].0;
    buf[65536 - 255..].copy_from_slice(ab);
    all_agree(&set, &buf, 32);
    let img = Image::compile(&set).unwrap();
    let got = cuda_lanes(&img, &buf, 32);
    assert!(got.contains(300));
    assert!(
        (0..31).all(|k| got.contains(k)),
        "straddling patterns found"
    );
    // Short buffers: lanes with an empty chunk set nothing.
    for n in 0..40 {
        all_agree(&set, &buf[..n], 32);
    }
}
