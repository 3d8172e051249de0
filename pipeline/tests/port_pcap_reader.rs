//! CaptureReader against the shared capture corpus (link types and frame counts from
//! INDEX.tsv), against hand-built pcap / pcapng files covering both byte orders, resolutions,
//! several interfaces and skipped blocks, and against random bytes (never a panic).

use std::io::Cursor;
use std::path::PathBuf;

use pipeline::internal::port::pcap::{link_type_name, CaptureFormat, CaptureReader};
use pipeline::port::PortError;
use proptest::prelude::*;

/// The corpus folder; None (the test does not run) without it outside CI (`require_corpus`).
fn data_dir() -> Option<PathBuf> {
    flow_rules::input::require_corpus("pcaps/INDEX.tsv")?;
    Some(flow_rules::input::data_dir())
}

/// Reads every frame; returns (frames, link types seen, error if the file ended in one).
fn read_all(r: &mut CaptureReader) -> (u64, Vec<u16>, Option<PortError>) {
    let mut n = 0;
    let mut types = Vec::new();
    loop {
        match r.next_frame() {
            Ok(Some(f)) => {
                n += 1;
                if !types.contains(&f.link_type) {
                    types.push(f.link_type);
                }
            }
            Ok(None) => return (n, types, None),
            Err(e) => return (n, types, Some(e)),
        }
    }
}

