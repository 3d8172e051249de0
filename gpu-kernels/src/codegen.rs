//! The pipeline kernel's source, generated from a stage list.
//!
//! Two templates, one transport (`cuda/kernels.cu`):
//! - **fused**: the stage list is an in-order subset of `parse, acl, count` with no other stage.
//!   The tuned built-in kernel serves it (the two-pass parse-then-grouped-lookup path, the
//!   small-burst kernel); which of the three run is a per-queue flag, so one image serves every
//!   such list, and build.rs compiles it ahead of time.
//! - **composed**: any other valid list (another order, a user stage, a new built-in). The
//!   generated `pw_pipeline_frame` calls each stage's device function (the stage ABI in
//!   `cuda/pktwarp_abi.h`) in the list's order, one thread per frame; the transport calls it for
//!   every frame.
//!
//! This file is also compiled into build.rs (`#[path]`), so the build-time and the run-time
//! sources are made by the same code.

use std::fmt::Write as _;

#[path = "codegen_flow_stats.rs"]
mod flow_stats;

/// Most stages one pipeline may have (`PW_MAX_STAGES`).
pub const MAX_STAGES: usize = 16;

/// One stage of a pipeline, as the kernel generator sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageSpec {
    /// The stage's name in the config, metrics and logs (`parse`, `syn_guard`, ...).
    pub name: String,
    pub kind: StageKind,
}

/// What a stage is on the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageKind {
    /// `pw_stage_parse` (cuda/stages.cuh).
    Parse,
    /// `pw_stage_acl`: its parameter block is the burst's ACL table selection.
    Acl,
    /// The acl stage of a rule set with rewrite actions (`set:`): `pw_stage_acl_rw`
    /// (cuda/rewrite_stages.cuh), same parameter block as [`StageKind::Acl`]; it writes the
    /// frame, so the list takes the composed template with `PW_PIPELINE_WRITES`.
    AclRewrite,
    /// `pw_stage_count`.
    Count,
    /// A built-in stage beyond the fused three: its header in cuda/ defines `function` with
    /// the stage ABI signature (an entry of [`LIBRARY_STAGES`]).
    Library {
        function: &'static str,
        header: &'static str,
    },
    /// A stage with its own CUDA source defining `function` with the stage ABI signature.
    /// `writes_frame`: it takes `pw_frame *` and may change the frame's bytes and length (within
    /// `cap`), as the rewrite stages do: the list then defines `PW_PIPELINE_WRITES`.
    Custom {
        function: String,
        source: String,
        writes_frame: bool,
    },
}

/// A built-in GPU stage of the library (besides parse, acl and count, which the fused template
/// knows): adding one is its header in cuda/, its Rust stage, its config key and one entry here.
#[derive(Clone, Copy, Debug)]
pub struct LibraryStage {
    /// The stage's name in configs (the Rust stage's `Stage::name`).
    pub name: &'static str,
    /// Its device function (the stage ABI signature).
    pub function: &'static str,
    /// The cuda/ header that defines it.
    pub header: &'static str,
    /// Whether it reads the packet metadata (needs `parse` before it).
    pub reads_meta: bool,
    /// Whether it rewrites frames (`pw_frame *`): the generated source then defines
    /// `PW_PIPELINE_WRITES`, and the transport hands every frame where it lives in its ring slot,
    /// with room after it, and sends what the stages leave there.
    pub writes_frame: bool,
    /// Whether it reads the frame's receive time (`pw_frame.timestamp_ns`): the executor then
    /// sends every burst with full descriptors (compact ones carry no time).
    pub reads_time: bool,
    /// Whether it sets the frame's send time (`pw_verdict.send_ns`), which reaches the port
    /// only through the TX ring: the generated source defines `PW_PIPELINE_TIMED` (the kernel
    /// writes the ring's send-time array, `PW_TX_TIMES`) and the executor runs no queue tagged
    /// (tagged queues have no TX ring).
    pub sets_send_time: bool,
}

