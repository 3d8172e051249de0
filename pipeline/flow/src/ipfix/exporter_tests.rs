//! The exporter against a local UDP socket standing in for the collector: queueing, template
//! refresh, counters, a collector that is down and configuration errors.

use super::*;
use crate::ipfix::{EndReason, IpfixConfig, TEMPLATE_SET_LEN};
use std::net::Ipv4Addr;

fn record(i: u16) -> FlowRecord {
    FlowRecord {
        vlan: 0,
        src: Ipv4Addr::new(10, 0, 0, 1).into(),
        dst: Ipv4Addr::new(10, 0, 0, 2).into(),
        src_port: 1000 + i,
        dst_port: 80,
        protocol: 6,
        packets: 1,
        octets: 60,
        rev_packets: 0,
        rev_octets: 0,
        start_ms: 1,
        end_ms: 2,
        tcp_flags: 2,
        rev_tcp_flags: 0,
        end_reason: EndReason::ForcedEnd,
    }
}

fn collector() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

fn recv_all(s: &UdpSocket) -> Vec<Vec<u8>> {
    s.set_nonblocking(true).unwrap();
    let mut out = vec![];
    let mut buf = [0u8; 65536];
    // Loopback delivery is synchronous with send: what was sent is already queued.
    while let Ok(n) = s.recv(&mut buf) {
        out.push(buf[..n].to_vec());
    }
    s.set_nonblocking(false).unwrap();
    out
}

fn has_templates(m: &[u8]) -> bool {
    m.len() >= 18 && u16::from_be_bytes([m[16], m[17]]) == 2
}

fn exporter(c: &UdpSocket, f: impl FnOnce(&mut IpfixConfig)) -> (Exporter, FlowQueue) {
    let mut cfg = IpfixConfig::new(c.local_addr().unwrap().to_string());
    f(&mut cfg);
    Exporter::new(&cfg).unwrap()
}

#[test]
fn templates_at_start_then_records_and_counters() {
    let c = collector();
    let (mut ex, q) = exporter(&c, |_| {});
    for i in 0..50 {
        q.try_push(record(i)).unwrap();
    }
    ex.poll_at(1_000_000);
    let msgs = recv_all(&c);
    assert!(has_templates(&msgs[0]), "templates in the first message");
    assert!(msgs.iter().all(|m| m.len() <= 1400 - 28));
    assert!(msgs[1..].iter().all(|m| !has_templates(m)));
    let s = ex.counters().snapshot();
    assert_eq!(s.records_exported, 50);
    assert_eq!(s.messages_sent, msgs.len() as u64);
    assert_eq!(
        (s.templates_sent, s.send_errors, s.records_dropped),
        (1, 0, 0)
    );
    // 1372 bytes: templates + 18 records, then 20 a message.
    assert_eq!(msgs.len(), 3);
    // Nothing queued and no refresh due: nothing sent.
    assert_eq!(ex.poll_at(1_000_001), 0);
}

#[test]
fn templates_are_resent_after_the_refresh_time_and_message_count() {
    let c = collector();
    let (mut ex, q) = exporter(&c, |cfg| {
        cfg.template_refresh_s = 10;
        cfg.template_refresh_messages = 3;
    });
    ex.poll_at(0);
    assert_eq!(recv_all(&c).len(), 1, "templates alone at start");
    ex.poll_at(9_999);
    assert!(recv_all(&c).is_empty());
    ex.poll_at(10_000);
    let m = recv_all(&c);
    assert!(m.len() == 1 && has_templates(&m[0]) && m[0].len() == 16 + TEMPLATE_SET_LEN);
    // Three messages without templates, then the fourth carries them.
    let mut with = vec![];
    for i in 0..5 {
        q.try_push(record(i)).unwrap();
        ex.poll_at(10_001 + u64::from(i));
        with.extend(recv_all(&c).iter().map(|m| has_templates(m)));
    }
    assert_eq!(with, vec![false, false, false, true, false]);
    assert_eq!(ex.counters().snapshot().templates_sent, 3);
}

#[test]
fn a_full_queue_drops_and_counts_without_blocking() {
    let c = collector();
    let (mut ex, q) = exporter(&c, |cfg| cfg.queue = 4);
    let results: Vec<_> = (0..6).map(|i| q.try_push(record(i))).collect();
    assert_eq!(results[..4], [Ok(()), Ok(()), Ok(()), Ok(())]);
    assert_eq!(results[4..], [Err(PushError::Full), Err(PushError::Full)]);
    let mut mixed = record(9);
    mixed.dst = std::net::Ipv6Addr::LOCALHOST.into();
    assert_eq!(q.try_push(mixed), Err(PushError::MixedIpVersions));
    ex.poll_at(0);
    let s = ex.counters().snapshot();
    assert_eq!((s.records_exported, s.records_dropped), (4, 3));
}

