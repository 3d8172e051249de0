//! The shipped stateful firewall (configs/stateful-firewall.yaml: `conntrack` then an ACL on
//! `ct:`) on the CPU executor. Its input capture is made here (connections opened from the
//! inside, with their replies and teardowns; UDP and ICMP echo exchanges and ICMP errors about
//! them; SYNs and out-of-state frames from outside) and the shipped capture must be these bytes
//! (`PKTWARP_REGENERATE=1 cargo test -p pipeline --test stateful_firewall the_shipped_capture`
//! rewrites it). Checks: every frame of an outbound conversation passes
//! both ways, inbound SYNs and invalid frames are dropped, a flow's two directions reach one
//! queue, and the run accounts for every frame.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use pipeline::burst::{Burst, FrameDesc};
use pipeline::config;
use pipeline::counters::QueueCounters;
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::port::pcap::{CaptureWriter, WriteFormat};
use pipeline::meta::PacketMeta;
use pipeline::verdict::{Action, DropReason};
use pktwarp_flow::ct;
use pktwarp_flow::testgen::{echo_frame, icmp_error_frame, tcp_frame, udp_frame, Tcp};

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

/// One frame of the capture: its bytes, whether the firewall passes it, the connection state
/// conntrack gives it, and its conversation (frames of one flow share it; 0 = alone).
struct F {
    bytes: Vec<u8>,
    pass: bool,
    ct: u8,
    conv: usize,
}

fn f(bytes: Vec<u8>, pass: bool, ct: u8, conv: usize) -> F {
    F {
        bytes,
        pass,
        ct,
        conv,
    }
}

const ACK: u16 = 0x10;
const SYN: u16 = 0x02;
const FIN: u16 = 0x01;
const PSH: u16 = 0x08;

fn seg(flags: u16, seq: u32, ack: u32, len: u16) -> Tcp {
    Tcp {
        flags,
        seq,
        ack,
        win: 64000,
        len,
        wscale: None,
    }
}

/// The conversations, each in its order; [`traffic`] interleaves them.
fn conversations() -> Vec<Vec<F>> {
    let mut out = Vec::new();
    // Outbound TCP: handshake, data both ways, FIN both ways, last ACK.
    for i in 0..20u8 {
        let conv = out.len() + 1;
        let c = (v4(10, 1, 0, 10 + i), 40000 + u16::from(i));
        let s = (v4(198, 51, 100, 1 + i), 443);
        let (a, b) = (1000u32, 5000u32);
        out.push(vec![
            f(
                tcp_frame(None, c, s, seg(SYN, a, 0, 0)),
                true,
                ct::NEW,
                conv,
            ),
            f(
                tcp_frame(None, s, c, seg(SYN | ACK, b, a + 1, 0)),
                true,
                ct::ESTABLISHED,
                conv,
            ),
            f(
                tcp_frame(None, c, s, seg(ACK, a + 1, b + 1, 0)),
                true,
                ct::ESTABLISHED,
                conv,
            ),
            f(
                tcp_frame(None, c, s, seg(PSH | ACK, a + 1, b + 1, 100)),
                true,
                ct::ESTABLISHED,
                conv,
            ),
            f(
                tcp_frame(None, s, c, seg(PSH | ACK, b + 1, a + 101, 200)),
                true,
                ct::ESTABLISHED,
                conv,
            ),
            f(
                tcp_frame(None, c, s, seg(FIN | ACK, a + 101, b + 201, 0)),
                true,
                ct::CLOSING,
                conv,
            ),
            f(
                tcp_frame(None, s, c, seg(FIN | ACK, b + 201, a + 102, 0)),
                true,
                ct::CLOSING,
                conv,
            ),
            f(
                tcp_frame(None, c, s, seg(ACK, a + 102, b + 202, 0)),
                true,
                ct::CLOSED,
                conv,
            ),
        ]);
    }
    // Outbound UDP request / response; half of them also get an ICMP error about the request
    // from a router on the way (related to the flow).
    for i in 0..10u8 {
        let conv = out.len() + 1;
        let c = (v4(10, 1, 1, 1 + i), 50000 + u16::from(i));
        let dns = (v4(192, 0, 2, 53), 53);
        let req = udp_frame(None, c, dns, 40);
        let mut v = vec![
            f(req.clone(), true, ct::NEW, conv),
            f(udp_frame(None, dns, c, 120), true, ct::ESTABLISHED, conv),
        ];
        if i % 2 == 0 {
            let err = icmp_error_frame(v4(192, 0, 2, 1), c.0, &req);
            v.push(f(err, true, ct::RELATED, conv));
        }
        out.push(v);
    }
    // Outbound ICMP echo and its reply.
    for i in 0..5u8 {
        let conv = out.len() + 1;
        let (h, t) = (v4(10, 1, 2, 1 + i), v4(198, 51, 100, 200));
        let id = 0x100 + u16::from(i);
        out.push(vec![
            f(echo_frame(None, h, t, true, id, 1), true, ct::NEW, conv),
            f(
                echo_frame(None, t, h, false, id, 1),
                true,
                ct::ESTABLISHED,
                conv,
            ),
        ]);
    }
    // From outside: connection attempts to the inside (new: dropped), a SYN+ACK and an echo
    // reply nobody asked for (invalid: dropped).
    for i in 0..20u8 {
        let a = (v4(203, 0, 113, 1 + i), 30000 + u16::from(i));
        let inside = (v4(10, 1, 0, 5), 22);
        out.push(vec![f(
            tcp_frame(None, a, inside, seg(SYN, 7, 0, 0)),
            false,
            ct::NEW,
            0,
        )]);
    }
    for i in 0..10u8 {
        let a = (v4(203, 0, 113, 100 + i), 80);
        let inside = (v4(10, 1, 0, 7), 33000 + u16::from(i));
        out.push(vec![f(
            tcp_frame(None, a, inside, seg(SYN | ACK, 9, 1, 0)),
            false,
            ct::INVALID,
            0,
        )]);
    }
    for i in 0..5u8 {
        let (a, h) = (v4(203, 0, 113, 200 + i), v4(10, 1, 2, 50));
        out.push(vec![f(
            echo_frame(None, a, h, false, 9, 1),
            false,
            ct::INVALID,
            0,
        )]);
    }
    out
}

