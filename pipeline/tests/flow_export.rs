//! Flow export end to end: a pcap replayed through `parse, flow_stats` on the CPU executor, the
//! records sent by the control thread to a real nfcapd on loopback, and `nfdump -r` of what it
//! stored holds, per conversation, tshark's packet and byte counts (`-z conv,tcp -z conv,udp`)
//! of the same capture. Also: the records' end reasons and the active timeout's split, decoded
//! from the datagrams; the `pktwarp_ipfix_*` metrics; and every config error naming its file,
//! line and key.

#[path = "../flow/tests/ipfix_common/mod.rs"]
mod ipfix_common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use ipfix_common::{have_tool, run, temp_dir, write_pcap, NfFlow, Nfcapd, Sink};
use pipeline::burst::FrameDesc;
use pipeline::control::{Control, ControlSetup};
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::stage::flow_stats::{FlowStatsConfig, FlowStatsStage};
use pipeline::meta::PacketMeta;
use pktwarp_flow::ipfix::{Exporter, IpfixConfig};
use pktwarp_flow::testgen::{echo_frame, tcp_frame, udp_frame, Tcp};

const SEC: u64 = 1_000_000_000;

/// Runs `pipeline` over `pcap` with an `ipfix:` section exporting to 127.0.0.1:`port`, the
/// control plane on (it runs the exporter); returns the run's summary and the metrics text
/// scraped after the last frame, before the forced end.
fn run_daemon(
    dir: &Path,
    pcap: &Path,
    pipeline: &str,
    port: u16,
    ready: &dyn Fn(&str) -> bool,
) -> (daemon::Summary, String) {
    let cfg_path = dir.join("flow-export.yaml");
    std::fs::write(
        &cfg_path,
        format!(
            "ports:\n  - name: wire\n    pcap:\n      rx: {{ path: {} }}\n\
             queues: {{ count: 2 }}\npipeline: {pipeline}\nexecutor: {{ kind: cpu }}\n\
             metrics: {{ listen: '127.0.0.1:0' }}\n\
             ipfix: {{ collector: '127.0.0.1:{port}', observation_domain: 7 }}\n",
            pcap.display()
        ),
    )
    .unwrap();
    run_config(&cfg_path, ready)
}

