//! A table's buckets as a device copy's bytes (`bucket_bytes`, `load_buckets`): a table loaded
//! from another's bytes applies, reclaims and sweeps as the original does (its bucket tags are
//! rebuilt, else a frame would miss its own flow); bytes that are not whole buckets inside the
//! table are refused by name.

mod common;

use common::*;
use pktwarp_flow::testgen::{generate, GenConfig};
use pktwarp_flow::{FlowConfig, FlowTable, Timeouts, BUCKET_ENTRIES, ENTRY_SIZE};

const SEC: u64 = 1_000_000_000;

#[test]
fn a_table_loaded_from_bytes_goes_on_as_the_original() {
    let cfg = FlowConfig {
        entries: 256,
        strict: false,
        hash_seed: 7,
        timeouts: Timeouts::default(),
    };
    let g = GenConfig {
        seed: 3,
        frames: 3000,
        concurrent: 40,
        idle_pct: 3,
        ..GenConfig::default()
    };
    let frames = generate(&g);
    let (a, b) = frames.split_at(1500);
    let mut t = FlowTable::from_config(&cfg).unwrap();
    t.report_ended(true);
    for f in a {
        t.apply(&parse(&f.bytes), &f.bytes, f.time_ns);
    }
    assert!(t.len() > 20, "{} flows", t.len());
    t.take_ended(&mut Vec::new());
    let mut u = FlowTable::from_config(&cfg).unwrap();
    u.report_ended(true);
    // In two pieces, as a sweep loads a window of buckets.
    let nb = t.nbuckets();
    u.load_buckets(0, t.bucket_bytes(0, 10).unwrap()).unwrap();
    u.load_buckets(10, t.bucket_bytes(10, nb - 10).unwrap())
        .unwrap();
    assert_eq!(u.as_bytes(), t.as_bytes());
    let mut found = 0;
    for f in b {
        let m = parse(&f.bytes);
        let (x, y) = (
            t.apply(&m, &f.bytes, f.time_ns),
            u.apply(&m, &f.bytes, f.time_ns),
        );
        assert_eq!(x, y, "frame at {}", f.time_ns);
        found += (x.ct_state == pktwarp_flow::ct::ESTABLISHED) as usize;
    }
    assert!(found > 500, "{found} frames of established flows");
    assert_eq!(t.as_bytes(), u.as_bytes());
    let (mut et, mut eu) = (Vec::new(), Vec::new());
    t.take_ended(&mut et);
    u.take_ended(&mut eu);
    assert!(!et.is_empty());
    assert_eq!(et, eu);
    let now = b.last().unwrap().time_ns + 40 * SEC;
    let (mut st, mut su) = (Vec::new(), Vec::new());
    t.sweep_buckets(0, nb, now, |_| {}, &mut st);
    u.sweep_buckets(0, nb, now, |_| {}, &mut su);
    assert!(!st.is_empty());
    assert_eq!(st, su);
}

#[test]
fn bytes_that_are_not_whole_buckets_inside_the_table_are_refused() {
    let mut t = FlowTable::new(64, Timeouts::default()).unwrap();
    let bucket = BUCKET_ENTRIES * ENTRY_SIZE;
    let e = t
        .load_buckets(0, &vec![0u8; bucket + 1])
        .unwrap_err()
        .to_string();
    assert!(e.contains("not whole buckets"), "{e}");
    let e = t
        .load_buckets(7, &vec![0u8; 2 * bucket])
        .unwrap_err()
        .to_string();
    assert!(e.contains("buckets 7..9 past the table's 8"), "{e}");
    assert!(t.bucket_bytes(8, 1).is_err());
    assert_eq!(t.bucket_bytes(7, 1).unwrap().len(), bucket);
}
