//! A pipeline ready to run: the ordered stages of a queue, built once from the config and shared
//! (read-only) by every worker. Each worker keeps its own scratch state.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::burst::{Burst, FrameDesc};
use crate::counters::{QueueCounters, PARSE_STATUS_SLOTS};
use crate::meta::PacketMeta;
use crate::stage::acl::AclStage;
use crate::stage::custom::CustomSlot;
use crate::stage::parse;
use crate::stage::registry::StageRegistry;
use crate::verdict::{Action, DropReason, Verdict};

/// A stage written on the library (CPU executor): runs on every frame that reaches it, after the
/// stages before it, and may change the frame's verdict (a drop stops the pipeline for that
/// frame). Shared by every worker, so per-frame state must be atomic or per-thread.
pub trait CustomStage: Send + Sync {
    /// Called once per frame. `meta` is filled when a `parse` stage ran before this one.
    fn process(&self, frame: &[u8], meta: &PacketMeta, verdict: &mut Verdict);

    /// Names of the stage's counters (at most 7; the same as its CUDA implementation's
    /// `GpuStage::counter_names`). Default: none.
    fn counter_names(&self) -> Vec<String> {
        Vec::new()
    }

    /// The values of the named counters, same order as [`CustomStage::counter_names`], so the
    /// CPU and GPU executors report the same counters. Default: none.
    fn counters(&self) -> Vec<u64> {
        Vec::new()
    }
}

/// Most stages one pipeline may have.
pub const MAX_STAGES: usize = 16;

/// One stage, ready to run.
pub enum Stage {
    Parse,
    Count,
    Acl(AclSlot),
    /// A stage of the application's own (`custom:` in the config), labelled by its own name in
    /// stage lists, metrics and the summary.
    Custom(Box<CustomSlot>),
    /// O-RAN U-plane decode into the slot grid (`fronthaul:`); CPU executor only so far.
    Fronthaul(Box<crate::fronthaul::FronthaulStage>),
}

/// The published ACL tables of an `acl` stage. Immutable once published: a reload builds the new
/// tables aside and publishes them with one pointer swap; each worker loads the pointer once per
/// burst (so a burst is classified wholly by one rule set), and the old tables are freed when the
/// last worker still holding them drops its reference.
pub struct AclSlot {
    tables: ArcSwap<AclStage>,
}

impl AclSlot {
    pub fn new(stage: AclStage) -> Self {
        AclSlot {
            tables: ArcSwap::from_pointee(stage),
        }
    }

    /// The tables in force now.
    pub fn current(&self) -> Arc<AclStage> {
        self.tables.load_full()
    }
}

impl Stage {
    /// The stage's name in the config, logs and metrics: a built-in's key, or a custom stage's
    /// registered name.
    pub fn name(&self) -> &str {
        match self {
            Stage::Parse => "parse",
            Stage::Count => "count",
            Stage::Acl(_) => "acl",
            Stage::Custom(c) => c.name(),
            Stage::Fronthaul(_) => "fronthaul",
        }
    }

    /// Whether the stage reads the packet metadata (needs `parse` before it).
    pub fn reads_meta(&self) -> bool {
        match self {
            Stage::Parse | Stage::Count | Stage::Fronthaul(_) => false,
            Stage::Acl(_) => true,
            Stage::Custom(c) => c.reads_meta(),
        }
    }
}

/// The ordered stages every queue runs.
pub struct Pipeline {
    pub stages: Vec<Stage>,
    /// Rule-set generation: 0 at start, +1 per published reload.
    generation: AtomicU64,
}

impl Pipeline {
    /// The stages in order. More than [`MAX_STAGES`] stages: the extra ones are not counted
    /// (use [`build`], which refuses them).
    pub fn new(stages: Vec<Stage>) -> Self {
        Pipeline {
            stages,
            generation: AtomicU64::new(0),
        }
    }

    /// Rules in the (first) ACL stage now in force.
    pub fn rule_count(&self) -> usize {
        self.acl().map(|a| a.rule_count()).unwrap_or(0)
    }