/// Every conversation's frames, interleaved round-robin (many flows in flight at once), each
/// frame's order within its conversation kept.
fn traffic() -> Vec<F> {
    let mut convs: Vec<std::collections::VecDeque<F>> =
        conversations().into_iter().map(Into::into).collect();
    let mut out = Vec::new();
    while convs.iter().any(|c| !c.is_empty()) {
        for c in convs.iter_mut() {
            if let Some(x) = c.pop_front() {
                out.push(x);
            }
        }
    }
    out
}

/// Receive time of frame `i`: 10 µs apart (nothing ages out).
fn time_ns(i: usize) -> u64 {
    1_700_000_000_000_000_000 + i as u64 * 10_000
}

fn write_capture(path: &Path, frames: &[F]) {
    let mut w = CaptureWriter::create(path, WriteFormat::Pcap, 65535).expect("capture");
    for (i, x) in frames.iter().enumerate() {
        w.write_frame(&x.bytes, x.bytes.len() as u32, time_ns(i))
            .expect("write");
    }
    w.flush().expect("flush");
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-sfw-{name}-{}", std::process::id()));
    std::fs::create_dir_all(d.join("rules")).unwrap();
    d
}

/// The shipped config, rules and capture copied to a folder of their own, the metrics
/// endpoint off (tests run in parallel).
fn shipped_copy(name: &str) -> PathBuf {
    let d = tmpdir(name);
    let c = root().join("configs");
    for p in [
        "stateful-firewall.pcap",
        "rules/stateful-firewall.rules.yaml",
    ] {
        std::fs::copy(c.join(p), d.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    }
    let text = std::fs::read_to_string(c.join("stateful-firewall.yaml")).unwrap();
    std::fs::write(d.join("c.yaml"), text + "metrics: { enabled: false }\n").unwrap();
    d.join("c.yaml")
}

#[test]
fn the_shipped_capture_is_the_generated_traffic() {
    let frames = traffic();
    let shipped = root().join("configs/stateful-firewall.pcap");
    if std::env::var_os("PKTWARP_REGENERATE").is_some() {
        write_capture(&shipped, &frames);
    }
    let d = tmpdir("gen");
    write_capture(&d.join("x.pcap"), &frames);
    let want = std::fs::read(d.join("x.pcap")).unwrap();
    let have = std::fs::read(&shipped).expect("configs/stateful-firewall.pcap");
    assert!(
        want == have,
        "configs/stateful-firewall.pcap is not this test's traffic: run it with \
         PKTWARP_REGENERATE=1"
    );
}

/// Frame by frame through the config's pipeline, on the queue its steering picks: each frame's
/// verdict and connection state are the expected ones; each conversation stays on one queue.
#[test]
fn outbound_conversations_pass_both_ways_and_inbound_new_is_dropped() {
    let frames = traffic();
    let cfg = config::load(&shipped_copy("frames")).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap_or_else(|e| panic!("{e}"));
    let nq = usize::from(p.steering.queues());
    assert_eq!(nq, 2);
    let c = QueueCounters::new(p.pipeline.stages.len(), p.pipeline.rule_count());
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    let mut conv_queue = std::collections::HashMap::new();
    let mut queues_used = [false; 2];
    for (i, x) in frames.iter().enumerate() {
        let mut scratch = PacketMeta::default();
        let (q, drop) = p.steering.steer(&x.bytes, &mut scratch, nq);
        assert!(drop.is_none());
        queues_used[q] = true;
        if x.conv != 0 {
            let first = *conv_queue.entry(x.conv).or_insert(q);
            assert_eq!(q, first, "frame {i}: conversation {} split", x.conv);
        }
        let mut b = Burst::default();
        let d = FrameDesc {
            len: x.bytes.len() as u32,
            wire_len: x.bytes.len() as u32,
            queue: q as u16,
            timestamp_ns: time_ns(i),
            ..FrameDesc::default()
        };
        b.push(&x.bytes, d);
        p.pipeline.run_burst(&b, &mut metas, &mut verdicts, &c);
        assert_eq!(metas[0].ct_state, x.ct, "frame {i}: ct state");
        if x.pass {
            assert_eq!(verdicts[0].action, Action::Pass, "frame {i} must pass");
        } else {
            assert_eq!(verdicts[0].action, Action::Drop, "frame {i} must drop");
            assert_eq!(verdicts[0].reason, Some(DropReason::AclDrop), "frame {i}");
        }
    }
    assert_eq!(
        queues_used,
        [true, true],
        "the flows spread over both queues"
    );
}

/// The steering a conntrack config gets keeps a flow's two directions and the ICMP errors about
/// it on one queue; the standard RSS does not (which is why it is switched).
#[test]
fn conntrack_steering_keeps_both_directions_on_one_queue() {
    let standard = pipeline::internal::steer::Steering::rss_only(4).unwrap();
    let symmetric = pipeline::internal::steer::Steering::rss_only(4)
        .unwrap()
        .with_flow_steering();
    let mut split_by_standard = 0;
    let mut m = PacketMeta::default();
    for i in 0..200u16 {
        let a = (v4(10, 1, (i >> 8) as u8, i as u8), 1024 + i * 7);
        let b = (v4(198, 51, 100, (i % 250) as u8), 443 + i % 3);
        let out = tcp_frame(None, a, b, seg(SYN, 1, 0, 0));
        let back = tcp_frame(None, b, a, seg(SYN | ACK, 1, 2, 0));
        let ou = udp_frame(None, a, b, 10);
        let bu = udp_frame(None, b, a, 10);
        assert_eq!(
            symmetric.steer(&out, &mut m, 4).0,
            symmetric.steer(&back, &mut m, 4).0,
            "TCP flow {i}"
        );
        assert_eq!(
            symmetric.steer(&ou, &mut m, 4).0,
            symmetric.steer(&bu, &mut m, 4).0,
            "UDP flow {i}"
        );
        let err = icmp_error_frame(v4(192, 0, 2, 1), a.0, &ou);
        assert_eq!(
            symmetric.steer(&err, &mut m, 4).0,
            symmetric.steer(&ou, &mut m, 4).0,
            "ICMP error about UDP flow {i}"
        );
        if standard.steer(&out, &mut m, 4).0 != standard.steer(&back, &mut m, 4).0 {
            split_by_standard += 1;
        }
    }
    assert!(split_by_standard > 0);
    let h6 = pipeline::internal::rss::Toeplitz::new(&pipeline::internal::rss::RSS_KEY_SYMMETRIC);
    let (x, y) = (
        "2001:db8::1".parse().unwrap(),
        "2001:db8:9::42".parse().unwrap(),
    );
    assert_eq!(
        h6.hash_ipv6(x, y, Some((5, 9))),
        h6.hash_ipv6(y, x, Some((9, 5)))
    );
    let cfg = config::load(&shipped_copy("steer")).unwrap_or_else(|e| panic!("{e}"));
    assert!(cfg.has_conntrack());
}

/// The whole config on the CPU executor: every frame received is counted or dropped, the
/// drops are the ACL's, the conntrack counters are in the summary.
#[test]
fn the_shipped_config_runs_and_accounts_for_every_frame() {
    let frames = traffic();
    let passes = frames.iter().filter(|x| x.pass).count() as u64;
    let drops = frames.len() as u64 - passes;
    let cfg = config::load(&shipped_copy("run")).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap_or_else(|e| panic!("{e}"));
    let ports = daemon::open_ports(&p.cfg).unwrap_or_else(|e| panic!("{e}"));
    let shared = CpuShared::new(&p.cpu_spec());
    let s = daemon::run_cpu(&p, &shared, ports);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.rx_frames, frames.len() as u64);
    let counted: u64 = s.counted.iter().map(|c| c.1).sum();
    let dropped: u64 = s.drops.iter().map(|d| d.1).sum();
    assert_eq!(counted, passes);
    assert_eq!(dropped, drops);
    assert_eq!(counted + dropped, s.rx_frames);
    for (reason, n) in &s.drops {
        let want = if reason == "acl_drop" { drops } else { 0 };
        assert_eq!(*n, want, "drops `{reason}`: every drop is the ACL's");
    }
    let ctr = s
        .custom_stages
        .iter()
        .find(|c| c.name == "conntrack")
        .expect("the conntrack counters are in the summary");
    let get = |n: &str| {
        ctr.counters
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("counter {n}"))
    };
    // 35 outbound flows and the 20 inbound SYNs' (made before the ACL drops the SYN).
    assert_eq!(get("created"), 55);
    assert_eq!(get("invalid"), 15);
    assert_eq!(get("table_full"), 0);
}

