//! The stage registry: the names a pipeline's `custom:` stages may use, each with the factory
//! that builds the stage from its YAML options.
//!
//! A library user registers a stage once, before the config is loaded:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use pipeline::stage::{StageRegistry, StageFactory, BuiltStage};
//! # struct Guard;
//! # impl StageFactory for Guard {
//! #     fn build(&self, _: &serde_json::Value) -> anyhow::Result<BuiltStage> { unimplemented!() }
//! # }
//! let mut registry = StageRegistry::default(); // the built-ins only
//! registry.register("syn_guard", Arc::new(Guard)).unwrap();
//! ```
//!
//! and the config names it: `- custom: { name: syn_guard, min_src_port: 1024 }`. Every stage has
//! ONE semantics with a Rust implementation (the CPU executor, and the reference the GPU is
//! tested against) and, optionally, a CUDA one ([`GpuStage`]); a GPU pipeline refuses a stage
//! without CUDA (`executor: auto` runs it on the CPU instead).

use pktwarp_kernels::codegen::is_c_identifier;
use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;

use crate::stage::descriptor::{GpuImpl, StageDescriptor, StageNeeds};
use crate::stage::run::CustomStage;

/// Most named counters one stage may have: a stage's GPU counter block holds 8 words and word 0
/// is the frames the stage saw.
pub const MAX_STAGE_COUNTERS: usize = 7;

/// Largest parameter block a GPU stage may upload (bytes): a block lives in device memory
/// beside the ACL tables and is re-uploaded on each publish, so it is kept small.
pub const MAX_GPU_PARAMS: usize = 64 * 1024;

/// Longest stage or counter name: names are metrics label values and log fields.
pub const MAX_NAME_LEN: usize = 64;

/// Most frame room one stage may ask for (bytes after every frame, in every ring slot).
pub const MAX_FRAME_ROOM: u16 = 256;

/// Most per-flow state one stage may ask for (bytes a flow, in every flow table entry).
pub const MAX_FLOW_STATE: u32 = 1024;

/// Builds a user stage from its YAML options.
pub trait StageFactory: Send + Sync {
    /// Builds the stage from its YAML options (everything under `custom:` except `name`).
    fn build(&self, options: &serde_json::Value) -> anyhow::Result<BuiltStage>;

    /// Whether the stage reads the packet metadata, so needs a `parse` stage before it (a
    /// config error otherwise). Default: it does.
    fn reads_meta(&self) -> bool {
        true
    }

    /// What the stage needs of the data path, as a built-in's descriptor says it: the
    /// executors plan from it (`writes_frame`: the stage gets the frame writable, through
    /// [`CustomStage::process_mut`] and `pw_frame *` on the GPU, with `frame_room` bytes after
    /// it). Default: the metadata as [`StageFactory::reads_meta`] says, nothing else.
    fn needs(&self) -> StageNeeds {
        StageNeeds {
            reads_meta: self.reads_meta(),
            ..StageNeeds::NONE
        }
    }
}

/// A user stage, built: its Rust implementation and, optionally, its CUDA one.
#[derive(Clone)]
pub struct BuiltStage {
    pub cpu: Arc<dyn CustomStage>,
    pub gpu: Option<GpuStage>,
}

/// The CUDA implementation of a user stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuStage {
    /// CUDA C source defining `function` with the stage ABI signature (documented in
    /// gpu-kernels/cuda/pktwarp_abi.h, section "stage ABI"):
    ///   PW_DEVICE void NAME(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v,
    ///                       const void *params, pw_stage_counters *counters)
    pub source: String,
    pub function: String,
    /// The stage's parameter block as the CUDA code reads it (bytes; uploaded to device memory).
    pub params: Vec<u8>,
    /// Names of the stage's counters (at most 7; `counters->v[1..]`: `v[0]` is frames seen).
    pub counter_names: Vec<String>,
    /// Device buffers the stage owns (their addresses patched into `params`); usually none.
    pub buffers: Vec<pktwarp_kernels::StageBuffer>,
}

/// The user stages a process knows, by name.
#[derive(Clone, Default)]
pub struct StageRegistry {
    custom: BTreeMap<String, Arc<dyn StageFactory>>,
    /// The descriptors of the stages registered with one ([`StageRegistry::register_stage`]).
    described: BTreeMap<String, &'static StageDescriptor>,
}

impl std::fmt::Debug for StageRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageRegistry")
            .field("custom", &self.names())
            .finish()
    }
}

