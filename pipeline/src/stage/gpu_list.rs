//! The pipeline as the GPU executor's kernel generator sees it: each stage's name, kind and, for
//! a user stage, its CUDA implementation.

use crate::rewrite::gpu as rw;
use crate::stage::registry::GpuStage;
use crate::stage::run::{Pipeline, Stage};

/// What a stage is on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuStageKind {
    Parse,
    Acl,
    Count,
    /// A user stage: its CUDA source (if any) is in [`GpuStageRef::custom`].
    Custom,
    /// A built-in stage of the kernel library (`pktwarp_kernels::codegen::LIBRARY_STAGES`, by
    /// the same name): its parameter block is in [`GpuStageRef::library`].
    Library,
    /// A built-in stage without a GPU implementation yet: the GPU executor refuses the
    /// pipeline, naming it.
    CpuOnly,
}

/// A library stage's GPU side: its parameter block as its CUDA code reads it, and the device
/// buffers it owns (their addresses are patched into the block by the executor).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuParams {
    pub block: Vec<u8>,
    pub buffers: Vec<pktwarp_kernels::StageBuffer>,
}

/// One stage of [`Pipeline::gpu_stage_list`].
#[derive(Clone, Debug)]
pub struct GpuStageRef<'a> {
    /// The stage's name in the config, metrics and logs.
    pub name: &'a str,
    pub kind: GpuStageKind,
    /// A user stage's CUDA implementation; `None` for a built-in, or for a user stage without
    /// CUDA (which the GPU executor cannot run: see [`Pipeline::gpu_refusal`]).
    pub custom: Option<GpuStage>,
    /// A library stage's parameter block and buffers.
    pub library: Option<GpuParams>,
    /// An `acl` stage whose rule set has rewrite actions (`set:`): on the GPU it is
    /// `pw_stage_acl_rw`, which writes the frame ([`GpuStageRef::builtin_spec`]).
    pub acl_rewrites: bool,
    /// A user stage whose needs say `writes_frame`: its CUDA function takes `pw_frame *`.
    pub custom_writes: bool,
    /// A `flow_stats` stage with a flow table of its own (no `conntrack`): on the GPU it is
    /// `pw_stage_flow_stats_own` ([`GpuStageRef::builtin_spec`]).
    pub flow_stats_own: bool,
    /// The stage's per-queue state (`pktwarp_kernels::KernelImage::queue_state`): `bytes` a
    /// queue, the base address and queue count written at `addr_at` of its block.
    pub queue_state: Vec<pktwarp_kernels::StageBuffer>,
}

impl GpuStageRef<'_> {
    /// The kernel generator's spec of a built-in stage (parse, acl, count, a library stage):
    /// an `acl` with rewrite actions is `StageKind::AclRewrite`, so its list takes the composed
    /// template with `PW_PIPELINE_WRITES`; `None` for a stage without CUDA.
    pub fn builtin_spec(&self) -> Option<pktwarp_kernels::StageSpec> {
        match self.kind {
            GpuStageKind::Acl => Some(pktwarp_kernels::StageSpec::acl(self.acl_rewrites)),
            GpuStageKind::Library if self.flow_stats_own => {
                Some(pktwarp_kernels::StageSpec::flow_stats(true))
            }
            _ => pktwarp_kernels::StageSpec::builtin(self.name),
        }
    }
}

