//! The CUDA rewrite stages (gpu-kernels/cuda/{l2fwd,ttl,vlan,route}.cuh, compiled for the host by
//! pktwarp-kernels' `host` feature through host/rewrite_host.cpp) equal the Rust reference
//! (pipeline::rewrite) byte for byte: the output frame, its length, the outcome (and output port)
//! and the metadata after the rewrite, on property-generated frames (TTL 0..255, any TOS, tags,
//! random byte damage, cuts) and on every frame of the Ethernet corpus captures.

use std::net::IpAddr;
use std::sync::Arc;

use flow_rules::route::{NextHop, Prefix, Route as RouteSpec, RouteTable};
use pipeline::internal::port::gen::{build_frame, FrameSpec};
use pipeline::internal::rewrite::{
    Dscp, DscpConfig, L2fwd, Outcome, RewriteDrop, Route, Ttl, Vlan,
};
use pipeline::internal::stage::parse::parse_frame;
use pipeline::meta::PacketMeta;
use pipeline::verdict::Verdict;
use proptest::prelude::*;

// Keeps the kernels crate (and its host static library) linked into this test.
use pktwarp_kernels as _;

#[repr(C)]
struct VlanParams {
    op: u32,
    tpid: u16,
    tci: u16,
    set_vid: i32,
    set_pcp: i32,
}

#[repr(C)]
struct LpmTable {
    tbl24: *const u32,
    tbl8: *const u32,
    tbl8_len: u64,
}

#[repr(C)]
struct RouteTables {
    v4: LpmTable,
    v6: LpmTable,
    hops: *const NextHop,
    n_hops: u64,
}

extern "C" {
    fn pw_host_l2fwd(f: *mut u8, len: u32, swap: u32, src: *const u8, dst: *const u8) -> u32;
    fn pw_host_ttl(f: *mut u8, len: u32, m: *mut PacketMeta) -> u32;
    fn pw_host_dscp(f: *mut u8, len: u32, m: *mut PacketMeta, dscp: u32) -> u32;
    fn pw_host_vlan(
        f: *mut u8,
        len: *mut u32,
        cap: u32,
        m: *mut PacketMeta,
        p: *const VlanParams,
    ) -> u32;
    fn pw_host_route(
        f: *mut u8,
        len: u32,
        m: *const PacketMeta,
        t: *const RouteTables,
        port: *mut u16,
    ) -> u32;
}

/// The C outcome code of a Rust outcome (cuda/rewrite.cuh PW_RW_*), and the port.
fn code(o: Outcome) -> (u32, u16) {
    match o {
        Outcome::Done => (0, 0),
        Outcome::Skipped => (1, 0),
        Outcome::Forward { port } => (2, port),
        Outcome::Drop(RewriteDrop::TtlExpired) => (3, 0),
        Outcome::Drop(RewriteDrop::NoRoute) => (4, 0),
        // Only the pipeline's in-place push (no room in the buffer) returns it; these tests
        // call the Vec form, which always has room.
        Outcome::Drop(RewriteDrop::NoRoom) => (5, 0),
        // `respond` only (its own test: respond_cuda_host.rs).
        Outcome::Reply => (6, 0),
    }
}

fn table() -> RouteTable {
    let r = |p: &str, mac: u8, port: &str| {
        let (a, l) = p.split_once('/').unwrap();
        let len = l.parse().unwrap();
        RouteSpec {
            prefix: match a.parse::<IpAddr>().unwrap() {
                IpAddr::V4(addr) => Prefix::V4 { addr, len },
                IpAddr::V6(addr) => Prefix::V6 { addr, len },
            },
            via: [2, 0, 0, 0, 0, mac],
            port: port.into(),
        }
    };
    RouteTable::build(&[
        r("10.0.0.0/8", 1, "a"),
        r("10.1.0.0/16", 2, "b"),
        r("10.1.2.0/24", 3, "a"),
        r("10.1.2.128/25", 4, "c"),
        r("10.1.2.200/32", 5, "b"),
        r("192.168.0.0/16", 6, "a"),
        r("2001:db8::/32", 7, "a"),
        r("2001:db8:1::/48", 8, "b"),
        r("2001:db8:1:0:8000::/65", 9, "c"),
        r("2001:db8:1::1/128", 10, "a"),
    ])
    .unwrap()
}

struct Ops {
    route: Route,
    c_tables: RouteTables,
}

