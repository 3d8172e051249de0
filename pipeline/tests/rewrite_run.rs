//! The rewrite stages end to end through the daemon (CPU executor): the shipped l2fwd and
//! l3fwd configs (smaller counts, outputs in a temp folder) and hand-made captures, with the
//! written pcaps checked by tshark (addresses, TTL / hop limit, every IP / TCP / UDP checksum
//! valid) and the summary's counts (received == sent + drops by reason); bad route files and
//! port names are config errors naming the file, line and key.

mod tshark_common;
use pipeline::internal::testdata::capture_frames;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use tshark_common::tshark;

use pipeline::config;
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::port::gen::{build_frame, FrameSpec};
use pipeline::internal::port::pcap::{CaptureWriter, WriteFormat};
use pipeline::internal::stage::parse::parse_frame;
use pipeline::wire::ipv4;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-rw-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn configs() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs"))
}

fn run_config(path: &Path) -> daemon::Summary {
    let cfg = config::load(path).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap_or_else(|e| panic!("{e:#}"));
    let ports = daemon::open_ports(&p.cfg).unwrap();
    let shared = CpuShared::new(&p.cpu_spec());
    daemon::run_cpu(&p, &shared, ports)
}

/// A shipped config with its counts, queue count and output paths replaced, written into
/// `dir` (route files named relative to the shipped folder made absolute).
fn shipped(name: &str, dir: &Path, edits: &[(&str, String)]) -> PathBuf {
    let mut text = std::fs::read_to_string(configs().join(name)).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{name} has no `{from}`");
        text = text.replace(from, to);
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const CHECKSUMS: [&str; 3] = [
    "ip.checksum.status",
    "tcp.checksum.status",
    "udp.checksum.status",
];

/// No checksum tshark verified is bad (status 0; 1 good, 2 unverified, empty: no header).
fn assert_checksums_valid(rows: &[Vec<String>], from: usize, file: &Path) {
    for (i, r) in rows.iter().enumerate() {
        for (k, name) in CHECKSUMS.iter().enumerate() {
            assert_ne!(
                r[from + k],
                "0",
                "{}: frame {} has a bad {name}",
                file.display(),
                i + 1
            );
        }
    }
}

fn drop_count(s: &daemon::Summary, reason: &str) -> u64 {
    s.drops
        .iter()
        .find(|(r, _)| r == reason)
        .map_or(0, |(_, n)| *n)
}

#[test]
fn shipped_l2fwd_swaps_the_two_macs_and_nothing_else() {
    let dir = tmpdir("l2fwd");
    let out = dir.join("out.pcap");
    let edits = |tx: &Path| {
        vec![
            ("count: 200000", "count: 3000".to_string()),
            ("count: 2\n", "count: 1\n".to_string()),
            ("/tmp/pktwarp-l2fwd.pcap", tx.display().to_string()),
        ]
    };
    let s = run_config(&shipped("l2fwd.yaml", &dir, &edits(&out)));
    assert_eq!((s.rx_frames, s.tx_frames), (3000, 3000));
    assert!(s.drops.iter().all(|(_, n)| *n == 0), "{:?}", s.drops);
    // The same generator through a plain copy: the frames before the swap.
    let plain = dir.join("plain.yaml");
    let text = std::fs::read_to_string(dir.join("l2fwd.yaml"))
        .unwrap()
        .replace(
            "  - l2fwd: { mac: swap }    # or { src: MAC, dst: MAC }\n",
            "",
        )
        .replace(
            &out.display().to_string(),
            &dir.join("in.pcap").display().to_string(),
        );
    std::fs::write(&plain, text).unwrap();
    run_config(&plain);
    let (before, after) = (
        capture_frames(&dir.join("in.pcap")).unwrap(),
        capture_frames(&out).unwrap(),
    );
    assert_eq!(before.len(), 3000);
    assert_eq!(after.len(), before.len());
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        assert_eq!(a.len(), b.len(), "frame {i}");
        assert_eq!(&a[..6], &b[6..12], "frame {i}: destination = old source");
        assert_eq!(&a[6..12], &b[..6], "frame {i}: source = old destination");
        assert_eq!(&a[12..], &b[12..], "frame {i}: nothing else changes");
    }
    // tshark reads the swap the same way, and every checksum is still valid.
    let mut fields = vec!["eth.src", "eth.dst"];
    fields.extend(CHECKSUMS);
    let (tb, ta) = (tshark(&dir.join("in.pcap"), &fields), tshark(&out, &fields));
    assert_eq!(ta.len(), 3000);
    for (b, a) in tb.iter().zip(&ta) {
        assert_eq!((&a[0], &a[1]), (&b[1], &b[0]));
    }
    assert_checksums_valid(&ta, 2, &out);
    std::fs::remove_dir_all(&dir).ok();
}

