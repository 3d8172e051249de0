//! The 16-bit BFP unpacker with AVX2 (x86-64 CPUs that have it, checked at run time by the
//! caller): 8 mantissas of `W` bits are `W` bytes; one byte shuffle puts each mantissa's three
//! bytes, most significant first, at the top of its 32-bit lane, a per-lane shift moves the
//! mantissa's first bit to bit 31, an arithmetic shift sign-extends it and a shift by the
//! exponent scales it: eight samples in four instructions where the scalar unpacker spends
//! about six a sample. Widths 2..=15 (a mantissa's bits then lie within 3 bytes of a 16-byte
//! group); the scalar unpacker takes the rest.

use core::arch::x86_64::*;

use super::bfp::PRB_SAMPLES;

/// Per lane j of a group: the byte-shuffle control (the lane's bytes, least significant first:
/// zero, then the mantissa's three bytes from the last to the first) and the left shift that
/// puts the mantissa's first bit at bit 31.
const fn controls(w: u32) -> ([i32; 8], [i32; 8]) {
    let mut shuf = [0i32; 8];
    let mut shift = [0i32; 8];
    let mut j = 0;
    while j < 8 {
        let bit = j * w;
        let b = bit / 8;
        shuf[j as usize] = (0x80 | ((b + 2) << 8) | ((b + 1) << 16) | (b << 24)) as i32;
        shift[j as usize] = (bit % 8) as i32;
        j += 1;
    }
    (shuf, shift)
}

#[inline]
#[target_feature(enable = "avx2")]
fn v8(a: [i32; 8]) -> __m256i {
    _mm256_setr_epi32(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7])
}

/// Samples of one group of 8 (`group`: its `W` bytes), as 32-bit lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn group<const W: u32>(group: &[u8], exp: __m128i) -> __m256i {
    let (shuf, shift) = const { controls(W) };
    // The group's bytes 0..8, and 8..W from an 8-byte read ending at its last byte shifted
    // down (two loads, no byte copy; W is 8..=15).
    let w = W as usize;
    let word = |at: usize| {
        group
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    };
    let lo = word(0);
    let hi = if W > 8 {
        word(w - 8) >> (8 * (16 - W))
    } else {
        0
    };
    let bytes = _mm256_broadcastsi128_si256(_mm_set_epi64x(hi as i64, lo as i64));
    let top = _mm256_sllv_epi32(_mm256_shuffle_epi8(bytes, v8(shuf)), v8(shift));
    let m = _mm256_sra_epi32(top, _mm_cvtsi32_si128(32 - W as i32));
    _mm256_sll_epi32(m, exp)
}

/// Four 16-bit samples of an `i64` lane into `out`.
#[inline]
fn put4(out: &mut [i16], x: i64) {
    for (k, o) in out.iter_mut().enumerate().take(4) {
        *o = (x >> (16 * k)) as i16;
    }
}

#[inline]
#[target_feature(enable = "avx2")]
fn unpack_w<const W: u32>(data: &[u8], exp: u8, out: &mut [i16; PRB_SAMPLES]) -> bool {
    let w = W as usize;
    let Some(data) = data.get(..3 * w) else {
        return false;
    };
    let e = _mm_cvtsi32_si128(i32::from(exp));
    let g0 = group::<W>(&data[..w], e);
    let g1 = group::<W>(&data[w..2 * w], e);
    let g2 = group::<W>(&data[2 * w..], e);
    // packs interleaves the 128-bit halves: [a0..3 b0..3 a4..7 b4..7]; the permute orders them.
    let ab = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(g0, g1));
    let cc = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(g2, g2));
    put4(&mut out[0..4], _mm256_extract_epi64::<0>(ab));
    put4(&mut out[4..8], _mm256_extract_epi64::<1>(ab));
    put4(&mut out[8..12], _mm256_extract_epi64::<2>(ab));
    put4(&mut out[12..16], _mm256_extract_epi64::<3>(ab));
    put4(&mut out[16..20], _mm256_extract_epi64::<0>(cc));
    put4(&mut out[20..24], _mm256_extract_epi64::<1>(cc));
    true
}

/// The 24 samples of a PRB's mantissas (`data`, 3 x `width` bytes or more) shifted by `exp`,
/// 16 bits each: the caller checked `width + exp <= 16`, so no sample saturates. False on a
/// width outside 8..=15 or short data (`out` then unspecified).
#[target_feature(enable = "avx2")]
pub fn unpack_i16(data: &[u8], width: u8, exp: u8, out: &mut [i16; PRB_SAMPLES]) -> bool {
    macro_rules! by_width {
        ($($w:literal)*) => {
            match width {
                $($w => unpack_w::<$w>(data, exp, out),)*
                _ => false,
            }
        };
    }
    by_width!(8 9 10 11 12 13 14 15)
}

/// PRBs of `bytes` (`3 * width` bytes each, after a udCompParam byte when `bfp`) into the cells
/// of `out` (24 samples each), 16 bits straight, in order while a PRB's samples all fit
/// (`width + exponent <= 16`) and its bytes are there; returns how many were decoded (see
/// `bfp::decompress_run_i16`). Widths 8..=15 (0 PRBs otherwise).
#[target_feature(enable = "avx2")]
pub fn unpack_run_i16(bytes: &[u8], bfp: bool, width: u8, out: &mut [i16]) -> usize {
    macro_rules! by_width {
        ($($w:literal)*) => {
            match width {
                $($w => run_w::<$w>(bytes, bfp, out),)*
                _ => 0,
            }
        };
    }
    by_width!(8 9 10 11 12 13 14 15)
}

#[inline]
#[target_feature(enable = "avx2")]
fn run_w<const W: u32>(bytes: &[u8], bfp: bool, out: &mut [i16]) -> usize {
    let pb = 3 * W as usize + usize::from(bfp);
    let cells = out.len() / PRB_SAMPLES;
    for (k, o) in out.chunks_exact_mut(PRB_SAMPLES).enumerate() {
        super::bfp::prefetch(bytes, k * pb + super::bfp::PREFETCH_BYTES);
        let (Some(prb), Ok(o)) = (
            bytes.get(k * pb..(k + 1) * pb),
            <&mut [i16; PRB_SAMPLES]>::try_from(o),
        ) else {
            return k;
        };
        let (exp, data) = match (bfp, prb.split_first()) {
            (true, Some((p, d))) => (p & 0x0f, d),
            _ => (0, prb),
        };
        if W + u32::from(exp) > 16 || !unpack_w::<W>(data, exp, o) {
            return k;
        }
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lane_reads_within_its_16_byte_group() {
        for w in 2..=15u32 {
            let (shuf, shift) = controls(w);
            for j in 0..8 {
                let b = shuf[j] as u32 >> 24;
                assert!(b + 2 < 16, "width {w} lane {j}");
                assert!(shift[j] as u32 + w <= 24, "width {w} lane {j}");
            }
        }
    }
}
