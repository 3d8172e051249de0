//! `pktwarp verify`: runs the CPU reference (the Rust `parse` stage and the flow-rules classifier,
//! what the CPU executor runs) and the GPU executor on the same frames and compares every frame's
//! full metadata (all 144 bytes), verdict (action, drop reason, rule index, mark), the queue
//! counters and the per-rule hits. Prints the first mismatches in detail; exit code 1 on any.
//!
//! Inputs: `--input PCAP|DIR` (every capture in a folder; non-Ethernet ones are skipped and
//! listed), `--trace FILE` (ClassBench header trace, frames generated from each line) and
//! `--gen N` (N generated frames from random flows, `--malformed` of them broken on purpose).
//! `--rules FILE` adds the `acl` stage (ClassBench or YAML rules).

use anyhow::Context as _;
use flow_rules::abi::ACL_NO_MATCH;
use flow_rules::acl::RuleFormat;
use pipeline::burst::{Burst, FrameDesc};
use pipeline::executor::gpu::abi::{self, QueueCounters, Verdict};
use pipeline::executor::gpu::{
    AclTablesRef, GpuExecutor, GpuOptions, KernelImage, Mode, PipelineDesc, Placement,
};
use pipeline::meta::PacketMeta;
use pipeline::port::pcap::CaptureReader;
use pipeline::port::{RxPort, RxStatus};
use pipeline::stage::acl::AclStage;
use pipeline::verdict::Action;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The kernels build.rs embedded.
pub mod embedded {
    include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
}

/// The kernel image of this binary (prebuilt fatbin when build.rs found the pinned nvcc, and the
/// inlined source for NVRTC either way).
pub fn kernel_image() -> KernelImage {
    KernelImage {
        binary: embedded::KERNEL_BINARY,
        source: embedded::KERNEL_SOURCE,
        origin: embedded::KERNEL_ORIGIN,
    }
}

#[derive(clap::Args, Clone)]
pub struct Args {
    /// A daemon config: its first receiving port is the input, its `acl` stage (rules and
    /// default) and its `queues` (count, burst) are used; the `--input/--trace/--gen/--rules`
    /// options then do not apply.
    #[arg(conflicts_with_all = ["input", "trace", "gen", "rules"])]
    pub config: Option<PathBuf>,
    /// Stop after this many frames (needed for a config whose input never ends).
    #[arg(long)]
    pub limit: Option<u64>,
    /// A pcap/pcapng file, or a folder: every capture in it (recursively).
    #[arg(long, conflicts_with_all = ["trace", "gen"])]
    pub input: Option<PathBuf>,
    /// ClassBench header trace (`.gz` accepted): one frame per line.
    #[arg(long, conflicts_with = "gen")]
    pub trace: Option<PathBuf>,
    /// Generate this many frames from random flows.
    #[arg(long, value_name = "N")]
    pub gen: Option<u64>,
    /// Share of deliberately malformed generated frames (with --gen).
    #[arg(long, default_value_t = 0.05)]
    pub malformed: f64,
    /// Share of IPv6 generated frames (with --gen).
    #[arg(long, default_value_t = 0.2)]
    pub ipv6: f64,
    /// Frame size of generated frames (`--gen`, `--trace`), bytes on the wire.
    #[arg(long, default_value_t = 64)]
    pub size: u16,
    /// ACL rules (ClassBench, or YAML for .yaml/.yml): adds the acl stage.
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// The acl stage drops frames no rule matches (default: pass them).
    #[arg(long)]
    pub default_drop: bool,
    /// GPU modes to check, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "persistent")]
    pub mode: Vec<ModeArg>,
    /// Ring placements to check, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "device")]
    pub placement: Vec<PlacementArg>,
    /// Frames per burst.
    #[arg(long, default_value_t = 256)]
    pub burst: u32,
    /// GPU queues (bursts are spread round-robin).
    #[arg(long, default_value_t = 1)]
    pub queues: usize,
    /// Persistent CTAs per queue.
    #[arg(long, default_value_t = 1)]
    pub ctas: u32,
    /// Mismatches printed in detail.
    #[arg(long, default_value_t = 10)]
    pub show: usize,
    /// Also run the bulk (stage throughput) kernel over every chunk and compare its verdicts.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub bulk: bool,
    /// Write a JSON summary here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// CUDA device index.
    #[arg(long, default_value_t = 0)]
    pub device: u32,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ModeArg {
    Persistent,
    Launch,
    Graph,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum PlacementArg {
    Device,
    Mapped,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Persistent => Mode::Persistent,
            ModeArg::Launch => Mode::Launch,
            ModeArg::Graph => Mode::Graph,
        }
    }
}

