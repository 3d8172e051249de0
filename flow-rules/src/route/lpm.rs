//! The longest-prefix-match tables: a DIR-24-8 table for IPv4 (as DPDK's rte_lpm and
//! PacketShader) and its extension to IPv6 with chained 8-bit groups (as DPDK's rte_lpm6).
//!
//! # Layout (what a CUDA matcher reads)
//! Two flat arrays of `u32` entries per family:
//! - `tbl24`: 2^24 entries, indexed by the address's first 24 bits (empty when the family has
//!   no route at all);
//! - `tbl8`: groups of 256 entries, group `g` at `tbl8[g * 256 .. g * 256 + 256]`, indexed by
//!   the next 8 bits of the address.
//!
//! An entry is `VALID (bit 31) | EXT (bit 30) | value (bits 0..=29)`. Without `EXT`, `value` is
//! the next-hop index of the longest prefix covering that slot (meaningful when `VALID`); with
//! `EXT`, `value` is the group to look in with the next 8 bits. IPv4 needs at most one `tbl8`
//! step; IPv6 up to 13 (bits 24..128). Lookup:
//!
//! ```text
//! e = tbl24[a >> (W - 24)]; shift = W - 24
//! while e & EXT: shift -= 8; e = tbl8[(e & VALUE) << 8 | (a >> shift) & 0xFF]
//! hit = e & VALID ? e & VALUE : none
//! ```
//!
//! # Build
//! Tables are built whole from a route list and never changed: a reload builds a new table aside
//! and publishes it by pointer swap. Routes are inserted in ascending prefix length, so each
//! insertion simply overwrites its slots (every slot it covers holds a shorter or equal prefix,
//! and no group exists yet below it: groups are made only by longer prefixes, inserted later).
//! A route longer than a level's stride makes (or reuses) a group at that level, the new group
//! starting as 256 copies of the entry it replaces.

/// Entry bit: the entry holds a next hop.
pub const VALID: u32 = 1 << 31;
/// Entry bit: `value` is a `tbl8` group index.
pub const EXT: u32 = 1 << 30;
/// Entry bits of the next-hop or group index.
pub const VALUE: u32 = EXT - 1;
/// Entries of the first level.
pub const TBL24_LEN: usize = 1 << 24;
/// Entries per `tbl8` group.
pub const GROUP_LEN: usize = 256;

/// Why a table could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LpmError {
    #[error("more than {} next hops", VALUE)]
    TooManyNextHops,
    #[error("more than {} tbl8 groups", VALUE)]
    TooManyGroups,
    #[error("prefix length {0} is longer than the address")]
    BadLength(u8),
}

/// One LPM table over `W`-bit addresses (32 or 128) held in the low bits of a `u128`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lpm<const W: u32> {
    tbl24: Vec<u32>,
    tbl8: Vec<u32>,
}

/// IPv4: DIR-24-8.
pub type Lpm4 = Lpm<32>;
/// IPv6: tbl24 + chained tbl8 groups.
pub type Lpm6 = Lpm<128>;

impl<const W: u32> Lpm<W> {
    /// Builds the table from `(address, prefix length, next hop)`; host bits below the prefix
    /// length are ignored. Later duplicates of a prefix win (the route file refuses them).
    pub fn build(routes: &[(u128, u8, u32)]) -> Result<Self, LpmError> {
        let mut order: Vec<usize> = (0..routes.len()).collect();
        // Stable: among equal prefixes the later route is inserted later and wins.
        order.sort_by_key(|&i| routes[i].1);
        let mut t = Lpm {
            tbl24: Vec::new(),
            tbl8: Vec::new(),
        };
        if routes.is_empty() {
            return Ok(t);
        }
        t.tbl24 = vec![0; TBL24_LEN];
        for i in order {
            let (addr, len, nh) = routes[i];
            if u32::from(len) > W {
                return Err(LpmError::BadLength(len));
            }
            if nh > VALUE {
                return Err(LpmError::TooManyNextHops);
            }
            t.insert(addr, len, VALID | nh)?;
        }
        Ok(t)
    }

    fn insert(&mut self, addr: u128, len: u8, entry: u32) -> Result<(), LpmError> {
        let len = u32::from(len);
        // Level 0: bits [0, 24) of the address.
        let top = ((addr >> (W - 24)) & 0xFF_FFFF) as usize;
        if len <= 24 {
            let span = 1usize << (24 - len);
            let start = top & !(span - 1);
            self.tbl24[start..start + span].fill(entry);
            return Ok(());
        }
        let mut slot = SlotRef::Top(top);
        let mut used = 24u32; // address bits consumed by the levels above
        loop {
            let group = self.group_at(slot)?;
            let byte = ((addr >> (W - used - 8)) & 0xFF) as usize;
            let base = group * GROUP_LEN;
            if len <= used + 8 {
                let span = 1usize << (used + 8 - len);
                let start = base + (byte & !(span - 1));
                self.tbl8[start..start + span].fill(entry);
                return Ok(());
            }
            slot = SlotRef::Group(base + byte);
            used += 8;
        }
    }

    /// The group an entry points to, made (from 256 copies of the entry) when it has none.
    fn group_at(&mut self, slot: SlotRef) -> Result<usize, LpmError> {
        let e = match slot {
            SlotRef::Top(i) => self.tbl24[i],
            SlotRef::Group(i) => self.tbl8[i],
        };
        if e & EXT != 0 {
            return Ok((e & VALUE) as usize);
        }
        let g = self.tbl8.len() / GROUP_LEN;
        if g > VALUE as usize {
            return Err(LpmError::TooManyGroups);
        }
        self.tbl8.resize(self.tbl8.len() + GROUP_LEN, e);
        let ext = EXT | g as u32;
        match slot {
            SlotRef::Top(i) => self.tbl24[i] = ext,
            SlotRef::Group(i) => self.tbl8[i] = ext,
        }
        Ok(g)
    }