/// The routes of configs/rules/l3fwd.routes.yaml by linear longest-prefix search (the reference):
/// (next-hop MAC, port name).
fn l3fwd_route(dst: IpAddr) -> Option<(&'static str, &'static str)> {
    let routes: [(&str, u8, &str, &str); 4] = [
        ("192.168.0.0", 17, "02:00:00:00:01:01", "port0"),
        ("192.168.128.0", 18, "02:00:00:00:01:02", "port1"),
        ("192.168.100.0", 24, "02:00:00:00:01:03", "port1"),
        ("2001:db8:2::", 48, "02:00:00:00:02:01", "port1"),
    ];
    let bits = |a: IpAddr| -> (u128, u32) {
        match a {
            IpAddr::V4(v) => (u128::from(u32::from(v)) << 96, 4),
            IpAddr::V6(v) => (u128::from(v), 6),
        }
    };
    let (d, dv) = bits(dst);
    routes
        .iter()
        .filter(|(p, len, _, _)| {
            let (a, v) = bits(p.parse().unwrap());
            let mask = if *len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(*len))
            };
            v == dv && (a & mask) == (d & mask)
        })
        .max_by_key(|r| r.1)
        .map(|r| (r.2, r.3))
}

#[test]
fn shipped_l3fwd_routes_decrements_and_accounts_for_every_frame() {
    let dir = tmpdir("l3fwd");
    let (p0, p1) = (dir.join("port0.pcap"), dir.join("port1.pcap"));
    let routes = configs().join("rules/l3fwd.routes.yaml");
    let path = shipped(
        "l3fwd.yaml",
        &dir,
        &[
            ("count: 200000", "count: 4000".into()),
            ("/tmp/pktwarp-l3fwd-port0.pcap", p0.display().to_string()),
            ("/tmp/pktwarp-l3fwd-port1.pcap", p1.display().to_string()),
            (
                "routes: rules/l3fwd.routes.yaml",
                format!("routes: {}", routes.display()),
            ),
        ],
    );
    let s = run_config(&path);
    assert_eq!(s.rx_frames, 4000);
    let drops: u64 = s.drops.iter().map(|(_, n)| n).sum();
    assert_eq!(s.rx_frames, s.tx_frames + drops, "{:?}", s.drops);
    let (no_route, parse) = (drop_count(&s, "no_route"), drop_count(&s, "parse_error"));
    assert!(no_route > 500 && parse > 0, "{:?}", s.drops);
    assert_eq!(
        drops,
        no_route + parse,
        "the generator's TTL is 64: {:?}",
        s.drops
    );
    let mut fields = vec![
        "eth.src",
        "eth.dst",
        "ip.dst",
        "ipv6.dst",
        "ip.ttl",
        "ipv6.hlim",
    ];
    fields.extend(CHECKSUMS);
    let mut sent = 0;
    for (file, name) in [(&p0, "port0"), (&p1, "port1")] {
        let rows = tshark(file, &fields);
        assert!(!rows.is_empty(), "{name} got frames");
        let tally = s.outputs.iter().find(|t| t.name == name).unwrap();
        assert_eq!(tally.frames, rows.len() as u64);
        assert_eq!(tally.failed, 0);
        sent += rows.len() as u64;
        for (i, r) in rows.iter().enumerate() {
            let v6 = r[2].is_empty();
            let dst: IpAddr = r[if v6 { 3 } else { 2 }].parse().unwrap();
            let (mac, port) = l3fwd_route(dst).unwrap_or_else(|| panic!("{dst} has no route"));
            assert_eq!(
                (r[1].as_str(), port),
                (mac, name),
                "{name} frame {i}: {dst}"
            );
            assert_eq!(r[0], "02:00:00:00:00:fe", "l2fwd src after route");
            assert_eq!(
                r[if v6 { 5 } else { 4 }],
                "63",
                "{name} frame {i}: TTL 64 - 1"
            );
        }
        assert_checksums_valid(&rows, 6, file);
    }
    assert_eq!(sent, s.tx_frames);
    std::fs::remove_dir_all(&dir).ok();
}