/// The library's built-in GPU stages beyond the fused three.
pub const LIBRARY_STAGES: &[LibraryStage] = &[
    LibraryStage {
        name: "fronthaul",
        function: "pw_stage_fronthaul",
        header: "fronthaul_stage.cuh",
        reads_meta: false,
        writes_frame: false,
        reads_time: true,
        sets_send_time: false,
    },
    // The rewrite stages (cuda/rewrite_stages.cuh; parameter blocks: pipeline::rewrite::gpu).
    rewrite("l2fwd", "pw_stage_l2fwd", false),
    rewrite("vlan", "pw_stage_vlan", false),
    rewrite("dscp", "pw_stage_dscp", true),
    rewrite("route", "pw_stage_route", true),
    rewrite("respond", "pw_stage_respond", true),
    // Sets the send time from the receive time (pw_verdict.send_ns); the frame is not written.
    // Connection tracking: a flow table per queue in the executor's per-queue stage state,
    // frames of one flow in arrival order (ORDERED).
    LibraryStage {
        name: "conntrack",
        function: "pw_stage_conntrack",
        header: "conntrack_stage.cuh",
        reads_meta: true,
        writes_frame: false,
        reads_time: true,
        sets_send_time: false,
    },
    flow_stats::FLOW_STATS,
    // Rate limits: a token-bucket table per queue in the per-queue stage state, frames of one
    // bucket in arrival order (ORDERED).
    LibraryStage {
        name: "rate_limit",
        function: "pw_stage_rate_limit",
        header: "rate_limit_stage.cuh",
        reads_meta: true,
        writes_frame: false,
        reads_time: true,
        sets_send_time: false,
    },
    // IDS rules over the payload (pktwarp-inspect): the rule set in its parameter block, hit
    // counters in a buffer; the receive time for its alerts.
    LibraryStage {
        name: "inspect",
        function: "pw_stage_inspect",
        header: "inspect_stage.cuh",
        reads_meta: true,
        writes_frame: false,
        reads_time: true,
        sets_send_time: false,
    },
    LibraryStage {
        name: "tx_time",
        function: "pw_stage_tx_time",
        header: "rewrite_stages.cuh",
        reads_meta: false,
        writes_frame: false,
        reads_time: true,
        sets_send_time: true,
    },
];

/// Library stages that read the whole frame, not its headers only (fronthaul decodes every PRB):
/// the generated source then defines `PW_PIPELINE_READS_PAYLOAD`, and the transport stages a
/// chunk of large frames into shared memory a few frames at a time rather than run them in place
/// in a mapped ring (where each thread's payload reads cross PCIe a few bytes at a time). Frames
/// whose stages read headers only keep running in place when the chunk is too large: copying
/// whole large frames would move more bytes than their header reads. A list beside
/// [`LIBRARY_STAGES`] rather than a field of it, so entries added elsewhere need no change.
pub const READS_PAYLOAD: &[&str] = &["pw_stage_fronthaul", "pw_stage_inspect"];

/// Library stages that keep state per queue which frames of one flow must change in arrival
/// order (conntrack's flow table, rate_limit's token buckets): the generated source defines `PW_PIPELINE_ORDERED`, whose
/// round hooks (cuda/flow_order.cuh) take a round's frames in order per flow, and a frame that a
/// stage before the ordered one drops is marked skipped (`pw_order_skip`). The executor runs such
/// a pipeline with one CTA per queue (bursts of a queue in order). At most two ordered stages
/// per pipeline, each on its own channel ([`order_channels`]), and not beside a stage with round
/// hooks of its own (fronthaul).
pub const ORDERED: &[&str] = &[
    "pw_stage_conntrack",
    "pw_stage_rate_limit",
    "pw_stage_flow_stats_own",
];

/// Library stages that keep per-queue state of their own which they change in frame order on
/// the second channel of cuda/flow_order.cuh (inspect's flowbits and thresholds: frames with
/// a matching stateful rule wait for the round's earlier such frames). A frame dropped before
/// such a stage is marked skipped on that channel (`pw_order2_skip`).
pub const ORDERED_SECOND: &[&str] = &["pw_stage_inspect"];

/// Per [`ORDERED`] stage, its function naming a frame's order key without touching its state:
/// the owned layout's key pass (cuda/kernels_owned.cu: several CTAs a burst, each its keys).
pub const ORDER_KEYS: &[(&str, &str)] = &[
    ("pw_stage_conntrack", "pw_conntrack_order_key"),
    ("pw_stage_rate_limit", "pw_rate_limit_order_key"),
    ("pw_stage_flow_stats_own", "pw_flow_stats_order_key"),
];

