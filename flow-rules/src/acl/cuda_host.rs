//! The CUDA matcher (`acl.cuh` of pktwarp-kernels) compiled for the host (its feature `host`):
//! lets tests and tools check, on machines without a GPU, that the GPU code gives the Rust
//! matcher's answers.

use super::AclClassifier;
use crate::abi::AclKey;
use pktwarp_kernels::host::ffi;

/// `pw_acl_key_from_meta` (host build); `meta` points to a `pw_packet_meta`
/// (`pipeline::meta::PacketMeta`), which this crate does not know.
///
/// # Safety
/// `meta` must point to a valid `pw_packet_meta` and `key` to a writable `pw_acl_key`.
pub unsafe fn pw_host_acl_key_from_meta(meta: *const u8, port_id: u16, key: *mut AclKey) {
    // SAFETY: the caller's guarantees; AclKey mirrors pw_acl_key (layout tests in abi.rs).
    unsafe { ffi::pw_host_acl_key_from_meta(meta, port_id, key.cast()) }
}

/// `pw_acl_classify` of acl.cuh on `cls`'s image.
pub fn classify(cls: &AclClassifier, key: &AclKey) -> u32 {
    let img = cls.image();
    // SAFETY: `img` is a complete image built by AclClassifier::build (header first, every
    // offset inside it), alive for the call; `key` is a valid #[repr(C)] pw_acl_key.
    unsafe { ffi::pw_host_acl_classify(img.as_ptr(), (key as *const AclKey).cast()) }
}

/// `pw_acl_classify_lanes` of acl.cuh: the GPU's cooperative lookup (a group of `gsize` lanes,
/// a power of two in 1..=32) played lane by lane on the host.
pub fn classify_lanes(cls: &AclClassifier, key: &AclKey, gsize: u32) -> u32 {
    assert!(gsize.is_power_of_two() && gsize <= 32, "group size {gsize}");
    let img = cls.image();
    // SAFETY: as in `classify`; gsize is within the 32 lanes the C function's arrays hold.
    unsafe { ffi::pw_host_acl_classify_lanes(img.as_ptr(), (key as *const AclKey).cast(), gsize) }
}
