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
use pipeline::executor::gpu::multi::{Devices, MultiGpu};
use pipeline::executor::gpu::{
    AclTablesRef, GpuOptions, KernelImage, Mode, PipelineDesc, Placement,
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
    /// Ring placements to check, comma separated (default: the executor's default, mapped).
    #[arg(long, value_delimiter = ',', default_value = "mapped")]
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
    /// CTAs sharing each burst in persistent mode (default: the executor's, from --burst).
    #[arg(long)]
    pub burst_ctas: Option<u32>,
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
    /// Spread the queues over these GPUs (round-robin: queue k on devices[k % n]), one GPU
    /// executor per entry; `--devices 0,0` runs two executors on GPU 0. Overrides --device.
    #[arg(long, value_delimiter = ',')]
    pub devices: Vec<u32>,
    /// ACL table hot-swap torture: continuous traffic while the rule set is swapped this many
    /// times between --rules and --rules-b; every frame's verdict is checked against the CPU
    /// reference of the rule set its burst carried, and every frame must come back.
    #[arg(long, value_name = "SWAPS", requires_all = ["rules", "rules_b"])]
    pub reload_torture: Option<u32>,
    /// The second rule set of --reload-torture.
    #[arg(long)]
    pub rules_b: Option<PathBuf>,
    /// Bursts submitted between two swaps (--reload-torture).
    #[arg(long, default_value_t = 4)]
    pub swap_every: u32,
    /// Bytes of frame data per ring slot (bursts are cut to fit). Default: 2048 per frame of a
    /// burst, at least 256 KiB (holds any frame of the corpus; a frame larger than a slot is an
    /// error).
    #[arg(long)]
    pub slot_data_bytes: Option<u32>,
    /// Tagged words on mapped rings in persistent mode (executor option `tagged`): default on
    /// wherever a burst's image fits the kernel's staging area (small bursts and
    /// --slot-data-bytes), `false` off, `true` on (an error where it cannot be).
    #[arg(long)]
    pub tagged: Option<bool>,
    /// Threads per CTA (executor option `block_threads`; up to 512 in persistent mode).
    #[arg(long)]
    pub block_threads: Option<u32>,
    /// Compare verdicts and counters only: the GPU writes no metadata back, as in a daemon, so
    /// the kernels' metadata-free paths run (the parse fast path of bursts that leave two or
    /// more threads per frame is taken only then).
    #[arg(long)]
    pub no_meta: bool,
}

/// Frame bytes per slot: `--slot-data-bytes`, else 2048 per frame of a burst, at least 256 KiB
/// (holds any Ethernet frame in the corpus, jumbo included; bursts are cut by bytes too).
fn slot_data_bytes(a: &Args) -> u32 {
    a.slot_data_bytes
        .unwrap_or((a.burst as usize * 2048).max(256 * 1024) as u32)
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
    /// Metadata was written back and compared (not with --no-meta).
    pub meta_compared: bool,
    pub verdict_mismatches: u64,
    pub bulk_mismatches: u64,
    pub counter_mismatches: Vec<String>,
    pub parse_errors: u64,
    pub acl_matched: u64,
    pub skipped_inputs: Vec<String>,
    pub seconds: f64,
    pub kernel: String,
    /// GPU of each executor (queues round-robin over them).
    pub devices: Vec<u32>,
}

