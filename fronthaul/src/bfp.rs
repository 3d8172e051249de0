//! PRB (de)compression: block floating point (O-RAN CUS Annex A.1, udCompMeth 1) and no
//! compression (udCompMeth 0), for sample widths 1..=16.
//!
//! A PRB is 12 resource elements = 24 samples (I0 Q0 ... I11 Q11). BFP sends one udCompParam
//! byte (bits 3..0: the exponent) and 24 mantissas of `width` bits, two's complement, packed
//! MSB first across bytes (3 * width bytes); the sample is `mantissa << exponent`. Without
//! compression the 24 samples are sent as they are, `width` bits each, and the exponent is 0.

/// Samples in one PRB.
pub const PRB_SAMPLES: usize = 24;

/// Compression method of a section (the udCompMeth values this decoder takes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    None,
    Bfp,
}

impl Method {
    pub fn from_ud_comp_meth(m: u8) -> Option<Method> {
        match m {
            pipeline::wire::oran::comp_meth::NONE => Some(Method::None),
            pipeline::wire::oran::comp_meth::BFP => Some(Method::Bfp),
            _ => None,
        }
    }

    pub fn ud_comp_meth(self) -> u8 {
        match self {
            Method::None => pipeline::wire::oran::comp_meth::NONE,
            Method::Bfp => pipeline::wire::oran::comp_meth::BFP,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Method::None => "none",
            Method::Bfp => "bfp",
        }
    }
}

/// Bytes of one PRB on the wire.
pub const fn prb_bytes(method: Method, width: u8) -> usize {
    let data = 3 * width as usize;
    match method {
        Method::None => data,
        Method::Bfp => data + 1,
    }
}

/// Decompresses one PRB. `bytes` must hold at least [`prb_bytes`] bytes and `width` must be
/// 1..=16 (the decoder checked both); otherwise the samples are zero and the exponent 0.
/// Returns the exponent (0 without compression). Samples are `mantissa << exponent` in full
/// (up to 31 bits: a 4-bit exponent may exceed what 16 bits hold; the slot grid saturates).
#[inline]
pub fn decompress_prb(bytes: &[u8], method: Method, width: u8, out: &mut [i32; PRB_SAMPLES]) -> u8 {
    let (exp, data) = match method {
        Method::Bfp => match bytes.split_first() {
            Some((p, d)) => (p & 0x0f, d),
            None => {
                *out = [0; PRB_SAMPLES];
                return 0;
            }
        },
        Method::None => (0, bytes),
    };
    if !unpack(data, width, exp, out) {
        *out = [0; PRB_SAMPLES];
        return 0;
    }
    exp
}

/// A decompressed sample as a slot stores it: 32 bits, or 16 where the caller checked that
/// every sample fits (`width + exponent <= 16`: the truncation then loses nothing).
trait Sample: Copy {
    fn from_i32(v: i32) -> Self;
}

impl Sample for i32 {
    #[inline(always)]
    fn from_i32(v: i32) -> Self {
        v
    }
}

impl Sample for i16 {
    #[inline(always)]
    fn from_i32(v: i32) -> Self {
        v as i16
    }
}

/// Dispatches to the width-specialised unpacker; false on a bad width or short data.
#[inline]
fn unpack<T: Sample>(data: &[u8], width: u8, exp: u8, out: &mut [T; PRB_SAMPLES]) -> bool {
    macro_rules! by_width {
        ($($w:literal)*) => {
            match width {
                $($w => unpack_w::<$w, T>(data, exp, out),)*
                _ => false,
            }
        };
    }
    by_width!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
}