impl Stage {
    /// The GPU side of a built-in stage beyond parse / acl / count: its parameter block and
    /// buffers, for the stage of `LIBRARY_STAGES` with this stage's name; `None` when it has no
    /// GPU implementation. Adding a built-in GPU stage is one arm here, its CUDA header, its
    /// Rust stage and config key, and one `LIBRARY_STAGES` entry.
    pub fn gpu_params(&self) -> Option<GpuParams> {
        match self {
            Stage::Parse | Stage::Acl(_) | Stage::Count => None,
            // A registered stage of the kernel library.
            Stage::Custom(c) => c.cpu().gpu_library().and_then(Result::ok),
            // The tables are its per-queue state (Stage::gpu_queue_state).
            Stage::Conntrack(c) => Some(block(c.gpu_block())),
            // With a table of its own, conntrack's block over it (its tables are its per-queue
            // state); over conntrack's, nothing to parameterise: a word, as every library
            // stage gets a block.
            Stage::FlowStats(f) => Some(block(f.gpu_own_block().unwrap_or_else(|| vec![0; 8]))),
            // The rules in force (a reload moves `Pipeline::params_generation` on); the tables
            // and their counters are its per-queue state.
            Stage::RateLimit(r) => {
                let (rules, epoch) = r.gpu_rules();
                crate::stage::rate_limit::gpu_block(&rules, epoch).map(block)
            }
            // The rewrite stages (gpu-kernels/cuda/rewrite_stages.cuh; blocks: rewrite::gpu).
            Stage::L2fwd(op) => Some(block(rw::l2fwd_block(op))),
            Stage::Vlan(op) => Some(block(rw::vlan_block(op))),
            Stage::Dscp(op) => Some(block(rw::dscp_block(op))),
            // The table in force: a reload's new table moves `Pipeline::params_generation` on,
            // and the GPU host side then publishes the block built here.
            Stage::Route(r) => Some(block(rw::route_block(&r.current()))),
            Stage::Respond(r) => Some(block(rw::respond_block(r))),
            Stage::TxTime(op) => Some(block(rw::tx_time_block(op))),
        }
    }

    /// What the stage is on the GPU, without building its parameter block (a `route` stage's
    /// holds its whole table).
    fn gpu_kind(&self) -> GpuStageKind {
        match self {
            Stage::Parse => GpuStageKind::Parse,
            Stage::Acl(_) => GpuStageKind::Acl,
            Stage::Count => GpuStageKind::Count,
            Stage::Custom(c) => match c.cpu().gpu_library() {
                Some(Ok(_)) => GpuStageKind::Library,
                Some(Err(_)) => GpuStageKind::CpuOnly,
                None => GpuStageKind::Custom,
            },
            Stage::Conntrack(_) | Stage::RateLimit(_) | Stage::FlowStats(_) => {
                GpuStageKind::Library
            }
            Stage::L2fwd(_)
            | Stage::Vlan(_)
            | Stage::Dscp(_)
            | Stage::Route(_)
            | Stage::Respond(_)
            | Stage::TxTime(_) => GpuStageKind::Library,
        }
    }
}

impl Stage {
    /// The stage's state per queue on the GPU: one device buffer of `bytes` for every queue of
    /// the executor, zeroed at start (conntrack: the queue's flow table). The executor writes
    /// the base address (u64) at `addr_at` of the stage's block and the queue count (u32) at
    /// `addr_at + 8`.
    pub fn gpu_queue_state(&self) -> Vec<pktwarp_kernels::StageBuffer> {
        match self {
            Stage::Conntrack(c) => vec![pktwarp_kernels::StageBuffer {
                name: "flow table".into(),
                bytes: usize::try_from(c.queue_state_bytes()).unwrap_or(usize::MAX),
                addr_at: crate::stage::conntrack::GPU_STATE_AT,
            }],
            // A table of its own: conntrack's layout (table, then ended-flow ring).
            Stage::FlowStats(f) => f
                .gpu_own_queue_state_bytes()
                .map(|b| pktwarp_kernels::StageBuffer {
                    name: "flow table".into(),
                    bytes: usize::try_from(b).unwrap_or(usize::MAX),
                    addr_at: crate::stage::conntrack::GPU_STATE_AT,
                })
                .into_iter()
                .collect(),
            Stage::RateLimit(r) => vec![pktwarp_kernels::StageBuffer {
                name: "rate-limit table".into(),
                bytes: usize::try_from(crate::stage::rate_limit::queue_state_bytes(&r.config()))
                    .unwrap_or(usize::MAX),
                addr_at: crate::stage::rate_limit::GPU_STATE_AT,
            }],
            // A library stage through the registry door (inspect's flowbits / threshold tables).
            Stage::Custom(c) if matches!(c.cpu().gpu_library(), Some(Ok(_))) => {
                c.cpu().gpu_queue_state()
            }
            _ => Vec::new(),
        }
    }
}

