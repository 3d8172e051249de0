//! Byte-level tests of the encoding against bytes written out by hand from RFC 7011 / 5103.

use super::*;
use crate::ipfix::EndReason;
use std::net::{Ipv4Addr, Ipv6Addr};

fn v4_record() -> FlowRecord {
    FlowRecord {
        vlan: 100,
        src: Ipv4Addr::new(10, 0, 0, 1).into(),
        dst: Ipv4Addr::new(192, 168, 1, 2).into(),
        src_port: 40000,
        dst_port: 443,
        protocol: 6,
        packets: 3,
        octets: 0x0102,
        rev_packets: 2,
        rev_octets: 0x0304,
        start_ms: 0x0000_0190_0000_0001,
        end_ms: 0x0000_0190_0000_0002,
        tcp_flags: 0x1b,
        rev_tcp_flags: 0x12,
        end_reason: EndReason::EndOfFlow,
    }
}

fn v6_record() -> FlowRecord {
    FlowRecord {
        vlan: 0,
        src: "2001:db8::1".parse::<Ipv6Addr>().unwrap().into(),
        dst: "2001:db8::2".parse::<Ipv6Addr>().unwrap().into(),
        src_port: 5353,
        dst_port: 53,
        protocol: 17,
        packets: 1,
        octets: 80,
        rev_packets: 0,
        rev_octets: 0,
        start_ms: 1,
        end_ms: 1,
        tcp_flags: 0,
        rev_tcp_flags: 0,
        end_reason: EndReason::IdleTimeout,
    }
}

/// The fields after the addresses, as they appear in both templates.
const COMMON_FIELDS: [u8; 56] = [
    0x00, 0x07, 0x00, 0x02, // sourceTransportPort, 2
    0x00, 0x0b, 0x00, 0x02, // destinationTransportPort, 2
    0x00, 0x04, 0x00, 0x01, // protocolIdentifier, 1
    0x00, 0x06, 0x00, 0x02, // tcpControlBits, 2
    0x00, 0x01, 0x00, 0x08, // octetDeltaCount, 8
    0x00, 0x02, 0x00, 0x08, // packetDeltaCount, 8
    0x80, 0x01, 0x00, 0x08, 0x00, 0x00, 0x72, 0x79, // reverse octetDeltaCount, PEN 29305
    0x80, 0x02, 0x00, 0x08, 0x00, 0x00, 0x72, 0x79, // reverse packetDeltaCount, PEN 29305
    0x00, 0x98, 0x00, 0x08, // flowStartMilliseconds (152), 8
    0x00, 0x99, 0x00, 0x08, // flowEndMilliseconds (153), 8
    0x00, 0x3a, 0x00, 0x02, // vlanId (58), 2
    0x00, 0x88, 0x00, 0x01, // flowEndReason (136), 1
];

fn expected_template_set() -> Vec<u8> {
    let mut t = vec![0x00, 0x02, 0x00, 140]; // set id 2, length 140
    t.extend_from_slice(&[0x01, 0x00, 0x00, 14]); // template 256, 14 fields
    t.extend_from_slice(&[0x00, 0x08, 0x00, 0x04, 0x00, 0x0c, 0x00, 0x04]);
    t.extend_from_slice(&COMMON_FIELDS);
    t.extend_from_slice(&[0x01, 0x01, 0x00, 14]); // template 257, 14 fields
    t.extend_from_slice(&[0x00, 0x1b, 0x00, 0x10, 0x00, 0x1c, 0x00, 0x10]);
    t.extend_from_slice(&COMMON_FIELDS);
    t
}

#[test]
fn template_set_bytes_are_the_hand_written_ones() {
    let mut e = Encoder::new(7, 1400);
    let (m, used) = e.message(&[], 0x5f00_0000, true);
    assert_eq!(used, 0);
    let mut want = vec![0x00, 0x0a, 0x00, 156]; // version 10, length 16 + 140
    want.extend_from_slice(&[0x5f, 0, 0, 0]); // export time
    want.extend_from_slice(&[0, 0, 0, 0]); // sequence: no data record before
    want.extend_from_slice(&[0, 0, 0, 7]); // observation domain
    want.extend_from_slice(&expected_template_set());
    assert_eq!(m.bytes, want);
    assert_eq!((m.records, m.templates), (0, true));
    assert_eq!(TEMPLATE_SET_LEN, 140);
}

