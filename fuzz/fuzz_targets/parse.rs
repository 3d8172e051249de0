//! Fuzz target `parse`: the Rust parser and the CUDA parser (gpu-kernels/parse.cuh compiled for
//! the host) must agree byte for byte on every input, and neither may panic or read out of
//! bounds (the CUDA side is C++: libFuzzer's coverage plus the bounds invariants below).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pipeline::meta::{PacketMeta, ParseStatus};
use pipeline::internal::stage::parse::{cuda_host, parse};

fuzz_target!(|frame: &[u8]| {
    let mut rust = PacketMeta::default();
    let mut cuda = PacketMeta {
        status: 0xffff,
        ..PacketMeta::default()
    };
    parse(frame, &mut rust);
    cuda_host::parse(frame, &mut cuda);
    assert!(
        rust.as_bytes() == cuda.as_bytes(),
        "Rust and CUDA parsers differ\nrust: {rust:?}\ncuda: {cuda:?}"
    );
    // Invariants of the record.
    let len = frame.len();
    assert_eq!(rust.frame_len as usize, len);
    assert!(
        rust.parse_status().is_some(),
        "unknown status {}",
        rust.status
    );
    for off in [
        rust.l3_offset,
        rust.l4_offset,
        rust.payload_offset,
        rust.error_offset,
        rust.inner_l3_offset,
        rust.inner_l4_offset,
    ] {
        assert!(
            off as usize <= len,
            "offset {off} past the frame ({len} bytes): {rust:?}"
        );
    }
    if rust.status == ParseStatus::Ok as u16 {
        assert!(rust.l4_offset == 0 || rust.l4_offset >= rust.l3_offset);
    }
});