/// Unpacks 24 `W`-bit mantissas, 8 at a time: 8 samples of `W` bits are exactly `W` bytes,
/// read as one big-endian 128-bit word. With `W` a constant every shift is a constant, so each
/// sample is a shift, a truncation and an arithmetic shift (which sign-extends), no branches.
#[inline(always)]
fn unpack_w<const W: u32, T: Sample>(data: &[u8], exp: u8, out: &mut [T; PRB_SAMPLES]) -> bool {
    let w = W as usize;
    let Some(data) = data.get(..3 * w) else {
        return false;
    };
    for (group, o) in data.chunks_exact(w).zip(out.chunks_exact_mut(8)) {
        let mut b = [0u8; 16];
        b[..w].copy_from_slice(group);
        let x = u128::from_be_bytes(b);
        for (j, v) in o.iter_mut().enumerate() {
            // Sample j top-aligned in a 32-bit word.
            let top = (x << (j as u32 * W) >> 96) as u32;
            *v = T::from_i32(((top as i32) >> (32 - W)) << exp);
        }
    }
    true
}

/// Decompresses one PRB straight to 16 bits when every sample is sure to fit (`width +
/// exponent <= 16`: a `width`-bit mantissa shifted by the exponent stays within i16), as the
/// int16 slot grid stores it; the stage's common case, one pass instead of 32-bit samples and
/// then a saturating copy. Returns the exponent, or `None` (`out` unspecified) when a sample
/// may not fit or the PRB is malformed: the caller then takes [`decompress_prb`] and saturates.
#[inline]
pub fn decompress_prb_i16(
    bytes: &[u8],
    method: Method,
    width: u8,
    out: &mut [i16; PRB_SAMPLES],
) -> Option<u8> {
    let (exp, data) = match method {
        Method::Bfp => {
            let (p, d) = bytes.split_first()?;
            (p & 0x0f, d)
        }
        Method::None => (0, bytes),
    };
    if u32::from(width) + u32::from(exp) > 16 {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    if (8..=15).contains(&width) && std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above), the only requirement of a
        // `target_feature(enable = "avx2")` function.
        return unsafe { super::bfp_avx2::unpack_i16(data, width, exp, out) }.then_some(exp);
    }
    unpack(data, width, exp, out).then_some(exp)
}

/// How far ahead of the PRB being decoded [`decompress_run_i16`] has the frame fetched into the
/// cache: a large frame (2 KB a packet of 50 BFP14 PRBs) is out of the core's caches when it
/// arrives, and the hardware prefetcher alone left the decoder waiting on its lines (on 32
/// eAxCs x 32 slots of frames the whole stage decoded BFP14 at 60% of its rate on frames in
/// cache).
pub(super) const PREFETCH_BYTES: usize = 512;

/// A hint to start fetching the cache line of `bytes[at]` (none past the end).
#[inline(always)]
pub(super) fn prefetch(bytes: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(b) = bytes.get(at) {
        // SAFETY: a prefetch is a hint: it reads nothing the program sees and does not fault.
        unsafe {
            core::arch::x86_64::_mm_prefetch(
                std::ptr::from_ref(b).cast::<i8>(),
                core::arch::x86_64::_MM_HINT_T0,
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, at);
}

/// [`decompress_prb_i16`] over consecutive PRBs: PRB `k` is `bytes[k * prb_bytes ..]`, decoded
/// into cell `k` of `out` (`out[24 k .. 24 k + 24]`; cells end where a whole one no longer
/// fits), in order, while each one's samples all fit 16 bits. Returns how many PRBs were
/// decoded: every cell's, or the index of the first PRB that may not fit or is short (its
/// cell unspecified; the caller decodes it with [`decompress_prb`] and saturates). `bytes` may
/// run on past the PRBs (the rest of the frame: it is fetched ahead). One width dispatch and
/// one CPU-feature check a run instead of a PRB.
pub fn decompress_run_i16(bytes: &[u8], method: Method, width: u8, out: &mut [i16]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if (8..=15).contains(&width) && std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above), the only requirement of a
        // `target_feature(enable = "avx2")` function.
        return unsafe {
            super::bfp_avx2::unpack_run_i16(bytes, method == Method::Bfp, width, out)
        };
    }
    let pb = prb_bytes(method, width);
    let cells = out.len() / PRB_SAMPLES;
    for (k, o) in out.chunks_exact_mut(PRB_SAMPLES).enumerate() {
        prefetch(bytes, k * pb + PREFETCH_BYTES);
        let (Some(b), Ok(o)) = (
            bytes.get(k * pb..(k + 1) * pb),
            <&mut [i16; PRB_SAMPLES]>::try_from(o),
        ) else {
            return k;
        };
        if decompress_prb_i16_portable(b, method, width, o).is_none() {
            return k;
        }
    }
    cells
}