impl StageRegistry {
    /// Registers `factory` under `name` (lowercase letters, digits and `_`, starting with a
    /// letter). A name already registered, or a built-in stage's name, is an error.
    pub fn register(&mut self, name: &str, factory: Arc<dyn StageFactory>) -> anyhow::Result<()> {
        check_name(name).with_context(|| format!("cannot register stage `{name}`"))?;
        if crate::stage::descriptor::is_reserved(name) {
            anyhow::bail!("cannot register stage `{name}`: a built-in stage has that name");
        }
        if self.custom.contains_key(name) {
            anyhow::bail!("cannot register stage `{name}`: a stage of that name is registered");
        }
        self.custom.insert(name.to_string(), factory);
        Ok(())
    }

    /// Registers a stage described as a built-in is: its [`StageDescriptor`] (name, usage,
    /// summary, needs, drop reasons, counters, `GpuImpl::Own` or `CpuOnly`) and the factory that
    /// builds it. Its needs are the descriptor's (the factory's `needs` is not asked), and a
    /// build whose counters differ from the descriptor's is refused. `pktwarp stages` lists it
    /// as it lists the built-ins.
    pub fn register_stage(
        &mut self,
        d: &'static StageDescriptor,
        factory: Arc<dyn StageFactory>,
    ) -> anyhow::Result<()> {
        let named = |e: anyhow::Error| anyhow::anyhow!("cannot register stage `{}`: {e:#}", d.name);
        if !matches!(d.gpu, GpuImpl::Own | GpuImpl::CpuOnly) {
            return Err(named(anyhow::anyhow!(
                "its GPU implementation is {:?}: a registered stage brings its own CUDA (Own) or \
                 none (CpuOnly)",
                d.gpu
            )));
        }
        check_needs(&d.needs).map_err(named)?;
        if d.counters.len() > MAX_STAGE_COUNTERS {
            return Err(named(anyhow::anyhow!(
                "{} counters, at most {MAX_STAGE_COUNTERS}",
                d.counters.len()
            )));
        }
        self.register(d.name, factory)?;
        self.described.insert(d.name.to_string(), d);
        Ok(())
    }

    /// The descriptor of a stage registered with one.
    pub fn descriptor(&self, name: &str) -> Option<&'static StageDescriptor> {
        self.described.get(name).copied()
    }

    /// What the stage registered under `name` needs: its descriptor's, else its factory's.
    pub fn needs(&self, name: &str) -> Option<StageNeeds> {
        match self.descriptor(name) {
            Some(d) => Some(d.needs),
            None => self.get(name).map(|f| f.needs()),
        }
    }

    /// The factory registered under `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn StageFactory>> {
        self.custom.get(name).cloned()
    }

    /// The registered user stages' names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.custom.keys().map(String::as_str).collect()
    }

    /// The registered names for an error message: `a, b` or `none registered`.
    pub fn names_for_error(&self) -> String {
        if self.custom.is_empty() {
            "none are registered (a binary registers its stages in a StageRegistry)".into()
        } else {
            format!("registered: {}", self.names().join(", "))
        }
    }

    /// Builds the stage registered under `name` from its options and checks what the factory
    /// returned (counter names, CUDA function name, parameter size).
    pub fn build(&self, name: &str, options: &serde_json::Value) -> anyhow::Result<BuiltStage> {
        let factory = self.get(name).ok_or_else(|| {
            anyhow::anyhow!("unknown custom stage `{name}`: {}", self.names_for_error())
        })?;
        let built = factory
            .build(options)
            .with_context(|| format!("custom stage `{name}`"))?;
        check_built(&built).with_context(|| format!("custom stage `{name}`"))?;
        if let Some(d) = self.descriptor(name) {
            let names = built.cpu.counter_names();
            if names
                .iter()
                .map(String::as_str)
                .ne(d.counters.iter().copied())
            {
                anyhow::bail!(
                    "custom stage `{name}`: its counters {names:?} differ from its descriptor's {:?}",
                    d.counters
                );
            }
        }
        Ok(built)
    }
}

/// A stage or counter name: a Prometheus label value and a log field, so kept plain.
pub(crate) fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok {
        anyhow::bail!(
            "a name is 1 to {MAX_NAME_LEN} characters of a-z, 0-9 and `_`, starting with a \
             letter; got {name:?}"
        );
    }
    Ok(())
}

