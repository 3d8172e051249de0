//! The rewrite stages as GPU library stages (gpu-kernels/cuda/rewrite_stages.cuh on the stage
//! ABI) equal the CPU executor at the pipeline level: each stage list is built from config YAML
//! the way the daemon builds it (`stage::build_for` with the config's `PortNames`), its frames
//! run through `Pipeline::run_burst_mut` (in place, with `Pipeline::frame_room` after each
//! frame, as the CPU executor's ingest leaves it) and through the generated host build of the
//! same list (`HostPipeline::compile` over `compose::stage_set`'s specs, each stage's parameter
//! block from `Stage::gpu_params`, run in place with the same room), and every frame must come
//! out with the same bytes, length, wire length, metadata and verdict (action, drop reason,
//! output port, rule, mark); the stage counters (frames per stage, count bytes, parse errors,
//! respond replies) and the drop counts must agree too. Inputs: generated frames (the
//! multi-protocol capture, `gen` frames) and property-generated bursts (IPv4 / IPv6 / VLAN / ARP / ICMP / ICMPv6, TTL 0 / 1 / 2 / 255,
//! destinations on and off the routes and the responder's addresses, byte damage, cuts).

mod parse_common;

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use pipeline::burst::{Burst, FrameDesc};
use pipeline::counters::QueueCounters;
use pipeline::internal::executor::gpu::compose::{is_composed, stage_set};
use pipeline::internal::port::gen::{build_frame, FrameSpec};
use pipeline::internal::stage::{build_for, Pipeline, Stage, StageRegistry};
use pipeline::verdict::{Action, DropReason, Verdict};
use pipeline::wire::{arp, icmp, ipv4};
use pktwarp_kernels::host::{AclSel, HostFrame, HostPipeline, META_BYTES, VERDICT_BYTES};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};

/// Output ports of the test config: ports with a transmit side, in config order.
const WAN: u16 = 0;
const LAN: u16 = 1;
const OUT: u16 = 2;
const DEFAULT: u16 = Verdict::OUT_DEFAULT;

const ROUTES: &str = "routes:
  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:0a', port: wan }
  - { prefix: 10.1.0.0/16, via: '02:00:00:00:00:0b', port: lan }
  - { prefix: 10.1.2.128/25, via: '02:00:00:00:00:0c', port: out }
  - { prefix: 10.1.2.192/32, via: '02:00:00:00:00:0d', port: lan }
  - { prefix: 192.168.0.0/16, via: '02:00:00:00:00:0e', port: lan }
  - { prefix: '2001:db8::/32', via: '02:00:00:00:00:1a', port: wan }
  - { prefix: '2001:db8:1::/48', via: '02:00:00:00:00:1b', port: lan }
  - { prefix: '2001:db8:1::1/128', via: '02:00:00:00:00:1c', port: wan }
  - { prefix: '2001:db8:1:0:8000::/65', via: '02:00:00:00:00:1d', port: lan }
";

const DEFAULT_ROUTES: &str = "  - { prefix: 0.0.0.0/0, via: '02:00:00:00:00:f4', port: lan }
  - { prefix: '::/0', via: '02:00:00:00:00:f6', port: wan }
";

const RESPOND: &str = "  - respond: { mac: '02:00:00:00:00:99', ipv4: [192.0.2.1, 10.1.2.3], \
                       ipv6: ['2001:db8::1', '2001:db8:1::1'] }";

