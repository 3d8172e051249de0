//! The CUDA matcher (`gpu-kernels/acl.cuh`) compiled for the host by `build.rs`: lets tests and
//! tools check, on machines without a GPU, that the GPU code gives the Rust matcher's answers.

use super::AclClassifier;
use crate::abi::AclKey;

extern "C" {
    fn pw_host_acl_classify(image: *const u32, key: *const AclKey) -> u32;
    fn pw_host_acl_classify_lanes(
        image: *const u32,
        cache: *const u32,
        cached: u32,
        key: *const AclKey,
        gsize: u32,
    ) -> u32;
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
    // SAFETY: as in `classify` (no cache: null, 0); gsize is within the 32 lanes the C
    // function's arrays hold.
    unsafe { pw_host_acl_classify_lanes(img.as_ptr(), std::ptr::null(), 0, key, gsize) }
}

/// An image whose first `cached` words live apart, as the persistent kernel keeps them in shared
/// memory: the lookup must read those words from the cache only. To prove it, the image copy the
/// lookup gets has them overwritten with `0xA5A5_A5A5` (a read of one there misleads the walk).
pub struct CachedImage {
    cache: Vec<u32>,
    poisoned: Vec<u32>,
}

impl CachedImage {
    /// `cached` is rounded down to a multiple of 4 words (the kernel caches 16-byte granules) and
    /// capped at the image size.
    pub fn new(cls: &AclClassifier, cached: usize) -> CachedImage {
        let img = cls.image();
        let n = cached.min(img.len()) & !3;
        let mut poisoned = img.to_vec();
        poisoned[..n].fill(0xA5A5_A5A5);
        CachedImage {
            cache: img[..n].to_vec(),
            poisoned,
        }
    }

    /// Words held by the cache.
    pub fn cached_words(&self) -> usize {
        self.cache.len()
    }

    /// `pw_acl_classify_lanes` reading words below `cached_words()` from the cache.
    pub fn classify_lanes(&self, key: &AclKey, gsize: u32) -> u32 {
        assert!(gsize.is_power_of_two() && gsize <= 32, "group size {gsize}");
        // SAFETY: `poisoned` has the image's length and layout past the cache (every offset the
        // walk takes stays inside it); `cache` holds exactly `cached` words; gsize <= 32.
        unsafe {
            pw_host_acl_classify_lanes(
                self.poisoned.as_ptr(),
                self.cache.as_ptr(),
                self.cache.len() as u32,
                key,
                gsize,
            )
        }
    }
}
