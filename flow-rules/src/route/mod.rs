//! Routes for the `route` stage: the route file, and the longest-prefix-match tables and
//! next-hop table built from it.
//!
//! A route file (YAML) lists prefixes, the next-hop MAC each is sent to (`via`, written as the
//! frame's destination MAC) and the output port (`port`, a port name from the pipeline config):
//!
//! ```yaml
//! routes:
//!   - { prefix: 10.0.0.0/8, via: "02:00:00:00:00:01", port: out }
//!   - prefix: 2001:db8::/32
//!     via: 02:00:00:00:00:02
//!     port: out
//!   - { prefix: 0.0.0.0/0, via: "02:00:00:00:00:fe", port: uplink }   # default route
//! ```
//!
//! The longest matching prefix wins; `0.0.0.0/0` and `::/0` are default routes (without one,
//! a destination no prefix covers has no route). A prefix may appear once; host bits below its
//! length must be 0. Errors name the file, line, column and key ([`crate::error::RuleError`]).
//! Size: a file larger than [`MAX_ROUTE_FILE_BYTES`] (256 MiB) is refused before it is parsed,
//! one with more than [`MAX_ROUTES`] (2,097,152) routes when the parser reaches the route past
//! the limit (key `routes`, the error names the limit). A full IPv4 Internet table (1.2M
//! routes) loads: `synth` makes one, `examples/route_load.rs` times a file's load.
//!
//! [`RouteTable`] is immutable: a reload builds a new one aside and publishes it by pointer
//! swap. Its arrays are flat (`u32` entries, `#[repr(C)]` next hops) so the CUDA matcher can read
//! copies of them as they are; [`lpm`] documents the layout.

pub mod file;
pub mod lpm;
pub mod synth;

pub use file::{RouteFile, MAX_ROUTES, MAX_ROUTE_FILE_BYTES};
pub use lpm::{Lpm, Lpm4, Lpm6, LpmError};

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

/// An IPv4 or IPv6 prefix; `addr` has no bits set below `len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prefix {
    V4 { addr: Ipv4Addr, len: u8 },
    V6 { addr: Ipv6Addr, len: u8 },
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Prefix::V4 { addr, len } => write!(f, "{addr}/{len}"),
            Prefix::V6 { addr, len } => write!(f, "{addr}/{len}"),
        }
    }
}

/// One route: prefix -> next-hop MAC, output port name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub prefix: Prefix,
    pub via: [u8; 6],
    pub port: String,
}

/// A next hop as the data path reads it: the MAC written as destination, and the output port
/// as an index into [`RouteTable::ports`]. 8 bytes, no padding.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct NextHop {
    pub mac: [u8; 6],
    pub port: u16,
}

/// The built tables: IPv4 DIR-24-8, IPv6 tbl24 + tbl8 chains, and the next hops they index.
#[derive(Clone, Debug, Default)]
pub struct RouteTable {
    pub v4: Lpm4,
    pub v6: Lpm6,
    /// Distinct (MAC, port) pairs, in order of first use.
    pub next_hops: Vec<NextHop>,
    /// Output port names, in order of first use; `NextHop::port` indexes this.
    pub ports: Vec<String>,
    /// Routes per family, for reports.
    pub routes_v4: usize,
    pub routes_v6: usize,
}

/// Why routes could not be built into a table.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("{0}")]
    Lpm(#[from] LpmError),
    #[error("more than 65535 output ports")]
    TooManyPorts,
}

impl RouteTable {
    /// Builds the tables. Duplicate prefixes: the later route wins (the route file refuses
    /// them before this).
    pub fn build(routes: &[Route]) -> Result<RouteTable, BuildError> {
        let mut ports: Vec<String> = Vec::new();
        let mut port_ids: HashMap<&str, u16> = HashMap::new();
        let mut hops: Vec<NextHop> = Vec::new();
        let mut hop_ids: HashMap<NextHop, u32> = HashMap::new();
        let (mut r4, mut r6) = (Vec::new(), Vec::new());
        for r in routes {
            let port = match port_ids.get(r.port.as_str()) {
                Some(p) => *p,
                None => {
                    let p = u16::try_from(ports.len()).map_err(|_| BuildError::TooManyPorts)?;
                    ports.push(r.port.clone());
                    port_ids.insert(&r.port, p);
                    p
                }
            };
            let hop = NextHop { mac: r.via, port };
            let id = *hop_ids.entry(hop).or_insert_with(|| {
                hops.push(hop);
                (hops.len() - 1) as u32
            });
            match r.prefix {
                Prefix::V4 { addr, len } => r4.push((u128::from(u32::from(addr)), len, id)),
                Prefix::V6 { addr, len } => r6.push((u128::from(addr), len, id)),
            }
        }
        Ok(RouteTable {
            v4: Lpm4::build(&r4)?,
            v6: Lpm6::build(&r6)?,
            next_hops: hops,
            ports,
            routes_v4: r4.len(),
            routes_v6: r6.len(),
        })
    }

    /// The next hop for an IPv4 destination.
    #[inline]
    pub fn lookup_v4(&self, dst: u32) -> Option<&NextHop> {
        self.v4
            .lookup_v4(dst)
            .and_then(|i| self.next_hops.get(i as usize))
    }

    /// The next hop for an IPv6 destination.
    #[inline]
    pub fn lookup_v6(&self, dst: u128) -> Option<&NextHop> {
        self.v6
            .lookup(dst)
            .and_then(|i| self.next_hops.get(i as usize))
    }

    /// The index of an output port name in [`RouteTable::ports`].
    pub fn port_index(&self, name: &str) -> Option<u16> {
        self.ports.iter().position(|p| p == name).map(|i| i as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_hop_is_8_bytes_without_padding() {
        assert_eq!(std::mem::size_of::<NextHop>(), 8);
        assert_eq!(std::mem::align_of::<NextHop>(), 2);
        assert_eq!(std::mem::offset_of!(NextHop, port), 6);
    }

    #[test]
    fn build_dedups_hops_and_ports() {
        let r = |p: &str, mac: u8, port: &str| {
            let (a, l) = p.split_once('/').unwrap();
            let len = l.parse().unwrap();
            Route {
                prefix: match a.parse::<std::net::IpAddr>().unwrap() {
                    std::net::IpAddr::V4(addr) => Prefix::V4 { addr, len },
                    std::net::IpAddr::V6(addr) => Prefix::V6 { addr, len },
                },
                via: [2, 0, 0, 0, 0, mac],
                port: port.into(),
            }
        };
        let t = RouteTable::build(&[
            r("10.0.0.0/8", 1, "a"),
            r("10.1.0.0/16", 2, "b"),
            r("2001:db8::/32", 1, "a"),
            r("::/0", 3, "b"),
        ])
        .unwrap();
        assert_eq!(t.ports, ["a", "b"]);
        assert_eq!(t.next_hops.len(), 3);
        assert_eq!(t.lookup_v4(0x0A02_0000).unwrap().mac[5], 1);
        assert_eq!(t.lookup_v4(0x0A01_0000).unwrap().port, 1);
        assert!(t.lookup_v4(0x0B00_0000).is_none(), "no IPv4 default route");
        assert_eq!(t.lookup_v6(1).unwrap().mac[5], 3);
        assert_eq!((t.routes_v4, t.routes_v6), (2, 2));
        assert_eq!(t.port_index("b"), Some(1));
        assert_eq!(t.v4.bytes(), 4 << 24);
    }
}