/// [`decompress_prb_i16`] without SIMD: what runs on a CPU without AVX2 (public so that tests
/// and the benchmark compare the two on machines that have both).
pub fn decompress_prb_i16_portable(
    bytes: &[u8],
    method: Method,
    width: u8,
    out: &mut [i16; PRB_SAMPLES],
) -> Option<u8> {
    let (exp, data) = match method {
        Method::Bfp => {
            let (p, d) = bytes.split_first()?;
            (p & 0x0f, d)
        }
        Method::None => (0, bytes),
    };
    if u32::from(width) + u32::from(exp) > 16 {
        return None;
    }
    unpack(data, width, exp, out).then_some(exp)
}

/// The plain scalar decoder: bit by bit, the way the annex reads. The benchmark's baseline and
/// the property tests' reference.
pub fn decompress_prb_scalar(
    bytes: &[u8],
    method: Method,
    width: u8,
    out: &mut [i32; PRB_SAMPLES],
) -> u8 {
    *out = [0; PRB_SAMPLES];
    if !(1..=16).contains(&width) || bytes.len() < prb_bytes(method, width) {
        return 0;
    }
    let (exp, data) = match method {
        Method::Bfp => (bytes[0] & 0x0f, &bytes[1..]),
        Method::None => (0, bytes),
    };
    let mut bit = 0usize;
    for o in out.iter_mut() {
        let mut v: u32 = 0;
        for _ in 0..width {
            let b = (data[bit / 8] >> (7 - bit % 8)) & 1;
            v = (v << 1) | u32::from(b);
            bit += 1;
        }
        // Sign-extend from `width` bits.
        let m = if v & (1 << (width - 1)) != 0 {
            v as i32 - (1i32 << width)
        } else {
            v as i32
        };
        *o = m * (1i32 << exp);
    }
    exp
}

/// BFP exponent of a block (annex A.1.2): max(0, bitlen(max |sample|) + 1 - width).
pub fn bfp_exponent(samples: &[i16; PRB_SAMPLES], width: u8) -> u8 {
    let max_abs = samples
        .iter()
        .map(|&s| i32::from(s).unsigned_abs())
        .max()
        .unwrap_or(0);
    let bitlen = 32 - max_abs.leading_zeros();
    (bitlen + 1).saturating_sub(u32::from(width)).min(15) as u8
}

/// Compresses one PRB into `out` ([`prb_bytes`] bytes). Uncompressed samples are cut to
/// `width` bits (callers keep them in range). Returns the exponent. Panics on a width outside
/// 1..=16 or a short `out` (a programming error: the generator validates its options).
pub fn compress_prb(samples: &[i16; PRB_SAMPLES], method: Method, width: u8, out: &mut [u8]) -> u8 {
    assert!((1..=16).contains(&width), "width {width} outside 1..=16");
    let n = prb_bytes(method, width);
    let out = &mut out[..n];
    out.fill(0);
    let (exp, data) = match method {
        Method::Bfp => {
            let e = bfp_exponent(samples, width);
            out[0] = e;
            (e, &mut out[1..])
        }
        Method::None => (0, &mut out[..]),
    };
    // Mantissas MSB first, back to back: each goes into a bit accumulator, whole bytes leave it
    // (24 samples of `width` bits are 3 x `width` whole bytes). A bit at a time was 87% of the
    // O-RAN generator's time.
    let mask = (1u32 << width) - 1;
    let (mut acc, mut bits, mut at) = (0u64, 0u32, 0usize);
    for &s in samples {
        acc = (acc << width) | u64::from((i32::from(s) >> exp) as u32 & mask);
        bits += u32::from(width);
        while bits >= 8 {
            bits -= 8;
            data[at] = (acc >> bits) as u8;
            at += 1;
        }
    }
    exp
}