#[test]
fn ipv4_record_bytes_with_set_length_and_padding() {
    let mut e = Encoder::new(0x0102_0304, 1400);
    let (m, used) = e.message(&[v4_record()], 1, false);
    assert_eq!(used, 1);
    let mut want = vec![0x00, 0x0a, 0x00, 88, 0, 0, 0, 1, 0, 0, 0, 0, 1, 2, 3, 4];
    want.extend_from_slice(&[0x01, 0x00, 0x00, 72]); // set 256, 4 + 66 + 2 padding
    want.extend_from_slice(&[10, 0, 0, 1, 192, 168, 1, 2]);
    want.extend_from_slice(&[0x9c, 0x40, 0x01, 0xbb, 6, 0x00, 0x1b]); // ports, proto, flags
    want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x01, 0x02]); // octets
    want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 3]); // packets
    want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x03, 0x04]); // reverse octets
    want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 2]); // reverse packets
    want.extend_from_slice(&[0, 0, 0x01, 0x90, 0, 0, 0, 1]); // start ms
    want.extend_from_slice(&[0, 0, 0x01, 0x90, 0, 0, 0, 2]); // end ms
    want.extend_from_slice(&[0, 100, 3]); // vlan, end reason
    want.extend_from_slice(&[0, 0]); // padding to 4
    assert_eq!(m.bytes, want);
    assert_eq!(RECORD_LEN_V4, 66);
    assert_eq!(e.sequence(), 1, "one data record sent");
}

#[test]
fn ipv6_record_bytes() {
    let mut e = Encoder::new(0, 1400);
    let (m, _) = e.message(&[v6_record()], 0, false);
    assert_eq!(RECORD_LEN_V6, 90);
    assert_eq!(&m.bytes[2..4], &[0, 16 + 96]);
    assert_eq!(&m.bytes[16..20], &[0x01, 0x01, 0, 96]); // set 257, 4 + 90 + 2
    let mut addrs = vec![0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    addrs.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    assert_eq!(&m.bytes[20..52], &addrs[..]);
    assert_eq!(&m.bytes[52..57], &[0x14, 0xe9, 0, 53, 17]);
    assert_eq!(
        &m.bytes[20 + 88..20 + 90],
        &[0, 1],
        "vlan 0, end reason idle"
    );
    assert_eq!(&m.bytes[110..112], &[0, 0], "padding");
    assert_eq!(m.bytes.len(), 112);
}

#[test]
fn mixed_versions_make_one_set_per_run_and_sequence_counts_records() {
    let mut e = Encoder::new(0, 1400);
    let recs = [v4_record(), v4_record(), v6_record(), v4_record()];
    let (m, used) = e.message(&recs, 0, true);
    assert_eq!((used, m.records), (4, 4));
    let b = &m.bytes;
    let mut at = HEADER_LEN + TEMPLATE_SET_LEN;
    let mut sets = vec![];
    while at < b.len() {
        let id = u16::from_be_bytes([b[at], b[at + 1]]);
        let len = usize::from(u16::from_be_bytes([b[at + 2], b[at + 3]]));
        assert_eq!(len % 4, 0, "sets padded to 4");
        sets.push((id, len));
        at += len;
    }
    assert_eq!(at, b.len());
    // 4 + 2 * 66 = 136 (aligned); 4 + 90 + 2; 4 + 66 + 2.
    assert_eq!(sets, vec![(256, 136), (257, 96), (256, 72)]);
    let (m2, _) = e.message(&[v6_record()], 0, false);
    assert_eq!(
        &m2.bytes[8..12],
        &[0, 0, 0, 4],
        "sequence = records sent before"
    );
}

#[test]
fn records_are_packed_into_as_many_messages_as_the_size_needs() {
    // Header 16 + set header 4 + 3 records of 66 + 2 padding = 220: three records a message.
    let max = 16 + 4 + 3 * 66 + 2;
    let mut e = Encoder::new(0, max);
    let recs = vec![v4_record(); 10];
    let mut rest = &recs[..];
    let mut counts = vec![];
    let mut seqs = vec![];
    while !rest.is_empty() {
        let (m, used) = e.message(rest, 0, false);
        assert!(m.bytes.len() <= max, "{} > {max}", m.bytes.len());
        seqs.push(u32::from_be_bytes(m.bytes[8..12].try_into().unwrap()));
        counts.push(m.records);
        rest = &rest[used..];
    }
    assert_eq!(counts, vec![3, 3, 3, 1]);
    assert_eq!(seqs, vec![0, 3, 6, 9]);
    // One byte less and only two fit.
    let mut e = Encoder::new(0, max - 1);
    assert_eq!(e.message(&recs, 0, false).0.records, 2);
}

#[test]
fn smallest_size_holds_the_templates_then_one_ipv6_record() {
    let mut e = Encoder::new(0, MIN_MESSAGE_LEN);
    let recs = [v6_record(), v6_record()];
    let (m, used) = e.message(&recs, 0, true);
    assert_eq!((m.records, used, m.bytes.len()), (0, 0, 16 + 140));
    let (m, used) = e.message(&recs, 0, false);
    assert_eq!((m.records, used), (1, 1));
    assert!(m.bytes.len() <= MIN_MESSAGE_LEN);
}

#[test]
fn a_record_of_mixed_versions_is_consumed_but_not_encoded() {
    let mut bad = v4_record();
    bad.dst = Ipv6Addr::LOCALHOST.into();
    let mut e = Encoder::new(0, 1400);
    let (m, used) = e.message(&[bad, v4_record()], 0, false);
    assert_eq!((used, m.records, m.bytes.len()), (2, 1, 88));
    assert_eq!(e.sequence(), 1);
}

/// Decodes the data records of messages this encoder wrote (the field order of its templates),
/// checking every header and set length on the way.
fn decode(msgs: &[Vec<u8>], max: usize) -> Vec<FlowRecord> {
    let mut out = vec![];
    for m in msgs {
        assert!(m.len() <= max && m.len() % 4 == 0, "{} bytes", m.len());
        assert_eq!(usize::from(u16::from_be_bytes([m[2], m[3]])), m.len());
        assert_eq!(
            u32::from_be_bytes(m[8..12].try_into().unwrap()) as usize,
            out.len()
        );
        let mut at = HEADER_LEN;
        while at < m.len() {
            let id = u16::from_be_bytes([m[at], m[at + 1]]);
            let len = usize::from(u16::from_be_bytes([m[at + 2], m[at + 3]]));
            let set = &m[at + 4..at + len];
            at += len;
            let (alen, rlen) = match id {
                FLOW_SET_ID_TEMPLATE => continue,
                TEMPLATE_ID_V4 => (4, RECORD_LEN_V4),
                TEMPLATE_ID_V6 => (16, RECORD_LEN_V6),
                _ => panic!("set id {id}"),
            };
            assert!(set.len() % rlen < 4, "padding shorter than 4");
            for r in set.chunks_exact(rlen) {
                let ip = |b: &[u8]| -> std::net::IpAddr {
                    if alen == 4 {
                        Ipv4Addr::from(<[u8; 4]>::try_from(b).unwrap()).into()
                    } else {
                        Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap()).into()
                    }
                };
                let rest = &r[2 * alen..];
                let u16_at = |o: usize| u16::from_be_bytes([rest[o], rest[o + 1]]);
                let u64_at = |o: usize| u64::from_be_bytes(rest[o..o + 8].try_into().unwrap());
                out.push(FlowRecord {
                    src: ip(&r[..alen]),
                    dst: ip(&r[alen..2 * alen]),
                    src_port: u16_at(0),
                    dst_port: u16_at(2),
                    protocol: rest[4],
                    tcp_flags: u16_at(5) as u8,
                    octets: u64_at(7),
                    packets: u64_at(15),
                    rev_octets: u64_at(23),
                    rev_packets: u64_at(31),
                    start_ms: u64_at(39),
                    end_ms: u64_at(47),
                    vlan: u16_at(55),
                    end_reason: match rest[57] {
                        1 => EndReason::IdleTimeout,
                        2 => EndReason::ActiveTimeout,
                        3 => EndReason::EndOfFlow,
                        4 => EndReason::ForcedEnd,
                        5 => EndReason::LackOfResources,
                        x => panic!("end reason {x}"),
                    },
                    rev_tcp_flags: 0,
                });
            }
        }
    }
    out
}

