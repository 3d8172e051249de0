//! `pktwarp stages`: the stages this binary knows, from the stage registry: the built-ins (their
//! config form, what they need, their drop reasons and counters, whether they run on the GPU)
//! and the stages the binary registered. `--markdown`: the README's stage table.

use pipeline::internal::stage::{GpuImpl, StageDescriptor, StageRegistry, BUILTINS};

#[derive(clap::Args)]
pub struct Args {
    /// Print the built-ins as the README's markdown table.
    #[arg(long)]
    pub markdown: bool,
}

pub fn run_with(args: Args, registry: &StageRegistry) -> anyhow::Result<i32> {
    let text = if args.markdown {
        pipeline::internal::stage::descriptor::markdown_table()
    } else {
        listing(registry)
    };
    super::to_stdout("the stage list", |out| out.write_all(text.as_bytes()))?;
    Ok(0)
}

/// One line per stage: name, GPU implementation, needs, drop reasons, counters.
fn listing(registry: &StageRegistry) -> String {
    let mut s = format!(
        "{:<10} {:<10} {:<36} {:<28} counters\n",
        "stage", "gpu", "needs", "drops"
    );
    for d in BUILTINS {
        s.push_str(&row(d));
    }
    // The stages under config keys of their own (the applications this binary ships).
    for k in pipeline::internal::stage::keyed::all() {
        s.push_str(&row(k.descriptor()));
    }
    for name in registry.names() {
        // Described as a built-in is: listed as one.
        if let Some(d) = registry.descriptor(name) {
            s.push_str(&row(d).replace("flow state", &flow_state(registry, name)));
            continue;
        }
        let needs = registry
            .needs(name)
            .map_or_else(|| "-".to_string(), |n| or_dash(needs_words(&n)));
        let needs = needs.replace("flow state", &flow_state(registry, name));
        s.push_str(&format!(
            "{name:<10} {:<10} {needs:<36} {:<28} (its own; registered by this binary)\n",
            "its own", "stage_drop"
        ));
    }
    s
}

fn row(d: &StageDescriptor) -> String {
    let gpu = match d.gpu {
        GpuImpl::Fused => "fused",
        GpuImpl::Library { .. } => "library",
        GpuImpl::Own => "its own",
        GpuImpl::CpuOnly => "none",
    };
    let drops: Vec<&str> = d.drop_reasons.iter().map(|r| r.name()).collect();
    format!(
        "{:<10} {gpu:<10} {:<36} {:<28} {}\n",
        d.name,
        or_dash(needs_words(&d.needs)),
        or_dash(drops),
        or_dash(d.counters.to_vec())
    )
}

/// A stage's needs in words, built-in or registered alike.
fn needs_words(n: &pipeline::stage::StageNeeds) -> Vec<&'static str> {
    [
        (n.reads_meta, "parse before it"),
        (n.writes_frame, "writes frame"),
        (n.reads_payload, "reads payload"),
        (n.reads_time, "reads time"),
        (n.sets_send_time, "sets send time"),
        (n.keeps_flow_state.is_some(), "flow state"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, w)| *w)
    .collect()
}

/// `flow state (N B)` for a registered stage that keeps per-flow state.
fn flow_state(registry: &StageRegistry, name: &str) -> String {
    match registry.needs(name).and_then(|n| n.keeps_flow_state) {
        Some(b) => format!("flow state ({b} B)"),
        None => "flow state".into(),
    }
}

fn or_dash(v: Vec<&str>) -> String {
    if v.is_empty() {
        "-".to_string()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline::stage::{BuiltStage, StageFactory, StageNeeds};
    use std::sync::Arc;

    struct Never;
    impl StageFactory for Never {
        fn build(&self, _: &serde_json::Value) -> anyhow::Result<BuiltStage> {
            anyhow::bail!("not built in this test")
        }
        fn needs(&self) -> StageNeeds {
            StageNeeds {
                writes_frame: true,
                ..StageNeeds::META
            }
        }
    }

    /// The README's stage table is this binary's: the built-ins, then the stages it registers
    /// under config keys of their own (`pktwarp stages --markdown` prints it).
    #[test]
    fn the_readme_table_is_the_binarys() {
        pktwarp_fronthaul::register();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
        let readme = std::fs::read_to_string(path).expect("README.md");
        let begin = "<!-- stage table: pktwarp stages --markdown -->\n";
        let start = readme
            .find(begin)
            .expect("the README marks its stage table")
            + begin.len();
        let end = readme[start..]
            .find("<!-- end of stage table -->")
            .expect("the README marks the end of its stage table");
        assert_eq!(
            &readme[start..start + end],
            pipeline::internal::stage::descriptor::markdown_table(),
            "README.md's stage table differs: paste `pktwarp stages --markdown`"
        );
        assert!(listing(&StageRegistry::default()).contains("\nfronthaul "));
    }

    /// Every stage of the kernel crate's catalog is described by a built-in or by a stage this
    /// binary registers under a key of its own, and agrees with its descriptor.
    #[test]
    fn every_library_stage_is_described() {
        pktwarp_fronthaul::register();
        let keyed = pipeline::internal::stage::keyed::all();
        let described: Vec<&StageDescriptor> = BUILTINS
            .iter()
            .copied()
            .chain(keyed.iter().map(|k| k.descriptor()))
            .collect();
        for l in pktwarp_kernels::codegen::LIBRARY_STAGES {
            let d = described
                .iter()
                .find(|d| d.name == l.name)
                .unwrap_or_else(|| panic!("{}: in LIBRARY_STAGES, described by no stage", l.name));
            if d.gpu != GpuImpl::CpuOnly {
                pipeline::internal::stage::descriptor::check_library_descriptor(d).unwrap();
            }
        }
    }

    /// A stage registered with a descriptor is listed as a built-in is (its GPU side, needs,
    /// drops and counters); one registered by factory alone with its factory's needs.
    #[test]
    fn registered_stages_are_listed_from_the_registry() {
        static D: StageDescriptor = StageDescriptor {
            name: "described",
            usage: "`custom: { name: described }`",
            summary: "a test stage",
            needs: StageNeeds::META,
            drop_reasons: &[pipeline::verdict::DropReason::StageDrop],
            counters: &["hits"],
            gpu: GpuImpl::Own,
            reloads: false,
        };
        let mut r = StageRegistry::default();
        r.register_stage(&D, Arc::new(Never)).unwrap();
        r.register("plain", Arc::new(Never)).unwrap();
        let text = listing(&r);
        let line = |n: &str| text.lines().find(|l| l.starts_with(n)).unwrap_or_default();
        let d = line("described ");
        assert!(
            d.contains("its own") && d.contains("parse before it"),
            "{text}"
        );
        assert!(d.contains("stage_drop") && d.ends_with("hits"), "{text}");
        let p = line("plain ");
        assert!(p.contains("parse before it, writes frame"), "{text}");
        assert!(p.contains("registered by this binary"), "{text}");
    }
}