/// What a compressed PRB decodes back to: each sample's mantissa (arithmetic shift) << exponent,
/// or the sample cut to `width` bits (sign-extended) without compression.
pub fn quantise(samples: &[i16; PRB_SAMPLES], method: Method, width: u8) -> [i32; PRB_SAMPLES] {
    let mut q = [0i32; PRB_SAMPLES];
    let exp = match method {
        Method::Bfp => bfp_exponent(samples, width),
        Method::None => 0,
    };
    for (o, &s) in q.iter_mut().zip(samples) {
        let m = i32::from(s) >> exp;
        let sh = 32 - u32::from(width);
        *o = ((m << sh) >> sh) << exp;
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`compress_prb`] a bit at a time, as the O-RAN bit order reads (the reference).
    fn compress_bitwise(samples: &[i16; PRB_SAMPLES], method: Method, width: u8) -> Vec<u8> {
        let mut out = vec![0u8; prb_bytes(method, width)];
        let (exp, data) = match method {
            Method::Bfp => {
                let e = bfp_exponent(samples, width);
                out[0] = e;
                (e, &mut out[1..])
            }
            Method::None => (0, &mut out[..]),
        };
        let mut bit = 0usize;
        for &s in samples {
            let m = (i32::from(s) >> exp) as u32 & ((1u32 << width) - 1);
            for i in (0..width).rev() {
                if m >> i & 1 != 0 {
                    data[bit / 8] |= 0x80 >> (bit % 8);
                }
                bit += 1;
            }
        }
        out
    }

    #[test]
    fn compression_equals_the_bitwise_packing_for_every_width() {
        let mut r = xorshift(0x5eed);
        for width in 1..=16u8 {
            for method in [Method::Bfp, Method::None] {
                for round in 0..200 {
                    let shift = (r() % 16) as u32;
                    let mut s = [0i16; PRB_SAMPLES];
                    for v in s.iter_mut() {
                        *v = ((r() >> 32) as i16) >> shift;
                        if round % 7 == 0 {
                            *v = [i16::MIN, i16::MAX, -1, 0][(r() % 4) as usize];
                        }
                    }
                    let want = compress_bitwise(&s, method, width);
                    // Stale bytes in the buffer must not show.
                    let mut got = vec![0xA5u8; want.len() + 3];
                    compress_prb(&s, method, width, &mut got);
                    assert_eq!(&got[..want.len()], &want[..], "{method:?} width {width}");
                }
            }
        }
    }

    /// A fixed xorshift64 stream from `seed` (the tests' random bytes and exponents).
    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn bfp9_prb_from_up_bfp9_frame_1() {
        // The first PRB of up_bfp9.pcap (exponent 1); the truth file gives its mantissas.
        let b = [
            0x01, 0x14, 0xad, 0xd4, 0x08, 0xd9, 0x36, 0x22, 0x84, 0x03, 0x45, 0xfb, 0x3e, 0xe5,
            0x3e, 0x42, 0x66, 0xe3, 0x36, 0xff, 0xc5, 0x19, 0xeb, 0x1e, 0x6f, 0x8c, 0x7a, 0x8c,
        ];
        let mant = [
            41, 183, 160, 141, -218, -120, -190, 3, 139, -20, -9, 83, -56, 153, -143, -202, -1,
            -236, 207, 177, -51, -29, 61, 140,
        ];
        let mut out = [0; 24];
        assert_eq!(decompress_prb(&b, Method::Bfp, 9, &mut out), 1);
        let want: Vec<i32> = mant.iter().map(|m| m << 1).collect();
        assert_eq!(out.to_vec(), want);
        let mut s = [0; 24];
        assert_eq!(decompress_prb_scalar(&b, Method::Bfp, 9, &mut s), 1);
        assert_eq!(s, out);
        // Short data or a bad width: zeros, never a panic.
        assert_eq!(decompress_prb(&b[..27], Method::Bfp, 9, &mut out), 0);
        assert_eq!(out, [0; 24]);
        assert_eq!(decompress_prb(&b, Method::Bfp, 17, &mut out), 0);
        assert_eq!(decompress_prb(&[], Method::Bfp, 9, &mut out), 0);
        assert_eq!(decompress_prb_scalar(&b, Method::Bfp, 0, &mut out), 0);
    }

    #[test]
    fn uncompressed_16_bit_bytes() {
        let mut b = [0u8; 48];
        b[0] = 0x80; // I0 = -32768
        b[3] = 0x05; // Q0 = 5
        b[46] = 0xff;
        b[47] = 0xff; // Q11 = -1
        let mut out = [0; 24];
        assert_eq!(decompress_prb(&b, Method::None, 16, &mut out), 0);
        assert_eq!((out[0], out[1], out[23]), (-32768, 5, -1));
    }

    #[test]
    fn compress_then_decompress_is_the_quantised_block_for_every_width() {
        let mut x: u32 = 12345;
        for width in 1..=16u8 {
            for method in [Method::Bfp, Method::None] {
                for round in 0..200 {
                    let mut s = [0i16; 24];
                    for v in s.iter_mut() {
                        x = x.wrapping_mul(1664525).wrapping_add(1013904223);
                        // Vary the block's magnitude so every exponent appears.
                        let sh = round % 16;
                        *v = ((x >> 16) as i16) >> sh;
                    }
                    if round == 0 {
                        s[3] = i16::MIN;
                    }
                    let mut wire = [0u8; 49];
                    let e = compress_prb(&s, method, width, &mut wire);
                    let mut fast = [0; 24];
                    let mut slow = [0; 24];
                    assert_eq!(decompress_prb(&wire, method, width, &mut fast), e);
                    assert_eq!(decompress_prb_scalar(&wire, method, width, &mut slow), e);
                    assert_eq!(fast, slow, "width {width} {method:?}");
                    assert_eq!(
                        fast,
                        quantise(&s, method, width),
                        "width {width} {method:?}"
                    );
                    if method == Method::Bfp && width >= 2 {
                        // BFP keeps every sample within one quantisation step.
                        for (q, &o) in fast.iter().zip(&s) {
                            assert!((i32::from(o) - q).abs() < (1 << e), "{o} -> {q} exp {e}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn exponent_rule() {
        let mut s = [0i16; 24];
        assert_eq!(bfp_exponent(&s, 9), 0);
        s[0] = 255; // bitlen 8: fits 9 bits
        assert_eq!(bfp_exponent(&s, 9), 0);
        s[0] = 256;
        assert_eq!(bfp_exponent(&s, 9), 1);
        s[0] = -32768;
        assert_eq!(bfp_exponent(&s, 9), 8);
        assert_eq!(bfp_exponent(&s, 1), 15);
    }

    #[test]
    fn the_16_bit_decoder_equals_the_scalar_reference_on_random_prbs() {
        // On this CPU the AVX2 unpacker where it has AVX2 (widths 8..=15), else the portable one;
        // each against the bit-by-bit reference, with bytes after the PRB (as in a frame) and
        // without.
        let mut stream = xorshift(0x2545_F491_4F6C_DD1Du64);
        let mut next = || stream() as u8;
        for width in 1..=16u8 {
            for exp in 0..=(16 - width) {
                for round in 0..64 {
                    let n = prb_bytes(Method::Bfp, width) + round % 3;
                    let mut b: Vec<u8> = (0..n).map(|_| next()).collect();
                    b[0] = (b[0] & 0xf0) | exp;
                    let (mut fast, mut want) = ([0i16; PRB_SAMPLES], [0i32; PRB_SAMPLES]);
                    assert_eq!(
                        decompress_prb_i16(&b, Method::Bfp, width, &mut fast),
                        Some(exp)
                    );
                    assert_eq!(
                        decompress_prb_scalar(&b, Method::Bfp, width, &mut want),
                        exp
                    );
                    let want: Vec<i16> = want.iter().map(|&v| v as i16).collect();
                    assert_eq!(
                        &fast[..],
                        &want[..],
                        "width {width} exp {exp} round {round}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_16_bit_decoder_equals_the_32_bit_one_where_every_sample_fits() {
        // Every width and exponent, both methods, bytes from a fixed xorshift stream.
        let mut stream = xorshift(0x9E37_79B9_7F4A_7C15u64);
        let mut next = || stream() as u8;
        for method in [Method::Bfp, Method::None] {
            for width in 1..=16u8 {
                for exp in 0..16u8 {
                    let mut b: Vec<u8> = (0..prb_bytes(method, width)).map(|_| next()).collect();
                    if method == Method::Bfp {
                        b[0] = (b[0] & 0xf0) | exp;
                    }
                    let (mut wide, mut narrow) = ([0i32; PRB_SAMPLES], [0i16; PRB_SAMPLES]);
                    let e = decompress_prb(&b, method, width, &mut wide);
                    let e16 = decompress_prb_i16(&b, method, width, &mut narrow);
                    let mut portable = [0i16; PRB_SAMPLES];
                    let ep = decompress_prb_i16_portable(&b, method, width, &mut portable);
                    assert_eq!(ep, e16, "{method:?} width {width} exp {exp}");
                    if e16.is_some() {
                        assert_eq!(portable, narrow, "SIMD: {method:?} width {width} exp {exp}");
                    }
                    let fits = u32::from(width) + u32::from(e) <= 16;
                    assert_eq!(e16.is_some(), fits, "{method:?} width {width} exp {exp}");
                    if let Some(e16) = e16 {
                        assert_eq!(e16, e);
                        let want: Vec<i16> = wide.iter().map(|&v| v as i16).collect();
                        assert!(wide.iter().all(|&v| i32::from(v as i16) == v));
                        assert_eq!(&narrow[..], &want[..], "{method:?} width {width} exp {exp}");
                    }
                    // A short PRB or a bad width is left to the 32-bit decoder.
                    assert_eq!(
                        decompress_prb_i16(&b[..b.len() - 1], method, width, &mut narrow),
                        None
                    );
                    if method == Method::None && exp == 0 {
                        assert_eq!(decompress_prb_i16(&b, method, 17, &mut narrow), None);
                        assert_eq!(decompress_prb_i16(&b, method, 0, &mut narrow), None);
                    }
                }
            }
        }
    }

    #[test]
    fn a_run_decodes_as_prb_by_prb_and_stops_where_a_prb_may_not_fit() {
        let mut next = xorshift(0x1234_5678_9ABC_DEF1);
        for method in [Method::Bfp, Method::None] {
            for width in 1..=16u8 {
                let pb = prb_bytes(method, width);
                for round in 0..24 {
                    let n = 1 + (next() % 12) as usize;
                    let mut b: Vec<u8> = (0..n * pb + (round % 3)).map(|_| next() as u8).collect();
                    if method == Method::Bfp {
                        for k in 0..n {
                            // Mostly fitting exponents; now and then one that does not.
                            let e =
                                (next() % 4) as u8 + if next() % 8 == 0 { 16 - width } else { 0 };
                            b[k * pb] = (b[k * pb] & 0xf0) | e.min(15);
                        }
                    }
                    // Sometimes cut the last PRB short.
                    let cut = if round % 5 == 4 {
                        b.len().min(n * pb) - 1
                    } else {
                        b.len()
                    };
                    let b = &b[..cut];
                    let mut run = vec![0i16; n * PRB_SAMPLES];
                    let done = decompress_run_i16(b, method, width, &mut run);
                    let mut want = n;
                    for (k, cell) in run.chunks_exact(PRB_SAMPLES).enumerate() {
                        let mut one = [0i16; PRB_SAMPLES];
                        let bytes = b.get(k * pb..(k + 1) * pb).unwrap_or(&[]);
                        if decompress_prb_i16(bytes, method, width, &mut one).is_none() {
                            want = k;
                            break;
                        }
                        assert_eq!(
                            cell,
                            &one[..],
                            "{method:?} width {width} round {round} PRB {k}"
                        );
                    }
                    assert_eq!(done, want, "{method:?} width {width} round {round}");
                }
            }
        }
    }
}
