//! Inputs of tools/gpu-probes/inspect_match_check.cu (the CUDA kernels on the GPU against the Rust
//! walker): `PKTWARP_MATCH_DUMP=DIR cargo test --release -p pktwarp-inspect --test
//! matcher_gpu_dump -- --ignored` writes, for the ET Open fast patterns, DIR/1460 and DIR/64
//! (the benchmark's payloads) and DIR/mixed (real payloads as they are, HTTP-like ones and
//! 64 KiB random ones): image.bin, data.bin, offsets.bin, lengths.bin and expect.bin (the Rust
//! walker's bitmaps). Ignored by default: it is the GPU check's first half.

mod common;

use std::path::Path;

use common::corpus::{etopen_fast_patterns, http_like, tcpdump_payloads};
use common::{set_of_pairs, Rng};
use flow_rules::input::require_corpus;
use pktwarp_inspect::matcher::Image;

fn write_words(p: &Path, w: &[u32]) {
    let b: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(p, b).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
}

fn dump(dir: &Path, img: &Image, payloads: &[Vec<u8>]) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let (mut offsets, mut lengths, mut expect) = (Vec::new(), Vec::new(), Vec::new());
    let mut at = 0u32;
    for p in payloads {
        offsets.push(at);
        lengths.push(p.len() as u32);
        at += p.len() as u32;
        expect.extend_from_slice(img.match_set(p).words());
    }
    write_words(&dir.join("image.bin"), img.words());
    write_words(&dir.join("offsets.bin"), &offsets);
    write_words(&dir.join("lengths.bin"), &lengths);
    write_words(&dir.join("expect.bin"), &expect);
    let data = payloads.concat();
    std::fs::write(dir.join("data.bin"), data).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
}

#[test]
#[ignore]
fn dump_gpu_check_inputs() {
    let out =
        std::env::var_os("PKTWARP_MATCH_DUMP").expect("PKTWARP_MATCH_DUMP=DIR: where to write");
    let out = Path::new(&out);
    let (Some(rules), Some(pcaps)) = (require_corpus("ids/etopen-2019"), require_corpus("pcaps"))
    else {
        return;
    };
    let set = set_of_pairs(&etopen_fast_patterns(&rules));
    let img = Image::compile(&set).expect("compile");
    let real = tcpdump_payloads(&pcaps, 1 << 20);
    let mut stream = real.concat();
    stream.extend(http_like(2000, 7).concat());
    for size in [1460usize, 64] {
        let p: Vec<Vec<u8>> = stream.chunks_exact(size).map(<[u8]>::to_vec).collect();
        dump(&out.join(size.to_string()), &img, &p);
    }
    let mut mixed = real;
    mixed.extend(http_like(2000, 11));
    let mut rng = Rng(5);
    let all: Vec<u8> = (0..=255).collect();
    mixed.extend((0..64).map(|_| rng.bytes(65536, &all)));
    dump(&out.join("mixed"), &img, &mixed);
}
