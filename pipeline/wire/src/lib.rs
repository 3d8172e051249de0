//! Checked zero-copy packet views (smoltcp `wire` style).
//!
//! Each header has a view over a byte slice with its field offsets as constants (`field`), a
//! `new_checked` constructor that validates the lengths (and the version / header-length fields
//! the length depends on) once, and accessors that cannot panic or read out of bounds afterwards.
//! The views borrow the frame; nothing is copied. The `parse` stage
//! (`pipeline::stage::parse`) walks a frame with them.
//!
//! The views of the headers a rewrite changes (Ethernet, VLAN, IPv4, IPv6, TCP, UDP, ICMP, ARP)
//! are generic over the buffer, `T: AsRef<[u8]>`, and have setters where the buffer is also
//! `AsMut<[u8]>` (a `&mut [u8]` into the frame): the same checked constructor, so a setter
//! cannot write out of bounds either. Each has a `Repr` (the fields as plain values) with
//! `parse` and `emit`; `emit` writes into a byte slice and refuses one that is too short.
//! [`checksum`] has the RFC 1071 sums and the RFC 1624 incremental update.

pub mod arp;
pub mod checksum;
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
pub fn be16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buf[at], buf[at + 1]])
}

/// Big-endian u32 at `at`; callers have checked `at + 4 <= buf.len()`.
#[inline(always)]
pub fn be32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

/// `N` bytes at `at`; callers have checked `at + N <= buf.len()`.
#[inline(always)]
pub fn array<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&buf[at..at + N]);
    out
}

/// Writes a big-endian u16 at `at`; callers have checked `at + 2 <= buf.len()`.
#[inline(always)]
pub fn put16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Writes a big-endian u32 at `at`; callers have checked `at + 4 <= buf.len()`.
#[inline(always)]
pub fn put32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// The first `len` bytes of `buf` for an `emit`, or `Truncated` when it is shorter.
#[inline(always)]
pub fn emit_buf(buf: &mut [u8], len: usize) -> Result<&mut [u8]> {
    buf.get_mut(..len).ok_or(Error::Truncated)
}
