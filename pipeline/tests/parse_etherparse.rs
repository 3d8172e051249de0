//! Differential test against an independent parser (etherparse's `SlicedPacket::from_ethernet`):
//! on frames built with etherparse's `PacketBuilder` (VLANs, IPv4/IPv6 with extension headers,
//! TCP/UDP/ICMP), on random mutations and truncations of them, and on every Ethernet capture of
//! the tcpdump corpus. Wherever both parse, VLAN tags, IP version, addresses, protocol, ports,
//! TCP flags and ICMP type/code must agree; nothing may panic.

mod parse_common;

use etherparse::{PacketBuilder, SlicedPacket};
use parse_common::{compare_with_etherparse, corpus_frames, hex, Compared};
use pipeline::internal::stage::parse::parse_frame;
use pipeline::meta::{mf, ParseStatus};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum L3 {
    V4 {
        src: [u8; 4],
        dst: [u8; 4],
        ttl: u8,
    },
    V6 {
        src: [u8; 16],
        dst: [u8; 16],
        hop: u8,
        exts: Vec<(u8, u8)>,
    },
}

#[derive(Clone, Debug)]
enum L4 {
    Tcp {
        sp: u16,
        dp: u16,
        seq: u32,
        flags: u8,
    },
    Udp {
        sp: u16,
        dp: u16,
    },
    Icmp {
        id: u16,
        seq: u16,
    },
}

fn l3_strategy() -> impl Strategy<Value = L3> {
    // IPv6 extension headers (kind, length byte) in RFC 8200 order, each present or not:
    // hop-by-hop, destination options, routing, AH.
    let ext = prop::collection::vec((any::<bool>(), 0u8..3), 4).prop_map(|v| {
        [0u8, 60, 43, 51]
            .into_iter()
            .zip(v)
            .filter(|(_, (on, _))| *on)
            .map(|(k, (_, len))| (k, len))
            .collect::<Vec<_>>()
    });
    prop_oneof![
        (any::<[u8; 4]>(), any::<[u8; 4]>(), any::<u8>()).prop_map(|(src, dst, ttl)| L3::V4 {
            src,
            dst,
            ttl
        }),
        (any::<[u8; 16]>(), any::<[u8; 16]>(), any::<u8>(), ext).prop_map(
            |(src, dst, hop, exts)| L3::V6 {
                src,
                dst,
                hop,
                exts
            }
        ),
    ]
}

fn l4_strategy() -> impl Strategy<Value = L4> {
    prop_oneof![
        (any::<u16>(), any::<u16>(), any::<u32>(), any::<u8>())
            .prop_map(|(sp, dp, seq, flags)| L4::Tcp { sp, dp, seq, flags }),
        (any::<u16>(), any::<u16>()).prop_map(|(sp, dp)| L4::Udp { sp, dp }),
        (any::<u16>(), any::<u16>()).prop_map(|(id, seq)| L4::Icmp { id, seq }),
    ]
}

/// Builds the frame with etherparse's builder, then splices the IPv6 extension headers in.
fn build(vlans: &[u16], l3: &L3, l4: &L4, payload: &[u8]) -> Vec<u8> {
    let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let vid = |v: u16| etherparse::VlanId::try_new(v & 0x0fff).unwrap_or(etherparse::VlanId::ZERO);
    let mut out = Vec::new();
    macro_rules! finish {
        ($ip:expr) => {{
            let ip = $ip;
            let is_v6 = matches!(l3, L3::V6 { .. });
            match *l4 {
                L4::Tcp { sp, dp, seq, flags } => {
                    let mut b = ip.tcp(sp, dp, seq, 1024);
                    if flags & 1 != 0 {
                        b = b.fin();
                    }
                    if flags & 2 != 0 {
                        b = b.syn();
                    }
                    if flags & 4 != 0 {
                        b = b.rst();
                    }
                    if flags & 8 != 0 {
                        b = b.psh();
                    }
                    if flags & 16 != 0 {
                        b = b.ack(7);
                    }
                    if flags & 32 != 0 {
                        b = b.urg(3);
                    }
                    if flags & 64 != 0 {
                        b = b.ece();
                    }
                    if flags & 128 != 0 {
                        b = b.cwr();
                    }
                    b.write(&mut out, payload).expect("build tcp");
                }
                L4::Udp { sp, dp } => ip.udp(sp, dp).write(&mut out, payload).expect("build udp"),
                L4::Icmp { id, seq } if is_v6 => ip
                    .icmpv6_echo_request(id, seq)
                    .write(&mut out, payload)
                    .expect("build icmpv6"),
                L4::Icmp { id, seq } => ip
                    .icmpv4_echo_request(id, seq)
                    .write(&mut out, payload)
                    .expect("build icmp"),
            }
        }};
    }
    macro_rules! with_l3 {
        ($step:expr) => {{
            let step = $step;
            match l3 {
                L3::V4 { src, dst, ttl } => finish!(step.ipv4(*src, *dst, *ttl)),
                L3::V6 { src, dst, hop, .. } => finish!(step.ipv6(*src, *dst, *hop)),
            }
        }};
    }
    match vlans {
        [] => with_l3!(eth),
        [a] => with_l3!(eth.single_vlan(vid(*a))),
        [a, b, ..] => with_l3!(eth.double_vlan(vid(*a), vid(*b))),
    }
    if let L3::V6 { exts, .. } = l3 {
        if !exts.is_empty() {
            splice_ipv6_exts(&mut out, 14 + 4 * vlans.len().min(2), exts);
        }
    }
    out
}

