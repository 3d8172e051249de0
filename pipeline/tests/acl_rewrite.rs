//! ACL rule actions that rewrite (`set: { dscp, dst_mac, port }`) and the steering mark (software
//! steering's, or one the receiving port delivered, as a NIC's rte_flow MARK) carried to
//! the stages (`PacketMeta::steer_mark`):
//! - through the daemon (CPU executor): the rewritten frames go to the rule's port, tshark reads
//!   the DSCP and destination MAC back with every checksum valid;
//! - the CUDA stages compiled for the host (`pw_stage_acl_rw`, `pw_stage_parse`'s mark, a user
//!   stage that reads the mark) equal `Pipeline::run_burst_mut` frame by frame (bytes, metadata,
//!   verdict) and counter by counter;
//! - a `set.port` the config lacks is an error naming the rule file, line and key, the same from
//!   `pktwarp validate`'s path (`daemon::build_pipeline`) as from `daemon::prepare`;
//! - a reload that brings rewrite actions in or takes them out is refused (restart needed); one
//!   that keeps them swaps the tables, new rewrites included;
//! - a steering rule's mark reaches a user stage through the CPU executor's ingest.

mod tshark_common;
use tshark_common::tshark;

use pipeline::internal::testdata::capture_frames;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pipeline::burst::{Burst, FrameDesc};
use pipeline::config;
use pipeline::counters::QueueCounters;
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::port::gen::{build_frame, FrameSpec};
use pipeline::internal::port::pcap::{CaptureWriter, WriteFormat};
use pipeline::internal::stage::acl::AclStage;
use pipeline::internal::stage::{
    BuiltStage, CustomStage, GpuStage, GpuStageKind, Pipeline, Stage, StageFactory, StageRegistry,
};
use pipeline::meta::PacketMeta;
use pipeline::port::{PortError, RxPort, RxStatus};
use pipeline::verdict::{Action, DropReason, Verdict};
use pipeline::wire::ipv4;
use pktwarp_kernels::host::{AclSel, HostFrame, HostPipeline, META_BYTES, VERDICT_BYTES};
use pktwarp_kernels::{StageKind, StageSpec};

const RULES: &str = "rules:
  - name: voice
    proto: udp
    dst_port: 5060
    action: pass
    set: { dscp: 46, dst_mac: '02:00:00:00:00:aa', port: alt }
  - name: web
    proto: tcp
    dst_port: 80
    action: [mirror, {mark: 9}]
    set: { dscp: 10, port: out }
  - name: telnet
    proto: tcp
    dst_port: 23
    action: drop
  - name: v6-mac
    dst: '2001:db8::/32'
    action: to-host
    set: { dst_mac: '02:00:00:00:00:bb' }
  - name: plain
    proto: tcp
    dst_port: 443
    action: pass
";

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-aclrw-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Frames that hit every rule and none: IPv4 and IPv6, UDP 5060, TCP 80 / 23 / 443 / 8080,
/// a VLAN-tagged one, an ARP-sized non-IP frame and a cut IPv4 header (parse error).
fn frames() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let (a4, b4) = ("10.0.0.1".parse().unwrap(), "192.0.2.7".parse().unwrap());
    let (a6, b6) = (
        "2001:db8::1".parse().unwrap(),
        "2001:db8:1::2".parse().unwrap(),
    );
    let (c6, d6) = (
        "2001:db9::1".parse().unwrap(),
        "2001:db9::2".parse().unwrap(),
    );
    for (i, (s, d)) in [(a4, b4), (a6, b6), (c6, d6)].into_iter().enumerate() {
        for (proto, port) in [
            (17u8, 5060u16),
            (6, 80),
            (6, 23),
            (6, 443),
            (6, 8080),
            (17, 53),
        ] {
            let mut spec = FrameSpec::tcp(s, d, 1000 + i as u16, port, 90 + 10 * i as u16);
            spec.proto = proto;
            if port == 443 {
                spec.vlan = Some(7);
            }
            let mut f = build_frame(&spec);
            // ECN bits set on some, so a DSCP rewrite must keep them.
            if f[12..14] == [0x08, 0x00] && port % 2 == 0 {
                let mut p = ipv4::Packet::new_checked(&mut f[14..]).unwrap();
                p.set_tos(2);
                p.fill_checksum();
            }
            v.push(f);
        }
    }
    let mut arp = vec![0xffu8; 12];
    arp.extend_from_slice(&[0x08, 0x06]);
    arp.resize(60, 0);
    v.push(arp);
    let mut cut = v[0].clone();
    cut.truncate(30);
    v.push(cut);
    v
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut w = CaptureWriter::create(path, WriteFormat::Pcap, 65535).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(f, f.len() as u32, i as u64 * 1000).unwrap();
    }
    w.flush().unwrap();
}