/// Runs a config with the control plane on (it runs the exporter): the summary, and the
/// metrics text scraped after the last frame once `ready` says so (at most 5 s), before the
/// forced end.
fn run_config(cfg_path: &Path, ready: &dyn Fn(&str) -> bool) -> (daemon::Summary, String) {
    let cfg = pipeline::config::load(cfg_path).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap_or_else(|e| panic!("{e}"));
    let ports = daemon::open_ports(&p.cfg).unwrap_or_else(|e| panic!("{e}"));
    let shared = CpuShared::new(&p.cpu_spec());
    let control = Control::start(
        &p,
        &shared,
        &["wire".to_string()],
        ControlSetup {
            install_signals: false,
            probe: None,
            on_fatal: None,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let s = daemon::run_cpu(&p, &shared, ports);
    let addr = control.metrics_addr().expect("metrics on");
    let mut metrics = scrape(addr);
    for _ in 0..250 {
        if ready(&metrics) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        metrics = scrape(addr);
    }
    control.finish();
    (s, metrics)
}

/// The control thread's first export round (templates, alone while no record waits) comes
/// within its loop's first ticks; the run may have been shorter.
fn templates_sent(metrics: &str) -> bool {
    metric(metrics, "pktwarp_ipfix_templates_sent_total") >= 1.0
}

/// A sample's value in the exposition text (0 when absent).
fn metric(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}

fn scrape(addr: std::net::SocketAddr) -> String {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    out
}

/// Per conversation (protocol, endpoints in order) and direction (from the lower endpoint
/// first): packets and bytes.
type ConvKey = (String, (IpAddr, u16), (IpAddr, u16));
type Conv = HashMap<ConvKey, [(u64, u64); 2]>;

fn key(pr: &str, a: (IpAddr, u16), b: (IpAddr, u16)) -> (ConvKey, usize) {
    if a <= b {
        ((pr.to_string(), a, b), 0)
    } else {
        ((pr.to_string(), b, a), 1)
    }
}

/// nfdump's flows summed per conversation (a flow exported in several records adds up).
fn nfdump_convs(flows: &[NfFlow]) -> Conv {
    let mut m = Conv::new();
    for f in flows {
        let (k, d) = key(&f.pr, (f.sa, f.sp), (f.da, f.dp));
        let e = m.entry(k).or_default();
        e[d].0 += f.ipkt;
        e[d].1 += f.ibyt;
        e[1 - d].0 += f.opkt;
        e[1 - d].1 += f.obyt;
    }
    m
}

/// tshark's conversations of the capture, bytes less the link-layer bytes of their frames
/// (tshark counts whole frames, IPFIX IP octets): `link` holds them per conversation.
fn tshark_convs(pcap: &Path, link: &Conv) -> Conv {
    let out = run(Command::new("tshark")
        .args(["-q", "-z", "conv,tcp", "-z", "conv,udp", "-r"])
        .arg(pcap));
    let mut proto = "";
    let mut m = Conv::new();
    for l in out.lines() {
        if l.starts_with("TCP Conversations") {
            proto = "TCP";
        } else if l.starts_with("UDP Conversations") {
            proto = "UDP";
        }
        let t: Vec<&str> = l.split_whitespace().collect();
        if t.len() < 9 || t[1] != "<->" {
            continue;
        }
        assert_eq!((t[5], t[8]), ("bytes", "bytes"), "exact byte counts: {l}");
        let ep = |s: &str| -> (IpAddr, u16) {
            let (a, p) = s.rsplit_once(':').unwrap();
            (a.parse().unwrap(), p.parse().unwrap())
        };
        let n = |i: usize| -> u64 { t[i].parse().unwrap() };
        // A <-> B, then B -> A frames and bytes, then A -> B.
        let (k, d) = key(proto, ep(t[0]), ep(t[2]));
        let l2 = link.get(&k).copied().unwrap_or_default();
        let mut e = [(0, 0); 2];
        e[d] = (n(6), n(7));
        e[1 - d] = (n(3), n(4));
        for x in 0..2 {
            e[x].1 -= l2[x].1;
        }
        m.insert(k, e);
    }
    m
}

/// Link-layer bytes (frame length less IP length) per TCP / UDP conversation and direction.
fn link_bytes(pcap: &Path) -> Conv {
    let mut m = Conv::new();
    let mut r = pipeline::internal::port::pcap::CaptureReader::open(pcap).unwrap();
    while let Some(frame) = r.next_frame().unwrap() {
        let f = frame.data.to_vec();
        let Ok(p) = etherparse::SlicedPacket::from_ethernet(&f) else {
            continue;
        };
        let (src, dst, ip_len) = match &p.net {
            Some(etherparse::NetSlice::Ipv4(s)) => (
                IpAddr::V4(s.header().source_addr()),
                IpAddr::V4(s.header().destination_addr()),
                u64::from(s.header().total_len()),
            ),
            Some(etherparse::NetSlice::Ipv6(s)) => (
                IpAddr::V6(s.header().source_addr()),
                IpAddr::V6(s.header().destination_addr()),
                40 + u64::from(s.header().payload_length()),
            ),
            _ => continue,
        };
        use etherparse::TransportSlice as T;
        let (pr, sp, dp) = match &p.transport {
            Some(T::Tcp(t)) => ("TCP", t.source_port(), t.destination_port()),
            Some(T::Udp(u)) => ("UDP", u.source_port(), u.destination_port()),
            _ => continue,
        };
        let (k, d) = key(pr, (src, sp), (dst, dp));
        m.entry(k).or_default()[d].1 += f.len() as u64 - ip_len;
    }
    m
}

/// The daemon's export of `pcap`, at nfcapd, per conversation equals tshark's statistics;
/// returns the conversations compared and the metrics text.
fn daemon_export_matches_tshark(
    pcap: &Path,
    name: &str,
    pipeline: &str,
    ready: &dyn Fn(&str) -> bool,
) -> (usize, String) {
    let dir = temp_dir(&format!("{name}-run"));
    let nf = Nfcapd::start(&format!("{name}-nf"));
    let (s, metrics) = run_daemon(&dir, pcap, pipeline, nf.port, ready);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    let flows = nf.stop_and_read();
    let got = nfdump_convs(&flows);
    let want = tshark_convs(pcap, &link_bytes(pcap));
    assert!(!want.is_empty());
    for (k, w) in &want {
        assert_eq!(got.get(k), Some(w), "conversation {k:?}: nfdump vs tshark");
    }
    // And nothing else of TCP or UDP (ICMP flows are not in tshark's tables).
    let tcp_udp = got.keys().filter(|k| k.0 == "TCP" || k.0 == "UDP").count();
    assert_eq!(tcp_udp, want.len(), "{got:?}");
    let _ = std::fs::remove_dir_all(&dir);
    (want.len(), metrics)
}

fn tools(test: &str) -> bool {
    have_tool("nfcapd", test) && have_tool("nfdump", test) && have_tool("tshark", test)
}

/// TCP conversations (handshake, data, FIN; one reset), UDP both ways and one way, ICMP echo,
/// IPv4 and IPv6, some with a VLAN tag, 1 ms apart.
fn generated_capture(path: &Path) {
    let v4 = |s: &str, p: u16| -> (IpAddr, u16) { (s.parse().unwrap(), p) };
    let seg = |flags: u16, seq: u32, ack: u32, len: u16| Tcp {
        flags,
        seq,
        ack,
        win: 64000,
        len,
        wscale: None,
    };
    let mut frames = Vec::new();
    for i in 0..6u16 {
        let vlan = (i % 3 == 0).then_some(100 + i);
        let (c, s) = if i % 2 == 0 {
            (
                v4(&format!("10.1.0.{}", 10 + i), 40000 + i),
                v4("198.51.100.7", 443),
            )
        } else {
            (
                v4(&format!("2001:db8::{}", 10 + i), 40000 + i),
                v4("2001:db8:1::7", 80),
            )
        };
        let (a, b) = (1000u32, 5000u32);
        frames.push(tcp_frame(vlan, c, s, seg(0x02, a, 0, 0)));
        frames.push(tcp_frame(vlan, s, c, seg(0x12, b, a + 1, 0)));
        frames.push(tcp_frame(vlan, c, s, seg(0x10, a + 1, b + 1, 0)));
        frames.push(tcp_frame(vlan, c, s, seg(0x18, a + 1, b + 1, 100 + i)));
        frames.push(tcp_frame(
            vlan,
            s,
            c,
            seg(0x18, b + 1, a + 101 + u32::from(i), 1200),
        ));
        if i == 5 {
            frames.push(tcp_frame(
                vlan,
                c,
                s,
                seg(0x04, a + 101 + u32::from(i), 0, 0),
            ));
            continue;
        }
        frames.push(tcp_frame(
            vlan,
            c,
            s,
            seg(0x11, a + 101 + u32::from(i), b + 1201, 0),
        ));
        frames.push(tcp_frame(
            vlan,
            s,
            c,
            seg(0x11, b + 1201, a + 102 + u32::from(i), 0),
        ));
        frames.push(tcp_frame(
            vlan,
            c,
            s,
            seg(0x10, a + 102 + u32::from(i), b + 1202, 0),
        ));
    }
    for k in 0..7u16 {
        let (q, r) = (v4("10.2.0.3", 5353), v4("10.2.0.4", 53));
        frames.push(udp_frame(None, q, r, 40 + k));
        frames.push(udp_frame(None, r, q, 200 + k));
        frames.push(udp_frame(
            None,
            v4("2001:db8::7", 6000),
            v4("2001:db8::8", 7000),
            10 * k,
        ));
        frames.push(echo_frame(None, q.0, r.0, true, 9, k));
        frames.push(echo_frame(None, r.0, q.0, false, 9, k));
    }
    let base = 1_700_000_000_000_000u64;
    let timed: Vec<_> = frames
        .into_iter()
        .enumerate()
        .map(|(i, f)| (base + i as u64 * 1000, f))
        .collect();
    write_pcap(path, &timed);
}

#[test]
fn generated_capture_exported_by_the_daemon_equals_tshark_at_nfdump() {
    let test = "generated_capture_exported_by_the_daemon_equals_tshark_at_nfdump";
    if !tools(test) {
        return;
    }
    let dir = temp_dir("fs-gen");
    let pcap = dir.join("gen.pcap");
    generated_capture(&pcap);
    let (n, metrics) = daemon_export_matches_tshark(
        &pcap,
        "fs-gen",
        "[parse, { flow_stats: { entries: 1024 } }]",
        &templates_sent,
    );
    // 6 TCP, 2 UDP.
    assert_eq!(n, 8);
    // The exporter's families are served; templates went out with the first poll.
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in\n{metrics}"))
    };
    assert!(value("pktwarp_ipfix_templates_sent_total") >= 1.0);
    assert_eq!(value("pktwarp_ipfix_send_errors_total"), 0.0);
    assert_eq!(value("pktwarp_ipfix_records_dropped_total"), 0.0);
    assert!(
        metrics.contains(r#"pktwarp_stage_counter_total{stage="flow_stats",position="1",counter="records_dropped"} 0"#),
        "{metrics}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn with_conntrack_flow_stats_exports_its_table_and_equals_tshark() {
    let test = "with_conntrack_flow_stats_exports_its_table_and_equals_tshark";
    if !tools(test) {
        return;
    }
    let dir = temp_dir("fs-ct");
    let pcap = dir.join("gen.pcap");
    generated_capture(&pcap);
    let (n, _) = daemon_export_matches_tshark(
        &pcap,
        "fs-ct",
        "[parse, { conntrack: { entries: 1024 } }, { flow_stats: { active_timeout_s: 60 } }]",
        &templates_sent,
    );
    assert_eq!(n, 8);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn corpus_captures_exported_by_the_daemon_equal_tshark_at_nfdump() {
    let test = "corpus_captures_exported_by_the_daemon_equal_tshark_at_nfdump";
    if !tools(test) {
        return;
    }
    // Plain TCP (BGP sessions) and UDP (DNS) captures of tcpdump's tests.
    for (rel, n) in [
        ("pcaps/tcpdump/bgp-4byte-asn.pcap", 6),
        ("pcaps/tcpdump/edns-opts.pcap", 1),
    ] {
        let Some(pcap) = flow_rules::input::require_corpus(rel) else {
            return;
        };
        let (got, _) = daemon_export_matches_tshark(
            &pcap,
            "fs-corpus",
            "[parse, { flow_stats: { entries: 4096 } }]",
            &templates_sent,
        );
        assert_eq!(got, n, "{rel}");
    }
}

/// (packets, rev packets, end reason, vlan) of every IPv4 data record in the datagrams.
fn v4_records(datagrams: &[Vec<u8>]) -> Vec<(u64, u64, u8, u16)> {
    let mut out = Vec::new();
    for d in datagrams {
        let mut at = 16;
        while at + 4 <= d.len() {
            let id = u16::from_be_bytes([d[at], d[at + 1]]);
            let len = usize::from(u16::from_be_bytes([d[at + 2], d[at + 3]]));
            assert!(len >= 4 && at + len <= d.len(), "set length");
            if id == pktwarp_flow::ipfix::TEMPLATE_ID_V4 {
                let rl = pktwarp_flow::ipfix::RECORD_LEN_V4;
                for r in d[at + 4..at + len].chunks_exact(rl) {
                    let u = |o: usize| u64::from_be_bytes(r[o..o + 8].try_into().unwrap());
                    // src dst sp dp proto flags | octets packets rev_octets rev_packets ...
                    out.push((u(23), u(39), r[65], u16::from_be_bytes([r[63], r[64]])));
                }
            }
            at += len;
        }
    }
    out
}

fn parsed(f: &[u8]) -> PacketMeta {
    let mut m = PacketMeta::default();
    pipeline::internal::stage::parse::parse(f, &mut m);
    m
}

fn at(ns: u64) -> FrameDesc {
    FrameDesc {
        queue: 0,
        timestamp_ns: ns,
        ..FrameDesc::default()
    }
}

/// The stage alone, by hand: the active timeout splits a long flow into records that add up,
/// an idle flow ends by timeout, a reset one as end of flow, an evicted one for lack of
/// resources, the rest at the end as forced; the datagrams say so.
#[test]
fn records_carry_their_end_reasons_and_the_active_timeout_splits_a_flow() {
    let sink = Sink::new();
    let mut ic = IpfixConfig::new(format!("127.0.0.1:{}", sink.port()));
    ic.observation_domain = 1;
    let (mut ex, q) = Exporter::new(&ic).unwrap();
    let c: FlowStatsConfig = serde_saphyr::from_str("{ entries: 8, active_timeout_s: 5 }").unwrap();
    let st = FlowStatsStage::new(&c, None).unwrap();
    st.attach(q);
    let v4 = |s: &str, p: u16| -> (IpAddr, u16) { (s.parse().unwrap(), p) };
    let (a, b) = (v4("10.0.0.1", 1000), v4("10.0.0.2", 53));
    let long = |out: bool| {
        udp_frame(
            Some(42),
            if out { a } else { b },
            if out { b } else { a },
            20,
        )
    };
    // A UDP exchange of 8 packets over 7 s (active timeout 5 s).
    for k in 0..8u64 {
        let f = long(k % 2 == 0);
        st.apply(&at(SEC * (1 + k)), &f, &parsed(&f));
    }
    st.sweep(std::time::Instant::now(), 1000);
    // Two more packets, then a TCP connection reset.
    for k in 8..10u64 {
        let f = long(true);
        st.apply(&at(SEC * (1 + k)), &f, &parsed(&f));
    }
    let (c1, s1) = (v4("10.0.0.9", 40000), v4("10.0.0.1", 80));
    let seg = |flags: u16| Tcp {
        flags,
        seq: 1,
        ack: 0,
        win: 1000,
        len: 0,
        wscale: None,
    };
    for (from_c, flags) in [(true, 0x02), (false, 0x12), (true, 0x04)] {
        let f = if from_c {
            tcp_frame(None, c1, s1, seg(flags))
        } else {
            tcp_frame(None, s1, c1, seg(flags))
        };
        st.apply(&at(SEC * 11), &f, &parsed(&f));
    }
    // 200 s later one more flow: the clock moves on, the sweep ends the idle and closed ones.
    let f = udp_frame(None, v4("10.0.0.5", 7), b, 1);
    st.apply(&at(SEC * 211), &f, &parsed(&f));
    st.sweep(std::time::Instant::now(), 1000);
    // One bucket of 8: nine more unreplied flows evict the oldest.
    for i in 0..8u8 {
        let f = udp_frame(None, v4(&format!("10.0.1.{i}"), 7), b, 1);
        st.apply(&at(SEC * 212 + u64::from(i)), &f, &parsed(&f));
    }
    st.flush(&mut || {});
    ex.poll();
    let counters: HashMap<_, _> = st.counters().into_iter().collect();
    assert_eq!(counters["active_timeout"], 1);
    assert_eq!(counters["idle_timeout"], 1);
    assert_eq!(counters["end_of_flow"], 1);
    assert_eq!(counters["lack_of_resources"], 1);
    assert_eq!(counters["forced_end"], 8);
    assert_eq!(counters["records_dropped"], 0);
    let recs = v4_records(&sink.datagrams());
    assert_eq!(recs.len(), 12, "{recs:?}");
    // The long flow: 8 packets (4 each way) at the active timeout, then 2 more, idle.
    assert!(recs.contains(&(4, 4, 2, 42)), "{recs:?}");
    assert!(recs.contains(&(2, 0, 1, 42)), "{recs:?}");
    assert!(
        recs.contains(&(2, 1, 3, 0)),
        "the reset connection: {recs:?}"
    );
    assert_eq!(recs.iter().filter(|r| r.2 == 5).count(), 1);
    assert_eq!(recs.iter().filter(|r| r.2 == 4).count(), 8);
    assert_eq!(ex.counters().snapshot().records_exported, 12);
}

/// A record that cannot be queued is counted, never waited for; without an exporter, every
/// record is.
#[test]
fn a_full_queue_or_no_exporter_drops_and_counts() {
    let c: FlowStatsConfig = serde_saphyr::from_str("{ entries: 64 }").unwrap();
    let st = FlowStatsStage::new(&c, None).unwrap();
    let mut ic = IpfixConfig::new("127.0.0.1:9");
    ic.queue = 2;
    let (_ex, q) = Exporter::new(&ic).unwrap();
    st.attach(q.clone());
    for i in 0..5u8 {
        let f = udp_frame(
            None,
            (IpAddr::from([10, 0, 0, i]), 9),
            ("10.9.9.9".parse().unwrap(), 9),
            1,
        );
        st.apply(&at(SEC), &f, &parsed(&f));
    }
    st.flush(&mut || {});
    let counters: HashMap<_, _> = st.counters().into_iter().collect();
    assert_eq!(
        (counters["forced_end"], counters["records_dropped"]),
        (5, 3)
    );
    st.flush(&mut || {});
    assert_eq!(st.counters()[3].1, 5, "a second flush exports nothing");
    let lone = FlowStatsStage::new(&c, None).unwrap();
    let f = udp_frame(
        None,
        ("10.0.0.1".parse().unwrap(), 9),
        ("10.9.9.9".parse().unwrap(), 9),
        1,
    );
    lone.apply(&at(SEC), &f, &parsed(&f));
    lone.flush(&mut || {});
    assert_eq!(lone.counters()[5], ("records_dropped", 1));
}

fn config_error(name: &str, pipeline: &str, ipfix: &str) -> String {
    let dir = temp_dir(&format!("fs-bad-{name}"));
    let p: PathBuf = dir.join("bad.yaml");
    std::fs::write(
        &p,
        format!(
            "ports:\n  - name: g\n    gen: {{ count: 10 }}\npipeline: {pipeline}\n{ipfix}executor: {{ kind: cpu }}\n"
        ),
    )
    .unwrap();
    let e = pipeline::config::load(&p)
        .err()
        .unwrap_or_else(|| panic!("{name}: accepted"));
    let _ = std::fs::remove_dir_all(&dir);
    e.to_string()
}

#[test]
fn config_errors_name_file_line_and_key() {
    let ok_ipfix = "ipfix: { collector: '127.0.0.1:4739' }\n";
    let cases: [(&str, &str, &str, &str); 10] = [
        (
            "no-ipfix",
            "[parse, { flow_stats: { entries: 64 } }]",
            "",
            "bad.yaml:4:",
        ),
        ("no-stage", "[parse, count]", ok_ipfix, "key `ipfix`"),
        (
            "no-entries",
            "[parse, { flow_stats: {} }]",
            ok_ipfix,
            "key `pipeline[1].flow_stats.entries`",
        ),
        (
            "entries-with-conntrack",
            "[parse, { conntrack: { entries: 64 } }, { flow_stats: { entries: 64 } }]",
            ok_ipfix,
            "key `pipeline[2].flow_stats.entries`",
        ),
        (
            "entries-12",
            "[parse, { flow_stats: { entries: 12 } }]",
            ok_ipfix,
            "multiple of 8",
        ),
        (
            "active-0",
            "[parse, { flow_stats: { entries: 64, active_timeout_s: 0 } }]",
            ok_ipfix,
            "flow_stats.active_timeout_s",
        ),
        (
            "bad-port",
            "[parse, { flow_stats: { entries: 64 } }]",
            "ipfix: { collector: '10.0.0.1:70000' }\n",
            "key `ipfix.collector`",
        ),
        (
            "no-port",
            "[parse, { flow_stats: { entries: 64 } }]",
            "ipfix: { collector: '127.0.0.1' }\n",
            "expected host:port",
        ),
        (
            "v6-brackets",
            "[parse, { flow_stats: { entries: 64 } }]",
            "ipfix: { collector: '::1:4739:1' }\n",
            "brackets",
        ),
        (
            "unknown-key",
            "[parse, { flow_stats: { entries: 64 } }]",
            "ipfix: { collector: '127.0.0.1:4739', colector: 1 }\n",
            "colector",
        ),
    ];
    for (name, pipeline, ipfix, want) in cases {
        let e = config_error(name, pipeline, ipfix);
        assert!(e.contains("bad.yaml:"), "{name}: {e}");
        assert!(e.contains(want), "{name}: want {want:?} in {e}");
    }
    // Two flow_stats stages; a small MTU; a zero queue.
    let e = config_error(
        "two",
        "[parse, { flow_stats: { entries: 64 } }, { flow_stats: { entries: 64 } }]",
        ok_ipfix,
    );
    assert!(e.contains("at most one"), "{e}");
    let e = config_error(
        "mtu",
        "[parse, { flow_stats: { entries: 64 } }]",
        "ipfix: { collector: '127.0.0.1:4739', mtu: 100 }\n",
    );
    assert!(e.contains("key `ipfix.mtu`"), "{e}");
    let e = config_error(
        "queue",
        "[parse, { flow_stats: { entries: 64 } }]",
        "ipfix: { collector: '127.0.0.1:4739', queue: 0 }\n",
    );
    assert!(e.contains("key `ipfix.queue`"), "{e}");
}

/// The GPU executor runs flow_stats with a table of its own (no conntrack): the kernel's stage
/// is `pw_stage_flow_stats_own`, which keeps its per-queue state in flow order (an ordered
/// stage), with its table and ended-flow ring as its per-queue state; over conntrack's tables
/// it is the stage that does nothing per frame (docs/flow-export-gpu.md). Beside another stage
/// that keeps per-queue flow state (rate_limit) it takes the first channel of the kernel's
/// order, rate_limit the second; a third such stage is refused (`auto` takes the CPU).
#[test]
fn the_gpu_executor_runs_flow_stats_with_a_table_of_its_own() {
    use pipeline::internal::executor::gpu::compose::stage_specs;
    use pktwarp_kernels::codegen::{generate, Target};
    let dir = temp_dir("fs-gpu");
    let p = dir.join("gpu.yaml");
    let config = |pipeline: &str, kind: &str| {
        format!(
            "ports:\n  - name: g\n    gen: {{ count: 10 }}\npipeline: {pipeline}\n\
             ipfix: {{ collector: '127.0.0.1:4739' }}\nexecutor: {{ kind: {kind} }}\n\
             metrics: {{ enabled: false }}\n"
        )
    };
    let prepared = |pipeline: &str| {
        std::fs::write(&p, config(pipeline, "auto")).unwrap();
        let cfg = pipeline::config::load(&p).unwrap_or_else(|e| panic!("{e}"));
        daemon::prepare(cfg).unwrap_or_else(|e| panic!("{e:#}"))
    };
    let own = prepared("[parse, { flow_stats: { entries: 64 } }, count]");
    assert_eq!(own.pipeline.gpu_refusal(), None);
    assert!(
        !own.choice.reason.contains("flow_stats"),
        "{}",
        own.choice.reason
    );
    let state = own.pipeline.stages[1].gpu_queue_state();
    assert_eq!(state.len(), 1, "the own table and ring per queue");
    let table = pktwarp_flow::bytes_needed(64) as usize;
    let ring = pktwarp_flow::ring::ring_bytes(pktwarp_flow::ENDED_CAP as u32);
    assert_eq!(state[0].bytes, table + ring);
    let (specs, _) = stage_specs(&own.pipeline).expect("specs");
    let src = generate(&specs, Target::Gpu).expect("source");
    assert!(src.contains("pw_stage_flow_stats_own(f, m, v"), "{src}");
    assert!(src.contains("#define PW_PIPELINE_ORDERED 1"), "{src}");
    // Over conntrack's tables: the stage of no work, no state of its own.
    let over = prepared("[parse, { conntrack: { entries: 64 } }, { flow_stats: {} }, count]");
    assert_eq!(over.pipeline.gpu_refusal(), None);
    assert!(over.pipeline.stages[2].gpu_queue_state().is_empty());
    let (specs, _) = stage_specs(&over.pipeline).expect("specs");
    let src = generate(&specs, Target::Gpu).expect("source");
    assert!(src.contains("pw_stage_flow_stats(f, m, v"), "{src}");
    assert!(!src.contains("pw_stage_flow_stats_own("), "{src}");
    // Two stages with per-queue flow state: one kernel, rate_limit on the second channel.
    let rl = "{ rate_limit: { entries: 64, rules: [{ name: a, key: src, rate_pps: 10 }] } }";
    let both = prepared(&format!(
        "[parse, {{ flow_stats: {{ entries: 64 }} }}, {rl}]"
    ));
    assert_eq!(both.pipeline.gpu_refusal(), None);
    let (specs, _) = stage_specs(&both.pipeline).expect("specs");
    let src = generate(&specs, Target::Gpu).expect("source");
    assert!(src.contains("#define PW_ORDER_CH_RATE_LIMIT 1u"), "{src}");
    // Three: refused naming the third, so `auto` takes the CPU.
    let three = prepared(&format!(
        "[parse, {{ flow_stats: {{ entries: 64 }} }}, {rl}, {rl}]"
    ));
    let why = three.pipeline.gpu_refusal().expect("three ordered stages");
    assert!(
        why.contains("at most 2") && why.contains("`flow_stats`"),
        "{why}"
    );
    assert_eq!(three.choice.name, "cpu", "{}", three.choice.reason);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shipped configs/flow-export.yaml (the stateful firewall with flow_stats on conntrack's
/// table), to nfcapd: every flow conntrack made is at nfdump, and every conversation equals
/// tshark's but those of frames conntrack found invalid, which make no flow (one out-of-state
/// frame each from outside).
#[test]
fn the_shipped_flow_export_config_reaches_nfdump_as_tshark_counts() {
    let test = "the_shipped_flow_export_config_reaches_nfdump_as_tshark_counts";
    if !tools(test) {
        return;
    }
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs"));
    let pcap = root.join("stateful-firewall.pcap");
    let dir = temp_dir("fs-shipped");
    let nf = Nfcapd::start("fs-shipped-nf");
    let text = std::fs::read_to_string(root.join("flow-export.yaml")).unwrap();
    let mut edited = text.clone();
    for (from, to) in [
        ("\"127.0.0.1:4739\"", format!("\"127.0.0.1:{}\"", nf.port)),
        (
            "path: stateful-firewall.pcap",
            format!("path: {}", pcap.display()),
        ),
        ("rules: rules/", format!("rules: {}/rules/", root.display())),
    ] {
        assert!(edited.contains(from), "flow-export.yaml still has {from}");
        edited = edited.replace(from, &to);
    }
    let cfg = dir.join("flow-export.yaml");
    std::fs::write(&cfg, edited + "metrics: { listen: '127.0.0.1:0' }\n").unwrap();
    let (s, _) = run_config(&cfg, &templates_sent);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    let ct = |name: &str| {
        let c = s
            .custom_stages
            .iter()
            .find(|c| c.name == "conntrack")
            .unwrap();
        c.counters.iter().find(|x| x.0 == name).unwrap().1
    };
    let flows = nf.stop_and_read();
    assert_eq!(flows.len() as u64, ct("created"), "a record per flow");
    let got = nfdump_convs(&flows);
    let want = tshark_convs(&pcap, &link_bytes(&pcap));
    let mut missing = 0;
    for (k, w) in &want {
        match got.get(k) {
            Some(g) => assert_eq!(g, w, "conversation {k:?}: nfdump vs tshark"),
            None => {
                assert_eq!(w[0].0 + w[1].0, 1, "{k:?}: a conversation without a flow");
                missing += 1;
            }
        }
    }
    assert_eq!(missing, 10, "the out-of-state frames from outside");
    assert!(missing <= ct("invalid"));
    assert_eq!(want.len(), 60);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The exporter is set up once: a reload that changes the `ipfix:` section says it needs a
/// restart.
#[test]
fn a_changed_ipfix_section_needs_a_restart() {
    let dir = temp_dir("fs-reload");
    let path = dir.join("r.yaml");
    let text = |domain: u32| {
        format!(
            "ports:\n  - name: g\n    gen: {{ count: 10 }}\n\
             pipeline: [parse, {{ flow_stats: {{ entries: 64 }} }}]\nexecutor: {{ kind: cpu }}\n\
             ipfix: {{ collector: '127.0.0.1:4739', observation_domain: {domain} }}\n"
        )
    };
    std::fs::write(&path, text(1)).unwrap();
    let cfg = pipeline::config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap_or_else(|e| panic!("{e}"));
    let state = pipeline::control::ControlState::new(None);
    let r = pipeline::internal::control::reload::Reloader::new(&path, p.pipeline.clone(), state)
        .with_baseline(&p.cfg);
    std::fs::write(&path, text(2)).unwrap();
    let got = r.reload("test").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.restart_needed, ["ipfix"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Idle flows leave during the run: with every timeout at 1 s, the control thread's sweep (the
/// queue's receive clock moved on at wall-clock speed after the capture's last frame) exports
/// each flow as idle (UDP, ICMP) or ended (TCP with FIN or RST) before shutdown, none as forced;
/// nfdump still equals tshark.
#[test]
fn idle_flows_are_exported_by_the_control_threads_sweep_before_shutdown() {
    let test = "idle_flows_are_exported_by_the_control_threads_sweep_before_shutdown";
    if !tools(test) {
        return;
    }
    let dir = temp_dir("fs-idle");
    let pcap = dir.join("gen.pcap");
    generated_capture(&pcap);
    let keys = [
        "tcp_syn_sent",
        "tcp_syn_recv",
        "tcp_established",
        "tcp_fin_wait",
        "tcp_close_wait",
        "tcp_last_ack",
        "tcp_time_wait",
        "tcp_close",
        "tcp_syn_sent2",
        "udp_unreplied",
        "udp_replied",
        "icmp",
        "other",
    ];
    let timeouts: Vec<String> = keys.iter().map(|k| format!("{k}: 1")).collect();
    let pipeline = format!(
        "[parse, {{ flow_stats: {{ entries: 1024, timeouts: {{ {} }} }} }}]",
        timeouts.join(", ")
    );
    let c = |m: &str, name: &str| {
        metric(
            m,
            &format!(
                r#"pktwarp_stage_counter_total{{stage="flow_stats",position="1",counter="{name}"}}"#
            ),
        )
    };
    // 6 TCP flows (5 closed with FIN, 1 with RST), 2 UDP, 1 ICMP echo.
    // (The sweep makes the records, the exporter's poll after it in the same round sends them.)
    let all_out = |m: &str| metric(m, "pktwarp_ipfix_records_exported_total") >= 9.0;
    let (n, metrics) = daemon_export_matches_tshark(&pcap, "fs-idle", &pipeline, &all_out);
    assert_eq!(n, 8);
    assert_eq!(c(&metrics, "end_of_flow"), 6.0, "{metrics}");
    assert_eq!(c(&metrics, "idle_timeout"), 3.0, "{metrics}");
    assert_eq!(c(&metrics, "forced_end"), 0.0, "{metrics}");
    assert_eq!(
        metric(&metrics, "pktwarp_ipfix_records_exported_total"),
        9.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}
