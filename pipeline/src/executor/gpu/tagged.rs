//! Tagged granules (`PW_PIPE_TAGGED`): a burst's image written as 16-byte words of 12 image
//! bytes and the burst's tag, so a polling kernel takes every word it sees tagged as this
//! burst's; and the cache hint that moves the written lines towards the GPU's reads.

use super::abi;

/// Whether this CPU's aligned 16-byte stores are single-copy atomic, which tagged granules need
/// (the kernel takes a granule whose tag it sees as wholly this burst's): x86-64 with AVX (Intel
/// and AMD guarantee it there).
pub fn tagged_stores_atomic() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Writes the first `len` bytes of `img` at `dst` (16-byte aligned) as tagged granules
/// (`PW_PIPE_TAGGED`): 16 bytes {img[12g..12g+4], img[12g+4..12g+8], img[12g+8..12g+12], tag}
/// per 12 image bytes, the first granule (the header's n_frames / data_bytes, which the kernel
/// sizes the burst by) last. `img` holds [`tagged_src_len`]`(len)` bytes (each granule is one
/// 16-byte load; bytes past `len` are written as they are). One aligned 16-byte SSE store
/// (`movdqa`) per granule, atomic on CPUs with AVX ([`tagged_stores_atomic`]; tagged queues are
/// refused elsewhere), so a granule the kernel sees tagged is wholly this burst's and no fence
/// is needed. Never non-temporal stores: the documented 16-byte atomicity (Intel SDM vol. 3A
/// 9.1.1; AMD: cacheable accesses) does not cover `movntdq`, whose write-combining buffer may
/// leave in smaller pieces when it is flushed part-full, so the kernel could see a granule's
/// tag with stale bytes beside it.
///
/// # Safety
/// `dst` is valid for `16 * len.div_ceil(12)` bytes of writes and 16-byte aligned.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn store_tagged(dst: *mut u8, img: &[u8], len: usize, tag: u32) {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cvtsi32_si128, _mm_loadu_si128, _mm_or_si128, _mm_set_epi32,
        _mm_slli_si128, _mm_store_si128,
    };
    let granules = tagged_granules(len);
    assert!(
        img.len() >= tagged_src_len(len),
        "store_tagged: image not padded"
    );
    let keep = _mm_set_epi32(0, -1, -1, -1);
    let t = _mm_slli_si128::<12>(_mm_cvtsi32_si128(tag as i32));
    for g in (0..granules).rev() {
        // SAFETY: img holds 12g + 16 bytes (asserted above, g < granules); dst + 16g is 16-byte
        // aligned and inside the caller's range.
        unsafe {
            let p = _mm_loadu_si128(img.as_ptr().add(abi::TAG_PAYLOAD * g) as *const __m128i);
            let v = _mm_or_si128(_mm_and_si128(p, keep), t);
            _mm_store_si128(dst.add(16 * g) as *mut __m128i, v);
        }
    }
}

/// Moves the cache lines of `bytes` at `p` out of this core's caches into the shared last-level
/// cache (`cldemote`, a hint: a no-op on CPUs without it), after the host wrote them for the GPU.
/// A persistent kernel polls a tagged slot with rounds that read every line of it across PCIe;
/// a read of a line this core holds modified must first get it back from the core, while one
/// in the last-level cache is answered from there. Measured on the H200 machine: 32-frame bursts
/// ~0.2 us sooner at p50, though the submit call takes ~0.5 us longer (docs/perf-log.md, "the
/// host's side of a small burst (cldemote kept)", 2026-11-30).
#[cfg(target_arch = "x86_64")]
pub(super) fn demote_lines(p: *const u8, bytes: usize) {
    let end = p as usize + bytes;
    let mut line = p as usize & !63;
    while line < end {
        // SAFETY: cldemote only hints where a line should live; it neither reads nor writes
        // memory architecturally and raises no fault (an encoding older CPUs execute as a NOP).
        unsafe {
            std::arch::asm!("cldemote byte ptr [{0}]", in(reg) line, options(nostack, preserves_flags))
        };
        line += 64;
    }
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn demote_lines(_p: *const u8, _bytes: usize) {}

/// Bytes [`store_tagged`] reads for an image of `len` bytes: whole granules, and 4 more (its
/// last granule is one 16-byte load).
pub(super) fn tagged_src_len(len: usize) -> usize {
    tagged_granules(len) * abi::TAG_PAYLOAD + 4
}

/// Tagged granules (16 bytes each in the slot) that carry an image of `len` bytes.
pub(super) fn tagged_granules(len: usize) -> usize {
    len.div_ceil(abi::TAG_PAYLOAD)
}

/// Tagged granules need atomic 16-byte stores ([`tagged_stores_atomic`] is false here), so no
/// queue is ever tagged on this architecture.
///
/// # Safety
/// Never called.
#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn store_tagged(_dst: *mut u8, _img: &[u8], _len: usize, _tag: u32) {
    unreachable!("tagged queues are refused on this architecture")
}
