//! The `gen` port's planted payloads (`gen.payload`): every frame parsed by etherparse with its
//! checksums over the payload, planted bytes where configured, HTTP requests parsed by the
//! inspect stage's HTTP parser, the configured share, determinism per seed, and the errors of
//! bad options (naming the config file, line and key).

use std::path::Path;

use etherparse::{NetHeaders, PacketHeaders, TransportHeader};
use pipeline::burst::Burst;
use pipeline::internal::port::gen::{
    FlowOptions, GenOptions, GenRx, HttpRequestOptions, PayloadOptions, PlantOffset, PlantOptions,
    ProtocolMix, PROTO_TCP,
};
use pipeline::port::{RxPort, RxStatus};
use pktwarp_inspect::http::{self, HttpParse};
use pktwarp_inspect::rules::Buffer;

fn plant_text(t: &str, weight: u32) -> PlantOptions {
    PlantOptions {
        text: Some(t.into()),
        hex: None,
        weight,
        offset: None,
    }
}

fn request() -> HttpRequestOptions {
    HttpRequestOptions {
        method: "POST".into(),
        uri: "/wp%2Dlogin.php?x=%41".into(),
        host: Some("Www.Example.COM:8080".into()),
        user_agent: Some("sqlmap/1.3".into()),
        headers: vec!["Accept: */*".into(), "X-Probe: yes".into()],
        body: Some("user=admin".into()),
        weight: 1,
    }
}

fn opts(payload: PayloadOptions, size: u16, count: u64) -> GenOptions {
    GenOptions {
        count: Some(count),
        seed: 11,
        size: pipeline::internal::port::gen::FrameSize::Fixed(size),
        flows: Some(FlowOptions {
            flow_count: Some(64),
            ipv6_share: 0.3,
            protocols: ProtocolMix {
                tcp: 0.6,
                udp: 0.3,
                icmp: 0.1,
            },
            ..FlowOptions::default()
        }),
        payload: Some(payload),
        ..GenOptions::default()
    }
}

/// Every frame of `o`, in order.
fn frames(o: &GenOptions) -> Vec<Vec<u8>> {
    let mut rx = GenRx::new(o, 0).expect("options");
    let mut out = Vec::new();
    let mut b = Burst::with_capacity(64, 64 * 2048);
    loop {
        b.clear();
        match rx.rx_burst(&mut b, 64).expect("rx") {
            RxStatus::Frames(_) => out.extend(b.frames().map(|(_, f)| f.to_vec())),
            RxStatus::End => return out,
            RxStatus::Idle => panic!("an unlimited generator idles"),
        }
    }
}