#[test]
fn corpus_link_types_and_counts_match_index() {
    let Some(dir) = data_dir().map(|d| d.join("pcaps")) else {
        return;
    };
    let index = std::fs::read_to_string(dir.join("INDEX.tsv")).expect("read INDEX.tsv");
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for line in index.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        let (file, lt) = (cols[0], cols.get(2).copied().unwrap_or(""));
        let path = dir.join(file);
        let mut r = match CaptureReader::open(&path) {
            Ok(r) => r,
            Err(e) => {
                mismatches.push(format!("{file}: open failed: {e}"));
                continue;
            }
        };
        let (n, types, err) = read_all(&mut r);
        if let Some((name, count)) = lt.split_once(' ') {
            let count: u64 = count.parse().expect("count column");
            let names: Vec<_> = types.iter().map(|t| link_type_name(*t)).collect();
            if n != count || names.iter().any(|x| *x != Some(name)) {
                mismatches.push(format!(
                    "{file}: index {name} {count}, read {names:?} {n} (error: {err:?})"
                ));
            }
            if n == count && err.is_some() {
                mismatches.push(format!("{file}: all frames read but then {err:?}"));
            }
        }
        checked += 1;
    }
    assert!(checked > 800, "only {checked} files checked");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn non_ethernet_is_a_clear_error() {
    // Generated files (below: the hand-built pcap and pcapng writers), named in the errors.
    let dir = std::env::temp_dir().join(format!("pktwarp-reader-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("LINKTYPE_IPV4.pcap");
    let ip4 = [
        0x45u8, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    std::fs::write(&path, pcap_file(false, false, 228, &[(1, 0, &ip4, 20)])).unwrap();
    let e = CaptureReader::open_ethernet(&path).expect_err("rawip4 must be refused");
    let msg = e.to_string();
    assert!(msg.contains("LINKTYPE_IPV4.pcap"), "{msg}");
    assert!(msg.contains("228 (rawip4)"), "{msg}");
    // pcapng: the link type lives in the interface block.
    let mut w = W {
        be: false,
        out: Vec::new(),
    };
    shb(&mut w);
    let b = idb(&w, 113, 0, None);
    w.block(1, &b);
    let b = epb(&w, 0, 1, b"a cooked frame", 14);
    w.block(6, &b);
    let path = dir.join("sll.pcapng");
    std::fs::write(&path, &w.out).unwrap();
    let mut r = CaptureReader::open_ethernet(&path).expect("header is fine");
    let e = r
        .next_frame()
        .expect_err("linux-sll interface must be refused");
    assert!(e.to_string().contains("113 (linux-sll)"), "{e}");
    // Ethernet files pass.
    let mut r =
        CaptureReader::open_ethernet(pipeline::internal::testdata::multi_proto_pcap()).unwrap();
    assert_eq!(read_all(&mut r).0, 23);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- hand-built files ------------------------------------------------------------------------

struct W {
    be: bool,
    out: Vec<u8>,
}

impl W {
    fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    fn block(&mut self, btype: u32, body: &[u8]) {
        let total = 12 + body.len().div_ceil(4) * 4;
        self.u32(btype);
        self.u32(total as u32);
        self.out.extend_from_slice(body);
        self.out
            .resize(self.out.len() + (total - 12 - body.len()), 0);
        self.u32(total as u32);
    }
    fn sub(&self) -> W {
        W {
            be: self.be,
            out: Vec::new(),
        }
    }
}

fn pcap_file(be: bool, nanos: bool, link: u32, frames: &[(u32, u32, &[u8], u32)]) -> Vec<u8> {
    let mut w = W {
        be,
        out: Vec::new(),
    };
    w.u32(if nanos { 0xA1B2_3C4D } else { 0xA1B2_C3D4 });
    w.u16(2);
    w.u16(4);
    w.u32(0);
    w.u32(0);
    w.u32(65535);
    w.u32(link);
    for (sec, frac, data, orig) in frames {
        w.u32(*sec);
        w.u32(*frac);
        w.u32(data.len() as u32);
        w.u32(*orig);
        w.out.extend_from_slice(data);
    }
    w.out
}

fn reader(bytes: Vec<u8>) -> Result<CaptureReader, PortError> {
    CaptureReader::from_reader("mem.pcap", Cursor::new(bytes))
}

#[test]
fn pcap_both_byte_orders_and_resolutions() {
    for be in [false, true] {
        for nanos in [false, true] {
            let bytes = pcap_file(be, nanos, 1, &[(10, 20, b"abcd", 60), (11, 0, b"", 0)]);
            let mut r = reader(bytes).unwrap();
            assert_eq!(r.format(), CaptureFormat::Pcap { nanos });
            let f = r.next_frame().unwrap().unwrap();
            let frac = if nanos { 20 } else { 20_000 };
            assert_eq!(f.timestamp_ns, 10_000_000_000 + frac);
            assert_eq!((f.data, f.orig_len, f.link_type), (&b"abcd"[..], 60, 1));
            let f = r.next_frame().unwrap().unwrap();
            assert_eq!((f.timestamp_ns, f.data.len()), (11_000_000_000, 0));
            assert!(r.next_frame().unwrap().is_none());
        }
    }
}

#[test]
fn pcap_fcs_bits_in_link_type_are_ignored() {
    let bytes = pcap_file(false, false, 0x3000_0001, &[(1, 0, b"x", 1)]);
    let mut r = reader(bytes).unwrap();
    r.require_ethernet(true).unwrap();
    assert_eq!(r.next_frame().unwrap().unwrap().link_type, 1);
}

#[test]
fn truncated_pcap_names_offset() {
    let mut bytes = pcap_file(
        false,
        false,
        1,
        &[(1, 0, b"abcdefgh", 8), (2, 0, b"ijkl", 4)],
    );
    bytes.truncate(bytes.len() - 2);
    let mut r = reader(bytes.clone()).unwrap();
    assert!(r.next_frame().unwrap().is_some());
    let e = r.next_frame().unwrap_err().to_string();
    assert!(
        e.contains("mem.pcap") && e.contains("offset 48") && e.contains("truncated"),
        "{e}"
    );
    // Header truncated.
    let e = reader(bytes[..10].to_vec()).unwrap_err().to_string();
    assert!(e.contains("offset 0") && e.contains("truncated"), "{e}");
    let e = reader(b"hello world, this is not a capture".to_vec()).unwrap_err();
    assert!(e.to_string().contains("not a pcap"), "{e}");
}

fn idb(w: &W, link: u16, snaplen: u32, tsresol: Option<u8>) -> Vec<u8> {
    let mut b = w.sub();
    b.u16(link);
    b.u16(0);
    b.u32(snaplen);
    if let Some(r) = tsresol {
        b.u16(2); // if_name, skipped
        b.u16(3);
        b.out.extend_from_slice(b"eth\0");
        b.u16(9);
        b.u16(1);
        b.out.extend_from_slice(&[r, 0, 0, 0]);
        b.u16(0);
        b.u16(0);
    }
    b.out
}

fn epb(w: &W, iface: u32, ts: u64, data: &[u8], orig: u32) -> Vec<u8> {
    let mut b = w.sub();
    b.u32(iface);
    b.u32((ts >> 32) as u32);
    b.u32(ts as u32);
    b.u32(data.len() as u32);
    b.u32(orig);
    b.out.extend_from_slice(data);
    b.out.resize(b.out.len().div_ceil(4) * 4, 0);
    b.out
}

fn shb(w: &mut W) {
    let mut b = w.sub();
    b.u32(0x1A2B_3C4D);
    b.u16(1);
    b.u16(0);
    b.out.extend_from_slice(&[0xFF; 8]); // section length: unknown
    let body = b.out;
    w.block(0x0A0D_0D0A, &body);
}

#[test]
fn pcapng_interfaces_resolutions_and_skipped_blocks() {
    for be in [false, true] {
        let mut w = W {
            be,
            out: Vec::new(),
        };
        shb(&mut w);
        let b = idb(&w, 1, 0, None); // microseconds
        w.block(1, &b);
        let b = idb(&w, 113, 4, Some(9)); // nanoseconds, linux-sll, snaplen 4
        w.block(1, &b);
        let b = idb(&w, 1, 0, Some(0x80 | 10)); // 2^-10 s
        w.block(1, &b);
        w.block(0x0BAD_0001, b"unknown block content"); // skipped
        let b = epb(&w, 0, 1_500_000, b"frame0", 64);
        w.block(6, &b);
        let b = epb(&w, 1, 7, b"frame1!", 7);
        w.block(6, &b);
        let b = epb(&w, 2, 1024 * 3, b"f2", 2);
        w.block(6, &b);
        w.block(5, &[0u8; 20]); // interface statistics: skipped
        let mut s = w.sub();
        s.u32(9);
        s.out.extend_from_slice(b"simple pk");
        let body = s.out;
        w.block(3, &body);
        // A second section restarts the interface list.
        shb(&mut w);
        let b = idb(&w, 1, 0, Some(3));
        w.block(1, &b);
        let b = epb(&w, 0, 5, b"s2", 2);
        w.block(6, &b);

        let mut r = reader(w.out).unwrap();
        assert_eq!(r.format(), CaptureFormat::Pcapng);
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!(
            (f.timestamp_ns, f.data, f.orig_len, f.link_type, f.interface),
            (1_500_000_000, &b"frame0"[..], 64, 1, 0)
        );
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!(
            (f.timestamp_ns, f.data, f.link_type, f.interface),
            (7, &b"frame1!"[..], 113, 1)
        );
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!((f.timestamp_ns, f.interface), (3_000_000_000, 2));
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!((f.data, f.orig_len), (&b"simple pk"[..], 9));
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!((f.timestamp_ns, f.data), (5_000_000, &b"s2"[..]));
        assert!(r.next_frame().unwrap().is_none());
    }
}

#[test]
fn pcapng_errors() {
    let mut w = W {
        be: false,
        out: Vec::new(),
    };
    shb(&mut w);
    let b = epb(&w, 3, 0, b"x", 1);
    w.block(6, &b);
    let mut r = reader(w.out.clone()).unwrap();
    let e = r.next_frame().unwrap_err().to_string();
    assert!(e.contains("interface 3") && e.contains("offset 36"), "{e}");
    // Bad trailing length.
    let mut w2 = W {
        be: false,
        out: Vec::new(),
    };
    shb(&mut w2);
    let b = idb(&w2, 1, 0, None);
    w2.block(1, &b);
    let n = w2.out.len();
    w2.out[n - 1] = 0x7F;
    let e = reader(w2.out)
        .unwrap()
        .next_frame()
        .unwrap_err()
        .to_string();
    assert!(e.contains("trailing length"), "{e}");
    // Truncated block.
    let mut bytes = w.out;
    bytes.truncate(bytes.len() - 3);
    let e = reader(bytes).unwrap().next_frame().unwrap_err().to_string();
    assert!(e.contains("truncated") && e.contains("offset 28"), "{e}");
}

fn drain(bytes: Vec<u8>) {
    if let Ok(mut r) = reader(bytes) {
        for _ in 0..10_000 {
            match r.next_frame() {
                Ok(Some(f)) => {
                    assert!(f.data.len() <= pipeline::internal::port::pcap::MAX_RECORD_LEN as usize)
                }
                _ => break,
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        drain(bytes);
    }

    #[test]
    fn mutated_pcapng_never_panics(
        flips in proptest::collection::vec((0usize..400, any::<u8>()), 1..8),
        cut in 0usize..400,
        be in any::<bool>(),
    ) {
        let mut w = W { be, out: Vec::new() };
        shb(&mut w);
        let b = idb(&w, 1, 0, Some(0x85));
        w.block(1, &b);
        let b = epb(&w, 0, u64::MAX, b"some frame bytes", 100);
        w.block(6, &b);
        let mut s = w.sub();
        s.u32(3);
        s.out.extend_from_slice(b"abc");
        let body = s.out;
        w.block(3, &body);
        let mut bytes = w.out;
        for (at, v) in flips {
            if let Some(b) = bytes.get_mut(at) { *b = v; }
        }
        bytes.truncate(cut.max(4));
        drain(bytes);
    }

    #[test]
    fn mutated_pcap_never_panics(
        flips in proptest::collection::vec((0usize..120, any::<u8>()), 1..8),
        be in any::<bool>(),
    ) {
        let mut bytes = pcap_file(be, true, 1, &[(u32::MAX, u32::MAX, b"abcdefgh", 8), (2, 0, b"ijkl", 4)]);
        for (at, v) in flips {
            if let Some(b) = bytes.get_mut(at) { *b = v; }
        }
        drain(bytes);
    }
}

/// First frames of a few corpus files as `tshark -T fields -e frame.time_epoch -e frame.cap_len
/// -e frame.len` prints them (pcapng with ns and us resolution, big-endian pcap, ns pcap).
#[test]
fn timestamps_and_lengths_match_tshark() {
    type Case<'a> = (&'a str, &'a [(u64, usize, u32)]);
    let cases: &[Case] = &[
        (
            "vsock-1.pcapng",
            &[
                (1_499_949_071_261_679_299, 76, 76),
                (1_499_949_071_261_740_149, 76, 76),
                (1_499_949_072_552_718_608, 82, 82),
            ],
        ),
        (
            "OSPFv2_Capture_FINAL.pcapng",
            &[
                (1_518_622_219_014_914_000, 142, 142),
                (1_518_622_222_228_510_000, 142, 142),
                (1_518_622_222_712_123_000, 122, 122),
            ],
        ),
        (
            "pptp.pcap",
            &[
                (954_147_395_148_077_000, 62, 62),
                (954_147_395_148_207_000, 62, 62),
            ],
        ),
        (
            "tcp-handshake-nano.pcap",
            &[
                (1_418_145_369_924_505_488, 76, 76),
                (1_418_145_370_052_027_262, 76, 76),
            ],
        ),
    ];
    let Some(dir) = data_dir().map(|d| d.join("pcaps/tcpdump")) else {
        return;
    };
    for (file, frames) in cases {
        let mut r = CaptureReader::open(dir.join(file)).unwrap();
        for (i, want) in frames.iter().enumerate() {
            let f = r.next_frame().unwrap().unwrap();
            assert_eq!(
                (f.timestamp_ns, f.data.len(), f.orig_len),
                *want,
                "{file} frame {i}"
            );
        }
    }
}