impl From<PlacementArg> for Placement {
    fn from(p: PlacementArg) -> Placement {
        match p {
            PlacementArg::Device => Placement::Device,
            PlacementArg::Mapped => Placement::Mapped,
        }
    }
}

/// The acl stage of the CPU executor (`pipeline::stage::acl::AclStage`) and the very bytes of
/// its compiled tables, which the GPU walks.
pub struct Acl {
    pub stage: AclStage,
    pub bytes: Vec<u8>,
    pub n_rules: u32,
}

pub fn load_acl(path: &Path, default: Action) -> anyhow::Result<Acl> {
    let name = path.to_string_lossy();
    let format = if name.ends_with(".yaml") || name.ends_with(".yml") {
        RuleFormat::Yaml
    } else {
        RuleFormat::ClassBench
    };
    let stage = AclStage::load(path, format, default)?;
    let bytes = stage.classifier.image_bytes();
    let n_rules = stage.classifier.header().num_rules;
    Ok(Acl {
        stage,
        bytes,
        n_rules,
    })
}

impl Acl {
    pub fn tables(&self) -> AclTablesRef<'_> {
        AclTablesRef {
            bytes: &self.bytes,
            n_rules: self.n_rules,
        }
    }

    pub fn default_action(&self) -> u8 {
        self.stage.default as u8
    }
}

/// The CPU reference of one frame: what the CPU executor runs (`pipeline::stage::run`): the
/// Rust parse stage (a parse error drops the frame), then the acl stage.
pub fn cpu_reference(frame: &[u8], port: u16, acl: Option<&AclStage>) -> (PacketMeta, Verdict) {
    let mut meta = PacketMeta::default();
    pipeline::stage::parse::parse(frame, &mut meta);
    let ok = meta.status == 0;
    let (mut rule, mut action, mut mark) = (ACL_NO_MATCH, abi::ACTION_PASS, 0u32);
    if ok {
        if let Some(a) = acl {
            let r = a.classify(&meta, port);
            rule = r.rule;
            action = r.action as u8;
            mark = r.mark;
        }
    }
    let v = abi::verdict_of(
        ok,
        abi::PIPE_PARSE | abi::PIPE_DROP_MALFORMED,
        rule,
        action,
        mark,
    );
    (meta, v)
}

/// Where frames come from, a chunk at a time.
pub enum Source {
    Pcaps {
        files: Vec<PathBuf>,
        next: usize,
        reader: Option<CaptureReader>,
        skipped: Vec<String>,
    },
    Port(Box<dyn RxPort>),
}

impl Source {
    pub fn from_args(a: &Args) -> anyhow::Result<Source> {
        if let Some(c) = &a.config {
            let cfg = pipeline::config::load(c)?;
            let mut ports = pipeline::daemon::open_ports(&cfg)?;
            if ports.rx.len() > 1 {
                tracing::warn!(
                    "verify reads the first receiving port (`{}`) of {}",
                    ports.rx_names[0],
                    c.display()
                );
            }
            let port = ports.rx.swap_remove(0);
            if port.expected_frames().is_none() && a.limit.is_none() {
                anyhow::bail!(
                    "{}: port `{}` never ends; give --limit N",
                    c.display(),
                    ports.rx_names[0]
                );
            }
            return Ok(Source::Port(port));
        }
        if let Some(p) = &a.input {
            let mut files = Vec::new();
            collect_captures(p, &mut files)?;
            files.sort();
            if files.is_empty() {
                anyhow::bail!("{}: no pcap/pcapng files", p.display());
            }
            return Ok(Source::Pcaps {
                files,
                next: 0,
                reader: None,
                skipped: Vec::new(),
            });
        }
        let mut g = pipeline::port::gen::GenOptions {
            size: pipeline::port::gen::FrameSize::Fixed(a.size),
            ..Default::default()
        };
        if let Some(t) = &a.trace {
            g.trace = Some(t.clone());
        } else if let Some(n) = a.gen {
            g.count = Some(n);
            g.malformed_ratio = a.malformed;
            g.flows = Some(pipeline::port::gen::FlowOptions {
                ipv6_share: a.ipv6,
                ..Default::default()
            });
        } else {
            anyhow::bail!("give one input: --input PCAP|DIR, --trace FILE or --gen N");
        }
        Ok(Source::Port(Box::new(pipeline::port::gen::GenRx::new(
            &g, 0,
        )?)))
    }