/// A config file in its own folder: four ports (wan and lan receive and transmit, tgen only
/// receives, out only transmits), the route files beside it, and `pipeline` as its stage list.
fn config(tag: &str, pipeline: &str) -> (pipeline::config::Config, PathBuf) {
    let dir = std::env::temp_dir().join(format!("pw-rwstage-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("routes.yaml"), ROUTES).unwrap();
    std::fs::write(
        dir.join("routes-default.yaml"),
        format!("{ROUTES}{DEFAULT_ROUTES}"),
    )
    .unwrap();
    let v4_only: String = ROUTES
        .lines()
        .filter(|l| !l.contains("2001"))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.join("routes-v4.yaml"), v4_only + "\n").unwrap();
    let rx = pipeline::internal::testdata::multi_proto_pcap();
    let d = dir.display();
    let text = format!(
        "ports:
  - name: wan
    pcap: {{ rx: {{ path: {rx} }}, tx: {{ path: {d}/wan.pcap }} }}
  - name: lan
    pcap: {{ rx: {{ path: {rx} }}, tx: {{ path: {d}/lan.pcap }} }}
  - name: tgen
    gen: {{ count: 1 }}
  - name: out
    pcap: {{ tx: {{ path: {d}/out.pcap }} }}
pipeline:
{pipeline}
executor: {{ kind: cpu }}
output: {{ port: out }}
",
        rx = rx.display()
    );
    let path = dir.join("c.yaml");
    std::fs::write(&path, &text).unwrap();
    let cfg = pipeline::config::load(&path).unwrap_or_else(|e| panic!("{tag}: {e}\n{text}"));
    (cfg, dir)
}

/// One stage list on both sides, and what it has seen.
struct Harness {
    label: String,
    cpu: Pipeline,
    host: HostPipeline,
    params: Vec<Vec<u8>>,
    /// The room each frame has after it (the pipeline's frame room unless a case says less).
    room: usize,
    // The acl stage's tables and rule-hit counters, which `sel` points into.
    _acl: Option<std::sync::Arc<pipeline::internal::stage::acl::AclStage>>,
    hits: Vec<u64>,
    sel: Option<AclSel>,
    cpu_counters: QueueCounters,
    gpu_counters: [[u64; 8]; pktwarp_kernels::MAX_STAGES],
    /// (action, drop reason, out_port) of every frame compared.
    seen: BTreeSet<(u8, u8, u16)>,
    /// Frames whose bytes or length a stage changed.
    rewritten: usize,
    /// Frames given a send time (`pw_verdict.send_ns` != 0).
    timed: usize,
    frames: usize,
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

impl Harness {
    fn new(label: &str, pipeline_yaml: &str, room: Option<usize>) -> Harness {
        let (cfg, _dir) = config(label, pipeline_yaml);
        let stages: Vec<_> = cfg.pipeline.iter().map(|s| s.value.clone()).collect();
        let ports = cfg.port_names();
        assert_eq!(ports.tx, ["wan", "lan", "out"]);
        assert_eq!(ports.ingress_out(), [WAN, LAN, DEFAULT]);
        let cpu = build_for(
            &stages,
            |p| cfg.resolve(p),
            &StageRegistry::default(),
            Some(&ports),
        )
        .unwrap_or_else(|e| panic!("{label}: {e:#}"));
        assert_eq!(
            cpu.gpu_refusal(),
            None,
            "{label}: the GPU executor takes it"
        );
        assert!(
            is_composed(&cpu),
            "{label}: the composed template serves it"
        );
        let set = stage_set(&cpu).unwrap_or_else(|e| panic!("{label}: {e:#}"));
        assert_eq!(set.specs.len(), cpu.stages.len());
        assert!(set.buffers.iter().all(Vec::is_empty), "no stage buffers");
        assert_eq!(
            pktwarp_kernels::codegen::pipeline_writes(&set.specs),
            cpu.rewrites(),
            "{label}: the transport runs frames in place exactly when a stage rewrites"
        );
        for b in &set.params {
            // Device blocks are 256-byte aligned; the stages read u16 / u32 / u64 fields.
            assert!(
                b.is_empty() || b.as_ptr() as usize % 8 == 0,
                "{label}: block alignment"
            );
        }
        let host = HostPipeline::compile(&set.specs).unwrap_or_else(|e| panic!("{label}: {e}"));
        let acl = cpu.acl();
        let n_rules = acl.as_ref().map_or(0, |a| a.rule_count());
        let mut hits = vec![0u64; n_rules];
        let sel = acl.as_ref().map(|a| AclSel {
            tables: a.classifier.image().as_ptr() as u64,
            rule_hits: hits.as_mut_ptr() as u64,
            n_rules: n_rules as u32,
            default_action: a.default as u8,
            stage_params: 0,
        });
        let cpu_counters = QueueCounters::new(cpu.stages.len(), n_rules);
        Harness {
            label: label.to_string(),
            room: room.unwrap_or_else(|| cpu.frame_room()),
            cpu,
            host,
            params: set.params,
            _acl: acl,
            hits,
            sel,
            cpu_counters,
            gpu_counters: [[0; 8]; pktwarp_kernels::MAX_STAGES],
            seen: BTreeSet::new(),
            rewritten: 0,
            timed: 0,
            frames: 0,
        }
    }

    /// Runs `frames` through both sides (bursts of up to 32 on the CPU) and compares them.
    fn check(&mut self, frames: &[(FrameDesc, Vec<u8>)]) -> Result<(), String> {
        for chunk in frames.chunks(32) {
            let mut burst = Burst::default();
            for (d, f) in chunk {
                burst.push_with_room(f, *d, self.room);
            }
            let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
            self.cpu
                .run_burst_mut(&mut burst, &mut metas, &mut verdicts, &self.cpu_counters);
            for (i, (d, f)) in chunk.iter().enumerate() {
                let cpu = (
                    burst.frame(i),
                    burst.descs[i].wire_len,
                    metas[i].as_bytes(),
                    verdict_bytes(&verdicts[i]),
                );
                let (bytes, wire_len, meta, verdict) = self.host_frame(d, f);
                if (&bytes[..], wire_len, &meta, verdict) != cpu {
                    return Err(format!(
                        "{}: frame {f:02x?} (port {}) differs\ncpu: len {} wire {} verdict \
                         {:?} {:?}\n     bytes {:02x?}\ngpu: len {} wire {wire_len} verdict \
                         {verdict:?}\n     bytes {bytes:02x?}\nmeta equal: {}",
                        self.label,
                        d.port,
                        cpu.0.len(),
                        cpu.1,
                        verdicts[i],
                        cpu.3,
                        cpu.0,
                        bytes.len(),
                        &meta == cpu.2
                    ));
                }
                self.seen.insert((
                    verdict[0],
                    verdict[1],
                    u16::from_le_bytes([verdict[2], verdict[3]]),
                ));
                self.rewritten += usize::from(bytes != *f);
                self.timed += usize::from(verdict[16..24] != [0; 8]);
                self.frames += 1;
            }
        }
        Ok(())
    }

    /// One frame through the generated host pipeline, in place in a buffer with the room after
    /// it: (bytes, wire length, metadata, verdict).
    fn host_frame(
        &mut self,
        d: &FrameDesc,
        f: &[u8],
    ) -> (Vec<u8>, u32, [u8; META_BYTES], [u8; VERDICT_BYTES]) {
        let mut buf = f.to_vec();
        buf.resize(f.len() + self.room, 0);
        let mut hf = HostFrame {
            len: f.len(),
            wire_len: d.wire_len,
            port: d.port,
            timestamp_ns: d.timestamp_ns,
            ..HostFrame::default()
        };
        let params: Vec<&[u8]> = self.params.iter().map(Vec::as_slice).collect();
        let mut meta = [0xAAu8; META_BYTES];
        let mut v = [0x55u8; VERDICT_BYTES];
        self.host.run_frame_mut(
            &mut buf,
            &mut hf,
            &params,
            self.sel.as_ref(),
            &mut meta,
            &mut v,
            &mut self.gpu_counters,
        );
        buf.truncate(hf.len);
        (buf, hf.wire_len, meta, v)
    }

    /// The counters of both sides agree, and the frames compared reached every outcome in
    /// `want` ((action, drop reason, out_port)).
    fn finish(&self, want: &[(Action, Option<DropReason>, u16)]) {
        let (l, c, g) = (&self.label, &self.cpu_counters, &self.gpu_counters);
        for (k, s) in self.cpu.stages.iter().enumerate() {
            assert_eq!(g[k][0], c.stage_frames[k].get(), "{l}: frames at stage {k}");
            match s {
                Stage::Count => assert_eq!(g[k][1], c.stage_bytes[k].get(), "{l}: count bytes"),
                Stage::Parse => assert_eq!(
                    g[k][1],
                    c.drop_count(DropReason::ParseError),
                    "{l}: parse errors"
                ),
                Stage::Respond(r) => {
                    assert_eq!(&g[k][1..4], &r.op.counters(), "{l}: replies");
                    assert!(g[k][1..8].iter().skip(3).all(|&x| x == 0));
                }
                Stage::Acl(_) => {
                    let cpu_hits: Vec<u64> = c.rule_hits.iter().map(|h| h.get()).collect();
                    assert_eq!(self.hits, cpu_hits, "{l}: rule hits");
                    assert_eq!(g[k][2], c.acl_default.get(), "{l}: acl defaults");
                }
                // The other rewrite stages count nothing of their own (as on the CPU).
                _ => assert!(g[k][1..].iter().all(|&x| x == 0), "{l}: stage {k} counters"),
            }
        }
        let drops: u64 = DropReason::ALL.iter().map(|r| c.drop_count(*r)).sum();
        let passed = c.passed.get() + c.mirrored.get() + c.to_host.get();
        assert_eq!(
            drops + passed,
            self.frames as u64,
            "{l}: every frame has one verdict"
        );
        for (a, r, port) in want {
            let key = (*a as u8, r.map_or(0xFF, |r| r as u8), *port);
            assert!(
                self.seen.contains(&key),
                "{l}: no frame came out {a:?} {r:?} port {port} (seen {:?})",
                self.seen
            );
        }
        // Without the room a push needs, nothing is rewritten (the corpus run, `want` empty,
        // asks for no coverage: it has no frame for the responder, say).
        if !want.is_empty() && self.room >= self.cpu.frame_room() && self.cpu.rewrites() {
            assert!(self.rewritten > 0, "{l}: no frame was rewritten");
        }
    }
}

/// The corpus frames with descriptors: ports 0..4 in turn (3 is outside the ingress table),
/// wire lengths 0..2 bytes above the captured length; None without the corpus outside CI.
fn corpus() -> Option<Vec<(FrameDesc, Vec<u8>)>> {
    let frames = parse_common::corpus_frames()?;
    assert!(frames.len() > 5000, "{} corpus frames", frames.len());
    let frames = frames
        .into_iter()
        .enumerate()
        .map(|(i, (_, f))| (desc(&f, i), f))
        .collect();
    Some(frames)
}

/// Generated frames with descriptors as [`corpus`]'s: the multi-protocol capture, then 2000
/// `gen` frames (IMIX sizes, a quarter IPv6, a tenth malformed, some VLAN-tagged), each also cut
/// to 20 bytes every seventh.
fn generated() -> Vec<(FrameDesc, Vec<u8>)> {
    let mut frames = pipeline::internal::testdata::multi_proto_frames();
    for vlan in [None, Some(42)] {
        let opts = pipeline::internal::port::gen::GenOptions {
            count: Some(1000),
            size: pipeline::internal::port::gen::FrameSize::Imix,
            flows: Some(pipeline::internal::port::gen::FlowOptions {
                ipv6_share: 0.25,
                ..Default::default()
            }),
            malformed_ratio: 0.1,
            vlan,
            ..Default::default()
        };
        let mut rx = pipeline::internal::port::gen::GenRx::new(&opts, 0).expect("gen options");
        let mut b = Burst::default();
        loop {
            let st = pipeline::port::RxPort::rx_burst(&mut rx, &mut b, 64).expect("gen");
            frames.extend(b.frames().map(|(_, f)| f.to_vec()));
            b.clear();
            if matches!(st, pipeline::port::RxStatus::End) {
                break;
            }
        }
    }
    let cuts: Vec<Vec<u8>> = frames
        .iter()
        .step_by(7)
        .map(|f| f[..f.len().min(20)].to_vec())
        .collect();
    frames.extend(cuts);
    frames
        .into_iter()
        .enumerate()
        .map(|(i, f)| (desc(&f, i), f))
        .collect()
}

fn desc(f: &[u8], i: usize) -> FrameDesc {
    FrameDesc {
        port: (i % 4) as u16,
        len: f.len() as u32,
        wire_len: f.len() as u32 + (i % 3) as u32,
        // Some frames without a receive time (0) and some at the end of the clock (a send time
        // then saturates).
        timestamp_ns: match i % 97 {
            13 => u64::MAX - 5,
            _ => i as u64 * 1000,
        },
        ..FrameDesc::default()
    }
}

const DSTS4: [&str; 9] = [
    "10.9.9.9",
    "10.1.2.3",
    "10.1.2.130",
    "10.1.2.192",
    "10.1.2.193",
    "192.168.5.5",
    "11.0.0.1",
    "192.0.2.1",
    "172.16.0.9",
];
const DSTS6: [&str; 7] = [
    "2001:db8::5",
    "2001:db8::1",
    "2001:db8:1::1",
    "2001:db8:1::2",
    "2001:db8:1:0:8000::5",
    "2001:db8:ff::1",
    "2001:db9::1",
];

/// What one generated frame is.
#[derive(Clone, Debug)]
struct Gen {
    kind: u8,
    dst: u8,
    ttl: u8,
    tos: u8,
    vlan: Option<u16>,
    qinq: bool,
    size: u16,
    icmp_type: u8,
    arp_oper: u16,
    damage: Vec<(u16, u8)>,
    cut: Option<u16>,
}

fn gen_strategy() -> impl Strategy<Value = Gen> {
    (
        (
            0u8..7,
            any::<u8>(),
            prop_oneof![Just(0u8), Just(1), Just(2), Just(255), any::<u8>()],
            any::<u8>(),
            proptest::option::of(any::<u16>()),
            any::<bool>(),
        ),
        (
            60u16..300,
            prop_oneof![Just(8u8), Just(128), Just(0), any::<u8>()],
            prop_oneof![Just(1u16), Just(2), any::<u16>()],
            proptest::collection::vec((any::<u16>(), any::<u8>()), 0..3),
            proptest::option::weighted(0.15, any::<u16>()),
        ),
    )
        .prop_map(
            |((kind, dst, ttl, tos, vlan, qinq), (size, icmp_type, arp_oper, damage, cut))| Gen {
                kind,
                dst,
                ttl,
                tos,
                vlan,
                qinq,
                size,
                icmp_type,
                arp_oper,
                damage,
                cut,
            },
        )
}

/// Kinds: 0 TCP, 1 UDP, 2 ICMP echo, 3 another protocol (over IPv4 or IPv6 by the destination
/// pick's parity), 4 ARP, 5 ICMPv6 echo, 6 TCP over IPv6.
fn gen_frame(g: &Gen) -> Vec<u8> {
    if g.kind == 4 {
        return arp_frame(g);
    }
    let v6 = g.kind >= 5 || (g.kind < 4 && g.dst % 2 == 1);
    let (src, dst): (IpAddr, IpAddr) = if v6 {
        let d = DSTS6[g.dst as usize % DSTS6.len()];
        ("2001:db8:77::50".parse().unwrap(), d.parse().unwrap())
    } else {
        let d = DSTS4[g.dst as usize % DSTS4.len()];
        ("192.0.2.50".parse().unwrap(), d.parse().unwrap())
    };
    let mut spec = FrameSpec::tcp(src, dst, 1000 + u16::from(g.dst), 80, g.size);
    spec.proto = match g.kind {
        1 => 17,
        2 | 5 => {
            if v6 {
                58
            } else {
                1
            }
        }
        3 => 47,
        _ => 6,
    };
    spec.vlan = g.vlan;
    let mut f = build_frame(&spec);
    let l3 = if g.vlan.is_some() { 18 } else { 14 };
    if v6 {
        f[l3 + 7] = g.ttl;
        f[l3] = 0x60 | (g.tos >> 4);
        f[l3 + 1] = (g.tos << 4) | (f[l3 + 1] & 0x0f);
    } else if let Ok(mut p) = ipv4::Packet::new_checked(&mut f[l3..]) {
        p.set_ttl(g.ttl);
        p.set_tos(g.tos);
        p.fill_checksum();
    }
    if matches!(g.kind, 2 | 5) {
        let m = pipeline::internal::stage::parse::parse_frame(&f);
        let l4 = usize::from(m.l4_offset);
        if l4 > 0 && l4 + 8 <= f.len() {
            let ty = if g.icmp_type % 2 == 0 {
                if v6 {
                    128
                } else {
                    8
                }
            } else {
                g.icmp_type
            };
            icmp::Header::new_checked(&mut f[l4..])
                .unwrap()
                .set_type_update_checksum(ty);
        }
    }
    finish_frame(f, g)
}

fn arp_frame(g: &Gen) -> Vec<u8> {
    let target: std::net::Ipv4Addr = DSTS4[g.dst as usize % DSTS4.len()].parse().unwrap();
    let mut f = vec![0xffu8; 6];
    f.extend([2, 0, 0, 0, 0, 7]);
    if let Some(t) = g.vlan {
        f.extend([0x81, 0]);
        f.extend(t.to_be_bytes());
    }
    f.extend([8, 6]);
    let mut a = [0u8; 28];
    arp::Repr {
        oper: g.arp_oper,
        sender_hw: [2, 0, 0, 0, 0, 7],
        sender_ip: [192, 0, 2, 50],
        target_hw: [0; 6],
        target_ip: target.octets(),
    }
    .emit(&mut a)
    .unwrap();
    f.extend(a);
    f.resize(f.len().max(60), 0);
    finish_frame(f, g)
}

/// An outer 802.1ad tag, byte damage and a cut.
fn finish_frame(mut f: Vec<u8>, g: &Gen) -> Vec<u8> {
    if g.qinq {
        f.splice(12..12, [0x88, 0xa8, 0x00, 0x2a]);
    }
    for (at, b) in &g.damage {
        let i = *at as usize % f.len();
        f[i] = *b;
    }
    if let Some(c) = g.cut {
        f.truncate(c as usize % (f.len() + 1));
    }
    f
}

/// Generated frames, then property-generated bursts, through one stage list; then the counters
/// and the outcomes `want` are checked. (The tcpdump corpus goes through every list in
/// `every_stage_list_on_the_corpus`.)
fn run_case(case: &Case) -> Harness {
    let h = RefCell::new(Harness::new(case.label, &case.yaml, case.room));
    if let Err(e) = h.borrow_mut().check(&generated()) {
        panic!("{e}");
    }
    let mut runner = TestRunner::new(RunnerConfig {
        cases: 96,
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    let bursts = proptest::collection::vec(gen_strategy(), 1..24);
    let r = runner.run(&bursts, |gens| {
        let frames: Vec<(FrameDesc, Vec<u8>)> = gens
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let f = gen_frame(g);
                (desc(&f, i + usize::from(g.dst)), f)
            })
            .collect();
        h.borrow_mut().check(&frames).map_err(TestCaseError::fail)
    });
    if let Err(e) = r {
        panic!("{}: generated frames: {e}", case.label);
    }
    h.borrow().finish(&case.want);
    h.into_inner()
}

const PASS: (Action, Option<DropReason>, u16) = (Action::Pass, None, DEFAULT);
const PARSE_ERROR: (Action, Option<DropReason>, u16) =
    (Action::Drop, Some(DropReason::ParseError), DEFAULT);

const NO_ROUTE: (Action, Option<DropReason>, u16) =
    (Action::Drop, Some(DropReason::NoRoute), DEFAULT);
/// A frame `route` sent to wan whose TTL then expired: the drop keeps the output port, as on the
/// CPU.
const EXPIRED: (Action, Option<DropReason>, u16) =
    (Action::Drop, Some(DropReason::TtlExpired), WAN);

/// One stage list under test: its label, pipeline YAML, frame room (None: the list's own) and
/// the outcomes its generated frames must reach.
struct Case {
    label: &'static str,
    yaml: String,
    room: Option<usize>,
    want: Vec<(Action, Option<DropReason>, u16)>,
}

fn case(label: &'static str, yaml: &str, want: &[(Action, Option<DropReason>, u16)]) -> Case {
    Case {
        label,
        yaml: yaml.to_string(),
        room: None,
        want: want.to_vec(),
    }
}

/// Every stage list, by label.
fn cases() -> Vec<Case> {
    let rules = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../configs/rules/inline-filter.rules.yaml"
    ));
    vec![
        case(
            "l2fwd-swap",
            "  - parse\n  - l2fwd: { mac: swap }",
            &[PASS, PARSE_ERROR],
        ),
        case(
            "l2fwd-set",
            "  - parse\n  - l2fwd: { src: '02:00:00:00:00:fe', dst: '02:00:00:00:00:fd' }\n  \
             - l2fwd: { mac: swap, src: '02:00:00:00:00:fc' }",
            &[PASS],
        ),
        case(
            "vlan-push",
            "  - parse\n  - vlan: { push: { vid: 100, pcp: 5 } }\n  \
             - vlan: { push: { vid: 4095, pcp: 7, tpid: 0x88a8 } }\n  - count",
            &[PASS],
        ),
        Case {
            room: Some(0),
            ..case(
                "vlan-noroom",
                "  - parse\n  - vlan: { push: { vid: 100 } }\n  - count",
                &[(Action::Drop, Some(DropReason::TooLong), DEFAULT)],
            )
        },
        case(
            "vlan-pop",
            "  - parse\n  - vlan: { pop: true }\n  - vlan: { pop: true }\n  - count",
            &[PASS],
        ),
        case(
            "vlan-set",
            "  - parse\n  - vlan: { set: { vid: 7, pcp: 3 } }\n  - vlan: { set: { pcp: 1 } }",
            &[PASS],
        ),
        case(
            "ttl",
            "  - parse\n  - ttl\n  - count",
            &[PASS, (Action::Drop, Some(DropReason::TtlExpired), DEFAULT)],
        ),
        case("dscp", "  - parse\n  - dscp: { set: 46 }", &[PASS]),
        // No stage writes the frame: the composed template without PW_PIPELINE_WRITES.
        case(
            "tx-time",
            "  - parse\n  - tx_time: { delay_ns: 250000 }",
            &[PASS, PARSE_ERROR],
        ),
        // Before a stage that drops (the dropped frames keep their time on both sides), after a
        // route, and twice (the later time wins), at the largest delay.
        case(
            "tx-time-rw",
            "  - parse\n  - tx_time: { delay_ns: 7 }\n  - route: { routes: routes.yaml }\n  \
             - ttl\n  - tx_time: { delay_ns: 60000000000 }\n  - l2fwd: { mac: swap }",
            &[(Action::Pass, None, WAN), NO_ROUTE, EXPIRED],
        ),
        case(
            "route",
            "  - parse\n  - route: { routes: routes.yaml }\n  - ttl",
            &[
                (Action::Pass, None, WAN),
                (Action::Pass, None, LAN),
                (Action::Pass, None, OUT),
                NO_ROUTE,
                EXPIRED,
            ],
        ),
        case(
            "route-default",
            "  - parse\n  - route: { routes: routes-default.yaml }\n  - ttl",
            &[
                (Action::Pass, None, WAN),
                (Action::Pass, None, LAN),
                (Action::Pass, None, OUT),
                NO_ROUTE, // ARP and other frames without an IP destination
                EXPIRED,
            ],
        ),
        // No IPv6 route: the block has no IPv6 tbl24 and every IPv6 frame is no_route.
        case(
            "route-v4",
            "  - parse\n  - route: { routes: routes-v4.yaml }\n  - ttl",
            &[
                (Action::Pass, None, WAN),
                (Action::Pass, None, LAN),
                NO_ROUTE,
            ],
        ),
        case(
            "respond",
            &format!("  - parse\n{RESPOND}\n  - count"),
            &[PASS, (Action::Pass, None, WAN), (Action::Pass, None, LAN)],
        ),
        case(
            "mixed",
            &format!(
                "  - parse\n  - acl: {{ rules: {}, default: pass }}\n  \
                 - route: {{ routes: routes-default.yaml }}\n  - ttl\n  \
                 - vlan: {{ push: {{ vid: 100, pcp: 5 }} }}\n  \
                 - l2fwd: {{ src: '02:00:00:00:00:fe' }}\n  - count",
                rules.display()
            ),
            &[
                (Action::Pass, None, WAN),
                (Action::Pass, None, LAN),
                (Action::Drop, Some(DropReason::AclDrop), DEFAULT),
                NO_ROUTE,
                EXPIRED,
            ],
        ),
        case(
            "order",
            &format!(
                "  - vlan: {{ pop: true }}\n  - parse\n  - dscp: {{ set: 10 }}\n{RESPOND}\n  - count"
            ),
            &[PASS, (Action::Pass, None, WAN)],
        ),
    ]
}