impl Ops {
    fn new() -> Self {
        let t = Arc::new(table());
        let lpm = |tbl24: &[u32], tbl8: &[u32]| LpmTable {
            tbl24: if tbl24.is_empty() {
                std::ptr::null()
            } else {
                tbl24.as_ptr()
            },
            tbl8: tbl8.as_ptr(),
            tbl8_len: tbl8.len() as u64,
        };
        let c_tables = RouteTables {
            v4: lpm(t.v4.tbl24(), t.v4.tbl8()),
            v6: lpm(t.v6.tbl24(), t.v6.tbl8()),
            hops: t.next_hops.as_ptr(),
            n_hops: t.next_hops.len() as u64,
        };
        // The pointers stay valid: `route` holds the Arc for as long as `Ops` lives.
        Ops {
            route: Route::new(t),
            c_tables,
        }
    }

    /// Every op on `frame`, Rust and C, compared.
    fn check(&self, frame: &[u8]) {
        let meta = parse_frame(frame);
        let v = Verdict::PASS;
        let same = |name: &str,
                    rust: (Vec<u8>, PacketMeta, Outcome),
                    c: (Vec<u8>, PacketMeta, u32, u16)| {
            let (rc, rp) = code(rust.2);
            assert_eq!((rc, rp), (c.2, c.3), "{name}: outcome, frame {frame:02x?}");
            assert_eq!(rust.0, c.0, "{name}: frame bytes, input {frame:02x?}");
            assert_eq!(rust.1, c.1, "{name}: meta, input {frame:02x?}");
        };
        // l2fwd: swap, then set src.
        let src = [0xaa, 0xbb, 0xcc, 0, 1, 2];
        for (swap, set) in [(true, false), (false, true), (true, true)] {
            let op = L2fwd {
                swap,
                src: set.then_some(src),
                dst: None,
            };
            let (mut f, mut m) = (frame.to_vec(), meta);
            let o = op.apply(&mut f, &mut m, &v);
            let mut g = frame.to_vec();
            // SAFETY: `g` is a live buffer of `g.len()` bytes; `src` is 6 bytes; dst is null
            // (not written).
            let c = unsafe {
                pw_host_l2fwd(
                    g.as_mut_ptr(),
                    g.len() as u32,
                    swap as u32,
                    if set { src.as_ptr() } else { std::ptr::null() },
                    std::ptr::null(),
                )
            };
            same("l2fwd", (f, m, o), (g, meta, c, 0));
        }
        // ttl
        let (mut f, mut m) = (frame.to_vec(), meta);
        let o = Ttl.apply(&mut f, &mut m, &v);
        let (mut g, mut cm) = (frame.to_vec(), meta);
        // SAFETY: live buffer of g.len() bytes and a live PacketMeta (the ABI's pw_packet_meta).
        let c = unsafe { pw_host_ttl(g.as_mut_ptr(), g.len() as u32, &mut cm) };
        same("ttl", (f, m, o), (g, cm, c, 0));
        // dscp
        let op = Dscp::new(&DscpConfig { set: 46 }).unwrap();
        let (mut f, mut m) = (frame.to_vec(), meta);
        let o = op.apply(&mut f, &mut m, &v);
        let (mut g, mut cm) = (frame.to_vec(), meta);
        // SAFETY: as for ttl.
        let c = unsafe { pw_host_dscp(g.as_mut_ptr(), g.len() as u32, &mut cm, 46) };
        same("dscp", (f, m, o), (g, cm, c, 0));
        // vlan push / pop / set
        for (op, p) in [
            (
                Vlan::Push {
                    tpid: 0x8100,
                    tci: 0xa064,
                },
                VlanParams {
                    op: 0,
                    tpid: 0x8100,
                    tci: 0xa064,
                    set_vid: -1,
                    set_pcp: -1,
                },
            ),
            (
                Vlan::Push {
                    tpid: 0x88a8,
                    tci: 0x0fff,
                },
                VlanParams {
                    op: 0,
                    tpid: 0x88a8,
                    tci: 0x0fff,
                    set_vid: -1,
                    set_pcp: -1,
                },
            ),
            (
                Vlan::Pop,
                VlanParams {
                    op: 1,
                    tpid: 0,
                    tci: 0,
                    set_vid: -1,
                    set_pcp: -1,
                },
            ),
            (
                Vlan::Set {
                    vid: Some(7),
                    pcp: None,
                },
                VlanParams {
                    op: 2,
                    tpid: 0,
                    tci: 0,
                    set_vid: 7,
                    set_pcp: -1,
                },
            ),
            (
                Vlan::Set {
                    vid: None,
                    pcp: Some(6),
                },
                VlanParams {
                    op: 2,
                    tpid: 0,
                    tci: 0,
                    set_vid: -1,
                    set_pcp: 6,
                },
            ),
        ] {
            let (mut f, mut m) = (frame.to_vec(), meta);
            let o = op.apply(&mut f, &mut m, &v);
            let mut g = frame.to_vec();
            g.resize(frame.len() + 4, 0);
            let mut len = frame.len() as u32;
            let mut cm = meta;
            // SAFETY: `g` has len + 4 bytes (the capacity passed); len, meta and params are live.
            let c = unsafe { pw_host_vlan(g.as_mut_ptr(), &mut len, g.len() as u32, &mut cm, &p) };
            g.truncate(len as usize);
            same("vlan", (f, m, o), (g, cm, c, 0));
        }
        // route
        let (mut f, mut m) = (frame.to_vec(), meta);
        let o = self.route.apply(&mut f, &mut m, &v);
        let mut g = frame.to_vec();
        let mut port = 0u16;
        // SAFETY: live buffer; the table pointers are valid while self.route holds the table.
        let c = unsafe {
            pw_host_route(
                g.as_mut_ptr(),
                g.len() as u32,
                &meta,
                &self.c_tables,
                &mut port,
            )
        };
        same("route", (f, m, o), (g, meta, c, port));
    }
}