    /// Appends up to `max` frames to `chunk`; false at the end.
    pub fn fill(&mut self, chunk: &mut Burst, max: usize) -> anyhow::Result<bool> {
        match self {
            Source::Port(p) => loop {
                if chunk.len() >= max {
                    return Ok(true);
                }
                match p.rx_burst(chunk, max - chunk.len())? {
                    RxStatus::Frames(_) | RxStatus::Idle => continue,
                    RxStatus::End => return Ok(!chunk.is_empty()),
                }
            },
            Source::Pcaps {
                files,
                next,
                reader,
                skipped,
            } => {
                while chunk.len() < max {
                    if reader.is_none() {
                        let Some(f) = files.get(*next) else {
                            return Ok(!chunk.is_empty());
                        };
                        *next += 1;
                        match CaptureReader::open_ethernet(f) {
                            Ok(r) => *reader = Some(r),
                            Err(e) => {
                                skipped.push(e.to_string());
                                continue;
                            }
                        }
                    }
                    let Some(r) = reader.as_mut() else { continue };
                    match r.next_frame() {
                        Ok(Some(fr)) => {
                            let d = FrameDesc {
                                wire_len: fr.orig_len,
                                timestamp_ns: fr.timestamp_ns,
                                ..Default::default()
                            };
                            chunk.push(fr.data, d);
                        }
                        Ok(None) => *reader = None,
                        Err(e) => {
                            // A damaged file: what was read is checked, the rest is reported.
                            skipped.push(format!("{e} (after some frames)"));
                            *reader = None;
                        }
                    }
                }
                Ok(true)
            }
        }
    }

    pub fn skipped(&self) -> &[String] {
        match self {
            Source::Pcaps { skipped, .. } => skipped,
            Source::Port(_) => &[],
        }
    }
}

fn collect_captures(p: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let md = std::fs::metadata(p).with_context(|| format!("{}", p.display()))?;
    if md.is_file() {
        out.push(p.to_path_buf());
        return Ok(());
    }
    for e in std::fs::read_dir(p).with_context(|| format!("{}", p.display()))? {
        let e = e.with_context(|| format!("{}", p.display()))?;
        let path = e.path();
        if path.is_dir() {
            collect_captures(&path, out)?;
        } else {
            let n = path.to_string_lossy();
            if n.ends_with(".pcap") || n.ends_with(".pcapng") || n.ends_with(".cap") {
                out.push(path);
            }
        }
    }
    Ok(())
}

/// Field names of `pw_packet_meta` by byte offset (for mismatch reports).
const META_FIELDS: &[(usize, &str)] = &[
    (0, "frame_len"),
    (4, "status"),
    (6, "flags"),
    (8, "ether_type"),
    (10, "vlan_count"),
    (11, "mpls_count"),
    (12, "vlan_tci"),
    (16, "mpls_lse"),
    (20, "l3_offset"),
    (22, "l4_offset"),
    (24, "payload_offset"),
    (26, "error_offset"),
    (28, "ip_version"),
    (29, "ip_proto"),
    (30, "ip_tos"),
    (31, "ip_ttl"),
    (32, "src_ip"),
    (48, "dst_ip"),
    (64, "src_port"),
    (66, "dst_port"),
    (68, "tcp_flags"),
    (70, "icmp_type"),
    (71, "icmp_code"),
    (72, "frag_offset"),
    (74, "arp_oper"),
    (76, "frag_id"),
    (80, "tunnel_type"),
    (81, "inner_ip_version"),
    (82, "inner_ip_proto"),
    (83, "ecpri_msg_type"),
    (84, "tunnel_id"),
    (88, "inner_l3_offset"),
    (90, "inner_l4_offset"),
    (92, "inner_src_port"),
    (94, "inner_dst_port"),
    (96, "inner_src_ip"),
    (112, "inner_dst_ip"),
    (128, "ecpri_payload_size"),
    (130, "ecpri_pc_id"),
    (132, "ecpri_seq_id"),
    (134, "inner_tcp_flags"),
    (136, "ecpri_revision"),
    (137, "reserved0"),
    (138, "reserved1"),
    (140, "reserved2"),
];