/// What a registered stage may need today: the executors give a registered stage the
/// metadata, a writable frame with room, and the whole frame; not yet the receive or send time.
pub(crate) fn check_needs(n: &StageNeeds) -> anyhow::Result<()> {
    if n.reads_time || n.sets_send_time {
        anyhow::bail!(
            "needs the frame's receive or send time, which the executors give built-in stages \
             only for now"
        );
    }
    if n.frame_room > 0 && !n.writes_frame {
        anyhow::bail!(
            "asks for {} bytes of frame room without `writes_frame`",
            n.frame_room
        );
    }
    if n.frame_room > MAX_FRAME_ROOM {
        anyhow::bail!(
            "asks for {} bytes of frame room, at most {MAX_FRAME_ROOM}",
            n.frame_room
        );
    }
    match n.keeps_flow_state {
        None => Ok(()),
        Some(b) if b == 0 || b > MAX_FLOW_STATE => anyhow::bail!(
            "keeps_flow_state of {b} bytes a flow: 1 to {MAX_FLOW_STATE} (no state: None)"
        ),
        Some(b) => anyhow::bail!(
            "keeps {b} bytes of state per flow (needs keeps_flow_state), which a registered \
             stage cannot have yet: only built-in stages get per-queue state (docs/stages.md)"
        ),
    }
}

/// The factory's output is the application's code, not trusted input to the data path: a bad
/// stage is refused at start, with what is wrong.
pub(crate) fn check_built(b: &BuiltStage) -> anyhow::Result<()> {
    let names = b.cpu.counter_names();
    if names.len() > MAX_STAGE_COUNTERS {
        anyhow::bail!("{} counters, at most {MAX_STAGE_COUNTERS}", names.len());
    }
    for (i, n) in names.iter().enumerate() {
        check_name(n).with_context(|| format!("counter {i}"))?;
        if names[..i].contains(n) {
            anyhow::bail!("counter `{n}` named twice");
        }
    }
    check_families(&b.cpu.metric_families())?;
    if let Some(g) = &b.gpu {
        if g.counter_names != names {
            anyhow::bail!(
                "the CUDA implementation's counters {:?} differ from the Rust one's {:?}: one \
                 stage has one set of counters",
                g.counter_names,
                names
            );
        }
        if !is_c_identifier(&g.function) {
            anyhow::bail!("CUDA function name {:?} is not a C identifier", g.function);
        }
        if !g.source.contains(g.function.as_str()) {
            anyhow::bail!("the CUDA source does not define `{}`", g.function);
        }
        if g.params.len() > MAX_GPU_PARAMS {
            anyhow::bail!(
                "CUDA parameter block of {} bytes, at most {MAX_GPU_PARAMS}",
                g.params.len()
            );
        }
    }
    Ok(())
}

/// Most metric families one stage may declare.
pub const MAX_STAGE_FAMILIES: usize = 16;

