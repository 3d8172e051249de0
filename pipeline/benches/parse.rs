//! Parse throughput on a realistic mix, pktwarp's `parse` stage against etherparse's slice parser
//! (`SlicedPacket::from_ethernet`) on the same frames in the same run.
//!
//! The mix (1024 frames, IMIX-like sizes 64 / 594 / 1518 in a 7:4:1 ratio): 40% IPv4 TCP, 20%
//! IPv4 UDP, 12% IPv6 TCP, 5% IPv6 UDP, 10% 802.1Q IPv4 TCP, 3% QinQ IPv6 UDP, 5% VXLAN (IPv4 UDP
//! 4789 carrying Ethernet / IPv4 / TCP), 3% ICMP, 2% ARP.
//!
//! Three measurements per frame:
//! - `pktwarp_parse`: fills the whole 144-byte `PacketMeta` (every layer, tunnels, inner headers).
//! - `etherparse_slice`: `SlicedPacket::from_ethernet` only (validates lengths, finds the layer
//!   slices; reads almost no field).
//! - `etherparse_slice_fields`: the same plus reading the fields pktwarp records (VLAN TCIs, IP
//!   version / addresses / protocol / TTL, ports, TCP flags, ICMP type) into a `PacketMeta`, i.e.
//!   the work needed to have what `parse` produces (minus tunnels, which etherparse does not
//!   decode).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use etherparse::{LinkExtSlice, NetSlice, SlicedPacket, TransportSlice};
use pipeline::internal::stage::parse::parse;
use pipeline::meta::PacketMeta;

#[path = "../tests/parse_common/mix.rs"]
mod mix;
use mix::mix;

/// Reads from etherparse's slices the fields pktwarp records.
fn etherparse_fields(f: &[u8], m: &mut PacketMeta) {
    *m = PacketMeta::default();
    let Ok(sp) = SlicedPacket::from_ethernet(f) else {
        m.status = 1;
        return;
    };
    for (i, e) in sp.link_exts.iter().enumerate() {
        if let LinkExtSlice::Vlan(v) = e {
            if i < 2 {
                m.vlan_tci[i] = u16::from_be_bytes([v.slice()[0], v.slice()[1]]);
            }
            m.vlan_count += 1;
        }
    }
    match &sp.net {
        Some(NetSlice::Ipv4(ip)) => {
            let h = ip.header();
            m.ip_version = 4;
            m.src_ip[0] = u32::from_be_bytes(h.source());
            m.dst_ip[0] = u32::from_be_bytes(h.destination());
            m.ip_ttl = h.ttl();
            m.ip_proto = ip.payload().ip_number.0;
        }
        Some(NetSlice::Ipv6(ip)) => {
            let h = ip.header();
            m.ip_version = 6;
            let (s, d) = (h.source(), h.destination());
            for i in 0..4 {
                m.src_ip[i] =
                    u32::from_be_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
                m.dst_ip[i] =
                    u32::from_be_bytes([d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]]);
            }
            m.ip_ttl = h.hop_limit();
            m.ip_proto = ip.payload().ip_number.0;
        }
        Some(NetSlice::Arp(a)) => {
            let s = a.slice();
            m.arp_oper = u16::from_be_bytes([s[6], s[7]]);
        }
        None => {}
    }
    match &sp.transport {
        Some(TransportSlice::Tcp(t)) => {
            m.src_port = t.source_port();
            m.dst_port = t.destination_port();
            m.tcp_flags = u16::from(t.slice()[13]) | (u16::from(t.slice()[12] & 1) << 8);
        }
        Some(TransportSlice::Udp(u)) => {
            m.src_port = u.source_port();
            m.dst_port = u.destination_port();
        }
        Some(TransportSlice::Icmpv4(i)) => {
            m.icmp_type = i.type_u8();
            m.icmp_code = i.code_u8();
        }
        _ => {}
    }
}

fn bench(c: &mut Criterion) {
    let frames = mix();
    let bytes: usize = frames.iter().map(|f| f.len()).sum();
    eprintln!(
        "parse bench mix: {} frames, {} bytes (mean {:.0} B/frame)",
        frames.len(),
        bytes,
        bytes as f64 / frames.len() as f64
    );
    let mut metas = vec![PacketMeta::default(); frames.len()];
    let mut g = c.benchmark_group("parse_mix");
    g.throughput(Throughput::Elements(frames.len() as u64));
    g.bench_function("pktwarp_parse", |b| {
        b.iter(|| {
            for (f, m) in frames.iter().zip(metas.iter_mut()) {
                parse(black_box(f), m);
            }
            black_box(&metas);
        })
    });
    g.bench_function("etherparse_slice", |b| {
        b.iter(|| {
            for f in &frames {
                let _ = black_box(SlicedPacket::from_ethernet(black_box(f)));
            }
        })
    });
    g.bench_function("etherparse_slice_fields", |b| {
        b.iter(|| {
            for (f, m) in frames.iter().zip(metas.iter_mut()) {
                etherparse_fields(black_box(f), m);
            }
            black_box(&metas);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