/// Second forms of library stages, under the name of their [`LIBRARY_STAGES`] entry, which the
/// executor picks by the pipeline (not by name): `flow_stats` with a table of its own.
pub const LIBRARY_VARIANTS: &[LibraryStage] = &[flow_stats::FLOW_STATS_OWN];

/// The library stage (or variant) whose device function is `function`.
pub fn library_stage(function: &str) -> Option<&'static LibraryStage> {
    LIBRARY_STAGES
        .iter()
        .chain(LIBRARY_VARIANTS)
        .find(|l| l.function == function)
}

/// A rewrite stage of `cuda/rewrite_stages.cuh`: it writes the frame.
const fn rewrite(name: &'static str, function: &'static str, reads_meta: bool) -> LibraryStage {
    LibraryStage {
        name,
        function,
        header: "rewrite_stages.cuh",
        reads_meta,
        writes_frame: true,
        reads_time: false,
        sets_send_time: false,
    }
}

impl StageSpec {
    pub fn builtin(name: &str) -> Option<StageSpec> {
        let kind = match name {
            "parse" => StageKind::Parse,
            "acl" => StageKind::Acl,
            "count" => StageKind::Count,
            other => {
                let l = LIBRARY_STAGES.iter().find(|l| l.name == other)?;
                StageKind::Library {
                    function: l.function,
                    header: l.header,
                }
            }
        };
        Some(StageSpec {
            name: name.to_string(),
            kind,
        })
    }

    /// The acl stage, as [`StageSpec::builtin`]`("acl")` gives it or, when its rule set has
    /// rewrite actions, [`StageKind::AclRewrite`].
    pub fn acl(rewrites: bool) -> StageSpec {
        StageSpec {
            name: "acl".to_string(),
            kind: if rewrites {
                StageKind::AclRewrite
            } else {
                StageKind::Acl
            },
        }
    }

    /// The flow_stats stage: over a `conntrack` stage's tables (as [`StageSpec::builtin`]
    /// gives it), or, `own`, with a flow table of its own (`pw_stage_flow_stats_own`, an
    /// [`ORDERED`] stage).
    pub fn flow_stats(own: bool) -> StageSpec {
        let l = if own {
            &flow_stats::FLOW_STATS_OWN
        } else {
            &flow_stats::FLOW_STATS
        };
        StageSpec {
            name: l.name.to_string(),
            kind: StageKind::Library {
                function: l.function,
                header: l.header,
            },
        }
    }

    /// Whether this is the acl stage (with or without rewrite actions).
    pub fn is_acl(&self) -> bool {
        matches!(self.kind, StageKind::Acl | StageKind::AclRewrite)
    }

    /// The device function the generated code calls.
    pub fn function(&self) -> &str {
        match &self.kind {
            StageKind::Parse => "pw_stage_parse",
            StageKind::Acl => "pw_stage_acl",
            StageKind::AclRewrite => "pw_stage_acl_rw",
            StageKind::Count => "pw_stage_count",
            StageKind::Library { function, .. } => function,
            StageKind::Custom { function, .. } => function,
        }
    }

    /// Whether the stage rewrites frames (see [`LibraryStage::writes_frame`]).
    pub fn writes_frame(&self) -> bool {
        match &self.kind {
            StageKind::AclRewrite => true,
            StageKind::Custom { writes_frame, .. } => *writes_frame,
            StageKind::Library { function, .. } => {
                library_stage(function).is_some_and(|l| l.writes_frame)
            }
            _ => false,
        }
    }

    /// Whether the stage sets the send time (see [`LibraryStage::sets_send_time`]).
    pub fn sets_send_time(&self) -> bool {
        match &self.kind {
            StageKind::Library { function, .. } => {
                library_stage(function).is_some_and(|l| l.sets_send_time)
            }
            _ => false,
        }
    }

    /// Whether the stage reads the whole frame (see [`READS_PAYLOAD`]).
    pub fn reads_payload(&self) -> bool {
        matches!(&self.kind, StageKind::Library { function, .. } if READS_PAYLOAD.contains(function))
    }