/// Every frame of the corpus's Ethernet captures; None (the test does not run) without the
/// corpus outside CI (`require_corpus`).
fn corpus_frames() -> Option<Vec<Vec<u8>>> {
    pipeline::internal::testdata::corpus_ethernet_frames()
}

#[test]
fn corpus_rust_equals_host_cuda() {
    let ops = Ops::new();
    let Some(frames) = corpus_frames() else {
        return;
    };
    assert!(frames.len() > 5000, "{} frames", frames.len());
    for f in &frames {
        ops.check(f);
    }
}

fn spec_frame(
    v6: bool,
    dst_pick: u8,
    proto: u8,
    vlan: Option<u16>,
    ttl: u8,
    tos: u8,
    size: u16,
) -> Vec<u8> {
    let dsts4 = [
        "10.1.2.200",
        "10.1.2.130",
        "10.1.2.1",
        "10.1.9.9",
        "10.200.0.1",
        "192.168.5.5",
        "11.0.0.1",
    ];
    let dsts6 = [
        "2001:db8:1::1",
        "2001:db8:1:0:8000::5",
        "2001:db8:1::2",
        "2001:db8:ff::1",
        "2001:db9::1",
    ];
    let (s, d): (IpAddr, IpAddr) = if v6 {
        (
            "2001:db8::99".parse().unwrap(),
            dsts6[dst_pick as usize % dsts6.len()].parse().unwrap(),
        )
    } else {
        (
            "172.16.0.1".parse().unwrap(),
            dsts4[dst_pick as usize % dsts4.len()].parse().unwrap(),
        )
    };
    let mut spec = FrameSpec::tcp(s, d, 1234, 80, size);
    spec.proto = proto;
    spec.vlan = vlan;
    let mut f = build_frame(&spec);
    let l3 = if vlan.is_some() { 18 } else { 14 };
    if v6 {
        f[l3 + 7] = ttl;
        f[l3] = 0x60 | (tos >> 4);
        f[l3 + 1] = (tos << 4) | (f[l3 + 1] & 0x0f);
    } else {
        let mut p = pipeline::wire::ipv4::Packet::new_checked(&mut f[l3..]).unwrap();
        p.set_ttl(ttl);
        p.set_tos(tos);
        p.fill_checksum();
    }
    f
}

thread_local! {
    // Built once per test thread (the tables are 64 MiB of address space each).
    static OPS: Ops = Ops::new();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn generated_frames_rust_equals_host_cuda(
        v6 in any::<bool>(),
        dst in any::<u8>(),
        proto in prop_oneof![Just(6u8), Just(17), Just(1), Just(132), Just(47)],
        vlan in proptest::option::of(any::<u16>()),
        ttl in prop_oneof![Just(0u8), Just(1), Just(2), any::<u8>()],
        tos in any::<u8>(),
        size in 60u16..300,
        damage in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..4),
        cut in proptest::option::of(any::<u16>()),
    ) {
        let mut f = spec_frame(v6, dst, proto, vlan, ttl, tos, size);
        for (at, b) in damage {
            let i = at as usize % f.len();
            f[i] = b;
        }
        if let Some(c) = cut {
            f.truncate(c as usize % (f.len() + 1));
        }
        OPS.with(|ops| ops.check(&f));
    }
}