/// Frames with every mix of route / no route / TTL, as a capture.
fn crafted(path: &Path) -> Vec<(Vec<u8>, IpAddr, u8)> {
    let mut w = CaptureWriter::create(path, WriteFormat::Pcap, 65535).unwrap();
    let dsts = [
        "192.168.1.1",
        "192.168.130.7",
        "192.168.100.9",
        "192.168.200.1",
        "10.0.0.1",
        "2001:db8:2::5",
        "2001:db8:3::5",
    ];
    let mut out = Vec::new();
    for i in 0..140usize {
        let dst: IpAddr = dsts[i % dsts.len()].parse().unwrap();
        let src: IpAddr = if dst.is_ipv4() {
            "10.9.9.9".parse().unwrap()
        } else {
            "2001:db8:1::9".parse().unwrap()
        };
        let mut spec = FrameSpec::tcp(src, dst, 2000 + i as u16, 443, 64 + (i as u16 % 5) * 100);
        if i % 3 == 1 {
            spec.proto = 17;
        }
        let mut f = build_frame(&spec);
        let ttl = [64u8, 2, 1, 0, 255][(i / 7) % 5];
        let m = parse_frame(&f);
        let l3 = usize::from(m.l3_offset);
        if dst.is_ipv4() {
            let mut p = ipv4::Packet::new_checked(&mut f[l3..]).unwrap();
            p.set_ttl(ttl);
            p.fill_checksum();
        } else {
            f[l3 + 7] = ttl;
        }
        w.write_frame(&f, f.len() as u32, i as u64 * 1000).unwrap();
        out.push((f, dst, ttl));
    }
    w.flush().unwrap();
    out
}

