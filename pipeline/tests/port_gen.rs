//! The `gen` port: frames checked by an independent parser (etherparse), checksums, sizes,
//! IMIX shares, determinism, limits, ClassBench traces, malformed frames, options.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use etherparse::{LinkExtHeader, NetHeaders, PacketHeaders, TransportHeader};
use pipeline::burst::Burst;
use pipeline::internal::port::gen::{
    build_frame, read_trace, FlowOptions, FrameSize, FrameSpec, GenOptions, GenRx, Malformation,
    PortRange, SizeWeight, TraceHeader, PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP,
};
use pipeline::internal::port::pace::Rate;
use pipeline::port::{RxPort, RxStatus};
use proptest::prelude::*;

/// Parses `frame` with etherparse and checks every length and checksum against the spec.
fn check_frame(frame: &[u8], spec: &FrameSpec) {
    let h = PacketHeaders::from_ethernet_slice(frame).expect("etherparse parses it");
    assert_eq!(
        frame.len(),
        (spec.size as usize - 4).max(frame.len().min(200))
    );
    match (spec.vlan, h.link_exts.first()) {
        (None, None) => {}
        (Some(tci), Some(LinkExtHeader::Vlan(v))) => assert_eq!(v.vlan_id.value(), tci & 0xFFF),
        other => panic!("vlan mismatch {other:?}"),
    }
    let l3 = 14 + if spec.vlan.is_some() { 4 } else { 0 };
    let payload = h.payload.slice();
    let tr = h.transport.clone();
    match h.net.expect("an IP header") {
        NetHeaders::Ipv4(ip, _) => {
            assert_eq!(ip.total_len as usize, frame.len() - l3);
            assert_eq!(ip.header_checksum, ip.calc_header_checksum());
            assert_eq!(IpAddr::from(ip.source), spec.src_ip);
            assert_eq!(IpAddr::from(ip.destination), spec.dst_ip);
            assert_eq!(ip.protocol.0, spec.proto);
            match tr {
                Some(TransportHeader::Tcp(t)) => {
                    assert_eq!(
                        (t.source_port, t.destination_port),
                        (spec.src_port, spec.dst_port)
                    );
                    assert_eq!(t.checksum, t.calc_checksum_ipv4(&ip, payload).unwrap());
                }
                Some(TransportHeader::Udp(u)) => {
                    assert_eq!(
                        (u.source_port, u.destination_port),
                        (spec.src_port, spec.dst_port)
                    );
                    assert_eq!(u.length as usize, frame.len() - l3 - 20);
                    assert_eq!(u.checksum, u.calc_checksum_ipv4(&ip, payload).unwrap());
                }
                Some(TransportHeader::Icmpv4(mut i)) => {
                    let c = i.checksum;
                    i.update_checksum(payload);
                    assert_eq!(c, i.checksum);
                }
                None => assert!(![PROTO_TCP, PROTO_UDP, PROTO_ICMP].contains(&spec.proto)),
                other => panic!("unexpected {other:?}"),
            }
        }
        NetHeaders::Ipv6(ip, _) => {
            assert_eq!(ip.payload_length as usize, frame.len() - l3 - 40);
            assert_eq!(IpAddr::from(ip.source), spec.src_ip);
            match tr {
                Some(TransportHeader::Tcp(t)) => {
                    assert_eq!(t.checksum, t.calc_checksum_ipv6(&ip, payload).unwrap());
                }
                Some(TransportHeader::Udp(u)) => {
                    assert_eq!(u.checksum, u.calc_checksum_ipv6(&ip, payload).unwrap());
                }
                Some(TransportHeader::Icmpv6(mut i)) => {
                    let c = i.checksum;
                    i.update_checksum(ip.source, ip.destination, payload)
                        .unwrap();
                    assert_eq!(c, i.checksum);
                }
                None => assert!(![PROTO_TCP, PROTO_UDP, PROTO_ICMP].contains(&spec.proto)),
                other => panic!("unexpected {other:?}"),
            }
        }
        other => panic!("unexpected {other:?}"),
    }
}

