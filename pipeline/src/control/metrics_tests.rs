//! The daemon's metrics exposition, read back.

use super::*;

fn collector(cap: usize, watched: Option<usize>) -> (DaemonCollector, Vec<Arc<QueueCounters>>) {
    let pipeline = Arc::new(crate::stage::test_inline_filter_pipeline());
    let n_rules = pipeline.rule_count();
    assert!(n_rules > cap);
    let counters: Vec<_> = (0..2)
        .map(|_| Arc::new(QueueCounters::new(3, n_rules)))
        .collect();
    let info = StaticInfo {
        executor: "cpu".into(),
        mode: "run_to_completion".into(),
        reason: "test".into(),
        rx_port: "wire".into(),
        tx_port: "none".into(),
        stage_names: pipeline.stage_names(),
        rule_series_cap: cap,
        queue_gpu: if watched.is_some() {
            vec!["0".into(), "1".into()]
        } else {
            Vec::new()
        },
    };
    let c = DaemonCollector::new(counters.clone(), pipeline, ControlState::new(watched), info);
    (c, counters)
}

fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no series {series} in\n{text}"))
}

#[test]
fn exposition_reads_live_counters_with_capped_rule_series() {
    let (c, counters) = collector(3, None);
    counters[0].rx_frames.add(10);
    counters[1].rx_frames.add(5);
    counters[1].drops[DropReason::AclDrop as usize].add(2);
    // Rules 0..2 own series; 3 and up, and hits past the table, sum under "other".
    counters[0].rule_hits[1].add(4);
    counters[1].rule_hits[1].add(1);
    counters[0].rule_hits[3].add(7);
    counters[1].rule_hits[5].add(2);
    counters[1].rule_hits_other.add(1);
    counters[0].burst_latency.observe_ns(1500);
    counters[0].burst_latency.observe_ns(3_000_000);
    let text = String::from_utf8(Exposition::new(c).unwrap().render().unwrap()).unwrap();
    assert_eq!(
        value(&text, r#"pktwarp_rx_frames_total{port="wire",queue="0"}"#),
        10.0
    );
    assert_eq!(
        value(&text, r#"pktwarp_rx_frames_total{port="wire",queue="1"}"#),
        5.0
    );
    assert_eq!(
        value(
            &text,
            r#"pktwarp_drops_total{port="wire",queue="1",reason="acl_drop"}"#
        ),
        2.0
    );
    assert_eq!(
        value(&text, r#"pktwarp_acl_rule_hits_total{rule="1"}"#),
        5.0
    );
    assert_eq!(
        value(&text, r#"pktwarp_acl_rule_hits_total{rule="other"}"#),
        10.0
    );
    assert!(!text.contains(r#"rule="3""#));
    // Histogram: cumulative buckets in seconds, count = observations.
    assert_eq!(
        value(
            &text,
            r#"pktwarp_burst_latency_seconds_bucket{queue="0",le="0.000002"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"pktwarp_burst_latency_seconds_bucket{queue="0",le="+Inf"}"#
        ),
        2.0
    );
    assert_eq!(
        value(&text, r#"pktwarp_burst_latency_seconds_count{queue="0"}"#),
        2.0
    );
    // Conventions: every counter family ends in _total; no GPU families without a watchdog.
    for l in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let (name, ty) = l.split_once(' ').unwrap();
        assert!(name.starts_with("pktwarp_"), "{name}");
        assert_eq!(ty == "counter", name.ends_with("_total"), "{name} {ty}");
    }
    assert!(!text.contains("pktwarp_gpu_kernel"));
}

/// A port that keeps counters of its own, as a DPDK port does.
struct CountingPort(Arc<std::sync::Mutex<Vec<(String, u64)>>>);

impl crate::port::RxPort for CountingPort {
    fn rx_burst(
        &mut self,
        _: &mut crate::burst::Burst,
        _: usize,
    ) -> Result<crate::port::RxStatus, crate::port::PortError> {
        Ok(crate::port::RxStatus::End)
    }
    fn name(&self) -> &str {
        "dpdk:net_test0"
    }
    fn counter_source(&self) -> Option<crate::port::CounterSource> {
        let c = Arc::clone(&self.0);
        Some(Arc::new(move || c.lock().ok().map(|v| v.clone())))
    }
}

#[test]
fn port_counters_come_from_the_board() {
    let (c, _) = collector(3, None);
    let values = Arc::new(std::sync::Mutex::new(vec![
        ("ethdev_ipackets".to_string(), 7u64),
        ("ethdev_obytes".to_string(), 900),
        ("xstat_rx_good_packets".to_string(), 7),
        ("pktwarp_tx_full".to_string(), 1),
    ]));
    let board = Arc::new(crate::port::PortCounterBoard::default());
    let ports: Vec<Box<dyn crate::port::RxPort>> =
        vec![Box::new(CountingPort(Arc::clone(&values)))];
    board.watch(&ports, &["wire".to_string()]);
    let exp = Exposition::new(c.with_port_counters(Arc::clone(&board))).unwrap();
    let text = String::from_utf8(exp.render().unwrap()).unwrap();
    // Nothing read yet: no port samples.
    assert!(!text.contains("pktwarp_port_rx_frames_total{"), "{text}");
    board.refresh();
    let text = String::from_utf8(exp.render().unwrap()).unwrap();
    assert_eq!(
        value(&text, r#"pktwarp_port_rx_frames_total{port="wire"}"#),
        7.0
    );
    assert_eq!(
        value(&text, r#"pktwarp_port_tx_bytes_total{port="wire"}"#),
        900.0
    );
    assert_eq!(
        value(
            &text,
            r#"pktwarp_port_xstat{port="wire",name="rx_good_packets"}"#
        ),
        7.0
    );
    // A later value shows only after the next refresh; a published final value wins.
    values.lock().unwrap()[0].1 = 9;
    let text = String::from_utf8(exp.render().unwrap()).unwrap();
    assert_eq!(
        value(&text, r#"pktwarp_port_rx_frames_total{port="wire"}"#),
        7.0
    );
    board.publish(&[(
        "dpdk:net_test0".to_string(),
        vec![("ethdev_ipackets".to_string(), 11)],
    )]);
    let text = String::from_utf8(exp.render().unwrap()).unwrap();
    assert_eq!(
        value(&text, r#"pktwarp_port_rx_frames_total{port="wire"}"#),
        11.0
    );
    for l in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let (name, ty) = l.split_once(' ').unwrap();
        assert_eq!(ty == "counter", name.ends_with("_total"), "{name} {ty}");
    }
}

#[test]
fn watchdog_families_appear_with_a_watchdog() {
    let (c, _) = collector(3, Some(2));
    c.state.watchdog.as_ref().unwrap()[1]
        .restarts
        .fetch_add(2, std::sync::atomic::Ordering::Relaxed);
    let text = String::from_utf8(Exposition::new(c).unwrap().render().unwrap()).unwrap();
    assert_eq!(
        value(
            &text,
            r#"pktwarp_gpu_kernel_restarts_total{queue="1",gpu="1"}"#
        ),
        2.0
    );
    assert_eq!(
        value(&text, r#"pktwarp_gpu_kernel_stalled{queue="0",gpu="0"}"#),
        0.0
    );
    // Per-GPU families: one queue on each of GPU 0 and 1 (see collector()).
    assert_eq!(value(&text, r#"pktwarp_gpu_queues{gpu="1"}"#), 1.0);
    assert_eq!(value(&text, r#"pktwarp_gpu_rx_frames_total{gpu="0"}"#), 0.0);
}

/// The verifier's families read its board, and appear only with sampling on.
#[test]
fn verify_families_follow_the_board() {
    use crate::verify::sampler::VerifyBoard;
    let (c, _) = collector(3, None);
    let off = c.with_verify(VerifyBoard::new(0));
    let text = String::from_utf8(Exposition::new(off).unwrap().render().unwrap()).unwrap();
    assert!(!text.contains("pktwarp_verify_"), "{text}");
    let (c, _) = collector(3, None);
    let board = VerifyBoard::new(1000);
    board.sampled_frames.fetch_add(64, Relaxed);
    board.mismatch_frames.fetch_add(2, Relaxed);
    board.capture_dropped.fetch_add(2, Relaxed);
    let on = c.with_verify(Arc::clone(&board));
    let text = String::from_utf8(Exposition::new(on).unwrap().render().unwrap()).unwrap();
    assert_eq!(value(&text, "pktwarp_verify_sampled_total"), 64.0);
    assert_eq!(value(&text, "pktwarp_verify_mismatch_total"), 2.0);
    assert_eq!(value(&text, "pktwarp_verify_skipped_total"), 0.0);
    assert_eq!(
        value(
            &text,
            r#"pktwarp_verify_captured_frames_total{result="dropped"}"#
        ),
        2.0
    );
}
