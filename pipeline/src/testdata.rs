//! Test fixtures the project generates itself, so the core tests run from a bare clone: the
//! multi-protocol capture (23 frames: VLAN, QinQ, IPv6 extension headers and fragments, IPv4
//! fragments, VXLAN, GTP-U, MPLS, SCTP, ARP, three malformed IPv4 frames, eCPRI), written as a
//! pcap into the temp folder. The frames are built byte by byte here, independently of the
//! parser and generator under test, from the description in `tests/parse_multi_proto.rs`.
//!
//! Also generated: a Linux cooked capture (a non-Ethernet file to refuse) and a ClassBench-format
//! trace with its gzipped copy ([`classbench_trace`]).
//!
//! The large external corpus (ClassBench sets, tcpdump's and O-RAN captures) is not generated:
//! tests that need it reach it through [`require_corpus`] (required in CI, noted as not run
//! elsewhere when missing).

use std::path::{Path, PathBuf};

pub mod respond;

/// The external corpus folder (`$PKTWARP_DATA`, default `shared/data` beside the checkout), a
/// corpus input that fails naming its path when absent (benchmarks), and one that a test runs
/// on when present, requires in CI and otherwise notes as not run, re-exported for crates that
/// reach flow-rules only through this one.
pub use flow_rules::input::{data_dir, require_corpus, require_data};

const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// pcap link type of Ethernet.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// pcap link type of Linux cooked capture v1 (a non-Ethernet capture for refusal tests).
pub const LINKTYPE_LINUX_SLL: u32 = 113;

fn eth(ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(128);
    f.extend_from_slice(&DST_MAC);
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// One's-complement sum of 16-bit big-endian words (odd tail padded with zero).
fn sum16(mut acc: u32, data: &[u8]) -> u32 {
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from(c[0]) << 8
        };
        acc += u32::from(w);
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// An IPv4 header with options (a multiple of 4 bytes) and a valid header checksum.
fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, payload: usize, id: u16, frag: u16) -> Vec<u8> {
    ipv4_opts(src, dst, proto, payload, id, frag, &[])
}

fn ipv4_opts(
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    payload: usize,
    id: u16,
    frag: u16,
    options: &[u8],
) -> Vec<u8> {
    let ihl = 5 + options.len() / 4;
    let total = (ihl * 4 + payload) as u16;
    let mut h = vec![0x40 | ihl as u8, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&id.to_be_bytes());
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(options);
    let c = fold(sum16(0, &h));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

fn v6(last: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[15] = last;
    a
}

fn ipv6(next: u8, payload: usize) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&v6(1));
    h.extend_from_slice(&v6(2));
    h
}

/// Pseudo-header sums for the L4 checksum.
fn pseudo4(src: [u8; 4], dst: [u8; 4], proto: u8, len: usize) -> u32 {
    sum16(sum16(0, &src), &dst) + u32::from(proto) + len as u32
}

fn pseudo6(next: u8, len: usize) -> u32 {
    sum16(sum16(0, &v6(1)), &v6(2)) + u32::from(next) + len as u32
}

/// A UDP datagram; `pseudo` = the pseudo-header sum, or None for checksum 0 (IPv4 only).
fn udp(sp: u16, dp: u16, payload: &[u8], pseudo: Option<u32>) -> Vec<u8> {
    let mut u = Vec::with_capacity(8 + payload.len());
    u.extend_from_slice(&sp.to_be_bytes());
    u.extend_from_slice(&dp.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    if let Some(p) = pseudo {
        let c = match fold(sum16(p, &u)) {
            0 => 0xffff,
            c => c,
        };
        u[6..8].copy_from_slice(&c.to_be_bytes());
    }
    u
}

/// A 20-byte TCP SYN with a valid checksum over `pseudo`.
fn tcp_syn(sp: u16, dp: u16, pseudo: u32) -> Vec<u8> {
    let mut t = Vec::with_capacity(20);
    t.extend_from_slice(&sp.to_be_bytes());
    t.extend_from_slice(&dp.to_be_bytes());
    t.extend_from_slice(&0x1000_0000u32.to_be_bytes()); // seq
    t.extend_from_slice(&[0, 0, 0, 0]); // ack
    t.extend_from_slice(&[0x50, 0x02, 0xfa, 0xf0, 0, 0, 0, 0]); // offset 5, SYN, window
    let c = fold(sum16(pseudo, &t));
    t[16..18].copy_from_slice(&c.to_be_bytes());
    t
}

/// Ethernet / IPv4 / `l4` (protocol `proto`), unfragmented.
fn v4_frame(src: [u8; 4], dst: [u8; 4], proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = eth(0x0800);
    f.extend(ipv4(src, dst, proto, l4.len(), 0x0100, 0x4000));
    f.extend_from_slice(l4);
    f
}

fn v4_udp(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
    v4_frame(src, dst, 17, &udp(sp, dp, payload, None))
}

fn v4_syn(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16) -> Vec<u8> {
    v4_frame(src, dst, 6, &tcp_syn(sp, dp, pseudo4(src, dst, 6, 20)))
}

/// Ethernet header with 802.1Q / 802.1ad tags `(tpid, vid)` in order, then IPv4.
fn tagged(tags: &[(u16, u16)], ip_and_l4: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&DST_MAC);
    f.extend_from_slice(&SRC_MAC);
    for (tpid, vid) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&vid.to_be_bytes());
    }
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    f.extend_from_slice(ip_and_l4);
    f
}