fn any_spec() -> impl Strategy<Value = FrameSpec> {
    (
        any::<bool>(),
        any::<[u8; 16]>(),
        any::<[u8; 16]>(),
        any::<(u16, u16, u16)>(),
        prop_oneof![
            Just(PROTO_TCP),
            Just(PROTO_UDP),
            Just(PROTO_ICMP),
            Just(47u8)
        ],
        proptest::option::of(0u16..4096),
        64u16..1600,
    )
        .prop_map(|(v6, s, d, (sp, dp, id), proto, vlan, size)| {
            let (src, dst) = if v6 {
                (IpAddr::from(s), IpAddr::from(d))
            } else {
                (
                    IpAddr::from([s[0], s[1], s[2], s[3]]),
                    IpAddr::from([d[0], d[1], d[2], d[3]]),
                )
            };
            FrameSpec {
                src_ip: src,
                dst_ip: dst,
                src_port: sp,
                dst_port: dp,
                proto,
                tcp_flags: 0x12,
                vlan,
                size,
                ip_id: id,
                malformed: None,
                payload: Default::default(),
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    #[test]
    fn built_frames_are_valid(spec in any_spec()) {
        let f = build_frame(&spec);
        check_frame(&f, &spec);
    }
}

#[test]
fn sizes_grow_to_fit_headers() {
    let v6 = |s: u16| Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, s).into();
    let mut spec = FrameSpec::tcp(v6(1), v6(2), 1, 2, 64);
    spec.vlan = Some(7);
    // 14 + 4 + 40 + 20 = 78 bytes of headers > 60.
    assert_eq!(build_frame(&spec).len(), 78);
    let spec = FrameSpec::tcp(
        Ipv4Addr::new(1, 2, 3, 4).into(),
        Ipv4Addr::new(5, 6, 7, 8).into(),
        1,
        2,
        64,
    );
    let f = build_frame(&spec);
    assert_eq!(f.len(), 60);
    check_frame(&f, &spec);
}

#[test]
fn malformed_frames_have_the_defect() {
    let mut spec = FrameSpec::tcp(
        Ipv4Addr::new(1, 2, 3, 4).into(),
        Ipv4Addr::new(5, 6, 7, 8).into(),
        1000,
        80,
        128,
    );
    spec.malformed = Some(Malformation::BadIhl);
    let f = build_frame(&spec);
    assert_eq!(f.len(), 124);
    assert_eq!(f[14] & 0x0F, 3);
    spec.malformed = Some(Malformation::BadLength);
    let f = build_frame(&spec);
    assert!(usize::from(u16::from_be_bytes([f[16], f[17]])) > f.len() - 14);
    spec.malformed = Some(Malformation::Truncated);
    let f = build_frame(&spec);
    assert_eq!(f.len(), 14 + 20 + 10);
    assert!(PacketHeaders::from_ethernet_slice(&f).is_err());
}

fn collect(rx: &mut GenRx, burst_max: usize) -> Vec<(Vec<u8>, u32)> {
    let mut out = Vec::new();
    let mut b = Burst::with_capacity(64, 64 * 2048);
    let start = Instant::now();
    loop {
        b.clear();
        match rx.rx_burst(&mut b, burst_max).unwrap() {
            RxStatus::Frames(n) => {
                assert_eq!(n, b.len());
                out.extend(b.frames().map(|(d, f)| (f.to_vec(), d.wire_len)));
            }
            RxStatus::Idle => std::thread::yield_now(),
            RxStatus::End => return out,
        }
        assert!(start.elapsed() < Duration::from_secs(20));
    }
}

#[test]
fn same_seed_same_frames_whatever_the_burst_size() {
    let opts = GenOptions {
        count: Some(500),
        size: FrameSize::Imix,
        flows: Some(FlowOptions {
            ipv6_share: 0.3,
            ..FlowOptions::default()
        }),
        vlan: Some(100),
        seed: 7,
        ..GenOptions::default()
    };
    let a = collect(&mut GenRx::new(&opts, 0).unwrap(), 32);
    let b = collect(&mut GenRx::new(&opts, 0).unwrap(), 7);
    assert_eq!(a.len(), 500);
    assert_eq!(a, b);
    let c = collect(
        &mut GenRx::new(&GenOptions { seed: 8, ..opts }, 0).unwrap(),
        32,
    );
    assert_ne!(a, c);
}

#[test]
fn imix_shares_and_distributions() {
    let opts = GenOptions {
        count: Some(12_000),
        size: FrameSize::Imix,
        flows: Some(FlowOptions {
            src: "10.1.0.0/16".into(),
            dst: "172.16.0.1-172.16.0.10".into(),
            src_ports: PortRange { lo: 5000, hi: 5009 },
            dst_ports: PortRange { lo: 53, hi: 53 },
            ipv6_share: 0.25,
            ..FlowOptions::default()
        }),
        ..GenOptions::default()
    };
    let frames = collect(&mut GenRx::new(&opts, 3).unwrap(), 64);
    assert_eq!(frames.len(), 12_000);
    let share = |lens: std::ops::RangeInclusive<u32>| {
        frames.iter().filter(|f| lens.contains(&f.1)).count() as f64 / 12_000.0
    };
    // 7:4:1 of 64/576/1518 (buffers without FCS; 64-byte IPv6 frames grow to fit their
    // headers, up to 74 bytes), within a few percent.
    assert!(
        (share(60..=74) - 7.0 / 12.0).abs() < 0.03,
        "{}",
        share(60..=74)
    );
    assert!((share(572..=572) - 4.0 / 12.0).abs() < 0.03);
    assert!((share(1514..=1514) - 1.0 / 12.0).abs() < 0.02);
    assert_eq!(share(60..=74) + share(572..=572) + share(1514..=1514), 1.0);
    let mut v6 = 0;
    for (f, _) in &frames {
        let h = PacketHeaders::from_ethernet_slice(f).unwrap();
        match h.net.unwrap() {
            NetHeaders::Ipv4(ip, _) => {
                assert_eq!(&ip.source[..2], &[10, 1]);
                assert_eq!(&ip.destination[..3], &[172, 16, 0]);
                assert!((1..=10).contains(&ip.destination[3]));
            }
            NetHeaders::Ipv6(ip, _) => {
                v6 += 1;
                assert_eq!(&ip.source[..6], &[0x20, 0x01, 0x0d, 0xb8, 0, 1]);
            }
            _ => panic!(),
        }
        match h.transport {
            Some(TransportHeader::Tcp(t)) => {
                assert!((5000..=5009).contains(&t.source_port));
                assert_eq!(t.destination_port, 53);
            }
            Some(TransportHeader::Udp(u)) => assert_eq!(u.destination_port, 53),
            Some(TransportHeader::Icmpv4(_)) | Some(TransportHeader::Icmpv6(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    let share = v6 as f64 / 12_000.0;
    assert!((share - 0.25).abs() < 0.03, "{share}");
}

/// Every frame carries its trace line's header: family, addresses, protocol (ICMP becomes
/// ICMPv6 in an IPv6 frame), and the ports of TCP and UDP.
fn assert_frames_follow(frames: &[(Vec<u8>, u32)], trace: &[TraceHeader]) {
    assert_eq!(frames.len(), trace.len());
    for (i, ((f, _), t)) in frames.iter().zip(trace).enumerate() {
        let h = PacketHeaders::from_ethernet_slice(f).unwrap();
        let (src, dst, proto) = match h.net {
            Some(NetHeaders::Ipv4(ip, _)) => (
                IpAddr::from(ip.source),
                IpAddr::from(ip.destination),
                ip.protocol.0,
            ),
            Some(NetHeaders::Ipv6(ip, _)) => (
                IpAddr::from(ip.source),
                IpAddr::from(ip.destination),
                ip.next_header.0,
            ),
            other => panic!("frame {i}: {other:?}"),
        };
        assert_eq!((src, dst), (t.src_ip, t.dst_ip), "frame {i}");
        let want = if t.src_ip.is_ipv6() && t.proto == PROTO_ICMP {
            PROTO_ICMPV6
        } else {
            t.proto
        };
        assert_eq!(proto, want, "frame {i}");
        match h.transport {
            Some(TransportHeader::Tcp(tcp)) => assert_eq!(
                (tcp.source_port, tcp.destination_port),
                (t.src_port, t.dst_port)
            ),
            Some(TransportHeader::Udp(u)) => assert_eq!(
                (u.source_port, u.destination_port),
                (t.src_port, t.dst_port)
            ),
            _ => assert!(![PROTO_TCP, PROTO_UDP].contains(&t.proto), "frame {i}"),
        }
    }
}

#[test]
fn classbench_trace_drives_headers() {
    // A generated ClassBench-format trace: what matters is that its headers drive the frames.
    let (path, _) = pipeline::internal::testdata::classbench_trace();
    let n = pipeline::internal::testdata::TRACE_LINES;
    let trace = read_trace(&path).unwrap();
    assert_eq!(trace.len(), n);
    assert!(trace.iter().all(|t| t.src_ip.is_ipv4()));
    let opts = GenOptions {
        trace: Some(path),
        ..GenOptions::default()
    };
    let mut rx = GenRx::new(&opts, 0).unwrap();
    assert_eq!(rx.expected_frames(), Some(n as u64));
    assert_frames_follow(&collect(&mut rx, 64), &trace);
}

/// The `dpdk-test-acl --ipv6` trace (IPv6 text addresses) as `pktwarp classify` reads it, with
/// IPv4 lines (decimal and dotted) mixed in: the family is decided per line.
#[test]
fn ipv6_trace_drives_headers_line_by_line() {
    let g = flow_rules::acl::gen6::generate(&flow_rules::acl::gen6::GenSpec {
        profile: flow_rules::acl::gen6::Profile::Fw,
        rules: 40,
        headers: 400,
        miss_frac: 0.2,
        seed: 5,
    });
    let text = format!(
        "{}# IPv4 lines in the same file\n3232235777\t167772162\t1024\t80\t6\t0\t0\n\
         10.0.0.1 10.0.0.2 53 53 17\n2001:db8::1 2001:db8::2 0 0 1 0 7\n",
        g.trace
    );
    let dir = std::env::temp_dir().join(format!("pktwarp-gen6-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ipv6_trace");
    std::fs::write(&path, &text).unwrap();
    let trace = read_trace(&path).unwrap();
    assert_eq!(trace.len(), 403);
    // Each line as classify reads it: the same keys, one reader.
    let keys = flow_rules::acl::classbench::parse_trace(&path, &text).unwrap();
    assert_eq!(trace.len(), keys.len());
    let v6 = trace.iter().filter(|t| t.src_ip.is_ipv6()).count();
    assert_eq!(v6, 401);
    assert_eq!(
        trace[400].src_ip,
        IpAddr::from(Ipv4Addr::new(192, 168, 1, 1))
    );
    assert_eq!(trace[401].dst_ip, IpAddr::from(Ipv4Addr::new(10, 0, 0, 2)));
    assert_eq!(trace[402].filter_idx, Some(7));
    let opts = GenOptions {
        trace: Some(path),
        ..GenOptions::default()
    };
    let mut rx = GenRx::new(&opts, 0).unwrap();
    assert_eq!(rx.expected_frames(), Some(403));
    assert_frames_follow(&collect(&mut rx, 64), &trace);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A line that is neither family (or mixes them) is an error naming the file, line and field.
#[test]
fn trace_line_of_no_family_names_file_line_and_field() {
    let dir = std::env::temp_dir().join(format!("pktwarp-gen6-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad6_trace");
    let ok = "2001:db8::1\t2001:db8::2\t1\t2\t6\t0\t0\n";
    for (line, field) in [
        ("2001:db8::1\t2001:db8::zz\t1\t2\t6\t0\t0", "dst"),
        ("2001:db8:::1\t2001:db8::2\t1\t2\t6\t0\t0", "src"),
        ("2001:db8::1\t10.0.0.1\t1\t2\t6\t0\t0", "dst"),
        ("2001:db8::1\t2001:db8::2\t70000\t2\t6\t0\t0", "src_port"),
        ("2001:db8::1\t2001:db8::2\t1\t2\tx\t0\t0", "proto"),
        ("2001:db8::1\t2001:db8::2\t1", "dst_port"),
    ] {
        std::fs::write(&bad, format!("{ok}{ok}{line}\n")).unwrap();
        let e = read_trace(&bad).unwrap_err().to_string();
        assert!(
            e.contains("bad6_trace") && e.contains("line 3") && e.contains(&format!("`{field}`")),
            "{line}: {e}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gz_trace_and_trace_errors() {
    let (plain, gz) = pipeline::internal::testdata::classbench_trace();
    let gz = read_trace(gz).unwrap();
    assert_eq!(gz.len(), pipeline::internal::testdata::TRACE_LINES);
    assert_eq!(
        gz,
        read_trace(plain).unwrap(),
        "gzip and plain read the same"
    );
    let dir = std::env::temp_dir().join(format!("pktwarp-gen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad_trace");
    std::fs::write(&bad, "1 2 3 4 6 0 0\n1 2 3 99999 6 0 0\n").unwrap();
    let e = read_trace(&bad).unwrap_err().to_string();
    assert!(
        e.contains("bad_trace") && e.contains("line 2, column 7") && e.contains("`dst_port`"),
        "{e}"
    );
    std::fs::write(&bad, "1 2 3\n").unwrap();
    let e = read_trace(&bad).unwrap_err().to_string();
    assert!(
        e.contains("line 1") && e.contains("`dst_port`") && e.contains("missing"),
        "{e}"
    );
}

#[test]
fn malformed_ratio_is_honoured() {
    let opts = GenOptions {
        count: Some(4000),
        malformed_ratio: 0.25,
        ..GenOptions::default()
    };
    let frames = collect(&mut GenRx::new(&opts, 0).unwrap(), 64);
    let bad = frames
        .iter()
        .filter(|(f, wire)| {
            f.len() as u32 != *wire || f[14] != 0x45 || u16::from_be_bytes([f[16], f[17]]) != 46
        })
        .count() as f64
        / 4000.0;
    assert!((bad - 0.25).abs() < 0.03, "{bad}");
}

#[test]
fn rate_and_duration_limits() {
    let opts = GenOptions {
        rate: Rate::Pps(1000.0),
        count: Some(60),
        ..GenOptions::default()
    };
    let start = Instant::now();
    assert_eq!(collect(&mut GenRx::new(&opts, 0).unwrap(), 32).len(), 60);
    // Frame 59 goes at 59 ms.
    assert!(start.elapsed() >= Duration::from_millis(58));
    let opts = GenOptions {
        rate: Rate::Pps(2000.0),
        duration_s: Some(0.05),
        ..GenOptions::default()
    };
    let start = Instant::now();
    let n = collect(&mut GenRx::new(&opts, 0).unwrap(), 32).len();
    assert!(start.elapsed() >= Duration::from_millis(50));
    assert!((80..=101).contains(&n), "{n}");
}

#[test]
fn option_errors_name_the_option() {
    let bad = |o: GenOptions, what: &str| {
        let e = GenRx::new(&o, 0).unwrap_err().to_string();
        assert!(e.contains(what), "{e}");
    };
    bad(
        GenOptions {
            rate: Rate::Capture,
            ..GenOptions::default()
        },
        "gen.rate",
    );
    bad(
        GenOptions {
            malformed_ratio: 2.0,
            ..GenOptions::default()
        },
        "gen.malformed_ratio",
    );
    bad(
        GenOptions {
            vlan: Some(5000),
            ..GenOptions::default()
        },
        "gen.vlan",
    );
    bad(
        GenOptions {
            size: FrameSize::Fixed(20),
            ..GenOptions::default()
        },
        "gen.size",
    );
    bad(
        GenOptions {
            size: FrameSize::Custom(vec![SizeWeight {
                size: 64,
                weight: 0,
            }]),
            ..GenOptions::default()
        },
        "gen.size",
    );
    let flows = |f: FlowOptions| GenOptions {
        flows: Some(f),
        ..GenOptions::default()
    };
    bad(
        flows(FlowOptions {
            src: "10.0.0.0/33".into(),
            ..FlowOptions::default()
        }),
        "gen.flows.src",
    );
    bad(
        flows(FlowOptions {
            dst6: "1.2.3.4".into(),
            ..FlowOptions::default()
        }),
        "gen.flows.dst6",
    );
    bad(
        flows(FlowOptions {
            ipv6_share: -1.0,
            ..FlowOptions::default()
        }),
        "ipv6_share",
    );
    bad(
        GenOptions {
            trace: Some("x".into()),
            flows: Some(FlowOptions::default()),
            ..GenOptions::default()
        },
        "exclusive",
    );
}

#[test]
fn options_from_yaml() {
    let o: GenOptions = serde_saphyr::from_str(
        "flows:\n  src: 10.0.0.0/8\n  dst_ports: 1-1023\n  src_ports: 80\n  protocols: {tcp: 1, udp: 1}\n  flow_count: 1000\nsize: imix\ncount: 100\nrate: {pps: 1e6}\nseed: 3\n",
    )
    .unwrap();
    assert_eq!(o.size, FrameSize::Imix);
    let f = o.flows.unwrap();
    assert_eq!(f.dst_ports, PortRange { lo: 1, hi: 1023 });
    assert_eq!(f.src_ports, PortRange { lo: 80, hi: 80 });
    assert_eq!((f.protocols.tcp, f.protocols.icmp), (1.0, 0.0));
    let o: GenOptions =
        serde_saphyr::from_str("size:\n  - {size: 64, weight: 3}\n  - {size: 1518, weight: 1}\n")
            .unwrap();
    assert_eq!(
        o.size,
        FrameSize::Custom(vec![
            SizeWeight {
                size: 64,
                weight: 3
            },
            SizeWeight {
                size: 1518,
                weight: 1
            }
        ])
    );
    let o: GenOptions = serde_saphyr::from_str("size: 128\n").unwrap();
    assert_eq!(o.size, FrameSize::Fixed(128));
    assert!(serde_saphyr::from_str::<GenOptions>("sizes: 128\n").is_err());
    assert!(serde_saphyr::from_str::<GenOptions>("flows: {srcs: 1.2.3.4}\n").is_err());
}

/// Each queue's frames of a pooled generator split by queue: by copy (`rx_queue`) and by
/// reference (`rx_refs`, read from the frame store): (descriptor, frame bytes) per frame.
fn split_frames(
    opts: &GenOptions,
    by_ref: bool,
) -> Vec<Vec<(pipeline::burst::FrameDesc, Vec<u8>)>> {
    use pipeline::port::QueueTally;
    let nq = 3;
    let st = std::sync::Arc::new(pipeline::internal::steer::Steering::rss_only(nq as u16).unwrap());
    let mut rx = GenRx::new(opts, 1).unwrap();
    let mut out = Vec::new();
    for mut q in rx.split_by_queue(&st, nq).unwrap() {
        let mut frames = Vec::new();
        let mut tally = QueueTally::default();
        let store = q
            .frame_store()
            .expect("a pooled generator has a frame store");
        loop {
            let (status, got) = if by_ref {
                let mut refs = Vec::new();
                let s = q.rx_refs(&mut refs, 16, &mut tally).unwrap();
                let got: Vec<_> = refs
                    .iter()
                    .map(|d| {
                        let f = store[d.offset as usize..][..d.len as usize].to_vec();
                        (pipeline::burst::FrameDesc { offset: 0, ..*d }, f)
                    })
                    .collect();
                (s, got)
            } else {
                let mut b = Burst::default();
                let s = q.rx_queue(&mut b, 16, 0, &mut tally).unwrap();
                let got: Vec<_> = b
                    .frames()
                    .map(|(d, f)| (pipeline::burst::FrameDesc { offset: 0, ..*d }, f.to_vec()))
                    .collect();
                (s, got)
            };
            frames.extend(got);
            if status == RxStatus::End {
                break;
            }
        }
        assert_eq!(
            tally.rx_frames,
            frames.len() as u64,
            "no steering drops here"
        );
        out.push(frames);
    }
    out
}

#[test]
fn pooled_frames_by_reference_are_the_copied_frames_less_their_number() {
    let opts = GenOptions {
        count: Some(3000),
        size: FrameSize::Imix,
        flows: Some(FlowOptions {
            ipv6_share: 0.3,
            flow_count: Some(50),
            ..FlowOptions::default()
        }),
        seed: 4,
        ..GenOptions::default()
    };
    let (copied, by_ref) = (split_frames(&opts, false), split_frames(&opts, true));
    assert_eq!(copied.iter().map(Vec::len).sum::<usize>(), 3000);
    let mut numbered = 0;
    for (cq, rq) in copied.iter().zip(&by_ref) {
        assert_eq!(cq.len(), rq.len());
        for ((cd, cf), (rd, rf)) in cq.iter().zip(rq) {
            // Same descriptor (length, queue, mark, port; the times are the pacer's).
            let strip =
                |d: &pipeline::burst::FrameDesc| (d.len, d.wire_len, d.port, d.queue, d.mark);
            assert_eq!(strip(cd), strip(rd));
            // Same bytes but the per-frame number: the IPv4 identification and header
            // checksum (bytes 18..20, 24..26), or the IPv6 flow label's low 16 bits (16..18).
            let v6 = cf[12..14] == [0x86, 0xdd];
            let number: &[(usize, usize)] = if v6 {
                &[(16, 18)]
            } else {
                &[(18, 20), (24, 26)]
            };
            let mut c = cf.clone();
            let mut r = rf.clone();
            for &(a, b) in number {
                numbered += usize::from(c[a..b] != r[a..b]);
                c[a..b].fill(0);
                r[a..b].fill(0);
            }
            assert_eq!(c, r);
            assert!(rf[if v6 { 16..18 } else { 18..20 }].iter().all(|&b| b == 0));
        }
    }
    // The copies carry their number (not all 0: the test sees the field).
    assert!(numbered > 2000, "{numbered}");
    // Malformed frames are built per frame: no frame store.
    let mut rx = GenRx::new(
        &GenOptions {
            malformed_ratio: 0.1,
            ..opts
        },
        1,
    )
    .unwrap();
    let st = std::sync::Arc::new(pipeline::internal::steer::Steering::rss_only(2).unwrap());
    let qs = rx.split_by_queue(&st, 2).unwrap();
    let e = qs[0].frame_store().unwrap_err();
    assert!(e.contains("malformed_ratio"), "{e}");
}