#[test]
fn a_collector_that_is_down_counts_send_errors_and_templates_are_resent() {
    // A port nobody listens on: bind one, note it, close it.
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (mut ex, q) = Exporter::new(&IpfixConfig::new(format!("127.0.0.1:{port}"))).unwrap();
    for round in 0..20u64 {
        q.try_push(record(round as u16)).unwrap();
        ex.poll_at(round);
    }
    let s = ex.counters().snapshot();
    // The ICMP port unreachable of one datagram fails the send after it.
    assert!(s.send_errors >= 5, "{s:?}");
    assert_eq!(s.messages_sent + s.send_errors, 20, "{s:?}");
    assert!(s.records_exported < 20);
    // The collector comes up on that port: the next messages reach it, templates first.
    let c = UdpSocket::bind(("127.0.0.1", port)).unwrap();
    let mut got = vec![];
    for round in 20..40u64 {
        q.try_push(record(round as u16)).unwrap();
        ex.poll_at(round);
        got.extend(recv_all(&c));
        if got.len() >= 3 {
            break;
        }
    }
    assert!(!got.is_empty());
    assert!(
        has_templates(&got[0]),
        "templates resent after the send errors"
    );
}

#[test]
fn the_thread_exports_what_is_queued_and_stops() {
    let c = collector();
    let (ex, q) = exporter(&c, |_| {});
    let counters = ex.counters();
    let t = ex.spawn(Duration::from_millis(5)).unwrap();
    for i in 0..10 {
        q.try_push(record(i)).unwrap();
    }
    let ex = t.stop().expect("the thread ends");
    assert_eq!(counters.snapshot().records_exported, 10);
    assert_eq!(ex.counters().snapshot(), counters.snapshot());
}

fn config_error(f: impl FnOnce(&mut IpfixConfig)) -> String {
    let mut cfg = IpfixConfig::new("127.0.0.1:4739");
    f(&mut cfg);
    Exporter::new(&cfg).unwrap_err().to_string()
}

#[test]
fn bad_configuration_values_name_their_key() {
    type Change = Box<dyn FnOnce(&mut IpfixConfig)>;
    let cases: Vec<(Change, &str)> = vec![
        (
            Box::new(|c| c.collector = "nohost.invalid:4739".into()),
            "ipfix.collector: \"nohost.invalid:4739\": cannot resolve",
        ),
        (
            Box::new(|c| c.collector = "127.0.0.1".into()),
            "ipfix.collector: \"127.0.0.1\": expected host:port",
        ),
        (
            Box::new(|c| c.collector = "127.0.0.1:70000".into()),
            "bad port \"70000\"",
        ),
        (
            Box::new(|c| c.collector = "localhost:x".into()),
            "bad port \"x\"",
        ),
        (Box::new(|c| c.collector = "127.0.0.1:0".into()), "port 0"),
        (
            Box::new(|c| c.collector = ":4739".into()),
            "the host is empty",
        ),
        (Box::new(|c| c.collector = "::1:4739".into()), "in brackets"),
        (
            Box::new(|c| c.mtu = 0),
            "ipfix.mtu: 0: must be 184 to 65535",
        ),
        (Box::new(|c| c.mtu = 183), "ipfix.mtu: 183:"),
        (Box::new(|c| c.mtu = 70000), "ipfix.mtu: 70000:"),
        (Box::new(|c| c.queue = 0), "ipfix.queue: 0"),
        (Box::new(|c| c.queue = usize::MAX), "ipfix.queue:"),
        (
            Box::new(|c| c.template_refresh_s = 0),
            "ipfix.template_refresh_s: 0",
        ),
        (
            Box::new(|c| c.template_refresh_messages = 0),
            "ipfix.template_refresh_messages: 0",
        ),
    ];
    for (f, want) in cases {
        let e = config_error(f);
        assert!(e.contains(want), "{e:?} lacks {want:?}");
    }
    // A host name resolves; the smallest MTU is accepted; an IPv6 collector needs 20 bytes more.
    let (ex, _) = Exporter::new(&IpfixConfig::new("localhost:4739")).unwrap();
    assert_eq!(ex.collector().port(), 4739);
    assert!(ex.collector().ip().is_loopback());
    assert!(Exporter::new(&IpfixConfig {
        mtu: 184,
        ..IpfixConfig::new("127.0.0.1:4739")
    })
    .is_ok());
    let e = config_error(|c| {
        c.collector = "[::1]:4739".into();
        c.mtu = 184;
    });
    assert!(e.contains("must be 204 to 65535"), "{e}");
}

#[test]
fn configuration_from_yaml_with_defaults_and_unknown_keys_refused() {
    let cfg: IpfixConfig =
        serde_saphyr::from_str("collector: \"[::1]:4739\"\nmtu: 9000\n").unwrap();
    assert_eq!(
        cfg,
        IpfixConfig {
            mtu: 9000,
            ..IpfixConfig::new("[::1]:4739")
        }
    );
    assert_eq!(
        (
            cfg.template_refresh_s,
            cfg.template_refresh_messages,
            cfg.queue,
            cfg.observation_domain
        ),
        (600, 256, 65536, 0)
    );
    let e = serde_saphyr::from_str::<IpfixConfig>("collector: a:1\nmtus: 1\n").unwrap_err();
    assert!(e.to_string().contains("mtus"), "{e}");
    let e = serde_saphyr::from_str::<IpfixConfig>("mtu: 1400\n").unwrap_err();
    assert!(e.to_string().contains("collector"), "{e}");
}