fn meta_bytes(m: &PacketMeta) -> &[u8] {
    // SAFETY: PacketMeta is repr(C) plain integers with no padding (144 bytes, pinned by tests).
    unsafe {
        std::slice::from_raw_parts(
            m as *const PacketMeta as *const u8,
            std::mem::size_of::<PacketMeta>(),
        )
    }
}

/// Names of the metadata fields whose bytes differ.
pub fn meta_diff(a: &PacketMeta, b: &PacketMeta) -> Vec<&'static str> {
    let (x, y) = (meta_bytes(a), meta_bytes(b));
    let mut out: Vec<&'static str> = Vec::new();
    for i in 0..x.len() {
        if x[i] != y[i] {
            let name = META_FIELDS
                .iter()
                .rev()
                .find(|(o, _)| *o <= i)
                .map_or("?", |(_, n)| *n);
            if out.last() != Some(&name) {
                out.push(name);
            }
        }
    }
    out
}

#[derive(Default)]
pub struct RunReport {
    pub input: String,
    pub mode: String,
    pub placement: String,
    pub frames: u64,
    pub bursts: u64,
    pub meta_mismatches: u64,
    pub verdict_mismatches: u64,
    pub bulk_mismatches: u64,
    pub counter_mismatches: Vec<String>,
    pub parse_errors: u64,
    pub acl_matched: u64,
    pub skipped_inputs: Vec<String>,
    pub seconds: f64,
    pub kernel: String,
}

impl RunReport {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "input": self.input, "mode": self.mode, "placement": self.placement,
            "frames": self.frames, "bursts": self.bursts,
            "meta_mismatches": self.meta_mismatches, "verdict_mismatches": self.verdict_mismatches,
            "bulk_mismatches": self.bulk_mismatches, "counter_mismatches": self.counter_mismatches,
            "parse_errors": self.parse_errors, "acl_matched": self.acl_matched,
            "skipped_inputs": self.skipped_inputs.len(), "seconds": self.seconds,
            "kernel": self.kernel, "ok": self.ok(),
        })
    }

    pub fn ok(&self) -> bool {
        self.meta_mismatches == 0
            && self.verdict_mismatches == 0
            && self.bulk_mismatches == 0
            && self.counter_mismatches.is_empty()
            && self.frames > 0
    }
}

const CHUNK: usize = 65536;