fn ip4_and(src: [u8; 4], dst: [u8; 4], proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut v = ipv4(src, dst, proto, l4.len(), 0x0200, 0x4000);
    v.extend_from_slice(l4);
    v
}

/// A DNS query for `example.com` A (payload only; the parser does not judge it).
fn dns_query() -> Vec<u8> {
    let mut d = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    d.extend_from_slice(b"\x07example\x03com\x00");
    d.extend_from_slice(&[0, 1, 0, 1]);
    d
}

/// Frames 7-10: IPv6 with hop-by-hop, destination options and routing headers before TCP; then
/// one UDP datagram (7 -> 8) in three fragments of id 0x0521c6bf at 0, 1216 and 2432 bytes.
fn ipv6_frames(out: &mut Vec<Vec<u8>>) {
    let syn = tcp_syn(5, 6, pseudo6(6, 20));
    let mut ext = vec![60, 0, 1, 4, 0, 0, 0, 0]; // hop-by-hop: PadN, next dest opts
    ext.extend_from_slice(&[43, 0, 1, 4, 0, 0, 0, 0]); // dest opts: PadN, next routing
    ext.extend_from_slice(&[6, 2, 0, 1, 0, 0, 0, 0]); // routing type 0, 1 segment left
    ext.extend_from_slice(&v6(3));
    let mut f = eth(0x86dd);
    f.extend(ipv6(0, ext.len() + syn.len()));
    f.extend(ext);
    f.extend(syn);
    out.push(f);

    let data: Vec<u8> = (0..2600u32).map(|i| (i % 251) as u8).collect();
    let dgram = udp(7, 8, &data, Some(pseudo6(17, 8 + data.len())));
    let chunks = [&dgram[..1216], &dgram[1216..2432], &dgram[2432..]];
    for (k, chunk) in chunks.iter().enumerate() {
        let off = (k * 1216 / 8) as u16;
        let more = u16::from(k < 2);
        let mut f = eth(0x86dd);
        f.extend(ipv6(44, 8 + chunk.len()));
        f.extend_from_slice(&[17, 0]);
        f.extend_from_slice(&(off << 3 | more).to_be_bytes());
        f.extend_from_slice(&0x0521_c6bfu32.to_be_bytes());
        f.extend_from_slice(chunk);
        out.push(f);
    }
}

/// Frames 11-14: one UDP datagram (9 -> 10) in IPv4 fragments of id 1 at 0, 1000, 2000 and
/// 3000 bytes.
fn ipv4_fragments(out: &mut Vec<Vec<u8>>) {
    let (src, dst) = ([10, 0, 3, 1], [10, 0, 3, 2]);
    let data: Vec<u8> = (0..3392u32).map(|i| (i % 241) as u8).collect();
    let dgram = udp(9, 10, &data, Some(pseudo4(src, dst, 17, 8 + data.len())));
    for k in 0..4 {
        let chunk = &dgram[k * 1000..((k + 1) * 1000).min(dgram.len())];
        let frag = if k < 3 { 0x2000 } else { 0 } | (k * 1000 / 8) as u16;
        let mut f = eth(0x0800);
        f.extend(ipv4(src, dst, 17, chunk.len(), 1, frag));
        f.extend_from_slice(chunk);
        out.push(f);
    }
}