/// A rule set matching on `ct:` without a `conntrack` stage before its `acl` is a config
/// error naming the rule file and line; the GPU executor takes the stateful firewall (its
/// kernel orders frames per flow and reads the per-state classifiers).
#[test]
fn ct_rules_need_conntrack_and_the_gpu_runs_both() {
    let cfg_path = shipped_copy("noct");
    let text = std::fs::read_to_string(&cfg_path).unwrap();
    let start = text.find("  - conntrack:").unwrap();
    let end = text.find("  - acl:").unwrap();
    let without = format!("{}{}", &text[..start], &text[end..]);
    std::fs::write(&cfg_path, without).unwrap();
    let e = match config::load(&cfg_path)
        .map_err(|e| e.to_string())
        .and_then(|c| daemon::prepare(c).map(drop).map_err(|e| format!("{e:#}")))
    {
        Ok(()) => panic!("ct: rules without conntrack must be refused"),
        Err(e) => e,
    };
    assert!(
        e.contains("stateful-firewall.rules.yaml:7") && e.contains("conntrack"),
        "{e}"
    );
    let cfg = config::load(&shipped_copy("gpu")).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.pipeline.gpu_refusal(), None);
    let image =
        pipeline::internal::executor::gpu::image_for_pipeline(&p.pipeline).expect("a GPU kernel");
    assert!(pktwarp_kernels::codegen::pipeline_orders_flows(
        &image.stages
    ));
    // The flow table of each queue: 65536 entries of 128 bytes.
    assert_eq!(image.queue_state[1].len(), 1);
    assert_eq!(image.queue_state[1][0].bytes, 65536 * 128);
}