    /// Whether the stage keeps per-queue state in flow order (see [`ORDERED`]).
    pub fn orders_flows(&self) -> bool {
        matches!(&self.kind, StageKind::Library { function, .. } if ORDERED.contains(function))
    }

    /// Whether the stage reads the frame's receive time (see [`LibraryStage::reads_time`]).
    pub fn reads_time(&self) -> bool {
        match &self.kind {
            StageKind::Library { function, .. } => {
                library_stage(function).is_some_and(|l| l.reads_time)
            }
            _ => false,
        }
    }

    /// Whether the stage reads the packet metadata (needs `parse` before it).
    pub fn reads_meta(&self) -> bool {
        match &self.kind {
            StageKind::Acl | StageKind::AclRewrite => true,
            StageKind::Library { function, .. } => {
                library_stage(function).is_some_and(|l| l.reads_meta)
            }
            _ => false,
        }
    }
}

/// A stage list the generator refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodegenError {
    /// Index of the stage the error is about.
    pub stage: usize,
    pub message: String,
}

impl std::fmt::Display for CodegenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pipeline[{}]: {}", self.stage, self.message)
    }
}

impl std::error::Error for CodegenError {}

/// Which template a stage list takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Template {
    Fused,
    Composed,
}

/// Checks the list (order, names, sizes) and says which template serves it.
pub fn template_of(stages: &[StageSpec]) -> Result<Template, CodegenError> {
    if stages.is_empty() {
        return Err(CodegenError {
            stage: 0,
            message: "a pipeline needs at least one stage".into(),
        });
    }
    if stages.len() > MAX_STAGES {
        return Err(CodegenError {
            stage: MAX_STAGES,
            message: format!(
                "a pipeline has at most {MAX_STAGES} stages, this one has {}",
                stages.len()
            ),
        });
    }
    let mut parsed = false;
    for (i, s) in stages.iter().enumerate() {
        if s.reads_meta() && !parsed {
            return Err(CodegenError {
                stage: i,
                message: format!("the `{}` stage needs a `parse` stage before it", s.name),
            });
        }
        if let StageKind::Custom { function, .. } = &s.kind {
            if !is_c_identifier(function) {
                return Err(CodegenError {
                    stage: i,
                    message: format!(
                        "stage `{}`: CUDA function name `{function}` is not a C identifier",
                        s.name
                    ),
                });
            }
        }
        parsed |= s.kind == StageKind::Parse;
    }
    check_ordered(stages)?;
    let order = [StageKind::Parse, StageKind::Acl, StageKind::Count];
    let mut next = 0;
    for s in stages {
        match order[next..].iter().position(|k| *k == s.kind) {
            Some(p) => next += p + 1,
            None => return Ok(Template::Composed),
        }
    }
    Ok(Template::Fused)
}

/// At most this many [`ORDERED`] stages in one GPU pipeline: each takes a channel of
/// cuda/flow_order.cuh, and there are two.
pub const MAX_ORDERED: usize = 2;

/// The [`ORDERED`] and [`ORDERED_SECOND`] stages of the list with the channel of
/// cuda/flow_order.cuh each orders its frames on (0 or 1), in list order: the first ordered stage
/// takes channel 0, a second one (or an [`ORDERED_SECOND`] stage) channel 1. A frame then goes
/// through each ordered stage in arrival order per that stage's own key, on its own channel, one
/// after another inside its thread (so the second stage sees the first one's verdict, as on the
/// CPU), while different keys run in parallel. Errors as [`check_ordered`].
pub fn order_channels(stages: &[StageSpec]) -> Result<Vec<(usize, u32)>, CodegenError> {
    check_ordered(stages)?;
    let mut ordered = 0u32;
    Ok(stages
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            if s.orders_flows() {
                ordered += 1;
                Some((i, ordered - 1))
            } else if ORDERED_SECOND.contains(&s.function()) {
                Some((i, 1))
            } else {
                None
            }
        })
        .collect())
}