/// Frames 15-16: VXLAN (VNI 42) over UDP 49152 -> 4789 carrying Ethernet / IPv4 / TCP SYN
/// 11 -> 12; GTP-U (TEID 0x1234) over UDP 2152 carrying IPv4 100.64.0.1 -> 8.8.8.8 UDP 13 -> 14.
fn tunnel_frames(out: &mut Vec<Vec<u8>>) {
    let (isrc, idst) = ([172, 16, 0, 1], [172, 16, 0, 2]);
    let mut inner = eth(0x0800);
    inner.extend(ip4_and(
        isrc,
        idst,
        6,
        &tcp_syn(11, 12, pseudo4(isrc, idst, 6, 20)),
    ));
    let mut vx = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
    vx.extend(inner);
    out.push(v4_udp([192, 168, 0, 1], [192, 168, 0, 2], 49152, 4789, &vx));

    let (gsrc, gdst) = ([100, 64, 0, 1], [8, 8, 8, 8]);
    let inner = ip4_and(gsrc, gdst, 17, &udp(13, 14, b"gtp-u inner payload", None));
    let mut g = vec![0x30, 0xff];
    g.extend_from_slice(&(inner.len() as u16).to_be_bytes());
    g.extend_from_slice(&0x1234u32.to_be_bytes());
    g.extend(inner);
    out.push(v4_udp([10, 0, 5, 1], [10, 0, 5, 2], 2152, 2152, &g));
}

/// Frames 17-19: MPLS labels 16 and 17 (bottom) over IPv4 UDP 15 -> 16; IPv4 with a
/// record-route option (IHL 6) carrying SCTP 17 -> 18; an ARP request.
fn misc_frames(out: &mut Vec<Vec<u8>>) {
    let mut f = eth(0x8847);
    f.extend_from_slice(&((16u32 << 12) | 64).to_be_bytes());
    f.extend_from_slice(&((17u32 << 12) | 0x100 | 64).to_be_bytes());
    f.extend(ip4_and(
        [10, 0, 4, 1],
        [10, 0, 4, 2],
        17,
        &udp(15, 16, b"over mpls", None),
    ));
    out.push(f);

    // SCTP common header + one DATA-less INIT chunk header's worth of bytes.
    let mut sctp = Vec::new();
    sctp.extend_from_slice(&17u16.to_be_bytes());
    sctp.extend_from_slice(&18u16.to_be_bytes());
    sctp.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]); // verification tag, checksum
    sctp.extend_from_slice(&[1, 0, 0, 4]); // a bare chunk header
    let mut f = eth(0x0800);
    let (src, dst) = ([10, 0, 5, 1], [10, 0, 5, 2]);
    f.extend(ipv4_opts(
        src,
        dst,
        132,
        sctp.len(),
        3,
        0x4000,
        &[7, 3, 4, 0],
    ));
    f.extend(sctp);
    out.push(f);

    let mut f = Vec::new();
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(&[10, 0, 0, 1]);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&[10, 0, 0, 2]);
    f.resize(60, 0);
    out.push(f);
}

/// Frames 20-23: 6 bytes of IPv4 header; IHL 3; total length 9000 in a 106-byte frame; eCPRI
/// revision 1 IQ data, payload size 8, PC_ID 0, SEQ_ID 0x0080.
fn bad_and_ecpri_frames(out: &mut Vec<Vec<u8>>) {
    let mut f = eth(0x0800);
    f.extend_from_slice(&[0x45, 0, 0, 0x1c, 0, 1]);
    out.push(f);

    let mut f = eth(0x0800);
    let mut h = ipv4([10, 0, 6, 1], [10, 0, 6, 2], 17, 20, 4, 0);
    h[0] = 0x43;
    f.extend(h);
    f.extend_from_slice(&[0; 20]);
    out.push(f);

    let mut f = eth(0x0800);
    let mut h = ipv4([10, 0, 6, 1], [10, 0, 6, 2], 17, 72, 5, 0);
    h[2..4].copy_from_slice(&9000u16.to_be_bytes());
    f.extend(h);
    f.resize(106, 0xab);
    out.push(f);

    let mut f = eth(0xaefe);
    f.extend_from_slice(&[0x10, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x80]);
    f.extend_from_slice(&[1, 2, 3, 4]);
    f.resize(60, 0);
    out.push(f);
}

