//! The stage descriptor: what one stage is, declared once beside its implementation, and the
//! one list of the built-in stages.
//!
//! A descriptor says a stage's name (its config key, its `stage` label in the metrics, its name
//! in logs and the summary), how it is written in a config, what it does, what it needs of the
//! data path (the metadata, a writable frame, the receive time, ...), the drop reasons it may
//! give, its named counters and how it runs on the GPU. Every list of stages the project shows
//! or checks comes from [`BUILTINS`] and a process's [`super::StageRegistry`]: the names a user
//! stage may not take, the drop reasons the GPU reaper attributes to a stage, the stage table
//! of the README (`pktwarp stages --markdown`; a test holds the README to it), and
//! `pktwarp stages`.
//!
//! Adding a built-in stage: its folder (Rust, CUDA header, options, tests), its `DESCRIPTOR`
//! there, and one line in [`BUILTINS`].

use crate::verdict::DropReason;

/// What a stage needs of the data path; the executors plan from it (a stage that reads the
/// metadata needs `parse` before it; one that writes the frame gets it writable with room
/// after it; one that reads the time gets full descriptors on the GPU).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageNeeds {
    /// Reads the packet metadata: needs a `parse` stage before it.
    pub reads_meta: bool,
    /// Changes frame bytes (or the frame's length, within its frame room).
    pub writes_frame: bool,
    /// Reads the whole frame, not only its headers.
    pub reads_payload: bool,
    /// Reads the frame's receive time.
    pub reads_time: bool,
    /// Sets the frame's send time (`Verdict::send_ns`).
    pub sets_send_time: bool,
    /// With `writes_frame`: the most bytes the stage grows a frame by, which the executors
    /// leave after every frame (the frame room; `vlan`'s push takes 4).
    pub frame_room: u16,
    /// Keeps state per flow: the bytes of one flow's state. The executors will give such a
    /// stage its flow's state beside each frame; until the flow table is there, they refuse it
    /// (a config error naming the stage).
    pub keeps_flow_state: Option<u32>,
    /// Keeps one state that frames of every queue update (a slot grid whose eAxCs are steered
    /// to different queues): its verdicts depend on the order of frames across queues, so each
    /// port keeps one receive thread that feeds the queues in the port's order. Receive threads
    /// per queue would let a queue run ahead of another on a replay faster than real time.
    pub orders_across_queues: bool,
}

impl StageNeeds {
    /// Needs nothing beyond the frame's bytes.
    pub const NONE: StageNeeds = StageNeeds {
        reads_meta: false,
        writes_frame: false,
        reads_payload: false,
        reads_time: false,
        sets_send_time: false,
        frame_room: 0,
        keeps_flow_state: None,
        orders_across_queues: false,
    };
    /// Reads the metadata only.
    pub const META: StageNeeds = StageNeeds {
        reads_meta: true,
        ..StageNeeds::NONE
    };
}

/// How a stage runs on the GPU executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuImpl {
    /// One of the stages the kernel templates fuse (`parse`, `acl`, `count`).
    Fused,
    /// A stage of the kernel library: `function` (the stage ABI signature) in a header of
    /// gpu-kernels/cuda, listed in `pktwarp_kernels::codegen::LIBRARY_STAGES` with the same
    /// needs (a test holds the two equal; the kernel crate sits below this one).
    Library { function: &'static str },
    /// The stage's own CUDA source, given when it is built (a registered stage, or a built-in
    /// through the registry door, `ttl`, whose source names its library header).
    Own,
    /// No GPU implementation: the GPU executor refuses a pipeline with it.
    CpuOnly,
}

/// One stage, described.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageDescriptor {
    /// Config key, metric label, log and summary name.
    pub name: &'static str,
    /// How a config writes it (its key and options), as the stage table shows it.
    pub usage: &'static str,
    /// What it does, in one paragraph of the stage table.
    pub summary: &'static str,
    pub needs: StageNeeds,
    /// The drop reasons it may give.
    pub drop_reasons: &'static [DropReason],
    /// Its named counters (`pktwarp_stage_counter_total{stage, counter}`).
    pub counters: &'static [&'static str],
    pub gpu: GpuImpl,
    /// Whether SIGHUP reloads its tables (a change to its other options needs a restart).
    pub reloads: bool,
}

/// The config key under which a registered stage is named (`custom: { name: ..., ... }`): no
/// stage may be called that.
pub const CUSTOM_KEY: &str = "custom";