/// A config in `dir`: `in` receives `in.pcap`, `out` (default output) and `alt` transmit.
fn write_config(dir: &Path, extra: &str, pipeline: &str) -> PathBuf {
    std::fs::write(dir.join("rules.yaml"), RULES).unwrap();
    let text = format!(
        "ports:\n  - name: in\n    pcap: {{ rx: {{ path: in.pcap }} }}\n\
         \x20 - name: out\n    pcap: {{ tx: {{ path: out.pcap }} }}\n\
         \x20 - name: alt\n    pcap: {{ tx: {{ path: alt.pcap }} }}\n\
         \x20 - name: mir\n    pcap: {{ tx: {{ path: mir.pcap }} }}\n\
         queues: {{ count: 1, burst: 8 }}\n{extra}\
         pipeline:\n{pipeline}\
         executor: {{ kind: cpu }}\n\
         output: {{ port: out, mirror: mir, to_host: {{ pcap: host.pcap }} }}\n"
    );
    let path = dir.join("c.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

const ACL_PIPELINE: &str = "  - parse\n  - acl: { rules: rules.yaml }\n  - count\n";

fn run_config(path: &Path, registry: &StageRegistry) -> daemon::Summary {
    let cfg = config::load(path).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare_with(cfg, registry).unwrap_or_else(|e| panic!("{e:#}"));
    let ports = daemon::open_ports(&p.cfg).unwrap();
    let shared = CpuShared::new(&p.cpu_spec());
    daemon::run_cpu(&p, &shared, ports)
}

#[test]
fn through_the_daemon_rewritten_frames_go_to_their_port_and_tshark_reads_them() {
    let dir = tmpdir("daemon");
    let input = frames();
    write_pcap(&dir.join("in.pcap"), &input);
    let s = run_config(
        &write_config(&dir, "", ACL_PIPELINE),
        &StageRegistry::default(),
    );
    let metas: Vec<PacketMeta> = input
        .iter()
        .map(|f| pipeline::internal::stage::parse::parse_frame(f))
        .collect();
    let is = |m: &PacketMeta, proto: u8, port: u16| {
        m.status == 0 && m.ip_proto == proto && m.dst_port == port
    };
    // alt: exactly the UDP 5060 frames that no earlier rule took, DSCP 46, the rule's MAC.
    let voice: Vec<usize> = (0..input.len())
        .filter(|&i| is(&metas[i], 17, 5060))
        .collect();
    let alt = capture_frames(&dir.join("alt.pcap")).unwrap();
    assert_eq!(alt.len(), voice.len());
    let fields = [
        "eth.dst",
        "ip.dsfield.dscp",
        "ipv6.tclass.dscp",
        "ip.dsfield.ecn",
        "ip.checksum.status",
        "tcp.checksum.status",
        "udp.checksum.status",
    ];
    let rows = tshark(&dir.join("alt.pcap"), &fields);
    for (r, &i) in rows.iter().zip(&voice) {
        assert_eq!(r[0], "02:00:00:00:00:aa", "frame {i}");
        let v6 = metas[i].ip_version == 6;
        assert_eq!(r[if v6 { 2 } else { 1 }], "46", "frame {i}");
        if !v6 {
            assert_eq!(
                r[3],
                (metas[i].ip_tos & 3).to_string(),
                "frame {i}: ECN kept"
            );
        }
    }
    // out: the passed and mirrored frames (web twice: sent and its mirror copy).
    let out_rows = tshark(&dir.join("out.pcap"), &fields);
    let web = (0..input.len()).filter(|&i| is(&metas[i], 6, 80)).count();
    let v6_doc = |m: &PacketMeta| m.ip_version == 6 && m.dst_ip[0] == 0x2001_0db8;
    let to_host = (0..input.len())
        .filter(|&i| v6_doc(&metas[i]) && !is(&metas[i], 17, 5060) && !is(&metas[i], 6, 80))
        .filter(|&i| !is(&metas[i], 6, 23))
        .count();
    let dropped = (0..input.len())
        .filter(|&i| metas[i].status != 0 || is(&metas[i], 6, 23))
        .count();
    assert_eq!(s.rx_frames, input.len() as u64);
    let plain = input.len() - voice.len() - web - to_host - dropped;
    assert_eq!(out_rows.len(), plain + web, "out.pcap frames");
    let dscp10 =
        |rows: &[Vec<String>]| rows.iter().filter(|r| r[1] == "10" || r[2] == "10").count();
    assert_eq!(dscp10(&out_rows), web, "the web frames carry DSCP 10");
    // The mirror copies are of the rewritten frames.
    let mir = tshark(&dir.join("mir.pcap"), &fields);
    assert_eq!((mir.len(), dscp10(&mir)), (web, web), "mirror copies");
    // to-host frames got their MAC (the slow path sees the rewritten frame).
    let host = tshark(&dir.join("host.pcap"), &fields);
    assert_eq!(host.len(), to_host);
    assert!(host.iter().all(|r| r[0] == "02:00:00:00:00:bb"), "{host:?}");
    for (file, rows) in [
        ("alt", &rows),
        ("out", &out_rows),
        ("mir", &mir),
        ("host", &host),
    ] {
        for r in rows.iter() {
            assert!(
                r[4..].iter().all(|c| c != "0"),
                "{file}: a bad checksum: {r:?}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn unknown_set_port_is_an_error_naming_file_line_and_key_in_validate_and_run() {
    let dir = tmpdir("badport");
    write_pcap(&dir.join("in.pcap"), &frames()[..2]);
    let path = write_config(&dir, "", ACL_PIPELINE);
    for (bad, line) in [("port: alt", 6), ("port: out }", 11)] {
        let to = bad.replace("alt", "nowhere").replace("out", "in");
        std::fs::write(dir.join("rules.yaml"), RULES.replacen(bad, &to, 1)).unwrap();
        let cfg = config::load(&path).unwrap();
        // `pktwarp validate` builds the pipeline with daemon::build_pipeline_with.
        let v = format!(
            "{:#}",
            daemon::build_pipeline(&cfg)
                .err()
                .expect("validate refuses")
        );
        let r = format!("{:#}", daemon::prepare(cfg).err().expect("run refuses"));
        assert_eq!(v, r);
        let want = format!("rules.yaml:{line}:");
        assert!(v.contains(&want) && v.contains("set.port"), "{v}");
        // `in` only receives: it is no output port.
        assert!(
            v.contains("ports with a transmit side: out, alt, mir"),
            "{v}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

fn pipeline_of(dir: &Path) -> Pipeline {
    let cfg = config::load(&write_config(dir, "", ACL_PIPELINE)).unwrap();
    daemon::build_pipeline(&cfg).unwrap()
}

#[test]
fn a_reload_that_adds_or_removes_rewrites_needs_a_restart() {
    let dir = tmpdir("reload");
    let p = pipeline_of(&dir);
    assert!(
        p.rewrites(),
        "an acl with set: makes the pipeline rewriting"
    );
    let tx = vec!["out".to_string(), "alt".to_string()];
    let load = |text: &str| {
        std::fs::write(dir.join("new.yaml"), text).unwrap();
        AclStage::load_for(
            &dir.join("new.yaml"),
            flow_rules::acl::RuleFormat::Yaml,
            Action::Pass,
            Some(&tx),
        )
        .unwrap()
    };
    let plain = load("rules:\n  - { proto: tcp, dst_port: 23, action: drop }\n");
    let e = p.reload_acl(plain).unwrap_err().to_string();
    assert!(
        e.contains("restart needed") && e.contains("new.yaml"),
        "{e}"
    );
    assert_eq!(p.generation(), 0);
    // Keeping rewrites: the new ones are in force.
    let g = p
        .reload_acl(load(
            "rules:\n  - { action: pass, set: { dscp: 3, port: alt } }\n",
        ))
        .unwrap();
    assert_eq!(g, 1);
    let f = build_frame(&FrameSpec::tcp(
        "10.0.0.1".parse().unwrap(),
        "10.0.0.2".parse().unwrap(),
        1,
        2,
        80,
    ));
    let mut burst = Burst::default();
    burst.push_with_room(
        &f,
        FrameDesc {
            len: f.len() as u32,
            wire_len: f.len() as u32,
            ..Default::default()
        },
        0,
    );
    let (mut m, mut v) = (Vec::new(), Vec::new());
    p.run_burst_mut(&mut burst, &mut m, &mut v, &QueueCounters::new(3, 1));
    assert_eq!((v[0].out_port, m[0].ip_tos >> 2), (1, 3));
    assert!(ipv4::Packet::new_checked(&burst.frame(0)[14..])
        .unwrap()
        .verify_checksum());
    // And a rewriting pipeline refuses a plain one the other way round too.
    let q = {
        std::fs::write(dir.join("rules.yaml"), "rules:\n  - { action: pass }\n").unwrap();
        let cfg = config::load(&dir.join("c.yaml")).unwrap();
        daemon::build_pipeline(&cfg).unwrap()
    };
    assert!(!q.rewrites());
    let e = q
        .reload_acl(load("rules:\n  - { action: pass, set: { dscp: 3 } }\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("restart needed"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A user stage that reads the steering mark: a frame marked 7 is dropped, any other mark is
/// put in the verdict's mark (+ 1000), and the marked frames are counted.
struct MarkProbe {
    marked: Arc<AtomicU64>,
}

impl CustomStage for MarkProbe {
    fn process(&self, _frame: &[u8], meta: &PacketMeta, v: &mut Verdict) {
        if meta.steer_mark == 0 {
            return;
        }
        self.marked.fetch_add(1, Ordering::Relaxed);
        if meta.steer_mark == 7 {
            v.action = Action::Drop;
        } else {
            v.mark = meta.steer_mark + 1000;
        }
    }
}

const PROBE_CUDA: &str = "PW_DEVICE void mark_probe(pw_frame *f, pw_packet_meta *m, pw_verdict *v,
                        const void *p, pw_stage_counters *c) {
    (void)f; (void)p; (void)c;
    if (m->steer_mark == 0u) return;
    if (m->steer_mark == 7u) v->action = (uint8_t)PW_ACTION_DROP;
    else v->mark = m->steer_mark + 1000u;
}
";

struct ProbeFactory(Arc<AtomicU64>);

impl StageFactory for ProbeFactory {
    fn build(&self, _options: &serde_json::Value) -> anyhow::Result<BuiltStage> {
        Ok(BuiltStage {
            cpu: Arc::new(MarkProbe {
                marked: self.0.clone(),
            }),
            gpu: Some(GpuStage {
                source: PROBE_CUDA.into(),
                function: "mark_probe".into(),
                params: Vec::new(),
                counter_names: Vec::new(),
                buffers: Vec::new(),
            }),
        })
    }
}

/// A rule set whose `set:` names only `port` routes without writing: the pipeline is not a
/// rewriting one (frames stay read-only, and the zero-copy paths send them as they arrived),
/// each matching frame still goes to its port, the same on the burst-wise and frame-by-frame
/// runs; a reload to a set that writes bytes needs a restart.
#[test]
fn a_rule_set_that_only_routes_leaves_the_frames_read_only() {
    let dir = tmpdir("route-only");
    let p = pipeline_of(&dir);
    std::fs::write(
        dir.join("rules.yaml"),
        "rules:\n  - { proto: tcp, dst_port: 80, action: pass, set: { port: alt } }\n\
         \x20 - { proto: tcp, dst_port: 23, action: drop }\n",
    )
    .unwrap();
    let cfg = config::load(&dir.join("c.yaml")).unwrap();
    let q = daemon::build_pipeline(&cfg).unwrap();
    assert!(p.rewrites(), "dscp / dst_mac: a rewriting pipeline");
    assert!(!q.rewrites(), "set: {{ port }} alone writes no frame");
    let mut burst = Burst::default();
    let all = frames();
    for f in &all {
        let d = FrameDesc {
            len: f.len() as u32,
            wire_len: f.len() as u32,
            ..Default::default()
        };
        burst.push_with_room(f, d, 0);
    }
    let (mut m, mut v) = (Vec::new(), Vec::new());
    q.run_burst(&burst, &mut m, &mut v, &QueueCounters::new(3, 1));
    let mut routed = 0;
    for (i, (f, v)) in all.iter().zip(&v).enumerate() {
        assert_eq!(burst.frame(i), f.as_slice(), "frame {i} unchanged");
        let web = m[i].ip_proto == 6 && m[i].dst_port == 80;
        if web {
            routed += 1;
            assert_eq!((v.action, v.out_port), (Action::Pass, 1), "frame {i}");
        } else {
            assert_eq!(v.out_port, Verdict::OUT_DEFAULT, "frame {i}");
        }
    }
    assert!(routed >= 3, "{routed} frames to port 80");
    // The writable run routes the same frames the same way.
    let (mut m2, mut v2) = (Vec::new(), Vec::new());
    let mut copy = burst.clone();
    q.run_burst_mut(&mut copy, &mut m2, &mut v2, &QueueCounters::new(3, 1));
    assert_eq!(v, v2);
    let tx = vec!["out".to_string(), "alt".to_string()];
    std::fs::write(
        dir.join("new.yaml"),
        "rules:\n  - { action: pass, set: { dscp: 3 } }\n",
    )
    .unwrap();
    let writes = AclStage::load_for(
        &dir.join("new.yaml"),
        flow_rules::acl::RuleFormat::Yaml,
        Action::Pass,
        Some(&tx),
    )
    .unwrap();
    let e = q.reload_acl(writes).unwrap_err().to_string();
    assert!(
        e.contains("only routes") && e.contains("restart needed"),
        "{e}"
    );
}

fn registry(n: &Arc<AtomicU64>) -> StageRegistry {
    let mut r = StageRegistry::default();
    r.register("mark_probe", Arc::new(ProbeFactory(n.clone())))
        .unwrap();
    r
}

#[test]
fn a_steering_mark_reaches_a_user_stage_through_the_cpu_ingest() {
    let dir = tmpdir("steer");
    let input = frames();
    write_pcap(&dir.join("in.pcap"), &input);
    std::fs::write(
        dir.join("steer.yaml"),
        "rules:\n  - match: { udp: { dst_port: 5060 } }\n    actions: [ { mark: 7 } ]\n\
         \x20 - match: { tcp: { dst_port: 80 } }\n    actions: [ { queue: 0 }, { mark: 0x42 } ]\n",
    )
    .unwrap();
    let n = Arc::new(AtomicU64::new(0));
    let path = write_config(
        &dir,
        "steering: { rules: steer.yaml }\n",
        "  - parse\n  - custom: { name: mark_probe }\n  - count\n",
    );
    let s = run_config(&path, &registry(&n));
    let metas: Vec<PacketMeta> = input
        .iter()
        .map(|f| pipeline::internal::stage::parse::parse_frame(f))
        .collect();
    let count = |proto: u8, port: u16| {
        metas
            .iter()
            .filter(|m| m.status == 0 && m.ip_proto == proto && m.dst_port == port)
            .count() as u64
    };
    let (voice, web) = (count(17, 5060), count(6, 80));
    assert!(voice > 0 && web > 0);
    assert_eq!(
        n.load(Ordering::Relaxed),
        voice + web,
        "every marked frame, no other"
    );
    let stage_drops = s
        .drops
        .iter()
        .find(|(r, _)| r == "stage_drop")
        .map_or(0, |(_, n)| *n);
    assert_eq!(
        stage_drops, voice,
        "the frames marked 7 were dropped by the stage"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A receiving port that marks every frame it delivers, as a NIC whose rte_flow MARK rule
/// matched (a DPDK port reads that id from the mbuf into `FrameDesc::mark`).
struct MarkingRx(Box<dyn RxPort>, u32);

impl RxPort for MarkingRx {
    fn rx_burst(&mut self, burst: &mut Burst, max: usize) -> Result<RxStatus, PortError> {
        let before = burst.descs.len();
        let r = self.0.rx_burst(burst, max);
        for d in &mut burst.descs[before..] {
            d.mark = self.1;
        }
        r
    }
    fn name(&self) -> &str {
        self.0.name()
    }
}

#[test]
fn a_port_delivered_mark_reaches_the_stages_unless_software_steering_marks() {
    let dir = tmpdir("nicmark");
    let input = frames();
    write_pcap(&dir.join("in.pcap"), &input);
    // Software steering marks UDP 5060 with 7 (dropped by the probe); it marks nothing else.
    std::fs::write(
        dir.join("steer.yaml"),
        "rules:\n  - match: { udp: { dst_port: 5060 } }\n    actions: [ { mark: 7 } ]\n",
    )
    .unwrap();
    let n = Arc::new(AtomicU64::new(0));
    let path = write_config(
        &dir,
        "steering: { rules: steer.yaml }\n",
        "  - parse\n  - custom: { name: mark_probe }\n  - count\n",
    );
    let cfg = config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare_with(cfg, &registry(&n)).unwrap_or_else(|e| panic!("{e:#}"));
    let mut ports = daemon::open_ports(&p.cfg).unwrap();
    let pcap = ports.rx.remove(0);
    ports.rx.insert(0, Box::new(MarkingRx(pcap, 0x55)));
    let shared = CpuShared::new(&p.cpu_spec());
    let s = daemon::run_cpu(&p, &shared, ports);
    let metas: Vec<PacketMeta> = input
        .iter()
        .map(|f| pipeline::internal::stage::parse::parse_frame(f))
        .collect();
    let parsed = metas.iter().filter(|m| m.status == 0).count() as u64;
    let voice = metas
        .iter()
        .filter(|m| m.status == 0 && m.ip_proto == 17 && m.dst_port == 5060)
        .count() as u64;
    assert!(voice > 0 && parsed > voice);
    // Every frame the stages see carries a mark: the port's (0x55), or the software rule's 7,
    // which wins where it matched (the probe drops exactly those).
    assert_eq!(n.load(Ordering::Relaxed), parsed, "every frame marked");
    let stage_drops = s
        .drops
        .iter()
        .find(|(r, _)| r == "stage_drop")
        .map_or(0, |(_, n)| *n);
    assert_eq!(stage_drops, voice, "software mark 7 over the port's 0x55");
    let host = capture_frames(&dir.join("out.pcap")).unwrap();
    assert_eq!(host.len() as u64 + voice, parsed);
    std::fs::remove_dir_all(&dir).ok();
}

/// A receiving port whose NIC steered every frame (the daemon put the config's whole rule set
/// in it): frame k goes to queue k % 4 and carries mark 0x55, and the port says the NIC steers.
struct NicSteeredRx(Box<dyn RxPort>, u32);

impl RxPort for NicSteeredRx {
    fn rx_burst(&mut self, burst: &mut Burst, max: usize) -> Result<RxStatus, PortError> {
        let before = burst.descs.len();
        let r = self.0.rx_burst(burst, max);
        for d in &mut burst.descs[before..] {
            d.queue = (self.1 % 4) as u16;
            d.mark = 0x55;
            self.1 += 1;
        }
        r
    }
    fn name(&self) -> &str {
        self.0.name()
    }
    fn steered_in_nic(&self) -> bool {
        true
    }
}

#[test]
fn a_port_its_nic_steers_keeps_the_nic_queue_and_mark_and_is_not_steered_again() {
    let dir = tmpdir("nicsteered");
    let input = frames();
    write_pcap(&dir.join("in.pcap"), &input);
    // In software these rules would drop UDP 5060 and mark TCP 80 with 7 (dropped by the
    // probe) and put it on queue 0: none of it may happen to frames the NIC steered.
    std::fs::write(
        dir.join("steer.yaml"),
        "rules:\n  - match: { udp: { dst_port: 5060 } }\n    actions: [ drop ]\n\
         \x20 - match: { tcp: { dst_port: 80 } }\n    actions: [ { queue: 0 }, { mark: 7 } ]\n",
    )
    .unwrap();
    let n = Arc::new(AtomicU64::new(0));
    let path = write_config(
        &dir,
        "steering: { rules: steer.yaml }\n",
        "  - parse\n  - custom: { name: mark_probe }\n  - count\n",
    );
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("count: 1,", "count: 4,")).unwrap();
    let cfg = config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare_with(cfg, &registry(&n)).unwrap_or_else(|e| panic!("{e:#}"));
    let mut ports = daemon::open_ports(&p.cfg).unwrap();
    let pcap = ports.rx.remove(0);
    ports.rx.insert(0, Box::new(NicSteeredRx(pcap, 0)));
    let shared = CpuShared::new(&p.cpu_spec());
    let s = daemon::run_cpu(&p, &shared, ports);
    let total = input.len() as u64;
    let drop = |r: &str| s.drops.iter().find(|(k, _)| k == r).map_or(0, |(_, n)| *n);
    assert_eq!(drop("steering_drop"), 0, "not steered again in software");
    assert_eq!(drop("stage_drop"), 0, "no software mark 7");
    let per_queue: Vec<u64> = s.queues.iter().map(|q| q.rx_frames).collect();
    let want: Vec<u64> = (0..4u64).map(|q| (total + 3 - q) / 4).collect();
    assert_eq!(per_queue, want, "each frame on the queue the NIC chose");
    let parsed = input
        .iter()
        .filter(|f| pipeline::internal::stage::parse::parse_frame(f).status == 0)
        .count() as u64;
    assert_eq!(
        n.load(Ordering::Relaxed),
        parsed,
        "every parsed frame has the NIC's mark"
    );
    std::fs::remove_dir_all(&dir).ok();
}

fn verdict_bytes(v: &Verdict) -> [u8; VERDICT_BYTES] {
    let mut b = [0u8; VERDICT_BYTES];
    b[0] = v.action as u8;
    b[1] = v.reason.map_or(0xFF, |r| r as u8);
    b[2..4].copy_from_slice(&v.out_port.to_le_bytes());
    b[4..8].copy_from_slice(&v.rule.to_le_bytes());
    b[8..12].copy_from_slice(&v.mark.to_le_bytes());
    b[16..24].copy_from_slice(&v.send_ns.to_le_bytes());
    b
}

/// The kernel generator's specs of `p` (as the GPU executor builds them: `builtin_spec`) and
/// each stage's parameter block.
fn specs_of(p: &Pipeline) -> (Vec<StageSpec>, Vec<Vec<u8>>) {
    let mut specs = Vec::new();
    let mut params = Vec::new();
    for s in p.gpu_stage_list() {
        match s.kind {
            GpuStageKind::Custom => {
                let g = s.custom.clone().expect("the probe has CUDA");
                specs.push(StageSpec {
                    name: s.name.to_string(),
                    kind: StageKind::Custom {
                        function: g.function,
                        source: g.source,
                        writes_frame: s.custom_writes,
                    },
                });
                params.push(g.params);
            }
            _ => {
                specs.push(s.builtin_spec().expect("a built-in with CUDA"));
                params.push(s.library.map(|l| l.block).unwrap_or_default());
            }
        }
    }
    (specs, params)
}

/// `n` frames of the `gen` port (IMIX sizes, IPv4 and IPv6, a tenth malformed).
fn gen_frames(n: u64) -> Vec<Vec<u8>> {
    let opts = pipeline::internal::port::gen::GenOptions {
        count: Some(n),
        size: pipeline::internal::port::gen::FrameSize::Imix,
        flows: Some(pipeline::internal::port::gen::FlowOptions {
            ipv6_share: 0.25,
            ..Default::default()
        }),
        malformed_ratio: 0.1,
        ..Default::default()
    };
    let mut rx = pipeline::internal::port::gen::GenRx::new(&opts, 0).expect("gen options");
    let mut b = Burst::default();
    let mut out = Vec::new();
    loop {
        let st = pipeline::port::RxPort::rx_burst(&mut rx, &mut b, 64).expect("gen");
        out.extend(b.frames().map(|(_, f)| f.to_vec()));
        b.clear();
        if matches!(st, pipeline::port::RxStatus::End) {
            break;
        }
    }
    out
}

#[test]
fn host_compiled_cuda_equals_the_cpu_with_rewrites_and_marks() {
    let dir = tmpdir("host");
    write_pcap(&dir.join("in.pcap"), &frames()[..1]);
    let n = Arc::new(AtomicU64::new(0));
    let cfg = config::load(&write_config(
        &dir,
        "",
        "  - parse\n  - custom: { name: mark_probe }\n  - acl: { rules: rules.yaml }\n  - count\n",
    ))
    .unwrap();
    let cpu = daemon::build_pipeline_with(&cfg, &registry(&n)).unwrap();
    assert!(cpu.rewrites() && cpu.gpu_refusal().is_none());
    let (specs, params) = specs_of(&cpu);
    assert_eq!(specs[2].kind, StageKind::AclRewrite);
    assert!(pktwarp_kernels::codegen::pipeline_writes(&specs));
    let host = HostPipeline::compile(&specs).unwrap_or_else(|e| panic!("{e}"));
    let acl = cpu.acl().unwrap();
    let mut hits = vec![0u64; acl.rule_count()];
    let sel = AclSel {
        tables: acl.classifier.image().as_ptr() as u64,
        rule_hits: hits.as_mut_ptr() as u64,
        n_rules: acl.rule_count() as u32,
        default_action: acl.default as u8,
        stage_params: 0,
    };
    let c = QueueCounters::new(cpu.stages.len(), acl.rule_count());
    let mut g = [[0u64; 8]; pktwarp_kernels::MAX_STAGES];
    // The crafted frames, the multi-protocol capture and generated IMIX traffic, each with a
    // mark: none, 7 (dropped by the probe), others.
    let mut all: Vec<Vec<u8>> = frames();
    all.extend(pipeline::internal::testdata::multi_proto_frames());
    all.extend(gen_frames(3000));
    let marks = [0u32, 0, 5, 7, 0x1234_5678, 0];
    let (mut rewritten, mut ported, mut dropped_by_mark) = (0, 0, 0);
    for (ci, chunk) in all.chunks(32).enumerate() {
        let mut burst = Burst::default();
        let descs: Vec<FrameDesc> = chunk
            .iter()
            .enumerate()
            .map(|(i, f)| FrameDesc {
                len: f.len() as u32,
                wire_len: f.len() as u32,
                port: (i % 3) as u16,
                mark: marks[(ci + i) % marks.len()],
                ..FrameDesc::default()
            })
            .collect();
        for (f, d) in chunk.iter().zip(&descs) {
            burst.push_with_room(f, *d, 0);
        }
        let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
        cpu.run_burst_mut(&mut burst, &mut metas, &mut verdicts, &c);
        for (i, (f, d)) in chunk.iter().zip(&descs).enumerate() {
            let mut buf = f.clone();
            let mut hf = HostFrame {
                len: f.len(),
                wire_len: d.wire_len,
                port: d.port,
                timestamp_ns: 0,
                ..HostFrame::default()
            };
            let (mut meta, mut v) = ([0xAAu8; META_BYTES], [0x55u8; VERDICT_BYTES]);
            let blocks: Vec<&[u8]> = params.iter().map(Vec::as_slice).collect();
            host.run_frame_marked(
                &mut buf,
                &mut hf,
                d.mark,
                &blocks,
                Some(&sel),
                &mut meta,
                &mut v,
                &mut g,
            );
            buf.truncate(hf.len);
            assert_eq!(&buf[..], burst.frame(i), "frame {ci}/{i} bytes");
            assert_eq!(&meta[..], metas[i].as_bytes(), "frame {ci}/{i} metadata");
            assert_eq!(
                v,
                verdict_bytes(&verdicts[i]),
                "frame {ci}/{i} verdict {:?}",
                verdicts[i]
            );
            if metas[i].status == 0 {
                assert_eq!(metas[i].steer_mark, d.mark);
            }
            rewritten += usize::from(buf != *f);
            ported += usize::from(verdicts[i].out_port != Verdict::OUT_DEFAULT);
            dropped_by_mark += usize::from(verdicts[i].reason == Some(DropReason::StageDrop));
        }
    }
    assert!(
        rewritten > 0 && ported > 0 && dropped_by_mark > 0,
        "{rewritten} {ported} {dropped_by_mark}"
    );
    for (k, s) in cpu.stages.iter().enumerate() {
        assert_eq!(g[k][0], c.stage_frames[k].get(), "frames at stage {k}");
        if let Stage::Acl(_) = s {
            let cpu_hits: Vec<u64> = c.rule_hits.iter().map(|h| h.get()).collect();
            assert_eq!(hits, cpu_hits, "rule hits");
            assert_eq!(g[k][2], c.acl_default.get(), "acl defaults");
        }
    }
    assert_eq!(g[3][1], c.stage_bytes[3].get(), "count bytes");
    std::fs::remove_dir_all(&dir).ok();
}
