//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! A checksum field holds the ones' complement of the ones' complement sum of the 16-bit
//! big-endian words it covers (an odd trailing byte padded with a zero byte). [`sum`] adds words
//! into a wide accumulator that [`fold`] reduces to 16 bits; [`finish`] complements. A rewrite
//! that changes a few words updates the field with [`update16`] / [`update`] instead of summing
//! the whole packet again: RFC 1624 eqn. 3, `HC' = ~(~HC + ~m + m')`, which (unlike eqn. 2 of
//! RFC 1141) never turns a correct checksum into the negative zero 0x0000 by itself.
//!
//! The CUDA rewrite stages (`gpu-kernels/cuda/*.cuh`) implement the same arithmetic; the
//! differential tests hold the two equal byte for byte.

/// Adds the big-endian 16-bit words of `data` to `acc` (an odd trailing byte is the high byte
/// of a last word). The accumulator is 64-bit: 2^48 bytes before it can overflow.
#[inline]
pub fn sum(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        acc += u64::from(*b) << 8;
    }
    acc
}

/// The ones' complement sum in 16 bits (end-around carries added back).
#[inline]
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    acc as u16
}

/// The checksum field value for an accumulated sum: `!fold(acc)`.
#[inline]
pub fn finish(acc: u64) -> u16 {
    !fold(acc)
}

/// The checksum of `data` alone (the IPv4 header, ICMPv4).
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum(0, data))
}

/// Whether `data`, checksum field included, sums to 0xFFFF (the field is right).
#[inline]
pub fn verify(acc: u64, data: &[u8]) -> bool {
    fold(sum(acc, data)) == 0xFFFF
}

/// The IPv4 pseudo-header sum for TCP / UDP (RFC 9293 3.1, RFC 768): addresses, protocol and
/// the L4 length (header and payload).
#[inline]
pub fn pseudo_v4(src: [u8; 4], dst: [u8; 4], proto: u8, l4_len: u16) -> u64 {
    sum(sum(0, &src), &dst) + u64::from(proto) + u64::from(l4_len)
}

/// The IPv6 pseudo-header sum for TCP / UDP / ICMPv6 (RFC 8200 8.1): addresses, the 32-bit
/// upper-layer length and the next header.
#[inline]
pub fn pseudo_v6(src: [u8; 16], dst: [u8; 16], proto: u8, l4_len: u32) -> u64 {
    sum(sum(0, &src), &dst)
        + u64::from(proto)
        + u64::from(l4_len >> 16)
        + u64::from(l4_len & 0xFFFF)
}

/// RFC 1624 eqn. 3: the checksum field after one covered 16-bit word changed from `old` to
/// `new`.
#[inline]
pub fn update16(hc: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!hc) + u64::from(!old) + u64::from(new))
}

/// [`update16`] for a changed run of bytes that starts at an even offset from the start of what
/// the checksum covers; `old` and `new` have the same length (odd: the last byte is a high
/// byte, as in [`sum`]). Returns `hc` unchanged when the lengths differ (a caller bug, never
/// a wrong checksum).
#[inline]
pub fn update(hc: u16, old: &[u8], new: &[u8]) -> u16 {
    if old.len() != new.len() {
        return hc;
    }
    // ~m summed word by word is (words * 0xFFFF) - sum(m), which overflows nothing in u64;
    // folding each side first keeps the arithmetic in ones' complement terms.
    let not_old = u64::from(!fold(sum(0, old)));
    !fold(u64::from(!hc) + not_old + sum(0, new))
}

/// A UDP checksum as written to the wire: a computed 0 is sent as 0xFFFF, because 0 means "no
/// checksum" (RFC 768).
#[inline]
pub fn udp_wire(c: u16) -> u16 {
    if c == 0 {
        0xFFFF
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // RFC 1071 section 3's example: words 0001 f203 f4f5 f6f7 sum to ddf2.
    #[test]
    fn rfc1071_example() {
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(0, &d)), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    // A real IPv4 header (Wikipedia's example): checksum 0xb861.
    #[test]
    fn ipv4_header_checksum() {
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
        h[10] = 0xb8;
        h[11] = 0x61;
        assert!(verify(0, &h));
        h[11] = 0x62;
        assert!(!verify(0, &h));
    }

    #[test]
    fn odd_length_pads_the_last_byte() {
        assert_eq!(fold(sum(0, &[0x12, 0x34, 0x56])), 0x1234 + 0x5600);
        assert_eq!(fold(sum(0, &[])), 0);
    }

    #[test]
    fn udp_zero_is_sent_as_ffff() {
        assert_eq!(udp_wire(0), 0xFFFF);
        assert_eq!(udp_wire(0x1234), 0x1234);
    }

    #[test]
    fn pseudo_v6_counts_a_jumbo_length() {
        let a = [0u8; 16];
        assert_eq!(pseudo_v6(a, a, 17, 0x0001_0002), 17 + 1 + 2);
    }

    proptest! {
        // The incremental update equals a full recomputation for any data and any change of
        // one word (RFC 1624's claim), and of any even-aligned run.
        #[test]
        fn update16_equals_recompute(mut data in proptest::collection::vec(any::<u8>(), 2..64),
                                     at in 0usize..32, new in any::<u16>()) {
            let at = (at % (data.len() / 2)) * 2;
            let hc = checksum(&data);
            let old = u16::from_be_bytes([data[at], data[at + 1]]);
            data[at..at + 2].copy_from_slice(&new.to_be_bytes());
            let full = checksum(&data);
            let inc = update16(hc, old, new);
            // Equal, up to the two encodings of zero in ones' complement (0x0000 / 0xFFFF).
            prop_assert!(inc == full || (inc | full == 0xFFFF && inc & full == 0));
            let mut with = data.clone();
            if with.len() % 2 == 1 {
                with.push(0);
            }
            with.extend_from_slice(&inc.to_be_bytes());
            prop_assert!(verify(0, &with));
        }

        #[test]
        fn update_run_equals_recompute(mut data in proptest::collection::vec(any::<u8>(), 2..64),
                                       at in 0usize..32,
                                       new in proptest::collection::vec(any::<u8>(), 1..8)) {
            let at = (at % (data.len() / 2)) * 2;
            let n = new.len().min(data.len() - at);
            let hc = checksum(&data);
            let old = data[at..at + n].to_vec();
            data[at..at + n].copy_from_slice(&new[..n]);
            let inc = update(hc, &old, &new[..n]);
            let mut with = data.clone();
            if with.len() % 2 == 1 {
                with.push(0);
            }
            with.extend_from_slice(&inc.to_be_bytes());
            prop_assert!(verify(0, &with));
        }
    }
}
