//! `pktwarp verify`: runs the CPU reference (the CPU executor's own pipeline: the Rust `parse`
//! stage and the flow-rules classifier) and the GPU executor on the same frames and compares every frame's
//! full metadata (all 144 bytes), verdict (action, drop reason, rule index, mark), the queue
//! counters and the per-rule hits. Prints the first mismatches in detail; exit code 1 on any.
//!
//! Inputs: `--input PCAP|DIR` (every capture in a folder; non-Ethernet ones are skipped and
//! listed), `--trace FILE` (a header trace as `classify` reads it, IPv4 or IPv6 per line: a
//! frame generated from each line) and `--gen N` (N generated frames from random flows,
//! `--malformed` of them broken on purpose). `--rules FILE` adds the `acl` stage (ClassBench or
//! YAML rules). Inputs and rules are read before the GPU is looked for, so a bad file is an
//! error on any machine; with no GPU, verify says what it read and exits 3.
//!
//! The modules: `source` (where the frames come from), `rules` (the rule sets: the reference
//! pipeline and the GPU's image of it), `check` (one input through one mode and placement),
//! `torture` (`--reload-torture`). The reference and the frame-by-frame comparison are the
//! library's `pipeline::verify`.

mod check;
mod rules;
mod source;
mod torture;
#[cfg(test)]
mod trace_tests;

use anyhow::Context as _;
use pipeline::internal::executor::gpu::multi::Devices;
use pipeline::internal::executor::gpu::{KernelImage, Mode, Placement};
use pipeline::verdict::Action;
use std::path::{Path, PathBuf};

pub use check::{verify_one, RunReport};
pub use rules::{load_acl, Acl};

/// The built-in pipeline's kernel image (prebuilt fatbin when pktwarp-kernels was built with the
/// pinned nvcc, and the inlined source for NVRTC either way).
pub fn kernel_image() -> KernelImage {
    pktwarp_kernels::builtin_image()
}

#[derive(clap::Args, Clone)]
pub struct Args {
    /// A daemon config: its first receiving port is the input, its `acl` stage (rules and
    /// default) and its `queues` (count, burst) are used; the `--input/--trace/--gen/--rules`
    /// options then do not apply.
    #[arg(conflicts_with_all = ["input", "trace", "gen", "rules"])]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub set: crate::cmd::ConfigSet,
    /// Stop after this many frames (needed for a config whose input never ends).
    #[arg(long)]
    pub limit: Option<u64>,
    /// A pcap/pcapng file, or a folder: every capture in it (recursively).
    #[arg(long, conflicts_with_all = ["trace", "gen"])]
    pub input: Option<PathBuf>,
    /// Header trace (`.gz` accepted), one frame per line: ClassBench's (addresses as 32-bit
    /// decimals) or `dpdk-test-acl --ipv6`'s (IPv6 text), the family per line, as `classify`.
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
pub(crate) fn slot_data_bytes(a: &Args) -> u32 {
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

pub fn run(mut a: Args) -> anyhow::Result<i32> {
    if let Some(c) = a.config.clone() {
        apply_config(&mut a, &c)?;
    }
    // Inputs and rules first: a bad file is an error on any machine, GPU or not.
    let inputs = read_inputs(&a)?;
    if let Err(why) =
        pipeline::internal::executor::gpu::probe(a.devices.first().copied().unwrap_or(a.device))
    {
        errln!("pktwarp verify: read {}", inputs.summary.join("; "));
        errln!("pktwarp verify: no usable GPU: {why}; nothing was compared");
        return Ok(3);
    }
    if let Some(swaps) = a.reload_torture {
        let (Some(ra), Some(rb)) = (inputs.acl, inputs.acl_b) else {
            anyhow::bail!("--reload-torture needs --rules and --rules-b");
        };
        return torture::reload_torture(&a, swaps, [ra, rb]);
    }
    let acl = inputs.acl;
    let mut reports = Vec::new();
    let mut show = a.show;
    let mut all_ok = true;
    for &m in &a.mode {
        for &p in &a.placement {
            let r = verify_one(&a, acl.as_ref(), m.into(), p.into(), &mut show)?;
            outln!("the verify report";
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
                outln!("the verify report";
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
    outln!("the verify report"; "verify: {}", if all_ok { "PASS" } else { "FAIL" });
    Ok(if all_ok { 0 } else { 1 })
}

/// What verify reads before it looks for a GPU: the rule sets, and the input checked (a trace
/// parsed whole, captures listed, generator options checked; a config's ports are opened only
/// by the run itself).
struct Inputs {
    /// `--rules`, and `--rules-b` (of `--reload-torture`).
    acl: Option<Acl>,
    acl_b: Option<Acl>,
    /// What was read, one entry per file or input, for the message when there is no GPU.
    summary: Vec<String>,
}

fn read_inputs(a: &Args) -> anyhow::Result<Inputs> {
    let mut summary = Vec::new();
    if let Some(c) = &a.config {
        summary.push(format!("config {}", c.display()));
    } else {
        let src = source::Source::from_args(a)?;
        summary.push(match (&src, &a.trace) {
            (_, Some(t)) => {
                // The reader the source itself used: the same families, line by line.
                let headers = pipeline::internal::port::gen::read_trace(t)?;
                let v6 = headers.iter().filter(|h| h.src_ip.is_ipv6()).count();
                format!(
                    "trace {}: {} headers ({} IPv4, {v6} IPv6)",
                    t.display(),
                    headers.len(),
                    headers.len() - v6
                )
            }
            (source::Source::Pcaps { files, .. }, _) => {
                let root = a.input.as_deref().unwrap_or(Path::new(""));
                format!("input {}: {} captures", root.display(), files.len())
            }
            (source::Source::Port(_), None) => format!("gen {} frames", a.gen.unwrap_or(0)),
        });
    }
    let default = if a.default_drop {
        Action::Drop
    } else {
        Action::Pass
    };
    let mut load = |r: &Option<PathBuf>| -> anyhow::Result<Option<Acl>> {
        let Some(r) = r else { return Ok(None) };
        let acl = load_acl(r, default)?;
        summary.push(format!("rules {}: {} rules", r.display(), acl.n_rules));
        Ok(Some(acl))
    };
    let acl = load(&a.rules)?;
    let acl_b = load(&a.rules_b)?;
    Ok(Inputs {
        acl,
        acl_b,
        summary,
    })
}

/// Takes the rules, default action, queues, burst and device of a daemon config.
fn apply_config(a: &mut Args, path: &Path) -> anyhow::Result<()> {
    use pipeline::config::{DefaultAction, StageConfig};
    let cfg = a.set.load(path)?;
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
            a.devices = (0..pipeline::internal::executor::gpu::driver::device_count().unwrap_or(0))
                .collect()
        }
        None => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole comparison on a GPU; skipped (with the reason printed) where there is none.
    #[test]
    fn gpu_equals_cpu_on_generated_frames() {
        if let Err(why) = pipeline::internal::executor::gpu::probe(0) {
            pipeline::internal::testdata::skip(
                file!(),
                "gpu_equals_cpu_on_generated_frames",
                &format!("no usable GPU ({why})"),
            );
            return;
        }
        let a = Args {
            config: None,
            set: Default::default(),
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
