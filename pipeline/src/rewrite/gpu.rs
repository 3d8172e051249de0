//! The rewrite stages' GPU parameter blocks: the bytes `gpu-kernels/cuda/rewrite_stages.cuh`
//! reads (`pw_l2fwd_params`, `pw_vlan_params`, `pw_dscp_params`, `pw_route_params` with its
//! tables, `pw_respond_stage_params`, `pw_tx_time_params`), written at explicit little-endian offsets. `ttl` has no
//! block. The tests pin every size and offset against the header's static asserts.
//!
//! A `route` block holds its whole table: a 64-byte header of byte offsets (from the block's
//! start; 0 = none), then each family's `tbl24` (2^24 entries, left out when the family has no
//! route) and `tbl8`, then the next hops with their port already mapped to the output port
//! ([`RouteState::out_ports`]), so a route reload publishes a new block by epoch like any other
//! stage parameter change (`GpuExecutor::publish_stage_params`) and needs no stage buffer.

use super::stage::{RespondSlot, RouteState};
use super::{Dscp, L2fwd, TxTime, Vlan};
use crate::verdict::Verdict;

/// `sizeof(pw_l2fwd_params)`.
pub const L2FWD_BLOCK: usize = 16;
/// `sizeof(pw_vlan_params)`.
pub const VLAN_BLOCK: usize = 16;
/// `sizeof(pw_dscp_params)`.
pub const DSCP_BLOCK: usize = 4;
/// `sizeof(pw_tx_time_params)`.
pub const TX_TIME_BLOCK: usize = 8;
/// `sizeof(pw_route_params)`: the route block's header.
pub const ROUTE_HEADER: usize = 64;
/// `PW_RESPOND_INGRESS_AT` (`sizeof(pw_respond_stage_params)`): where the ingress port table
/// starts.
pub const RESPOND_INGRESS_AT: usize = 176;
/// `sizeof(pw_respond_params)`.
pub const RESPOND_ADDRS: usize = 172;

/// `pw_vlan_params.op` (vlan.cuh `PW_VLAN_*`).
const VLAN_PUSH: u32 = 0;
const VLAN_POP: u32 = 1;
const VLAN_SET: u32 = 2;

/// Alignment of each table in a route block (device loads of `uint32_t` and `pw_next_hop`).
const ROUTE_ALIGN: usize = 16;

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// `pw_l2fwd_params`: swap (0), has_src (1), has_dst (2), src (4..10), dst (10..16).
pub fn l2fwd_block(op: &L2fwd) -> Vec<u8> {
    let mut b = vec![0u8; L2FWD_BLOCK];
    b[0] = u8::from(op.swap);
    if let Some(m) = op.src {
        b[1] = 1;
        b[4..10].copy_from_slice(&m);
    }
    if let Some(m) = op.dst {
        b[2] = 1;
        b[10..16].copy_from_slice(&m);
    }
    b
}

/// `pw_vlan_params`: op (0, u32), tpid (4, u16), tci (6, u16), set_vid (8, i32: -1 keep),
/// set_pcp (12, i32: -1 keep).
pub fn vlan_block(op: &Vlan) -> Vec<u8> {
    let mut b = vec![0u8; VLAN_BLOCK];
    let (code, tpid, tci, vid, pcp) = match *op {
        Vlan::Push { tpid, tci } => (VLAN_PUSH, tpid, tci, -1, -1),
        Vlan::Pop => (VLAN_POP, 0, 0, -1, -1),
        Vlan::Set { vid, pcp } => (
            VLAN_SET,
            0,
            0,
            vid.map_or(-1, i32::from),
            pcp.map_or(-1, i32::from),
        ),
    };
    put32(&mut b, 0, code);
    put16(&mut b, 4, tpid);
    put16(&mut b, 6, tci);
    b[8..12].copy_from_slice(&vid.to_le_bytes());
    b[12..16].copy_from_slice(&pcp.to_le_bytes());
    b
}

