//! The CPU table's per-bucket tags (slot signatures and a bound on the earliest expiry): what
//! they let a visit skip must never change what the table does. A flow whose timeout gets
//! shorter still expires on time; `lookup` finds live flows only and changes nothing;
//! `apply_packets` equals `apply_packet` one at a time, table bytes and results.

use pktwarp_flow::key::{Kind, Packet, NO_WSCALE};
use pktwarp_flow::testgen::Rng;
use pktwarp_flow::{ct, FlowKey, FlowResult, FlowTable, Timeouts};

const SEC: u64 = 1_000_000_000;

/// A UDP packet between client `c` (port 1000 + c) and server `s`; `reply` from the server.
fn udp(c: u32, s: u32, reply: bool) -> Packet {
    let key = FlowKey {
        addr: [[0x0a00_0000 | c, 0, 0, 0], [0xc000_0200 | s, 0, 0, 0]],
        port: [1000 + (c & 0x3fff) as u16, 53],
        proto: 17,
        ip_version: 4,
        ..FlowKey::default()
    };
    Packet {
        key,
        from_a: !reply,
        kind: Kind::Udp,
        tcp_flags: 0,
        ip_len: 60,
        seq: 0,
        ack: 0,
        win: 0,
        seg_len: 0,
        wscale: NO_WSCALE,
    }
}

/// A reply shortens the flow's timeout (unreplied 100 s, replied 10 s here): it must expire 10 s
/// after the reply, not at the 100 s its creation set (a bucket bound kept at its first value
/// would miss it).
#[test]
fn a_flow_whose_timeout_shortens_expires_on_time() {
    let timeouts = Timeouts {
        udp_unreplied: 100,
        udp_replied: 10,
        ..Timeouts::default()
    };
    // One bucket: every flow visits it.
    let mut t = FlowTable::new(8, timeouts).unwrap();
    assert_eq!(t.apply_packet(&udp(1, 1, false), 0).ct_state, ct::NEW);
    assert_eq!(
        t.apply_packet(&udp(1, 1, true), SEC).ct_state,
        ct::ESTABLISHED
    );
    // Another flow at 12 s reclaims the replied one (its deadline was 11 s).
    t.apply_packet(&udp(2, 1, false), 12 * SEC);
    assert_eq!(t.counters().expired, 1, "{:?}", t.counters());
    assert_eq!(t.len(), 1);
    // The first flow's next packet opens it anew.
    assert_eq!(
        t.apply_packet(&udp(1, 1, false), 12 * SEC).ct_state,
        ct::NEW
    );
    assert_eq!(t.counters().created, 3);
}

#[test]
fn lookup_finds_live_flows_only_and_changes_nothing() {
    let mut t = FlowTable::new(16384, Timeouts::default()).unwrap();
    for c in 0..500 {
        t.apply_packet(&udp(c, 1, false), SEC);
    }
    assert_eq!(t.counters().early_evicted, 0, "every flow stays");
    let before = t.as_bytes().to_vec();
    let counters = t.counters();
    for c in 0..500 {
        let e = t.lookup(&udp(c, 1, false).key, 2 * SEC);
        let e = e.unwrap_or_else(|| panic!("flow {c} is found"));
        assert_eq!(e.key, udp(c, 1, false).key);
        assert!(t.lookup(&udp(c, 2, false).key, 2 * SEC).is_none());
    }
    // Past the unreplied timeout (30 s): absent, though still in the table.
    assert!(t.lookup(&udp(3, 1, false).key, 40 * SEC).is_none());
    assert_eq!(t.as_bytes(), &before[..]);
    assert_eq!(t.counters(), counters);
}

/// Bursts (hashed and their tags loaded ahead) do what single packets do, in order, on a small
/// table with aging and evictions, a flow seen twice in one burst included.
#[test]
fn apply_packets_equals_apply_packet_one_at_a_time() {
    let timeouts = Timeouts {
        udp_unreplied: 2,
        udp_replied: 5,
        ..Timeouts::default()
    };
    let mut one = FlowTable::new(256, timeouts).unwrap();
    let mut burst = one.clone();
    let mut rng = Rng(11);
    let mut now = SEC;
    for _ in 0..400 {
        let n = 1 + rng.below(40) as usize;
        let pkts: Vec<Packet> = (0..n)
            .map(|_| udp(rng.below(600) as u32, 1, rng.chance(40)))
            .collect();
        now += rng.below(SEC / 4);
        let mut got = vec![FlowResult::default(); n];
        burst.apply_packets(&pkts, now, &mut got).unwrap();
        let want: Vec<FlowResult> = pkts.iter().map(|p| one.apply_packet(p, now)).collect();
        assert_eq!(got, want);
        assert!(one.as_bytes() == burst.as_bytes(), "the tables differ");
    }
    let c = one.counters();
    assert!(c.expired > 100 && c.early_evicted > 100, "{c:?}");
    assert_eq!(c, burst.counters());
    let mut out = [FlowResult::default(); 2];
    assert!(burst
        .apply_packets(&[udp(1, 1, false)], now, &mut out)
        .is_err());
}