/// Runs the stage list `label` of [`cases`].
fn run_named(label: &str) -> Harness {
    let all = cases();
    let c = all
        .iter()
        .find(|c| c.label == label)
        .unwrap_or_else(|| panic!("no case {label}"));
    run_case(c)
}

#[test]
fn l2fwd_swap() {
    run_named("l2fwd-swap");
}

#[test]
fn l2fwd_set_src_dst_and_swap_then_set() {
    run_named("l2fwd-set");
}

#[test]
fn vlan_push() {
    run_named("vlan-push");
}

#[test]
fn vlan_push_without_room_drops_too_long() {
    run_named("vlan-noroom");
}

#[test]
fn vlan_pop() {
    run_named("vlan-pop");
}

#[test]
fn vlan_set() {
    run_named("vlan-set");
}

#[test]
fn ttl() {
    run_named("ttl");
}

#[test]
fn dscp() {
    run_named("dscp");
}

#[test]
fn tx_time_alone() {
    let h = run_named("tx-time");
    assert!(h.timed > h.frames / 2, "{} of {} timed", h.timed, h.frames);
}

#[test]
fn tx_time_before_and_after_rewrites() {
    let h = run_named("tx-time-rw");
    assert!(h.timed > 0);
}

#[test]
fn route_ttl_without_default_routes() {
    run_named("route");
}