    /// The ACL tables in force now (first `acl` stage), if the pipeline has one.
    pub fn acl(&self) -> Option<Arc<AclStage>> {
        self.stages.iter().find_map(|s| match s {
            Stage::Acl(a) => Some(a.current()),
            _ => None,
        })
    }

    /// The rule-set generation now in force.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Publishes new ACL tables (built and validated by the caller) with one swap and returns
    /// the new generation. Workers pick them up at their next burst. Errors when the pipeline
    /// has no `acl` stage.
    pub fn reload_acl(&self, mut new: AclStage) -> anyhow::Result<u64> {
        let slot = self
            .stages
            .iter()
            .find_map(|s| match s {
                Stage::Acl(a) => Some(a),
                _ => None,
            })
            .ok_or_else(|| anyhow::anyhow!("the pipeline has no acl stage to reload"))?;
        // The generation is stamped into the tables and published with them in the one swap, so
        // a burst reports exactly the generation it was classified with (two separate atomics
        // could pair a generation with the other rule set). Reloads come from the one control
        // thread, so generations are stored in order.
        let g = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        new.generation = g;
        slot.tables.store(Arc::new(new));
        Ok(g)
    }

    /// The stages' names in order (custom stages by their registered names).
    pub fn stage_names(&self) -> Vec<String> {
        self.stages.iter().map(|s| s.name().to_string()).collect()
    }

    /// Runs every stage on every frame of `burst`, writing one verdict (and one metadata record)
    /// per frame, and counting into `c` (this worker is the single writer of its queue's worker
    /// counters). Returns the rule-set generation the burst was classified with.
    pub fn run_burst(
        &self,
        burst: &Burst,
        metas: &mut Vec<PacketMeta>,
        verdicts: &mut Vec<Verdict>,
        c: &QueueCounters,
    ) -> u64 {
        self.run_frames(burst.frames().map(|(d, f)| (*d, f)), metas, verdicts, c)
    }