/// The L4 payload after etherparse checked the IP lengths and the L4 checksum over it, and
/// the IP protocol and TCP destination port.
fn checked_payload(f: &[u8]) -> (Vec<u8>, u8, u16) {
    let h = PacketHeaders::from_ethernet_slice(f).expect("etherparse parses it");
    let p = h.payload.slice();
    let (proto, ok, dport) = match (h.net.expect("IP"), h.transport.expect("L4")) {
        (NetHeaders::Ipv4(ip, _), TransportHeader::Tcp(t)) => {
            assert_eq!(ip.header_checksum, ip.calc_header_checksum());
            (
                6,
                t.checksum == t.calc_checksum_ipv4(&ip, p).unwrap(),
                t.destination_port,
            )
        }
        (NetHeaders::Ipv6(ip, _), TransportHeader::Tcp(t)) => (
            6,
            t.checksum == t.calc_checksum_ipv6(&ip, p).unwrap(),
            t.destination_port,
        ),
        (NetHeaders::Ipv4(ip, _), TransportHeader::Udp(u)) => {
            (17, u.checksum == u.calc_checksum_ipv4(&ip, p).unwrap(), 0)
        }
        (NetHeaders::Ipv6(ip, _), TransportHeader::Udp(u)) => {
            (17, u.checksum == u.calc_checksum_ipv6(&ip, p).unwrap(), 0)
        }
        (NetHeaders::Ipv4(_, _), TransportHeader::Icmpv4(mut i)) => {
            let c = i.checksum;
            i.update_checksum(p);
            (1, c == i.checksum, 0)
        }
        (NetHeaders::Ipv6(ip, _), TransportHeader::Icmpv6(mut i)) => {
            let c = i.checksum;
            i.update_checksum(ip.source, ip.destination, p).unwrap();
            (58, c == i.checksum, 0)
        }
        other => panic!("unexpected headers {other:?}"),
    };
    assert!(ok, "L4 checksum wrong (proto {proto})");
    (p.to_vec(), proto, dport)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn plants_sit_at_their_fixed_offset_with_right_checksums() {
    let p = PayloadOptions {
        plant: vec![
            PlantOptions {
                hex: Some("de ad BE EF 00 ff".into()),
                text: None,
                weight: 1,
                offset: Some(PlantOffset::At(100)),
            },
            plant_text("|evil| \"quoted\";", 1),
        ],
        http: vec![],
        ratio: 0.5,
        fill: pipeline::internal::port::gen::Fill::Random,
        offset: PlantOffset::At(7),
        http_port: 80,
    };
    let all = frames(&opts(p, 512, 2000));
    let (mut hex_hits, mut text_hits) = (0, 0);
    for f in &all {
        let (pl, _, _) = checked_payload(f);
        if pl.get(100..106) == Some(&[0xde, 0xad, 0xbe, 0xef, 0x00, 0xff][..]) {
            hex_hits += 1;
        }
        if pl.get(7..23) == Some(&b"|evil| \"quoted\";"[..]) {
            text_hits += 1;
        }
    }
    // Half the frames carry one of two equally weighted entries (binomial, 2000 frames).
    assert!((420..=580).contains(&hex_hits), "{hex_hits}");
    assert!((420..=580).contains(&text_hits), "{text_hits}");
}

#[test]
fn random_offsets_place_the_plant_inside_the_frame_and_grow_small_frames() {
    let long = "A".repeat(40) + "needle-in-the-payload";
    let p = PayloadOptions {
        plant: vec![plant_text(&long, 1)],
        http: vec![],
        ratio: 1.0,
        fill: pipeline::internal::port::gen::Fill::Zeros,
        offset: PlantOffset::Random,
        http_port: 80,
    };
    // 64-byte frames have 2 to 22 payload bytes: each must grow to hold the plant whole.
    for size in [64u16, 1518] {
        let all = frames(&opts(p.clone(), size, 500));
        let mut offsets = std::collections::BTreeSet::new();
        for f in &all {
            let (pl, _, _) = checked_payload(f);
            let at = find(&pl, long.as_bytes()).expect("the plant is in every frame");
            offsets.insert(at);
            assert!(pl.len() >= long.len());
        }
        if size == 1518 {
            assert!(
                offsets.len() > 100,
                "offsets barely vary: {}",
                offsets.len()
            );
        }
    }
}

#[test]
fn http_requests_are_whole_tcp_segments_to_the_http_port_that_the_inspect_parser_reads() {
    let p = PayloadOptions {
        plant: vec![plant_text("planted", 3)],
        http: vec![request()],
        ratio: 0.4,
        fill: pipeline::internal::port::gen::Fill::Random,
        offset: PlantOffset::Random,
        http_port: 8080,
    };
    let all = frames(&opts(p, 1518, 3000));
    let mut heads = 0;
    for f in &all {
        let (pl, proto, dport) = checked_payload(f);
        if !pl.starts_with(b"POST ") {
            continue;
        }
        heads += 1;
        assert_eq!((proto, dport), (PROTO_TCP, 8080));
        let want = "POST /wp%2Dlogin.php?x=%41 HTTP/1.1\r\nHost: Www.Example.COM:8080\r\n\
                    User-Agent: sqlmap/1.3\r\nAccept: */*\r\nX-Probe: yes\r\n\
                    Content-Length: 10\r\n\r\nuser=admin";
        assert_eq!(pl, want.as_bytes(), "the segment is the request exactly");
        let HttpParse::Head(h) = http::parse(&pl) else {
            panic!("not parsed as a whole head");
        };
        assert!(h.is_request);
        assert_eq!(h.buffer(Buffer::HttpMethod), Some(&b"POST"[..]));
        assert_eq!(h.buffer(Buffer::HttpUri), Some(&b"/wp-login.php?x=%41"[..]));
        assert_eq!(h.buffer(Buffer::HttpHost), Some(&b"www.example.com"[..]));
        assert_eq!(h.buffer(Buffer::HttpUserAgent), Some(&b"sqlmap/1.3"[..]));
        assert_eq!(h.buffer(Buffer::HttpClientBody), Some(&b"user=admin"[..]));
    }
    // 0.4 of the frames carry an entry, a quarter of those the request: ~300 of 3000.
    assert!((220..=380).contains(&heads), "{heads}");
}

#[test]
fn the_same_seed_gives_the_same_frames_and_another_seed_other_ones() {
    let p = PayloadOptions {
        plant: vec![plant_text("abc", 1)],
        http: vec![request()],
        ratio: 0.3,
        fill: pipeline::internal::port::gen::Fill::Random,
        offset: PlantOffset::Random,
        http_port: 80,
    };
    let o = opts(p, 600, 400);
    assert_eq!(frames(&o), frames(&o));
    let other = GenOptions {
        seed: 12,
        ..o.clone()
    };
    assert_ne!(frames(&o), frames(&other));
}

#[test]
fn zero_ratio_leaves_the_frames_as_without_payload() {
    let p = PayloadOptions {
        plant: vec![plant_text("abc", 1)],
        http: vec![],
        ratio: 0.0,
        fill: pipeline::internal::port::gen::Fill::Zeros,
        offset: PlantOffset::Random,
        http_port: 80,
    };
    let with = opts(p, 200, 300);
    let without = GenOptions {
        payload: None,
        ..with.clone()
    };
    assert_eq!(frames(&with), frames(&without));
}

/// A config with `payload` as given, parsed from a named file: the error text.
fn config_error(payload_yaml: &str) -> String {
    let text = format!(
        "ports:\n  - name: g\n    gen:\n      count: 10\n      payload:\n{payload_yaml}\
         pipeline:\n  - count\n"
    );
    match pipeline::config::parse_str(&text, Path::new("/cfg/ids-gen.yaml")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_payload_options_name_the_file_line_and_key() {
    let cases: &[(&str, &str)] = &[
        (
            "        ratio: 1.5\n        plant: [{text: a}]\n",
            "gen.payload.ratio",
        ),
        (
            "        plant: [{hex: \"41 4\"}]\n",
            "gen.payload.plant[0].hex",
        ),
        (
            "        plant: [{hex: \"zz\"}]\n",
            "gen.payload.plant[0].hex",
        ),
        (
            "        plant: [{hex: \"+f\"}]\n",
            "gen.payload.plant[0].hex",
        ),
        (
            "        plant: [{text: a, hex: \"41\"}]\n",
            "gen.payload.plant[0]",
        ),
        ("        plant: [{text: \"\"}]\n", "gen.payload.plant[0]"),
        ("        plant: [{text: a, weight: 0}]\n", "gen.payload"),
        ("        ratio: 0.5\n", "gen.payload"),
        (
            "        plant: [{text: ab, offset: 9134}]\n",
            "gen.payload.plant[0]",
        ),
        (
            "        http: [{uri: \"/a b\"}]\n",
            "gen.payload.http[0].uri",
        ),
        (
            "        http: [{uri: /, method: \"GE T\"}]\n",
            "gen.payload.http[0].method",
        ),
        (
            "        http: [{uri: /, headers: [\"NoColon\"]}]\n",
            "gen.payload.http[0].headers[0]",
        ),
        (
            "        http: [{uri: /, user_agent: \"a\\r\\nX: y\"}]\n",
            "gen.payload.http[0].user_agent",
        ),
    ];
    for (yaml, key) in cases {
        let e = config_error(yaml);
        assert!(e.contains("/cfg/ids-gen.yaml:"), "no file:line in `{e}`");
        assert!(e.contains(&format!("ports[0].{key}")), "`{e}` lacks {key}");
    }
    // Shapes serde refuses: the location is the key's own line.
    for yaml in [
        "        plant: [{txt: a}]\n",
        "        fill: noise\n",
        "        offset: -3\n",
        "        offset: 70000\n",
        "        http_port: 65536\n",
    ] {
        let e = config_error(yaml);
        assert!(e.contains("/cfg/ids-gen.yaml:6"), "`{e}` for {yaml}");
    }
}