    /// The next hop of the longest prefix covering `addr` (low `W` bits used).
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        let mut e = *self.tbl24.get(((addr >> (W - 24)) & 0xFF_FFFF) as usize)?;
        let mut shift = W - 24;
        while e & EXT != 0 && shift >= 8 {
            shift -= 8;
            let i = (((e & VALUE) as usize) << 8) | ((addr >> shift) & 0xFF) as usize;
            e = *self.tbl8.get(i)?;
        }
        (e & (VALID | EXT) == VALID).then_some(e & VALUE)
    }

    /// The first level (empty when the family has no route).
    pub fn tbl24(&self) -> &[u32] {
        &self.tbl24
    }

    /// The groups, 256 entries each.
    pub fn tbl8(&self) -> &[u32] {
        &self.tbl8
    }

    /// Number of `tbl8` groups.
    pub fn groups(&self) -> usize {
        self.tbl8.len() / GROUP_LEN
    }

    /// Bytes the two arrays take.
    pub fn bytes(&self) -> usize {
        4 * (self.tbl24.len() + self.tbl8.len())
    }
}

impl Lpm4 {
    /// IPv4 lookup with at most two loads and no loop.
    #[inline]
    pub fn lookup_v4(&self, addr: u32) -> Option<u32> {
        let mut e = *self.tbl24.get((addr >> 8) as usize)?;
        if e & EXT != 0 {
            e = *self
                .tbl8
                .get((((e & VALUE) as usize) << 8) | (addr & 0xFF) as usize)?;
        }
        (e & (VALID | EXT) == VALID).then_some(e & VALUE)
    }

    /// [`Lpm4::lookup_v4`] for a burst; `out[i]` is the next hop or `u32::MAX` for no route.
    /// The lookups are independent, so the CPU overlaps their cache misses.
    pub fn lookup_v4_bulk(&self, addrs: &[u32], out: &mut [u32]) {
        for (a, o) in addrs.iter().zip(out.iter_mut()) {
            *o = self.lookup_v4(*a).unwrap_or(u32::MAX);
        }
    }
}

#[derive(Clone, Copy)]
enum SlotRef {
    Top(usize),
    Group(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> u128 {
        u128::from(u32::from(s.parse::<std::net::Ipv4Addr>().unwrap()))
    }

    fn v6(s: &str) -> u128 {
        u128::from(s.parse::<std::net::Ipv6Addr>().unwrap())
    }

    #[test]
    fn ipv4_nested_prefixes() {
        let t = Lpm4::build(&[
            (v4("10.1.2.128"), 25, 3),
            (v4("10.0.0.0"), 8, 1),
            (v4("10.1.0.0"), 16, 2),
            (v4("10.1.2.192"), 32, 4),
        ])
        .unwrap();
        assert_eq!(t.lookup_v4(0x0A63_0000), Some(1));
        assert_eq!(t.lookup_v4(0x0A01_0505), Some(2));
        assert_eq!(t.lookup_v4(0x0A01_027F), Some(2));
        assert_eq!(t.lookup_v4(0x0A01_0280), Some(3));
        assert_eq!(t.lookup_v4(0x0A01_02C0), Some(4));
        assert_eq!(t.lookup_v4(0x0A01_02C1), Some(3));
        assert_eq!(t.lookup_v4(0x0B00_0000), None);
        assert_eq!(t.lookup(0x0A01_02C0), Some(4), "generic walk agrees");
        assert_eq!(t.groups(), 1);
        let d = Lpm4::build(&[(0, 0, 9)]).unwrap();
        assert_eq!((d.lookup_v4(0), d.lookup_v4(u32::MAX)), (Some(9), Some(9)));
        assert_eq!(Lpm4::build(&[]).unwrap().lookup_v4(1), None);
        assert_eq!(Lpm4::build(&[(0, 33, 1)]), Err(LpmError::BadLength(33)));
        assert_eq!(
            Lpm4::build(&[(0, 8, VALUE + 1)]),
            Err(LpmError::TooManyNextHops)
        );
    }

    #[test]
    fn ipv6_chains() {
        let t = Lpm6::build(&[
            (v6("2001:db8::"), 32, 1),
            (v6("2001:db8:1::"), 48, 2),
            (v6("2001:db8:1::1"), 128, 3),
            (v6("2001:db8:1:0:8000::"), 65, 4),
            (v6("::"), 0, 0),
        ])
        .unwrap();
        assert_eq!(t.lookup(v6("2001:db8:ffff::1")), Some(1));
        assert_eq!(t.lookup(v6("2001:db8:1::2")), Some(2));
        assert_eq!(t.lookup(v6("2001:db8:1::1")), Some(3));
        assert_eq!(t.lookup(v6("2001:db8:1:0:8000::1")), Some(4));
        assert_eq!(t.lookup(v6("2001:db8:1:0:7fff::1")), Some(2));
        assert_eq!(t.lookup(v6("fe80::1")), Some(0));
        // /128 needs a group on each of 13 levels.
        assert!(t.groups() >= 13);
        assert_eq!(Lpm6::build(&[(0, 129, 1)]), Err(LpmError::BadLength(129)));
    }
}