/// The built-in stages, in the order the stage table lists them: the only list of them.
pub const BUILTINS: &[&StageDescriptor] = &[
    &super::parse::DESCRIPTOR,
    &super::acl::DESCRIPTOR,
    &super::count::DESCRIPTOR,
    &super::conntrack::DESCRIPTOR,
    &super::flow_stats::DESCRIPTOR,
    &super::rate_limit::DESCRIPTOR,
    &super::inspect::DESCRIPTOR,
    &crate::rewrite::l2fwd::DESCRIPTOR,
    &crate::rewrite::vlan::DESCRIPTOR,
    &crate::rewrite::ttl::DESCRIPTOR,
    &crate::rewrite::dscp::DESCRIPTOR,
    &crate::rewrite::route::DESCRIPTOR,
    &crate::rewrite::tx_time::DESCRIPTOR,
    &crate::rewrite::respond::DESCRIPTOR,
];

/// The built-in stage called `name`.
pub fn builtin(name: &str) -> Option<&'static StageDescriptor> {
    BUILTINS.iter().copied().find(|d| d.name == name)
}

/// Whether `name` is taken by the built-ins (a stage name or the `custom` key) or by a stage
/// with a config key of its own (`stage::keyed`).
pub fn is_reserved(name: &str) -> bool {
    name == CUSTOM_KEY || builtin(name).is_some() || super::keyed::get(name).is_some()
}

/// The README's stage table: one row per built-in stage, then per stage with a config key of
/// its own this process registered (`stage::keyed`); `*` where it needs `parse` before it,
/// "(GPU too)" where it has a CUDA implementation.
pub fn markdown_table() -> String {
    let keyed = super::keyed::all();
    let all: Vec<&StageDescriptor> = BUILTINS
        .iter()
        .copied()
        .chain(keyed.iter().map(|k| k.descriptor()))
        .collect();
    markdown_rows(&all)
}

/// The stage table of the stages `ds`.
pub fn markdown_rows(ds: &[&StageDescriptor]) -> String {
    let mut out = String::from("| stage | what it does |\n| --- | --- |\n");
    for d in ds {
        let star = if d.needs.reads_meta { " *" } else { "" };
        let gpu = if d.gpu == GpuImpl::CpuOnly {
            ""
        } else {
            " (GPU too)"
        };
        out.push_str(&format!("| {}{star} | {}{gpu} |\n", d.usage, d.summary));
    }
    out
}

impl crate::stage::run::Pipeline {
    /// The first stage whose state spans queues ([`StageNeeds::orders_across_queues`]): with
    /// it, every port keeps one receive thread.
    pub fn orders_across_queues(&self) -> Option<&str> {
        self.stages.iter().find_map(|s| {
            let needs = match (s.descriptor(), s) {
                (Some(d), _) => d.needs,
                (None, crate::stage::run::Stage::Custom(c)) => c.needs(),
                (None, _) => return None,
            };
            needs.orders_across_queues.then(|| s.name())
        })
    }
}

impl crate::stage::run::Pipeline {
    /// The first stage's [`crate::stage::CustomStage::gpu_caution`]: why `auto` runs this
    /// pipeline on the CPU although it could run on the GPU.
    pub fn gpu_caution(&self) -> Option<String> {
        self.stages.iter().enumerate().find_map(|(i, s)| match s {
            crate::stage::run::Stage::Custom(c) => c
                .cpu()
                .gpu_caution()
                .map(|why| format!("stage `{}` (pipeline[{i}]): {why}", s.name())),
            _ => None,
        })
    }
}

