//! The `respond` stage end to end (CPU executor): ARP requests and ICMP / ICMPv6 echo requests
//! for the configured addresses come back as replies out of the port they came in on; tshark
//! finds every reply well formed (opcode / type, addresses, checksums valid); other frames pass
//! through unchanged; the summary counts the replies.

use pipeline::testdata::capture_frames;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;

use pipeline::config;
use pipeline::daemon;
use pipeline::executor::cpu::CpuShared;
use pipeline::port::gen::{build_frame, FrameSpec};
use pipeline::port::pcap::{CaptureWriter, WriteFormat};
use pipeline::stage::parse::parse_frame;
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
    let dir = tmpdir("run");
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
    assert_eq!((s.rx_frames, s.tx_frames), (7, 7));
    let (a, b) = (
        capture_frames(&dir.join("a.pcap")).unwrap(),
        capture_frames(&dir.join("b.pcap")).unwrap(),
    );
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
        .arg(dir.join("a.pcap"))
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
    std::fs::remove_dir_all(&dir).ok();
}