/// The 23 frames of the multi-protocol capture, in order.
pub fn multi_proto_frames() -> Vec<Vec<u8>> {
    let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let mut out = vec![
        v4_udp(a, b, 1234, 5678, b"pktwarp multi_proto frame 1"),
        v4_syn(a, b, 1234, 80),
    ];
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1];
    icmp.extend_from_slice(b"ping payload");
    let c = fold(sum16(0, &icmp));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    out.push(v4_frame(a, b, 1, &icmp));
    let (s1, d1) = ([10, 0, 1, 1], [10, 0, 1, 2]);
    out.push(tagged(
        &[(0x8100, 100)],
        &ip4_and(s1, d1, 17, &udp(1, 2, b"vlan 100", None)),
    ));
    let (s2, d2) = ([10, 0, 2, 1], [10, 0, 2, 2]);
    out.push(tagged(
        &[(0x88a8, 200), (0x8100, 300)],
        &ip4_and(s2, d2, 6, &tcp_syn(3, 4, pseudo4(s2, d2, 6, 20))),
    ));
    let dns = dns_query();
    let mut f = eth(0x86dd);
    let u = udp(53, 53, &dns, Some(pseudo6(17, 8 + dns.len())));
    f.extend(ipv6(17, u.len()));
    f.extend(u);
    out.push(f);
    ipv6_frames(&mut out);
    ipv4_fragments(&mut out);
    tunnel_frames(&mut out);
    misc_frames(&mut out);
    bad_and_ecpri_frames(&mut out);
    // Ethernet's 60-byte minimum, as a NIC would pad (the IPv4 total length says what is real).
    for f in &mut out {
        if f.len() < 60 && f.len() != 20 {
            f.resize(60, 0);
        }
    }
    out
}

/// A mixed corpus for tests that hold two ways of running stages equal: the multi-protocol
/// capture's frames, then `imix` generated IMIX frames (seed 0), each with its record or
/// receive time; every 7th frame (index 3, 10, ...) cut to 20 bytes, a parse error.
pub fn mixed_frames(imix: u64) -> Vec<(Vec<u8>, u64)> {
    let mut frames = Vec::new();
    let mut r = crate::port::pcap::CaptureReader::open(multi_proto_pcap())
        .unwrap_or_else(|e| panic!("the generated multi-protocol capture: {e}"));
    while let Some(f) = r.next_frame().unwrap_or_else(|e| panic!("{e}")) {
        frames.push((f.data.to_vec(), f.timestamp_ns));
    }
    let opts = crate::port::gen::GenOptions {
        count: Some(imix),
        size: crate::port::gen::FrameSize::Imix,
        ..Default::default()
    };
    let mut gen =
        crate::port::gen::GenRx::new(&opts, 0).unwrap_or_else(|e| panic!("generator: {e}"));
    let mut b = crate::burst::Burst::default();
    loop {
        let st = crate::port::RxPort::rx_burst(&mut gen, &mut b, 64)
            .unwrap_or_else(|e| panic!("generator: {e}"));
        frames.extend(b.frames().map(|(d, f)| (f.to_vec(), d.timestamp_ns)));
        b.clear();
        if matches!(st, crate::port::RxStatus::End) {
            break;
        }
    }
    for (i, (f, _)) in frames.iter_mut().enumerate() {
        if i % 7 == 3 {
            f.truncate(20);
        }
    }
    frames
}

/// Every frame of the corpus's Ethernet captures (INDEX.tsv's `ether ` rows), one capture
/// after another; a capture the reader refuses part-way keeps the frames read before the error
/// (several are cut on purpose). None (the test then returns) without the corpus outside CI
/// (`flow_rules::input::require_corpus`).
pub fn corpus_ethernet_frames() -> Option<Vec<Vec<u8>>> {
    let d = flow_rules::input::require_corpus("pcaps")?;
    let index_path = d.join("INDEX.tsv");
    let index = std::fs::read_to_string(&index_path)
        .unwrap_or_else(|e| panic!("{}: {e}", index_path.display()));
    let mut frames = Vec::new();
    for line in index.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 3 || !cols[2].starts_with("ether ") {
            continue;
        }
        let Ok(mut r) = crate::port::pcap::CaptureReader::open_ethernet(d.join(cols[0])) else {
            continue;
        };
        while let Ok(Some(f)) = r.next_frame() {
            frames.push(f.data.to_vec());
        }
    }
    Some(frames)
}