    /// [`Pipeline::run_burst`] over any source of frames: each item is a frame's descriptor
    /// (`len` and `port` are read; `offset` is not) and its bytes, wherever they live (a
    /// [`Burst`], or the mbufs of a zero-copy DPDK burst). One verdict and one metadata record
    /// per frame, in order.
    pub fn run_frames<'f>(
        &self,
        frames: impl ExactSizeIterator<Item = (FrameDesc, &'f [u8])>,
        metas: &mut Vec<PacketMeta>,
        verdicts: &mut Vec<Verdict>,
        c: &QueueCounters,
    ) -> u64 {
        // One load of each ACL table pointer per burst (no allocation: at most MAX_STAGES).
        let generation = self.generation();
        let mut tables: [Option<Arc<AclStage>>; MAX_STAGES] = Default::default();
        for (slot, s) in tables.iter_mut().zip(&self.stages) {
            if let Stage::Acl(a) = s {
                *slot = Some(a.current());
            }
        }
        let n = frames.len();
        metas.clear();
        metas.resize(n, PacketMeta::default());
        verdicts.clear();
        verdicts.resize(n, Verdict::PASS);
        let mut stage_frames = [0u64; MAX_STAGES];
        let mut stage_bytes = [0u64; MAX_STAGES];
        let (mut passed, mut mirrored, mut to_host, mut acl_default) = (0u64, 0u64, 0u64, 0u64);
        let mut drops = [0u64; DropReason::COUNT];
        for ((meta, v), (desc, frame)) in metas.iter_mut().zip(verdicts.iter_mut()).zip(frames) {
            for (si, stage) in self.stages.iter().enumerate() {
                if let Some(slot) = stage_frames.get_mut(si) {
                    *slot += 1;
                }
                match stage {
                    Stage::Parse => {
                        parse::parse(frame, meta);
                        if meta.status != 0 {
                            *v = Verdict::drop(DropReason::ParseError);
                            let s = (meta.status as usize).min(PARSE_STATUS_SLOTS - 1);
                            c.parse_status[s].add(1);
                            break;
                        }
                    }
                    Stage::Count => {
                        if let Some(slot) = stage_bytes.get_mut(si) {
                            *slot += desc.len as u64;
                        }
                    }
                    Stage::Custom(c) => {
                        c.cpu().process(frame, meta, v);
                        if v.action == Action::Drop {
                            v.reason.get_or_insert(DropReason::StageDrop);
                            break;
                        }
                    }
                    Stage::Fronthaul(f) => {
                        // Ta4 windows are judged on the frame's receive time: the capture's or
                        // generator's timestamp, the host clock when the port gives none.
                        if desc.timestamp_ns != 0 {
                            f.process_at(frame, desc.timestamp_ns, meta, v);
                        } else {
                            f.process(frame, meta, v);
                        }
                        if v.action == Action::Drop {
                            v.reason.get_or_insert(DropReason::StageDrop);
                            break;
                        }
                    }
                    Stage::Acl(_) => {
                        let Some(acl) = tables.get(si).and_then(Option::as_ref) else {
                            continue;
                        };
                        let r = acl.classify(meta, desc.port);
                        if r.rule == flow_rules::abi::ACL_NO_MATCH {
                            acl_default += 1;
                        } else {
                            match c.rule_hits.get(r.rule as usize) {
                                Some(h) => h.add(1),
                                // A reload grew the rule set past the counters' size.
                                None => c.rule_hits_other.add(1),
                            }
                        }
                        v.rule = r.rule;
                        v.mark = r.mark;
                        v.action = r.action;
                        if r.action == Action::Drop {
                            v.reason = Some(DropReason::AclDrop);
                            break;
                        }
                    }
                }
            }
            match v.action {
                Action::Pass => passed += 1,
                Action::Mirror => mirrored += 1,
                Action::ToHost => to_host += 1,
                Action::Drop => {
                    if let Some(r) = v.reason {
                        drops[r as usize] += 1;
                    }
                }
            }
        }
        for (si, _) in self.stages.iter().enumerate().take(MAX_STAGES) {
            c.stage_frames[si].add(stage_frames[si]);
            c.stage_bytes[si].add(stage_bytes[si]);
        }
        c.passed.add(passed);
        c.mirrored.add(mirrored);
        c.to_host.add(to_host);
        c.acl_default.add(acl_default);
        for (r, n) in drops.iter().enumerate() {
            if *n > 0 && r != DropReason::RingFull as usize && r != DropReason::TxError as usize {
                c.drops[r].add(*n);
            }
        }
        // The generation of the tables actually used (see reload_acl).
        tables
            .iter()
            .flatten()
            .next()
            .map_or(generation, |t| t.generation)
    }
}

/// Builds the runnable pipeline from the config's stage list (built-in stages only: a
/// `custom:` stage is an error; see [`build_with`]).
pub fn build(
    stages: &[crate::config::StageConfig],
    resolve: impl Fn(&Path) -> std::path::PathBuf,
) -> anyhow::Result<Pipeline> {
    build_with(stages, resolve, &StageRegistry::default())
}

/// Builds the runnable pipeline from the config's stage list, with `custom:` stages from
/// `registry`.
pub fn build_with(
    stages: &[crate::config::StageConfig],
    resolve: impl Fn(&Path) -> std::path::PathBuf,
    registry: &StageRegistry,
) -> anyhow::Result<Pipeline> {
    use crate::config::StageConfig;
    if stages.len() > MAX_STAGES {
        anyhow::bail!(
            "a pipeline has at most {MAX_STAGES} stages, this one has {}",
            stages.len()
        );
    }
    let mut out = Vec::with_capacity(stages.len());
    for s in stages {
        out.push(match s {
            StageConfig::Parse => Stage::Parse,
            StageConfig::Count => Stage::Count,
            StageConfig::Acl(a) => Stage::Acl(AclSlot::new(AclStage::from_config(a, &resolve)?)),
            StageConfig::Fronthaul(f) => Stage::Fronthaul(Box::new(fronthaul_stage(f, &resolve)?)),
            StageConfig::Custom(c) => Stage::Custom(Box::new(CustomSlot::from_registry(
                &c.name, &c.options, registry,
            )?)),
        });
    }
    let mut parsed = false;
    for (i, s) in out.iter().enumerate() {
        if s.reads_meta() && !parsed {
            anyhow::bail!(
                "pipeline[{i}]: the `{}` stage reads the packet metadata and needs a `parse` \
                 stage before it",
                s.name()
            );
        }
        parsed |= matches!(s, Stage::Parse);
    }
    Ok(Pipeline::new(out))
}