/// Bad `conntrack` keys are config errors naming the key and the line; unknown keys too.
#[test]
fn bad_conntrack_keys_are_errors_naming_key_and_line() {
    let cfg_path = shipped_copy("badkeys");
    let text = std::fs::read_to_string(&cfg_path).unwrap();
    for (from, to, want) in [
        (
            "entries: 65536 ",
            "entries: 12 ",
            "pipeline[1].conntrack.entries",
        ),
        (
            "udp_unreplied: 30",
            "udp_unreplied: 0",
            "pipeline[1].conntrack.timeouts.udp_unreplied",
        ),
        ("strict: false ", "stric: false ", "stric"),
    ] {
        assert!(text.contains(from), "the shipped config has `{from}`");
        std::fs::write(&cfg_path, text.replace(from, to)).unwrap();
        let e = match config::load(&cfg_path) {
            Ok(_) => panic!("`{to}` must be refused"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(want), "{e}");
        assert!(
            e.contains("c.yaml:"),
            "the error names the file and line: {e}"
        );
    }
}

/// A `kill -HUP` reload may not bring `ct:` rules into a pipeline without `conntrack`.
#[test]
fn a_reload_with_ct_rules_needs_conntrack() {
    use pipeline::internal::stage::acl::AclStage;
    use pipeline::internal::stage::config::{AclStageConfig, DefaultAction, StageConfig};
    let d = tmpdir("reload");
    let plain = d.join("plain.yaml");
    std::fs::write(&plain, "rules:\n  - dst_port: 23\n    action: drop\n").unwrap();
    let stages = [
        StageConfig::Parse,
        StageConfig::Acl(AclStageConfig {
            rules: plain,
            format: None,
            default: DefaultAction::Pass,
        }),
    ];
    let p = pipeline::internal::stage::build(&stages, |x| x.to_path_buf()).expect("pipeline");
    let ct = root().join("configs/rules/stateful-firewall.rules.yaml");
    let new = AclStage::load(&ct, flow_rules::acl::RuleFormat::Yaml, Action::Drop).unwrap();
    let e = p
        .reload_acl(new)
        .expect_err("no conntrack stage")
        .to_string();
    assert!(e.contains("stateful-firewall.rules.yaml:7"), "{e}");
    assert_eq!(p.generation(), 0, "nothing was published");
}
