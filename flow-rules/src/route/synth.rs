//! Synthetic route tables shaped like a full IPv4 Internet table, for the size tests and for
//! timing a large route file's load (`cargo run --release -p flow-rules --example route_load`).

use std::fmt::Write as _;
use std::net::Ipv4Addr;

use super::{Prefix, Route};

/// Prefixes per length (index = length) in DPDK's large IPv4 route table, a BGP table's
/// distribution (`test_lpm_perf.c`; also `benches/route.rs`): 1,076,806 prefixes, most /24,
/// few shorter than /16, a few thousand past /24.
pub const BGP_V4_LENGTHS: [u32; 33] = [
    0, 0, 0, 1, 0, 3, 2, 4, 201, 37, 55, 97, 381, 775, 2104, 3712, 69319, 12983, 23667, 69068,
    62354, 48531, 72355, 85427, 583900, 2654, 5650, 6467, 7127, 12936, 5999, 13, 984,
];

/// xorshift64*: the same table on every run for a seed.
fn next(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// `n` distinct IPv4 routes with prefix lengths drawn in [`BGP_V4_LENGTHS`]' proportions, over
/// 64 next hops (`02:00:00:00:01:HH`, HH < 64) on two ports (`up0` for even HH, `up1` for odd).
pub fn bgp_v4_routes(n: usize, seed: u64) -> Vec<Route> {
    let total: u64 = BGP_V4_LENGTHS.iter().map(|&c| u64::from(c)).sum();
    let mut s = seed | 1;
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut routes = Vec::with_capacity(n);
    while routes.len() < n {
        let r = next(&mut s);
        let mut pick = r % total;
        let len = BGP_V4_LENGTHS
            .iter()
            .position(|&c| {
                let hit = pick < u64::from(c);
                pick = pick.saturating_sub(u64::from(c));
                hit
            })
            .unwrap_or(24) as u8;
        let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        let net = (next(&mut s) >> 32) as u32 & mask;
        // A short length has few prefixes: a repeat draws again (another length, mostly).
        if !seen.insert((net, len)) {
            continue;
        }
        let hop = (r >> 40) as u8 % 64;
        routes.push(Route {
            prefix: Prefix::V4 {
                addr: Ipv4Addr::from(net),
                len,
            },
            via: [2, 0, 0, 0, 1, hop],
            port: if hop % 2 == 0 { "up0" } else { "up1" }.into(),
        });
    }
    routes
}

/// A route file holding `routes`, one flow-style line each as the README writes them (about 66
/// bytes an IPv4 route).
pub fn to_yaml(routes: &[Route]) -> String {
    let mut text = String::with_capacity(routes.len() * 72 + 8);
    text.push_str("routes:\n");
    for r in routes {
        let m = r.via;
        let _ = writeln!(
            text,
            "  - {{ prefix: '{}', via: '{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}', port: {} }}",
            r.prefix, m[0], m[1], m[2], m[3], m[4], m[5], r.port
        );
    }
    text
}
