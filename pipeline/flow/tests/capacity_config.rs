//! Capacity: a table of N entries never holds more than N and its memory is the computed size;
//! bad config values (zero or odd sizes, zero timeouts, unknown keys) are clear errors.

mod common;

use common::*;
use pktwarp_flow::testgen::{self, Rng};
use pktwarp_flow::{
    bytes_needed, outcome, table_bytes, FlowConfig, FlowError, FlowTable, Timeouts, MAX_ENTRIES,
};

#[test]
fn a_table_never_holds_more_than_its_capacity_and_its_memory_is_the_computed_size() {
    for n in [8u64, 64, 1024] {
        let mut t = FlowTable::new(n, Timeouts::default()).unwrap();
        assert_eq!(t.capacity() as u64, n);
        assert_eq!(t.memory_bytes(), bytes_needed(n));
        assert_eq!(bytes_needed(n), n * 128);
        // Entries and a 32-byte tag per bucket of 8, allocated once.
        assert_eq!(table_bytes(n), n * 128 + n / 8 * 32);
        assert_eq!(t.allocated_bytes(), table_bytes(n));
        let mut rng = Rng(n);
        let s = ep(S, 53);
        let mut full = 0;
        for i in 0..(4 * n) {
            let c = (
                std::net::IpAddr::from((rng.next_u64() as u32).to_be_bytes()),
                1 + i as u16,
            );
            // Request, reply, request: assured, so nothing can be evicted.
            for f in [
                testgen::udp_frame(None, c, s, 1),
                testgen::udp_frame(None, s, c, 1),
                testgen::udp_frame(None, c, s, 1),
            ] {
                let r = t.apply(&parse(&f), &f, 1000 + i);
                full += (r.outcome == outcome::TABLE_FULL) as u64;
            }
            assert!(t.len() as u64 <= n);
            assert_eq!(t.memory_bytes(), n * 128, "the table grew");
            assert_eq!(t.allocated_bytes(), table_bytes(n), "the table's heap grew");
        }
        assert!(t.len() as u64 > n / 2, "{} of {n}", t.len());
        assert!(full > 0);
    }
}

fn config_err(yaml: &str) -> String {
    let c: Result<FlowConfig, _> = serde_saphyr::from_str(yaml);
    match c {
        Err(e) => e.to_string(),
        Ok(c) => match FlowTable::from_config(&c) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{yaml}: accepted"),
        },
    }
}

#[test]
fn bad_config_values_are_clear_errors() {
    for (yaml, want) in [
        (
            "entries: 0",
            "key `entries`: a flow table needs at least one bucket (8 entries), got 0",
        ),
        ("entries: 12", "key `entries`: 12 is not a multiple of 8"),
        (
            "entries: 4294967296",
            "is more than the limit of 2147483648",
        ),
        (
            "entries: 64\ntimeouts: { tcp_established: 0 }",
            "key `timeouts.tcp_established`: a timeout must be at least 1 second",
        ),
        (
            "entries: 64\ntimeouts: { udp_unreplied: 0 }",
            "key `timeouts.udp_unreplied`",
        ),
        (
            "entries: 64\ntimeouts: { icmp: 99999999999 }",
            "key `timeouts.icmp`: 99999999999 s is more than the limit",
        ),
        (
            "entries: 64\ntimeouts: { tcp_establish: 10 }",
            "unknown field `tcp_establish`",
        ),
        ("entries: 64\nstrict: yes\nsize: 1", "unknown field `size`"),
        ("strict: true", "missing field `entries`"),
        ("entries: -8", "entries"),
    ] {
        let e = config_err(yaml);
        assert!(e.contains(want), "{yaml}: {e}");
    }
}

#[test]
fn a_good_config_reads_with_defaults() {
    let c: FlowConfig = serde_saphyr::from_str(
        "entries: 1048576\nstrict: true\ntimeouts: { tcp_established: 7200 }",
    )
    .unwrap();
    assert_eq!(c.timeouts.tcp_established, 7200);
    assert_eq!(c.timeouts.udp_unreplied, Timeouts::default().udp_unreplied);
    let t = FlowTable::from_config(&c).unwrap();
    assert!(t.strict());
    assert_eq!(t.memory_bytes(), 128 << 20);
}

#[test]
fn a_table_over_the_limit_is_an_error_naming_the_bytes() {
    let e = FlowTable::new(MAX_ENTRIES + 8, Timeouts::default()).unwrap_err();
    let bytes = (MAX_ENTRIES + 8) * 128;
    assert!(matches!(e, FlowError::Config { .. }));
    assert!(e.to_string().contains(&format!("({bytes} bytes)")), "{e}");
}

#[test]
fn burst_slices_of_different_lengths_are_an_error() {
    let mut t = FlowTable::new(8, Timeouts::default()).unwrap();
    let f = testgen::arp_frame();
    let m = parse(&f);
    let mut out = [Default::default(); 1];
    let e = t
        .apply_burst(&[m, m], &[&f, &f], &[1, 2], &mut out)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("2 metas, 2 frames, 2 times, 1 results"),
        "{e}"
    );
}