/// `pw_dscp_params`: dscp (0, u32).
pub fn dscp_block(op: &Dscp) -> Vec<u8> {
    u32::from(op.dscp).to_le_bytes().to_vec()
}

/// `pw_tx_time_params`: delay_ns (0, u64).
pub fn tx_time_block(op: &TxTime) -> Vec<u8> {
    op.delay_ns.to_le_bytes().to_vec()
}

/// Appends `words` at the next aligned offset of `b`; returns the offset (0 for no words).
fn put_table(b: &mut Vec<u8>, words: &[u32]) -> u64 {
    if words.is_empty() {
        return 0;
    }
    let at = b.len().next_multiple_of(ROUTE_ALIGN);
    b.resize(at + 4 * words.len(), 0);
    for (d, w) in b[at..].chunks_exact_mut(4).zip(words) {
        d.copy_from_slice(&w.to_le_bytes());
    }
    at as u64
}

/// `pw_route_params` and the tables it names (see the module documentation). A next hop whose
/// port has no output port is sent to the default output, as the CPU's `apply_outcome` does.
pub fn route_block(state: &RouteState) -> Vec<u8> {
    let t = &state.route.table;
    let tables = 4 * (t.v4.tbl24().len() + t.v4.tbl8().len() + t.v6.tbl24().len())
        + 4 * t.v6.tbl8().len()
        + 8 * t.next_hops.len();
    let mut b = Vec::with_capacity(ROUTE_HEADER + tables + 5 * ROUTE_ALIGN);
    b.resize(ROUTE_HEADER, 0);
    let v4_24 = put_table(&mut b, t.v4.tbl24());
    let v4_8 = put_table(&mut b, t.v4.tbl8());
    let v6_24 = put_table(&mut b, t.v6.tbl24());
    let v6_8 = put_table(&mut b, t.v6.tbl8());
    let hops_at = b.len().next_multiple_of(ROUTE_ALIGN);
    b.resize(hops_at + 8 * t.next_hops.len(), 0);
    for (d, h) in b[hops_at..].chunks_exact_mut(8).zip(&t.next_hops) {
        d[..6].copy_from_slice(&h.mac);
        let out = state
            .out_ports
            .get(usize::from(h.port))
            .copied()
            .unwrap_or(Verdict::OUT_DEFAULT);
        d[6..8].copy_from_slice(&out.to_le_bytes());
    }
    put64(&mut b, 0, v4_24);
    put64(&mut b, 8, v4_8);
    put64(&mut b, 16, t.v4.tbl8().len() as u64);
    put64(&mut b, 24, v6_24);
    put64(&mut b, 32, v6_8);
    put64(&mut b, 40, t.v6.tbl8().len() as u64);
    put64(
        &mut b,
        48,
        if t.next_hops.is_empty() {
            0
        } else {
            hops_at as u64
        },
    );
    put64(&mut b, 56, t.next_hops.len() as u64);
    b
}