#[test]
fn route_ttl_with_default_routes() {
    run_named("route-default");
}

#[test]
fn route_ttl_ipv4_routes_only() {
    run_named("route-v4");
}

#[test]
fn respond() {
    run_named("respond");
}

#[test]
fn mixed_acl_route_ttl_vlan_count() {
    run_named("mixed");
}

#[test]
fn mixed_order_pop_before_parse_dscp_respond() {
    run_named("order");
}

/// The tcpdump corpus (`$PKTWARP_DATA`; required in CI, not run without it elsewhere) through
/// every stage list: frames and counters equal.
#[test]
fn every_stage_list_on_the_corpus() {
    let Some(corpus) = corpus() else { return };
    for c in cases() {
        let mut h = Harness::new(c.label, &c.yaml, c.room);
        if let Err(e) = h.check(&corpus) {
            panic!("{e}");
        }
        h.finish(&[]);
    }
}

#[test]
fn the_shipped_rewrite_configs_run_on_the_gpu_executor() {
    for name in ["l2fwd.yaml", "l3fwd.yaml"] {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs")).join(name);
        let cfg = pipeline::config::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let p = pipeline::daemon::build_pipeline(&cfg).unwrap();
        assert_eq!(p.gpu_refusal(), None, "{name}");
        let set = stage_set(&p).unwrap();
        assert!(
            pktwarp_kernels::codegen::pipeline_writes(&set.specs),
            "{name}"
        );
    }
}