fn splice_ipv6_exts(f: &mut Vec<u8>, l3: usize, exts: &[(u8, u8)]) {
    let mut next = f[l3 + 6];
    let mut chain = Vec::new();
    // Build back to front so each header names the one after it.
    for &(kind, len) in exts.iter().rev() {
        // AH carries at least SPI and sequence number: payload length >= 1.
        let len = if kind == 51 { len.max(1) } else { len };
        let size = if kind == 51 {
            (len as usize + 2) * 4
        } else {
            (len as usize + 1) * 8
        };
        let mut h = vec![0u8; size];
        h[0] = next;
        h[1] = len;
        if kind != 51 {
            h[2] = 1; // PadN option covering the rest
            h[3] = (size - 4) as u8;
        }
        h.extend(chain);
        chain = h;
        next = kind;
    }
    f[l3 + 6] = next;
    let plen = u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]) as usize + chain.len();
    f[l3 + 4..l3 + 6].copy_from_slice(&(plen as u16).to_be_bytes());
    let tail = f.split_off(l3 + 40);
    f.extend(chain);
    f.extend(tail);
}

fn check(frame: &[u8], c: &mut Compared) -> Result<(), TestCaseError> {
    let m = parse_frame(frame);
    compare_with_etherparse(frame, &m, c)
        .map_err(|e| TestCaseError::fail(format!("{e} on {}", hex(frame))))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn builder_frames_agree(
        vlans in prop::collection::vec(any::<u16>(), 0..3),
        l3 in l3_strategy(),
        l4 in l4_strategy(),
        payload in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        // UDP to the VXLAN or GTP-U port is a tunnel to `parse`, and random payload bytes are
        // no valid tunnel header (the tunnel tests build those).
        prop_assume!(!matches!(l4, L4::Udp { sp, dp } if [sp, dp].iter().any(|p| [4789, 2152].contains(p))));
        let f = build(&vlans, &l3, &l4, &payload);
        let m = parse_frame(&f);
        // Valid frames must parse completely on both sides, and agree.
        prop_assert!(SlicedPacket::from_ethernet(&f).is_ok());
        prop_assert_eq!(m.status, 0, "{} on {}", ParseStatus::describe(m.status), hex(&f));
        prop_assert_ne!(m.flags & mf::L4, 0);
        let mut c = Compared::default();
        check(&f, &mut c)?;
        prop_assert_eq!((c.both_ok, c.ip), (1, 1));
    }

    #[test]
    fn mutated_and_truncated_frames_agree(
        vlans in prop::collection::vec(any::<u16>(), 0..3),
        l3 in l3_strategy(),
        l4 in l4_strategy(),
        payload in prop::collection::vec(any::<u8>(), 0..32),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut f = build(&vlans, &l3, &l4, &payload);
        for (at, v) in flips {
            let i = at.index(f.len());
            f[i] = v;
        }
        f.truncate(cut.index(f.len() + 1));
        let mut c = Compared::default();
        check(&f, &mut c)?;
    }
}

#[test]
fn corpus_agrees_with_etherparse_and_never_panics() {
    let Some(frames) = corpus_frames() else {
        return;
    };
    let mut c = Compared::default();
    let mut failures = Vec::new();
    for (name, f) in &frames {
        let m = parse_frame(f);
        if let Err(e) = compare_with_etherparse(f, &m, &mut c) {
            failures.push(format!("{name}: {e}"));
        }
    }
    eprintln!("{} corpus frames; compared: {c:?}", frames.len());
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The comparison must actually have covered the corpus.
    assert!(
        c.both_ok > 5000 && c.ip > 4000 && c.ports > 2000 && c.vlans > 50,
        "{c:?}"
    );
}