/// The macro naming the channel an [`ORDERED`] stage's header orders its frames on (undefined:
/// channel 0), e.g. `PW_ORDER_CH_RATE_LIMIT` for `pw_stage_rate_limit`.
pub fn order_channel_macro(function: &str) -> String {
    format!(
        "PW_ORDER_CH_{}",
        function
            .trim_start_matches("pw_stage_")
            .to_ascii_uppercase()
    )
}

/// [`ORDERED`] stages take the round hooks: at most [`MAX_ORDERED`] per pipeline (a channel of
/// cuda/flow_order.cuh each, so not the same stage function twice, and not two beside an
/// [`ORDERED_SECOND`] stage, which takes the second channel too), and none beside a stage with
/// round hooks of its own (fronthaul decodes PRBs in them).
pub fn check_ordered(stages: &[StageSpec]) -> Result<(), CodegenError> {
    let ordered: Vec<(usize, &StageSpec)> = stages
        .iter()
        .enumerate()
        .filter(|(_, s)| s.orders_flows())
        .collect();
    let Some(&(first, f)) = ordered.first() else {
        return Ok(());
    };
    if let Some(&(i, s)) = ordered.get(MAX_ORDERED) {
        return Err(CodegenError {
            stage: i,
            message: format!(
                "stage `{}`: a GPU pipeline has at most {MAX_ORDERED} stages that keep \
                 per-queue flow state in frame order (`{}` is pipeline[{first}], `{}` \
                 pipeline[{}]); run it on the CPU executor",
                s.name, f.name, ordered[1].1.name, ordered[1].0
            ),
        });
    }
    if let Some(&(i, s)) = ordered.get(1) {
        if s.function() == f.function() {
            return Err(CodegenError {
                stage: i,
                message: format!(
                    "stage `{}`: a GPU pipeline has one `{}` stage that keeps per-queue flow \
                     state in frame order (pipeline[{first}] is another); run it on the CPU \
                     executor",
                    s.name, f.name
                ),
            });
        }
        let second = stages
            .iter()
            .enumerate()
            .find(|(_, x)| ORDERED_SECOND.contains(&x.function()));
        if let Some((j, x)) = second {
            return Err(CodegenError {
                stage: j,
                message: format!(
                    "stage `{}` keeps per-queue state in frame order beside two stages that \
                     do too (`{}` pipeline[{first}], `{}` pipeline[{i}]), and a GPU pipeline \
                     orders at most two; run it on the CPU executor",
                    x.name, f.name, s.name
                ),
            });
        }
    }
    // Fronthaul defines the round hooks itself; inspect reads whole frames (READS_PAYLOAD)
    // but has no hooks, and the chunked rounds it takes run in order.
    let own_hooks = |s: &StageSpec| s.function() == "pw_stage_fronthaul";
    if let Some((i, s)) = stages.iter().enumerate().find(|(_, s)| own_hooks(s)) {
        return Err(CodegenError {
            stage: i,
            message: format!(
                "stage `{}` and stage `{}` (pipeline[{first}]) cannot share a GPU pipeline \
                 (both work on whole rounds of frames); run it on the CPU executor",
                s.name, f.name
            ),
        });
    }
    Ok(())
}

/// Whether a stage of the list keeps per-queue state in flow order ([`ORDERED`]): the executor
/// then runs one CTA per queue.
pub fn pipeline_orders_flows(stages: &[StageSpec]) -> bool {
    stages.iter().any(StageSpec::orders_flows)
}

/// The ordered stage's key function when the pipeline can take the owned layout: the stages
/// before the ordered one are `parse` alone (its only effects are the frame's metadata, verdict
/// and counters, which the key pass keeps to itself) and no stage writes frames (a CTA would
/// otherwise read a frame another CTA of its group rewrites).
pub fn pipeline_order_key(stages: &[StageSpec]) -> Option<&'static str> {
    let at = stages.iter().position(StageSpec::orders_flows)?;
    // Two ordered stages key a frame differently (a flow, a source): no one split of the
    // frames keeps both keys on one CTA.
    let two = stages.iter().filter(|s| s.orders_flows()).count() > 1;
    if two || pipeline_writes(stages) || !stages[..at].iter().all(|s| s.kind == StageKind::Parse) {
        return None;
    }
    let StageKind::Library { function, .. } = &stages[at].kind else {
        return None;
    };
    ORDER_KEYS
        .iter()
        .find(|(f, _)| f == function)
        .map(|(_, k)| *k)
}