/// [`corpus_ethernet_frames`], frame i with the descriptor `desc(i, frame)`.
pub fn corpus_ethernet_descs(
    desc: impl Fn(usize, &[u8]) -> crate::burst::FrameDesc,
) -> Option<Vec<(crate::burst::FrameDesc, Vec<u8>)>> {
    let frames = corpus_ethernet_frames()?;
    let with = |(i, f): (usize, Vec<u8>)| (desc(i, &f), f);
    Some(frames.into_iter().enumerate().map(with).collect())
}

/// Every frame of a capture (pcap or pcapng), in order: what a test reads back from the file a
/// TX port wrote.
pub fn capture_frames(path: &Path) -> Result<Vec<Vec<u8>>, crate::port::PortError> {
    let mut r = crate::port::pcap::CaptureReader::open(path)?;
    let mut v = Vec::new();
    while let Some(f) = r.next_frame()? {
        v.push(f.data.to_vec());
    }
    Ok(v)
}

/// Writes `frames` as a classic microsecond pcap of link type `linktype`, one frame every
/// millisecond from t = 1 s.
pub fn write_pcap(path: &Path, linktype: u32, frames: &[Vec<u8>]) -> std::io::Result<()> {
    let mut b = Vec::new();
    // Magic, version 2.4 (two u16), zone, sigfigs, snaplen, link type.
    for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 262_144, linktype] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        let us = 1_000_000 + i as u64 * 1000;
        let len = f.len() as u32;
        for v in [(us / 1_000_000) as u32, (us % 1_000_000) as u32, len, len] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(f);
    }
    replace_file(path, &b)
}

/// The folder generated fixtures are written to (one per crate version; the files are the
/// same bytes every time and replaced by rename, so concurrent test processes can share it).
pub fn fixture_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-fixtures-{}", env!("CARGO_PKG_VERSION")));
    if let Err(e) = std::fs::create_dir_all(&d) {
        panic!("create fixture folder {}: {e}", d.display());
    }
    d
}

/// The multi-protocol capture, generated into [`fixture_dir`] (once per process).
pub fn multi_proto_pcap() -> PathBuf {
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let p = fixture_dir().join("multi_proto.pcap");
        if let Err(e) = write_pcap(&p, LINKTYPE_ETHERNET, &multi_proto_frames()) {
            panic!("write {}: {e}", p.display());
        }
        p
    })
    .clone()
}

/// A small Linux cooked (link type 113) capture: a non-Ethernet file readers must refuse.
pub fn linux_sll_pcap() -> PathBuf {
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let p = fixture_dir().join("linux_sll.pcap");
        // SLL header (16 bytes: packet type, ARPHRD, address length, address, protocol) + IPv4.
        let mut f = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
        f.extend(ip4_and(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            17,
            &udp(1, 2, b"x", None),
        ));
        if let Err(e) = write_pcap(&p, LINKTYPE_LINUX_SLL, &[f]) {
            panic!("write {}: {e}", p.display());
        }
        p
    })
    .clone()
}

/// Frames in [`imix_pcap`].
pub const IMIX_PCAP_FRAMES: usize = 601;