impl RunReport {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "input": self.input, "mode": self.mode, "placement": self.placement,
            "frames": self.frames, "bursts": self.bursts,
            "meta_mismatches": self.meta_mismatches, "meta_compared": self.meta_compared, "verdict_mismatches": self.verdict_mismatches,
            "bulk_mismatches": self.bulk_mismatches, "counter_mismatches": self.counter_mismatches,
            "parse_errors": self.parse_errors, "acl_matched": self.acl_matched,
            "skipped_inputs": self.skipped_inputs.len(), "seconds": self.seconds,
            "kernel": self.kernel, "devices": self.devices, "ok": self.ok(),
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
    let opts = GpuOptions {
        emit_meta: !a.no_meta,
        ..gpu_options(a, mode, placement)
    };
    let tagged = opts.tagged_queue(0);
    let mut report = RunReport {
        input,
        mode: format!("{mode:?}").to_lowercase(),
        placement: format!("{placement:?}{}", if tagged { " tagged" } else { "" }).to_lowercase(),
        meta_compared: !a.no_meta,
        ..Default::default()
    };
    // Slots big enough for the largest frame seen so far is not knowable up front for a stream;
    // 256 KiB of data per slot holds any Ethernet frame in the corpus (jumbo included) and
    // bursts are cut by bytes as well as frames below.
    let data_cap = slot_data_bytes(a);
    let pd = PipelineDesc {
        parse: true,
        acl: acl.map(Acl::tables),
        count: true,
        default_action: acl.map_or(abi::ACTION_PASS, Acl::default_action),
    };
    let mut ex = MultiGpu::new(opts, pd, queues_for(a), &kernel_image())?;
    report.kernel = kernel_origin(&ex);
    report.devices = ex.devices().to_vec();
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
        // CPU reference (its metadata kept only when it is compared: not with --no-meta).
        let keep_meta = !a.no_meta;
        let mut cpu_meta = Vec::with_capacity(if keep_meta { n } else { 0 });
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
            if keep_meta {
                cpu_meta.push(m);
            }
            cpu_v.push(v);
        }
        tracing::debug!("chunk at frame {frame_base}: {n} frames, CPU reference done");
        // GPU: cut the chunk into bursts (by frames and bytes), round-robin over queues.
        let bursts = split_bursts(&chunk, a.burst as usize, data_cap as usize);
        let mut gpu_meta = vec![PacketMeta::default(); if keep_meta { n } else { 0 }];
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
                            if let (Some(m), true) = (m, keep_meta) {
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
            // On the last GPU of the list (the first one with one GPU).
            let bx = ex
                .executors()
                .last()
                .ok_or_else(|| anyhow::anyhow!("no GPU executor"))?;
            let f = bx.upload_frames(&chunk.data, &descs)?;
            bx.run_bulk(&f, 1)?;
            let v = bx.bulk_verdicts(&f)?;
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
            if keep_meta && gpu_meta[i] != cpu_meta[i] {
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

/// `--devices` as the executor option (None: `--device` alone).
/// The GPU executor's options for one (mode, placement) of a verify run.
fn gpu_options(a: &Args, mode: Mode, placement: Placement) -> GpuOptions {
    GpuOptions {
        mode,
        placement,
        burst_size: a.burst,
        ring_slots: 64,
        graph_bursts: 8,
        slot_data_bytes: Some(slot_data_bytes(a)),
        device: a.device,
        devices: devices_opt(a),
        idle_timeout_ms: 120_000,
        ctas_per_queue: a.ctas,
        burst_ctas: a.burst_ctas,
        tagged: a.tagged,
        block_threads: a.block_threads,
        ..Default::default()
    }
}

fn devices_opt(a: &Args) -> Option<Devices> {
    if a.devices.is_empty() {
        None
    } else {
        Some(Devices::List(a.devices.clone()))
    }
}

/// Queues to run: at least one per GPU executor.
fn queues_for(a: &Args) -> usize {
    a.queues.max(a.devices.len()).max(1)
}

fn kernel_origin(ex: &MultiGpu) -> String {
    ex.executors()
        .first()
        .map_or(String::new(), |e| e.loaded_from.how.clone())
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
    if let Err(why) = pipeline::executor::gpu::probe(a.devices.first().copied().unwrap_or(a.device))
    {
        eprintln!("pktwarp verify: no usable GPU: {why}");
        return Ok(3);
    }
    if let Some(swaps) = a.reload_torture {
        return reload_torture(&a, swaps);
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
                "verify {} [{} / {} / GPUs {:?}]: {} frames, {} bursts, {} parse errors, {} ACL matches: \
                 {}, verdict mismatches {}, bulk mismatches {}, counters {} ({:.1} s, kernels: {})",
                r.input,
                r.mode,
                r.placement,
                r.devices,
                r.frames,
                r.bursts,
                r.parse_errors,
                r.acl_matched,
                if r.meta_compared { format!("meta mismatches {}", r.meta_mismatches) } else { "meta not compared".to_string() },
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

/// `--reload-torture SWAPS`: continuous traffic through the GPU executor while the ACL table is
/// swapped SWAPS times between `--rules` (even generations) and `--rules-b` (odd ones), every
/// `--swap-every` bursts, with bursts of the old table still in flight at each swap. Each burst
/// comes back with the generation its slot header named; every frame's verdict must equal the
/// CPU reference under that generation's rule set, generations never go back on a queue, every
/// frame comes back (frames in == verdicts out + counted drops), and every replaced table is
/// freed by the end. The input is replayed until all swaps are done.
fn reload_torture(a: &Args, swaps: u32) -> anyhow::Result<i32> {
    let t0 = Instant::now();
    let default = if a.default_drop {
        Action::Drop
    } else {
        Action::Pass
    };
    let (Some(ra), Some(rb)) = (&a.rules, &a.rules_b) else {
        anyhow::bail!("--reload-torture needs --rules and --rules-b");
    };
    let sets = [load_acl(ra, default)?, load_acl(rb, default)?];
    let data_cap = slot_data_bytes(a);
    let mode: Mode = a
        .mode
        .first()
        .copied()
        .unwrap_or(ModeArg::Persistent)
        .into();
    let placement: Placement = a
        .placement
        .first()
        .copied()
        .unwrap_or(PlacementArg::Mapped)
        .into();
    let opts = gpu_options(a, mode, placement);
    let tagged = opts.tagged_queue(0);
    let pd = PipelineDesc {
        parse: true,
        acl: Some(sets[0].tables()),
        count: true,
        default_action: sets[0].default_action(),
    };
    let mut ex = MultiGpu::new(opts, pd, queues_for(a), &kernel_image())?;
    let nq = ex.n_queues();
    let swap_every = a.swap_every.max(1);
    let mut generation = 0u64;
    let mut since_swap = 0u32;
    let (mut frames_in, mut verdicts_out, mut host_drops) = (0u64, 0u64, 0u64);
    let (mut mismatches, mut differing, mut passes) = (0u64, 0u64, 0u64);
    let mut frames_by_parity = [0u64; 2];
    let mut gens_seen = std::collections::BTreeSet::new();
    let mut last_gen = vec![0u64; nq];
    let mut regressions = 0u64;
    let mut show = a.show;
    let mut src = Source::from_args(a)?;
    let mut chunk = Burst::default();
    let mut max_retired = 0usize;
    loop {
        chunk.clear();
        let cap = CHUNK.min(a.limit.unwrap_or(u64::MAX).min(CHUNK as u64) as usize);
        if !src.fill(&mut chunk, cap)? {
            passes += 1;
            if generation >= swaps as u64 {
                break;
            }
            src = Source::from_args(a)?;
            continue;
        }
        let n = chunk.len();
        frames_in += n as u64;
        // CPU reference under both rule sets.
        let refs: Vec<Vec<Verdict>> = sets
            .iter()
            .map(|s| {
                chunk
                    .frames()
                    .map(|(d, f)| cpu_reference(f, d.port, Some(&s.stage)).1)
                    .collect()
            })
            .collect();
        differing += (0..n).filter(|&i| refs[0][i] != refs[1][i]).count() as u64;
        let bursts = split_bursts(&chunk, a.burst as usize, data_cap as usize);
        let mut gpu_v = vec![Verdict::default(); n];
        let mut gpu_gen: Vec<Option<u64>> = vec![None; n];
        let mut inflight: Vec<std::collections::VecDeque<(u32, usize, usize)>> =
            vec![Default::default(); nq];
        let mut next = 0usize;
        let mut last_progress = Instant::now();
        while next < bursts.len() || inflight.iter().any(|q| !q.is_empty()) {
            let mut progressed = false;
            if next < bursts.len() {
                if since_swap >= swap_every && generation < swaps as u64 {
                    generation += 1;
                    let s = &sets[(generation % 2) as usize];
                    ex.publish_acl(&s.tables(), generation, s.default_action())?;
                    since_swap = 0;
                    max_retired = max_retired.max(ex.retired_tables());
                }
                let q = next % nq;
                let (first, b) = &bursts[next];
                match ex.submit(q, b) {
                    Ok(seq) => {
                        inflight[q].push_back((seq, *first, b.len()));
                        next += 1;
                        since_swap += 1;
                        progressed = true;
                    }
                    Err(pipeline::executor::gpu::SubmitError::RingFull { .. }) => {}
                    Err(pipeline::executor::gpu::SubmitError::TooLarge { frames, .. }) => {
                        host_drops += frames as u64;
                        next += 1;
                    }
                    Err(e) => return Err(e.into()),
                }
                if next == bursts.len() {
                    for q in 0..nq {
                        ex.flush(q)?;
                    }
                }
            }
            for (q, fl) in inflight.iter_mut().enumerate() {
                let got = ex.poll_tagged(q, |seq, g, v, _| {
                    if let Some(&(s, first, len)) = fl.front() {
                        if s == seq && len == v.len() {
                            gpu_v[first..first + len].copy_from_slice(v);
                            for x in &mut gpu_gen[first..first + len] {
                                *x = Some(g);
                            }
                            if g < last_gen[q] {
                                regressions += 1;
                            }
                            last_gen[q] = g;
                        }
                        fl.pop_front();
                    }
                })?;
                progressed |= got > 0;
            }
            if progressed {
                last_progress = Instant::now();
            } else if last_progress.elapsed() > Duration::from_secs(60) {
                anyhow::bail!("GPU made no progress for 60 s");
            } else {
                std::hint::spin_loop();
            }
        }
        for i in 0..n {
            let Some(g) = gpu_gen[i] else { continue };
            verdicts_out += 1;
            gens_seen.insert(g);
            let want = &refs[(g % 2) as usize][i];
            frames_by_parity[(g % 2) as usize] += 1;
            if gpu_v[i] != *want {
                mismatches += 1;
                if show > 0 {
                    show -= 1;
                    println!(
                        "  frame {i} of a chunk, generation {g}: verdict {:?}, CPU reference of {} says {:?}",
                        gpu_v[i],
                        if g % 2 == 0 { "--rules" } else { "--rules-b" },
                        want
                    );
                }
            }
        }
    }
    let snap = ex.counters()?;
    let retired_left = ex.retired_tables();
    ex.shutdown()?;
    let gpu_packets: u64 = snap.queues.iter().map(|c| c.packets).sum();
    let ring_full_frames: u64 = snap.host.iter().map(|h| h.ring_full_frames).sum();
    let lost = frames_in as i64 - verdicts_out as i64 - host_drops as i64;
    let mut problems = Vec::new();
    if mismatches > 0 {
        problems.push(format!(
            "{mismatches} verdicts differ from the CPU reference of their generation"
        ));
    }
    if lost != 0 {
        problems.push(format!("{lost} frames lost (in {frames_in}, verdicts {verdicts_out}, counted drops {host_drops})"));
    }
    if gpu_packets != verdicts_out {
        problems.push(format!(
            "GPU count stage saw {gpu_packets} frames, {verdicts_out} verdicts came back"
        ));
    }
    if regressions > 0 {
        problems.push(format!("{regressions} bursts carried an older generation than the burst before them on their queue"));
    }
    if generation < swaps as u64 {
        problems.push(format!("only {generation} of {swaps} swaps done"));
    }
    if frames_by_parity.contains(&0) || differing == 0 {
        problems.push(
            "the check cannot fail: both rule sets must classify some frames differently and both must carry traffic"
                .to_string(),
        );
    }
    if retired_left > 0 {
        problems.push(format!(
            "{retired_left} replaced tables not freed after every burst was reaped"
        ));
    }
    let ok = problems.is_empty();
    println!(
        "reload-torture [{} / {} / GPUs {:?}, {} queues]: {} swaps ({} generations seen) between {} and {}, \
         {} frames in {} passes ({} where the two rule sets differ), verdicts {}, counted drops {}, lost {}, \
         mismatches {}, ring-full retries {} frames, most tables awaiting release {}, left unreleased {} ({:.1} s): {}",
        format!("{mode:?}").to_lowercase(),
        format!(
            "{placement:?}{}",
            if tagged { " tagged" } else { "" }
        )
        .to_lowercase(),
        ex.devices(),
        nq,
        generation,
        gens_seen.len(),
        ra.display(),
        rb.display(),
        frames_in,
        passes,
        differing,
        verdicts_out,
        host_drops,
        lost,
        mismatches,
        ring_full_frames,
        max_retired,
        retired_left,
        t0.elapsed().as_secs_f64(),
        if ok { "PASS".to_string() } else { format!("FAIL: {}", problems.join("; ")) }
    );
    if let Some(j) = &a.json {
        let v = serde_json::json!({
            "test": "reload_torture", "mode": format!("{mode:?}").to_lowercase(),
            "placement": format!("{placement:?}").to_lowercase(), "devices": ex.devices(),
            "queues": nq, "swaps": generation, "generations_seen": gens_seen.len(),
            "rules": ra, "rules_b": rb, "frames_in": frames_in, "passes": passes,
            "frames_where_sets_differ": differing, "verdicts": verdicts_out,
            "counted_drops": host_drops, "lost": lost, "mismatches": mismatches,
            "ring_full_retry_frames": ring_full_frames, "max_tables_awaiting_release": max_retired,
            "tables_left_unreleased": retired_left, "seconds": t0.elapsed().as_secs_f64(),
            "ok": ok, "problems": problems,
        });
        std::fs::write(j, serde_json::to_vec_pretty(&v)?)
            .with_context(|| format!("{}", j.display()))?;
    }
    println!("verify: {}", if ok { "PASS" } else { "FAIL" });
    Ok(if ok { 0 } else { 1 })
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
    match &cfg.executor.gpu.devices {
        Some(Devices::List(l)) => a.devices = l.clone(),
        Some(Devices::All) => {
            a.devices = (0..pipeline::executor::gpu::driver::device_count().unwrap_or(0)).collect()
        }
        None => {}
    }
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
            burst_ctas: None,
            show: 5,
            bulk: true,
            json: None,
            device: 0,
            devices: Vec::new(),
            reload_torture: None,
            slot_data_bytes: None,
            rules_b: None,
            swap_every: 4,
            tagged: None,
            block_threads: None,
            no_meta: false,
        };
        for m in [Mode::Persistent, Mode::Launch, Mode::Graph] {
            for p in [Placement::Device, Placement::Mapped] {
                let mut show = 5;
                let r = verify_one(&a, None, m, p, &mut show).unwrap();
                assert!(r.ok(), "{m:?} {p:?}: {:?}", r.to_json());
            }
        }
        // Tagged words: small slots on a mapped ring, persistent.
        let t = Args {
            slot_data_bytes: Some(8192),
            tagged: Some(true),
            ..a
        };
        let mut show = 5;
        let r = verify_one(&t, None, Mode::Persistent, Placement::Mapped, &mut show).unwrap();
        assert!(
            r.ok() && r.placement.contains("tagged"),
            "{:?}",
            r.to_json()
        );
    }
}