/// `pw_pipeline_order_key`: the stages before the ordered one (their counters in the caller's
/// scratch blocks), then the ordered stage's key; PW_ORDER_NONE for a frame they drop.
fn order_key_function(stages: &[StageSpec], key: &str) -> String {
    let mut f = String::from(
        "#define PW_PIPELINE_ORDER_KEY 1\n\
         /* A frame's order key for the owned layout (kernels_owned.cu). */\n\
         PW_DEVICE uint32_t pw_pipeline_order_key(pw_frame *f, pw_packet_meta *m, pw_verdict *v,\n\
         \x20                                        const pw_pipeline_ctx *ctx) {\n",
    );
    for (k, s) in stages.iter().enumerate() {
        if s.orders_flows() {
            let _ = writeln!(f, "    return {key}(f, m, pw_stage_params(ctx, {k}u));\n}}");
            break;
        }
        let _ = writeln!(
            f,
            "    {}(f, m, v, pw_stage_params(ctx, {k}u), &ctx->counters[{k}]);",
            s.function()
        );
        f.push_str("    if (v->action == PW_ACTION_DROP) return PW_ORDER_NONE;\n");
    }
    f
}

/// Whether `s` can name a C function (a user stage's CUDA entry point).
pub fn is_c_identifier(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch == '_' || ch.is_ascii_alphabetic())
        && c.all(|ch| ch == '_' || ch.is_ascii_alphanumeric())
}

/// What the generated source is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The whole kernel module (transport included), for nvcc / NVRTC.
    Gpu,
    /// `pw_pipeline_frame` alone with an `extern "C"` entry, for the host C++ compiler (the
    /// differential tests). Always the composed template.
    Host,
}

/// The source of a stage list's kernel (GPU) or of its host build, with `#include "..."` lines
/// left for [`inline_includes`].
pub fn generate(stages: &[StageSpec], target: Target) -> Result<String, CodegenError> {
    let template = template_of(stages)?;
    let names: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
    let mut out = format!(
        "/* Generated by pktwarp-kernels from the pipeline: {} */\n",
        names.join(" -> ")
    );
    if template == Template::Fused && target == Target::Gpu {
        out.push_str(
            "#define PW_PIPELINE_FUSED 1\n#include \"stages.cuh\"\n#include \"kernels.cu\"\n",
        );
        return Ok(out);
    }
    let _ = writeln!(out, "#define PW_PIPELINE_COMPOSED 1");
    let _ = writeln!(out, "#define PW_PIPELINE_N_STAGES {}u", stages.len());
    if let Some(k) = stages.iter().position(StageSpec::is_acl) {
        let _ = writeln!(out, "#define PW_PIPELINE_ACL_STAGE {k}u");
    }
    if pipeline_writes(stages) {
        let _ = writeln!(out, "#define PW_PIPELINE_WRITES 1");
    }
    if pipeline_sets_send_time(stages) {
        let _ = writeln!(out, "#define PW_PIPELINE_TIMED 1");
    }
    if stages.iter().any(StageSpec::reads_payload) {
        let _ = writeln!(out, "#define PW_PIPELINE_READS_PAYLOAD 1");
    }
    if pipeline_orders_flows(stages) {
        let _ = writeln!(out, "#define PW_PIPELINE_ORDERED 1");
        let channels = order_channels(stages)?;
        if channels.iter().any(|&(_, ch)| ch == 1) {
            let _ = writeln!(out, "#define PW_PIPELINE_ORDERED2 1");
        }
        // A second ordered stage orders its frames on the second channel (its header reads
        // the macro; ORDERED_SECOND stages use that channel always).
        for &(i, ch) in &channels {
            if ch == 1 && stages[i].orders_flows() {
                let m = order_channel_macro(stages[i].function());
                let _ = writeln!(out, "#define {m} 1u");
            }
        }
    }
    out.push_str("#include \"stages.cuh\"\n");
    let mut seen: Vec<&str> = Vec::new();
    for s in stages {
        match &s.kind {
            StageKind::Library { header, .. } => {
                let _ = writeln!(out, "#include \"{header}\"");
            }
            StageKind::AclRewrite => out.push_str("#include \"rewrite_stages.cuh\"\n"),
            _ => {}
        }
    }
    for s in stages {
        if let StageKind::Custom {
            function, source, ..
        } = &s.kind
        {
            if seen.contains(&function.as_str()) {
                continue;
            }
            seen.push(function);
            let _ = writeln!(out, "/* ---- stage `{}`: {} ---- */", s.name, function);
            out.push_str(source);
            out.push('\n');
        }
    }
    out.push_str(&frame_function(stages));
    if let Some(key) = pipeline_order_key(stages) {
        out.push_str(&order_key_function(stages, key));
    }
    match target {
        Target::Gpu => out.push_str("#include \"kernels.cu\"\n"),
        Target::Host => out.push_str(HOST_ENTRY),
    }
    Ok(out)
}

