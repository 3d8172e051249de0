//! tshark's IPFIX dissector (`cflow`) as an independent decoder: the exported datagrams, in a
//! pcap of Ethernet / IPv4 / UDP frames, decode to the records that were exported, with the
//! header fields (length, sequence, observation domain) RFC 7011 asks for.

mod ipfix_common;
use ipfix_common::*;
use pktwarp_flow::ipfix::FlowRecord;
use serde_json::Value;
use std::process::Command;

/// "Nov 14, 2023 22:13:21.250000000 UTC" (tshark's absolute time) to ms since the epoch.
fn tshark_time_ms(s: &str) -> u64 {
    let p: Vec<&str> = s.split_whitespace().collect();
    assert_eq!(p.len(), 5, "{s}");
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mon = months.iter().position(|m| *m == p[0]).unwrap() as u32 + 1;
    let day: u32 = p[1].trim_end_matches(',').parse().unwrap();
    let year: i64 = p[2].parse().unwrap();
    let (hms, frac) = p[3].split_once('.').unwrap();
    let t: Vec<u64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    let ms: u64 = frac[..3].parse().unwrap();
    // Search the day: the test's times are within a few days of each other.
    let mut days = 19_000u64;
    while utc(days * 86_400_000).0 < year
        || (utc(days * 86_400_000).1, utc(days * 86_400_000).2) != (mon, day)
    {
        days += 1;
        assert!(days < 40_000, "{s}");
    }
    days * 86_400_000 + (t[0] * 3600 + t[1] * 60 + t[2]) * 1000 + ms
}

/// Keys of a tshark JSON object that start with `prefix`, in the order of the number after it
/// ("Set 2", "Flow 10": the map's own order is alphabetical).
fn numbered<'a>(o: &'a Value, prefix: &str) -> Vec<&'a Value> {
    let mut v: Vec<(u32, &Value)> = o
        .as_object()
        .unwrap()
        .iter()
        .filter_map(|(k, v)| {
            let n = k
                .strip_prefix(prefix)?
                .split(|c: char| !c.is_ascii_digit())
                .next()?;
            Some((n.parse().ok()?, v))
        })
        .collect();
    v.sort_by_key(|(n, _)| *n);
    v.into_iter().map(|(_, v)| v).collect()
}

fn s<'a>(o: &'a Value, k: &str) -> &'a str {
    o[k].as_str().unwrap_or_else(|| panic!("no {k} in {o}"))
}

/// A decoded flow back to a record (the responder's TCP flags are not exported: taken from
/// `want`).
fn decoded(f: &Value, want: &FlowRecord) -> FlowRecord {
    let v6 = f.get("cflow.srcaddrv6").is_some();
    let (sa, da) = if v6 {
        ("cflow.srcaddrv6", "cflow.dstaddrv6")
    } else {
        ("cflow.srcaddr", "cflow.dstaddr")
    };
    let pair = |k: &str| -> (u64, u64) {
        let a = f[k]
            .as_array()
            .unwrap_or_else(|| panic!("{k}: forward and reverse in {f}"));
        (
            a[0].as_str().unwrap().parse().unwrap(),
            a[1].as_str().unwrap().parse().unwrap(),
        )
    };
    let (octets, rev_octets) = pair("cflow.octets");
    let (packets, rev_packets) = pair("cflow.packets");
    let times = &f["cflow.timedelta_tree"];
    let reason: u8 = s(f, "cflow.flow_end_reason").parse().unwrap();
    FlowRecord {
        vlan: s(f, "cflow.vlanid").parse().unwrap(),
        src: s(f, sa).parse().unwrap(),
        dst: s(f, da).parse().unwrap(),
        src_port: s(f, "cflow.srcport").parse().unwrap(),
        dst_port: s(f, "cflow.dstport").parse().unwrap(),
        protocol: s(f, "cflow.protocol").parse().unwrap(),
        packets,
        octets,
        rev_packets,
        rev_octets,
        start_ms: tshark_time_ms(s(times, "cflow.abstimestart")),
        end_ms: tshark_time_ms(s(times, "cflow.abstimeend")),
        tcp_flags: u8::from_str_radix(s(f, "cflow.tcpflags").trim_start_matches("0x"), 16).unwrap(),
        rev_tcp_flags: want.rev_tcp_flags,
        end_reason: if reason == want.end_reason as u8 {
            want.end_reason
        } else {
            panic!("end reason {reason} in {f}")
        },
    }
}

#[test]
fn tshark_decodes_the_exported_records_and_headers() {
    if !have_tool("tshark", "tshark_decodes_the_exported_records_and_headers") {
        return;
    }
    let sink = Sink::new();
    let flows = sample_flows();
    // A small MTU: the records span several messages.
    let stats = export_to(sink.port(), &flows, |c| {
        c.observation_domain = 42;
        c.mtu = 600;
    });
    let msgs = sink.datagrams();
    assert_eq!(msgs.len() as u64, stats.messages_sent);
    assert!(msgs.len() >= 10, "{} messages", msgs.len());
    let dir = temp_dir("tshark");
    let pcap = dir.join("ipfix.pcap");
    let frames: Vec<_> = msgs
        .iter()
        .enumerate()
        .map(|(i, m)| (i as u64 * 1000, udp_frame(40_000, 4739, m)))
        .collect();
    write_pcap(&pcap, &frames);
    let out = run(Command::new("tshark").arg("-r").arg(&pcap).args([
        "-d",
        "udp.port==4739,cflow",
        "-T",
        "json",
        "--no-duplicate-keys",
        "-J",
        "cflow",
    ]));
    let packets: Value = serde_json::from_str(&out).unwrap();
    let packets = packets.as_array().unwrap();
    assert_eq!(packets.len(), msgs.len());
    let mut got = vec![];
    for (i, p) in packets.iter().enumerate() {
        let c = &p["_source"]["layers"]["cflow"];
        assert_eq!(s(c, "cflow.version"), "10");
        assert_eq!(
            s(c, "cflow.len"),
            msgs[i].len().to_string(),
            "message {i} length"
        );
        assert!(msgs[i].len() <= 600 - 28);
        assert_eq!(s(c, "cflow.od_id"), "42");
        // The sequence number counts the data records sent before the message.
        assert_eq!(s(c, "cflow.sequence"), got.len().to_string(), "message {i}");
        for set in numbered(c, "Set ") {
            for f in numbered(set, "Flow ") {
                got.push(f);
            }
        }
    }
    assert_eq!(got.len(), flows.len());
    for (f, want) in got.iter().zip(&flows) {
        assert_eq!(&decoded(f, want), want, "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