/// An acl stage whose rule set has `ct:` rules and rewrites: the GPU's rewriting acl stage
/// (`pw_stage_acl_rw`) reads rewrites from one classifier image, not the per-state ones.
fn acl_ct_with_rewrites(s: &Stage) -> bool {
    match s {
        Stage::Acl(a) => {
            let a = a.current();
            a.first_ct_rule().is_some() && a.has_rewrites()
        }
        _ => false,
    }
}

fn block(block: Vec<u8>) -> GpuParams {
    GpuParams {
        block,
        buffers: Vec::new(),
    }
}

impl Pipeline {
    /// The stages' host sides on the GPU executor, which polls them beside its host side and
    /// finishes them at the end of the run; `handed`: the log of when bursts went to the GPU
    /// (the executor records into it while any host side is there).
    pub fn gpu_host_sides(
        &self,
        handed: &std::sync::Arc<crate::stage::gpu_host::HandedLog>,
    ) -> anyhow::Result<Vec<Box<dyn crate::stage::gpu_host::GpuHostSide>>> {
        let mut out: Vec<Box<dyn crate::stage::gpu_host::GpuHostSide>> = Vec::new();
        for (k, s) in self.stages.iter().enumerate() {
            if let Stage::Custom(c) = s {
                let side = c
                    .cpu()
                    .gpu_host_side(k, handed)
                    .map_err(|e| anyhow::anyhow!("stage `{}` (pipeline[{k}]): {e:#}", c.name()))?;
                out.extend(side);
            }
        }
        Ok(out)
    }