/// Whether a stage of the list rewrites frames (the transport then runs every frame in place in
/// its ring slot and sends what the stages leave there).
pub fn pipeline_writes(stages: &[StageSpec]) -> bool {
    stages.iter().any(StageSpec::writes_frame)
}

/// Whether a stage of the list sets send times (they reach the ports through the TX ring only).
pub fn pipeline_sets_send_time(stages: &[StageSpec]) -> bool {
    stages.iter().any(StageSpec::sets_send_time)
}

/// Whether a stage of the list reads the frame's receive time (the executor then sends full
/// descriptors, which carry it).
pub fn pipeline_reads_time(stages: &[StageSpec]) -> bool {
    stages.iter().any(StageSpec::reads_time)
}

/// `pw_pipeline_frame`: the stages in order, each after counting the frame in its counters,
/// stopping at the first drop (as `pipeline::stage::Pipeline::run_frames`).
fn frame_function(stages: &[StageSpec]) -> String {
    let mut f = String::from(
        "/* One frame through the stages, in the config's order (the CPU executor's semantics:\n \
         * a drop ends the frame's pipeline). `ctx->counters[k]` is stage k's counter block. */\n\
         PW_DEVICE void pw_pipeline_frame(pw_frame *f, pw_packet_meta *m, pw_verdict *v,\n\
         \x20                                 const pw_pipeline_ctx *ctx) {\n",
    );
    // Frames dropped before the ordered stage never reach it: marked skipped so the later
    // frames of their round do not wait for them (cuda/flow_order.cuh).
    let ordered_at = stages.iter().position(StageSpec::orders_flows);
    // The same on the second channel for the stage that orders its frames there (a second
    // ordered stage, or an ORDERED_SECOND one); the list passed check_ordered in template_of.
    let second_at = order_channels(stages)
        .unwrap_or_default()
        .iter()
        .find(|&&(_, ch)| ch == 1)
        .map(|&(i, _)| i);
    for (k, s) in stages.iter().enumerate() {
        let _ = writeln!(f, "    /* {k}: {} */", s.name);
        let _ = writeln!(f, "    PW_ADD64(&ctx->counters[{k}].v[0], 1);");
        let params = match s.kind {
            StageKind::Acl | StageKind::AclRewrite => "ctx->acl".to_string(),
            _ => format!("pw_stage_params(ctx, {k}u)"),
        };
        let _ = writeln!(
            f,
            "    {}(f, m, v, {params}, &ctx->counters[{k}]);",
            s.function()
        );
        if matches!(s.kind, StageKind::Custom { .. } | StageKind::Library { .. }) {
            f.push_str(
                "    if (v->action == PW_ACTION_DROP && v->drop_reason == PW_DROP_NONE) \
                 v->drop_reason = (uint8_t)PW_DROP_STAGE;\n",
            );
        }
        let (first, second) = (
            ordered_at.is_some_and(|o| k < o),
            second_at.is_some_and(|o| k < o),
        );
        if first || second {
            f.push_str("    if (v->action == PW_ACTION_DROP) {\n");
            if first {
                f.push_str("        pw_order_skip();\n");
            }
            if second {
                f.push_str("        pw_order2_skip();\n");
            }
            f.push_str("        return;\n    }\n");
        } else if k + 1 < stages.len() {
            f.push_str("    if (v->action == PW_ACTION_DROP) return;\n");
        }
    }
    f.push_str("}\n");
    f
}