#[test]
fn route_ttl_sends_exactly_the_routed_frames_with_ttl_above_one_in_order() {
    let dir = tmpdir("route-ttl");
    let input = crafted(&dir.join("in.pcap"));
    let routes = configs().join("rules/l3fwd.routes.yaml");
    let yaml = format!(
        "ports:\n  - name: in\n    pcap: {{ rx: {{ path: in.pcap }} }}\n\
         \x20 - name: port0\n    pcap: {{ tx: {{ path: p0.pcap }} }}\n\
         \x20 - name: port1\n    pcap: {{ tx: {{ path: p1.pcap }} }}\n\
         queues: {{ count: 1, burst: 8 }}\n\
         pipeline:\n  - parse\n  - route: {{ routes: {} }}\n  - ttl\n\
         executor: {{ kind: cpu }}\noutput: {{ port: port0 }}\n",
        routes.display()
    );
    std::fs::write(dir.join("c.yaml"), yaml).unwrap();
    let s = run_config(&dir.join("c.yaml"));
    let mut want: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
    let (mut no_route, mut expired) = (0u64, 0u64);
    for (f, dst, ttl) in &input {
        let Some((mac, port)) = l3fwd_route(*dst) else {
            no_route += 1;
            continue;
        };
        if *ttl <= 1 {
            expired += 1;
            continue;
        }
        // The expected bytes: next-hop MAC, TTL - 1, IPv4 checksum recomputed from scratch.
        let mut e = f.clone();
        let m: Vec<u8> = mac
            .split(':')
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect();
        e[..6].copy_from_slice(&m);
        let l3 = usize::from(parse_frame(&e).l3_offset);
        if dst.is_ipv4() {
            let mut p = ipv4::Packet::new_checked(&mut e[l3..]).unwrap();
            p.set_ttl(ttl - 1);
            p.fill_checksum();
        } else {
            e[l3 + 7] = ttl - 1;
        }
        want[usize::from(port == "port1")].push(e);
    }
    assert!(no_route > 0 && expired > 0 && !want[0].is_empty() && !want[1].is_empty());
    assert_eq!(drop_count(&s, "no_route"), no_route);
    assert_eq!(drop_count(&s, "ttl_expired"), expired);
    assert_eq!(s.rx_frames, s.tx_frames + no_route + expired);
    for (k, file) in ["p0.pcap", "p1.pcap"].iter().enumerate() {
        let got = capture_frames(&dir.join(file)).unwrap();
        assert_eq!(got.len(), want[k].len(), "{file}");
        for (i, (g, w)) in got.iter().zip(&want[k]).enumerate() {
            assert_eq!(g, w, "{file} frame {i}");
        }
        let mut fields = vec!["frame.number"];
        fields.extend(CHECKSUMS);
        assert_checksums_valid(&tshark(&dir.join(file), &fields), 1, &dir.join(file));
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_routes_and_ports_are_errors_naming_file_line_and_key() {
    let dir = tmpdir("bad");
    crafted(&dir.join("in.pcap"));
    let base = "ports:\n  - name: in\n    pcap: { rx: { path: in.pcap } }\n\
                \x20 - name: out\n    pcap: { tx: { path: out.pcap } }\n\
                \x20 - name: rxonly\n    gen: { count: 1 }\n";
    let cases: [(&str, &str, &str); 6] = [
        // A route to a port the config lacks: the route file's line and key `port`.
        (
            "routes:\n  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:01', port: out }\n  - { prefix: 11.0.0.0/8, via: '02:00:00:00:00:01', port: nowhere }\n",
            "pipeline: [parse, { route: { routes: r.yaml } }]\noutput: { port: out }\n",
            "r.yaml:3",
        ),
        // A route to a port without a transmit side.
        (
            "routes:\n  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:01', port: rxonly }\n",
            "pipeline: [parse, { route: { routes: r.yaml } }]\noutput: { port: out }\n",
            "unknown port `rxonly`",
        ),
        // A broken route file.
        (
            "routes:\n  - { prefix: 10.0.0.0/40, via: '02:00:00:00:00:01', port: out }\n",
            "pipeline: [parse, { route: { routes: r.yaml } }]\noutput: { port: out }\n",
            "r.yaml:2",
        ),
        ("", "pipeline: [parse, { route: { routes: missing.yaml } }]\n", "missing.yaml"),
        (
            "",
            "pipeline: [parse]\noutput: { port: out, mirror: rxonly }\n",
            "key `output.mirror`: port `rxonly` has no transmit side",
        ),
        (
            "",
            "pipeline: [parse]\noutput: { port: out, to_host: { pcap: s.pcap, port: out } }\n",
            "key `output.to_host`",
        ),
    ];
    for (routes, tail, want) in cases {
        std::fs::write(dir.join("r.yaml"), routes).unwrap();
        std::fs::write(dir.join("c.yaml"), format!("{base}{tail}")).unwrap();
        let e = match config::load(&dir.join("c.yaml")) {
            Err(e) => e.to_string(),
            Ok(cfg) => match daemon::prepare(cfg) {
                Err(e) => format!("{e:#}"),
                Ok(_) => panic!("accepted: {tail}"),
            },
        };
        assert!(e.contains(want), "want `{want}` in: {e}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn vlan_push_dscp_ttl_through_the_daemon_tshark_reads_them_back() {
    let dir = tmpdir("vlan");
    let input = crafted(&dir.join("in.pcap"));
    let yaml = "ports:\n  - name: in\n    pcap: { rx: { path: in.pcap } }\n\
                \x20 - name: out\n    pcap: { tx: { path: out.pcap } }\n\
                queues: { count: 1, burst: 8 }\n\
                pipeline:\n  - parse\n  - vlan: { push: { vid: 100, pcp: 5 } }\n  - dscp: { set: 46 }\n  - ttl\n  - count\n\
                executor: { kind: cpu }\noutput: { port: out }\n";
    std::fs::write(dir.join("c.yaml"), yaml).unwrap();
    let s = run_config(&dir.join("c.yaml"));
    let expired = input.iter().filter(|(_, _, t)| *t <= 1).count() as u64;
    assert_eq!(drop_count(&s, "ttl_expired"), expired);
    assert_eq!(s.tx_frames, s.rx_frames - expired);
    let sent: Vec<&Vec<u8>> = input
        .iter()
        .filter(|(_, _, t)| *t > 1)
        .map(|(f, _, _)| f)
        .collect();
    let mut fields = vec![
        "frame.len",
        "vlan.id",
        "vlan.priority",
        "ip.dsfield.dscp",
        "ipv6.tclass.dscp",
        "ip.ttl",
        "ipv6.hlim",
    ];
    fields.extend(CHECKSUMS);
    let out = dir.join("out.pcap");
    let rows = tshark(&out, &fields);
    assert_eq!(rows.len(), sent.len());
    for (i, (r, f)) in rows.iter().zip(&sent).enumerate() {
        let m = parse_frame(f);
        let v6 = m.ip_version == 6;
        assert_eq!(r[0], (f.len() + 4).to_string(), "frame {i}: 4 bytes longer");
        assert_eq!((r[1].as_str(), r[2].as_str()), ("100", "5"), "frame {i}");
        assert_eq!(r[if v6 { 4 } else { 3 }], "46", "frame {i}: DSCP");
        let ttl = (m.ip_ttl - 1).to_string();
        assert_eq!(r[if v6 { 6 } else { 5 }], ttl, "frame {i}: TTL");
    }
    assert_checksums_valid(&rows, 7, &out);
    std::fs::remove_dir_all(&dir).ok();
}