    /// The stages in order, for generating the GPU pipeline kernel.
    pub fn gpu_stage_list(&self) -> Vec<GpuStageRef<'_>> {
        self.stages
            .iter()
            .map(|s| {
                let (kind, custom, library) = match s {
                    Stage::Parse => (GpuStageKind::Parse, None, None),
                    Stage::Acl(_) => (GpuStageKind::Acl, None, None),
                    Stage::Count => (GpuStageKind::Count, None, None),
                    Stage::Custom(c) => match c.cpu().gpu_library() {
                        Some(Ok(p)) => (GpuStageKind::Library, None, Some(p)),
                        Some(Err(_)) => (GpuStageKind::CpuOnly, None, None),
                        None => (GpuStageKind::Custom, c.gpu(), None),
                    },
                    other => match other.gpu_params() {
                        Some(p) => (GpuStageKind::Library, None, Some(p)),
                        None => (GpuStageKind::CpuOnly, None, None),
                    },
                };
                GpuStageRef {
                    name: s.name(),
                    kind,
                    custom,
                    library,
                    acl_rewrites: matches!(s, Stage::Acl(a) if a.current().has_rewrites()),
                    custom_writes: matches!(s, Stage::Custom(c) if c.needs().writes_frame),
                    flow_stats_own: matches!(s, Stage::FlowStats(f) if f.owns_tables()),
                    queue_state: s.gpu_queue_state(),
                }
            })
            .collect()
    }

    /// Why the GPU executor cannot run this pipeline, naming the first stage without a CUDA
    /// implementation, or the stages that keep per-queue state in frame order which the kernel
    /// cannot order together (more than two, the same one twice, two beside `inspect`:
    /// `pktwarp_kernels::codegen::check_ordered`); `None` when it can. Said here, not only by the
    /// kernel generator, so that `executor: auto` takes the CPU.
    pub fn gpu_refusal(&self) -> Option<String> {
        self.gpu_stage_refusal()
            .or_else(|| self.gpu_ordered_refusal())
    }

    /// The stage whose per-queue state in frame order the kernel cannot order beside the
    /// others', named with them. Each stage that may order state stands as its spec; the others
    /// as a stage that orders nothing (under their own names).
    fn gpu_ordered_refusal(&self) -> Option<String> {
        use pktwarp_kernels::StageSpec;
        let inert = StageSpec::builtin("count")?;
        let specs: Vec<StageSpec> = self
            .stages
            .iter()
            .map(|s| {
                let spec = match s {
                    Stage::FlowStats(f) => Some(StageSpec::flow_stats(f.owns_tables())),
                    Stage::Conntrack(_) | Stage::RateLimit(_) => StageSpec::builtin(s.name()),
                    Stage::Custom(c) if matches!(c.cpu().gpu_library(), Some(Ok(_))) => {
                        StageSpec::builtin(s.name())
                    }
                    _ => None,
                };
                spec.unwrap_or_else(|| StageSpec {
                    name: s.name().to_string(),
                    ..inert.clone()
                })
            })
            .collect();
        let e = pktwarp_kernels::codegen::check_ordered(&specs).err()?;
        Some(format!(
            "pipeline[{}]: {}; the GPU executor cannot run this pipeline",
            e.stage, e.message
        ))
    }

    /// The first stage without a CUDA implementation, named.
    fn gpu_stage_refusal(&self) -> Option<String> {
        self.stages
            .iter()
            .enumerate()
            .find(|(_, s)| match s.gpu_kind() {
                GpuStageKind::CpuOnly => true,
                GpuStageKind::Custom => match s {
                    Stage::Custom(c) => c.gpu().is_none(),
                    _ => false,
                },
                GpuStageKind::Library => pktwarp_kernels::StageSpec::builtin(s.name()).is_none(),
                GpuStageKind::Acl => acl_ct_with_rewrites(s),
                _ => false,
            })
            .map(|(i, s)| {
                // A library stage through the registry door (inspect) says why itself.
                if let Stage::Custom(c) = s {
                    if let Some(Err(why)) = c.cpu().gpu_library() {
                        return format!("stage `{}` (pipeline[{i}]): {why}", s.name());
                    }
                }
                if acl_ct_with_rewrites(s) {
                    return format!(
                        "stage `acl` (pipeline[{i}]): a rule set with both `ct:` rules and \
                         rewrite actions (`set:`) has no CUDA implementation, so the GPU \
                         executor cannot run this pipeline"
                    );
                }
                format!(
                    "stage `{}` (pipeline[{i}]) has no CUDA implementation, so the GPU executor \
                     cannot run this pipeline",
                    s.name()
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::PacketMeta;
    use crate::stage::custom::CustomSlot;
    use crate::stage::registry::BuiltStage;
    use crate::stage::CustomStage;
    use crate::verdict::Verdict;
    use std::sync::Arc;

    struct Nop;
    impl CustomStage for Nop {
        fn process(&self, _: &[u8], _: &PacketMeta, _: &mut Verdict) {}
    }

    fn custom(name: &str, cuda: bool) -> Stage {
        let gpu = cuda.then(|| GpuStage {
            source: "PW_DEVICE void nop_stage() {}".into(),
            function: "nop_stage".into(),
            params: vec![1, 2],
            counter_names: Vec::new(),
            buffers: Vec::new(),
        });
        let built = BuiltStage {
            cpu: Arc::new(Nop),
            gpu,
        };
        Stage::Custom(Box::new(CustomSlot::new(name, built, true).unwrap()))
    }

    #[test]
    fn lists_the_stages_in_order_with_their_cuda() {
        let p = Pipeline::new(vec![
            Stage::Count,
            Stage::Parse,
            custom("guard", true),
            Stage::Count,
        ]);
        let l = p.gpu_stage_list();
        let got: Vec<(&str, GpuStageKind)> = l.iter().map(|s| (s.name, s.kind)).collect();
        assert_eq!(
            got,
            [
                ("count", GpuStageKind::Count),
                ("parse", GpuStageKind::Parse),
                ("guard", GpuStageKind::Custom),
                ("count", GpuStageKind::Count),
            ]
        );
        assert_eq!(
            l[2].custom.as_ref().map(|g| g.params.as_slice()),
            Some(&[1u8, 2][..])
        );
        assert!(l[0].custom.is_none());
        assert_eq!(p.gpu_refusal(), None);
    }

    #[test]
    fn the_rewrite_stages_are_library_stages_with_their_blocks() {
        use crate::rewrite::{self as rw, gpu};
        let respond = rw::Respond::new(&rw::RespondConfig {
            mac: rw::Mac([2, 0, 0, 0, 0, 1]),
            ipv4: vec!["192.0.2.1".parse().unwrap()],
            ipv6: vec![],
        })
        .unwrap();
        let p = Pipeline::new(vec![
            Stage::Parse,
            Stage::L2fwd(rw::L2fwd::swap()),
            Stage::Vlan(rw::Vlan::Pop),
            Stage::Dscp(rw::Dscp { dscp: 1 }),
            Stage::Respond(Box::new(crate::rewrite::stage::RespondSlot {
                op: respond,
                ingress_out: vec![0, 1, 2],
            })),
        ]);
        assert_eq!(p.gpu_refusal(), None);
        let l = p.gpu_stage_list();
        let sizes: Vec<usize> = l[1..]
            .iter()
            .map(|s| {
                assert_eq!(s.kind, GpuStageKind::Library, "{}", s.name);
                let g = s.library.as_ref().expect("a block");
                assert!(g.buffers.is_empty());
                g.block.len()
            })
            .collect();
        assert_eq!(
            sizes,
            [
                gpu::L2FWD_BLOCK,
                gpu::VLAN_BLOCK,
                gpu::DSCP_BLOCK,
                gpu::RESPOND_INGRESS_AT + 6
            ]
        );
    }

    /// Two stages with per-queue flow state in frame order run on the GPU (a channel of
    /// cuda/flow_order.cuh each); three, or the same one twice, are refused naming them (so
    /// `auto` takes the CPU); flow_stats over conntrack's tables orders nothing of its own.
    #[test]
    fn ordered_stages_past_two_are_named_in_the_refusal() {
        let build = |yaml: &str| {
            let stages: Vec<crate::stage::config::StageConfig> =
                serde_saphyr::from_str(yaml).unwrap();
            crate::stage::build(&stages, |x| x.to_path_buf()).unwrap()
        };
        let rl = "{ rate_limit: { entries: 64, rules: [{ name: a, key: src, rate_pps: 10 }] } }";
        let p = build(&format!(
            "[parse, {{ flow_stats: {{ entries: 64 }} }}, {rl}]"
        ));
        assert_eq!(p.gpu_refusal(), None);
        let p = build(&format!(
            "[parse, {{ conntrack: {{ entries: 64 }} }}, {rl}, count]"
        ));
        assert_eq!(p.gpu_refusal(), None);
        let p = build(&format!(
            "[parse, {{ conntrack: {{ entries: 64 }} }}, {rl}, {{ flow_stats: {{}} }}]"
        ));
        // flow_stats beside conntrack orders nothing: two ordered stages, accepted.
        assert_eq!(p.gpu_refusal(), None);
        let p = build(&format!("[parse, {rl}, {rl}]"));
        let why = p.gpu_refusal().expect("refused");
        assert!(
            why.contains("pipeline[2]") && why.contains("one `rate_limit` stage"),
            "{why}"
        );
        let p = build(&format!(
            "[parse, {{ flow_stats: {{ entries: 64 }} }}, {rl}, {rl}]"
        ));
        let why = p.gpu_refusal().expect("refused");
        assert!(
            why.contains("at most 2 stages") && why.contains("pipeline[3]"),
            "{why}"
        );
        let p = build("[parse, { conntrack: { entries: 64 } }, { flow_stats: {} }]");
        assert_eq!(p.gpu_refusal(), None);
        let p = build("[parse, { flow_stats: { entries: 64 } }]");
        assert_eq!(p.gpu_refusal(), None);
    }

    #[test]
    fn a_stage_without_cuda_is_named_in_the_refusal() {
        let p = Pipeline::new(vec![
            Stage::Parse,
            custom("with_cuda", true),
            custom("cpu_only", false),
        ]);
        let why = p.gpu_refusal().unwrap();
        assert!(why.contains("`cpu_only` (pipeline[2])"), "{why}");
    }
}