/// The host build's entry: one frame through `pw_pipeline_frame`, its counters into `counters`
/// (PW_MAX_STAGES blocks), `params[k]` the parameter block of stage k.
const HOST_ENTRY: &str = r#"
extern "C" void pw_host_pipeline_frame(uint8_t *data, uint32_t *len, uint32_t cap, uint32_t *wire_len,
                                       uint16_t port, uint64_t timestamp_ns, uint32_t mark,
                                       uint16_t queue, uint32_t burst_seq, uint32_t burst_index,
                                       pw_packet_meta *meta,
                                       pw_verdict *verdict, const void *const *params,
                                       pw_stage_counters *counters) {
    pw_frame f;
    f.data = data;
    f.len = *len;
    f.wire_len = *wire_len;
    f.cap = cap;
    f.port = port;
    f.queue = queue;
    f.timestamp_ns = timestamp_ns;
    f.mark = mark;
    f.burst_seq = burst_seq;
    f.burst_index = burst_index;
    pw_pipeline_ctx ctx;
    /* The host's table of parameter-block pointers (64-bit, as the device's addresses). */
    ctx.params = (const uint64_t *)params;
#ifdef PW_PIPELINE_ACL_STAGE
    ctx.acl = (const pw_acl_sel *)params[PW_PIPELINE_ACL_STAGE];
#else
    ctx.acl = 0;
#endif
    ctx.counters = counters;
    pw_verdict_pass(verdict);
    pw_meta_zero(meta);
    pw_pipeline_frame(&f, meta, verdict, &ctx);
    *len = f.len;
    *wire_len = f.wire_len;
}
extern "C" uint32_t pw_host_pipeline_abi(void) { return PW_STAGE_ABI_VERSION; }
#ifdef PW_PIPELINE_ORDER_KEY
/* The owned layout's key of a frame (pw_pipeline_order_key), its stages' counters into
 * `counters` (the GPU's key pass counts into scratch blocks it never reads). */
extern "C" uint32_t pw_host_pipeline_order_key(const uint8_t *data, uint32_t len, uint16_t port,
                                               uint64_t timestamp_ns, uint16_t queue,
                                               const void *const *params, pw_stage_counters *counters) {
    pw_frame f;
    f.data = (uint8_t *)data;
    f.len = len;
    f.wire_len = len;
    f.cap = len;
    f.port = port;
    f.queue = queue;
    f.timestamp_ns = timestamp_ns;
    f.mark = 0;
    f.burst_seq = 0;
    f.burst_index = 0;
    pw_pipeline_ctx ctx;
    ctx.params = (const uint64_t *)params;
    ctx.acl = 0;
    ctx.counters = counters;
    pw_packet_meta m;
    pw_verdict v;
    pw_verdict_pass(&v);
    pw_meta_zero(&m);
    return pw_pipeline_order_key(&f, &m, &v, &ctx);
}
#endif
"#;

/// Inlines `#include "x"` lines (each file once, recursively) with `lookup(name)`'s text, so a
/// compiler needs no include path; an include `lookup` does not know is left as it is.
pub fn inline_includes(
    main: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    fn walk(
        text: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
        seen: &mut Vec<String>,
        out: &mut String,
        depth: u32,
    ) -> Result<(), String> {
        if depth > 16 {
            return Err("includes nested more than 16 deep".into());
        }
        for line in text.lines() {
            let name = line
                .trim_start()
                .strip_prefix("#include \"")
                .and_then(|r| r.split('"').next());
            if let Some(name) = name {
                if seen.iter().any(|s| s == name) {
                    continue;
                }
                if let Some(body) = lookup(name) {
                    seen.push(name.to_string());
                    let _ = writeln!(out, "/* ---- {name} ---- */");
                    walk(&body, lookup, seen, out, depth + 1)?;
                    let _ = writeln!(out, "/* ---- end of {name} ---- */");
                    continue;
                }
            }
            out.push_str(line);
            out.push('\n');
        }
        Ok(())
    }
    let mut out = String::new();
    walk(main, lookup, &mut Vec::new(), &mut out, 0)?;
    Ok(out)
}

#[cfg(test)]
#[path = "codegen_tests.rs"]
mod tests;