/// Whether the descriptor `d` of a library stage (`GpuImpl::Library`) agrees with the kernel
/// crate's catalog (`pktwarp_kernels::codegen::LIBRARY_STAGES`, which sits below this crate):
/// listed under its name, with its device function and its needs.
pub fn check_library_descriptor(d: &StageDescriptor) -> Result<(), String> {
    use pktwarp_kernels::codegen::{LIBRARY_STAGES, READS_PAYLOAD};
    let GpuImpl::Library { function } = d.gpu else {
        return Err(format!("{}: not a library stage", d.name));
    };
    let l = LIBRARY_STAGES
        .iter()
        .find(|l| l.name == d.name)
        .ok_or_else(|| format!("{} is not in LIBRARY_STAGES", d.name))?;
    let same = [
        ("function", l.function == function),
        ("reads_meta", l.reads_meta == d.needs.reads_meta),
        ("writes_frame", l.writes_frame == d.needs.writes_frame),
        ("reads_time", l.reads_time == d.needs.reads_time),
        ("sets_send_time", l.sets_send_time == d.needs.sets_send_time),
        (
            "reads_payload",
            READS_PAYLOAD.contains(&function) == d.needs.reads_payload,
        ),
    ];
    match same.iter().find(|(_, ok)| !ok) {
        Some((what, _)) => Err(format!(
            "{}: its descriptor's {what} differs from LIBRARY_STAGES'",
            d.name
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_plain() {
        for (i, d) in BUILTINS.iter().enumerate() {
            assert!(
                super::super::registry::check_name(d.name).is_ok(),
                "{}: not a plain name",
                d.name
            );
            assert!(
                BUILTINS[..i].iter().all(|e| e.name != d.name),
                "{} twice",
                d.name
            );
            assert_ne!(d.name, CUSTOM_KEY);
            assert!(
                d.usage.contains(d.name),
                "{}: usage names another key",
                d.name
            );
            assert!(d.counters.len() <= super::super::registry::MAX_STAGE_COUNTERS);
        }
    }

    /// The kernel crate's catalog of library stages and the built-ins' descriptors agree: the
    /// same device functions, the same needs (a catalog stage no built-in describes is a keyed
    /// stage's, whose crate holds it to its descriptor; the root crate's test holds every
    /// catalog stage described).
    #[test]
    fn library_stages_match_the_kernel_catalog() {
        use pktwarp_kernels::codegen::LIBRARY_STAGES;
        let library: Vec<_> = BUILTINS
            .iter()
            .filter(|d| matches!(d.gpu, GpuImpl::Library { .. }))
            .collect();
        // A stage whose CUDA is in the catalog while the executor still refuses it (its
        // descriptor says CPU-only) is listed here.
        let pending: [&str; 0] = [];
        for name in pending {
            let d = BUILTINS.iter().find(|d| d.name == name).unwrap();
            assert!(
                matches!(d.gpu, GpuImpl::CpuOnly),
                "{name} runs on the GPU now"
            );
            assert!(LIBRARY_STAGES.iter().any(|l| l.name == name), "{name}");
        }
        assert!(library.len() + pending.len() <= LIBRARY_STAGES.len());
        assert!(library.len() >= 7, "{}", library.len());
        for d in library {
            check_library_descriptor(d).unwrap();
        }
        // A descriptor that says otherwise than its catalog entry is refused.
        let mut wrong = crate::rewrite::l2fwd::DESCRIPTOR;
        assert!(check_library_descriptor(&wrong).is_ok());
        wrong.needs.reads_meta = !wrong.needs.reads_meta;
        assert!(check_library_descriptor(&wrong).is_err());
    }

    #[test]
    fn fused_stages_are_the_templates_three() {
        let fused: Vec<_> = BUILTINS
            .iter()
            .filter(|d| d.gpu == GpuImpl::Fused)
            .map(|d| d.name)
            .collect();
        assert_eq!(fused, ["parse", "acl", "count"]);
        for n in fused {
            assert!(pktwarp_kernels::StageSpec::builtin(n).is_some(), "{n}");
        }
    }

    /// Every built-in is a key of the config's stage list, and the config's keys are the
    /// built-ins and `custom`: the serde enum cannot hold a stage the registry does not list.
    #[test]
    fn every_builtin_is_a_config_key() {
        use crate::stage::config::StageConfig;
        for d in BUILTINS {
            let yaml = format!("- {}\n", d.name);
            match serde_saphyr::from_str::<Vec<StageConfig>>(&yaml) {
                Ok(v) => assert_eq!(v[0].descriptor().map(|x| x.name), Some(d.name)),
                Err(e) => assert!(
                    !e.to_string().contains("unknown variant"),
                    "{}: {e}",
                    d.name
                ),
            }
        }
        let e = serde_saphyr::from_str::<Vec<StageConfig>>("- no_such_stage\n")
            .expect_err("not a stage")
            .without_snippet()
            .to_string();
        let listed = e
            .split("expected one of ")
            .nth(1)
            .expect("serde lists the keys");
        let mut keys: Vec<&str> = listed
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty())
            .take_while(|w| *w != "at")
            .collect();
        keys.sort_unstable();
        let mut want: Vec<&str> = BUILTINS.iter().map(|d| d.name).collect();
        want.push(CUSTOM_KEY);
        want.sort_unstable();
        assert_eq!(keys, want);
    }

    /// The README's stage table has the built-ins' rows, in order (`pktwarp stages --markdown`
    /// prints it whole, with the stages the binary registers under keys of their own: the root
    /// crate's test holds the two equal).
    #[test]
    fn the_readme_table_has_the_builtins() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
        let readme = std::fs::read_to_string(path).expect("README.md");
        let begin = "<!-- stage table: pktwarp stages --markdown -->\n";
        let start = readme
            .find(begin)
            .expect("the README marks its stage table")
            + begin.len();
        let end = readme[start..]
            .find("<!-- end of stage table -->")
            .expect("the README marks the end of its stage table");
        let builtins = markdown_rows(BUILTINS);
        assert!(
            readme[start..start + end].starts_with(&builtins),
            "README.md's stage table differs from the registry's: paste `pktwarp stages --markdown`"
        );
    }

    #[test]
    fn the_table_has_a_row_per_stage() {
        let t = markdown_rows(BUILTINS);
        assert_eq!(t.lines().count(), 2 + BUILTINS.len());
        assert!(t.contains("| `ttl` * | "));
        assert!(t.contains("| `count` | "));
    }
}