/// The `fronthaul` stage of a config, its sink folder resolved against the config's.
fn fronthaul_stage(
    f: &crate::fronthaul::FronthaulConfig,
    resolve: &impl Fn(&Path) -> std::path::PathBuf,
) -> anyhow::Result<crate::fronthaul::FronthaulStage> {
    use crate::fronthaul::config::SinkConfig;
    let mut f = f.clone();
    if let SinkConfig::Npy { dir, .. } = &mut f.sink {
        *dir = resolve(dir);
    }
    crate::fronthaul::FronthaulStage::from_config(&f)
        .map_err(|e| anyhow::anyhow!("stage `fronthaul`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::pcap::CaptureReader;

    fn counters_of(c: &QueueCounters) -> Vec<u64> {
        let mut v = vec![
            c.passed.get(),
            c.mirrored.get(),
            c.to_host.get(),
            c.acl_default.get(),
            c.rule_hits_other.get(),
        ];
        for list in [
            &c.stage_frames,
            &c.stage_bytes,
            &c.parse_status,
            &c.rule_hits,
        ] {
            v.extend(list.iter().map(|x| x.get()));
        }
        v.extend(c.drops.iter().map(|x| x.get()));
        v
    }

    /// run_frames over frames held outside any Burst (as the zero-copy DPDK path holds them in
    /// mbufs) gives the same metadata, verdicts, counters and generation as run_burst.
    #[test]
    fn run_frames_equals_run_burst() {
        let data =
            std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data"));
        assert!(data.is_dir(), "test data missing: {}", data.display());
        let pipeline = crate::stage::test_inline_filter_pipeline();
        // Every frame of two captures, plus truncated copies (parse errors), over two ports.
        let mut owned: Vec<(FrameDesc, Vec<u8>)> = Vec::new();
        for file in ["pcaps/multi_proto.pcap", "pcaps/tcpdump/afs.pcap"] {
            let mut r = CaptureReader::open(data.join(file)).unwrap();
            while let Some(f) = r.next_frame().unwrap() {
                let i = owned.len();
                let bytes = if i % 7 == 3 {
                    f.data[..f.data.len().min(20)].to_vec()
                } else {
                    f.data.to_vec()
                };
                let d = FrameDesc {
                    port: (i % 2) as u16,
                    len: bytes.len() as u32,
                    wire_len: bytes.len() as u32,
                    timestamp_ns: f.timestamp_ns,
                    ..FrameDesc::default()
                };
                owned.push((d, bytes));
            }
        }
        let mut burst = Burst::default();
        for (d, f) in &owned {
            burst.push(f, *d);
        }
        let rules_n = pipeline.rule_count();
        let (c1, c2) = (
            QueueCounters::new(3, rules_n),
            QueueCounters::new(3, rules_n),
        );
        let (mut m1, mut v1, mut m2, mut v2) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let g1 = pipeline.run_burst(&burst, &mut m1, &mut v1, &c1);
        let g2 = pipeline.run_frames(
            owned.iter().map(|(d, f)| (*d, f.as_slice())),
            &mut m2,
            &mut v2,
            &c2,
        );
        assert_eq!(g1, g2);
        assert_eq!(v1.len(), owned.len());
        assert_eq!(m1, m2);
        assert_eq!(v1, v2);
        assert_eq!(counters_of(&c1), counters_of(&c2));
        // The comparison covered passes and parse drops.
        assert!(c1.passed.get() > 0);
        assert!(c1.drop_count(DropReason::ParseError) > 0);
    }
}