/// [`IMIX_PCAP_FRAMES`] clean frames of the `gen` port (IMIX 64 / 576 / 1518 bytes, IPv4 and
/// IPv6, TCP, UDP and ICMP) as a pcap in [`fixture_dir`]: several bursts of every size, for the
/// port tests that replay a capture and compare what comes out.
pub fn imix_pcap() -> PathBuf {
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let p = fixture_dir().join("imix_601.pcap");
        let opts = crate::port::gen::GenOptions {
            count: Some(IMIX_PCAP_FRAMES as u64),
            size: crate::port::gen::FrameSize::Imix,
            flows: Some(crate::port::gen::FlowOptions {
                ipv6_share: 0.25,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut frames = Vec::with_capacity(IMIX_PCAP_FRAMES);
        let gen = crate::port::gen::GenRx::new(&opts, 0);
        let mut gen = gen.unwrap_or_else(|e| panic!("gen options: {e}"));
        let mut b = crate::burst::Burst::default();
        loop {
            let st = crate::port::RxPort::rx_burst(&mut gen, &mut b, 64);
            let st = st.unwrap_or_else(|e| panic!("gen: {e}"));
            frames.extend(b.frames().map(|(_, f)| f.to_vec()));
            b.clear();
            if matches!(st, crate::port::RxStatus::End) {
                break;
            }
        }
        if let Err(e) = write_pcap(&p, LINKTYPE_ETHERNET, &frames) {
            panic!("write {}: {e}", p.display());
        }
        p
    })
    .clone()
}

/// Headers of the generated ClassBench-format trace ([`classbench_trace`]): 7 columns a line
/// (source and destination address as u32, ports, protocol, flags, filter index), as
/// `db_generator`'s traces; IPv4 TCP, UDP and ICMP.
pub const TRACE_LINES: usize = 1000;

/// A ClassBench-format trace of [`TRACE_LINES`] headers generated from a fixed seed (the same
/// bytes every time), written into [`fixture_dir`], and its gzipped copy: for the tests of
/// trace reading and trace-driven generation that need no real ClassBench set.
pub fn classbench_trace() -> (PathBuf, PathBuf) {
    static PATHS: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    PATHS
        .get_or_init(|| {
            let dir = fixture_dir();
            let (plain, gz) = (dir.join("trace_1k"), dir.join("trace_1k.gz"));
            let text = classbench_trace_text();
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            let packed =
                std::io::Write::write_all(&mut enc, text.as_bytes()).and_then(|()| enc.finish());
            let written = packed.and_then(|packed| {
                replace_file(&plain, text.as_bytes())?;
                replace_file(&gz, &packed)
            });
            if let Err(e) = written {
                panic!("write {}: {e}", dir.display());
            }
            (plain, gz)
        })
        .clone()
}

/// The text of [`classbench_trace`].
pub fn classbench_trace_text() -> String {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        // xorshift64*: fixed, independent of any crate's generator.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut out = String::with_capacity(TRACE_LINES * 48);
    for i in 0..TRACE_LINES {
        let (a, b) = (next(), next());
        let proto = [6u64, 17, 1][(a % 3) as usize];
        let (sport, dport) = if proto == 1 {
            (0, 0)
        } else {
            ((a >> 16) & 0xFFFF, (b >> 16) & 0xFFFF)
        };
        out.push_str(&format!(
            "{}\t{}\t{sport}\t{dport}\t{proto}\t0\t{}\n",
            (a >> 32) as u32,
            (b >> 32) as u32,
            i % 97
        ));
    }
    out
}

/// Writes `bytes` to `path` by a rename, so concurrent test processes never read it half
/// written.
fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// A user stage for tests: drops frames longer than `max_len` (reason `StageDrop`) and counts
/// them in its counter `too_long`. Reads no metadata. Each test gives it its own factory and
/// CUDA side; this is the CPU side they share.
pub struct MaxLen {
    max_len: usize,
    /// Names a second counter (`other`, never counted): a stage whose counter shape differs.
    extra_counter: bool,
    dropped: std::sync::atomic::AtomicU64,
}

impl MaxLen {
    pub fn new(max_len: usize) -> MaxLen {
        MaxLen {
            max_len,
            extra_counter: false,
            dropped: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The same stage with a second counter name (`other`).
    pub fn with_extra_counter(mut self) -> MaxLen {
        self.extra_counter = true;
        self
    }

    /// The stage's `max_len` option (a number; required).
    pub fn option(options: &serde_json::Value) -> anyhow::Result<u64> {
        options
            .get("max_len")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| anyhow::anyhow!("option `max_len` (a number) is required"))
    }
}

impl crate::stage::CustomStage for MaxLen {
    fn process(&self, frame: &[u8], _: &crate::meta::PacketMeta, v: &mut crate::verdict::Verdict) {
        if frame.len() > self.max_len {
            self.dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            *v = crate::verdict::Verdict::drop(crate::verdict::DropReason::StageDrop);
        }
    }
    fn counter_names(&self) -> Vec<String> {
        let mut n = vec!["too_long".to_string()];
        if self.extra_counter {
            n.push("other".into());
        }
        n
    }
    fn counters(&self) -> Vec<u64> {
        vec![self.dropped.load(std::sync::atomic::Ordering::Relaxed)]
    }
}

/// Runs `ip ARGS...` (iproute2; the tests that make network namespaces use it); the error carries the command and its stderr.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip`: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Deletes the network namespace (and the links in it) however the test ends.
pub struct Netns(pub String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.0]);
    }
}