/// `pw_respond_stage_params`: the addresses (`pw_respond_params`: mac 0..6, n_v4 6, n_v6 8,
/// v4 12, v6 44), n_ingress (172, u32), then the ingress port table (176: u16 per port).
pub fn respond_block(slot: &RespondSlot) -> Vec<u8> {
    let p = slot.op.params();
    let mut b = vec![0u8; RESPOND_INGRESS_AT + 2 * slot.ingress_out.len()];
    b[..6].copy_from_slice(&p.mac);
    put16(&mut b, 6, p.n_v4);
    put16(&mut b, 8, p.n_v6);
    for (i, a) in p.v4.iter().enumerate() {
        put32(&mut b, 12 + 4 * i, *a);
    }
    for (i, a) in p.v6.iter().flatten().enumerate() {
        put32(&mut b, 44 + 4 * i, *a);
    }
    put32(&mut b, RESPOND_ADDRS, slot.ingress_out.len() as u32);
    for (i, o) in slot.ingress_out.iter().enumerate() {
        put16(&mut b, RESPOND_INGRESS_AT + 2 * i, *o);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::config::{L2fwdConfig, Mac, MacMode, VlanConfig, VlanPush, VlanSet};
    use crate::rewrite::stage::RouteSlot;
    use crate::rewrite::{Respond, RespondConfig};

    /// The header's `PW_STATIC_ASSERT(... == N, ...)` lines, which the host and GPU compilers
    /// enforce, state the same sizes and offsets as the constants here.
    #[test]
    fn layouts_match_the_header_asserts() {
        let h = pktwarp_kernels::library_file("rewrite_stages.cuh").expect("embedded header");
        for (expr, n) in [
            ("sizeof(pw_l2fwd_params)", L2FWD_BLOCK),
            ("PW_OFFSETOF(pw_l2fwd_params, src)", 4),
            ("PW_OFFSETOF(pw_l2fwd_params, dst)", 10),
            ("sizeof(pw_vlan_params)", VLAN_BLOCK),
            ("PW_OFFSETOF(pw_vlan_params, tpid)", 4),
            ("PW_OFFSETOF(pw_vlan_params, tci)", 6),
            ("PW_OFFSETOF(pw_vlan_params, set_vid)", 8),
            ("PW_OFFSETOF(pw_vlan_params, set_pcp)", 12),
            ("sizeof(pw_dscp_params)", DSCP_BLOCK),
            ("sizeof(pw_tx_time_params)", TX_TIME_BLOCK),
            ("sizeof(pw_route_params)", ROUTE_HEADER),
            ("PW_OFFSETOF(pw_route_params, v6_tbl24)", 24),
            ("PW_OFFSETOF(pw_route_params, hops)", 48),
            ("PW_OFFSETOF(pw_route_params, n_hops)", 56),
            (
                "PW_OFFSETOF(pw_respond_stage_params, n_ingress)",
                RESPOND_ADDRS,
            ),
        ] {
            let line = format!("PW_STATIC_ASSERT({expr} == {n},");
            assert!(h.contains(&line), "rewrite_stages.cuh lacks `{line}`");
        }
        assert!(h.contains(&format!(
            "#define PW_RESPOND_INGRESS_AT {RESPOND_INGRESS_AT}u"
        )));
        let r = pktwarp_kernels::library_file("respond.cuh").expect("embedded header");
        assert!(r.contains(&format!("sizeof(pw_respond_params) == {RESPOND_ADDRS}")));
        assert_eq!(
            std::mem::size_of::<crate::rewrite::respond::RespondParams>(),
            RESPOND_ADDRS
        );
    }

    #[test]
    fn l2fwd_vlan_dscp_blocks() {
        let op = L2fwd::new(&L2fwdConfig {
            mac: Some(MacMode::Swap),
            src: None,
            dst: Some(Mac([1, 2, 3, 4, 5, 6])),
        })
        .unwrap();
        let b = l2fwd_block(&op);
        assert_eq!(&b[..4], &[1, 0, 1, 0]);
        assert_eq!(&b[4..10], &[0; 6]);
        assert_eq!(&b[10..], &[1, 2, 3, 4, 5, 6]);
        let push = Vlan::new(&VlanConfig::Push(VlanPush {
            vid: 100,
            pcp: 5,
            tpid: Some(0x88a8),
        }))
        .unwrap();
        assert_eq!(
            vlan_block(&push),
            [0, 0, 0, 0, 0xa8, 0x88, 0x64, 0xa0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
        let set = Vlan::new(&VlanConfig::Set(VlanSet {
            vid: None,
            pcp: Some(3),
        }))
        .unwrap();
        assert_eq!(
            vlan_block(&set),
            [2, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 3, 0, 0, 0]
        );
        assert_eq!(&vlan_block(&Vlan::Pop)[..4], &[1, 0, 0, 0]);
        assert_eq!(dscp_block(&Dscp { dscp: 46 }), [46, 0, 0, 0]);
        assert_eq!(
            tx_time_block(&TxTime {
                delay_ns: 0x0102_0304_0506
            }),
            [6, 5, 4, 3, 2, 1, 0, 0]
        );
    }

    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn route_block_holds_the_tables_and_maps_ports() {
        let d = std::env::temp_dir().join(format!("pw-rgpu-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("r.yaml");
        // IPv4 only, one /25 (a tbl8 group); ports b then a in the table, a, x, b in the config.
        std::fs::write(
            &f,
            "routes:\n  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:0a', port: b }\n  \
             - { prefix: 10.1.2.128/25, via: '02:00:00:00:00:0b', port: a }\n",
        )
        .unwrap();
        let names = vec!["a".to_string(), "x".to_string(), "b".to_string()];
        let st = RouteSlot::load(&f, Some(&names)).unwrap().current();
        let b = route_block(&st);
        let t = &st.route.table;
        let v4 = u64_at(&b, 0) as usize;
        assert_eq!(v4 % ROUTE_ALIGN, 0);
        assert!(v4 >= ROUTE_HEADER);
        assert_eq!(u32_at(&b, v4 + 4 * 0x0a0000), t.v4.tbl24()[0x0a0000]);
        let v4_8 = u64_at(&b, 8) as usize;
        assert_eq!(u64_at(&b, 16), 256);
        assert_eq!(u32_at(&b, v4_8 + 4 * 255), t.v4.tbl8()[255]);
        assert_eq!((u64_at(&b, 24), u64_at(&b, 32), u64_at(&b, 40)), (0, 0, 0));
        let hops = u64_at(&b, 48) as usize;
        assert_eq!(u64_at(&b, 56), 2);
        assert_eq!(&b[hops..hops + 6], &[2, 0, 0, 0, 0, 0x0a]);
        // b is config port 2, a is 0.
        assert_eq!(
            (u16::from_le_bytes([b[hops + 6], b[hops + 7]]), b[hops + 14]),
            (2, 0)
        );
        assert_eq!(b.len(), hops + 16);
        // Without IPv4 routes the 64 MiB tbl24 is left out.
        std::fs::write(
            &f,
            "routes:\n  - { prefix: '2001:db8::/32', via: '02:00:00:00:00:0c', port: nope }\n",
        )
        .unwrap();
        let st = RouteSlot::load(&f, None).unwrap().current();
        let b = route_block(&st);
        assert_eq!((u64_at(&b, 0), u64_at(&b, 8), u64_at(&b, 16)), (0, 0, 0));
        assert_eq!(u64_at(&b, 24), ROUTE_HEADER as u64);
        // Header, the IPv6 tbl24, one tbl8 group (bits 24..32), one next hop.
        assert_eq!(b.len(), ROUTE_HEADER + (4 << 24) + 4 * 256 + 8);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn respond_block_has_addresses_and_ingress_ports() {
        let op = Respond::new(&RespondConfig {
            mac: Mac([2, 0, 0, 0, 0, 0x99]),
            ipv4: vec!["192.0.2.1".parse().unwrap()],
            ipv6: vec!["2001:db8::1".parse().unwrap()],
        })
        .unwrap();
        let slot = RespondSlot {
            op,
            ingress_out: vec![3, Verdict::OUT_DEFAULT],
        };
        let b = respond_block(&slot);
        assert_eq!(b.len(), RESPOND_INGRESS_AT + 4);
        assert_eq!(&b[..6], &[2, 0, 0, 0, 0, 0x99]);
        assert_eq!((b[6], b[8]), (1, 1));
        assert_eq!(u32_at(&b, 12), 0xc000_0201);
        assert_eq!(u32_at(&b, 44), 0x2001_0db8);
        assert_eq!(u32_at(&b, 56), 1);
        assert_eq!(u32_at(&b, RESPOND_ADDRS), 2);
        assert_eq!(&b[RESPOND_INGRESS_AT..], &[3, 0, 0xff, 0xff]);
    }
}
