//! `pktwarp stages`: the stages this binary knows, from the stage registry: the built-ins (their
//! config form, what they need, their drop reasons and counters, whether they run on the GPU)
//! and the stages the binary registered. `--markdown`: the README's stage table.

use pipeline::stage::{GpuImpl, StageDescriptor, StageRegistry, BUILTINS};

#[derive(clap::Args)]
pub struct Args {
    /// Print the built-ins as the README's markdown table.
    #[arg(long)]
    pub markdown: bool,
}

pub fn run_with(args: Args, registry: &StageRegistry) -> anyhow::Result<i32> {
    let text = if args.markdown {
        pipeline::stage::descriptor::markdown_table()
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
    for name in registry.names() {
        let needs = registry
            .get(name)
            .map_or_else(|| "-".to_string(), |f| or_dash(needs_words(&f.needs())));
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
    match registry.get(name).and_then(|f| f.needs().keeps_flow_state) {
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
