//! The CUDA matcher (`gpu-kernels/acl.cuh`) compiled for the host by `build.rs`: lets tests and
//! tools check, on machines without a GPU, that the GPU code gives the Rust matcher's answers.

use super::AclClassifier;
use crate::abi::AclKey;

extern "C" {
    fn pw_host_acl_classify(image: *const u32, key: *const AclKey) -> u32;
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