proptest::proptest! {
    /// Any mix of IPv4 and IPv6 records, any message size: every record comes back once, in
    /// order, with its fields, from messages within the size.
    #[test]
    fn any_records_any_size_decode_back(
        seeds in proptest::collection::vec((proptest::bool::ANY, proptest::num::u64::ANY), 0..120),
        max in MIN_MESSAGE_LEN..3000usize,
        templates_first in proptest::bool::ANY,
    ) {
        let recs: Vec<FlowRecord> = seeds
            .iter()
            .map(|&(six, x)| {
                let mut r = if six { v6_record() } else { v4_record() };
                r.src_port = x as u16;
                r.octets = x;
                r.rev_packets = x.rotate_left(17);
                r.vlan = (x >> 20) as u16 & 0xfff;
                r.tcp_flags = (x >> 40) as u8;
                r.rev_tcp_flags = 0;
                r
            })
            .collect();
        let mut e = Encoder::new(9, max);
        let mut msgs = vec![];
        let mut rest = &recs[..];
        let mut templates = templates_first;
        while !rest.is_empty() || templates {
            let (m, used) = e.message(rest, 0, templates);
            proptest::prop_assert!(used > 0 || templates, "a message without templates takes a record");
            templates = false;
            msgs.push(m.bytes);
            rest = &rest[used..];
        }
        proptest::prop_assert_eq!(decode(&msgs, max), recs);
    }
}
