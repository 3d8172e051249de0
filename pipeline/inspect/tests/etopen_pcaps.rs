//! The loaded ET Open 2019 rules over every Ethernet frame of the tcpdump test captures
//! (the external corpus: `ids/etopen-2019`, `pcaps/tcpdump`): real, often malformed traffic
//! through the decoder, the HTTP head parser and the evaluator. Nothing panics; the rules
//! that hit are printed (`--nocapture`).

mod common;

use common::ethernet_frames;
use pktwarp_inspect::eval::{self, decode::decode, program::Program, Counters};
use pktwarp_inspect::rules::{load_dir, LoadOptions};
use std::collections::BTreeMap;

#[test]
fn etopen_rules_over_the_tcpdump_captures() {
    let Some((p, files)) = common::etopen_program_and_captures() else {
        return;
    };
    let (mut frames, mut decoded) = (0usize, 0usize);
    let mut counters = Counters::default();
    let mut hits: BTreeMap<u32, usize> = BTreeMap::new();
    for f in &files {
        let Some(list) = ethernet_frames(f) else {
            continue;
        };
        for bytes in &list {
            frames += 1;
            let Some(mut frame) = decode(bytes) else {
                continue;
            };
            decoded += 1;
            let head = eval::http_of(frame.ip_proto, frame.payload, &mut counters);
            frame.http = head.as_ref();
            for i in eval::matching(&p, &frame) {
                *hits.entry(p.rules[i].sid).or_default() += 1;
            }
        }
    }
    println!(
        "{frames} frames, {decoded} IP, {} split HTTP heads",
        counters.http_split
    );
    for (sid, n) in &hits {
        println!("  {n:5}  sid {sid}");
    }
    assert!(
        frames > 5000 && decoded > 3000,
        "{frames} frames, {decoded} decoded"
    );
    assert!(!hits.is_empty());
}

/// Ethernet / IPv4 / `l4` from `src` to `dst`.
fn ipv4_frame(proto: u8, src: [u8; 4], dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; 12];
    v.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
    v.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    v.extend_from_slice(&[0, 0, 0, 0, 64, proto, 0, 0]);
    v.extend_from_slice(&src);
    v.extend_from_slice(&dst);
    v.extend_from_slice(l4);
    v
}

/// The sids of the loaded ET rules (default variables) that match `bytes`.
fn et_hits(bytes: &[u8]) -> Option<Vec<u32>> {
    let rules = flow_rules::input::require_corpus("ids/etopen-2019")?;
    let rep = load_dir(&rules, &LoadOptions::default()).expect("load");
    let mut p = Program::new();
    for l in &rep.loaded {
        p.add(&l.rule).expect("compile");
    }
    let mut frame = decode(bytes).expect("decode");
    let head = eval::http_of(frame.ip_proto, frame.payload, &mut Counters::default());
    frame.http = head.as_ref();
    Some(
        eval::matching(&p, &frame)
            .into_iter()
            .map(|i| p.rules[i].sid)
            .collect(),
    )
}

#[test]
fn a_linux_ping_from_outside_hits_the_nix_ping_rule() {
    // Echo request: 8-byte header, 8-byte timestamp, then 0x10, 0x11, ... as Linux ping sends.
    let mut icmp = vec![8, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend(0x10u8..0x38);
    let Some(hits) = et_hits(&ipv4_frame(1, [8, 8, 8, 8], [192, 168, 1, 5], &icmp)) else {
        return;
    };
    // GPL ICMP_INFO PING *NIX; not the BSD one (its pattern starts at 0x08).
    assert!(hits.contains(&2100366), "{hits:?}");
    assert!(!hits.contains(&2100368), "{hits:?}");
    // From inside to outside it is not $EXTERNAL_NET -> $HOME_NET.
    let hits = et_hits(&ipv4_frame(1, [192, 168, 1, 5], [8, 8, 8, 8], &icmp)).unwrap();
    assert!(!hits.contains(&2100366), "{hits:?}");
}

#[test]
fn an_http_request_with_the_census_user_agent_hits_its_rule() {
    let tcp = |ua: &str| {
        let mut t = vec![
            0x15, 0xb3, 0x1f, 0x90, 0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x18, 0xff, 0xff,
        ];
        t.extend_from_slice(&[0, 0, 0, 0]);
        t.extend_from_slice(
            format!("GET / HTTP/1.1\r\nHost: h\r\nUser-Agent: {ua}\r\n\r\n").as_bytes(),
        );
        ipv4_frame(6, [8, 8, 8, 8], [192, 168, 1, 5], &t)
    };
    let Some(hits) = et_hits(&tcp("NYU Internet Census (https://scan.lol)")) else {
        return;
    };
    // ET SCAN NYU Internet Census UA Inbound: http_user_agent, depth 19, any port.
    assert!(hits.contains(&2025461), "{hits:?}");
    let hits = et_hits(&tcp("Mozilla NYU Internet Census")).unwrap();
    assert!(!hits.contains(&2025461), "{hits:?}");
}
