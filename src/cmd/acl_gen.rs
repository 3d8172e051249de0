//! `pktwarp acl-gen`: writes a seeded ClassBench-like IPv6 rule set and header trace
//! (`flow_rules::acl::gen6`) in the `dpdk-test-acl --ipv6` formats: `OUT/NAME` and
//! `OUT/NAME_trace`. Same arguments, same files.

use anyhow::Context;
use flow_rules::acl::gen6::{generate, GenSpec, Profile};
use std::path::PathBuf;

/// Most rules one set may have (rte_acl's build at this size already takes minutes).
const MAX_RULES: usize = 1_000_000;
/// Most trace headers.
const MAX_HEADERS: usize = 10_000_000;

#[derive(clap::Args)]
pub struct Args {
    /// Shape: `acl` (specific destinations, exact ports) or `fw` (wildcards, ranges).
    #[arg(long, default_value = "acl")]
    profile: Profile,
    /// Number of rules.
    #[arg(long)]
    rules: usize,
    /// Trace headers; default 10 per rule (ClassBench's default).
    #[arg(long)]
    headers: Option<usize>,
    /// Fraction of headers that match no rule.
    #[arg(long, default_value_t = 0.1)]
    miss: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output folder (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// File name of the rule set (the trace is NAME_trace); default `ipv6_<profile>_<rules>`.
    #[arg(long)]
    name: Option<String>,
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    if a.rules == 0 || a.rules > MAX_RULES {
        anyhow::bail!("--rules {}: must be 1..={MAX_RULES}", a.rules);
    }
    let headers = a.headers.unwrap_or(10 * a.rules);
    if headers == 0 || headers > MAX_HEADERS {
        anyhow::bail!("--headers {headers}: must be 1..={MAX_HEADERS}");
    }
    if !(0.0..=1.0).contains(&a.miss) {
        anyhow::bail!("--miss {}: must be within 0..=1", a.miss);
    }
    let g = generate(&GenSpec {
        profile: a.profile,
        rules: a.rules,
        headers,
        miss_frac: a.miss,
        seed: a.seed,
    });
    let name = a.name.unwrap_or_else(|| {
        let p = match a.profile {
            Profile::Acl => "acl",
            Profile::Fw => "fw",
        };
        format!("ipv6_{p}_{}", a.rules)
    });
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let rp = a.out.join(&name);
    let tp = a.out.join(format!("{name}_trace"));
    std::fs::write(&rp, &g.rules).with_context(|| format!("writing {}", rp.display()))?;
    std::fs::write(&tp, &g.trace).with_context(|| format!("writing {}", tp.display()))?;
    super::to_stdout("the result", |w| {
        writeln!(
            w,
            "{}: {} rules; {}: {headers} headers, {} made to match nothing",
            rp.display(),
            a.rules,
            tp.display(),
            g.misses
        )
    })?;
    Ok(0)
}