/// One input through one (mode, placement): every frame compared.
pub fn verify_one(
    a: &Args,
    acl: Option<&Acl>,
    mode: Mode,
    placement: Placement,
    show: &mut usize,
) -> anyhow::Result<RunReport> {
    let t0 = Instant::now();
    let mut src = Source::from_args(a)?;
    let mut left = a.limit.unwrap_or(u64::MAX);
    let input = describe_input(a);
    let mut report = RunReport {
        input,
        mode: format!("{mode:?}").to_lowercase(),
        placement: format!("{placement:?}").to_lowercase(),
        ..Default::default()
    };
    // Slots big enough for the largest frame seen so far is not knowable up front for a stream;
    // 256 KiB of data per slot holds any Ethernet frame in the corpus (jumbo included) and
    // bursts are cut by bytes as well as frames below.
    let data_cap = (a.burst as usize * 2048).max(256 * 1024) as u32;
    let opts = GpuOptions {
        mode,
        placement,
        burst_size: a.burst,
        ring_slots: 64,
        graph_bursts: 8,
        slot_data_bytes: Some(data_cap),
        device: a.device,
        emit_meta: true,
        idle_timeout_ms: 120_000,
        ctas_per_queue: a.ctas,
        ..Default::default()
    };
    let pd = PipelineDesc {
        parse: true,
        acl: acl.map(Acl::tables),
        count: true,
        default_action: acl.map_or(abi::ACTION_PASS, Acl::default_action),
    };
    let mut ex = GpuExecutor::new(opts, pd, a.queues, &kernel_image())?;
    report.kernel = ex.loaded_from.how.clone();
    let mut expect_counters = QueueCounters::default();
    let mut expect_hits = vec![0u64; acl.map_or(0, |x| x.n_rules as usize)];
    let mut chunk = Burst::default();
    let mut frame_base: u64 = 0;
    loop {
        chunk.clear();
        if left == 0 || !src.fill(&mut chunk, CHUNK.min(left.min(usize::MAX as u64) as usize))? {
            break;
        }
        let n = chunk.len();
        left = left.saturating_sub(n as u64);
        // CPU reference.
        let mut cpu_meta = Vec::with_capacity(n);
        let mut cpu_v = Vec::with_capacity(n);
        for (d, f) in chunk.frames() {
            let (m, v) = cpu_reference(f, d.port, acl.map(|x| &x.stage));
            expect_counters.add_frame(
                m.status == 0,
                acl.is_some() && m.status == 0,
                &v,
                d.wire_len,
            );
            if v.rule != ACL_NO_MATCH {
                if let Some(h) = expect_hits.get_mut(v.rule as usize) {
                    *h += 1;
                }
            }
            cpu_meta.push(m);
            cpu_v.push(v);
        }
        tracing::debug!("chunk at frame {frame_base}: {n} frames, CPU reference done");
        // GPU: cut the chunk into bursts (by frames and bytes), round-robin over queues.
        let bursts = split_bursts(&chunk, a.burst as usize, data_cap as usize);
        let mut gpu_meta = vec![PacketMeta::default(); n];
        let mut gpu_v = vec![
            Verdict {
                action: 0xEE,
                ..Default::default()
            };
            n
        ];
        let mut seen = vec![false; n];
        // Per queue: (seq -> first frame index) of bursts in flight.
        let nq = ex.n_queues();
        let mut inflight: Vec<std::collections::VecDeque<(u32, usize, usize)>> =
            vec![Default::default(); nq];
        let mut next = 0usize;
        let deadline = Duration::from_secs(60);
        let mut last_progress = Instant::now();
        while next < bursts.len() || inflight.iter().any(|q| !q.is_empty()) {
            let mut progressed = false;
            if next < bursts.len() {
                let q = next % nq;
                let (first, b) = &bursts[next];
                match ex.submit(q, b) {
                    Ok(seq) => {
                        inflight[q].push_back((seq, *first, b.len()));
                        next += 1;
                        progressed = true;
                    }
                    Err(pipeline::executor::gpu::SubmitError::RingFull { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
                if next == bursts.len() {
                    for q in 0..nq {
                        ex.flush(q)?;
                    }
                }
            }
            for (q, fl) in inflight.iter_mut().enumerate() {
                let got = ex.poll(q, |seq, v, m| {
                    if let Some(&(s, first, len)) = fl.front() {
                        if s == seq && len == v.len() {
                            gpu_v[first..first + len].copy_from_slice(v);
                            if let Some(m) = m {
                                gpu_meta[first..first + len].copy_from_slice(m);
                            }
                            for s in &mut seen[first..first + len] {
                                *s = true;
                            }
                        }
                        fl.pop_front();
                    }
                })?;
                progressed |= got > 0;
            }
            if progressed {
                last_progress = Instant::now();
            } else if last_progress.elapsed() > deadline {
                anyhow::bail!("GPU made no progress for {deadline:?}");
            } else if next >= bursts.len() {
                std::hint::spin_loop();
            }
        }
        // Bulk kernel over the same frames (device-resident, the throughput path).
        let bulk_v = if a.bulk {
            let descs: Vec<abi::Desc> = chunk.descs.iter().map(abi::Desc::from).collect();
            let f = ex.upload_frames(&chunk.data, &descs)?;
            ex.run_bulk(&f, 1)?;
            let v = ex.bulk_verdicts(&f)?;
            tracing::debug!("chunk at frame {frame_base}: bulk kernel done");
            Some(v)
        } else {
            None
        };
        for i in 0..n {
            let idx = frame_base + i as u64;
            let frame = chunk.frame(i);
            if !seen[i] {
                report.verdict_mismatches += 1;
                if *show > 0 {
                    *show -= 1;
                    println!("  frame {idx}: no GPU verdict");
                }
                continue;
            }
            if gpu_meta[i] != cpu_meta[i] {
                report.meta_mismatches += 1;
                if *show > 0 {
                    *show -= 1;
                    println!(
                        "  frame {idx} ({} B): metadata differs in {:?}\n    cpu {:?}\n    gpu {:?}\n    bytes {}",
                        frame.len(),
                        meta_diff(&cpu_meta[i], &gpu_meta[i]),
                        cpu_meta[i],
                        gpu_meta[i],
                        hex(&frame[..frame.len().min(96)])
                    );
                }
            }
            if gpu_v[i] != cpu_v[i] {
                report.verdict_mismatches += 1;
                if *show > 0 {
                    *show -= 1;
                    println!(
                        "  frame {idx}: verdict differs: cpu {:?} gpu {:?}",
                        cpu_v[i], gpu_v[i]
                    );
                }
            }
            if let Some(bv) = &bulk_v {
                if bv[i] != cpu_v[i] {
                    report.bulk_mismatches += 1;
                    if *show > 0 {
                        *show -= 1;
                        println!(
                            "  frame {idx}: bulk-kernel verdict differs: cpu {:?} gpu {:?}",
                            cpu_v[i], bv[i]
                        );
                    }
                }
            }
        }
        report.frames += n as u64;
        report.bursts += bursts.len() as u64;
        frame_base += n as u64;
    }
    // Counters: the GPU's count stage against the same rules applied on the CPU.
    let snap = ex.counters()?;
    ex.shutdown()?;
    let mut got = QueueCounters::default();
    for c in &snap.queues {
        got.merge(c);
    }
    expect_counters.bursts = report.bursts;
    if got != expect_counters {
        report.counter_mismatches.push(format!(
            "queue counters: cpu {expect_counters:?} gpu {got:?}"
        ));
    }
    if !expect_hits.is_empty() && snap.rule_hits != expect_hits {
        let bad = expect_hits
            .iter()
            .zip(&snap.rule_hits)
            .filter(|(a, b)| a != b)
            .count();
        report
            .counter_mismatches
            .push(format!("per-rule hits differ for {bad} rules"));
    }
    report.parse_errors = expect_counters.parse_errors;
    report.acl_matched = expect_counters.acl_matched;
    report.skipped_inputs = src.skipped().to_vec();
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// Cuts `chunk` into bursts of at most `max_frames` frames and `max_bytes` data bytes; each with
/// the index of its first frame.
pub fn split_bursts(chunk: &Burst, max_frames: usize, max_bytes: usize) -> Vec<(usize, Burst)> {
    let mut out = Vec::new();
    let mut cur = Burst::default();
    let mut first = 0;
    for (i, (d, f)) in chunk.frames().enumerate() {
        if !cur.is_empty() && (cur.len() >= max_frames || cur.data.len() + f.len() > max_bytes) {
            out.push((first, std::mem::take(&mut cur)));
            first = i;
        }
        cur.push(f, *d);
    }
    if !cur.is_empty() {
        out.push((first, cur));
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn describe_input(a: &Args) -> String {
    let base = if let Some(c) = &a.config {
        format!("config {}", c.display())
    } else if let Some(p) = &a.input {
        format!("pcap {}", p.display())
    } else if let Some(t) = &a.trace {
        format!("trace {}", t.display())
    } else {
        format!(
            "gen {} frames ({}% malformed, {}% IPv6)",
            a.gen.unwrap_or(0),
            a.malformed * 100.0,
            a.ipv6 * 100.0
        )
    };
    match &a.rules {
        Some(r) => format!("{base} + rules {}", r.display()),
        None => base,
    }
}

pub fn run(mut a: Args) -> anyhow::Result<i32> {
    if let Some(c) = a.config.clone() {
        apply_config(&mut a, &c)?;
    }
    if let Err(why) = pipeline::executor::gpu::probe(a.device) {
        eprintln!("pktwarp verify: no usable GPU: {why}");
        return Ok(3);
    }
    let acl = match &a.rules {
        Some(r) => Some(load_acl(
            r,
            if a.default_drop {
                Action::Drop
            } else {
                Action::Pass
            },
        )?),
        None => None,
    };
    let mut reports = Vec::new();
    let mut show = a.show;
    let mut all_ok = true;
    for &m in &a.mode {
        for &p in &a.placement {
            let r = verify_one(&a, acl.as_ref(), m.into(), p.into(), &mut show)?;
            println!(
                "verify {} [{} / {}]: {} frames, {} bursts, {} parse errors, {} ACL matches: \
                 meta mismatches {}, verdict mismatches {}, bulk mismatches {}, counters {} ({:.1} s, kernels: {})",
                r.input,
                r.mode,
                r.placement,
                r.frames,
                r.bursts,
                r.parse_errors,
                r.acl_matched,
                r.meta_mismatches,
                r.verdict_mismatches,
                r.bulk_mismatches,
                if r.counter_mismatches.is_empty() { "equal".to_string() } else { r.counter_mismatches.join("; ") },
                r.seconds,
                r.kernel
            );
            if !r.skipped_inputs.is_empty() {
                println!(
                    "  {} captures skipped (not Ethernet or unreadable), e.g. {}",
                    r.skipped_inputs.len(),
                    r.skipped_inputs[0]
                );
            }
            all_ok &= r.ok();
            reports.push(r);
        }
    }
    if let Some(j) = &a.json {
        std::fs::write(
            j,
            serde_json::to_vec_pretty(&reports.iter().map(RunReport::to_json).collect::<Vec<_>>())?,
        )
        .with_context(|| format!("{}", j.display()))?;
    }
    println!("verify: {}", if all_ok { "PASS" } else { "FAIL" });
    Ok(if all_ok { 0 } else { 1 })
}

/// Takes the rules, default action, queues, burst and device of a daemon config.
fn apply_config(a: &mut Args, path: &Path) -> anyhow::Result<()> {
    use pipeline::config::{DefaultAction, StageConfig};
    let cfg = pipeline::config::load(path)?;
    for s in &cfg.pipeline {
        if let StageConfig::Acl(acl) = &s.value {
            a.rules = Some(cfg.resolve(&acl.rules));
            a.default_drop = acl.default == DefaultAction::Drop;
        }
    }
    a.queues = cfg.queues.count as usize;
    a.burst = cfg.queues.burst as u32;
    a.device = cfg.executor.gpu.device;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_bursts_respects_frames_and_bytes() {
        let mut chunk = Burst::default();
        for i in 0..10u8 {
            chunk.push(&[i; 100], FrameDesc::default());
        }
        let b = split_bursts(&chunk, 4, 250);
        assert_eq!(
            b.iter().map(|(f, b)| (*f, b.len())).collect::<Vec<_>>(),
            vec![(0, 2), (2, 2), (4, 2), (6, 2), (8, 2)]
        );
        let b = split_bursts(&chunk, 3, usize::MAX);
        assert_eq!(b.len(), 4);
        assert_eq!(b[3].1.frame(0), &[9u8; 100][..]);
        // A frame larger than the byte budget still travels, alone.
        let mut big = Burst::default();
        big.push(&[1u8; 500], FrameDesc::default());
        big.push(&[2u8; 10], FrameDesc::default());
        assert_eq!(split_bursts(&big, 8, 100).len(), 2);
    }

    #[test]
    fn meta_diff_names_fields() {
        let a = PacketMeta::default();
        let mut b = a;
        b.src_ip[2] = 7;
        b.inner_tcp_flags = 1;
        assert_eq!(meta_diff(&a, &b), vec!["src_ip", "inner_tcp_flags"]);
        assert!(meta_diff(&a, &a).is_empty());
    }

    /// The whole comparison on a GPU; skipped (with the reason printed) where there is none.
    #[test]
    fn gpu_equals_cpu_on_generated_frames() {
        if let Err(why) = pipeline::executor::gpu::probe(0) {
            eprintln!("skipped: no usable GPU ({why})");
            return;
        }
        let a = Args {
            config: None,
            limit: None,
            input: None,
            trace: None,
            gen: Some(20_000),
            malformed: 0.1,
            ipv6: 0.3,
            size: 64,
            rules: None,
            default_drop: false,
            mode: vec![ModeArg::Persistent, ModeArg::Launch, ModeArg::Graph],
            placement: vec![PlacementArg::Device, PlacementArg::Mapped],
            burst: 64,
            queues: 2,
            ctas: 3,
            show: 5,
            bulk: true,
            json: None,
            device: 0,
        };
        for m in [Mode::Persistent, Mode::Launch, Mode::Graph] {
            for p in [Placement::Device, Placement::Mapped] {
                let mut show = 5;
                let r = verify_one(&a, None, m, p, &mut show).unwrap();
                assert!(r.ok(), "{m:?} {p:?}: {:?}", r.to_json());
            }
        }
    }
}
