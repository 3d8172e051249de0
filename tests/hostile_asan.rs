//! The AddressSanitizer canary of scripts/ci-asan.sh: with the host C++ built under ASan
//! (PKTWARP_HOST_SANITIZE=address), a parse told that a 16-byte frame is 1500 bytes long must
//! be reported as a heap-buffer-overflow. If it is not, the sanitizer is not in the build and a
//! clean ASan run of the differential tests would prove nothing.

/// Ignored in a plain run: without ASan it reads past the buffer with nobody watching.
#[test]
#[ignore = "run by scripts/ci-asan.sh, which expects AddressSanitizer to stop it"]
fn asan_canary_out_of_bounds_parse() {
    // Ethernet, EtherType IPv4, then 2 of the IPv4 header's 20 bytes: the parser reads on.
    let mut frame = vec![0u8; 12];
    frame.extend_from_slice(&[0x08, 0x00, 0x45, 0x00]);
    // SAFETY: none, on purpose: the C++ parser is told the frame is 1500 bytes long while the
    // allocation holds 16, so ASan must catch its first read past them. `meta` is big enough.
    let size = unsafe { pktwarp_kernels::host::ffi::pw_host_meta_size() } as usize;
    let mut meta = vec![0u8; size];
    unsafe { pktwarp_kernels::host::ffi::pw_host_parse(frame.as_ptr(), 1500, meta.as_mut_ptr()) };
    println!("no sanitizer report: meta[0..4] = {:?}", &meta[..4]);
}
