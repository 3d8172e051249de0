//! Checked zero-copy packet views (smoltcp `wire` style).
//!
//! Each header has a view over a byte slice with its field offsets as constants (`field`), a
//! `new_checked` constructor that validates the lengths (and the version / header-length fields
//! the length depends on) once, and accessors that cannot panic or read out of bounds afterwards.
//! The views borrow the frame; nothing is copied. The `parse` stage
//! ([`crate::stage::parse`]) walks a frame with them.

pub mod arp;
pub mod ecpri;
pub mod ethernet;
pub mod gtpu;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod mpls;
pub mod oran;
pub mod sctp;
pub mod tcp;
pub mod udp;
pub mod vxlan;

/// Why a view could not be made over a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The buffer is shorter than the header (including what its length fields claim).
    #[error("truncated header")]
    Truncated,
    /// The version field is not the one this view parses.
    #[error("wrong version")]
    BadVersion,
    /// A header-length field is below the header's minimum.
    #[error("bad header length")]
    BadHeaderLen,
    /// A total / payload length field is inconsistent with the header.
    #[error("bad length field")]
    BadLength,
}

pub type Result<T> = core::result::Result<T, Error>;

/// Big-endian u16 at `at`; callers have checked `at + 2 <= buf.len()`.
#[inline(always)]
pub(crate) fn be16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buf[at], buf[at + 1]])
}

/// Big-endian u32 at `at`; callers have checked `at + 4 <= buf.len()`.
#[inline(always)]
pub(crate) fn be32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

/// `N` bytes at `at`; callers have checked `at + N <= buf.len()`.
#[inline(always)]
pub(crate) fn array<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&buf[at..at + N]);
    out
}
