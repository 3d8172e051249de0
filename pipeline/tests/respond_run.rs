//! The `respond` stage end to end (CPU executor): ARP requests and ICMP / ICMPv6 echo requests
//! for the configured addresses come back as replies out of the port they came in on; tshark
//! finds every reply well formed (opcode / type, addresses, checksums valid); other frames pass
//! through unchanged; the summary counts the replies. Hostile requests (bad checksums, group or
//! unspecified sources, IPv6 routed on, lengths past the frame) pass through unanswered, and a
//! padded request's reply carries none of the padding.

#[path = "tshark_common/mod.rs"]
mod tshark_common;

use pipeline::internal::testdata::capture_frames;
use pipeline::internal::testdata::respond::{Arp, Echo};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;

use pipeline::config;
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::port::gen::{build_frame, FrameSpec};
use pipeline::internal::port::pcap::{CaptureWriter, WriteFormat};
use pipeline::internal::stage::parse::parse_frame;
use pipeline::wire::{arp, icmp};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-resp-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn arp_request(target: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0xffu8; 6];
    f.extend([2, 0, 0, 0, 0, 7, 8, 6]);
    let mut a = [0u8; 28];
    arp::Repr {
        oper: 1,
        sender_hw: [2, 0, 0, 0, 0, 7],
        sender_ip: [192, 0, 2, 50],
        target_hw: [0; 6],
        target_ip: target,
    }
    .emit(&mut a)
    .unwrap();
    f.extend(a);
    f.resize(60, 0);
    f
}

fn echo(dst: &str, id: u16) -> Vec<u8> {
    let d: IpAddr = dst.parse().unwrap();
    let s = if d.is_ipv4() {
        "192.0.2.50"
    } else {
        "2001:db8::50"
    };
    let mut spec = FrameSpec::tcp(s.parse().unwrap(), d, id, 1, 98);
    spec.proto = if d.is_ipv4() { 1 } else { 58 };
    let mut f = build_frame(&spec);
    let l4 = usize::from(parse_frame(&f).l4_offset);
    let req = if d.is_ipv4() { 8 } else { 128 };
    icmp::Header::new_checked(&mut f[l4..])
        .unwrap()
        .set_type_update_checksum(req);
    f
}

