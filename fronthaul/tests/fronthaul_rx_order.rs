//! A pipeline with `fronthaul` keeps one receive thread per port
//! (`StageNeeds::orders_across_queues`).

/// A stage whose state every queue updates (the fronthaul's slot grid, its eAxCs steered to
/// two queues) keeps one receive thread per port: with one per queue, a queue replayed faster
/// than real time runs ahead of the other and closes slots the other still fills.
#[test]
fn a_stage_ordering_frames_across_queues_keeps_one_thread_per_port() {
    pktwarp_fronthaul::register();
    let dir = std::env::temp_dir().join(format!("pktwarp-fh-order-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cap = dir.join("in.pcap");
    std::fs::write(&cap, b"").unwrap();
    let cfg_with = |stage: &str| {
        format!(
            "ports:\n  - name: ru\n    pcap: {{ rx: {{ path: {} }} }}\n\
             queues: {{ count: 2, rx_threads: per_queue }}\npipeline:\n  - parse\n{stage}  - count\n",
            cap.display()
        )
    };
    let fronthaul = "  - fronthaul:\n      carrier_prbs: 273\n      numerology: 1\n      \
                     comp: { method: bfp, iq_width: 9, hdr: static }\n      eaxcs: [0, 1]\n";
    let path = dir.join("cfg.yaml");
    let p = pipeline::internal::prepare::prepare(
        pipeline::config::parse_str(&cfg_with(fronthaul), &path).unwrap(),
    )
    .unwrap();
    let t = p.rx_threads();
    assert!(t.per_queue, "the config asks for per_queue");
    let why = t
        .one_per_port
        .expect("fronthaul orders frames across queues");
    assert!(why.contains("`fronthaul`"), "{why}");
    let p = pipeline::internal::prepare::prepare(
        pipeline::config::parse_str(&cfg_with(""), &path).unwrap(),
    )
    .unwrap();
    assert_eq!(p.rx_threads().one_per_port, None);
}