/// A stage's own metric families: plain names (`pktwarp_` + the name), a counter's ending in
/// `_total` (that a name is not one of the daemon's is control's check,
/// `control::metrics::check_stage_families`, the layer that owns those names); plain label names, not `stage` or `position` (the
/// collector adds those), none twice.
fn check_families(fams: &[crate::stage::api::StageMetricFamily]) -> anyhow::Result<()> {
    use crate::stage::api::MetricKind;
    if fams.len() > MAX_STAGE_FAMILIES {
        anyhow::bail!(
            "{} metric families, at most {MAX_STAGE_FAMILIES}",
            fams.len()
        );
    }
    for (i, f) in fams.iter().enumerate() {
        let full = format!("pktwarp_{}", f.name);
        let ctx = || format!("metric family `{full}`");
        check_name(&f.name).with_context(ctx)?;
        if fams[..i].iter().any(|g| g.name == f.name) {
            anyhow::bail!("{}: declared twice", ctx());
        }
        if f.kind == MetricKind::Counter && !f.name.ends_with("_total") {
            anyhow::bail!("{}: a counter's name ends in `_total`", ctx());
        }
        for (k, l) in f.labels.iter().enumerate() {
            check_name(l).with_context(|| format!("{}: label {k}", ctx()))?;
            if l == "stage" || l == "position" || f.labels[..k].contains(l) {
                anyhow::bail!(
                    "{}: label `{l}` is the collector's own (`stage`, `position`) or given twice",
                    ctx()
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::PacketMeta;
    use crate::verdict::{Action, Verdict};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Drops every frame whose first byte equals `byte`, counting them.
    struct DropByte {
        byte: u8,
        dropped: AtomicU64,
    }

    impl CustomStage for DropByte {
        fn process(&self, frame: &[u8], _: &PacketMeta, v: &mut Verdict) {
            if frame.first() == Some(&self.byte) {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                v.action = Action::Drop;
            }
        }
        fn counter_names(&self) -> Vec<String> {
            vec!["dropped".into()]
        }
        fn counters(&self) -> Vec<u64> {
            vec![self.dropped.load(Ordering::Relaxed)]
        }
    }

    struct DropByteFactory {
        gpu_counters: Vec<String>,
    }

    impl StageFactory for DropByteFactory {
        fn build(&self, options: &serde_json::Value) -> anyhow::Result<BuiltStage> {
            let byte = options
                .get("byte")
                .and_then(serde_json::Value::as_u64)
                .and_then(|b| u8::try_from(b).ok())
                .ok_or_else(|| anyhow::anyhow!("option `byte` (0-255) is required"))?;
            Ok(BuiltStage {
                cpu: Arc::new(DropByte {
                    byte,
                    dropped: AtomicU64::new(0),
                }),
                gpu: Some(GpuStage {
                    source: "PW_DEVICE void drop_byte(...) {}".into(),
                    function: "drop_byte".into(),
                    params: vec![byte],
                    counter_names: self.gpu_counters.clone(),
                    buffers: Vec::new(),
                }),
            })
        }
    }

    fn factory() -> Arc<dyn StageFactory> {
        Arc::new(DropByteFactory {
            gpu_counters: vec!["dropped".into()],
        })
    }

    #[test]
    fn default_has_no_user_stages() {
        let r = StageRegistry::default();
        assert!(r.names().is_empty());
        assert!(r.get("syn_guard").is_none());
        let e = r.build("syn_guard", &serde_json::json!({})).err().unwrap();
        assert!(
            e.to_string().contains("unknown custom stage `syn_guard`"),
            "{e}"
        );
        assert!(e.to_string().contains("none are registered"), "{e}");
    }

    #[test]
    fn registers_gets_and_builds_by_name() {
        let mut r = StageRegistry::default();
        r.register("drop_byte", factory()).unwrap();
        r.register("another", factory()).unwrap();
        assert_eq!(r.names(), ["another", "drop_byte"]);
        assert!(r.get("drop_byte").is_some());
        let b = r
            .build("drop_byte", &serde_json::json!({"byte": 7}))
            .unwrap();
        let mut v = Verdict::PASS;
        b.cpu.process(&[7, 1], &PacketMeta::default(), &mut v);
        assert_eq!(v.action, Action::Drop);
        let mut v = Verdict::PASS;
        b.cpu.process(&[8, 1], &PacketMeta::default(), &mut v);
        assert_eq!(v.action, Action::Pass);
        assert_eq!(b.cpu.counters(), [1]);
        assert_eq!(b.gpu.as_ref().map(|g| g.params.clone()), Some(vec![7]));
        let e = r.build("nope", &serde_json::json!({})).err().unwrap();
        assert!(
            e.to_string().contains("registered: another, drop_byte"),
            "{e}"
        );
    }

    #[test]
    fn duplicate_builtin_and_bad_names_are_refused() {
        let mut r = StageRegistry::default();
        r.register("drop_byte", factory()).unwrap();
        let e = r.register("drop_byte", factory()).unwrap_err();
        assert!(e.to_string().contains("is registered"), "{e}");
        // Every built-in the registry lists (a hand-kept list can miss one, and a user stage could
        // then take its metric label), and the `custom` key.
        let builtins = crate::stage::BUILTINS.iter().map(|d| d.name);
        for b in builtins.chain(["custom"]) {
            let e = r.register(b, factory()).unwrap_err();
            assert!(e.to_string().contains("built-in"), "{b}: {e}");
        }
        for bad in ["", "Drop", "1st", "a-b", "a b", "é", &"x".repeat(65)] {
            assert!(r.register(bad, factory()).is_err(), "{bad:?}");
        }
        assert_eq!(r.names(), ["drop_byte"]);
    }

    #[test]
    fn a_factory_error_names_the_stage() {
        let mut r = StageRegistry::default();
        r.register("drop_byte", factory()).unwrap();
        let e = r
            .build("drop_byte", &serde_json::json!({"byte": 300}))
            .err()
            .unwrap();
        let msg = format!("{e:#}");
        assert!(msg.contains("custom stage `drop_byte`"), "{msg}");
        assert!(msg.contains("option `byte`"), "{msg}");
    }

    #[test]
    fn mismatched_counters_are_refused() {
        let mut r = StageRegistry::default();
        let f = Arc::new(DropByteFactory {
            gpu_counters: vec!["other".into()],
        });
        r.register("drop_byte", f).unwrap();
        let e = r
            .build("drop_byte", &serde_json::json!({"byte": 1}))
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("differ"), "{e:#}");
    }

    #[test]
    fn bad_metric_families_are_refused_naming_them() {
        use crate::stage::api::{MetricKind, StageMetricFamily};
        let fam = |name: &str, kind, labels: &[&str]| StageMetricFamily {
            name: name.into(),
            help: "h".into(),
            kind,
            labels: labels.iter().map(|l| l.to_string()).collect(),
        };
        let ok = fam("guard_flows_total", MetricKind::Counter, &["dir"]);
        assert!(check_families(std::slice::from_ref(&ok)).is_ok());
        let err = |f: Vec<StageMetricFamily>| format!("{:#}", check_families(&f).unwrap_err());
        assert!(err(vec![fam("guard_flows", MetricKind::Counter, &[])]).contains("_total"));
        assert!(err(vec![ok.clone(), ok.clone()]).contains("twice"));
        assert!(err(vec![fam("g", MetricKind::Gauge, &["stage"])]).contains("`stage`"));
        assert!(err(vec![fam("g", MetricKind::Gauge, &["a", "a"])]).contains("twice"));
        assert!(err(vec![fam("G-x", MetricKind::Gauge, &[])]).contains("pktwarp_G-x"));
        assert!(err(vec![fam("g", MetricKind::Gauge, &["Bad"])]).contains("label 0"));
    }

    #[test]
    fn needs_a_registered_stage_cannot_have_are_refused() {
        let n = |f: &dyn Fn(&mut StageNeeds)| {
            let mut n = StageNeeds::META;
            f(&mut n);
            check_needs(&n)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(n(&|_| {}), "");
        assert_eq!(
            n(&|x| {
                x.writes_frame = true;
                x.frame_room = MAX_FRAME_ROOM;
            }),
            ""
        );
        assert!(n(&|x| x.frame_room = 4).contains("without `writes_frame`"));
        assert!(n(&|x| {
            x.writes_frame = true;
            x.frame_room = MAX_FRAME_ROOM + 1;
        })
        .contains("at most"));
        assert!(n(&|x| x.reads_time = true).contains("receive or send time"));
        assert!(n(&|x| x.sets_send_time = true).contains("receive or send time"));
        // Per-flow state has its place in the needs; the executors refuse it for now.
        assert!(
            n(&|x| x.keeps_flow_state = Some(16)).contains("a registered stage cannot have yet")
        );
        assert!(n(&|x| x.keeps_flow_state = Some(0)).contains("1 to 1024"));
        assert!(n(&|x| x.keeps_flow_state = Some(MAX_FLOW_STATE + 1)).contains("1 to 1024"));
    }

    #[test]
    fn a_described_stage_builds_only_with_its_descriptors_counters() {
        static D: StageDescriptor = StageDescriptor {
            name: "drop_byte",
            usage: "`custom: { name: drop_byte, byte }`",
            summary: "drops frames starting with a byte",
            needs: StageNeeds::NONE,
            drop_reasons: &[crate::verdict::DropReason::StageDrop],
            counters: &["other"],
            gpu: GpuImpl::Own,
            reloads: false,
        };
        let mut r = StageRegistry::default();
        r.register_stage(&D, factory()).unwrap();
        assert_eq!(r.needs("drop_byte"), Some(StageNeeds::NONE));
        let e = r
            .build("drop_byte", &serde_json::json!({"byte": 1}))
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("differ from its descriptor's"),
            "{e}"
        );
        static FLOWS: StageDescriptor = StageDescriptor {
            name: "flows",
            needs: StageNeeds {
                keeps_flow_state: Some(8),
                ..StageNeeds::NONE
            },
            ..D
        };
        let e = r.register_stage(&FLOWS, factory()).unwrap_err();
        assert!(
            format!("{e:#}").contains("a registered stage cannot have yet"),
            "{e:#}"
        );
        assert!(r.get("flows").is_none());
    }

    #[test]
    fn built_stage_checks() {
        let good = factory().build(&serde_json::json!({"byte": 1})).unwrap();
        assert!(check_built(&good).is_ok());
        let with = |f: &dyn Fn(&mut GpuStage)| {
            let mut b = good.clone();
            if let Some(g) = b.gpu.as_mut() {
                f(g);
            }
            check_built(&b)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(with(&|g| g.function = "bad name".into()).contains("C identifier"));
        assert!(with(&|g| g.function = "missing".into()).contains("does not define"));
        assert!(with(&|g| g.params = vec![0; MAX_GPU_PARAMS + 1]).contains("parameter block"));
    }
}