#[test]
fn replies_go_out_of_the_ingress_port_well_formed() {
    // Port `a` receives (and transmits) the requests; `b` is only the default output.
    let input = [
        arp_request([192, 0, 2, 1]),
        echo("192.0.2.1", 1),
        echo("2001:db8::1", 2),
        arp_request([192, 0, 2, 99]),
        echo("192.0.2.99", 3),
        echo("2001:db8::99", 4),
        echo("192.0.2.1", 5),
    ];
    let (s, a, b, a_path) = respond_run("run", &input);
    assert_eq!((s.rx_frames, s.tx_frames), (7, 7));
    // The four for us come back out of `a`, the three others pass to `b` unchanged.
    assert_eq!(a.len(), 4);
    assert_eq!(
        b,
        vec![input[3].clone(), input[4].clone(), input[5].clone()]
    );
    let r = s
        .custom_stages
        .iter()
        .find(|c| c.name == "respond")
        .unwrap();
    assert_eq!(
        r.counters,
        vec![
            ("arp_replies".to_string(), 1),
            ("icmp_echo_replies".to_string(), 2),
            ("icmpv6_echo_replies".to_string(), 1)
        ]
    );
    let out = Command::new("tshark")
        .args(["-o", "ip.check_checksum:TRUE", "-r"])
        .arg(&a_path)
        .args(["-T", "fields", "-E", "occurrence=f"])
        .args([
            "-e",
            "eth.src",
            "-e",
            "eth.dst",
            "-e",
            "arp.opcode",
            "-e",
            "arp.src.proto_ipv4",
        ])
        .args([
            "-e",
            "arp.dst.proto_ipv4",
            "-e",
            "icmp.type",
            "-e",
            "icmp.checksum.status",
        ])
        .args([
            "-e",
            "ip.checksum.status",
            "-e",
            "ip.src",
            "-e",
            "ip.ttl",
            "-e",
            "icmpv6.type",
        ])
        .args([
            "-e",
            "icmpv6.checksum.status",
            "-e",
            "ipv6.src",
            "-e",
            "ipv6.hlim",
        ])
        .output()
        .expect("tshark runs");
    assert!(out.status.success());
    let rows: Vec<Vec<String>> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect();
    assert_eq!(rows.len(), 4);
    let mac = |b: &[u8]| {
        b.iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    for (r, req) in rows.iter().zip([0usize, 1, 2, 6]) {
        // From our MAC, to the requester's.
        assert_eq!(r[0], "02:00:00:00:00:99");
        assert_eq!(r[1], mac(&input[req][6..12]));
    }
    assert_eq!(&rows[0][2..5], ["2", "192.0.2.1", "192.0.2.50"]);
    for k in [1, 3] {
        assert_eq!(
            &rows[k][5..10],
            ["0", "1", "1", "192.0.2.1", "64"],
            "{:?}",
            rows[k]
        );
    }
    assert_eq!(
        &rows[2][10..14],
        ["129", "1", "2001:db8::1", "64"],
        "{:?}",
        rows[2]
    );
    if let Some(dir) = a_path.parent() {
        std::fs::remove_dir_all(dir).ok();
    }
}

/// Runs `input` (received on port `a`) through parse + respond; returns the frames out of `a`
/// (replies) and `b` (the rest) and the path of `a`'s capture, with the run's summary.
fn respond_run(
    name: &str,
    input: &[Vec<u8>],
) -> (daemon::Summary, Vec<Vec<u8>>, Vec<Vec<u8>>, PathBuf) {
    let dir = tmpdir(name);
    let mut w = CaptureWriter::create(dir.join("in.pcap"), WriteFormat::Pcap, 65535).unwrap();
    for (i, f) in input.iter().enumerate() {
        w.write_frame(f, f.len() as u32, i as u64).unwrap();
    }
    w.flush().unwrap();
    let yaml = "ports:\n  - name: a\n    pcap: { rx: { path: in.pcap }, tx: { path: a.pcap } }\n\
                \x20 - name: b\n    pcap: { tx: { path: b.pcap } }\n\
                queues: { count: 1 }\n\
                pipeline:\n  - parse\n  - respond: { mac: '02:00:00:00:00:99', ipv4: [192.0.2.1], ipv6: ['2001:db8::1'] }\n\
                executor: { kind: cpu }\noutput: { port: b }\n";
    std::fs::write(dir.join("c.yaml"), yaml).unwrap();
    let cfg = config::load(&dir.join("c.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap();
    let ports = daemon::open_ports(&p.cfg).unwrap();
    let shared = CpuShared::new(&p.cpu_spec());
    let s = daemon::run_cpu(&p, &shared, ports);
    assert_eq!(s.rx_frames, input.len() as u64);
    let a = capture_frames(&dir.join("a.pcap")).unwrap();
    let b = capture_frames(&dir.join("b.pcap")).unwrap();
    (s, a, b, dir.join("a.pcap"))
}

#[test]
fn hostile_requests_pass_unanswered_and_replies_carry_no_padding() {
    let echo = |s: &str, d: &str, data: usize, padding: usize| {
        let mut e = Echo::new(s, d);
        e.data = vec![0x42; data];
        e.padding = padding;
        e
    };
    let (v4, v6) = (("192.0.2.50", "192.0.2.1"), ("2001:db8::50", "2001:db8::1"));
    let mut routed0 = echo(v6.0, v6.1, 8, 0);
    routed0.routing = Some(0);
    let answer = [
        // A minimum-size frame: 18 bytes of padding after the IP packet.
        echo(v4.0, v4.1, 0, 18).build(),
        echo(v6.0, v6.1, 4, 10).build(),
        // An ARP probe (RFC 5227): sender IP 0.0.0.0.
        Arp::request([0, 0, 0, 0], [192, 0, 2, 1]).build(),
        routed0.build(),
    ];
    let mut bad_icmp = echo(v4.0, v4.1, 8, 0).build();
    let n = bad_icmp.len();
    bad_icmp[n - 1] ^= 1;
    let mut bad_ip = echo(v4.0, v4.1, 8, 0).build();
    bad_ip[14 + 10] ^= 1;
    let mut bad_icmp6 = echo(v6.0, v6.1, 8, 0).build();
    let n = bad_icmp6.len();
    bad_icmp6[n - 1] ^= 1;
    let mut bcast_mac = echo(v4.0, v4.1, 8, 0);
    bcast_mac.eth_src = [0xff; 6];
    let mut routed1 = routed0.clone();
    routed1.routing = Some(1);
    let mut past = echo(v6.0, v6.1, 8, 0).build();
    past[14 + 5] += 4;
    let pass = [
        bad_icmp,
        bad_ip,
        bad_icmp6,
        echo("224.0.0.1", v4.1, 8, 0).build(),
        echo("ff02::1", v6.1, 8, 0).build(),
        echo("0.0.0.0", v4.1, 8, 0).build(),
        bcast_mac.build(),
        routed1.build(),
        Arp::request([255, 255, 255, 255], [192, 0, 2, 1]).build(),
    ];
    // An IP length past the frame: `parse` drops it (parse status `Ipv6LenExceedsFrame`) before `respond`
    // (which declines it too: its unit tests).
    let input: Vec<Vec<u8>> = answer.iter().chain(&pass).chain([&past]).cloned().collect();
    let (_, a, b, a_path) = respond_run("hostile", &input);
    assert_eq!(b, pass.to_vec(), "the hostile requests pass on unchanged");
    // The replies: exactly the IP packet (ARP: the 28-byte packet) after the Ethernet header.
    let lens: Vec<usize> = a.iter().map(Vec::len).collect();
    assert_eq!(lens, [14 + 28, 14 + 40 + 12, 14 + 28, 14 + 40 + 40 + 16]);
    let rows = tshark_common::tshark(
        &a_path,
        &[
            "frame.len",
            "eth.dst",
            "eth.padding",
            "ip.checksum.status",
            "icmp.checksum.status",
            "icmpv6.checksum.status",
            "arp.opcode",
            "arp.dst.proto_ipv4",
            "_ws.malformed",
            "_ws.expert.severity",
        ],
    );
    let want = [
        ["42", "02:00:00:00:00:07", "", "1", "1", "", "", "", "", ""],
        ["66", "02:00:00:00:00:07", "", "", "", "1", "", "", "", ""],
        [
            "42",
            "02:00:00:00:00:07",
            "",
            "",
            "",
            "",
            "2",
            "0.0.0.0",
            "",
            "",
        ],
        ["110", "02:00:00:00:00:07", "", "", "", "1", "", "", "", ""],
    ];
    assert_eq!(rows, want.map(|r| r.map(str::to_string).to_vec()).to_vec());
    if let Some(d) = a_path.parent() {
        std::fs::remove_dir_all(d).ok();
    }
}
