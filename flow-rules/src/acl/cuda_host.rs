//! The CUDA matcher (`gpu-kernels/acl.cuh`) compiled for the host by `build.rs`: lets tests and
//! tools check, on machines without a GPU, that the GPU code gives the Rust matcher's answers.

use super::AclClassifier;
use crate::abi::AclKey;

extern "C" {
    fn pw_host_acl_classify(image: *const u32, key: *const AclKey) -> u32;
    fn pw_host_acl_classify_lanes(image: *const u32, key: *const AclKey, gsize: u32) -> u32;
    /// `pw_acl_key_from_meta` (host build); `meta` points to a `pw_packet_meta`
    /// (`pipeline::meta::PacketMeta`), which this crate does not know.
    pub fn pw_host_acl_key_from_meta(meta: *const u8, port_id: u16, key: *mut AclKey);
}

/// `pw_acl_classify` of acl.cuh on `cls`'s image.
pub fn classify(cls: &AclClassifier, key: &AclKey) -> u32 {
    let img = cls.image();
    // SAFETY: `img` is a complete image built by AclClassifier::build (header first, every
    // offset inside it), alive for the call; `key` is a valid #[repr(C)] pw_acl_key.
    unsafe { pw_host_acl_classify(img.as_ptr(), key) }
}

/// `pw_acl_classify_lanes` of acl.cuh: the GPU's cooperative lookup (a group of `gsize` lanes,
/// a power of two in 1..=32) played lane by lane on the host.
pub fn classify_lanes(cls: &AclClassifier, key: &AclKey, gsize: u32) -> u32 {
    assert!(gsize.is_power_of_two() && gsize <= 32, "group size {gsize}");
    let img = cls.image();
    // SAFETY: as in `classify`; gsize is within the 32 lanes the C function's arrays hold.
    unsafe { pw_host_acl_classify_lanes(img.as_ptr(), key, gsize) }
}