/// Reruns this test binary inside namespace `ns`, running only the ignored test `child` with
/// `child_env` set; returns (exit success, stdout, stderr).
pub fn run_child_in_netns(ns: &str, child: &str, child_env: &str) -> (bool, String, String) {
    let exe = std::env::current_exe().expect("test binary path");
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(exe)
        .args(["--exact", child, "--ignored", "--nocapture"])
        .env(child_env, "1")
        .output()
        .expect("run the child in the namespace");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// docs/hardware-only-tests.md, embedded: the tests allowed to skip in CI, with the reason.
pub const HARDWARE_ONLY_DOC: &str = include_str!("../../docs/hardware-only-tests.md");

/// The `(file, test)` rows of [`HARDWARE_ONLY_DOC`]'s tables (file relative to the workspace).
pub fn hardware_only_tests() -> Vec<(String, String)> {
    HARDWARE_ONLY_DOC
        .lines()
        .filter_map(|l| {
            let mut cells = l.strip_prefix('|')?.split('|').map(str::trim);
            let (file, test) = (cells.next()?, cells.next()?);
            file.ends_with(".rs")
                .then(|| (file.to_string(), test.to_string()))
        })
        .collect()
}

/// True when running in CI: `CI` set to anything but empty, `0` or `false`.
pub fn in_ci() -> bool {
    flow_rules::input::in_ci()
}

/// A test that cannot run here calls this (then returns): it says why on stderr, and in CI it
/// panics unless `(file, test)` is listed in docs/hardware-only-tests.md, so a missing
/// dependency never turns into a silent pass. Call it as `skip(file!(), "test_fn", reason)`.
pub fn skip(file: &str, test: &str, reason: &str) {
    if let Err(e) = skip_allowed(in_ci(), file, test, reason) {
        panic!("{e}");
    }
    eprintln!("skipped: {reason}");
}

/// For a test that needs a GPU: true when there is none usable here, after [`skip`] said so
/// (the test then returns). Call it as `if no_gpu(file!(), "test_fn") { return; }`.
pub fn no_gpu(file: &str, test: &str) -> bool {
    match crate::executor::gpu::probe(0) {
        Ok(_) => false,
        Err(e) => {
            skip(file, test, &format!("no usable GPU: {e}"));
            true
        }
    }
}

/// Whether a test may skip: always outside CI, in CI only when listed.
pub fn skip_allowed(ci: bool, file: &str, test: &str, reason: &str) -> Result<(), String> {
    let listed = hardware_only_tests()
        .iter()
        .any(|(f, t)| f == file && t == test);
    if ci && !listed {
        return Err(format!(
            "{file}: {test} would skip in CI ({reason}): install what it needs \
             (scripts/install-deps.sh) or list it in docs/hardware-only-tests.md with the reason"
        ));
    }
    Ok(())
}

/// The counts `gpu-daemon-check.sh` holds equal between a GPU and a CPU executor run, per queue
/// too (the GPU daemon's tests).
pub fn assert_same_counts(gpu: &crate::daemon::Summary, cpu: &crate::daemon::Summary, what: &str) {
    assert_eq!(gpu.rx_frames, cpu.rx_frames, "{what}: rx_frames");
    assert_eq!(gpu.rx_bytes, cpu.rx_bytes, "{what}: rx_bytes");
    assert_eq!(gpu.drops, cpu.drops, "{what}: drops");
    assert_eq!(gpu.top_rules, cpu.top_rules, "{what}: top_rules");
    assert_eq!(gpu.acl_default, cpu.acl_default, "{what}: acl_default");
    assert_eq!(gpu.counted, cpu.counted, "{what}: counted");
    assert_eq!(gpu.tx_frames, cpu.tx_frames, "{what}: tx_frames");
    assert_eq!(gpu.tx_bytes, cpu.tx_bytes, "{what}: tx_bytes");
    for (g, c) in gpu.queues.iter().zip(&cpu.queues) {
        let key = |q: &crate::daemon::QueueSummary| {
            (
                q.rx_frames,
                q.passed,
                q.mirrored,
                q.to_host,
                q.tx_frames,
                q.drops.clone(),
            )
        };
        assert_eq!(key(g), key(c), "{what}: queue {}", g.queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_verify() {
        // The IPv4 header of frame 1 sums to 0xffff with its checksum in place.
        let f = &multi_proto_frames()[0];
        assert_eq!(fold(sum16(0, &f[14..34])), 0);
        // Frame 2's TCP checksum verifies over the pseudo-header.
        let f = &multi_proto_frames()[1];
        let p = pseudo4([10, 0, 0, 1], [10, 0, 0, 2], 6, 20);
        assert_eq!(fold(sum16(p, &f[34..54])), 0);
    }

    #[test]
    fn pcap_layout_is_classic_microsecond() {
        let d = fixture_dir();
        let p = d.join("layout.pcap");
        write_pcap(&p, LINKTYPE_ETHERNET, &[vec![1, 2, 3]]).unwrap();
        let b = std::fs::read(&p).unwrap();
        assert_eq!(&b[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(&b[4..8], &[2, 0, 4, 0], "version 2.4");
        assert_eq!(&b[20..24], &[1, 0, 0, 0], "link type");
        assert_eq!(&b[24..28], &[1, 0, 0, 0], "1 s");
        assert_eq!(&b[32..40], &[3, 0, 0, 0, 3, 0, 0, 0], "lengths");
        assert_eq!(&b[40..], &[1, 2, 3]);
        assert_eq!(b.len(), 43);
    }

    #[test]
    fn the_hardware_only_list_parses() {
        let t = hardware_only_tests();
        assert!(t.len() >= 10, "{t:?}");
        assert!(t.contains(&(
            "src/cmd/verify/mod.rs".to_string(),
            "gpu_equals_cpu_on_generated_frames".to_string()
        )));
        // The header rows are not entries.
        assert!(t.iter().all(|(f, _)| f != "file"));
        // Listed: may skip in CI; not listed: only outside CI.
        let gpu = (
            "src/cmd/verify/mod.rs",
            "gpu_equals_cpu_on_generated_frames",
        );
        assert!(skip_allowed(true, gpu.0, gpu.1, "no GPU").is_ok());
        let e = skip_allowed(true, "x/tests/y.rs", "needs_tshark", "no tshark").unwrap_err();
        assert!(e.contains("needs_tshark") && e.contains("no tshark"), "{e}");
        assert!(skip_allowed(false, "x/tests/y.rs", "needs_tshark", "no tshark").is_ok());
        // The same name in another file is not listed.
        assert!(skip_allowed(true, "src/main.rs", gpu.1, "no GPU").is_err());
    }

    #[test]
    fn max_len_drops_and_counts_only_longer_frames() {
        use crate::stage::CustomStage;
        use crate::verdict::{Action, DropReason, Verdict};
        let s = MaxLen::new(60);
        let m = crate::meta::PacketMeta::default();
        let mut v = Verdict::default();
        s.process(&[0u8; 60], &m, &mut v);
        assert_ne!(v.action, Action::Drop, "60 bytes is not longer than 60");
        s.process(&[0u8; 61], &m, &mut v);
        assert_eq!(
            (v.action, v.reason),
            (Action::Drop, Some(DropReason::StageDrop))
        );
        assert_eq!(
            (s.counter_names(), s.counters()),
            (vec!["too_long".into()], vec![1])
        );
        assert_eq!(
            MaxLen::new(1).with_extra_counter().counter_names(),
            ["too_long", "other"]
        );
        assert_eq!(
            MaxLen::option(&serde_json::json!({ "max_len": 9 })).unwrap(),
            9
        );
        let e = MaxLen::option(&serde_json::json!({ "max_len": "9" })).unwrap_err();
        assert!(e.to_string().contains("`max_len` (a number)"), "{e}");
    }

    #[test]
    fn sizes_match_the_description() {
        let f = multi_proto_frames();
        assert_eq!(f.len(), 23);
        assert_eq!(f[19].len(), 20, "frame 20: 6 bytes of IPv4 header");
        assert_eq!(f[21].len(), 106, "frame 22");
        assert!(f.iter().all(|x| x[6..12] == SRC_MAC));
    }
}
